//! On-disk compatibility fixtures (`tests/fixtures/`, described in its README): small database
//! directories written by format version 1 (WAL 1, SSTable 1, manifest 1), committed, and
//! opened here by the current code.
//!
//! - `v1/valid`: WAL, two tables, manifest. Must open and read back `v1/expected.tsv` exactly,
//!   by scan and by point reads, and pass `check_integrity`: a format change that breaks
//!   reading old databases fails here.
//! - `v1/flipped_bit_data_block`: one bit flipped in the first data block of the oldest table.
//!   Reads that touch it fail with `ChecksumMismatch` naming the table; no read returns wrong
//!   data; `check_integrity` reports it.
//! - `v1/torn_wal_tail`: the WAL cut in the middle of its last record (a crash mid-append).
//!   The default recovery drops that batch and keeps everything before it;
//!   `AbsoluteConsistency` refuses to open.
//! - `v1/torn_manifest_tail`: half a record appended to the manifest (a crash mid-append of
//!   an edit that was never acknowledged). Opens with all the data.
//! - `v1/missing_table`: the oldest table file deleted. The open fails with `Corruption`
//!   naming the manifest and the table, and changes no file (a missing table is what a lost
//!   last manifest edit leaves; an open that went on would delete that edit's tables).
//!
//! - `v2/valid`, `v2/flipped_bit_data_block`: the same with SSTable format version 2 tables;
//!   a v1 database is also read with v2 tables written beside its v1 ones.
//!
//! The fixtures are opened from copies in a temporary directory (opening writes to the
//! directory). `regenerate_fixtures` rewrites them and the fuzz seeds that come from them; run
//! it only for a new format version (see tests/fixtures/README.md).
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use strata_engine::{
    Db, Error, Options, ReadOptions, TableFormat, WalRecoveryMode, WriteBatch, WriteOptions,
};

/// Keys written by the last WAL batch of the valid fixture (lost in `torn_wal_tail`).
const TAIL_PREFIX: &str = "tail:";

/// `tests/fixtures/VERSION` (`v1`: SSTable format 1; `v2`: SSTable format 2).
fn fixtures(version: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(version)
}

/// `expected.tsv`: one `key<TAB>value` line per live key, in key order.
fn expected(version: &str) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let text =
        std::fs::read_to_string(fixtures(version).join("expected.tsv")).expect("expected.tsv");
    text.lines()
        .map(|line| {
            let (k, v) = line.split_once('\t').expect("key<TAB>value");
            (k.as_bytes().to_vec(), v.as_bytes().to_vec())
        })
        .collect()
}

/// Copies fixture `version/name` into a fresh temporary directory.
fn copy_fixture(version: &str, name: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let dst = tmp.path().join(name);
    copy_dir(&fixtures(version).join(name), &dst);
    (tmp, dst)
}

fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("create dir");
    for entry in std::fs::read_dir(src).expect("read fixture dir") {
        let entry = entry.expect("dir entry");
        std::fs::copy(entry.path(), dst.join(entry.file_name())).expect("copy file");
    }
}

/// Files in `dir` whose names end with `ext`, sorted (by number, as names are zero-padded).
fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == ext))
        .collect();
    v.sort();
    v
}

fn scan(db: &Db) -> Result<BTreeMap<Vec<u8>, Vec<u8>>, Error> {
    db.iter(&ReadOptions::default())
        .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect()
}

fn is_damage(e: &Error) -> bool {
    matches!(e, Error::Corruption { .. } | Error::ChecksumMismatch { .. })
}

/// Every read either returns the expected answer or a damage error: never a wrong value,
/// never a missing key. Returns how many reads failed.
fn reads_are_right_or_fail(db: &Db, want: &BTreeMap<Vec<u8>, Vec<u8>>) -> usize {
    let mut failed = 0;
    for (k, v) in want {
        match db.get(k) {
            Ok(got) => assert_eq!(
                got.as_deref(),
                Some(v.as_slice()),
                "wrong answer for {}",
                String::from_utf8_lossy(k)
            ),
            Err(e) => {
                assert!(is_damage(&e) || matches!(e, Error::Io { .. }), "{e}");
                failed += 1;
            }
        }
    }
    for absent in [&b"k000"[..], b"k0005", b"zzz", b""] {
        if let Ok(got) = db.get(absent) {
            assert_eq!(got, None, "a deleted or never written key reads back");
        }
    }
    failed
}

