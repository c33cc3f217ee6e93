//! SQL values and column types.
//!
//! A [`Value`] is one cell. Columns are typed ([`DataType`]); values are coerced to the
//! column's type on write ([`Value::coerce_to`]), so a stored column only ever holds values
//! of its type or NULL.

use std::cmp::Ordering;
use std::fmt;

/// A column type. Each SQL spelling maps to one of these (see `docs/sql.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DataType {
    /// 64-bit signed integer: `BIGINT`, `INT`, `INTEGER`.
    BigInt,
    /// IEEE 754 double: `DOUBLE`, `REAL`, `FLOAT`.
    Double,
    /// UTF-8 text: `TEXT`, `VARCHAR`.
    Text,
    /// Byte string: `BLOB`, `BYTEA`.
    Blob,
    /// `BOOLEAN`.
    Boolean,
}

impl DataType {
    /// The canonical SQL name, as printed by `DESCRIBE`.
    pub fn name(self) -> &'static str {
        match self {
            DataType::BigInt => "BIGINT",
            DataType::Double => "DOUBLE",
            DataType::Text => "TEXT",
            DataType::Blob => "BLOB",
            DataType::Boolean => "BOOLEAN",
        }
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One SQL value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL: unknown. Comparisons with NULL yield NULL.
    Null,
    /// `TRUE` / `FALSE`.
    Bool(bool),
    /// A 64-bit signed integer.
    Int(i64),
    /// A double.
    Double(f64),
    /// UTF-8 text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

impl Value {
    /// True for [`Value::Null`].
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The type of a non-NULL value; `None` for NULL.
    pub fn data_type(&self) -> Option<DataType> {
        match self {
            Value::Null => None,
            Value::Bool(_) => Some(DataType::Boolean),
            Value::Int(_) => Some(DataType::BigInt),
            Value::Double(_) => Some(DataType::Double),
            Value::Text(_) => Some(DataType::Text),
            Value::Blob(_) => Some(DataType::Blob),
        }
    }

    /// A short name of the value's type for error messages (`NULL` for NULL).
    pub fn type_name(&self) -> &'static str {
        self.data_type().map_or("NULL", DataType::name)
    }

    /// Converts the value to `ty` for storage in a column of that type, or `None` when the
    /// conversion would lose information or makes no sense. NULL stays NULL. Allowed:
    /// integer → DOUBLE; a DOUBLE with an integer value of magnitude up to 2^53 → BIGINT; TEXT → BLOB (its
    /// UTF-8 bytes); integer 0/1 → BOOLEAN.
    pub fn coerce_to(self, ty: DataType) -> Option<Value> {
        match (self, ty) {
            (Value::Null, _) => Some(Value::Null),
            (v @ Value::Int(_), DataType::BigInt)
            | (v @ Value::Double(_), DataType::Double)
            | (v @ Value::Text(_), DataType::Text)
            | (v @ Value::Blob(_), DataType::Blob)
            | (v @ Value::Bool(_), DataType::Boolean) => Some(v),
            #[expect(
                clippy::cast_precision_loss,
                reason = "SQL integer to DOUBLE conversion rounds like every SQL database"
            )]
            (Value::Int(i), DataType::Double) => Some(Value::Double(i as f64)),
            // Only up to 2^53: past it every double is whole, but it stands for many integers
            // (12345678901234567 reads as ...568), so which one was meant is unknown.
            (Value::Double(d), DataType::BigInt) if d.abs() <= MAX_EXACT_DOUBLE_INT => {
                exact_int(d).map(Value::Int)
            }
            (Value::Text(s), DataType::Blob) => Some(Value::Blob(s.into_bytes())),
            (Value::Int(0), DataType::Boolean) => Some(Value::Bool(false)),
            (Value::Int(1), DataType::Boolean) => Some(Value::Bool(true)),
            _ => None,
        }
    }

    /// SQL comparison: `None` when either side is NULL (the result is unknown) or the types
    /// cannot be compared; integers and doubles compare numerically.
    pub fn sql_cmp(&self, other: &Value) -> Option<Ordering> {
        match (self, other) {
            (Value::Int(a), Value::Int(b)) => Some(a.cmp(b)),
            (Value::Double(a), Value::Double(b)) => Some(canonical(*a).total_cmp(&canonical(*b))),
            (Value::Int(a), Value::Double(b)) => Some(cmp_int_double(*a, *b)),
            (Value::Double(a), Value::Int(b)) => Some(cmp_int_double(*b, *a).reverse()),
            (Value::Text(a), Value::Text(b)) => Some(a.cmp(b)),
            (Value::Blob(a), Value::Blob(b)) => Some(a.cmp(b)),
            (Value::Bool(a), Value::Bool(b)) => Some(a.cmp(b)),
            _ => None,
        }
    }

    /// A total order for sorting and grouping: NULL first, then booleans, numbers (integers
    /// and doubles together, numerically), text, blobs.
    pub fn total_cmp(&self, other: &Value) -> Ordering {
        fn rank(v: &Value) -> u8 {
            match v {
                Value::Null => 0,
                Value::Bool(_) => 1,
                Value::Int(_) | Value::Double(_) => 2,
                Value::Text(_) => 3,
                Value::Blob(_) => 4,
            }
        }
        match self.sql_cmp(other) {
            Some(o) => o,
            None => rank(self).cmp(&rank(other)),
        }
    }
}

/// `d` as an `i64` when it holds an integer value in range.
/// 2^53: every integer up to it in magnitude has its own double.
const MAX_EXACT_DOUBLE_INT: f64 = 9_007_199_254_740_992.0;

