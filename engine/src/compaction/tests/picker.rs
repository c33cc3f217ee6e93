//! Picker tests over hand-built versions.

use std::collections::HashSet;
use std::sync::Arc;

use crate::compaction::picker::{
    CompactionReason, LevelTargets, MAX_COMPACTION_FACTOR, level_scores, level_scores_with,
    pending_compaction_bytes, pick_bottom_rewrite, pick_compaction, pick_compaction_with,
    pick_range_compaction, pick_range_deletion, pick_small_table_merge, pick_tombstone_compaction,
    subcompaction_boundaries,
};
use crate::options::Options;
use crate::types::{FileNumber, InternalKey, SeqNo, ValueKind};
use crate::version::{FileMeta, NUM_LEVELS, Version, VersionEdit};

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;

/// A table `[lo, hi]` of `size` bytes with seqnos `seqs`.
fn t(number: u64, lo: &str, hi: &str, size: u64, seqs: (u64, u64)) -> FileMeta {
    FileMeta {
        number: FileNumber(number),
        size,
        smallest: InternalKey::new(lo.as_bytes().to_vec(), SeqNo(seqs.1), ValueKind::Put),
        largest: InternalKey::new(hi.as_bytes().to_vec(), SeqNo(seqs.0), ValueKind::Put),
        smallest_seqno: SeqNo(seqs.0),
        largest_seqno: SeqNo(seqs.1),
        num_entries: 100,
        num_deletions: 0,
        global_seqno: None,
        table_id: None,
    }
}

fn version(files: Vec<(usize, FileMeta)>) -> Version {
    let mut edit = VersionEdit::default();
    for (level, f) in files {
        edit.add_file(level, f);
    }
    match Version::empty().apply(&edit) {
        Ok(v) => v,
        Err(e) => panic!("bad test version: {e}"),
    }
}

fn numbers(files: &[Arc<FileMeta>]) -> Vec<u64> {
    let mut n: Vec<u64> = files.iter().map(|f| f.number.0).collect();
    n.sort_unstable();
    n
}

/// Small sizes so tests read easily: L1 target 1000 bytes, tables cut at 100 bytes.
fn small() -> Options {
    Options {
        max_bytes_for_level_base: 1000,
        target_file_size: 100,
        level_size_multiplier: 10,
        level0_file_num_compaction_trigger: 4,
        ..Options::default()
    }
}

fn none() -> HashSet<FileNumber> {
    HashSet::new()
}

#[test]
fn level0_below_trigger_needs_no_compaction() {
    let v = version(vec![
        (0, t(1, "a", "z", 10, (1, 1))),
        (0, t(2, "a", "z", 10, (2, 2))),
        (0, t(3, "a", "z", 10, (3, 3))),
    ]);
    assert!(pick_compaction(&v, &small(), &none()).is_none());
    assert!((level_scores(&v, &small())[0] - 0.75).abs() < 1e-9);
}

#[test]
fn level0_trigger_compacts_all_overlapping_tables_to_the_base_level() {
    let v = version(vec![
        (0, t(1, "a", "m", 10, (1, 1))),
        (0, t(2, "k", "z", 10, (2, 2))),
        (0, t(3, "c", "d", 10, (3, 3))),
        (0, t(4, "b", "x", 10, (4, 4))),
    ]);
    let task = pick_compaction(&v, &small(), &none()).expect_task();
    assert_eq!(task.level, 0);
    // Empty database: dynamic targets send L0 straight to the last level.
    assert_eq!(task.output_level, NUM_LEVELS - 1);
    assert_eq!(numbers(&task.inputs), vec![1, 2, 3, 4]);
    assert_eq!(task.reason, CompactionReason::Level0);
    assert!(!task.trivial_move);
    assert!(task.bottommost);
    assert!((task.score - 1.0).abs() < 1e-9);
}

