//! Compact encoding of a row's non-key columns (`docs/format/keys.md`, "Rows").
//!
//! ```text
//! row    := nulls column*
//! nulls  := ceil(n / 8) bytes; bit i (LSB first) set = i-th value column is NULL
//! column := varint64(zigzag(i))           BIGINT
//!         | f64 little-endian (8 bytes)   DOUBLE
//!         | 0x00 | 0x01                   BOOLEAN
//!         | varint32(len) bytes           TEXT (UTF-8), BLOB
//! ```
//!
//! The value columns are the table's columns that are not in the primary key, in declaration
//! order (the key holds the others). Only non-NULL columns are written. The column types come
//! from the catalog, so a row carries no type tags.

use strata_engine::coding::{get_varint32, get_varint64, put_varint32, put_varint64};

use super::CodecError;
use crate::catalog::TableSchema;
use crate::value::{DataType, Value};

/// Appends the encoding of `row`'s value columns. `row` holds every column of `schema` in
/// declaration order, already coerced to the column types.
pub fn encode_row(schema: &TableSchema, row: &[Value], out: &mut Vec<u8>) {
    let cols = schema.value_columns();
    let start = out.len();
    out.resize(start + cols.len().div_ceil(8), 0);
    for (i, &c) in cols.iter().enumerate() {
        match row.get(c).unwrap_or(&Value::Null) {
            Value::Null => {
                if let Some(byte) = out.get_mut(start + i / 8) {
                    *byte |= 1 << (i % 8);
                }
            }
            Value::Int(v) => put_varint64(out, zigzag(*v)),
            Value::Double(d) => out.extend_from_slice(&d.to_le_bytes()),
            Value::Bool(b) => out.push(u8::from(*b)),
            Value::Text(s) => put_bytes(out, s.as_bytes()),
            Value::Blob(b) => put_bytes(out, b),
        }
    }
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    // Values over 4 GiB are refused by the engine (max_value_size) before they get here.
    put_varint32(out, u32::try_from(b.len()).unwrap_or(u32::MAX));
    out.extend_from_slice(b);
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)).cast_unsigned()
}

fn unzigzag(v: u64) -> i64 {
    (v >> 1).cast_signed() ^ -((v & 1).cast_signed())
}

