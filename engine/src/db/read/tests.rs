//! Tests of the lending range API (`DbRange::next_entry`, `DbRange::next_back_entry`) against
//! the owning iterator and a `BTreeMap` model, over memtables and tables.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::{Db, Options, ReadOptions};

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn bound(r: &mut StdRng) -> Bound<Vec<u8>> {
    let k = format!("k{:03}", r.random_range(0..120)).into_bytes();
    match r.random_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

#[test]
fn lent_pairs_match_the_owning_iterator_and_the_model() -> TestResult {
    let seed = std::env::var("STRATA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("base seed {seed} (replay with STRATA_TEST_SEED={seed})");
    let mut r = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir()?;
    let options = Options::default().write_buffer_size(4096).block_size(256);
    let db = Db::open(dir.path(), options)?;
    let mut model = BTreeMap::new();
    for round in 0..6 {
        for _ in 0..300 {
            let key = format!("k{:03}", r.random_range(0..100)).into_bytes();
            if r.random_bool(0.3) {
                db.delete(&key)?;
                model.remove(&key);
            } else {
                let value = vec![b'v'; r.random_range(0..40)];
                db.put(&key, &value)?;
                model.insert(key, value);
            }
        }
        if round % 2 == 0 {
            db.flush()?;
        }
        for case in 0..40 {
            let (lower, upper) = (bound(&mut r), bound(&mut r));
            let range = (as_slice(&lower), as_slice(&upper));
            let empty = matches!((&lower, &upper),
                (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u))
                    if l > u || (l == u && !matches!((&lower, &upper), (Bound::Included(_), Bound::Included(_)))));
            let want: Vec<(Vec<u8>, Vec<u8>)> = if empty {
                Vec::new()
            } else {
                model
                    .range::<Vec<u8>, _>((lower.clone(), upper.clone()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            };
            let owned: Vec<(Vec<u8>, Vec<u8>)> = db
                .range(&ReadOptions::default(), range)
                .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<crate::Result<_>>()?;
            let mut forward = Vec::new();
            let mut it = db.range(&ReadOptions::default(), range);
            while let Some((k, v)) = it.next_entry()? {
                forward.push((k.to_vec(), v.to_vec()));
            }
            let mut backward = Vec::new();
            let mut it = db.range(&ReadOptions::default(), range);
            while let Some((k, v)) = it.next_back_entry()? {
                backward.push((k.to_vec(), v.to_vec()));
            }
            backward.reverse();
            assert_eq!(owned, want, "seed {seed}, round {round}, case {case}");
            assert_eq!(forward, want, "seed {seed}, round {round}, case {case}");
            assert_eq!(backward, want, "seed {seed}, round {round}, case {case}");
        }
    }
    Ok(())
}

#[test]
fn lent_pairs_follow_the_snapshot() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"1")?;
    let snapshot = db.snapshot();
    db.put(b"a", b"2")?;
    db.put(b"b", b"3")?;
    let mut it = db.iter(&ReadOptions::at(&snapshot));
    assert_eq!(it.next_entry()?, Some((&b"a"[..], &b"1"[..])));
    assert_eq!(it.next_entry()?, None);
    Ok(())
}

/// A database whose 300 keys sit in one flushed table of small blocks (nothing in the
/// memtable, no compaction).
fn one_table(dir: &std::path::Path) -> Result<Db, Box<dyn std::error::Error>> {
    let db = Db::open(dir, Options::default().block_size(256))?;
    for i in 0..300 {
        db.put(format!("k{i:04}").as_bytes(), &[b'v'; 20])?;
    }
    db.flush()?;
    Ok(db)
}

/// Block cache (hits, misses) after scanning every key with `options`.
fn scan_counting(db: &Db, options: &ReadOptions) -> Result<(u64, u64), Box<dyn std::error::Error>> {
    let mut range = db.iter(options);
    let mut n = 0;
    while range.next_entry()?.is_some() {
        n += 1;
    }
    assert_eq!(n, 300);
    let s = db.stats();
    Ok((s.block_cache_hits, s.block_cache_misses))
}

#[test]
fn fill_cache_false_uses_cached_blocks_but_caches_none() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = one_table(dir.path())?;
    let no_fill = ReadOptions {
        fill_cache: Some(false),
        ..ReadOptions::default()
    };
    let s0 = db.stats();
    let (h0, m0) = (s0.block_cache_hits, s0.block_cache_misses);
    // Two scans without filling: every block is a miss both times, and nothing was cached.
    let (h1, m1) = scan_counting(&db, &no_fill)?;
    let (h2, m2) = scan_counting(&db, &no_fill)?;
    let blocks = m1 - m0;
    assert!(blocks > 10, "{blocks} blocks");
    assert_eq!((h1, h2), (h0, h0));
    assert_eq!(m2 - m1, blocks);
    // A filling scan caches them; the next scans, filling or not, hit every block.
    let (_, m3) = scan_counting(&db, &ReadOptions::default())?;
    assert_eq!(m3 - m2, blocks);
    let (h4, m4) = scan_counting(&db, &no_fill)?;
    let (h5, m5) = scan_counting(&db, &ReadOptions::default())?;
    assert_eq!((m4, m5), (m3, m3));
    assert_eq!(h5 - h4, blocks);
    assert!(h4 > h2);
    // Point lookups follow the same rule.
    let before = db.stats().block_cache_hits;
    assert!(db.get_opt(&no_fill, b"k0150")?.is_some());
    assert_eq!(db.stats().block_cache_hits, before + 1);
    Ok(())
}

