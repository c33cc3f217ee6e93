//! Damaged files at the database level: a flipped bit in a table makes the read that touches it
//! fail with a corruption error naming the file (never wrong data, never a panic); a torn WAL
//! tail is dropped on open; damage in the middle of a WAL fails the open unless the recovery mode
//! allows it.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::fs::OpenOptions;
use std::io::{Read, Seek, SeekFrom, Write};
use std::ops::Bound;
use std::path::{Path, PathBuf};

use strata_engine::{Db, Error, Options, ReadOptions, WalRecoveryMode, WriteBatch, WriteOptions};

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn flip_byte(path: &Path, offset: u64) {
    let mut f = OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open");
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(offset)).expect("seek");
    f.read_exact(&mut b).expect("read");
    b[0] ^= 0x10;
    f.seek(SeekFrom::Start(offset)).expect("seek");
    f.write_all(&b).expect("write");
}

fn no_compression() -> Options {
    Options::default().compression(false).block_size(1024)
}

#[test]
fn flipped_bit_in_a_data_block_is_a_corruption_error_naming_the_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), no_compression()).expect("open");
    for i in 0..2000u32 {
        db.put(
            format!("key{i:05}").as_bytes(),
            format!("value{i:05}").as_bytes(),
        )
        .expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
    let tables = files_with_ext(dir.path(), "sst");
    assert_eq!(tables.len(), 1);
    flip_byte(&tables[0], 100); // inside the first data block
    let db = Db::open(dir.path(), no_compression()).expect("open succeeds; damage is in data");
    let err = db
        .get(b"key00000")
        .expect_err("read of a damaged block must fail");
    assert!(err.is_corruption(), "{err}");
    assert!(
        err.to_string().contains(".sst"),
        "error names the file: {err}"
    );
    // Keys in other blocks still read fine.
    assert_eq!(
        db.get(b"key01999").expect("get").as_deref(),
        Some(&b"value01999"[..])
    );
    // A scan reports the error instead of skipping data (the table alone holds every key: the
    // scan walks it without a merge), in either direction, and then ends.
    let first = db.iter(&ReadOptions::default()).next().expect("one item");
    assert!(first.is_err());
    let backward: Vec<_> = db.iter(&ReadOptions::default()).rev().collect();
    let (last, good) = backward.split_last().expect("items");
    assert!(
        last.is_err(),
        "the damaged first block ends the reverse scan"
    );
    assert!(good.len() > 1000 && good.iter().all(Result::is_ok));
    let mut range = db.range(
        &ReadOptions::default(),
        (Bound::<&[u8]>::Unbounded, Bound::Unbounded),
    );
    assert!(range.next().expect("an item").is_err());
    assert!(
        range.next().is_none() && range.next_back().is_none(),
        "done after the error"
    );
    let err = db.check_integrity().expect_err("integrity check must fail");
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn flipped_bit_in_a_table_footer_fails_the_read_not_the_process() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), no_compression()).expect("open");
    db.put(b"a", b"1").expect("put");
    db.flush().expect("flush");
    db.close().expect("close");
    let table = &files_with_ext(dir.path(), "sst")[0];
    let len = std::fs::metadata(table).expect("meta").len();
    flip_byte(table, len - 20);
    match Db::open(dir.path(), no_compression()) {
        Ok(db) => {
            let err = db.get(b"a").expect_err("damaged footer");
            assert!(err.is_corruption(), "{err}");
        }
        Err(e) => assert!(e.is_corruption(), "{e}"),
    }
}

fn write_batches(dir: &Path, n: u32) {
    let db = Db::open(dir, Options::default()).expect("open");
    for i in 0..n {
        let mut b = WriteBatch::new();
        b.put(format!("k{i:04}").as_bytes(), &[b'v'; 100]);
        db.write(b, &WriteOptions::default()).expect("write");
    }
    // Simulate a crash: leave the WAL unflushed by forgetting the handle's close.
    std::mem::forget(db);
}