/// Decodes `value` into the value columns of `out` (which has one slot per column). Columns
/// with `needed[c] == false` are skipped without allocating and their slots left untouched
/// (so a row can be decoded in steps with disjoint masks); when no value column is needed
/// the value is not looked at.
///
/// # Errors
/// [`CodecError`] for a truncated row, bytes left over, or TEXT that is not UTF-8.
pub fn decode_row(
    schema: &TableSchema,
    value: &[u8],
    needed: &[bool],
    out: &mut [Value],
) -> Result<(), CodecError> {
    let cols = schema.value_columns();
    // Nothing of the value is read: skip decoding (and validating) it.
    if !cols.iter().any(|&c| needed.get(c).copied().unwrap_or(true)) {
        return Ok(());
    }
    let nulls_len = cols.len().div_ceil(8);
    let nulls = value
        .get(..nulls_len)
        .ok_or(CodecError::row(0, "truncated NULL bitmap"))?;
    let mut pos = nulls_len;
    for (i, &c) in cols.iter().enumerate() {
        let is_null = nulls.get(i / 8).is_some_and(|b| b & (1 << (i % 8)) != 0);
        let want = needed.get(c).copied().unwrap_or(true);
        if is_null {
            if want && let Some(slot) = out.get_mut(c) {
                *slot = Value::Null;
            }
            continue;
        }
        let rest = value.get(pos..).unwrap_or_default();
        let ty = schema.columns.get(c).map_or(DataType::Blob, |col| col.ty);
        let (v, used) = match ty {
            DataType::BigInt => {
                let (u, used) =
                    get_varint64(rest).ok_or(CodecError::row(pos, "truncated integer"))?;
                (Value::Int(unzigzag(u)), used)
            }
            DataType::Double => {
                let b: [u8; 8] = rest
                    .get(..8)
                    .and_then(|s| s.try_into().ok())
                    .ok_or(CodecError::row(pos, "truncated double"))?;
                (Value::Double(f64::from_le_bytes(b)), 8)
            }
            DataType::Boolean => match rest.first() {
                Some(0) => (Value::Bool(false), 1),
                Some(1) => (Value::Bool(true), 1),
                _ => return Err(CodecError::row(pos, "bad boolean")),
            },
            DataType::Text | DataType::Blob => {
                let (len, n) =
                    get_varint32(rest).ok_or(CodecError::row(pos, "truncated length"))?;
                let len = usize::try_from(len).map_err(|_| CodecError::row(pos, "bad length"))?;
                let bytes = rest
                    .get(n..n + len)
                    .ok_or(CodecError::row(pos, "truncated byte string"))?;
                let v = if !want {
                    Value::Null
                } else if ty == DataType::Text {
                    Value::Text(
                        std::str::from_utf8(bytes)
                            .map_err(|_| CodecError::row(pos, "TEXT is not UTF-8"))?
                            .to_owned(),
                    )
                } else {
                    Value::Blob(bytes.to_vec())
                };
                (v, n + len)
            }
        };
        pos += used;
        if want && let Some(slot) = out.get_mut(c) {
            *slot = v;
        }
    }
    if pos != value.len() {
        return Err(CodecError::row(pos, "bytes left after the last column"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::catalog::{Column, TableSchema};

    fn schema() -> TableSchema {
        let col = |name: &str, ty| Column {
            name: name.into(),
            ty,
            not_null: false,
        };
        TableSchema::new(
            "t".into(),
            7,
            vec![
                col("id", DataType::BigInt),
                col("a", DataType::BigInt),
                col("b", DataType::Double),
                col("c", DataType::Text),
                col("d", DataType::Blob),
                col("e", DataType::Boolean),
            ],
            vec![0],
        )
    }

    fn opt<T: Strategy<Value = Value>>(s: T) -> impl Strategy<Value = Value> {
        prop_oneof![Just(Value::Null), s]
    }

    proptest! {
        #[test]
        fn row_round_trips(
            a in opt(any::<i64>().prop_map(Value::Int)),
            b in opt(any::<f64>().prop_filter("NaN", |d| !d.is_nan()).prop_map(Value::Double)),
            c in opt(".{0,20}".prop_map(Value::Text)),
            d in opt(proptest::collection::vec(any::<u8>(), 0..20).prop_map(Value::Blob)),
            e in opt(any::<bool>().prop_map(Value::Bool)),
        ) {
            let s = schema();
            let row = vec![Value::Int(1), a, b, c, d, e];
            let mut bytes = Vec::new();
            encode_row(&s, &row, &mut bytes);
            let mut out = vec![Value::Null; 6];
            decode_row(&s, &bytes, &[true; 6], &mut out).unwrap();
            out[0] = Value::Int(1);
            prop_assert_eq!(&out, &row);
            for cut in 0..bytes.len() {
                prop_assert!(decode_row(&s, &bytes[..cut], &[true; 6], &mut out).is_err());
            }
            let mut flipped = bytes.clone();
            let last = flipped.len() - 1;
            flipped[last] ^= 0xa5;
            let _ = decode_row(&s, &flipped, &[true; 6], &mut out);
        }
    }

    #[test]
    fn small_rows_are_compact() {
        let s = schema();
        let row = vec![
            Value::Int(1),
            Value::Int(12),
            Value::Null,
            Value::Null,
            Value::Null,
            Value::Null,
        ];
        let mut bytes = Vec::new();
        encode_row(&s, &row, &mut bytes);
        assert_eq!(bytes, vec![0b1_1110, 24]);
    }

    #[test]
    fn skipped_columns_are_left_null() {
        let s = schema();
        let row = vec![
            Value::Int(1),
            Value::Int(3),
            Value::Null,
            Value::Text("x".into()),
            Value::Null,
            Value::Bool(true),
        ];
        let mut bytes = Vec::new();
        encode_row(&s, &row, &mut bytes);
        let mut out = vec![Value::Null; 6];
        decode_row(
            &s,
            &bytes,
            &[false, false, false, false, false, true],
            &mut out,
        )
        .unwrap();
        assert_eq!(out[3], Value::Null);
        assert_eq!(out[5], Value::Bool(true));
    }

    #[test]
    fn decoding_in_steps_with_disjoint_masks_equals_one_step() {
        let s = schema();
        let row = vec![
            Value::Int(1),
            Value::Int(3),
            Value::Double(2.5),
            Value::Text("x".into()),
            Value::Blob(vec![1, 2]),
            Value::Bool(true),
        ];
        let mut bytes = Vec::new();
        encode_row(&s, &row, &mut bytes);
        let all = [false, true, true, true, true, true];
        let mut once = vec![Value::Null; 6];
        decode_row(&s, &bytes, &all, &mut once).unwrap();
        let mut steps = vec![Value::Null; 6];
        decode_row(
            &s,
            &bytes,
            &[false, false, false, false, true, false],
            &mut steps,
        )
        .unwrap();
        decode_row(
            &s,
            &bytes,
            &[false, true, true, true, false, true],
            &mut steps,
        )
        .unwrap();
        assert_eq!(steps, once);
        // Slots outside the mask are left as they were.
        let mut marked = vec![Value::Int(7); 6];
        decode_row(
            &s,
            &bytes,
            &[false, false, false, false, true, false],
            &mut marked,
        )
        .unwrap();
        assert_eq!(marked[3], Value::Int(7));
        assert_eq!(marked[4], Value::Blob(vec![1, 2]));
    }
}
