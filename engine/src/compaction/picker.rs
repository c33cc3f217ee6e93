//! The compaction picker: a pure function from a [`Version`] (and the options) to the next
//! [`CompactionTask`], with no I/O, so tests and simulators can drive it (rules and numbers:
//! `docs/compaction.md`).
//!
//! - Targets ([`LevelTargets`]): level 1 and deeper get a target size in bytes. By default the
//!   targets are *dynamic* (RocksDB's `level_compaction_dynamic_level_bytes`): the last level's
//!   actual size divided by the multiplier, level by level upwards; the first level whose target
//!   falls to `max_bytes_for_level_base` or below is the *base level*, where level 0 compacts
//!   to. Levels above it stay empty.
//! - Scores ([`level_scores`]): L0 scores `max(files / level0_file_num_compaction_trigger,
//!   bytes / base target)`; a level `n >= 1` scores `bytes / target`; the last level scores 0.
//!   Files already being compacted are left out of the counts. A level scoring 1 or more needs
//!   compaction; the highest score goes first.
//! - Level 0 moves to the base level one *overlap component* at a time: a set of L0 tables
//!   closed under key-range overlap, so a table never moves down without every older L0 table
//!   that overlaps it. One L0 compaction runs at a time.
//! - Level `n >= 1` moves one table to `n + 1`, the one whose overlap with `n + 1` is the
//!   smallest relative to its size (RocksDB's `kMinOverlappingRatio`), which minimises the bytes
//!   rewritten per byte moved down.
//! - A task with nothing to merge at the output level (one input table, no overlapping table
//!   below, bounded overlap with the level under that) is a *trivial move*: the table changes
//!   level in the manifest and is not rewritten. Sequential loads are written about once.
//! - With nothing else due, tombstones are compacted ([`pick_tombstone_compaction`]), then
//!   runs of adjacent small tables are merged in place ([`pick_small_table_merge`]).

use std::collections::HashSet;
use std::sync::Arc;

use crate::options::Options;
use crate::types::{FileNumber, SeqNo};
use crate::version::{FileMeta, NUM_LEVELS, Version};

/// The deepest level.
const LAST_LEVEL: usize = NUM_LEVELS - 1;

/// A table's overlap with the level two below the compaction's input (the *grandparent*
/// level), in multiples of `target_file_size`, above which a trivial move is refused and a
/// compaction output is cut (LevelDB's `kMaxGrandParentOverlapBytes`). Bounds the cost of the
/// future compaction of each output table.
pub const MAX_GRANDPARENT_OVERLAP_FACTOR: u64 = 10;

/// Input bytes of one compaction, in multiples of `target_file_size`, past which the picker
/// stops adding optional inputs (LevelDB's `kExpandedCompactionByteSizeLimit`, RocksDB's
/// `max_compaction_bytes`). The inputs correctness requires are always taken.
pub const MAX_COMPACTION_FACTOR: u64 = 25;

/// An L0 overlap component below [`small_table_bytes`] is merged with the other small
/// components rather than moved down alone, so flushes of a few keys each (a program that
/// opens the database, writes a key and closes it, flushing the recovered WAL at every open)
/// do not pile up thousands of tiny tables in the base level. A flush of a default 64 MiB
/// memtable is far above it, so sequential loads still move.
pub const SMALL_TABLE_DIVISOR: u64 = 8;

/// Largest [`small_table_bytes`]: 512 KiB, half the smallest `strata load --table-size` (1
/// MiB; a load's tables end up a little under or over their size once compressed), so tables
/// a bulk load cut small on purpose (their filters build faster) are not merged again in the
/// background; only its last, partial table can be.
pub const SMALL_TABLE_MAX_BYTES: u64 = 512 << 10;

/// Tables (and level-0 components) below this many bytes are *small*: merged with their
/// small neighbours rather than left alone ([`SMALL_TABLE_DIVISOR`],
/// [`pick_small_table_merge`]). `target_file_size / 8`, at most [`SMALL_TABLE_MAX_BYTES`]
/// (512 KiB).
pub fn small_table_bytes(options: &Options) -> u64 {
    (options.target_file_size / SMALL_TABLE_DIVISOR).min(SMALL_TABLE_MAX_BYTES)
}

/// Why a compaction was picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionReason {
    /// Level 0 holds too many tables or too many bytes.
    Level0,
    /// A level `>= 1` is over its target size.
    LevelSize,
    /// Asked for through [`pick_range_compaction`] or [`pick_bottom_rewrite`]
    /// (`Db::compact_range`).
    Manual,
    /// Tombstones to move down or drop, with no level over its target
    /// ([`pick_tombstone_compaction`]).
    Tombstones,
    /// Adjacent small tables of one level merged in place, with nothing else due
    /// ([`pick_small_table_merge`]).
    SmallTables,
}