#[test]
fn valid_v1_database_reads_back_every_key() {
    valid_database_reads_back_every_key("v1");
}

#[test]
fn valid_v2_database_reads_back_every_key() {
    valid_database_reads_back_every_key("v2");
}

#[test]
fn valid_v3_database_reads_back_every_key() {
    valid_database_reads_back_every_key("v3");
}

fn valid_database_reads_back_every_key(version: &str) {
    let (_tmp, dir) = copy_fixture(version, "valid");
    let want = expected(version);
    assert!(
        want.len() > 100,
        "expected.tsv is too small: {}",
        want.len()
    );
    for round in 0..2 {
        let db = Db::open(&dir, Options::default()).expect("open the fixture database");
        assert_eq!(
            scan(&db).expect("scan"),
            want,
            "scan differs (round {round})"
        );
        let range: Vec<_> = db
            .range(&ReadOptions::default(), b"k050".as_ref()..b"k060".as_ref())
            .map(|kv| kv.expect("range").0.to_vec())
            .collect();
        let want_range: Vec<_> = want
            .range(b"k050".to_vec()..b"k060".to_vec())
            .map(|(k, _)| k.clone())
            .collect();
        assert_eq!(range, want_range);
        assert_eq!(reads_are_right_or_fail(&db, &want), 0);
        db.check_integrity().expect("the valid fixture is intact");
        // The second round reads what the first open rewrote (new manifest, flushed WAL).
        db.close().expect("close");
    }
}