#[test]
fn level0_table_moves_only_with_every_older_overlapping_table() {
    // Oldest first: 1 [a..c], 2 [m..p], 3 [c..f] (overlaps 1), 4 [e..g] (overlaps 3),
    // 5 [q..r]. Components: {1, 3, 4}, {2}, {5}.
    let v = version(vec![
        (0, t(1, "a", "c", 10, (1, 1))),
        (0, t(2, "m", "p", 10, (2, 2))),
        (0, t(3, "c", "f", 10, (3, 3))),
        (0, t(4, "e", "g", 10, (4, 4))),
        (0, t(5, "q", "r", 10, (5, 5))),
    ]);
    let task = pick_compaction(&v, &small(), &none()).expect_task();
    assert_eq!(numbers(&task.inputs), vec![1, 3, 4]);
    // Inputs stay in L0 order (newest first).
    let order: Vec<u64> = task.inputs.iter().map(|f| f.number.0).collect();
    assert_eq!(order, vec![4, 3, 1]);
    assert_l0_closed(&v, &task.inputs);

    // With the base-level tables under component {1, 3, 4} busy, the picker moves another
    // component (they share no key, so the order rule holds).
    let v = version(vec![
        (0, t(1, "a", "c", 10, (1, 1))),
        (0, t(2, "m", "p", 10, (2, 2))),
        (0, t(3, "c", "f", 10, (3, 3))),
        (0, t(4, "e", "g", 10, (4, 4))),
        (0, t(5, "q", "r", 10, (5, 5))),
        (6, t(9, "a", "b", 10, (0, 0))),
    ]);
    let busy: HashSet<FileNumber> = [FileNumber(9)].into();
    let task = pick_compaction(&v, &small(), &busy).expect_task();
    // Both other components are small (below target_file_size / 8), so they merge together
    // rather than move one by one.
    assert_eq!(numbers(&task.inputs), vec![2, 5]);
    assert!(!task.trivial_move);
    assert_l0_closed(&v, &task.inputs);
}

#[test]
fn small_level0_components_merge_and_large_ones_move() {
    let opts = small();
    let big = opts.target_file_size;
    let tiny = opts.target_file_size / 100;
    // Four disjoint components with nothing under them: the tiny ones merge into new tables
    // (an open-write-close program flushes one tiny table per open), the big one moves.
    let v = version(vec![
        (0, t(1, "a", "b", tiny, (1, 1))),
        (0, t(2, "m", "n", big, (2, 2))),
        (0, t(3, "x", "y", tiny, (3, 3))),
        (0, t(4, "p", "q", tiny, (4, 4))),
        (6, t(9, "c", "d", big, (0, 0))),
    ]);
    let task = pick_compaction(&v, &opts, &none()).expect_task();
    assert_eq!(numbers(&task.inputs), vec![1, 3, 4]);
    assert!(!task.trivial_move);
    // The base-level table between them is rewritten with them (its range is inside theirs).
    assert_eq!(numbers(&task.output_inputs), vec![9]);

    let v = version(vec![
        (0, t(2, "m", "n", big, (2, 2))),
        (0, t(3, "x", "y", tiny, (3, 3))),
        (0, t(4, "p", "q", big, (4, 4))),
        (0, t(5, "s", "t", big, (5, 5))),
    ]);
    let task = pick_compaction(&v, &opts, &none()).expect_task();
    assert_eq!(numbers(&task.inputs), vec![2]);
    assert!(task.trivial_move);

    // A tiny component alone in level 0 (picked for its bytes or by a manual compaction)
    // still moves: there is nothing to merge it with.
    let v = version(vec![(0, t(3, "x", "y", tiny, (3, 3)))]);
    if let Some(task) = pick_compaction(&v, &opts, &none()) {
        assert!(task.trivial_move);
    }
}

/// Every L0 table outside `inputs` overlapping one of them must not exist.
fn assert_l0_closed(v: &Version, inputs: &[Arc<FileMeta>]) {
    let chosen: HashSet<FileNumber> = inputs.iter().map(|f| f.number).collect();
    for f in v.files(0) {
        if chosen.contains(&f.number) {
            continue;
        }
        for g in inputs {
            assert!(
                !f.overlaps(Some(&g.smallest.user_key), Some(&g.largest.user_key)),
                "L0 table {} overlaps input {} but was left behind",
                f.number,
                g.number
            );
        }
    }
}

#[test]
fn level0_components_sharing_base_tables_are_compacted_together() {
    // Components {1} [a..b] and {2} [d..e] both overlap base table 9 [a..z].
    let v = version(vec![
        (0, t(1, "a", "b", 10, (1, 1))),
        (0, t(2, "d", "e", 10, (2, 2))),
        (0, t(3, "d", "e", 10, (3, 3))),
        (0, t(4, "a", "b", 10, (4, 4))),
        (6, t(9, "a", "z", 10, (0, 0))),
    ]);
    let task = pick_compaction(&v, &small(), &none()).expect_task();
    assert_eq!(numbers(&task.inputs), vec![1, 2, 3, 4]);
    assert_eq!(numbers(&task.output_inputs), vec![9]);
}

