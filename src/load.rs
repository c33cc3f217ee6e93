//! `strata load DB FILE`: bulk-loads a tab-separated `key<TAB>value` file (the output of
//! MapReduce/Hadoop jobs) into a database through `TableWriter` and one `Db::ingest`.
//!
//! 1. **Read and sort runs** (`runs.rs`): the input is read into an arena bounded by
//!    `--memory`; each full arena is a run, sorted by key (only 24-byte entries move, with an
//!    8-byte key prefix so most comparisons stay in the entry), reduced to one pair per key, and
//!    written to tables in a scratch directory `strata-load-<pid>.tmp/` inside the database
//!    directory. A regular file keeps every core busy: it is mapped read-only and each run is
//!    a slice of the map, parsed by one thread per core (parts cut at line ends), sorted as
//!    two halves on two threads and merged, and written by one thread per core on parts of
//!    about equal bytes (the budget then counts two 24-byte entries per pair). Standard input
//!    (`-`), a pipe, or a file that cannot be mapped is read on a thread of its own
//!    (`input.rs`, so that an interrupt ends a load waiting for input) and parsed in chunks of
//!    up to 8 MiB by one thread. A file truncated by another process during the load kills it
//!    with SIGBUS before anything is ingested.
//! 2. **Merge** (`merge.rs`), only when runs overlap: a k-way merge of the runs into final
//!    tables. Sorted input (every run above the previous one) skips this step: its run tables
//!    are final. Many runs (more than half the open-file limit) are first merged in groups of
//!    consecutive runs, pass after pass, so the files held open stay within the limit.
//! 3. **Ingest**: every final table in one `Db::ingest` call, so the load is all or nothing: a
//!    load killed before that call returns leaves the database as it was, and the scratch
//!    directory is removed at the next open. SIGINT or SIGTERM stops the load at its next
//!    check (at once while it waits for input), and it removes what it wrote before exiting
//!    with status 130.
//!
//! Duplicate keys: the **last occurrence in the input wins** (`--format tsv`); with
//! `--format counts` the counts of a key are summed and ingested as one merge operand for
//! `CounterAdd`, so they add to the count the database already holds (ingesting operands
//! instead of writing them through `WriteBatch::merge` keeps the load atomic and avoids the
//! WAL; the database must be opened with `CounterAdd` to read them). A count that cannot be
//! added to the value the database holds for its key (not a decimal `i64`, or a sum that
//! overflows) refuses the load before the ingest (`merge::check_counts_add`).
//!
//! Lines end at `\n` (a `\r` before it belongs to the value); the key ends at the first tab.
//! Bad lines (no tab, key over 64 KiB, value over `max_value_size`, invalid UTF-8 with
//! `--text`, a count that is not a decimal integer or out of the `i64` range) stop the load
//! with their line number and nothing ingested, or with `--skip-bad` are skipped and counted.
//! A line read from a stream is refused as soon as no good line can start as it does (no tab
//! in its first 64 KiB + 1 bytes, or a value past `max_value_size` already), and the rest of
//! it is skipped unread, so input without newlines (`/dev/zero`) never fills memory.
//!
//! `strata load --resp HOST:PORT FILE` sends the same pairs to a Redis-protocol server
//! instead, as pipelined SETs (`resp.rs`), typically twemproxy in front of several
//! `strata serve` nodes. `strata rebalance` (`rebalance.rs`, with `ketama.rs`, `md5.rs` and
//! `nutcracker.rs`) moves keys between such nodes after the pool changes; both are described
//! in docs/scale-out.md.

mod client;
mod input;
mod ketama;
mod merge;
mod nutcracker;
mod parse;
mod rebalance;
mod resp;
mod runs;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_resp;

