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
    load_file(db, options, input.as_bytes(), config)
}

/// Loads `input` through a mapped file (parsing and sorting on every core).
fn load_file(
    db: &Db,
    options: &Options,
    input: &[u8],
    config: &LoadConfig,
) -> anyhow::Result<LoadReport> {
    let mut file = tempfile::tempfile().expect("tempfile");
    std::io::Write::write_all(&mut file, input).expect("write input");
    match runs::map_file(&file) {
        Some(map) => load(db, options, Input::Mapped(&map), config),
        // An empty file does not map.
        None => load_stream(db, options, input, config),
    }
}

/// Loads `input` through a mapped file (`use_file`) or as a stream: the two paths the
/// comparison tests hold to the same results.
fn load_via(
    use_file: bool,
    db: &Db,
    options: &Options,
    input: &[u8],
    config: &LoadConfig,
) -> anyhow::Result<LoadReport> {
    if use_file {
        load_file(db, options, input, config)
    } else {
        load_stream(db, options, input, config)
    }
}

/// Loads `input` as a stream (one thread reads and parses).
fn load_stream(
    db: &Db,
    options: &Options,
    input: &[u8],
    config: &LoadConfig,
) -> anyhow::Result<LoadReport> {
    let reader = &mut { input };
    let total_bytes = Some(input.len() as u64);
    load(
        db,
        options,
        Input::Stream {
            reader,
            total_bytes,
        },
        config,
    )
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
fn nearly_sorted_input_read_in_place_loads_every_pair() {
    // 40,000 sorted lines with one pair in 40 swapped (3 of 40 neighbours apart): each
    // chunk of 4,096 is "mostly in input order" and read in place, with the swapped pairs
    // read where they lie; a fully shuffled copy goes through the gathering path. Both must
    // load the same contents, with the last value of the one duplicate key.
    let mut lines: Vec<String> = (0..40_000u32)
        .map(|i| format!("key{i:06}\tvalue-{i}\n"))
        .collect();
    for i in (0..lines.len() - 1).step_by(40) {
        lines.swap(i, i + 1);
    }
    lines.push("key000005\tlast\n".to_owned());
    let nearly: String = lines.concat();
    let mut shuffled_lines = lines.clone();
    let last = shuffled_lines.pop().expect("a line");
    let n = shuffled_lines.len();
    let shuffled: String = (0..n)
        .map(|i| shuffled_lines[(i * 7919) % n].as_str())
        .chain([last.as_str()])
        .collect();
    let mut want: Vec<(String, String)> = (0..40_000u32)
        .map(|i| (format!("key{i:06}"), format!("value-{i}")))
        .collect();
    want[5].1 = "last".to_owned();
    for input in [&nearly, &shuffled] {
        let dir = tempfile::tempdir().expect("tempdir");
        let options = Options::default();
        let db = Db::open(dir.path(), options.clone()).expect("open");
        let report = run_load(&db, &options, input, &LoadConfig::new(&options)).expect("load");
        assert_eq!((report.pairs, report.keys), (40_001, 40_000));
        assert_eq!(contents(&db), want);
    }
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
    let report = load_stream(&db, &options, input, &config).expect("load");
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
fn counts_that_cannot_add_to_the_value_held_are_refused_with_nothing_loaded() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default().merge_operator(Some(Arc::new(CounterAdd)));
    let db = Db::open(dir.path(), options.clone()).expect("open");
    db.put(b"big", i64::MAX.to_string().as_bytes())
        .expect("put");
    db.put(b"name", b"hello").expect("put");
    let config = LoadConfig {
        format: Format::Counts,
        ..LoadConfig::new(&options)
    };
    // Each would leave a key whose every read fails: refused, naming the key, nothing ingested
    // (not even the other, valid counts of the same load).
    for (input, key) in [("a\t1\nbig\t1\n", "big"), ("a\t1\nname\t1\n", "name")] {
        let err = run_load(&db, &options, input, &config).expect_err(input);
        assert!(
            format!("{err:#}").contains(&format!("key {key:?}")),
            "{err:#}"
        );
        assert_eq!(db.get(b"a").expect("get"), None);
    }
    assert_eq!(contents(&db).len(), 2);
    // Counts that fit still add.
    run_load(&db, &options, "a\t1\nbig\t-7\n", &config).expect("load");
    assert_eq!(
        db.get(b"big").expect("get").as_deref(),
        Some((i64::MAX - 7).to_string().as_bytes())
    );
}

#[test]
fn counts_of_a_run_split_among_writer_threads_are_summed_per_key() {
    // 60,000 lines (above PARALLEL_MIN_ENTRIES), one run: the sorted run is split among the
    // table writer threads; each key's counts must be summed once, whatever the split.
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default().merge_operator(Some(Arc::new(CounterAdd)));
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let mut input = String::new();
    let mut want: BTreeMap<String, i64> = BTreeMap::new();
    for i in 0..60_000u64 {
        // Keys 0..5000 in scattered order, each seen 12 times; a few hot keys far more.
        let k = if i % 7 == 0 { i % 3 } else { (i * 7919) % 5000 };
        let key = format!("read-{k:05}");
        let count = (i % 11) as i64 - 3;
        input.push_str(&format!("{key}\t{count}\n"));
        *want.entry(key).or_default() += count;
    }
    let config = LoadConfig {
        format: Format::Counts,
        ..LoadConfig::new(&options)
    };
    let report = run_load(&db, &options, &input, &config).expect("load");
    assert_eq!((report.pairs, report.runs), (60_000, 1));
    assert_eq!(report.keys, want.len() as u64);
    let want: Vec<(String, String)> = want.into_iter().map(|(k, v)| (k, v.to_string())).collect();
    assert_eq!(contents(&db), want);
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

/// Input of about 3 MB (above the size parsed on several threads): unsorted keys with
/// duplicates, bad lines (no tab) every 997th line when `bad`, and no final newline.
fn mixed_input(bad: bool) -> Vec<u8> {
    let mut input = Vec::new();
    for i in 0u64..60_000 {
        if bad && i % 997 == 500 {
            input.extend_from_slice(b"no tab on this line\n");
            continue;
        }
        let k = i.wrapping_mul(7919) % 40_000;
        input.extend_from_slice(format!("{{\"read\":\"K{k:06}\"}}\t{{\"n\":{i}}}\n").as_bytes());
    }
    input.pop();
    input
}

#[test]
fn file_and_stream_loads_agree_on_contents_reports_and_bad_lines() {
    let options = Options::default();
    for memory_bytes in [64 << 10, 1 << 20, 4 << 20, 256 << 20] {
        for (bad, skip_bad) in [(false, false), (true, true), (true, false)] {
            let input = mixed_input(bad);
            let config = LoadConfig {
                memory_bytes,
                skip_bad,
                ..LoadConfig::new(&options)
            };
            let mut seen = Vec::new();
            for use_file in [false, true] {
                let dir = tempfile::tempdir().expect("tempdir");
                let db = Db::open(dir.path(), options.clone()).expect("open");
                let outcome = match load_via(use_file, &db, &options, &input, &config) {
                    Ok(r) => Ok((r.bytes, r.pairs, r.bad_lines, r.keys)),
                    Err(e) => Err(e.downcast_ref::<BadLineError>().map(|b| b.line)),
                };
                seen.push((outcome, contents(&db)));
            }
            let case = format!("memory {memory_bytes}, bad {bad}, skip {skip_bad}");
            assert_eq!(seen[0], seen[1], "{case}");
            match &seen[0].0 {
                Ok((bytes, pairs, bad_lines, keys)) => {
                    assert_eq!(*bytes, input.len() as u64, "{case}");
                    assert_eq!(*pairs + *bad_lines, 60_000, "{case}");
                    assert_eq!(*bad_lines, if bad { 60 } else { 0 }, "{case}");
                    // Keys whose every line was bad are missing.
                    let lost = (0u64..60_000)
                        .filter(|i| bad && i % 997 == 500)
                        .map(|i| i.wrapping_mul(7919) % 40_000)
                        .filter(|k| {
                            (0u64..60_000)
                                .all(|i| i % 997 == 500 || i.wrapping_mul(7919) % 40_000 != *k)
                        })
                        .count();
                    assert_eq!(*keys, 40_000 - lost as u64, "{case}");
                }
                // The first bad line is line 501; nothing was ingested.
                Err(line) => {
                    assert_eq!(*line, Some(501), "{case}");
                    assert!(seen[0].1.is_empty(), "{case}");
                }
            }
        }
    }
}

/// `strata load` parsed from a command line, as `main` would.
fn cli(args: &[&std::ffi::OsStr]) -> LoadArgs {
    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        load: LoadArgs,
    }
    let argv = std::iter::once(std::ffi::OsStr::new("load")).chain(args.iter().copied());
    <Cli as clap::Parser>::try_parse_from(argv)
        .expect("arguments")
        .load
}

#[test]
fn the_command_loads_a_file_and_refuses_a_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("db");
    let input = dir.path().join("pairs.tsv");
    std::fs::write(&input, mixed_input(false)).expect("write input");
    let code = run(&cli(&[db.as_os_str(), input.as_os_str()])).expect("load");
    assert_eq!(code, ExitCode::SUCCESS);
    let db_handle = Db::open(&db, Options::default()).expect("open");
    assert_eq!(contents(&db_handle).len(), 40_000);
    drop(db_handle);
    // A directory is refused before the database is opened.
    let err = run(&cli(&[db.as_os_str(), dir.path().as_os_str()])).expect_err("a directory");
    assert!(format!("{err:#}").contains("is a directory"), "{err:#}");
    // A failed load into a database that did not exist leaves no database behind: a missing
    // input, a directory, or a bad line.
    let bad = dir.path().join("bad.tsv");
    std::fs::write(&bad, "a\t1\nno tab here\n").expect("write input");
    for input in [
        dir.path().join("missing.tsv"),
        dir.path().to_path_buf(),
        bad.clone(),
    ] {
        let fresh = dir.path().join("fresh");
        run(&cli(&[fresh.as_os_str(), input.as_os_str()])).expect_err("fails");
        assert!(!fresh.exists(), "{}", input.display());
    }
    // Nor the parent directories it created, nor files in an empty directory it was given.
    let nested = dir.path().join("n1").join("n2").join("n3");
    run(&cli(&[nested.as_os_str(), bad.as_os_str()])).expect_err("fails");
    assert!(!dir.path().join("n1").exists());
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("mkdir");
    run(&cli(&[empty.as_os_str(), bad.as_os_str()])).expect_err("fails");
    assert_eq!(std::fs::read_dir(&empty).expect("list").count(), 0);
    // An existing database is left as it was.
    run(&cli(&[db.as_os_str(), bad.as_os_str()])).expect_err("fails");
    let db_handle = Db::open(&db, Options::default()).expect("open");
    assert_eq!(contents(&db_handle).len(), 40_000);
}

