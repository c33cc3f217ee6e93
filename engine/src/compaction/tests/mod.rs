//! Tests of the compaction picker (synthetic versions and a simulator, no I/O) and of the
//! compaction job (real tables in a temporary directory).

mod job;
mod picker;
mod sim;
mod simulate;
