//! Versions and the manifest (in progress).
