//! CREATE/DROP TABLE and INDEX, DESCRIBE.
//!
//! Catalog changes are one batch. An index is built under the statement lock as one bulk
//! write ([`KvStore::bulk`]: sorted and ingested by the engine) and becomes visible only when
//! its catalog record is written after it. A drop changes the catalog under the lock; then,
//! with the lock released (nothing can reach the dropped id), [`delete_prefix`] removes the
//! store's tables holding only its keys ([`KvStore::forget_range`]) and deletes the rest in
//! chunks of [`CHUNK_ENTRIES`]. Ids are never reused, so entries a crash leaves behind are
//! unreachable garbage, never wrong answers (and [`remove_orphans`] deletes them at the next
//! open).

use std::ops::Bound;
use std::sync::Arc;

use super::source::{decode, prefix_cursor};
use super::store::{KvBatch, KvBulk, KvRead, KvStore, ScanCache};
use super::write::index_key;
use super::{Database, Output};
use crate::ast::Statement;
use crate::catalog::FORMAT_VERSION;
use crate::catalog::{
    Catalog, Column, INDEX_PREFIX, IndexDef, META_KEY, TABLE_PREFIX, TableSchema, table_record_key,
};
use crate::codec::key::{decode_id, encode_id, prefix_successor};
use crate::codec::schema::{encode_meta, encode_table};
use crate::error::{QueryError, Result, plan_err};
use crate::interrupt::{Interrupt, Ticker};
use crate::plan;
use crate::translate::quote_ident;
use crate::value::Value;

/// Entries per write batch when deleting an index or a table's rows.
pub const CHUNK_ENTRIES: usize = 50_000;

/// A drop that deleted at least this many entries (besides the tables removed whole) then has
/// the store rewrite the dropped key range ([`KvStore::reclaim`]), so the space is freed and
/// later opens and scans do not step over its tombstones. Smaller drops leave that to the background compactions (a rewrite
/// costs whole tables at the range's edges). Measured in docs/sql.md, "DROP frees the space".
pub const RECLAIM_MIN_ENTRIES: usize = CHUNK_ENTRIES;

/// As [`RECLAIM_MIN_ENTRIES`], in bytes of keys and values deleted: a few large rows (400 of
/// 100 KB, which a tester dropped) are worth the compaction too, or their tombstones could sit
/// in the memtable, with the values on disk, until the next flush.
pub const RECLAIM_MIN_BYTES: usize = 16 << 20;

