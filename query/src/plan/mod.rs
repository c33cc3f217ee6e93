//! Planning: binds names to columns, chooses the access path ([`access`]) and shapes the
//! rest of a query (filter, aggregation, sort, limit). Pure: reads only the catalog.

pub mod access;
pub mod explain;
mod types;

use std::sync::{Arc, Mutex, PoisonError};

use crate::ast::{AggFunc, Expr, OrderKey, ScalarFunc, Select, SelectItem};
use crate::catalog::{Catalog, TableSchema};
use crate::error::{QueryError, Result, plan_err};
use crate::value::{DataType, Value};

pub use access::{Access, KeyRange};

/// How the rows of one table are read and filtered.
#[derive(Debug, Clone)]
pub struct ScanPlan {
    /// The table.
    pub table: Arc<TableSchema>,
    /// The access path.
    pub access: Access,
    /// Conjuncts the access path enforces (for EXPLAIN).
    pub bounds: Vec<Expr>,
    /// A bound that narrows the scan without enforcing a conjunct (for EXPLAIN).
    pub narrowing: Option<String>,
    /// The residual filter, evaluated on each row.
    pub filter: Option<Expr>,
    /// Which columns the statement reads; others are not decoded.
    pub needed: Vec<bool>,
}

impl ScanPlan {
    /// True for an index scan whose statement needs no column beyond the indexed one and
    /// the primary key: rows are decoded from the index entries alone, without a `get`.
    pub fn index_only(&self) -> bool {
        let Access::IndexRange { index, .. } = &self.access else {
            return false;
        };
        self.needed
            .iter()
            .enumerate()
            .all(|(c, &n)| !n || c == index.column || self.table.is_key_column(c))
    }
}

/// How the result is ordered.
#[derive(Debug, Clone, PartialEq)]
pub enum Sort {
    /// No ORDER BY.
    None,
    /// ORDER BY is satisfied by the access path's key order: rows stream.
    ByScan,
    /// Rows are sorted by these `(expression, descending)` keys after the scan (kept to
    /// `offset + limit` rows with a bounded heap when there is a LIMIT).
    Explicit(Vec<(Expr, bool)>),
}

/// The part after the scan.
#[derive(Debug, Clone)]
pub enum Shape {
    /// One output row per input row.
    Simple {
        /// Output expressions.
        projections: Vec<Expr>,
    },
    /// Grouping and aggregates. Expressions after grouping (`having`, `projections`, sort
    /// keys) read a *group row*: the group-by values, then the aggregate results.
    Aggregate {
        /// GROUP BY expressions over the table row.
        group_by: Vec<Expr>,
        /// Aggregate calls over the table row.
        aggregates: Vec<(AggFunc, Option<Expr>)>,
        /// HAVING over the group row.
        having: Option<Expr>,
        /// Output expressions over the group row.
        projections: Vec<Expr>,
    },
}

/// A planned SELECT.
#[derive(Debug, Clone)]
pub struct SelectPlan {
    /// The scan; `None` for a SELECT without FROM (one empty row).
    pub scan: Option<ScanPlan>,
    /// Output column names.
    pub columns: Vec<String>,
    /// Projection or aggregation.
    pub shape: Shape,
    /// Ordering.
    pub sort: Sort,
    /// LIMIT.
    pub limit: Option<u64>,
    /// OFFSET.
    pub offset: u64,
    /// The WHERE of a SELECT without FROM, evaluated on its one empty row (with a FROM the
    /// scan carries the filter).
    pub filter: Option<Expr>,
}

