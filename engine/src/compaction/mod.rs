//! Leveled compaction (rules, numbers and the choice of dynamic level targets:
//! `docs/compaction.md`).
//!
//! - [`picker`]: a pure function from a [`crate::version::Version`] to the next
//!   [`CompactionTask`] (no I/O; unit-tested and simulated).
//! - [`job`]: runs a task: merges the input tables, drops what no snapshot can see, writes and
//!   fsyncs the output tables, and returns the [`crate::version::VersionEdit`] to log.
//!
//! The caller (the database's background thread) picks a task with the tables of running
//! compactions marked busy, runs it without holding locks, appends the edit to the manifest,
//! installs the new version, and only then deletes the input tables.

pub mod job;
pub mod picker;
#[cfg(test)]
mod tests;

pub use job::{JobContext, JobStats, run_compaction};
pub use picker::{
    CompactionReason, CompactionTask, LevelTargets, level_scores, pending_compaction_bytes,
    pick_bottom_rewrite, pick_compaction, pick_range_compaction, pick_range_deletion,
    pick_small_table_merge, pick_tombstone_compaction, subcompaction_boundaries,
};
