//! Soak test (issue #8): `strata serve --sync always` under a mixed load from several client
//! threads, SIGKILLed at random moments again and again for a set time; after every restart
//! the whole database is checked against the log of acknowledged writes.
//!
//! The server is this test binary re-executed (`soak_child_server`, through
//! `server_util::ChildServer`), with small memtables so kills land in flushes and
//! compactions too. Each round: start the server, verify everything, run the load, SIGKILL
//! at a random moment (one round in eight right after startup, before any load).
//!
//! Load: four RESP writers, each with its own 1,000 keys (`SET`, `MSET` of three keys, `DEL`,
//! `SET NX`, and `GET`s that must read the writer's own last acknowledged value), `INCRBY`
//! on eight counters shared by all writers, and one PostgreSQL writer (`INSERT`, `UPDATE`,
//! `DELETE` on a table in the same database). Each writer keeps a model of what it got
//! acknowledged plus the one operation in flight when the server died.
//!
//! After a restart: every key holds its last acknowledged value, or the value of the
//! operation in flight (an `MSET` all or nothing); deleted keys stay deleted; `DBSIZE` has no
//! extra keys; each counter equals its value at the last check plus the acknowledged
//! increments plus some subset of the in-flight ones; the table holds exactly the
//! acknowledged rows (give or take the in-flight statement). The model then adopts what the
//! in-flight operations turned out to be.
//!
//! `STRATA_SOAK_SECONDS` (default 75) sets the duration; `STRATA_SOAK_SEED` replays the
//! random choices (kill timing still depends on the machine).

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

mod server_util;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use server_util::{ChildServer, run_child_server};
use strata_server::SyncMode;

const CHILD_DIR_ENV: &str = "STRATA_SOAK_DIR";
const RESP_WRITERS: usize = 4;
const KEYS_PER_WRITER: usize = 1_000;
const COUNTERS: usize = 8;
const TABLE: &str = "soak";

/// The server process: only runs when spawned by the soak test (env var set).
#[test]
fn soak_child_server() {
    run_child_server(CHILD_DIR_ENV, |config| {
        config.sync = SyncMode::Always;
        // Small memtables: flushes and compactions all the time.
        config.write_buffer_size = 256 << 10;
        config.block_cache_size = 4 << 20;
    });
}

fn key(w: usize, i: usize) -> String {
    format!("w{w}:{i:04}")
}

fn counter(j: usize) -> String {
    format!("ctr:{j}")
}

/// Operation counts, for the report.
#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    set: u64,
    mset: u64,
    del: u64,
    set_nx: u64,
    incrby: u64,
    get: u64,
    sql: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.set += o.set;
        self.mset += o.mset;
        self.del += o.del;
        self.set_nx += o.set_nx;
        self.incrby += o.incrby;
        self.get += o.get;
        self.sql += o.sql;
    }

    fn total(&self) -> u64 {
        self.set + self.mset + self.del + self.set_nx + self.incrby + self.get + self.sql
    }
}

/// A write whose reply never came: it may or may not have been applied.
#[derive(Debug, Clone)]
enum InFlight {
    /// These keys take these values (all or none: one `SET`, `MSET`, `DEL` or `SET NX`).
    Keys(Vec<(String, Option<String>)>),
    /// `INCRBY counter delta`.
    Incr(usize, i64),
}

/// What one RESP writer knows: its keys' acknowledged values, its acknowledged increments
/// since the last check, and its write in flight.
#[derive(Debug)]
struct RespModel {
    w: usize,
    keys: Vec<Option<String>>,
    incr_acked: [i64; COUNTERS],
    in_flight: Option<InFlight>,
    counts: Counts,
    ops: u64,
}

impl RespModel {
    fn new(w: usize) -> Self {
        RespModel {
            w,
            keys: vec![None; KEYS_PER_WRITER],
            incr_acked: [0; COUNTERS],
            in_flight: None,
            counts: Counts::default(),
            ops: 0,
        }
    }

