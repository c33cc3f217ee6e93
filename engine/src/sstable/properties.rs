//! The properties block: counts, key range and seqno range of a table.
//!
//! Spec: `docs/format/sstable.md`, section 5.
//!
//! ```text
//! properties := num_entries | num_deletions | num_merges | smallest_seqno | largest_seqno
//!               | raw_key_bytes | raw_value_bytes | data_bytes | num_data_blocks
//!               | filter_bits_per_key                          (each a varint)
//!               | smallest_key_len: varint | smallest_key | largest_key_len: varint | largest_key
//!               [ | table_id_len: varint (16) | table_id             (optional)
//!                 [ | num_user_keys: varint ] ]                      (optional)
//! ```

use std::path::Path;

use bytes::Bytes;

use crate::coding::{get_length_prefixed, get_varint64, put_length_prefixed, put_varint64};
use crate::error::{Error, Result};
use crate::types::{InternalKey, InternalKeyRef, SeqNo, ValueKind};

/// What a table holds, recorded by the builder and stored in the properties block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableProperties {
    /// Entries in the table, all kinds.
    pub num_entries: u64,
    /// Entries of kind [`ValueKind::Delete`] (tombstones).
    pub num_deletions: u64,
    /// Entries of kind [`ValueKind::Merge`].
    pub num_merges: u64,
    /// The first (smallest) internal key. Meaningless when `num_entries == 0` (then it is the
    /// empty user key at seqno 0, kind Delete).
    pub smallest_key: InternalKey,
    /// The last (largest) internal key. Meaningless when `num_entries == 0`, like
    /// `smallest_key`.
    pub largest_key: InternalKey,
    /// Smallest sequence number of any entry (0 when empty).
    pub smallest_seqno: SeqNo,
    /// Largest sequence number of any entry (0 when empty).
    pub largest_seqno: SeqNo,
    /// Sum of encoded internal key lengths (user key + 8 bytes each), uncompressed.
    pub raw_key_bytes: u64,
    /// Sum of value lengths, uncompressed.
    pub raw_value_bytes: u64,
    /// Bytes the data blocks take in the file, trailers included.
    pub data_bytes: u64,
    /// Number of data blocks.
    pub num_data_blocks: u64,
    /// Bloom filter bits per key the table was built with; 0 = no filter block.
    pub filter_bits_per_key: u32,
    /// The table's identity: 16 random bytes its builder drew (`docs/format/sstable.md`
    /// section 5), recorded in the manifest and compared with it when the table is opened.
    /// `None` for tables written before table ids existed.
    pub table_id: Option<TableId>,
    /// Distinct user keys among the entries (`docs/format/sstable.md` section 5): equal to
    /// `num_entries` when no key has two versions in the table, which lets
    /// [`crate::Db::count`] count a range from the table's entries. `None` for tables written
    /// before it was recorded (2026-12-04), and always with `table_id` `None`.
    pub num_user_keys: Option<u64>,
}

/// A table's identity (`docs/format/sstable.md` section 5, `docs/format/manifest.md` tag 12):
/// 16 bytes drawn at random when the table's builder is created, as RocksDB's unique table
/// ids, so that a file swapped for another table, even one with the same size, entry count
/// and key range, is not taken for the table the manifest lists.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableId(pub [u8; TABLE_ID_LEN]);

/// Bytes of a [`TableId`].
pub const TABLE_ID_LEN: usize = 16;

impl TableId {
    /// A fresh id from the thread's OS-seeded generator.
    pub fn random() -> TableId {
        TableId(rand::random())
    }
}

impl std::fmt::Debug for TableId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TableId({self})")
    }
}

impl std::fmt::Display for TableId {
    /// Lowercase hex, 32 digits.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl Default for TableProperties {
    fn default() -> Self {
        let none = || InternalKey::new(Bytes::new(), SeqNo::ZERO, ValueKind::Delete);
        TableProperties {
            num_entries: 0,
            num_deletions: 0,
            num_merges: 0,
            smallest_key: none(),
            largest_key: none(),
            smallest_seqno: SeqNo::ZERO,
            largest_seqno: SeqNo::ZERO,
            raw_key_bytes: 0,
            raw_value_bytes: 0,
            data_bytes: 0,
            num_data_blocks: 0,
            filter_bits_per_key: 0,
            table_id: None,
            num_user_keys: None,
        }
    }
}

