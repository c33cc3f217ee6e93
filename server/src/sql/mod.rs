//! Running SQL for both front ends (the RESP `SQL` command and the PostgreSQL protocol):
//! one statement at a time, with typed result columns, the session statements PostgreSQL
//! clients send (`BEGIN`, `SET`, `SHOW`, `SELECT version()`), and the SQLSTATE of each error.
//!
//! Statements run through `strata-query` against the database's engine instance; every
//! statement is atomic on its own. `BEGIN`/`COMMIT`/`ROLLBACK` are accepted so that clients
//! which wrap work in transactions (psycopg2, pandas) run, but they group nothing: each
//! statement commits when it completes, and `ROLLBACK` undoes nothing (a warning says so).

pub mod read_only;
pub mod text;
pub mod timeout;
pub mod types;

use std::fmt;

use strata_query::{DataType, Interrupt, Output, QueryError, Value};

use crate::databases::Database;
use crate::error::ServerError;

/// A result column: its name and type (`None`: unknown, sent as text).
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The column name.
    pub name: String,
    /// The type, when known.
    pub ty: Option<DataType>,
}

/// The outcome of one statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A result set.
    Rows {
        /// Columns, typed.
        columns: Vec<Column>,
        /// Rows, one value per column.
        rows: Vec<Vec<Value>>,
    },
    /// A command that returns no rows; the PostgreSQL command tag (`INSERT 0 3`).
    Command(String),
    /// `BEGIN` (accepted; statements still commit one by one).
    Begin,
    /// `COMMIT`; with `chain` (`COMMIT AND CHAIN`) a new transaction block starts at once,
    /// with the same characteristics.
    Commit {
        /// `AND CHAIN` was given.
        chain: bool,
    },
    /// `ROLLBACK` (undoes nothing); `chain` as for [`Outcome::Commit`].
    Rollback {
        /// `AND CHAIN` was given.
        chain: bool,
    },
    /// Nothing to run (only comments).
    Empty,
    /// `DEALLOCATE [PREPARE] name` (`Some`, the name as PostgreSQL folds it) or `DEALLOCATE
    /// [PREPARE] ALL` (`None`): the connection's prepared statements are its own, so the
    /// protocol layer applies it.
    Deallocate(Option<String>),
}

/// Why a statement failed.
#[derive(Debug)]
pub enum SqlError {
    /// The SQL layer refused or failed the statement.
    Query(QueryError),
    /// A query on PostgreSQL's system catalogs.
    Catalog,
    /// `SHOW` of a setting we do not have.
    UnknownSetting(String),
    /// Parameters that do not fit the statement.
    Params(String),
    /// `SET` of a setting we have, to a value it cannot take.
    InvalidSetting(String),
    /// The database could not be opened.
    Server(ServerError),
    /// The statement ran past the connection's `statement_timeout` and was stopped; it
    /// changed nothing.
    StatementTimeout,
    /// Text that is not what the client sent or cannot be read as UTF-8 (SQLSTATE 22021):
    /// see [`check_statement_text`].
    BadEncoding(String),
    /// A statement that writes, in a read-only transaction (25006); the command's name.
    ReadOnlyTransaction(String),
    /// A session feature this front end cannot honour (0A000): the message.
    NotSupported(String),
    /// A statement other than `COMMIT`/`ROLLBACK` after an error in the same transaction
    /// block (25P02): PostgreSQL ignores commands until the block ends.
    TransactionAborted,
    /// `SAVEPOINT`, `RELEASE` or `ROLLBACK TO` outside a transaction block (25P01): the
    /// command's name.
    NoTransactionBlock(&'static str),
    /// `RELEASE` or `ROLLBACK TO` of a savepoint the block does not have (3B001): its name.
    NoSuchSavepoint(String),
    /// A statement this front end reads itself (a savepoint command) that it cannot read
    /// (42601): the message.
    Syntax(String),
}

impl fmt::Display for SqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SqlError::Query(e) => write!(f, "{e}"),
            SqlError::Catalog => f.write_str(
                "PostgreSQL system catalogs (pg_catalog, information_schema) are not \
                 supported; use SHOW TABLES and DESCRIBE <table>",
            ),
            SqlError::UnknownSetting(name) => {
                write!(f, "unrecognized configuration parameter \"{name}\"")
            }
            SqlError::Params(msg)
            | SqlError::InvalidSetting(msg)
            | SqlError::BadEncoding(msg)
            | SqlError::NotSupported(msg)
            | SqlError::Syntax(msg) => f.write_str(msg),
            SqlError::ReadOnlyTransaction(command) => {
                write!(f, "cannot execute {command} in a read-only transaction")
            }
            SqlError::Server(e) => write!(f, "{e}"),
            SqlError::StatementTimeout => f.write_str(
                "canceling statement due to statement timeout; the statement changed nothing",
            ),
            SqlError::TransactionAborted => f.write_str(
                "current transaction is aborted, commands ignored until end of transaction block",
            ),
            SqlError::NoTransactionBlock(command) => {
                write!(f, "{command} can only be used in transaction blocks")
            }
            SqlError::NoSuchSavepoint(name) => write!(f, "savepoint \"{name}\" does not exist"),
        }
    }
}

