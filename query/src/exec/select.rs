//! Running a [`SelectPlan`]: stream, filter, aggregate, sort (bounded by LIMIT),
//! offset and limit.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use super::eval::{eval, passes};
use super::source::RowSource;
use super::store::KvRead;
use crate::ast::{AggFunc, Expr};
use crate::error::{Result, exec_err};
use crate::plan::{SelectPlan, Shape, Sort};
use crate::value::Value;

/// Runs `plan` on `reader` and returns the result rows.
pub(crate) fn run<R: KvRead>(reader: &R, plan: &SelectPlan) -> Result<Vec<Vec<Value>>> {
    if plan.limit == Some(0) {
        return Ok(Vec::new());
    }
    let mut input = Input::new(reader, plan);
    match &plan.shape {
        Shape::Simple { projections } => simple(&mut input, plan, projections),
        Shape::Aggregate {
            group_by,
            aggregates,
            having,
            projections,
        } => {
            let mut groups: BTreeMap<GroupKey, Vec<Acc>> = BTreeMap::new();
            let mut row = input.row_buffer();
            if group_by.is_empty() {
                // One group: accumulate without a map lookup per row.
                let mut accs: Vec<Acc> = aggregates.iter().map(|(f, _)| Acc::new(*f)).collect();
                while input.next(&mut row)? {
                    for (acc, (_, arg)) in accs.iter_mut().zip(aggregates) {
                        let v = match arg {
                            Some(a) => Some(eval(a, &row)?),
                            None => None,
                        };
                        acc.add(v)?;
                    }
                }
                groups.insert(GroupKey(Vec::new()), accs);
            }
            while !group_by.is_empty() && input.next(&mut row)? {
                let key = GroupKey(
                    group_by
                        .iter()
                        .map(|e| eval(e, &row))
                        .collect::<Result<_>>()?,
                );
                let accs = groups
                    .entry(key)
                    .or_insert_with(|| aggregates.iter().map(|(f, _)| Acc::new(*f)).collect());
                for (acc, (_, arg)) in accs.iter_mut().zip(aggregates) {
                    let v = match arg {
                        Some(a) => Some(eval(a, &row)?),
                        None => None,
                    };
                    acc.add(v)?;
                }
            }
            if group_by.is_empty() && groups.is_empty() {
                groups.insert(
                    GroupKey(Vec::new()),
                    aggregates.iter().map(|(f, _)| Acc::new(*f)).collect(),
                );
            }
            let mut out = Sorter::new(plan);
            for (key, accs) in groups {
                let mut group_row = key.0;
                group_row.extend(accs.into_iter().map(Acc::finish));
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
            Ok(out.finish())
        }
    }
}

/// The filtered input rows.
struct Input<'r, R: KvRead> {
    source: Option<RowSource<'r, R>>,
    width: usize,
    single_row_left: bool,
}

impl<'r, R: KvRead> Input<'r, R> {
    fn new(reader: &'r R, plan: &'r SelectPlan) -> Self {
        match &plan.scan {
            Some(scan) => Input {
                source: Some(RowSource::new(reader, scan, false)),
                width: scan.table.columns.len(),
                single_row_left: false,
            },
            None => Input {
                source: None,
                width: 0,
                single_row_left: true,
            },
        }
    }

    fn row_buffer(&self) -> Vec<Value> {
        vec![Value::Null; self.width]
    }

    fn next(&mut self, row: &mut [Value]) -> Result<bool> {
        let Some(source) = &mut self.source else {
            return Ok(std::mem::take(&mut self.single_row_left));
        };
        // The source applies the scan's filter.
        Ok(source.next_row(row)?.is_some())
    }
}

fn simple<R: KvRead>(
    input: &mut Input<'_, R>,
    plan: &SelectPlan,
    projections: &[Expr],
) -> Result<Vec<Vec<Value>>> {
    let mut row = input.row_buffer();
    if let Sort::Explicit(_) = plan.sort {
        let mut out = Sorter::new(plan);
        while input.next(&mut row)? {
            let projected = projections
                .iter()
                .map(|e| eval(e, &row))
                .collect::<Result<Vec<_>>>()?;
            out.push(&row, projected)?;
        }
        return Ok(out.finish());
    }
    let mut out = Vec::new();
    let mut skipped = 0;
    while input.next(&mut row)? {
        if skipped < plan.offset {
            skipped += 1;
            continue;
        }
        out.push(
            projections
                .iter()
                .map(|e| eval(e, &row))
                .collect::<Result<Vec<_>>>()?,
        );
        if plan.limit.is_some_and(|l| out.len() as u64 >= l) {
            break;
        }
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
    Sum(Option<Value>),
    Min(Option<Value>),
    Max(Option<Value>),
    Avg(f64, i64),
}

impl Acc {
    fn new(f: AggFunc) -> Acc {
        match f {
            AggFunc::Count => Acc::Count(0),
            AggFunc::Sum => Acc::Sum(None),
            AggFunc::Min => Acc::Min(None),
            AggFunc::Max => Acc::Max(None),
            AggFunc::Avg => Acc::Avg(0.0, 0),
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
            Acc::Sum(s) => {
                *s = Some(match (s.take(), v) {
                    (None, v @ (Value::Int(_) | Value::Double(_))) => v,
                    (Some(Value::Int(a)), Value::Int(b)) => {
                        Value::Int(a.checked_add(b).ok_or_else(|| {
                            crate::QueryError::Exec("integer overflow in SUM".into())
                        })?)
                    }
                    (Some(a), b) => match (number(&a), number(&b)) {
                        (Some(x), Some(y)) => Value::Double(x + y),
                        _ => return exec_err(format!("SUM() does not accept {}", b.type_name())),
                    },
                    (None, v) => {
                        return exec_err(format!("SUM() does not accept {}", v.type_name()));
                    }
                });
            }
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
            Acc::Avg(sum, n) => match number(&v) {
                Some(x) => {
                    *sum += x;
                    *n += 1;
                }
                None => return exec_err(format!("AVG() does not accept {}", v.type_name())),
            },
        }
        Ok(())
    }

    fn finish(self) -> Value {
        match self {
            Acc::Count(n) => Value::Int(n),
            Acc::Sum(v) | Acc::Min(v) | Acc::Max(v) => v.unwrap_or(Value::Null),
            #[expect(clippy::cast_precision_loss, reason = "AVG is a DOUBLE")]
            Acc::Avg(sum, n) if n > 0 => Value::Double(sum / n as f64),
            Acc::Avg(..) => Value::Null,
        }
    }
}

#[expect(
    clippy::cast_precision_loss,
    reason = "SUM/AVG over mixed numbers use doubles"
)]
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::Double(d) => Some(*d),
        _ => None,
    }
}

/// Collects output rows and applies ORDER BY, OFFSET and LIMIT. With a LIMIT and sort keys
/// it keeps at most `2 * (offset + limit)` rows (sorting and truncating to the best
/// `offset + limit` whenever the buffer fills), so memory is bounded by the LIMIT.
struct Sorter<'p> {
    keys: &'p [(Expr, bool)],
    desc: Vec<bool>,
    cap: Option<usize>,
    offset: usize,
    limit: Option<usize>,
    rows: Vec<(Vec<Value>, u64, Vec<Value>)>,
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
        self.seq += 1;
        self.rows.push((keys, self.seq, projected));
        // Bound memory under LIMIT: every so often keep only the best `cap` rows.
        if let Some(cap) = self.cap
            && !self.keys.is_empty()
            && self.rows.len() >= cap.saturating_mul(2).max(1024)
        {
            self.compact(cap);
        }
        Ok(())
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