impl SelectPlan {
    /// The key range whose number of keys is the answer, for a statement that aggregates
    /// nothing but `COUNT(*)` (once or more), without GROUP BY, over a range or index scan
    /// without a residual filter: a primary-key range holds one key per row, an index range
    /// one entry per row. The store then counts the range's keys without reading a row
    /// ([`crate::KvRead::count`]). Also says whether the range is the whole table (a full
    /// scan's, which leaves the block cache alone). Both `exec::select` and EXPLAIN ask this.
    pub fn counted_range(&self) -> Option<(&KeyRange, bool)> {
        let Shape::Aggregate {
            group_by,
            aggregates,
            ..
        } = &self.shape
        else {
            return None;
        };
        let only_count_star = aggregates
            .iter()
            .all(|(f, arg)| *f == AggFunc::Count && arg.is_none());
        let scan = self.scan.as_ref()?;
        if !group_by.is_empty() || !only_count_star || scan.filter.is_some() {
            return None;
        }
        match &scan.access {
            Access::KeyRange { range, full } => Some((range, *full)),
            Access::IndexRange { range, .. } => Some((range, false)),
            Access::PointGet { .. } | Access::MultiGet { .. } => None,
        }
    }

    /// How many row keys the statement reads when it reads them by key alone: 0 for a
    /// SELECT without FROM, 1 for a point get, the number of keys of a multi-get; `None` for
    /// any scan (of a key range or an index), whose length only the data knows. A server
    /// runs a statement that reads a few keys on the connection's own thread instead of
    /// handing it to a worker (docs/server.md, "Quick statements").
    pub fn keys_read(&self) -> Option<usize> {
        match &self.scan.as_ref().map(|scan| &scan.access) {
            None => Some(0),
            Some(Access::PointGet { .. }) => Some(1),
            Some(Access::MultiGet { keys }) => Some(keys.len()),
            Some(Access::KeyRange { .. } | Access::IndexRange { .. }) => None,
        }
    }

    /// Calls `f` on every expression the statement evaluates (the scan's residual filter,
    /// the output, grouping, aggregate, HAVING and sort expressions, and the WHERE of a
    /// SELECT without FROM) and each of their sub-expressions, parents first.
    pub fn walk_exprs(&self, f: &mut impl FnMut(&Expr)) {
        if let Some(filter) = self.scan.as_ref().and_then(|scan| scan.filter.as_ref()) {
            filter.walk(f);
        }
        if let Some(filter) = &self.filter {
            filter.walk(f);
        }
        match &self.shape {
            Shape::Simple { projections } => projections.iter().for_each(|e| e.walk(f)),
            Shape::Aggregate {
                group_by,
                aggregates,
                having,
                projections,
            } => {
                group_by.iter().for_each(|e| e.walk(f));
                aggregates
                    .iter()
                    .filter_map(|(_, arg)| arg.as_ref())
                    .for_each(|e| e.walk(f));
                having.iter().for_each(|e| e.walk(f));
                projections.iter().for_each(|e| e.walk(f));
            }
        }
        if let Sort::Explicit(keys) = &self.sort {
            keys.iter().for_each(|(e, _)| e.walk(f));
        }
    }

    /// The key range of a scan that may run in parts on several threads, with whether it is
    /// the full table: a primary-key range scan that feeds an aggregate or an explicit sort
    /// (rows that stream in key order, and may stop at a LIMIT, stay on one thread). Both
    /// `exec::select` and EXPLAIN ask this.
    pub fn splittable_range(&self) -> Option<(&KeyRange, bool)> {
        let Access::KeyRange { range, full } = &self.scan.as_ref()?.access else {
            return None;
        };
        if self.counted_range().is_some() {
            // Counted by the store, not scanned.
            return None;
        }
        let sorts_or_aggregates =
            matches!(self.shape, Shape::Aggregate { .. }) || matches!(self.sort, Sort::Explicit(_));
        sorts_or_aggregates.then_some((range, *full))
    }
}

