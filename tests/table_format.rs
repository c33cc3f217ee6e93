//! `strata --table-format VERSION` writes tables of that SSTable format version from every
//! command that writes (here `load`, and the shell's flush of the log it replays at open), so
//! a directory can stay readable by builds that know only older versions; an unknown version
//! is refused.
//!
//! This file belongs to the `strata` package (the tool; `[[test]]` in the root Cargo.toml).

use std::path::Path;
use std::process::{Command, Output};

use anyhow::Context;

fn strata(args: &[&str]) -> anyhow::Result<Output> {
    Ok(Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()?)
}

/// The `format version:` of every table in `dir`, as `strata sst-dump` prints it.
fn table_versions(dir: &Path) -> anyhow::Result<Vec<String>> {
    let mut versions = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "sst") {
            let out = strata(&["sst-dump", path.to_str().context("utf-8 path")?])?;
            assert!(out.status.success(), "{out:?}");
            let text = String::from_utf8(out.stdout)?;
            let line = text
                .lines()
                .find_map(|l| l.strip_prefix("format version:"))
                .context("a format version line")?;
            versions.push(line.trim().to_owned());
        }
    }
    Ok(versions)
}

#[test]
fn every_writing_command_honours_the_table_format() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let tsv = tmp.path().join("pairs.tsv");
    std::fs::write(&tsv, "a\t1\nb\t2\nc\t3\n")?;
    for version in ["1", "2", "3"] {
        let db = tmp.path().join(format!("load-{version}"));
        let out = strata(&[
            "--table-format",
            version,
            "load",
            db.to_str().expect("utf-8"),
            tsv.to_str().expect("utf-8"),
        ])?;
        assert!(out.status.success(), "{out:?}");
        let versions = table_versions(&db)?;
        assert!(!versions.is_empty());
        assert!(versions.iter().all(|v| v == version), "{versions:?}");

        // The flag also follows the subcommand.
        let sql = tmp.path().join(format!("sql-{version}"));
        let path = sql.to_str().expect("utf-8");
        // The second open replays the first one's log into a table.
        for statements in [
            "CREATE TABLE t (k INT PRIMARY KEY, v TEXT); INSERT INTO t VALUES (1, 'x');",
            "SELECT v FROM t;",
        ] {
            let out = strata(&["repl", path, "--table-format", version, "-c", statements])?;
            assert!(out.status.success(), "{out:?}");
        }
        let versions = table_versions(&sql)?;
        assert!(!versions.is_empty());
        assert!(versions.iter().all(|v| v == version), "{versions:?}");
    }
    // Without the flag: the current version, 3; and the version-1 tables are still read.
    let sql = tmp.path().join("sql-1");
    let out = strata(&[
        "repl",
        sql.to_str().expect("utf-8"),
        "-c",
        "SELECT v FROM t;",
    ])?;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8(out.stdout)?.contains('x'));
    Ok(())
}

#[test]
fn an_unknown_table_format_is_refused_before_anything_is_written() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let db = tmp.path().join("db");
    for bad in ["0", "4", "v3", ""] {
        let out = strata(&["--table-format", bad, "repl", db.to_str().expect("utf-8")])?;
        assert_eq!(out.status.code(), Some(2), "{bad}: {out:?}");
        let err = String::from_utf8(out.stderr)?;
        assert!(err.contains("--table-format"), "{bad}: {err}");
    }
    assert!(!db.exists(), "nothing was created");
    Ok(())
}

/// Bytes of the `.sst` files in `dir`.
fn table_bytes(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.path().extension().is_some_and(|e| e == "sst") {
            total += entry.metadata()?.len();
        }
    }
    Ok(total)
}

/// `strata --compression none` stores blocks as they are (a compressible input takes several
/// times the bytes it takes with LZ4, the default), the contents are the same either way, and
/// tables written either way are read by a run with the other setting.
#[test]
fn compression_none_stores_blocks_uncompressed() -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let tsv = tmp.path().join("pairs.tsv");
    let lines: String = (0..20_000)
        .map(|i| format!("key{i:08}\t{}\n", "ACGT".repeat(16)))
        .collect();
    std::fs::write(&tsv, lines)?;
    let mut scans = Vec::new();
    let mut bytes = Vec::new();
    for compression in [None, Some("lz4"), Some("none")] {
        let db = tmp
            .path()
            .join(format!("db-{}", compression.unwrap_or("default")));
        let db = db.to_str().expect("utf-8");
        let mut args = Vec::new();
        if let Some(kind) = compression {
            args.extend(["--compression", kind]);
        }
        args.extend(["load", db, tsv.to_str().expect("utf-8")]);
        let out = strata(&args)?;
        assert!(out.status.success(), "{out:?}");
        bytes.push(table_bytes(Path::new(db))?);
        // Read back by a run with the other setting.
        let other = if compression == Some("none") {
            "lz4"
        } else {
            "none"
        };
        let out = strata(&["--compression", other, "scan", db])?;
        assert!(out.status.success(), "{out:?}");
        scans.push(out.stdout);
    }
    // The load writes two tables (one per core) that a background merge of small tables may
    // or may not have joined into one before the process exits: the same blocks either way,
    // give or take one table's index, filter and footer.
    assert!(
        bytes[0].abs_diff(bytes[1]) * 50 < bytes[1],
        "lz4 is the default: {} bytes against {} with LZ4",
        bytes[0],
        bytes[1]
    );
    assert!(
        bytes[2] > 3 * bytes[1],
        "uncompressed {} bytes against {} with LZ4",
        bytes[2],
        bytes[1]
    );
    assert_eq!(scans[0].iter().filter(|&&b| b == b'\n').count(), 20_000);
    assert!(scans.iter().all(|s| *s == scans[0]));
    let out = strata(&["--compression", "zstd", "scan", "x"])?;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("possible values"));
    Ok(())
}
