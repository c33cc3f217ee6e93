//! Errors, not lies (issue #8): `ENOSPC` and `EIO` injected with [`MemFs`] into WAL appends
//! and syncs, flushes, compactions and manifest writes. Each must reach the caller as an error
//! (or poison the database when durability is in doubt), leave every acknowledged write
//! readable, and after the fault is gone a reopen (with or without a power loss in between)
//! must recover every acknowledged write.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_engine::fs::{CrashOptions, EIO, EMFILE, ENOSPC, Fault, FaultOp, MemFs};
use strata_engine::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

const DB: &str = "/db";

fn options(fs: &MemFs) -> Options {
    Options::default()
        .write_buffer_size(4096)
        .block_size(128)
        .target_file_size(2048)
        .level0_file_num_compaction_trigger(20)
        .level0_slowdown_writes_trigger(40)
        .level0_stop_writes_trigger(50)
        // The tests resume by hand, at the moment they choose; one tests the automatic resume.
        .auto_resume(false)
        .file_system(Arc::new(fs.clone()))
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: usize, round: usize) -> Vec<u8> {
    format!("value-{i}-{round}-{}", "x".repeat(i % 50)).into_bytes()
}

/// Acknowledged writes and whether each was synced, and the failed writes, which may or may
/// not have reached the WAL.
#[derive(Default)]
struct Acked {
    values: BTreeMap<Vec<u8>, Vec<u8>>,
    synced: BTreeMap<Vec<u8>, Vec<u8>>,
    in_doubt: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Acked {
    fn write(&mut self, db: &Db, i: usize, round: usize, sync: bool) -> strata_engine::Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(&key(i), &value(i, round));
        let options = if sync {
            WriteOptions::synced()
        } else {
            WriteOptions::default()
        };
        if let Err(e) = db.write(batch, &options) {
            self.in_doubt.insert(key(i), value(i, round));
            return Err(e);
        }
        self.values.insert(key(i), value(i, round));
        if sync {
            // A synced write makes every earlier write durable too.
            self.synced.clone_from(&self.values);
        }
        Ok(())
    }

    fn fill(&mut self, db: &Db, round: usize, count: usize) {
        for i in 0..count {
            self.write(db, i, round, i % 10 == 9)
                .expect("write before any fault");
        }
    }
}

/// A database on `fs` holding `rounds` rounds of 60 keys, each round flushed into level 0.
fn flushed_rounds(fs: &MemFs, rounds: usize) -> (Db, Acked) {
    let db = Db::open(DB, options(fs)).expect("open");
    let mut acked = Acked::default();
    for round in 0..rounds {
        acked.fill(&db, round, 60);
        db.flush().expect("flush");
    }
    (db, acked)
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.iter(&ReadOptions::default())
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<strata_engine::Result<_>>()
        .expect("scan")
}

fn assert_readable(db: &Db, expected: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    for (k, v) in expected {
        let got = db
            .get(k)
            .unwrap_or_else(|e| panic!("{what}: get failed: {e}"));
        assert_eq!(
            got.as_deref(),
            Some(&v[..]),
            "{what}: {}",
            String::from_utf8_lossy(k)
        );
    }
}

/// Reopens after clearing the faults, without and then with a power loss, and checks.
fn reopen_and_check(fs: &MemFs, acked: &Acked, what: &str) {
    fs.clear_faults();
    let db = Db::open(DB, options(fs)).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
    let got = contents(&db);
    for k in got.keys().chain(acked.values.keys()) {
        let ok = got.get(k) == acked.values.get(k)
            || (got.contains_key(k) && got.get(k) == acked.in_doubt.get(k));
        assert!(
            ok,
            "{what}: after reopen, {} differs",
            String::from_utf8_lossy(k)
        );
    }
    drop(db);
    fs.crash(CrashOptions::default());
    let db = Db::open(DB, options(fs))
        .unwrap_or_else(|e| panic!("{what}: reopen after power loss: {e}"));
    let got = contents(&db);
    for (k, v) in &acked.synced {
        let ok =
            got.get(k) == Some(v) || (got.contains_key(k) && got.get(k) == acked.in_doubt.get(k));
        assert!(
            ok,
            "{what}: synced write of {} lost after power loss",
            String::from_utf8_lossy(k)
        );
    }
}

/// The files in the database directory whose names contain `part` (".wal", "MANIFEST-").
fn files_named(fs: &MemFs, part: &str) -> Vec<std::path::PathBuf> {
    strata_engine::fs::FileSystem::list_dir(fs, std::path::Path::new(DB))
        .expect("list")
        .into_iter()
        .filter(|e| e.path.to_string_lossy().contains(part))
        .map(|e| e.path)
        .collect()
}

