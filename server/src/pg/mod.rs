//! The PostgreSQL front end, on the `pgwire` crate: simple query (psql) and extended query
//! (parse/bind/describe/execute: psycopg 3, tokio-postgres, JDBC) over the SQL layer.
//!
//! Each connection gets its own handler. The connection's database name (`psql -d run42`;
//! the user name when none is given, as PostgreSQL does) selects the database, which is
//! opened or created on the first statement; an invalid name fails the startup itself
//! (FATAL 3D000). With `--timeout`, a connection idle that long gets FATAL 57P05 and is
//! closed, as from PostgreSQL's `idle_session_timeout`. Statements run on the blocking pool, one at a
//! time per connection. Result columns are typed before execution from the plan
//! ([`crate::sql::describe`]), so Describe answers match the rows sent later. Parameters are
//! decoded by their type OID and format and written into the statement as literals
//! ([`values::param_literal`]); the SQL layer itself has no placeholders.
//!
//! Cancel requests (psql's Ctrl-C, psycopg's `Connection.cancel()`, tokio-postgres's
//! `CancelToken`) stop the connection's running statement through its
//! [`strata_query::Interrupt`] ([`CancelTargets`]): it fails with SQLSTATE 57014 and has
//! changed nothing. (pgwire's own cancel support answers 57014 at once and drops the
//! statement's future, while the statement goes on on the blocking pool and may still commit:
//! not used.)

mod connection;
mod frames;
mod values;

pub(crate) use connection::{refuse_too_many, serve_connection};

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::stream;
use futures::{Sink, SinkExt};
use parking_lot::Mutex;
use pgwire::api::auth::cleartext::CleartextPasswordAuthStartupHandler;
use pgwire::api::auth::{
    AuthSource, DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
    finish_authentication, protocol_negotiation, save_startup_parameters_to_metadata,
};
use pgwire::api::cancel::CancelHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler, send_describe_response};
use pgwire::api::results::{
    DataRowEncoder, DescribePortalResponse, DescribeStatementResponse, QueryResponse, Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::{Entry, PortalStore};
use pgwire::api::{
    ClientInfo, ClientPortalStore, DEFAULT_NAME, METADATA_DATABASE, METADATA_USER,
    PgWireServerHandlers, Type,
};
use pgwire::api::{PgWireConnectionState, PidSecretKeyGenerator, RandomPidSecretKeyGenerator};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::cancel::CancelRequest;
use pgwire::messages::data::{NoData, ParameterDescription};
use pgwire::messages::extendedquery::{Bind, BindComplete, Describe, Parse, ParseComplete};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use crate::databases::Database;
use crate::error::ServerError;
use crate::server::Shared;
use crate::sql::read_only::Change as ReadOnlyChange;
use crate::sql::{self, Column, Outcome, SqlError};
use connection::Activity;
use strata_query::{Interrupt, QueryError};

/// A parsed statement: one SQL statement with `$n` placeholders.
#[derive(Debug, Clone)]
pub(crate) struct PgStatement {
    sql: String,
    params: usize,
    /// The result columns the client was last told about (a Describe of the statement or of
    /// a portal of it): rows of other columns are refused with 0A000 at Execute, as
    /// PostgreSQL refuses them ("cached plan must not change result type"), instead of being
    /// sent under the old RowDescription (a binary int8 read as text). Shared by the clones
    /// pgwire makes of the statement.
    described: Arc<Mutex<Option<Vec<Column>>>>,
}

impl PgStatement {
    /// Remembers `columns` as what the client expects this statement's rows to be.
    fn remember_columns(&self, columns: Option<&[Column]>) {
        *self.described.lock() = Some(columns.map(<[Column]>::to_vec).unwrap_or_default());
    }

    /// Refuses rows of `columns` when the client was told of other ones (see
    /// [`PgStatement::described`]).
    fn check_columns(&self, columns: &[Column]) -> PgWireResult<()> {
        match self.described.lock().as_deref() {
            Some(told) if !fits(told, columns) => Err(plan_changed()),
            _ => Ok(()),
        }
    }

    /// `rows` of `columns` as the client was told they would be: a BIGINT column described
    /// as DOUBLE is sent as DOUBLE (a `numeric` parameter described before Bind by its `0.0`
    /// stand-in and bound as an exact integer, `SELECT $1`); any other difference is refused
    /// as [`PgStatement::check_columns`] refuses it.
    fn fit_rows(&self, outcome: Outcome) -> PgWireResult<Outcome> {
        let Outcome::Rows { columns, mut rows } = outcome else {
            return Ok(outcome);
        };
        let Some(told) = self.described.lock().clone() else {
            return Ok(Outcome::Rows { columns, rows });
        };
        if !fits(&told, &columns) {
            return Err(plan_changed());
        }
        let widened: Vec<usize> = (0..columns.len())
            .filter(|&i| {
                told.get(i).and_then(|c| c.ty) == Some(strata_query::DataType::Double)
                    && columns.get(i).and_then(|c| c.ty) == Some(strata_query::DataType::BigInt)
            })
            .collect();
        if widened.is_empty() {
            return Ok(Outcome::Rows { columns, rows });
        }
        for row in &mut rows {
            for &i in &widened {
                if let Some(v) = row.get_mut(i)
                    && let strata_query::Value::Int(n) = *v
                {
                    #[expect(
                        clippy::cast_precision_loss,
                        reason = "the column was described as float8: it rounds as SQL's \
                                  integer to DOUBLE conversion does"
                    )]
                    let d = n as f64;
                    *v = strata_query::Value::Double(d);
                }
            }
        }
        let mut columns = columns;
        for &i in &widened {
            if let Some(c) = columns.get_mut(i) {
                c.ty = Some(strata_query::DataType::Double);
            }
        }
        Ok(Outcome::Rows { columns, rows })
    }
}

/// True when rows of `columns` can be sent under a RowDescription of `told`: the same names
/// and wire types (a column of unknown type is described as `text`, as a TEXT one is), or
/// a BIGINT column where DOUBLE was told (sent as DOUBLE, see [`PgStatement::fit_rows`]).
fn fits(told: &[Column], columns: &[Column]) -> bool {
    told.len() == columns.len()
        && told.iter().zip(columns).all(|(t, c)| {
            t.name == c.name
                && (values::pg_type(t.ty) == values::pg_type(c.ty)
                    || (t.ty == Some(strata_query::DataType::Double)
                        && c.ty == Some(strata_query::DataType::BigInt)))
        })
}