#[test]
fn file_runs_stay_within_the_budget_when_lines_get_shorter() {
    // The first MiB is one 2 MiB line, so the run's size is estimated from one long line;
    // 300,000 short lines follow. Counting each pair's entries (48 bytes) against 4 MiB, the
    // long line is a run of its own and the short lines need several runs, instead of one run
    // holding 250,000 entries (6 MB of entries alone).
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default();
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let mut input = format!("long\t{}\n", "L".repeat(2 << 20));
    for i in 0..300_000 {
        input.push_str(&format!("k{i:06}\t\n"));
    }
    let config = LoadConfig {
        memory_bytes: 4 << 20,
        ..LoadConfig::new(&options)
    };
    let report = run_load(&db, &options, &input, &config).expect("load");
    assert_eq!((report.pairs, report.keys), (300_001, 300_001));
    // 300,000 entries of 48 bytes need at least 4 runs of 4 MiB, plus the long line.
    assert!(report.runs >= 5, "{report:?}");
    assert_eq!(contents(&db).len(), 300_001);
    assert_eq!(db.get(b"k299999").expect("get").as_deref(), Some(&b""[..]));
}

#[test]
fn counts_whose_partial_sums_overflow_load_when_the_total_fits() {
    // "a" gets -10 in the first run and i64::MAX and 5 in a later one: that run's partial sum
    // does not fit 64 bits, the total does. Both paths must load it; a total that does not
    // fit is refused.
    // "c" is the same in the other order: i64::MAX twice in the first run (which could be
    // ingested as it is if every later run were above it), minus both later.
    let options = Options::default().merge_operator(Some(Arc::new(CounterAdd)));
    let mut input = format!("a\t-10\nc\t{0}\nc\t{0}\n", i64::MAX);
    for j in 0..20_000 {
        input.push_str(&format!("f{j:07}\t1\n"));
    }
    input.push_str(&format!("a\t{0}\na\t5\nc\t-{0}\nc\t-{0}\nc\t7\n", i64::MAX));
    let config = LoadConfig {
        format: Format::Counts,
        memory_bytes: 64 << 10,
        ..LoadConfig::new(&options)
    };
    for use_file in [false, true] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), options.clone()).expect("open");
        let report = load_via(use_file, &db, &options, input.as_bytes(), &config).expect("load");
        assert!(report.runs > 2, "{report:?}");
        let total = db.get(b"a").expect("get").expect("present");
        assert_eq!(&total[..], (i64::MAX - 5).to_string().as_bytes());
        assert_eq!(db.get(b"c").expect("get").as_deref(), Some(&b"7"[..]));
        let err = run_load(&db, &options, "b\t9223372036854775807\nb\t1\n", &config)
            .expect_err("the total overflows");
        assert!(format!("{err:#}").contains("overflow"), "{err:#}");
    }
}