    fn value(&mut self, round: u32) -> String {
        self.ops += 1;
        let pad = "x".repeat(usize::try_from(self.ops % 64).unwrap_or(0));
        format!("w{}-r{round}-o{}-{pad}", self.w, self.ops)
    }
}

/// Runs random operations until the connection fails (the server was killed).
fn resp_writer(addr: SocketAddr, round: u32, seed: u64, mut m: RespModel) -> RespModel {
    let mut rng = StdRng::seed_from_u64(seed);
    let Ok(mut c) = connect_resp(addr) else {
        return m;
    };
    loop {
        let choice = rng.random_range(0..100);
        let i = rng.random_range(0..KEYS_PER_WRITER);
        let ok = if choice < 30 {
            let v = m.value(round);
            m.in_flight = Some(InFlight::Keys(vec![(key(m.w, i), Some(v.clone()))]));
            redis::cmd("SET")
                .arg(key(m.w, i))
                .arg(&v)
                .query::<()>(&mut c)
                .map(|()| {
                    m.keys[i] = Some(v);
                    m.counts.set += 1;
                })
        } else if choice < 45 {
            let idx: Vec<usize> = (0..3).map(|k| (i + k * 7) % KEYS_PER_WRITER).collect();
            let pairs: Vec<(usize, String)> = idx.iter().map(|&j| (j, m.value(round))).collect();
            m.in_flight = Some(InFlight::Keys(
                pairs
                    .iter()
                    .map(|(j, v)| (key(m.w, *j), Some(v.clone())))
                    .collect(),
            ));
            let mut cmd = redis::cmd("MSET");
            for (j, v) in &pairs {
                cmd.arg(key(m.w, *j)).arg(v);
            }
            cmd.query::<()>(&mut c).map(|()| {
                for (j, v) in pairs {
                    m.keys[j] = Some(v);
                }
                m.counts.mset += 1;
            })
        } else if choice < 55 {
            m.in_flight = Some(InFlight::Keys(vec![(key(m.w, i), None)]));
            redis::cmd("DEL")
                .arg(key(m.w, i))
                .query::<i64>(&mut c)
                .map(|n| {
                    assert_eq!(
                        n,
                        i64::from(m.keys[i].is_some()),
                        "DEL {} disagrees with the model",
                        key(m.w, i)
                    );
                    m.keys[i] = None;
                    m.counts.del += 1;
                })
        } else if choice < 65 {
            let v = m.value(round);
            let absent = m.keys[i].is_none();
            m.in_flight = absent.then(|| InFlight::Keys(vec![(key(m.w, i), Some(v.clone()))]));
            redis::cmd("SET")
                .arg(key(m.w, i))
                .arg(&v)
                .arg("NX")
                .query::<Option<String>>(&mut c)
                .map(|reply| {
                    assert_eq!(
                        reply.is_some(),
                        absent,
                        "SET NX {} disagrees with the model",
                        key(m.w, i)
                    );
                    if absent {
                        m.keys[i] = Some(v);
                    }
                    m.counts.set_nx += 1;
                })
        } else if choice < 80 {
            let j = rng.random_range(0..COUNTERS);
            let delta = rng.random_range(1..=100);
            m.in_flight = Some(InFlight::Incr(j, delta));
            redis::cmd("INCRBY")
                .arg(counter(j))
                .arg(delta)
                .query::<i64>(&mut c)
                .map(|_| {
                    m.incr_acked[j] += delta;
                    m.counts.incrby += 1;
                })
        } else {
            m.in_flight = None;
            redis::cmd("GET")
                .arg(key(m.w, i))
                .query::<Option<String>>(&mut c)
                .map(|got| {
                    assert_eq!(
                        got,
                        m.keys[i],
                        "GET {} does not read the writer's last acknowledged write",
                        key(m.w, i)
                    );
                    m.counts.get += 1;
                })
        };
        match ok {
            Ok(()) => m.in_flight = None,
            Err(_) => return m,
        }
    }
}