fn is_io(e: &Error, errno: i32) -> bool {
    match e {
        Error::Io { source, .. } => source.raw_os_error() == Some(errno),
        _ => false,
    }
}

#[test]
fn wal_append_enospc_fails_the_write_and_loses_nothing_acknowledged() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).expect("open");
    let mut acked = Acked::default();
    acked.fill(&db, 0, 300);
    fs.inject(Fault::new(FaultOp::Append, ENOSPC).on_path(".wal").sticky());
    let err = acked.write(&db, 1, 1, false).expect_err("disk full");
    assert!(is_io(&err, ENOSPC), "the writer sees ENOSPC: {err}");
    // The WAL's tail is unknown now: later writes are refused, reads go on.
    let err = acked.write(&db, 2, 1, false).expect_err("poisoned");
    assert!(matches!(err, Error::Poisoned { .. }), "{err}");
    assert_readable(&db, &acked.values, "after ENOSPC");
    drop(db);
    reopen_and_check(&fs, &acked, "WAL ENOSPC");
}

/// Keys written to the keyspace "side" beside the default one, for the resume tests.
const SIDE: [(&[u8], &[u8]); 2] = [(b"s1", b"side one"), (b"s2", b"side two")];

/// A database of 300 acknowledged writes in the default keyspace (several flushes), one in
/// keyspace "side" and none in keyspace "idle", whose next WAL append failed with `ENOSPC`:
/// poisoned, resumably. The fault stays armed.
fn poisoned_by_a_full_wal(fs: &MemFs) -> (Db, Acked) {
    let db = Db::open(DB, options(fs)).expect("open");
    let side = db.keyspace("side").expect("keyspace");
    db.keyspace("idle").expect("keyspace");
    let mut acked = Acked::default();
    acked.fill(&db, 0, 300);
    side.put(SIDE[0].0, SIDE[0].1).expect("put");
    fs.inject(Fault::new(FaultOp::Append, ENOSPC).on_path(".wal").sticky());
    let err = acked.write(&db, 7, 1, false).expect_err("disk full");
    assert!(is_io(&err, ENOSPC), "{err}");
    assert!(db.is_resumable());
    (db, acked)
}

/// The side keyspace's contents after a reopen.
fn side_contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.keyspace("side")
        .expect("keyspace")
        .iter(&ReadOptions::default())
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<strata_engine::Result<_>>()
        .expect("scan")
}

/// After a WAL append fails for want of space, `Db::resume` (once there is space) flushes the
/// memtables, retires the WAL and takes writes again, in every keyspace; while space is still
/// short it fails and changes nothing, and after it every acknowledged write survives a
/// reopen and a power loss.
#[test]
fn resume_after_a_full_wal_takes_writes_again_and_loses_nothing() {
    let fs = MemFs::new();
    let (db, mut acked) = poisoned_by_a_full_wal(&fs);
    let err = acked.write(&db, 8, 1, false).expect_err("poisoned");
    assert!(matches!(err, Error::Poisoned { .. }), "{err}");
    // Still no space for the tables: the resume fails, and can be tried again.
    fs.inject(Fault::new(FaultOp::Append, ENOSPC).on_path(".sst").sticky());
    let err = db.resume().expect_err("no space for the flush");
    assert!(is_io(&err, ENOSPC), "{err}");
    assert!(db.is_resumable());
    assert!(matches!(
        acked.write(&db, 9, 1, false),
        Err(Error::Poisoned { .. })
    ));
    assert_readable(&db, &acked.values, "after a failed resume");
    fs.clear_faults();
    assert!(db.resume().expect("resume"), "resumed");
    assert!(!db.is_resumable());
    assert!(
        !db.resume().expect("nothing to resume"),
        "not poisoned any more"
    );
    // The WAL with the failed append is gone: one WAL is left, the new one.
    let wals = files_named(&fs, ".wal");
    assert_eq!(wals.len(), 1, "WALs left after the resume: {wals:?}");
    acked.fill(&db, 2, 100);
    let side = db.keyspace("side").expect("keyspace");
    side.put(SIDE[1].0, SIDE[1].1).expect("put after resume");
    db.flush().expect("flush");
    assert_readable(&db, &acked.values, "after resume");
    drop(side);
    drop(db);
    reopen_and_check(&fs, &acked, "resumed after WAL ENOSPC");
    let db = Db::open(DB, options(&fs)).expect("reopen");
    let side: Vec<_> = side_contents(&db).into_iter().collect();
    let expected: Vec<_> = SIDE.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
    assert_eq!(side, expected);
}

