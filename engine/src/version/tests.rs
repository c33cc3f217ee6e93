//! Tests of `Version` (ordering, lookups, applying edits) and `VersionSet` (manifest round
//! trips, torn tails, corruption, rollover).

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::filename;
use crate::types::{FileNumber, InternalKey, SeqNo, ValueKind};
use crate::version::manifest;
use crate::version::{FileMeta, NUM_LEVELS, Version, VersionEdit, VersionSet};

fn table(number: u64, smallest: &[u8], largest: &[u8], seqs: (u64, u64)) -> FileMeta {
    FileMeta {
        number: FileNumber(number),
        size: 1000 + number,
        smallest: InternalKey::new(smallest.to_vec(), SeqNo(seqs.1), ValueKind::Put),
        largest: InternalKey::new(largest.to_vec(), SeqNo(seqs.0), ValueKind::Put),
        smallest_seqno: SeqNo(seqs.0),
        largest_seqno: SeqNo(seqs.1),
        num_entries: 10,
        num_deletions: 2,
        global_seqno: None,
        table_id: None,
    }
}

fn numbers(files: &[Arc<FileMeta>]) -> Vec<u64> {
    files.iter().map(|f| f.number.0).collect()
}

fn io(e: std::io::Error) -> Error {
    Error::io("test", e)
}

/// L0: 10 [a..m] seq 1..5, 11 [k..z] seq 6..9, 12 [c..d] seq 10..12, 13 [a..b] seq 6..9
/// (same seqnos as 11, higher number). L1: [""..c], [d..h], [p..\xff\xff]. L2: [b..x].
fn sample() -> Version {
    let mut e = VersionEdit::default();
    e.add_file(0, table(10, b"a", b"m", (1, 5)));
    e.add_file(0, table(11, b"k", b"z", (6, 9)));
    e.add_file(0, table(12, b"c", b"d", (10, 12)));
    e.add_file(0, table(13, b"a", b"b", (6, 9)));
    e.add_file(1, table(22, b"p", b"\xff\xff", (1, 1)));
    e.add_file(1, table(20, b"", b"c", (1, 1)));
    e.add_file(1, table(21, b"d", b"h", (1, 1)));
    e.add_file(2, table(30, b"b", b"x", (0, 0)));
    Version::empty().apply(&e).expect("sample edit applies")
}

#[test]
fn levels_are_ordered_l0_newest_first_and_l1_by_smallest_key() {
    let v = sample();
    assert_eq!(numbers(v.files(0)), vec![12, 13, 11, 10]);
    assert_eq!(numbers(v.files(1)), vec![20, 21, 22]);
    assert_eq!(numbers(v.files(2)), vec![30]);
    assert!(v.files(NUM_LEVELS).is_empty());
    assert_eq!(v.num_files(), 8);
    assert_eq!(v.level_bytes(1), 1020 + 1021 + 1022);
    assert_eq!(v.level_bytes(5), 0);
    assert!(v.check_invariants().is_empty());
    let mut all: Vec<u64> = v.all_file_numbers().map(|n| n.0).collect();
    all.sort_unstable();
    assert_eq!(all, vec![10, 11, 12, 13, 20, 21, 22, 30]);
}

#[test]
fn files_for_get_lists_overlapping_l0_newest_first_then_one_per_level() {
    let v = sample();
    let get = |k: &[u8]| -> Vec<(usize, u64)> {
        v.files_for_get(k).map(|(l, f)| (l, f.number.0)).collect()
    };
    assert_eq!(get(b"c"), vec![(0, 12), (0, 10), (1, 20), (2, 30)]);
    assert_eq!(get(b"a"), vec![(0, 13), (0, 10), (1, 20)]);
    assert_eq!(get(b"l"), vec![(0, 11), (0, 10), (2, 30)]);
    // The empty key is only in the L1 file starting at "".
    assert_eq!(get(b""), vec![(1, 20)]);
    // Between L1 files: "ca" is after [""..c] and before [d..h].
    assert_eq!(get(b"ca"), vec![(0, 12), (0, 10), (2, 30)]);
    assert_eq!(get(b"\xff"), vec![(1, 22)]);
    assert_eq!(get(b"\xff\xff"), vec![(1, 22)]);
    assert_eq!(get(b"\xff\xff\x00"), Vec::<(usize, u64)>::new());
    assert_eq!(Version::empty().files_for_get(b"a").count(), 0);
}