/// Resolves column names in `e` against `table` (`Column(name)` → `Field(i)`).
///
/// # Errors
/// [`QueryError::NoSuchColumn`] for an unknown column, or any column when there is no table.
pub fn bind(e: &Expr, table: Option<&TableSchema>) -> Result<Expr> {
    let b = |e: &Expr| bind(e, table).map(Box::new);
    Ok(match e {
        Expr::Column(name) => match table {
            Some(t) => Expr::Field(column(t, name)?),
            None => {
                return Err(QueryError::NoSuchColumn {
                    column: name.to_owned(),
                    table: None,
                });
            }
        },
        Expr::Literal(_) | Expr::Field(_) => e.clone(),
        Expr::Unary { op, expr } => Expr::Unary {
            op: *op,
            expr: b(expr)?,
        },
        Expr::Binary { op, left, right } => Expr::Binary {
            op: *op,
            left: b(left)?,
            right: b(right)?,
        },
        Expr::IsNull { expr, negated } => Expr::IsNull {
            expr: b(expr)?,
            negated: *negated,
        },
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => Expr::Between {
            expr: b(expr)?,
            low: b(low)?,
            high: b(high)?,
            negated: *negated,
        },
        Expr::InList {
            expr,
            list,
            negated,
            ..
        } => Expr::in_list(
            b(expr)?,
            list.iter().map(|e| bind(e, table)).collect::<Result<_>>()?,
            *negated,
        ),
        Expr::Like {
            expr,
            pattern,
            negated,
        } => Expr::Like {
            expr: b(expr)?,
            pattern: b(pattern)?,
            negated: *negated,
        },
        Expr::Function { func, args } => {
            let mut args = args
                .iter()
                .map(|e| bind(e, table))
                .collect::<Result<Vec<_>>>()?;
            if *func == ScalarFunc::Coalesce {
                to_common_numeric_type(&mut args, table)?;
            }
            Expr::Function { func: *func, args }
        }
        Expr::Aggregate { func, arg } => Expr::Aggregate {
            func: *func,
            arg: arg.as_deref().map(b).transpose()?,
        },
    })
}

/// When bound arguments mix BIGINT and DOUBLE (COALESCE's), converts the BIGINT ones to
/// DOUBLE ([`ScalarFunc::ToDouble`]), so the result's values have one type whichever argument
/// gives it (PostgreSQL resolves such arguments to a common type the same way).
fn to_common_numeric_type(args: &mut [Expr], table: Option<&TableSchema>) -> Result<()> {
    let types = args
        .iter()
        .map(|a| types::check(a, table))
        .collect::<Result<Vec<_>>>()?;
    if !(types.contains(&Some(DataType::Double)) && types.contains(&Some(DataType::BigInt))) {
        return Ok(());
    }
    for (arg, ty) in args.iter_mut().zip(types) {
        if ty == Some(DataType::BigInt) {
            let inner = std::mem::replace(arg, Expr::Literal(Value::Null));
            *arg = Expr::Function {
                func: ScalarFunc::ToDouble,
                args: vec![inner],
            };
        }
    }
    Ok(())
}

/// Splits a filter into its AND-ed conjuncts.
pub fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Binary {
            op: crate::ast::BinaryOp::And,
            left,
            right,
        } => {
            conjuncts(*left, out);
            conjuncts(*right, out);
        }
        e => out.push(e),
    }
}

fn and_all(mut es: Vec<Expr>) -> Option<Expr> {
    let first = if es.is_empty() {
        return None;
    } else {
        es.remove(0)
    };
    Some(es.into_iter().fold(first, |acc, e| Expr::Binary {
        op: crate::ast::BinaryOp::And,
        left: Box::new(acc),
        right: Box::new(e),
    }))
}

/// Sets `needed[i]` for every `Field(i)` in `e`.
pub(crate) fn mark_fields(e: &Expr, needed: &mut [bool]) {
    e.walk(&mut |e| {
        if let Expr::Field(i) = e
            && let Some(n) = needed.get_mut(*i)
        {
            *n = true;
        }
    });
}

/// Looks up a table.
///
/// # Errors
/// [`QueryError::NoSuchTable`] when there is no such table.
pub fn table(catalog: &Catalog, name: &str) -> Result<Arc<TableSchema>> {
    catalog
        .table(name)
        .cloned()
        .ok_or_else(|| QueryError::NoSuchTable(name.to_owned()))
}