/// One compaction to run: tables of `level` (and the overlapping tables of `output_level`)
/// merged into new tables at `output_level`, or moved there unchanged when `trivial_move`.
#[derive(Debug, Clone)]
pub struct CompactionTask {
    /// The level the compaction takes its tables from.
    pub level: usize,
    /// The level the output goes to: the base level for L0, `level + 1` otherwise (`level`
    /// itself for [`pick_bottom_rewrite`]'s tasks).
    pub output_level: usize,
    /// Input tables from `level`, in the level's order (newest first for L0).
    pub inputs: Vec<Arc<FileMeta>>,
    /// Every table of `output_level` overlapping the user-key range of `inputs`, in key order.
    pub output_inputs: Vec<Arc<FileMeta>>,
    /// Tables of `output_level + 1` overlapping the task's key range, in key order. Output
    /// tables are cut when their overlap with these exceeds
    /// [`MAX_GRANDPARENT_OVERLAP_FACTOR`]` * target_file_size`.
    pub grandparents: Vec<Arc<FileMeta>>,
    /// True when the inputs move to `output_level` unchanged (no overlapping table there):
    /// only a manifest edit, no reading or writing of tables.
    pub trivial_move: bool,
    /// The score of `level` when the task was picked (0 for manual compactions).
    pub score: f64,
    /// Why the task was picked.
    pub reason: CompactionReason,
    /// No level deeper than `output_level` holds a table overlapping the task's key range, so
    /// the output is the deepest place any of its keys live: tombstones with no snapshot
    /// below them may be dropped and sequence numbers zeroed.
    pub bottommost: bool,
}

impl CompactionTask {
    /// Every input table (from both levels) with its level.
    pub fn all_inputs(&self) -> impl Iterator<Item = (usize, &Arc<FileMeta>)> + '_ {
        let level = self.level;
        let output = self.output_level;
        self.inputs
            .iter()
            .map(move |f| (level, f))
            .chain(self.output_inputs.iter().map(move |f| (output, f)))
    }

    /// Total size in bytes of the input tables of both levels.
    pub fn input_bytes(&self) -> u64 {
        self.all_inputs().map(|(_, f)| f.size).sum()
    }
}

/// Target size in bytes of each level `>= 1`, and the base level (where L0 compacts to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LevelTargets {
    base_level: usize,
    /// Per level; `u64::MAX` for L0 and the (empty) levels above the base level.
    target_bytes: [u64; NUM_LEVELS],
}

impl LevelTargets {
    /// Dynamic targets (RocksDB's `level_compaction_dynamic_level_bytes`), the picker's
    /// default. The largest level's size is divided by `level_size_multiplier` once per level
    /// from the last level up to the first non-empty one. If that leaves more than
    /// `max_bytes_for_level_base`, the base level moves up (one more division per level) until
    /// it fits or reaches L1. Each level from the base down gets `base size * multiplier^k`,
    /// but never less than `max_bytes_for_level_base`. An empty database compacts L0 straight
    /// to the last level.
    ///
    /// The effect: about 90% of the data sits in the last level, whatever the database size,
    /// and each level is about `multiplier` times the one above it.
    pub fn dynamic(version: &Version, options: &Options) -> Self {
        let mult = options.level_size_multiplier.max(2);
        let base_max = options.max_bytes_for_level_base.max(1);
        let base_min = base_max / mult;
        let mut target_bytes = [u64::MAX; NUM_LEVELS];
        let Some(first_non_empty) = (1..NUM_LEVELS).find(|&l| !version.files(l).is_empty()) else {
            target_bytes[LAST_LEVEL] = base_max;
            return LevelTargets {
                base_level: LAST_LEVEL,
                target_bytes,
            };
        };
        let largest = (1..NUM_LEVELS)
            .map(|l| version.level_bytes(l))
            .max()
            .unwrap_or(0);
        let mut size = largest;
        for _ in first_non_empty..LAST_LEVEL {
            size /= mult;
        }
        let mut base_level = first_non_empty;
        let base_size = if size <= base_min {
            // The data is small for this many levels: keep the shape, give the first
            // non-empty level the smallest target.
            base_min + 1
        } else {
            while base_level > 1 && size > base_max {
                base_level -= 1;
                size /= mult;
            }
            size.clamp(1, base_max)
        };
        let mut size = base_size;
        for (level, target) in target_bytes.iter_mut().enumerate().skip(base_level) {
            if level > base_level {
                size = size.saturating_mul(mult);
            }
            // A target below the base size would make the tree hourglass-shaped (levels
            // smaller than L0), so level 0 would lose every score comparison and stall.
            *target = size.max(base_max);
        }
        LevelTargets {
            base_level,
            target_bytes,
        }
    }

    /// Static targets (LevelDB's rule): L1 gets `max_bytes_for_level_base`, each deeper level
    /// `level_size_multiplier` times more; L0 compacts to L1. Kept for comparison in
    /// simulations and `docs/compaction.md`.
    pub fn fixed(options: &Options) -> Self {
        let mult = options.level_size_multiplier.max(2);
        let mut target_bytes = [u64::MAX; NUM_LEVELS];
        let mut size = options.max_bytes_for_level_base.max(1);
        for target in target_bytes.iter_mut().skip(1) {
            *target = size;
            size = size.saturating_mul(mult);
        }
        LevelTargets {
            base_level: 1,
            target_bytes,
        }
    }