/// Bytes of all the tables in `dir`.
fn sst_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "sst"))
        .map(|e| e.metadata().expect("metadata").len())
        .sum()
}

#[test]
fn resp_keys_put_the_server_prefix_before_every_key_once_on_every_path() {
    let (input, expected) = unsorted_input(3000);
    // Keys that sort below the prefix byte as well as above it (`{` > `k` > `A`).
    let low: BTreeMap<String, String> = expected
        .iter()
        .map(|(k, v)| (format!("A{k}"), v.clone()))
        .collect();
    let lines = |m: &BTreeMap<String, String>| -> String {
        m.iter().map(|(k, v)| format!("{k}\t{v}\n")).collect()
    };
    let (sorted_input, sorted_low) = (lines(&expected), lines(&low));
    let prefixed = |m: &BTreeMap<String, String>| -> Vec<(String, String)> {
        m.iter()
            .map(|(k, v)| (format!("k{k}"), v.clone()))
            .collect()
    };
    // One run; many overlapping runs merged; many ordered runs ingested as they are.
    for (text, expected, memory, merged) in [
        (&input, &expected, 256 << 20, false),
        (&input, &expected, 8 << 10, true),
        (&sorted_input, &expected, 8 << 10, false),
        (&sorted_low, &low, 8 << 10, false),
    ] {
        for use_file in [true, false] {
            let dir = tempfile::tempdir().expect("tempdir");
            // Tables of 4 KiB are not small against this target, so no background merge of
            // small tables changes the bytes compared below.
            let options = Options::default().target_file_size(4 << 10);
            let db = Db::open(dir.path(), options.clone()).expect("open");
            let config = LoadConfig {
                memory_bytes: memory,
                table_size_bytes: 4 << 10,
                key_prefix: b"k".to_vec(),
                ..LoadConfig::new(&options)
            };
            let report = load_via(use_file, &db, &options, text.as_bytes(), &config).expect("load");
            assert_eq!(report.runs > 1, memory < 1 << 20, "{report:?}");
            assert_eq!(
                contents(&db),
                prefixed(expected),
                "merged {merged}, file {use_file}"
            );
            // The same load without the prefix writes tables of about the same size: a run
            // judged against the previous one's bounds with the prefix on one side only would
            // be taken for an overlapping run and written uncompressed, without a filter.
            let plain_dir = tempfile::tempdir().expect("tempdir");
            let plain = Db::open(plain_dir.path(), options.clone()).expect("open");
            let plain_config = LoadConfig {
                key_prefix: Vec::new(),
                ..config.clone()
            };
            load_via(use_file, &plain, &options, text.as_bytes(), &plain_config).expect("load");
            let (with, without) = (sst_bytes(dir.path()), sst_bytes(plain_dir.path()));
            assert!(
                with.abs_diff(without) * 20 < without,
                "{with} bytes of tables with the prefix, {without} without (merged {merged})"
            );
        }
    }

    // Counts: operands under the prefixed key add to what the server stored there.
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default().merge_operator(Some(Arc::new(CounterAdd)));
    let db = Db::open(dir.path(), options.clone()).expect("open");
    db.put(b"kACGT", b"10").expect("put");
    let config = LoadConfig {
        format: Format::Counts,
        memory_bytes: 1 << 10,
        key_prefix: b"k".to_vec(),
        ..LoadConfig::new(&options)
    };
    let mut counts = String::new();
    for i in 0..300 {
        counts.push_str(&format!("{}\t1\n", ["ACGT", "TTGA"][i % 2]));
    }
    let report = run_load(&db, &options, &counts, &config).expect("load");
    assert!(report.runs > 1, "{report:?}");
    let want = vec![
        ("kACGT".to_owned(), "160".to_owned()),
        ("kTTGA".to_owned(), "150".to_owned()),
    ];
    assert_eq!(contents(&db), want);
    // A refusal names the key as the input gave it, without the prefix.
    db.put(b"kname", b"hello").expect("put");
    let err = run_load(&db, &options, "name\t1\n", &config).expect_err("not a count");
    assert!(format!("{err:#}").contains("key \"name\":"), "{err:#}");

    // The prefix counts against the key size limit.
    let long = format!("{}\tv\n", "x".repeat(strata_engine::MAX_KEY_SIZE));
    let err = run_load(&db, &options, &long, &config).expect_err("too long");
    assert!(
        err.to_string().contains("exceeds the limit of 65535"),
        "{err:#}"
    );
}

