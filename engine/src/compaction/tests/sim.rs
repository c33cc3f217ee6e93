//! A compaction simulator: flushes and compactions applied to a [`Version`] with no I/O.
//!
//! A table is a key range `[lo, hi]` of integer keys (stored as 16-digit hex user keys, which
//! sort like the integers) whose bytes are spread uniformly over the range. A compaction's
//! output is the summed density of its inputs, cut into `target_file_size` pieces, so bytes are
//! conserved (an insert-only workload: no key is written twice, nothing is dropped). Write
//! amplification = bytes written by flushes and compactions / bytes flushed.

use std::collections::HashSet;
use std::sync::Arc;

use crate::compaction::picker::{
    CompactionTask, LevelTargets, pick_compaction_with, pick_small_table_merge,
};
use crate::options::Options;
use crate::types::{FileNumber, InternalKey, SeqNo, ValueKind};
use crate::version::{FileMeta, NUM_LEVELS, Version, VersionEdit};

/// Largest key of the simulated key space.
pub(super) const KEY_SPACE: u64 = 1 << 48;

/// The user key of integer `k`.
pub(super) fn key(k: u64) -> Vec<u8> {
    format!("{k:016x}").into_bytes()
}

/// The integer of a user key made by [`key`].
pub(super) fn unkey(user_key: &[u8]) -> u64 {
    match std::str::from_utf8(user_key)
        .ok()
        .and_then(|s| u64::from_str_radix(s, 16).ok())
    {
        Some(k) => k,
        None => panic!("simulated keys are 16 hex digits, not {user_key:?}"),
    }
}

/// Metadata of a table holding `[lo, hi]` with `size` bytes and seqnos `seqs`.
pub(super) fn table(number: u64, lo: u64, hi: u64, size: u64, seqs: (u64, u64)) -> FileMeta {
    FileMeta {
        number: FileNumber(number),
        size,
        smallest: InternalKey::new(key(lo), SeqNo(seqs.1), ValueKind::Put),
        largest: InternalKey::new(key(hi), SeqNo(seqs.0), ValueKind::Put),
        smallest_seqno: SeqNo(seqs.0),
        largest_seqno: SeqNo(seqs.1),
        num_entries: size / 24 + 1,
        num_deletions: 0,
        global_seqno: None,
        table_id: None,
    }
}

/// Which target rule the simulated database uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Targets {
    Dynamic,
    Fixed,
}

/// A simulated database.
#[derive(Debug)]
pub(super) struct Sim {
    pub version: Version,
    pub options: Options,
    pub targets: Targets,
    next_number: u64,
    next_seqno: u64,
    pub flushed_bytes: u64,
    pub compaction_written: u64,
    /// Bytes written by compactions whose output level is `i`.
    pub written_per_level: [u64; NUM_LEVELS],
    pub compactions: u64,
    pub trivial_moves: u64,
    edits: u64,
}

impl Sim {
    pub fn new(options: Options, targets: Targets) -> Self {
        Sim {
            version: Version::empty(),
            options,
            targets,
            next_number: 1,
            next_seqno: 1,
            flushed_bytes: 0,
            compaction_written: 0,
            written_per_level: [0; NUM_LEVELS],
            compactions: 0,
            trivial_moves: 0,
            edits: 0,
        }
    }

    pub fn level_targets(&self) -> LevelTargets {
        match self.targets {
            Targets::Dynamic => LevelTargets::dynamic(&self.version, &self.options),
            Targets::Fixed => LevelTargets::fixed(&self.options),
        }
    }

    fn number(&mut self) -> u64 {
        self.next_number += 1;
        self.next_number - 1
    }

    /// Adds a level-0 table holding `[lo, hi]` with `size` bytes.
    pub fn flush(&mut self, lo: u64, hi: u64, size: u64) {
        let number = self.number();
        let seqs = (self.next_seqno, self.next_seqno + 999);
        self.next_seqno += 1000;
        let mut edit = VersionEdit::default();
        edit.add_file(0, table(number, lo, hi, size, seqs));
        self.apply(&edit);
        self.flushed_bytes += size;
    }

    /// Applies `edit` in place (cheaper than `Version::apply`, which rebuilds the version; the
    /// simulator applies thousands of edits to versions of thousands of tables). Checks the
    /// neighbours of every added table, and the whole version every 256 edits.
    pub fn apply(&mut self, edit: &VersionEdit) {
        let deleted: HashSet<(usize, FileNumber)> = edit.deleted_files.iter().copied().collect();
        let mut removed = 0;
        for (level, files) in self.version.levels.iter_mut().enumerate() {
            if edit.deleted_files.iter().any(|&(l, _)| l == level) {
                let before = files.len();
                files.retain(|f| !deleted.contains(&(level, f.number)));
                removed += before - files.len();
            }
        }
        assert_eq!(
            removed,
            deleted.len(),
            "edit deletes tables that are not there"
        );
        for (level, meta) in &edit.new_files {
            let files = &mut self.version.levels[*level];
            let f = Arc::new(meta.clone());
            let pos = if *level == 0 {
                files.partition_point(|g| (g.largest_seqno, g.number) > (f.largest_seqno, f.number))
            } else {
                files.partition_point(|g| g.smallest < f.smallest)
            };
            if *level > 0 {
                if let Some(prev) = pos.checked_sub(1).and_then(|p| files.get(p)) {
                    assert!(
                        prev.largest.user_key < f.smallest.user_key,
                        "L{level} overlap"
                    );
                }
                if let Some(next) = files.get(pos) {
                    assert!(
                        f.largest.user_key < next.smallest.user_key,
                        "L{level} overlap"
                    );
                }
            }
            files.insert(pos, f);
        }
        self.edits += 1;
        if self.edits.is_multiple_of(256) {
            let problems = self.version.check_invariants();
            assert!(problems.is_empty(), "{problems:?}");
        }
    }