#[test]
fn torn_wal_tail_is_dropped_and_the_database_opens_with_a_prefix() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_batches(dir.path(), 50);
    let wal = files_with_ext(dir.path(), "wal").pop().expect("a wal");
    let len = std::fs::metadata(&wal).expect("meta").len();
    OpenOptions::new()
        .write(true)
        .open(&wal)
        .expect("open")
        .set_len(len - 30)
        .expect("truncate");
    // The LOCK is held by the forgotten handle's file descriptor in this process; release it by
    // opening in a child would be heavier, so copy the directory instead.
    let copy = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(dir.path()).expect("read_dir") {
        let p = entry.expect("entry").path();
        std::fs::copy(&p, copy.path().join(p.file_name().expect("name"))).expect("copy");
    }
    // A read-only open leaves the tail in place and says where it is (what `strata check`
    // notes); the writing open then drops it.
    let ro = Db::open(copy.path(), Options::default().read_only(true)).expect("read-only");
    let (tail_wal, offset) = ro.unreplayed_wal_tail().expect("the torn tail is reported");
    assert_eq!(tail_wal.file_name(), wal.file_name());
    assert!(offset > 0 && offset < len - 30, "{offset}");
    assert_eq!(ro.iter(&ReadOptions::default()).count(), 49);
    drop(ro);
    let db = Db::open(copy.path(), Options::default()).expect("torn tail tolerated");
    assert_eq!(db.unreplayed_wal_tail(), None);
    let keys: Vec<_> = db
        .iter(&ReadOptions::default())
        .map(|kv| kv.expect("item").0)
        .collect();
    assert_eq!(
        keys.len(),
        49,
        "the torn last batch is dropped, the rest kept"
    );
    assert_eq!(keys.last().map(|k| k.to_vec()), Some(b"k0048".to_vec()));
}

#[test]
fn damage_in_the_middle_of_the_wal_fails_the_open_unless_the_mode_allows_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_batches(dir.path(), 50);
    let wal = files_with_ext(dir.path(), "wal").pop().expect("a wal");
    let copy = |mode: WalRecoveryMode| {
        let c = tempfile::tempdir().expect("tempdir");
        for entry in std::fs::read_dir(dir.path()).expect("read_dir") {
            let p = entry.expect("entry").path();
            std::fs::copy(&p, c.path().join(p.file_name().expect("name"))).expect("copy");
        }
        let wal_copy = c.path().join(wal.file_name().expect("name"));
        flip_byte(&wal_copy, 500);
        let result = Db::open(c.path(), Options::default().wal_recovery_mode(mode));
        (c, result)
    };
    let (_c, r) = copy(WalRecoveryMode::TolerateCorruptedTail);
    match r {
        Err(Error::Corruption { file, offset, .. }) => {
            assert!(file.to_string_lossy().ends_with(".wal"));
            assert!(offset <= 500, "offset {offset}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    let (_c, r) = copy(WalRecoveryMode::AbsoluteConsistency);
    assert!(matches!(r, Err(Error::Corruption { .. })));
    let (_c, r) = copy(WalRecoveryMode::PointInTime);
    let db = r.expect("point in time opens");
    let n = db.iter(&ReadOptions::default()).count();
    assert!(n < 50, "stops before the damage: {n}");
    let (_c, r) = copy(WalRecoveryMode::SkipAnyCorruptedRecords);
    let db = r.expect("skip mode opens");
    let n = db.iter(&ReadOptions::default()).count();
    // The reader resynchronises at the next 32 KiB block (docs/format/wal.md), so the records
    // after the damage in the same block are skipped with it; those before it are kept.
    assert!((3..50).contains(&n), "keeps what precedes the damage: {n}");
}

#[test]
fn integrity_report_lists_every_damaged_block_and_a_missing_table_fails_the_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), no_compression()).expect("open");
    for round in 0..3u32 {
        for i in 0..500u32 {
            db.put(format!("r{round}-{i:04}").as_bytes(), &[b'x'; 20])
                .expect("put");
        }
        db.flush().expect("flush");
    }
    db.close().expect("close");
    let tables = files_with_ext(dir.path(), "sst");
    assert_eq!(tables.len(), 3);
    flip_byte(&tables[0], 50);
    // A second damaged data block of the same table is a problem of its own.
    flip_byte(&tables[0], 5_000);
    flip_byte(&tables[1], 70);
    let db = Db::open(dir.path(), no_compression()).expect("open");
    let problems = db.integrity_problems().expect("report");
    assert_eq!(problems.len(), 3, "{problems:?}");
    assert!(problems.iter().all(Error::is_corruption));
    db.close().expect("close");
    // A missing table fails the open itself, naming it (see the test below).
    std::fs::remove_file(&tables[2]).expect("remove");
    let err = Db::open(dir.path(), no_compression()).expect_err("a table is missing");
    assert!(
        err.is_corruption() && err.to_string().contains("is missing"),
        "{err}"
    );
}