#[test]
fn overlapping_files_respects_bounds_on_every_level() {
    let v = sample();
    let o =
        |level, lo: Option<&[u8]>, hi: Option<&[u8]>| numbers(&v.overlapping_files(level, lo, hi));
    assert_eq!(o(0, None, None), vec![12, 13, 11, 10]);
    assert_eq!(o(0, Some(b"n"), None), vec![11]);
    assert_eq!(o(0, None, Some(b"b")), vec![13, 10]);
    assert_eq!(o(1, None, None), vec![20, 21, 22]);
    assert_eq!(o(1, Some(b"c"), Some(b"d")), vec![20, 21]);
    assert_eq!(o(1, Some(b"ca"), Some(b"cz")), Vec::<u64>::new());
    assert_eq!(o(1, Some(b"i"), None), vec![22]);
    assert_eq!(o(1, None, Some(b"")), vec![20]);
    assert_eq!(o(1, Some(b"\xff\xff"), Some(b"\xff\xff")), vec![22]);
    assert_eq!(o(1, Some(b"\xff\xff\x00"), None), Vec::<u64>::new());
    assert_eq!(o(2, Some(b"y"), None), Vec::<u64>::new());
    assert_eq!(o(6, None, None), Vec::<u64>::new());
}

#[test]
fn applying_edits_adds_deletes_and_moves_files() {
    let v = sample();
    // Delete two L0 files and move an L1 file down to L3 in one edit.
    let mut e = VersionEdit::default();
    e.delete_file(0, FileNumber(10));
    e.delete_file(0, FileNumber(11));
    e.delete_file(1, FileNumber(22));
    let moved = v.files(1)[2].as_ref().clone();
    e.add_file(3, moved);
    e.add_file(1, table(23, b"i", b"j", (2, 3)));
    let w = v.apply(&e).expect("edit applies");
    assert_eq!(numbers(w.files(0)), vec![12, 13]);
    assert_eq!(numbers(w.files(1)), vec![20, 21, 23]);
    assert_eq!(numbers(w.files(3)), vec![22]);
    // The base version is untouched.
    assert_eq!(v, sample());
}

#[test]
fn applying_an_edit_that_breaks_the_rules_is_an_error() {
    let v = sample();
    let bad = |e: VersionEdit| v.apply(&e).expect_err("edit must be rejected");
    let mut e = VersionEdit::default();
    e.delete_file(0, FileNumber(99));
    assert!(bad(e).contains("not in level 0"));
    let mut e = VersionEdit::default();
    e.delete_file(1, FileNumber(10)); // exists, but in L0
    assert!(bad(e).contains("not in level 1"));
    let mut e = VersionEdit::default();
    e.add_file(4, table(30, b"a", b"b", (1, 1)));
    assert!(bad(e).contains("already in level 2"));
    let mut e = VersionEdit::default();
    e.add_file(1, table(40, b"g", b"i", (1, 1))); // overlaps [d..h]
    assert!(bad(e).contains("overlap"));
    let mut e = VersionEdit::default();
    e.add_file(1, table(41, b"h", b"h", (1, 1))); // shares user key "h" with [d..h]
    assert!(bad(e).contains("overlap"));
    let mut e = VersionEdit::default();
    e.add_file(5, table(42, b"z", b"a", (1, 1))); // smallest after largest
    assert!(bad(e).contains("smallest key"));
    let mut e = VersionEdit::default();
    e.add_file(0, table(43, b"a", b"b", (5, 1)));
    assert!(bad(e).contains("smallest_seqno"));
    let mut e = VersionEdit::default();
    e.deleted_files.push((NUM_LEVELS, FileNumber(10)));
    assert!(bad(e).contains("level"));
    let mut e = VersionEdit::default();
    e.new_files
        .push((NUM_LEVELS, table(44, b"a", b"b", (1, 1))));
    assert!(bad(e).contains("level"));
}

#[test]
fn check_invariants_reports_hand_built_damage() {
    let mut v = sample();
    v.levels[1].swap(0, 1);
    v.levels[0].swap(0, 3);
    let dup = Arc::clone(&v.levels[2][0]);
    v.levels[4].push(dup);
    let problems = v.check_invariants();
    // Two L0 order breaks, one L1 order break, one duplicate.
    assert_eq!(problems.len(), 4, "{problems:?}");
    v.levels.pop();
    assert_eq!(v.check_invariants().len(), 5);
}

