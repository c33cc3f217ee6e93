//! `strata rebalance CONFIG`: after a change to a twemproxy pool (a node added, removed or
//! reweighted), moves every key to the node the proxy now sends it to (docs/scale-out.md).
//!
//! For each node of the pool in `CONFIG` (the new topology) and each `--drain` node (leaving
//! it), the key space of the pool's database (`redis_db`, default 0) is walked with `SCAN`; for each key, [`Continuum::owner`]
//! computes the node nutcracker picks (ketama over `fnv1a_64`, [`super::ketama`]). A key on
//! another node than its owner is **misplaced**, and is moved in three checked, pipelined
//! steps: `GET` on the node holding it, `SET` on the owner (every reply must be `+OK`), then
//! `DEL` on the old node, only after the owner acknowledged the `SET`, so a failure at any
//! point leaves each key on at least one node. Running it again after a failure finishes
//! the job.
//!
//! Modes: `--check` moves nothing and exits with status 1 if any key is misplaced (after a
//! load through the proxy it must report none, which also checks that the placement model
//! agrees with the running proxy); `--keep` copies without deleting, so the proxy still
//! running the old configuration keeps finding every key until it is restarted.
//!
//! Clients must not write while keys move: a write through the proxy between the `GET` and
//! the `DEL` of the same key would be lost. Reads may go on (see the procedure in the docs).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use redis::Value;

use super::client::{self, Expect};
use super::ketama::Continuum;
use super::nutcracker::{self, Pool};

/// Arguments of `strata rebalance`.
#[derive(Debug, Args)]
pub(crate) struct RebalanceArgs {
    /// The nutcracker configuration file describing the pool as it is to be (new topology).
    config: PathBuf,
    /// The pool to rebalance, when the file has several.
    #[arg(long)]
    pool: Option<String>,
    /// A node (HOST:PORT) that is leaving the pool: every key on it moves to its owner.
    /// Repeat for several.
    #[arg(long, value_name = "HOST:PORT")]
    drain: Vec<String>,
    /// Move nothing: report misplaced keys and exit with status 1 if there are any.
    #[arg(long, conflicts_with = "keep")]
    check: bool,
    /// Copy misplaced keys to their owner but leave them where they are too (first pass,
    /// while the proxy still runs the old configuration).
    #[arg(long)]
    keep: bool,
    /// Keys per SCAN call and per pipeline.
    #[arg(long, default_value_t = 500)]
    batch: usize,
}

/// Most bytes of values read and written per group of moved keys (one key larger than this
/// moves alone).
const MOVE_BYTES: u64 = 64 << 20;

/// Cuts keys of `sizes` bytes, in order, into consecutive groups of at most `limit` bytes
/// (a key over `limit` alone), as index ranges.
fn move_groups(sizes: &[u64], limit: u64) -> Vec<std::ops::Range<usize>> {
    let mut groups = Vec::new();
    let (mut start, mut bytes) = (0, 0u64);
    for (i, &size) in sizes.iter().enumerate() {
        if i > start && bytes.saturating_add(size) > limit {
            groups.push(start..i);
            (start, bytes) = (i, 0);
        }
        bytes = bytes.saturating_add(size);
    }
    if start < sizes.len() {
        groups.push(start..sizes.len());
    }
    groups
}

/// What to do with misplaced keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Count them only.
    Check,
    /// Copy to the owner, then delete from the old node.
    Move,
    /// Copy to the owner and leave the old copy.
    Copy,
}

/// One node walked, and what was found on it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct NodeReport {
    /// `HOST:PORT`.
    pub(crate) addr: String,
    /// Its name on the continuum (`None` for a drained node).
    pub(crate) name: Option<String>,
    /// Keys seen by SCAN.
    pub(crate) scanned: u64,
    /// Misplaced keys, by the name of their owner.
    pub(crate) misplaced: BTreeMap<String, u64>,
    /// Misplaced keys copied to their owner (`Move` and `Copy`).
    pub(crate) copied: u64,
    /// Misplaced keys deleted here after the copy (`Move`).
    pub(crate) deleted: u64,
    /// Misplaced keys gone between SCAN and GET (deleted by someone else).
    pub(crate) vanished: u64,
}

impl NodeReport {
    fn misplaced_total(&self) -> u64 {
        self.misplaced.values().sum()
    }
}

