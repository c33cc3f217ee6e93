//! Memtable insert and lookup cost, with the 16-byte records of the comparison workloads.
//!
//! `cargo bench -p strata-benches --bench memtable`. Inserts go into a fresh memtable per
//! iteration (100,000 records, random or ascending keys); lookups run against a memtable
//! prefilled with 1,000,000 random keys, for present and absent keys.
#![allow(clippy::expect_used, reason = "a benchmark aborts on errors")]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use strata_benches::keys::{DEFAULT_SEED, KeyStream, Picker};
use strata_engine::memtable::MemTable;
use strata_engine::{SeqNo, ValueKind};

/// Records per insert iteration.
const INSERTS: u64 = 100_000;
/// Records in the memtable the lookups run against.
const PREFILL: u64 = 1_000_000;

fn insert(c: &mut Criterion) {
    let stream = KeyStream::new(DEFAULT_SEED);
    let random: Vec<_> = (0..INSERTS).map(|i| stream.record(i)).collect();
    let ascending: Vec<_> = (0..INSERTS)
        .map(|i| (i.to_le_bytes(), KeyStream::value(i)))
        .collect();
    let mut group = c.benchmark_group("memtable/insert");
    group.throughput(Throughput::Elements(INSERTS));
    group.sample_size(20);
    group.bench_function("random_100k", |b| {
        b.iter_batched(
            MemTable::new,
            |m| {
                for (seq, r) in (1..).zip(&random) {
                    m.add(SeqNo(seq), ValueKind::Put, &r.key, &r.value);
                }
                m
            },
            BatchSize::LargeInput,
        );
    });
    group.bench_function("ascending_100k", |b| {
        b.iter_batched(
            MemTable::new,
            |m| {
                for (seq, (k, v)) in (1..).zip(&ascending) {
                    m.add(SeqNo(seq), ValueKind::Put, k, v);
                }
                m
            },
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

fn get(c: &mut Criterion) {
    let stream = KeyStream::new(DEFAULT_SEED);
    let m = MemTable::new();
    for i in 0..PREFILL {
        let r = stream.record(i);
        m.add(SeqNo(i + 1), ValueKind::Put, &r.key, &r.value);
    }
    let mut group = c.benchmark_group("memtable/get_1m");
    group.throughput(Throughput::Elements(1));
    let mut picker = Picker::new(1);
    group.bench_function("hit", |b| {
        b.iter(|| {
            let key = stream.key(picker.below(PREFILL));
            black_box(m.get(&key, SeqNo::MAX)).expect("present key")
        });
    });
    group.bench_function("miss", |b| {
        b.iter(|| {
            let key = stream.key(PREFILL + picker.below(PREFILL));
            black_box(m.get(&key, SeqNo::MAX))
        });
    });
    group.finish();
}

criterion_group!(benches, insert, get);
criterion_main!(benches);
