//! INSERT, UPDATE and DELETE: each reads one snapshot and writes one batch holding the rows
//! and every index entry they change. Deletes are added to the batch before puts, so a key
//! that is both removed and re-written ends up written.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, MutexGuard};

use bytes::Bytes;

use super::eval::eval;
use super::source::{RowSource, decode, decode_key, prefix_cursor};
use super::store::{KvBatch, KvBulk, KvRead, KvStore, ScanCache};
use super::{Database, Output};
use crate::ast::{Expr, Insert, OnConflict};
use crate::catalog::{ID_PREFIX_LEN, IndexDef, TableSchema};
use crate::codec::key::encode_value;
use crate::codec::row::encode_row;
use crate::error::{QueryError, Result, exec_err, plan_err};
use crate::interrupt::{Interrupt, Ticker};
use crate::plan::{self, explain::sql_literal};
use crate::value::{DataType, Value};

/// The key of `row`'s entry in `index`: index prefix, the indexed value, the row key's
/// primary-key part.
pub(crate) fn index_key(index: &IndexDef, row: &[Value], row_key: &[u8]) -> Vec<u8> {
    let pk = row_key.get(ID_PREFIX_LEN..).unwrap_or_default();
    let mut k = index.key_prefix();
    encode_value(&mut k, row.get(index.column).unwrap_or(&Value::Null));
    k.extend_from_slice(pk);
    k
}

/// Refuses a row or index key over the engine's key limit ([`strata_engine::MAX_KEY_SIZE`]
/// bytes), naming what the key belongs to (`what`), before anything of the statement is
/// written.
pub(crate) fn check_key_size(key: &[u8], what: impl FnOnce() -> String) -> Result<()> {
    if key.len() > strata_engine::MAX_KEY_SIZE {
        return exec_err(format!(
            "{} is {} bytes encoded, over the key limit of {} bytes",
            what(),
            key.len(),
            strata_engine::MAX_KEY_SIZE
        ));
    }
    Ok(())
}

/// What an index key of `index` on `t` is called in errors.
pub(crate) fn index_entry(t: &TableSchema, index: &IndexDef) -> String {
    let column = t.columns.get(index.column).map_or("?", |c| c.name.as_str());
    format!("the entry of index {} on {}({column})", index.name, t.name)
}

/// Coerces `v` for column `c` of `t` and checks NOT NULL.
fn store_value(t: &TableSchema, c: usize, v: Value) -> Result<Value> {
    let Some(col) = t.columns.get(c) else {
        return exec_err("column out of range");
    };
    if v.is_null() {
        if col.not_null {
            return Err(not_null(t, &col.name));
        }
        return Ok(v);
    }
    let shown = sql_literal(&v);
    let from = v.type_name();
    // A whole number beyond BIGINT's range (a literal or parameter of 20 digits arrives as
    // a DOUBLE) is out of range, as PostgreSQL's "bigint out of range"; other doubles are
    // the wrong type.
    let too_large = matches!(v, Value::Double(d) if d.fract() == 0.0 && d.is_finite());
    let double = match v {
        Value::Double(d) => Some(d),
        _ => None,
    };
    match v.coerce_to(col.ty) {
        // One stored form per SQL value, as in keys: -0.0 is 0.0, every NaN the same NaN.
        Some(Value::Double(0.0)) => Ok(Value::Double(0.0)),
        Some(Value::Double(d)) if d.is_nan() => Ok(Value::Double(f64::NAN)),
        Some(v) => Ok(v),
        // Within BIGINT's range but past 2^53, where a DOUBLE stands for many integers.
        None if too_large
            && col.ty == DataType::BigInt
            && double.is_some_and(|d| {
                (-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&d)
            }) =>
        {
            Err(QueryError::OutOfRange(format!(
                "DOUBLE value {shown} is not exact as an integer (beyond 2^53) for column {}.{} \
                 of type {}: give it as an integer",
                t.name, col.name, col.ty
            )))
        }
        None if too_large && col.ty == DataType::BigInt => Err(QueryError::OutOfRange(format!(
            "value {shown} is out of range for column {}.{} of type {}",
            t.name, col.name, col.ty
        ))),
        None => Err(QueryError::Exec(format!(
            "cannot store {from} value {shown} in column {}.{} of type {}",
            t.name, col.name, col.ty
        ))),
    }
}

