//! Running a [`SelectPlan`]: stream, filter, aggregate, sort (bounded by LIMIT),
//! offset and limit.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::ops::ControlFlow;

use super::eval::{eval, passes};
use super::source::{RowSource, bound};
use super::store::{KvRead, ScanCache};
use crate::ast::{AggFunc, Expr};
use crate::error::{QueryError, Result, exec_err};
use crate::interrupt::Interrupt;
use crate::plan::{Access, KeyRange, ScanPlan, SelectPlan, Shape, Sort};
use crate::value::Value;

/// Runs `plan` on `reader` and returns the result rows; stops with
/// [`QueryError::Interrupted`](crate::QueryError::Interrupted) once `interrupt` is set.
pub(crate) fn run<R: KvRead>(
    reader: &R,
    plan: &SelectPlan,
    interrupt: &Interrupt,
) -> Result<Vec<Vec<Value>>> {
    let mut rows = Vec::new();
    run_into(reader, plan, interrupt, &mut |row| {
        rows.push(row);
        ControlFlow::Continue(())
    })?;
    Ok(rows)
}

/// Runs `plan` on `reader`, handing each result row to `emit` in order; `emit` returning
/// `Break` ends the statement early (without an error), as a LIMIT would. Rows that need no
/// sort and no aggregate are handed over as the scan produces them, so memory stays bounded
/// whatever the result's size; the others once the scan is done. Stops with
/// [`QueryError::Interrupted`](crate::QueryError::Interrupted) once `interrupt` is set.
pub(crate) fn run_into<R: KvRead>(
    reader: &R,
    plan: &SelectPlan,
    interrupt: &Interrupt,
    emit: &mut dyn FnMut(Vec<Value>) -> ControlFlow<()>,
) -> Result<()> {
    if plan.limit == Some(0) {
        return Ok(());
    }
    let rows = match &plan.shape {
        Shape::Simple { projections } => match split_scan(reader, plan) {
            Some(parts) => sort_in_parallel(reader, plan, &parts, projections, interrupt)?,
            None => {
                return simple(
                    &mut Input::new(reader, plan, interrupt),
                    plan,
                    projections,
                    emit,
                );
            }
        },
        Shape::Aggregate {
            group_by,
            aggregates,
            having,
            projections,
        } => {
            let mut groups = if let Some((range, full)) = plan.counted_range() {
                count_range(reader, range, full, aggregates.len(), interrupt)?
            } else if let Some(parts) = split_scan(reader, plan) {
                aggregate_in_parallel(reader, &parts, group_by, aggregates, interrupt)?
            } else {
                aggregate(
                    &mut Input::new(reader, plan, interrupt),
                    group_by,
                    aggregates,
                )?
            };
            if group_by.is_empty() && groups.is_empty() {
                groups.insert(
                    GroupKey(Vec::new()),
                    aggregates.iter().map(|(f, _)| Acc::new(*f)).collect(),
                );
            }
            let mut out = Sorter::new(plan);
            for (key, accs) in groups {
                let mut group_row = key.0;
                for acc in accs {
                    group_row.push(acc.finish()?);
                }
                if let Some(h) = having
                    && !passes(h, &group_row)?
                {
                    continue;
                }
                let projected = projections
                    .iter()
                    .map(|e| eval(e, &group_row))
                    .collect::<Result<Vec<_>>>()?;
                out.push(&group_row, projected)?;
            }
            out.finish()
        }
    };
    for row in rows {
        if emit(row).is_break() {
            break;
        }
    }
    Ok(())
}

