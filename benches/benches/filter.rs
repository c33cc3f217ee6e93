//! Bloom filter build and probe cost: one filter over every key of a table (SSTable format 1)
//! against the hash-partitioned filter of format 2 (`docs/format/sstable.md` section 4).
//!
//! `cargo bench -p strata-benches --bench filter`. 4,000,000 keys (the 8-byte random keys of
//! the comparison workloads; about one 64 MiB table of 16-byte records) at 10 bits per key:
//! building the serialized filter, and probing it with absent keys.
#![allow(clippy::expect_used, reason = "a benchmark aborts on errors")]

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use strata_benches::keys::{DEFAULT_SEED, KeyStream};
use strata_engine::TableFormat;
use strata_engine::sstable::filter::{Filter, FilterBuilder};

/// Keys per filter.
const KEYS: u64 = 4_000_000;
/// Absent keys probed per iteration.
const PROBES: u64 = 100_000;
/// The two filter layouts compared, by benchmark name.
const FORMATS: [(&str, TableFormat); 2] = [
    ("v1_one", TableFormat::V1),
    ("v2_partitioned", TableFormat::V2),
];

fn build(format: TableFormat, keys: &[[u8; 8]]) -> Vec<u8> {
    let mut b = FilterBuilder::new(10, format);
    for k in keys {
        b.add_key(k);
    }
    b.finish().expect("filter").expect("keys were added")
}

fn filters(c: &mut Criterion) {
    let stream = KeyStream::new(DEFAULT_SEED);
    let keys: Vec<[u8; 8]> = (0..KEYS).map(|i| stream.key(i)).collect();
    let absent: Vec<[u8; 8]> = (KEYS..KEYS + PROBES).map(|i| stream.key(i)).collect();
    let mut group = c.benchmark_group("filter/build_4m");
    group.throughput(Throughput::Elements(KEYS));
    group.sample_size(10);
    for (name, format) in FORMATS {
        group.bench_function(name, |b| b.iter(|| black_box(build(format, &keys))));
    }
    group.finish();

    let mut group = c.benchmark_group("filter/probe_absent");
    group.throughput(Throughput::Elements(PROBES));
    group.sample_size(10);
    for (name, format) in FORMATS {
        let filter = Filter::decode(&build(format, &keys), format, Path::new("bench.sst"), 0)
            .expect("decode");
        group.bench_function(name, |b| {
            b.iter(|| absent.iter().filter(|k| filter.may_contain(&k[..])).count());
        });
    }
    group.finish();
}

criterion_group!(benches, filters);
criterion_main!(benches);
