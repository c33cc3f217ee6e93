//! Expression evaluation with SQL's NULL rules (three-valued logic).
//!
//! - Arithmetic and comparisons with a NULL operand give NULL.
//! - `AND`/`OR` follow Kleene logic: `FALSE AND NULL` is FALSE, `TRUE OR NULL` is TRUE.
//! - A WHERE or HAVING that evaluates to NULL rejects the row.
//! - Integer overflow and division by zero are errors, not NULL.
//! - Comparing values of incompatible types (TEXT with BIGINT) is an error.

use std::cmp::Ordering;

use crate::ast::{BinaryOp, Expr, ScalarFunc, UnaryOp};
use crate::error::{QueryError, Result, exec_err};
use crate::value::Value;

/// Evaluates `e` against `row` (bound expressions: `Field(i)` reads `row[i]`).
///
/// # Errors
/// [`QueryError::Exec`] for type errors, [`QueryError::OutOfRange`] for overflow,
/// [`QueryError::DivisionByZero`].
pub fn eval(e: &Expr, row: &[Value]) -> Result<Value> {
    Ok(match e {
        Expr::Literal(v) => v.clone(),
        Expr::Field(i) => row.get(*i).cloned().unwrap_or(Value::Null),
        Expr::Column(name) => return exec_err(format!("unbound column {name}")),
        Expr::Aggregate { func, .. } => {
            return exec_err(format!(
                "{}() is not allowed here",
                func.name().to_uppercase()
            ));
        }
        Expr::Unary { op, expr } => {
            let v = eval(expr, row)?;
            match (op, v) {
                (_, Value::Null) => Value::Null,
                (UnaryOp::Not, Value::Bool(b)) => Value::Bool(!b),
                (UnaryOp::Neg, Value::Int(i)) => Value::Int(
                    i.checked_neg()
                        .ok_or_else(|| QueryError::OutOfRange("integer overflow".to_owned()))?,
                ),
                (UnaryOp::Neg, Value::Double(d)) => Value::Double(-d),
                (UnaryOp::Not, v) => {
                    return exec_err(format!("NOT needs a BOOLEAN, got {}", v.type_name()));
                }
                (UnaryOp::Neg, v) => return exec_err(format!("cannot negate {}", v.type_name())),
            }
        }
        Expr::Binary { op, left, right } => match op {
            BinaryOp::And => {
                let l = truth(&eval(left, row)?, "AND")?;
                if l == Some(false) {
                    return Ok(Value::Bool(false));
                }
                let r = truth(&eval(right, row)?, "AND")?;
                match (l, r) {
                    (_, Some(false)) => Value::Bool(false),
                    (Some(true), Some(true)) => Value::Bool(true),
                    _ => Value::Null,
                }
            }
            BinaryOp::Or => {
                let l = truth(&eval(left, row)?, "OR")?;
                if l == Some(true) {
                    return Ok(Value::Bool(true));
                }
                let r = truth(&eval(right, row)?, "OR")?;
                match (l, r) {
                    (_, Some(true)) => Value::Bool(true),
                    (Some(false), Some(false)) => Value::Bool(false),
                    _ => Value::Null,
                }
            }
            // Columns and literals are compared in place, without cloning (a TEXT column
            // would allocate).
            _ => match (operand(left, row), operand(right, row)) {
                (Some(l), Some(r)) => binary(*op, l, r)?,
                (Some(l), None) => binary(*op, l, &eval(right, row)?)?,
                (None, Some(r)) => binary(*op, &eval(left, row)?, r)?,
                (None, None) => binary(*op, &eval(left, row)?, &eval(right, row)?)?,
            },
        },
        Expr::IsNull { expr, negated } => Value::Bool(eval(expr, row)?.is_null() != *negated),
        Expr::Between {
            expr,
            low,
            high,
            negated,
        } => {
            let v = eval(expr, row)?;
            let ge = compare(BinaryOp::GtEq, &v, &eval(low, row)?)?;
            let le = compare(BinaryOp::LtEq, &v, &eval(high, row)?)?;
            let r = match (ge, le) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
            not_if(r, *negated)
        }
        Expr::InList {
            expr,
            list,
            negated,
            lookup,
        } => {
            let v = eval(expr, row)?;
            let mut r = Some(false);
            if v.is_null() {
                r = None;
            } else if let Some(lookup) = lookup {
                r = lookup.contains(&v);
            } else {
                for item in list {
                    match compare(BinaryOp::Eq, &v, &eval(item, row)?)? {
                        Some(true) => {
                            r = Some(true);
                            break;
                        }
                        None => r = None,
                        Some(false) => {}
                    }
                }
            }
            not_if(r, *negated)
        }
        Expr::Like {
            expr,
            pattern,
            negated,
        } => match (eval(expr, row)?, eval(pattern, row)?) {
            (Value::Null, _) | (_, Value::Null) => Value::Null,
            (Value::Text(s), Value::Text(p)) => Value::Bool(like(&s, &p) != *negated),
            (a, b) => {
                return exec_err(format!(
                    "LIKE needs TEXT operands, got {} and {}",
                    a.type_name(),
                    b.type_name()
                ));
            }
        },
        Expr::Function { func, args } => function(*func, args, row)?,
    })
}