use std::io::{BufReader, IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context;
use clap::Args;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use strata_engine::{CounterAdd, Db, Options};

use input::StreamInput;
#[cfg(test)]
use parse::BadLine;
pub(crate) use parse::Format;
use parse::Rules;
pub(crate) use rebalance::{RebalanceArgs, run as run_rebalance};
use resp::{RespConfig, load_resp};
pub(crate) use runs::BadLineError;
use runs::{ReadStats, RunWriter};

/// Skipped lines reported one by one on stderr before the rest are only counted.
const MAX_REPORTED_BAD_LINES: u64 = 10;

/// Arguments of `strata load`.
#[derive(Debug, Args)]
#[command(override_usage = "strata load [OPTIONS] <DB> <FILE>\n       \
                      strata load [OPTIONS] --resp <HOST:PORT> <FILE>")]
pub(crate) struct LoadArgs {
    /// Database directory (created if missing; its parent must exist); not given with --resp.
    /// Ctrl-C or SIGTERM stops the load with nothing loaded (exit status 130).
    #[arg(value_name = "DB")]
    db: Option<PathBuf>,
    /// Input file of `key<TAB>value` lines; `-` reads standard input. Lines end at `\n` (a
    /// `\r` before it is part of the value); the key ends at the first tab. A regular file is
    /// memory-mapped: truncating it during the load kills the load (nothing is ingested).
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
    /// Send the pairs to a Redis-protocol server instead (a `strata serve` node, or
    /// twemproxy in front of several, see docs/scale-out.md): pipelined SETs, or INCRBYs with
    /// --format counts. Not atomic: pairs sent before an error stay written.
    #[arg(long, value_name = "HOST:PORT", conflicts_with_all = ["memory", "table_size"])]
    resp: Option<String>,
    /// Commands per pipeline with --resp; every reply is checked before the next pipeline.
    #[arg(long, default_value_t = 256, requires = "resp")]
    pipeline: usize,
    /// With --resp, authenticate with this password (the server's --requirepass, or the
    /// `redis_auth` of a twemproxy pool). Visible to other users in the process list.
    #[arg(long, requires = "resp")]
    password: Option<String>,
    /// With --resp, the database to load into: `SELECT NAME` is sent after connecting (a
    /// number 0-15, or with `strata serve` the name of a database that exists: create it with
    /// `DATABASES CREATE NAME` or a PostgreSQL connection naming it). Default: the server's
    /// first database (db0).
    #[arg(long, value_name = "NAME", requires = "resp")]
    select: Option<String>,
    /// Memory for sorting, in MiB; larger inputs are sorted in runs spilled to disk.
    #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u32).range(1..))]
    memory: u32,
    /// Input format.
    #[arg(long, value_enum, default_value_t = Format::Tsv)]
    format: Format,
    /// Skip bad lines (counting them) instead of stopping with nothing loaded.
    #[arg(long)]
    skip_bad: bool,
    /// Require keys and values to be valid UTF-8.
    #[arg(long)]
    text: bool,
    /// Target size of each table, in MiB. Smaller tables build their bloom filters faster
    /// (a filter's bitmap that fits the CPU cache) at the cost of more files.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..))]
    table_size: u64,
    /// Load into this keyspace (created if missing) instead of the default one.
    #[arg(long, conflicts_with = "resp")]
    keyspace: Option<String>,
    /// Store each key as `strata serve` stores a Redis key (the engine key is `k` followed
    /// by the key), so a server on the database's parent directory serves the loaded pairs
    /// to GET, MGET, KEYS, SCAN and (with --format counts) INCR. DB is then `DIR/db0` for
    /// RESP database 0, `DIR/NAME` for a named one (docs/server.md, "Databases").
    #[arg(long, conflicts_with_all = ["resp", "keyspace"])]
    resp_keys: bool,
}

/// How to load.
#[derive(Debug, Clone)]
pub(crate) struct LoadConfig {
    pub(crate) format: Format,
    pub(crate) memory_bytes: usize,
    pub(crate) skip_bad: bool,
    pub(crate) text: bool,
    /// Target size of each table, in bytes.
    pub(crate) table_size_bytes: u64,
    /// Draw a progress bar on stderr.
    pub(crate) progress: bool,
    /// Keyspace to load into (created if missing); `None` = the default keyspace.
    pub(crate) keyspace: Option<String>,
    /// Bytes put before every key (`--resp-keys`: the server's `k`); empty by default.
    pub(crate) key_prefix: Vec<u8>,
    /// Set (by SIGINT or SIGTERM, see [`SignalWatch::start`]) to stop the load before its ingest:
    /// it then fails with [`Interrupted`], having ingested nothing. `None`: never stopped.
    pub(crate) interrupt: Option<Arc<AtomicBool>>,
}

impl LoadConfig {
    /// The defaults of the command line, for `db_options`.
    pub(crate) fn new(db_options: &Options) -> Self {
        LoadConfig {
            format: Format::Tsv,
            memory_bytes: 256 << 20,
            skip_bad: false,
            text: false,
            table_size_bytes: db_options.target_file_size,
            progress: false,
            keyspace: None,
            key_prefix: Vec::new(),
            interrupt: None,
        }
    }
}

/// Key bytes an error message shows; a longer key is cut, with its length after it.
const SHOWN_KEY_BYTES: usize = 64;

/// `key` for an error message, quoted: the first [`SHOWN_KEY_BYTES`] bytes (invalid UTF-8
/// replaced), then `... (N bytes)` when the key is longer, so a 64 KiB key does not fill the
/// terminal.
pub(crate) fn shown_key(key: &[u8]) -> String {
    let head = key.get(..SHOWN_KEY_BYTES).unwrap_or(key);
    let shown = format!("{:?}", String::from_utf8_lossy(head));
    if head.len() < key.len() {
        format!("{shown}... ({} bytes)", key.len())
    } else {
        shown
    }
}

/// The error of a load stopped by SIGINT or SIGTERM before its ingest.
#[derive(Debug)]
pub(crate) struct Interrupted;

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("interrupted: nothing was loaded")
    }
}