fn not_null(t: &TableSchema, column: &str) -> QueryError {
    QueryError::NotNull {
        table: t.name.clone(),
        column: column.to_owned(),
    }
}

fn duplicate(t: &TableSchema, row: &[Value]) -> QueryError {
    let key = t
        .primary_key
        .iter()
        .map(|&c| sql_literal(row.get(c).unwrap_or(&Value::Null)))
        .collect::<Vec<_>>()
        .join(", ");
    QueryError::DuplicateKey {
        table: t.name.clone(),
        key: format!("({key})"),
    }
}

fn check_not_null(t: &TableSchema, row: &[Value]) -> Result<()> {
    for (col, v) in t.columns.iter().zip(row) {
        if col.not_null && v.is_null() {
            return Err(not_null(t, &col.name));
        }
    }
    Ok(())
}

pub(super) fn insert<S: KvStore>(db: &Database<S>, ins: &Insert) -> Result<Output> {
    if let Some(target) = &ins.conflict_target {
        let catalog = db.catalog();
        let t = plan::table(&catalog, &ins.table)?;
        let mut named: Vec<usize> = Vec::with_capacity(target.len());
        for c in target {
            named.push(plan::column(&t, c)?);
        }
        named.sort_unstable();
        named.dedup();
        let mut key = t.primary_key.clone();
        key.sort_unstable();
        if named != key {
            let key: Vec<&str> = t
                .primary_key
                .iter()
                .filter_map(|&c| t.columns.get(c).map(|c| c.name.as_str()))
                .collect();
            return plan_err(format!(
                "ON CONFLICT ({}) does not name the primary key of {} ({}), its only unique \
                 constraint",
                target.join(", "),
                t.name,
                key.join(", ")
            ));
        }
    }
    let mut rows = Vec::with_capacity(ins.rows.len());
    for exprs in &ins.rows {
        let mut row = Vec::with_capacity(exprs.len());
        for e in exprs {
            row.push(match e {
                Expr::Literal(v) => v.clone(),
                e => eval(&plan::bind(e, None)?, &[])?,
            });
        }
        rows.push(row);
    }
    insert_values(
        db,
        &ins.table,
        ins.columns.as_deref(),
        rows,
        ins.on_conflict,
        &mut None,
    )
}

/// Inserts rows of values (one per named column, or per table column when `columns` is
/// `None`) in one batch. On an error that one row caused, `failed` is the row's index in
/// `rows` (`.import` turns it into the row's input line); on other errors it is `None`.
pub(super) fn insert_values<S: KvStore>(
    db: &Database<S>,
    table: &str,
    columns: Option<&[String]>,
    rows: Vec<Vec<Value>>,
    on_conflict: OnConflict,
    failed: &mut Option<usize>,
) -> Result<Output> {
    *failed = None;
    let catalog = db.catalog();
    let t = plan::table(&catalog, table)?;
    let targets: Vec<usize> = match columns {
        None => (0..t.columns.len()).collect(),
        Some(cols) => {
            let mut v = Vec::with_capacity(cols.len());
            for c in cols {
                let i = plan::column(&t, c)?;
                if v.contains(&i) {
                    return plan_err(format!("column {c} is named twice"));
                }
                v.push(i);
            }
            v
        }
    };
    let reader = db.store.reader();
    // Row key -> (index in `rows`, row).
    let mut pending: HashMap<Vec<u8>, (usize, Vec<Value>)> = HashMap::with_capacity(rows.len());
    let mut old_index_keys: Vec<Vec<u8>> = Vec::new();
    let mut written = 0u64;
    let all = vec![true; t.columns.len()];
    for (n, values) in rows.into_iter().enumerate() {
        *failed = Some(n);
        if values.len() != targets.len() {
            return Err(QueryError::Translate(format!(
                "VALUES row {} has {} values but table {} has {} columns",
                n + 1,
                values.len(),
                t.name,
                targets.len()
            )));
        }
        let row = stored_row(&t, &targets, values)?;
        let key = row_key(&t, &row)?;
        let in_batch = pending.contains_key(&key);
        let existing = if in_batch { None } else { reader.get(&key)? };
        if in_batch || existing.is_some() {
            match on_conflict {
                OnConflict::Error => return Err(duplicate(&t, &row)),
                OnConflict::DoNothing => continue,
                OnConflict::Replace => {
                    if let Some(old) = existing
                        && !t.indexes.is_empty()
                    {
                        let mut old_row = vec![Value::Null; t.columns.len()];
                        decode(&t, &key, &old, &all, &mut old_row)?;
                        for index in &t.indexes {
                            old_index_keys.push(index_key(index, &old_row, &key));
                        }
                    }
                }
            }
        }
        pending.insert(key, (n, row));
        written += 1;
    }
    drop(reader);
    let mut batch = S::Batch::default();
    for k in &old_index_keys {
        batch.delete(k);
    }
    let mut value = Vec::with_capacity(64);
    for (key, (n, row)) in &pending {
        *failed = Some(*n);
        row_entries(&t, key, row, &mut value, |k, v| {
            batch.put(k, v);
            Ok(())
        })?;
    }
    *failed = None;
    db.store.write(batch)?;
    Ok(Output::Affected(written))
}