#[test]
fn highest_scoring_level_is_compacted_first() {
    let opts = small();
    let fixed = LevelTargets::fixed(&opts);
    // Static targets: L1 1000, L2 10_000. L1 holds 1500 (1.5), L2 30_000 (3.0).
    let v = version(vec![
        (1, t(1, "a", "c", 700, (1, 1))),
        (1, t(2, "d", "f", 800, (2, 2))),
        (2, t(3, "a", "c", 15_000, (0, 0))),
        (2, t(4, "n", "z", 15_000, (0, 0))),
        (3, t(5, "a", "z", 100, (0, 0))),
    ]);
    let scores = level_scores_with(&v, &opts, &fixed, &none());
    assert!((scores[1] - 1.5).abs() < 1e-9 && (scores[2] - 3.0).abs() < 1e-9);
    let task = pick_compaction_with(&v, &opts, &fixed, &none()).expect_task();
    assert_eq!((task.level, task.output_level), (2, 3));
    assert_eq!(task.reason, CompactionReason::LevelSize);
    assert!((task.score - 3.0).abs() < 1e-9);
    // With L2 busy the next level over target goes: table 2 has no idle overlap below.
    let busy: HashSet<FileNumber> = [FileNumber(3), FileNumber(4)].into();
    let task = pick_compaction_with(&v, &opts, &fixed, &busy).expect_task();
    assert_eq!(task.level, 1);
    assert_eq!(numbers(&task.inputs), vec![2]);
}

#[test]
fn level_n_picks_the_table_with_the_smallest_overlap_ratio() {
    let opts = small();
    let fixed = LevelTargets::fixed(&opts);
    // L1 over target; table 2 overlaps 50 bytes below per 600 of its own, table 1 900 per 500.
    let v = version(vec![
        (1, t(1, "a", "c", 500, (1, 1))),
        (1, t(2, "d", "f", 600, (2, 2))),
        (2, t(3, "a", "b", 900, (0, 0))),
        (2, t(4, "e", "e", 50, (0, 0))),
    ]);
    let task = pick_compaction_with(&v, &opts, &fixed, &none()).expect_task();
    assert_eq!(numbers(&task.inputs), vec![2]);
    assert_eq!(numbers(&task.output_inputs), vec![4]);
    assert!(!task.trivial_move);
    assert!(task.bottommost);
}

#[test]
fn lone_table_with_no_overlap_below_is_moved_not_rewritten() {
    let opts = small();
    let fixed = LevelTargets::fixed(&opts);
    let v = version(vec![
        (1, t(1, "a", "c", 600, (1, 1))),
        (1, t(2, "d", "f", 600, (2, 2))),
        (2, t(3, "a", "b", 900, (0, 0))),
        (3, t(4, "e", "e", 50, (0, 0))),
    ]);
    let task = pick_compaction_with(&v, &opts, &fixed, &none()).expect_task();
    assert_eq!(numbers(&task.inputs), vec![2]);
    assert!(task.output_inputs.is_empty());
    assert!(task.trivial_move);
    assert_eq!(numbers(&task.grandparents), vec![4]);
    assert!(!task.bottommost);
}

#[test]
fn no_trivial_move_over_a_large_grandparent_overlap() {
    let opts = small();
    let fixed = LevelTargets::fixed(&opts);
    // Table 1 would land on 11 grandparent tables of 100 bytes: more than 10 * target.
    let mut files = vec![(1, t(1, "a", "z", 1500, (1, 1)))];
    for i in 0..11u64 {
        let k = format!("k{i:02}");
        files.push((3, t(10 + i, &k, &k, 100, (0, 0))));
    }
    let v = version(files);
    let task = pick_compaction_with(&v, &opts, &fixed, &none()).expect_task();
    assert!(task.output_inputs.is_empty());
    assert_eq!(task.grandparents.len(), 11);
    assert!(!task.trivial_move);
}