/// The one group of a statement whose `aggregates` are all `COUNT(*)`, counted by the store
/// over `range` without reading rows (see [`SelectPlan::counted_range`]), in parts on their
/// own threads where the store cuts the range (as [`aggregate_in_parallel`] scans). A count
/// of the whole table (`full`) leaves the block cache as a full scan does.
fn count_range<R: KvRead>(
    reader: &R,
    range: &KeyRange,
    full: bool,
    aggregates: usize,
    interrupt: &Interrupt,
) -> Result<BTreeMap<GroupKey, Vec<Acc>>> {
    interrupt.check()?;
    let cache = if full {
        ScanCache::NoFill
    } else {
        ScanCache::Fill
    };
    let count = |r: &KeyRange| -> Result<u64> {
        reader
            .count(bound(&r.lower), bound(&r.upper), cache, interrupt.flag())?
            .ok_or(QueryError::Interrupted)
    };
    let n = match split_range(reader, range) {
        None => count(range)?,
        Some(parts) => std::thread::scope(|s| {
            let counts: Vec<_> = parts.iter().map(|p| s.spawn(move || count(p))).collect();
            counts.into_iter().try_fold(0u64, |sum, h| {
                let n = h
                    .join()
                    .unwrap_or_else(|_| exec_err("a counting thread panicked"))?;
                Ok::<_, QueryError>(sum.saturating_add(n))
            })
        })?,
    };
    let Ok(n) = i64::try_from(n) else {
        return exec_err("count(*) overflows BIGINT");
    };
    let accs = (0..aggregates).map(|_| Acc::Count(n)).collect();
    Ok(BTreeMap::from([(GroupKey(Vec::new()), accs)]))
}

/// The aggregates of a statement: `(function, argument)`; no argument for `COUNT(*)`.
type Aggregates = [(AggFunc, Option<Expr>)];

/// Accumulates `aggregates` over every row of `input`, by the values of `group_by` (one
/// group, keyed by no values, without GROUP BY; no group at all without rows).
fn aggregate<R: KvRead>(
    input: &mut Input<'_, R>,
    group_by: &[Expr],
    aggregates: &Aggregates,
) -> Result<BTreeMap<GroupKey, Vec<Acc>>> {
    let mut groups: BTreeMap<GroupKey, Vec<Acc>> = BTreeMap::new();
    let mut row = input.row_buffer();
    let add = |accs: &mut [Acc], row: &[Value]| -> Result<()> {
        for (acc, (_, arg)) in accs.iter_mut().zip(aggregates) {
            let v = match arg {
                Some(a) => Some(eval(a, row)?),
                None => None,
            };
            acc.add(v)?;
        }
        Ok(())
    };
    if group_by.is_empty() {
        // One group: accumulate without a map lookup per row.
        let mut accs: Option<Vec<Acc>> = None;
        while input.next(&mut row)? {
            let accs = accs.get_or_insert_with(|| new_accs(aggregates));
            add(accs, &row)?;
        }
        if let Some(accs) = accs {
            groups.insert(GroupKey(Vec::new()), accs);
        }
        return Ok(groups);
    }
    while input.next(&mut row)? {
        let key = GroupKey(
            group_by
                .iter()
                .map(|e| eval(e, &row))
                .collect::<Result<_>>()?,
        );
        let accs = groups.entry(key).or_insert_with(|| new_accs(aggregates));
        add(accs, &row)?;
    }
    Ok(groups)
}

fn new_accs(aggregates: &Aggregates) -> Vec<Acc> {
    aggregates.iter().map(|(f, _)| Acc::new(*f)).collect()
}

/// Most threads one scan uses.
const MAX_SCAN_THREADS: usize = 8;

/// For a plan whose scan may run in parts ([`SelectPlan::splittable_range`]) over a range
/// the store can cut ([`KvRead::split_keys`]), one scan plan per part, in key order, one part
/// per core; `None` to scan on this thread (one core, another plan, or a range not worth
/// cutting).
fn split_scan<R: KvRead>(reader: &R, plan: &SelectPlan) -> Option<Vec<ScanPlan>> {
    let scan = plan.scan.as_ref()?;
    let (range, full) = plan.splittable_range()?;
    Some(
        split_range(reader, range)?
            .into_iter()
            .map(|range| ScanPlan {
                access: Access::KeyRange { range, full },
                ..scan.clone()
            })
            .collect(),
    )
}