/// With [`Options::auto_resume`] (the default), a database whose WAL append failed for want
/// of space resumes by itself once there is space again, and loses nothing.
#[test]
fn a_full_wal_resumes_by_itself_once_space_is_back() {
    let fs = MemFs::new();
    let (db, mut acked) = poisoned_by_a_full_wal(&fs);
    drop(db);
    fs.clear_faults();
    let db = Db::open(DB, options(&fs).auto_resume(true)).expect("reopen");
    acked.fill(&db, 3, 50);
    // Everything fails now, the automatic resume too.
    fs.inject(Fault::new(FaultOp::Any, ENOSPC).sticky());
    let err = acked.write(&db, 3, 4, false).expect_err("disk full");
    assert!(is_io(&err, ENOSPC), "{err}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(db.is_resumable(), "resumed without space");
    let stopped = db.stats().writes_stopped.expect("writes are stopped");
    assert!(
        stopped.contains("takes writes again by itself"),
        "{stopped}"
    );
    fs.clear_faults();
    resumed_by_itself(&fs, db, &mut acked, 4, "automatic resume");
}

/// Waits (up to 30 s) for `db`'s automatic resume once space is back, then writes round
/// `round`, checks every acknowledged write, and again after a reopen.
fn resumed_by_itself(fs: &MemFs, db: Db, acked: &mut Acked, round: usize, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.is_resumable() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: not resumed 30 s after space came back"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    acked.fill(&db, round, 50);
    assert_readable(&db, &acked.values, &format!("{what}: after the resume"));
    drop(db);
    reopen_and_check(fs, acked, what);
}

/// While the file system reports the disk still full, the automatic resume does not try
/// (a try with nothing to write would succeed, and the next write fail again: a cycle of
/// error lines and WAL numbers); once it reports space, the resume runs.
#[test]
fn the_automatic_resume_waits_while_the_disk_reports_no_space() {
    let fs = MemFs::new();
    let mut acked = Acked::default();
    let db = Db::open(DB, options(&fs).auto_resume(true)).expect("open");
    acked.fill(&db, 0, 50);
    fs.inject(Fault::new(FaultOp::Any, ENOSPC).sticky());
    fs.set_available_space(Some(4096));
    let err = acked.write(&db, 0, 1, false).expect_err("disk full");
    assert!(is_io(&err, ENOSPC), "{err}");
    // Writes would go through now, but the disk says it is full: no attempt is made.
    fs.clear_faults();
    std::thread::sleep(std::time::Duration::from_millis(1200));
    // An attempt would have succeeded: the faults are gone.
    assert!(db.is_resumable(), "resumed on a disk reported full");
    fs.set_available_space(Some(1 << 30));
    resumed_by_itself(
        &fs,
        db,
        &mut acked,
        1,
        "automatic resume after the disk reported space",
    );
}

/// Cuts the power at each file-system call of a resume of the database `poisoned` leaves,
/// in turn, until a resume completes: each reopen must succeed (no torn tail left in a WAL
/// older than the newest, no manifest naming a missing table) and hold every acknowledged
/// write the resume had made durable, all of them once the resume returned, and no value
/// never written. Returns the database after the completed resume and the count of calls it
/// made.
fn resume_under_power_cuts(poisoned: impl Fn(&MemFs) -> (Db, Acked)) -> (Db, u64) {
    for step in 1..200 {
        let fs = MemFs::new();
        let (db, acked) = poisoned(&fs);
        fs.clear_faults();
        fs.cut_power_at(fs.calls() + step);
        let resumed = db.resume();
        let cut = fs.powered_off();
        fs.crash(CrashOptions::default());
        drop(db);
        let db = Db::open(DB, options(&fs))
            .unwrap_or_else(|e| panic!("reopen after a power loss at step {step}: {e}"));
        let got = contents(&db);
        let expect = if cut { &acked.synced } else { &acked.values };
        for (k, v) in expect {
            assert_eq!(
                got.get(k),
                Some(v),
                "step {step} (resume {resumed:?}): {} lost",
                String::from_utf8_lossy(k)
            );
        }
        for (k, v) in &got {
            assert!(
                acked.values.get(k) == Some(v) || acked.in_doubt.get(k) == Some(v),
                "step {step}: {} has a value never written",
                String::from_utf8_lossy(k)
            );
        }
        if !cut {
            assert!(resumed.expect("resume without a power loss"));
            return (db, step);
        }
    }
    panic!("the resume never finished within 200 calls");
}

/// A power loss at every step of a resume after a WAL append failed.
#[test]
fn a_power_loss_at_any_point_of_a_resume_loses_nothing_made_durable() {
    let (db, calls) = resume_under_power_cuts(poisoned_by_a_full_wal);
    assert_eq!(side_contents(&db).len(), 1);
    // The cuts fell on each of the resume's file-system calls before the last.
    assert!(calls > 10, "the resume made only {calls} calls");
}

#[test]
fn wal_sync_eio_fails_the_synced_write_and_poisons() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).expect("open");
    let mut acked = Acked::default();
    acked.fill(&db, 0, 200);
    fs.inject(Fault::new(FaultOp::Sync, EIO).on_path(".wal"));
    let err = acked.write(&db, 5, 1, true).expect_err("fsync fails");
    assert!(is_io(&err, EIO), "{err}");
    let err = acked
        .write(&db, 6, 1, true)
        .expect_err("poisoned after a failed fsync");
    assert!(matches!(err, Error::Poisoned { .. }), "{err}");
    assert_readable(&db, &acked.values, "after EIO");
    drop(db);
    reopen_and_check(&fs, &acked, "WAL fsync EIO");
}

