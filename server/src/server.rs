//! Listeners, connection accounting and shutdown.
//!
//! [`Server::run`] accepts RESP and PostgreSQL connections, one task each, until the
//! shutdown future completes or a RESP client sends `SHUTDOWN`; then it stops accepting,
//! lets every connection finish the command it is running for the grace period
//! ([`Config::shutdown_grace`]; RESP connections close once idle, PostgreSQL connections
//! after answering what their client sent, with FATAL 57P01), interrupts the SQL statements
//! still running, closes the connections not in an engine call (a client that does not read
//! its replies is not waited for), waits for in-flight engine calls, syncs the WALs and closes
//! the databases. [`serve`] wires SIGINT/SIGTERM to that shutdown, and a second signal to
//! ending the grace period at once.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use crate::config::{Config, SyncMode};
use crate::databases::Databases;
use crate::error::ServerError;

/// After the shutdown grace period, once the running SQL statements are interrupted: how long
/// the server waits for the connections to end. Interrupted statements end within
/// milliseconds; one already writing its batch cannot be stopped and is waited for, so its
/// client gets the reply (11 s for a 2.8 M-row UPDATE on the test machine).
const COMMIT_WAIT: Duration = Duration::from_secs(60);

/// The database RESP connections start in.
pub(crate) const DEFAULT_DATABASE: &str = "db0";

/// Counters for `INFO stats` / `INFO clients`.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub connections_received: AtomicU64,
    pub rejected_connections: AtomicU64,
    pub commands_processed: AtomicU64,
    pub keyspace_hits: AtomicU64,
    pub keyspace_misses: AtomicU64,
    pub protocol_errors: AtomicU64,
    pub connected_clients: AtomicUsize,
}

/// State shared by every connection.
#[derive(Debug)]
pub(crate) struct Shared {
    pub config: Config,
    pub databases: Databases,
    pub stats: Stats,
    pub cursors: crate::resp::keyspace::CursorTable,
    /// The RESP connections, for `CLIENT LIST` and `CLIENT KILL`.
    pub clients: Arc<crate::resp::clients::ClientRegistry>,
    pub started: Instant,
    /// This process's random 40-hex-digit id, `run_id` in `INFO server` as in Redis: tells
    /// two addresses of one server apart from two servers (`strata rebalance` checks it).
    pub run_id: String,
    pub next_client_id: AtomicU64,
    /// Engine calls running on the blocking pool; shutdown waits for them.
    pub in_flight: AtomicUsize,
    pub resp_addr: Option<SocketAddr>,
    pub pg_addr: Option<SocketAddr>,
    /// The SQL statements running: PostgreSQL connections' by backend key (for cancel
    /// requests), RESP `SQL` commands' (for the shutdown).
    pub running_sql: crate::pg::CancelTargets,
    /// Set when shutdown begins.
    pub stopping: AtomicBool,
    /// When the shutdown's grace period ends: `None` until shutdown begins, then its start
    /// plus [`Config::shutdown_grace`], moved to the present by a second SIGINT/SIGTERM. See
    /// [`Shared::grace_over`].
    pub grace_deadline: watch::Sender<Option<Instant>>,
    /// Set by the RESP `SHUTDOWN` command: begins the shutdown as the first SIGINT/SIGTERM
    /// does.
    pub shutdown_asked: watch::Sender<bool>,
    /// Hands out PostgreSQL backend keys: one counter for the whole server, so every
    /// connection has its own process id (pgwire's password handler would otherwise start a
    /// counter per connection).
    pub pg_keys: Arc<pgwire::api::RandomPidSecretKeyGenerator>,
}

