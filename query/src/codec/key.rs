//! Order-preserving encoding of values in keys (`docs/format/keys.md`, "Values in keys").
//!
//! ```text
//! value  := 0x01                                  NULL
//!         | 0x02 (0x00 | 0x01)                    BOOLEAN false / true
//!         | 0x03 u64-BE(i XOR 2^63)               BIGINT (sign bit flipped)
//!         | 0x04 u64-BE(ordered bits)             DOUBLE (see `double_bits`)
//!         | 0x05 escaped 0x00 0x01                TEXT (UTF-8)
//!         | 0x06 escaped 0x00 0x01                BLOB
//! escaped := each byte b, with 0x00 written as 0x00 0xFF
//! ```
//!
//! Every encoding is self-delimiting, so a tuple is the concatenation of its values and
//! bytewise order of encoded tuples is the order of the tuples (column by column). Within one
//! type, `cmp(encode(a), encode(b)) == cmp(a, b)`; across types the tag decides. `-0.0` is
//! stored as `0.0` and every NaN as the canonical positive NaN, so equal SQL values have equal
//! keys.
//!
//! Big-endian is deliberate here: it is what makes integer keys sort numerically.

use super::CodecError;
use crate::value::Value;

/// Tag of NULL. DO NOT CHANGE: on-disk.
pub const TAG_NULL: u8 = 0x01;
/// Tag of BOOLEAN. DO NOT CHANGE: on-disk.
pub const TAG_BOOL: u8 = 0x02;
/// Tag of BIGINT. DO NOT CHANGE: on-disk.
pub const TAG_INT: u8 = 0x03;
/// Tag of DOUBLE. DO NOT CHANGE: on-disk.
pub const TAG_DOUBLE: u8 = 0x04;
/// Tag of TEXT. DO NOT CHANGE: on-disk.
pub const TAG_TEXT: u8 = 0x05;
/// Tag of BLOB. DO NOT CHANGE: on-disk.
pub const TAG_BLOB: u8 = 0x06;

const ESCAPE: u8 = 0x00;
const ESCAPED_ZERO: u8 = 0xFF;
const TERMINATOR: u8 = 0x01;

/// Appends the order-preserving encoding of `v` to `out`.
pub fn encode_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(TAG_NULL),
        Value::Bool(b) => {
            out.push(TAG_BOOL);
            out.push(u8::from(*b));
        }
        Value::Int(i) => {
            out.push(TAG_INT);
            out.extend_from_slice(&u64_be(int_bits(*i)));
        }
        Value::Double(d) => {
            out.push(TAG_DOUBLE);
            out.extend_from_slice(&u64_be(double_bits(*d)));
        }
        Value::Text(s) => {
            out.push(TAG_TEXT);
            encode_escaped(out, s.as_bytes());
            out.extend_from_slice(&[ESCAPE, TERMINATOR]);
        }
        Value::Blob(b) => {
            out.push(TAG_BLOB);
            encode_escaped(out, b);
            out.extend_from_slice(&[ESCAPE, TERMINATOR]);
        }
    }
}

/// Appends the encoding of a TEXT (`blob == false`) or BLOB value's *prefix*: the tag and the
/// escaped bytes without the terminator. Every value starting with `prefix` has an encoding
/// starting with these bytes (what `LIKE 'abc%'` pushdown relies on).
pub fn encode_bytes_prefix(out: &mut Vec<u8>, prefix: &[u8], blob: bool) {
    out.push(if blob { TAG_BLOB } else { TAG_TEXT });
    encode_escaped(out, prefix);
}

fn encode_escaped(out: &mut Vec<u8>, bytes: &[u8]) {
    out.reserve(bytes.len() + 2);
    let mut rest = bytes;
    while let Some(pos) = rest.iter().position(|&b| b == 0) {
        let (head, tail) = rest.split_at(pos);
        out.extend_from_slice(head);
        out.extend_from_slice(&[ESCAPE, ESCAPED_ZERO]);
        rest = tail.get(1..).unwrap_or_default();
    }
    out.extend_from_slice(rest);
}

fn int_bits(i: i64) -> u64 {
    i.cast_unsigned() ^ (1 << 63)
}

/// Maps a double to bits whose unsigned order is `f64::total_cmp` order: positive numbers get
/// their sign bit set, negative numbers have all bits flipped.
fn double_bits(d: f64) -> u64 {
    let d = if d == 0.0 {
        0.0
    } else if d.is_nan() {
        f64::NAN
    } else {
        d
    };
    let bits = d.to_bits();
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

fn double_from_bits(bits: u64) -> f64 {
    if bits >> 63 == 1 {
        f64::from_bits(bits & !(1 << 63))
    } else {
        f64::from_bits(!bits)
    }
}

#[expect(
    clippy::big_endian_bytes,
    reason = "order-preserving key encoding: big-endian bytes sort like the integers"
)]
fn u64_be(v: u64) -> [u8; 8] {
    v.to_be_bytes()
}

#[expect(
    clippy::big_endian_bytes,
    reason = "order-preserving key encoding: big-endian bytes sort like the integers"
)]
fn u64_from_be(b: [u8; 8]) -> u64 {
    u64::from_be_bytes(b)
}

/// Appends a table or index id: 4 bytes big-endian, so ids sort numerically.
#[expect(
    clippy::big_endian_bytes,
    reason = "order-preserving key encoding: big-endian bytes sort like the integers"
)]
pub fn encode_id(out: &mut Vec<u8>, id: u32) {
    out.extend_from_slice(&id.to_be_bytes());
}