/// The `format_version` of a table file's footer.
fn table_format_version(path: &Path) -> u32 {
    let bytes = std::fs::read(path).expect("read table");
    let at = bytes.len() - 64 + 48;
    u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

#[test]
fn v1_and_v2_tables_are_read_beside_v3_tables_through_flush_compaction_and_reopen() {
    assert_eq!(TableFormat::default(), TableFormat::V3);
    older_tables_are_read_beside_current_ones("v1", 1);
    older_tables_are_read_beside_current_ones("v2", 2);
}

/// Opens a copy of fixture `version`'s `valid` (tables of format `old`) with the default
/// options, writes and flushes tables of the current format beside them, compacts them
/// together and reopens: every read stays right.
fn older_tables_are_read_beside_current_ones(version: &str, old: u32) {
    let current = TableFormat::default().version();
    let (_tmp, dir) = copy_fixture(version, "valid");
    let old_tables = files_with_ext(&dir, "sst");
    assert!(!old_tables.is_empty());
    for t in &old_tables {
        assert_eq!(table_format_version(t), old, "{}", t.display());
    }
    let mut want = expected(version);
    // No automatic compaction yet, so the old and current tables stay side by side.
    let no_auto = Options {
        level0_file_num_compaction_trigger: 1000,
        level0_slowdown_writes_trigger: 1000,
        level0_stop_writes_trigger: 1000,
        ..Options::default()
    };
    let db = Db::open(&dir, no_auto.clone()).expect("open the v1 database");
    // New writes, some replacing fixture keys, flushed to a current table beside the old ones.
    let mut batch = WriteBatch::new();
    for i in (1..200u32).step_by(7) {
        let (k, v) = (format!("k{i:03}"), format!("v2-{i}"));
        batch.put(k.as_bytes(), v.as_bytes());
        want.insert(k.into_bytes(), v.into_bytes());
    }
    db.write(batch, &WriteOptions::default()).expect("write");
    db.delete(b"k010").expect("delete");
    want.remove(b"k010".as_slice());
    db.flush().expect("flush");
    // Closed, so no table is being written while the files are listed.
    db.close().expect("close");
    let tables = files_with_ext(&dir, "sst");
    let versions: Vec<u32> = tables.iter().map(|t| table_format_version(t)).collect();
    assert!(
        versions.contains(&old) && versions.contains(&current),
        "{versions:?}"
    );
    let db = Db::open(&dir, no_auto).expect("reopen with both versions");
    assert_eq!(scan(&db).expect("scan across old and current tables"), want);
    assert_eq!(reads_are_right_or_fail(&db, &want), 0);

    // Compaction writes the current version; a table it only moves (no overlap) keeps its own.
    db.compact_range(None, None).expect("compact everything");
    assert_eq!(scan(&db).expect("scan after compaction"), want);
    db.check_integrity().expect("intact after compaction");
    db.close().expect("close");
    let versions: Vec<u32> = files_with_ext(&dir, "sst")
        .iter()
        .map(|t| table_format_version(t))
        .collect();
    assert!(versions.contains(&current), "{versions:?}");
    let db = Db::open(&dir, Options::default()).expect("reopen");
    assert_eq!(scan(&db).expect("scan after reopen"), want);
    assert_eq!(reads_are_right_or_fail(&db, &want), 0);
}

#[test]
fn flipped_bit_in_a_data_block_is_a_checksum_error_never_wrong_data() {
    flipped_bit_is_a_checksum_error("v1");
}

#[test]
fn flipped_bit_in_a_v2_data_block_is_a_checksum_error_never_wrong_data() {
    flipped_bit_is_a_checksum_error("v2");
}

#[test]
fn flipped_bit_in_a_v3_data_block_is_a_checksum_error_never_wrong_data() {
    flipped_bit_is_a_checksum_error("v3");
}

fn flipped_bit_is_a_checksum_error(version: &str) {
    let (_tmp, dir) = copy_fixture(version, "flipped_bit_data_block");
    let damaged = files_with_ext(&dir, "sst")
        .into_iter()
        .next()
        .expect("a table");
    let db = Db::open(&dir, Options::default()).expect("tables are read lazily: open works");
    let want = expected(version);

    let err = db
        .check_integrity()
        .expect_err("check_integrity finds the flipped bit");
    match &err {
        Error::ChecksumMismatch { file, .. } => assert_eq!(file, &damaged, "{err}"),
        other => panic!("expected a checksum mismatch, got {other}"),
    }
    let problems = db.integrity_problems().expect("integrity report");
    assert_eq!(problems.len(), 1, "{problems:?}");

    // k004 lives only in the damaged first block of the oldest table.
    let err = db
        .get(b"k004")
        .expect_err("the damaged block is not read as data");
    assert!(is_damage(&err), "{err}");
    assert!(reads_are_right_or_fail(&db, &want) >= 1);
    let err = scan(&db).expect_err("a full scan reaches the damaged block");
    assert!(is_damage(&err), "{err}");
    db.close().expect("close");
}

#[test]
fn torn_wal_tail_loses_only_the_last_batch() {
    let (_tmp, dir) = copy_fixture("v1", "torn_wal_tail");
    let mut want = expected("v1");
    want.retain(|k, _| !k.starts_with(TAIL_PREFIX.as_bytes()));

    let strict = Options {
        wal_recovery_mode: WalRecoveryMode::AbsoluteConsistency,
        ..Options::default()
    };
    let err = Db::open(&dir, strict).expect_err("AbsoluteConsistency refuses a torn WAL");
    match &err {
        Error::Corruption { file, .. } => {
            assert!(file.extension().is_some_and(|e| e == "wal"), "{err}");
        }
        other => panic!("expected corruption naming the WAL, got {other}"),
    }

    let db = Db::open(&dir, Options::default()).expect("the default mode drops a torn tail");
    assert_eq!(scan(&db).expect("scan"), want);
    assert_eq!(reads_are_right_or_fail(&db, &want), 0);
    db.check_integrity().expect("intact after recovery");
    db.close().expect("close");
}

#[test]
fn torn_manifest_tail_is_ignored_and_every_key_is_there() {
    let (_tmp, dir) = copy_fixture("v1", "torn_manifest_tail");
    let want = expected("v1");
    let db = Db::open(&dir, Options::default()).expect("a torn last manifest record is ignored");
    assert_eq!(scan(&db).expect("scan"), want);
    db.check_integrity().expect("intact");
    db.close().expect("close");
    // The torn record is gone from the manifest written at open: a second open is clean too.
    let db = Db::open(&dir, Options::default()).expect("reopen");
    assert_eq!(scan(&db).expect("scan"), want);
    db.close().expect("close");
}

#[test]
fn missing_table_fails_the_open_and_nothing_is_changed() {
    let (_tmp, dir) = copy_fixture("v1", "missing_table");
    let oldest = files_with_ext(&fixtures("v1").join("valid"), "sst")
        .into_iter()
        .next();
    let missing = dir.join(
        oldest
            .and_then(|p| p.file_name().map(ToOwned::to_owned))
            .expect("a table"),
    );
    assert!(!missing.exists());
    let before: Vec<_> = std::fs::read_dir(&dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name())
        .collect();
    // A table the manifest names is gone (as after a lost last manifest edit): the open
    // fails before writing or deleting anything, naming the manifest and the table.
    let err = Db::open(&dir, Options::default()).expect_err("a table is missing");
    match &err {
        Error::Corruption { file, reason, .. } => {
            assert!(file.to_string_lossy().contains("MANIFEST-"), "{err}");
            assert!(reason.contains(&missing.display().to_string()), "{err}");
        }
        other => panic!("expected corruption naming the missing table, got {other}"),
    }
    let mut after: Vec<_> = std::fs::read_dir(&dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name())
        .filter(|n| n != "LOCK")
        .collect();
    let mut before: Vec<_> = before.into_iter().filter(|n| n != "LOCK").collect();
    before.sort();
    after.sort();
    assert_eq!(after, before, "the failed open changed no file");
}

// ---------------------------------------------------------------------------------------------
// The generator.

/// Rewrites `tests/fixtures/v1/` and the fuzz seeds taken from it (`fuzz/corpus/{wal,table,
/// manifest,block}/`). Ignored, and a no-op unless `STRATA_WRITE_FIXTURES=1`:
/// `STRATA_WRITE_FIXTURES=1 cargo test -p strata-tests --test fixtures -- --ignored`.
#[test]
#[ignore = "rewrites committed files; see tests/fixtures/README.md"]
fn regenerate_fixtures() {
    if std::env::var("STRATA_WRITE_FIXTURES").as_deref() != Ok("1") {
        eprintln!("set STRATA_WRITE_FIXTURES=1 to rewrite tests/fixtures/v1 and the fuzz seeds");
        return;
    }
    let root = fixtures("v1");
    let valid = write_valid_fixture(&root, TableFormat::V1);
    let the_wal = |dir: &Path| {
        files_with_ext(dir, "wal")
            .into_iter()
            .next()
            .expect("a WAL")
    };
    let the_manifest = |dir: &Path| {
        std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("dir entry").path())
            .find(|p| {
                p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("MANIFEST-"))
            })
            .expect("a manifest")
    };

    write_flipped_bit_fixture(&root);

    let dir = root.join("torn_wal_tail");
    copy_dir(&valid, &dir);
    let wal = the_wal(&dir);
    let (offset, len) = last_record(&wal);
    let cut = offset + 7 + len / 2;
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&wal)
        .expect("open WAL");
    f.set_len(cut).expect("truncate WAL");

    let dir = root.join("torn_manifest_tail");
    copy_dir(&valid, &dir);
    let manifest = the_manifest(&dir);
    let (offset, len) = last_record(&manifest);
    let mut bytes = std::fs::read(&manifest).expect("read manifest");
    let start = usize::try_from(offset).expect("offset");
    let half = bytes[start..start + 7 + usize::try_from(len / 2).expect("len")].to_vec();
    bytes.extend_from_slice(&half);
    std::fs::write(&manifest, bytes).expect("write manifest");

    let dir = root.join("missing_table");
    copy_dir(&valid, &dir);
    std::fs::remove_file(oldest_table(&dir)).expect("remove table");

    write_fuzz_seeds(&valid, &the_manifest(&valid));
}

