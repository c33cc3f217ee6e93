//! Static types of bound expressions, so that a statement that would fail on every row it
//! evaluates is refused when it is planned, as PostgreSQL does, instead of running on an empty
//! table and failing once rows exist: a non-BOOLEAN `WHERE` (`WHERE id`), comparing TEXT with
//! BIGINT (`WHERE seq > 10`), `SUM` of TEXT, arithmetic on TEXT.
//!
//! Conservative: an operand whose type is unknown (a NULL literal) is never refused, and the
//! messages are the ones evaluation gives (`crate::exec::eval`), so a statement fails the same
//! way whether or not the table has rows.

use crate::ast::{AggFunc, BinaryOp, Expr, ScalarFunc, UnaryOp};
use crate::catalog::TableSchema;
use crate::error::{Result, plan_err};
use crate::value::DataType;

/// Checks `e` (bound to `table`) as a condition of clause `what` (`WHERE`, `HAVING`).
///
/// # Errors
/// [`crate::QueryError::Plan`] when the condition is not BOOLEAN, or as [`check`].
pub(crate) fn check_condition(e: &Expr, table: Option<&TableSchema>, what: &str) -> Result<()> {
    boolean(check(e, table)?, what)
}

/// Checks `e` (bound to `table`) as the new value of column `column` in an `UPDATE ... SET`:
/// as [`check`], and a known type that no value of could be stored in the column (TEXT into
/// BIGINT, say) is refused, as PostgreSQL refuses it when it plans the statement. Types that
/// some values of convert (a DOUBLE into BIGINT when whole, 0 and 1 into BOOLEAN) are left to
/// the row's store.
///
/// # Errors
/// [`crate::QueryError::Plan`] as [`check`], or for a type the column cannot store.
pub(crate) fn check_assignment(e: &Expr, table: &TableSchema, column: usize) -> Result<()> {
    let (Some(from), Some(col)) = (check(e, Some(table))?, table.columns.get(column)) else {
        return Ok(());
    };
    let to = col.ty;
    let may_store = from == to
        || matches!(
            (from, to),
            (DataType::BigInt, DataType::Double | DataType::Boolean)
                | (DataType::Double, DataType::BigInt)
                | (DataType::Text, DataType::Blob)
        );
    if may_store {
        return Ok(());
    }
    // A literal gets the message storing it gives (with the value), anything else the type.
    let what = match e {
        Expr::Literal(v) => format!("{} value {}", from.name(), super::explain::sql_literal(v)),
        _ => format!("{} values", from.name()),
    };
    plan_err(format!(
        "cannot store {what} in column {}.{} of type {to}",
        table.name, col.name
    ))
}

/// The static type of `e` (bound to `table`): `Some` when every non-NULL value it can take has
/// that type, `None` when unknown (NULL).
///
/// # Errors
/// [`crate::QueryError::Plan`] when an operator, function or aggregate meets an operand of a
/// type it refuses at run time.
pub(crate) fn check(e: &Expr, table: Option<&TableSchema>) -> Result<Option<DataType>> {
    Ok(match e {
        Expr::Literal(v) => v.data_type(),
        Expr::Field(i) => table.and_then(|t| t.columns.get(*i)).map(|c| c.ty),
        // Unbound names are reported by binding, not here.
        Expr::Column(_) => None,
        Expr::Unary { op, expr } => {
            let t = check(expr, table)?;
            match op {
                UnaryOp::Not => {
                    boolean(t, "NOT")?;
                    Some(DataType::Boolean)
                }
                UnaryOp::Neg => match t {
                    Some(t) if !numeric(t) => {
                        return plan_err(format!("cannot negate {}", t.name()));
                    }
                    t => t,
                },
            }
        }
        Expr::Binary { op, left, right } => {
            let (l, r) = (check(left, table)?, check(right, table)?);
            binary(*op, l, r)?
        }
        Expr::IsNull { expr, .. } => {
            check(expr, table)?;
            Some(DataType::Boolean)
        }
        Expr::Between {
            expr, low, high, ..
        } => {
            let t = check(expr, table)?;
            comparable(t, check(low, table)?)?;
            comparable(t, check(high, table)?)?;
            Some(DataType::Boolean)
        }
        Expr::InList { expr, list, .. } => {
            let t = check(expr, table)?;
            for item in list {
                comparable(t, check(item, table)?)?;
            }
            Some(DataType::Boolean)
        }
        Expr::Like { expr, pattern, .. } => {
            let (a, b) = (check(expr, table)?, check(pattern, table)?);
            if let (Some(a), Some(b)) = (a, b)
                && (a != DataType::Text || b != DataType::Text)
            {
                return plan_err(format!(
                    "LIKE needs TEXT operands, got {} and {}",
                    a.name(),
                    b.name()
                ));
            }
            Some(DataType::Boolean)
        }
        Expr::Function { func, args } => {
            let types = args
                .iter()
                .map(|a| check(a, table))
                .collect::<Result<Vec<_>>>()?;
            function(*func, &types)?
        }
        Expr::Aggregate { func, arg } => {
            let t = match arg {
                Some(a) => check(a, table)?,
                None => None,
            };
            match func {
                AggFunc::Count => Some(DataType::BigInt),
                AggFunc::Min | AggFunc::Max => t,
                AggFunc::Sum | AggFunc::Avg => {
                    if let Some(t) = t.filter(|t| !numeric(*t)) {
                        return plan_err(format!(
                            "{}() does not accept {}",
                            func.name().to_uppercase(),
                            t.name()
                        ));
                    }
                    if *func == AggFunc::Avg {
                        Some(DataType::Double)
                    } else {
                        t
                    }
                }
            }
        }
    })
}