#[test]
fn more_runs_than_one_merge_reads_are_merged_in_passes() {
    // 4 KiB of memory: over 16 runs, so with a fan-in of 4 (tests) the merge takes two
    // intermediate passes or more; the last occurrence still wins, and counts still add up.
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default().merge_operator(Some(Arc::new(CounterAdd)));
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let (input, expected) = unsorted_input(6000);
    let config = LoadConfig {
        memory_bytes: 4 << 10,
        table_size_bytes: 4 << 10,
        ..LoadConfig::new(&options)
    };
    for use_file in [true, false] {
        let report = load_via(use_file, &db, &options, input.as_bytes(), &config).expect("load");
        assert!(report.runs > 4 * 4, "{report:?}");
        assert_eq!(report.keys, 3000);
        let want: Vec<_> = expected.clone().into_iter().collect();
        assert_eq!(contents(&db), want);
        assert!(!scratch_dir(dir.path()).exists());
    }
    let counts: String = (0..3000)
        .map(|i| format!("c{:03}\t{}\n", i % 200, i % 7))
        .collect();
    let config = LoadConfig {
        format: Format::Counts,
        memory_bytes: 1 << 10,
        ..config
    };
    let report = run_load(&db, &options, &counts, &config).expect("load counts");
    assert!(report.runs > 4 * 4, "{report:?}");
    for k in [0, 17, 199] {
        let want: usize = (0..3000).filter(|i| i % 200 == k).map(|i| i % 7).sum();
        let got = db.get(format!("c{k:03}").as_bytes()).expect("get");
        assert_eq!(got.as_deref(), Some(want.to_string().as_bytes()));
    }
}

