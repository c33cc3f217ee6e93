//! Access-path selection: which keys a statement reads, given its WHERE conjuncts.
//!
//! Pushdown rules (`docs/sql.md`, "Pushdown"): a predicate is *sargable* when it compares a
//! column with a literal of the column's type (`=`, `<`, `<=`, `>`, `>=`, `BETWEEN`, `IN` on
//! the last key column, `LIKE 'prefix%'` on TEXT). In order of preference:
//! 1. every primary-key column equal → point get;
//! 2. key prefix equal and `IN` on the last key column → one point get per value;
//! 3. an equality on an indexed column → index range;
//! 4. key prefix equal and/or a range on the next key column → key range;
//! 5. a range on an indexed column → index range;
//! 6. otherwise a full scan of the table's key range.
//!
//! Conjuncts that the key bounds enforce exactly are dropped from the residual filter; the
//! rest are evaluated on each row while streaming.

use std::ops::Bound;

use crate::ast::{BinaryOp, Expr};
use crate::catalog::{IndexDef, TableSchema};
use crate::codec::key::{TAG_NULL, encode_bytes_prefix, encode_value, prefix_successor};
use crate::value::{DataType, Value};

/// A key range to scan.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyRange {
    /// Lower bound.
    pub lower: Bound<Vec<u8>>,
    /// Upper bound.
    pub upper: Bound<Vec<u8>>,
    /// Scan in descending key order.
    pub reverse: bool,
}

/// How rows are found.
#[derive(Debug, Clone, PartialEq)]
pub enum Access {
    /// One `get` of this row key.
    PointGet {
        /// The row key.
        key: Vec<u8>,
    },
    /// One `get` per row key, in key order (reversed when `reverse`).
    MultiGet {
        /// Row keys, sorted.
        keys: Vec<Vec<u8>>,
    },
    /// A scan of the table's rows in a key range (the whole table for a full scan).
    KeyRange {
        /// The range.
        range: KeyRange,
        /// True when no predicate bounds the scan.
        full: bool,
    },
    /// A scan of an index range, then a `get` of each row.
    IndexRange {
        /// The index.
        index: IndexDef,
        /// The range of index keys.
        range: KeyRange,
    },
}

/// The chosen access path, the conjuncts it enforces and those left for the filter.
#[derive(Debug)]
pub(crate) struct Chosen {
    pub access: Access,
    /// Conjuncts enforced by the bounds (shown by EXPLAIN).
    pub bounds: Vec<Expr>,
    /// Conjuncts still to evaluate.
    pub residual: Vec<Expr>,
    /// A bound that narrows the scan without enforcing a conjunct (`LIKE 'AC_T%'` scans
    /// the prefix `'AC'`), for EXPLAIN.
    pub narrowing: Option<String>,
}

#[derive(Debug, Clone)]
enum Sarg {
    Eq(Value),
    In(Vec<Value>),
    Lower(Value, bool),
    Upper(Value, bool),
    Prefix(String),
}

/// A literal usable as a bound on a column of type `ty`.
fn sarg_value(e: &Expr, ty: DataType) -> Option<Value> {
    let Expr::Literal(v) = e else { return None };
    match (v, ty) {
        (Value::Null, _) => None,
        // An integer beyond 2^53 that has no exact double: rounding it would move the bound
        // past rows the comparison (exact, `cmp_int_double`) keeps or drops, so the conjunct
        // stays a filter.
        (Value::Int(i), DataType::Double) if !exact_double(*i) => None,
        (Value::Int(_), DataType::BigInt | DataType::Double)
        | (Value::Double(_), DataType::Double | DataType::BigInt)
        | (Value::Text(_), DataType::Text)
        | (Value::Blob(_), DataType::Blob)
        | (Value::Bool(_), DataType::Boolean) => v.clone().coerce_to(ty),
        _ => None,
    }
}

