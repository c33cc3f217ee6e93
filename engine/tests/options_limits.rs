//! Option limits: every option value either works or is refused at open with
//! `InvalidArgument`; none makes a table unreadable, a write hang or the process abort.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::path::Path;
use std::time::Duration;

use strata_engine::options::{
    MAX_BLOOM_BITS_PER_KEY, MAX_SIZE_OPTION, MAX_THREADS_OPTION, MAX_WRITE_BUFFER_SIZE,
};
use strata_engine::sstable::filter::{Filter, FilterBuilder};
use strata_engine::{Db, Error, Options, ReadOptions, TableFormat, TableSorter};

fn small() -> Options {
    Options::default()
        .write_buffer_size(64 << 10)
        .block_size(512)
        .target_file_size(16 << 10)
}

fn refused(o: Options, what: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    match Db::open(dir.path().join("db"), o) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains(what), "{what}: {m}"),
        Err(e) => panic!("{what}: expected InvalidArgument, got {e}"),
        Ok(_) => panic!("{what}: accepted"),
    }
    assert!(!dir.path().join("db").exists(), "{what}: nothing created");
}

/// Flushes, reads back, checks and reopens with default options.
fn round_trip(o: Options) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let db = Db::open(&path, o).expect("open");
    for i in 0..200u32 {
        db.put(format!("k{i:04}").as_bytes(), b"v").expect("put");
    }
    db.flush().expect("flush");
    assert!(db.get(b"k0007").expect("get").is_some());
    assert!(db.get(b"zzz").expect("get").is_none());
    assert_eq!(db.iter(&ReadOptions::default()).count(), 200);
    db.check_integrity().expect("check");
    drop(db);
    let db = Db::open(&path, Options::default()).expect("reopen with defaults");
    assert!(db.get(b"k0199").expect("get").is_some());
    db.check_integrity().expect("check");
}

#[test]
fn bloom_bits_per_key_up_to_the_limit_make_readable_tables() {
    assert_eq!(MAX_BLOOM_BITS_PER_KEY, 88);
    for format in [TableFormat::V1, TableFormat::V2] {
        round_trip(
            small()
                .bloom_bits_per_key(MAX_BLOOM_BITS_PER_KEY)
                .table_format(format),
        );
    }
}

#[test]
fn bloom_bits_per_key_above_the_limit_is_refused_at_open() {
    for bits in [MAX_BLOOM_BITS_PER_KEY + 1, 1000, u32::MAX] {
        refused(small().bloom_bits_per_key(bits), "bloom_bits_per_key");
    }
    // In a keyspace's options too.
    refused(
        small().with_keyspace_options("ks", small().bloom_bits_per_key(89)),
        "bloom_bits_per_key",
    );
}

/// Every accepted bits-per-key value, for any key count (a filter over few keys rounds its
/// size up the most; a version-2 partition is sized for its own count), gives filters the
/// reader accepts.
#[test]
fn every_accepted_bloom_size_decodes() {
    let decode = |bits: u32, format: TableFormat, n: u32| {
        let mut b = FilterBuilder::new(bits, format);
        for i in 0..n {
            b.add_key(format!("key{i}").as_bytes());
        }
        let blob = b.finish().expect("finish").expect("some");
        let f = Filter::decode(&blob, format, Path::new("t.sst"), 0)
            .unwrap_or_else(|e| panic!("{bits} bits, {n} keys, {format:?}: {e}"));
        assert!(f.may_contain(b"key0"));
    };
    for format in [TableFormat::V1, TableFormat::V2] {
        for bits in 1..=MAX_BLOOM_BITS_PER_KEY {
            for n in 1..=24 {
                decode(bits, format, n);
            }
        }
        // Several partitions, some with very few keys.
        for bits in [1, 10, MAX_BLOOM_BITS_PER_KEY - 1, MAX_BLOOM_BITS_PER_KEY] {
            for n in [16_385, 32_769] {
                decode(bits, format, n);
            }
        }
    }
}

#[test]
fn zero_pending_compaction_bytes_limits_disable_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = small()
        .hard_pending_compaction_bytes_limit(0)
        .soft_pending_compaction_bytes_limit(0);
    let db = Db::open(dir.path().join("db"), o).expect("open");
    // Would block for ever if 0 meant "stop at 0 pending bytes".
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        for i in 0..2000u32 {
            db.put(format!("k{i:05}").as_bytes(), &[7u8; 100])
                .expect("put");
        }
        tx.send(()).expect("send");
    });
    rx.recv_timeout(Duration::from_secs(60))
        .expect("writes finish with the limits disabled");
    writer.join().expect("join");

    // A soft limit with the hard one disabled is valid; a soft limit above a set hard one
    // is not.
    let dir = tempfile::tempdir().expect("tempdir");
    let o = small()
        .hard_pending_compaction_bytes_limit(0)
        .soft_pending_compaction_bytes_limit(1 << 20);
    let db = Db::open(dir.path().join("db"), o).expect("open");
    db.put(b"k", b"v").expect("put");
    drop(db);
    refused(
        small()
            .hard_pending_compaction_bytes_limit(1 << 20)
            .soft_pending_compaction_bytes_limit(2 << 20),
        "soft_pending_compaction_bytes_limit",
    );
}