fn connect_resp(addr: SocketAddr) -> redis::RedisResult<redis::Connection> {
    let c = redis::Client::open(format!("redis://{addr}/"))?.get_connection()?;
    c.set_read_timeout(Some(Duration::from_secs(30)))?;
    Ok(c)
}

/// What the PostgreSQL writer knows: acknowledged rows and the statement in flight.
#[derive(Debug, Default)]
struct SqlModel {
    rows: BTreeMap<i64, String>,
    next_id: i64,
    /// The row the statement in flight sets (`None`: deletes).
    in_flight: Option<(i64, Option<String>)>,
    counts: Counts,
}

async fn pg_connect(addr: SocketAddr) -> Result<tokio_postgres::Client, tokio_postgres::Error> {
    let conninfo = format!(
        "host={} port={} user=soak dbname=db0",
        addr.ip(),
        addr.port()
    );
    let (client, connection) = tokio_postgres::connect(&conninfo, tokio_postgres::NoTls).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(client)
}

fn pg_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// Runs INSERT / UPDATE / DELETE until the connection fails.
fn sql_writer(addr: SocketAddr, round: u32, seed: u64, mut m: SqlModel) -> SqlModel {
    let mut rng = StdRng::seed_from_u64(seed);
    pg_runtime().block_on(async {
        let Ok(client) = pg_connect(addr).await else {
            return;
        };
        let mut op = 0u64;
        loop {
            op += 1;
            let choice = rng.random_range(0..100);
            let existing = (!m.rows.is_empty())
                .then(|| {
                    let nth = rng.random_range(0..m.rows.len());
                    m.rows.keys().nth(nth).copied()
                })
                .flatten();
            let value = format!("r{round}-o{op}");
            let (stmt, id, new) = match existing {
                Some(id) if choice < 20 => (
                    format!("UPDATE {TABLE} SET v = '{value}' WHERE id = {id}"),
                    id,
                    Some(value),
                ),
                Some(id) if choice < 30 => {
                    (format!("DELETE FROM {TABLE} WHERE id = {id}"), id, None)
                }
                _ => {
                    let id = m.next_id;
                    m.next_id += 1;
                    (
                        format!("INSERT INTO {TABLE} VALUES ({id}, '{value}')"),
                        id,
                        Some(value),
                    )
                }
            };
            m.in_flight = Some((id, new.clone()));
            if client.simple_query(&stmt).await.is_err() {
                return;
            }
            match new {
                Some(v) => m.rows.insert(id, v),
                None => m.rows.remove(&id),
            };
            // `in_flight` keeps this statement until the next one replaces it: harmless,
            // since the table then shows its effect, which the model already has.
            m.counts.sql += 1;
        }
    });
    m
}

/// Everything the harness knows across rounds.
struct Harness {
    resp: Vec<RespModel>,
    sql: SqlModel,
    /// Counter values at the last verification.
    counter_base: [i64; COUNTERS],
    keys_verified: u64,
    in_flight_seen: u64,
    in_flight_applied: u64,
}

