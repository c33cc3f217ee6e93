//! Value conversions between the SQL layer and the PostgreSQL wire format: result columns
//! (type OIDs, text or binary encoding) and parameters (decoded by their type OID and
//! format, then written into the statement as SQL literals).

use pgwire::api::Type;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::results::{DataRowEncoder, FieldInfo};
use pgwire::error::PgWireResult;
use pgwire::messages::data::DataRow;
use strata_query::{DataType, Value};

use crate::sql::Column;

/// The PostgreSQL type a column is described as (`text` when unknown).
pub fn pg_type(ty: Option<DataType>) -> Type {
    match ty {
        Some(DataType::BigInt) => Type::INT8,
        Some(DataType::Double) => Type::FLOAT8,
        Some(DataType::Boolean) => Type::BOOL,
        Some(DataType::Blob) => Type::BYTEA,
        Some(DataType::Text) | None => Type::TEXT,
    }
}

/// The row description of `columns` in `format`.
pub fn fields(columns: &[Column], format: &Format) -> Vec<FieldInfo> {
    columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            FieldInfo::new(
                c.name.clone(),
                None,
                None,
                pg_type(c.ty),
                format.format_for(i),
            )
        })
        .collect()
}

/// Text form of a value, as PostgreSQL prints it (`t`/`f`, `\x..` for bytes).
pub fn text_of(v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => return None,
        Value::Bool(b) => if *b { "t" } else { "f" }.to_owned(),
        Value::Int(i) => i.to_string(),
        Value::Double(d) => crate::protocol::reply::format_double(*d),
        Value::Text(t) => t.clone(),
        Value::Blob(b) => {
            let mut s = String::with_capacity(2 + 2 * b.len());
            s.push_str("\\x");
            for byte in b {
                s.push_str(&format!("{byte:02x}"));
            }
            s
        }
    })
}

/// Encodes one row; each value is converted to its column's described type.
///
/// # Errors
/// Encoding errors from pgwire (a value that cannot be written as its column's type).
pub fn encode_row(
    encoder: &mut DataRowEncoder,
    row: &[Value],
    columns: &[Column],
) -> PgWireResult<DataRow> {
    for (v, c) in row.iter().zip(columns) {
        match (c.ty, v) {
            (_, Value::Null) => encoder.encode_field(&None::<i64>)?,
            (Some(DataType::BigInt), Value::Int(i)) => encoder.encode_field(i)?,
            (Some(DataType::Double), Value::Double(d)) => encoder.encode_field(d)?,
            #[expect(clippy::cast_precision_loss, reason = "an integer in a DOUBLE column")]
            (Some(DataType::Double), Value::Int(i)) => encoder.encode_field(&(*i as f64))?,
            (Some(DataType::Boolean), Value::Bool(b)) => encoder.encode_field(b)?,
            (Some(DataType::Blob), Value::Blob(b)) => encoder.encode_field(&b.as_slice())?,
            (Some(DataType::Blob), Value::Text(t)) => encoder.encode_field(&t.as_bytes())?,
            (Some(DataType::Text) | None, other) => encoder.encode_field(&text_of(other))?,
            // Never text bytes in a field described as a number, boolean or bytes: a binary
            // client would read them as that type.
            (Some(ty), other) => {
                return Err(super::user_error(
                    "XX000",
                    format!(
                        "internal error: a {} value in result column {} described as {}",
                        other.type_name(),
                        c.name,
                        ty.name()
                    ),
                ));
            }
        }
    }
    Ok(encoder.take_row())
}

/// A SQL literal for a string.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn hex_literal(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(3 + 2 * bytes.len());
    s.push_str("X'");
    for &b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0xf)]));
    }
    s.push('\'');
    s
}

fn number_literal(text: String) -> String {
    if text.starts_with('-') {
        format!("({text})")
    } else {
        text
    }
}

