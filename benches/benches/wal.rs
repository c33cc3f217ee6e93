//! WAL append throughput: records of several sizes, without and with an fsync per record.
//!
//! `cargo bench -p strata-benches --bench wal`. Unsynced appends measure framing, checksums and
//! the write into the page cache; the log is recreated every 16 MiB (outside the timing) so a
//! run does not push gigabytes to the disk. Synced appends measure one fdatasync per record,
//! the cost a lone writer pays with `WriteOptions { sync: true }`.
#![allow(clippy::expect_used, reason = "a benchmark aborts on I/O errors")]

use std::hint::black_box;
use std::path::Path;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use strata_engine::wal::Writer;

/// Bytes appended to one log before it is replaced.
const ROTATE_BYTES: u64 = 16 << 20;

fn create(dir: &Path, n: u64) -> Writer {
    Writer::create(&strata_engine::fs::OsFs, &dir.join(format!("{n:06}.wal"))).expect("create WAL")
}

fn remove(dir: &Path, n: u64) {
    std::fs::remove_file(dir.join(format!("{n:06}.wal"))).expect("remove WAL");
}

fn append_unsynced(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("wal/append");
    for size in [100usize, 4096, 65536] {
        let payload = vec![0xA5u8; size];
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("nosync", size), &payload, |b, payload| {
            let mut file_no = 0;
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut writer = create(dir.path(), file_no);
                let mut written = 0u64;
                for _ in 0..iters {
                    if written >= ROTATE_BYTES {
                        drop(writer);
                        remove(dir.path(), file_no);
                        file_no += 1;
                        writer = create(dir.path(), file_no);
                        written = 0;
                    }
                    let start = Instant::now();
                    writer.add_record(black_box(payload)).expect("append");
                    total += start.elapsed();
                    written += payload.len() as u64;
                }
                drop(writer);
                remove(dir.path(), file_no);
                file_no += 1;
                total
            });
        });
    }
    group.finish();
}

fn append_synced(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut group = c.benchmark_group("wal/append");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(5));
    for size in [100usize, 4096] {
        let payload = vec![0x5Au8; size];
        let mut writer = create(dir.path(), 1_000_000 + size as u64);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("sync", size), &payload, |b, payload| {
            b.iter(|| {
                writer.add_record(black_box(payload)).expect("append");
                writer.sync().expect("sync");
            });
        });
    }
    group.finish();
}

criterion_group!(benches, append_unsynced, append_synced);
criterion_main!(benches);
