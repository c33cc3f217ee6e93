//! Running statements: [`Database`] over a [`KvStore`].
//!
//! # Atomicity and concurrency
//! Every statement reads from one snapshot ([`KvStore::reader`]) and writes one batch, so it
//! is atomic. Statements that write (INSERT, UPDATE, DELETE, DDL) hold the database's
//! statement lock from their first read to their write, so two statements can never both
//! insert the same primary key. SELECTs take no statement lock; each holds the *drop gate* in
//! shared mode from the moment it reads the catalog to its last row, so a
//! `DROP TABLE` or `DROP INDEX`, which deletes the dropped keys after publishing the catalog
//! without them, first waits for the SELECTs that may still hold the catalog with them (as
//! PostgreSQL's `DROP` waits for the readers of the table). Without the wait such a SELECT
//! answered as if the table or index were empty (a tester's concurrent `DROP INDEX` gave a
//! `count(*)` of 0). A [`RowSink`] must therefore not run statements on the same `Database`.
//! Writers outside this `Database` (raw engine puts into the reserved prefixes) are not
//! coordinated with and must not happen.

mod ddl;
pub use ddl::{RECLAIM_MIN_BYTES, RECLAIM_MIN_ENTRIES, schema_sql};
pub mod eval;
mod select;
mod source;
mod statements;
pub use statements::MAX_CACHED_TEXT_BYTES;
pub mod store;
mod write;
pub use write::BulkInsert;

use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, RwLock};

use strata_engine::{Db, Options};

use crate::ast::{OnConflict, Statement};
use crate::catalog::{CATALOG_PREFIX, Catalog, FORMAT_VERSION, META_KEY, TABLE_RECORD_TAG};
use crate::codec::CodecError;
use crate::codec::schema::{decode_meta, decode_table, encode_meta};
use crate::error::{QueryError, Result};
use crate::interrupt::Interrupt;
use crate::plan;
use crate::value::Value;
use store::{DbStore, KvBatch, KvRead, KvStore};

/// The result of one statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A result set (SELECT, SHOW TABLES, DESCRIBE, EXPLAIN).
    Rows {
        /// Column names.
        columns: Vec<String>,
        /// Rows, each with one value per column.
        rows: Vec<Vec<Value>>,
    },
    /// INSERT, UPDATE or DELETE: the number of rows written or removed.
    Affected(u64),
    /// A DDL statement succeeded; the text names it (`CREATE TABLE`).
    Done(&'static str),
}

/// Where [`Database::run_streaming`] hands a result set: the column names once, then the
/// rows one at a time.
pub trait RowSink {
    /// The result's column names, before any row.
    fn columns(&mut self, columns: &[String]);
    /// One row (one value per column); [`ControlFlow::Break`] ends the statement here.
    fn row(&mut self, row: Vec<Value>) -> ControlFlow<()>;
}

/// A SQL database over a key-value store.
///
/// `Database` is `Send + Sync`: share it (in an `Arc`) between threads. See the module docs
/// for atomicity and locking.
#[derive(Debug)]
pub struct Database<S: KvStore = DbStore> {
    store: S,
    catalog: RwLock<Arc<Catalog>>,
    statement_lock: Mutex<()>,
    /// Held shared by each running SELECT from its catalog read to its last row, and taken
    /// exclusively (then released at once) by a drop before it deletes the dropped keys: see
    /// the module docs.
    drop_gate: RwLock<()>,
    /// Translated statements of recently run SQL texts (docs/sql.md, "Statement cache").
    statements: statements::StatementCache,
    /// Opened by [`Database::open_read_only`]: statements that write are refused before they
    /// run (as SQLite refuses them on a read-only connection), so the error never depends on
    /// what the statement would have found.
    read_only: bool,
}