/// Decodes text-format `bytea` (`\x0102` hex or the escape format).
fn bytea_from_text(text: &str) -> Option<Vec<u8>> {
    if let Some(hex) = text.strip_prefix("\\x") {
        let bytes = hex.as_bytes();
        if bytes.len() % 2 != 0 {
            return None;
        }
        return bytes
            .chunks(2)
            .map(|p| {
                let s = std::str::from_utf8(p).ok()?;
                u8::from_str_radix(s, 16).ok()
            })
            .collect();
    }
    // The escape format: `\\` is a backslash, `\ooo` (three octal digits) a byte, any other
    // byte itself; another backslash sequence is invalid, as in PostgreSQL.
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b != b'\\' {
            out.push(b);
            i += 1;
        } else if bytes.get(i + 1) == Some(&b'\\') {
            out.push(b'\\');
            i += 2;
        } else {
            let octal = bytes.get(i + 1..i + 4)?;
            if !octal.iter().all(|d| (b'0'..=b'7').contains(d)) || octal[0] > b'3' {
                return None;
            }
            out.push(octal.iter().fold(0u8, |n, d| n * 8 + (d - b'0')));
            i += 4;
        }
    }
    Some(out)
}

/// A literal of parameter type `ty`, standing in for a parameter whose value is not known
/// yet, so that describing a statement before Bind types `$1 + 1` like its later run
/// (`NULL` for untyped parameters: their columns are described as `text`).
pub fn placeholder_literal(ty: Option<&Type>) -> &'static str {
    match ty {
        Some(&Type::INT2 | &Type::INT4 | &Type::INT8 | &Type::OID) => "0",
        Some(&Type::FLOAT4 | &Type::FLOAT8 | &Type::NUMERIC) => "0.0",
        Some(&Type::BOOL) => "FALSE",
        Some(&Type::BYTEA) => "X''",
        Some(&Type::TEXT | &Type::VARCHAR | &Type::BPCHAR | &Type::NAME | &Type::JSON) => "''",
        _ => "NULL",
    }
}

/// Why a parameter could not become a literal: the SQLSTATE and PostgreSQL-style message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamError {
    /// `22P02` (invalid text representation, bad bytes, unsupported type), `22021` (text
    /// that is not UTF-8) or `22003` (a number outside its declared type: `70000` as `int2`).
    pub code: &'static str,
    /// What is wrong, naming the parameter (`parameter $2: ...`).
    pub message: String,
}

/// A text parameter (`i` from 0) that is not UTF-8: 22021, as PostgreSQL's `invalid byte
/// sequence for encoding "UTF8"`.
fn not_utf8(i: usize, e: &std::str::Utf8Error) -> ParamError {
    ParamError {
        code: "22021",
        message: format!(
            "parameter ${}: invalid byte sequence for encoding \"UTF8\" ({e})",
            i + 1
        ),
    }
}