impl std::error::Error for Interrupted {}

/// [`Interrupted`] once `interrupt` is set. The load looks at the flag after every read of the
/// input (at most 8 MiB), every 50 ms while it waits for input (`input::StreamInput`), after
/// every run and every 65,536 merged keys, and before the ingest.
pub(crate) fn check_interrupt(interrupt: Option<&AtomicBool>) -> anyhow::Result<()> {
    if interrupt.is_some_and(|i| i.load(Ordering::Relaxed)) {
        return Err(Interrupted.into());
    }
    Ok(())
}

/// Watches for SIGINT and SIGTERM while a load runs (see [`SignalWatch::start`]); dropping it
/// ends the watch.
struct SignalWatch {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SignalWatch {
    /// Sets `flag` on the first SIGINT or SIGTERM, so the load stops at its next check and
    /// removes what it wrote (its scratch tables, and a database directory it created); a
    /// second signal exits at once with status 130 (the scratch directory is then removed at
    /// the database's next writing open). The signals are taken with tokio's handlers, on a
    /// thread of their own. Once installed, those handlers stay for the life of the process.
    ///
    /// # Errors
    /// The signal handlers or the thread could not be set up.
    fn start(flag: Arc<AtomicBool>) -> anyhow::Result<SignalWatch> {
        use tokio::signal::unix::{SignalKind, signal};
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .context("starting the signal watcher")?;
        let (mut interrupt, mut terminate) = {
            let _entered = runtime.enter();
            (
                signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
                signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            )
        };
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("strata-signals".into())
            .spawn(move || {
                runtime.block_on(async {
                    loop {
                        tokio::select! {
                            _ = &mut stopped => return,
                            _ = interrupt.recv() => {}
                            _ = terminate.recv() => {}
                        }
                        if flag.swap(true, Ordering::Relaxed) {
                            eprintln!("\nstrata: interrupted twice: stopping now");
                            std::process::exit(130);
                        }
                        eprintln!(
                            "\nstrata: interrupted: stopping the load (an ingest under way \
                             completes)"
                        );
                    }
                });
            })
            .context("starting the signal watcher")?;
        Ok(SignalWatch {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            // An error means the thread has ended already.
            stop.send(()).unwrap_or_default();
        }
        if let Some(thread) = self.thread.take() {
            drop(thread.join());
        }
    }
}

/// What a load did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoadReport {
    /// Input bytes read.
    pub(crate) bytes: u64,
    /// Pairs accepted (lines minus bad lines), duplicates included.
    pub(crate) pairs: u64,
    /// Bad lines skipped (`--skip-bad`).
    pub(crate) bad_lines: u64,
    /// Sorted runs (1 when the input fit in memory).
    pub(crate) runs: usize,
    /// Tables ingested.
    pub(crate) tables: usize,
    /// Distinct keys ingested.
    pub(crate) keys: u64,
    pub(crate) elapsed: Duration,
}

impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        #[expect(clippy::cast_precision_loss, reason = "rates for display")]
        let (pairs, bytes) = (self.pairs as f64, self.bytes as f64);
        write!(
            f,
            "loaded {} pairs ({} keys, {:.1} MB) in {:.2} s: {:.0} pairs/s, {:.1} MB/s",
            self.pairs,
            self.keys,
            bytes / 1e6,
            secs,
            pairs / secs,
            bytes / 1e6 / secs
        )?;
        if self.bad_lines > 0 {
            write!(f, "; {} bad lines skipped", self.bad_lines)?;
        }
        Ok(())
    }
}

