//! # strata-query
//!
//! A small SQL layer over `strata-engine`: tables with typed columns and a primary key,
//! secondary indexes, `SELECT` with filters, aggregates, `ORDER BY` and `LIMIT`, `INSERT`,
//! `UPDATE`, `DELETE`, and a planner that pushes primary-key and index predicates down into
//! key-range scans and point gets. `docs/sql.md` in the repository is the user reference;
//! `docs/format/keys.md` specifies how rows, indexes and the catalog are stored.
//!
//! It is not a general SQL database: one table per query (no joins or subqueries), no
//! transactions beyond one statement, no ALTER TABLE.
//!
//! ```
//! # fn main() -> Result<(), strata_query::QueryError> {
//! use strata_query::{Database, MemStore, Output, Value};
//! let db = Database::new(MemStore::new())?;
//! db.execute("CREATE TABLE reads (seq TEXT PRIMARY KEY, count BIGINT NOT NULL)")?;
//! db.execute("INSERT INTO reads VALUES ('ACGT', 12), ('TTGA', 3)")?;
//! let out = db.execute("SELECT seq FROM reads WHERE count > 10")?;
//! assert_eq!(
//!     out[0],
//!     Output::Rows { columns: vec!["seq".into()], rows: vec![vec![Value::Text("ACGT".into())]] }
//! );
//! # Ok(())
//! # }
//! ```
//!
//! Layers: [`parse`] (the only caller of sqlparser) → [`translate`] (our [`ast`]) →
//! [`plan`] (binding, access paths) → [`exec`] (over the [`KvStore`] trait) with [`codec`]
//! for bytes and [`catalog`] for schemas.
#![deny(missing_docs)]

pub mod ast;
pub mod catalog;
pub mod codec;
pub mod error;
pub mod exec;
pub mod import;
pub mod interrupt;
pub mod parse;
pub mod plan;
pub mod translate;
pub mod value;

pub use ast::OnConflict;
pub use error::{QueryError, Result, resource_sqlstate};
pub use exec::store::{DbStore, KvBatch, KvRead, KvStore, MemStore, ScanCache};
pub use exec::{BulkInsert, Database, Output, RowSink};
pub use interrupt::Interrupt;
pub use value::{DataType, Value};

/// `CREATE TABLE` (and `CREATE INDEX`) text for a table, as the REPL's `.schema` prints it.
pub fn schema_sql(t: &catalog::TableSchema) -> String {
    exec::schema_sql(t)
}