/// The SQL literal for parameter `i` of `portal` (its type from the Parse message, `text`
/// when the client gave none).
///
/// # Errors
/// [`ParamError`] for an undecodable parameter, an unsupported type (22P02), text that is not
/// UTF-8 (22021), or a text integer outside its declared `int2`/`int4` type (22003), as
/// PostgreSQL.
pub fn param_literal(portal: &Portal<super::PgStatement>, i: usize) -> Result<String, ParamError> {
    let ty = portal
        .statement
        .parameter_types
        .get(i)
        .cloned()
        .flatten()
        .unwrap_or(Type::UNKNOWN);
    let Some(Some(raw)) = portal.parameters.get(i) else {
        return Ok("NULL".to_owned());
    };
    let bad = |e: &dyn std::fmt::Display| ParamError {
        code: "22P02",
        message: format!("parameter ${}: {e}", i + 1),
    };
    let binary = portal.parameter_format.is_binary(i);
    if !binary {
        let text = std::str::from_utf8(raw).map_err(|e| not_utf8(i, &e))?;
        return Ok(match ty {
            Type::INT2 | Type::INT4 | Type::INT8 | Type::OID => {
                let n: i64 = text.trim().parse().map_err(|e| bad(&e))?;
                let (name, fits) = match ty {
                    Type::INT2 => ("smallint", i16::try_from(n).is_ok()),
                    Type::INT4 => ("integer", i32::try_from(n).is_ok()),
                    Type::OID => ("oid", u32::try_from(n).is_ok()),
                    _ => ("bigint", true),
                };
                if !fits {
                    return Err(ParamError {
                        code: "22003",
                        message: format!(
                            "parameter ${}: value \"{}\" is out of range for type {name}",
                            i + 1,
                            text.trim()
                        ),
                    });
                }
                number_literal(n.to_string())
            }
            Type::NUMERIC if exact_integer(text.trim()).is_some() => {
                number_literal(exact_integer(text.trim()).unwrap_or_default().to_string())
            }
            Type::FLOAT4 | Type::FLOAT8 | Type::NUMERIC => {
                let f: f64 = text.trim().parse().map_err(|e| bad(&e))?;
                if !f.is_finite() {
                    return Err(bad(&"NaN and infinity are not supported"));
                }
                // Always a double literal (`7` as `7.0`), as the `0.0` stand-in described it.
                number_literal(format!("{f:?}"))
            }
            Type::BOOL => match text.trim().to_ascii_lowercase().as_str() {
                "t" | "true" | "1" | "yes" | "on" => "TRUE".to_owned(),
                "f" | "false" | "0" | "no" | "off" => "FALSE".to_owned(),
                other => return Err(bad(&format!("not a boolean: {other}"))),
            },
            Type::BYTEA => hex_literal(&bytea_from_text(text).ok_or_else(|| bad(&"bad bytea"))?),
            _ => quote(text),
        });
    }
    let value =
        |r: PgWireResult<Option<String>>| r.map_err(|e| bad(&e)).map(Option::unwrap_or_default);
    Ok(match ty {
        Type::INT2 => number_literal(value(
            portal
                .parameter::<i16>(i, &ty)
                .map(|v| v.map(|n| n.to_string())),
        )?),
        Type::INT4 => number_literal(value(
            portal
                .parameter::<i32>(i, &ty)
                .map(|v| v.map(|n| n.to_string())),
        )?),
        Type::INT8 => number_literal(value(
            portal
                .parameter::<i64>(i, &ty)
                .map(|v| v.map(|n| n.to_string())),
        )?),
        Type::FLOAT4 | Type::FLOAT8 => {
            let f = if ty == Type::FLOAT4 {
                portal.parameter::<f32>(i, &ty).map(|v| v.map(f64::from))
            } else {
                portal.parameter::<f64>(i, &ty)
            }
            .map_err(|e| bad(&e))?
            .unwrap_or_default();
            if !f.is_finite() {
                return Err(bad(&"NaN and infinity are not supported"));
            }
            number_literal(format!("{f:?}"))
        }
        Type::BOOL => {
            let b = portal
                .parameter::<bool>(i, &ty)
                .map_err(|e| bad(&e))?
                .unwrap_or_default();
            if b { "TRUE" } else { "FALSE" }.to_owned()
        }
        // psycopg sends Python `Decimal`s, and `int`s beyond 64 bits, as binary numerics:
        // a whole one that fits 64 bits (no fraction digits, `Decimal("12345678901234567")`)
        // as an exact BIGINT, any other as DOUBLE, as the text form above makes them.
        Type::NUMERIC => {
            let text = numeric_text(raw).map_err(|e| bad(&e))?;
            if let Some(n) = exact_integer(&text) {
                return Ok(number_literal(n.to_string()));
            }
            let f: f64 = text.parse().map_err(|e| bad(&e))?;
            if !f.is_finite() {
                return Err(bad(&"out of range for type DOUBLE"));
            }
            number_literal(format!("{f:?}"))
        }
        Type::BYTEA => hex_literal(raw),
        Type::TEXT | Type::VARCHAR | Type::BPCHAR | Type::NAME | Type::UNKNOWN | Type::JSON => {
            quote(std::str::from_utf8(raw).map_err(|e| not_utf8(i, &e))?)
        }
        other => {
            return Err(bad(&format!(
                "binary parameters of type {} are not supported",
                other.name()
            )));
        }
    })
}