/// `range` cut into one forward part per core where the store finds cuts
/// ([`KvRead::split_keys`]); `None` on one core or for a range not worth cutting.
fn split_range<R: KvRead>(reader: &R, range: &KeyRange) -> Option<Vec<KeyRange>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(MAX_SCAN_THREADS);
    if threads < 2 {
        return None;
    }
    let cuts = reader.split_keys(bound(&range.lower), bound(&range.upper), threads);
    if cuts.is_empty() {
        return None;
    }
    let mut lowers = vec![range.lower.clone()];
    lowers.extend(cuts.iter().cloned().map(Bound::Included));
    let mut uppers: Vec<Bound<Vec<u8>>> = cuts.into_iter().map(Bound::Excluded).collect();
    uppers.push(range.upper.clone());
    Some(
        lowers
            .into_iter()
            .zip(uppers)
            .map(|(lower, upper)| KeyRange {
                lower,
                upper,
                reverse: false,
            })
            .collect(),
    )
}

/// [`aggregate`] over each of `parts` on its own thread (all reading `reader`'s snapshot),
/// then the parts' groups merged in key order, so each group keeps the key values and
/// MIN/MAX ties a single scan would (SUM and AVG of integers are exact either way; over
/// doubles they may differ from one scan in the last bits: the additions happen in another
/// order).
fn aggregate_in_parallel<R: KvRead>(
    reader: &R,
    parts: &[ScanPlan],
    group_by: &[Expr],
    aggregates: &Aggregates,
    interrupt: &Interrupt,
) -> Result<BTreeMap<GroupKey, Vec<Acc>>> {
    let results = on_each_part(reader, parts, interrupt, |input| {
        aggregate(input, group_by, aggregates)
    });
    let mut merged: BTreeMap<GroupKey, Vec<Acc>> = BTreeMap::new();
    for part in results {
        for (key, accs) in part? {
            match merged.entry(key) {
                std::collections::btree_map::Entry::Vacant(v) => {
                    v.insert(accs);
                }
                std::collections::btree_map::Entry::Occupied(mut o) => {
                    for (acc, later) in o.get_mut().iter_mut().zip(accs) {
                        acc.merge(later)?;
                    }
                }
            }
        }
    }
    Ok(merged)
}

/// The rows of an ORDER BY on other columns than the scan's key, over `parts` of the scan on
/// their own threads: each part keeps its best `offset + limit` rows (all without a LIMIT)
/// sorted, then the parts' rows go through one more sort in part order, so rows with equal
/// sort keys keep their scan order, as in one scan.
fn sort_in_parallel<R: KvRead>(
    reader: &R,
    plan: &SelectPlan,
    parts: &[ScanPlan],
    projections: &[Expr],
    interrupt: &Interrupt,
) -> Result<Vec<Vec<Value>>> {
    let results = on_each_part(reader, parts, interrupt, |input| {
        sort_rows(input, plan, projections).map(Sorter::into_best)
    });
    let mut out = Sorter::new(plan);
    for part in results {
        for (keys, _, projected) in part? {
            out.push_keyed(keys, projected);
        }
    }
    Ok(out.finish())
}

/// Runs `f` over the rows of each of `parts` (all reading `reader`'s snapshot), each on its
/// own thread; the results in part order.
fn on_each_part<R, T, F>(
    reader: &R,
    parts: &[ScanPlan],
    interrupt: &Interrupt,
    f: F,
) -> Vec<Result<T>>
where
    R: KvRead,
    T: Send,
    F: Fn(&mut Input<'_, R>) -> Result<T> + Sync,
{
    std::thread::scope(|scope| {
        let handles: Vec<_> = parts
            .iter()
            .map(|part| {
                let f = &f;
                scope.spawn(move || f(&mut Input::of_scan(reader, part, interrupt)))
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| exec_err("a scan thread panicked"))
            })
            .collect()
    })
}

/// The filtered input rows.
struct Input<'r, R: KvRead> {
    source: Option<RowSource<'r, R>>,
    width: usize,
    /// Without a source: whether the one empty row is still to come.
    single_row_left: bool,
    /// Without a source: the WHERE that keeps or drops the one row.
    filter: Option<&'r Expr>,
}

impl<'r, R: KvRead> Input<'r, R> {
    fn new(reader: &'r R, plan: &'r SelectPlan, interrupt: &'r Interrupt) -> Self {
        match &plan.scan {
            Some(scan) => Input {
                source: Some(RowSource::new(reader, scan, false, interrupt)),
                width: scan.table.columns.len(),
                single_row_left: false,
                filter: None,
            },
            None => Input {
                source: None,
                width: 0,
                single_row_left: true,
                filter: plan.filter.as_ref(),
            },
        }
    }

