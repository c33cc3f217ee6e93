//! Strata's benchmark support: the peer comparison harness behind the `compare` binary.
//!
//! One workload code path drives every engine through the [`engine::Engine`] trait, so Strata
//! and its peers (RocksDB with the `rocksdb` feature, fjall with the `fjall` feature) run the
//! same loops over the same keys. Peers are optional so the default build (and CI) never
//! compiles RocksDB's C++. Method and results: `docs/benchmarks.md`.

pub mod engine;
pub mod keys;
pub mod plot;
pub mod stats;
pub mod sys;
pub mod workload;
