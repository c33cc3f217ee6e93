//! Tests of a memtable budget shared through [`crate::WriteBufferManager`].

use std::sync::Arc;

use super::Db;
use crate::{Options, WriteBatch, WriteBufferManager};

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// Writes `batches` batches of 64 keys with 200-byte values under `prefix`, and after each
/// returns the most the manager counted.
fn fill(
    db: &Db,
    prefix: &str,
    batches: usize,
    manager: &WriteBufferManager,
) -> crate::Result<usize> {
    let mut most = 0;
    for b in 0..batches {
        let mut batch = WriteBatch::new();
        for i in 0..64 {
            batch.put(format!("{prefix}{b:05}-{i:02}").as_bytes(), &[b'v'; 200]);
        }
        db.write(batch, &crate::WriteOptions::default())?;
        most = most.max(manager.memory_usage());
    }
    Ok(most)
}

fn check(db: &Db, prefix: &str, batches: usize) -> TestResult {
    for b in (0..batches).step_by(7) {
        for i in [0, 31, 63] {
            let key = format!("{prefix}{b:05}-{i:02}");
            assert_eq!(
                db.get(key.as_bytes())?.as_deref(),
                Some(&[b'v'; 200][..]),
                "{key}"
            );
        }
    }
    Ok(())
}

#[test]
fn a_full_budget_flushes_memtables_waiting_to_be_merged() -> TestResult {
    let dir = tempfile::tempdir()?;
    let manager = WriteBufferManager::new(256 << 10);
    // Alone, this keyspace keeps up to 16 memtables of 64 KiB (1 MiB) and flushes 8 at once.
    let options = Options::default()
        .write_buffer_size(64 << 10)
        .min_write_buffer_number_to_merge(8)
        .max_write_buffer_number(16)
        .write_buffer_manager(Some(Arc::clone(&manager)));
    let db = Db::open(dir.path(), options)?;
    // About 4 MiB of memtable entries (key, value and overhead).
    let most = fill(&db, "k", 240, &manager)?;
    // The budget, one more active memtable and the last write group's slack.
    assert!(
        most <= (256 << 10) + (64 << 10) + (32 << 10),
        "counted {most} bytes"
    );
    let stats = db.stats();
    assert!(stats.flushes >= 4, "{} flushes", stats.flushes);
    assert!(
        stats.immutable_memtables < 8,
        "{} waiting",
        stats.immutable_memtables
    );
    check(&db, "k", 240)?;
    db.close()?;
    assert_eq!(
        manager.memory_usage(),
        0,
        "a closed database counts nothing"
    );
    let db = Db::open(dir.path(), Options::default())?;
    check(&db, "k", 240)?;
    Ok(())
}

#[test]
fn a_large_active_memtable_is_flushed_for_the_budget() -> TestResult {
    let dir = tempfile::tempdir()?;
    let manager = WriteBufferManager::new(512 << 10);
    // The default 64 MiB memtable would hold everything written here.
    let options = Options::default().write_buffer_manager(Some(Arc::clone(&manager)));
    let db = Db::open(dir.path(), options)?;
    let most = fill(&db, "k", 160, &manager)?;
    assert!(most <= (512 << 10) + (512 << 10), "counted {most} bytes");
    assert!(db.stats().flushes >= 2, "{} flushes", db.stats().flushes);
    check(&db, "k", 160)?;
    Ok(())
}

#[test]
fn databases_and_keyspaces_count_against_one_budget() -> TestResult {
    let dir = tempfile::tempdir()?;
    let manager = WriteBufferManager::new(64 << 20);
    let options = Options::default().write_buffer_manager(Some(Arc::clone(&manager)));
    let a = Db::open(dir.path().join("a"), options.clone())?;
    let b = Db::open(dir.path().join("b"), options)?;
    let runs = b.keyspace("runs")?;
    fill(&a, "a", 10, &manager)?;
    let after_a = manager.memory_usage();
    assert!(after_a >= 10 * 64 * 200, "{after_a}");
    fill(&b, "b", 10, &manager)?;
    runs.put(b"run42", b"1")?;
    let after_b = manager.memory_usage();
    assert!(after_b > 2 * after_a, "{after_b} against {after_a}");
    assert_eq!(manager.mutable_memory_usage(), after_b);
    // A flushed memtable is dropped, and no longer counted.
    a.flush()?;
    assert_eq!(manager.memory_usage(), after_b - after_a);
    // Memtables go with the last handle (a keyspace handle holds the database too).
    drop(runs);
    b.close()?;
    assert_eq!(manager.memory_usage(), 0);
    check(&a, "a", 10)?;
    Ok(())
}

#[test]
fn a_write_refused_for_a_failed_flush_goes_through_after_resume() -> TestResult {
    use crate::fs::{ENOSPC, Fault, FaultOp, MemFs};
    // The tables cannot be written (the WAL can): a writer held by the full budget gets the
    // flush's error instead of waiting, and the database is not poisoned.
    let fs = MemFs::new();
    let manager = WriteBufferManager::new(64 << 10);
    let options = Options::default()
        .file_system(Arc::new(fs.clone()))
        .auto_resume(false)
        .write_buffer_size(16 << 10)
        .write_buffer_manager(Some(Arc::clone(&manager)));
    let db = Db::open("/wbm", options)?;
    fs.inject(Fault::new(FaultOp::Append, ENOSPC).on_path(".sst").sticky());
    let refused = fill(&db, "k", 400, &manager).expect_err("a flush fails on the full disk");
    assert!(refused.is_resource_exhausted(), "{refused}");
    assert!(
        !db.is_resumable(),
        "the WAL was written: nothing is poisoned"
    );
    // Space is back. Without the resume the flushes wait up to 8 s before retrying, and a
    // writer held by the budget meanwhile gets their old error.
    fs.clear_faults();
    assert!(!db.resume()?, "nothing to resume");
    fill(&db, "after", 100, &manager)?;
    check(&db, "after", 100)?;
    Ok(())
}