// ---- VersionSet ----

fn tempdir() -> Result<tempfile::TempDir> {
    tempfile::tempdir().map_err(io)
}

/// Applies three edits to a fresh set: a flush, a second flush, a compaction into L1.
/// Returns the manifest length after each edit.
fn apply_history(set: &mut VersionSet) -> Result<Vec<u64>> {
    let mut lens = Vec::new();
    let manifest_len = |set: &VersionSet| -> Result<u64> {
        let path = filename::manifest_path(&dir_of(set), set.manifest_number());
        Ok(std::fs::metadata(&path).map_err(io)?.len())
    };
    let wal = set.new_file_number();
    let t1 = set.new_file_number();
    let mut e = VersionEdit {
        log_number: Some(wal),
        ..Default::default()
    };
    e.add_file(0, table(t1.0, b"a", b"m", (1, 50)));
    set.set_last_seqno(SeqNo(50));
    set.log_and_apply(e)?;
    lens.push(manifest_len(set)?);

    let wal2 = set.new_file_number();
    let t2 = set.new_file_number();
    let mut e = VersionEdit {
        log_number: Some(wal2),
        ..Default::default()
    };
    e.add_file(0, table(t2.0, b"f", b"z", (51, 90)));
    set.log_and_apply(e)?;
    lens.push(manifest_len(set)?);

    let t3 = set.new_file_number();
    let t4 = set.new_file_number();
    let mut e = VersionEdit::default();
    e.delete_file(0, t1);
    e.delete_file(0, t2);
    e.add_file(1, table(t3.0, b"a", b"k", (1, 90)));
    e.add_file(1, table(t4.0, b"l", b"z", (3, 88)));
    set.set_last_seqno(SeqNo(95));
    set.log_and_apply(e)?;
    lens.push(manifest_len(set)?);
    Ok(lens)
}

fn dir_of(set: &VersionSet) -> std::path::PathBuf {
    set.dir().to_owned()
}

/// The observable state of a set.
fn state(set: &VersionSet) -> (Arc<Version>, FileNumber, SeqNo) {
    (set.current(), set.log_number(), set.last_seqno())
}

#[test]
fn create_new_then_recover_gives_an_empty_database() -> Result<()> {
    let dir = tempdir()?;
    let set = VersionSet::create_new(&crate::fs::os(), dir.path())?;
    assert_eq!(set.manifest_number(), FileNumber(1));
    assert_eq!(set.next_file_number(), FileNumber(2));
    assert_eq!(
        manifest::read_current(&crate::fs::OsFs, dir.path())?,
        FileNumber(1)
    );
    drop(set);
    let set = VersionSet::recover(&crate::fs::os(), dir.path())?;
    assert_eq!(set.current().num_files(), 0);
    assert_eq!(set.last_seqno(), SeqNo::ZERO);
    assert_eq!(set.log_number(), FileNumber(0));
    assert_eq!(set.manifest_number(), FileNumber(2));
    assert_eq!(
        manifest::read_current(&crate::fs::OsFs, dir.path())?,
        FileNumber(2)
    );
    assert!(!filename::manifest_path(dir.path(), FileNumber(1)).exists());
    Ok(())
}

#[test]
fn create_new_overwrites_a_manifest_left_without_current() -> Result<()> {
    let dir = tempdir()?;
    std::fs::write(filename::manifest_path(dir.path(), FileNumber(1)), b"junk").map_err(io)?;
    drop(VersionSet::create_new(&crate::fs::os(), dir.path())?);
    let set = VersionSet::recover(&crate::fs::os(), dir.path())?;
    assert_eq!(set.current().num_files(), 0);
    Ok(())
}

#[test]
fn create_new_refuses_a_directory_with_current() -> Result<()> {
    let dir = tempdir()?;
    drop(VersionSet::create_new(&crate::fs::os(), dir.path())?);
    let err = VersionSet::create_new(&crate::fs::os(), dir.path()).expect_err("CURRENT exists");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    Ok(())
}