/// Binds the assignment `name = e` of an `UPDATE` on `t` and checks its types: the column's
/// position and the bound expression.
///
/// # Errors
/// [`QueryError::NoSuchColumn`] for an unknown column (assigned or read);
/// [`QueryError::Plan`] when `e` applies an operator to types it refuses or has a type the
/// column cannot store (`SET count = seq` on a BIGINT `count` and TEXT `seq`), whether or not
/// any row is updated.
pub fn bind_assignment(t: &TableSchema, name: &str, e: &Expr) -> Result<(usize, Expr)> {
    let c = column(t, name)?;
    let bound = bind(e, Some(t))?;
    types::check_assignment(&bound, t, c)?;
    Ok((c, bound))
}

/// Looks up column `name` of `t`: its position.
///
/// # Errors
/// [`QueryError::NoSuchColumn`] when `t` has no such column.
pub fn column(t: &TableSchema, name: &str) -> Result<usize> {
    t.column_index(name)
        .ok_or_else(|| QueryError::NoSuchColumn {
            column: name.to_owned(),
            table: Some(t.name.clone()),
        })
}

/// Plans the scan for an UPDATE or DELETE (or the first step of a SELECT): the access path
/// for `filter`, the residual, and `needed` marking the filter's columns (the caller adds
/// its own).
///
/// # Errors
/// [`QueryError::NoSuchColumn`] for unknown columns; [`QueryError::Plan`] for a filter that is
/// not BOOLEAN or applies an
/// operator to types it refuses (`WHERE seq > 10` on a TEXT `seq`).
pub fn plan_scan(table: Arc<TableSchema>, filter: Option<&Expr>) -> Result<ScanPlan> {
    let mut parts = Vec::new();
    if let Some(f) = filter {
        let bound = bind(f, Some(&table))?;
        types::check_condition(&bound, Some(&table), "WHERE")?;
        conjuncts(bound, &mut parts);
    }
    let chosen = access::choose(&table, parts);
    let mut needed = vec![false; table.columns.len()];
    let filter = and_all(chosen.residual);
    if let Some(f) = &filter {
        mark_fields(f, &mut needed);
    }
    Ok(ScanPlan {
        table,
        access: chosen.access,
        bounds: chosen.bounds,
        narrowing: chosen.narrowing,
        filter,
        needed,
    })
}

/// Rewrites a bound expression over the table row into one over the group row.
fn to_group_row(
    e: &Expr,
    group_by: &[Expr],
    aggregates: &mut Vec<(AggFunc, Option<Expr>)>,
    names: &[String],
) -> Result<Expr> {
    if let Some(j) = group_by.iter().position(|g| g == e) {
        return Ok(Expr::Field(j));
    }
    let rec = |e: &Expr, aggs: &mut Vec<(AggFunc, Option<Expr>)>| {
        to_group_row(e, group_by, aggs, names).map(Box::new)
    };
    Ok(match e {
        Expr::Aggregate { func, arg } => {
            let key = (*func, arg.as_deref().cloned());
            let i = match aggregates.iter().position(|a| *a == key) {
                Some(i) => i,
                None => {
                    aggregates.push(key);
                    aggregates.len() - 1
                }
            };
            Expr::Field(group_by.len() + i)
        }
        Expr::Field(i) => {
            let name = names.get(*i).map_or("?", String::as_str);
            return plan_err(format!(
                "column {name} must appear in GROUP BY or be used in an aggregate function"
            ));
        }
        Expr::Literal(_) | Expr::Column(_) => e.clone(),
        Expr::Unary { op, expr } => Expr::Unary {
            op: *op,
            expr: rec(expr, aggregates)?,
        },
        Expr::Binary { op, left, right } => Expr::Binary {
            op: *op,
            left: rec(left, aggregates)?,
            right: rec(right, aggregates)?,
        },
        Expr::IsNull { expr, negated } => Expr::IsNull {
            expr: rec(expr, aggregates)?,
            negated: *negated,
        },
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => Expr::Between {
            expr: rec(expr, aggregates)?,
            low: rec(low, aggregates)?,
            high: rec(high, aggregates)?,
            negated: *negated,
        },
        Expr::InList {
            expr,
            list,
            negated,
            ..
        } => Expr::in_list(
            rec(expr, aggregates)?,
            list.iter()
                .map(|e| to_group_row(e, group_by, aggregates, names))
                .collect::<Result<_>>()?,
            *negated,
        ),
        Expr::Like {
            expr,
            pattern,
            negated,
        } => Expr::Like {
            expr: rec(expr, aggregates)?,
            pattern: rec(pattern, aggregates)?,
            negated: *negated,
        },
        Expr::Function { func, args } => Expr::Function {
            func: *func,
            args: args
                .iter()
                .map(|e| to_group_row(e, group_by, aggregates, names))
                .collect::<Result<_>>()?,
        },
    })
}

