//! Expressions: sqlparser `Expr` → [`crate::ast::Expr`].

use sqlparser::ast::{
    BinaryOperator as SqlBinaryOperator, DuplicateTreatment as SqlDuplicateTreatment,
    Expr as SqlExpr, Function as SqlFunction, FunctionArg as SqlFunctionArg,
    FunctionArgExpr as SqlFunctionArgExpr, FunctionArguments as SqlFunctionArguments,
    InTarget as SqlInTarget, UnaryOperator as SqlUnaryOperator, Value as SqlValue,
};

use super::{Scope, ident, object_name};
use crate::ast::{AggFunc, BinaryOp, Expr, ScalarFunc, UnaryOp};
use crate::error::{QueryError, Result, unsupported};
use crate::value::Value;

/// Translates an expression; `scope` names the table (and alias) that column qualifiers
/// may use.
pub(crate) fn expr(e: &SqlExpr, scope: &Scope) -> Result<Expr> {
    let b = |e: &SqlExpr| expr(e, scope).map(Box::new);
    Ok(match e {
        // sqlparser reads `VALUES (1, DEFAULT)` as a column named DEFAULT.
        SqlExpr::Identifier(i)
            if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default") =>
        {
            return unsupported("DEFAULT");
        }
        SqlExpr::Identifier(i) => Expr::Column(ident(i)),
        SqlExpr::CompoundIdentifier(parts) => match parts.as_slice() {
            [q, c] => {
                scope.check_qualifier(&ident(q))?;
                Expr::Column(ident(c))
            }
            _ => return unsupported(format!("the column reference `{e}`")),
        },
        SqlExpr::Value(v) => Expr::Literal(literal(&v.value)?),
        SqlExpr::Nested(inner) => expr(inner, scope)?,
        SqlExpr::UnaryOp { op, expr: inner } => match op {
            SqlUnaryOperator::Not => Expr::Unary {
                op: UnaryOp::Not,
                expr: b(inner)?,
            },
            // A negative number literal is read with its sign, so the smallest BIGINT
            // (-9223372036854775808, whose digits alone do not fit) stays an integer.
            SqlUnaryOperator::Minus if number_literal(inner).is_some() => {
                let digits = number_literal(inner).unwrap_or_default();
                Expr::Literal(number(&format!("-{digits}"))?)
            }
            SqlUnaryOperator::Minus => {
                let operand = expr(inner, scope)?;
                let folds = matches!(operand, Expr::Literal(Value::Int(_) | Value::Double(_)));
                let neg = Expr::Unary {
                    op: UnaryOp::Neg,
                    expr: Box::new(operand),
                };
                // A number is negated now, as evaluation would: -(-9223372036854775808)
                // overflows here as it does at run time.
                if folds {
                    Expr::Literal(crate::exec::eval::eval(&neg, &[])?)
                } else {
                    neg
                }
            }
            SqlUnaryOperator::Plus => expr(inner, scope)?,
            other => return unsupported(format!("the unary operator {other}")),
        },
        SqlExpr::BinaryOp { left, op, right } => Expr::Binary {
            op: binary_op(op)?,
            left: b(left)?,
            right: b(right)?,
        },
        SqlExpr::IsNull(inner) => Expr::IsNull {
            expr: b(inner)?,
            negated: false,
        },
        SqlExpr::IsNotNull(inner) => Expr::IsNull {
            expr: b(inner)?,
            negated: true,
        },
        SqlExpr::Between {
            expr: inner,
            negated,
            low,
            high,
        } => Expr::Between {
            expr: b(inner)?,
            low: b(low)?,
            high: b(high)?,
            negated: *negated,
        },
        SqlExpr::In {
            expr: inner,
            target,
            negated,
            ..
        } => match target {
            SqlInTarget::List(list) => Expr::in_list(
                b(inner)?,
                list.iter().map(|e| expr(e, scope)).collect::<Result<_>>()?,
                *negated,
            ),
            _ => return unsupported("IN with a subquery"),
        },
        SqlExpr::Like {
            negated,
            any,
            expr: inner,
            pattern,
            escape_char,
        } => {
            if *any {
                return unsupported("LIKE ANY");
            }
            if escape_char.is_some() {
                return unsupported("LIKE ... ESCAPE");
            }
            Expr::Like {
                expr: b(inner)?,
                pattern: b(pattern)?,
                negated: *negated,
            }
        }
        SqlExpr::ILike { .. } => return unsupported("ILIKE"),
        SqlExpr::Function(f) => function(f, scope)?,
        SqlExpr::Subquery(_) | SqlExpr::Exists { .. } => return unsupported("a subquery"),
        SqlExpr::Case { .. } => return unsupported("CASE"),
        SqlExpr::Cast { .. } => return unsupported("CAST"),
        SqlExpr::Wildcard(_) | SqlExpr::QualifiedWildcard(..) => {
            return unsupported("`*` inside an expression");
        }
        other => return unsupported(format!("the expression `{other}`")),
    })
}

fn binary_op(op: &SqlBinaryOperator) -> Result<BinaryOp> {
    Ok(match op {
        SqlBinaryOperator::Plus => BinaryOp::Add,
        SqlBinaryOperator::Minus => BinaryOp::Sub,
        SqlBinaryOperator::Multiply => BinaryOp::Mul,
        SqlBinaryOperator::Divide => BinaryOp::Div,
        SqlBinaryOperator::Modulo => BinaryOp::Mod,
        SqlBinaryOperator::StringConcat => BinaryOp::Concat,
        SqlBinaryOperator::Eq => BinaryOp::Eq,
        SqlBinaryOperator::NotEq => BinaryOp::NotEq,
        SqlBinaryOperator::Lt => BinaryOp::Lt,
        SqlBinaryOperator::LtEq => BinaryOp::LtEq,
        SqlBinaryOperator::Gt => BinaryOp::Gt,
        SqlBinaryOperator::GtEq => BinaryOp::GtEq,
        SqlBinaryOperator::And => BinaryOp::And,
        SqlBinaryOperator::Or => BinaryOp::Or,
        other => return unsupported(format!("the operator {other}")),
    })
}