#[test]
fn an_interrupted_load_ingests_nothing_and_removes_its_scratch_tables() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default();
    let db = Db::open(dir.path(), options.clone()).expect("open");
    db.put(b"kept", b"1").expect("put");
    let (input, _) = unsorted_input(3000);
    let flag = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let config = LoadConfig {
        memory_bytes: 8 << 10,
        interrupt: Some(Arc::clone(&flag)),
        ..LoadConfig::new(&options)
    };
    for use_file in [true, false] {
        let err =
            load_via(use_file, &db, &options, input.as_bytes(), &config).expect_err("interrupted");
        assert!(err.is::<Interrupted>(), "{err:#}");
        assert_eq!(contents(&db), vec![("kept".to_owned(), "1".to_owned())]);
        assert!(!scratch_dir(dir.path()).exists());
    }
}

/// Set in the child process of `sigint_stops_the_command_and_leaves_no_database`.
const SIGNAL_CHILD_ENV: &str = "STRATA_LOAD_SIGNAL_CHILD_DB";

/// The child: `strata load $DB -` reading this process's standard input; exits with the
/// command's status. Does nothing unless started by the parent test.
#[test]
fn signal_child_load() {
    let Some(db) = std::env::var_os(SIGNAL_CHILD_ENV) else {
        return;
    };
    let status = match run(&cli(&[db.as_os_str(), std::ffi::OsStr::new("-")])) {
        Ok(code) if code == ExitCode::from(130) => 130,
        Ok(code) if code == ExitCode::SUCCESS => 0,
        Ok(_) => 1,
        Err(e) => {
            eprintln!("{e:#}");
            2
        }
    };
    std::process::exit(status);
}

/// The scratch directories (`strata-load-*.tmp`) in `db`.
fn scratch_dirs_in(db: &std::path::Path) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(db)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| is_scratch_name(&e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .collect()
}