/// The plan last made for a [`Select`], kept in the statement itself: a SELECT held by the
/// statement cache is then planned once per catalog rather than at every run (docs/sql.md,
/// "Statement cache"). Planning reads only the catalog and the statement. Every DDL statement
/// replaces the catalog rather than changing it, and the statement's fields are public (a
/// caller may change a `Select` it owns between runs), so the kept plan is reused only for the
/// very catalog it was made against (the same `Arc`) and a statement equal to the one it was
/// made from (a copy is kept and compared, which costs far less than planning).
///
/// Not part of the statement's meaning: a clone starts empty, and any two memos compare
/// equal (two statements that differ only in their memos are the same statement).
#[derive(Default)]
pub struct PlanMemo(Mutex<Option<Box<Kept>>>);

/// What a [`PlanMemo`] keeps.
struct Kept {
    /// The catalog the plan was made against.
    catalog: Arc<Catalog>,
    /// The statement as it was planned (its own memo empty).
    select: Select,
    plan: Arc<SelectPlan>,
}

impl PlanMemo {
    /// The plan kept for `select` against `catalog`, if it was made from an equal statement
    /// against that same catalog.
    fn get(&self, catalog: &Arc<Catalog>, select: &Select) -> Option<Arc<SelectPlan>> {
        let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.as_deref()
            .filter(|k| Arc::ptr_eq(&k.catalog, catalog) && k.select == *select)
            .map(|k| Arc::clone(&k.plan))
    }

    /// Keeps `plan`, made from `select` against `catalog`, in place of any plan kept before.
    fn set(&self, catalog: &Arc<Catalog>, select: &Select, plan: &Arc<SelectPlan>) {
        let kept = Kept {
            catalog: Arc::clone(catalog),
            select: select.clone(),
            plan: Arc::clone(plan),
        };
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(Box::new(kept));
    }
}

impl Clone for PlanMemo {
    fn clone(&self) -> Self {
        PlanMemo::default()
    }
}

impl PartialEq for PlanMemo {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for PlanMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kept = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        f.debug_struct("PlanMemo").field("kept", &kept).finish()
    }
}

/// [`plan_select`] through the statement's [`PlanMemo`]: the plan kept for this statement and
/// `catalog` when there is one, else a new plan, which is then kept. A plan that fails is not
/// kept (the same statement fails the same way against the same catalog).
///
/// # Errors
/// As [`plan_select`].
pub fn plan_select_memo(catalog: &Arc<Catalog>, s: &Select) -> Result<Arc<SelectPlan>> {
    if let Some(plan) = s.memo.get(catalog, s) {
        return Ok(plan);
    }
    let plan = Arc::new(plan_select(catalog, s)?);
    s.memo.set(catalog, s, &plan);
    Ok(plan)
}