/// What a load that fails must remove so that it leaves no trace: the directories it created
/// for the database (the outermost one that did not exist), or the files it put in a directory
/// that existed but was empty. A directory that held anything is never touched: a failed load
/// leaves an existing database as it was by ingesting nothing.
enum LoadTrace {
    CreatedDir(PathBuf),
    FilledEmptyDir(PathBuf),
    Nothing,
}

impl LoadTrace {
    fn before(db_dir: &std::path::Path) -> LoadTrace {
        match std::fs::read_dir(db_dir).map(|mut entries| entries.next().is_none()) {
            Ok(true) => LoadTrace::FilledEmptyDir(db_dir.to_path_buf()),
            Ok(false) => LoadTrace::Nothing,
            Err(_) => {
                let outermost = db_dir
                    .ancestors()
                    .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
                    .last();
                outermost.map_or(LoadTrace::Nothing, |d| {
                    LoadTrace::CreatedDir(d.to_path_buf())
                })
            }
        }
    }

    /// Best effort: a file that cannot be removed stays.
    fn remove(&self) {
        match self {
            LoadTrace::CreatedDir(dir) => drop(std::fs::remove_dir_all(dir)),
            LoadTrace::FilledEmptyDir(dir) => {
                for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                    let path = entry.path();
                    if path.is_dir() {
                        drop(std::fs::remove_dir_all(&path));
                    } else {
                        drop(std::fs::remove_file(&path));
                    }
                }
            }
            LoadTrace::Nothing => {}
        }
    }
}

/// Refuses an input file that starts with the gzip, zstd, bzip2 or xz magic bytes (see
/// [`refuse_compressed_head`]). Reads the first bytes at offset 0 without moving the file
/// position.
fn refuse_compressed(input: &std::fs::File, file: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut head = [0u8; 10];
    let n = input.read_at(&mut head, 0).unwrap_or(0);
    refuse_compressed_head(
        head.get(..n).unwrap_or_default(),
        &file.display().to_string(),
    )
}

