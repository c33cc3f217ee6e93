//! Versions and the manifest: which tables make up the database (spec:
//! `docs/format/manifest.md`; directory and recovery order: `docs/format/files.md`).
//!
//! - [`VersionEdit`] (`edit.rs`): a delta (tables added and removed, counters set) and its codec.
//! - [`Version`] (`version.rs`): the immutable set of tables per level at one point in time,
//!   with the lookups reads and compaction need.
//! - [`VersionSet`] (`set.rs`): the current version plus the file-number counter, the last
//!   sequence number and the log number; it appends edits to the manifest and recovers from it.
//! - `manifest.rs`: the manifest file (a log in the WAL record format) and `CURRENT`.
//!
//! ```text
//! MANIFEST-000014:  [snapshot edit][edit][edit]...      each edit one WAL-format record
//! CURRENT:          "MANIFEST-000014\n"                 switched via CURRENT.tmp + rename
//! ```

pub mod edit;
pub mod manifest;
mod set;
#[cfg(test)]
mod tests;
#[expect(
    clippy::module_inception,
    reason = "the module layout is fixed by the style guide"
)]
mod version;

pub use edit::{FileMeta, NUM_LEVELS, VersionEdit};
pub use manifest::MAX_MANIFEST_SIZE;
pub use set::{DEFAULT_KEYSPACE, DEFAULT_KEYSPACE_NAME, RecoveredManifest, VersionSet};
pub use version::{Builder, Version};
