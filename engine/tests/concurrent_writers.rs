//! Many threads writing at once: every acknowledged value is readable, also after reopen.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::sync::Arc;

use strata_engine::{Db, Options, WriteBatch, WriteOptions};

const THREADS: usize = 8;
const WRITES: usize = 10_000;

fn key(t: usize, i: usize) -> Vec<u8> {
    format!("t{t:02}-{i:06}").into_bytes()
}

fn value(t: usize, i: usize) -> Vec<u8> {
    format!("value-{t}-{i}-{}", i * 31 + t).into_bytes()
}

fn verify(db: &Db) {
    for t in 0..THREADS {
        for i in 0..WRITES {
            let got = db.get(&key(t, i)).expect("get");
            assert_eq!(
                got.as_deref(),
                Some(&value(t, i)[..]),
                "thread {t} write {i}"
            );
        }
    }
}

#[test]
fn eight_writer_threads_each_write_ten_thousand_values() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A small write buffer so flushes run concurrently with the writers.
    let options = Options::default().write_buffer_size(256 << 10);
    let db = Db::open(dir.path(), options.clone()).expect("open");
    let barrier = Arc::new(std::sync::Barrier::new(THREADS));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = db.clone();
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                for i in 0..WRITES {
                    if i % 100 == 0 {
                        // Some synced multi-entry batches in the mix.
                        let mut b = WriteBatch::new();
                        b.put(&key(t, i), &value(t, i));
                        db.write(
                            b,
                            &WriteOptions {
                                sync: i % 1000 == 0,
                                ..Default::default()
                            },
                        )
                        .expect("write");
                    } else {
                        db.put(&key(t, i), &value(t, i)).expect("put");
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().expect("writer panicked");
    }
    verify(&db);
    db.close().expect("close");
    let db = Db::open(dir.path(), options).expect("reopen");
    verify(&db);
    assert_eq!(db.iter(&Default::default()).count(), THREADS * WRITES);
}