    /// The next task, or `None` when nothing needs compaction.
    pub fn pick(&self) -> Option<CompactionTask> {
        pick_compaction_with(
            &self.version,
            &self.options,
            &self.level_targets(),
            &HashSet::new(),
        )
    }

    /// The idle merge of small tables ([`pick_small_table_merge`]), or `None`.
    pub fn pick_small_merge(&self) -> Option<CompactionTask> {
        pick_small_table_merge(&self.version, &self.options, &HashSet::new())
    }

    /// Runs `task` with fake outputs and applies it.
    pub fn run(&mut self, task: &CompactionTask) {
        let mut edit = VersionEdit::default();
        for (level, f) in task.all_inputs() {
            edit.delete_file(level, f.number);
        }
        self.compactions += 1;
        if task.trivial_move {
            self.trivial_moves += 1;
            for f in &task.inputs {
                edit.add_file(task.output_level, FileMeta::clone(f));
            }
        } else {
            let seqs = task.all_inputs().fold((u64::MAX, 0), |(lo, hi), (_, f)| {
                (lo.min(f.smallest_seqno.0), hi.max(f.largest_seqno.0))
            });
            let pieces: Vec<(u64, u64, u64)> = task
                .all_inputs()
                .map(|(_, f)| {
                    (
                        unkey(&f.smallest.user_key),
                        unkey(&f.largest.user_key),
                        f.size,
                    )
                })
                .collect();
            for (lo, hi, size) in cut(&pieces, self.options.target_file_size) {
                let number = self.number();
                // The same seqno at both ends keeps single-key tables well formed.
                edit.add_file(
                    task.output_level,
                    table(number, lo, hi, size, (seqs.0, seqs.0)),
                );
                self.compaction_written += size;
                self.written_per_level[task.output_level] += size;
            }
        }
        self.apply(&edit);
    }

    /// Picks and runs compactions until none is needed; returns how many ran.
    pub fn settle(&mut self) -> usize {
        let mut n = 0;
        while let Some(task) = self.pick() {
            self.run(&task);
            n += 1;
            assert!(n < 100_000, "compaction does not converge");
        }
        n
    }

    /// (flushed + compaction written) / flushed.
    pub fn write_amplification(&self) -> f64 {
        (self.flushed_bytes + self.compaction_written) as f64 / self.flushed_bytes.max(1) as f64
    }
}

/// Merges pieces `(lo, hi, bytes)` (bytes spread uniformly over `[lo, hi]`) and cuts the sum
/// into disjoint ranges of about `target` bytes. The output bytes sum to the input bytes.
pub(super) fn cut(pieces: &[(u64, u64, u64)], target: u64) -> Vec<(u64, u64, u64)> {
    let total: u64 = pieces.iter().map(|p| p.2).sum();
    let mut points: Vec<u64> = pieces
        .iter()
        .flat_map(|&(lo, hi, _)| [lo, hi + 1])
        .collect();
    points.sort_unstable();
    points.dedup();
    let mut out = Vec::new();
    let mut emitted = 0u64;
    let mut acc = 0.0f64;
    let mut start: Option<u64> = None;
    for w in points.windows(2) {
        let (a, b) = (w[0], w[1]);
        let density: f64 = pieces
            .iter()
            .filter(|&&(lo, hi, _)| lo <= a && b - 1 <= hi)
            .map(|&(lo, hi, size)| size as f64 / (hi - lo + 1) as f64)
            .sum();
        if density == 0.0 {
            continue;
        }
        let mut pos = a;
        while pos < b {
            let begin = *start.get_or_insert(pos);
            let need = target as f64 - acc;
            let keys_needed = (need / density).ceil().max(1.0) as u64;
            if pos + keys_needed <= b {
                let end = pos + keys_needed - 1;
                let size = (acc + keys_needed as f64 * density).round() as u64;
                let size = size.min(total - emitted);
                out.push((begin, end, size));
                emitted += size;
                acc = 0.0;
                start = None;
                pos = end + 1;
            } else {
                acc += (b - pos) as f64 * density;
                pos = b;
            }
        }
    }
    if let Some(begin) = start {
        let end = points.last().map_or(begin, |p| p - 1);
        out.push((begin, end, total - emitted));
    } else if emitted < total
        && let Some(last) = out.last_mut()
    {
        last.2 += total - emitted;
    }
    out.retain(|p| p.2 > 0);
    out
}
