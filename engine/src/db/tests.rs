//! Unit tests of the database handle. Larger randomized and crash tests live in
//! `engine/tests/`.

use super::*;
use crate::Error;
use crate::Options;

fn tiny() -> Options {
    Options::default()
        .write_buffer_size(4096)
        .block_size(128)
        .block_restart_interval(2)
}

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

#[test]
fn put_get_delete_and_reopen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    assert_eq!(db.get(b"missing")?, None);
    db.put(b"k", b"v")?;
    db.put(b"", b"empty key")?;
    db.put(b"empty value", b"")?;
    db.delete(b"k")?;
    db.put(b"k2", b"v2")?;
    assert_eq!(db.get(b"k")?, None);
    assert_eq!(db.get(b"")?.as_deref(), Some(&b"empty key"[..]));
    assert_eq!(db.get(b"empty value")?.as_deref(), Some(&b""[..]));
    db.close()?;
    let db = Db::open(dir.path(), Options::default())?;
    assert_eq!(db.get(b"k")?, None);
    assert_eq!(db.get(b"k2")?.as_deref(), Some(&b"v2"[..]));
    assert_eq!(db.get(b"")?.as_deref(), Some(&b"empty key"[..]));
    assert_eq!(db.get(b"empty value")?.as_deref(), Some(&b""[..]));
    Ok(())
}

#[test]
fn second_open_of_a_locked_directory_fails_with_locked() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    match Db::open(dir.path(), Options::default()) {
        Err(Error::Locked { path }) => assert!(path.ends_with("LOCK")),
        other => panic!("expected Locked, got {other:?}"),
    }
    db.close()?;
    // Released on close.
    Db::open(dir.path(), Options::default())?.close()?;
    Ok(())
}

#[test]
fn oversize_key_or_value_is_refused_and_db_stays_usable() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default().max_value_size(1000))?;
    let big_key = vec![b'k'; crate::MAX_KEY_SIZE + 1];
    let err = db
        .put(&big_key, b"v")
        .err()
        .ok_or("oversize key accepted")?;
    assert!(
        matches!(err, Error::InvalidArgument(ref m) if m.contains("65536")),
        "{err}"
    );
    let err = db
        .put(b"k", &[0; 1001])
        .err()
        .ok_or("oversize value accepted")?;
    assert!(
        matches!(err, Error::InvalidArgument(ref m) if m.contains("max_value_size")),
        "{err}"
    );
    // A batch with one bad entry writes nothing.
    let mut batch = WriteBatch::new();
    batch.put(b"good", b"1");
    batch.put(b"bad", &[0; 1001]);
    assert!(db.write(batch, &WriteOptions::default()).is_err());
    assert_eq!(db.get(b"good")?, None);
    db.put(&vec![b'k'; crate::MAX_KEY_SIZE], &[0; 1000])?;
    assert_eq!(
        db.get(&vec![b'k'; crate::MAX_KEY_SIZE])?.map(|v| v.len()),
        Some(1000)
    );
    Ok(())
}

/// A new database is not created inside another's directory (a mistyped `db/000004.wal`
/// used to become a nested database the outer one then failed to delete); one beside it is,
/// and the outer database opens as before.
#[test]
fn a_new_database_inside_a_database_directory_is_refused() -> Result<()> {
    let dir = tempfile::tempdir().expect("tempdir");
    let outer = dir.path().join("outer");
    Db::open(&outer, Options::default())?.close()?;
    let inner = outer.join("000004.wal");
    let r = Db::open(&inner, Options::default());
    assert!(
        matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("inside the database directory")),
        "{r:?}"
    );
    assert!(!inner.exists(), "nothing created");
    Db::open(dir.path().join("beside"), Options::default())?.close()?;
    Db::open(&outer, Options::default())?.close()?;
    Ok(())
}

#[test]
fn missing_directory_without_create_if_missing_is_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let r = Db::open(
        dir.path().join("nope"),
        Options::default().create_if_missing(false),
    );
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
    // A directory that exists but holds no database is refused too, and left as it was.
    std::fs::write(dir.path().join("readme"), b"data").expect("write");
    let r = Db::open(dir.path(), Options::default().create_if_missing(false));
    assert!(
        matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("no CURRENT")),
        "{r:?}"
    );
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("readme")]);
}

#[test]
fn closed_handle_refuses_operations() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    let clone = db.clone();
    db.close()?;
    assert!(matches!(clone.put(b"k", b"v"), Err(Error::Closed)));
    assert!(matches!(clone.get(b"k"), Err(Error::Closed)));
    Ok(())
}

#[test]
fn data_larger_than_the_write_buffer_lives_in_tables() -> TestResult {
    let dir = tempfile::tempdir()?;
    // Tables cut at 4 KiB: against the default 64 MiB every flush of a 4 KiB memtable would
    // be a small table, and the background merge of small tables joins them.
    let options = tiny().target_file_size(4096);
    let db = Db::open(dir.path(), options.clone())?;
    for i in 0..2000u32 {
        db.put(
            format!("key{i:05}").as_bytes(),
            format!("value{i}").as_bytes(),
        )?;
    }
    db.flush()?;
    let tables = std::fs::read_dir(dir.path())?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .count();
    assert!(tables > 5, "expected many tables, found {tables}");
    for i in (0..2000u32).step_by(7) {
        let v = db.get(format!("key{i:05}").as_bytes())?;
        assert_eq!(v.as_deref(), Some(format!("value{i}").as_bytes()));
    }
    let all: Vec<_> = db.iter(&ReadOptions::default()).collect::<Result<_>>()?;
    assert_eq!(all.len(), 2000);
    let rev: Vec<_> = db
        .iter(&ReadOptions::default())
        .rev()
        .collect::<Result<_>>()?;
    assert_eq!(rev.first(), all.last());
    db.check_integrity()?;
    db.close()?;
    let db = Db::open(dir.path(), options)?;
    assert_eq!(db.iter(&ReadOptions::default()).count(), 2000);
    Ok(())
}

