//! End-to-end tests live in `tests/tests/*.rs`; this library is empty on purpose.
