//! INSERT, UPDATE and DELETE: each reads one snapshot and writes one batch holding the rows
//! and every index entry they change. Deletes are added to the batch before puts, so a key
//! that is both removed and re-written ends up written.

use std::collections::{HashMap, HashSet};

use bytes::Bytes;

use super::eval::eval;
use super::source::{RowSource, decode};
use super::store::{KvBatch, KvRead, KvStore};
use super::{Database, Output};
use crate::ast::{Expr, Insert, OnConflict};
use crate::catalog::{ID_PREFIX_LEN, IndexDef, TableSchema};
use crate::codec::key::encode_value;
use crate::codec::row::encode_row;
use crate::error::{QueryError, Result, exec_err, plan_err};
use crate::interrupt::{Interrupt, Ticker};
use crate::plan::{self, explain::sql_literal};
use crate::value::Value;

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
            return exec_err(format!(
                "NULL value in NOT NULL column {}.{}",
                t.name, col.name
            ));
        }
        return Ok(v);
    }
    let shown = sql_literal(&v);
    let from = v.type_name();
    match v.coerce_to(col.ty) {
        // One stored form per SQL value, as in keys: -0.0 is 0.0, every NaN the same NaN.
        Some(Value::Double(0.0)) => Ok(Value::Double(0.0)),
        Some(Value::Double(d)) if d.is_nan() => Ok(Value::Double(f64::NAN)),
        Some(v) => Ok(v),
        None => Err(QueryError::Exec(format!(
            "cannot store {from} value {shown} in column {}.{} of type {}",
            t.name, col.name, col.ty
        ))),
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
            return exec_err(format!(
                "NULL value in NOT NULL column {}.{}",
                t.name, col.name
            ));
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
            let Some(i) = t.column_index(c) else {
                return plan_err(format!("no column {c} in table {}", t.name));
            };
            named.push(i);
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
    )
}

/// Inserts rows of values (one per named column, or per table column when `columns` is
/// `None`) in one batch.
pub(super) fn insert_values<S: KvStore>(
    db: &Database<S>,
    table: &str,
    columns: Option<&[String]>,
    rows: Vec<Vec<Value>>,
    on_conflict: OnConflict,
) -> Result<Output> {
    let catalog = db.catalog();
    let t = plan::table(&catalog, table)?;
    let targets: Vec<usize> = match columns {
        None => (0..t.columns.len()).collect(),
        Some(cols) => {
            let mut v = Vec::with_capacity(cols.len());
            for c in cols {
                let Some(i) = t.column_index(c) else {
                    return plan_err(format!("no column {c} in table {}", t.name));
                };
                if v.contains(&i) {
                    return plan_err(format!("column {c} is named twice"));
                }
                v.push(i);
            }
            v
        }
    };
    let reader = db.store.reader();
    let mut pending: HashMap<Vec<u8>, Vec<Value>> = HashMap::with_capacity(rows.len());
    let mut old_index_keys: Vec<Vec<u8>> = Vec::new();
    let mut written = 0u64;
    let all = vec![true; t.columns.len()];
    for (n, values) in rows.into_iter().enumerate() {
        if values.len() != targets.len() {
            return Err(QueryError::Translate(format!(
                "VALUES row {} has {} values but table {} has {} columns",
                n + 1,
                values.len(),
                t.name,
                targets.len()
            )));
        }
        let mut row = vec![Value::Null; t.columns.len()];
        for (v, &c) in values.into_iter().zip(&targets) {
            if let Some(slot) = row.get_mut(c) {
                *slot = store_value(&t, c, v)?;
            }
        }
        check_not_null(&t, &row)?;
        let key = t.row_key(&row);
        check_key_size(&key, || format!("the primary key of a row of {}", t.name))?;
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
        pending.insert(key, row);
        written += 1;
    }
    drop(reader);
    let mut batch = S::Batch::default();
    for k in &old_index_keys {
        batch.delete(k);
    }
    let mut value = Vec::with_capacity(64);
    for (key, row) in &pending {
        value.clear();
        encode_row(&t, row, &mut value);
        batch.put(key, &value);
        for index in &t.indexes {
            let entry = index_key(index, row, key);
            check_key_size(&entry, || index_entry(&t, index))?;
            batch.put(&entry, &[]);
        }
    }
    db.store.write(batch)?;
    Ok(Output::Affected(written))
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
        let Some(i) = t.column_index(c) else {
            return plan_err(format!("no column {c} in table {}", t.name));
        };
        sets.push((i, plan::bind(e, Some(&t))?));
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