/// True when `i` converts to a double without rounding.
#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    reason = "the round trip is the test"
)]
fn exact_double(i: i64) -> bool {
    (i as f64) as i128 == i128::from(i)
}

/// Classifies one conjunct as sargable predicates on a column: `(column, sargs, exact)`;
/// `exact` is false when the bounds only narrow the scan and the conjunct must stay in the
/// residual (a `LIKE` with more wildcards after the prefix).
fn classify(e: &Expr, table: &TableSchema) -> Option<(usize, Vec<Sarg>, bool)> {
    let ty = |c: usize| table.columns.get(c).map(|c| c.ty);
    match e {
        Expr::Binary { op, left, right } => {
            let (c, lit, op) = match (left.as_ref(), right.as_ref()) {
                (Expr::Field(c), lit) => (*c, lit, *op),
                (lit, Expr::Field(c)) => (*c, lit, op.flip()),
                _ => return None,
            };
            let v = sarg_value(lit, ty(c)?)?;
            let s = match op {
                BinaryOp::Eq => Sarg::Eq(v),
                BinaryOp::Lt => Sarg::Upper(v, false),
                BinaryOp::LtEq => Sarg::Upper(v, true),
                BinaryOp::Gt => Sarg::Lower(v, false),
                BinaryOp::GtEq => Sarg::Lower(v, true),
                _ => return None,
            };
            Some((c, vec![s], true))
        }
        Expr::Between {
            expr,
            low,
            high,
            negated: false,
        } => {
            let Expr::Field(c) = expr.as_ref() else {
                return None;
            };
            let t = ty(*c)?;
            let (lo, hi) = (sarg_value(low, t)?, sarg_value(high, t)?);
            Some((*c, vec![Sarg::Lower(lo, true), Sarg::Upper(hi, true)], true))
        }
        Expr::InList {
            expr,
            list,
            negated: false,
            ..
        } => {
            let Expr::Field(c) = expr.as_ref() else {
                return None;
            };
            let t = ty(*c)?;
            let vals = list
                .iter()
                .map(|e| sarg_value(e, t))
                .collect::<Option<Vec<_>>>()?;
            Some((*c, vec![Sarg::In(vals)], true))
        }
        Expr::Like {
            expr,
            pattern,
            negated: false,
        } => {
            let (Expr::Field(c), Expr::Literal(Value::Text(p))) = (expr.as_ref(), pattern.as_ref())
            else {
                return None;
            };
            if ty(*c)? != DataType::Text {
                return None;
            }
            let cut = p.find(['%', '_']).unwrap_or(p.len());
            let prefix = p.get(..cut)?;
            if prefix.is_empty() {
                return None;
            }
            let exact = p.get(cut..) == Some("%");
            let exact_match = cut == p.len();
            if exact_match {
                return Some((*c, vec![Sarg::Eq(Value::Text(prefix.to_owned()))], true));
            }
            Some((*c, vec![Sarg::Prefix(prefix.to_owned())], exact))
        }
        _ => None,
    }
}

/// Per-column constraints gathered from the conjuncts, with the conjunct each came from.
#[derive(Debug, Default, Clone)]
struct ColumnSargs {
    eq: Option<(Value, usize)>,
    in_list: Option<(Vec<Value>, usize)>,
    lower: Option<(Value, bool, usize)>,
    upper: Option<(Value, bool, usize)>,
    prefix: Option<(String, usize, bool)>,
}

impl ColumnSargs {
    fn has_range(&self) -> bool {
        self.lower.is_some() || self.upper.is_some() || self.prefix.is_some()
    }
}

fn succ(mut k: Vec<u8>) -> Option<Vec<u8>> {
    prefix_successor(&mut k).then_some(k)
}