    /// The level L0 compacts into (1 with static targets; up to the last level with dynamic
    /// ones).
    pub fn base_level(&self) -> usize {
        self.base_level
    }

    /// Target size in bytes of `level`; `u64::MAX` for L0, for the levels above the base level
    /// and for levels out of range.
    pub fn target_bytes(&self, level: usize) -> u64 {
        self.target_bytes.get(level).copied().unwrap_or(u64::MAX)
    }
}

/// Size in bytes of the tables of `level` that are not in `busy`.
fn idle_bytes(version: &Version, level: usize, busy: &HashSet<FileNumber>) -> u64 {
    version
        .files(level)
        .iter()
        .filter(|f| !busy.contains(&f.number))
        .map(|f| f.size)
        .sum()
}

/// `num / den` as a float (scores are ratios; 52 bits of precision are plenty).
fn ratio(num: u64, den: u64) -> f64 {
    num as f64 / den.max(1) as f64
}

/// Scores of every level against `targets`, leaving out tables in `busy` (see the module
/// docs). Index = level; the last level always scores 0.
pub fn level_scores_with(
    version: &Version,
    options: &Options,
    targets: &LevelTargets,
    busy: &HashSet<FileNumber>,
) -> Vec<f64> {
    let mut scores = vec![0.0; NUM_LEVELS];
    let l0_files = version
        .files(0)
        .iter()
        .filter(|f| !busy.contains(&f.number))
        .count();
    let l0_bytes = idle_bytes(version, 0, busy);
    let base_target = targets
        .target_bytes(targets.base_level())
        .max(options.max_bytes_for_level_base);
    let by_count = ratio(
        l0_files as u64,
        options.level0_file_num_compaction_trigger.max(1) as u64,
    );
    scores[0] = by_count.max(ratio(l0_bytes, base_target));
    for (level, score) in scores.iter_mut().enumerate().take(LAST_LEVEL).skip(1) {
        let target = targets.target_bytes(level);
        if target != u64::MAX {
            *score = ratio(idle_bytes(version, level, busy), target);
        }
    }
    scores
}

/// Scores of every level with dynamic targets and no compaction running: index = level,
/// 1.0 or more = needs compaction. For statistics and tests; [`pick_compaction`] uses the same
/// rule.
pub fn level_scores(version: &Version, options: &Options) -> Vec<f64> {
    let targets = LevelTargets::dynamic(version, options);
    level_scores_with(version, options, &targets, &HashSet::new())
}

/// The next compaction for `version`, or `None` when every level is within its target or
/// every candidate involves a table in `busy` (tables of running compactions). Uses dynamic
/// targets; see the module docs for the rules.
pub fn pick_compaction(
    version: &Version,
    options: &Options,
    busy: &HashSet<FileNumber>,
) -> Option<CompactionTask> {
    let targets = LevelTargets::dynamic(version, options);
    pick_compaction_with(version, options, &targets, busy)
}

/// [`pick_compaction`] with the given targets (for simulations comparing target rules).
pub fn pick_compaction_with(
    version: &Version,
    options: &Options,
    targets: &LevelTargets,
    busy: &HashSet<FileNumber>,
) -> Option<CompactionTask> {
    let scores = level_scores_with(version, options, targets, busy);
    let mut order: Vec<usize> = (0..LAST_LEVEL).filter(|&l| scores[l] >= 1.0).collect();
    // Highest score first; the sort is stable, so ties go to the upper level.
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order.into_iter().find_map(|level| {
        let mut task = if level == 0 {
            pick_level0(version, options, targets, busy)
        } else {
            pick_level_n(version, options, level, busy)
        }?;
        task.score = scores[level];
        Some(task)
    })
}

/// User keys that split `task` into at most `max` key ranges for subcompactions
/// (`docs/compaction.md` section 2.7): ascending and distinct, range `i` being
/// `[bounds[i - 1], bounds[i])` with open ends. Each bound is the smallest user key of one of
/// the task's tables in the output level (never the first): the table whose middle, counting
/// those tables' bytes in key order, lies past the next of the `max - 1` evenly spaced share
/// points starts a new range, so each range holds about the same bytes of those tables (the
/// tables of the upper level, L0's included, spread over the same keys). Empty, so the task
/// runs as one merge, when `max < 2`, for a trivial move, and when fewer than two
/// output-level tables take part.
pub fn subcompaction_boundaries(task: &CompactionTask, max: usize) -> Vec<Vec<u8>> {
    let tables = &task.output_inputs;
    if max < 2 || task.trivial_move || tables.len() < 2 {
        return Vec::new();
    }
    let ranges = max.min(tables.len()) as u64;
    let total: u64 = tables.iter().map(|f| f.size.max(1)).sum();
    let mut bounds: Vec<Vec<u8>> = Vec::new();
    let mut before = 0u64;
    // A level's tables are in key order and disjoint.
    for f in tables {
        let share = total.saturating_mul(bounds.len() as u64 + 1) / ranges;
        let key = &f.smallest.user_key[..];
        let middle = before + f.size.max(1) / 2;
        if before > 0
            && middle >= share
            && (bounds.len() as u64) < ranges - 1
            && bounds.last().is_none_or(|last| &last[..] < key)
        {
            bounds.push(key.to_vec());
        }
        before += f.size.max(1);
    }
    bounds
}

