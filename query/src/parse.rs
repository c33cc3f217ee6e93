//! The only caller of `sqlparser`: SQL text → sqlparser statements.
//!
//! We parse with [`GenericDialect`] (accepts the common spellings of PostgreSQL, MySQL and
//! SQLite); [`crate::translate`] then maps the result onto our own AST.

use sqlparser::ast::Statement as SqlStatement;
use sqlparser::dialect::GenericDialect;
use sqlparser::parser::Parser;

use crate::error::Result;

/// The dialect every statement is parsed with.
pub const DIALECT: GenericDialect = GenericDialect {};

/// Parses `sql` (one or more statements separated by `;`).
///
/// # Errors
/// [`crate::QueryError::Parse`] with the line and column of the first syntax error.
pub fn parse(sql: &str) -> Result<Vec<SqlStatement>> {
    Ok(Parser::parse_sql(&DIALECT, sql)?)
}