/// PostgreSQL's error for a prepared statement whose result columns changed since it was
/// described: its message and routine, by which asyncpg recognizes it and prepares the
/// statement again.
fn plan_changed() -> PgWireError {
    let mut info = ErrorInfo::new(
        "ERROR".to_owned(),
        "0A000".to_owned(),
        "cached plan must not change result type".to_owned(),
    );
    info.detail = Some(
        "a table the statement reads was changed since the statement was described: prepare \
         it again"
            .to_owned(),
    );
    info.routine = Some("RevalidateCachedQuery".to_owned());
    PgWireError::UserError(Box::new(info))
}

/// Per-connection handlers.
struct PgHandlers {
    query: Arc<PgQuery>,
    startup: Arc<PgStartup>,
    cancel: Arc<PgCancel>,
}

impl PgHandlers {
    fn new(shared: Arc<Shared>, activity: Arc<Activity>) -> Self {
        let statement_timeout = Arc::new(Mutex::new(None));
        let startup = Arc::new(PgStartup {
            statement_timeout: Arc::clone(&statement_timeout),
            activity: Arc::clone(&activity),
            password: shared.config.requirepass.clone().map(|p| {
                CleartextPasswordAuthStartupHandler::new(PasswordSource(p), server_parameters())
                    .with_pid_secret_key_generator(Arc::clone(&shared.pg_keys) as _)
            }),
            no_auth: NoAuth {
                keys: Arc::clone(&shared.pg_keys),
                params: server_parameters(),
            },
        });
        let cancel = Arc::new(PgCancel {
            shared: Arc::clone(&shared),
        });
        PgHandlers {
            query: Arc::new(PgQuery {
                shared,
                database: Mutex::new(None),
                parser: Arc::new(PgParser),
                activity,
                running: Arc::new(Mutex::new(None)),
                backend_key: Mutex::new(None),
                statement_timeout: Arc::clone(&statement_timeout),
                named_statements: Mutex::new(HashSet::new()),
                transaction: Mutex::new(Transaction::default()),
                notices: Mutex::new(Vec::new()),
            }),
            startup,
            cancel,
        }
    }
}

impl PgWireServerHandlers for PgHandlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::clone(&self.query)
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::clone(&self.query)
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        Arc::clone(&self.startup)
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        Arc::clone(&self.cancel)
    }
}

/// The `--requirepass` password, for any user.
#[derive(Debug)]
struct PasswordSource(String);

#[async_trait]
impl AuthSource for PasswordSource {
    async fn get_password(&self, _login: &LoginInfo) -> PgWireResult<Password> {
        Ok(Password::new(None, self.0.as_bytes().to_vec()))
    }
}

/// Startup: cleartext password authentication with `--requirepass`, none otherwise.
struct PgStartup {
    /// The connection's `statement_timeout`, set from the startup `options` parameter.
    statement_timeout: Arc<Mutex<Option<Duration>>>,
    /// The connection's activity: startup marks it ready.
    activity: Arc<Activity>,
    password:
        Option<CleartextPasswordAuthStartupHandler<PasswordSource, DefaultServerParameterProvider>>,
    no_auth: NoAuth,
}

/// Startup without authentication: pgwire's `NoopStartupHandler` steps, with our server
/// parameters (that handler always sent pgwire's own `server_version`, `16.6-pgwire-...`,
/// while `SHOW server_version` answers [`sql::PG_VERSION`]).
struct NoAuth {
    keys: Arc<RandomPidSecretKeyGenerator>,
    params: DefaultServerParameterProvider,
}

impl NoAuth {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let PgWireFrontendMessage::Startup(startup) = &message {
            protocol_negotiation(client, startup).await?;
            save_startup_parameters_to_metadata(client, startup);
            let (pid, secret_key) = self.keys.generate(client);
            client.set_pid_and_secret_key(pid, secret_key);
            finish_authentication(client, &self.params).await?;
            client.set_state(PgWireConnectionState::ReadyForQuery);
        }
        Ok(())
    }
}

/// The server parameters reported at startup, with [`sql::PG_VERSION`] as `server_version`.
fn server_parameters() -> DefaultServerParameterProvider {
    let mut params = DefaultServerParameterProvider::default();
    params.server_version = sql::PG_VERSION.to_owned();
    params
}

#[async_trait]
impl StartupHandler for PgStartup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let PgWireFrontendMessage::Startup(startup) = &message {
            let p = &startup.parameters;
            // As PostgreSQL: the user is the one required parameter (the database name
            // defaults to it).
            if p.get(METADATA_USER).is_none_or(String::is_empty) {
                return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                    "FATAL".to_owned(),
                    "28000".to_owned(),
                    "no PostgreSQL user name specified in startup packet".to_owned(),
                ))));
            }
            let name = database_name(p.get(METADATA_DATABASE), p.get(METADATA_USER));
            if crate::databases::validate_name(name).is_err() {
                return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                    "FATAL".to_owned(),
                    "3D000".to_owned(),
                    format!(
                        "database \"{name}\" does not exist: a database name is 1 to {} \
                         ASCII letters, digits, '_' and '-'",
                        crate::databases::MAX_NAME_LEN
                    ),
                ))));
            }
            // The server converts no encodings: a client asking for another one than UTF8
            // would have its text read wrongly (pgwire turns bytes that are not UTF-8 into
            // U+FFFD).
            // Also `options='-c client_encoding=LATIN1'` (PGOPTIONS).
            let in_options = p
                .get("options")
                .and_then(|o| sql::timeout::startup_option(o, "client_encoding"));
            if let Some(Err(e)) = p
                .get("client_encoding")
                .map(String::as_str)
                .into_iter()
                .chain(in_options)
                .map(sql::check_client_encoding)
                .find(Result::is_err)
            {
                return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                    "FATAL".to_owned(),
                    e.sqlstate().to_owned(),
                    e.to_string(),
                ))));
            }
            // `options='-c statement_timeout=2000'` (libpq, PGOPTIONS); a bad value fails the
            // connection, as in PostgreSQL.
            if let Some(set) = p
                .get("options")
                .and_then(|o| sql::timeout::from_startup_options(o))
            {
                match set {
                    Ok(limit) => *self.statement_timeout.lock() = limit,
                    Err(e) => {
                        return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                            "FATAL".to_owned(),
                            e.sqlstate().to_owned(),
                            e.to_string(),
                        ))));
                    }
                }
            }
        }
        match &self.password {
            Some(handler) => handler.on_startup(client, message).await?,
            None => self.no_auth.on_startup(client, message).await?,
        }
        if matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            self.activity.ready.store(true, Ordering::Release);
        }
        Ok(())
    }
}