#[test]
fn a_lost_last_manifest_edit_fails_the_open_and_deletes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), no_compression().write_buffer_size(16 << 10)).expect("open");
    for round in 0..4u32 {
        for i in 0..300u32 {
            db.put(
                format!("k{i:04}").as_bytes(),
                format!("v{round}-{i}").as_bytes(),
            )
            .expect("put");
        }
        db.flush().expect("flush");
    }
    let manifests = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("read_dir")
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"))
            })
            .collect();
        v.sort();
        v
    };
    let manifest = manifests(dir.path()).pop().expect("a manifest");
    let before_compaction = std::fs::metadata(&manifest).expect("meta").len();
    // The compaction's edit deletes the flushed tables and adds its output: the only copy.
    db.compact_range(None, None).expect("compact");
    db.close().expect("close");
    let tables: Vec<PathBuf> = files_with_ext(dir.path(), "sst");
    assert!(!tables.is_empty());
    // The edits after the flushes are lost (a damaged or torn last record is dropped).
    OpenOptions::new()
        .write(true)
        .open(&manifest)
        .expect("open")
        .set_len(before_compaction)
        .expect("truncate");
    let err = Db::open(dir.path(), no_compression()).expect_err("tables are missing");
    assert!(matches!(err, Error::Corruption { .. }), "{err}");
    assert!(err.to_string().contains("is missing"), "{err}");
    // Nothing was deleted or written: the compaction's output is still there.
    assert_eq!(files_with_ext(dir.path(), "sst"), tables);
    assert_eq!(manifests(dir.path()), vec![manifest]);
}

#[test]
fn tables_the_manifest_does_not_name_are_listed_and_a_writing_open_deletes_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), no_compression()).expect("open");
    db.put(b"k", b"v").expect("put");
    db.flush().expect("flush");
    assert_eq!(
        db.unreferenced_tables().expect("list"),
        Vec::<PathBuf>::new()
    );
    db.close().expect("close");
    // What a crash in the middle of a flush leaves: a table no manifest edit names.
    let orphan = dir.path().join("000999.sst");
    std::fs::write(&orphan, b"half a table").expect("write");
    std::fs::write(dir.path().join("notes.sst.bak"), b"not ours").expect("write");
    let read_only = Db::open(dir.path(), no_compression().read_only(true)).expect("open");
    assert_eq!(
        read_only.unreferenced_tables().expect("list"),
        std::slice::from_ref(&orphan)
    );
    assert!(read_only.integrity_problems().expect("report").is_empty());
    read_only.close().expect("close");
    let db = Db::open(dir.path(), no_compression()).expect("open");
    assert!(!orphan.exists());
    assert_eq!(
        db.unreferenced_tables().expect("list"),
        Vec::<PathBuf>::new()
    );
    assert_eq!(db.get(b"k").expect("get").as_deref(), Some(&b"v"[..]));
}

#[test]
fn a_stray_file_with_an_implausible_number_is_named_not_the_manifest() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), Options::default()).expect("open");
        db.put(b"a", b"1").expect("put");
        db.close().expect("close");
    }
    let stray = dir.path().join("4611686018427387904.wal");
    std::fs::write(&stray, b"").expect("stray file");
    for options in [Options::default(), Options::default().read_only(true)] {
        let Err(e) = Db::open(dir.path(), options) else {
            panic!("opened with a file numbered past the counter's range");
        };
        let message = e.to_string();
        assert!(matches!(e, Error::Corruption { .. }), "{message}");
        assert!(message.contains("4611686018427387904.wal"), "{message}");
        assert!(!message.contains("MANIFEST"), "{message}");
    }
    std::fs::remove_file(&stray).expect("remove the stray file");
    let db = Db::open(dir.path(), Options::default()).expect("open without it");
    assert_eq!(db.get(b"a").expect("get").as_deref(), Some(&b"1"[..]));
}

#[test]
fn a_current_that_cannot_be_looked_at_is_an_io_error_not_a_missing_database() {
    // A regular file where the directory should be: looking up CURRENT fails with ENOTDIR
    // (permission denied takes the same path, but root, who runs CI, is never denied).
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("not-a-directory");
    std::fs::write(&file, b"").expect("file");
    for options in [Options::default(), Options::default().read_only(true)] {
        let Err(e) = Db::open(&file, options) else {
            panic!("opened a regular file as a database");
        };
        let message = e.to_string();
        assert!(matches!(e, Error::Io { .. }), "{message}");
        assert!(message.contains("CURRENT"), "{message}");
        assert!(!message.contains("no database"), "{message}");
    }
}

/// Writes `key{i:05}` for `i` in `keys`, flushes, closes; returns the new table.
fn write_table(dir: &Path, keys: std::ops::Range<u32>) -> PathBuf {
    let before = files_with_ext(dir, "sst");
    let db = Db::open(dir, no_compression()).expect("open");
    for i in keys {
        db.put(format!("key{i:05}").as_bytes(), b"value")
            .expect("put");
    }
    db.flush().expect("flush");
    db.close().expect("close");
    files_with_ext(dir, "sst")
        .into_iter()
        .find(|t| !before.contains(t))
        .expect("a new table")
}

