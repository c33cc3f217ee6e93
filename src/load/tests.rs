#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use strata_engine::{CounterAdd, Db, Options, ReadOptions};

use super::*;

fn contents(db: &Db) -> Vec<(String, String)> {
    db.iter(&ReadOptions::default())
        .map(|kv| {
            let (k, v) = kv.expect("scan");
            (
                String::from_utf8(k.to_vec()).expect("utf8"),
                String::from_utf8(v.to_vec()).expect("utf8"),
            )
        })
        .collect()
}

fn run_load(
    db: &Db,
    options: &Options,
    input: &str,
    config: &LoadConfig,
) -> anyhow::Result<LoadReport> {
    let mut bytes = input.as_bytes();
    load(db, options, &mut bytes, Some(input.len() as u64), config)
}

/// Unsorted input with duplicates, in `n` lines; returns it and the expected contents.
fn unsorted_input(n: u32) -> (String, BTreeMap<String, String>) {
    let mut input = String::new();
    let mut expected = BTreeMap::new();
    for i in 0..n {
        // A permutation of 0..n/2 keys, each written twice with different values.
        let k = (i.wrapping_mul(7919)) % (n / 2);
        let key = format!("{{\"read\":\"K{k:06}\"}}");
        let value = format!("{{\"n\":{i}}}");
        input.push_str(&format!("{key}\t{value}\n"));
        expected.insert(key, value);
    }
    (input, expected)
}

#[test]
fn load_of_unsorted_input_with_duplicates_keeps_the_last_occurrence() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default();
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let (input, expected) = unsorted_input(2000);
    let report = run_load(&db, &options, &input, &LoadConfig::new(&options)).expect("load");
    assert_eq!(report.pairs, 2000);
    assert_eq!(report.keys, 1000);
    assert_eq!((report.runs, report.tables), (1, 1));
    assert_eq!(report.bytes, input.len() as u64);
    let want: Vec<_> = expected.into_iter().collect();
    assert_eq!(contents(&db), want);
    assert!(!scratch_dir(dir.path()).exists());
}

#[test]
fn a_run_written_by_several_threads_keeps_the_last_occurrence() {
    // 40,000 pairs (above PARALLEL_MIN_ENTRIES): the sorted run is split among the table
    // writer threads; the last occurrence of each key still wins.
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default();
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let (input, expected) = unsorted_input(40_000);
    let report = run_load(&db, &options, &input, &LoadConfig::new(&options)).expect("load");
    assert_eq!(
        (report.pairs, report.keys, report.runs),
        (40_000, 20_000, 1)
    );
    let want: Vec<_> = expected.into_iter().collect();
    assert_eq!(contents(&db), want);
}

#[test]
fn load_larger_than_memory_spills_runs_and_merges_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default();
    let db = Db::open(dir.path(), options.clone()).expect("open");
    db.put(b"{\"read\":\"K000001\"}", b"old").expect("put");
    db.put(b"zzz", b"untouched").expect("put");
    let (input, mut expected) = unsorted_input(3000);
    let config = LoadConfig {
        memory_bytes: 8 << 10,
        table_size_bytes: 4 << 10,
        ..LoadConfig::new(&options)
    };
    let report = run_load(&db, &options, &input, &config).expect("load");
    assert!(report.runs > 5, "{report:?}");
    assert!(report.tables > 1, "{report:?}");
    expected.insert("zzz".into(), "untouched".into());
    let want: Vec<_> = expected.into_iter().collect();
    assert_eq!(contents(&db), want);
    db.close().expect("close");
    let db = Db::open(dir.path(), options).expect("reopen");
    assert_eq!(contents(&db), want);
}

#[test]
fn sorted_input_larger_than_memory_is_written_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default();
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let input: String = (0..3000).map(|i| format!("k{i:06}\tv{i}\n")).collect();
    let config = LoadConfig {
        memory_bytes: 8 << 10,
        ..LoadConfig::new(&options)
    };
    let report = run_load(&db, &options, &input, &config).expect("load");
    // Each run is final: as many tables as runs, no merge.
    assert!(report.runs > 5);
    assert_eq!(report.tables, report.runs);
    assert_eq!(contents(&db).len(), 3000);
    assert_eq!(
        db.get(b"k002999").expect("get").as_deref(),
        Some(&b"v2999"[..])
    );
}