#[test]
fn verify_checksums_rereads_cached_blocks_and_catches_damage() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = one_table(dir.path())?;
    // Cache every block, then damage the middle of the table file on disk.
    scan_counting(&db, &ReadOptions::default())?;
    let table = std::fs::read_dir(dir.path())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "sst"))
        .ok_or("no table file")?;
    crate::test_util::damage_data_block(&table)?;
    // Default reads trust the cached (good) blocks.
    scan_counting(&db, &ReadOptions::default())?;
    // Verifying reads go to the file and see the damage.
    let verify = ReadOptions {
        verify_checksums: true,
        ..ReadOptions::default()
    };
    let err = db
        .iter(&verify)
        .find_map(|item| item.err())
        .ok_or("a verifying scan read a damaged block without an error")?;
    assert!(err.is_corruption(), "{err}");
    let failed_gets = (0..300)
        .filter(|i| db.get_opt(&verify, format!("k{i:04}").as_bytes()).is_err())
        .count();
    assert!(failed_gets > 0);
    Ok(())
}

#[test]
fn databases_sharing_a_block_cache_read_their_own_blocks() -> TestResult {
    // Two fresh databases number their tables alike, so their first tables have the same file
    // number and block offsets; each must still read its own values through the shared cache.
    let cache = crate::BlockCache::new(1 << 20);
    let (d1, d2) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let open = |dir: &std::path::Path| {
        Db::open(
            dir,
            Options::default().block_cache(Some(Arc::clone(&cache))),
        )
    };
    let (a, b) = (open(d1.path())?, open(d2.path())?);
    for (db, v) in [(&a, b'a'), (&b, b'b')] {
        for i in 0..300 {
            db.put(format!("k{i:04}").as_bytes(), &[v; 20])?;
        }
        db.flush()?;
    }
    for _ in 0..2 {
        assert_eq!(a.get(b"k0150")?.as_deref(), Some(&[b'a'; 20][..]));
        assert_eq!(b.get(b"k0150")?.as_deref(), Some(&[b'b'; 20][..]));
    }
    // Each database counts its own lookups: one miss, then one hit.
    for db in [&a, &b] {
        let s = db.stats();
        assert_eq!((s.block_cache_hits, s.block_cache_misses), (1, 1));
    }
    assert!(cache.usage_bytes() > 0);
    // The cache outlives a database closed and reopened with it.
    drop(a);
    let a = open(d1.path())?;
    assert_eq!(a.get(b"k0299")?.as_deref(), Some(&[b'a'; 20][..]));
    Ok(())
}

#[test]
fn databases_sharing_a_table_cache_keep_their_tables_apart_within_one_capacity() -> TestResult {
    // Two databases of many tables each, numbered alike, sharing a cache of 6 open tables:
    // reads of both stay exact, and the tables held open never pass 6 in all.
    let cache = crate::SharedTableCache::new(6);
    let (d1, d2) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let open = |dir: &std::path::Path| {
        Db::open(
            dir,
            Options::default()
                .write_buffer_size(16 << 10)
                .target_file_size(1024)
                .table_cache(Some(Arc::clone(&cache))),
        )
    };
    let (a, b) = (open(d1.path())?, open(d2.path())?);
    for (db, v) in [(&a, b'a'), (&b, b'b')] {
        for i in 0..2000 {
            db.put(format!("k{i:04}").as_bytes(), &[v; 40])?;
        }
        db.flush()?;
        db.compact_range(None, None)?;
    }
    let tables = |db: &Db| db.stats().levels.iter().map(|l| l.files).sum::<usize>();
    assert!(
        tables(&a) > 20 && tables(&b) > 20,
        "{} {}",
        tables(&a),
        tables(&b)
    );
    for i in (0..2000).step_by(7) {
        let key = format!("k{i:04}");
        assert_eq!(a.get(key.as_bytes())?.as_deref(), Some(&[b'a'; 40][..]));
        assert_eq!(b.get(key.as_bytes())?.as_deref(), Some(&[b'b'; 40][..]));
        assert!(cache.len() <= 6, "{} tables open", cache.len());
    }
    assert_eq!(a.range(&ReadOptions::default(), ..).count(), 2000);
    let stats = a.stats();
    assert_eq!(
        (stats.open_tables, stats.open_tables_capacity),
        (cache.len() as u64, 6)
    );
    // A closed database's tables leave the shared cache with it.
    b.close()?;
    let held = cache.len();
    assert!(held > 0 && held <= 6);
    a.close()?;
    assert!(cache.is_empty(), "{} tables still open", cache.len());
    Ok(())
}

