//! `strata`: the command-line tool for Strata databases.
//!
//! Subcommands: `repl` (the SQL shell, see `docs/sql.md`), `demo` (open a database, write and read a few keys), `get`, `put`, `delete`,
//! `scan` (inspect a database, like RocksDB's `ldb`) and `sst-dump` (inspect one table file).

/// `println!` that returns the write's error (with context) instead of panicking: a full disk
/// behind `> file` is an error message and status 2, and a reader that closed the pipe
/// (`| head`) ends the command quietly ([`closed_pipe`]).
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        anyhow::Context::context(
            writeln!(std::io::stdout().lock(), $($arg)*),
            "writing to standard output",
        )
    }};
}

mod bench;
mod inspect;
mod load;
mod repl;
mod thp;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use strata_engine::filename::holds_database;
use strata_engine::{Db, Options, ReadOptions, TableFormat};

/// mimalloc instead of the system allocator: the memtable allocates a skiplist node per write
/// on the connection and commit threads and frees them on the flush thread, and scans allocate
/// per block (docs/benchmarks.md, "Allocator").
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Strata: a write-optimized LSM-tree storage engine.
#[derive(Debug, Parser)]
#[command(name = "strata", version, about)]
struct Cli {
    /// SSTable format version of the tables this command writes (flushes, compactions,
    /// loads): 3 (the default), or 2 or 1 while a directory must stay readable by builds
    /// that know only those (docs/format/sstable.md). Tables of every version are read.
    #[arg(long, global = true, value_name = "VERSION", value_parser = parse_table_format)]
    table_format: Option<TableFormat>,
    /// Block compression of the tables this command writes (flushes, compactions, loads):
    /// `lz4` (the default; a block is stored compressed when that saves at least 12.5%) or
    /// `none` (larger files, no decompression when a block is read: full scans of the
    /// 2.79 M genomic reads about 10% faster for 1.5x the bytes on disk, docs/benchmarks.md).
    /// Tables written either way are read.
    #[arg(long, global = true, value_name = "KIND", value_enum)]
    compression: Option<Compression>,
    /// Let the kernel back this process's memory with transparent huge pages, as its THP
    /// setting says. Without this flag `strata` turns THP off for itself at startup, as
    /// redis-server does: a huge-page fault zeroes 2 MiB at once, and loads and block-cache
    /// fills ran up to 2x slower with it (docs/benchmarks.md, "Transparent huge pages off").
    #[arg(long, global = true)]
    transparent_huge_pages: bool,
    #[command(subcommand)]
    command: Command,
}

/// `--table-format`: 1, 2 or 3.
fn parse_table_format(s: &str) -> Result<TableFormat, String> {
    s.parse::<u32>()
        .ok()
        .and_then(TableFormat::from_version)
        .ok_or_else(|| format!("{s:?} is not a table format version this build writes (1, 2 or 3)"))
}

/// `--compression`: how the tables a command writes store their blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Compression {
    /// LZ4 (`lz4_flex`), where it saves at least 12.5% of a block.
    Lz4,
    /// Blocks stored as they are.
    None,
}

/// The `--compression` of this run, set once at startup: true for LZ4 (the default).
static COMPRESS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// True unless this run was given `--compression none`.
fn compress() -> bool {
    COMPRESS.get().copied().unwrap_or(true)
}

/// The `--table-format` of this run, set once at startup (the default version if not given).
static TABLE_FORMAT: std::sync::OnceLock<TableFormat> = std::sync::OnceLock::new();

/// This run's `--table-format` (the default version if not given).
fn table_format() -> TableFormat {
    TABLE_FORMAT.get().copied().unwrap_or_default()
}