    /// The rows of `scan` (one part of a statement's scan).
    fn of_scan(reader: &'r R, scan: &'r ScanPlan, interrupt: &'r Interrupt) -> Self {
        Input {
            source: Some(RowSource::new(reader, scan, false, interrupt)),
            width: scan.table.columns.len(),
            single_row_left: false,
            filter: None,
        }
    }

    fn row_buffer(&self) -> Vec<Value> {
        vec![Value::Null; self.width]
    }

    fn next(&mut self, row: &mut [Value]) -> Result<bool> {
        let Some(source) = &mut self.source else {
            if !std::mem::take(&mut self.single_row_left) {
                return Ok(false);
            }
            return match self.filter {
                Some(f) => passes(f, row),
                None => Ok(true),
            };
        };
        // The source applies the scan's filter.
        Ok(source.next_row(row)?.is_some())
    }
}

fn simple<R: KvRead>(
    input: &mut Input<'_, R>,
    plan: &SelectPlan,
    projections: &[Expr],
    emit: &mut dyn FnMut(Vec<Value>) -> ControlFlow<()>,
) -> Result<()> {
    if let Sort::Explicit(_) = plan.sort {
        for row in sort_rows(input, plan, projections)?.finish() {
            if emit(row).is_break() {
                break;
            }
        }
        return Ok(());
    }
    let mut row = input.row_buffer();
    let moves = movable_fields(projections, row.len());
    let mut emitted = 0;
    let mut skipped = 0;
    while input.next(&mut row)? {
        if skipped < plan.offset {
            skipped += 1;
            continue;
        }
        let projected = projections
            .iter()
            .zip(&moves)
            .map(|(e, &moved)| match (moved, e) {
                (true, Expr::Field(i)) => Ok(row
                    .get_mut(*i)
                    .map_or(Value::Null, |v| std::mem::replace(v, Value::Null))),
                _ => eval(e, &row),
            })
            .collect::<Result<Vec<_>>>()?;
        emitted += 1;
        if emit(projected).is_break() || plan.limit.is_some_and(|l| emitted >= l) {
            break;
        }
    }
    Ok(())
}

/// For each projection, whether it is a bare column that no other projection reads, so its
/// value can be moved out of the row buffer instead of cloned (a TEXT column would allocate
/// and copy). The source decodes every needed column again for each row it yields, so a
/// moved-out slot is refilled before it is read.
fn movable_fields(projections: &[Expr], width: usize) -> Vec<bool> {
    let mut reads = vec![0usize; width];
    for p in projections {
        let mut marks = vec![false; width];
        crate::plan::mark_fields(p, &mut marks);
        for (count, marked) in reads.iter_mut().zip(marks) {
            *count += usize::from(marked);
        }
    }
    projections
        .iter()
        .map(|p| matches!(p, Expr::Field(i) if reads.get(*i) == Some(&1)))
        .collect()
}

/// Projects every row of `input` into a [`Sorter`] for `plan`'s ORDER BY.
fn sort_rows<'p, R: KvRead>(
    input: &mut Input<'_, R>,
    plan: &'p SelectPlan,
    projections: &[Expr],
) -> Result<Sorter<'p>> {
    let mut row = input.row_buffer();
    let mut out = Sorter::new(plan);
    while input.next(&mut row)? {
        let projected = projections
            .iter()
            .map(|e| eval(e, &row))
            .collect::<Result<Vec<_>>>()?;
        out.push(&row, projected)?;
    }
    Ok(out)
}

/// Grouping key with SQL's total order (NULLs first, numbers numerically).
#[derive(Debug)]
struct GroupKey(Vec<Value>);

impl PartialEq for GroupKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for GroupKey {}
impl PartialOrd for GroupKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for GroupKey {
    fn cmp(&self, other: &Self) -> Ordering {
        cmp_values(&self.0, &other.0)
    }
}

fn cmp_values(a: &[Value], b: &[Value]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match x.total_cmp(y) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    a.len().cmp(&b.len())
}

/// One aggregate's running state.
enum Acc {
    Count(i64),
    Sum(Sum),
    Min(Option<Value>),
    Max(Option<Value>),
    /// The sum (exact for integers, as SUM's) and the count of the values.
    Avg(Sum, i64),
}

