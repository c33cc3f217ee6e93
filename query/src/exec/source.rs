//! Reading rows for a [`ScanPlan`]: point gets, key-range scans and index scans, filtered by
//! the plan's residual filter and decoding only the columns the statement needs. Streaming:
//! one row at a time, into a reused buffer.
//!
//! Scans read through a lending [`KvCursor`], so no key or value is copied or allocated per
//! entry. A row is decoded in two steps: first the columns the filter reads, then, only for
//! rows that pass, the other needed columns (a TEXT column is not copied out of a row the
//! filter rejects). An index-only scan (see [`ScanPlan::index_only`]) decodes rows from the
//! index entries alone.

use std::ops::Bound;

use super::eval::passes;
use super::store::{KvCursor, KvRead, ScanCache};
use crate::ast::Expr;
use crate::catalog::{ID_PREFIX_LEN, TABLE_PREFIX, TableSchema};
use crate::codec::key::{decode_value, encode_id, prefix_successor, skip_value};
use crate::codec::{CodecError, row::decode_row};
use crate::error::Result;
use crate::interrupt::{Interrupt, Ticker};
use crate::plan::{Access, KeyRange, ScanPlan, mark_fields};
use crate::value::Value;

/// `b` as a borrowed bound.
pub(crate) fn bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// A forward cursor over every key that starts with `prefix` (a table's or an index's).
pub(crate) fn prefix_cursor<'r, R: KvRead>(
    reader: &'r R,
    prefix: &[u8],
    cache: ScanCache,
) -> KvCursor<'r> {
    let mut hi = prefix.to_vec();
    let upper = if prefix_successor(&mut hi) {
        Bound::Excluded(hi.as_slice())
    } else {
        Bound::Unbounded
    };
    reader.cursor(Bound::Included(prefix), upper, false, cache)
}

fn cursor<'r, R: KvRead>(reader: &'r R, r: &KeyRange, cache: ScanCache) -> KvCursor<'r> {
    reader.cursor(bound(&r.lower), bound(&r.upper), r.reverse, cache)
}

enum Kind<'r> {
    /// Point gets of these keys, from position `next` on.
    Keys {
        keys: &'r [Vec<u8>],
        next: usize,
    },
    Scan(KvCursor<'r>),
    /// An index scan; with `index_only`, rows come from the entries alone.
    Index {
        cursor: KvCursor<'r>,
        column: usize,
        index_only: bool,
    },
}

/// Columns of a table to decode (`mask[c]`), and whether any of them lies in the row key or
/// in the row value: worked out once per statement, so each row skips the part it does not
/// need without looking at the mask.
struct Columns {
    mask: Vec<bool>,
    in_key: bool,
    in_value: bool,
}

impl Columns {
    fn new(table: &TableSchema, mask: Vec<bool>) -> Self {
        let wanted = |c: usize| mask.get(c).copied().unwrap_or(true);
        let in_key = table.primary_key.iter().any(|&c| wanted(c));
        let in_value = table.value_columns().iter().any(|&c| wanted(c));
        Columns {
            mask,
            in_key,
            in_value,
        }
    }

    /// Whether column `c` is to be decoded.
    fn has(&self, c: usize) -> bool {
        self.mask.get(c) == Some(&true)
    }

    /// [`decode`] of these columns.
    fn decode(
        &self,
        table: &TableSchema,
        key: &[u8],
        value: &[u8],
        row: &mut [Value],
    ) -> Result<()> {
        if self.in_key {
            decode_key(table, key, &self.mask, row)?;
        }
        if self.in_value {
            decode_row(table, value, &self.mask, row)?;
        }
        Ok(())
    }
}

/// Yields the rows of a scan plan that pass its residual filter.
pub(crate) struct RowSource<'r, R: KvRead> {
    reader: &'r R,
    table: &'r TableSchema,
    filter: Option<&'r Expr>,
    /// Needed columns the filter reads: decoded before the filter runs.
    first: Columns,
    /// The other needed columns: decoded for rows that pass.
    rest: Columns,
    kind: Kind<'r>,
    /// Whether `next_row` returns row keys (writes need them; SELECT does not).
    with_keys: bool,
    /// An index-only scan must rebuild row keys to decode primary-key columns.
    key_columns_needed: bool,
    /// The current row's key (reused across rows).
    key: Vec<u8>,
    /// Counts the entries read, to stop when the statement is interrupted.
    ticker: Ticker<'r>,
}

impl<'r, R: KvRead> RowSource<'r, R> {
    /// Rows of `plan` read from `reader`; `with_keys` makes [`RowSource::next_row`] return
    /// each row's key (it costs a copy per row). Reading stops with
    /// [`QueryError::Interrupted`](crate::QueryError::Interrupted) once `interrupt` is set.
    pub(crate) fn new(
        reader: &'r R,
        plan: &'r ScanPlan,
        with_keys: bool,
        interrupt: &'r Interrupt,
    ) -> Self {
        let kind = match &plan.access {
            Access::PointGet { key } => Kind::Keys {
                keys: std::slice::from_ref(key),
                next: 0,
            },
            Access::MultiGet { keys } => Kind::Keys { keys, next: 0 },
            // A full scan reads every block of the table once: it should not evict the
            // blocks point lookups use (with a LIMIT it reads few blocks either way).
            Access::KeyRange { range, full } => Kind::Scan(cursor(
                reader,
                range,
                if *full {
                    ScanCache::NoFill
                } else {
                    ScanCache::Fill
                },
            )),
            Access::IndexRange { range, index } => Kind::Index {
                cursor: cursor(reader, range, ScanCache::Fill),
                column: index.column,
                index_only: plan.index_only(),
            },
        };
        let filter = plan.filter.as_ref();
        let mut first = vec![false; plan.needed.len()];
        if let Some(f) = filter {
            mark_fields(f, &mut first);
        }
        let rest = plan
            .needed
            .iter()
            .zip(&first)
            .map(|(&n, &f)| n && !f)
            .collect();
        let key_columns_needed =
            plan.table.primary_key.iter().any(|&c| {
                plan.needed.get(c).copied().unwrap_or(true) || first.get(c) == Some(&true)
            });
        let (first, rest) = (
            Columns::new(&plan.table, first),
            Columns::new(&plan.table, rest),
        );
        RowSource {
            reader,
            table: &plan.table,
            filter,
            first,
            rest,
            kind,
            with_keys,
            key_columns_needed,
            key: Vec::with_capacity(64),
            ticker: Ticker::new(interrupt),
        }
    }