pub(crate) fn exact_int(d: f64) -> Option<i64> {
    // 2^63 as f64 is exact; every f64 in [-2^63, 2^63) with no fraction converts exactly.
    const LIMIT: f64 = 9_223_372_036_854_775_808.0;
    if d.fract() == 0.0 && (-LIMIT..LIMIT).contains(&d) {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "range and fraction checked above"
        )]
        Some(d as i64)
    } else {
        None
    }
}

/// `d` with `-0.0` as `0.0` and every NaN as the one positive NaN, so that `total_cmp`
/// orders doubles as SQL compares them (`-0.0 = 0.0`, NaN above every number, as stored
/// values already are).
fn canonical(d: f64) -> f64 {
    if d == 0.0 {
        0.0
    } else if d.is_nan() {
        f64::NAN
    } else {
        d
    }
}

/// Compares an integer with a double exactly (no rounding of large integers).
fn cmp_int_double(i: i64, d: f64) -> Ordering {
    if d.is_nan() {
        return Ordering::Less; // NaN sorts above every number, as in total_cmp
    }
    let floor = d.floor();
    match exact_int(floor) {
        Some(f) => match i.cmp(&f) {
            Ordering::Equal if d > floor => Ordering::Less,
            o => o,
        },
        None if floor < 0.0 => Ordering::Greater,
        None => Ordering::Less,
    }
}

impl fmt::Display for Value {
    /// Formats like the REPL prints: NULL as `NULL`, doubles with a decimal point
    /// (`2.0`), blobs as `x'0a1b'`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Null => f.write_str("NULL"),
            Value::Bool(b) => f.write_str(if *b { "true" } else { "false" }),
            Value::Int(i) => write!(f, "{i}"),
            Value::Double(d) => {
                // Whole values keep a `.0` so they read as doubles; from 1e16 on, the
                // shortest exponent form (`1e16`, not 17 digits that look like an integer;
                // `1.7976931348623157e308`, not 309 digits).
                // Below 1e-4 the same (`1e-5`, `5e-324`, not 300 zeros).
                if d.is_finite() && (d.abs() >= 1e16 || (*d != 0.0 && d.abs() < 1e-4)) {
                    write!(f, "{d:e}")
                } else if d.is_finite() && d.fract() == 0.0 {
                    write!(f, "{d:.1}")
                } else {
                    write!(f, "{d}")
                }
            }
            Value::Text(s) => f.write_str(s),
            Value::Blob(b) => {
                f.write_str("x'")?;
                for byte in b {
                    write!(f, "{byte:02x}")?;
                }
                f.write_str("'")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn int_double_comparison_is_exact_for_large_integers() {
        let big = i64::MAX;
        assert_eq!(
            Value::Int(big).sql_cmp(&Value::Double(9.223_372_036_854_776e18)),
            Some(Ordering::Less)
        );
        assert_eq!(
            Value::Int(3).sql_cmp(&Value::Double(2.5)),
            Some(Ordering::Greater)
        );
        assert_eq!(
            Value::Int(2).sql_cmp(&Value::Double(2.5)),
            Some(Ordering::Less)
        );
        assert_eq!(
            Value::Int(-3).sql_cmp(&Value::Double(-2.5)),
            Some(Ordering::Less)
        );
        assert_eq!(
            Value::Int(2).sql_cmp(&Value::Double(2.0)),
            Some(Ordering::Equal)
        );
        assert_eq!(Value::Int(0).sql_cmp(&Value::Null), None);
    }

    #[test]
    fn coercion_refuses_lossy_conversions() {
        assert_eq!(Value::Double(1.5).coerce_to(DataType::BigInt), None);
        assert_eq!(
            Value::Double(12_345_678_901_234_568.0).coerce_to(DataType::BigInt),
            None
        );
        assert_eq!(
            Value::Double(9_007_199_254_740_992.0).coerce_to(DataType::BigInt),
            Some(Value::Int(9_007_199_254_740_992))
        );
        assert_eq!(
            Value::Double(2.0).coerce_to(DataType::BigInt),
            Some(Value::Int(2))
        );
        assert_eq!(Value::Text("a".into()).coerce_to(DataType::BigInt), None);
        assert_eq!(
            Value::Int(2).coerce_to(DataType::Double),
            Some(Value::Double(2.0))
        );
        assert_eq!(Value::Null.coerce_to(DataType::Text), Some(Value::Null));
    }

    #[test]
    fn display_marks_doubles_and_blobs() {
        assert_eq!(Value::Double(2.0).to_string(), "2.0");
        assert_eq!(Value::Double(0.25).to_string(), "0.25");
        assert_eq!(Value::Double(1e15).to_string(), "1000000000000000.0");
        assert_eq!(Value::Double(1e16).to_string(), "1e16");
        assert_eq!(Value::Double(1e-300).to_string(), "1e-300");
        assert_eq!(Value::Double(-2.5e-5).to_string(), "-2.5e-5");
        assert_eq!(Value::Double(0.0001).to_string(), "0.0001");
        assert_eq!(Value::Double(0.0).to_string(), "0.0");
        assert_eq!(Value::Double(-2.5e20).to_string(), "-2.5e20");
        assert_eq!(
            Value::Double(f64::MAX).to_string(),
            "1.7976931348623157e308"
        );
        assert_eq!(Value::Blob(vec![0x0a, 0xff]).to_string(), "x'0aff'");
        assert_eq!(Value::Null.to_string(), "NULL");
    }
}