/// The database a connection asks for: the `database` startup parameter, else the user
/// name (PostgreSQL's rule), else `postgres`.
fn database_name<'a>(database: Option<&'a String>, user: Option<&'a String>) -> &'a str {
    database
        .filter(|d| !d.is_empty())
        .or(user)
        .map_or("postgres", String::as_str)
}

/// The most parameters a statement may have, as in PostgreSQL.
const MAX_PARAMS: usize = 65_535;

/// Statement "parsing": split, count parameters. Real parsing happens at describe/execute.
#[derive(Debug)]
struct PgParser;

#[async_trait]
impl QueryParser for PgParser {
    type Statement = PgStatement;

    async fn parse_sql<C>(
        &self,
        _client: &C,
        sql: &str,
        _types: &[Option<Type>],
    ) -> PgWireResult<Option<PgStatement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        sql::check_statement_text(sql).map_err(|e| sql_error(&e))?;
        match sql::text::split_statements(sql).as_slice() {
            [] => Ok(None),
            [one] => {
                let params = sql::text::param_count(one);
                // PostgreSQL's limit (a Bind message counts parameters in 16 bits); work per
                // statement is proportional to the highest `$n`.
                if params > MAX_PARAMS {
                    return Err(user_error(
                        "42P02",
                        format!(
                            "there is no parameter ${params}: at most {MAX_PARAMS} are allowed"
                        ),
                    ));
                }
                Ok(Some(PgStatement {
                    sql: (*one).to_owned(),
                    params,
                    described: Arc::new(Mutex::new(None)),
                }))
            }
            _ => Err(user_error(
                "42601",
                "cannot insert multiple commands into a prepared statement".to_owned(),
            )),
        }
    }

    fn get_parameter_types(&self, stmt: &PgStatement) -> PgWireResult<Vec<Type>> {
        Ok(vec![Type::UNKNOWN; stmt.params])
    }

    fn get_result_schema(
        &self,
        _stmt: &PgStatement,
        _column_format: Option<&Format>,
    ) -> PgWireResult<Vec<pgwire::api::results::FieldInfo>> {
        // Described by PgQuery::do_describe_*, which can reach the database.
        Ok(Vec::new())
    }
}

/// Refuses result format codes a Bind gave one per column when their number is not the
/// statement's column count, and codes other than 0 (text) and 1 (binary), with PostgreSQL's
/// messages (08P01, 22023): pgwire would index past the codes (a panic that drops the
/// connection) or read an unknown code as text.
fn check_result_formats(format: &Format, columns: usize) -> PgWireResult<()> {
    let Format::Individual(codes) = format else {
        return Ok(());
    };
    if let Some(bad) = codes.iter().find(|&&c| c != 0 && c != 1) {
        return Err(user_error(
            "22023",
            format!("unsupported format code: {bad}"),
        ));
    }
    if codes.len() != columns {
        return Err(user_error(
            "08P01",
            format!(
                "bind message has {} result formats but query has {columns} columns",
                codes.len()
            ),
        ));
    }
    Ok(())
}

fn user_error(code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".to_owned(),
        code.to_owned(),
        message,
    )))
}

fn sql_error(e: &SqlError) -> PgWireError {
    e.log_corruption();
    user_error(e.sqlstate(), e.to_string())
}

/// Query handling for one connection.
struct PgQuery {
    shared: Arc<Shared>,
    /// The connection's database, opened on the first statement.
    database: Mutex<Option<Arc<Database>>>,
    parser: Arc<PgParser>,
    activity: Arc<Activity>,
    /// The interrupt of the statement running now, if any (what a cancel request sets).
    running: Arc<Mutex<Option<Interrupt>>>,
    /// The connection's backend key once registered in [`CancelTargets`] (at its first
    /// statement: pgwire sets it during startup).
    backend_key: Mutex<Option<BackendKey>>,
    /// The connection's `statement_timeout` (`None`: no limit, the default), which the
    /// startup `options` may set.
    statement_timeout: Arc<Mutex<Option<Duration>>>,
    /// Names of the named statements parsed since the last `DEALLOCATE ALL` (which cannot
    /// empty pgwire's store, see [`PgQuery::response_in`]): a statement is "prepared" while it is in
    /// the store and here, and only then does a Parse under its name fail with 42P05. Pruned
    /// to the store's names when it grows past [`NAMED_STATEMENTS_PRUNE`].
    named_statements: Mutex<HashSet<String>>,
    /// The connection's transaction state: read-only mode, writes since `BEGIN`.
    transaction: Mutex<Transaction>,
    /// Warnings for the client, sent (as NoticeResponse) before the reply of the statement
    /// that raised them.
    notices: Mutex<Vec<ErrorInfo>>,
}

/// A connection's transaction state. Statements still commit one at a time; this is what
/// `BEGIN`/`COMMIT` scope: the read-only mode (honoured: writes are refused with 25006) and
/// whether a `ROLLBACK` has anything it cannot undo (it warns).
#[derive(Debug, Default)]
struct Transaction {
    /// `default_transaction_read_only`.
    default_read_only: bool,
    /// Between `BEGIN` and `COMMIT`/`ROLLBACK`: the transaction's read-only mode.
    open: Option<bool>,
    /// Statements that changed data since `BEGIN`.
    writes: usize,
    /// A statement failed since `BEGIN` (or the last `ROLLBACK TO`): every statement but
    /// `COMMIT` and `ROLLBACK` is refused with 25P02 until the block ends.
    aborted: bool,
    /// The block's savepoints, oldest first (names may repeat; the newest counts).
    savepoints: Vec<String>,
}

impl Transaction {
    /// Follows a savepoint statement as PostgreSQL does (nothing is undone here): `SAVEPOINT`
    /// adds one, `RELEASE` drops the newest of that name and those after it, `ROLLBACK TO`
    /// drops those after it.
    ///
    /// # Errors
    /// [`SqlError::NoTransactionBlock`] outside a block, [`SqlError::NoSuchSavepoint`] for a
    /// name the block does not have.
    fn savepoint(&mut self, op: sql::text::SavepointOp) -> Result<(), SqlError> {
        use sql::text::SavepointOp;
        let command = match &op {
            SavepointOp::Define(_) => "SAVEPOINT",
            SavepointOp::Release(_) => "RELEASE SAVEPOINT",
            SavepointOp::RollbackTo(_) => "ROLLBACK TO SAVEPOINT",
        };
        if self.open.is_none() {
            return Err(SqlError::NoTransactionBlock(command));
        }
        let find = |savepoints: &[String], name: &str| {
            savepoints
                .iter()
                .rposition(|s| s == name)
                .ok_or_else(|| SqlError::NoSuchSavepoint(name.to_owned()))
        };
        match op {
            SavepointOp::Define(name) => self.savepoints.push(name),
            SavepointOp::Release(name) => {
                let at = find(&self.savepoints, &name)?;
                self.savepoints.truncate(at);
            }
            SavepointOp::RollbackTo(name) => {
                let at = find(&self.savepoints, &name)?;
                self.savepoints.truncate(at + 1);
            }
        }
        Ok(())
    }
}