impl From<QueryError> for SqlError {
    fn from(e: QueryError) -> Self {
        SqlError::Query(e)
    }
}

impl SqlError {
    /// Logs this error at error level when it means damaged data (see
    /// `crate::error::log_corruption`); called where it becomes a reply.
    pub fn log_corruption(&self) {
        match self {
            SqlError::Query(QueryError::Engine(e))
            | SqlError::Server(ServerError::Engine { source: e, .. }) => {
                crate::error::log_corruption(e);
            }
            SqlError::Query(QueryError::Corruption(e)) => {
                tracing::error!(error = %e, "damaged SQL catalog or row met serving a command");
            }
            _ => {}
        }
    }

    /// The PostgreSQL SQLSTATE of this error (the one error → code map).
    pub fn sqlstate(&self) -> &'static str {
        match self {
            SqlError::Query(e) => e.sqlstate(),
            SqlError::Catalog => "0A000",
            SqlError::UnknownSetting(_) => "42704",
            SqlError::Params(_) => "08P01",
            SqlError::InvalidSetting(_) => "22023",
            SqlError::StatementTimeout => "57014",
            SqlError::BadEncoding(_) => "22021",
            SqlError::ReadOnlyTransaction(_) => "25006",
            SqlError::NotSupported(_) => "0A000",
            SqlError::TransactionAborted => "25P02",
            SqlError::NoTransactionBlock(_) => "25P01",
            SqlError::NoSuchSavepoint(_) => "3B001",
            SqlError::Syntax(_) => "42601",
            SqlError::Server(ServerError::BadName(_)) => "3D000",
            SqlError::Server(ServerError::ShuttingDown) => "57P01",
            SqlError::Server(ServerError::TooManyDatabases { .. }) => "53000",
            // A database that cannot be created or recovered on a full disk, or for want of
            // file descriptors: disk_full and insufficient_resources, as a statement's engine
            // errors.
            SqlError::Server(ServerError::Engine { source, .. }) => {
                strata_query::resource_sqlstate(source).unwrap_or("58000")
            }
            SqlError::Server(_) => "58000",
        }
    }
}