/// The value of a column reference or literal, borrowed; `None` for other expressions.
fn operand<'a>(e: &'a Expr, row: &'a [Value]) -> Option<&'a Value> {
    match e {
        Expr::Literal(v) => Some(v),
        Expr::Field(i) => Some(row.get(*i).unwrap_or(&Value::Null)),
        _ => None,
    }
}

fn not_if(r: Option<bool>, negated: bool) -> Value {
    match r {
        Some(b) => Value::Bool(b != negated),
        None => Value::Null,
    }
}

/// The truth value of a condition: `Some(bool)`, or `None` for NULL.
///
/// # Errors
/// [`QueryError::Exec`] when `v` is not a BOOLEAN or NULL.
pub fn truth(v: &Value, what: &str) -> Result<Option<bool>> {
    match v {
        Value::Bool(b) => Ok(Some(*b)),
        Value::Null => Ok(None),
        v => exec_err(format!("{what} needs a BOOLEAN, got {}", v.type_name())),
    }
}

/// Evaluates a WHERE/HAVING condition: true keeps the row; false and NULL reject it.
///
/// # Errors
/// As [`eval`]; also when the condition is not BOOLEAN.
pub fn passes(e: &Expr, row: &[Value]) -> Result<bool> {
    // The usual residual filter of a scan, a column compared with a literal (`count > 10`):
    // compared in place, without building the BOOLEAN that `eval` would return. Same result
    // and same errors as the general path.
    if let Expr::Binary { op, left, right } = e
        && op.is_comparison()
        && let (Some(l), Some(r)) = (operand(left, row), operand(right, row))
    {
        return Ok(compare(*op, l, r)? == Some(true));
    }
    Ok(truth(&eval(e, row)?, "WHERE")? == Some(true))
}

fn compare(op: BinaryOp, a: &Value, b: &Value) -> Result<Option<bool>> {
    if a.is_null() || b.is_null() {
        return Ok(None);
    }
    let Some(o) = a.sql_cmp(b) else {
        return exec_err(format!(
            "cannot compare {} with {}",
            a.type_name(),
            b.type_name()
        ));
    };
    Ok(Some(match op {
        BinaryOp::Eq => o == Ordering::Equal,
        BinaryOp::NotEq => o != Ordering::Equal,
        BinaryOp::Lt => o == Ordering::Less,
        BinaryOp::LtEq => o != Ordering::Greater,
        BinaryOp::Gt => o == Ordering::Greater,
        BinaryOp::GtEq => o != Ordering::Less,
        _ => return exec_err(format!("{} is not a comparison", op.symbol())),
    }))
}

fn overflow() -> QueryError {
    QueryError::OutOfRange("integer overflow".to_owned())
}