impl Transaction {
    fn read_only(&self) -> bool {
        self.open.unwrap_or(self.default_read_only)
    }
}

fn warning(code: &str, message: String) -> ErrorInfo {
    ErrorInfo::new("WARNING".to_owned(), code.to_owned(), message)
}

/// Size of [`PgQuery::named_statements`] at which names no longer in the store (closed or
/// deallocated one by one) are dropped from it.
const NAMED_STATEMENTS_PRUNE: usize = 1024;

impl Drop for PgQuery {
    fn drop(&mut self) {
        if let Some(key) = self.backend_key.lock().take() {
            self.shared.running_sql.unregister(&key);
        }
    }
}

/// A connection's backend key data: process id and secret key (as bytes, so a 4-byte key
/// sent by a client of another protocol version compares equal).
type BackendKey = (i32, bytes::Bytes);

/// Where cancel requests find the statement to stop: each PostgreSQL connection's running
/// statement by its backend key (PostgreSQL's process id and secret key, which the client got
/// at startup and sends back, on a new connection, to cancel).
#[derive(Debug, Default)]
pub(crate) struct CancelTargets {
    running: Mutex<HashMap<BackendKey, Arc<Mutex<Option<Interrupt>>>>>,
    /// Statements no cancel request can reach (RESP's `SQL`), for [`CancelTargets::cancel_all`].
    others: Mutex<HashMap<u64, Interrupt>>,
    next_other: std::sync::atomic::AtomicU64,
}

/// Keeps a statement in [`CancelTargets`] until dropped.
pub(crate) struct RegisteredStatement<'a> {
    targets: &'a CancelTargets,
    id: u64,
}

impl Drop for RegisteredStatement<'_> {
    fn drop(&mut self) {
        self.targets.others.lock().remove(&self.id);
    }
}

impl CancelTargets {
    fn register(&self, key: BackendKey, running: Arc<Mutex<Option<Interrupt>>>) {
        self.running.lock().insert(key, running);
    }

    fn unregister(&self, key: &BackendKey) {
        self.running.lock().remove(key);
    }

    /// Registers a statement that only [`CancelTargets::cancel_all`] stops, while the
    /// returned guard lives.
    pub(crate) fn register_statement(&self, interrupt: &Interrupt) -> RegisteredStatement<'_> {
        let id = self.next_other.fetch_add(1, Ordering::Relaxed);
        self.others.lock().insert(id, interrupt.clone());
        RegisteredStatement { targets: self, id }
    }

    /// Interrupts every running statement (shutdown, once the grace period is over); returns
    /// how many there were.
    pub(crate) fn cancel_all(&self) -> usize {
        let running: Vec<_> = self.running.lock().values().cloned().collect();
        let pg = running
            .iter()
            .filter_map(|r| r.lock().as_ref().map(Interrupt::interrupt))
            .count();
        let others = self.others.lock();
        others.values().for_each(Interrupt::interrupt);
        pg + others.len()
    }

    /// Interrupts the statement the connection with `key` runs, if any; false when no
    /// connection has that key.
    fn cancel(&self, key: &BackendKey) -> bool {
        let Some(running) = self.running.lock().get(key).cloned() else {
            return false;
        };
        if let Some(interrupt) = running.lock().as_ref() {
            interrupt.interrupt();
        }
        true
    }
}

/// Answers cancel requests (each on a connection of its own, closed right after, with no
/// reply, as in PostgreSQL).
struct PgCancel {
    shared: Arc<Shared>,
}

#[async_trait]
impl CancelHandler for PgCancel {
    async fn on_cancel_request(&self, request: CancelRequest) {
        let key = (request.pid, request.secret_key.to_bytes());
        let found = self.shared.running_sql.cancel(&key);
        tracing::debug!(pid = request.pid, found, "PostgreSQL cancel request");
    }
}

impl PgQuery {
    /// The connection's database (named by the startup message), opening it on first use.
    async fn database<C: ClientInfo>(&self, client: &C) -> PgWireResult<Arc<Database>> {
        if let Some(db) = self.database.lock().as_ref() {
            return Ok(Arc::clone(db));
        }
        let meta = client.metadata();
        let name = database_name(meta.get(METADATA_DATABASE), meta.get(METADATA_USER)).to_owned();
        let shared = Arc::clone(&self.shared);
        let db = self
            .shared
            .blocking(move || shared.databases.get_or_open(&name))
            .await
            .map_err(|e| user_error("XX000", format!("opening the database failed: {e}")))?
            .map_err(|e| sql_error(&SqlError::Server(e)))?;
        *self.database.lock() = Some(Arc::clone(&db));
        Ok(db)
    }

    /// Called by the connection loop before each message while pgwire's transaction status
    /// is failed (`E`, set by any error answered inside a block: a statement's, a failed
    /// Parse, Bind or Describe, text that is not UTF-8): fails the block here too, as
    /// PostgreSQL does, so its statements get 25P02. The one place the failure is recorded.
    fn message_failed(&self) {
        let mut tx = self.transaction.lock();
        if tx.open.is_some() {
            tx.aborted = true;
        }
    }

    /// True when `query` (a simple Query message's text) starts with `ROLLBACK TO` (or ends
    /// the block `AND CHAIN`) in a failed block: a block goes on after it. pgwire keeps a
    /// failed status to the end of the query it is answering, so the connection loop sets its
    /// status back to in-transaction before pgwire answers, and ReadyForQuery says `T`, as
    /// PostgreSQL's does (psql's `ON_ERROR_ROLLBACK` and drivers' nested transaction blocks
    /// read it).
    fn resumes_failed_block(&self, query: &str) -> bool {
        self.transaction.lock().aborted
            && sql::text::split_statements(query)
                .first()
                .is_some_and(|stmt| sql::text::is_rollback_to(stmt) || sql::text::chains(stmt))
    }