#[test]
fn bad_line_stops_the_load_with_nothing_ingested() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default();
    let db = Db::open(dir.path(), options.clone()).expect("open");
    db.put(b"b", b"before").expect("put");
    let input = "b\tnew\na\t1\nno tab here\nc\t3\n";
    let err = run_load(&db, &options, input, &LoadConfig::new(&options)).expect_err("bad line");
    let bad = err
        .downcast_ref::<BadLineError>()
        .expect("a bad line error");
    assert_eq!(bad.line, 3);
    assert!(err.to_string().contains("line 3"), "{err}");
    assert_eq!(contents(&db), vec![("b".into(), "before".into())]);
    assert!(!scratch_dir(dir.path()).exists());

    let config = LoadConfig {
        skip_bad: true,
        ..LoadConfig::new(&options)
    };
    let report = run_load(&db, &options, input, &config).expect("load");
    assert_eq!((report.pairs, report.bad_lines), (3, 1));
    assert_eq!(
        contents(&db),
        vec![
            ("a".into(), "1".into()),
            ("b".into(), "new".into()),
            ("c".into(), "3".into())
        ]
    );
}

#[test]
fn text_mode_refuses_invalid_utf8_and_limits_apply() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default().max_value_size(4);
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let input: &[u8] = b"a\t1\nb\t\xff\nc\t12345\nd\t4";
    let config = LoadConfig {
        text: true,
        skip_bad: true,
        ..LoadConfig::new(&options)
    };
    let mut bytes = input;
    let report = load(&db, &options, &mut bytes, None, &config).expect("load");
    assert_eq!((report.pairs, report.bad_lines), (2, 2));
    // The last line had no newline and still counts.
    assert_eq!(db.get(b"d").expect("get").as_deref(), Some(&b"4"[..]));
    assert_eq!(db.get(b"b").expect("get"), None);
}

#[test]
fn counts_are_summed_and_added_to_existing_counters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default().merge_operator(Some(Arc::new(CounterAdd)));
    let db = Db::open(dir.path(), options.clone()).expect("open");
    db.put(b"ACGT", b"100").expect("put");
    let mut input = String::new();
    for i in 0..600 {
        input.push_str(&format!("{}\t{}\n", ["ACGT", "TTGA", "CCCC"][i % 3], i % 5));
    }
    input.push_str("GGGG\t-2\n");
    let config = LoadConfig {
        format: Format::Counts,
        memory_bytes: 1 << 10,
        ..LoadConfig::new(&options)
    };
    let report = run_load(&db, &options, &input, &config).expect("load");
    assert!(report.runs > 1);
    let sum = |r: usize| {
        (0..600)
            .filter(|i| i % 3 == r)
            .map(|i| i % 5)
            .sum::<usize>()
    };
    let get = |k: &[u8]| {
        String::from_utf8(db.get(k).expect("get").expect("present").to_vec()).expect("utf8")
    };
    assert_eq!(get(b"ACGT"), (100 + sum(0)).to_string());
    assert_eq!(get(b"TTGA"), sum(1).to_string());
    assert_eq!(get(b"CCCC"), sum(2).to_string());
    assert_eq!(get(b"GGGG"), "-2");
    // Loading again adds again.
    let report = run_load(&db, &options, "GGGG\t5\n", &config).expect("load");
    assert_eq!(report.keys, 1);
    assert_eq!(get(b"GGGG"), "3");
    // A count that is not an integer is a bad line.
    let err = run_load(&db, &options, "GGGG\t5\nA\tx\n", &config).expect_err("bad count");
    assert_eq!(err.downcast_ref::<BadLineError>().map(|e| e.line), Some(2));
}

#[test]
fn empty_input_loads_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default();
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let report = run_load(&db, &options, "", &LoadConfig::new(&options)).expect("load");
    assert_eq!((report.pairs, report.tables), (0, 0));
    assert!(contents(&db).is_empty());
}

#[test]
fn load_into_a_keyspace_leaves_the_default_keyspace_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default();
    let db = Db::open(dir.path(), options.clone()).expect("open");
    db.put(b"a", b"default").expect("put");
    let config = LoadConfig {
        keyspace: Some("run42".into()),
        ..LoadConfig::new(&options)
    };
    run_load(&db, &options, "a\tloaded\nb\t2\n", &config).expect("load");
    assert_eq!(db.get(b"a").expect("get").as_deref(), Some(&b"default"[..]));
    assert_eq!(db.get(b"b").expect("get"), None);
    let ks = db.keyspace("run42").expect("keyspace");
    assert_eq!(ks.get(b"a").expect("get").as_deref(), Some(&b"loaded"[..]));
    assert_eq!(ks.get(b"b").expect("get").as_deref(), Some(&b"2"[..]));
}