impl Shared {
    /// A fresh client id (`CLIENT ID`, PostgreSQL backend process id).
    pub fn client_id(&self) -> u64 {
        self.next_client_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Completes once the shutdown's grace period is over (never before shutdown begins):
    /// connections then stop waiting for a client that does not read its replies.
    pub fn grace_over(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut deadline = self.grace_deadline.subscribe();
        async move {
            loop {
                let current = *deadline.borrow_and_update();
                let changed = match current {
                    Some(d) => tokio::select! {
                        () = tokio::time::sleep_until(d.into()) => return,
                        changed = deadline.changed() => changed,
                    },
                    None => deadline.changed().await,
                };
                if changed.is_err() {
                    // The server is gone: nothing left to wait for.
                    return;
                }
            }
        }
    }

    /// Runs `f` on the blocking pool, counted in `in_flight` so shutdown waits for it.
    ///
    /// # Errors
    /// When `f` panicked (the panic is logged; the connection should be closed).
    pub async fn blocking<T, F>(self: &Arc<Self>, f: F) -> Result<T, tokio::task::JoinError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let guard = InFlight::enter(Arc::clone(self));
        let result = tokio::task::spawn_blocking(move || {
            let _guard = guard;
            f()
        })
        .await;
        if let Err(e) = &result {
            tracing::error!(error = %e, "command panicked");
        }
        result
    }
}

/// Decrements `in_flight` on drop.
struct InFlight(Arc<Shared>);