/// `strata rebalance`: reads the pool, walks every node, prints one line per node and a
/// total. Exit status 1 with `--check` when keys are misplaced.
pub(crate) fn run(args: &RebalanceArgs) -> anyhow::Result<ExitCode> {
    let pool = nutcracker::read_pool(&args.config, args.pool.as_deref())?;
    if pool.auto_eject_hosts {
        eprintln!(
            "strata: warning: pool {} has auto_eject_hosts: true; when a node fails, \
             nutcracker then sends its keys to other nodes (docs/scale-out.md)",
            pool.name
        );
    }
    let mode = match (args.check, args.keep) {
        (true, _) => Mode::Check,
        (false, true) => Mode::Copy,
        (false, false) => Mode::Move,
    };
    let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let reports = rebalance(&pool, &args.drain, mode, args.batch, progress)?;
    let mut misplaced = 0;
    let mut scanned = 0;
    for r in &reports {
        let name = r.name.as_deref().unwrap_or("drained");
        let owners: Vec<String> = r
            .misplaced
            .iter()
            .map(|(owner, n)| format!("{n} to {owner}"))
            .collect();
        let verb = match mode {
            Mode::Check => "misplaced",
            Mode::Move => "moved",
            Mode::Copy => "copied",
        };
        let mut line = format!(
            "{} ({name}): {} keys, {} {verb}",
            r.addr,
            r.scanned,
            r.misplaced_total()
        );
        if !owners.is_empty() {
            line.push_str(&format!(" ({})", owners.join(", ")));
        }
        if r.vanished > 0 {
            line.push_str(&format!("; {} deleted meanwhile", r.vanished));
        }
        outln!("{line}")?;
        misplaced += r.misplaced_total();
        scanned += r.scanned;
    }
    match mode {
        Mode::Check if misplaced > 0 => {
            outln!("{misplaced} of {scanned} keys are not on the node the proxy reads them from")?;
            Ok(ExitCode::from(1))
        }
        Mode::Check => {
            outln!("all {scanned} keys are on the node the proxy reads them from")?;
            Ok(ExitCode::SUCCESS)
        }
        Mode::Move => {
            outln!("moved {misplaced} keys to their owner ({scanned} keys scanned)")?;
            Ok(ExitCode::SUCCESS)
        }
        Mode::Copy => {
            outln!(
                "copied {misplaced} keys to their owner ({scanned} keys scanned); the old \
                 copies stay: run again without --keep once the proxy runs this configuration"
            )?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Walks every node of `pool` and every `drain` node, handling misplaced keys by `mode`.
/// `batch` is the SCAN `COUNT` and the most commands per pipeline.
///
/// # Errors
/// Connection errors, a refused reply, a `drain` node that is also in the pool, a pool
/// that is not ketama over `fnv1a_64`.
pub(crate) fn rebalance(
    pool: &Pool,
    drain: &[String],
    mode: Mode,
    batch: usize,
    progress: bool,
) -> anyhow::Result<Vec<NodeReport>> {
    let continuum = pool.continuum()?;
    for d in drain {
        client::parse_addr(d)?;
        anyhow::ensure!(
            !pool.servers.iter().any(|s| &s.addr() == d),
            "{d} is in pool {}: remove it from the configuration before draining it",
            pool.name
        );
    }
    let mut owners = check_identities(pool, drain)?;
    let bar = spinner(progress);
    let mut reports = Vec::new();
    let sources = pool
        .servers
        .iter()
        .enumerate()
        .map(|(i, s)| (Some(i), s.addr()))
        .chain(drain.iter().map(|d| (None, d.clone())));
    for (index, addr) in sources {
        let mut report = NodeReport {
            addr: addr.clone(),
            name: index
                .and_then(|i| pool.servers.get(i))
                .map(|s| s.name.clone()),
            ..NodeReport::default()
        };
        let mut walk = Walk {
            pool,
            continuum: &continuum,
            source: client::connect(&addr, &pool.login)?,
            source_index: index,
            owners: &mut owners,
            mode,
        };
        let mut cursor: u64 = 0;
        loop {
            let (next, keys): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(batch.max(1))
                .query(&mut walk.source)
                .with_context(|| format!("SCAN on {addr}"))?;
            walk.handle(&keys, &mut report)
                .with_context(|| format!("moving keys off {addr}"))?;
            bar.set_message(format!(
                "{addr}: {} keys scanned, {} misplaced",
                report.scanned,
                report.misplaced_total()
            ));
            if next == 0 {
                break;
            }
            cursor = next;
        }
        reports.push(report);
    }
    bar.finish_and_clear();
    Ok(reports)
}

/// Connects to every server of `pool` and every `drain` node and refuses two that are one
/// server: a key "moved" from a server to itself is written, then deleted. Two pool lines at
/// one address (nutcracker accepts that), a drained node named by another spelling of a pool
/// server's address (`localhost` for `127.0.0.1`), a server listed twice. A server is known by
/// the `run_id` of its `INFO server` (Redis's, and Strata's since it has one), else by its
/// address. Also refuses two pool servers of one name, as nutcracker does. Returns the
/// connections to the pool's servers, in pool order.
///
/// # Errors
/// A connection or `INFO` error, naming the address; two entries that are one server.
fn check_identities(
    pool: &Pool,
    drain: &[String],
) -> anyhow::Result<Vec<Option<redis::Connection>>> {
    let mut names = std::collections::HashSet::new();
    for s in &pool.servers {
        anyhow::ensure!(
            names.insert(s.name.as_str()),
            "pool {} names two servers {:?}: give each server its own name",
            pool.name,
            s.name
        );
    }
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    let mut identify = |addr: &str, conn: &mut redis::Connection| -> anyhow::Result<()> {
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query(conn)
            .with_context(|| format!("INFO server on {addr}"))?;
        let id = info
            .lines()
            .find_map(|l| l.strip_prefix("run_id:"))
            .map_or_else(|| addr.to_owned(), |id| id.trim().to_owned());
        if let Some(first) = seen.insert(id.clone(), addr.to_owned()) {
            anyhow::bail!(
                "{first} and {addr} are the same server (run_id {id}): list each server of pool {} \
                 once, and drain only servers that are not in it (moving keys from a server to \
                 itself would delete them)",
                pool.name
            );
        }
        Ok(())
    };
    let mut owners = Vec::with_capacity(pool.servers.len());
    for s in &pool.servers {
        let addr = s.addr();
        let mut conn = client::connect(&addr, &pool.login)?;
        identify(&addr, &mut conn)?;
        owners.push(Some(conn));
    }
    for d in drain {
        let mut conn = client::connect(d, &pool.login)?;
        identify(d, &mut conn)?;
    }
    Ok(owners)
}

/// A spinner with a message on stderr, or a hidden bar.
fn spinner(enabled: bool) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
    if let Ok(style) = ProgressStyle::with_template("{spinner} [{elapsed_precise}] {msg}") {
        bar.set_style(style);
    }
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar
}

/// Keys and their values, to write to one owner.
type Pairs<'k> = Vec<(&'k [u8], Vec<u8>)>;

/// The walk of one node.
struct Walk<'a> {
    pool: &'a Pool,
    continuum: &'a Continuum,
    source: redis::Connection,
    /// Position of the walked node in the pool; `None` when it is drained.
    source_index: Option<usize>,
    /// Connections to the pool's nodes, opened on first use.
    owners: &'a mut [Option<redis::Connection>],
    mode: Mode,
}