/// Refuses input whose first bytes `head` are the gzip, zstd, bzip2 or xz magic bytes: loaded
/// as text, compressed bytes fail at some line with a misleading message ("no tab"), or with
/// `--skip-bad` load as garbage pairs. `name` is the file as the message shows it (`-` for
/// standard input).
fn refuse_compressed_head(head: &[u8], name: &str) -> anyhow::Result<()> {
    const MAGIC: [(&[u8], &str, &str); 4] = [
        (b"\x1f\x8b", "gzip", "zcat"),
        (b"\x28\xb5\x2f\xfd", "zstd", "zstdcat"),
        (b"BZh", "bzip2", "bzcat"),
        (b"\xfd7zXZ\x00", "xz", "xzcat"),
    ];
    for (magic, format, cat) in MAGIC {
        // bzip2's "BZh" is text; it counts only with its block-size digit and then the
        // first block's magic (0x314159265359, "1AY&SY") or the end-of-stream one.
        let bzip2_block = format != "bzip2"
            || (head.get(3).is_some_and(|d| (b'1'..=b'9').contains(d))
                && head
                    .get(4..10)
                    .is_some_and(|m| m == b"1AY&SY" || m == b"\x17\x72\x45\x38\x50\x90"));
        if head.starts_with(magic) && bzip2_block {
            let (what, example) = if name == "-" {
                (
                    "standard input".to_owned(),
                    format!("{cat} FILE | strata load DB -"),
                )
            } else {
                (name.to_owned(), format!("{cat} {name} | strata load DB -"))
            };
            anyhow::bail!(
                "{what} looks {format}-compressed (it starts with {format}'s magic bytes): \
                 decompress it first, for example `{example}`"
            );
        }
    }
    Ok(())
}

/// The first bytes of standard input, for [`refuse_compressed_head`], left unread.
fn stdin_head(stdin: &mut std::io::StdinLock<'_>) -> Vec<u8> {
    use std::io::BufRead;
    stdin
        .fill_buf()
        .map(|b| b.get(..10).unwrap_or(b).to_vec())
        .unwrap_or_default()
}

/// `strata load`: opens the database (or connects to `--resp`), loads, prints the final
/// line.
pub(crate) fn run(args: &LoadArgs) -> anyhow::Result<ExitCode> {
    if let Some(addr) = &args.resp {
        return run_resp(args, addr);
    }
    let (Some(db), Some(file)) = (&args.db, &args.file) else {
        anyhow::bail!("give a database directory and a file: strata load DB FILE");
    };
    // From here on SIGINT and SIGTERM stop the load cleanly (see `SignalWatch::start`).
    let interrupt = Arc::new(AtomicBool::new(false));
    let _watch = SignalWatch::start(Arc::clone(&interrupt))?;
    // The input is opened before the database, so a missing or unreadable file creates
    // nothing. A stream is read on a thread of its own, so that an interrupt ends a load
    // waiting for input (`input::StreamInput`).
    let mut input = if file.as_os_str() == "-" {
        let stream = StreamInput::start(std::io::stdin(), Arc::clone(&interrupt))
            .context("starting the input thread")?;
        Source::Stream(stream, None)
    } else {
        let input =
            std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
        let meta = input
            .metadata()
            .with_context(|| format!("reading the metadata of {}", file.display()))?;
        anyhow::ensure!(!meta.is_dir(), "{} is a directory", file.display());
        refuse_compressed(&input, file)?;
        // A regular file is mapped; anything else, or a file that cannot be mapped (an empty
        // file, some file systems, sysfs), is read as a stream.
        match meta.is_file().then(|| runs::map_file(&input)).flatten() {
            Some(map) => Source::Mapped(map),
            None => Source::Stream(
                StreamInput::start(input, Arc::clone(&interrupt))
                    .context("starting the input thread")?,
                // Sizes the arena and the progress bar; only a hint (sysfs files say 4096).
                meta.is_file().then_some(meta.len()),
            ),
        }
    };
    if let Source::Stream(stream, _) = &mut input {
        // Standard input or a pipe, whose first bytes cannot be read at an offset: they are
        // looked at here (and read again by the load).
        match stream.peek(10) {
            Ok(head) => refuse_compressed_head(head, &file.display().to_string())?,
            Err(_) if interrupt.load(Ordering::Relaxed) => {
                return Ok(interrupted(file));
            }
            Err(e) => return Err(anyhow::Error::new(e).context("reading standard input")),
        }
    }
    let mut options = crate::engine_options();
    if args.format == Format::Counts {
        options = options.merge_operator(Some(Arc::new(CounterAdd)));
    }
    let db_dir = db;
    let trace = LoadTrace::before(db_dir);
    crate::check_database_dir(db_dir)?;
    let db = Db::open(db_dir, options.clone())
        .with_context(|| format!("opening database at {}", db_dir.display()))?;
    let mut config = LoadConfig::new(&options);
    config.format = args.format;
    config.table_size_bytes = args.table_size.saturating_mul(1 << 20);
    config.memory_bytes = usize::try_from(args.memory)
        .unwrap_or(usize::MAX)
        .saturating_mul(1 << 20);
    config.skip_bad = args.skip_bad;
    config.text = args.text;
    config.progress = std::io::stderr().is_terminal();
    config.keyspace.clone_from(&args.keyspace);
    if args.resp_keys {
        config.key_prefix = vec![strata_server::databases::KV_PREFIX];
    }
    config.interrupt = Some(interrupt);
    let source = match &mut input {
        Source::Stream(stream, total_bytes) => Input::Stream {
            reader: stream,
            total_bytes: *total_bytes,
        },
        Source::Mapped(map) => Input::Mapped(map),
    };
    let report = load(&db, &options, source, &config);
    let report = match report {
        Ok(report) => report,
        Err(e) => {
            // Nothing was ingested; a database this load created is removed again, so a failed
            // load leaves no trace, as it leaves an existing database as it was.
            drop(db.close());
            trace.remove();
            if e.is::<Interrupted>() {
                return Ok(interrupted(file));
            }
            // A failed ingest's manifest edit may be durable (the database is poisoned then,
            // and a reopen tells); every other failure happened before anything was linked in.
            let in_doubt = e.chain().any(|cause| {
                matches!(
                    cause.downcast_ref::<strata_engine::Error>(),
                    Some(strata_engine::Error::Poisoned { .. })
                )
            });
            let outcome = if in_doubt {
                ""
            } else {
                ": nothing was loaded, the database is as it was"
            };
            return Err(e.context(format!("loading {}{outcome}", file.display())));
        }
    };
    db.close()?;
    outln!("{report}")?;
    Ok(ExitCode::SUCCESS)
}