/// `text` as a 64-bit integer when it is one exactly: an optional sign and digits only (no
/// fraction, no exponent), within `i64`. A numeric parameter like that is bound as an integer,
/// not as a DOUBLE, which would round it past 2^53.
fn exact_integer(text: &str) -> Option<i64> {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// PostgreSQL's binary `numeric` as decimal text (`-12.5`, `0.0001`, `100000000`). The
/// format, from `numeric_send` in PostgreSQL's `src/backend/utils/adt/numeric.c`: `ndigits`,
/// `weight`, `sign`, `dscale` (16 bits each, big-endian), then `ndigits` base-10,000 digits;
/// the value is the sum of `digit[i] * 10000^(weight - i)`.
///
/// # Errors
/// A message for NaN, an infinity, or bytes that do not follow the format.
#[expect(
    clippy::big_endian_bytes,
    reason = "PostgreSQL's wire format is big-endian (network order)"
)]
fn numeric_text(raw: &[u8]) -> Result<String, String> {
    let word = |k: usize| {
        raw.get(2 * k..2 * k + 2)
            .map(|b| u16::from_be_bytes([b[0], b[1]]))
            .ok_or_else(|| "truncated numeric".to_owned())
    };
    let ndigits = usize::from(word(0)?);
    let weight = i64::from(word(1)?.cast_signed());
    let sign = word(2)?;
    let dscale = word(3)?;
    match sign {
        0x0000 | 0x4000 => {}
        0xC000 => return Err("NaN and infinity are not supported".into()),
        0xD000 | 0xF000 => return Err("NaN and infinity are not supported".into()),
        other => return Err(format!("bad numeric sign {other:#06x}")),
    }
    if raw.len() != 8 + 2 * ndigits {
        return Err("numeric length does not match its digit count".into());
    }
    let digits = (0..ndigits)
        .map(|i| {
            word(4 + i).and_then(|d| (d < 10_000).then_some(d).ok_or("bad numeric digit".into()))
        })
        .collect::<Result<Vec<u16>, String>>()?;
    // The digit of the group worth 10000^e (0 outside the stored digits).
    let group = |e: i64| -> u16 {
        usize::try_from(weight - e)
            .ok()
            .and_then(|i| digits.get(i).copied())
            .unwrap_or(0)
    };
    let mut text = String::new();
    if sign == 0x4000 {
        text.push('-');
    }
    if weight < 0 {
        text.push('0');
    } else {
        text.push_str(&group(weight).to_string());
        for e in (0..weight).rev() {
            text.push_str(&format!("{:04}", group(e)));
        }
    }
    let lowest = weight - i64::try_from(ndigits).unwrap_or(i64::MAX) + 1;
    if lowest < 0 {
        text.push('.');
        for e in (lowest..0).rev() {
            text.push_str(&format!("{:04}", group(e)));
        }
    } else if dscale > 0 {
        // `Decimal("5.0")`: digits after the point, all zero; it stays a fraction (DOUBLE).
        text.push_str(".0");
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A binary numeric from its fields and digits.
    #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
    fn numeric(weight: i16, sign: u16, digits: &[u16]) -> Vec<u8> {
        let mut raw = Vec::new();
        for w in [
            u16::try_from(digits.len()).unwrap(),
            weight.cast_unsigned(),
            sign,
            0,
        ] {
            raw.extend_from_slice(&w.to_be_bytes());
        }
        for d in digits {
            raw.extend_from_slice(&d.to_be_bytes());
        }
        raw
    }

    #[test]
    fn whole_numerics_are_exact_integers() {
        assert_eq!(
            exact_integer("12345678901234567"),
            Some(12_345_678_901_234_567)
        );
        assert_eq!(exact_integer("-9223372036854775808"), Some(i64::MIN));
        assert_eq!(exact_integer("9223372036854775808"), None);
        assert_eq!(exact_integer("1.0"), None);
        assert_eq!(exact_integer("1e3"), None);
        assert_eq!(exact_integer("-"), None);
        // `Decimal("5.0")`: dscale 1 keeps it a fraction.
        assert_eq!(
            numeric_text(&[0, 1, 0, 0, 0, 0, 0, 1, 0, 5]).as_deref(),
            Ok("5.0")
        );
    }

    #[test]
    fn binary_numerics_read_as_decimal_text() {
        assert_eq!(numeric_text(&numeric(0, 0, &[])).as_deref(), Ok("0"));
        assert_eq!(
            numeric_text(&numeric(0, 0, &[12, 5000])).as_deref(),
            Ok("12.5000")
        );
        assert_eq!(
            numeric_text(&numeric(0, 0x4000, &[12, 5000])).as_deref(),
            Ok("-12.5000")
        );
        // 9223372036854775808 = 922 3372 0368 5477 5808 (2^63, past BIGINT).
        assert_eq!(
            numeric_text(&numeric(4, 0, &[922, 3372, 368, 5477, 5808])).as_deref(),
            Ok("9223372036854775808")
        );
        // 100000000 = 1 * 10000^2, trailing zero groups not stored.
        assert_eq!(
            numeric_text(&numeric(2, 0, &[1])).as_deref(),
            Ok("100000000")
        );
        // 0.0001 and 0.00000001: weights below zero.
        assert_eq!(numeric_text(&numeric(-1, 0, &[1])).as_deref(), Ok("0.0001"));
        assert_eq!(
            numeric_text(&numeric(-2, 0, &[1])).as_deref(),
            Ok("0.00000001")
        );
        assert!(numeric_text(&numeric(0, 0xC000, &[])).is_err());
        assert!(numeric_text(&numeric(0, 0xD000, &[])).is_err());
        assert!(numeric_text(&numeric(0, 0, &[10_000])).is_err());
        assert!(numeric_text(&numeric(0, 0x1234, &[1])).is_err());
        assert!(numeric_text(&[0, 2, 0, 0, 0, 0, 0, 0, 0, 1]).is_err());
        assert!(numeric_text(&[0, 1]).is_err());
    }

    #[test]
    fn text_forms_follow_postgres() {
        assert_eq!(text_of(&Value::Bool(true)).as_deref(), Some("t"));
        assert_eq!(
            text_of(&Value::Blob(vec![1, 0xab])).as_deref(),
            Some("\\x01ab")
        );
        assert_eq!(text_of(&Value::Null), None);
    }

    #[test]
    fn literals_are_quoted_safely() {
        assert_eq!(quote("it's"), "'it''s'");
        assert_eq!(hex_literal(&[0, 255]), "X'00ff'");
        assert_eq!(number_literal("-5".into()), "(-5)");
        assert_eq!(bytea_from_text("\\x00ff"), Some(vec![0, 255]));
        assert_eq!(bytea_from_text("\\x0"), None);
        // The escape format.
        assert_eq!(
            bytea_from_text("a\\\\b\\000\\377"),
            Some(b"a\\b\x00\xff".to_vec())
        );
        assert_eq!(bytea_from_text("plain"), Some(b"plain".to_vec()));
        for bad in ["plain\\text", "\\400", "\\12", "\\"] {
            assert_eq!(bytea_from_text(bad), None, "{bad}");
        }
        assert_eq!(hex_literal(&[0, 0x1f, 0xff]), "X'001fff'");
    }

    #[test]
    fn placeholders_have_the_parameter_type() {
        assert_eq!(placeholder_literal(Some(&Type::INT4)), "0");
        assert_eq!(placeholder_literal(Some(&Type::FLOAT8)), "0.0");
        assert_eq!(placeholder_literal(Some(&Type::TEXT)), "''");
        assert_eq!(placeholder_literal(Some(&Type::UNKNOWN)), "NULL");
        assert_eq!(placeholder_literal(None), "NULL");
    }
}