impl Database<DbStore> {
    /// Opens (or creates) the engine database in `dir` and loads the catalog. Rows and index
    /// entries a crash left under ids no table or index uses (an interrupted `CREATE INDEX`,
    /// `DROP TABLE` or `DROP INDEX`) are deleted first (`docs/format/keys.md`).
    ///
    /// # Errors
    /// [`QueryError::Engine`] when the engine cannot open `dir` (for example
    /// [`strata_engine::Error::Locked`]); [`QueryError::Corruption`] for a damaged catalog.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self> {
        Database::open_with(dir, Options::default())
    }

    /// [`Database::open`] with the engine's `options` (a block cache size, say); with
    /// `options.read_only` it is [`Database::open_read_only`].
    ///
    /// # Errors
    /// As [`Database::open`] and [`Database::open_read_only`]; [`QueryError::Engine`] holding
    /// [`strata_engine::Error::InvalidArgument`] for options that do not validate.
    pub fn open_with(dir: impl AsRef<Path>, options: Options) -> Result<Self> {
        if options.read_only {
            let db = Db::open(dir, options)?;
            let mut database = Database::load(DbStore::new(db), false)?;
            database.read_only = true;
            return Ok(database);
        }
        Database::new(DbStore::new(Db::open(dir, options)?))
    }

    /// Opens the existing engine database in `dir` read-only (`Options::read_only`: nothing
    /// is written, and it works beside the process that has the database open) and loads the
    /// catalog; a database without one has no tables. Statements that write fail with
    /// [`QueryError::Engine`] holding [`strata_engine::Error::ReadOnly`].
    ///
    /// # Errors
    /// [`QueryError::Engine`] when the engine cannot open `dir` (it must hold a database);
    /// [`QueryError::Corruption`] for a damaged catalog.
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Self> {
        Database::open_with(dir, Options::default().read_only(true))
    }
}

impl<S: KvStore> Database<S> {
    /// Loads the catalog from `store` (writing the format record into an empty store) and
    /// deletes what a crash left under unused ids, as [`Database::open`] does.
    ///
    /// # Errors
    /// [`QueryError::Corruption`] for damaged catalog records or an unknown format version;
    /// store errors.
    pub fn new(store: S) -> Result<Self> {
        Database::load(store, true)
    }

    /// [`Database::new`]; without `write_format` an empty store is left unwritten.
    fn load(store: S, write_format: bool) -> Result<Self> {
        let reader = store.reader();
        let mut catalog = Catalog::default();
        match reader.get(&META_KEY)? {
            Some(meta) => {
                let (version, next_id) = decode_meta(&meta)?;
                if version != FORMAT_VERSION {
                    return Err(CodecError::catalog(0, "unknown SQL format version").into());
                }
                catalog.next_id = next_id;
            }
            None => {
                catalog.next_id = 1;
                if write_format {
                    let mut batch = S::Batch::default();
                    batch.put(&META_KEY, &encode_meta(FORMAT_VERSION, 1));
                    store.write(batch)?;
                }
            }
        }
        let lo = [CATALOG_PREFIX, TABLE_RECORD_TAG];
        let hi = [CATALOG_PREFIX, TABLE_RECORD_TAG + 1];
        for kv in reader.scan(
            std::ops::Bound::Included(&lo[..]),
            std::ops::Bound::Excluded(&hi[..]),
            false,
        ) {
            let (k, v) = kv?;
            let name = std::str::from_utf8(k.get(2..).unwrap_or_default())
                .map_err(|_| CodecError::catalog(0, "table name is not UTF-8"))?;
            let t = decode_table(name, &v)?;
            catalog.tables.insert(name.to_owned(), Arc::new(t));
        }
        drop(reader);
        let database = Database {
            store,
            catalog: RwLock::new(Arc::new(catalog)),
            statement_lock: Mutex::new(()),
            drop_gate: RwLock::new(()),
            statements: statements::StatementCache::new(),
            read_only: false,
        };
        if write_format {
            // A writable open finishes what a crash interrupted (see `remove_orphans`).
            ddl::remove_orphans(&database)?;
        }
        Ok(database)
    }