#[test]
fn snapshot_reads_see_the_past() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), tiny())?;
    db.put(b"a", b"1")?;
    let snap = db.snapshot();
    db.put(b"a", b"2")?;
    db.delete(b"a")?;
    db.flush()?;
    assert_eq!(
        db.get_opt(&ReadOptions::at(&snap), b"a")?.as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(db.get(b"a")?, None);
    let at_snap: Vec<_> = db
        .range(&ReadOptions::at(&snap), &b"a"[..]..=&b"z"[..])
        .collect::<Result<_>>()?;
    assert_eq!(at_snap, vec![(Bytes::from("a"), Bytes::from("1"))]);
    Ok(())
}

#[test]
fn range_honours_bounds() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    for k in [&b"a"[..], b"b", b"c", b"d"] {
        db.put(k, k)?;
    }
    fn keys(r: impl Iterator<Item = Result<(Bytes, Bytes)>>) -> Result<Vec<Bytes>> {
        r.map(|kv| kv.map(|(k, _)| k)).collect()
    }
    let ro = ReadOptions::default();
    assert_eq!(keys(db.range(&ro, &b"b"[..]..&b"d"[..]))?, vec!["b", "c"]);
    assert_eq!(keys(db.range(&ro, &b"bb"[..]..))?, vec!["c", "d"]);
    assert_eq!(keys(db.range(&ro, ..=&b"b"[..]).rev())?, vec!["b", "a"]);
    Ok(())
}

#[test]
fn sequence_numbers_survive_clean_reopen_with_empty_wal() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"1")?;
    db.flush()?;
    let s1 = db.snapshot().seqno();
    db.close()?;
    let db = Db::open(dir.path(), Options::default())?;
    assert!(db.snapshot().seqno() >= s1);
    db.put(b"a", b"2")?;
    assert!(db.snapshot().seqno() > s1);
    assert_eq!(db.get(b"a")?.as_deref(), Some(&b"2"[..]));
    db.close()?;
    let db = Db::open(dir.path(), Options::default())?;
    assert_eq!(db.get(b"a")?.as_deref(), Some(&b"2"[..]));
    Ok(())
}

#[test]
fn counters_fold_merge_operands_across_flushes_and_reopen() -> TestResult {
    let dir = tempfile::tempdir()?;
    let opts = || tiny().merge_operator(Some(std::sync::Arc::new(crate::CounterAdd)));
    let db = Db::open(dir.path(), opts())?;
    db.merge(b"read:ACGT", b"1")?;
    db.merge(b"read:ACGT", b"2")?;
    db.flush()?;
    db.merge(b"read:ACGT", b"4")?;
    assert_eq!(db.get(b"read:ACGT")?.as_deref(), Some(&b"7"[..]));
    db.put(b"read:ACGT", b"100")?;
    db.merge(b"read:ACGT", b"-1")?;
    assert_eq!(db.get(b"read:ACGT")?.as_deref(), Some(&b"99"[..]));
    db.delete(b"read:ACGT")?;
    db.merge(b"read:ACGT", b"5")?;
    db.close()?;
    let db = Db::open(dir.path(), opts())?;
    assert_eq!(db.get(b"read:ACGT")?.as_deref(), Some(&b"5"[..]));
    let all: Vec<_> = db.iter(&ReadOptions::default()).collect::<Result<_>>()?;
    assert_eq!(all, vec![(Bytes::from("read:ACGT"), Bytes::from("5"))]);
    db.merge(b"bad", b"x")?;
    assert!(matches!(db.get(b"bad"), Err(Error::InvalidArgument(_))));
    Ok(())
}

#[test]
fn compaction_folds_a_hot_counter_into_one_entry() -> TestResult {
    let dir = tempfile::tempdir()?;
    let opts = tiny().merge_operator(Some(std::sync::Arc::new(crate::CounterAdd)));
    let db = Db::open(dir.path(), opts)?;
    db.put(b"hits", b"1000")?;
    for i in 0..20_000u32 {
        db.merge(b"hits", if i % 2 == 0 { b"2" } else { b"-1" })?;
    }
    // A snapshot in the middle of the operands keeps the stripe under it apart.
    let snap = db.snapshot();
    for _ in 0..5_000 {
        db.merge(b"hits", b"1")?;
    }
    db.compact_range(None, None)?;
    let at = ReadOptions::at(&snap);
    assert_eq!(db.get_opt(&at, b"hits")?.as_deref(), Some(&b"11000"[..]));
    assert_eq!(db.get(b"hits")?.as_deref(), Some(&b"16000"[..]));
    // One folded put for the snapshot's stripe, one operand above it.
    assert_eq!(db.stats().table_entries(), (2, 0));
    drop((at, snap));
    db.compact_range(None, None)?;
    assert_eq!(db.stats().table_entries(), (1, 0));
    assert_eq!(db.get(b"hits")?.as_deref(), Some(&b"16000"[..]));
    Ok(())
}

/// A merge operator that panics on the operand `P` (operators must not; this one does).
#[derive(Debug)]
struct PanicsOnP;

impl crate::MergeOperator for PanicsOnP {
    fn name(&self) -> &str {
        "panics-on-p"
    }

    fn full_merge(&self, _key: &[u8], base: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut out = base.unwrap_or_default().to_vec();
        for op in operands {
            assert!(*op != b"P", "operand P");
            out.extend_from_slice(op);
        }
        Some(out)
    }
}

/// Runs `f` on another thread and fails the test if it takes over 60 s (a stall).
fn within_a_minute<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(60))
        .expect("stalled")
}