/// Builds the range of keys starting with `base` whose next value satisfies `s`'s range
/// constraints; records the conjuncts used in `used`. `skip_nulls` excludes NULL values
/// (index entries) when there is no lower bound.
fn range_after(base: &[u8], s: &ColumnSargs, skip_nulls: bool, used: &mut Vec<usize>) -> KeyRange {
    let with = |v: &Value| {
        let mut k = base.to_vec();
        encode_value(&mut k, v);
        k
    };
    let mut lower = Bound::Included(base.to_vec());
    let mut upper = succ(base.to_vec()).map_or(Bound::Unbounded, Bound::Excluded);
    if let Some((p, i, exact)) = &s.prefix {
        let mut k = base.to_vec();
        encode_bytes_prefix(&mut k, p.as_bytes(), false);
        upper = succ(k.clone()).map_or(Bound::Unbounded, Bound::Excluded);
        lower = Bound::Included(k);
        if *exact {
            used.push(*i);
        }
    } else {
        if let Some((v, incl, i)) = &s.lower {
            let k = with(v);
            lower = if *incl {
                Bound::Included(k)
            } else {
                Bound::Included(succ(k).unwrap_or_else(|| base.to_vec()))
            };
            used.push(*i);
        } else if skip_nulls && s.upper.is_some() {
            let mut k = base.to_vec();
            k.push(TAG_NULL + 1);
            lower = Bound::Included(k);
        }
        if let Some((v, incl, i)) = &s.upper {
            let k = with(v);
            upper = if *incl {
                succ(k).map_or(Bound::Unbounded, Bound::Excluded)
            } else {
                Bound::Excluded(k)
            };
            used.push(*i);
        }
    }
    KeyRange {
        lower,
        upper,
        reverse: false,
    }
}

/// Chooses the access path for `conjuncts` (bound expressions) on `table`.
pub(crate) fn choose(table: &TableSchema, conjuncts: Vec<Expr>) -> Chosen {
    let mut cols: Vec<ColumnSargs> = vec![ColumnSargs::default(); table.columns.len()];
    for (i, e) in conjuncts.iter().enumerate() {
        let Some((c, sargs, exact)) = classify(e, table) else {
            continue;
        };
        let Some(cs) = cols.get_mut(c) else { continue };
        for s in sargs {
            match s {
                Sarg::Eq(v) if cs.eq.is_none() => cs.eq = Some((v, i)),
                Sarg::In(v) if cs.in_list.is_none() => cs.in_list = Some((v, i)),
                Sarg::Lower(v, incl) if cs.lower.is_none() => cs.lower = Some((v, incl, i)),
                Sarg::Upper(v, incl) if cs.upper.is_none() => cs.upper = Some((v, incl, i)),
                Sarg::Prefix(p) if cs.prefix.is_none() => cs.prefix = Some((p, i, exact)),
                _ => {}
            }
        }
    }
    // BETWEEN yields two sargs from one conjunct: only drop it when both bounds were used.
    let finish = |access: Access, used: Vec<usize>| {
        let mut bounds = Vec::new();
        let mut residual = Vec::new();
        for (i, e) in conjuncts.iter().enumerate() {
            let n = used.iter().filter(|&&u| u == i).count();
            let needed = match e {
                Expr::Between { .. } => 2,
                _ => 1,
            };
            if n >= needed {
                bounds.push(e.clone());
            } else {
                residual.push(e.clone());
            }
        }
        Chosen {
            access,
            bounds,
            residual,
            narrowing: None,
        }
    };

    let pk = &table.primary_key;
    let eq_prefix = pk
        .iter()
        .take_while(|&&c| cols.get(c).is_some_and(|s| s.eq.is_some()))
        .count();
    let mut base = table.key_prefix();
    let mut used = Vec::new();
    for &c in pk.iter().take(eq_prefix) {
        if let Some((v, i)) = cols.get(c).and_then(|s| s.eq.as_ref()) {
            encode_value(&mut base, v);
            used.push(*i);
        }
    }
    // 1. point get
    if eq_prefix == pk.len() {
        return finish(Access::PointGet { key: base }, used);
    }
    let next = pk.get(eq_prefix).copied();
    let next_sargs = next.and_then(|c| cols.get(c)).cloned().unwrap_or_default();
    // 2. multi get
    if eq_prefix + 1 == pk.len()
        && let Some((vals, i)) = &next_sargs.in_list
    {
        let mut keys: Vec<Vec<u8>> = vals
            .iter()
            .map(|v| {
                let mut k = base.clone();
                encode_value(&mut k, v);
                k
            })
            .collect();
        keys.sort();
        keys.dedup();
        used.push(*i);
        return finish(Access::MultiGet { keys }, used);
    }
    // 3. index equality
    for index in &table.indexes {
        if let Some((v, i)) = cols.get(index.column).and_then(|s| s.eq.as_ref()) {
            let mut k = index.key_prefix();
            encode_value(&mut k, v);
            let range = range_after(&k, &ColumnSargs::default(), false, &mut Vec::new());
            return finish(
                Access::IndexRange {
                    index: index.clone(),
                    range,
                },
                vec![*i],
            );
        }
    }
    // 4. key range
    if eq_prefix > 0 || next_sargs.has_range() {
        let range = range_after(&base, &next_sargs, false, &mut used);
        let mut chosen = finish(Access::KeyRange { range, full: false }, used);
        chosen.narrowing = narrowing(table, next, &next_sargs);
        return chosen;
    }
    // 5. index range
    for index in &table.indexes {
        if let Some(s) = cols.get(index.column).filter(|s| s.has_range()) {
            let mut used = Vec::new();
            let range = range_after(&index.key_prefix(), s, true, &mut used);
            let mut chosen = finish(
                Access::IndexRange {
                    index: index.clone(),
                    range,
                },
                used,
            );
            chosen.narrowing = narrowing(table, Some(index.column), s);
            return chosen;
        }
    }
    // 6. full scan
    let range = range_after(
        &table.key_prefix(),
        &ColumnSargs::default(),
        false,
        &mut used,
    );
    finish(Access::KeyRange { range, full: true }, used)
}