#[test]
fn busy_tables_are_never_picked() {
    let opts = small();
    let fixed = LevelTargets::fixed(&opts);
    let v = version(vec![
        (0, t(1, "a", "z", 10, (1, 1))),
        (0, t(2, "a", "z", 10, (2, 2))),
        (0, t(3, "a", "z", 10, (3, 3))),
        (0, t(4, "a", "z", 10, (4, 4))),
        (0, t(5, "a", "z", 10, (5, 5))),
    ]);
    // One L0 compaction at a time: a busy L0 table blocks L0 (and 4 idle tables remain).
    let busy: HashSet<FileNumber> = [FileNumber(1)].into();
    assert!(pick_compaction_with(&v, &opts, &fixed, &busy).is_none());

    let v = version(vec![
        (1, t(1, "a", "c", 600, (1, 1))),
        (1, t(2, "d", "f", 600, (2, 2))),
        (2, t(3, "a", "b", 10, (0, 0))),
        (2, t(4, "e", "e", 10, (0, 0))),
    ]);
    // Table 2's overlap below is busy: table 1 goes instead.
    let busy: HashSet<FileNumber> = [FileNumber(4)].into();
    let task = pick_compaction_with(&v, &opts, &fixed, &busy).expect_task();
    assert_eq!(numbers(&task.inputs), vec![1]);
    // Busy tables also drop out of the score: with table 1 busy, 600 idle bytes of 1000 is
    // under target.
    let busy: HashSet<FileNumber> = [FileNumber(1), FileNumber(4)].into();
    assert!(pick_compaction_with(&v, &opts, &fixed, &busy).is_none());
}

#[test]
fn range_compaction_takes_the_tables_overlapping_the_range() {
    let opts = small();
    let v = version(vec![
        (0, t(1, "a", "c", 10, (1, 1))),
        (0, t(2, "b", "k", 10, (2, 2))),
        (0, t(3, "x", "z", 10, (3, 3))),
        (1, t(4, "a", "d", 100, (0, 0))),
        (1, t(5, "e", "g", 100, (0, 0))),
        (1, t(6, "h", "j", 100, (0, 0))),
        (2, t(7, "f", "f", 100, (0, 0))),
    ]);
    // L0 [a..a]: table 1, grown by table 2 (overlaps 1); into the base level (L1 here).
    let task = pick_range_compaction(&v, &opts, 0, Some(b"a"), Some(b"a")).expect_task();
    assert_eq!(numbers(&task.inputs), vec![1, 2]);
    assert_eq!(task.output_level, 1);
    assert_eq!(numbers(&task.output_inputs), vec![4, 5, 6]);
    assert_eq!(task.reason, CompactionReason::Manual);
    // L1 [f..i]: tables 5 and 6 into L2.
    let task = pick_range_compaction(&v, &opts, 1, Some(b"f"), Some(b"i")).expect_task();
    assert_eq!(numbers(&task.inputs), vec![5, 6]);
    assert_eq!(numbers(&task.output_inputs), vec![7]);
    assert!(task.bottommost);
    // Unbounded L1 with no overlap for table 4 alone: the range is all three tables.
    let task = pick_range_compaction(&v, &opts, 1, None, None).expect_task();
    assert_eq!(numbers(&task.inputs), vec![4, 5, 6]);
    // Nothing in range, or the last level: no task.
    assert!(pick_range_compaction(&v, &opts, 1, Some(b"p"), Some(b"q")).is_none());
    assert!(pick_range_compaction(&v, &opts, NUM_LEVELS - 1, None, None).is_none());
}

#[test]
fn range_compaction_of_disjoint_tables_with_nothing_below_is_a_trivial_move() {
    let opts = small();
    let v = version(vec![
        (0, t(1, "a", "c", 10, (1, 1))),
        (0, t(2, "d", "f", 10, (2, 2))),
    ]);
    let task = pick_range_compaction(&v, &opts, 0, None, None).expect_task();
    assert_eq!(numbers(&task.inputs), vec![1, 2]);
    assert!(task.trivial_move);
}

#[test]
fn range_compaction_of_a_deep_level_is_bounded_in_bytes() {
    let opts = small();
    let max = MAX_COMPACTION_FACTOR * opts.target_file_size;
    let files: Vec<(usize, FileMeta)> = (0..40u64)
        .map(|i| {
            let k = format!("k{i:02}");
            (2, t(i + 1, &k, &k, 100, (0, 0)))
        })
        .collect();
    let v = version(files);
    let task = pick_range_compaction(&v, &opts, 2, None, None).expect_task();
    let bytes: u64 = task.inputs.iter().map(|f| f.size).sum();
    assert!(bytes >= max && bytes < max + 100, "{bytes} bytes picked");
    // The tables taken are the first ones in key order.
    assert_eq!(task.inputs[0].number, FileNumber(1));
}

