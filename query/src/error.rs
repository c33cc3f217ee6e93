//! The SQL layer's error type.
//!
//! Variants follow the stages a statement goes through: [`QueryError::Parse`] (not SQL),
//! [`QueryError::Unsupported`] / [`QueryError::Translate`] (SQL we do not run),
//! [`QueryError::Plan`] (names or types that do not fit the catalog), [`QueryError::Exec`] and
//! [`QueryError::DuplicateKey`] / [`QueryError::DuplicateInput`] (the data refused the
//! statement; nothing was written),
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

    /// The statement does not fit the catalog: unknown table or column, type mismatch,
    /// a table that already exists, a column outside GROUP BY, ...
    #[error("{0}")]
    Plan(String),

    /// The statement failed while running (NOT NULL violated, division by zero, integer
    /// overflow, a value that does not fit the column). Nothing was written.
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