/// The engine options every command starts from: the defaults, with this run's
/// `--table-format` and `--compression`.
pub(crate) fn engine_options() -> Options {
    Options::default()
        .table_format(table_format())
        .compression(compress())
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Open the SQL shell on the database in DIR (created if missing). Reads statements from
    /// the terminal, from `-c`, or from piped stdin; see docs/sql.md.
    Repl {
        /// Database directory.
        #[arg(default_value = "./strata-data")]
        dir: PathBuf,
        /// Run these SQL statements (separated by `;`) and exit; status 1 if any failed.
        #[arg(short = 'c', long = "command", allow_hyphen_values = true)]
        command: Option<String>,
        /// Open the existing database read-only: queries only, nothing is written, and it
        /// works beside a running `strata serve` or on a full disk.
        #[arg(long)]
        read_only: bool,
        #[command(flatten)]
        cache: strata_server::cli::CacheArgs,
    },
    /// Open (or create) a database, write and read back a few keys, and print what happened.
    Demo {
        /// Database directory (its own by default, away from the SQL shell's ./strata-data).
        #[arg(default_value = "./strata-demo")]
        dir: PathBuf,
    },
    /// Print the value of KEY (raw, with a newline); exit status 1 when absent.
    Get {
        dir: PathBuf,
        key: String,
        /// Read this keyspace instead of the default one (it must exist).
        #[arg(long)]
        keyspace: Option<String>,
        /// KEY in hexadecimal (an optional 0x prefix), and the value printed in hexadecimal.
        #[arg(long)]
        hex: bool,
    },
    /// Set KEY to VALUE (synced).
    Put {
        dir: PathBuf,
        key: String,
        value: String,
        /// Write this keyspace (created if missing) instead of the default one.
        #[arg(long)]
        keyspace: Option<String>,
        /// KEY and VALUE in hexadecimal (an optional 0x prefix).
        #[arg(long)]
        hex: bool,
    },
    /// Delete KEY (synced).
    Delete {
        dir: PathBuf,
        key: String,
        /// Delete in this keyspace instead of the default one (it must exist).
        #[arg(long)]
        keyspace: Option<String>,
        /// KEY in hexadecimal (an optional 0x prefix).
        #[arg(long)]
        hex: bool,
    },
    /// Print key<TAB>value lines in key order.
    Scan {
        dir: PathBuf,
        /// First key (inclusive).
        #[arg(long)]
        from: Option<String>,
        /// Last key (exclusive).
        #[arg(long)]
        to: Option<String>,
        /// Only keys starting with this prefix (combined with --from/--to when given).
        #[arg(long)]
        prefix: Option<String>,
        /// Scan this keyspace instead of the default one (it must exist).
        #[arg(long)]
        keyspace: Option<String>,
        /// Descending order.
        #[arg(long)]
        reverse: bool,
        /// Print at most N pairs.
        #[arg(long)]
        limit: Option<usize>,
        /// --from, --to and --prefix in hexadecimal (an optional 0x prefix), and keys and
        /// values printed in hexadecimal (a key or value holding a tab or a newline is
        /// ambiguous otherwise), as RocksDB's `ldb --hex`.
        #[arg(long)]
        hex: bool,
    },
    /// Write a consistent, openable copy of the database in DIR to DEST (tables hard-linked;
    /// written into DEST.checkpoint-tmp and renamed, so an interrupted run leaves no DEST).
    /// Opens DIR itself, so not while another process (a running `strata serve`) has it open;
    /// an embedding program calls `Db::checkpoint` on its open database instead.
    Checkpoint { dir: PathBuf, dest: PathBuf },
    /// Verify every table and the manifest; print each problem; exit status 1 if any.
    Check { dir: PathBuf },
    /// Bulk-load a file of key<TAB>value lines (sorted or not) with one atomic ingest.
    Load(load::LoadArgs),
    /// Move keys to the node twemproxy sends them to, after a change to a nutcracker pool
    /// (docs/scale-out.md).
    Rebalance(load::RebalanceArgs),
    /// Serve databases over the Redis protocol and the PostgreSQL protocol (docs/server.md).
    Serve(strata_server::cli::ServeArgs),
    /// Benchmarks through the public API.
    #[command(subcommand)]
    Bench(BenchCommand),
    /// Print an SSTable's properties and, with --entries, its entries (like RocksDB's sst_dump).
    SstDump {
        /// The `.sst` file.
        file: PathBuf,
        /// Also print every entry (internal key, sequence number, kind, value), going on with
        /// the next data block after a damaged one, then check the table as `strata check`
        /// does (key order included): problems go to stderr, exit status 1. A table that does
        /// not open at all (damaged footer, index or properties block) is exit status 2.
        #[arg(long)]
        entries: bool,
    },
}

#[derive(Debug, Subcommand)]
enum BenchCommand {
    /// Insert N u64 -> (u32, u32) records in batches; report per-batch times, amplification,
    /// stalls, bytes per record and peak RSS.
    Fill(bench::FillArgs),
}