/// A merge operator that panics in a compaction stalled every later write for good: in
/// `compact_range` automatic compactions stayed paused, in the background the compaction
/// thread died with its tables marked busy. Now `compact_range` resumes them as the panic
/// passes, and a background panic poisons the database (writes get an error, not a stall).
#[test]
fn a_merge_operator_panicking_in_a_compaction_stalls_no_write() -> TestResult {
    let dir = tempfile::tempdir()?;
    let opts = || {
        tiny()
            .merge_operator(Some(std::sync::Arc::new(PanicsOnP)))
            .level0_file_num_compaction_trigger(2)
    };
    let db = std::sync::Arc::new(Db::open(dir.path(), opts())?);
    db.put(b"k", b"base")?;
    db.merge(b"k", b"P")?;
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        db.compact_range(None, None)
    }));
    assert!(caught.is_err(), "compact_range did not panic");
    // Writes go on, and so do automatic compactions (no panicking operand is left in their
    // way: the key is overwritten first).
    db.put(b"k", b"fresh")?;
    let writer = std::sync::Arc::clone(&db);
    within_a_minute(move || put_range(&writer, 0, 20_000).map_err(|e| e.to_string()))?;
    assert_eq!(db.get(b"k")?.as_deref(), Some(&b"fresh"[..]));
    drop(db);
    // In the background: the database is poisoned, and writes are refused, not stalled.
    let dir = tempfile::tempdir()?;
    let db = std::sync::Arc::new(Db::open(dir.path(), opts())?);
    db.put(b"k", b"base")?;
    db.merge(b"k", b"P")?;
    db.flush()?;
    let writer = std::sync::Arc::clone(&db);
    let result = within_a_minute(move || {
        // Every table holds `k`, so level 0 compactions merge its operands.
        for i in 0..200_000u32 {
            let written = if i % 20 == 0 {
                writer.merge(b"k", b"y")
            } else {
                writer.put(format!("x{i:06}").as_bytes(), &[7u8; 64])
            };
            if let Err(e) = written {
                return Err(e.to_string());
            }
        }
        Ok(())
    });
    let err = result.expect_err("writes went on after the compaction panicked");
    assert!(err.contains("panicked"), "{err}");
    Ok(())
}

#[test]
fn compact_range_drops_versions_kept_for_released_snapshots() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), tiny())?;
    let mut snapshots = Vec::new();
    for round in 0..20u32 {
        for k in 0..50u32 {
            db.put(
                format!("k{k:03}").as_bytes(),
                format!("v{round}").as_bytes(),
            )?;
        }
        snapshots.push(db.snapshot());
    }
    db.compact_range(None, None)?;
    assert_eq!(db.stats().table_entries(), (1_000, 0));
    snapshots.clear();
    db.compact_range(None, None)?;
    assert_eq!(db.stats().table_entries(), (50, 0));
    // Every table is now at seqno 0: a second call rewrites nothing.
    let before = db.stats().table_bytes();
    db.compact_range(None, None)?;
    assert_eq!(db.stats().table_bytes(), before);
    assert_eq!(db.get(b"k007")?.as_deref(), Some(&b"v19"[..]));
    Ok(())
}

#[test]
fn merge_without_operator_is_an_invalid_argument_on_read() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.merge(b"k", b"1")?;
    assert!(matches!(db.get(b"k"), Err(Error::InvalidArgument(_))));
    Ok(())
}

#[test]
fn prefix_scans_handle_trailing_ff_bytes() -> TestResult {
    assert_eq!(prefix_successor(&[0x01, 0xff]), Some(vec![0x02]));
    assert_eq!(prefix_successor(&[0xff, 0xff]), None);
    assert_eq!(prefix_successor(b""), None);
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    for k in [
        &[0x01][..],
        &[0x01, 0xff],
        &[0x01, 0xff, 0x00],
        &[0x02],
        &[0xff],
        &[0xff, 0xff, 1],
    ] {
        db.put(k, b"v")?;
    }
    let keys = |p: &[u8]| -> Result<Vec<Vec<u8>>> {
        db.prefix(&ReadOptions::default(), p)
            .map(|kv| kv.map(|(k, _)| k.to_vec()))
            .collect()
    };
    assert_eq!(
        keys(&[0x01, 0xff])?,
        vec![vec![0x01, 0xff], vec![0x01, 0xff, 0x00]]
    );
    assert_eq!(keys(&[0xff, 0xff])?, vec![vec![0xff, 0xff, 1]]);
    assert_eq!(keys(&[0xff])?.len(), 2);
    let rev: Vec<_> = db
        .prefix(&ReadOptions::default(), &[0x01])
        .rev()
        .map(|kv| kv.map(|(k, _)| k.to_vec()))
        .collect::<Result<_>>()?;
    assert_eq!(
        rev,
        vec![vec![0x01, 0xff, 0x00], vec![0x01, 0xff], vec![0x01]]
    );
    Ok(())
}

#[test]
fn cursor_seeks_and_steps_both_ways() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), tiny())?;
    for i in 0..100u32 {
        db.put(format!("k{:03}", i * 2).as_bytes(), b"v")?;
    }
    db.flush()?;
    let mut c = db.cursor(&ReadOptions::default())?;
    c.seek(b"k011")?;
    assert_eq!(c.key(), b"k012");
    c.prev()?;
    assert_eq!(c.key(), b"k010");
    c.seek_for_prev(b"k011")?;
    assert_eq!(c.key(), b"k010");
    c.next()?;
    assert_eq!(c.key(), b"k012");
    c.seek_to_last()?;
    assert_eq!(c.key(), b"k198");
    c.next()?;
    assert!(!c.valid());
    Ok(())
}

/// Writes `n` keys of about 100 bytes each starting at `from`, one put each.
fn put_range(db: &Db, from: u32, n: u32) -> TestResult {
    for i in from..from + n {
        db.put(format!("key{i:08}").as_bytes(), &[b'v'; 90])?;
    }
    Ok(())
}