/// The user-key range `[smallest, largest]` covered by `files` (`None` if empty).
fn user_range<'a>(
    files: impl IntoIterator<Item = &'a Arc<FileMeta>>,
) -> Option<(&'a [u8], &'a [u8])> {
    files.into_iter().fold(None, |acc, f| {
        let (lo, hi) = (&f.smallest.user_key[..], &f.largest.user_key[..]);
        Some(match acc {
            None => (lo, hi),
            Some((a, b)) => (a.min(lo), b.max(hi)),
        })
    })
}

/// Adds to `set` every L0 table overlapping the range of `set`, repeatedly, until no L0 table
/// outside the set overlaps it. Returns the set in L0 order (newest first).
fn l0_closure(version: &Version, seed: Vec<Arc<FileMeta>>) -> Vec<Arc<FileMeta>> {
    let mut chosen: HashSet<FileNumber> = seed.iter().map(|f| f.number).collect();
    let mut range = user_range(&seed).map(|(a, b)| (a.to_vec(), b.to_vec()));
    while let Some((lo, hi)) = range.take() {
        let mut grew = false;
        let (mut new_lo, mut new_hi) = (lo.clone(), hi.clone());
        for f in version.files(0) {
            if !chosen.contains(&f.number) && f.overlaps(Some(&lo), Some(&hi)) {
                chosen.insert(f.number);
                grew = true;
                new_lo = new_lo.min(f.smallest.user_key.to_vec());
                new_hi = new_hi.max(f.largest.user_key.to_vec());
            }
        }
        if grew {
            range = Some((new_lo, new_hi));
        }
    }
    version
        .files(0)
        .iter()
        .filter(|f| chosen.contains(&f.number))
        .cloned()
        .collect()
}

/// True if no level deeper than `output_level` holds a table overlapping `[lo, hi]`.
fn is_bottommost(version: &Version, output_level: usize, lo: &[u8], hi: &[u8]) -> bool {
    (output_level + 1..NUM_LEVELS)
        .all(|l| version.overlapping_files(l, Some(lo), Some(hi)).is_empty())
}

/// True if no two of `files` overlap by user key.
fn pairwise_disjoint(files: &[Arc<FileMeta>]) -> bool {
    let mut sorted: Vec<&Arc<FileMeta>> = files.iter().collect();
    sorted.sort_by(|a, b| a.smallest.user_key.cmp(&b.smallest.user_key));
    sorted
        .windows(2)
        .all(|w| w[0].largest.user_key < w[1].smallest.user_key)
}

fn any_busy(files: &[Arc<FileMeta>], busy: &HashSet<FileNumber>) -> bool {
    files.iter().any(|f| busy.contains(&f.number))
}

fn total_bytes(files: &[Arc<FileMeta>]) -> u64 {
    files.iter().map(|f| f.size).sum()
}

/// Builds the task for `inputs` at `level` into `output_level` (output inputs, grandparents,
/// trivial move and bottommost flags). `None` if a table involved is in `busy`.
fn make_task(
    version: &Version,
    options: &Options,
    level: usize,
    output_level: usize,
    inputs: Vec<Arc<FileMeta>>,
    reason: CompactionReason,
    busy: &HashSet<FileNumber>,
) -> Option<CompactionTask> {
    let (lo, hi) = user_range(&inputs)?;
    let output_inputs = version.overlapping_files(output_level, Some(lo), Some(hi));
    if any_busy(&inputs, busy) || any_busy(&output_inputs, busy) {
        return None;
    }
    let (lo, hi) = user_range(inputs.iter().chain(&output_inputs))?;
    let grandparents = version.overlapping_files(output_level + 1, Some(lo), Some(hi));
    let max_gp = MAX_GRANDPARENT_OVERLAP_FACTOR.saturating_mul(options.target_file_size);
    let inputs_disjoint = level > 0 || pairwise_disjoint(&inputs);
    let trivial_move = output_inputs.is_empty()
        && inputs_disjoint
        && inputs.iter().all(|f| {
            let (a, b) = (&f.smallest.user_key[..], &f.largest.user_key[..]);
            total_bytes(&version.overlapping_files(output_level + 1, Some(a), Some(b))) <= max_gp
        });
    let bottommost = is_bottommost(version, output_level, lo, hi);
    Some(CompactionTask {
        level,
        output_level,
        inputs,
        output_inputs,
        grandparents,
        trivial_move,
        score: 0.0,
        reason,
        bottommost,
    })
}