#[test]
fn dynamic_targets_are_computed_from_the_last_level() {
    let opts = Options::default();
    let base = opts.max_bytes_for_level_base;
    // Empty: L0 goes to the last level.
    let empty = LevelTargets::dynamic(&Version::empty(), &opts);
    assert_eq!(empty.base_level(), NUM_LEVELS - 1);

    // 1 GiB in L6: L5 would be 102 MiB < 256 MiB, so L5 is the base level with the base size.
    let v = version(vec![(6, t(1, "a", "z", 1 << 30, (0, 0)))]);
    let targets = LevelTargets::dynamic(&v, &opts);
    assert_eq!(targets.base_level(), 5);
    assert_eq!(targets.target_bytes(5), base);
    assert_eq!(targets.target_bytes(6), (1 << 30) / 10 * 10);
    assert_eq!(targets.target_bytes(4), u64::MAX);

    // 40.8 GB in L6 (1.7 billion 24-byte entries): 4.08 GB, 408 MB, 40.8 MB -> base L3 with
    // targets 256 MiB, 408 MB, 4.08 GB, 40.8 GB.
    let size = 40_800_000_000u64;
    let v = version(vec![(6, t(1, "a", "z", size, (0, 0)))]);
    let targets = LevelTargets::dynamic(&v, &opts);
    assert_eq!(targets.base_level(), 3);
    let l3 = size / 10 / 10 / 10;
    assert_eq!(targets.target_bytes(3), base);
    assert_eq!(targets.target_bytes(4), (l3 * 10).max(base));
    assert_eq!(targets.target_bytes(5), l3 * 100);
    assert_eq!(targets.target_bytes(6), l3 * 1000);

    // Static targets for comparison.
    let fixed = LevelTargets::fixed(&opts);
    assert_eq!(fixed.base_level(), 1);
    assert_eq!(fixed.target_bytes(1), 256 * MIB);
    assert_eq!(fixed.target_bytes(3), 25_600 * MIB);
}

#[test]
fn dynamic_base_level_compacts_into_the_next_level_when_over_target() {
    let opts = Options::default();
    // L6 = 1 GiB, base L5 (target 256 MiB) holds 300 MiB: L5 scores above 1.
    let v = version(vec![
        (5, t(1, "a", "c", 150 * MIB, (5, 5))),
        (5, t(2, "d", "f", 150 * MIB, (6, 6))),
        (6, t(3, "a", "z", 1 << 30, (0, 0))),
    ]);
    let scores = level_scores(&v, &opts);
    assert!(scores[5] > 1.0, "{scores:?}");
    assert_eq!(scores[6], 0.0);
    let task = pick_compaction(&v, &opts, &none()).expect_task();
    assert_eq!((task.level, task.output_level), (5, 6));
    assert!(task.bottommost);
}

#[test]
fn level0_size_counts_toward_its_score() {
    let opts = small();
    // Two L0 tables, but 3000 bytes against a 1000-byte base target.
    let v = version(vec![
        (0, t(1, "a", "c", 1500, (1, 1))),
        (0, t(2, "a", "c", 1500, (2, 2))),
    ]);
    assert!((level_scores(&v, &opts)[0] - 3.0).abs() < 1e-9);
    assert!(pick_compaction(&v, &opts, &none()).is_some());
}

#[test]
fn pending_compaction_bytes_counts_the_excess_and_its_fanout() {
    let opts = small();
    // Within targets: nothing pending.
    let v = version(vec![(0, t(1, "a", "z", 10, (1, 1)))]);
    assert_eq!(pending_compaction_bytes(&v, &opts), 0);
    // L0 at the trigger: all of L0 plus the base level.
    let v = version(vec![
        (0, t(1, "a", "z", 10, (1, 1))),
        (0, t(2, "a", "z", 10, (2, 2))),
        (0, t(3, "a", "z", 10, (3, 3))),
        (0, t(4, "a", "z", 10, (4, 4))),
        (6, t(5, "a", "z", 500, (0, 0))),
    ]);
    assert_eq!(LevelTargets::dynamic(&v, &opts).base_level(), 6);
    assert_eq!(pending_compaction_bytes(&v, &opts), 40 + 500);
    // Base level L5 (target 1000) holds 3000 over an L6 of 9000: excess 2000 with fan-out
    // 9000 / 3000 -> 2000 * (1 + 3) = 8000.
    let v = version(vec![
        (5, t(1, "a", "m", 3000, (1, 1))),
        (6, t(2, "a", "z", 9000, (0, 0))),
    ]);
    let targets = LevelTargets::dynamic(&v, &opts);
    assert_eq!((targets.base_level(), targets.target_bytes(5)), (5, 1000));
    assert_eq!(pending_compaction_bytes(&v, &opts), 8000);
}

/// `Option<CompactionTask>` unwrapping with a readable failure.
trait ExpectTask {
    fn expect_task(self) -> crate::compaction::CompactionTask;
}

