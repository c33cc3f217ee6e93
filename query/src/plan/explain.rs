//! EXPLAIN output: one line per step, naming the access path, its bounds, the residual
//! filter, and where rows are materialized (`docs/sql.md`, "EXPLAIN").

use super::{Access, ScanPlan, SelectPlan, Shape, Sort};
use crate::ast::{Expr, ScalarFunc, UnaryOp};
use crate::value::Value;

/// Formats a literal as SQL (`'text'` with quotes doubled, `x'0a'`, `NULL`).
pub fn sql_literal(v: &Value) -> String {
    match v {
        Value::Text(s) => format!("'{}'", s.replace('\'', "''")),
        v => v.to_string(),
    }
}

/// Formats an expression as SQL; `Field(i)` prints as `names[i]`.
pub fn fmt_expr(e: &Expr, names: &[String]) -> String {
    let f = |e: &Expr| fmt_operand(e, names);
    match e {
        Expr::Literal(v) => sql_literal(v),
        Expr::Column(n) => n.clone(),
        Expr::Field(i) => names.get(*i).cloned().unwrap_or_else(|| format!("#{i}")),
        Expr::Unary {
            op: UnaryOp::Not,
            expr,
        } => format!("NOT {}", f(expr)),
        Expr::Unary {
            op: UnaryOp::Neg,
            expr,
        } => format!("-{}", f(expr)),
        Expr::Binary { op, left, right } => format!("{} {} {}", f(left), op.symbol(), f(right)),
        Expr::IsNull { expr, negated } => {
            format!("{} IS {}NULL", f(expr), if *negated { "NOT " } else { "" })
        }
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => format!(
            "{} {}BETWEEN {} AND {}",
            f(expr),
            if *negated { "NOT " } else { "" },
            f(low),
            f(high)
        ),
        Expr::InList {
            expr,
            list,
            negated,
            ..
        } => format!(
            "{} {}IN ({})",
            f(expr),
            if *negated { "NOT " } else { "" },
            list.iter()
                .map(|e| fmt_expr(e, names))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Expr::Like {
            expr,
            pattern,
            negated,
        } => format!(
            "{} {}LIKE {}",
            f(expr),
            if *negated { "NOT " } else { "" },
            f(pattern)
        ),
        Expr::Function {
            func: ScalarFunc::ToDouble,
            args,
        } => format!(
            "CAST({} AS DOUBLE)",
            args.iter()
                .map(|e| fmt_expr(e, names))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Expr::Function { func, args } => format!(
            "{}({})",
            func.name(),
            args.iter()
                .map(|e| fmt_expr(e, names))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Expr::Aggregate { func, arg } => match arg {
            Some(a) => format!("{}({})", func.name(), fmt_expr(a, names)),
            None => format!("{}(*)", func.name()),
        },
    }
}

fn fmt_operand(e: &Expr, names: &[String]) -> String {
    match e {
        Expr::Binary { .. } | Expr::Between { .. } | Expr::Like { .. } | Expr::InList { .. } => {
            format!("({})", fmt_expr(e, names))
        }
        _ => fmt_expr(e, names),
    }
}

fn and_join(es: &[Expr], names: &[String]) -> String {
    es.iter()
        .map(|e| fmt_expr(e, names))
        .collect::<Vec<_>>()
        .join(" AND ")
}

fn direction(reverse: bool) -> &'static str {
    if reverse { "reverse" } else { "forward" }
}

/// The lines describing a scan: access path with bounds, then the residual filter.
pub fn explain_scan(scan: &ScanPlan) -> Vec<String> {
    let names: Vec<String> = scan.table.columns.iter().map(|c| c.name.clone()).collect();
    let t = &scan.table.name;
    let mut bounds = and_join(&scan.bounds, &names);
    if let Some(n) = &scan.narrowing {
        if !bounds.is_empty() {
            bounds.push_str(" AND ");
        }
        bounds.push_str(n);
    }
    let access = match &scan.access {
        Access::PointGet { .. } => format!("access: point get on {t} ({bounds})"),
        Access::MultiGet { keys } => {
            format!("access: {} point gets on {t} ({bounds})", keys.len())
        }
        Access::KeyRange { range, full: true } => {
            format!("access: full scan of {t}, {}", direction(range.reverse))
        }
        Access::KeyRange { range, full: false } => format!(
            "access: primary-key range scan of {t} ({bounds}), {}",
            direction(range.reverse)
        ),
        Access::IndexRange { index, range } => {
            let col = names.get(index.column).map_or("?", String::as_str);
            let what = if bounds.is_empty() {
                format!("all of {col}")
            } else {
                bounds
            };
            format!(
                "access: index range scan of {} on {t}({col}) ({what}), {}, {}",
                index.name,
                direction(range.reverse),
                if scan.index_only() {
                    "index only (no row reads)"
                } else {
                    "then a point get per row"
                }
            )
        }
    };
    let filter = match &scan.filter {
        Some(f) => format!("filter: {}", fmt_expr(f, &names)),
        None => "filter: none".to_owned(),
    };
    vec![access, filter]
}

/// The lines of `EXPLAIN SELECT`.
pub fn explain_select(plan: &SelectPlan) -> Vec<String> {
    let mut lines = match &plan.scan {
        Some(scan) => explain_scan(scan),
        None => vec![
            "access: none (one row, no table)".to_owned(),
            match &plan.filter {
                Some(f) => format!("filter: {}", fmt_expr(f, &[])),
                None => "filter: none".to_owned(),
            },
        ],
    };
    if plan.splittable_range().is_some() {
        lines.push(
            "parallel: in parts of about equal size, one per core (at most 8), when the range \
             holds 16 MiB of tables or more"
                .to_owned(),
        );
    }
    let names: Vec<String> = plan
        .scan
        .as_ref()
        .map(|s| s.table.columns.iter().map(|c| c.name.clone()).collect())
        .unwrap_or_default();
    let mut group_names = Vec::new();
    if let Shape::Aggregate {
        group_by,
        aggregates,
        having,
        ..
    } = &plan.shape
    {
        group_names = group_by.iter().map(|e| fmt_expr(e, &names)).collect();
        group_names.extend(aggregates.iter().map(|(func, arg)| match arg {
            Some(a) => format!("{}({})", func.name(), fmt_expr(a, &names)),
            None => format!("{}(*)", func.name()),
        }));
        let aggs = group_names
            .get(group_by.len()..)
            .unwrap_or_default()
            .join(", ");
        if plan.counted_range().is_some() {
            lines.push(format!(
                "aggregate: {aggs} as the number of keys in the range, counted by the store \
                 without reading rows (in parts, one per core, when the range holds 16 MiB of \
                 tables or more)"
            ));
        } else if group_by.is_empty() {
            lines.push(format!("aggregate: {aggs} over all rows (streaming)"));
        } else {
            lines.push(format!(
                "aggregate: {aggs} grouped by {} (materializes one entry per group)",
                group_names
                    .get(..group_by.len())
                    .unwrap_or_default()
                    .join(", ")
            ));
        }
        if let Some(h) = having {
            lines.push(format!("having: {}", fmt_expr(h, &group_names)));
        }
    }
    let sort_names = if group_names.is_empty() {
        &names
    } else {
        &group_names
    };
    let limit = plan.limit.map(|l| l.saturating_add(plan.offset));
    match &plan.sort {
        Sort::None => {}
        Sort::ByScan => lines.push("order: by the scan's key order (no sort)".to_owned()),
        Sort::Explicit(keys) => {
            let keys = keys
                .iter()
                .map(|(e, d)| {
                    format!(
                        "{}{}",
                        fmt_expr(e, sort_names),
                        if *d { " DESC" } else { "" }
                    )
                })
                .collect::<Vec<_>>()
                .join(", ");
            lines.push(match limit {
                Some(n) => format!("order: sort by {keys}, keeping only the top {n} rows"),
                None => format!("order: sort by {keys} (materializes every matching row)"),
            });
        }
    }
    if let Some(l) = plan.limit {
        let early = matches!(plan.sort, Sort::None | Sort::ByScan)
            && matches!(plan.shape, Shape::Simple { .. });
        lines.push(format!(
            "limit: {l} offset {}{}",
            plan.offset,
            if early { " (stops the scan early)" } else { "" }
        ));
    } else if plan.offset > 0 {
        lines.push(format!("limit: none offset {}", plan.offset));
    }
    lines
}
