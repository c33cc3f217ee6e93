//! Result column types of a statement, known before it runs (PostgreSQL clients describe a
//! statement's columns before executing it), computed from the plan and the catalog.
//!
//! `None` means "unknown" (a NULL literal, a parameter, COALESCE of unknowns): such columns
//! are described as `text` and their values sent as text.

use strata_query::DataType;
use strata_query::ast::{AggFunc, BinaryOp, Expr, ScalarFunc, UnaryOp};
use strata_query::catalog::TableSchema;
use strata_query::plan::{SelectPlan, Shape};

/// The type of `e` evaluated over a row of `table` (`Field(i)` = column `i`).
fn expr_type(e: &Expr, field: &dyn Fn(usize) -> Option<DataType>) -> Option<DataType> {
    match e {
        Expr::Literal(v) => v.data_type(),
        Expr::Column(_) => None,
        Expr::Field(i) => field(*i),
        Expr::Unary { op, expr } => match op {
            UnaryOp::Not => Some(DataType::Boolean),
            UnaryOp::Neg => expr_type(expr, field),
        },
        Expr::Binary { op, left, right } => match op {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => {
                match (expr_type(left, field), expr_type(right, field)) {
                    (Some(DataType::Double), _) | (_, Some(DataType::Double)) => {
                        Some(DataType::Double)
                    }
                    (Some(DataType::BigInt), Some(DataType::BigInt)) => Some(DataType::BigInt),
                    _ => None,
                }
            }
            // `||` of two BLOBs is a BLOB (of two TEXTs, TEXT; anything else is an error).
            BinaryOp::Concat => match (expr_type(left, field), expr_type(right, field)) {
                (Some(DataType::Blob), _) | (_, Some(DataType::Blob)) => Some(DataType::Blob),
                _ => Some(DataType::Text),
            },
            _ => Some(DataType::Boolean),
        },
        Expr::IsNull { .. } | Expr::Between { .. } | Expr::InList { .. } | Expr::Like { .. } => {
            Some(DataType::Boolean)
        }
        Expr::Function { func, args } => match func {
            ScalarFunc::Length => Some(DataType::BigInt),
            ScalarFunc::Upper | ScalarFunc::Lower => Some(DataType::Text),
            ScalarFunc::Abs => args.first().and_then(|a| expr_type(a, field)),
            ScalarFunc::ToDouble => Some(DataType::Double),
            // The planner allows mixed arguments only for BIGINT with DOUBLE: then the
            // result is a DOUBLE column (an integer value is sent as a double).
            ScalarFunc::Coalesce => {
                let types: Vec<DataType> =
                    args.iter().filter_map(|a| expr_type(a, field)).collect();
                if types.contains(&DataType::Double) && types.contains(&DataType::BigInt) {
                    Some(DataType::Double)
                } else {
                    types.first().copied()
                }
            }
        },
        Expr::Aggregate { func, arg } => aggregate_type(*func, arg.as_deref(), field),
    }
}

fn aggregate_type(
    func: AggFunc,
    arg: Option<&Expr>,
    field: &dyn Fn(usize) -> Option<DataType>,
) -> Option<DataType> {
    match func {
        AggFunc::Count => Some(DataType::BigInt),
        AggFunc::Avg => Some(DataType::Double),
        AggFunc::Sum | AggFunc::Min | AggFunc::Max => arg.and_then(|a| expr_type(a, field)),
    }
}

fn column_type(table: Option<&TableSchema>, i: usize) -> Option<DataType> {
    table.and_then(|t| t.columns.get(i)).map(|c| c.ty)
}

/// The output columns of a planned SELECT with their types.
pub fn select_columns(plan: &SelectPlan) -> Vec<(String, Option<DataType>)> {
    let table = plan.scan.as_ref().map(|s| s.table.as_ref());
    let table_field = |i: usize| column_type(table, i);
    let types: Vec<Option<DataType>> = match &plan.shape {
        Shape::Simple { projections } => projections
            .iter()
            .map(|e| expr_type(e, &table_field))
            .collect(),
        Shape::Aggregate {
            group_by,
            aggregates,
            projections,
            ..
        } => {
            // A group row is the group-by values, then the aggregate results.
            let group_field = |i: usize| -> Option<DataType> {
                match group_by.get(i) {
                    Some(g) => expr_type(g, &table_field),
                    None => aggregates
                        .get(i - group_by.len())
                        .and_then(|(f, a)| aggregate_type(*f, a.as_ref(), &table_field)),
                }
            };
            projections
                .iter()
                .map(|e| expr_type(e, &group_field))
                .collect()
        }
    };
    plan.columns
        .iter()
        .cloned()
        .zip(types.into_iter().chain(std::iter::repeat(None)))
        .collect()
}

/// Column types for rows whose types were not known up front: the type of the first
/// non-NULL value of each column.
pub fn types_from_values(
    columns: &[String],
    rows: &[Vec<strata_query::Value>],
) -> Vec<(String, Option<DataType>)> {
    columns
        .iter()
        .enumerate()
        .map(|(c, name)| {
            let ty = rows
                .iter()
                .find_map(|r| r.get(c).and_then(strata_query::Value::data_type));
            (name.clone(), ty)
        })
        .collect()
}