/// Waits (up to 10 s) until `done` holds for the database's statistics.
fn wait_for_stats(db: &Db, done: impl Fn(&crate::stats::DbStats) -> bool) -> TestResult {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !done(&db.stats()) {
        if std::time::Instant::now() > deadline {
            return Err(format!("timed out; stats {:?}", db.stats()).into());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(())
}

#[test]
fn min_write_buffer_number_to_merge_merges_memtables_into_one_level0_table() -> TestResult {
    let dir = tempfile::tempdir()?;
    let options = || {
        tiny()
            .min_write_buffer_number_to_merge(3)
            .max_write_buffer_number(6)
            .level0_file_num_compaction_trigger(20)
    };
    let db = Db::open(dir.path(), options())?;
    // A 4 KiB memtable holds about 25 of these entries (with the per-entry overhead): 60 puts
    // freeze 2 memtables, which wait for a third.
    put_range(&db, 0, 60)?;
    let stats = db.stats();
    assert!(stats.immutable_memtables >= 1, "{stats:?}");
    assert!(stats.immutable_memtables < 3, "{stats:?}");
    assert_eq!(stats.flushes, 0, "{stats:?}");
    // The third frozen memtable starts one flush of all three into one table.
    put_range(&db, 60, 40)?;
    wait_for_stats(&db, |s| s.flushes >= 1 && s.immutable_memtables < 3)?;
    let stats = db.stats();
    assert_eq!(stats.flushes, 1, "{stats:?}");
    assert_eq!(stats.levels[0].files, 1, "{stats:?}");
    // An explicit flush writes out whatever waits, however few.
    put_range(&db, 100, 30)?;
    db.flush()?;
    let stats = db.stats();
    assert_eq!(stats.immutable_memtables, 0, "{stats:?}");
    assert_eq!(stats.memtable_bytes, 0, "{stats:?}");
    // Overwrites spread over several memtables merge newest first.
    for round in 0..3u8 {
        for i in 0..30u32 {
            db.put(format!("key{i:08}").as_bytes(), &[b'a' + round; 90])?;
        }
    }
    db.flush()?;
    // Keys below 30 hold the last round's value, the others the first value.
    let check = |db: &Db, n: u32| -> TestResult {
        for i in 0..n {
            let want = if i < 30 { b'c' } else { b'v' };
            let got = db.get(format!("key{i:08}").as_bytes())?;
            assert_eq!(got.as_deref(), Some(&[want; 90][..]), "key {i}");
        }
        Ok(())
    };
    check(&db, 130)?;
    // Memtables still waiting at close are replayed from the WALs.
    put_range(&db, 130, 60)?;
    db.close()?;
    let db = Db::open(dir.path(), options())?;
    check(&db, 190)?;
    db.check_integrity()?;
    Ok(())
}

#[test]
fn memtables_waiting_to_merge_do_not_keep_the_oldest_wal_alive() -> TestResult {
    let dir = tempfile::tempdir()?;
    let options = tiny()
        .min_write_buffer_number_to_merge(4)
        .max_write_buffer_number(6)
        .max_total_wal_size(16 << 10);
    let db = Db::open(dir.path(), options)?;
    let other = db.keyspace("rare")?;
    assert_eq!(db.stats().flushes, 0);
    // One memtable of "rare" fills up and is frozen, then waits for three more that never
    // come.
    for i in 0..30u32 {
        other.put(format!("r{i:04}").as_bytes(), &[b'r'; 90])?;
    }
    for i in 0..10u32 {
        other.put(format!("s{i:04}").as_bytes(), &[b's'; 90])?;
    }
    // The default keyspace writes far past the WAL limit.
    put_range(&db, 0, 2000)?;
    let wal_bytes = || -> std::io::Result<u64> {
        let mut total = 0;
        for entry in std::fs::read_dir(dir.path())? {
            let entry = entry?;
            if entry.path().extension().is_some_and(|e| e == "wal") {
                // A WAL the background deletes between the listing and this is not counted.
                match entry.metadata() {
                    Ok(m) => total += m.len(),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(total)
    };
    // About 230 KiB was written; the WALs stay near the 16 KiB limit (plus the memtables
    // still in memory: 6 of 4 KiB each), as "rare"'s memtables are flushed for it.
    wait_for_stats(&db, |s| s.immutable_memtables < 6)?;
    let total = wal_bytes()?;
    assert!(total < 100 << 10, "WALs hold {total} bytes");
    assert_eq!(
        other.get(b"s0009")?.as_deref(),
        Some(&[b's'; 90][..]),
        "rare keyspace's data"
    );
    Ok(())
}

#[test]
fn multi_get_matches_get_across_many_tables_merges_and_errors() -> TestResult {
    let dir = tempfile::tempdir()?;
    // L0 compaction held off, so the lookups below see far more tables than a multi-get keeps
    // open at once (MULTI_GET_TABLES).
    let options = tiny()
        .level0_file_num_compaction_trigger(200)
        .level0_slowdown_writes_trigger(400)
        .level0_stop_writes_trigger(500)
        .merge_operator(Some(std::sync::Arc::new(crate::CounterAdd)));
    let db = Db::open(dir.path(), options)?;
    for i in 0..100u32 {
        db.put(format!("key{i:03}").as_bytes(), format!("v{i}").as_bytes())?;
        db.flush()?;
    }
    db.merge(b"count", b"2")?;
    db.flush()?;
    db.merge(b"count", b"3")?;
    db.delete(b"key007")?;
    let snap = db.snapshot();
    db.put(b"key050", b"after the snapshot")?;
    let mut keys: Vec<Vec<u8>> = (0..110u32)
        .rev()
        .map(|i| format!("key{i:03}").into_bytes())
        .collect();
    keys.push(b"count".to_vec());
    keys.push(Vec::new());
    for ro in [ReadOptions::default(), ReadOptions::at(&snap)] {
        let got = db.multi_get(&ro, &keys);
        assert_eq!(got.len(), keys.len());
        for (k, value) in keys.iter().zip(got) {
            assert_eq!(value?, db.get_opt(&ro, k)?, "key {k:?}");
        }
    }
    let got = db.multi_get(
        &ReadOptions::default(),
        &[&b"key050"[..], b"count", b"key007"],
    );
    let got: Vec<_> = got.into_iter().collect::<Result<_>>()?;
    assert_eq!(
        got,
        vec![
            Some(Bytes::from("after the snapshot")),
            Some(Bytes::from("5")),
            None
        ]
    );
    assert!(
        db.multi_get::<&[u8]>(&ReadOptions::default(), &[])
            .is_empty()
    );
    let clone = db.clone();
    db.close()?;
    let got = clone.multi_get(&ReadOptions::default(), &[b"key001", b"key002"]);
    assert!(got.iter().all(|r| matches!(r, Err(Error::Closed))));
    Ok(())
}

#[test]
fn scans_with_readahead_match_scans_without_and_limits_are_checked() -> TestResult {
    type Pairs = Vec<(bytes::Bytes, bytes::Bytes)>;
    let dir = tempfile::tempdir()?;
    let o = || tiny().write_buffer_size(64 << 10);
    {
        let db = Db::open(dir.path(), o())?;
        for i in 0..20_000u32 {
            db.put(
                format!("key{:06}", (i * 7919) % 20_000).as_bytes(),
                &i.to_le_bytes(),
            )?;
        }
        // Tables on level 0 and below it, each of many 128-byte blocks.
        db.flush()?;
        db.compact_range(None, Some(b"key1"))?;
        db.close()?;
    }
    let mut scans: Vec<(usize, Pairs, Pairs)> = Vec::new();
    for readahead in [0, 1, 4096, 256 << 10] {
        let db = Db::open(dir.path(), o().max_auto_readahead_size(readahead))?;
        for ro in [
            ReadOptions::default(),
            ReadOptions {
                fill_cache: Some(false),
                ..ReadOptions::default()
            },
            ReadOptions {
                verify_checksums: true,
                ..ReadOptions::default()
            },
        ] {
            let forward: Pairs = db.range(&ro, &b"key0005"[..]..).collect::<Result<_>>()?;
            let mut backward: Pairs = db
                .range(&ro, &b"key0005"[..]..)
                .rev()
                .collect::<Result<_>>()?;
            backward.reverse();
            scans.push((readahead, forward, backward));
        }
        db.close()?;
    }
    let (_, want, _) = &scans[0];
    assert_eq!(want.len(), 20_000 - 500, "keys from key000500 on");
    for (readahead, forward, backward) in &scans {
        assert_eq!(forward, want, "forward scan, readahead {readahead}");
        assert_eq!(backward, want, "reverse scan, readahead {readahead}");
    }
    for bad in [
        Options::default().max_auto_readahead_size(65 << 20),
        Options::default().compaction_readahead_size(65 << 20),
    ] {
        let dir = tempfile::tempdir()?;
        assert!(matches!(
            Db::open(dir.path(), bad),
            Err(Error::InvalidArgument(_))
        ));
    }
    Ok(())
}

/// A cursor opens the tables of deeper levels lazily, when it reaches them; the version it
/// was created on must keep those files from being deleted by a compaction meanwhile.
#[test]
fn a_cursor_reads_tables_that_a_later_compaction_replaced() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(
        dir.path(),
        tiny().write_buffer_size(16 << 10).target_file_size(8 << 10),
    )?;
    let key = |i: u32| format!("key{i:05}").into_bytes();
    for i in 0..4000u32 {
        db.put(&key(i), b"old")?;
    }
    db.flush()?;
    db.compact_range(None, None)?;
    let mut cursor = db.cursor(&ReadOptions::default())?;
    cursor.seek(&key(0))?;
    assert_eq!(cursor.value(), b"old");
    // Every table the cursor has not opened yet is rewritten and the old files deleted.
    for i in 0..4000u32 {
        db.put(&key(i), b"new")?;
    }
    db.flush()?;
    db.compact_range(None, None)?;
    db.compact_range(None, None)?;
    let mut seen = 1;
    cursor.next()?;
    while cursor.valid() {
        assert_eq!(
            cursor.value(),
            b"old",
            "at {:?}",
            String::from_utf8_lossy(cursor.key())
        );
        seen += 1;
        cursor.next()?;
    }
    assert_eq!(seen, 4000);
    cursor.seek_for_prev(&key(3999))?;
    assert_eq!(cursor.value(), b"old");
    Ok(())
}

/// The number of keys in each of the parts that `cuts` make of the whole key space.
fn keys_per_part(db: &Db, cuts: &[Bytes]) -> Vec<usize> {
    let mut bounds: Vec<Option<&[u8]>> = vec![None];
    bounds.extend(cuts.iter().map(|c| Some(&c[..])));
    bounds.push(None);
    bounds
        .windows(2)
        .map(|w| {
            let lower = w[0].map_or(std::ops::Bound::Unbounded, std::ops::Bound::Included);
            let upper = w[1].map_or(std::ops::Bound::Unbounded, std::ops::Bound::Excluded);
            db.range(&ReadOptions::default(), (lower, upper)).count()
        })
        .collect()
}

#[test]
fn split_keys_cut_a_range_into_parts_of_about_equal_bytes() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(
        dir.path(),
        tiny()
            .write_buffer_size(32 << 10)
            .target_file_size(16 << 10),
    )?;
    let key = |i: u32| format!("k{i:06}").into_bytes();
    for i in 0..6000u32 {
        db.put(&key(i), &[b'v'; 40])?;
    }
    // Everything in one level of many tables.
    db.compact_range(None, None)?;
    assert!(db.split_keys(.., 1).is_empty());
    for parts in [2, 3, 4, 8] {
        let cuts = db.split_keys(.., parts);
        assert_eq!(cuts.len(), parts - 1, "{parts} parts");
        assert!(cuts.windows(2).all(|w| w[0] < w[1]));
        // About equal parts: each holds between a half and twice its share of the keys.
        for n in keys_per_part(&db, &cuts) {
            let share = 6000 / parts;
            assert!(n > share / 2 && n < share * 2, "{n} keys of {share}");
        }
    }
    // Cuts lie strictly inside the range asked for.
    let (lo, hi) = (key(1000), key(4000));
    let cuts = db.split_keys(&lo[..]..&hi[..], 4);
    assert!(!cuts.is_empty());
    assert!(cuts.iter().all(|c| c[..] > lo[..] && c[..] < hi[..]));
    // A range within one table has nothing to cut.
    let (lo, hi) = (key(10), key(12));
    assert!(db.split_keys(&lo[..]..=&hi[..], 4).is_empty());
    Ok(())
}

#[test]
fn split_keys_cut_inside_tables_at_data_blocks() -> TestResult {
    let dir = tempfile::tempdir()?;
    // Written and compacted with 4 MiB tables, read with 1 MiB ones (`split_keys` cuts a level
    // holding at least one target_file_size).
    let opts = |target: u64| tiny().write_buffer_size(4 << 20).target_file_size(target);
    let db = Db::open(dir.path(), opts(4 << 20))?;
    let key = |i: u32| format!("k{i:06}").into_bytes();
    // Values that LZ4 cannot shrink, so table bytes follow key counts: about 1.5 MiB in one
    // flush, compacted into one last-level table. Tables' first keys give no cut at all; cuts
    // at data blocks make even parts.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let n = 18_000u32;
    for i in 0..n {
        let value: Vec<u8> = (0..8)
            .flat_map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_le_bytes()
            })
            .collect();
        db.put(&key(i), &value)?;
    }
    db.compact_range(None, None)?;
    db.close()?;
    let db = Db::open(dir.path(), opts(1 << 20))?;
    let files: usize = db.stats().levels.iter().map(|l| l.files).sum();
    assert_eq!(files, 1, "{:?}", db.stats().levels);
    for parts in [2u32, 3] {
        let cuts = db.split_keys(.., parts as usize);
        assert_eq!(cuts.len() as u32, parts - 1);
        for got in keys_per_part(&db, &cuts) {
            let got = got as u32;
            let share = n / parts;
            assert!(
                got > share * 9 / 10 && got < share * 11 / 10,
                "{got} keys of {share} in one of {parts} parts"
            );
        }
    }
    Ok(())
}

/// Writes WAL `number` in `dir` with one record per `(first seqno, keys)` batch.
fn write_wal(dir: &std::path::Path, number: u64, batches: &[(u64, &[&str])]) {
    let path = crate::filename::wal_path(dir, crate::types::FileNumber(number));
    let mut w = crate::wal::Writer::create(&*crate::fs::os(), &path).expect("wal");
    for (seqno, keys) in batches {
        let mut b = WriteBatch::new();
        for k in *keys {
            b.put(k.as_bytes(), b"v");
        }
        b.set_seqno(crate::types::SeqNo(*seqno));
        w.add_record(&b.into_data()).expect("record");
    }
    w.sync().expect("sync");
}

/// A closed, empty database in `dir`, and a WAL number above every file in it.
fn empty_db(dir: &std::path::Path) -> u64 {
    Db::open(dir, Options::default())
        .expect("open")
        .close()
        .expect("close");
    100
}

#[test]
fn wal_records_that_follow_each_other_replay() -> TestResult {
    let dir = tempfile::tempdir()?;
    let n = empty_db(dir.path());
    write_wal(dir.path(), n, &[(1, &["a", "b"]), (3, &["c"])]);
    write_wal(dir.path(), n + 1, &[(4, &["d"]), (5, &["e", "f"])]);
    let db = Db::open(dir.path(), Options::default())?;
    assert_eq!(db.iter(&ReadOptions::default()).count(), 6);
    Ok(())
}

#[test]
fn a_hole_between_wal_records_is_corruption_not_a_silent_gap() -> TestResult {
    // An older WAL cut short: its last records (seqnos 3 to 9) are gone, the newer WAL's are
    // there.
    let dir = tempfile::tempdir()?;
    let n = empty_db(dir.path());
    write_wal(dir.path(), n, &[(1, &["a", "b"])]);
    write_wal(dir.path(), n + 1, &[(10, &["j"])]);
    let err = Db::open(dir.path(), Options::default()).expect_err("a hole");
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("3 to 9 are missing"), "{err}");
    // The same hole from a WAL between two others that is missing altogether.
    let dir = tempfile::tempdir()?;
    let n = empty_db(dir.path());
    write_wal(dir.path(), n, &[(1, &["a"])]);
    write_wal(dir.path(), n + 2, &[(10, &["j"])]);
    let err = Db::open(dir.path(), Options::default()).expect_err("a hole");
    assert!(err.to_string().contains("2 to 9 are missing"), "{err}");
    // Point-in-time recovery stops before the hole instead.
    let db = Db::open(
        dir.path(),
        Options::default().wal_recovery_mode(crate::WalRecoveryMode::PointInTime),
    )?;
    assert_eq!(db.iter(&ReadOptions::default()).count(), 1);
    Ok(())
}