/// Refuses statement text holding U+FFFD, the replacement character. pgwire reads the text of
/// a Query or Parse message with `String::from_utf8_lossy`, so bytes that are not UTF-8 (a
/// client sending Latin-1, say) reach us as U+FFFD and would be stored as such: wrong data,
/// silently. PostgreSQL refuses such bytes (`invalid byte sequence for encoding "UTF8"`,
/// 22021); since the two cannot be told apart here, a literal U+FFFD in statement text is
/// refused too, and goes through as a parameter value (parameters arrive as bytes, which
/// are checked as UTF-8 themselves).
///
/// # Errors
/// [`SqlError::BadEncoding`] when `sql` holds U+FFFD.
pub fn check_statement_text(sql: &str) -> Result<(), SqlError> {
    match sql
        .char_indices()
        .find(|&(_, c)| c == char::REPLACEMENT_CHARACTER)
    {
        None => Ok(()),
        Some((at, _)) => Err(SqlError::BadEncoding(format!(
            "invalid byte sequence for encoding \"UTF8\" in the statement text near byte {at}, \
             or a literal U+FFFD there (indistinguishable after decoding): send text that is \
             not UTF-8 converted to UTF-8, and a U+FFFD character as a parameter"
        ))),
    }
}

/// Checks a client encoding a client asks for (the `client_encoding` startup parameter, `SET
/// client_encoding`, `SET NAMES`): the server speaks UTF8 and converts nothing, so only
/// UTF8 (`UTF8`, `UTF-8`, `UNICODE`), `SQL_ASCII` (no conversion: libpq's choice in the C
/// locale) and `DEFAULT` are accepted, in any case.
///
/// # Errors
/// [`SqlError::InvalidSetting`] (22023) for any other encoding.
pub fn check_client_encoding(value: &str) -> Result<(), SqlError> {
    let shown = value.trim().trim_matches(|c| c == '\'' || c == '"');
    let name = shown.to_ascii_uppercase();
    if matches!(
        name.as_str(),
        "UTF8" | "UTF-8" | "UNICODE" | "SQL_ASCII" | "DEFAULT"
    ) {
        return Ok(());
    }
    Err(SqlError::InvalidSetting(format!(
        "client_encoding \"{shown}\" is not supported: Strata speaks UTF8 only and converts \
         nothing (convert on the client, e.g. psql's \\encoding UTF8)"
    )))
}

/// The PostgreSQL version clients are told (they pick features by it).
pub const PG_VERSION: &str = "16.0";

pub(crate) fn text_row(name: &str, value: String) -> Outcome {
    Outcome::Rows {
        columns: vec![Column {
            name: name.to_owned(),
            ty: Some(DataType::Text),
        }],
        rows: vec![vec![Value::Text(value)]],
    }
}

fn setting(name: &str) -> Option<String> {
    let v = match name.to_ascii_lowercase().as_str() {
        "server_version" => PG_VERSION,
        "server_encoding" | "client_encoding" => "UTF8",
        "standard_conforming_strings" | "integer_datetimes" => "on",
        "transaction_isolation" | "default_transaction_isolation" => "read committed",
        "transaction_read_only" | "default_transaction_read_only" => "off",
        "datestyle" => "ISO, MDY",
        "timezone" => "UTC",
        "search_path" => "public",
        "max_identifier_length" => "63",
        "application_name" => "",
        // Over PostgreSQL each connection answers with its own (`timeout`); elsewhere there
        // is none.
        "statement_timeout" => "0",
        _ => return None,
    };
    Some(v.to_owned())
}