/// A flush that finds the disk full wrote nothing and installed nothing, so it does not
/// poison the database: `Db::flush` returns the `ENOSPC`, writes go on until the memtables
/// are all in use (then the writer gets the `ENOSPC` instead of waiting for good), and once
/// space is back the flush is retried (at once by `Db::flush`, after a backoff in the
/// background) and writes go on.
#[test]
fn flush_enospc_is_returned_and_retried_without_poisoning() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs).max_write_buffer_number(3)).expect("open");
    let mut acked = Acked::default();
    acked.fill(&db, 0, 40);
    fs.inject(Fault::new(FaultOp::Append, ENOSPC).on_path(".sst").sticky());
    let err = db.flush().expect_err("the flush cannot write its table");
    assert!(is_io(&err, ENOSPC), "flush reports the failure: {err}");
    assert!(!db.is_resumable());
    // The failed table's partial file is gone: on a full disk it would hold the space.
    let tables = files_named(&fs, ".sst");
    assert!(
        tables.is_empty(),
        "tables left by the failed flush: {tables:?}"
    );
    assert_readable(&db, &acked.values, "after a failed flush");
    // Writes go on into the memtables until all are in use.
    let mut held = None;
    for i in 0..2_000 {
        if let Err(e) = acked.write(&db, i % 300, 1, false) {
            held = Some(e);
            break;
        }
    }
    let err = held.expect("a writer is held once every memtable is in use");
    assert!(
        is_io(&err, ENOSPC),
        "the held writer gets the ENOSPC: {err}"
    );
    assert_readable(&db, &acked.values, "while flushes wait");
    fs.clear_faults();
    db.flush().expect("the flush is retried once space is back");
    acked.fill(&db, 2, 300);
    assert_readable(&db, &acked.values, "after the retried flush");
    drop(db);
    reopen_and_check(&fs, &acked, "flush ENOSPC");
}

#[test]
fn compaction_enospc_is_returned_and_keeps_the_inputs() {
    let fs = MemFs::new();
    let (db, acked) = flushed_rounds(&fs, 4);
    fs.inject(Fault::new(FaultOp::Append, ENOSPC).on_path(".sst").sticky());
    let err = db
        .compact_range(None, None)
        .expect_err("no space for the outputs");
    assert!(
        is_io(&err, ENOSPC) || matches!(err, Error::Poisoned { .. }),
        "compaction reports the failure: {err}"
    );
    assert_readable(&db, &acked.values, "after a failed compaction");
    assert_eq!(contents(&db), acked.values);
    fs.clear_faults();
    drop(db);
    reopen_and_check(&fs, &acked, "compaction ENOSPC");
}