fn binary(op: BinaryOp, a: &Value, b: &Value) -> Result<Value> {
    if op.is_comparison() {
        return Ok(compare(op, a, b)?.map_or(Value::Null, Value::Bool));
    }
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    if op == BinaryOp::Concat {
        return match (a, b) {
            (Value::Text(x), Value::Text(y)) => Ok(Value::Text(format!("{x}{y}"))),
            (Value::Blob(x), Value::Blob(y)) => Ok(Value::Blob([x.as_slice(), y].concat())),
            _ => exec_err(format!(
                "|| needs two TEXT or two BLOB operands, got {} and {}",
                a.type_name(),
                b.type_name()
            )),
        };
    }
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => {
            let (x, y) = (*x, *y);
            let r = match op {
                BinaryOp::Add => x.checked_add(y),
                BinaryOp::Sub => x.checked_sub(y),
                BinaryOp::Mul => x.checked_mul(y),
                BinaryOp::Div | BinaryOp::Mod if y == 0 => return Err(QueryError::DivisionByZero),
                BinaryOp::Div => x.checked_div(y),
                // `i64::MIN % -1` is 0 (only `checked_rem`'s quotient would overflow).
                BinaryOp::Mod if y == -1 => Some(0),
                BinaryOp::Mod => x.checked_rem(y),
                _ => return exec_err(format!("bad operator {}", op.symbol())),
            };
            r.map(Value::Int).ok_or_else(overflow)
        }
        (Value::Int(_) | Value::Double(_), Value::Int(_) | Value::Double(_)) => {
            let (x, y) = (as_f64(a), as_f64(b));
            let r = match op {
                BinaryOp::Add => x + y,
                BinaryOp::Sub => x - y,
                BinaryOp::Mul => x * y,
                BinaryOp::Div | BinaryOp::Mod if y == 0.0 => {
                    return Err(QueryError::DivisionByZero);
                }
                BinaryOp::Div => x / y,
                BinaryOp::Mod => x % y,
                _ => return exec_err(format!("bad operator {}", op.symbol())),
            };
            // Finite operands with an infinite result overflowed (PostgreSQL: "value out of
            // range: overflow"); a stored infinity still computes as IEEE 754 says.
            if r.is_infinite() && x.is_finite() && y.is_finite() {
                return Err(QueryError::OutOfRange("double overflow".to_owned()));
            }
            Ok(Value::Double(r))
        }
        _ => exec_err(format!(
            "cannot apply {} to {} and {}",
            op.symbol(),
            a.type_name(),
            b.type_name()
        )),
    }
}

#[expect(
    clippy::cast_precision_loss,
    reason = "mixed integer/double arithmetic is done in doubles, as in every SQL database"
)]
fn as_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i) => *i as f64,
        Value::Double(d) => *d,
        _ => 0.0,
    }
}

fn function(func: ScalarFunc, args: &[Expr], row: &[Value]) -> Result<Value> {
    if func == ScalarFunc::Coalesce {
        for a in args {
            let v = eval(a, row)?;
            if !v.is_null() {
                return Ok(v);
            }
        }
        return Ok(Value::Null);
    }
    let v = match args.first() {
        Some(a) => eval(a, row)?,
        None => Value::Null,
    };
    Ok(match (func, v) {
        (_, Value::Null) => Value::Null,
        (ScalarFunc::Length, Value::Text(s)) => Value::Int(len_i64(s.chars().count())),
        (ScalarFunc::Length, Value::Blob(b)) => Value::Int(len_i64(b.len())),
        (ScalarFunc::Upper, Value::Text(s)) => Value::Text(s.to_uppercase()),
        (ScalarFunc::Lower, Value::Text(s)) => Value::Text(s.to_lowercase()),
        (ScalarFunc::Abs, Value::Int(i)) => Value::Int(i.checked_abs().ok_or_else(overflow)?),
        (ScalarFunc::Abs, Value::Double(d)) => Value::Double(d.abs()),
        (ScalarFunc::ToDouble, v @ (Value::Int(_) | Value::Double(_))) => Value::Double(as_f64(&v)),
        (f, v) => {
            return exec_err(format!(
                "{}() does not accept {}",
                f.name().to_uppercase(),
                v.type_name()
            ));
        }
    })
}

fn len_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// SQL `LIKE`: `%` matches any run of characters, `_` exactly one; case-sensitive.
///
/// The pattern is cut at each `%` into segments that each match a fixed number of
/// characters: the first must match the start of `s`, the last its end, and the ones
/// between are placed left to right, each at its leftmost match after the one before
/// (placing such a segment leftmost never loses a match). A segment without `_` is found
/// with `memchr::memmem`, so a pattern of literal runs and `%` takes time linear in `s` and
/// the pattern; one with `_` is tried where its first character is (at each character when
/// that is `_`), at most the product of the two lengths. Works on the UTF-8 bytes: `_`
/// takes one whole character.
pub fn like(s: &str, pattern: &str) -> bool {
    let (s, pattern) = (s.as_bytes(), pattern.as_bytes());
    let is_percent = |&b: &u8| b == b'%';
    let (Some(first_end), Some(last_start)) = (
        pattern.iter().position(is_percent),
        pattern.iter().rposition(is_percent),
    ) else {
        // No `%`: the pattern is the whole string.
        return match_at(s, pattern).is_some_and(<[u8]>::is_empty);
    };
    let Some(mut rest) = match_at(s, &pattern[..first_end]) else {
        return false;
    };
    if first_end < last_start {
        for segment in pattern[first_end + 1..last_start].split(is_percent) {
            match find_segment(rest, segment) {
                Some(after) => rest = after,
                None => return false,
            }
        }
    }
    ends_with_segment(rest, &pattern[last_start + 1..])
}