impl Harness {
    /// Checks the restarted server against the models, then resolves the in-flight
    /// operations by what was found.
    fn verify(&mut self, server: &ChildServer, round: u32) {
        let mut c = connect_resp(server.resp).expect("connect for verification");
        let mut expected_keys = 0i64;
        for m in &mut self.resp {
            let names: Vec<String> = (0..KEYS_PER_WRITER).map(|i| key(m.w, i)).collect();
            let mut found: Vec<Option<String>> = Vec::with_capacity(KEYS_PER_WRITER);
            for chunk in names.chunks(250) {
                let got: Vec<Option<String>> =
                    redis::cmd("MGET").arg(chunk).query(&mut c).expect("MGET");
                found.extend(got);
            }
            let flight: Vec<(usize, Option<String>)> = match &m.in_flight {
                Some(InFlight::Keys(kvs)) => kvs
                    .iter()
                    .map(|(k, v)| {
                        let i = names.iter().position(|n| n == k).expect("own key");
                        (i, v.clone())
                    })
                    .collect(),
                _ => Vec::new(),
            };
            // The in-flight write was applied if its keys show its values (all of them).
            let applied = !flight.is_empty()
                && flight.iter().all(|(i, v)| found[*i] == *v)
                && flight.iter().any(|(i, v)| m.keys[*i] != *v);
            let partial = flight
                .iter()
                .any(|(i, v)| found[*i] == *v && m.keys[*i] != *v);
            assert!(
                applied || !partial,
                "round {round}: writer {} in-flight write half applied: {flight:?}",
                m.w
            );
            if applied {
                for (i, v) in &flight {
                    m.keys[*i] = v.clone();
                }
            }
            if !flight.is_empty() {
                self.in_flight_seen += 1;
                self.in_flight_applied += u64::from(applied);
            }
            for (i, got) in found.iter().enumerate() {
                assert_eq!(
                    got, &m.keys[i],
                    "round {round}: {} is not its last acknowledged value (in flight: {:?})",
                    names[i], m.in_flight
                );
            }
            expected_keys += m.keys.iter().filter(|v| v.is_some()).count() as i64;
            self.keys_verified += KEYS_PER_WRITER as u64;
        }
        for j in 0..COUNTERS {
            let got: Option<i64> = redis::cmd("GET")
                .arg(counter(j))
                .query(&mut c)
                .expect("GET");
            let got = got.unwrap_or(0);
            let acked: i64 = self.resp.iter().map(|m| m.incr_acked[j]).sum();
            let pending: Vec<i64> = self
                .resp
                .iter()
                .filter_map(|m| match m.in_flight {
                    Some(InFlight::Incr(k, d)) if k == j => Some(d),
                    _ => None,
                })
                .collect();
            let base = self.counter_base[j] + acked;
            let possible = (0..1u32 << pending.len()).any(|mask| {
                let extra: i64 = (0..pending.len())
                    .filter(|b| mask & (1 << b) != 0)
                    .map(|b| pending[b])
                    .sum();
                base + extra == got
            });
            assert!(
                possible,
                "round {round}: counter {j} is {got}, expected {base} plus some of {pending:?}"
            );
            self.counter_base[j] = got;
            expected_keys += i64::from(got != 0);
            self.keys_verified += 1;
        }
        for m in &mut self.resp {
            if let Some(InFlight::Incr(..)) = m.in_flight {
                self.in_flight_seen += 1;
            }
            m.incr_acked = [0; COUNTERS];
            m.in_flight = None;
        }
        let dbsize: i64 = redis::cmd("DBSIZE").query(&mut c).expect("DBSIZE");
        assert_eq!(
            dbsize, expected_keys,
            "round {round}: keys nobody wrote, or lost"
        );
        self.verify_sql(server, round);
    }

    fn verify_sql(&mut self, server: &ChildServer, round: u32) {
        let addr = server.pg.expect("PostgreSQL address");
        let rows: BTreeMap<i64, String> = pg_runtime().block_on(async {
            let client = pg_connect(addr).await.expect("pg connect");
            client
                .batch_execute(&format!(
                    "CREATE TABLE IF NOT EXISTS {TABLE} (id BIGINT PRIMARY KEY, v TEXT NOT NULL)"
                ))
                .await
                .expect("create table");
            client
                .query(&format!("SELECT id, v FROM {TABLE}"), &[])
                .await
                .expect("select")
                .iter()
                .map(|r| (r.get::<_, i64>(0), r.get::<_, String>(1)))
                .collect()
        });
        let m = &mut self.sql;
        if let Some((id, new)) = m.in_flight.take() {
            self.in_flight_seen += 1;
            if rows.get(&id) == new.as_ref() && m.rows.get(&id) != new.as_ref() {
                self.in_flight_applied += 1;
                match new {
                    Some(v) => m.rows.insert(id, v),
                    None => m.rows.remove(&id),
                };
            }
        }
        assert_eq!(
            rows.len(),
            m.rows.len(),
            "round {round}: the table has {} rows, {} were acknowledged",
            rows.len(),
            m.rows.len()
        );
        for (id, v) in &m.rows {
            assert_eq!(
                rows.get(id),
                Some(v),
                "round {round}: row {id} is not its last acknowledged value"
            );
        }
        self.keys_verified += rows.len() as u64;
    }
}

