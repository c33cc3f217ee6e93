//! The SQL layer's error type.
//!
//! Variants follow the stages a statement goes through: [`QueryError::Parse`] (not SQL),
//! [`QueryError::Unsupported`] / [`QueryError::Translate`] / [`QueryError::BadRowCount`] (SQL
//! we do not run), [`QueryError::Plan`], [`QueryError::BadPosition`] and the `NoSuch*` /
//! [`QueryError::AlreadyExists`] variants (names or types that do not fit the catalog), [`QueryError::Exec`], [`QueryError::NotNull`],
//! [`QueryError::OutOfRange`], [`QueryError::DivisionByZero`] and [`QueryError::DuplicateKey`] /
//! [`QueryError::DuplicateInput`] (the data refused the statement; nothing was written),
//! [`QueryError::Corruption`] (stored bytes are damaged), [`QueryError::Interrupted`] (stopped
//! by the user) and [`QueryError::Engine`].

use sqlparser::parser::ParserError;

use crate::codec::CodecError;

/// Result alias of the SQL layer.
pub type Result<T, E = QueryError> = std::result::Result<T, E>;

/// Everything that can go wrong running SQL. `Display` is a sentence meant for the user.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueryError {
    /// The text is not SQL; the message gives the line and column.
    #[error("syntax error: {}", parser_message(.0))]
    Parse(#[from] ParserError),

    /// Valid SQL outside the supported subset; names the construct ("JOIN").
    #[error("{0} is not supported")]
    Unsupported(String),

    /// Supported constructs used in a way that cannot work, found before looking at the
    /// catalog (a VALUES row of the wrong width, LIMIT that is not a number, ...).
    #[error("{0}")]
    Translate(String),

    /// The statement does not fit the catalog in another way than a missing or taken name
    /// (those are the `NoSuch*` variants and [`QueryError::AlreadyExists`]): a type mismatch,
    /// a column outside GROUP BY, ...
    #[error("{0}")]
    Plan(String),

    /// `LIMIT` or `OFFSET` is not a non-negative integer literal (SQLSTATE 2201W for LIMIT,
    /// 2201X for OFFSET, as PostgreSQL).
    #[error("{clause} must be a non-negative integer")]
    BadRowCount {
        /// `"LIMIT"` or `"OFFSET"`.
        clause: &'static str,
    },

    /// `ORDER BY n` or `GROUP BY n` past the select list, or below 1 (SQLSTATE 42P10).
    #[error("{clause} position {position} is out of range")]
    BadPosition {
        /// `"ORDER BY"` or `"GROUP BY"`.
        clause: &'static str,
        /// The position as written.
        position: i64,
    },

    /// The statement names a table that does not exist (SQLSTATE 42P01).
    #[error("no such table: {0}")]
    NoSuchTable(String),

    /// A column reference is qualified by a table the statement does not read from
    /// (`SELECT x.a FROM t`; SQLSTATE 42P01).
    #[error("unknown table {0} in a column reference")]
    UnknownQualifier(String),

    /// The statement names a column its table does not have (SQLSTATE 42703).
    #[error("no column {column}{}", in_table_text(.table.as_deref()))]
    NoSuchColumn {
        /// The column as written.
        column: String,
        /// The table searched; `None` when the statement has no FROM table.
        table: Option<String>,
    },

    /// `DROP INDEX` of an index that does not exist (SQLSTATE 42704).
    #[error("no such index: {0}")]
    NoSuchIndex(String),

    /// `CREATE TABLE` or `CREATE INDEX` of a name already taken (SQLSTATE 42P07).
    #[error("{kind} {name} already exists")]
    AlreadyExists {
        /// `"table"` or `"index"`.
        kind: &'static str,
        /// The name.
        name: String,
    },

    /// A row would hold NULL in a NOT NULL column (SQLSTATE 23502). Nothing was written.
    #[error("NULL value in NOT NULL column {table}.{column}")]
    NotNull {
        /// The table.
        table: String,
        /// The column.
        column: String,
    },

    /// A number does not fit its type: integer or double overflow in arithmetic or an
    /// aggregate, a literal beyond DOUBLE's range, a double too large for a BIGINT column
    /// (SQLSTATE 22003). The message names which. Nothing was written.
    #[error("{0}")]
    OutOfRange(String),

    /// Division or modulo by zero (SQLSTATE 22012). Nothing was written.
    #[error("division by zero")]
    DivisionByZero,

    /// Any other failure while running (a value of the wrong type for its column or
    /// operator, a key over the size limit). Nothing was written.
    #[error("{0}")]
    Exec(String),

    /// An INSERT or UPDATE would create a second row with the same primary key. Nothing was
    /// written.
    #[error("duplicate primary key {key} in table {table}")]
    DuplicateKey {
        /// The table.
        table: String,
        /// The key, formatted as SQL values: `('ACGT')`, `(1, 2)`.
        key: String,
    },

    /// A bulk insert ([`crate::BulkInsert`]) was given two rows with the same primary key,
    /// found when its rows were sorted. Nothing was written.
    #[error("primary key {key} is given twice to the bulk insert into {table}{}", by_line_text(*.by_line))]
    DuplicateInput {
        /// The table.
        table: String,
        /// The key, formatted as SQL values.
        key: String,
        /// For an import: the input line by which the sort found it (both copies are at or
        /// before it); `None` when found at the end.
        by_line: Option<u64>,
    },

    /// `.import` input could not be loaded (nothing of it was); `line` is the 1-based input
    /// line.
    #[error("line {line}: {message}")]
    Import {
        /// The input line: of the record, or where an interrupt was noticed.
        line: u64,
        /// What was wrong.
        message: String,
    },

    /// Reading import input failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    /// Stored catalog records, keys or rows are damaged.
    #[error("corrupt SQL data: {0}")]
    Corruption(#[from] CodecError),

    /// The statement was stopped by its [`Interrupt`](crate::Interrupt) (Ctrl-C in the REPL,
    /// a PostgreSQL cancel request) before it finished. It changed nothing.
    #[error("interrupted; the statement changed nothing")]
    Interrupted,

    /// The storage engine failed.
    #[error(transparent)]
    Engine(#[from] strata_engine::Error),
}

impl QueryError {
    /// The SQLSTATE code of this error (SQL:2016's codes with PostgreSQL's extensions, as
    /// listed in PostgreSQL's "Appendix A. PostgreSQL Error Codes"): `42601` syntax error,
    /// `0A000` not supported, `42P01` undefined table, `42703` undefined column, `42704`
    /// undefined object, `42P07` duplicate table, `42P10` invalid column reference (a position
    /// past the select list), `2201W`/`2201X` invalid row count in LIMIT/OFFSET, `42804`
    /// datatype mismatch (other planning errors), `23502` not-null violation, `23505` unique violation, `22003` numeric value out
    /// of range, `22012` division by zero, `22000` other data exceptions, `57014` query
    /// canceled, `57P01` the engine was closed, `22023` invalid parameter value, `XX001`
    /// damaged data, `53100` disk full (or quota), `53000` out of file descriptors, `58030`
    /// other I/O and engine errors. The network server sends it to
    /// PostgreSQL clients.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            QueryError::Parse(_) | QueryError::Translate(_) => "42601",
            QueryError::BadRowCount { clause: "OFFSET" } => "2201X",
            QueryError::BadRowCount { .. } => "2201W",
            QueryError::BadPosition { .. } => "42P10",
            QueryError::Unsupported(_) => "0A000",
            QueryError::NoSuchTable(_) | QueryError::UnknownQualifier(_) => "42P01",
            QueryError::NoSuchColumn { .. } => "42703",
            QueryError::NoSuchIndex(_) => "42704",
            QueryError::AlreadyExists { .. } => "42P07",
            QueryError::Plan(_) => "42804",
            QueryError::NotNull { .. } => "23502",
            QueryError::OutOfRange(_) => "22003",
            QueryError::DivisionByZero => "22012",
            QueryError::Exec(_) => "22000",
            QueryError::DuplicateKey { .. } | QueryError::DuplicateInput { .. } => "23505",
            QueryError::Interrupted => "57014",
            QueryError::Corruption(_) => "XX001",
            QueryError::Engine(strata_engine::Error::Closed) => "57P01",
            QueryError::Engine(strata_engine::Error::InvalidArgument(_)) => "22023",
            QueryError::Engine(e) => resource_sqlstate(e).unwrap_or("58030"),
            QueryError::Io(_) | QueryError::Import { .. } => "58030",
        }
    }
}

