//! `strata serve` command-line arguments (feature `cli`, used by the `strata` binary).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::config::{Config, DEFAULT_PG_ADDR, DEFAULT_RESP_ADDR, SyncMode};

/// `--cache-mb`, the block cache of `strata serve` (shared by all its databases) and of
/// `strata repl`.
#[derive(Debug, Clone, clap::Args)]
pub struct CacheArgs {
    /// Block cache, in MiB of uncompressed blocks, 0 (no cache) to 1048576 (1 TiB); filled
    /// as blocks are read, shared by all the databases a server opens.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(0..=1_048_576))]
    pub cache_mb: u32,
}

impl CacheArgs {
    /// The cache size in bytes.
    pub fn bytes(&self) -> usize {
        usize::try_from(self.cache_mb)
            .unwrap_or(usize::MAX)
            .saturating_mul(1 << 20)
    }
}

/// Serve databases over the Redis protocol (RESP) and the PostgreSQL protocol.
#[derive(Debug, Clone, clap::Args)]
pub struct ServeArgs {
    /// Data directory: database NAME lives in DIR/NAME/ (created on first use). Not a
    /// database directory itself (such as the SQL shell's ./strata-data).
    #[arg(long, default_value = "./strata-server")]
    pub dir: PathBuf,
    /// RESP (Redis) listen address: HOST:PORT, the host an IP address or a name
    /// (`localhost:6380`).
    #[arg(long, default_value = DEFAULT_RESP_ADDR, value_parser = listen_addr)]
    pub resp_addr: SocketAddr,
    /// Do not listen for RESP clients.
    #[arg(long, conflicts_with = "no_pg")]
    pub no_resp: bool,
    /// PostgreSQL listen address: HOST:PORT, as --resp-addr.
    #[arg(long, default_value = DEFAULT_PG_ADDR, value_parser = listen_addr)]
    pub pg_addr: SocketAddr,
    /// Do not listen for PostgreSQL clients.
    #[arg(long)]
    pub no_pg: bool,
    /// WAL durability: always (fsync before each reply), batch (fsync every
    /// --sync-interval-ms in the background) or none (leave it to the OS).
    #[arg(long, default_value = "batch")]
    pub sync: SyncMode,
    /// Background fsync period for --sync batch, in milliseconds.
    #[arg(long, default_value_t = 100)]
    pub sync_interval_ms: u64,
    /// Require this password (RESP AUTH, PostgreSQL password authentication).
    #[arg(long)]
    pub requirepass: Option<String>,
    /// Most simultaneous connections (both protocols), at least 1.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub maxclients: u64,
    /// Most databases open at once (each keeps threads, files and memtables while open).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_databases: u32,
    /// Close a database no connection has used for this many seconds (0 = never); it
    /// reopens on next use.
    #[arg(long, default_value_t = 300)]
    pub close_idle_databases: u64,
    /// Flush a database's waiting memtables once it has taken no write for this many
    /// milliseconds (0 = never); while the memtable budget is at least half used, its active
    /// memtable too.
    #[arg(long, default_value_t = 2000)]
    pub flush_when_quiet_ms: u64,
    /// Close connections idle for this many seconds (0 = never).
    #[arg(long, default_value_t = 0)]
    pub timeout: u64,
    /// Largest RESP bulk string (one argument or value), in bytes.
    #[arg(long, default_value_t = 512 << 20)]
    pub proto_max_bulk_len: usize,
    /// Memtable size per database, in MiB, 1 to 4096.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub write_buffer_mb: u32,
    /// Memtables merged into each level-0 table, 1 to 1024. Twice as many may be in memory:
    /// 2 x write-buffer-mb x this MiB per database (128 MiB by default).
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub memtables_per_flush: u16,
    /// Memtable memory budget shared by all databases, in MiB (0 = none): when their
    /// memtables hold it, a database that writes flushes its waiting memtables at once and
    /// its writers wait for that flush.
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(0..=1_048_576))]
    pub memtable_budget_mb: u32,
    /// Table files kept open at most, across all databases (one shared table cache), at
    /// least 16; lowered when `ulimit -n` cannot make room for them beside --maxclients.
    #[arg(long, default_value_t = 5_000, value_parser = clap::value_parser!(u32).range(16..))]
    pub max_open_tables: u32,
    /// `--cache-mb`.
    #[command(flatten)]
    pub cache: CacheArgs,
    /// Threads serving connections (0: one per core).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// Parses a listen address, `IP:PORT` or `HOST:PORT` with the host resolved (its first IPv4
/// address, else its first address).
fn listen_addr(text: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = text.parse() {
        return Ok(addr);
    }
    use std::net::ToSocketAddrs;
    let addrs: Vec<SocketAddr> = text
        .to_socket_addrs()
        .map_err(|e| format!("{e} (expected HOST:PORT, such as 127.0.0.1:6380)"))?
        .collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| format!("{text} resolves to no address"))
}