/// Starts `strata load DB -` in a child, feeds it `input` and keeps its standard input open,
/// waits until `ready` holds, sends SIGINT; returns whether it stopped within 20 s, its exit
/// status and its stderr.
fn interrupt_a_waiting_load(
    db: &std::path::Path,
    input: &[u8],
    ready: impl Fn() -> bool,
) -> (bool, Option<i32>, String) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args(["--exact", "load::tests::signal_child_load", "--nocapture"])
        .env(SIGNAL_CHILD_ENV, db)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input).expect("feed the child");
    // The load is now waiting for more input, its scratch tables maybe written.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !ready() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(ready(), "the child never started loading");
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    // No more input, and standard input stays open: the load, waiting for input, stops at
    // once all the same.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().expect("try_wait").is_none() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let stopped = child.try_wait().expect("try_wait").is_some();
    if !stopped {
        child.kill().ok();
    }
    drop(stdin);
    let out = child.wait_with_output().expect("wait");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (stopped, out.status.code(), stderr)
}

#[test]
fn sigint_stops_a_load_waiting_for_input_and_leaves_no_database() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("fresh");
    let (input, _) = unsorted_input(20_000);
    let (stopped, status, stderr) =
        interrupt_a_waiting_load(&db, input.as_bytes(), || !scratch_dirs_in(&db).is_empty());
    assert!(
        stopped,
        "the load kept waiting for input after SIGINT: {stderr}"
    );
    assert_eq!(status, Some(130), "{stderr}");
    assert!(
        stderr.contains("interrupted: nothing was loaded"),
        "{stderr}"
    );
    assert!(!db.exists(), "the database the load created is left behind");
}

#[test]
fn sigint_leaves_an_existing_database_as_it_was_without_scratch_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("held");
    let database = Db::open(&db, Options::default()).expect("open");
    database.put(b"kept", b"1").expect("put");
    database.close().expect("close");
    let (stopped, status, stderr) =
        interrupt_a_waiting_load(&db, b"a\t1\n", || !scratch_dirs_in(&db).is_empty());
    assert!(
        stopped,
        "the load kept waiting for input after SIGINT: {stderr}"
    );
    assert_eq!(status, Some(130), "{stderr}");
    assert_eq!(scratch_dirs_in(&db), Vec::<std::path::PathBuf>::new());
    let database = Db::open(&db, Options::default()).expect("open");
    assert_eq!(
        contents(&database),
        vec![("kept".to_owned(), "1".to_owned())]
    );
    database.close().expect("close");
}

#[test]
fn sigint_before_any_input_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = dir.path().join("never");
    // The load waits for its first bytes (compressed input is refused before the database
    // is created): give it time to get there.
    let started = std::time::Instant::now();
    let (stopped, status, stderr) = interrupt_a_waiting_load(&db, b"", || {
        started.elapsed() > std::time::Duration::from_millis(500)
    });
    assert!(
        stopped,
        "the load kept waiting for input after SIGINT: {stderr}"
    );
    assert_eq!(status, Some(130), "{stderr}");
    assert!(!db.exists());
}

#[test]
fn compressed_input_is_refused_before_anything_is_loaded() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for (bytes, format) in [
        (&b"\x1f\x8b\x08\x00rest"[..], "gzip"),
        (b"\x28\xb5\x2f\xfdrest", "zstd"),
        (b"BZh91AY&SY\x14", "bzip2"),
        (b"\xfd7zXZ\x00rest", "xz"),
    ] {
        let path = dir.path().join(format);
        std::fs::write(&path, bytes)?;
        let e = refuse_compressed(&std::fs::File::open(&path)?, &path).expect_err(format);
        assert!(
            e.to_string()
                .contains(&format!("looks {format}-compressed")),
            "{e}"
        );
    }
    // Text that merely starts like a magic number loads.
    for text in [&b"BZh is a key\t1\n"[..], b"BZh91AY\t1\n", b"", b"\x1f"] {
        let path = dir.path().join("text.tsv");
        std::fs::write(&path, text)?;
        refuse_compressed(&std::fs::File::open(&path)?, &path)?;
    }
    Ok(())
}

/// `head`, then zero bytes without end; counts the zero bytes served.
struct Endless {
    head: Vec<u8>,
    at: usize,
    zeros_served: u64,
}