#[test]
fn a_record_with_a_valid_checksum_that_does_not_decode_is_corruption() -> TestResult {
    let dir = tempfile::tempdir()?;
    let n = empty_db(dir.path());
    write_wal(dir.path(), n, &[(1, &["a"])]);
    // A well-framed last record whose batch says 2 entries but holds 1.
    let mut b = WriteBatch::new();
    b.put(b"b", b"v");
    b.set_seqno(crate::types::SeqNo(2));
    let mut data = b.into_data();
    data[8] = 2;
    let path = crate::filename::wal_path(dir.path(), crate::types::FileNumber(n));
    let len = std::fs::metadata(&path)?.len();
    let mut w = crate::wal::Writer::open_append(&*crate::fs::os(), &path, len)?;
    w.add_record(&data)?;
    w.sync()?;
    let err = Db::open(dir.path(), Options::default()).expect_err("bad batch");
    assert!(
        err.is_corruption() && err.to_string().contains("valid checksum"),
        "{err}"
    );
    Ok(())
}

#[test]
fn a_wal_record_for_a_keyspace_never_created_is_corruption() -> TestResult {
    // Keyspace 1 exists and is dropped later (its records are skipped on replay); id 999 was
    // never assigned, so a record for it is damage or comes from another database.
    let dir = tempfile::tempdir()?;
    {
        let db = Db::open(dir.path(), Options::default())?;
        let ks = db.keyspace("reads")?;
        ks.put(b"k", b"v")?;
        drop(ks);
        db.drop_keyspace("reads")?;
        db.close()?;
    }
    let next = |dir: &std::path::Path| -> Result<u64> {
        let db = Db::open(dir, Options::default())?;
        let seqno = db.snapshot().seqno().get() + 1;
        db.close()?;
        Ok(seqno)
    };
    // Each WAL numbered above every file the opens before it made.
    let wal = |n: u64, ids: &[u32], seqno: u64| {
        let path = crate::filename::wal_path(dir.path(), crate::types::FileNumber(n));
        let mut w = crate::wal::Writer::create(&*crate::fs::os(), &path).expect("wal");
        let mut b = WriteBatch::new();
        b.put(b"a", b"1");
        for &id in ids {
            b.push_in(id, crate::types::ValueKind::Put, b"x", Some(b"y"));
        }
        b.set_seqno(crate::types::SeqNo(seqno));
        w.add_record(&b.into_data()).expect("record");
        w.sync().expect("sync");
    };
    wal(100, &[1], next(dir.path())?);
    let db = Db::open(dir.path(), Options::default())?;
    assert_eq!(db.get(b"a")?.as_deref(), Some(&b"1"[..]));
    db.close()?;
    wal(1000, &[999], next(dir.path())?);
    let err = Db::open(dir.path(), Options::default()).expect_err("unknown keyspace");
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("keyspace 999"), "{err}");
    Ok(())
}