/// A running SUM: integers add exactly (in 128 bits, checked against 64 bits at the end, so
/// the result does not depend on the order rows are added in), a double makes it a DOUBLE.
/// Finite doubles whose sum is not finite make it `Overflow`, which stays (an error at the
/// end, as `d + d` is and as PostgreSQL's `sum(float8)` is).
enum Sum {
    Empty,
    Int(i128),
    Double(f64),
    Overflow,
}

/// `a + b`, or `Sum::Overflow` when finite operands give an infinite (or NaN) sum.
fn add_doubles(a: f64, b: f64) -> Sum {
    let r = a + b;
    if a.is_finite() && b.is_finite() && !r.is_finite() {
        Sum::Overflow
    } else {
        Sum::Double(r)
    }
}

impl Sum {
    #[expect(
        clippy::cast_precision_loss,
        reason = "SUM over mixed numbers is a DOUBLE"
    )]
    fn add(&mut self, other: Sum) {
        *self = match (std::mem::replace(self, Sum::Empty), other) {
            (Sum::Empty, o) | (o, Sum::Empty) => o,
            (Sum::Overflow, _) | (_, Sum::Overflow) => Sum::Overflow,
            // 2^63 additions of i64 values cannot leave i128.
            (Sum::Int(a), Sum::Int(b)) => Sum::Int(a.saturating_add(b)),
            (Sum::Int(a), Sum::Double(b)) | (Sum::Double(b), Sum::Int(a)) => {
                add_doubles(a as f64, b)
            }
            (Sum::Double(a), Sum::Double(b)) => add_doubles(a, b),
        };
    }
}

impl Acc {
    fn new(f: AggFunc) -> Acc {
        match f {
            AggFunc::Count => Acc::Count(0),
            AggFunc::Sum => Acc::Sum(Sum::Empty),
            AggFunc::Min => Acc::Min(None),
            AggFunc::Max => Acc::Max(None),
            AggFunc::Avg => Acc::Avg(Sum::Empty, 0),
        }
    }

    /// Adds one input; `None` is `COUNT(*)`'s "a row" with no argument.
    fn add(&mut self, v: Option<Value>) -> Result<()> {
        let v = match v {
            None => {
                if let Acc::Count(n) = self {
                    *n += 1;
                }
                return Ok(());
            }
            Some(Value::Null) => return Ok(()),
            Some(v) => v,
        };
        match self {
            Acc::Count(n) => *n += 1,
            Acc::Sum(s) => match v {
                Value::Int(i) => s.add(Sum::Int(i128::from(i))),
                Value::Double(d) => s.add(Sum::Double(d)),
                v => return exec_err(format!("SUM() does not accept {}", v.type_name())),
            },
            Acc::Min(m) => {
                if m.as_ref().is_none_or(|m| v.total_cmp(m) == Ordering::Less) {
                    *m = Some(v);
                }
            }
            Acc::Max(m) => {
                if m.as_ref()
                    .is_none_or(|m| v.total_cmp(m) == Ordering::Greater)
                {
                    *m = Some(v);
                }
            }
            Acc::Avg(sum, n) => {
                match v {
                    Value::Int(i) => sum.add(Sum::Int(i128::from(i))),
                    Value::Double(d) => sum.add(Sum::Double(d)),
                    v => return exec_err(format!("AVG() does not accept {}", v.type_name())),
                }
                *n += 1;
            }
        }
        Ok(())
    }

    /// Adds the state of the same aggregate over rows that come after this one's in scan
    /// order (so MIN and MAX keep the earlier of equal values, as one scan does).
    fn merge(&mut self, later: Acc) -> Result<()> {
        match (self, later) {
            (Acc::Count(a), Acc::Count(b)) => *a += b,
            (Acc::Sum(a), Acc::Sum(b)) => a.add(b),
            (Acc::Min(a), Acc::Min(Some(b))) => {
                if a.as_ref().is_none_or(|m| b.total_cmp(m) == Ordering::Less) {
                    *a = Some(b);
                }
            }
            (Acc::Max(a), Acc::Max(Some(b))) => {
                if a.as_ref()
                    .is_none_or(|m| b.total_cmp(m) == Ordering::Greater)
                {
                    *a = Some(b);
                }
            }
            (Acc::Min(_), Acc::Min(None)) | (Acc::Max(_), Acc::Max(None)) => {}
            (Acc::Avg(s, n), Acc::Avg(t, m)) => {
                s.add(t);
                *n += m;
            }
            _ => return exec_err("merging different aggregates"),
        }
        Ok(())
    }