/// Splits L0 into overlap components (each closed under overlap), oldest component first
/// (ordered by its oldest table).
fn l0_components(version: &Version) -> Vec<Vec<Arc<FileMeta>>> {
    let mut seen: HashSet<FileNumber> = HashSet::new();
    let mut components = Vec::new();
    // L0 is newest first: walk it from the back so the oldest table seeds the first component.
    for f in version.files(0).iter().rev() {
        if seen.contains(&f.number) {
            continue;
        }
        let component = l0_closure(version, vec![Arc::clone(f)]);
        seen.extend(component.iter().map(|g| g.number));
        components.push(component);
    }
    components
}

/// L0 → base level: the oldest overlap component whose tables (and the overlapping base-level
/// tables) are idle, grown by further components that overlap the same base-level range while
/// the total input stays under [`MAX_COMPACTION_FACTOR`]` * target_file_size`.
fn pick_level0(
    version: &Version,
    options: &Options,
    targets: &LevelTargets,
    busy: &HashSet<FileNumber>,
) -> Option<CompactionTask> {
    if any_busy(version.files(0), busy) {
        // One L0 compaction at a time: a second one could not take the older tables the first
        // holds, so it could not move anything without breaking the L0 order rule.
        return None;
    }
    let output_level = targets.base_level();
    let max_bytes = MAX_COMPACTION_FACTOR.saturating_mul(options.target_file_size);
    let components = l0_components(version);
    for (i, component) in components.iter().enumerate() {
        let Some(mut task) = level0_task(version, options, output_level, component.clone(), busy)
        else {
            continue;
        };
        if task.trivial_move {
            return Some(merge_small_components(
                version,
                options,
                output_level,
                task,
                &components,
                i,
                busy,
            ));
        }
        // Take in other components that overlap the same output range, so the base-level
        // tables are rewritten once rather than once per component.
        let mut inputs = task.inputs.clone();
        for other in components.iter().skip(i + 1) {
            let Some((lo, hi)) = user_range(inputs.iter().chain(&task.output_inputs)) else {
                break;
            };
            let touches = other.iter().any(|f| f.overlaps(Some(lo), Some(hi)));
            if !touches {
                continue;
            }
            let mut grown = inputs.clone();
            grown.extend(other.iter().cloned());
            let grown = l0_closure(version, grown);
            match level0_task(version, options, output_level, grown, busy) {
                Some(bigger) if bigger.input_bytes() <= max_bytes => {
                    inputs.clone_from(&bigger.inputs);
                    task = bigger;
                }
                _ => {}
            }
        }
        return Some(task);
    }
    None
}

/// [`make_task`] for level-0 tables `inputs` into the base level `output_level`.
fn level0_task(
    version: &Version,
    options: &Options,
    output_level: usize,
    inputs: Vec<Arc<FileMeta>>,
    busy: &HashSet<FileNumber>,
) -> Option<CompactionTask> {
    make_task(
        version,
        options,
        0,
        output_level,
        inputs,
        CompactionReason::Level0,
        busy,
    )
}

/// L0 → base level for `task`, a trivial move of `components[first]`: when that component is
/// small, takes in the other small components, oldest first, while the whole input (with the
/// base-level tables under it) stays under [`MAX_COMPACTION_FACTOR`]` * target_file_size`, and
/// merges them into new tables. `task` unchanged when the component is not small or no other
/// component can join.
fn merge_small_components(
    version: &Version,
    options: &Options,
    output_level: usize,
    task: CompactionTask,
    components: &[Vec<Arc<FileMeta>>],
    first: usize,
    busy: &HashSet<FileNumber>,
) -> CompactionTask {
    let small = small_table_bytes(options);
    if task.input_bytes() >= small {
        return task;
    }
    let max_bytes = MAX_COMPACTION_FACTOR.saturating_mul(options.target_file_size);
    let mut merged: Option<CompactionTask> = None;
    for other in components.iter().skip(first + 1) {
        if total_bytes(other) >= small {
            continue;
        }
        let mut grown = merged.as_ref().unwrap_or(&task).inputs.clone();
        grown.extend(other.iter().cloned());
        if let Some(bigger) = level0_task(version, options, output_level, grown, busy)
            && bigger.input_bytes() <= max_bytes
        {
            merged = Some(bigger);
        }
    }
    match merged {
        Some(mut merged) => {
            merged.trivial_move = false;
            merged
        }
        None => task,
    }
}

/// Size of `f` weighted up by its share of tombstones (up to twice its size when it holds only
/// tombstones), so tables that would free space when compacted go first.
fn compensated_size(f: &FileMeta) -> u64 {
    let bonus = if f.num_entries == 0 {
        0
    } else {
        let share = u128::from(f.num_deletions.min(f.num_entries));
        let bonus = u128::from(f.size) * share / u128::from(f.num_entries);
        u64::try_from(bonus).unwrap_or(u64::MAX)
    };
    f.size.saturating_add(bonus).max(1)
}

