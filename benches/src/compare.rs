//! Peer comparison harness (in progress).
fn main() {}