/// Runs a DDL statement under the caller's statement lock. A drop only changes the catalog
/// here and pushes the key prefixes of what it dropped to `dead`: the caller deletes them
/// with [`delete_prefix`] after releasing the lock (no statement can reach them any more, so
/// other statements need not wait for the deletes and their compaction).
pub(super) fn run<S: KvStore>(
    db: &Database<S>,
    stmt: &Statement,
    dead: &mut Vec<Vec<u8>>,
    interrupt: &Interrupt,
) -> Result<Output> {
    let catalog = db.catalog();
    match stmt {
        Statement::CreateTable {
            name,
            columns,
            primary_key,
            if_not_exists,
        } => {
            if catalog.table(name).is_some() {
                return if *if_not_exists {
                    Ok(Output::Done("CREATE TABLE"))
                } else {
                    Err(QueryError::AlreadyExists {
                        kind: "table",
                        name: name.clone(),
                    })
                };
            }
            if primary_key.is_empty() {
                return Err(QueryError::Translate(format!(
                    "table {name} needs a PRIMARY KEY"
                )));
            }
            let mut pk = Vec::new();
            for p in primary_key {
                let Some(i) = columns.iter().position(|c| c.name == *p) else {
                    return plan_err(format!("PRIMARY KEY column {p} is not a column of {name}"));
                };
                if pk.contains(&i) {
                    return plan_err(format!("PRIMARY KEY names column {p} twice"));
                }
                pk.push(i);
            }
            let cols = columns
                .iter()
                .map(|c| Column {
                    name: c.name.clone(),
                    ty: c.ty,
                    not_null: c.not_null,
                })
                .collect();
            let t = TableSchema::new(name.clone(), catalog.next_id, cols, pk);
            let mut next = (*catalog).clone();
            next.next_id += 1;
            let mut batch = S::Batch::default();
            batch.put(&META_KEY, &encode_meta(FORMAT_VERSION, next.next_id));
            batch.put(&table_record_key(name), &encode_table(&t));
            db.store.write(batch)?;
            next.tables.insert(name.clone(), Arc::new(t));
            db.set_catalog(next);
            Ok(Output::Done("CREATE TABLE"))
        }
        Statement::DropTable { name, if_exists } => {
            let Some(t) = catalog.table(name).cloned() else {
                return if *if_exists {
                    Ok(Output::Done("DROP TABLE"))
                } else {
                    Err(QueryError::NoSuchTable(name.clone()))
                };
            };
            let mut batch = S::Batch::default();
            batch.delete(&table_record_key(name));
            db.store.write(batch)?;
            let mut next = (*catalog).clone();
            next.tables.remove(name);
            db.set_catalog(next);
            dead.push(t.key_prefix());
            dead.extend(t.indexes.iter().map(IndexDef::key_prefix));
            Ok(Output::Done("DROP TABLE"))
        }
        Statement::CreateIndex {
            name,
            table,
            column,
            if_not_exists,
        } => {
            if catalog.index_owner(name).is_some() {
                return if *if_not_exists {
                    Ok(Output::Done("CREATE INDEX"))
                } else {
                    Err(QueryError::AlreadyExists {
                        kind: "index",
                        name: name.clone(),
                    })
                };
            }
            let t = plan::table(&catalog, table)?;
            let c = plan::column(&t, column)?;
            let index = IndexDef {
                name: name.clone(),
                id: catalog.next_id,
                column: c,
            };
            // Reserve the id first, so a crash mid-build can never reuse it.
            let mut next: Catalog = (*catalog).clone();
            next.next_id += 1;
            let mut batch = S::Batch::default();
            batch.put(&META_KEY, &encode_meta(FORMAT_VERSION, next.next_id));
            db.store.write(batch)?;
            // Nothing of the index is visible when the build fails; a crash between the
            // build and the table record below leaves entries under an id nothing uses,
            // which `remove_orphans` deletes at the next open.
            build_index(db, &t, &index, interrupt)?;
            let mut t2 = (*t).clone();
            t2.indexes.push(index);
            let mut batch = S::Batch::default();
            batch.put(&table_record_key(&t2.name), &encode_table(&t2));
            db.store.write(batch)?;
            next.tables.insert(t2.name.clone(), Arc::new(t2));
            db.set_catalog(next);
            Ok(Output::Done("CREATE INDEX"))
        }
        Statement::DropIndex { name, if_exists } => {
            let Some(t) = catalog.index_owner(name).cloned() else {
                return if *if_exists {
                    Ok(Output::Done("DROP INDEX"))
                } else {
                    Err(QueryError::NoSuchIndex(name.clone()))
                };
            };
            let mut t2 = (*t).clone();
            let Some(pos) = t2.indexes.iter().position(|i| i.name == *name) else {
                return Err(QueryError::NoSuchIndex(name.clone()));
            };
            let index = t2.indexes.remove(pos);
            let mut batch = S::Batch::default();
            batch.put(&table_record_key(&t2.name), &encode_table(&t2));
            db.store.write(batch)?;
            let mut next = (*catalog).clone();
            next.tables.insert(t2.name.clone(), Arc::new(t2));
            db.set_catalog(next);
            dead.push(index.key_prefix());
            Ok(Output::Done("DROP INDEX"))
        }
        _ => plan_err("not a DDL statement"),
    }
}