impl ServeArgs {
    /// The server configuration these arguments describe.
    pub fn config(&self) -> Config {
        let mut config = Config::new(self.dir.clone());
        config.resp_addr = (!self.no_resp).then_some(self.resp_addr);
        config.pg_addr = (!self.no_pg).then_some(self.pg_addr);
        config.sync = self.sync;
        config.sync_interval = Duration::from_millis(self.sync_interval_ms.max(1));
        config.requirepass.clone_from(&self.requirepass);
        config.max_clients = usize::try_from(self.maxclients).unwrap_or(usize::MAX);
        config.max_databases = usize::try_from(self.max_databases).unwrap_or(usize::MAX);
        config.idle_timeout = (self.timeout > 0).then(|| Duration::from_secs(self.timeout));
        config.close_idle_databases =
            (self.close_idle_databases > 0).then(|| Duration::from_secs(self.close_idle_databases));
        config.flush_when_quiet =
            (self.flush_when_quiet_ms > 0).then(|| Duration::from_millis(self.flush_when_quiet_ms));
        config.limits.max_bulk_bytes = self.proto_max_bulk_len;
        config.write_buffer_size = usize::try_from(self.write_buffer_mb)
            .unwrap_or(usize::MAX)
            .saturating_mul(1 << 20);
        config.memtables_per_flush = usize::from(self.memtables_per_flush);
        config.memtable_budget = (self.memtable_budget_mb > 0).then(|| {
            usize::try_from(self.memtable_budget_mb)
                .unwrap_or(usize::MAX)
                .saturating_mul(1 << 20)
        });
        config.block_cache_size = self.cache.bytes();
        config.max_open_tables = usize::try_from(self.max_open_tables).unwrap_or(usize::MAX);
        if self.threads > 0 {
            config.worker_threads = self.threads;
        }
        config
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::ServeArgs;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    #[test]
    fn addresses_take_host_names_and_one_protocol_must_stay_on() {
        let named = Cli::parse_from(["serve", "--resp-addr", "localhost:16385"])
            .serve
            .config();
        assert_eq!(named.resp_addr.map(|a| a.port()), Some(16385));
        assert!(named.resp_addr.is_some_and(|a| a.ip().is_loopback()));
        let err = Cli::try_parse_from(["serve", "--pg-addr", "localhost"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("HOST:PORT"), "{err}");
        assert!(Cli::try_parse_from(["serve", "--no-resp", "--no-pg"]).is_err());
        assert!(Cli::try_parse_from(["serve", "--no-resp"]).is_ok());
        assert!(Cli::try_parse_from(["serve", "--maxclients", "0"]).is_err());
    }

    #[test]
    fn threads_default_to_one_per_core_and_can_be_set() {
        let default = Cli::parse_from(["serve"]).serve.config();
        assert_eq!(
            default.worker_threads,
            crate::config::default_worker_threads()
        );
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
        assert_eq!(default.worker_threads, cores);
        let set = Cli::parse_from(["serve", "--threads", "3"]).serve.config();
        assert_eq!(set.worker_threads, 3);
    }

    #[test]
    fn the_memtable_budget_defaults_to_1_gib_and_0_turns_it_off() {
        let default = Cli::parse_from(["serve"]).serve.config();
        assert_eq!(default.memtable_budget, Some(1 << 30));
        assert_eq!(
            default.memtable_budget,
            crate::Config::new(".").memtable_budget
        );
        let off = Cli::parse_from(["serve", "--memtable-budget-mb", "0"])
            .serve
            .config();
        assert_eq!(off.memtable_budget, None);
        let set = Cli::parse_from(["serve", "--memtable-budget-mb", "64"])
            .serve
            .config();
        assert_eq!(set.memtable_budget, Some(64 << 20));
    }

    #[test]
    fn memtables_per_flush_defaults_to_16_and_refuses_0() {
        let default = Cli::parse_from(["serve"]).serve.config();
        assert_eq!(default.memtables_per_flush, 16);
        assert_eq!(default.write_buffer_size, 4 << 20);
        let set = Cli::parse_from(["serve", "--memtables-per-flush", "2"])
            .serve
            .config();
        assert_eq!(set.memtables_per_flush, 2);
        let err = Cli::try_parse_from(["serve", "--memtables-per-flush", "0"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("--memtables-per-flush"), "{err}");
        // A zero memtable size is refused when the arguments are parsed, not at the first
        // database open.
        for bad in ["0", "4097"] {
            let err = Cli::try_parse_from(["serve", "--write-buffer-mb", bad])
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("--write-buffer-mb"), "{err}");
        }
    }
}