    /// Reads the next row that passes the filter into `row` (one slot per column; columns
    /// the statement does not need are left untouched, NULL in a fresh buffer) and returns
    /// its key (empty unless built `with_keys`), or `None` at the end.
    pub(crate) fn next_row(&mut self, row: &mut [Value]) -> Result<Option<&[u8]>> {
        let RowSource {
            reader,
            table,
            filter,
            first,
            rest,
            kind,
            with_keys,
            key_columns_needed,
            key,
            ticker,
        } = self;
        let (table, filter, first, rest): (&TableSchema, Option<&Expr>, &Columns, &Columns) =
            (table, *filter, first, rest);
        let decode_both = |key: &[u8], value: &[u8], row: &mut [Value]| -> Result<bool> {
            if let Some(f) = filter {
                first.decode(table, key, value, row)?;
                if !passes(f, row)? {
                    return Ok(false);
                }
            }
            rest.decode(table, key, value, row)?;
            Ok(true)
        };
        match kind {
            Kind::Keys { keys, next } => {
                while let Some(k) = keys.get(*next) {
                    *next += 1;
                    ticker.tick()?;
                    if let Some(v) = reader.get(k)?
                        && decode_both(k, &v, row)?
                    {
                        return Ok(Some(k.as_slice()));
                    }
                }
                Ok(None)
            }
            Kind::Scan(cursor) => {
                while let Some((k, v)) = cursor.next_entry()? {
                    ticker.tick()?;
                    if decode_both(k, v, row)? {
                        key.clear();
                        if *with_keys {
                            key.extend_from_slice(k);
                        }
                        return Ok(Some(key.as_slice()));
                    }
                }
                Ok(None)
            }
            Kind::Index {
                cursor,
                column,
                index_only,
            } => {
                while let Some((ikey, _)) = cursor.next_entry()? {
                    ticker.tick()?;
                    let entry = ikey.get(ID_PREFIX_LEN..).unwrap_or_default();
                    let wanted = first.has(*column) || rest.has(*column);
                    let skip = if *index_only && wanted {
                        let (v, used) = decode_value(entry)?;
                        if let Some(slot) = row.get_mut(*column) {
                            *slot = v;
                        }
                        used
                    } else {
                        skip_value(entry)?
                    };
                    key.clear();
                    if *index_only && !*with_keys && !*key_columns_needed {
                        // Nothing reads the row key: count the entry as it is.
                        if let Some(f) = filter
                            && !passes(f, row)?
                        {
                            continue;
                        }
                        return Ok(Some(key.as_slice()));
                    }
                    key.push(TABLE_PREFIX);
                    encode_id(key, table.id);
                    key.extend_from_slice(entry.get(skip..).unwrap_or_default());
                    if *index_only {
                        if let Some(f) = filter {
                            decode_key(table, key, &first.mask, row)?;
                            if !passes(f, row)? {
                                continue;
                            }
                        }
                        decode_key(table, key, &rest.mask, row)?;
                        return Ok(Some(key.as_slice()));
                    }
                    let Some(v) = reader.get(key)? else {
                        return Err(CodecError::key(0, "index entry without a row").into());
                    };
                    if decode_both(key, &v, row)? {
                        return Ok(Some(key.as_slice()));
                    }
                }
                Ok(None)
            }
        }
    }
}

/// Decodes the columns of a row marked in `needed` from its key and value into `row`.
pub(crate) fn decode(
    table: &TableSchema,
    key: &[u8],
    value: &[u8],
    needed: &[bool],
    row: &mut [Value],
) -> Result<()> {
    decode_key(table, key, needed, row)?;
    decode_row(table, value, needed, row)?;
    Ok(())
}

/// Decodes the primary-key columns marked in `needed` of a row key into `row`.
pub(crate) fn decode_key(
    table: &TableSchema,
    key: &[u8],
    needed: &[bool],
    row: &mut [Value],
) -> Result<()> {
    // Nothing of the key is read: skip decoding (and validating) it.
    if !table
        .primary_key
        .iter()
        .any(|&c| needed.get(c).copied().unwrap_or(true))
    {
        return Ok(());
    }
    let mut rest = key
        .get(ID_PREFIX_LEN..)
        .ok_or(CodecError::key(0, "row key shorter than its prefix"))?;
    for &c in &table.primary_key {
        if needed.get(c).copied().unwrap_or(true) {
            let (v, used) = decode_value(rest)?;
            if let Some(slot) = row.get_mut(c) {
                *slot = v;
            }
            rest = rest.get(used..).unwrap_or_default();
        } else {
            let used = skip_value(rest)?;
            rest = rest.get(used..).unwrap_or_default();
        }
    }
    if !rest.is_empty() {
        return Err(
            CodecError::key(key.len() - rest.len(), "bytes left after the primary key").into(),
        );
    }
    Ok(())
}