/// Answers the session statements PostgreSQL clients send; `None` for everything else.
fn intercept(database: &Database, stmt: &str) -> Option<Result<Outcome, SqlError>> {
    let words = text::leading_words(stmt, 3);
    let first = words.first().map_or("", String::as_str);
    let second = words.get(1).map_or("", String::as_str);
    let outcome = match (first, second) {
        ("BEGIN" | "START", _) => Outcome::Begin,
        ("COMMIT" | "END", _) => Outcome::Commit {
            chain: text::chains(stmt),
        },
        // Savepoints are accepted like transactions (undoing nothing); ROLLBACK TO keeps the
        // transaction open, as in PostgreSQL, so it is not a transaction end.
        ("ROLLBACK", _) if text::is_rollback_to(stmt) => Outcome::Command("ROLLBACK".into()),
        ("ROLLBACK" | "ABORT", _) => Outcome::Rollback {
            chain: text::chains(stmt),
        },
        ("SAVEPOINT", _) => Outcome::Command("SAVEPOINT".into()),
        ("RELEASE", _) => Outcome::Command("RELEASE".into()),
        ("SET", _) => match timeout::parse_set(stmt) {
            // `SET client_encoding TO x`, `SET NAMES x`: the one encoding the server speaks.
            Some(timeout::SetStatement {
                name,
                value: Some(value),
                ..
            }) if name == "client_encoding" || name == "names" => {
                match check_client_encoding(&value) {
                    Ok(()) => Outcome::Command("SET".into()),
                    Err(e) => return Some(Err(e)),
                }
            }
            _ => Outcome::Command("SET".into()),
        },
        ("RESET", _) => Outcome::Command("RESET".into()),
        ("DISCARD", _) => Outcome::Command("DISCARD ALL".into()),
        ("DEALLOCATE", _) => return Some(deallocate(stmt)),
        ("SHOW", "TABLES") => return None,
        ("SHOW", "ALL") => return Some(Err(SqlError::UnknownSetting("all".into()))),
        // PostgreSQL's spelling of `SHOW transaction_isolation` (SQLAlchemy sends it first).
        ("SHOW", "TRANSACTION") if words.get(2).is_some_and(|w| w == "ISOLATION") => {
            text_row("transaction_isolation", "read committed".into())
        }
        ("SHOW", name) => match setting(name) {
            Some(v) => text_row(&name.to_ascii_lowercase(), v),
            None => {
                return Some(Err(SqlError::UnknownSetting(name.to_ascii_lowercase())));
            }
        },
        _ => {
            let normalized: String = stmt
                .to_ascii_lowercase()
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            match session_functions(database, &normalized) {
                Some(outcome) => outcome,
                None if text::mentions_system_catalog(stmt) => return Some(Err(SqlError::Catalog)),
                None => return None,
            }
        }
    };
    Some(Ok(outcome))
}

/// Answers `SELECT` of a list of the session functions drivers ask for (`version()`,
/// `current_database()`, `current_schema()`, each maybe `AS name` unquoted), one text column each;
/// `None` for anything else. `normalized` is the statement lowercased with single spaces.
fn session_functions(database: &Database, normalized: &str) -> Option<Outcome> {
    let list = normalized
        .strip_prefix("select ")?
        .trim_end_matches(';')
        .trim();
    let mut columns = Vec::new();
    let mut row = Vec::new();
    for item in list.split(',') {
        let item = item.trim();
        let (function, alias) = match item.split_once(" as ") {
            Some((f, a)) => (f.trim(), Some(a.trim())),
            None => (item, None),
        };
        let (name, value) = match function.replace(' ', "").as_str() {
            "version()" | "pg_catalog.version()" => (
                "version",
                format!(
                    "PostgreSQL {PG_VERSION} (Strata {} SQL layer; a subset of SQL)",
                    env!("CARGO_PKG_VERSION")
                ),
            ),
            "current_database()" | "pg_catalog.current_database()" => {
                ("current_database", database.name().to_owned())
            }
            "current_schema()" | "current_schema" | "pg_catalog.current_schema()" => {
                ("current_schema", "public".to_owned())
            }
            _ => return None,
        };
        let name = match alias {
            Some(a) if !a.is_empty() && a.chars().all(|c| c.is_alphanumeric() || c == '_') => a,
            // A quoted alias keeps its case, which `normalized` lost: left to the SQL layer.
            Some(_) => return None,
            None => name,
        };
        columns.push(Column {
            name: name.to_owned(),
            ty: Some(DataType::Text),
        });
        row.push(Value::Text(value));
    }
    Some(Outcome::Rows {
        columns,
        rows: vec![row],
    })
}

