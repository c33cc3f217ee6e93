//! Server configuration: addresses, data directory, durability, limits, password.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::protocol::Limits;

/// When acknowledged writes reach stable storage, like Redis's `appendfsync`.
///
/// Every mode writes the WAL record before a write is acknowledged, so a killed server
/// process (kill -9, crash) never loses an acknowledged write: the bytes are in the operating
/// system's page cache. The modes differ on power loss or a kernel crash:
///
/// | mode | acknowledged writes lost on power loss |
/// |---|---|
/// | `always` | none: each write (or pipelined group) is fsynced before its reply |
/// | `batch` | those of the last `sync_interval` (default 100 ms), plus in-flight ones |
/// | `none` | everything the OS had not written back yet (Linux: typically up to 30 s) |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// fsync the WAL before acknowledging each write; concurrent writers share fsyncs.
    Always,
    /// fsync the WAL of every database with new writes every `sync_interval`, in the
    /// background.
    #[default]
    Batch,
    /// Never fsync explicitly; leave write-back to the operating system (still synced on
    /// shutdown).
    None,
}

impl FromStr for SyncMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "always" => Ok(SyncMode::Always),
            "batch" => Ok(SyncMode::Batch),
            "none" => Ok(SyncMode::None),
            other => Err(format!(
                "unknown sync mode {other:?}: expected always, batch or none"
            )),
        }
    }
}

impl std::fmt::Display for SyncMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SyncMode::Always => "always",
            SyncMode::Batch => "batch",
            SyncMode::None => "none",
        })
    }
}

