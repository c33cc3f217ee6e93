//! Compaction (in progress).