/// An automatic compaction that finds the disk full changes nothing, so it does not poison
/// the database: writes go on, a writer held at the level-0 stop trigger gets the `ENOSPC`
/// instead of waiting for good, and once space is back the retried compaction (after a
/// backoff of 1 s) lets writes through again.
#[test]
fn automatic_compaction_enospc_waits_and_retries_without_poisoning() {
    let fs = MemFs::new();
    let (db, mut acked) = flushed_rounds(&fs, 4);
    let l0 = db.stats().levels[0].files;
    assert!(l0 >= 4, "{l0} level-0 tables");
    db.close().expect("close");
    // The level-0 tables are at the stop trigger of the reopened database.
    fs.inject(Fault::new(FaultOp::Append, ENOSPC).on_path(".sst").sticky());
    let db = Db::open(
        DB,
        options(&fs)
            .level0_file_num_compaction_trigger(2)
            .level0_slowdown_writes_trigger(l0)
            .level0_stop_writes_trigger(l0),
    )
    .expect("reopen");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let err = db
        .put(b"late", b"write")
        .expect_err("a write passed the level-0 stop trigger");
    assert!(
        is_io(&err, ENOSPC),
        "the held writer gets the ENOSPC: {err}"
    );
    assert_readable(&db, &acked.values, "while compactions wait");
    assert_eq!(db.stats().levels[0].files, l0);
    fs.clear_faults();
    loop {
        match db.put(b"late", b"write") {
            Ok(()) => break,
            Err(e) => {
                assert!(is_io(&e, ENOSPC), "{e}");
                assert!(
                    std::time::Instant::now() < deadline,
                    "no retry after space came back"
                );
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
    }
    acked.values.insert(b"late".to_vec(), b"write".to_vec());
    assert!(db.stats().levels[0].files < l0);
    assert_readable(&db, &acked.values, "after the retried compaction");
    drop(db);
    reopen_and_check(&fs, &acked, "automatic compaction ENOSPC");
}

/// Out of file descriptors when a read opens a table: the table cache closes the cached
/// tables no one holds and tries once more; with none to close, the read gets `EMFILE` and
/// the next one works.
#[test]
fn a_table_open_out_of_descriptors_closes_unused_cached_tables_and_retries() {
    let fs = MemFs::new();
    let (db, mut acked) = flushed_rounds(&fs, 3);
    assert!(db.stats().levels[0].files >= 3);
    db.close().expect("close");
    let db = Db::open(DB, options(&fs)).expect("reopen");
    // Nothing is cached yet: the read fails with the EMFILE, and the next one works.
    fs.inject(Fault::new(FaultOp::Open, EMFILE).on_path(".sst"));
    let err = db
        .get(&key(5))
        .expect_err("no descriptor, nothing to close");
    assert!(is_io(&err, EMFILE), "{err}");
    assert_readable(&db, &acked.values, "after one EMFILE");
    let cached = db.stats().open_tables;
    assert!(cached >= 1, "{cached} tables cached");
    // The tables read are cached now; a new one (after a flush) fails to open once: the
    // cached ones are closed and the open retried, so the read succeeds.
    db.put(b"zzz", b"new table").expect("put");
    db.flush().expect("flush");
    fs.inject(Fault::new(FaultOp::Open, EMFILE).on_path(".sst"));
    assert_eq!(
        db.get(b"zzz").expect("retried").as_deref(),
        Some(&b"new table"[..])
    );
    assert_eq!(db.stats().open_tables, 1, "the unused tables were closed");
    acked.values.insert(b"zzz".to_vec(), b"new table".to_vec());
    assert_readable(&db, &acked.values, "after the retried open");
    db.put(b"zzz", b"still writable").expect("not poisoned");
}

#[test]
fn failed_manifest_append_poisons_and_no_later_edit_follows_it() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).expect("open");
    let mut acked = Acked::default();
    acked.fill(&db, 0, 100);
    // One failed append (not sticky): a database that carried on would append later edits
    // after the failed one.
    fs.inject(Fault::new(FaultOp::Append, ENOSPC).on_path("MANIFEST"));
    let err = db.flush().expect_err("the flush cannot record its table");
    assert!(
        is_io(&err, ENOSPC) || matches!(err, Error::Poisoned { .. }),
        "{err}"
    );
    assert!(
        matches!(db.flush(), Err(Error::Poisoned { .. })),
        "a later flush must not append to the manifest"
    );
    let err = acked
        .write(&db, 1, 1, true)
        .expect_err("writes are refused");
    assert!(matches!(err, Error::Poisoned { .. }), "{err}");
    assert_readable(&db, &acked.values, "after a failed manifest write");
    drop(db);
    reopen_and_check(&fs, &acked, "manifest ENOSPC");
}