impl ExpectTask for Option<crate::compaction::CompactionTask> {
    fn expect_task(self) -> crate::compaction::CompactionTask {
        match self {
            Some(t) => t,
            None => panic!("expected a compaction task, got none"),
        }
    }
}

/// A level-0 task onto `base` (tables of level 1).
fn task_onto(base: Vec<FileMeta>) -> crate::compaction::CompactionTask {
    crate::compaction::CompactionTask {
        level: 0,
        output_level: 1,
        inputs: vec![Arc::new(t(1, "a", "z", 4 * MIB, (1, 9)))],
        output_inputs: base.into_iter().map(Arc::new).collect(),
        grandparents: Vec::new(),
        trivial_move: false,
        score: 1.0,
        reason: CompactionReason::Manual,
        bottommost: false,
    }
}

#[test]
fn subcompaction_bounds_split_the_output_level_bytes_evenly() {
    let equal = || {
        vec![
            t(10, "b", "c", MIB, (1, 1)),
            t(11, "d", "e", MIB, (1, 1)),
            t(12, "f", "g", MIB, (1, 1)),
            t(13, "h", "i", MIB, (1, 1)),
        ]
    };
    let keys = |bounds: Vec<Vec<u8>>| -> Vec<String> {
        bounds
            .into_iter()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .collect()
    };
    assert_eq!(
        keys(subcompaction_boundaries(&task_onto(equal()), 2)),
        ["f"]
    );
    assert_eq!(
        keys(subcompaction_boundaries(&task_onto(equal()), 4)),
        ["d", "f", "h"]
    );
    // Never more ranges than output-level tables.
    assert_eq!(
        keys(subcompaction_boundaries(&task_onto(equal()), 16)),
        ["d", "f", "h"]
    );
    // Off: one merge.
    assert!(subcompaction_boundaries(&task_onto(equal()), 1).is_empty());
    assert!(subcompaction_boundaries(&task_onto(vec![t(10, "b", "c", MIB, (1, 1))]), 4).is_empty());
    assert!(subcompaction_boundaries(&task_onto(Vec::new()), 4).is_empty());
    let mut moved = task_onto(equal());
    moved.trivial_move = true;
    assert!(subcompaction_boundaries(&moved, 4).is_empty());
    // Two tables of unequal size still make two ranges.
    let two = vec![
        t(10, "b", "c", MIB, (1, 1)),
        t(11, "d", "e", 3 * MIB, (1, 1)),
    ];
    assert_eq!(keys(subcompaction_boundaries(&task_onto(two), 2)), ["d"]);
    let five = (0..5u64)
        .map(|i| {
            let lo = format!("k{i}");
            t(10 + i, &lo, &format!("{lo}z"), MIB, (1, 1))
        })
        .collect();
    assert_eq!(keys(subcompaction_boundaries(&task_onto(five), 2)), ["k2"]);
    // By bytes, not by table count: the big first table is a range of its own.
    let skewed = vec![
        t(10, "b", "c", 6 * MIB, (1, 1)),
        t(11, "d", "e", MIB, (1, 1)),
        t(12, "f", "g", MIB, (1, 1)),
    ];
    assert_eq!(keys(subcompaction_boundaries(&task_onto(skewed), 2)), ["d"]);
}

#[test]
fn bottom_rewrite_takes_adjacent_last_level_tables_with_tombstones_written_before() {
    let opts = small();
    let last = NUM_LEVELS - 1;
    let with_deletes = |mut f: FileMeta| {
        f.num_deletions = 10;
        f
    };
    let v = version(vec![
        (last, with_deletes(t(1, "a", "b", 100, (0, 0)))),
        (last, with_deletes(t(2, "c", "d", 100, (0, 0)))),
        (last, t(3, "e", "f", 100, (0, 0))),
        (last, with_deletes(t(4, "g", "h", 100, (0, 0)))),
        (last, with_deletes(t(9, "i", "j", 100, (0, 0)))),
    ]);
    // A run stops at a table without tombstones (3): outputs must not span it.
    let task = pick_bottom_rewrite(&v, &opts, None, None, FileNumber(9)).expect_task();
    assert_eq!(numbers(&task.inputs), vec![1, 2]);
    assert_eq!((task.level, task.output_level), (last, last));
    assert!(task.output_inputs.is_empty() && !task.trivial_move && task.bottommost);
    assert_eq!(task.reason, CompactionReason::Manual);
    // The range limits the tables; table 9 is numbered at or after `before`.
    let task = pick_bottom_rewrite(&v, &opts, Some(b"e"), None, FileNumber(9)).expect_task();
    assert_eq!(numbers(&task.inputs), vec![4]);
    assert!(pick_bottom_rewrite(&v, &opts, Some(b"i"), None, FileNumber(9)).is_none());
    assert!(pick_bottom_rewrite(&v, &opts, Some(b"e"), Some(b"f"), FileNumber(99)).is_none());
    // The run is cut once it holds MAX_COMPACTION_FACTOR target files' bytes.
    let big = version(
        (0..MAX_COMPACTION_FACTOR + 5)
            .map(|i| {
                let k = format!("k{i:03}");
                (last, with_deletes(t(i + 1, &k, &k, 100, (0, 0))))
            })
            .collect(),
    );
    let task = pick_bottom_rewrite(&big, &opts, None, None, FileNumber(1000)).expect_task();
    assert_eq!(task.inputs.len() as u64, MAX_COMPACTION_FACTOR);
}

