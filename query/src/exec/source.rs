//! Reading rows for a [`ScanPlan`]: point gets, key-range scans and index scans, decoding
//! only the columns the statement needs. Streaming: one row at a time, into a reused buffer.

use std::ops::Bound;

use bytes::Bytes;

use super::store::{KvIter, KvRead};
use crate::catalog::{ID_PREFIX_LEN, TableSchema};
use crate::codec::key::{decode_value, skip_value};
use crate::codec::{CodecError, row::decode_row};
use crate::error::Result;
use crate::plan::{Access, KeyRange, ScanPlan};
use crate::value::Value;

fn bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn scan<'r, R: KvRead>(reader: &'r R, r: &KeyRange) -> KvIter<'r> {
    reader.scan(bound(&r.lower), bound(&r.upper), r.reverse)
}

enum Kind<'r> {
    Keys(std::vec::IntoIter<Vec<u8>>),
    Scan(KvIter<'r>),
    /// An index scan; with `index_only`, rows come from the entries alone.
    Index {
        iter: KvIter<'r>,
        column: usize,
        index_only: bool,
    },
}

/// Yields the rows of a scan plan, unfiltered.
pub(crate) struct RowSource<'r, R: KvRead> {
    reader: &'r R,
    table: &'r TableSchema,
    needed: &'r [bool],
    kind: Kind<'r>,
}

impl<'r, R: KvRead> RowSource<'r, R> {
    pub(crate) fn new(reader: &'r R, plan: &'r ScanPlan) -> Self {
        let kind = match &plan.access {
            Access::PointGet { key } => Kind::Keys(vec![key.clone()].into_iter()),
            Access::MultiGet { keys } => Kind::Keys(keys.clone().into_iter()),
            Access::KeyRange { range, .. } => Kind::Scan(scan(reader, range)),
            Access::IndexRange { range, index } => Kind::Index {
                iter: scan(reader, range),
                column: index.column,
                index_only: plan.index_only(),
            },
        };
        RowSource {
            reader,
            table: &plan.table,
            needed: &plan.needed,
            kind,
        }
    }

    /// Reads the next row into `row` (one slot per column; unneeded columns are NULL) and
    /// returns its key, or `None` at the end.
    pub(crate) fn next_row(&mut self, row: &mut [Value]) -> Result<Option<Bytes>> {
        loop {
            let (key, value) = match &mut self.kind {
                Kind::Keys(keys) => {
                    let Some(key) = keys.next() else {
                        return Ok(None);
                    };
                    match self.reader.get(&key)? {
                        Some(v) => (Bytes::from(key), v),
                        None => continue,
                    }
                }
                Kind::Scan(iter) => match iter.next() {
                    Some(kv) => kv?,
                    None => return Ok(None),
                },
                Kind::Index {
                    iter,
                    column,
                    index_only,
                } => {
                    let Some(kv) = iter.next() else {
                        return Ok(None);
                    };
                    let (ikey, _) = kv?;
                    let rest = ikey.get(ID_PREFIX_LEN..).unwrap_or_default();
                    let skip = if *index_only && self.needed.get(*column) == Some(&true) {
                        let (v, used) = decode_value(rest)?;
                        if let Some(slot) = row.get_mut(*column) {
                            *slot = v;
                        }
                        used
                    } else {
                        skip_value(rest)?
                    };
                    let mut key = self.table.key_prefix();
                    key.extend_from_slice(rest.get(skip..).unwrap_or_default());
                    if *index_only {
                        decode_key(self.table, &key, self.needed, row)?;
                        return Ok(Some(Bytes::from(key)));
                    }
                    match self.reader.get(&key)? {
                        Some(v) => (Bytes::from(key), v),
                        None => {
                            return Err(CodecError::key(0, "index entry without a row").into());
                        }
                    }
                }
            };
            decode(self.table, &key, &value, self.needed, row)?;
            return Ok(Some(key));
        }
    }
}

/// Decodes a row from its key and value into `row`.
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

/// Decodes the primary-key columns of a row key into `row`.
fn decode_key(table: &TableSchema, key: &[u8], needed: &[bool], row: &mut [Value]) -> Result<()> {
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