/// A manifest append that fails for want of space poisons resumably: the resume writes the
/// state into a new manifest (the old one, with its doubtful tail, goes), then flushes and
/// starts a new WAL as after a WAL failure; writes go on, and a reopen and a power loss find
/// every acknowledged write. A power cut at each step of that resume loses nothing either.
#[test]
fn resume_after_a_full_manifest_writes_a_new_manifest_and_loses_nothing() {
    let poisoned = |fs: &MemFs| {
        let db = Db::open(DB, options(fs)).expect("open");
        let mut acked = Acked::default();
        acked.fill(&db, 0, 100);
        fs.inject(
            Fault::new(FaultOp::Append, ENOSPC)
                .on_path("MANIFEST")
                .sticky(),
        );
        let err = db.flush().expect_err("the flush cannot record its table");
        assert!(matches!(err, Error::Poisoned { .. }), "{err}");
        assert!(db.is_resumable(), "a full disk is resumable");
        (db, acked)
    };
    let fs = MemFs::new();
    let (db, mut acked) = poisoned(&fs);
    let manifests = |fs: &MemFs| files_named(fs, "MANIFEST-");
    let before = manifests(&fs);
    assert!(
        is_io(&db.resume().expect_err("still full"), ENOSPC),
        "the new manifest cannot be written either"
    );
    assert_eq!(manifests(&fs), before, "a failed new manifest is removed");
    fs.clear_faults();
    assert!(db.resume().expect("resume"));
    let after = manifests(&fs);
    assert_eq!(after.len(), 1, "{after:?}");
    assert_ne!(after, before, "a new manifest");
    acked.fill(&db, 1, 100);
    db.flush().expect("flush after the resume");
    assert_readable(&db, &acked.values, "after the resume");
    drop(db);
    reopen_and_check(&fs, &acked, "resumed after manifest ENOSPC");

    let (_, calls) = resume_under_power_cuts(poisoned);
    assert!(calls > 5, "the resume made only {calls} calls");
}

#[test]
fn enospc_while_creating_a_keyspace_is_an_error_and_changes_nothing() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).expect("open");
    let mut acked = Acked::default();
    acked.fill(&db, 0, 50);
    fs.inject(
        Fault::new(FaultOp::Any, ENOSPC)
            .on_path("MANIFEST")
            .sticky(),
    );
    assert!(db.keyspace("runs").is_err());
    assert!(db.is_resumable(), "a full disk is resumable");
    assert!(
        is_io(&db.resume().expect_err("still full"), ENOSPC),
        "no space for a new manifest either"
    );
    fs.clear_faults();
    // Once there is space, the resume writes a new manifest and the create succeeds.
    assert!(db.resume().expect("resume"));
    db.keyspace("runs")
        .expect("create after the resume")
        .put(b"k", b"v")
        .expect("put");
    drop(db);
    let db = Db::open(DB, options(&fs)).expect("reopen");
    assert_eq!(
        db.keyspace("runs")
            .expect("kept")
            .get(b"k")
            .expect("get")
            .as_deref(),
        Some(&b"v"[..])
    );
    drop(db);
    // A failed create and a reopen without a resume.
    let db = Db::open(DB, options(&fs)).expect("reopen");
    fs.inject(
        Fault::new(FaultOp::Any, ENOSPC)
            .on_path("MANIFEST")
            .sticky(),
    );
    assert!(db.keyspace("runs2").is_err());
    drop(db);
    fs.clear_faults();
    let db = Db::open(DB, options(&fs)).expect("reopen");
    // The failed create left at most a torn record: the keyspace either exists (empty) or not.
    assert!(
        db.list_keyspaces()
            .iter()
            .all(|n| n == "default" || n == "runs" || n == "runs2")
    );
    assert_eq!(contents(&db), acked.values);
}

#[test]
fn enospc_during_recovery_fails_the_open_and_a_later_open_succeeds() {
    let fs = MemFs::new();
    let db = Db::open(DB, options(&fs)).expect("open");
    let mut acked = Acked::default();
    acked.fill(&db, 0, 120);
    drop(db);
    // Recovery writes a level-0 table, a new WAL and a new manifest: fail each in turn.
    for part in [".sst", ".wal", "MANIFEST", "CURRENT"] {
        fs.inject(Fault::new(FaultOp::Any, ENOSPC).on_path(part).sticky());
        let err = Db::open(DB, options(&fs)).expect_err("recovery cannot write");
        assert!(
            is_io(&err, ENOSPC) || matches!(err, Error::Poisoned { .. }),
            "{part}: {err}"
        );
        fs.clear_faults();
    }
    reopen_and_check(&fs, &acked, "recovery ENOSPC");
}