impl TableProperties {
    /// Accounts for one added entry (keys arrive in increasing order); `new_user_key` is false
    /// when `key` has the previous entry's user key.
    pub(crate) fn record(&mut self, key: InternalKeyRef<'_>, value_len: usize, new_user_key: bool) {
        if new_user_key {
            *self.num_user_keys.get_or_insert(0) += 1;
        }
        if self.num_entries == 0 {
            self.smallest_key = key.to_owned();
            self.smallest_seqno = key.seqno;
            self.largest_seqno = key.seqno;
        }
        self.num_entries += 1;
        match key.kind {
            ValueKind::Delete => self.num_deletions += 1,
            ValueKind::Merge => self.num_merges += 1,
            ValueKind::Put => {}
        }
        self.smallest_seqno = self.smallest_seqno.min(key.seqno);
        self.largest_seqno = self.largest_seqno.max(key.seqno);
        self.raw_key_bytes += (key.user_key.len() + crate::types::TRAILER_LEN) as u64;
        self.raw_value_bytes += value_len as u64;
    }

    /// Appends the encoding to `dst`.
    pub fn encode_into(&self, dst: &mut Vec<u8>) {
        for v in [
            self.num_entries,
            self.num_deletions,
            self.num_merges,
            self.smallest_seqno.0,
            self.largest_seqno.0,
            self.raw_key_bytes,
            self.raw_value_bytes,
            self.data_bytes,
            self.num_data_blocks,
            u64::from(self.filter_bits_per_key),
        ] {
            put_varint64(dst, v);
        }
        if self.num_entries == 0 {
            put_length_prefixed(dst, b"");
            put_length_prefixed(dst, b"");
        } else {
            put_length_prefixed(dst, &self.smallest_key.as_ref().encode());
            put_length_prefixed(dst, &self.largest_key.as_ref().encode());
        }
        if let Some(id) = &self.table_id {
            put_length_prefixed(dst, &id.0);
            if let Some(n) = self.num_user_keys {
                put_varint64(dst, n);
            }
        }
    }