#[test]
fn soak_kill_minus_nine_under_mixed_load_keeps_every_acknowledged_write() {
    let seconds: u64 = std::env::var("STRATA_SOAK_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(75);
    let seed: u64 = std::env::var("STRATA_SOAK_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    println!("soak: {seconds} s, seed {seed} (STRATA_SOAK_SEED={seed} replays the choices)");
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut h = Harness {
        resp: (0..RESP_WRITERS).map(RespModel::new).collect(),
        sql: SqlModel::default(),
        counter_base: [0; COUNTERS],
        keys_verified: 0,
        in_flight_seen: 0,
        in_flight_applied: 0,
    };
    let started = Instant::now();
    let deadline = started + Duration::from_secs(seconds);
    let (mut kills, mut idle_kills) = (0u32, 0u32);
    let mut round = 0u32;
    while Instant::now() < deadline {
        let server = ChildServer::start("soak_child_server", CHILD_DIR_ENV, dir.path());
        if round > 0 && rng.random_range(0..8) == 0 {
            // Killed right after startup: recovery's flushes and compactions may be running.
            server.kill();
            kills += 1;
            idle_kills += 1;
            round += 1;
            continue;
        }
        h.verify(&server, round);
        let resp = server.resp;
        let pg = server.pg.expect("PostgreSQL address");
        let writers: Vec<_> = h
            .resp
            .drain(..)
            .map(|m| {
                let s = rng.random();
                std::thread::spawn(move || resp_writer(resp, round, s, m))
            })
            .collect();
        let sql = std::mem::take(&mut h.sql);
        let s = rng.random();
        let sql_writer = std::thread::spawn(move || sql_writer(pg, round, s, sql));
        std::thread::sleep(Duration::from_millis(rng.random_range(200..2_500)));
        server.kill();
        kills += 1;
        for w in writers {
            h.resp.push(w.join().expect("RESP writer"));
        }
        h.sql = sql_writer.join().expect("SQL writer");
        round += 1;
    }
    let server = ChildServer::start("soak_child_server", CHILD_DIR_ENV, dir.path());
    h.verify(&server, round);
    server.kill();
    let mut counts = Counts::default();
    for m in &h.resp {
        counts.add(&m.counts);
    }
    counts.add(&h.sql.counts);
    println!(
        "soak report: {:.0} s, seed {seed}: {kills} SIGKILLs survived ({idle_kills} right after \
         startup), {} verifications, {} keys/counters/rows verified in all; {} operations \
         acknowledged (SET {}, MSET {}, DEL {}, SET NX {}, INCRBY {}, GET {}, SQL {}); {} \
         writes in flight at a kill, {} of them applied; final state {} keys and {} rows",
        started.elapsed().as_secs_f64(),
        round - idle_kills + 1,
        h.keys_verified,
        counts.total(),
        counts.set,
        counts.mset,
        counts.del,
        counts.set_nx,
        counts.incrby,
        counts.get,
        counts.sql,
        h.in_flight_seen,
        h.in_flight_applied,
        h.resp
            .iter()
            .map(|m| m.keys.iter().filter(|v| v.is_some()).count())
            .sum::<usize>(),
        h.sql.rows.len(),
    );
    assert!(kills > 0, "the run was too short for a single kill");
    assert!(counts.total() > 0, "no operation was acknowledged");
}