/// Describes an inexact `LIKE` prefix bound on column `c`.
fn narrowing(table: &TableSchema, c: Option<usize>, s: &ColumnSargs) -> Option<String> {
    let (p, _, exact) = s.prefix.as_ref()?;
    if *exact {
        return None;
    }
    let col = table.columns.get(c?)?;
    Some(format!(
        "{} starts with '{}'",
        col.name,
        p.replace('\'', "''")
    ))
}

/// A full scan of `index` (NULLs included), for ORDER BY on the indexed column with LIMIT.
pub(crate) fn full_index(index: &IndexDef) -> Access {
    let range = range_after(
        &index.key_prefix(),
        &ColumnSargs::default(),
        false,
        &mut Vec::new(),
    );
    Access::IndexRange {
        index: index.clone(),
        range,
    }
}

/// The column order rows come out in for `access` (before reversing).
pub(crate) fn natural_order(table: &TableSchema, access: &Access) -> Vec<usize> {
    match access {
        Access::IndexRange { index, .. } => std::iter::once(index.column)
            .chain(table.primary_key.iter().copied())
            .collect(),
        _ => table.primary_key.clone(),
    }
}

/// Whether rows in `natural` order (with `fixed` columns constant) satisfy `order`
/// (`(column, desc)` keys): `Some(reverse)` when they do, read forward or backward.
pub(crate) fn order_satisfied(
    natural: &[usize],
    fixed: &[usize],
    order: &[(usize, bool)],
) -> Option<bool> {
    let mut dir: Option<bool> = None;
    let mut pos = 0;
    for &(c, desc) in order {
        if fixed.contains(&c) {
            continue;
        }
        while natural.get(pos).is_some_and(|n| fixed.contains(n)) {
            pos += 1;
        }
        if natural.get(pos) != Some(&c) {
            return None;
        }
        pos += 1;
        match dir {
            None => dir = Some(desc),
            Some(d) if d != desc => return None,
            Some(_) => {}
        }
    }
    Some(dir.unwrap_or(false))
}