#[test]
fn log_and_apply_then_recover_restores_the_state() -> Result<()> {
    let dir = tempdir()?;
    let mut set = VersionSet::create_new(&crate::fs::os(), dir.path())?;
    apply_history(&mut set)?;
    let before = state(&set);
    let next = set.next_file_number();
    assert_eq!(numbers(before.0.files(1)).len(), 2);
    assert_eq!(before.2, SeqNo(95));
    drop(set);

    let set = VersionSet::recover(&crate::fs::os(), dir.path())?;
    assert_eq!(state(&set), before);
    assert!(set.next_file_number() > next);
    assert!(set.manifest_number() >= next);
    // A second recovery (from the snapshot manifest) gives the same again.
    drop(set);
    let set = VersionSet::recover(&crate::fs::os(), dir.path())?;
    assert_eq!(state(&set), before);
    Ok(())
}

#[test]
fn recover_tolerates_a_torn_last_record_at_every_byte() -> Result<()> {
    let dir = tempdir()?;
    let mut set = VersionSet::create_new(&crate::fs::os(), dir.path())?;
    let lens = apply_history(&mut set)?;
    let manifest = filename::manifest_path(dir.path(), set.manifest_number());
    drop(set);
    let full = std::fs::read(&manifest).map_err(io)?;
    let (start, end) = (lens[1], lens[2]);
    assert_eq!(full.len() as u64, end);

    let recover_cut = |cut: u64| -> Result<VersionSet> {
        let d = tempdir()?;
        let cut = usize::try_from(cut).map_err(|e| Error::InvalidArgument(e.to_string()))?;
        let name = filename::manifest_path(d.path(), FileNumber(1));
        std::fs::write(&name, &full[..cut]).map_err(io)?;
        manifest::set_current(&crate::fs::OsFs, d.path(), FileNumber(1))?;
        let s = VersionSet::recover(&crate::fs::os(), d.path())
            .map_err(|e| Error::InvalidArgument(format!("cut at {cut}: {e}")))?;
        // Recovery wrote a fresh manifest; the torn one is gone.
        assert_ne!(s.manifest_number(), FileNumber(1));
        assert!(!name.exists());
        Ok(s)
    };
    // Cut exactly before the last record: the history without its last edit.
    let expected = state(&recover_cut(start)?);
    assert_eq!(numbers(expected.0.files(0)).len(), 2);
    for cut in start + 1..end {
        let s = recover_cut(cut)?;
        assert_eq!(state(&s), expected, "cut at {cut}");
    }
    Ok(())
}
#[test]
fn recover_reports_a_flipped_bit_in_a_middle_record_as_corruption() -> Result<()> {
    let dir = tempdir()?;
    let mut set = VersionSet::create_new(&crate::fs::os(), dir.path())?;
    let lens = apply_history(&mut set)?;
    let manifest = filename::manifest_path(dir.path(), set.manifest_number());
    drop(set);
    let mut bytes = std::fs::read(&manifest).map_err(io)?;
    // The last byte of the second edit's record (a payload byte).
    let pos = usize::try_from(lens[1] - 1).map_err(|e| Error::InvalidArgument(e.to_string()))?;
    bytes[pos] ^= 0x10;
    std::fs::write(&manifest, &bytes).map_err(io)?;
    let err = VersionSet::recover(&crate::fs::os(), dir.path()).expect_err("flipped bit");
    match err {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(file, manifest);
            assert!(offset >= lens[0] && offset < lens[1], "offset {offset}");
        }
        other => panic!("expected Corruption, got {other}"),
    }
    // The damaged manifest is left alone for inspection.
    assert!(manifest.exists());
    Ok(())
}

#[test]
fn recover_reports_missing_or_garbage_current_as_corruption() -> Result<()> {
    let dir = tempdir()?;
    let current = dir.path().join(filename::CURRENT);
    let is_current_corruption =
        |e: Error| matches!(e, Error::Corruption { ref file, .. } if *file == current);

    let err = VersionSet::recover(&crate::fs::os(), dir.path()).expect_err("no CURRENT");
    assert!(is_current_corruption(err));

    drop(VersionSet::create_new(&crate::fs::os(), dir.path())?);
    std::fs::write(&current, b"garbage\n").map_err(io)?;
    assert!(is_current_corruption(
        VersionSet::recover(&crate::fs::os(), dir.path()).expect_err("garbage")
    ));

    std::fs::write(&current, b"MANIFEST-000099\n").map_err(io)?;
    assert!(is_current_corruption(
        VersionSet::recover(&crate::fs::os(), dir.path()).expect_err("no manifest")
    ));

    // The manifest exists, but CURRENT spells its name otherwise than its number gives.
    manifest::set_current(&crate::fs::OsFs, dir.path(), FileNumber(1))?;
    drop(VersionSet::recover(&crate::fs::os(), dir.path())?);
    manifest::set_current(&crate::fs::OsFs, dir.path(), FileNumber(1))?;
    for other in [
        &b"MANIFEST-1\n"[..],
        b"MANIFEST-0000001\n",
        b"MANIFEST-000001 \n",
    ] {
        std::fs::write(&current, other).map_err(io)?;
        assert!(is_current_corruption(
            VersionSet::recover(&crate::fs::os(), dir.path()).expect_err("not the name")
        ));
    }
    Ok(())
}

