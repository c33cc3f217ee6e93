//! Crash test with a real process: a child process writes numbered batches (some with
//! `sync: true`) and prints an acknowledgement after each `write` returns; the test SIGKILLs it
//! at a random moment, reopens the database and checks that
//! - every acknowledged batch is present (kill -9 keeps the page cache, so even `sync: false`
//!   writes survive it; synced ones would survive a power loss too),
//! - every batch is all-or-nothing,
//! - the recovered batches are a prefix of the issued order (no holes).
//!
//! Entries of a batch go to three keyspaces (the default one, `often` with the same tiny write
//! buffer and `rare` with a large one, so its records keep old WALs alive while the others
//! flush): every batch spanning keyspaces must still be all-or-nothing.
//!
//! The write buffer and level sizes are tiny so kills also land during flushes and
//! compactions. 20 kills by default;
//! `STRATA_CRASH_KILLS=<n>` for more.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use rand::{Rng, SeedableRng};
use strata_engine::{Db, Keyspace, Options, WriteBatch, WriteOptions};

const CHILD_DIR_ENV: &str = "STRATA_CRASH_CHILD_DIR";
const CHILD_START_ENV: &str = "STRATA_CRASH_CHILD_START";

fn options() -> Options {
    Options::default()
        .write_buffer_size(32 << 10)
        .block_size(512)
        .target_file_size(16 << 10)
        .max_bytes_for_level_base(64 << 10)
        .level0_file_num_compaction_trigger(2)
        .with_keyspace_options("rare", Options::default().write_buffer_size(4 << 20))
}

/// Keyspaces of entry `j`: `j % 3` indexes `[default, often, rare]`.
const KEYSPACES: [&str; 3] = ["default", "often", "rare"];

fn keyspaces(db: &Db) -> Vec<Keyspace> {
    KEYSPACES
        .iter()
        .map(|n| db.keyspace(n).expect("keyspace"))
        .collect()
}

/// Keys of batch `i`: `b{i}-{j}` for `j < batch_width(i)`.
fn batch_width(i: u64) -> u64 {
    1 + (i.wrapping_mul(2_654_435_761) >> 7) % 4
}

fn batch_key(i: u64, j: u64) -> Vec<u8> {
    format!("b{i:010}-{j}").into_bytes()
}

fn batch_value(i: u64, j: u64) -> Vec<u8> {
    format!("value {i} {j} {}", "x".repeat((i % 50) as usize)).into_bytes()
}

/// The child's body: only runs when spawned by the parent test (env var set).
#[test]
fn crash_child_writer() {
    let Ok(dir) = std::env::var(CHILD_DIR_ENV) else {
        return;
    };
    let start: u64 = std::env::var(CHILD_START_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let db = Db::open(&dir, options()).expect("child open");
    let ks = keyspaces(&db);
    for i in start.. {
        let mut batch = WriteBatch::new();
        for j in 0..batch_width(i) {
            batch.put_in(&ks[(j % 3) as usize], &batch_key(i, j), &batch_value(i, j));
        }
        let sync = i % 7 == 0;
        db.write(
            batch,
            &WriteOptions {
                sync,
                ..Default::default()
            },
        )
        .expect("child write");
        println!("ACK {i} {}", u8::from(sync));
    }
}

/// Reads the database and returns the number of complete batches, checking atomicity and the
/// prefix property.
fn verify(dir: &std::path::Path, acked: Option<u64>) -> u64 {
    let db = Db::open(dir, options()).expect("reopen after kill");
    let mut per_batch: BTreeMap<u64, u64> = BTreeMap::new();
    let ks = keyspaces(&db);
    let snapshot = db.snapshot();
    for (n, keyspace) in ks.iter().enumerate() {
        for kv in keyspace.iter(&strata_engine::ReadOptions::at(&snapshot)) {
            let (k, v) = kv.expect("scan after kill");
            let text = std::str::from_utf8(&k).expect("utf8 key");
            let (i, j) = text[1..].split_once('-').expect("key shape");
            let (i, j): (u64, u64) = (i.parse().expect("i"), j.parse().expect("j"));
            assert_eq!(j % 3, n as u64, "entry {j} of batch {i} in keyspace {n}");
            assert_eq!(
                v.as_ref(),
                &batch_value(i, j)[..],
                "value of batch {i} entry {j}"
            );
            *per_batch.entry(i).or_default() += 1;
        }
    }
    drop((ks, snapshot));
    let mut expected_next = 0;
    for (&i, &n) in &per_batch {
        assert_eq!(
            i, expected_next,
            "hole: batch {expected_next} missing but {i} present"
        );
        assert_eq!(
            n,
            batch_width(i),
            "batch {i} is partial ({n} of {} entries)",
            batch_width(i)
        );
        expected_next += 1;
    }
    if let Some(acked) = acked {
        assert!(
            expected_next > acked,
            "acknowledged batch {acked} lost: only {expected_next} batches recovered"
        );
    }
    db.close().expect("close");
    expected_next
}

#[test]
fn kill_minus_nine_during_writes_and_flushes_loses_no_acknowledged_batch() {
    let kills: u32 = std::env::var("STRATA_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20);
    let seed: u64 = rand::random();
    println!("crash test seed {seed}, {kills} kills");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::current_exe().expect("test binary path");
    let mut next = 0u64;
    for round in 0..kills {
        let mut child = Command::new(&exe)
            .args([
                "crash_child_writer",
                "--exact",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR_ENV, dir.path())
            .env(CHILD_START_ENV, next.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn child");
        let stdout = child.stdout.take().expect("child stdout");
        let reader = std::thread::spawn(move || {
            let mut last = None;
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.strip_prefix("ACK ") {
                    last = rest.split(' ').next().and_then(|n| n.parse::<u64>().ok());
                }
            }
            last
        });
        std::thread::sleep(Duration::from_millis(rng.random_range(30..400)));
        child.kill().expect("SIGKILL child");
        child.wait().expect("reap child");
        let acked = reader.join().expect("reader thread");
        let recovered = verify(dir.path(), acked);
        println!("round {round}: acked up to {acked:?}, recovered {recovered} batches");
        assert!(
            recovered >= next,
            "round {round}: recovered {recovered} < previous {next}"
        );
        next = recovered;
    }
    assert!(next > 0, "the child never wrote anything");
}