/// Everything `strata serve` needs. [`Config::new`] gives the documented defaults.
#[derive(Debug, Clone)]
pub struct Config {
    /// Root directory; database `name` lives in `dir/name/`. Created if missing.
    pub dir: PathBuf,
    /// Where to listen for RESP (Redis) clients; `None` turns RESP off.
    /// Default `127.0.0.1:6380`.
    pub resp_addr: Option<SocketAddr>,
    /// Where to listen for PostgreSQL clients; `None` turns it off. Default `127.0.0.1:5433`.
    pub pg_addr: Option<SocketAddr>,
    /// WAL durability; default [`SyncMode::Batch`].
    pub sync: SyncMode,
    /// Period of the background fsync in [`SyncMode::Batch`]. Default 100 ms.
    pub sync_interval: Duration,
    /// When set, RESP clients must `AUTH` (or `HELLO .. AUTH`) and PostgreSQL clients must
    /// give this password (cleartext password authentication; use it on loopback only).
    pub requirepass: Option<String>,
    /// Most simultaneous client connections (both protocols together); beyond it new
    /// connections get an error and are closed (a PostgreSQL cancel request is still acted
    /// on: it needs no slot). Default 10,000 (Redis's `maxclients`).
    pub max_clients: usize,
    /// Close a connection idle this long: waiting for the client's next request with nothing
    /// in flight (a running command or a PostgreSQL result being sent is never idle);
    /// `None` (default) never does.
    pub idle_timeout: Option<Duration>,
    /// Close a PostgreSQL connection that has not finished its startup and authentication
    /// after this long (PostgreSQL's `authentication_timeout`), with FATAL 08P01. Default
    /// 55 s. At most [`PGWIRE_STARTUP_LIMIT`] takes effect: the `pgwire` crate closes an
    /// unstarted connection itself at 60 s, without a message.
    pub pg_startup_timeout: Duration,
    /// Most databases open at once. Each open database keeps its background threads, WAL,
    /// table files and memtables while open, and any client can open one by
    /// naming it, so beyond this a new database is refused with an error. Default 512.
    pub max_databases: usize,
    /// Close a database that no connection holds and none has taken for this long (once it
    /// has no compaction due; waiting immutable memtables are flushed first); it opens again
    /// on next use. `None` keeps every database open until shutdown. Default 300 s.
    pub close_idle_databases: Option<Duration>,
    /// Flush a database's memtables into one level-0 table once it has taken no write for
    /// this long and holds immutable memtables (they otherwise wait for
    /// `memtables_per_flush` of them, so reads after a load probe them all, and a restart
    /// replays their WAL), or, while the memtable budget is at least half used, any memtable
    /// (so idle databases give their share of it back). `None` never does. Default 2 s.
    pub flush_when_quiet: Option<Duration>,
    /// RESP framing limits (bulk size, argument count, inline length).
    pub limits: Limits,
    /// The shutdown's grace period: how long connections may finish their in-flight commands
    /// and send the replies. After it, running SQL statements are interrupted and connections
    /// not in an engine call are closed (a client that does not read its replies is not
    /// waited for); a batch already being written is waited for up to 60 s more. A second
    /// SIGINT/SIGTERM ends it at once. Default 10 s.
    pub shutdown_grace: Duration,
    /// Memtable size of each database, in bytes (engine `write_buffer_size`). Default 4 MiB:
    /// random `SET`s insert into a skiplist that fits in the CPU cache (docs/server.md,
    /// "Memtable size").
    pub write_buffer_size: usize,
    /// Memtables merged into each level-0 table (engine `min_write_buffer_number_to_merge`;
    /// twice as many may be in memory, `max_write_buffer_number`). Default 16, so a flush
    /// writes 64 MiB of memtable as one table.
    pub memtables_per_flush: usize,
    /// Memtable memory, in bytes, shared by all the server's databases (engine
    /// `Options::write_buffer_manager`, RocksDB's `db_write_buffer_size`): once their
    /// memtables hold it, a database that writes flushes its immutable memtables without
    /// waiting for `memtables_per_flush` of them, and its writers wait for that flush. Each
    /// database alone may hold 2 x `memtables_per_flush` x `write_buffer_size` (128 MiB by
    /// default), so the budget matters when several are written at once. `None`: no budget.
    /// Default 1 GiB.
    pub memtable_budget: Option<usize>,
    /// Threads that serve connections (the async runtime's workers; heavy commands, SQL and
    /// synced writes run on a separate blocking pool). Default [`default_worker_threads`]: one
    /// per core.
    pub worker_threads: usize,
    /// Block cache shared by all the server's databases, in bytes of uncompressed blocks
    /// (engine `Options::block_cache`): one budget however many databases are open, each
    /// database keeping its own hit and miss counts. Default 512 MiB.
    pub block_cache_size: usize,
    /// SSTable format version of the tables the databases write (engine
    /// `Options::table_format`; `strata --table-format`). Default: the engine's (version 3).
    pub table_format: strata_engine::TableFormat,
    /// LZ4 block compression in the tables the databases write (engine
    /// `Options::compression`; `strata --compression lz4|none`). Default: on.
    pub compression: bool,
    /// Table files kept open at most, across all the server's databases (one table cache
    /// shared by them, engine `Options::table_cache`); further tables are opened as reads
    /// need them and closed again. Lowered when the open-file limit cannot make room for it
    /// ([`Config::table_cache_capacity`]). Default 5,000, so the defaults need 17,112
    /// descriptors in all: within the hard limit of 20,000 of the machines we test on (and
    /// systemd's 524,288), so nothing is lowered there.
    pub max_open_tables: usize,
}

/// Default [`Config::worker_threads`]: one per core (tokio's default). Fewer can be faster
/// for writes when the clients share the machine: with `redis-benchmark -c 50` on the same
/// 2-core machine one worker served SET 19-28% faster than two and pipelined GET 15% slower
/// (docs/server.md, "Worker threads").
pub fn default_worker_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// Default RESP address (Redis's port plus one, so both can run side by side).
pub const DEFAULT_RESP_ADDR: &str = "127.0.0.1:6380";
/// Default PostgreSQL address (PostgreSQL's port plus one).
pub const DEFAULT_PG_ADDR: &str = "127.0.0.1:5433";

/// The longest [`Config::pg_startup_timeout`] that takes effect: the `pgwire` crate (0.42)
/// closes a connection that has not finished its startup after 60 s on its own, silently;
/// ours must fire first for the client to get FATAL 08P01.
pub const PGWIRE_STARTUP_LIMIT: Duration = Duration::from_secs(59);

/// File descriptors an open database holds at most, beside its tables (kept in the table
/// cache): its WAL, `LOCK` and directory handles, as counted on a running server (about 3).
const FILES_PER_DATABASE: u64 = 4;

/// File descriptors kept for everything else: listeners, the server lock, standard streams,
/// the async runtime's, tables an iterator still reads after the table cache let them go.
const FILES_SPARE: u64 = 64;

/// Fewest tables the shared table cache holds, however low the open-file limit.
const MIN_OPEN_TABLES: u64 = 16;