/// Plans a SELECT.
///
/// # Errors
/// [`QueryError::NoSuchTable`] / [`QueryError::NoSuchColumn`] for unknown tables or columns;
/// [`QueryError::Plan`] for columns outside GROUP BY; [`QueryError::BadPosition`] for ORDER BY
/// and GROUP BY positions out of range.
pub fn plan_select(catalog: &Catalog, s: &Select) -> Result<SelectPlan> {
    let table = s.from.as_deref().map(|n| table(catalog, n)).transpose()?;
    let schema = table.as_deref();
    // Output columns.
    let mut columns = Vec::new();
    let mut projections = Vec::new();
    for item in &s.projection {
        match item {
            SelectItem::Wildcard => {
                if let Some(t) = schema {
                    for (i, c) in t.columns.iter().enumerate() {
                        columns.push(c.name.clone());
                        projections.push(Expr::Field(i));
                    }
                }
            }
            SelectItem::Expr { expr, name } => {
                columns.push(name.clone());
                projections.push(bind(expr, schema)?);
            }
        }
    }
    // ORDER BY keys: ordinals and bare names of output columns refer to the projections; an
    // output column's name wins over a table column's (PostgreSQL's and SQLite's rule).
    let mut order = Vec::new();
    for o in &s.order_by {
        let e = match &o.key {
            OrderKey::Ordinal(n) => {
                projections
                    .get(n - 1)
                    .cloned()
                    .ok_or_else(|| QueryError::BadPosition {
                        clause: "ORDER BY",
                        position: i64::try_from(*n).unwrap_or(i64::MAX),
                    })?
            }
            OrderKey::Name(name) => {
                // Output columns of that name; several are ambiguous unless they are the
                // same expression (`SELECT *, v ... ORDER BY v`), as in PostgreSQL.
                let mut outputs = columns
                    .iter()
                    .zip(&projections)
                    .filter(|(c, _)| *c == name)
                    .map(|(_, e)| e);
                match outputs.next() {
                    Some(first) => {
                        if outputs.any(|e| e != first) {
                            return plan_err(format!("ORDER BY {name} is ambiguous"));
                        }
                        first.clone()
                    }
                    None => bind(&Expr::Column(name.clone()), schema)?,
                }
            }
            OrderKey::Expr(e) => bind(e, schema)?,
        };
        order.push((e, o.desc));
    }
    // GROUP BY keys: expressions over the table's columns, or 1-based output positions
    // (`GROUP BY 1`, as in PostgreSQL and SQLite).
    let group_by = s
        .group_by
        .iter()
        .map(|e| match e {
            Expr::Literal(Value::Int(n)) => {
                let p = usize::try_from(*n)
                    .ok()
                    .and_then(|n| n.checked_sub(1))
                    .and_then(|i| projections.get(i))
                    .ok_or(QueryError::BadPosition {
                        clause: "GROUP BY",
                        position: *n,
                    })?;
                if p.has_aggregate() {
                    return plan_err(format!("GROUP BY position {n} is an aggregate"));
                }
                Ok(p.clone())
            }
            e => bind(e, schema),
        })
        .collect::<Result<Vec<_>>>()?;
    let having = s.having.as_ref().map(|e| bind(e, schema)).transpose()?;
    // Type errors that every evaluated row would hit are refused now, not at the first row.
    for e in projections
        .iter()
        .chain(&group_by)
        .chain(order.iter().map(|(e, _)| e))
    {
        types::check(e, schema)?;
    }
    if let Some(h) = &having {
        types::check_condition(h, schema, "HAVING")?;
    }
    let aggregate = !group_by.is_empty()
        || having.is_some()
        || projections.iter().any(Expr::has_aggregate)
        || order.iter().any(|(e, _)| e.has_aggregate());
    let mut scan = match &table {
        Some(t) => Some(plan_scan(Arc::clone(t), s.filter.as_ref())?),
        None => None,
    };
    // Without FROM, the statement reads one empty row, which this filter keeps or drops.
    let filter = match (&table, &s.filter) {
        (None, Some(f)) => {
            let bound = bind(f, None)?;
            types::check_condition(&bound, None, "WHERE")?;
            Some(bound)
        }
        _ => None,
    };

    let (shape, sort) = if aggregate {
        let names: Vec<String> = schema
            .map(|t| t.columns.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default();
        let mut aggregates = Vec::new();
        let projections = projections
            .iter()
            .map(|e| to_group_row(e, &group_by, &mut aggregates, &names))
            .collect::<Result<Vec<_>>>()?;
        let having = having
            .as_ref()
            .map(|e| to_group_row(e, &group_by, &mut aggregates, &names))
            .transpose()?;
        let keys = order
            .iter()
            .map(|(e, d)| Ok((to_group_row(e, &group_by, &mut aggregates, &names)?, *d)))
            .collect::<Result<Vec<_>>>()?;
        if let Some(scan) = &mut scan {
            for e in group_by
                .iter()
                .chain(aggregates.iter().filter_map(|(_, a)| a.as_ref()))
            {
                mark_fields(e, &mut scan.needed);
            }
        }
        let sort = if keys.is_empty() {
            Sort::None
        } else {
            Sort::Explicit(keys)
        };
        (
            Shape::Aggregate {
                group_by,
                aggregates,
                having,
                projections,
            },
            sort,
        )
    } else {
        let sort = match &mut scan {
            _ if order.is_empty() => Sort::None,
            None => Sort::Explicit(order),
            Some(scan) => order_scan(scan, order, s.limit.is_some()),
        };
        if let Some(scan) = &mut scan {
            for e in &projections {
                mark_fields(e, &mut scan.needed);
            }
            if let Sort::Explicit(keys) = &sort {
                for (e, _) in keys {
                    mark_fields(e, &mut scan.needed);
                }
            }
        }
        (Shape::Simple { projections }, sort)
    };
    Ok(SelectPlan {
        scan,
        columns,
        shape,
        sort,
        limit: s.limit,
        offset: s.offset,
        filter,
    })
}

/// Makes the scan produce rows in `order` when its key order allows (possibly reversed, or
/// switching a full scan to a full index scan when there is a LIMIT); otherwise sorts.
fn order_scan(scan: &mut ScanPlan, order: Vec<(Expr, bool)>, has_limit: bool) -> Sort {
    let cols: Option<Vec<(usize, bool)>> = order
        .iter()
        .map(|(e, d)| match e {
            Expr::Field(c) => Some((*c, *d)),
            _ => None,
        })
        .collect();
    let Some(cols) = cols else {
        return Sort::Explicit(order);
    };
    if matches!(scan.access, Access::PointGet { .. }) {
        return Sort::ByScan;
    }
    let fixed = fixed_columns(&scan.bounds);
    let natural = access::natural_order(&scan.table, &scan.access);
    if let Some(reverse) = access::order_satisfied(&natural, &fixed, &cols) {
        set_reverse(&mut scan.access, reverse);
        return Sort::ByScan;
    }
    let full = matches!(scan.access, Access::KeyRange { full: true, .. });
    if full
        && has_limit
        && let Some(&(first, _)) = cols.first()
        && let Some(index) = scan.table.index_on(first)
    {
        let access = access::full_index(index);
        let natural = access::natural_order(&scan.table, &access);
        if let Some(reverse) = access::order_satisfied(&natural, &[], &cols) {
            scan.access = access;
            set_reverse(&mut scan.access, reverse);
            return Sort::ByScan;
        }
    }
    Sort::Explicit(order)
}

/// Columns fixed to a single value by equality bounds.
fn fixed_columns(bounds: &[Expr]) -> Vec<usize> {
    bounds
        .iter()
        .filter_map(|e| match e {
            Expr::Binary {
                op: crate::ast::BinaryOp::Eq,
                left,
                right,
            } => match (left.as_ref(), right.as_ref()) {
                (Expr::Field(c), _) | (_, Expr::Field(c)) => Some(*c),
                _ => None,
            },
            Expr::Like { expr, pattern, .. } => match (expr.as_ref(), pattern.as_ref()) {
                (Expr::Field(c), Expr::Literal(crate::value::Value::Text(p)))
                    if !p.contains(['%', '_']) =>
                {
                    Some(*c)
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

fn set_reverse(access: &mut Access, reverse: bool) {
    match access {
        Access::KeyRange { range, .. } | Access::IndexRange { range, .. } => {
            range.reverse = reverse;
        }
        Access::MultiGet { keys } => {
            if reverse {
                keys.sort_by(|a, b| b.cmp(a));
            }
        }
        Access::PointGet { .. } => {}
    }
}