/// Writes a manifest holding `edits` as records and points CURRENT at it.
fn write_manifest(dir: &Path, edits: &[Vec<u8>]) -> Result<std::path::PathBuf> {
    let path = filename::manifest_path(dir, FileNumber(1));
    let mut w = crate::wal::Writer::create(&crate::fs::OsFs, &path)?;
    for e in edits {
        w.add_record(e)?;
    }
    w.sync()?;
    manifest::set_current(&crate::fs::OsFs, dir, FileNumber(1))?;
    Ok(path)
}

fn encoded(e: &VersionEdit) -> Vec<u8> {
    let mut buf = Vec::new();
    e.encode(&mut buf);
    buf
}

#[test]
fn recover_rejects_edits_that_do_not_decode_or_apply() -> Result<()> {
    let snapshot = VersionEdit {
        log_number: Some(FileNumber(0)),
        next_file_number: Some(FileNumber(2)),
        last_seqno: Some(SeqNo(0)),
        ..Default::default()
    };
    let mut delete_missing = VersionEdit::default();
    delete_missing.delete_file(0, FileNumber(7));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("level 7", vec![0x04, 0x07, 0x01]),
        ("unknown tag", vec![0x63, 0x01]),
        ("truncated", vec![0x01]),
        ("does not apply", encoded(&delete_missing)),
    ];
    for (what, bad) in cases {
        let dir = tempdir()?;
        let first = encoded(&snapshot);
        let path = write_manifest(dir.path(), &[first, bad])?;
        let err = VersionSet::recover(&crate::fs::os(), dir.path()).expect_err(what);
        assert!(
            matches!(err, Error::Corruption { ref file, offset, .. } if *file == path && offset > 0),
            "{what}: {err}"
        );
    }

    // A manifest that never sets the counters.
    let dir = tempdir()?;
    let path = write_manifest(dir.path(), &[encoded(&VersionEdit::default())])?;
    let err = VersionSet::recover(&crate::fs::os(), dir.path()).expect_err("no counters");
    assert!(
        matches!(err, Error::Corruption { ref file, .. } if *file == path),
        "{err}"
    );
    Ok(())
}

#[test]
fn recover_raises_the_counters_above_files_on_disk() -> Result<()> {
    let dir = tempdir()?;
    let mut set = VersionSet::create_new(&crate::fs::os(), dir.path())?;
    apply_history(&mut set)?;
    drop(set);
    // A WAL created after the last edit, and a stray table.
    std::fs::write(filename::wal_path(dir.path(), FileNumber(50)), b"").map_err(io)?;
    std::fs::write(filename::table_path(dir.path(), FileNumber(40)), b"").map_err(io)?;
    let mut set = VersionSet::recover(&crate::fs::os(), dir.path())?;
    assert!(set.manifest_number() > FileNumber(50));
    assert!(set.new_file_number() > set.manifest_number());
    Ok(())
}

#[test]
fn log_and_apply_rejects_bad_edits_and_keeps_the_state() -> Result<()> {
    let dir = tempdir()?;
    let mut set = VersionSet::create_new(&crate::fs::os(), dir.path())?;
    apply_history(&mut set)?;
    let before = state(&set);

    let mut e = VersionEdit::default();
    e.delete_file(2, FileNumber(3));
    let err = set.log_and_apply(e).expect_err("missing file");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");

    let mut e = VersionEdit::default();
    e.add_file(0, table(10_000, b"a", b"b", (1, 1)));
    let err = set.log_and_apply(e).expect_err("number never allocated");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");

    let e = VersionEdit {
        log_number: Some(FileNumber(1)),
        ..Default::default()
    };
    let err = set.log_and_apply(e).expect_err("log number backwards");
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(state(&set), before);

    // Still usable, and nothing of the rejected edits reached the manifest.
    let n = set.new_file_number();
    let mut e = VersionEdit::default();
    e.add_file(0, table(n.0, b"q", b"r", (96, 97)));
    set.log_and_apply(e)?;
    assert_eq!(
        set.last_seqno(),
        SeqNo(97),
        "raised to the new table's largest seqno"
    );
    let after = state(&set);
    drop(set);
    assert_eq!(
        state(&VersionSet::recover(&crate::fs::os(), dir.path())?),
        after
    );
    Ok(())
}