impl std::io::Read for Endless {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.at < self.head.len() {
            let n = buf.len().min(self.head.len() - self.at);
            buf[..n].copy_from_slice(&self.head[self.at..self.at + n]);
            self.at += n;
            return Ok(n);
        }
        buf.fill(0);
        self.zeros_served += buf.len() as u64;
        Ok(buf.len())
    }
}

#[test]
fn a_stream_line_without_end_is_refused_once_over_any_limit_without_reading_it_all() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default();
    let db = Db::open(dir.path(), options.clone()).expect("open");
    for (head, reason) in [
        (
            &b"a\t1\n"[..],
            BadLine::KeyOverLimit(strata_engine::MAX_KEY_SIZE),
        ),
        (
            b"a\t1\nkey\t",
            BadLine::ValueOverLimit(options.max_value_size),
        ),
    ] {
        let mut input = Endless {
            head: head.to_vec(),
            at: 0,
            zeros_served: 0,
        };
        let err = load(
            &db,
            &options,
            Input::Stream {
                reader: &mut input,
                total_bytes: None,
            },
            &LoadConfig::new(&options),
        )
        .expect_err("refused");
        let bad = err.downcast_ref::<BadLineError>().expect("a bad line");
        assert_eq!((bad.line, &bad.reason), (2, &reason));
        // Refused within a read or two past the limit, not at the end of the input.
        let limit = match reason {
            BadLine::KeyOverLimit(n) | BadLine::ValueOverLimit(n) => n as u64,
            _ => unreachable!(),
        };
        assert!(
            input.zeros_served < limit + (32 << 20),
            "{}",
            input.zeros_served
        );
        assert!(contents(&db).is_empty());
    }
}

#[test]
fn skip_bad_skips_over_long_lines_unread_on_both_paths() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Small value limit and memory, so that reads return pieces of the long lines.
    let options = Options::default().max_value_size(4096);
    let mut input = b"a\t1\n".to_vec();
    input.extend(std::iter::repeat_n(0u8, 1 << 20));
    input.extend_from_slice(b"\nb\t2\nc\t");
    input.extend(std::iter::repeat_n(b'x', 200_000));
    input.extend_from_slice(b"\nd\t4");
    for use_file in [true, false] {
        let db = Db::open(dir.path().join(use_file.to_string()), options.clone()).expect("open");
        let config = LoadConfig {
            skip_bad: true,
            memory_bytes: 64 << 10,
            ..LoadConfig::new(&options)
        };
        let report = load_via(use_file, &db, &options, &input, &config).expect("load");
        assert_eq!(
            (report.pairs, report.bad_lines, report.bytes),
            (3, 2, input.len() as u64),
            "file {use_file}"
        );
        let want: Vec<(String, String)> = [("a", "1"), ("b", "2"), ("d", "4")]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(contents(&db), want, "file {use_file}");
    }
}

#[test]
fn a_pipe_given_by_name_is_read_as_a_stream_and_checked_for_compression() {
    let dir = tempfile::tempdir().expect("tempdir");
    // One pipe per load: the refused load's input thread may still hold its pipe open for a
    // moment after `run` returns, and would take bytes written to that pipe next.
    let mkfifo = |name: &str| {
        let fifo = dir.path().join(name);
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .expect("mkfifo");
        assert!(made.success());
        fifo
    };
    let db = dir.path().join("db");
    let feed = |fifo: &std::path::Path, bytes: &'static [u8]| {
        let fifo = fifo.to_path_buf();
        std::thread::spawn(move || std::fs::write(fifo, bytes).expect("write the pipe"))
    };
    let fifo = mkfifo("pipe");
    let writer = feed(&fifo, b"\x1f\x8b\x08\x00rest");
    let err = run(&cli(&[db.as_os_str(), fifo.as_os_str()])).expect_err("compressed");
    writer.join().expect("writer");
    assert!(err.to_string().contains("looks gzip-compressed"), "{err:#}");
    assert!(!db.exists(), "nothing is created");
    let fifo = mkfifo("pipe2");
    let writer = feed(&fifo, b"b\t2\na\t1\n");
    let code = run(&cli(&[db.as_os_str(), fifo.as_os_str()])).expect("load");
    writer.join().expect("writer");
    assert_eq!(code, ExitCode::SUCCESS);
    let database = Db::open(&db, Options::default()).expect("open");
    assert_eq!(
        contents(&database),
        vec![
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned())
        ]
    );
    database.close().expect("close");
}