/// Ln → Ln+1 for `level >= 1`: the idle table with the smallest ratio of overlapping bytes in
/// `level + 1` to its (compensated) size, ties to the smaller key.
fn pick_level_n(
    version: &Version,
    options: &Options,
    level: usize,
    busy: &HashSet<FileNumber>,
) -> Option<CompactionTask> {
    let output_level = level + 1;
    let mut best: Option<(u128, u128, &Arc<FileMeta>)> = None;
    for f in version.files(level) {
        if busy.contains(&f.number) {
            continue;
        }
        let (lo, hi) = (&f.smallest.user_key[..], &f.largest.user_key[..]);
        let below = version.overlapping_files(output_level, Some(lo), Some(hi));
        if any_busy(&below, busy) {
            continue;
        }
        // Compare overlap_a / size_a < overlap_b / size_b as overlap_a * size_b < ...
        let (overlap, size) = (
            u128::from(total_bytes(&below)),
            u128::from(compensated_size(f)),
        );
        let better = match best {
            None => true,
            Some((bo, bs, _)) => overlap * bs < bo * size,
        };
        if better {
            best = Some((overlap, size, f));
        }
    }
    let (_, _, f) = best?;
    make_task(
        version,
        options,
        level,
        output_level,
        vec![Arc::clone(f)],
        CompactionReason::LevelSize,
        busy,
    )
}