impl Config {
    /// File descriptors a server with this configuration may need at once: one per client
    /// ([`Config::max_clients`]), a few per open database ([`Config::max_databases`]), the
    /// table files ([`Config::max_open_tables`]), and a spare 64.
    pub fn open_files_needed(&self) -> u64 {
        self.files_beside_tables()
            .saturating_add(self.max_open_tables as u64)
    }

    /// [`Config::open_files_needed`] less the table files.
    fn files_beside_tables(&self) -> u64 {
        (self.max_clients as u64)
            .saturating_add((self.max_databases as u64).saturating_mul(FILES_PER_DATABASE))
            .saturating_add(FILES_SPARE)
    }

    /// Tables the server's shared table cache may keep open under an open-file limit of
    /// `soft_limit` (`RLIMIT_NOFILE`, soft; after [`Config::raise_open_file_limit`]):
    /// [`Config::max_open_tables`] when the limit covers [`Config::open_files_needed`];
    /// otherwise what the limit leaves beside the clients, databases and spare, but at least
    /// half of the limit less the spare (a low limit is shared between tables and clients
    /// rather than all given to clients that may never come), and at least 16.
    pub fn table_cache_capacity(&self, soft_limit: u64) -> usize {
        let wanted = self.max_open_tables as u64;
        let room = soft_limit.saturating_sub(self.files_beside_tables());
        let half = soft_limit.saturating_sub(FILES_SPARE) / 2;
        let tables = wanted.min(room.max(half)).max(MIN_OPEN_TABLES);
        usize::try_from(tables).unwrap_or(usize::MAX)
    }

    /// Lowers [`Config::max_open_tables`], [`Config::max_clients`] and
    /// [`Config::max_databases`] so that together they fit an open-file limit of `soft_limit`
    /// below [`Config::open_files_needed`], as Redis lowers `maxclients` to its limit: the
    /// tables get [`Config::table_cache_capacity`], the clients half of what is left beside
    /// the spare, the databases (4 descriptors each) the rest; each at least 1. Beyond them a
    /// client gets "max number of clients reached" and a database "too many open databases"
    /// rather than a connection that hangs or reads that fail with "Too many open files".
    /// Returns whether anything was lowered; nothing is when the limit covers the need.
    pub fn fit_open_file_limit(&mut self, soft_limit: u64) -> bool {
        if soft_limit >= self.open_files_needed() {
            return false;
        }
        let tables = self.table_cache_capacity(soft_limit) as u64;
        let rest = soft_limit
            .saturating_sub(FILES_SPARE)
            .saturating_sub(tables);
        let clients = (self.max_clients as u64).min((rest / 2).max(1));
        let databases = (self.max_databases as u64)
            .min((rest.saturating_sub(clients) / FILES_PER_DATABASE).max(1));
        let fitted = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let before = (self.max_open_tables, self.max_clients, self.max_databases);
        self.max_open_tables = fitted(tables);
        self.max_clients = fitted(clients);
        self.max_databases = fitted(databases);
        before != (self.max_open_tables, self.max_clients, self.max_databases)
    }

    /// Raises the process's soft limit on open files (`RLIMIT_NOFILE`) toward
    /// [`Config::open_files_needed`], at most to the hard limit, as Redis does for its
    /// `maxclients`: the usual soft limit of 1,024 is below the defaults' 10,000 clients and
    /// 512 databases. Returns the soft limit in force afterwards and whether it is still below
    /// the need (the caller warns then). Never lowers the limit.
    pub fn raise_open_file_limit(&self) -> (u64, bool) {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        let needed = self.open_files_needed();
        let limit = getrlimit(Resource::Nofile);
        let soft = limit.current.unwrap_or(u64::MAX);
        if soft >= needed {
            return (soft, false);
        }
        let target = limit.maximum.map_or(needed, |hard| hard.min(needed));
        if target > soft
            && setrlimit(
                Resource::Nofile,
                Rlimit {
                    current: Some(target),
                    maximum: limit.maximum,
                },
            )
            .is_ok()
        {
            return (target, target < needed);
        }
        (soft, true)
    }