/// Writes the index entries of every row of `t` as one bulk write (sorted and ingested by the
/// engine: written once, visible together when this returns Ok, none of them on an error,
/// [`QueryError::Interrupted`](crate::QueryError::Interrupted) included).
fn build_index<S: KvStore>(
    db: &Database<S>,
    t: &TableSchema,
    index: &IndexDef,
    interrupt: &Interrupt,
) -> Result<()> {
    let reader = db.store.reader();
    let mut needed = vec![false; t.columns.len()];
    if let Some(n) = needed.get_mut(index.column) {
        *n = true;
    }
    let mut row = vec![Value::Null; t.columns.len()];
    let mut bulk = db.store.bulk()?;
    let mut rows = prefix_cursor(&reader, &t.key_prefix(), ScanCache::NoFill);
    let mut ticker = Ticker::new(interrupt);
    while let Some((k, v)) = rows.next_entry()? {
        ticker.tick()?;
        decode(t, k, v, &needed, &mut row)?;
        let entry = index_key(index, &row, k);
        super::write::check_key_size(&entry, || super::write::index_entry(t, index))?;
        bulk.put(&entry, &[])?;
    }
    drop(rows);
    // Sorting what was read takes a while too: the last moment to stop with nothing written.
    interrupt.check()?;
    db.store.finish_bulk(bulk)?;
    Ok(())
}

/// Deletes the rows and index entries under ids the catalog has handed out (below its next
/// id) but no table or index uses any more: what a crash leaves of a `CREATE INDEX` cut short
/// (entries written before the table record naming the index) and of the chunked deletes of
/// `DROP TABLE` and `DROP INDEX` (docs/format/keys.md). Keys under ids at or past the next id
/// were not written by the SQL layer and are left alone. Costs one seek per id present, so a
/// database without leftovers pays one per table and index. Returns how many ids it cleaned.
///
/// # Errors
/// Store errors reading or deleting.
pub(super) fn remove_orphans<S: KvStore>(db: &Database<S>) -> Result<usize> {
    let catalog = db.catalog();
    let mut live = std::collections::HashSet::new();
    for t in catalog.tables.values() {
        live.insert((TABLE_PREFIX, t.id));
        for index in &t.indexes {
            live.insert((INDEX_PREFIX, index.id));
        }
    }
    let mut cleaned = 0;
    for prefix in [TABLE_PREFIX, INDEX_PREFIX] {
        let mut from = 0_u32;
        while from < catalog.next_id {
            let mut lo = vec![prefix];
            encode_id(&mut lo, from);
            let hi = [prefix.saturating_add(1)];
            let first = {
                let reader = db.store.reader();
                let mut cursor = reader.cursor(
                    Bound::Included(lo.as_slice()),
                    Bound::Excluded(&hi[..]),
                    false,
                    ScanCache::NoFill,
                );
                cursor.next_entry()?.map(|(k, _)| k.to_vec())
            };
            let Some(key) = first else { break };
            // A key too short to hold an id (not written by the SQL layer) reads as the id its
            // bytes begin; it is skipped, never deleted, as `delete_prefix` takes full ids.
            let mut id_bytes = [0_u8; 4];
            for (slot, b) in id_bytes.iter_mut().zip(key.iter().skip(1)) {
                *slot = *b;
            }
            let id = decode_id(id_bytes);
            if id >= catalog.next_id {
                break;
            }
            if !live.contains(&(prefix, id)) {
                let mut dead = vec![prefix];
                encode_id(&mut dead, id);
                delete_prefix(db, &dead)?;
                cleaned += 1;
            }
            let Some(next) = id.checked_add(1) else { break };
            from = next;
        }
    }
    Ok(cleaned)
}