    /// The aggregate's value.
    ///
    /// # Errors
    /// [`QueryError::OutOfRange`]: `integer overflow in SUM` when an integer sum does not fit 64 bits; `double overflow
    /// in SUM` (or `AVG`) when a sum of finite doubles is not finite.
    fn finish(self) -> Result<Value> {
        Ok(match self {
            Acc::Sum(Sum::Overflow) => {
                return Err(QueryError::OutOfRange("double overflow in SUM".into()));
            }
            Acc::Avg(Sum::Overflow, _) => {
                return Err(QueryError::OutOfRange("double overflow in AVG".into()));
            }
            Acc::Count(n) => Value::Int(n),
            Acc::Sum(Sum::Empty) => Value::Null,
            Acc::Sum(Sum::Int(i)) => Value::Int(
                i64::try_from(i)
                    .map_err(|_| QueryError::OutOfRange("integer overflow in SUM".into()))?,
            ),
            Acc::Sum(Sum::Double(d)) => Value::Double(d),
            Acc::Min(v) | Acc::Max(v) => v.unwrap_or(Value::Null),
            #[expect(clippy::cast_precision_loss, reason = "AVG is a DOUBLE")]
            Acc::Avg(sum, n) if n > 0 => {
                let total = match sum {
                    Sum::Int(i) => i as f64,
                    Sum::Double(d) => d,
                    Sum::Empty | Sum::Overflow => 0.0,
                };
                Value::Double(total / n as f64)
            }
            Acc::Avg(..) => Value::Null,
        })
    }
}

/// A row being sorted: its sort keys, its position in the input, its output values.
type SortedRow = (Vec<Value>, u64, Vec<Value>);

/// Collects output rows and applies ORDER BY, OFFSET and LIMIT. With a LIMIT and sort keys
/// it keeps at most `2 * (offset + limit)` rows (sorting and truncating to the best
/// `offset + limit` whenever the buffer fills), so memory is bounded by the LIMIT.
struct Sorter<'p> {
    keys: &'p [(Expr, bool)],
    desc: Vec<bool>,
    cap: Option<usize>,
    offset: usize,
    limit: Option<usize>,
    rows: Vec<SortedRow>,
    seq: u64,
}

impl<'p> Sorter<'p> {
    fn new(plan: &'p SelectPlan) -> Self {
        let keys: &[(Expr, bool)] = match &plan.sort {
            Sort::Explicit(k) => k,
            _ => &[],
        };
        let offset = usize::try_from(plan.offset).unwrap_or(usize::MAX);
        let limit = plan.limit.map(|l| usize::try_from(l).unwrap_or(usize::MAX));
        Sorter {
            keys,
            desc: keys.iter().map(|(_, d)| *d).collect(),
            cap: limit.map(|l| l.saturating_add(offset)),
            offset,
            limit,
            rows: Vec::new(),
            seq: 0,
        }
    }

    fn push(&mut self, input_row: &[Value], projected: Vec<Value>) -> Result<()> {
        let keys = self
            .keys
            .iter()
            .map(|(e, _)| eval(e, input_row))
            .collect::<Result<Vec<_>>>()?;
        self.push_keyed(keys, projected);
        Ok(())
    }

    /// Adds a row whose sort keys are already evaluated.
    fn push_keyed(&mut self, keys: Vec<Value>, projected: Vec<Value>) {
        self.seq += 1;
        self.rows.push((keys, self.seq, projected));
        // Bound memory under LIMIT: every so often keep only the best `cap` rows.
        if let Some(cap) = self.cap
            && !self.keys.is_empty()
            && self.rows.len() >= cap.saturating_mul(2).max(1024)
        {
            self.compact(cap);
        }
    }