#[test]
fn rollover_starts_a_new_manifest_and_keeps_the_state() -> Result<()> {
    let dir = tempdir()?;
    let mut set = VersionSet::create_new(&crate::fs::os(), dir.path())?;
    set.set_max_manifest_size(150);
    let mut manifests = vec![set.manifest_number()];
    for i in 0..20_u64 {
        let n = set.new_file_number();
        let key = format!("k{i:03}");
        let mut e = VersionEdit::default();
        e.add_file(0, table(n.0, key.as_bytes(), key.as_bytes(), (i, i)));
        set.log_and_apply(e)?;
        if manifests.last() != Some(&set.manifest_number()) {
            manifests.push(set.manifest_number());
        }
    }
    assert!(manifests.len() >= 3, "{manifests:?}");
    assert_eq!(
        manifest::read_current(&crate::fs::OsFs, dir.path())?,
        set.manifest_number()
    );
    for old in &manifests[..manifests.len() - 1] {
        assert!(!filename::manifest_path(dir.path(), *old).exists());
    }
    assert!(set.live_files().contains(&set.manifest_number()));
    let before = state(&set);
    assert_eq!(before.0.num_files(), 20);
    drop(set);
    assert_eq!(
        state(&VersionSet::recover(&crate::fs::os(), dir.path())?),
        before
    );
    Ok(())
}

#[test]
fn live_files_are_the_version_tables_and_the_manifest() -> Result<()> {
    let dir = tempdir()?;
    let mut set = VersionSet::create_new(&crate::fs::os(), dir.path())?;
    apply_history(&mut set)?;
    let mut expected: Vec<FileNumber> = set.current().all_file_numbers().collect();
    expected.push(set.manifest_number());
    let mut live: Vec<FileNumber> = set.live_files().into_iter().collect();
    live.sort();
    expected.sort();
    assert_eq!(live, expected);
    assert_eq!(live.len(), 3);
    // The tables deleted by the compaction are not live; the WALs never are.
    assert!(!set.live_files().contains(&FileNumber(3)));
    assert!(!set.live_files().contains(&set.log_number()));
    Ok(())
}

#[test]
fn a_failed_manifest_write_poisons_the_set() -> Result<()> {
    let dir = tempdir()?;
    let db = dir.path().join("db");
    std::fs::create_dir(&db).map_err(io)?;
    let mut set = VersionSet::create_new(&crate::fs::os(), &db)?;
    apply_history(&mut set)?;
    let before = state(&set);
    // Force a rollover into a directory that no longer exists.
    set.set_max_manifest_size(0);
    std::fs::remove_dir_all(&db).map_err(io)?;
    let n = set.new_file_number();
    let mut e = VersionEdit::default();
    e.add_file(0, table(n.0, b"a", b"b", (100, 100)));
    let err = set.log_and_apply(e.clone()).expect_err("directory is gone");
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert_eq!(state(&set), before);
    let err = set.log_and_apply(e).expect_err("poisoned");
    assert!(matches!(err, Error::Poisoned { .. }), "{err}");
    Ok(())
}

/// A small edit, an edit spanning several WAL blocks, then a small edit. Returns the manifest
/// path and its length after each of the three.
fn multi_block_history(dir: &Path) -> Result<(std::path::PathBuf, Vec<u64>)> {
    let mut set = VersionSet::create_new(&crate::fs::os(), dir)?;
    let path = filename::manifest_path(dir, set.manifest_number());
    let len = || -> Result<u64> { Ok(std::fs::metadata(&path).map_err(io)?.len()) };
    let mut lens = Vec::new();
    let n = set.new_file_number();
    let mut e = VersionEdit::default();
    e.add_file(0, table(n.0, b"a", b"b", (1, 1)));
    set.log_and_apply(e)?;
    lens.push(len()?);
    let mut e = VersionEdit::default();
    for i in 0..2000 {
        let n = set.new_file_number();
        let key = format!("key{i:05}-padding-padding");
        e.add_file(1, table(n.0, key.as_bytes(), key.as_bytes(), (2, 2)));
    }
    set.log_and_apply(e)?;
    lens.push(len()?);
    let n = set.new_file_number();
    let mut e = VersionEdit::default();
    e.add_file(0, table(n.0, b"c", b"d", (3, 3)));
    set.log_and_apply(e)?;
    lens.push(len()?);
    assert!(
        lens[1] - lens[0] > 2 * crate::wal::BLOCK_SIZE as u64,
        "{lens:?}"
    );
    Ok((path, lens))
}