/// Parses `DEALLOCATE [PREPARE] { name | "name" | ALL }`.
fn deallocate(stmt: &str) -> Result<Outcome, SqlError> {
    let body = stmt.trim().trim_end_matches(';');
    let mut words = body.split_whitespace().skip(1).peekable();
    if words
        .peek()
        .is_some_and(|w| w.eq_ignore_ascii_case("PREPARE"))
    {
        words.next();
    }
    let (Some(name), None) = (words.next(), words.next()) else {
        return Err(SqlError::Query(QueryError::Translate(
            "syntax error: DEALLOCATE takes one prepared statement name or ALL".to_owned(),
        )));
    };
    Ok(Outcome::Deallocate(if name.eq_ignore_ascii_case("ALL") {
        None
    } else if let Some(quoted) = name.strip_prefix('"').and_then(|n| n.strip_suffix('"')) {
        Some(quoted.replace("\"\"", "\""))
    } else {
        Some(name.to_lowercase())
    }))
}

/// One translated statement, shared with the SQL layer's statement cache.
struct OneStatement(std::sync::Arc<[strata_query::ast::Statement]>);

impl std::ops::Deref for OneStatement {
    type Target = strata_query::ast::Statement;

    fn deref(&self) -> &Self::Target {
        // `translate` builds this from a slice of exactly one statement.
        &self.0[0]
    }
}

/// Parses and translates one statement (`None`: only comments), through `sql`'s statement
/// cache (docs/sql.md, "Statement cache"): a text sent again is not parsed again. A text only
/// described (`run` false: a Describe, which its Execute follows) does not count toward
/// keeping it.
fn translate(
    sql: &strata_query::Database,
    stmt: &str,
    run: bool,
) -> Result<Option<OneStatement>, SqlError> {
    let statements = if run {
        sql.statements(stmt)?
    } else {
        sql.statements_to_describe(stmt)?
    };
    match statements.len() {
        0 => Ok(None),
        1 => Ok(Some(OneStatement(statements))),
        _ => Err(SqlError::Params(
            "cannot run several statements here; send them one by one".to_owned(),
        )),
    }
}

/// The columns `stmt` will return, without running it (`None`: it returns no rows).
///
/// # Errors
/// Parse, translate and planning errors (unknown table or column, ...).
pub fn describe(database: &Database, stmt: &str) -> Result<Option<Vec<Column>>, SqlError> {
    if let Some(outcome) = intercept(database, stmt) {
        return Ok(match outcome? {
            Outcome::Rows { columns, .. } => Some(columns),
            _ => None,
        });
    }
    let sql = database.sql()?;
    let Some(one) = translate(&sql, stmt, false)? else {
        return Ok(None);
    };
    let parsed: &strata_query::ast::Statement = &one;
    let text = |name: &str| Column {
        name: name.to_owned(),
        ty: Some(DataType::Text),
    };
    use strata_query::ast::Statement as S;
    Ok(match parsed {
        S::Select(select) => {
            let plan = strata_query::plan::plan_select_memo(&sql.catalog(), select)?;
            Some(typed(types::select_columns(&plan)))
        }
        S::ShowTables => Some(vec![text("table")]),
        S::Explain(_) => Some(vec![text("plan")]),
        S::Describe { .. } => match sql.run(parsed)? {
            Output::Rows { columns, rows } => {
                Some(typed(types::types_from_values(&columns, &rows)))
            }
            _ => None,
        },
        _ => None,
    })
}

fn typed(columns: Vec<(String, Option<DataType>)>) -> Vec<Column> {
    columns
        .into_iter()
        .map(|(name, ty)| Column { name, ty })
        .collect()
}

