//! SSTables (in progress).