/// A manual compaction (`Db::compact_range`): the tables of `level` overlapping the user-key
/// range `[begin, end]` (`None` = unbounded) merged into the next level: `level + 1`, except
/// that L0 goes to the base level of the dynamic targets ([`LevelTargets::base_level`]; the
/// levels between are empty), as automatic compactions do. For L0 the set is grown to every
/// L0 table overlapping it (the L0 order rule); for deeper levels it is cut, in key order,
/// once it holds [`MAX_COMPACTION_FACTOR`]` * target_file_size` bytes, so one task stays
/// bounded.
///
/// Each task moves at least one table out of `level`, so to compact a whole range, apply the
/// task and call this again with the same `level` until it returns `None`, then go on with
/// `level + 1` (down to `NUM_LEVELS - 2`). `None` for the last level (nothing is below it)
/// and for a level with no table in the range. There is no `busy` set: the caller must keep
/// other compactions off these tables meanwhile.
pub fn pick_range_compaction(
    version: &Version,
    options: &Options,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Option<CompactionTask> {
    if level >= LAST_LEVEL {
        return None;
    }
    let mut inputs = version.overlapping_files(level, begin, end);
    if inputs.is_empty() {
        return None;
    }
    let output_level = if level == 0 {
        inputs = l0_closure(version, inputs);
        LevelTargets::dynamic(version, options).base_level()
    } else {
        let max_bytes = MAX_COMPACTION_FACTOR.saturating_mul(options.target_file_size);
        let mut total = 0u64;
        let keep = inputs
            .iter()
            .take_while(|f| {
                let under = total < max_bytes;
                total = total.saturating_add(f.size);
                under
            })
            .count();
        inputs.truncate(keep.max(1));
        level + 1
    };
    make_task(
        version,
        options,
        level,
        output_level,
        inputs,
        CompactionReason::Manual,
        &HashSet::new(),
    )
}

/// The last step of a manual compaction (RocksDB's `CompactRange` with
/// `BottommostLevelCompaction::kForceOptimized`): tables of the last level overlapping
/// `[begin, end]` (`None` = unbounded on that side) that may hold something to drop or fold
/// and are numbered below `before` (so tables this manual compaction wrote are not rewritten
/// again) are rewritten in place, output level = input level, which drops the versions and
/// tombstones no snapshot needs and folds merge operands. A last-level table may hold such
/// entries when one of them has a sequence number above 0 (`largest_seqno > 0`): a bottommost
/// compaction gives 0 to every put that is the only version of its key, so a table of such
/// puts alone has nothing to drop. Old versions and tombstones reach the last level beside
/// what they shadow when a compaction merged them while a snapshot was live (or a trivial move
/// or an ingest put them there); this frees them when the manual compaction returns instead of
/// whenever [`pick_tombstone_compaction`] gets to them (tombstones only).
///
/// The task takes one run of adjacent such tables (a gap would let an output table overlap the
/// table skipped), cut once it holds [`MAX_COMPACTION_FACTOR`]` * target_file_size` bytes.
/// Call again after applying it until `None`. The caller keeps other compactions off these
/// tables meanwhile.
pub fn pick_bottom_rewrite(
    version: &Version,
    options: &Options,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
    before: FileNumber,
) -> Option<CompactionTask> {
    let wanted = |f: &Arc<FileMeta>| {
        (f.num_deletions > 0 || f.largest_seqno > SeqNo::ZERO) && f.number < before
    };
    let files = version.overlapping_files(LAST_LEVEL, begin, end);
    let first = files.iter().position(wanted)?;
    let max_bytes = MAX_COMPACTION_FACTOR.saturating_mul(options.target_file_size);
    let mut total = 0u64;
    let inputs: Vec<Arc<FileMeta>> = files
        .get(first..)
        .unwrap_or_default()
        .iter()
        .take_while(|f| {
            let take = wanted(f) && total < max_bytes;
            total = total.saturating_add(f.size);
            take
        })
        .cloned()
        .collect();
    Some(last_level_rewrite(inputs, CompactionReason::Manual))
}

/// A task rewriting last-level tables `inputs` (adjacent) in place: output level = input
/// level, always bottommost, so tombstones no snapshot needs go with what they hide.
fn last_level_rewrite(inputs: Vec<Arc<FileMeta>>, reason: CompactionReason) -> CompactionTask {
    CompactionTask {
        level: LAST_LEVEL,
        output_level: LAST_LEVEL,
        inputs,
        output_inputs: Vec::new(),
        grandparents: Vec::new(),
        trivial_move: false,
        score: 0.0,
        reason,
        bottommost: true,
    }
}

/// Fewest adjacent small tables [`pick_small_table_merge`] merges.
pub const SMALL_RUN_MIN_TABLES: usize = 2;

/// A background merge of small tables when no level is over its target and no tombstone
/// compaction is due: the first run (lowest level, then smallest key) of at least
/// [`SMALL_RUN_MIN_TABLES`] adjacent idle tables of one level `>= 1`, each smaller than
/// [`small_table_bytes`] (`target_file_size / 8`, at most 512 KiB), together at most
/// `target_file_size / 2` bytes, rewritten in place (output level = input level) into one
/// table.
///
/// Tables that small come from flushes of a few keys each that moved down by trivial move:
/// a program that opens the database, appends keys beyond the last one and closes it (each
/// open flushes the recovered WAL) leaves one such table per open, each with nothing under
/// it; so does a database written before small level-0 components were merged
/// ([`SMALL_TABLE_DIVISOR`]). Left alone, they pile up by the thousand, each costing a file
/// descriptor, a manifest record and a table-cache slot.
///
/// The run has no gap (an output table must not overlap a table skipped) and no grandparent
/// cut, so its output is one table: every task lowers the level's table count, and repeated
/// picks end. The output is bottommost when no deeper level overlaps the run.
pub fn pick_small_table_merge(
    version: &Version,
    options: &Options,
    busy: &HashSet<FileNumber>,
) -> Option<CompactionTask> {
    let small = small_table_bytes(options);
    let max_bytes = options.target_file_size / 2;
    let eligible = |f: &FileMeta| !busy.contains(&f.number) && f.size < small;
    for level in 1..NUM_LEVELS {
        let mut run: Vec<Arc<FileMeta>> = Vec::new();
        let mut bytes = 0u64;
        for f in version.files(level) {
            if eligible(f) && bytes.saturating_add(f.size) <= max_bytes {
                bytes = bytes.saturating_add(f.size);
                run.push(Arc::clone(f));
                continue;
            }
            if run.len() >= SMALL_RUN_MIN_TABLES {
                return in_place_merge(version, level, run);
            }
            run.clear();
            bytes = 0;
            if eligible(f) {
                bytes = f.size;
                run.push(Arc::clone(f));
            }
        }
        if run.len() >= SMALL_RUN_MIN_TABLES {
            return in_place_merge(version, level, run);
        }
    }
    None
}

/// A task merging the adjacent tables `inputs` of `level` in place, bottommost when no deeper
/// level overlaps them. `None` for an empty `inputs`.
fn in_place_merge(
    version: &Version,
    level: usize,
    inputs: Vec<Arc<FileMeta>>,
) -> Option<CompactionTask> {
    let (lo, hi) = user_range(&inputs)?;
    let bottommost = is_bottommost(version, level, lo, hi);
    Some(CompactionTask {
        level,
        output_level: level,
        inputs,
        output_inputs: Vec::new(),
        grandparents: Vec::new(),
        trivial_move: false,
        score: 0.0,
        reason: CompactionReason::SmallTables,
        bottommost,
    })
}

/// A table counts as tombstone-heavy when at least `1 / TOMBSTONE_HEAVY_DIVISOR` of its
/// entries are tombstones (RocksDB's deletion-triggered compaction uses such a ratio too).
pub const TOMBSTONE_HEAVY_DIVISOR: u64 = 4;

fn tombstone_heavy(f: &FileMeta) -> bool {
    f.num_deletions > 0 && f.num_deletions.saturating_mul(TOMBSTONE_HEAVY_DIVISOR) >= f.num_entries
}

/// A background compaction for tombstones when no level is over its target (RocksDB's
/// deletion-triggered compaction and its bottommost files marked for compaction): the
/// tombstones and what they hide would otherwise stay until size triggers reach them, and in
/// the last level for ever, costing space and every scan that crosses them. In order:
///
/// - level 0, when one of its tables is tombstone-heavy: the usual level-0 compaction;
/// - levels 1 to 5: the first idle tombstone-heavy table, into the next level;
/// - the last level: the first idle table holding tombstones that every live snapshot sees
///   (`largest_seqno` below `oldest_snapshot`, or no snapshot), rewritten in place, which
///   drops them all with what they hide.
///
/// Each task moves tombstones down a level or drops them, and a last-level table is picked
/// only when its rewrite drops every tombstone in it, so repeated picks end.
pub fn pick_tombstone_compaction(
    version: &Version,
    options: &Options,
    busy: &HashSet<FileNumber>,
    oldest_snapshot: Option<SeqNo>,
) -> Option<CompactionTask> {
    if version.files(0).iter().any(|f| tombstone_heavy(f)) {
        let targets = LevelTargets::dynamic(version, options);
        if let Some(task) = pick_level0(version, options, &targets, busy) {
            return Some(task);
        }
    }
    for level in 1..LAST_LEVEL {
        for f in version.files(level) {
            if busy.contains(&f.number) || !tombstone_heavy(f) {
                continue;
            }
            if let Some(task) = make_task(
                version,
                options,
                level,
                level + 1,
                vec![Arc::clone(f)],
                CompactionReason::Tombstones,
                busy,
            ) {
                return Some(task);
            }
        }
    }
    let settled = |f: &FileMeta| oldest_snapshot.is_none_or(|s| f.largest_seqno < s);
    let f = version
        .files(LAST_LEVEL)
        .iter()
        .find(|f| !busy.contains(&f.number) && f.num_deletions > 0 && settled(f))?;
    Some(last_level_rewrite(
        vec![Arc::clone(f)],
        CompactionReason::Tombstones,
    ))
}

/// The tables [`crate::Db::delete_files_in_range`] removes: tables of levels 1 and deeper
/// whose keys all lie in `[begin, end)` and that no table staying at a deeper level overlaps.
/// The second rule keeps reads from seeing an older version come back: a deeper table holds
/// older versions of the same keys, and one that stays (partly outside the range) may hold a
/// key whose newer version is in a table removed above it. So removing the tables is like
/// deleting some of the range's keys, never like undoing a write. Level 0 is left alone (its
/// tables overlap each other, and it is small). Returned deepest level first, with levels.
pub fn pick_range_deletion(
    version: &Version,
    begin: &[u8],
    end: &[u8],
) -> Vec<(usize, Arc<FileMeta>)> {
    let inside = |f: &FileMeta| &f.smallest.user_key[..] >= begin && &f.largest.user_key[..] < end;
    let mut doomed: Vec<(usize, Arc<FileMeta>)> = Vec::new();
    let mut doomed_numbers: HashSet<FileNumber> = HashSet::new();
    for level in (1..NUM_LEVELS).rev() {
        let mut at_level = Vec::new();
        for f in version.overlapping_files(level, Some(begin), Some(end)) {
            if !inside(&f) {
                continue;
            }
            let (lo, hi) = (&f.smallest.user_key[..], &f.largest.user_key[..]);
            let nothing_kept_below = (level + 1..NUM_LEVELS).all(|deeper| {
                version
                    .overlapping_files(deeper, Some(lo), Some(hi))
                    .iter()
                    .all(|g| doomed_numbers.contains(&g.number))
            });
            if nothing_kept_below {
                at_level.push(f);
            }
        }
        for f in at_level {
            doomed_numbers.insert(f.number);
            doomed.push((level, f));
        }
    }
    doomed
}

/// Estimate of the bytes compaction must still rewrite to bring every level under its target
/// (RocksDB's `estimated_pending_compaction_bytes`), for write backpressure.
///
/// If L0 is at its trigger (file count or bytes), all of L0 plus the base level count. Then,
/// from the base level down, each level's excess over its target (including what the level
/// above pushes into it) is carried to the next level and counted with the fan-out it causes
/// there: `excess * (1 + next_level_bytes / level_bytes)`.
pub fn pending_compaction_bytes(version: &Version, options: &Options) -> u64 {
    let targets = LevelTargets::dynamic(version, options);
    let base = targets.base_level();
    let l0_bytes = version.level_bytes(0);
    let l0_triggered = version.files(0).len() >= options.level0_file_num_compaction_trigger
        || l0_bytes >= options.max_bytes_for_level_base;
    let mut pending: u128 = 0;
    let mut incoming: u64 = 0;
    if l0_triggered {
        pending += u128::from(l0_bytes) + u128::from(version.level_bytes(base));
        incoming = l0_bytes;
    }
    for level in base..LAST_LEVEL {
        let size = version.level_bytes(level).saturating_add(incoming);
        incoming = 0;
        let target = targets.target_bytes(level);
        if size <= target {
            continue;
        }
        let excess = size - target;
        incoming = excess;
        let next = version.level_bytes(level + 1);
        if next > 0 {
            // excess * (next / size + 1), in integers.
            pending +=
                u128::from(excess) * u128::from(next) / u128::from(size) + u128::from(excess);
        }
    }
    u64::try_from(pending).unwrap_or(u64::MAX)
}