impl InFlight {
    fn enter(shared: Arc<Shared>) -> Self {
        shared.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(shared)
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection slot; released on drop.
pub(crate) struct ClientSlot(Arc<Shared>);

impl ClientSlot {
    /// Takes a slot, or `None` when `max_clients` connections are open.
    pub fn acquire(shared: &Arc<Shared>) -> Option<ClientSlot> {
        shared
            .stats
            .connections_received
            .fetch_add(1, Ordering::Relaxed);
        let before = shared
            .stats
            .connected_clients
            .fetch_add(1, Ordering::AcqRel);
        if before >= shared.config.max_clients {
            shared
                .stats
                .connected_clients
                .fetch_sub(1, Ordering::AcqRel);
            shared
                .stats
                .rejected_connections
                .fetch_add(1, Ordering::Relaxed);
            return None;
        }
        Some(ClientSlot(Arc::clone(shared)))
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        self.0
            .stats
            .connected_clients
            .fetch_sub(1, Ordering::AcqRel);
    }
}

/// A bound, not yet running server.
#[derive(Debug)]
pub struct Server {
    shared: Arc<Shared>,
    resp: Option<TcpListener>,
    pg: Option<TcpListener>,
}

#[derive(Debug, Clone, Copy)]
enum Protocol {
    Resp,
    Pg,
}

impl Server {
    /// Binds the listeners, then creates the data directory and opens the default database
    /// (`db0`): an address that cannot be bound leaves the file system as it was.
    ///
    /// # Errors
    /// [`ServerError::Bind`], [`ServerError::DirIsDatabase`], [`ServerError::Dir`],
    /// [`ServerError::DirInUse`] (another server holds the directory),
    /// [`ServerError::Engine`] (`db0` does not open, unless for want of space or file
    /// descriptors: then it is logged, and `db0` is opened at its first use).
    pub async fn bind(config: Config) -> Result<Server, ServerError> {
        let resp = bind(config.resp_addr).await?;
        let pg = bind(config.pg_addr).await?;
        let databases = Databases::new(&config)?;
        let databases = tokio::task::spawn_blocking(move || {
            match databases.get_or_open(DEFAULT_DATABASE) {
                Ok(_) => Ok(databases),
                // A full disk (or no descriptor left) fails the recovery's writes: serve the
                // other databases and every read-only command anyway, and open `db0` at its
                // first use, once there is space again (RocksDB fails the open the same way,
                // but one database must not keep a whole server down).
                Err(ServerError::Engine { name, source }) if source.is_resource_exhausted() => {
                    tracing::error!(
                        database = %name,
                        error = %source,
                        "the default database cannot be opened for want of a resource; \
                         serving anyway, it is opened at its first use"
                    );
                    Ok(databases)
                }
                Err(e) => Err(e),
            }
        })
        .await
        .map_err(|e| ServerError::Runtime(std::io::Error::other(e)))??;
        let resp_addr = resp.as_ref().and_then(|l| l.local_addr().ok());
        let pg_addr = pg.as_ref().and_then(|l| l.local_addr().ok());
        if let Some(addr) = resp_addr {
            tracing::info!(%addr, "listening for RESP (Redis) clients");
        }
        if let Some(addr) = pg_addr {
            tracing::info!(%addr, "listening for PostgreSQL clients");
        }
        let shared = Arc::new(Shared {
            config,
            databases,
            stats: Stats::default(),
            cursors: crate::resp::keyspace::CursorTable::default(),
            clients: Arc::default(),
            started: Instant::now(),
            run_id: new_run_id(),
            next_client_id: AtomicU64::new(1),
            in_flight: AtomicUsize::new(0),
            resp_addr,
            pg_addr,
            running_sql: crate::pg::CancelTargets::default(),
            pg_keys: Arc::new(pgwire::api::RandomPidSecretKeyGenerator::default()),
            stopping: AtomicBool::new(false),
            grace_deadline: watch::Sender::new(None),
            shutdown_asked: watch::Sender::new(false),
        });
        Ok(Server { shared, resp, pg })
    }

    /// The RESP listener's address (with the real port when bound to port 0).
    pub fn resp_addr(&self) -> Option<SocketAddr> {
        self.shared.resp_addr
    }

    /// The PostgreSQL listener's address.
    pub fn pg_addr(&self) -> Option<SocketAddr> {
        self.shared.pg_addr
    }

    /// Serves until `shutdown` completes, then shuts down cleanly (see the module docs).
    ///
    /// # Errors
    /// The first error closing a database.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
        self.run_until(shutdown, std::future::pending()).await
    }

    /// [`Server::run`], where `hurry` completing after `shutdown` ends the grace period at
    /// once (a second SIGINT/SIGTERM): running SQL statements are interrupted and
    /// connections closed without waiting for their clients; engine calls already running
    /// (a batch being written) are still waited for.
    async fn run_until(
        self,
        shutdown: impl Future<Output = ()>,
        hurry: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServerError> {
        let Server { shared, resp, pg } = self;
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut loops = JoinSet::new();
        if let Some(listener) = resp {
            loops.spawn(accept_loop(
                listener,
                Protocol::Resp,
                Arc::clone(&shared),
                stop_rx.clone(),
            ));
        }
        if let Some(listener) = pg {
            loops.spawn(accept_loop(
                listener,
                Protocol::Pg,
                Arc::clone(&shared),
                stop_rx.clone(),
            ));
        }
        if shared.config.sync == SyncMode::Batch {
            // [`SyncMode::Batch`]: fsyncs databases with new writes every `sync_interval`.
            loops.spawn(every(
                Arc::clone(&shared),
                shared.config.sync_interval,
                stop_rx.clone(),
                |s| {
                    s.databases.sync_dirty();
                },
            ));
        }
        if let Some(quiet) = shared.config.flush_when_quiet {
            // [`Config::flush_when_quiet`]: flushes the memtables of databases without
            // writes for that long.
            loops.spawn(every(
                Arc::clone(&shared),
                check_period(quiet),
                stop_rx.clone(),
                move |s| {
                    s.databases.flush_quiet(quiet);
                },
            ));
        }
        if let Some(idle) = shared.config.close_idle_databases {
            // [`Config::close_idle_databases`]: closes databases idle for that long.
            loops.spawn(every(
                Arc::clone(&shared),
                check_period(idle),
                stop_rx.clone(),
                move |s| {
                    s.databases.close_idle(idle);
                },
            ));
        }
        let mut asked = shared.shutdown_asked.subscribe();
        // `admin::shutdown` logged the client that asked.
        tokio::select! {
            () = shutdown => {}
            Ok(_) = asked.wait_for(|asked| *asked) => {}
        }
        tracing::info!("shutting down: no new connections, finishing in-flight commands");
        let started = Instant::now();
        shared
            .grace_deadline
            .send_replace(Some(started + shared.config.shutdown_grace));
        shared.stopping.store(true, Ordering::Release);
        let _ = stop_tx.send(true);
        let hurrying = {
            let shared = Arc::clone(&shared);
            tokio::spawn(async move {
                hurry.await;
                tracing::warn!("shutting down now: not waiting for clients any longer");
                shared.grace_deadline.send_replace(Some(Instant::now()));
            })
        };
        while loops.join_next().await.is_some() {}
        // The accept loops waited the grace period and interrupted the SQL statements still
        // running; what is left is committing (or a RESP command): let it finish, for a while.
        let deadline = started + shared.config.shutdown_grace + COMMIT_WAIT;
        while shared.in_flight.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let closing = Arc::clone(&shared);
        hurrying.abort();
        let result = tokio::task::spawn_blocking(move || closing.databases.close_all())
            .await
            .map_err(|e| ServerError::Runtime(std::io::Error::other(e)))?;
        tracing::info!("shut down");
        result
    }
}

async fn bind(addr: Option<SocketAddr>) -> Result<Option<TcpListener>, ServerError> {
    match addr {
        None => Ok(None),
        Some(addr) => TcpListener::bind(addr)
            .await
            .map(Some)
            .map_err(|source| ServerError::Bind { addr, source }),
    }
}

/// Accepts connections until `stop`; then waits (up to the grace period) for the
/// connections to end, and aborts the rest.
async fn accept_loop(
    listener: TcpListener,
    protocol: Protocol,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let Some(slot) = ClientSlot::acquire(&shared) else {
                        connections.spawn(reject(stream, protocol, Arc::clone(&shared)));
                        continue;
                    };
                    let shared = Arc::clone(&shared);
                    let stop = stop.clone();
                    connections.spawn(async move {
                        let _slot = slot;
                        match protocol {
                            Protocol::Resp => {
                                crate::resp::serve_connection(stream, peer, shared, stop).await;
                            }
                            Protocol::Pg => crate::pg::serve_connection(stream, shared, stop).await,
                        }
                    });
                }
                Err(e) => {
                    // Out of file descriptors and the like: keep serving the others.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
            _ = stop.changed() => break,
        }
    }
    drop(listener);
    let drained = tokio::select! {
        () = async { while connections.join_next().await.is_some() {} } => true,
        () = shared.grace_over() => false,
    };
    if !drained {
        // Statements still running are stopped (they change nothing, unless already
        // committing) and their connections get 57P01, then FATAL 57P01, before closing.
        // Connections not in an engine call close themselves now (a client that does not
        // read its replies is not waited for).
        let stopped = shared.running_sql.cancel_all();
        let drained = tokio::time::timeout(COMMIT_WAIT, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                remaining = connections.len(),
                stopped,
                "connections still open after the grace period: closing them"
            );
            connections.shutdown().await;
        }
    }
}

