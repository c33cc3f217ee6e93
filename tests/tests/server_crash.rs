//! kill -9 of a `strata serve` process under write load, then restart: with
//! `--sync always`, every write the server acknowledged is there afterwards.
//!
//! The server process is this test binary re-executed with `STRATA_SERVER_CRASH_DIR` set
//! (see `crash_child_server`), so no separately built binary is needed. Each round starts
//! the server, verifies everything acknowledged in earlier rounds, runs four writer
//! connections (plain SETs, pipelined MSETs and INCRs), SIGKILLs the server at a random
//! moment and records the last acknowledged write of each writer. 3 rounds by default;
//! `STRATA_SERVER_CRASH_KILLS=<n>` for more.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

mod server_util;

use std::net::SocketAddr;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use redis::Commands;
use server_util::{ChildServer, run_child_server};
use strata_server::SyncMode;

const CHILD_DIR_ENV: &str = "STRATA_SERVER_CRASH_DIR";
const WRITERS: usize = 4;

/// The server process: only runs when spawned by the parent test (env var set).
#[test]
fn crash_child_server() {
    run_child_server(CHILD_DIR_ENV, |config| {
        config.pg_addr = None;
        config.sync = SyncMode::Always;
        // Small memtables so kills also land during flushes and compactions.
        config.write_buffer_size = 128 << 10;
    });
}

fn start_child(dir: &std::path::Path) -> (ChildServer, SocketAddr) {
    let server = ChildServer::start("crash_child_server", CHILD_DIR_ENV, dir);
    let addr = server.resp;
    (server, addr)
}

fn value(round: u32, writer: usize, i: u64) -> String {
    format!("r{round}-w{writer}-i{i}-{}", "v".repeat((i % 40) as usize))
}

fn key(round: u32, writer: usize, i: u64) -> String {
    format!("r{round}:w{writer}:{i:08}")
}

/// What one writer got acknowledged in one round.
#[derive(Debug, Default, Clone, Copy)]
struct Acked {
    /// Keys `0..keys` were acknowledged.
    keys: u64,
    /// The last value INCR returned.
    counter: i64,
}

/// Writes until the connection fails; returns what was acknowledged.
fn writer(addr: SocketAddr, round: u32, w: usize) -> Acked {
    let mut acked = Acked::default();
    let Ok(client) = redis::Client::open(format!("redis://{addr}/")) else {
        return acked;
    };
    let Ok(mut c) = client.get_connection() else {
        return acked;
    };
    let counter = format!("r{round}:counter:{w}");
    let mut i = 0u64;
    for step in 0u64.. {
        let ok = match step % 3 {
            0 => c
                .set::<_, _, ()>(key(round, w, i), value(round, w, i))
                .map(|()| 1),
            1 => {
                let pairs: Vec<(String, String)> = (i..i + 5)
                    .map(|j| (key(round, w, j), value(round, w, j)))
                    .collect();
                c.mset::<_, _, ()>(&pairs).map(|()| 5)
            }
            _ => c.incr::<_, _, i64>(&counter, 1).map(|v| {
                acked.counter = v;
                0
            }),
        };
        match ok {
            Ok(n) => {
                i += n;
                acked.keys = i;
            }
            Err(_) => break,
        }
    }
    acked
}

fn verify(addr: SocketAddr, history: &[(u32, [Acked; WRITERS])]) {
    let mut c = redis::Client::open(format!("redis://{addr}/"))
        .unwrap()
        .get_connection()
        .unwrap();
    for (round, acks) in history {
        for (w, acked) in acks.iter().enumerate() {
            let keys: Vec<String> = (0..acked.keys).map(|i| key(*round, w, i)).collect();
            for (chunk_start, chunk) in keys.chunks(500).enumerate() {
                let got: Vec<Option<String>> = c.mget(chunk).unwrap();
                for (j, v) in got.into_iter().enumerate() {
                    let i = (chunk_start * 500 + j) as u64;
                    assert_eq!(
                        v.as_deref(),
                        Some(value(*round, w, i).as_str()),
                        "round {round} writer {w}: acknowledged key {i} lost or wrong"
                    );
                }
            }
            let counter: Option<i64> = c.get(format!("r{round}:counter:{w}")).unwrap();
            assert!(
                counter.unwrap_or(0) >= acked.counter,
                "round {round} writer {w}: counter {counter:?} < acknowledged {}",
                acked.counter
            );
        }
    }
}

#[test]
fn kill_minus_nine_under_write_load_loses_no_acknowledged_write() {
    let kills: u32 = std::env::var("STRATA_SERVER_CRASH_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3);
    let seed: u64 = rand::random();
    println!("server crash test seed {seed}, {kills} kills");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut history: Vec<(u32, [Acked; WRITERS])> = Vec::new();
    for round in 0..kills {
        let (child, addr) = start_child(dir.path());
        verify(addr, &history);
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| std::thread::spawn(move || writer(addr, round, w)))
            .collect();
        std::thread::sleep(Duration::from_millis(rng.random_range(200..700)));
        child.kill();
        let mut acks = [Acked::default(); WRITERS];
        for (w, h) in writers.into_iter().enumerate() {
            acks[w] = h.join().expect("writer thread");
        }
        println!("round {round}: acknowledged {acks:?}");
        assert!(acks.iter().any(|a| a.keys > 0), "no write was acknowledged");
        history.push((round, acks));
    }
    let (child, addr) = start_child(dir.path());
    verify(addr, &history);
    child.kill();
}