    /// Runs one statement of the connection as [`PgQuery::run_open_statement`] does, except
    /// in a transaction block a statement failed in: there, as in PostgreSQL, `COMMIT` (or
    /// `END`) ends the block answering `ROLLBACK`, `ROLLBACK` runs, and every other
    /// statement is refused with [`SqlError::TransactionAborted`] (25P02) and not run. (The
    /// block is marked failed from pgwire's status before the next message,
    /// [`PgQuery::message_failed`]; after an error no statement of the same message runs.)
    /// `COMMIT AND CHAIN` and `ROLLBACK AND CHAIN` outside a block are
    /// [`SqlError::NoTransactionBlock`] (25P01), as in PostgreSQL.
    async fn run_statement<C: ClientInfo>(
        &self,
        client: &C,
        stmt: String,
    ) -> PgWireResult<Result<Outcome, SqlError>> {
        if sql::text::chains(&stmt) && self.transaction.lock().open.is_none() {
            let command = match sql::text::leading_words(&stmt, 1)
                .first()
                .map(String::as_str)
            {
                Some("COMMIT" | "END") => "COMMIT AND CHAIN",
                _ => "ROLLBACK AND CHAIN",
            };
            return Ok(Err(SqlError::NoTransactionBlock(command)));
        }
        if self.transaction.lock().aborted {
            let words = sql::text::leading_words(&stmt, 1);
            match words.first().map_or("", String::as_str) {
                "COMMIT" | "END" => {
                    let outcome = Ok(Outcome::Rollback {
                        chain: sql::text::chains(&stmt),
                    });
                    self.after_statement(&outcome);
                    return Ok(outcome);
                }
                "ROLLBACK" | "ABORT" => {}
                _ => return Ok(Err(SqlError::TransactionAborted)),
            }
        }
        let savepoint = sql::text::savepoint_op(&stmt).map(|op| {
            op.map_err(SqlError::Syntax)
                .and_then(|op| self.transaction.lock().savepoint(op))
        });
        Ok(match savepoint {
            Some(Err(e)) => Err(e),
            _ => self.run_open_statement(client, stmt).await?,
        })
    }

    /// Runs one statement of the connection: the connection's own `statement_timeout`
    /// statements here ([`sql::timeout`]), every other one with [`sql::run`], stopped by a
    /// cancel request or when it runs past the timeout.
    async fn run_open_statement<C: ClientInfo>(
        &self,
        client: &C,
        stmt: String,
    ) -> PgWireResult<Result<Outcome, SqlError>> {
        if self.shared.stopping.load(Ordering::Acquire) {
            // Shutting down: the running statement finishes, no new one starts.
            return Ok(Err(SqlError::Server(ServerError::ShuttingDown)));
        }
        if let Some(change) = sql::read_only::change(&stmt) {
            let change = match change {
                Ok(change) => change,
                Err(e) => return Ok(Err(e)),
            };
            let mut tx = self.transaction.lock();
            match change {
                ReadOnlyChange::Begin(mode) => {
                    tx.open = Some(mode.unwrap_or(tx.default_read_only));
                    tx.writes = 0;
                    tx.aborted = false;
                    tx.savepoints.clear();
                    return Ok(Ok(Outcome::Begin));
                }
                ReadOnlyChange::Transaction(read_only) => {
                    if tx.open.is_some() {
                        tx.open = Some(read_only);
                    } else {
                        self.notices.lock().push(warning(
                            "25P01",
                            "SET TRANSACTION can only be used in transaction blocks".to_owned(),
                        ));
                    }
                    return Ok(Ok(Outcome::Command("SET".to_owned())));
                }
                ReadOnlyChange::Default(read_only) => {
                    tx.default_read_only = read_only;
                    // RESET ALL and DISCARD ALL reset the rest below.
                    if sql::text::leading_words(&stmt, 1)
                        .first()
                        .is_some_and(|w| w == "SET")
                    {
                        return Ok(Ok(Outcome::Command("SET".to_owned())));
                    }
                }
            }
        }
        match sql::text::leading_words(&stmt, 3).as_slice() {
            [show, name] if show == "SHOW" && name == "TRANSACTION_READ_ONLY" => {
                let on = self.transaction.lock().read_only();
                return Ok(Ok(sql::text_row(
                    "transaction_read_only",
                    if on { "on" } else { "off" }.to_owned(),
                )));
            }
            [show, name] if show == "SHOW" && name == "DEFAULT_TRANSACTION_READ_ONLY" => {
                let on = self.transaction.lock().default_read_only;
                return Ok(Ok(sql::text_row(
                    "default_transaction_read_only",
                    if on { "on" } else { "off" }.to_owned(),
                )));
            }
            _ => {}
        }
        if let Some(change) = sql::timeout::change(&stmt) {
            match change {
                Ok(limit) => *self.statement_timeout.lock() = limit,
                Err(e) => return Ok(Err(e)),
            }
            if sql::text::leading_words(&stmt, 1)
                .first()
                .is_some_and(|w| w == "SET")
            {
                return Ok(Ok(Outcome::Command("SET".to_owned())));
            }
            // RESET and DISCARD ALL: `sql::run` answers them as usual.
        }
        if sql::timeout::is_show(&stmt) {
            let limit = *self.statement_timeout.lock();
            return Ok(Ok(sql::text_row(
                "statement_timeout",
                sql::timeout::show(limit),
            )));
        }
        let limit = *self.statement_timeout.lock();
        let timed_out = Arc::new(AtomicBool::new(false));
        let deadline = limit.map(|limit| (limit, Arc::clone(&timed_out)));
        let read_only = self.transaction.lock().read_only();
        let result = self.run_sql(client, deadline, stmt, read_only).await?;
        self.after_statement(&result);
        Ok(match result {
            Err(SqlError::Query(QueryError::Interrupted)) if timed_out.load(Ordering::Acquire) => {
                Err(SqlError::StatementTimeout)
            }
            // Stopped by the shutdown (`CancelTargets::cancel_all`): 57P01, as PostgreSQL's
            // fast shutdown answers.
            Err(SqlError::Query(QueryError::Interrupted))
                if self.shared.stopping.load(Ordering::Acquire) =>
            {
                Err(SqlError::Server(ServerError::ShuttingDown))
            }
            other => other,
        })
    }