/// The input of a local load, opened.
enum Source {
    /// Read on its own thread; the size of a regular file that could not be mapped.
    Stream(StreamInput, Option<u64>),
    Mapped(memmap2::Mmap),
}

/// Says that the load of `file` was interrupted; its exit status.
fn interrupted(file: &Path) -> ExitCode {
    eprintln!(
        "strata: load of {} interrupted: nothing was loaded",
        file.display()
    );
    ExitCode::from(130)
}

/// `strata load --resp HOST:PORT FILE`.
fn run_resp(args: &LoadArgs, addr: &str) -> anyhow::Result<ExitCode> {
    let file = match (&args.db, &args.file) {
        (Some(file), None) => file,
        (Some(_), Some(_)) => {
            anyhow::bail!(
                "with --resp, give only the input file: strata load --resp HOST:PORT FILE"
            )
        }
        (None, _) => anyhow::bail!("give an input file: strata load --resp HOST:PORT FILE"),
    };
    let config = RespConfig {
        rules: Rules {
            format: args.format,
            text: args.text,
            max_value_size: Options::default().max_value_size,
            // The server's limit (the engine's, less the byte its key encoding adds): a key
            // over it is refused here as a bad line, before any pair is sent, instead of by
            // the server after the pairs before it were written.
            max_key_size: strata_server::databases::MAX_REDIS_KEY_SIZE,
        },
        skip_bad: args.skip_bad,
        pipeline_len: args.pipeline.max(1),
        progress: std::io::stderr().is_terminal(),
    };
    let login = client::Login {
        db: 0,
        password: args.password.clone(),
    };
    let mut conn = client::connect(addr, &login)?;
    if let Some(name) = &args.select {
        redis::cmd("SELECT")
            .arg(name)
            .query::<()>(&mut conn)
            .map_err(|e| anyhow::Error::new(e).context(select_hint(name, addr)))?;
    }
    let report = if file.as_os_str() == "-" {
        let stdin = &mut std::io::stdin().lock();
        refuse_compressed_head(&stdin_head(stdin), "-")?;
        load_resp(&mut conn, addr, stdin, None, &config)
    } else {
        let input =
            std::fs::File::open(file).with_context(|| format!("opening {}", file.display()))?;
        refuse_compressed(&input, file)?;
        let len = input.metadata().ok().map(|m| m.len());
        let mut input = BufReader::with_capacity(1 << 20, input);
        load_resp(&mut conn, addr, &mut input, len, &config)
    };
    let report = report.with_context(|| format!("loading {} into {addr}", file.display()))?;
    outln!("{report}")?;
    Ok(ExitCode::SUCCESS)
}