    /// Decodes a properties block's contents read at `offset` of `file`.
    ///
    /// # Errors
    /// [`Error::Corruption`] if a field is truncated, bytes are left over, a key is malformed,
    /// or the values contradict each other.
    pub fn decode(src: &[u8], file: &Path, offset: u64) -> Result<TableProperties> {
        let corrupt = |why: &str| Error::corruption(file, offset, format!("bad properties: {why}"));
        let mut pos = 0;
        let mut varint = || -> Result<u64> {
            let (v, n) = src
                .get(pos..)
                .and_then(get_varint64)
                .ok_or_else(|| corrupt("truncated"))?;
            pos += n;
            Ok(v)
        };
        let num_entries = varint()?;
        let num_deletions = varint()?;
        let num_merges = varint()?;
        let smallest_seqno = SeqNo(varint()?);
        let largest_seqno = SeqNo(varint()?);
        let raw_key_bytes = varint()?;
        let raw_value_bytes = varint()?;
        let data_bytes = varint()?;
        let num_data_blocks = varint()?;
        let filter_bits_per_key =
            u32::try_from(varint()?).map_err(|_| corrupt("filter bits per key overflows"))?;
        let mut key = || -> Result<&[u8]> {
            let (k, n) = src
                .get(pos..)
                .and_then(get_length_prefixed)
                .ok_or_else(|| corrupt("truncated key"))?;
            pos += n;
            Ok(k)
        };
        let (smallest, largest) = (key()?, key()?);
        let (smallest, largest, table_id) = (smallest, largest, key().ok());
        let num_user_keys = match table_id {
            Some(_) if pos < src.len() => {
                let (n, used) = src
                    .get(pos..)
                    .and_then(get_varint64)
                    .ok_or_else(|| corrupt("truncated user key count"))?;
                pos += used;
                Some(n)
            }
            _ => None,
        };
        let table_id = table_id
            .map(|id| {
                id.try_into()
                    .map(TableId)
                    .map_err(|_| corrupt("table id is not 16 bytes"))
            })
            .transpose()?;
        if pos != src.len() {
            return Err(corrupt("trailing bytes"));
        }
        let mut props = TableProperties {
            num_entries,
            num_deletions,
            num_merges,
            smallest_seqno,
            largest_seqno,
            raw_key_bytes,
            raw_value_bytes,
            data_bytes,
            num_data_blocks,
            filter_bits_per_key,
            table_id,
            num_user_keys,
            ..TableProperties::default()
        };
        if num_entries == 0 {
            if !smallest.is_empty() || !largest.is_empty() {
                return Err(corrupt("key range in an empty table"));
            }
        } else {
            let s = InternalKeyRef::decode(smallest).ok_or_else(|| corrupt("smallest key"))?;
            let l = InternalKeyRef::decode(largest).ok_or_else(|| corrupt("largest key"))?;
            if s > l {
                return Err(corrupt("smallest key above largest key"));
            }
            props.smallest_key = s.to_owned();
            props.largest_key = l.to_owned();
        }
        if smallest_seqno > largest_seqno
            || num_deletions
                .checked_add(num_merges)
                .is_none_or(|n| n > num_entries)
            || num_user_keys.is_some_and(|n| n > num_entries || (n == 0) != (num_entries == 0))
        {
            return Err(corrupt("inconsistent counts"));
        }
        Ok(props)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TableProperties {
        let mut p = TableProperties::default();
        p.record(InternalKeyRef::new(b"a", SeqNo(9), ValueKind::Put), 3, true);
        p.record(
            InternalKeyRef::new(b"b", SeqNo(2), ValueKind::Delete),
            0,
            true,
        );
        p.record(
            InternalKeyRef::new(b"b", SeqNo(1), ValueKind::Put),
            2,
            false,
        );
        p.record(
            InternalKeyRef::new(b"c", SeqNo(5), ValueKind::Merge),
            4,
            true,
        );
        p.largest_key = InternalKey::new(&b"c"[..], SeqNo(5), ValueKind::Merge);
        p.data_bytes = 100;
        p.num_data_blocks = 1;
        p.filter_bits_per_key = 10;
        p
    }

    #[test]
    fn properties_round_trip() -> Result<()> {
        let p = sample();
        assert_eq!((p.num_deletions, p.num_merges), (1, 1));
        assert_eq!((p.num_entries, p.num_user_keys), (4, Some(3)));
        assert_eq!((p.smallest_seqno, p.largest_seqno), (SeqNo(1), SeqNo(9)));
        assert_eq!(p.raw_key_bytes, 36);
        let mut buf = Vec::new();
        p.encode_into(&mut buf);
        // Without a table id (tables of builds before 2026-12-03) the count is not written.
        let without_id = TableProperties {
            num_user_keys: None,
            ..p.clone()
        };
        assert_eq!(
            TableProperties::decode(&buf, Path::new("t"), 0)?,
            without_id
        );
        let p = TableProperties {
            table_id: Some(TableId::random()),
            ..p
        };
        buf.clear();
        p.encode_into(&mut buf);
        assert_eq!(TableProperties::decode(&buf, Path::new("t"), 0)?, p);

        let empty = TableProperties::default();
        buf.clear();
        empty.encode_into(&mut buf);
        assert_eq!(TableProperties::decode(&buf, Path::new("t"), 0)?, empty);
        Ok(())
    }

    #[test]
    fn truncated_or_padded_properties_are_corruption() {
        let mut buf = Vec::new();
        sample().encode_into(&mut buf);
        for cut in 0..buf.len() {
            assert!(TableProperties::decode(&buf[..cut], Path::new("t"), 0).is_err());
        }
        buf.push(0);
        assert!(TableProperties::decode(&buf, Path::new("t"), 0).is_err());
    }

    #[test]
    fn table_ids_round_trip_and_only_sixteen_bytes_decode() -> Result<()> {
        let mut p = sample();
        let without = {
            let mut buf = Vec::new();
            p.encode_into(&mut buf);
            buf
        };
        p.table_id = Some(TableId(*b"0123456789abcdef"));
        let mut buf = Vec::new();
        p.encode_into(&mut buf);
        // The id, then the user-key count (3, one byte).
        assert_eq!(buf.len(), without.len() + 17 + 1);
        assert_eq!(TableProperties::decode(&buf, Path::new("t"), 0)?, p);
        // A table with an id and no count (builds of 2026-12-03 and 04): no count.
        let no_count = TableProperties::decode(&buf[..buf.len() - 1], Path::new("t"), 0)?;
        assert_eq!(no_count.num_user_keys, None);
        // More user keys than entries, or none in a table with entries: corruption.
        for bad in [5, 0] {
            let mut b = buf.clone();
            b.pop();
            put_varint64(&mut b, bad);
            assert!(TableProperties::decode(&b, Path::new("t"), 0).is_err());
        }
        assert_eq!(
            p.table_id.map(|id| id.to_string()).as_deref(),
            Some("30313233343536373839616263646566")
        );
        // Cut inside the id, or an id of another length: corruption, never a shorter id.
        for cut in without.len() + 1..without.len() + 17 {
            assert!(TableProperties::decode(&buf[..cut], Path::new("t"), 0).is_err());
        }
        let mut long = without.clone();
        put_length_prefixed(&mut long, &[7; 17]);
        assert!(TableProperties::decode(&long, Path::new("t"), 0).is_err());
        // Two builders never draw the same id (2^-128).
        assert_ne!(TableId::random(), TableId::random());
        Ok(())
    }
}