/// Rewrites `tests/fixtures/v2/` (SSTable format 2; WAL and manifest formats 1): `valid`
/// and `flipped_bit_data_block`, written as the v1 ones. Ignored, and a no-op unless
/// `STRATA_WRITE_FIXTURES=1`.
#[test]
#[ignore = "rewrites committed files; see tests/fixtures/README.md"]
fn regenerate_v2_fixtures() {
    regenerate_table_format_fixtures("v2", TableFormat::V2);
}

/// Rewrites `tests/fixtures/v3/` (SSTable format 3), as `regenerate_v2_fixtures` does `v2/`.
/// Ignored, and a no-op unless `STRATA_WRITE_FIXTURES=1`.
#[test]
#[ignore = "rewrites committed files; see tests/fixtures/README.md"]
fn regenerate_v3_fixtures() {
    regenerate_table_format_fixtures("v3", TableFormat::V3);
}

/// Writes `tests/fixtures/{version}/valid` in tables of `format`, and its
/// `flipped_bit_data_block`, when `STRATA_WRITE_FIXTURES=1`.
fn regenerate_table_format_fixtures(version: &str, format: TableFormat) {
    if std::env::var("STRATA_WRITE_FIXTURES").as_deref() != Ok("1") {
        eprintln!("set STRATA_WRITE_FIXTURES=1 to rewrite tests/fixtures/{version}");
        return;
    }
    let root = fixtures(version);
    write_valid_fixture(&root, format);
    write_flipped_bit_fixture(&root);
}