/// PostgreSQL's SQLSTATE for an engine error that reports a resource running out: `53000`
/// insufficient_resources when no file descriptor was left, `53100` disk_full for no space or
/// a quota (or writes stopped by one: [`strata_engine::Error::is_resource_exhausted`]);
/// `None` for any other error. [`QueryError::sqlstate`] uses it for statements, the network
/// server for a database that cannot be opened.
pub fn resource_sqlstate(e: &strata_engine::Error) -> Option<&'static str> {
    if e.is_out_of_descriptors() {
        Some("53000")
    } else if e.is_resource_exhausted() {
        Some("53100")
    } else {
        None
    }
}

fn in_table_text(table: Option<&str>) -> String {
    table.map_or_else(
        || ": there is no table here".to_owned(),
        |t| format!(" in table {t}"),
    )
}

fn by_line_text(line: Option<u64>) -> String {
    line.map(|l| format!(" (both copies are on line {l} or before it)"))
        .unwrap_or_default()
}

fn parser_message(e: &ParserError) -> String {
    match e {
        ParserError::TokenizerError(s) | ParserError::ParserError(s)
            if s.contains(" at Line: ") =>
        {
            s.clone()
        }
        ParserError::TokenizerError(s) | ParserError::ParserError(s) => {
            format!("{s} at the end of the input")
        }
        ParserError::RecursionLimitExceeded => "the statement is nested too deeply".to_owned(),
    }
}

/// Shorthand for `Err(QueryError::Unsupported(..))`.
pub(crate) fn unsupported<T>(what: impl Into<String>) -> Result<T> {
    Err(QueryError::Unsupported(what.into()))
}

/// Shorthand for `Err(QueryError::Plan(..))`.
pub(crate) fn plan_err<T>(msg: impl Into<String>) -> Result<T> {
    Err(QueryError::Plan(msg.into()))
}

/// Shorthand for `Err(QueryError::Exec(..))`.
pub(crate) fn exec_err<T>(msg: impl Into<String>) -> Result<T> {
    Err(QueryError::Exec(msg.into()))
}