fn main() -> ExitCode {
    // Before the arguments are parsed: mimalloc has advised its arena for huge pages by now,
    // and the parser's first allocations would fault some in (`thp::keep_requested`).
    let thp = (!thp::keep_requested()).then(thp::disable_transparent_huge_pages);
    let cli = Cli::parse();
    // Without STRATA_LOG: warnings only, except that a server also says what it listens on,
    // which databases it opens and closes, and when it shuts down (as redis-server does).
    let default_filter = match cli.command {
        Command::Serve(_) => "warn,strata_server=info,strata_engine=info",
        _ => "warn",
    };
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("STRATA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        // Colour only on a terminal: a log redirected to a file gets no escape codes.
        .with_ansi(std::io::stderr().is_terminal())
        .init();
    if let Some(Err(e)) = thp {
        // Only a matter of speed, and nothing the user could change: not worth a warning on
        // every command (a kernel without the option, some sandboxes).
        tracing::debug!("could not turn transparent huge pages off (prctl): {e}");
    }
    match run(cli) {
        Ok(code) => code,
        // The reader of our output went away (`strata scan ... | head`): stop quietly, as
        // cat and grep do.
        Err(e) if closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("strata: {}", error_message(&e));
            ExitCode::from(2)
        }
    }
}

/// `e` and its causes joined by ": ", leaving out a cause whose text the message already holds
/// (some error types print their source in their own text and also return it from `source()`,
/// and anyhow's `{:#}` then printed it twice).
fn error_message(e: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    // The engine's `Error::Locked`, however the caller wrapped it (the SQL layer keeps only
    // its text).
    if message.contains("is locked by another open instance") {
        message.push_str(
            " (a `strata serve`, `repl` or `load` has it open: stop it, or read beside it with \
             `strata repl --read-only`, `get`, `scan` or `check`)",
        );
    }
    message
}

/// True when `e` comes from writing to a pipe whose reader has closed it.
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let _ = TABLE_FORMAT.set(cli.table_format.unwrap_or_default());
    let _ = COMPRESS.set(cli.compression != Some(Compression::None));
    match cli.command {
        Command::Repl {
            dir,
            command,
            read_only,
            cache,
        } => repl::run(&dir, command.as_deref(), read_only, cache.bytes()),
        Command::Demo { dir } => demo(&dir),
        Command::Get {
            dir,
            key,
            keyspace,
            hex,
        } => inspect::get(
            &dir,
            keyspace.as_deref(),
            &inspect::arg_bytes("KEY", &key, hex)?,
            hex,
        ),
        Command::Put {
            dir,
            key,
            value,
            keyspace,
            hex,
        } => inspect::put(
            &dir,
            keyspace.as_deref(),
            &inspect::arg_bytes("KEY", &key, hex)?,
            &inspect::arg_bytes("VALUE", &value, hex)?,
        ),
        Command::Delete {
            dir,
            key,
            keyspace,
            hex,
        } => inspect::delete(
            &dir,
            keyspace.as_deref(),
            &inspect::arg_bytes("KEY", &key, hex)?,
        ),
        Command::Scan {
            dir,
            from,
            to,
            prefix,
            keyspace,
            reverse,
            limit,
            hex,
        } => {
            let bytes = |what, arg: Option<String>| {
                arg.map(|a| inspect::arg_bytes(what, &a, hex)).transpose()
            };
            let args = inspect::ScanArgs {
                from: bytes("--from", from)?,
                to: bytes("--to", to)?,
                prefix: bytes("--prefix", prefix)?,
                reverse,
                limit,
                hex,
            };
            inspect::scan(
                &dir,
                keyspace.as_deref(),
                &args,
                &mut std::io::stdout().lock(),
            )
        }
        Command::SstDump { file, entries } => inspect::sst_dump(&file, entries),
        Command::Check { dir } => inspect::check(&dir),
        Command::Checkpoint { dir, dest } => {
            require_database(&dir)?;
            let db = Db::open(&dir, engine_options().create_if_missing(false))
                .with_context(|| format!("opening database at {}", dir.display()))?;
            let seqno = db.checkpoint(&dest)?;
            db.close()?;
            outln!(
                "checkpoint of {} at sequence number {seqno} written to {}",
                dir.display(),
                dest.display()
            )?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Load(args) => load::run(&args),
        Command::Rebalance(args) => load::run_rebalance(&args),
        Command::Serve(args) => {
            let mut config = args.config();
            config.table_format = table_format();
            config.compression = compress();
            let (limit, short) = config.raise_open_file_limit();
            if short {
                let needed = config.open_files_needed();
                config.fit_open_file_limit(limit);
                tracing::warn!(
                    limit,
                    needed,
                    maxclients = config.max_clients,
                    max_databases = config.max_databases,
                    max_open_tables = config.max_open_tables,
                    "the open-file limit (ulimit -n) is below what --maxclients, \
                     --max-databases and --max-open-tables may need: lowered to fit it; \
                     raise the hard limit to keep them"
                );
                if config.open_files_needed() > limit {
                    tracing::warn!(
                        limit,
                        needed = config.open_files_needed(),
                        "the open-file limit is too low even for one client, one database \
                         and 16 tables: expect \"Too many open files\" errors"
                    );
                }
            }
            strata_server::serve(config)
                .map(|()| ExitCode::SUCCESS)
                .map_err(Into::into)
        }
        Command::Bench(BenchCommand::Fill(args)) => bench::fill(&args).map(|()| ExitCode::SUCCESS),
    }
}