/// Answers a connection over `max_clients` with an error and closes it (a PostgreSQL client
/// after its startup packet; a PostgreSQL cancel request is acted on:
/// [`crate::pg::refuse_too_many`]), within 5 s.
async fn reject(mut stream: TcpStream, protocol: Protocol, shared: Arc<Shared>) {
    let limit = Duration::from_secs(5);
    let _ = match protocol {
        Protocol::Resp => {
            let refusal = stream.write_all(b"-ERR max number of clients reached\r\n");
            tokio::time::timeout(limit, refusal).await
        }
        Protocol::Pg => {
            tokio::time::timeout(limit, crate::pg::refuse_too_many(&mut stream, &shared)).await
        }
    };
    let _ = stream.shutdown().await;
}

/// Runs `job` on a blocking thread every `period` until `stop` changes (a run under way
/// finishes first): the server's housekeeping loops.
async fn every(
    shared: Arc<Shared>,
    period: Duration,
    mut stop: watch::Receiver<bool>,
    job: impl Fn(&Shared) + Copy + Send + 'static,
) {
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let s = Arc::clone(&shared);
                let _ = shared.blocking(move || job(&s)).await;
            }
            _ = stop.changed() => return,
        }
    }
}

/// The check period of a loop acting on things idle for `idle`: a quarter of it, at least
/// 10 ms and at most 10 s.
fn check_period(idle: Duration) -> Duration {
    (idle / 4).clamp(Duration::from_millis(10), Duration::from_secs(10))
}

/// The runtime serving connections, with `worker_threads` workers.
fn runtime(worker_threads: usize) -> Result<tokio::runtime::Runtime, ServerError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(worker_threads.max(1))
        .enable_all()
        .thread_name("strata-server")
        .build()
        .map_err(ServerError::Runtime)
}

/// Runs a server in the current thread until SIGINT or SIGTERM (what `strata serve` does).
/// A second SIGINT or SIGTERM during the shutdown ends its grace period at once: running
/// statements are interrupted and connections closed (a batch being written is waited for).
///
/// # Errors
/// Startup errors ([`Server::bind`]) and shutdown errors ([`Server::run`]).
pub fn serve(config: Config) -> Result<(), ServerError> {
    let rt = runtime(config.worker_threads)?;
    rt.block_on(async {
        let server = Server::bind(config).await?;
        let signals = count_signals();
        server
            .run_until(nth_signal(signals.clone(), 1), nth_signal(signals, 2))
            .await
    })
}