    /// True when opened by [`Database::open_read_only`]: every statement that writes is
    /// refused with [`QueryError::Engine`] holding [`strata_engine::Error::ReadOnly`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The current catalog (a snapshot: later DDL does not change it).
    pub fn catalog(&self) -> Arc<Catalog> {
        Arc::clone(&self.catalog.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn set_catalog(&self, c: Catalog) {
        *self.catalog.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(c);
    }

    fn lock(&self) -> MutexGuard<'_, ()> {
        self.statement_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Parses and runs every statement in `sql`, returning one output per statement. Stops
    /// at the first error (statements before it stay applied).
    ///
    /// # Errors
    /// Any [`QueryError`].
    pub fn execute(&self, sql: &str) -> Result<Vec<Output>> {
        let mut out = Vec::new();
        self.execute_each(sql, |o| out.push(o))?;
        Ok(out)
    }

    /// Like [`Database::execute`], handing each statement's output to `f` as soon as it is
    /// done.
    ///
    /// # Errors
    /// Any [`QueryError`]; outputs of earlier statements were already passed to `f`.
    pub fn execute_each(&self, sql: &str, f: impl FnMut(Output)) -> Result<()> {
        self.execute_each_with(sql, &Interrupt::new(), f)
    }

    /// Like [`Database::execute_each`], each statement run with
    /// [`Database::run_with`]: once `interrupt` is set, the running statement stops with
    /// [`QueryError::Interrupted`] and the statements after it do not run.
    ///
    /// # Errors
    /// Any [`QueryError`]; outputs of earlier statements were already passed to `f`.
    pub fn execute_each_with(
        &self,
        sql: &str,
        interrupt: &Interrupt,
        mut f: impl FnMut(Output),
    ) -> Result<()> {
        let mut run_all = |statements: &[Statement]| -> Result<()> {
            for stmt in statements {
                f(self.run_with(stmt, interrupt)?);
            }
            Ok(())
        };
        match statements::statements(&self.statements, sql, true) {
            Ok(translated) => run_all(&translated),
            // A statement that does not translate fails when its turn comes: the ones
            // before it run (as when each statement was translated just before it ran).
            Err((before, e)) => {
                run_all(&before)?;
                Err(e)
            }
        }
    }

    /// The translated statements of `sql` (one per `;`-separated statement; none for a text
    /// of only comments), from the statement cache when this text is there (docs/sql.md,
    /// "Statement cache"), else parsed and translated, and kept when the text is at most
    /// [`MAX_CACHED_TEXT_BYTES`] long and was translated recently before. Translation does
    /// not look at the catalog, so a cached statement is as good after DDL as before: names
    /// are bound when the statement is planned, at each run.
    ///
    /// # Errors
    /// [`QueryError::Parse`] and the translation errors ([`QueryError::Unsupported`], ...)
    /// of the first statement that fails.
    pub fn statements(&self, sql: &str) -> Result<Arc<[Statement]>> {
        statements::statements(&self.statements, sql, true)
            .map(Arc::from)
            .map_err(|(_, e)| e)
    }

    /// [`Database::statements`] for a text that is looked at but will also be run, such as a
    /// PostgreSQL Describe before its Execute: taken from the statement cache when there,
    /// but a translation here does not count toward keeping the text, so a text described
    /// and then run once is not kept.
    ///
    /// # Errors
    /// As [`Database::statements`].
    pub fn statements_to_describe(&self, sql: &str) -> Result<Arc<[Statement]>> {
        statements::statements(&self.statements, sql, false)
            .map(Arc::from)
            .map_err(|(_, e)| e)
    }

    /// Runs one translated statement.
    ///
    /// # Errors
    /// Any [`QueryError`].
    pub fn run(&self, stmt: &Statement) -> Result<Output> {
        self.run_with(stmt, &Interrupt::new())
    }

    /// Runs one translated statement that another thread can stop by setting `interrupt`
    /// (see [`crate::interrupt`]): a scan looks at the flag every
    /// [`CHECK_EVERY`](crate::interrupt::CHECK_EVERY) entries, an UPDATE, DELETE or
    /// `CREATE INDEX` once more before it writes. A statement that stops has changed nothing.
    /// A flag already set stops the statement before it starts. INSERTs, the other DDL
    /// statements and the space reclaiming after a drop (already committed) are not stopped.
    ///
    /// # Errors
    /// [`QueryError::Interrupted`]; any other [`QueryError`].
    pub fn run_with(&self, stmt: &Statement, interrupt: &Interrupt) -> Result<Output> {
        self.check_writable(stmt)?;
        interrupt.check()?;
        match stmt {
            Statement::Select(s) => self.run_select(s, interrupt).map(|(_, output)| output),
            Statement::Explain(inner) => self.explain(inner),
            Statement::ShowTables => Ok(Output::Rows {
                columns: vec!["table".to_owned()],
                rows: self
                    .catalog()
                    .tables
                    .keys()
                    .map(|n| vec![Value::Text(n.clone())])
                    .collect(),
            }),
            Statement::Describe { table } => ddl::describe(&self.catalog(), table),
            Statement::Insert(i) => {
                let _guard = self.lock();
                write::insert(self, i)
            }
            Statement::Update {
                table,
                assignments,
                filter,
            } => {
                let _guard = self.lock();
                write::update(self, table, assignments, filter.as_ref(), interrupt)
            }
            Statement::Delete { table, filter } => {
                let _guard = self.lock();
                write::delete(self, table, filter.as_ref(), interrupt)
            }
            Statement::CreateTable { .. }
            | Statement::DropTable { .. }
            | Statement::CreateIndex { .. }
            | Statement::DropIndex { .. } => {
                let mut dead = Vec::new();
                let output = {
                    let _guard = self.lock();
                    ddl::run(self, stmt, &mut dead, interrupt)?
                };
                if !dead.is_empty() {
                    // Wait for the SELECTs that may hold the catalog before the drop; those
                    // that start from now on read the new one.
                    drop(
                        self.drop_gate
                            .write()
                            .unwrap_or_else(PoisonError::into_inner),
                    );
                }
                for prefix in &dead {
                    ddl::delete_prefix(self, prefix)?;
                }
                Ok(output)
            }
        }
    }

    /// Runs a SELECT as [`Database::run_with`] does, and returns the plan it ran with (made
    /// against the catalog current when it started, or the plan the statement kept for that
    /// catalog: [`plan::plan_select_memo`]) beside its [`Output::Rows`]. A server that planned
    /// the statement earlier, to decide where to run it, gets here the plan that matches the
    /// rows (the catalog may have changed in between) without planning it again otherwise.
    ///
    /// # Errors
    /// Planning errors ([`QueryError::NoSuchTable`], ...); [`QueryError::Interrupted`]; engine
    /// errors reading the rows ([`QueryError::Engine`]); evaluation errors of its expressions
    /// (division by zero, type errors).
    pub fn run_select(
        &self,
        select: &crate::ast::Select,
        interrupt: &Interrupt,
    ) -> Result<(Arc<plan::SelectPlan>, Output)> {
        interrupt.check()?;
        let _gate = self
            .drop_gate
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        let plan = plan::plan_select_memo(&self.catalog(), select)?;
        let reader = self.store.reader();
        let rows = select::run(&reader, &plan, interrupt)?;
        let columns = plan.columns.clone();
        Ok((plan, Output::Rows { columns, rows }))
    }

    /// Runs one translated statement as [`Database::run_with`] does, except that a result
    /// set is not collected: its column names go to [`RowSink::columns`] first, then each
    /// row to [`RowSink::row`], in order. A SELECT that needs no sort and no aggregate hands
    /// its rows over as its scan produces them, so memory stays bounded however many rows it
    /// returns (the shell's csv and tsv modes print large results this way); other result
    /// sets are built first, as [`Database::run_with`] builds them. [`RowSink::row`]
    /// returning [`ControlFlow::Break`] ends the statement early, without an error, as a
    /// LIMIT would (for a reader that went away).
    ///
    /// Returns `None` when the statement produced a result set (it went to `sink`), and the
    /// statement's [`Output`] otherwise (`Affected`, `Done`).
    ///
    /// # Errors
    /// As [`Database::run_with`]; rows handed over before an error stay handed over.
    pub fn run_streaming(
        &self,
        stmt: &Statement,
        interrupt: &Interrupt,
        sink: &mut dyn RowSink,
    ) -> Result<Option<Output>> {
        let output = match stmt {
            Statement::Select(s) => {
                interrupt.check()?;
                let _gate = self
                    .drop_gate
                    .read()
                    .unwrap_or_else(PoisonError::into_inner);
                let plan = plan::plan_select_memo(&self.catalog(), s)?;
                sink.columns(&plan.columns);
                let reader = self.store.reader();
                select::run_into(&reader, &plan, interrupt, &mut |row| sink.row(row))?;
                return Ok(None);
            }
            _ => self.run_with(stmt, interrupt)?,
        };
        match output {
            Output::Rows { columns, rows } => {
                sink.columns(&columns);
                for row in rows {
                    if sink.row(row).is_break() {
                        break;
                    }
                }
                Ok(None)
            }
            other => Ok(Some(other)),
        }
    }

    /// Inserts rows of values directly (what `.import` uses for short inputs): one batch, like
    /// an INSERT with the same rows. `columns` names the target columns (all, in order, when
    /// `None`).
    ///
    /// # Errors
    /// As INSERT: unknown table or column, a value that does not fit its column, NOT NULL,
    /// a duplicate primary key (with [`OnConflict::Error`]).
    pub fn insert_values(
        &self,
        table: &str,
        columns: Option<&[String]>,
        rows: Vec<Vec<Value>>,
        on_conflict: OnConflict,
    ) -> Result<u64> {
        self.insert_rows_noting(table, columns, rows, on_conflict, &mut None)
    }

    /// [`Database::insert_values`]; on an error one row caused, `failed` is its index in
    /// `rows` (`None` on other errors).
    pub(crate) fn insert_rows_noting(
        &self,
        table: &str,
        columns: Option<&[String]>,
        rows: Vec<Vec<Value>>,
        on_conflict: OnConflict,
        failed: &mut Option<usize>,
    ) -> Result<u64> {
        if self.read_only {
            return Err(strata_engine::Error::ReadOnly.into());
        }
        let _guard = self.lock();
        match write::insert_values(self, table, columns, rows, on_conflict, failed)? {
            Output::Affected(n) => Ok(n),
            _ => Ok(0),
        }
    }

    /// Starts an atomic bulk insert of whole rows into `table` ([`BulkInsert`]): what
    /// `.import` runs for inputs of more than one batch. Faster than INSERT batches for many
    /// rows (they are sorted into tables and ingested, written once, not through the WAL and
    /// compactions), all or nothing, and it holds the statement lock until it is finished or
    /// dropped: other statements that write wait for it.
    ///
    /// # Errors
    /// [`QueryError::NoSuchTable`] for an unknown table; [`QueryError::Engine`] holding
    /// [`strata_engine::Error::ReadOnly`] on a read-only database; the store's errors setting
    /// up the bulk write.
    pub fn bulk_insert(&self, table: &str) -> Result<BulkInsert<'_, S>> {
        if self.read_only {
            return Err(strata_engine::Error::ReadOnly.into());
        }
        BulkInsert::start(self, self.lock(), table)
    }

    /// Refuses a statement that writes (DDL, INSERT, UPDATE, DELETE) on a read-only database,
    /// even one that would change nothing (`DELETE` matching no rows, `CREATE TABLE IF NOT
    /// EXISTS` of an existing table).
    fn check_writable(&self, stmt: &Statement) -> Result<()> {
        let writes = matches!(
            stmt,
            Statement::CreateTable { .. }
                | Statement::DropTable { .. }
                | Statement::CreateIndex { .. }
                | Statement::DropIndex { .. }
                | Statement::Insert(_)
                | Statement::Update { .. }
                | Statement::Delete { .. }
        );
        if self.read_only && writes {
            return Err(strata_engine::Error::ReadOnly.into());
        }
        Ok(())
    }

    fn explain(&self, stmt: &Statement) -> Result<Output> {
        let catalog = self.catalog();
        let lines = match stmt {
            Statement::Select(s) => plan::explain::explain_select(&plan::plan_select(&catalog, s)?),
            Statement::Update { table, filter, .. } | Statement::Delete { table, filter } => {
                let t = plan::table(&catalog, table)?;
                let verb = if matches!(stmt, Statement::Update { .. }) {
                    "update"
                } else {
                    "delete"
                };
                // The scan as the statement runs it, reading the columns it needs.
                let scan = if verb == "update" {
                    write::update_scan(&t, filter.as_ref())?
                } else {
                    write::delete_scan(&t, filter.as_ref())?
                };
                let mut lines = plan::explain::explain_scan(&scan);
                lines.push(format!(
                    "write: {verb} matching rows and their index entries in one batch"
                ));
                lines
            }
            Statement::Insert(i) => {
                let t = plan::table(&catalog, &i.table)?;
                vec![format!(
                    "write: insert {} row(s) into {} in one batch (a point get per row checks the primary key; {} index(es) maintained)",
                    i.rows.len(),
                    t.name,
                    t.indexes.len()
                )]
            }
            _ => {
                return Err(QueryError::Unsupported(
                    "EXPLAIN of this statement".to_owned(),
                ));
            }
        };
        Ok(Output::Rows {
            columns: vec!["plan".to_owned()],
            rows: lines.into_iter().map(|l| vec![Value::Text(l)]).collect(),
        })
    }
}