/// A cut falling in the last data block of a table: that block's index key is a short
/// successor past the table's keys (`q` after keys `p...`), outside a range bounded by the
/// keys' prefix. It cuts at the next table's first key; before, no cut was made and a SQL
/// table's full scan ran on one thread (docs/sql.md, "Index builds by sort and ingest").
#[test]
fn split_keys_cut_in_a_tables_last_block_at_the_next_table() -> TestResult {
    let dir = tempfile::tempdir()?;
    // (`split_keys` cuts a level holding at least one target_file_size.)
    let opts = Options::default()
        .compression(false)
        .target_file_size(256 << 10);
    let db = Db::open(dir.path(), opts.clone())?;
    // Two tables of the same entries but one: half of their bytes lies inside the first
    // table's last data block.
    let mut files = Vec::new();
    for (name, keys) in [("a.sst", 0..4_000u32), ("b.sst", 4_000..7_999)] {
        let mut w = crate::TableWriter::create(&dir.path().join(name), &opts)?;
        for i in keys {
            w.put(format!("p{i:06}").as_bytes(), &[b'v'; 100])?;
        }
        files.push(w.finish()?.path);
    }
    db.ingest(&files)?;
    let range = (
        std::ops::Bound::Included(&b"p"[..]),
        std::ops::Bound::Excluded(&b"q"[..]),
    );
    let cuts = db.split_keys(range, 2);
    assert_eq!(cuts, vec![Bytes::from_static(b"p004000")]);
    assert_eq!(keys_per_part(&db, &cuts), vec![4_000, 3_999]);
    Ok(())
}