/// True for a UTF-8 continuation byte (not the first byte of a character).
fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// The length in bytes of the UTF-8 character whose first byte is `b`.
fn char_len(b: u8) -> usize {
    match b {
        0xF0.. => 4,
        0xE0.. => 3,
        0xC0.. => 2,
        _ => 1,
    }
}

/// What is left of `s` (UTF-8, from a character boundary) after `segment` (UTF-8 without
/// `%`; `_` matching any one character) when it matches at the start of `s`.
fn match_at<'a>(s: &'a [u8], segment: &[u8]) -> Option<&'a [u8]> {
    let mut at = 0;
    for &p in segment {
        let &c = s.get(at)?;
        if p == b'_' {
            at += char_len(c);
        } else if p == c {
            at += 1;
        } else {
            return None;
        }
    }
    s.get(at..)
}

/// What is left of `s` after the leftmost match of `segment`.
fn find_segment<'a>(s: &'a [u8], segment: &[u8]) -> Option<&'a [u8]> {
    if !segment.contains(&b'_') {
        // A UTF-8 needle found in UTF-8 text starts and ends on character boundaries.
        return memchr::memmem::find(s, segment).map(|at| &s[at + segment.len()..]);
    }
    match segment.first() {
        // Tried only where its first byte is: the first byte of a character, which never
        // occurs inside one.
        Some(&first) if first != b'_' => {
            memchr::memchr_iter(first, s).find_map(|at| match_at(&s[at..], segment))
        }
        _ => (0..=s.len())
            .filter(|&at| s.get(at).is_none_or(|&b| !is_continuation(b)))
            .find_map(|at| match_at(&s[at..], segment)),
    }
}