/// What a failed `SELECT name` says: the server's own reply for a name (`value is not an
/// integer or out of range`, as Redis words it) does not say that the database is missing, nor
/// that `SELECT` never creates one.
fn select_hint(name: &str, addr: &str) -> String {
    let numbered = !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit() || b == b'-');
    if numbered {
        return format!(
            "selecting database {name} on {addr} (a numbered database is 0-15, or a name that \
             exists)"
        );
    }
    let (host, port) = addr.rsplit_once(':').unwrap_or((addr, "6379"));
    format!(
        "selecting database {name} on {addr}: no database of that name exists there (SELECT \
         never creates one); create it first with `redis-cli -h {host} -p {port} DATABASES \
         CREATE {name}` against `strata serve` (or a PostgreSQL connection naming it), see \
         docs/server.md, \"Databases\""
    )
}

/// Removes the scratch directory when the load ends, however it ends.
struct ScratchDir(PathBuf);

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.0)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!("strata: could not remove {}: {e}", self.0.display());
        }
    }
}

/// Where [`load`] reads its pairs.
pub(crate) enum Input<'a> {
    /// A stream (stdin, a pipe), read in chunks by one thread; `total_bytes`, if known, sizes
    /// the progress bar and the read arena.
    Stream {
        reader: &'a mut dyn Read,
        total_bytes: Option<u64>,
    },
    /// The whole input in memory, typically a regular file mapped with
    /// [`runs::map_file`]: parsed and sorted by one thread per core, never copied.
    Mapped(&'a [u8]),
}

impl Input<'_> {
    fn total_bytes(&self) -> Option<u64> {
        match self {
            Input::Stream { total_bytes, .. } => *total_bytes,
            Input::Mapped(data) => Some(data.len() as u64),
        }
    }
}