fn numeric(t: DataType) -> bool {
    matches!(t, DataType::BigInt | DataType::Double)
}

/// Refuses a known non-BOOLEAN operand of `what`.
fn boolean(t: Option<DataType>, what: &str) -> Result<()> {
    match t {
        Some(t) if t != DataType::Boolean => {
            plan_err(format!("{what} needs a BOOLEAN, got {}", t.name()))
        }
        _ => Ok(()),
    }
}

/// Refuses comparing two known types that do not compare (only numbers compare across types).
fn comparable(a: Option<DataType>, b: Option<DataType>) -> Result<()> {
    match (a, b) {
        (Some(a), Some(b)) if a != b && !(numeric(a) && numeric(b)) => {
            plan_err(format!("cannot compare {} with {}", a.name(), b.name()))
        }
        _ => Ok(()),
    }
}

fn binary(op: BinaryOp, l: Option<DataType>, r: Option<DataType>) -> Result<Option<DataType>> {
    Ok(match op {
        BinaryOp::And | BinaryOp::Or => {
            let what = if op == BinaryOp::And { "AND" } else { "OR" };
            boolean(l, what)?;
            boolean(r, what)?;
            Some(DataType::Boolean)
        }
        BinaryOp::Eq
        | BinaryOp::NotEq
        | BinaryOp::Lt
        | BinaryOp::LtEq
        | BinaryOp::Gt
        | BinaryOp::GtEq => {
            comparable(l, r)?;
            Some(DataType::Boolean)
        }
        // With a NULL side the result is NULL, whatever the other side is.
        BinaryOp::Concat => match (l, r) {
            (Some(a), Some(b)) if a != b || !matches!(a, DataType::Text | DataType::Blob) => {
                return plan_err(format!(
                    "|| needs two TEXT or two BLOB operands, got {} and {}",
                    a.name(),
                    b.name()
                ));
            }
            // `t || NULL` is a TEXT (or BLOB) NULL; `id || NULL`, with an operand `||` would
            // refuse, is a NULL of no type (an assignment of it stores NULL anywhere).
            (l, r) => l
                .or(r)
                .filter(|t| matches!(t, DataType::Text | DataType::Blob)),
        },
        BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => {
            match (l, r) {
                (Some(a), Some(b)) if !numeric(a) || !numeric(b) => {
                    return plan_err(format!(
                        "cannot apply {} to {} and {}",
                        op.symbol(),
                        a.name(),
                        b.name()
                    ));
                }
                (Some(DataType::BigInt), Some(DataType::BigInt)) => Some(DataType::BigInt),
                (Some(_), Some(_)) => Some(DataType::Double),
                // One side NULL: the result is NULL whatever the other side is.
                _ => None,
            }
        }
    })
}

fn function(func: ScalarFunc, args: &[Option<DataType>]) -> Result<Option<DataType>> {
    if func == ScalarFunc::Coalesce {
        // Every typed argument must match the first (integers and doubles mix), so the type
        // of the result does not depend on which argument is NULL in a row.
        let mut typed = args.iter().flatten();
        let first = typed.next().copied();
        if let Some(f) = first
            && let Some(other) = typed.find(|t| **t != f && !(numeric(f) && numeric(**t)))
        {
            return plan_err(format!(
                "COALESCE types {} and {} cannot be matched",
                f.name(),
                other.name()
            ));
        }
        // BIGINT with DOUBLE: the BIGINT arguments are converted (`plan::bind`).
        if args.contains(&Some(DataType::Double)) {
            return Ok(Some(DataType::Double));
        }
        return Ok(first);
    }
    let t = args.first().copied().flatten();
    let refuse = |t: DataType| {
        plan_err(format!(
            "{}() does not accept {}",
            func.name().to_uppercase(),
            t.name()
        ))
    };
    Ok(match (func, t) {
        (_, None) => match func {
            ScalarFunc::Length => Some(DataType::BigInt),
            ScalarFunc::Upper | ScalarFunc::Lower => Some(DataType::Text),
            _ => None,
        },
        (ScalarFunc::Length, Some(DataType::Text | DataType::Blob)) => Some(DataType::BigInt),
        (ScalarFunc::Upper | ScalarFunc::Lower, Some(DataType::Text)) => Some(DataType::Text),
        (ScalarFunc::Abs, Some(t)) if numeric(t) => Some(t),
        (ScalarFunc::ToDouble, Some(t)) if numeric(t) => Some(DataType::Double),
        (_, Some(t)) => return refuse(t),
    })
}