#[test]
fn huge_sizes_are_refused_at_open_not_allocated() {
    refused(small().write_buffer_size(usize::MAX), "write_buffer_size");
    refused(
        small().write_buffer_size(MAX_WRITE_BUFFER_SIZE + 1),
        "write_buffer_size",
    );
    refused(small().block_cache_size(usize::MAX), "block_cache_size");
    refused(small().target_file_size(u64::MAX), "target_file_size");
    refused(
        small().max_bytes_for_level_base(MAX_SIZE_OPTION + 1),
        "max_bytes_for_level_base",
    );
}

#[test]
fn largest_accepted_sizes_open_without_allocating_them() {
    // 64 GiB memtables: the memtable bloom filter is capped (2% would be 1.3 GiB), and
    // nothing else is allocated up front.
    let o = small()
        .write_buffer_size(MAX_WRITE_BUFFER_SIZE)
        .memtable_bloom_size_ratio(0.25)
        .block_cache_size(usize::try_from(MAX_SIZE_OPTION).expect("64-bit"))
        .target_file_size(MAX_SIZE_OPTION)
        .max_bytes_for_level_base(MAX_SIZE_OPTION)
        .level_size_multiplier(u64::MAX);
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("db");
    let db = Db::open(&path, o).expect("open");
    for i in 0..100u32 {
        db.put(format!("k{i:04}").as_bytes(), b"v").expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(db.iter(&ReadOptions::default()).count(), 100);
}

#[test]
fn a_table_sorter_with_a_huge_memory_budget_allocates_only_what_it_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut sorter =
        TableSorter::new(&dir.path().join("sort"), &small(), usize::MAX).expect("sorter");
    for i in (0..1000u32).rev() {
        sorter
            .add(format!("k{i:04}").as_bytes(), b"v")
            .expect("add");
    }
    let sorted = sorter.finish().expect("finish");
    let db = Db::open(dir.path().join("db"), small()).expect("open");
    db.ingest(&sorted.paths()).expect("ingest");
    assert_eq!(db.iter(&ReadOptions::default()).count(), 1000);
}

#[test]
fn split_keys_clamps_huge_part_counts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let o = small().target_file_size(4 << 10).compression(false);
    let db = Db::open(dir.path().join("db"), o).expect("open");
    for i in 0..20_000u32 {
        db.put(format!("k{i:06}").as_bytes(), &[b'x'; 64])
            .expect("put");
    }
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    for parts in [usize::MAX, usize::MAX / 2, 1 << 40] {
        let cuts = db.split_keys(.., parts);
        assert!(cuts.windows(2).all(|w| w[0] < w[1]), "ascending");
        assert!(cuts.len() < 1 << 16);
    }
}

#[test]
fn extreme_counts_and_rates_work_or_are_refused() {
    // 256 threads each is the limit; more is refused.
    assert_eq!(MAX_THREADS_OPTION, 256);
    refused(small().max_background_jobs(257), "max_background_jobs");
    refused(small().max_subcompactions(257), "max_subcompactions");
    let cases: Vec<(&str, Options)> = vec![
        (
            "max_background_jobs",
            small().max_background_jobs(usize::MAX),
        ),
        ("max_subcompactions", small().max_subcompactions(usize::MAX)),
        (
            "max_write_buffer_number",
            small().max_write_buffer_number(usize::MAX),
        ),
        ("max_open_files", small().max_open_files(usize::MAX)),
        (
            "level0 triggers",
            small()
                .level0_file_num_compaction_trigger(usize::MAX)
                .level0_slowdown_writes_trigger(usize::MAX)
                .level0_stop_writes_trigger(usize::MAX),
        ),
        ("delayed_write_rate", small().delayed_write_rate(u64::MAX)),
        (
            "block_restart_interval",
            small().block_restart_interval(usize::MAX),
        ),
        ("max_total_wal_size", small().max_total_wal_size(u64::MAX)),
        (
            "pending limits",
            small()
                .soft_pending_compaction_bytes_limit(u64::MAX)
                .hard_pending_compaction_bytes_limit(u64::MAX),
        ),
    ];
    for (what, o) in cases {
        let dir = tempfile::tempdir().expect("tempdir");
        match Db::open(dir.path().join("db"), o) {
            Err(Error::InvalidArgument(m)) => {
                // One thread each: usize::MAX aborted the open on thread creation.
                assert!(
                    what == "max_background_jobs" || what == "max_subcompactions",
                    "{what}: refused: {m}"
                );
                assert!(m.contains(what), "{m}");
            }
            Err(e) => panic!("{what}: {e}"),
            Ok(db) => {
                for i in 0..3000u32 {
                    db.put(format!("k{i:05}").as_bytes(), &[1u8; 64])
                        .expect(what);
                }
                db.flush().expect(what);
                db.compact_range(None, None).expect(what);
                assert_eq!(db.iter(&ReadOptions::default()).count(), 3000, "{what}");
                db.close().expect(what);
            }
        }
    }
}