/// Reads the id [`encode_id`] wrote in the 4 bytes `b`.
#[expect(
    clippy::big_endian_bytes,
    reason = "order-preserving key encoding: big-endian bytes sort like the integers"
)]
pub fn decode_id(b: [u8; 4]) -> u32 {
    u32::from_be_bytes(b)
}

/// Decodes one value at the start of `buf`; returns it and the number of bytes it used.
///
/// # Errors
/// [`CodecError`] for an unknown tag, a truncated value, a bad escape or invalid UTF-8.
pub fn decode_value(buf: &[u8]) -> Result<(Value, usize), CodecError> {
    let tag = *buf.first().ok_or(CodecError::key(0, "missing value tag"))?;
    match tag {
        TAG_NULL => Ok((Value::Null, 1)),
        TAG_BOOL => match buf.get(1) {
            Some(0) => Ok((Value::Bool(false), 2)),
            Some(1) => Ok((Value::Bool(true), 2)),
            Some(_) => Err(CodecError::key(1, "boolean byte is not 0 or 1")),
            None => Err(CodecError::key(1, "truncated boolean")),
        },
        TAG_INT | TAG_DOUBLE => {
            let bytes: [u8; 8] = buf
                .get(1..9)
                .and_then(|s| s.try_into().ok())
                .ok_or(CodecError::key(1, "truncated 8-byte number"))?;
            let bits = u64_from_be(bytes);
            let v = if tag == TAG_INT {
                Value::Int((bits ^ (1 << 63)).cast_signed())
            } else {
                Value::Double(double_from_bits(bits))
            };
            Ok((v, 9))
        }
        TAG_TEXT | TAG_BLOB => {
            let mut bytes = Vec::new();
            let used = decode_escaped(buf, 1, &mut bytes)?;
            if tag == TAG_BLOB {
                return Ok((Value::Blob(bytes), used));
            }
            let s =
                String::from_utf8(bytes).map_err(|_| CodecError::key(1, "TEXT is not UTF-8"))?;
            Ok((Value::Text(s), used))
        }
        _ => Err(CodecError::key(0, "unknown value tag")),
    }
}

/// Unescapes bytes starting at `start` into `out` up to and including the terminator;
/// returns the offset just past the terminator.
fn decode_escaped(buf: &[u8], start: usize, out: &mut Vec<u8>) -> Result<usize, CodecError> {
    let mut pos = start;
    loop {
        let rest = buf.get(pos..).unwrap_or_default();
        let Some(zero) = memchr::memchr(ESCAPE, rest) else {
            return Err(CodecError::key(buf.len(), "unterminated byte string"));
        };
        out.extend_from_slice(rest.get(..zero).unwrap_or_default());
        pos += zero;
        match buf.get(pos + 1) {
            Some(&ESCAPED_ZERO) => {
                out.push(0);
                pos += 2;
            }
            Some(&TERMINATOR) => return Ok(pos + 2),
            _ => return Err(CodecError::key(pos, "bad escape in byte string")),
        }
    }
}

/// The length of the encoded value at the start of `buf`, without decoding it.
///
/// # Errors
/// As [`decode_value`].
pub fn skip_value(buf: &[u8]) -> Result<usize, CodecError> {
    let tag = *buf.first().ok_or(CodecError::key(0, "missing value tag"))?;
    let len = match tag {
        TAG_NULL => 1,
        TAG_BOOL => 2,
        TAG_INT | TAG_DOUBLE => 9,
        TAG_TEXT | TAG_BLOB => {
            let mut pos = 1;
            loop {
                let rest = buf.get(pos..).unwrap_or_default();
                let Some(zero) = memchr::memchr(ESCAPE, rest) else {
                    return Err(CodecError::key(buf.len(), "unterminated byte string"));
                };
                pos += zero;
                match buf.get(pos + 1) {
                    Some(&ESCAPED_ZERO) => pos += 2,
                    Some(&TERMINATOR) => break pos + 2,
                    _ => return Err(CodecError::key(pos, "bad escape in byte string")),
                }
            }
        }
        _ => return Err(CodecError::key(0, "unknown value tag")),
    };
    if buf.len() < len {
        return Err(CodecError::key(buf.len(), "truncated value"));
    }
    Ok(len)
}

/// Turns `key` into the smallest key greater than every key that starts with it (drops
/// trailing 0xFF bytes and increments the last byte). Returns `false` when no such key
/// exists (empty or all 0xFF): the range is then unbounded above.
pub fn prefix_successor(key: &mut Vec<u8>) -> bool {
    while let Some(last) = key.last_mut() {
        if *last == 0xFF {
            key.pop();
        } else {
            *last += 1;
            return true;
        }
    }
    false
}

/// Orders values the way their encodings sort: by tag, then by value (doubles by
/// `total_cmp` after folding `-0.0` and NaNs). Used by tests and to validate bounds.
pub fn key_order(a: &Value, b: &Value) -> std::cmp::Ordering {
    fn tag(v: &Value) -> u8 {
        match v {
            Value::Null => TAG_NULL,
            Value::Bool(_) => TAG_BOOL,
            Value::Int(_) => TAG_INT,
            Value::Double(_) => TAG_DOUBLE,
            Value::Text(_) => TAG_TEXT,
            Value::Blob(_) => TAG_BLOB,
        }
    }
    match (a, b) {
        (Value::Double(x), Value::Double(y)) => double_bits(*x).cmp(&double_bits(*y)),
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Text(x), Value::Text(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Value::Blob(x), Value::Blob(y)) => x.cmp(y),
        _ => tag(a).cmp(&tag(b)),
    }
}

#[cfg(test)]
mod tests;