#[test]
fn writes_after_an_ingest_replay_across_its_sequence_number() -> TestResult {
    // An ingest takes a sequence number without a WAL record: the gap it leaves is below the
    // manifest's last sequence number, so it is not a hole.
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"1")?;
    let table = dir.path().join("in.sst");
    let mut w = crate::TableWriter::create(&table, &Options::default())?;
    w.put(b"m", b"2")?;
    let file = w.finish()?;
    db.ingest(&[file.path])?;
    db.put(b"z", b"3")?;
    // Crash without closing: the WAL holds "a" and "z" around the ingest's number.
    std::mem::forget(db);
    let copy = tempfile::tempdir()?;
    for entry in std::fs::read_dir(dir.path())? {
        let p = entry?.path();
        if p.is_file() && p.file_name().is_some_and(|n| n != "LOCK") {
            std::fs::copy(&p, copy.path().join(p.file_name().unwrap_or_default()))?;
        }
    }
    let db = Db::open(copy.path(), Options::default())?;
    assert_eq!(db.iter(&ReadOptions::default()).count(), 3);
    Ok(())
}

/// Flips the last byte of the live manifest of the closed database in `dir` (damage inside
/// its last record, as bit rot of an fsynced edit would leave).
/// Abandons `db` as a crash would (no close: nothing more is flushed or synced) and removes
/// the `LOCK` file its process would have released, so `dir` can be opened again. The
/// database must be idle (no flush or compaction running): its threads are leaked, not
/// stopped.
fn crash(db: Db, dir: &std::path::Path) -> TestResult {
    std::mem::forget(db);
    std::fs::remove_file(dir.join(crate::filename::LOCK))?;
    Ok(())
}

/// [`crash`] after a flush, without the flushed memtable's WAL: the flush deletes it only when
/// it gets the log lock at once and otherwise leaves it to the next memtable switch, so a test
/// of what happens once it is gone deletes it itself (every WAL but the newest).
fn crash_after_flush(db: Db, dir: &std::path::Path) -> TestResult {
    crash(db, dir)?;
    let mut wals: Vec<_> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wal"))
        .collect();
    wals.sort();
    wals.pop();
    for wal in wals {
        std::fs::remove_file(wal)?;
    }
    Ok(())
}

fn damage_last_manifest_record(dir: &std::path::Path) -> TestResult {
    let number = crate::version::manifest::read_current(&*crate::fs::os(), dir)?;
    let path = crate::filename::manifest_path(dir, number);
    let mut bytes = std::fs::read(&path)?;
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, bytes)?;
    Ok(())
}

fn table_names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| n.ends_with(".sst"))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

#[test]
fn a_lost_flush_edit_whose_wal_is_gone_fails_the_open_instead_of_losing_its_writes() -> TestResult {
    // The last manifest record is a flush's edit (acknowledged: its WAL was deleted), then
    // damaged; a later write sits in the next WAL. Dropping the edit as a torn tail would
    // lose "a" and then delete its table: replay sees that sequence number 1 is in no table
    // and no WAL.
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"1")?;
    db.flush()?;
    db.put(b"b", b"2")?;
    crash_after_flush(db, dir.path())?;
    let tables = table_names(dir.path());
    assert_eq!(tables.len(), 1);
    damage_last_manifest_record(dir.path())?;
    let err = Db::open(dir.path(), Options::default()).expect_err("a lost edit");
    assert!(err.is_corruption(), "{err}");
    assert!(
        err.to_string()
            .contains("1 to 1 are in no table and no WAL"),
        "{err}"
    );
    let err = Db::open(dir.path(), Options::default().read_only(true)).expect_err("read-only");
    assert!(err.is_corruption(), "{err}");
    // The open rewrote the manifest before its WAL check failed, so the damaged record is
    // gone: the table stays in `lost/`, where no later open deletes it (a tester showed that
    // moving it back let a point-in-time open, or one after the WALs were deleted by hand,
    // delete it as obsolete).
    let lost = dir.path().join(crate::filename::LOST_DIR);
    assert_eq!(table_names(&lost), tables);
    assert!(table_names(dir.path()).is_empty());
    let pit = Options::default().wal_recovery_mode(crate::WalRecoveryMode::PointInTime);
    let db = Db::open(dir.path(), pit)?;
    assert_eq!(db.get(b"a")?, None);
    db.close()?;
    assert_eq!(table_names(&lost), tables);
    Ok(())
}