/// Runs one statement; setting `interrupt` stops it (a PostgreSQL cancel request).
///
/// # Errors
/// Any [`SqlError`] (`QueryError::Interrupted` when stopped, SQLSTATE 57014); nothing of a
/// failed statement is applied.
pub fn run(database: &Database, stmt: &str, interrupt: &Interrupt) -> Result<Outcome, SqlError> {
    run_in(database, stmt, interrupt, false)
}

/// [`run`], in a read-only transaction when `read_only` is set: a statement that writes is
/// refused ([`SqlError::ReadOnlyTransaction`], 25006) before it runs.
///
/// # Errors
/// As [`run`].
pub fn run_in(
    database: &Database,
    stmt: &str,
    interrupt: &Interrupt,
    read_only: bool,
) -> Result<Outcome, SqlError> {
    match prepare(database, stmt, read_only)? {
        Prepared::Answered(outcome) => Ok(outcome),
        Prepared::Ready(ready) => ready.run(database, interrupt),
    }
}

/// Most row keys a [`Ready::is_quick`] statement reads.
pub const QUICK_KEYS: usize = 16;

/// Longest statement text, in bytes, that a connection translates and plans on its own task
/// ([`prepare`]); a longer one (a large multi-row INSERT) is parsed on the blocking pool, so
/// its parse cannot stall the other connections of the same worker thread.
pub const QUICK_TEXT_BYTES: usize = 4 << 10;

/// A statement as [`prepare`] leaves it.
#[derive(Debug)]
pub enum Prepared {
    /// Answered already, without the SQL layer running anything: transaction control,
    /// settings, session functions, a text of only comments.
    Answered(Outcome),
    /// Translated and (a SELECT) planned; [`Ready::run`] runs it.
    Ready(Box<Ready>),
}

/// [`Ready::is_quick`] for the plan of a SELECT.
fn quick_plan(plan: &strata_query::plan::SelectPlan) -> bool {
    if plan.keys_read().is_none_or(|keys| keys > QUICK_KEYS) {
        return false;
    }
    let mut like = false;
    plan.walk_exprs(&mut |e| like |= matches!(e, strata_query::ast::Expr::Like { .. }));
    !like
}

/// True when `text` is one statement that [`Ready::is_quick`] would call quick, found without
/// reading the engine: the SQL layer is loaded, the text is at most [`QUICK_TEXT_BYTES`], and
/// its translation (through the statement cache, not counting toward keeping it, as a
/// Describe) plans a short read by key. A RESP connection runs such an `SQL` command on its
/// own task instead of the blocking pool.
pub fn is_quick_text(database: &Database, text: &str) -> bool {
    if text.len() > QUICK_TEXT_BYTES || !database.sql_loaded() {
        return false;
    }
    let [stmt] = text::split_statements(text)[..] else {
        return false;
    };
    matches!(prepare_counting(database, stmt, false, false), Ok(Prepared::Ready(ready)) if ready.is_quick())
}

/// True for the statements that read only: what a read-only transaction allows, and what
/// leaves the database clean.
fn reads_only(stmt: &strata_query::ast::Statement) -> bool {
    use strata_query::ast::Statement as S;
    matches!(
        stmt,
        S::Select(_) | S::ShowTables | S::Describe { .. } | S::Explain(_)
    )
}

/// A statement translated and, a SELECT, planned, not run yet.
pub struct Ready {
    sql: std::sync::Arc<strata_query::Database>,
    stmt: OneStatement,
    /// The plan of a SELECT, for [`Ready::is_quick`]; [`Ready::run`] takes the plan of the
    /// catalog current when it runs (the same plan unless DDL came in between).
    plan: Option<std::sync::Arc<strata_query::plan::SelectPlan>>,
}

/// Everything [`run_in`] does before the statement runs: answers what the server answers
/// itself, translates the statement through the statement cache, refuses a write in a
/// read-only transaction, and plans a SELECT. None of it reads table data, but loading the
/// SQL layer (the first statement on a database) reads its catalog from the engine: a
/// caller that must not wait on the disk checks [`Database::sql_loaded`] first.
///
/// # Errors
/// As [`run`], for the steps before running.
pub fn prepare(database: &Database, stmt: &str, read_only: bool) -> Result<Prepared, SqlError> {
    prepare_counting(database, stmt, read_only, true)
}

