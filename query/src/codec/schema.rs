//! Catalog records (`docs/format/keys.md`, "Catalog").
//!
//! ```text
//! meta   := format-version u32-LE  next-id u32-LE
//! table  := 0x01(record version) id u32-LE
//!           varint32(ncols) column*  varint32(npk) varint32(col)*  varint32(nidx) index*
//! column := varint32(len) name  type u8  flags u8 (bit 0: NOT NULL)
//! index  := varint32(len) name  id u32-LE  varint32(col)
//! type   := 1 BIGINT | 2 DOUBLE | 3 TEXT | 4 BLOB | 5 BOOLEAN
//! ```

use strata_engine::coding::{get_fixed32, get_length_prefixed, get_varint32, put_fixed32};
use strata_engine::coding::{put_length_prefixed, put_varint32};

use super::CodecError;
use crate::catalog::{Column, IndexDef, TableSchema};
use crate::value::DataType;

const RECORD_VERSION: u8 = 1;

impl From<DataType> for u8 {
    /// DO NOT CHANGE: on-disk.
    fn from(t: DataType) -> u8 {
        match t {
            DataType::BigInt => 1,
            DataType::Double => 2,
            DataType::Text => 3,
            DataType::Blob => 4,
            DataType::Boolean => 5,
        }
    }
}

impl TryFrom<u8> for DataType {
    type Error = CodecError;
    fn try_from(b: u8) -> Result<Self, CodecError> {
        Ok(match b {
            1 => DataType::BigInt,
            2 => DataType::Double,
            3 => DataType::Text,
            4 => DataType::Blob,
            5 => DataType::Boolean,
            _ => return Err(CodecError::catalog(0, "unknown column type")),
        })
    }
}

fn usize_to_u32(n: usize) -> u32 {
    // Column counts and name lengths are bounded far below 4 Gi by the SQL text they come from.
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Encodes the meta record.
pub fn encode_meta(format_version: u32, next_id: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(8);
    put_fixed32(&mut out, format_version);
    put_fixed32(&mut out, next_id);
    out
}

/// Decodes the meta record into `(format_version, next_id)`.
///
/// # Errors
/// [`CodecError`] when the record is not 8 bytes.
pub fn decode_meta(b: &[u8]) -> Result<(u32, u32), CodecError> {
    if b.len() != 8 {
        return Err(CodecError::catalog(0, "meta record is not 8 bytes"));
    }
    let v = get_fixed32(b, 0).ok_or(CodecError::catalog(0, "truncated meta"))?;
    let n = get_fixed32(b, 4).ok_or(CodecError::catalog(4, "truncated meta"))?;
    Ok((v, n))
}

/// Encodes a table record.
pub fn encode_table(t: &TableSchema) -> Vec<u8> {
    let mut out = vec![RECORD_VERSION];
    put_fixed32(&mut out, t.id);
    put_varint32(&mut out, usize_to_u32(t.columns.len()));
    for c in &t.columns {
        put_length_prefixed(&mut out, c.name.as_bytes());
        out.push(u8::from(c.ty));
        out.push(u8::from(c.not_null));
    }
    put_varint32(&mut out, usize_to_u32(t.primary_key.len()));
    for &c in &t.primary_key {
        put_varint32(&mut out, usize_to_u32(c));
    }
    put_varint32(&mut out, usize_to_u32(t.indexes.len()));
    for i in &t.indexes {
        put_length_prefixed(&mut out, i.name.as_bytes());
        put_fixed32(&mut out, i.id);
        put_varint32(&mut out, usize_to_u32(i.column));
    }
    out
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn err(&self, reason: &'static str) -> CodecError {
        CodecError::catalog(self.pos, reason)
    }
    fn rest(&self) -> &[u8] {
        self.buf.get(self.pos..).unwrap_or_default()
    }
    fn u8(&mut self) -> Result<u8, CodecError> {
        let b = *self.rest().first().ok_or(self.err("truncated"))?;
        self.pos += 1;
        Ok(b)
    }
    fn u32(&mut self) -> Result<u32, CodecError> {
        let v = get_fixed32(self.buf, self.pos).ok_or(self.err("truncated u32"))?;
        self.pos += 4;
        Ok(v)
    }
    fn count(&mut self) -> Result<usize, CodecError> {
        let (v, n) = get_varint32(self.rest()).ok_or(self.err("truncated varint"))?;
        self.pos += n;
        usize::try_from(v).map_err(|_| self.err("count too large"))
    }
    fn name(&mut self) -> Result<String, CodecError> {
        let (b, n) = get_length_prefixed(self.rest()).ok_or(self.err("truncated name"))?;
        let s = std::str::from_utf8(b)
            .map_err(|_| self.err("name is not UTF-8"))?
            .to_owned();
        self.pos += n;
        Ok(s)
    }
}

/// Decodes a table record stored under the name `name`.
///
/// # Errors
/// [`CodecError`] for a truncated record, an unknown version or type, or column positions
/// out of range.
pub fn decode_table(name: &str, buf: &[u8]) -> Result<TableSchema, CodecError> {
    let mut r = Reader { buf, pos: 0 };
    if r.u8()? != RECORD_VERSION {
        return Err(CodecError::catalog(0, "unknown table record version"));
    }
    let id = r.u32()?;
    let ncols = r.count()?;
    let mut columns = Vec::new();
    for _ in 0..ncols {
        let name = r.name()?;
        let ty = DataType::try_from(r.u8()?).map_err(|_| r.err("unknown column type"))?;
        let not_null = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(r.err("bad column flags")),
        };
        columns.push(Column { name, ty, not_null });
    }
    let npk = r.count()?;
    let mut pk = Vec::new();
    for _ in 0..npk {
        let c = r.count()?;
        if c >= columns.len() || pk.contains(&c) {
            return Err(r.err("bad primary-key column"));
        }
        pk.push(c);
    }
    if pk.is_empty() {
        return Err(r.err("table has no primary key"));
    }
    let nidx = r.count()?;
    let mut indexes = Vec::new();
    for _ in 0..nidx {
        let name = r.name()?;
        let id = r.u32()?;
        let column = r.count()?;
        if column >= columns.len() {
            return Err(r.err("bad index column"));
        }
        indexes.push(IndexDef { name, id, column });
    }
    if r.pos != buf.len() {
        return Err(r.err("bytes left after the record"));
    }
    let mut t = TableSchema::new(name.to_owned(), id, columns, pk);
    t.indexes = indexes;
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TableSchema {
        let mut t = TableSchema::new(
            "reads".into(),
            3,
            vec![
                Column {
                    name: "seq".into(),
                    ty: DataType::Text,
                    not_null: true,
                },
                Column {
                    name: "count".into(),
                    ty: DataType::BigInt,
                    not_null: false,
                },
            ],
            vec![0],
        );
        t.indexes.push(IndexDef {
            name: "by_count".into(),
            id: 4,
            column: 1,
        });
        t
    }

    #[test]
    fn table_record_round_trips() {
        let t = sample();
        let b = encode_table(&t);
        assert_eq!(decode_table("reads", &b).unwrap(), t);
        assert_eq!(decode_meta(&encode_meta(1, 9)).unwrap(), (1, 9));
    }

    #[test]
    fn damaged_table_records_are_errors() {
        let b = encode_table(&sample());
        for cut in 0..b.len() {
            assert!(decode_table("reads", &b[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut f = b.clone();
                f[i] ^= 1 << bit;
                let _ = decode_table("reads", &f); // must not panic
            }
        }
        assert!(decode_meta(&[1, 2, 3]).is_err());
    }
}