impl Walk<'_> {
    /// Handles one SCAN page: finds the misplaced keys and, unless checking, moves them.
    fn handle(&mut self, keys: &[Vec<u8>], report: &mut NodeReport) -> anyhow::Result<()> {
        report.scanned += keys.len() as u64;
        let misplaced: Vec<(&[u8], usize)> = keys
            .iter()
            .map(|k| (k.as_slice(), self.continuum.owner(k)))
            .filter(|&(_, owner)| Some(owner) != self.source_index)
            .collect();
        for &(_, owner) in &misplaced {
            let name = self
                .pool
                .servers
                .get(owner)
                .map_or("?", |s| s.name.as_str());
            *report.misplaced.entry(name.to_string()).or_default() += 1;
        }
        if self.mode == Mode::Check || misplaced.is_empty() {
            return Ok(());
        }
        // The values' sizes first, so that the keys move in groups of at most MOVE_BYTES of
        // values (a page of large values is not held in memory at once).
        let mut strlen = redis::pipe();
        for (key, _) in &misplaced {
            strlen.cmd("STRLEN").arg(*key);
        }
        let sizes = client::replies(&mut self.source, &mut strlen)
            .with_context(|| format!("sizing {} keys to move", misplaced.len()))?;
        let sizes: Vec<u64> = sizes
            .iter()
            // Not a string (the GET reports it): count it as empty.
            .map(|v| match v {
                Value::Int(n) => u64::try_from(*n).unwrap_or(0),
                _ => 0,
            })
            .collect();
        for group in move_groups(&sizes, MOVE_BYTES) {
            let keys = misplaced.get(group).context("group out of range")?;
            self.move_keys(keys, report)?;
        }
        Ok(())
    }

    /// Moves `misplaced` (keys on this node, each with its owner's index): reads them, writes
    /// them to their owners, then (in [`Mode::Move`]) deletes them here.
    fn move_keys(
        &mut self,
        misplaced: &[(&[u8], usize)],
        report: &mut NodeReport,
    ) -> anyhow::Result<()> {
        // 1. Read the values where they are.
        let mut get = redis::pipe();
        for (key, _) in misplaced {
            get.cmd("GET").arg(*key);
        }
        let values = client::replies(&mut self.source, &mut get)
            .with_context(|| format!("reading {} keys to move", misplaced.len()))?;
        // 2. Write them to their owners, one pipeline per owner.
        let mut by_owner: BTreeMap<usize, Pairs<'_>> = BTreeMap::new();
        for ((key, owner), value) in misplaced.iter().zip(values) {
            match value {
                Value::BulkString(v) => by_owner.entry(*owner).or_default().push((key, v)),
                Value::Nil => report.vanished += 1,
                other => anyhow::bail!("GET {}: unexpected reply {other:?}", super::shown_key(key)),
            }
        }
        let mut copied: Vec<&[u8]> = Vec::new();
        for (owner, pairs) in by_owner {
            let server = self.pool.servers.get(owner).context("owner out of range")?;
            let conn = match self.owners.get_mut(owner).context("owner out of range")? {
                Some(c) => c,
                slot @ None => slot.insert(client::connect(&server.addr(), &self.pool.login)?),
            };
            let mut set = redis::pipe();
            for (key, value) in &pairs {
                set.cmd("SET").arg(*key).arg(value);
            }
            let replies = client::replies(conn, &mut set).with_context(|| {
                format!(
                    "writing {} keys to {} ({})",
                    pairs.len(),
                    server.addr(),
                    server.name
                )
            })?;
            for ((key, _), reply) in pairs.iter().zip(&replies) {
                if let Some(why) = client::refused(reply, Expect::Ok) {
                    anyhow::bail!(
                        "SET {} on {} ({}): {why}",
                        super::shown_key(key),
                        server.addr(),
                        server.name
                    );
                }
                copied.push(key);
            }
        }
        report.copied += copied.len() as u64;
        // 3. Delete the old copies, now that every owner has acknowledged its SET: one
        // multi-key DEL, which the server writes as one batch (one fsync with --sync always,
        // where single-key DELs would cost one each).
        if self.mode == Mode::Move && !copied.is_empty() {
            let mut del = redis::cmd("DEL");
            for key in &copied {
                del.arg(*key);
            }
            let deleted: i64 = del
                .query(&mut self.source)
                .with_context(|| format!("DEL of {} moved keys", copied.len()))?;
            report.deleted += u64::try_from(deleted).unwrap_or(0);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::move_groups;

    /// The groups as (start, end) pairs.
    fn groups(sizes: &[u64], limit: u64) -> Vec<(usize, usize)> {
        move_groups(sizes, limit)
            .into_iter()
            .map(|r| (r.start, r.end))
            .collect()
    }

    #[test]
    fn move_groups_cut_at_the_byte_limit_and_keep_a_large_key_alone() {
        assert!(groups(&[], 10).is_empty());
        assert_eq!(groups(&[3, 3, 3], 10), [(0, 3)]);
        assert_eq!(groups(&[4, 4, 4, 4], 10), [(0, 2), (2, 4)]);
        assert_eq!(groups(&[1, 50, 1, 1], 10), [(0, 1), (1, 2), (2, 4)]);
        assert_eq!(groups(&[50], 10), [(0, 1)]);
        assert_eq!(groups(&[0, 0, 10, 0], 10), [(0, 4)]);
        assert_eq!(groups(&[u64::MAX, 1], 10), [(0, 1), (1, 2)]);
    }
}