/// [`prepare`]; `run` false translates without counting toward keeping the text in the
/// statement cache (for a look at a statement that will be prepared again to run).
fn prepare_counting(
    database: &Database,
    stmt: &str,
    read_only: bool,
    run: bool,
) -> Result<Prepared, SqlError> {
    if let Some(outcome) = intercept(database, stmt) {
        return outcome.map(Prepared::Answered);
    }
    let sql = database.sql()?;
    let Some(one) = translate(&sql, stmt, run)? else {
        return Ok(Prepared::Answered(Outcome::Empty));
    };
    if read_only && !reads_only(&one) {
        return Err(SqlError::ReadOnlyTransaction(read_only::command_name(stmt)));
    }
    let plan = match &*one {
        strata_query::ast::Statement::Select(select) => Some(strata_query::plan::plan_select_memo(
            &sql.catalog(),
            select,
        )?),
        _ => None,
    };
    Ok(Prepared::Ready(Box::new(Ready {
        sql,
        stmt: one,
        plan,
    })))
}

impl std::fmt::Debug for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ready")
            .field("stmt", &*self.stmt)
            .field("plan", &self.plan)
            .finish_non_exhaustive()
    }
}

impl Ready {
    /// True for a statement cheap enough to run on the connection's own task: a SELECT
    /// that reads at most [`QUICK_KEYS`] rows by primary key (a point get, a short `IN`
    /// list, or no table), which needs no lock and at most a few block reads, and has no
    /// `LIKE` (matching a long pattern with `_` in it against a long value can take their
    /// product; a quick statement cannot be cancelled, and holds up the other connections of
    /// its thread while it runs). Scans, writes and DDL are not quick: they can take long, or
    /// wait on the SQL layer's write lock or a synced commit.
    pub fn is_quick(&self) -> bool {
        self.plan.as_deref().is_some_and(quick_plan)
    }

    /// Runs the statement; setting `interrupt` stops it. `database` is the one it was
    /// prepared on.
    ///
    /// # Errors
    /// Any [`SqlError`] (`QueryError::Interrupted` when stopped); nothing of a failed
    /// statement is applied.
    pub fn run(&self, database: &Database, interrupt: &Interrupt) -> Result<Outcome, SqlError> {
        use strata_query::ast::Statement as S;
        let parsed: &strata_query::ast::Statement = &self.stmt;
        let (planned, output) = match parsed {
            // Planned again (or the statement's kept plan taken) against the catalog of the
            // run: a drop between the prepare and the run must not leave the rows read by a
            // plan of the old catalog.
            S::Select(select) => match self.sql.run_select(select, interrupt) {
                Ok((plan, output)) => (Some(types::select_columns(&plan)), Ok(output)),
                Err(e) => (None, Err(e)),
            },
            _ => (None, self.sql.run_with(parsed, interrupt)),
        };
        if !reads_only(parsed) {
            database.mark_dirty();
        }
        Ok(match output? {
            Output::Rows { columns, rows } => {
                let columns = match planned {
                    Some(p) if p.len() == columns.len() => typed(p),
                    _ => typed(types::types_from_values(&columns, &rows)),
                };
                Outcome::Rows { columns, rows }
            }
            Output::Affected(n) => Outcome::Command(match parsed {
                S::Insert(_) => format!("INSERT 0 {n}"),
                S::Update { .. } => format!("UPDATE {n}"),
                S::Delete { .. } => format!("DELETE {n}"),
                _ => format!("OK {n}"),
            }),
            Output::Done(name) => Outcome::Command(name.to_owned()),
        })
    }
}

#[cfg(test)]
mod tests;
