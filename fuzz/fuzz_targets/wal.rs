//! WAL reader (`engine/src/wal/reader.rs`) and WAL recovery (`Db::open` replaying a log).
//!
//! The input is a WAL file. It is read with `wal::Reader` as given and, after
//! `repair_wal_checksums`, again; every outcome sequence must end in `Eof` within a bounded
//! number of calls, with record offsets increasing and payloads no larger than the file. When
//! the repaired file holds intact records, it is also replayed by `Db::open` (recovery mode
//! chosen by the input length) into a database, which is then scanned, read key by key,
//! checked with `check_integrity` and closed: batch decoding, memtable inserts and the
//! level-0 flush at the end of recovery all see the fuzzed records.
#![no_main]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use strata_engine::wal::{ReadOutcome, Reader};
use strata_engine::{CounterAdd, Db, Options, ReadOptions, WalRecoveryMode};
use strata_fuzz::{fresh_dir, repair_wal_checksums, scratch, scratch_file};

strata_fuzz::capped_allocator!();

/// Reads every outcome of the log at `path`; returns the number of intact records.
fn read_all(path: &Path, len: usize) -> usize {
    let Ok(mut reader) = Reader::open(&strata_engine::fs::OsFs, path) else {
        return 0;
    };
    let mut records = 0;
    let mut payload_bytes = 0;
    let mut last_offset = None;
    // Every outcome but the last consumes at least one fragment header (7 bytes).
    for _ in 0..len + 4 {
        match reader.next_outcome() {
            Ok(ReadOutcome::Record { offset, payload }) => {
                assert!(
                    last_offset.is_none_or(|o| offset > o),
                    "record offsets must increase"
                );
                last_offset = Some(offset);
                payload_bytes += payload.len();
                assert!(payload_bytes <= len, "payloads larger than the file");
                records += 1;
            }
            Ok(ReadOutcome::Bad { offset, .. }) => {
                assert!(
                    offset <= len as u64,
                    "damage reported past the end of the file"
                );
            }
            Ok(ReadOutcome::Eof) => {
                assert!(
                    matches!(reader.next_outcome(), Ok(ReadOutcome::Eof)),
                    "Eof must repeat"
                );
                return records;
            }
            Err(e) => panic!("a readable file gave an I/O error: {e}"),
        }
    }
    panic!("reader made no progress: more outcomes than bytes");
}

/// A database directory with no tables, whose manifest expects WAL number `.1`.
fn template() -> &'static (PathBuf, String) {
    static TEMPLATE: OnceLock<(PathBuf, String)> = OnceLock::new();
    TEMPLATE.get_or_init(|| {
        let dir = fresh_dir("wal-template");
        let db = Db::open(&dir, Options::default()).expect("create the template database");
        db.close().expect("close the template database");
        let wal = std::fs::read_dir(&dir)
            .expect("list the template")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .find(|n| n.ends_with(".wal"))
            .expect("the template has a WAL");
        (dir, wal)
    })
}

/// Replays `data` as the database's only WAL.
fn recover(data: &[u8]) {
    let (template, wal_name) = template();
    let dir = fresh_dir("wal-db");
    for entry in std::fs::read_dir(template)
        .expect("list the template")
        .flatten()
    {
        let name = entry.file_name();
        if name
            .to_str()
            .is_some_and(|n| n.starts_with("MANIFEST-") || n == "CURRENT")
        {
            std::fs::copy(entry.path(), dir.join(&name)).expect("copy the template");
        }
    }
    std::fs::write(dir.join(wal_name), data).expect("write the WAL");
    let mode = match data.len() % 4 {
        0 => WalRecoveryMode::TolerateCorruptedTail,
        1 => WalRecoveryMode::AbsoluteConsistency,
        2 => WalRecoveryMode::PointInTime,
        _ => WalRecoveryMode::SkipAnyCorruptedRecords,
    };
    let options = Options {
        wal_recovery_mode: mode,
        write_buffer_size: 16 << 10,
        block_size: 256,
        max_background_jobs: 1,
        merge_operator: Some(std::sync::Arc::new(CounterAdd)),
        ..Options::default()
    };
    let Ok(db) = Db::open(&dir, options) else {
        return;
    };
    let mut keys = Vec::new();
    for kv in db.iter(&ReadOptions::default()) {
        match kv {
            Ok((k, _)) => keys.push(k),
            Err(_) => break,
        }
    }
    for k in &keys {
        // A merge that fails (operands that are not counters) is an error, not a panic.
        let _ = db.get(k);
    }
    let _ = db.check_integrity();
    let _ = db.close();
}

fuzz_target!(|data: &[u8]| {
    let _ = scratch();
    let path = scratch_file("fuzz.wal", data);
    let mut records = read_all(&path, data.len());
    let mut repaired = data.to_vec();
    if repair_wal_checksums(&mut repaired) {
        let path = scratch_file("fuzz.wal", &repaired);
        records = read_all(&path, repaired.len());
    }
    if records > 0 {
        recover(&repaired);
    }
});