    /// Keeps the transaction state up to date after a statement ran: `COMMIT` and `ROLLBACK`
    /// end the transaction (a `ROLLBACK` after writes warns that they stay: statements commit
    /// one at a time; with `AND CHAIN` a new one starts in the same read-only mode),
    /// `ROLLBACK TO` ends its failed state; a statement that changed data is counted.
    fn after_statement(&self, result: &Result<Outcome, SqlError>) {
        let mut tx = self.transaction.lock();
        match result {
            Ok(Outcome::Commit { chain }) => {
                if !chain {
                    tx.open = None;
                }
                tx.writes = 0;
                tx.aborted = false;
                tx.savepoints.clear();
            }
            Ok(Outcome::Rollback { chain }) => {
                if tx.writes > 0 {
                    self.notices.lock().push(warning(
                        "01000",
                        format!(
                            "nothing was rolled back: Strata commits each statement when it \
                             completes, and the {} statement(s) that changed data since BEGIN \
                             stay committed",
                            tx.writes
                        ),
                    ));
                }
                if !chain {
                    tx.open = None;
                }
                tx.writes = 0;
                tx.aborted = false;
                tx.savepoints.clear();
            }
            Ok(Outcome::Command(tag)) if tx.open.is_some() => {
                let word = tag.split(' ').next().unwrap_or_default();
                // ROLLBACK TO SAVEPOINT: the block goes on, no longer failed.
                if word == "ROLLBACK" {
                    tx.aborted = false;
                }
                if !matches!(
                    word,
                    "SET"
                        | "RESET"
                        | "DISCARD"
                        | "SAVEPOINT"
                        | "RELEASE"
                        | "ROLLBACK"
                        | "DEALLOCATE"
                ) {
                    tx.writes += 1;
                }
            }
            _ => {}
        }
    }

    /// Sends the warnings statements raised (NoticeResponse), before their replies.
    async fn send_notices<C>(&self, client: &mut C) -> PgWireResult<()>
    where
        C: Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let notices = std::mem::take(&mut *self.notices.lock());
        for notice in notices {
            client
                .send(PgWireBackendMessage::NoticeResponse(notice.into()))
                .await?;
        }
        Ok(())
    }

    /// Runs `f` with the database on the blocking pool, with an [`Interrupt`] that a cancel
    /// request for this connection sets while `f` runs, and so does the end of `deadline`
    /// (its limit), which then also sets its flag.
    async fn interruptible<C, T, F>(
        &self,
        client: &C,
        deadline: Option<(Duration, Arc<AtomicBool>)>,
        f: F,
    ) -> PgWireResult<T>
    where
        C: ClientInfo,
        F: FnOnce(&Database, &Interrupt) -> T + Send + 'static,
        T: Send + 'static,
    {
        {
            let mut key = self.backend_key.lock();
            if key.is_none() {
                let (pid, secret) = client.pid_and_secret_key();
                let k = (pid, secret.to_bytes());
                self.shared
                    .running_sql
                    .register(k.clone(), Arc::clone(&self.running));
                *key = Some(k);
            }
        }
        // A cancel request that arrives before this point finds no running statement and does
        // nothing, as in PostgreSQL.
        let interrupt = Interrupt::new();
        *self.running.lock() = Some(interrupt.clone());
        let timer = deadline.map(|(limit, timed_out)| {
            let interrupt = interrupt.clone();
            tokio::spawn(async move {
                tokio::time::sleep(limit).await;
                timed_out.store(true, Ordering::Release);
                interrupt.interrupt();
            })
        });
        let result = self.blocking(client, move |db| f(db, &interrupt)).await;
        if let Some(timer) = timer {
            timer.abort();
        }
        *self.running.lock() = None;
        result
    }

    /// Runs SQL statement `stmt` with [`sql::run_in`]: on the connection's own task when
    /// the SQL layer is loaded, the text is short ([`sql::QUICK_TEXT_BYTES`]) and the
    /// statement is quick ([`sql::Ready::is_quick`]: a SELECT of a few rows by key, which
    /// neither waits on a lock nor scans), else on the blocking pool, interruptible as
    /// [`PgQuery::interruptible`] says. A point lookup then
    /// costs no hand-off between threads (docs/server.md, "Quick statements").
    async fn run_sql<C: ClientInfo>(
        &self,
        client: &C,
        deadline: Option<(Duration, Arc<AtomicBool>)>,
        stmt: String,
        read_only: bool,
    ) -> PgWireResult<Result<Outcome, SqlError>> {
        let db = self.database(client).await?;
        if !db.sql_loaded() || stmt.len() > sql::QUICK_TEXT_BYTES {
            return self
                .interruptible(client, deadline, move |db, interrupt| {
                    sql::run_in(db, &stmt, interrupt, read_only)
                })
                .await;
        }
        let ready = inline(|| {
            let _engine = self.activity.enter();
            match sql::prepare(&db, &stmt, read_only) {
                Err(e) => Ok(Err(e)),
                Ok(sql::Prepared::Answered(outcome)) => Ok(Ok(outcome)),
                Ok(sql::Prepared::Ready(ready)) if ready.is_quick() => {
                    Ok(ready.run(&db, &Interrupt::new()))
                }
                Ok(sql::Prepared::Ready(ready)) => Err(ready),
            }
        })?;
        let ready = match ready {
            Ok(result) => return Ok(result),
            Err(ready) => ready,
        };
        self.interruptible(client, deadline, move |db, interrupt| {
            ready.run(db, interrupt)
        })
        .await
    }

    /// Runs `f` with the database, for work that reads no table data (describing a
    /// statement of `text_len` bytes: translating and planning it): on the connection's own
    /// task once the SQL layer is loaded and the text is short ([`sql::QUICK_TEXT_BYTES`]),
    /// else on the blocking pool as [`PgQuery::blocking`].
    async fn planning<C, T, F>(&self, client: &C, text_len: usize, f: F) -> PgWireResult<T>
    where
        C: ClientInfo,
        F: FnOnce(&Database) -> T + Send + 'static,
        T: Send + 'static,
    {
        let db = self.database(client).await?;
        if db.sql_loaded() && text_len <= sql::QUICK_TEXT_BYTES {
            let _engine = self.activity.enter();
            return inline(|| f(&db));
        }
        self.blocking(client, f).await
    }

    /// Runs `f` with the database on the blocking pool.
    async fn blocking<C, T, F>(&self, client: &C, f: F) -> PgWireResult<T>
    where
        C: ClientInfo,
        F: FnOnce(&Database) -> T + Send + 'static,
        T: Send + 'static,
    {
        let _engine = self.activity.enter();
        let db = self.database(client).await?;
        self.shared
            .blocking(move || f(&db))
            .await
            .map_err(|e| user_error("XX000", format!("statement failed: {e}")))
    }
}