/// Checks a database directory a command may create: its parent must exist (as LevelDB and
/// RocksDB create only the database's own directory, so a mistyped path is an error, not a new
/// database), and it must not be a server's directory of databases
/// ([`refuse_server_directory`]).
///
/// # Errors
/// Naming the missing parent, or as [`refuse_server_directory`].
pub(crate) fn check_database_dir(dir: &std::path::Path) -> anyhow::Result<()> {
    if !dir.exists()
        && let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty())
        && !parent.is_dir()
    {
        let why = if parent.exists() {
            "is not a directory"
        } else {
            "does not exist (only the database's own directory is created)"
        };
        anyhow::bail!(
            "cannot create database {}: {} {why}",
            dir.display(),
            parent.display()
        );
    }
    refuse_server_directory(dir)
}

/// Refuses `dir` when it is a `strata serve --dir` data directory (no `CURRENT` of its own, a
/// subdirectory with one) instead of a database: opening it would create a new, empty
/// database beside the server's, and `strata serve` would then refuse the directory.
///
/// # Errors
/// Naming one of the databases inside, to open instead.
pub(crate) fn refuse_server_directory(dir: &std::path::Path) -> anyhow::Result<()> {
    if holds_database(dir) {
        return Ok(());
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(());
    };
    let mut databases: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| holds_database(&e.path()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    databases.sort();
    if let Some(first) = databases.first() {
        anyhow::bail!(
            "{} is not a database but holds databases ({}), as a `strata serve --dir` \
             directory does; open one of them, such as {}",
            dir.display(),
            databases.join(", "),
            dir.join(first).display()
        );
    }
    Ok(())
}

/// Refuses `dir` unless it holds a database (a `CURRENT` file), for the commands that only
/// use an existing one.
///
/// # Errors
/// Saying there is no database there (or that it is a server's directory of databases).
pub(crate) fn require_database(dir: &std::path::Path) -> anyhow::Result<()> {
    refuse_server_directory(dir)?;
    if !probe_current(dir)? {
        if let Some(damage) = missing_current(dir) {
            anyhow::bail!(damage);
        }
        anyhow::bail!("no database at {} (no CURRENT file)", dir.display());
    }
    Ok(())
}

/// Whether `dir` holds a database (a `CURRENT` file, as [`holds_database`]); fails when
/// `CURRENT` cannot be looked at (permission denied, `dir` a regular file), which is neither
/// a missing nor a damaged database.
///
/// # Errors
/// The operating system's error, naming `CURRENT`.
pub(crate) fn probe_current(dir: &std::path::Path) -> anyhow::Result<bool> {
    strata_engine::filename::probe_database(dir).with_context(|| {
        format!(
            "cannot look at {}",
            dir.join(strata_engine::filename::CURRENT).display()
        )
    })
}

/// For a directory without a `CURRENT` file that still holds tables or manifests, what to
/// say: it is a damaged database, not a missing one. `None` otherwise.
pub(crate) fn missing_current(dir: &std::path::Path) -> Option<String> {
    if holds_database(dir) {
        return None;
    }
    let damaged = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .any(|e| {
            use strata_engine::filename::{FileKind, parse};
            let kind = e.file_name().to_str().and_then(parse);
            matches!(kind, Some(FileKind::Table(_) | FileKind::Manifest(_)))
        });
    damaged.then(|| {
        format!(
            "{}: CURRENT is missing or not a file, but the directory holds tables or \
             manifests: the database is damaged (docs/format/files.md)",
            dir.display()
        )
    })
}

fn demo(dir: &std::path::Path) -> anyhow::Result<ExitCode> {
    check_database_dir(dir)?;
    let db = Db::open(dir, engine_options())
        .with_context(|| format!("opening database at {}", dir.display()))?;
    outln!("opened database at {}", dir.display())?;
    let runs: u64 = db
        .get(b"demo:runs")?
        .and_then(|v| std::str::from_utf8(&v).ok()?.parse().ok())
        .unwrap_or(0);
    let runs = runs + 1;
    let pairs = [
        ("demo:runs", runs.to_string()),
        ("read:ACGTACGTAC", "12".to_string()),
        ("read:TTGACCAGTA", "3".to_string()),
    ];
    for (k, v) in &pairs {
        db.put(k.as_bytes(), v.as_bytes())?;
        outln!("put {k} = {v}")?;
    }
    db.delete(b"read:TTGACCAGTA")?;
    outln!("delete read:TTGACCAGTA")?;
    for (k, _) in &pairs {
        match db.get(k.as_bytes())? {
            Some(v) => outln!("get {k} -> {}", String::from_utf8_lossy(&v))?,
            None => outln!("get {k} -> (absent)")?,
        }
    }
    outln!("scan:")?;
    for kv in db.iter(&ReadOptions::default()) {
        let (k, v) = kv?;
        outln!(
            "  {}\t{}",
            String::from_utf8_lossy(&k),
            String::from_utf8_lossy(&v)
        )?;
    }
    db.close()?;
    outln!("closed; this database has been opened by the demo {runs} time(s)")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::error_message;

    /// An error that prints its source in its own text and also returns it from `source()`,
    /// as `strata_server::ServerError::Engine` does.
    #[derive(Debug)]
    struct Wrapping {
        source: std::io::Error,
    }

    impl std::fmt::Display for Wrapping {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "database db0: {}", self.source)
        }
    }

    impl std::error::Error for Wrapping {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.source)
        }
    }

    #[test]
    fn repl_command_may_start_with_a_comment() {
        use clap::Parser;
        let cli =
            super::Cli::try_parse_from(["strata", "repl", "db", "-c", "-- a script\nSELECT 1;"])
                .expect("a script starting with -- parses");
        let super::Command::Repl { command, .. } = cli.command else {
            panic!("not repl");
        };
        assert_eq!(command.as_deref(), Some("-- a script\nSELECT 1;"));
    }

    #[test]
    fn a_server_data_directory_is_not_opened_as_a_database() {
        let dir = tempfile::tempdir().expect("temporary directory");
        let server_dir = dir.path().join("srv");
        strata_engine::Db::open(server_dir.join("db0"), strata_engine::Options::default())
            .expect("a database inside");
        let err = super::refuse_server_directory(&server_dir)
            .expect_err("a directory of databases is refused");
        assert!(err.to_string().contains("holds databases (db0)"), "{err}");
        assert!(!server_dir.join("CURRENT").exists());
        // A database, an empty directory and a missing one are fine.
        super::refuse_server_directory(&server_dir.join("db0")).expect("a database");
        super::refuse_server_directory(dir.path()).expect("no database below");
        super::refuse_server_directory(&dir.path().join("new")).expect("missing");
        // A new database's directory is created, but not its missing parents.
        super::check_database_dir(&dir.path().join("new")).expect("parent exists");
        let err = super::check_database_dir(&dir.path().join("typo/x/new"))
            .expect_err("missing parents")
            .to_string();
        assert!(err.contains("typo/x does not exist"), "{err}");
        std::fs::write(dir.path().join("afile"), b"").expect("write");
        let err = super::check_database_dir(&dir.path().join("afile/db"))
            .expect_err("a file as parent")
            .to_string();
        assert!(err.contains("afile is not a directory"), "{err}");
        super::check_database_dir(std::path::Path::new("relative-new")).expect("cwd parent");
    }

    #[test]
    fn a_locked_database_says_who_may_hold_it() {
        let e = anyhow::anyhow!("database at db/LOCK is locked by another open instance")
            .context("opening database at db");
        let text = error_message(&e);
        assert!(text.contains("`strata repl --read-only`"), "{text}");
        assert!(!error_message(&anyhow::anyhow!("other")).contains("read-only"));
    }

    #[test]
    fn error_message_names_each_cause_once() {
        let inner = std::io::Error::other("write_buffer_size must be at least 4096 bytes");
        let e = anyhow::Error::new(Wrapping { source: inner }).context("opening");
        assert_eq!(
            error_message(&e),
            "opening: database db0: write_buffer_size must be at least 4096 bytes"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(error_message(&plain), "outer: inner");
    }
}