#[test]
fn range_deletion_takes_inside_tables_with_nothing_kept_below() {
    let v = version(vec![
        (6, t(1, "a", "c", 100, (0, 0))),
        (6, t(2, "d", "f", 100, (0, 0))),
        (6, t(3, "g", "h", 100, (0, 0))),
        (5, t(4, "b", "b", 100, (1, 1))),
        (5, t(5, "e", "e", 100, (1, 1))),
        (5, t(6, "i", "k", 100, (1, 1))),
        (4, t(8, "d", "g", 100, (2, 2))),
        (4, t(9, "l", "z", 100, (2, 2))),
        (0, t(7, "d", "d", 100, (3, 3))),
    ]);
    let picked: Vec<(usize, u64)> = pick_range_deletion(&v, b"b", b"m")
        .iter()
        .map(|(level, f)| (*level, f.number.0))
        .collect();
    // 1 and 9 reach outside the range; 4 lies above 1, which stays (an older "b" may be in
    // it); level 0 is never touched.
    assert_eq!(picked, vec![(6, 2), (6, 3), (5, 5), (5, 6), (4, 8)]);
    // The end is exclusive: a table ending at it stays.
    let picked = pick_range_deletion(&v, b"d", b"f");
    assert!(picked.is_empty(), "{picked:?}");
    assert!(pick_range_deletion(&v, b"x", b"y").is_empty());
}

#[test]
fn tombstone_compaction_moves_heavy_tables_down_and_rewrites_settled_last_level_ones() {
    let opts = small();
    let last = NUM_LEVELS - 1;
    let deletes = |mut f: FileMeta, n: u64| {
        f.num_deletions = n;
        f
    };
    let none: HashSet<FileNumber> = HashSet::new();
    // Nothing tombstone-heavy (fewer than a quarter of the entries): no task.
    let v = version(vec![
        (3, deletes(t(1, "a", "c", 100, (5, 5)), 24)),
        (last, deletes(t(2, "a", "z", 100, (9, 9)), 0)),
    ]);
    assert!(pick_tombstone_compaction(&v, &opts, &none, None).is_none());
    // A heavy table in a middle level goes into the next level.
    let v = version(vec![
        (3, deletes(t(1, "a", "c", 100, (5, 5)), 25)),
        (4, t(3, "b", "d", 100, (4, 4))),
        (last, deletes(t(2, "a", "z", 100, (9, 9)), 1)),
    ]);
    let task = pick_tombstone_compaction(&v, &opts, &none, Some(SeqNo(1))).expect_task();
    assert_eq!((task.level, task.output_level), (3, 4));
    assert_eq!(numbers(&task.inputs), vec![1]);
    assert_eq!(numbers(&task.output_inputs), vec![3]);
    assert_eq!(task.reason, CompactionReason::Tombstones);
    // Busy: the last level's table is next, once every snapshot sees its tombstones.
    let busy: HashSet<FileNumber> = [FileNumber(1)].into_iter().collect();
    assert!(pick_tombstone_compaction(&v, &opts, &busy, Some(SeqNo(9))).is_none());
    let task = pick_tombstone_compaction(&v, &opts, &busy, Some(SeqNo(10))).expect_task();
    assert_eq!((task.level, task.output_level), (last, last));
    assert!(task.bottommost && !task.trivial_move && task.output_inputs.is_empty());
    let task = pick_tombstone_compaction(&v, &opts, &busy, None).expect_task();
    assert_eq!(numbers(&task.inputs), vec![2]);
    // A heavy level-0 table: the level-0 compaction into the base level.
    let v = version(vec![
        (0, deletes(t(4, "a", "b", 100, (7, 7)), 100)),
        (last, t(2, "a", "z", 100, (1, 1))),
    ]);
    let task = pick_tombstone_compaction(&v, &opts, &none, None).expect_task();
    assert_eq!(task.level, 0);
    assert_eq!(numbers(&task.inputs), vec![4]);
}