/// Deletes every key under `prefix`, an id that left the catalog (no reader asks for it, and
/// ids are never reused): first the store's tables holding nothing else, without tombstones
/// ([`KvStore::forget_range`]), then what is left by deletes in chunks, then, after many
/// deletes, a compaction of the range ([`KvStore::reclaim`]).
pub(super) fn delete_prefix<S: KvStore>(db: &Database<S>, prefix: &[u8]) -> Result<()> {
    let mut hi = prefix.to_vec();
    let upper = if prefix_successor(&mut hi) {
        Bound::Excluded(hi.as_slice())
    } else {
        Bound::Unbounded
    };
    if let Bound::Excluded(end) = upper {
        db.store.forget_range(prefix, end)?;
    }
    let reader = db.store.reader();
    let mut batch = S::Batch::default();
    let (mut deleted, mut deleted_bytes) = (0_usize, 0_usize);
    let mut entries = reader.cursor(Bound::Included(prefix), upper, false, ScanCache::NoFill);
    while let Some((k, v)) = entries.next_entry()? {
        batch.delete(k);
        deleted += 1;
        deleted_bytes = deleted_bytes.saturating_add(k.len() + v.len());
        if batch.len() >= CHUNK_ENTRIES {
            db.store.write(std::mem::take(&mut batch))?;
        }
    }
    db.store.write(batch)?;
    drop(entries);
    drop(reader);
    if deleted >= RECLAIM_MIN_ENTRIES || deleted_bytes >= RECLAIM_MIN_BYTES {
        let end = match upper {
            Bound::Excluded(hi) => Some(hi),
            _ => None,
        };
        db.store.reclaim(prefix, end)?;
    }
    Ok(())
}

pub(super) fn describe(catalog: &Catalog, table: &str) -> Result<Output> {
    let t = plan::table(catalog, table)?;
    let rows = t
        .columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let key = t
                .primary_key
                .iter()
                .position(|&k| k == i)
                .map_or(Value::Null, |p| {
                    Value::Int(i64::try_from(p + 1).unwrap_or(0))
                });
            let indexes: Vec<&str> = t
                .indexes
                .iter()
                .filter(|x| x.column == i)
                .map(|x| x.name.as_str())
                .collect();
            vec![
                Value::Text(c.name.clone()),
                Value::Text(c.ty.to_string()),
                Value::Bool(!c.not_null),
                key,
                if indexes.is_empty() {
                    Value::Null
                } else {
                    Value::Text(indexes.join(", "))
                },
            ]
        })
        .collect();
    Ok(Output::Rows {
        columns: ["column", "type", "nullable", "primary_key", "indexes"]
            .map(str::to_owned)
            .to_vec(),
        rows,
    })
}

/// `CREATE TABLE` text for `t` (what `.schema` prints), with its `CREATE INDEX` lines; names
/// are quoted where needed ([`quote_ident`]), so the text runs again as it is.
pub fn schema_sql(t: &TableSchema) -> String {
    let mut cols: Vec<String> = t
        .columns
        .iter()
        .map(|c| {
            format!(
                "  {} {}{}",
                quote_ident(&c.name),
                c.ty,
                if c.not_null && !t.is_key_column(t.column_index(&c.name).unwrap_or(0)) {
                    " NOT NULL"
                } else {
                    ""
                }
            )
        })
        .collect();
    let pk: Vec<String> = t
        .primary_key
        .iter()
        .filter_map(|&c| t.columns.get(c).map(|c| quote_ident(&c.name)))
        .collect();
    cols.push(format!("  PRIMARY KEY ({})", pk.join(", ")));
    let table = quote_ident(&t.name);
    let mut s = format!("CREATE TABLE {table} (\n{}\n);", cols.join(",\n"));
    for i in &t.indexes {
        let col = t
            .columns
            .get(i.column)
            .map_or("?".to_owned(), |c| quote_ident(&c.name));
        s.push_str(&format!(
            "\nCREATE INDEX {} ON {table} ({col});",
            quote_ident(&i.name)
        ));
    }
    s
}
