//! Per-connection state and command execution.
//!
//! # Pipelined writes
//! Plain `SET key value` and `MSET` are blind writes: their entries are gathered into one
//! pending [`KvBatch`] and their `+OK` replies encoded right away. The batch is written
//! (one engine write, hence one WAL append and, with `--sync always`, one fsync) before any
//! other command runs and at the end of the pipeline, and always before any reply reaches
//! the socket, so a client never sees `+OK` for a write that is not in the WAL. If the
//! engine refuses the batch, the gathered `+OK`s are replaced by one error per command.
//! The write at the end of a pipeline is awaited ([`Session::flush_pending_async`]), so the
//! worker thread serves other connections while the group commit runs; writes forced out
//! in the middle of a pipeline (before a command that is not a blind write) block.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use bytes::Bytes;

use super::clients::{ClientState, Registration};
use super::table::{self, CommandSpec};
use crate::config::SyncMode;
use crate::databases::{Database, KvBatch, MAX_REDIS_KEY_SIZE, key_length_error};
use crate::error::resp_engine_error;
use crate::protocol::reply::echoed;
use crate::protocol::{Limits, ReplyBuffer};
use crate::server::DEFAULT_DATABASE;
use crate::server::Shared;

/// Fewest blind writes in a batch that [`Session::hand_off`] hands to the committer thread.
const HAND_OFF_MIN_ENTRIES: usize = 4;

/// Flush the pending batch once it holds this many bytes.
const PENDING_MAX_BYTES: usize = 4 << 20;
/// Flush the pending batch once it holds this many commands.
const PENDING_MAX_COMMANDS: usize = 1024;
/// Bytes reserved for a new pending batch.
const PENDING_START_BYTES: usize = 1024;

/// Blind writes gathered from a pipeline, not yet written.
#[derive(Debug, Default)]
struct Pending {
    batch: KvBatch,
    keys: Vec<Bytes>,
    /// Offset in the reply buffer of the first gathered reply.
    reply_start: usize,
    commands: usize,
    bytes: usize,
}

/// One RESP connection's state.
#[derive(Debug)]
pub(crate) struct Session {
    pub shared: Arc<Shared>,
    /// The selected database; `None` until the first command that needs it opens `db0` (see
    /// [`Session::open_database`]), so a connection can `PING`, `AUTH`, `SELECT` another
    /// database or read `INFO` while `db0` cannot be opened (`--max-databases` reached).
    db: Option<Arc<Database>>,
    pub authenticated: bool,
    pub name: Option<Bytes>,
    pub out: ReplyBuffer,
    /// Close the connection after writing the replies (`QUIT`).
    pub quit: bool,
    pub last_command: &'static str,
    /// This connection in the server's client registry (`CLIENT LIST`, `CLIENT KILL`).
    pub registration: Registration,
    pending: Pending,
    /// Commands run but not yet added to `total_commands_processed` (see
    /// `Session::count_commands`).
    uncounted_commands: u64,
    /// A `MULTI` was refused: commands are refused until `EXEC` or `DISCARD`, so a client's
    /// transaction (redis-py's default pipeline) never half-runs.
    refused_multi: bool,
}

impl Session {
    pub fn new(shared: Arc<Shared>, peer: SocketAddr) -> Session {
        let authenticated = shared.config.requirepass.is_none();
        let registration = shared.clients.register(
            shared.client_id(),
            peer,
            ClientState {
                name: None,
                db: None,
                last_command: "NULL",
                resp: 2,
                last_active: Instant::now(),
            },
        );
        Session {
            shared,
            // Not even an open `db0` is taken here: a connection that only selects another
            // database never holds it, so it can be closed as idle.
            db: None,
            authenticated,
            name: None,
            out: ReplyBuffer::new(),
            quit: false,
            last_command: "NULL",
            registration,
            pending: Pending::default(),
            uncounted_commands: 0,
            refused_multi: false,
        }
    }