/// Counts the SIGINTs and SIGTERMs received, from now on.
fn count_signals() -> watch::Receiver<u32> {
    use tokio::signal::unix::{SignalKind, signal};
    let (count_tx, count) = watch::channel(0u32);
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::spawn(async move {
                loop {
                    let name = tokio::select! {
                        Some(()) = int.recv() => "SIGINT",
                        Some(()) = term.recv() => "SIGTERM",
                        else => return,
                    };
                    let n = count_tx.borrow().saturating_add(1);
                    count_tx.send_replace(n);
                    if n == 1 {
                        tracing::info!("{name} received");
                    } else {
                        tracing::warn!("{name} received again during the shutdown");
                    }
                }
            });
        }
        _ => tracing::warn!("cannot install signal handlers; stop the server with SIGKILL"),
    }
    count
}

/// Completes once `n` signals were counted (never if the signal handlers failed).
async fn nth_signal(mut count: watch::Receiver<u32>, n: u32) {
    if count.wait_for(|c| *c >= n).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// A server running on its own thread and runtime (for tests and embedding).
#[derive(Debug)]
pub struct RunningServer {
    resp_addr: Option<SocketAddr>,
    pg_addr: Option<SocketAddr>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServerError>>>,
}

/// Starts a server on a new thread; returns once it listens.
///
/// # Errors
/// Startup errors ([`Server::bind`]).
pub fn spawn(config: Config) -> Result<RunningServer, ServerError> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("strata-server-main".into())
        .spawn(move || {
            let rt = runtime(config.worker_threads)?;
            rt.block_on(async move {
                let server = match Server::bind(config).await {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return Ok(());
                    }
                };
                let _ = ready_tx.send(Ok((server.resp_addr(), server.pg_addr())));
                server
                    .run(async move {
                        let _ = stop_rx.await;
                    })
                    .await
            })
        })
        .map_err(ServerError::Runtime)?;
    match ready_rx.recv() {
        Ok(Ok((resp_addr, pg_addr))) => Ok(RunningServer {
            resp_addr,
            pg_addr,
            stop: Some(stop_tx),
            thread: Some(thread),
        }),
        Ok(Err(e)) => {
            let _ = thread.join();
            Err(e)
        }
        Err(_) => match thread.join() {
            Ok(Err(e)) => Err(e),
            _ => Err(ServerError::Runtime(std::io::Error::other(
                "server thread exited during startup",
            ))),
        },
    }
}

impl RunningServer {
    /// The RESP address, when RESP is on.
    pub fn resp_addr(&self) -> Option<SocketAddr> {
        self.resp_addr
    }

    /// The PostgreSQL address, when it is on.
    pub fn pg_addr(&self) -> Option<SocketAddr> {
        self.pg_addr
    }

    /// True once the server has stopped by itself (a client's `SHUTDOWN`) or failed;
    /// [`RunningServer::shutdown`] then returns its result.
    pub fn has_stopped(&self) -> bool {
        self.thread
            .as_ref()
            .is_none_or(std::thread::JoinHandle::is_finished)
    }

    /// Shuts the server down cleanly and waits for it.
    ///
    /// # Errors
    /// Errors closing the databases.
    pub fn shutdown(mut self) -> Result<(), ServerError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), ServerError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        match self.thread.take().map(std::thread::JoinHandle::join) {
            None => Ok(()),
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(ServerError::Runtime(std::io::Error::other(
                "server thread panicked",
            ))),
        }
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        if let Err(e) = self.stop_and_join() {
            tracing::warn!(error = %e, "server shutdown failed");
        }
    }
}

/// A random 40-hex-digit id (160 bits from the standard library's per-process random hash
/// keys, the process id and the clock), as Redis's `run_id`.
fn new_run_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    (0..3u64)
        .map(|i| {
            let mut h = std::collections::hash_map::RandomState::new().build_hasher();
            h.write_u64(i);
            h.write_u32(std::process::id());
            h.write_u128(nanos);
            format!("{:016x}", h.finish())
        })
        .collect::<String>()
        .chars()
        .take(40)
        .collect()
}