/// True when `segment` matches the end of `s`.
fn ends_with_segment(s: &[u8], segment: &[u8]) -> bool {
    let chars = segment.iter().filter(|&&b| !is_continuation(b)).count();
    if chars == 0 {
        return true;
    }
    // The start of the last `chars` characters of `s`.
    let start = (0..s.len())
        .rev()
        .filter(|&at| !is_continuation(s[at]))
        .nth(chars - 1);
    start.is_some_and(|at| match_at(&s[at..], segment).is_some_and(<[u8]>::is_empty))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(v: Value) -> Box<Expr> {
        Box::new(Expr::Literal(v))
    }

    #[test]
    fn like_matches_sql_wildcards() {
        assert!(like("ACGTAC", "ACG%"));
        assert!(like("ACGTAC", "%TA%"));
        assert!(like("ACGTAC", "A_GT%C"));
        assert!(!like("ACGTAC", "ACG"));
        assert!(like("", "%"));
        assert!(!like("AB", "A_B"));
        assert!(like("a%b", "a%b"));
        assert!(like("aXbYc", "a%b%c"));
        assert!(!like("ab", "ab%b"), "prefix and suffix may not overlap");
        assert!(like("abb", "ab%b"));
        assert!(like("été", "_t_"));
        assert!(like("été", "%t%"));
        assert!(!like("été", "__"));
        assert!(like("anything", "%%"));
        assert!(like("", ""));
        assert!(!like("x", ""));
    }

    /// `LIKE` by dynamic programming over characters, the definition `like` must agree with.
    fn like_by_definition(s: &str, pattern: &str) -> bool {
        let s: Vec<char> = s.chars().collect();
        let p: Vec<char> = pattern.chars().collect();
        // matches[j]: the first i characters of s match the first j of p (row i).
        let mut matches = vec![false; p.len() + 1];
        matches[0] = true;
        for j in 1..=p.len() {
            matches[j] = matches[j - 1] && p[j - 1] == '%';
        }
        for &c in &s {
            let mut next = vec![false; p.len() + 1];
            for j in 1..=p.len() {
                next[j] = match p[j - 1] {
                    '%' => next[j - 1] || matches[j],
                    '_' => matches[j - 1],
                    lit => matches[j - 1] && lit == c,
                };
            }
            matches = next;
        }
        matches[p.len()]
    }

    /// Every pattern of up to 5 characters over `a b % _`, and of up to 4 over `a é % _`,
    /// against every string of up to 5 characters over `a b é`.
    #[test]
    fn like_agrees_with_its_definition_exhaustively() {
        fn all(alphabet: &[char], max: usize) -> Vec<String> {
            let mut out = vec![String::new()];
            let mut last = vec![String::new()];
            for _ in 0..max {
                last = last
                    .iter()
                    .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
                    .collect();
                out.extend(last.iter().cloned());
            }
            out
        }
        let mut patterns = all(&['a', 'b', '%', '_'], 5);
        patterns.extend(all(&['a', 'é', '%', '_'], 4));
        let strings = all(&['a', 'b', 'é'], 5);
        for p in &patterns {
            for s in &strings {
                assert_eq!(like(s, p), like_by_definition(s, p), "{s:?} LIKE {p:?}");
            }
        }
    }

    /// A long literal segment after `%` against a long text that nearly matches everywhere:
    /// linear in both (this test takes milliseconds), where matching at each position took
    /// their product (2 * 10^9 steps, seconds; a tester's query over a 2 MB value).
    #[test]
    fn like_of_a_long_segment_against_a_long_text() {
        let text = "a".repeat(2_000_000);
        let pattern = format!("%{}b", "a".repeat(1000));
        assert!(!like(&text, &pattern));
        assert!(like(&format!("{text}b"), &pattern));
        assert!(!like(&text, &format!("%{}b%", "a".repeat(1000))));
        assert!(like(
            &format!("{text}b{text}"),
            &format!("%{}b%", "a".repeat(1000))
        ));
    }

    #[test]
    fn passes_on_a_comparison_agrees_with_evaluating_it() {
        let values = [
            Value::Null,
            Value::Int(-3),
            Value::Int(10),
            Value::Int(11),
            Value::Double(10.0),
            Value::Double(f64::NAN),
            Value::Text("10".into()),
            Value::Text("b".into()),
            Value::Blob(vec![0, 1]),
            Value::Bool(true),
        ];
        let ops = [
            BinaryOp::Eq,
            BinaryOp::NotEq,
            BinaryOp::Lt,
            BinaryOp::LtEq,
            BinaryOp::Gt,
            BinaryOp::GtEq,
        ];
        let mut compared = 0;
        for a in &values {
            for b in &values {
                let row = [a.clone(), b.clone()];
                for op in ops {
                    // Column against column, column against literal, literal against column.
                    for (left, right) in [
                        (Expr::Field(0), Expr::Field(1)),
                        (Expr::Field(0), Expr::Literal(b.clone())),
                        (Expr::Literal(a.clone()), Expr::Field(1)),
                    ] {
                        let e = Expr::Binary {
                            op,
                            left: Box::new(left),
                            right: Box::new(right),
                        };
                        let general = eval(&e, &row).and_then(|v| truth(&v, "WHERE"));
                        match (passes(&e, &row), general) {
                            (Ok(fast), Ok(slow)) => {
                                assert_eq!(fast, slow == Some(true), "{a:?} {op:?} {b:?}");
                                compared += 1;
                            }
                            (Err(fast), Err(slow)) => {
                                assert_eq!(fast.to_string(), slow.to_string());
                            }
                            (fast, slow) => panic!("{a:?} {op:?} {b:?}: {fast:?} vs {slow:?}"),
                        }
                    }
                }
            }
        }
        assert!(compared > 500, "{compared}");
    }

    #[test]
    fn and_or_follow_kleene_logic() {
        let and = |a, b| {
            eval(
                &Expr::Binary {
                    op: BinaryOp::And,
                    left: lit(a),
                    right: lit(b),
                },
                &[],
            )
            .unwrap()
        };
        assert_eq!(and(Value::Bool(false), Value::Null), Value::Bool(false));
        assert_eq!(and(Value::Null, Value::Bool(false)), Value::Bool(false));
        assert_eq!(and(Value::Bool(true), Value::Null), Value::Null);
    }

    #[test]
    fn overflow_and_division_by_zero_are_errors() {
        let e = Expr::Binary {
            op: BinaryOp::Add,
            left: lit(Value::Int(i64::MAX)),
            right: lit(Value::Int(1)),
        };
        assert_eq!(eval(&e, &[]).unwrap_err().to_string(), "integer overflow");
        let e = Expr::Binary {
            op: BinaryOp::Div,
            left: lit(Value::Int(1)),
            right: lit(Value::Int(0)),
        };
        assert_eq!(eval(&e, &[]).unwrap_err().to_string(), "division by zero");
        let e = Expr::Binary {
            op: BinaryOp::Mul,
            left: lit(Value::Double(1e308)),
            right: lit(Value::Int(10)),
        };
        assert_eq!(eval(&e, &[]).unwrap_err().to_string(), "double overflow");
        // An infinity that is already there is not an overflow.
        let e = Expr::Binary {
            op: BinaryOp::Add,
            left: lit(Value::Double(f64::INFINITY)),
            right: lit(Value::Int(1)),
        };
        assert_eq!(eval(&e, &[]).unwrap(), Value::Double(f64::INFINITY));
    }
}