/// The row of `values` (one per column of `targets`; unnamed columns NULL), each coerced to
/// its column's type, checked against NOT NULL.
fn stored_row(t: &TableSchema, targets: &[usize], values: Vec<Value>) -> Result<Vec<Value>> {
    let mut row = vec![Value::Null; t.columns.len()];
    for (v, &c) in values.into_iter().zip(targets) {
        if let Some(slot) = row.get_mut(c) {
            *slot = store_value(t, c, v)?;
        }
    }
    check_not_null(t, &row)?;
    Ok(row)
}

/// The key of `row` in `t`, refused when over the engine's key limit.
fn row_key(t: &TableSchema, row: &[Value]) -> Result<Vec<u8>> {
    let key = t.row_key(row);
    check_key_size(&key, || format!("the primary key of a row of {}", t.name))?;
    Ok(key)
}

/// Hands `put` the entries that store `row` under `key`: the row itself (encoded into
/// `value`, a reused buffer), then one entry per index of `t`.
fn row_entries(
    t: &TableSchema,
    key: &[u8],
    row: &[Value],
    value: &mut Vec<u8>,
    mut put: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    value.clear();
    encode_row(t, row, value);
    put(key, value)?;
    for index in &t.indexes {
        let entry = index_key(index, row, key);
        check_key_size(&entry, || index_entry(t, index))?;
        put(&entry, &[])?;
    }
    Ok(())
}

/// An atomic bulk insert of whole rows into one table: what [`Database::bulk_insert`] starts
/// (and `.import` runs for inputs of more than one batch). The rows and their index entries go
/// to the store's bulk write ([`KvStore::bulk`]: sorted into tables and ingested, each key
/// written once) and become visible together at [`BulkInsert::finish`]; dropping it
/// unfinished, or any error, leaves the table as it was.
///
/// It holds the database's statement lock from start to finish, so no other statement writes
/// meanwhile (they wait, as on a SQLite database during a write transaction), and the primary
/// keys it checks cannot be taken behind its back.
pub struct BulkInsert<'d, S: KvStore> {
    db: &'d Database<S>,
    _guard: MutexGuard<'d, ()>,
    table: Arc<TableSchema>,
    /// Column positions `0..n`, the targets of each row.
    targets: Vec<usize>,
    /// The table's state at the start, to check primary keys against; `None` when it had no
    /// rows then (nothing to check: keys given twice are refused by the bulk write itself).
    reader: Option<S::Reader>,
    bulk: S::Bulk,
    rows: u64,
    value: Vec<u8>,
}

impl<S: KvStore> std::fmt::Debug for BulkInsert<'_, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BulkInsert")
            .field("table", &self.table.name)
            .field("rows", &self.rows)
            .finish_non_exhaustive()
    }
}

impl<'d, S: KvStore> BulkInsert<'d, S> {
    /// Starts the bulk insert into `table` (see [`Database::bulk_insert`]).
    pub(super) fn start(
        db: &'d Database<S>,
        guard: MutexGuard<'d, ()>,
        table: &str,
    ) -> Result<Self> {
        let catalog = db.catalog();
        let t = plan::table(&catalog, table)?;
        let reader = db.store.reader();
        let has_rows = prefix_cursor(&reader, &t.key_prefix(), ScanCache::Fill)
            .next_entry()?
            .is_some();
        Ok(BulkInsert {
            targets: (0..t.columns.len()).collect(),
            reader: has_rows.then_some(reader),
            bulk: db.store.bulk()?,
            db,
            _guard: guard,
            table: t,
            rows: 0,
            value: Vec::with_capacity(64),
        })
    }