/// Runs `f` on the connection's own task. A panic in it (a bug) is answered as the blocking
/// pool answers one, with an XX000 error, and the connection goes on.
fn inline<T>(f: impl FnOnce() -> T) -> PgWireResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|_| {
        tracing::error!("command panicked");
        user_error("XX000", "statement failed: it panicked".to_owned())
    })
}

/// A result set as a pgwire response. At the end of the shutdown's grace period its rows
/// stop, at a message boundary, with FATAL 57P01 ([`Activity::result_cut`]).
fn rows_response(
    columns: &[Column],
    rows: Vec<Vec<strata_query::Value>>,
    format: &Format,
    activity: &Arc<Activity>,
) -> Response {
    let schema = Arc::new(values::fields(columns, format));
    let mut encoder = DataRowEncoder::new(Arc::clone(&schema));
    let columns = columns.to_vec();
    let activity = Arc::clone(activity);
    // Encoded as pgwire sends them, each row freed once encoded: the result is never held
    // twice (as values and as DataRows) at once.
    let encoded = rows.into_iter().map(move |row| {
        activity.result_cut()?;
        values::encode_row(&mut encoder, &row, &columns)
    });
    Response::Query(QueryResponse::new(schema, stream::iter(encoded)))
}

fn response(outcome: Outcome, format: &Format, activity: &Arc<Activity>) -> Response {
    match outcome {
        Outcome::Rows { columns, rows } => rows_response(&columns, rows, format, activity),
        Outcome::Command(tag) => Response::Execution(Tag::new(&tag)),
        Outcome::Begin => Response::TransactionStart(Tag::new("BEGIN")),
        // `AND CHAIN`: the tag of the end, and a block open again.
        Outcome::Commit { chain: true } => Response::TransactionStart(Tag::new("COMMIT")),
        Outcome::Rollback { chain: true } => Response::TransactionStart(Tag::new("ROLLBACK")),
        Outcome::Commit { chain: false } => Response::TransactionEnd(Tag::new("COMMIT")),
        Outcome::Rollback { chain: false } => Response::TransactionEnd(Tag::new("ROLLBACK")),
        Outcome::Empty => Response::EmptyQuery,
        // Without the connection's statements at hand (see `deallocate`).
        Outcome::Deallocate(Some(_)) => Response::Execution(Tag::new("DEALLOCATE")),
        Outcome::Deallocate(None) => Response::Execution(Tag::new("DEALLOCATE ALL")),
    }
}

impl PgQuery {
    /// `response` for a statement of this connection, whose prepared statements are `store`:
    /// `DEALLOCATE name` removes the statement (SQLSTATE 26000 if there is none, as in
    /// PostgreSQL). `DEALLOCATE ALL` cannot empty the store (pgwire's store cannot list its
    /// statements): it forgets the names in [`PgQuery::named_statements`], so each
    /// statement stays in the store until the client prepares another under its name
    /// (psycopg reuses its names after `DEALLOCATE ALL`), which then replaces it, or the
    /// connection closes.
    fn response_in<S: PortalStore>(
        &self,
        store: &S,
        outcome: Outcome,
        format: &Format,
    ) -> Response {
        match outcome {
            Outcome::Deallocate(Some(name)) => {
                if store.get_statement(&name).is_none() {
                    return Response::Error(Box::new(ErrorInfo::new(
                        "ERROR".to_owned(),
                        "26000".to_owned(),
                        format!("prepared statement \"{name}\" does not exist"),
                    )));
                }
                store.rm_statement(&name);
                self.named_statements.lock().remove(&name);
                Response::Execution(Tag::new("DEALLOCATE"))
            }
            Outcome::Deallocate(None) => {
                self.named_statements.lock().clear();
                response(Outcome::Deallocate(None), format, &self.activity)
            }
            other => response(other, format, &self.activity),
        }
    }
}

#[async_trait]
impl SimpleQueryHandler for PgQuery {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let error = |e: SqlError| {
            e.log_corruption();
            Response::Error(Box::new(ErrorInfo::new(
                "ERROR".to_owned(),
                e.sqlstate().to_owned(),
                e.to_string(),
            )))
        };
        // Text pgwire decoded lossily runs no statement; its error is answered as any other.
        if let Err(e) = sql::check_statement_text(query) {
            return Ok(vec![error(e)]);
        }
        let mut responses = Vec::new();
        for stmt in sql::text::split_statements(query) {
            let result = self.run_statement(client, stmt.to_owned()).await?;
            self.send_notices(client).await?;
            // Answered in order: a statement that fails here (a DEALLOCATE of no statement)
            // stops the rest as one that failed to run does.
            let response = match result {
                Ok(o) => self.response_in(client.portal_store(), o, &Format::UnifiedText),
                Err(e) => error(e),
            };
            let failed = matches!(response, Response::Error(_));
            responses.push(response);
            if failed {
                break;
            }
        }
        Ok(responses)
    }
}

/// The statement with every parameter replaced by a stand-in of its declared type
/// ([`values::placeholder_literal`]), for describing before Bind.
fn with_placeholder_params(stmt: &PgStatement, types: &[Type]) -> Result<String, SqlError> {
    let literals: Vec<String> = (0..stmt.params)
        .map(|i| values::placeholder_literal(types.get(i)).to_owned())
        .collect();
    sql::text::substitute_params(&stmt.sql, &literals).map_err(SqlError::Params)
}

/// A Bind must supply exactly the parameters the statement has (PostgreSQL's rule): a
/// missing one would silently become NULL.
fn check_bind_count(portal: &Portal<PgStatement>) -> Result<(), String> {
    let (given, wanted) = (portal.parameter_len(), portal.statement.statement.params);
    if given == wanted {
        Ok(())
    } else {
        Err(format!(
            "bind message supplies {given} parameters, but prepared statement \"{}\" requires \
             {wanted}",
            portal.statement.id
        ))
    }
}

/// The statement with the bound parameters of `portal` (a parameter that does not decode
/// stands in as NULL here; Execute reports it).
fn with_bound_params(portal: &Portal<PgStatement>) -> Result<String, SqlError> {
    let stmt = &portal.statement.statement;
    check_bind_count(portal).map_err(SqlError::Params)?;
    let literals: Vec<String> = (0..stmt.params)
        .map(|i| values::param_literal(portal, i).unwrap_or_else(|_| "NULL".to_owned()))
        .collect();
    sql::text::substitute_params(&stmt.sql, &literals).map_err(SqlError::Params)
}