#[test]
fn a_snapshot_of_another_database_instance_is_refused() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"1")?;
    let old = db.snapshot();
    db.put(b"a", b"2")?;
    db.close()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"3")?;
    let stale = ReadOptions::at(&old);
    let refused = |r: crate::Result<()>| matches!(r, Err(crate::Error::InvalidArgument(_)));
    assert!(refused(db.get_opt(&stale, b"a").map(drop)));
    assert!(refused(db.cursor(&stale).map(drop)));
    assert!(refused(db.range(&stale, ..).next().transpose().map(drop)));
    assert!(refused(db.multi_get(&stale, &[b"a"]).remove(0).map(drop)));
    // Another database's snapshot too; this instance's own works, in every keyspace.
    let other_dir = tempfile::tempdir()?;
    let other = Db::open(other_dir.path(), Options::default())?;
    let foreign = other.snapshot();
    assert!(refused(
        db.get_opt(&ReadOptions::at(&foreign), b"a").map(drop)
    ));
    let own = db.snapshot();
    db.put(b"a", b"4")?;
    assert_eq!(
        db.get_opt(&ReadOptions::at(&own), b"a")?.as_deref(),
        Some(&b"3"[..])
    );
    let ks = db.keyspace("other")?;
    assert_eq!(ks.get_opt(&ReadOptions::at(&own), b"a")?, None);
    Ok(())
}

#[test]
fn a_table_file_swapped_for_another_is_an_error_not_missing_keys() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    for k in [b"k1", b"k2"] {
        db.put(k, b"v")?;
        db.flush()?;
    }
    db.close()?;
    let mut tables: Vec<_> = std::fs::read_dir(dir.path())?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<_>>()?;
    tables.retain(|p| p.extension().is_some_and(|e| e == "sst"));
    tables.sort();
    let [a, b] = &tables[..] else {
        return Err(format!("expected two tables, found {tables:?}").into());
    };
    // Same size (one 2-byte key each): only what the table holds tells them apart.
    assert_eq!(std::fs::metadata(a)?.len(), std::fs::metadata(b)?.len());
    let tmp = dir.path().join("swap");
    std::fs::rename(a, &tmp)?;
    std::fs::rename(b, a)?;
    std::fs::rename(&tmp, b)?;
    let db = Db::open(dir.path(), Options::default())?;
    for k in [b"k1", b"k2"] {
        match db.get(k) {
            Err(crate::Error::Corruption { reason, .. }) => {
                assert!(
                    reason.contains("not the table the manifest lists"),
                    "{reason}"
                );
            }
            other => return Err(format!("expected corruption, got {other:?}").into()),
        }
    }
    assert!(db.check_integrity().is_err());
    Ok(())
}

#[test]
fn ingested_tables_of_the_same_keys_swapped_between_databases_are_told_apart() -> TestResult {
    // Two databases, each ingesting a table of the same key with a same-length value: the
    // files agree in size, entry count, key range and (stored) sequence numbers, so only the
    // table id tells them apart.
    let dirs = [tempfile::tempdir()?, tempfile::tempdir()?];
    for (dir, value) in dirs.iter().zip([b"one", b"two"]) {
        let source = dir.path().join("load.sst");
        let mut w = crate::TableWriter::create(&source, &Options::default())?;
        w.put(b"key", value)?;
        w.finish()?;
        let db = Db::open(dir.path().join("db"), Options::default())?;
        db.ingest(&[source])?;
        db.close()?;
    }
    let table = |dir: &tempfile::TempDir| -> std::io::Result<std::path::PathBuf> {
        let mut found = std::fs::read_dir(dir.path().join("db"))?
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<Vec<_>>>()?;
        found.retain(|p| p.extension().is_some_and(|e| e == "sst"));
        Ok(found.remove(0))
    };
    let (first, second) = (table(&dirs[0])?, table(&dirs[1])?);
    assert_eq!(
        std::fs::metadata(&first)?.len(),
        std::fs::metadata(&second)?.len()
    );
    std::fs::copy(&second, &first)?;
    let db = Db::open(dirs[0].path().join("db"), Options::default())?;
    match db.get(b"key") {
        Err(crate::Error::Corruption { reason, .. }) => {
            assert!(reason.contains("table id"), "{reason}");
        }
        other => return Err(format!("expected corruption, got {other:?}").into()),
    }
    assert!(db.check_integrity().is_err());
    Ok(())
}

#[test]
fn stepping_or_reading_an_invalid_cursor_does_nothing() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"1")?;
    db.put(b"b", b"2")?;
    let mut c = db.cursor(&ReadOptions::default())?;
    // Never positioned.
    c.next()?;
    c.prev()?;
    assert!(!c.valid());
    assert_eq!((c.key(), c.value()), (&b""[..], &b""[..]));
    // Run off the end, then step back: still invalid until the next seek.
    c.seek(b"zzz")?;
    assert!(!c.valid());
    c.prev()?;
    assert!(!c.valid());
    assert!(c.key().is_empty());
    c.seek_for_prev(b"zzz")?;
    assert_eq!((c.key(), c.value()), (&b"b"[..], &b"2"[..]));
    Ok(())
}