    /// Adds one row: a value per column, in the table's column order, coerced and checked as
    /// INSERT does.
    ///
    /// # Errors
    /// As INSERT: [`QueryError::Exec`] for a value that does not fit its column, NULL in a NOT
    /// NULL column or a key over the size limit, [`QueryError::DuplicateKey`] for a primary
    /// key the table held at the start; [`QueryError::Translate`] for a row of the wrong
    /// width; [`QueryError::DuplicateInput`] for a primary key given twice, when sorting the
    /// rows added so far finds one here (or at [`BulkInsert::finish`]); the store's errors.
    /// Drop the bulk insert after an error.
    pub fn add(&mut self, values: Vec<Value>) -> Result<()> {
        let t = &*self.table;
        if values.len() != t.columns.len() {
            return Err(QueryError::Translate(format!(
                "a row of {} values but table {} has {} columns",
                values.len(),
                t.name,
                t.columns.len()
            )));
        }
        let row = stored_row(t, &self.targets, values)?;
        let key = row_key(t, &row)?;
        if let Some(reader) = &self.reader
            && reader.get(&key)?.is_some()
        {
            return Err(duplicate(t, &row));
        }
        let bulk = &mut self.bulk;
        row_entries(t, &key, &row, &mut self.value, |k, v| {
            bulk.put(k, v).map_err(|e| given_twice(t, e))
        })?;
        self.rows += 1;
        Ok(())
    }

    /// Rows added so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Makes every row added visible, atomically, and returns how many there were.
    ///
    /// # Errors
    /// [`QueryError::DuplicateInput`] naming a primary key given twice (nothing is written
    /// then); the store's errors sorting, writing and ingesting (nothing is visible then
    /// either).
    pub fn finish(self) -> Result<u64> {
        let t = Arc::clone(&self.table);
        self.db
            .store
            .finish_bulk(self.bulk)
            .map_err(|e| given_twice(&t, e))?;
        Ok(self.rows)
    }
}

/// A bulk write's "key given twice" as an error naming the primary key (decoded from the row
/// key); other errors as they are.
fn given_twice(t: &TableSchema, e: strata_engine::Error) -> QueryError {
    let strata_engine::Error::DuplicateKey { key } = &e else {
        return e.into();
    };
    let mut row = vec![Value::Null; t.columns.len()];
    let mut needed = vec![false; t.columns.len()];
    for &c in &t.primary_key {
        if let Some(n) = needed.get_mut(c) {
            *n = true;
        }
    }
    // Two rows with one primary key give the same row key; their index entries may differ,
    // and those that do not sort after every row key, so the row key is the one reported.
    if decode_key(t, key, &needed, &mut row).is_err() {
        return e.into();
    }
    let QueryError::DuplicateKey { table, key } = duplicate(t, &row) else {
        return e.into();
    };
    QueryError::DuplicateInput {
        table,
        key,
        by_line: None,
    }
}

struct Change {
    old_key: Bytes,
    old_row: Vec<Value>,
    new_key: Vec<u8>,
    new_row: Vec<Value>,
}

/// The scan of an `UPDATE`: it reads whole rows (the rewritten row keeps every column).
pub(super) fn update_scan(
    t: &std::sync::Arc<TableSchema>,
    filter: Option<&Expr>,
) -> Result<plan::ScanPlan> {
    let mut scan = plan::plan_scan(std::sync::Arc::clone(t), filter)?;
    scan.needed = vec![true; t.columns.len()];
    Ok(scan)
}

/// The scan of a `DELETE`: besides the filter's columns it reads the indexed ones, to delete
/// the rows' index entries.
pub(super) fn delete_scan(
    t: &std::sync::Arc<TableSchema>,
    filter: Option<&Expr>,
) -> Result<plan::ScanPlan> {
    let mut scan = plan::plan_scan(std::sync::Arc::clone(t), filter)?;
    for index in &t.indexes {
        if let Some(n) = scan.needed.get_mut(index.column) {
            *n = true;
        }
    }
    Ok(scan)
}