    /// The defaults, serving the databases under `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Config {
        Config {
            dir: dir.into(),
            resp_addr: DEFAULT_RESP_ADDR.parse().ok(),
            pg_addr: DEFAULT_PG_ADDR.parse().ok(),
            sync: SyncMode::default(),
            sync_interval: Duration::from_millis(100),
            requirepass: None,
            max_clients: 10_000,
            idle_timeout: None,
            pg_startup_timeout: Duration::from_secs(55),
            max_databases: 512,
            close_idle_databases: Some(Duration::from_secs(300)),
            flush_when_quiet: Some(Duration::from_secs(2)),
            limits: Limits::default(),
            shutdown_grace: Duration::from_secs(10),
            write_buffer_size: 4 << 20,
            memtables_per_flush: 16,
            worker_threads: default_worker_threads(),
            memtable_budget: Some(1 << 30),
            block_cache_size: 512 << 20,
            table_format: strata_engine::TableFormat::default(),
            compression: true,
            max_open_tables: 5_000,
        }
    }

    /// The defaults with both listeners on `127.0.0.1:0` (a free port each), for tests.
    pub fn ephemeral(dir: impl Into<PathBuf>) -> Config {
        let any: Option<SocketAddr> = "127.0.0.1:0".parse().ok();
        Config {
            resp_addr: any,
            pg_addr: any,
            ..Config::new(dir)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_file_limit_is_raised_toward_the_need_and_never_lowered() {
        use rustix::process::{Resource, getrlimit};
        let mut config = Config::new("/nonexistent");
        config.max_clients = 10;
        config.max_databases = 2;
        assert_eq!(
            config.open_files_needed(),
            10 + 2 * FILES_PER_DATABASE + FILES_SPARE + 5_000
        );
        let before = getrlimit(Resource::Nofile).current.unwrap_or(u64::MAX);
        // A need the limit meets changes nothing.
        if before >= config.open_files_needed() {
            assert_eq!(config.raise_open_file_limit(), (before, false));
        }
        // A need above the hard limit raises the soft limit to the hard one, no further.
        config.max_clients = usize::MAX / 2;
        let (after, short) = config.raise_open_file_limit();
        let now = getrlimit(Resource::Nofile);
        assert!(after >= before);
        assert_eq!(now.current.unwrap_or(u64::MAX), after);
        assert!(short || now.current.is_none());
    }

    #[test]
    fn the_table_cache_takes_what_the_open_file_limit_leaves() {
        let mut config = Config::new("/nonexistent");
        config.max_clients = 100;
        config.max_databases = 10;
        config.max_open_tables = 1_000;
        let beside = 100 + 10 * FILES_PER_DATABASE + FILES_SPARE;
        // A limit that covers everything: the configured count.
        assert_eq!(config.table_cache_capacity(beside + 1_000), 1_000);
        assert_eq!(config.table_cache_capacity(u64::MAX), 1_000);
        // A limit that covers the rest and some tables: what is left.
        assert_eq!(config.table_cache_capacity(beside + 700), 700);
        // A limit too low for the clients: half of it less the spare, so a database of many
        // tables does not fail every read with EMFILE, and at least 16.
        config.max_clients = 10_000;
        assert_eq!(
            config.table_cache_capacity(300),
            (300 - FILES_SPARE as usize) / 2
        );
        assert_eq!(config.table_cache_capacity(64), 16);
    }

    #[test]
    fn clients_databases_and_tables_are_lowered_to_fit_a_short_limit() {
        let mut config = Config::new("/nonexistent");
        // The defaults need 10,000 + 512 x 4 + 5,000 + the spare.
        assert!(
            !config
                .clone()
                .fit_open_file_limit(config.open_files_needed())
        );
        assert!(config.fit_open_file_limit(300));
        // 300 less the spare of 64 is 236: 118 tables, 59 clients, 14 databases.
        assert_eq!(
            (
                config.max_open_tables,
                config.max_clients,
                config.max_databases
            ),
            (118, 59, 14)
        );
        assert!(config.open_files_needed() <= 300);
        // Fitted once, the numbers stay.
        assert!(!config.fit_open_file_limit(300));
        assert_eq!(config.table_cache_capacity(300), 118);
        // A client limit already below the fit stays; so does at least one of each.
        let mut config = Config::new("/nonexistent");
        config.max_clients = 5;
        assert!(config.fit_open_file_limit(300));
        assert_eq!(config.max_clients, 5);
        let mut config = Config::new("/nonexistent");
        config.fit_open_file_limit(20);
        assert_eq!(
            (
                config.max_open_tables,
                config.max_clients,
                config.max_databases
            ),
            (16, 1, 1)
        );
    }
}
