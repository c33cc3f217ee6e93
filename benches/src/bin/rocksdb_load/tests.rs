//! End-to-end tests of the RocksDB loader: what a load leaves in the database must equal a
//! model where the last occurrence of each key wins.

use std::collections::BTreeMap;
use std::time::Instant;

use anyhow::Result;

use super::{LoadConfig, LoadReport, load, open_db};

/// A database's contents in key order.
type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

fn config(memory_bytes: usize) -> LoadConfig {
    LoadConfig {
        memory_bytes,
        table_size_bytes: 16 << 10,
        threads: 2,
    }
}

/// `input` in a temporary file.
fn file_of(input: &[u8]) -> Result<std::fs::File> {
    let mut file = tempfile::tempfile()?;
    std::io::Write::write_all(&mut file, input)?;
    Ok(file)
}

/// Loads `input` into a fresh database and returns the report and the database's contents.
fn load_and_read(input: &[u8], memory_bytes: usize) -> Result<(LoadReport, Pairs)> {
    let dir = tempfile::tempdir()?;
    let (db, _cache) = open_db(&dir.path().join("db"))?;
    let scratch = dir.path().join("scratch");
    let report = load(
        &db,
        &scratch,
        &file_of(input)?,
        &config(memory_bytes),
        Instant::now(),
    )?;
    assert!(!scratch.exists(), "the scratch directory is removed");
    let mut contents = Vec::new();
    let mut it = db.raw_iterator();
    it.seek_to_first();
    while let Some((k, v)) = it.item() {
        contents.push((k.to_vec(), v.to_vec()));
        it.next();
    }
    it.status()?;
    Ok((report, contents))
}

fn model(input: &[u8]) -> Pairs {
    let mut m = BTreeMap::new();
    for line in input.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        let tab = line
            .iter()
            .position(|&b| b == b'\t')
            .expect("test input has tabs");
        m.insert(line[..tab].to_vec(), line[tab + 1..].to_vec());
    }
    m.into_iter().collect()
}

/// `n` lines `key<TAB>value` with keys from `key_of(i)`.
fn lines(n: u64, key_of: impl Fn(u64) -> u64) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..n {
        out.extend_from_slice(format!("{{\"k\":{:012}}}\tvalue-{i}\n", key_of(i)).as_bytes());
    }
    out
}

#[test]
fn sorted_input_in_many_runs_is_ingested_without_a_merge() -> Result<()> {
    let input = lines(30_000, |i| i);
    let (report, contents) = load_and_read(&input, 256 << 10)?;
    assert!(report.runs > 1, "{report}");
    assert!(!report.merged);
    assert_eq!(report.pairs, 30_000);
    assert_eq!(contents, model(&input));
    Ok(())
}

#[test]
fn unsorted_input_with_duplicates_across_runs_keeps_the_last_value() -> Result<()> {
    // Keys repeat every 7,000 lines, so every run overlaps the others.
    let input = lines(40_000, |i| (i * 7919) % 7_000);
    let (report, contents) = load_and_read(&input, 256 << 10)?;
    assert!(report.runs > 1 && report.merged, "{report}");
    assert_eq!(contents.len(), 7_000);
    assert_eq!(contents, model(&input));
    Ok(())
}

#[test]
fn input_that_fits_in_memory_is_one_run() -> Result<()> {
    let input = lines(5_000, |i| 4_999 - i);
    let (report, contents) = load_and_read(&input, 64 << 20)?;
    assert_eq!((report.runs, report.merged), (1, false));
    assert_eq!(contents, model(&input));
    Ok(())
}

#[test]
fn last_line_without_newline_is_loaded() -> Result<()> {
    let (report, contents) = load_and_read(b"b\t2\na\t1", 1 << 20)?;
    assert_eq!(report.pairs, 2);
    assert_eq!(
        contents,
        vec![
            (b"a".to_vec(), b"1".to_vec()),
            (b"b".to_vec(), b"2".to_vec())
        ]
    );
    Ok(())
}

#[test]
fn empty_keys_and_values_load() -> Result<()> {
    let (_, contents) = load_and_read(b"\tempty key\nk\t\n", 1 << 20)?;
    assert_eq!(
        contents,
        vec![
            (Vec::new(), b"empty key".to_vec()),
            (b"k".to_vec(), Vec::new())
        ]
    );
    Ok(())
}

#[test]
fn bad_line_stops_the_load_with_its_number_and_ingests_nothing() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let (db, _cache) = open_db(&dir.path().join("db"))?;
    let input = b"a\t1\nno tab here\nc\t3\n";
    let err = load(
        &db,
        &dir.path().join("scratch"),
        &file_of(input)?,
        &config(1 << 20),
        Instant::now(),
    )
    .expect_err("a line without a tab is refused");
    assert!(format!("{err:#}").contains("line 2"), "{err:#}");
    assert!(db.get(b"a")?.is_none());
    Ok(())
}

#[test]
fn empty_input_loads_nothing() -> Result<()> {
    let (report, contents) = load_and_read(b"", 1 << 20)?;
    assert_eq!((report.pairs, report.tables), (0, 0));
    assert!(contents.is_empty());
    Ok(())
}

#[test]
fn runs_read_and_parsed_on_several_threads_load_exactly() -> Result<()> {
    // 80,000 lines of about 40 bytes (3.2 MB): runs of 2 MiB and 64 MiB are read and parsed
    // in parts and sorted in halves; duplicates cross the parts.
    let input = lines(80_000, |i| (i * 7919) % 50_000);
    for memory_bytes in [2 << 20, 64 << 20] {
        let (report, contents) = load_and_read(&input, memory_bytes)?;
        assert_eq!(report.pairs, 80_000, "{report}");
        assert_eq!(contents, model(&input), "{report}");
    }
    Ok(())
}

#[test]
fn a_bad_line_in_a_later_part_is_reported_with_its_input_line_number() -> Result<()> {
    let mut input = lines(80_000, |i| i);
    input.extend_from_slice(b"no tab here\n");
    input.extend_from_slice(&lines(10, |i| i));
    let dir = tempfile::tempdir()?;
    let (db, _cache) = open_db(&dir.path().join("db"))?;
    let err = load(
        &db,
        &dir.path().join("scratch"),
        &file_of(&input)?,
        &config(64 << 20),
        Instant::now(),
    )
    .expect_err("a line without a tab is refused");
    assert!(format!("{err:#}").contains("line 80001"), "{err:#}");
    Ok(())
}