/// Clears `root`, writes `root/valid` in tables of `format` and `root/expected.tsv`; returns
/// the path of `valid`.
fn write_valid_fixture(root: &Path, format: TableFormat) -> PathBuf {
    if root.exists() {
        std::fs::remove_dir_all(root).expect("clear fixtures");
    }
    std::fs::create_dir_all(root).expect("create fixtures");
    let valid = root.join("valid");
    let model = write_valid(&valid, format);
    let tsv: String = model
        .iter()
        .map(|(k, v)| {
            format!(
                "{}\t{}\n",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(v)
            )
        })
        .collect();
    std::fs::write(root.join("expected.tsv"), tsv).expect("write expected.tsv");
    valid
}

/// The oldest table of a fixture directory.
fn oldest_table(dir: &Path) -> PathBuf {
    files_with_ext(dir, "sst")
        .into_iter()
        .next()
        .expect("a table")
}

/// `root/flipped_bit_data_block`: `root/valid` with one bit flipped in the first data block
/// of its oldest table.
fn write_flipped_bit_fixture(root: &Path) {
    let dir = root.join("flipped_bit_data_block");
    copy_dir(&root.join("valid"), &dir);
    let table = oldest_table(&dir);
    let mut bytes = std::fs::read(&table).expect("read table");
    bytes[20] ^= 0x10; // inside the first data block, which starts at offset 0
    std::fs::write(&table, bytes).expect("write table");
}

/// Options of the valid fixture: small blocks and restart intervals so that the tables have
/// several data blocks, LZ4 and a bloom filter on; tables in `format`.
fn fixture_options(format: TableFormat) -> Options {
    Options {
        block_size: 512,
        block_restart_interval: 4,
        max_background_jobs: 1,
        table_format: format,
        ..Options::default()
    }
}

fn value(i: u32, generation: u32) -> String {
    format!("value-{i:03}-gen{generation}-").repeat(3)
}

/// Writes the valid fixture into `dir`: two tables (the second shadowing part of the first)
/// and a WAL holding the newest batches, the last one only `tail:` keys. Returns the model.
fn write_valid(dir: &Path, format: TableFormat) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    let db = Db::open(dir, fixture_options(format)).expect("create");
    let mut put = |db: &Db, k: String, v: String| {
        db.put(k.as_bytes(), v.as_bytes()).expect("put");
        model.insert(k.into_bytes(), v.into_bytes());
    };
    for i in 0..120 {
        put(&db, format!("k{i:03}"), value(i, 1));
    }
    db.delete(b"k005").expect("delete");
    db.delete(b"k010").expect("delete");
    db.flush().expect("flush");
    for i in 100..140 {
        put(&db, format!("k{i:03}"), value(i, 2));
    }
    for i in 0..4 {
        db.delete(format!("k{i:03}").as_bytes()).expect("delete");
    }
    db.flush().expect("flush");
    for i in 200..210 {
        put(&db, format!("k{i:03}"), value(i, 3));
    }
    let mut batch = WriteBatch::new();
    for i in 0..5 {
        batch.put(
            format!("{TAIL_PREFIX}{i}").as_bytes(),
            value(i, 4).as_bytes(),
        );
    }
    db.write(batch, &WriteOptions::synced())
        .expect("tail batch");
    db.close().expect("close");
    for k in ["k005", "k010", "k000", "k001", "k002", "k003"] {
        model.remove(k.as_bytes());
    }
    for i in 0..5 {
        model.insert(
            format!("{TAIL_PREFIX}{i}").into_bytes(),
            value(i, 4).into_bytes(),
        );
    }
    std::fs::remove_file(dir.join("LOCK")).expect("remove LOCK");
    assert_eq!(files_with_ext(dir, "sst").len(), 2, "two tables");
    model
}