#[test]
fn small_table_merge_takes_adjacent_small_idle_tables_of_one_level() {
    // target_file_size 100: small is below 12 bytes, a run holds at most 50 bytes.
    let opts = small();
    let last = NUM_LEVELS - 1;
    // One small table alone, or small tables split by a big one: nothing to merge.
    let v = version(vec![
        (last, t(1, "a", "b", 5, (1, 1))),
        (last, t(2, "c", "d", 90, (1, 1))),
        (last, t(3, "e", "f", 5, (1, 1))),
    ]);
    assert!(pick_small_table_merge(&v, &opts, &none()).is_none());
    // Three adjacent small tables after a big one, at the last level: merged in place.
    let v = version(vec![
        (last, t(2, "c", "d", 90, (1, 1))),
        (last, t(3, "e", "f", 5, (1, 1))),
        (last, t(4, "g", "h", 5, (2, 2))),
        (last, t(5, "i", "j", 5, (3, 3))),
    ]);
    let task = pick_small_table_merge(&v, &opts, &none()).expect_task();
    assert_eq!((task.level, task.output_level), (last, last));
    assert_eq!(numbers(&task.inputs), vec![3, 4, 5]);
    assert!(task.bottommost && !task.trivial_move && task.output_inputs.is_empty());
    assert_eq!(task.reason, CompactionReason::SmallTables);
    // A busy table splits the run: what is left on either side is a single table.
    let busy: HashSet<FileNumber> = [FileNumber(4)].into_iter().collect();
    assert!(pick_small_table_merge(&v, &opts, &busy).is_none());
    // A run stops at 50 bytes; the next run starts where it stopped.
    let v = version(vec![
        (last, t(1, "a", "a", 11, (1, 1))),
        (last, t(2, "b", "b", 11, (1, 1))),
        (last, t(3, "c", "c", 11, (1, 1))),
        (last, t(4, "d", "d", 11, (1, 1))),
        (last, t(5, "e", "e", 11, (1, 1))),
        (last, t(6, "f", "f", 11, (1, 1))),
    ]);
    let task = pick_small_table_merge(&v, &opts, &none()).expect_task();
    assert_eq!(numbers(&task.inputs), vec![1, 2, 3, 4]);
    // Upper levels first, and not bottommost over a deeper table; level 0 is never taken.
    let v = version(vec![
        (0, t(9, "a", "z", 5, (9, 9))),
        (0, t(10, "a", "z", 5, (10, 10))),
        (3, t(6, "k", "l", 5, (5, 5))),
        (3, t(7, "m", "n", 5, (6, 6))),
        (last, t(3, "e", "f", 5, (1, 1))),
        (last, t(4, "g", "h", 5, (2, 2))),
        (last, t(8, "n", "o", 90, (1, 1))),
    ]);
    let task = pick_small_table_merge(&v, &opts, &none()).expect_task();
    assert_eq!((task.level, task.output_level), (3, 3));
    assert_eq!(numbers(&task.inputs), vec![6, 7]);
    assert!(!task.bottommost);
    // With the default 64 MiB target, small stops at 512 KiB, not 8 MiB: tables a bulk load
    // cut at 1-7 MiB on purpose (a little under that once compressed) stay as they are.
    let defaults = Options::default();
    let v = version(vec![
        (last, t(1, "a", "b", 2 * MIB, (1, 1))),
        (last, t(2, "c", "d", 4 * MIB, (1, 1))),
        (last, t(3, "e", "f", 1000 * KIB, (1, 1))),
        (last, t(4, "g", "h", 512 * KIB, (1, 1))),
    ]);
    assert!(pick_small_table_merge(&v, &defaults, &none()).is_none());
    let v = version(vec![
        (last, t(1, "a", "b", 2 * MIB, (1, 1))),
        (last, t(2, "c", "d", 511 * KIB, (1, 1))),
        (last, t(3, "e", "f", 300, (1, 1))),
    ]);
    let task = pick_small_table_merge(&v, &defaults, &none()).expect_task();
    assert_eq!(numbers(&task.inputs), vec![2, 3]);
}