pub(super) fn update<S: KvStore>(
    db: &Database<S>,
    table: &str,
    assignments: &[(String, Expr)],
    filter: Option<&Expr>,
    interrupt: &Interrupt,
) -> Result<Output> {
    let catalog = db.catalog();
    let t = plan::table(&catalog, table)?;
    let mut sets = Vec::with_capacity(assignments.len());
    for (c, e) in assignments {
        sets.push(plan::bind_assignment(&t, c, e)?);
    }
    let scan = update_scan(&t, filter)?;
    let reader = db.store.reader();
    let mut changes = Vec::new();
    {
        let mut source = RowSource::new(&reader, &scan, true, interrupt);
        let mut row = vec![Value::Null; t.columns.len()];
        while let Some(key) = source.next_row(&mut row)? {
            let key = Bytes::copy_from_slice(key);
            let mut new_row = row.clone();
            for (c, e) in &sets {
                let v = eval(e, &row)?;
                if let Some(slot) = new_row.get_mut(*c) {
                    *slot = store_value(&t, *c, v)?;
                }
            }
            let key_changed = t.primary_key.iter().any(|&c| {
                row.get(c)
                    .map(|v| v.total_cmp(new_row.get(c).unwrap_or(&Value::Null)))
                    != Some(std::cmp::Ordering::Equal)
            });
            let new_key = if key_changed {
                let new_key = t.row_key(&new_row);
                check_key_size(&new_key, || {
                    format!("the primary key of a row of {}", t.name)
                })?;
                new_key
            } else {
                key.to_vec()
            };
            changes.push(Change {
                old_key: key,
                old_row: row.clone(),
                new_key,
                new_row,
            });
        }
    }
    // Primary-key changes must not collide with rows that stay or with each other.
    let moved_from: HashSet<&[u8]> = changes
        .iter()
        .filter(|c| c.old_key.as_ref() != c.new_key.as_slice())
        .map(|c| c.old_key.as_ref())
        .collect();
    let mut new_keys: HashSet<&[u8]> = HashSet::with_capacity(changes.len());
    // Building the batch of millions of changes takes seconds too: it stops on an interrupt.
    let mut ticker = Ticker::new(interrupt);
    for c in &changes {
        ticker.tick()?;
        if !new_keys.insert(c.new_key.as_slice()) {
            return Err(duplicate(&t, &c.new_row));
        }
        if c.old_key.as_ref() != c.new_key.as_slice()
            && !moved_from.contains(c.new_key.as_slice())
            && reader.get(&c.new_key)?.is_some()
        {
            return Err(duplicate(&t, &c.new_row));
        }
    }
    drop(reader);
    let mut batch = S::Batch::default();
    let mut puts: Vec<Vec<u8>> = Vec::new();
    for c in &changes {
        ticker.tick()?;
        if c.old_key.as_ref() != c.new_key.as_slice() {
            batch.delete(&c.old_key);
        }
        for index in &t.indexes {
            let old = index_key(index, &c.old_row, &c.old_key);
            let new = index_key(index, &c.new_row, &c.new_key);
            if old != new {
                check_key_size(&new, || index_entry(&t, index))?;
                batch.delete(&old);
                puts.push(new);
            }
        }
    }
    let mut value = Vec::with_capacity(64);
    for c in &changes {
        ticker.tick()?;
        value.clear();
        encode_row(&t, &c.new_row, &mut value);
        batch.put(&c.new_key, &value);
    }
    for k in &puts {
        batch.put(k, &[]);
    }
    // The last moment to stop with nothing written.
    interrupt.check()?;
    db.store.write(batch)?;
    Ok(Output::Affected(changes.len() as u64))
}

pub(super) fn delete<S: KvStore>(
    db: &Database<S>,
    table: &str,
    filter: Option<&Expr>,
    interrupt: &Interrupt,
) -> Result<Output> {
    let catalog = db.catalog();
    let t = plan::table(&catalog, table)?;
    let scan = delete_scan(&t, filter)?;
    let reader = db.store.reader();
    let mut batch = S::Batch::default();
    let mut n = 0u64;
    {
        let mut source = RowSource::new(&reader, &scan, true, interrupt);
        let mut row = vec![Value::Null; t.columns.len()];
        while let Some(key) = source.next_row(&mut row)? {
            batch.delete(key);
            for index in &t.indexes {
                batch.delete(&index_key(index, &row, key));
            }
            n += 1;
        }
    }
    drop(reader);
    interrupt.check()?;
    db.store.write(batch)?;
    Ok(Output::Affected(n))
}