/// Offset and payload length of the last record of a log (WAL or manifest) that fits in one
/// fragment.
fn last_record(path: &Path) -> (u64, u64) {
    let mut reader =
        strata_engine::wal::Reader::open(&strata_engine::fs::OsFs, path).expect("open log");
    let mut last = None;
    loop {
        match reader.next_outcome().expect("read log") {
            strata_engine::wal::ReadOutcome::Record { offset, payload } => {
                last = Some((offset, payload.len() as u64));
            }
            strata_engine::wal::ReadOutcome::Bad { reason, .. } => panic!("{reason}"),
            strata_engine::wal::ReadOutcome::Eof => break,
        }
    }
    last.expect("a record")
}

/// Seeds for the fuzz targets, from the valid fixture: its WAL, tables and manifest as they
/// are, the manifest's edits as raw payloads, and a table's decoded data and index blocks.
fn write_fuzz_seeds(valid: &Path, manifest: &Path) {
    use strata_engine::sstable::format::{
        BLOCK_TRAILER_LEN, BlockHandle, FOOTER_LEN, Footer, IndexValue, decode_block,
    };
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let seed = |target: &str, name: &str, bytes: &[u8]| {
        let dir = corpus.join(target);
        std::fs::create_dir_all(&dir).expect("create corpus dir");
        std::fs::write(dir.join(name), bytes).expect("write seed");
    };
    for wal in files_with_ext(valid, "wal") {
        seed("wal", "valid.wal", &std::fs::read(wal).expect("read WAL"));
    }
    let tables = files_with_ext(valid, "sst");
    for (i, table) in tables.iter().enumerate() {
        seed(
            "table",
            &format!("valid-{i}.sst"),
            &std::fs::read(table).expect("read table"),
        );
    }
    seed(
        "manifest",
        "valid.manifest",
        &std::fs::read(manifest).expect("read manifest"),
    );
    let mut reader = strata_engine::wal::Reader::open(&strata_engine::fs::OsFs, manifest)
        .expect("open manifest");
    let mut n = 0;
    while let strata_engine::wal::ReadOutcome::Record { payload, .. } =
        reader.next_outcome().expect("read manifest")
    {
        seed("manifest", &format!("edit-{n}.bin"), &payload);
        n += 1;
    }

    // Blocks of the newest table: the index block and its first two data blocks.
    let table = tables.last().expect("a table");
    let bytes = std::fs::read(table).expect("read table");
    let at = bytes.len() - FOOTER_LEN;
    let footer = Footer::decode(&bytes[at..], table, at as u64).expect("footer");
    let block = |h: BlockHandle| {
        let (start, end) = (
            h.offset as usize,
            (h.offset + h.size) as usize + BLOCK_TRAILER_LEN,
        );
        decode_block(bytes[start..end].to_vec().into(), table, h.offset).expect("block")
    };
    let index = block(footer.index);
    seed("block", "index.block", &index);
    let index = std::sync::Arc::new(
        strata_engine::sstable::block::Block::new(
            index,
            footer.format,
            std::sync::Arc::from(table.as_path()),
            0,
        )
        .expect("index block"),
    );
    let mut it = index.iter();
    use strata_engine::iterator::InternalIterator;
    it.seek_to_first().expect("index");
    for i in 0..2 {
        let h = IndexValue::decode_exact(it.value(), footer.format)
            .expect("handle")
            .handle;
        seed("block", &format!("data-{i}.block"), &block(h));
        it.next().expect("index");
    }
}