    /// The rows in order, at most `offset + limit` of them, with their keys (OFFSET and LIMIT
    /// not applied yet): one part's contribution to [`sort_in_parallel`].
    fn into_best(mut self) -> Vec<SortedRow> {
        let desc = &self.desc;
        self.rows.sort_by(|a, b| order(&a.0, a.1, &b.0, b.1, desc));
        if let Some(cap) = self.cap {
            self.rows.truncate(cap);
        }
        self.rows
    }

    fn compact(&mut self, cap: usize) {
        let desc = &self.desc;
        self.rows.sort_by(|a, b| order(&a.0, a.1, &b.0, b.1, desc));
        self.rows.truncate(cap);
    }

    fn finish(mut self) -> Vec<Vec<Value>> {
        if !self.keys.is_empty() {
            let desc = &self.desc;
            self.rows.sort_by(|a, b| order(&a.0, a.1, &b.0, b.1, desc));
        }
        let rows = self.rows.into_iter().map(|(_, _, r)| r).skip(self.offset);
        match self.limit {
            Some(l) => rows.take(l).collect(),
            None => rows.collect(),
        }
    }
}

fn order(ka: &[Value], sa: u64, kb: &[Value], sb: u64, desc: &[bool]) -> Ordering {
    for ((a, b), d) in ka.iter().zip(kb).zip(desc) {
        let o = a.total_cmp(b);
        let o = if *d { o.reverse() } else { o };
        if o != Ordering::Equal {
            return o;
        }
    }
    sa.cmp(&sb)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a panic is how a test fails")]

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::Database;
    use crate::ast::Statement;
    use crate::exec::store::{KvStore, MemStore};

    fn plan_of(db: &Database<MemStore>, sql: &str) -> SelectPlan {
        let parsed = crate::parse::parse(sql).unwrap();
        let Statement::Select(select) = crate::translate::statement(&parsed[0]).unwrap() else {
            panic!("not a SELECT: {sql}");
        };
        crate::plan::plan_select(&db.catalog(), &select).unwrap()
    }

    /// `plan`'s scan cut into `parts` parts by the store (at least two).
    fn pieces<R: KvRead>(reader: &R, plan: &SelectPlan, parts: usize) -> Vec<ScanPlan> {
        let scan = plan.scan.as_ref().unwrap();
        let Access::KeyRange { range, .. } = &scan.access else {
            panic!("not a key range");
        };
        let cuts = reader.split_keys(bound(&range.lower), bound(&range.upper), parts);
        assert!(!cuts.is_empty());
        let mut bounds = vec![range.lower.clone()];
        bounds.extend(cuts.into_iter().map(Bound::Included));
        let pieces: Vec<ScanPlan> = bounds
            .iter()
            .enumerate()
            .map(|(i, lower)| {
                let upper = match bounds.get(i + 1) {
                    Some(Bound::Included(k)) => Bound::Excluded(k.clone()),
                    _ => range.upper.clone(),
                };
                ScanPlan {
                    access: Access::KeyRange {
                        range: KeyRange {
                            lower: lower.clone(),
                            upper,
                            reverse: false,
                        },
                        full: true,
                    },
                    ..scan.clone()
                }
            })
            .collect();
        pieces
    }

    /// The groups `sql` (an aggregate SELECT) accumulates: on one thread, and over `parts`
    /// parts of its scan cut by the store, each on its own thread.
    fn both_ways(db: &Database<MemStore>, sql: &str, parts: usize) -> (Vec<Value>, Vec<Value>) {
        let plan = plan_of(db, sql);
        let Shape::Aggregate {
            group_by,
            aggregates,
            ..
        } = &plan.shape
        else {
            panic!("not an aggregate: {sql}");
        };
        let reader = db.store().reader();
        let never = Interrupt::new();
        let flatten = |groups: BTreeMap<GroupKey, Vec<Acc>>| -> Vec<Value> {
            let mut out = Vec::new();
            for (key, accs) in groups {
                out.extend(key.0);
                for acc in accs {
                    out.push(acc.finish().unwrap_or(Value::Text("error".into())));
                }
            }
            out
        };
        let one = aggregate(
            &mut Input::new(&reader, &plan, &never),
            group_by,
            aggregates,
        )
        .unwrap();
        let parts = pieces(&reader, &plan, parts);
        let many = aggregate_in_parallel(&reader, &parts, group_by, aggregates, &never).unwrap();
        (flatten(one), flatten(many))
    }

    /// The rows of `sql` (an ORDER BY on non-key columns): from one scan, and from `parts`
    /// parts of the scan sorted on their own threads.
    fn sorted_both_ways(
        db: &Database<MemStore>,
        sql: &str,
        parts: usize,
    ) -> (Vec<Vec<Value>>, Vec<Vec<Value>>) {
        let plan = plan_of(db, sql);
        let (Shape::Simple { projections }, Sort::Explicit(_)) = (&plan.shape, &plan.sort) else {
            panic!("not a sorted scan: {sql}");
        };
        let reader = db.store().reader();
        let never = Interrupt::new();
        let mut one = Vec::new();
        let mut emit = |row| {
            one.push(row);
            ControlFlow::Continue(())
        };
        simple(
            &mut Input::new(&reader, &plan, &never),
            &plan,
            projections,
            &mut emit,
        )
        .unwrap();
        let parts = pieces(&reader, &plan, parts);
        let many = sort_in_parallel(&reader, &plan, &parts, projections, &never).unwrap();
        (one, many)
    }

    #[test]
    fn aggregates_and_sorts_over_parts_of_a_scan_equal_one_scan() {
        let mut rng = StdRng::seed_from_u64(7);
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g BIGINT, n BIGINT, s TEXT, d DOUBLE)")
            .unwrap();
        let mut values = Vec::new();
        for id in 0..3000 {
            let g = rng.random_range(0..7);
            // Integers near the 64-bit limits, so partial sums leave 64 bits and come back.
            let n = match rng.random_range(0..5) {
                0 => "NULL".to_owned(),
                1 => (i64::MAX - rng.random_range(0..3)).to_string(),
                2 => (i64::MIN + rng.random_range(0..3)).to_string(),
                _ => rng.random_range(-50..50i64).to_string(),
            };
            let s = if rng.random_bool(0.1) {
                "NULL".to_owned()
            } else {
                format!("'s{}'", rng.random_range(0..40))
            };
            // Doubles that add exactly in any order (multiples of 1/4), and ties.
            let d = f64::from(rng.random_range(-400..400)) / 4.0;
            values.push(format!("({id}, {g}, {n}, {s}, {d:?})"));
        }
        db.execute(&format!("INSERT INTO t VALUES {}", values.join(", ")))
            .unwrap();
        for sql in [
            "SELECT count(*), count(n), count(s), min(s), max(s), min(d), max(d), sum(d), avg(d) FROM t",
            "SELECT count(*), sum(n), min(n), max(n) FROM t WHERE n > -50 AND n < 50",
            "SELECT sum(n) FROM t",
            "SELECT avg(n), g FROM t GROUP BY g",
            "SELECT g, count(*), sum(d), min(s), max(n), avg(d) FROM t GROUP BY g",
            "SELECT s, count(*), min(id), max(id) FROM t WHERE d > 0 GROUP BY s",
            "SELECT count(*) FROM t WHERE id >= 100 AND id < 2900",
            "SELECT min(id), max(id) FROM t WHERE s IS NULL",
        ] {
            for parts in [2, 3, 8] {
                let (one, many) = both_ways(&db, sql, parts);
                assert_eq!(one, many, "{sql} in {parts} parts");
            }
        }
        // Sorted scans: many equal sort keys (ties keep scan order), LIMIT and OFFSET.
        for sql in [
            "SELECT id, g FROM t ORDER BY g",
            "SELECT id, d FROM t WHERE n > 0 ORDER BY d DESC, g LIMIT 25",
            "SELECT s, id FROM t ORDER BY s DESC LIMIT 10 OFFSET 7",
            "SELECT id FROM t ORDER BY g LIMIT 1500",
            "SELECT id, n FROM t WHERE s IS NULL ORDER BY n",
        ] {
            for parts in [2, 3, 8] {
                let (one, many) = sorted_both_ways(&db, sql, parts);
                assert!(!one.is_empty(), "{sql}");
                assert_eq!(one, many, "{sql} in {parts} parts");
            }
        }
    }
}
