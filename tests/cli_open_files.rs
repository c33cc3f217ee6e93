//! The inspection commands under a low open-file limit (`ulimit -n`): a database with more
//! tables than the process may open is still read, scanned, checked and written.
//!
//! Regression: a read-only open (`strata get`, `scan`, `check`) opened every table at once and
//! failed with "Too many open files" once a database held about as many tables as the limit.
//!
//! This file belongs to the `strata` package (`[[test]]` in the root Cargo.toml).

use std::path::Path;
use std::process::{Command, Output};

use strata_engine::{Db, Options};

/// Tables in the test database: well past the 128 files the commands may open.
const MIN_TABLES: usize = 200;

fn key(i: u32) -> String {
    format!("key{i:06}")
}

/// Runs `strata ARGS` under `ulimit -n 128`.
fn strata_limited(args: &[&str]) -> anyhow::Result<Output> {
    let mut script = String::from("ulimit -n 128 && exec \"$0\"");
    for i in 1..=args.len() {
        script.push_str(&format!(" \"${i}\""));
    }
    Ok(Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()?)
}

/// A database of 8,000 keys in tables of about 1 KiB each, all compacted to the last level.
fn build(dir: &Path) -> anyhow::Result<usize> {
    let options = Options::default()
        .write_buffer_size(64 << 10)
        .target_file_size(1024)
        .block_size(256);
    let db = Db::open(dir, options)?;
    for i in 0..8000u32 {
        // Values that do not compress, so each table holds few keys.
        let value = format!("{:064x}", u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        db.put(key(i).as_bytes(), value.as_bytes())?;
    }
    db.flush()?;
    db.compact_range(None, None)?;
    let tables = std::fs::read_dir(dir)?
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "sst"))
        })
        .count();
    db.close()?;
    Ok(tables)
}

#[test]
fn commands_work_with_more_tables_than_open_files() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().join("db");
    let tables = build(&dir)?;
    assert!(tables >= MIN_TABLES, "only {tables} tables");
    let dir = dir.to_str().expect("UTF-8 temp path");

    let out = strata_limited(&["get", dir, &key(7999)])?;
    assert!(
        out.status.success(),
        "get: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = format!("{:064x}\n", 7999u64.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);

    let out = strata_limited(&["scan", dir])?;
    assert!(
        out.status.success(),
        "scan: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), 8000);

    let out = strata_limited(&["check", dir])?;
    assert!(
        out.status.success(),
        "check: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let out = strata_limited(&["put", dir, "new", "value"])?;
    assert!(
        out.status.success(),
        "put: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = strata_limited(&["get", dir, "new"])?;
    assert_eq!(String::from_utf8_lossy(&out.stdout), "value\n");
    Ok(())
}
