//! The `strata` command-line tool (in progress).
fn main() {}