/// The message of a poisoned database after a compaction met a damaged table: it names the
/// table and says what to do, and does not claim the durable state is in doubt.
fn assert_corruption_poison(err: &Error, table: &Path) {
    let msg = err.to_string();
    assert!(matches!(err, Error::Poisoned { .. }), "{msg}");
    let name = table.file_name().expect("name").to_string_lossy();
    assert!(msg.contains(&*name), "names the table {name}: {msg}");
    assert!(msg.contains("strata check"), "{msg}");
    assert!(msg.contains("Nothing durable is in doubt"), "{msg}");
    assert!(!msg.contains("durable state is in doubt"), "{msg}");
    assert!(!msg.contains("disk is full"), "{msg}");
}

#[test]
fn a_manual_compaction_meeting_a_damaged_table_poisons_with_a_corruption_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let damaged = write_table(dir.path(), 0..2000);
    write_table(dir.path(), 1000..3000);
    flip_byte(&damaged, 100);
    let db = Db::open(dir.path(), no_compression()).expect("open");
    let err = db
        .compact_range(None, None)
        .expect_err("compaction reads the damage");
    assert!(err.is_corruption(), "{err}");
    let err = db.put(b"k", b"v").expect_err("writes stop");
    assert_corruption_poison(&err, &damaged);
    // Reads of undamaged blocks go on.
    assert!(db.get(b"key02999").expect("get").is_some());
}

#[test]
fn a_background_compaction_meeting_a_damaged_table_poisons_with_a_corruption_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let damaged = write_table(dir.path(), 0..2000);
    flip_byte(&damaged, 100);
    let o = no_compression()
        .level0_file_num_compaction_trigger(2)
        .level0_slowdown_writes_trigger(2)
        .level0_stop_writes_trigger(2);
    let db = Db::open(dir.path(), o).expect("open");
    for i in 1000..3000u32 {
        db.put(format!("key{i:05}").as_bytes(), b"value")
            .expect("put");
    }
    // The compaction of the two level-0 tables fails in the background, which can happen
    // before the flush returns (the flush then reports it); writes fail from then on.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let err = match db.flush() {
        Err(e) => e,
        Ok(()) => loop {
            match db.put(b"k", b"v") {
                Err(e) => break e,
                Ok(()) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Ok(()) => panic!("writes went on after the compaction met damage"),
            }
        },
    };
    assert_corruption_poison(&err, &damaged);
}

#[test]
fn a_torn_last_manifest_record_is_named_by_the_wal_hole_it_leaves() {
    let dir = tempfile::tempdir().expect("tempdir");
    // As `strata put` three times: each open flushes the WAL it replays (a manifest edit),
    // then writes one key to a new WAL.
    for key in ["a", "b", "c"] {
        let db = Db::open(dir.path(), Options::default()).expect("open");
        db.put(key.as_bytes(), b"v").expect("put");
        db.close().expect("close");
    }
    let manifest = files_with_ext(dir.path(), "")
        .into_iter()
        .chain(
            std::fs::read_dir(dir.path())
                .expect("dir")
                .map(|e| e.expect("e").path()),
        )
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"))
        })
        .expect("a manifest");
    let len = std::fs::metadata(&manifest).expect("meta").len();
    OpenOptions::new()
        .write(true)
        .open(&manifest)
        .expect("open")
        .set_len(len - 3)
        .expect("truncate");
    let name = manifest
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    let orphans: Vec<String> = files_with_ext(dir.path(), "sst")
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .collect();
    assert!(!orphans.is_empty());
    // The read-only open (what `strata check` does) and the writing open both name the
    // manifest, the damaged record's offset and the table it had added.
    for read_only in [true, false] {
        let err = Db::open(dir.path(), Options::default().read_only(read_only))
            .expect_err("a hole in the WALs");
        let msg = err.to_string();
        let Error::Corruption { file, offset, .. } = &err else {
            panic!("{msg}");
        };
        assert!(file.ends_with(&name), "names the manifest: {msg}");
        assert!(*offset > 0 && *offset < len, "{msg}");
        assert!(msg.contains("damaged last record"), "{msg}");
        assert!(
            msg.contains(orphans.last().expect("table")),
            "names the table: {msg}"
        );
        assert!(!msg.contains("deleted by hand"), "{msg}");
    }
    // The writing open kept the table in lost/ and rewrote the manifest without the record:
    // the next open's hole points there, not at a deleted WAL.
    assert!(
        dir.path()
            .join("lost")
            .join(orphans.last().expect("table"))
            .exists()
    );
    let err = Db::open(dir.path(), Options::default()).expect_err("still a hole");
    let msg = err.to_string();
    assert!(msg.contains("lost/"), "{msg}");
    assert!(!msg.contains("deleted by hand"), "{msg}");
}