    /// The selected database. Only for commands whose [`CommandSpec::database`] is set:
    /// [`Session::execute`] opens it before they run.
    #[expect(
        clippy::expect_used,
        reason = "Session::execute opens the database before any command that uses it"
    )]
    pub fn db(&self) -> &Arc<Database> {
        self.db
            .as_ref()
            .expect("the database is opened before a command that needs it")
    }

    /// The selected database if it is open (`db0` may not be yet).
    pub fn db_if_open(&self) -> Option<&Arc<Database>> {
        self.db.as_ref()
    }

    /// The name of the selected database, open or not.
    pub fn db_name(&self) -> &str {
        self.db.as_ref().map_or(DEFAULT_DATABASE, |db| db.name())
    }

    /// Selects `db` (`SELECT`).
    pub fn set_db(&mut self, db: Arc<Database>) {
        self.db = Some(db);
    }

    /// Opens `db0` if no database is open yet; false, with the error replied, when it cannot
    /// be (too many open databases): the connection stays open, and commands that need no
    /// database, or `SELECT` of an open one, still work.
    fn open_database(&mut self) -> bool {
        if self.db.is_some() {
            return true;
        }
        match self.shared.databases.get_or_open(DEFAULT_DATABASE) {
            Ok(db) => {
                self.db = Some(db);
                true
            }
            Err(e) => {
                self.out.error(&crate::error::resp_server_error(&e));
                false
            }
        }
    }

    /// `CLIENT ID`: the connection's id in the client registry.
    pub fn id(&self) -> u64 {
        self.registration.entry.id
    }

    /// The client's address.
    pub fn peer(&self) -> SocketAddr {
        self.registration.entry.peer
    }

    /// Publishes what `CLIENT LIST` shows of this connection to the client registry, for
    /// other connections to list (after each batch of commands; a connection lists itself
    /// from [`Session::client_state`]).
    pub fn publish(&self) {
        self.registration.entry.publish(self.client_state());
    }

    /// What `CLIENT LIST` shows of this connection now.
    pub fn client_state(&self) -> ClientState {
        ClientState {
            name: self.name.clone(),
            db: self.db.clone(),
            last_command: self.last_command,
            resp: if self.out.resp3() { 3 } else { 2 },
            last_active: Instant::now(),
        }
    }

    /// True while a password is required and not given yet.
    pub fn needs_auth(&self) -> bool {
        !self.authenticated
    }

    /// The framing limits for this connection (smaller before AUTH).
    pub fn limits(&self) -> Limits {
        if self.authenticated {
            self.shared.config.limits
        } else {
            self.shared.config.limits.unauthenticated()
        }
    }

    /// True when running `batch` may block the thread for long: whole-key-space commands,
    /// opening databases, SQL other than a quick read ([`crate::sql::is_quick_text`]: one
    /// SELECT of a few rows by key), or writes that fsync.
    pub fn batch_may_block(&self, batch: &[Vec<Bytes>]) -> bool {
        let synced = self.shared.config.sync == SyncMode::Always;
        let unopened = self.db.is_none();
        batch.iter().any(|args| {
            args.first()
                .and_then(|name| table::lookup(name))
                .is_some_and(|spec| {
                    if spec.name == "SQL" && !unopened && self.quick_sql(args) {
                        return false;
                    }
                    spec.heavy || (synced && spec.write) || (unopened && spec.database)
                })
        })
    }

    /// True for an `SQL` command (its arguments `args`) whose text is one quick read.
    fn quick_sql(&self, args: &[Bytes]) -> bool {
        let (Some(db), [_, text]) = (&self.db, args) else {
            return false;
        };
        std::str::from_utf8(text).is_ok_and(|text| crate::sql::is_quick_text(db, text))
    }

    /// Runs `batch` in order, encoding the replies into `self.out`, and writes the pending
    /// blind writes (blocking).
    pub fn run_batch(&mut self, batch: Vec<Vec<Bytes>>) {
        self.run_commands(&batch);
        self.flush_pending();
    }

    /// Runs `batch` in order, encoding the replies into `self.out`; blind writes at its end
    /// may stay pending: the caller must await [`Session::flush_pending_async`] before the
    /// replies are sent.
    ///
    /// Consecutive plain `GET`s are answered by one engine multi-get (one read view and one
    /// table-cache lookup per table for all of them, see `strata_engine::Db::multi_get`);
    /// the replies are the ones single `GET`s give.
    pub fn run_commands(&mut self, batch: &[Vec<Bytes>]) {
        let mut rest = batch;
        // A killed connection (`CLIENT KILL`, its own included) runs nothing more.
        while !rest.is_empty() && !self.quit && !self.registration.entry.is_killed() {
            let gets = if self.authenticated && !self.refused_multi && self.db.is_some() {
                rest.iter().take_while(|args| is_plain_get(args)).count()
            } else {
                0
            };
            let ran = if gets >= 2 {
                self.multi_get(&rest[..gets]);
                gets
            } else {
                self.execute(&rest[0]);
                usize::from(!rest[0].is_empty())
            };
            self.uncounted_commands += ran as u64;
            rest = &rest[gets.max(1)..];
        }
        self.count_commands();
    }

    /// Adds the commands run since the last call to `total_commands_processed`. Called once
    /// per batch and before `INFO` (which then sees every command before it, not itself, as
    /// in Redis): one shared counter bumped by every command would bounce its cache line
    /// between the worker threads' cores.
    fn count_commands(&mut self) {
        let n = std::mem::take(&mut self.uncounted_commands);
        if n > 0 {
            self.shared
                .stats
                .commands_processed
                .fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Runs `gets`, all plain `GET key` commands, as one multi-get.
    fn multi_get(&mut self, gets: &[Vec<Bytes>]) {
        self.flush_pending();
        self.last_command = "GET";
        let keys: Vec<&[u8]> = gets
            .iter()
            .map(|args| super::commands::arg(args, 1))
            .collect();
        let (mut hits, mut misses) = (0, 0);
        for value in self.db().multi_get(&keys) {
            match value {
                Ok(v) => {
                    if v.is_some() {
                        hits += 1;
                    } else {
                        misses += 1;
                    }
                    self.out.bulk_or_null(v.as_deref());
                }
                Err(e) => self.out.error(&resp_engine_error(&e)),
            }
        }
        super::commands::count_lookups(self, hits, misses);
    }

    fn execute(&mut self, args: &[Bytes]) {
        let Some(name) = args.first() else {
            return;
        };
        // Cross-protocol scripting: a browser's HTTP request sent to this port arrives as
        // inline commands ("POST / HTTP/1.1", "Host: ..."), with a body that could hold real
        // commands. Close the connection at once, as Redis does.
        if name.eq_ignore_ascii_case(b"POST") || name.eq_ignore_ascii_case(b"HOST:") {
            tracing::warn!(peer = %self.peer(), "possible cross-protocol attack (HTTP request on the RESP port); connection closed");
            self.quit = true;
            return;
        }
        if self.transaction_refused(name) {
            return;
        }
        let Some(spec) = table::lookup(name) else {
            self.unknown_command(args);
            return;
        };
        if !arity_ok(spec, args.len()) {
            self.out.error(&format!(
                "ERR wrong number of arguments for '{}' command",
                spec.name.to_ascii_lowercase()
            ));
            return;
        }
        if !self.authenticated && !spec.no_auth {
            self.out.error("NOAUTH Authentication required.");
            return;
        }
        if !spec.batchable {
            self.flush_pending();
        }
        if spec.database && !self.open_database() {
            return;
        }
        if spec.name == "INFO" {
            self.count_commands();
        }
        // A container's subcommand by its full name (`client|id`), as Redis's CLIENT LIST.
        self.last_command = args
            .get(1)
            .and_then(|sub| {
                spec.subcommands.iter().find(|s| {
                    s.name
                        .split_once('|')
                        .is_some_and(|(_, name)| name.as_bytes().eq_ignore_ascii_case(sub))
                })
            })
            .map_or(spec.name, |s| s.name);
        (spec.handler)(self, args);
    }

    /// Handles `MULTI`, `EXEC`, `DISCARD` (Strata has no transactions) and refuses every other
    /// command after a refused `MULTI`. Returns true when it replied.
    fn transaction_refused(&mut self, name: &[u8]) -> bool {
        let upper = name.to_ascii_uppercase();
        match (upper.as_slice(), self.refused_multi) {
            (b"MULTI", true) => self.out.error("ERR MULTI calls can not be nested"),
            (b"MULTI", false) => {
                self.refused_multi = true;
                self.out.error(
                    "ERR MULTI is not supported (no transactions): the commands up to EXEC or \
                     DISCARD will be refused",
                );
            }
            (b"EXEC" | b"DISCARD", true) => {
                self.refused_multi = false;
                self.out
                    .error("EXECABORT Transaction discarded because MULTI is not supported.");
            }
            (b"EXEC", false) => self.out.error("ERR EXEC without MULTI"),
            (b"DISCARD", false) => self.out.error("ERR DISCARD without MULTI"),
            (_, true) => self
                .out
                .error("ERR command not run: MULTI is not supported; send EXEC or DISCARD"),
            (_, false) => return false,
        }
        true
    }

    /// Redis 7's reply, byte for byte: the name and the arguments echoed raw (up to a NUL
    /// byte), the name cut at 128 bytes, arguments added while the list (quotes and spaces
    /// counted) is under 128 bytes, each cut to the room left.
    fn unknown_command(&mut self, args: &[Bytes]) {
        let mut message = b"ERR unknown command '".to_vec();
        message.extend_from_slice(echoed(args.first().map_or(&[][..], |a| a), 128));
        message.extend_from_slice(b"', with args beginning with: ");
        let mut rest: Vec<u8> = Vec::new();
        for a in args.iter().skip(1) {
            if rest.len() >= 128 {
                break;
            }
            let room = 128 - rest.len();
            rest.push(b'\'');
            rest.extend_from_slice(echoed(a, room));
            rest.extend_from_slice(b"' ");
        }
        message.extend_from_slice(&rest);
        self.out.error_bytes(&message);
    }

    /// Adds a blind `SET key value` (or `MSET`'s pairs) to the pending batch and encodes its
    /// `+OK`. A key over [`MAX_REDIS_KEY_SIZE`] bytes gets its error here, after the pending
    /// writes before it are written, and is not added: the batch it would join must not fail
    /// the other commands' writes with it.
    pub fn pend_put(&mut self, pairs: &[Bytes]) {
        if let Some(key) = pairs
            .iter()
            .step_by(2)
            .find(|k| k.len() > MAX_REDIS_KEY_SIZE)
        {
            self.flush_pending();
            self.out
                .error(&resp_engine_error(&key_length_error(key.len())));
            return;
        }
        if self.pending.commands == 0 {
            self.pending.reply_start = self.out.len();
            // Room for a typical pipeline (16 small SETs) without reallocating.
            self.pending.batch = KvBatch::with_capacity(PENDING_START_BYTES);
            self.pending.keys.reserve(16);
        }
        for pair in pairs.chunks_exact(2) {
            if let [key, value] = pair {
                self.pending.batch.put(key, value);
                self.pending.bytes += key.len() + value.len();
                self.pending.keys.push(key.clone());
            }
        }
        self.pending.commands += 1;
        self.out.ok();
        if self.pending.bytes >= PENDING_MAX_BYTES || self.pending.commands >= PENDING_MAX_COMMANDS
        {
            self.flush_pending();
        }
    }

    /// Writes the pending blind writes (see the module docs), blocking the thread until they
    /// are committed. Used before a command that is not a blind write, and on the blocking
    /// pool.
    pub fn flush_pending(&mut self) {
        if self.pending.commands == 0 {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        let batch = std::mem::take(&mut pending.batch);
        let result = {
            let db = self.db();
            let _locks = db.lock_keys(&pending.keys, false);
            db.write(batch)
        };
        self.settle(&pending, result);
    }

    /// [`Session::flush_pending`] without blocking the thread while the group commit runs:
    /// the runtime's worker serves other connections meanwhile, and their writes join the
    /// same group (see [`Database::write_async`]).
    pub async fn flush_pending_async(&mut self) {
        if self.pending.commands == 0 {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        let batch = std::mem::take(&mut pending.batch);
        let db = Arc::clone(self.db());
        let hand_off = self.hand_off(batch.len());
        let result = db.write_async(batch, &pending.keys, hand_off).await;
        self.settle(&pending, result);
    }

    /// Whether a pipeline's blind writes, `entries` of them, go to the engine's committer
    /// thread ([`strata_engine::WriteOptions::hand_off`]) rather than being committed in this
    /// worker when no group commit is running. Only a batch of at least
    /// [`HAND_OFF_MIN_ENTRIES`], and only while more connections are open than there are
    /// workers: the hand-off costs two thread wake-ups, which pay only when the worker has
    /// other connections to serve meanwhile. Measured with `redis-benchmark` on 2 cores
    /// (docs/benchmarks.md, "Pipelined writes handed to the committer"): pipelined SET (`-P
    /// 16`, 50 connections) 1.14x the requests/s; handing off single writes too served
    /// unpipelined SETs at 0.62x the rate, and handing off every pipeline of a lone
    /// connection (`strata load --resp` of 2.79 M reads) took 1.14x the time.
    fn hand_off(&self, entries: usize) -> bool {
        entries >= HAND_OFF_MIN_ENTRIES
            && self.shared.stats.connected_clients.load(Ordering::Relaxed)
                > self.shared.config.worker_threads
    }

    /// Replaces the gathered `+OK`s by one error each when the write failed.
    fn settle(&mut self, pending: &Pending, result: strata_engine::Result<()>) {
        if let Err(e) = result {
            self.out.truncate(pending.reply_start);
            let line = resp_engine_error(&e);
            for _ in 0..pending.commands {
                self.out.error(&line);
            }
        }
    }
}

/// `GET key`: two arguments, the first `GET` in any case.
fn is_plain_get(args: &[Bytes]) -> bool {
    matches!(args, [name, _] if name.eq_ignore_ascii_case(b"GET"))
}

fn arity_ok(spec: &CommandSpec, argc: usize) -> bool {
    let argc = i64::try_from(argc).unwrap_or(i64::MAX);
    let arity = i64::from(spec.arity);
    if arity >= 0 {
        argc == arity
    } else {
        argc >= -arity
    }
}