fn usize_of(n: u64) -> usize {
    usize::try_from(n).expect("test offsets fit in usize")
}

#[test]
fn recover_tolerates_a_torn_multi_block_last_record() -> Result<()> {
    let dir = tempdir()?;
    let (path, lens) = multi_block_history(dir.path())?;
    let full = std::fs::read(&path).map_err(io)?;
    // Cuts at every WAL block boundary (and its neighbours) plus a stride through the record.
    let mut cuts: Vec<u64> = (lens[0] + 1..lens[1]).step_by(9_973).collect();
    for b in (0..=lens[1]).step_by(crate::wal::BLOCK_SIZE).skip(1) {
        cuts.extend(
            [b - 1, b, b + 1, b + 7, b + 8]
                .into_iter()
                .filter(|c| *c > lens[0] && *c < lens[1]),
        );
    }
    for cut in cuts {
        let d = tempdir()?;
        std::fs::write(
            filename::manifest_path(d.path(), FileNumber(1)),
            &full[..usize_of(cut)],
        )
        .map_err(io)?;
        manifest::set_current(&crate::fs::OsFs, d.path(), FileNumber(1))?;
        let s = VersionSet::recover(&crate::fs::os(), d.path())
            .map_err(|e| Error::InvalidArgument(format!("cut at {cut}: {e}")))?;
        assert_eq!(s.current().num_files(), 1, "cut at {cut}");
    }
    Ok(())
}

#[test]
fn recover_tolerates_a_zero_filled_or_damaged_last_record() -> Result<()> {
    // A power loss can leave the file grown but the last append's bytes zero or garbage.
    for fill in [None, Some(0x00_u8), Some(0x5a)] {
        let dir = tempdir()?;
        let mut set = VersionSet::create_new(&crate::fs::os(), dir.path())?;
        let lens = apply_history(&mut set)?;
        let path = filename::manifest_path(dir.path(), set.manifest_number());
        drop(set);
        let mut bytes = std::fs::read(&path).map_err(io)?;
        let last = &mut bytes[usize_of(lens[1])..];
        match fill {
            Some(b) => last.fill(b),
            None => last[last.len() / 2] ^= 0x01,
        }
        std::fs::write(&path, &bytes).map_err(io)?;
        let s = VersionSet::recover(&crate::fs::os(), dir.path())?;
        assert_eq!(s.current().num_files(), 2, "fill {fill:?}");
    }
    Ok(())
}

#[test]
fn recover_finds_intact_records_hidden_after_damage_in_a_multi_block_edit() -> Result<()> {
    // Flip a byte in the big edit's first fragment, then in its last fragment. In the second
    // case the WAL reader skips the rest of that block, which holds the next (intact) record:
    // the manifest reader must still see it and report corruption.
    for pos in [|l: &[u64]| l[0] + 20, |l: &[u64]| l[1] - 1] {
        let dir = tempdir()?;
        let (path, lens) = multi_block_history(dir.path())?;
        let mut bytes = std::fs::read(&path).map_err(io)?;
        let pos = usize_of(pos(&lens));
        bytes[pos] ^= 0x40;
        std::fs::write(&path, &bytes).map_err(io)?;
        let err = VersionSet::recover(&crate::fs::os(), dir.path())
            .expect_err("damage before an intact record");
        assert!(
            matches!(err, Error::Corruption { ref file, offset, .. } if *file == path && offset == lens[0]),
            "flip at {pos}: {err}"
        );
    }
    Ok(())
}

#[test]
fn versions_are_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    fn assert_send<T: Send>() {}
    assert_send_sync::<Version>();
    assert_send_sync::<FileMeta>();
    assert_send::<VersionSet>();
}
