//! Tests of `Db::count`: its answers against a `BTreeMap` model for random bounds, at
//! snapshots, over settled, unsettled and ingested data, and which of its two paths it takes.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::AtomicBool;

use rand::Rng;
use rand::rngs::StdRng;

use crate::iterator::test_support::{base_seed, rng};
use crate::sstable::TableFormat;
use crate::{Db, Options, ReadOptions, TableWriter};

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;
type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn bound(r: &mut StdRng, keys: u32) -> Bound<Vec<u8>> {
    // Keys between the stored ones too (a trailing byte), so bounds fall in gaps.
    let mut k = key(r.random_range(0..keys + 2));
    if r.random_bool(0.3) {
        k.push(b'x');
    }
    match r.random_range(0..4) {
        0 => Bound::Unbounded,
        1 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

fn slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

fn model_count(model: &Model, lower: &Bound<Vec<u8>>, upper: &Bound<Vec<u8>>) -> u64 {
    let empty = match (lower, upper) {
        (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u)) => {
            l > u || (l == u && !matches!((lower, upper), (Bound::Included(_), Bound::Included(_))))
        }
        _ => false,
    };
    if empty {
        return 0;
    }
    model
        .range::<Vec<u8>, _>((lower.clone(), upper.clone()))
        .count() as u64
}

/// Whether `db.count` would take the table path for `(lower, upper)` now.
fn counts_from_tables(db: &Db, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> bool {
    let inner = db.inner();
    let (seqno, sv) = inner.read_view(&inner.default_ks, None);
    super::settled(&sv, &inner.table_cache, seqno, lower, upper)
        .expect("settled")
        .is_some()
}

/// Checks `count` for `rounds` random ranges against `model`, at `options`; returns how many
/// ranges the table path answered.
fn check_ranges(
    db: &Db,
    options: &ReadOptions,
    model: &Model,
    r: &mut StdRng,
    keys: u32,
    rounds: usize,
) -> Result<usize, Box<dyn std::error::Error>> {
    let mut from_tables = 0;
    for _ in 0..rounds {
        let (lower, upper) = (bound(r, keys), bound(r, keys));
        let expected = model_count(model, &lower, &upper);
        let got = db.count(options, (slice(&lower), slice(&upper)))?;
        assert_eq!(got, expected, "count of {lower:?}..{upper:?}");
        // Scans of a settled range read one level without merging: the same pairs.
        let range = (slice(&lower), slice(&upper));
        let forward: Vec<(Vec<u8>, Vec<u8>)> = db
            .range(options, range)
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()?;
        let want: Vec<(Vec<u8>, Vec<u8>)> = if expected == 0 {
            Vec::new()
        } else {
            model
                .range::<Vec<u8>, _>((lower.clone(), upper.clone()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect()
        };
        assert_eq!(forward, want, "scan of {lower:?}..{upper:?}");
        let mut backward: Vec<(Vec<u8>, Vec<u8>)> = db
            .range(options, range)
            .rev()
            .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_, _>>()?;
        backward.reverse();
        assert_eq!(backward, want, "reverse scan of {lower:?}..{upper:?}");
        // Both ends of one iterator, alternating, meet without repeating a pair.
        let mut it = db.range(options, range);
        let (mut front, mut back) = (Vec::new(), Vec::new());
        loop {
            let item = if (front.len() + back.len()) % 3 == 0 {
                it.next_back().map(|kv| kv.map(|kv| back.push(kv)))
            } else {
                it.next().map(|kv| kv.map(|kv| front.push(kv)))
            };
            match item {
                Some(r) => r?,
                None => break,
            }
        }
        assert_eq!(
            front.len() + back.len(),
            want.len(),
            "both ends of {lower:?}..{upper:?}"
        );
        if options.snapshot.is_none() && counts_from_tables(db, slice(&lower), slice(&upper)) {
            from_tables += 1;
        }
    }
    Ok(from_tables)
}

#[test]
fn counts_match_the_model_on_both_paths() -> TestResult {
    let mut r = rng(base_seed("counts_match_the_model_on_both_paths"));
    let dir = tempfile::tempdir()?;
    // Small blocks and tables: ranges start and end inside blocks, and span many blocks and
    // several tables of one level.
    let options = Options::default()
        .write_buffer_size(8 << 10)
        .block_size(256)
        .block_restart_interval(r.random_range(1..5))
        .target_file_size(4 << 10)
        .table_format(TableFormat::ALL[r.random_range(0..TableFormat::ALL.len())]);
    let db = Db::open(dir.path(), options)?;
    let keys = 2000;
    let mut model = Model::new();
    for i in 0..keys {
        if r.random_bool(0.7) {
            let v = vec![b'v'; r.random_range(0..40)];
            db.put(&key(i), &v)?;
            model.insert(key(i), v);
        }
    }
    // Overwrites and deletes, then settled into one level: one put per key.
    for _ in 0..500 {
        let k = key(r.random_range(0..keys));
        if r.random_bool(0.5) {
            db.delete(&k)?;
            model.remove(&k);
        } else {
            db.put(&k, b"again")?;
            model.insert(k, b"again".to_vec());
        }
    }
    db.flush()?;
    db.compact_range(None, None)?;
    assert!(counts_from_tables(&db, Bound::Unbounded, Bound::Unbounded));
    assert_eq!(db.count(&ReadOptions::default(), ..)?, model.len() as u64);
    let from_tables = check_ranges(&db, &ReadOptions::default(), &model, &mut r, keys, 300)?;
    assert_eq!(from_tables, 300, "settled data counts from the tables");

    // Writes in the memtable, and a snapshot from before them.
    let snapshot = db.snapshot();
    let before = model.clone();
    for _ in 0..200 {
        let k = key(r.random_range(0..keys));
        if r.random_bool(0.5) {
            db.delete(&k)?;
            model.remove(&k);
        } else {
            db.put(&k, b"new")?;
            model.insert(k, b"new".to_vec());
        }
    }
    assert!(!counts_from_tables(&db, Bound::Unbounded, Bound::Unbounded));
    check_ranges(&db, &ReadOptions::default(), &model, &mut r, keys, 200)?;
    check_ranges(&db, &ReadOptions::at(&snapshot), &before, &mut r, keys, 100)?;

    // Flushed but not compacted: tables in two levels (or tombstones) merge.
    db.flush()?;
    check_ranges(&db, &ReadOptions::default(), &model, &mut r, keys, 200)?;
    check_ranges(&db, &ReadOptions::at(&snapshot), &before, &mut r, keys, 100)?;

    // Settled again: the tables written while the snapshot lived may keep two versions of a
    // key (then the count merges); without it they hold one.
    db.compact_range(None, None)?;
    check_ranges(&db, &ReadOptions::at(&snapshot), &before, &mut r, keys, 100)?;
    drop(snapshot);
    db.compact_range(None, None)?;
    let from_tables = check_ranges(&db, &ReadOptions::default(), &model, &mut r, keys, 200)?;
    assert_eq!(from_tables, 200);

    // A stop flag already set: no answer.
    let stop = AtomicBool::new(true);
    assert_eq!(db.count_until(&ReadOptions::default(), .., &stop)?, None);
    stop.store(false, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(
        db.count_until(&ReadOptions::default(), .., &stop)?,
        Some(model.len() as u64)
    );
    Ok(())
}

#[test]
fn ingested_tables_count_from_their_entries_and_a_new_write_merges() -> TestResult {
    let dir = tempfile::tempdir()?;
    let options = Options::default().block_size(256);
    let db = Db::open(dir.path().join("db"), options.clone())?;
    let mut files = Vec::new();
    for part in 0..3u32 {
        let path = dir.path().join(format!("part{part}.sst"));
        let mut writer = TableWriter::create(&path, &options)?;
        for i in part * 1000..part * 1000 + 1000 {
            writer.put(&key(i), b"value")?;
        }
        writer.finish()?;
        files.push(path);
    }
    db.ingest(&files)?;
    let all = ReadOptions::default();
    let (lo, hi) = (key(500), key(2500));
    assert!(counts_from_tables(
        &db,
        Bound::Included(&lo),
        Bound::Excluded(&hi)
    ));
    assert_eq!(db.count(&all, &lo[..]..&hi[..])?, 2000);
    assert_eq!(db.count(&all, ..)?, 3000);
    assert_eq!(
        db.count(&all, (Bound::Excluded(&lo[..]), Bound::Included(&hi[..])))?,
        2000
    );

    // A delete in the memtable: counted by merging, and not counted twice after a flush.
    db.delete(&key(1000))?;
    assert!(!counts_from_tables(&db, Bound::Unbounded, Bound::Unbounded));
    assert_eq!(db.count(&all, &lo[..]..&hi[..])?, 1999);
    db.flush()?;
    assert_eq!(db.count(&all, &lo[..]..&hi[..])?, 1999);
    // Outside the deleted key's table, the count still reads one level's entries.
    let (a, b) = (key(2000), key(2999));
    assert!(counts_from_tables(
        &db,
        Bound::Included(&a),
        Bound::Included(&b)
    ));
    assert_eq!(db.count(&all, &a[..]..=&b[..])?, 1000);
    db.close()?;

    // After a reopen, the same.
    let db = Db::open(dir.path().join("db"), options)?;
    assert_eq!(db.count(&all, &lo[..]..&hi[..])?, 1999);
    assert_eq!(db.count(&all, &a[..]..=&b[..])?, 1000);
    Ok(())
}