/// A literal value.
pub(crate) fn literal(v: &SqlValue) -> Result<Value> {
    Ok(match v {
        SqlValue::Number(s, _) => number(s)?,
        SqlValue::SingleQuotedString(s) => Value::Text(s.clone()),
        SqlValue::HexStringLiteral(h) => Value::Blob(hex(h)?),
        SqlValue::Boolean(b) => Value::Bool(*b),
        SqlValue::Null => Value::Null,
        SqlValue::Placeholder(_) => return unsupported("a parameter ($1, ?)"),
        other => return unsupported(format!("the literal {other}")),
    })
}

/// The digits of `e` when it is a number literal.
fn number_literal(e: &SqlExpr) -> Option<&str> {
    match e {
        SqlExpr::Value(v) => match &v.value {
            SqlValue::Number(n, _) => Some(n.as_str()),
            _ => None,
        },
        _ => None,
    }
}

fn number(s: &str) -> Result<Value> {
    if let Ok(i) = s.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    match s.parse::<f64>() {
        Ok(d) if d.is_finite() => Ok(Value::Double(d)),
        // As PostgreSQL refuses `2e308`: an infinity would be stored, and NaN follow from it.
        Ok(_) => Err(QueryError::OutOfRange(format!(
            "{s} is out of range for type DOUBLE"
        ))),
        Err(_) => Err(QueryError::Translate(format!("bad number {s}"))),
    }
}

fn hex(h: &str) -> Result<Vec<u8>> {
    let bad = || QueryError::Translate(format!("bad hex literal x'{h}'"));
    if !h.len().is_multiple_of(2) {
        return Err(bad());
    }
    (0..h.len())
        .step_by(2)
        .map(|i| {
            h.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .ok_or_else(bad)
        })
        .collect()
}

fn function(f: &SqlFunction, scope: &Scope) -> Result<Expr> {
    let name = object_name(&f.name)?;
    if f.over.is_some() {
        return unsupported("a window function (OVER)");
    }
    if f.filter.is_some() || !f.within_group.is_empty() || f.null_treatment.is_some() {
        return unsupported(format!("the function call `{f}`"));
    }
    if !matches!(f.parameters, SqlFunctionArguments::None) {
        return unsupported(format!("the function call `{f}`"));
    }
    let list = match &f.args {
        SqlFunctionArguments::List(l) => l,
        SqlFunctionArguments::None => return unsupported(format!("the function call `{f}`")),
        SqlFunctionArguments::Subquery(_) => return unsupported("a subquery"),
    };
    if matches!(
        list.duplicate_treatment,
        Some(SqlDuplicateTreatment::Distinct)
    ) {
        return unsupported(format!("DISTINCT in {}()", name.to_uppercase()));
    }
    if !list.clauses.is_empty() {
        return unsupported(format!("the function call `{f}`"));
    }
    let mut star = false;
    let mut args = Vec::new();
    for a in &list.args {
        match a {
            SqlFunctionArg::Unnamed(SqlFunctionArgExpr::Expr(e)) => args.push(expr(e, scope)?),
            SqlFunctionArg::Unnamed(SqlFunctionArgExpr::Wildcard) => star = true,
            _ => return unsupported(format!("the function argument `{a}`")),
        }
    }
    let arity = |n: usize| -> Result<()> {
        if args.len() == n && !star {
            Ok(())
        } else {
            Err(QueryError::Translate(format!(
                "{}() takes {n} argument{}",
                name.to_uppercase(),
                if n == 1 { "" } else { "s" }
            )))
        }
    };
    let agg = |func| -> Result<Expr> {
        arity(1)?;
        let arg = args.first().cloned().map(Box::new);
        if arg.as_deref().is_some_and(Expr::has_aggregate) {
            return Err(QueryError::Translate(
                "aggregate calls cannot be nested".to_owned(),
            ));
        }
        Ok(Expr::Aggregate { func, arg })
    };
    let scalar = |func, n: Option<usize>| -> Result<Expr> {
        match n {
            Some(n) => arity(n)?,
            None if args.is_empty() || star => {
                return Err(QueryError::Translate(format!(
                    "{}() needs at least one argument",
                    name.to_uppercase()
                )));
            }
            None => {}
        }
        Ok(Expr::Function {
            func,
            args: args.clone(),
        })
    };
    match name.as_str() {
        "count" if star && args.is_empty() => Ok(Expr::Aggregate {
            func: AggFunc::Count,
            arg: None,
        }),
        "count" => agg(AggFunc::Count),
        "sum" => agg(AggFunc::Sum),
        "min" => agg(AggFunc::Min),
        "max" => agg(AggFunc::Max),
        "avg" => agg(AggFunc::Avg),
        "length" | "char_length" => scalar(ScalarFunc::Length, Some(1)),
        "upper" => scalar(ScalarFunc::Upper, Some(1)),
        "lower" => scalar(ScalarFunc::Lower, Some(1)),
        "abs" => scalar(ScalarFunc::Abs, Some(1)),
        "coalesce" => scalar(ScalarFunc::Coalesce, None),
        _ => unsupported(format!("the function {}()", name.to_uppercase())),
    }
}