#[async_trait]
impl ExtendedQueryHandler for PgQuery {
    type Statement = PgStatement;
    type QueryParser = PgParser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        Arc::clone(&self.parser)
    }

    /// Parse, as pgwire's default does, except that a named statement that already exists
    /// is refused with 42P05, as PostgreSQL refuses it (pgwire replaced it silently); the
    /// unnamed statement is replaced, as in PostgreSQL.
    async fn on_parse<C>(&self, client: &mut C, message: Parse) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message
            .name
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| DEFAULT_NAME.to_owned());
        let named = name != DEFAULT_NAME;
        if named
            && self.named_statements.lock().contains(&name)
            && client.portal_store().get_statement(&name).is_some()
        {
            return Err(user_error(
                "42P05",
                format!("prepared statement \"{name}\" already exists"),
            ));
        }
        match StoredStatement::parse(client, &message, self.query_parser()).await? {
            Some(stmt) => client.portal_store().put_statement(Arc::new(stmt)),
            None => client.portal_store().put_empty_statement(&name),
        }
        if named {
            let mut live = self.named_statements.lock();
            if live.len() >= NAMED_STATEMENTS_PRUNE {
                let store = client.portal_store();
                live.retain(|n| store.get_statement(n).is_some());
            }
            live.insert(name);
        }
        client
            .send(PgWireBackendMessage::ParseComplete(ParseComplete::new()))
            .await?;
        Ok(())
    }

    /// Bind, as pgwire's default does, except that a format code other than 0 (text) and 1
    /// (binary) is refused with 22023, as in PostgreSQL (pgwire read any other code as binary
    /// when it was the only one).
    async fn on_bind<C>(&self, client: &mut C, message: Bind) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if let Some(bad) = message
            .parameter_format_codes
            .iter()
            .chain(&message.result_column_format_codes)
            .find(|&&c| c != 0 && c != 1)
        {
            return Err(user_error(
                "22023",
                format!("unsupported format code: {bad}"),
            ));
        }
        let statement_name = message.statement_name.as_deref().unwrap_or(DEFAULT_NAME);
        let portal_name = message.portal_name.as_deref().unwrap_or(DEFAULT_NAME);
        match client.portal_store().get_statement(statement_name) {
            Some(Entry::Value(statement)) => {
                let portal = Portal::try_new(&message, statement)?;
                client.portal_store().put_portal(Arc::new(portal));
            }
            Some(Entry::Empty) => {
                if !message.parameters.is_empty() {
                    return Err(user_error(
                        "08P01",
                        format!(
                            "bind message supplies {} parameters, but prepared statement \
                             \"{statement_name}\" requires 0",
                            message.parameters.len()
                        ),
                    ));
                }
                client.portal_store().put_empty_portal(portal_name);
            }
            None => return Err(PgWireError::StatementNotFound(statement_name.to_owned())),
        }
        client
            .send(PgWireBackendMessage::BindComplete(BindComplete::new()))
            .await?;
        Ok(())
    }

    /// Describe, as pgwire's default does, except that a statement with parameters that
    /// returns no rows (an INSERT) is answered NoData after its ParameterDescription, as in
    /// PostgreSQL (pgwire sent an empty RowDescription).
    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if message.target_type == b'S' {
            let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
            if let Some(Entry::Value(stmt)) = client.portal_store().get_statement(name) {
                let described = self.do_describe_statement(client, &stmt).await?;
                if !described.fields.is_empty() {
                    return send_describe_response(client, &described).await;
                }
                client
                    .send(PgWireBackendMessage::ParameterDescription(
                        ParameterDescription::new(
                            described.parameters.iter().map(Type::oid).collect(),
                        ),
                    ))
                    .await?;
                client
                    .send(PgWireBackendMessage::NoData(NoData::new()))
                    .await?;
                return Ok(());
            }
        }
        self._on_describe(client, message).await
    }

    async fn do_describe_statement<C>(
        &self,
        client: &mut C,
        target: &StoredStatement<PgStatement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let n = target.statement.params.max(target.parameter_types.len());
        let params: Vec<Type> = (0..n)
            .map(|i| {
                target
                    .parameter_types
                    .get(i)
                    .cloned()
                    .flatten()
                    .unwrap_or(Type::UNKNOWN)
            })
            .collect();
        let stmt = target.statement.clone();
        let types = params.clone();
        let columns = self
            .planning(client, stmt.sql.len(), move |db| {
                let sql = with_placeholder_params(&stmt, &types)?;
                sql::describe(db, &sql)
            })
            .await?
            .map_err(|e| sql_error(&e))?;
        target.statement.remember_columns(columns.as_deref());
        let fields = columns
            .map(|c| values::fields(&c, &Format::UnifiedText))
            .unwrap_or_default();
        Ok(DescribeStatementResponse::new(params, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        client: &mut C,
        portal: &Portal<PgStatement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let sql = with_bound_params(portal).map_err(|e| sql_error(&e))?;
        let columns = self
            .planning(client, sql.len(), move |db| sql::describe(db, &sql))
            .await?
            .map_err(|e| sql_error(&e))?;
        portal
            .statement
            .statement
            .remember_columns(columns.as_deref());
        let columns = columns.unwrap_or_default();
        check_result_formats(&portal.result_column_format, columns.len())?;
        Ok(DescribePortalResponse::new(values::fields(
            &columns,
            &portal.result_column_format,
        )))
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<PgStatement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let stmt = &portal.statement.statement;
        check_bind_count(portal).map_err(|m| user_error("08P01", m))?;
        let literals = (0..stmt.params)
            .map(|i| values::param_literal(portal, i))
            .collect::<Result<Vec<String>, values::ParamError>>()
            .map_err(|e| user_error(e.code, e.message))?;
        let sql = sql::text::substitute_params(&stmt.sql, &literals)
            .map_err(|m| user_error("08P01", m))?;
        // Result formats given one per column must match the columns, checked before the
        // statement runs (as PostgreSQL checks them at Bind): pgwire indexes them by column.
        if let Format::Individual(_) = &portal.result_column_format {
            let planned = sql.clone();
            let columns = self
                .planning(client, planned.len(), move |db| sql::describe(db, &planned))
                .await?
                .map_err(|e| sql_error(&e))?;
            if let Some(columns) = &columns {
                stmt.check_columns(columns)?;
            }
            check_result_formats(&portal.result_column_format, columns.map_or(0, |c| c.len()))?;
        }
        let outcome = self.run_statement(client, sql).await?;
        self.send_notices(client).await?;
        let outcome = stmt.fit_rows(outcome.map_err(|e| sql_error(&e))?)?;
        Ok(self.response_in(client.portal_store(), outcome, &portal.result_column_format))
    }
}