/// Loads `input` into `db`, whose options are `db_options`. On error nothing is ingested.
///
/// # Errors
/// A [`BadLineError`] (find it with `downcast_ref`) for the first bad line without
/// `skip_bad`; I/O and engine errors.
pub(crate) fn load(
    db: &Db,
    db_options: &Options,
    input: Input<'_>,
    config: &LoadConfig,
) -> anyhow::Result<LoadReport> {
    let total_bytes = input.total_bytes();
    let start = Instant::now();
    let scratch = ScratchDir(scratch_dir(db.path()));
    std::fs::create_dir_all(&scratch.0)
        .with_context(|| format!("creating {}", scratch.0.display()))?;
    let bar = progress_bar(config.progress, total_bytes);
    let update = |s: &ReadStats| {
        bar.set_position(s.bytes);
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        #[expect(clippy::cast_precision_loss, reason = "a rate for display")]
        let rate = s.pairs as f64 / secs;
        bar.set_message(format!("{} pairs, {rate:.0} pairs/s", s.pairs));
    };
    let mut reported = 0u64;
    let mut on_bad = |e: &BadLineError| {
        reported += 1;
        if reported <= MAX_REPORTED_BAD_LINES {
            bar.suspend(|| eprintln!("strata: skipping {e}"));
        } else if reported == MAX_REPORTED_BAD_LINES + 1 {
            bar.suspend(|| eprintln!("strata: skipping more bad lines (counted, not shown)"));
        }
    };
    let mut scratch_options = db_options.clone();
    scratch_options.compression = false;
    scratch_options.bloom_bits_per_key = 0;
    let mut writer = RunWriter {
        tmp: &scratch.0,
        options: db_options,
        scratch_options,
        rules: Rules {
            format: config.format,
            text: config.text,
            max_value_size: db_options.max_value_size,
            max_key_size: strata_engine::MAX_KEY_SIZE - config.key_prefix.len(),
        },
        key_prefix: &config.key_prefix,
        table_size_bytes: config.table_size_bytes,
        memory_bytes: config.memory_bytes.max(4096),
        input_bytes: total_bytes,
        skip_bad: config.skip_bad,
        progress: &update,
        on_bad: &mut on_bad,
        interrupt: config.interrupt.as_deref(),
    };
    let mut stats = ReadStats::default();
    let runs = match input {
        Input::Stream { reader, .. } => writer.read_all(reader, &mut stats)?,
        Input::Mapped(data) => writer.read_mapped(data, &mut stats)?,
    };
    update(&stats);
    let run_count = runs.len();
    // Every run final means every run lies above the one before (`RunWriter::write_run`).
    let files = if runs.iter().all(|r| r.final_tables) {
        runs.into_iter().flat_map(|r| r.files).collect()
    } else {
        bar.set_message(format!("merging {run_count} sorted runs"));
        merge::merge_runs(
            runs,
            &scratch.0,
            db_options,
            &writer.scratch_options,
            config.format,
            config.table_size_bytes,
            config.interrupt.as_deref(),
        )?
    };
    check_interrupt(config.interrupt.as_deref())?;
    bar.set_message("ingesting");
    let keys = files.iter().map(|f| f.num_entries).sum();
    let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
    let target = match &config.keyspace {
        Some(name) => db.keyspace(name)?,
        None => db.default_keyspace(),
    };
    if config.format == Format::Counts {
        bar.set_message("checking existing counts");
        merge::check_counts_add(&target, &files, &config.key_prefix)?;
    }
    target.ingest(&paths).context("ingesting the tables")?;
    bar.finish_and_clear();
    if config
        .interrupt
        .as_deref()
        .is_some_and(|i| i.load(Ordering::Relaxed))
    {
        // The ingest is atomic and was not stopped: the load is whole, not cut short.
        eprintln!("strata: the interrupt came during the ingest, which completed: all is loaded");
    }
    Ok(LoadReport {
        bytes: stats.bytes,
        pairs: stats.pairs,
        bad_lines: stats.bad_lines,
        runs: run_count,
        tables: paths.len(),
        keys,
        elapsed: start.elapsed(),
    })
}

fn progress_bar(enabled: bool, total_bytes: Option<u64>) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::with_draw_target(total_bytes, ProgressDrawTarget::stderr());
    let template = if total_bytes.is_some() {
        "{spinner} [{elapsed_precise}] {wide_bar} {decimal_bytes}/{decimal_total_bytes} \
         {decimal_bytes_per_sec} {msg}"
    } else {
        "{spinner} [{elapsed_precise}] {decimal_bytes} {decimal_bytes_per_sec} {msg}"
    };
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Where this process's scratch directory goes: `strata-load-<pid>.tmp` in the database
/// directory (the engine deletes `*.tmp` at the next writing open).
pub(crate) fn scratch_dir(db: &std::path::Path) -> PathBuf {
    db.join(format!("strata-load-{}.tmp", std::process::id()))
}

/// True for a name [`scratch_dir`] gives (of any process).
pub(crate) fn is_scratch_name(name: &str) -> bool {
    name.strip_prefix("strata-load-")
        .and_then(|rest| rest.strip_suffix(".tmp"))
        .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()))
}