#[test]
fn tables_a_damaged_last_manifest_record_may_have_added_are_kept_in_lost() -> TestResult {
    // The same lost edit with no write after it: nothing tells a crash mid-append from bit
    // rot, so the open goes on, but the table no record names is moved to `lost/`, not
    // deleted.
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"1")?;
    db.flush()?;
    crash_after_flush(db, dir.path())?;
    let tables = table_names(dir.path());
    assert_eq!(tables.len(), 1);
    let bytes = std::fs::read(dir.path().join(&tables[0]))?;
    damage_last_manifest_record(dir.path())?;
    // A read-only open (what `strata check` does) reports the damage and changes nothing.
    for _ in 0..2 {
        let ro = Db::open(dir.path(), Options::default().read_only(true))?;
        let (manifest, _) = ro.ignored_manifest_tail().ok_or("damage not reported")?;
        assert!(manifest.exists());
        ro.close()?;
    }
    let db = Db::open(dir.path(), Options::default())?;
    assert!(db.ignored_manifest_tail().is_some());
    assert_eq!(db.get(b"a")?, None);
    let lost = dir.path().join(crate::filename::LOST_DIR);
    assert_eq!(table_names(&lost), tables);
    assert!(table_names(dir.path()).is_empty());
    assert_eq!(std::fs::read(lost.join(&tables[0]))?, bytes);
    db.put(b"b", b"2")?;
    db.close()?;
    // A clean open leaves `lost/` alone.
    let db = Db::open(dir.path(), Options::default())?;
    assert_eq!(db.ignored_manifest_tail(), None);
    assert_eq!(db.get(b"b")?.as_deref(), Some(&b"2"[..]));
    assert_eq!(table_names(&lost), tables);
    Ok(())
}

#[test]
fn a_table_that_cannot_be_kept_in_lost_fails_the_open_before_anything_is_written() -> TestResult {
    // `lost` is a file, so the unnamed table cannot be moved there: the open fails with the
    // damaged record and the table untouched (before, the manifest was rewritten first, and
    // the next open deleted the table). Once `lost` is free the open keeps the table there,
    // and later tables do not reuse its number.
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"1")?;
    db.flush()?;
    crash_after_flush(db, dir.path())?;
    let tables = table_names(dir.path());
    damage_last_manifest_record(dir.path())?;
    let lost = dir.path().join(crate::filename::LOST_DIR);
    std::fs::write(&lost, b"in the way")?;
    let manifests = |dir: &std::path::Path| -> std::io::Result<Vec<(String, Vec<u8>)>> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(dir)? {
            let e = e?;
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("MANIFEST") || name == "CURRENT" {
                out.push((name, std::fs::read(e.path())?));
            }
        }
        out.sort();
        Ok(out)
    };
    let before = manifests(dir.path())?;
    for _ in 0..2 {
        let err = Db::open(dir.path(), Options::default()).expect_err("lost is a file");
        assert!(matches!(err, Error::Io { .. }), "{err}");
        assert_eq!(table_names(dir.path()), tables);
        assert_eq!(manifests(dir.path())?, before);
    }
    std::fs::remove_file(&lost)?;
    // A name already taken in `lost/` is not overwritten.
    std::fs::create_dir(&lost)?;
    std::fs::write(lost.join(&tables[0]), b"kept earlier")?;
    let db = Db::open(dir.path(), Options::default())?;
    assert_eq!(std::fs::read(lost.join(&tables[0]))?, b"kept earlier");
    assert!(lost.join(format!("{}.2", tables[0])).is_file());
    for i in 0..3u32 {
        db.put(format!("k{i}").as_bytes(), b"v")?;
        db.flush()?;
    }
    assert!(table_names(dir.path()).iter().all(|t| !tables.contains(t)));
    Ok(())
}

#[test]
fn a_write_checked_before_its_keyspace_was_dropped_does_not_read_as_missing() -> TestResult {
    // A write to "k" passes its checks, then "k" is dropped, then the write commits: its
    // sequence number is above the horizon the drop recorded, and its entries go to no
    // memtable. Once the default keyspace is flushed its WAL is deleted: committing it raised
    // the manifest's last sequence number over it, so the reopen finds no hole (a tester's
    // race with writer threads reproduced the false `Corruption` without this).
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"1")?;
    let k = db.keyspace("k")?;
    k.put(b"before", b"x")?;
    let mut batch = WriteBatch::new();
    batch.put_in(&k, b"late", b"x");
    let mut dropped = None;
    db.inner()
        .write_with_pause(batch, || dropped = Some(db.drop_keyspace("k")))?;
    dropped.ok_or("the pause did not run")??;
    drop(k);
    db.flush()?;
    db.put(b"b", b"2")?;
    db.close()?;
    let db = Db::open(dir.path(), Options::default())?;
    assert_eq!(db.get(b"a")?.as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"b")?.as_deref(), Some(&b"2"[..]));
    assert_eq!(db.list_keyspaces(), vec!["default".to_owned()]);
    Ok(())
}

#[test]
fn writes_of_a_dropped_keyspace_do_not_read_as_missing_records() -> TestResult {
    // Keyspace "k" writes sequence numbers the default keyspace never flushes; once "k" is
    // dropped and the default keyspace flushed, their WAL is deleted. The next WAL starts
    // above them: dropping recorded them in the manifest's last sequence number.
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"1")?;
    let k = db.keyspace("k")?;
    for i in 0..10u32 {
        k.put(format!("k{i}").as_bytes(), b"x")?;
    }
    drop(k);
    db.drop_keyspace("k")?;
    db.flush()?;
    db.put(b"b", b"2")?;
    crash(db, dir.path())?;
    for _ in 0..2 {
        let db = Db::open(dir.path(), Options::default())?;
        assert_eq!(db.get(b"a")?.as_deref(), Some(&b"1"[..]));
        assert_eq!(db.get(b"b")?.as_deref(), Some(&b"2"[..]));
        db.put(b"c", b"3")?;
        crash(db, dir.path())?;
    }
    Ok(())
}
