//! Write batches: a group of puts, deletes and merges applied atomically.
//!
//! A batch's encoding is also its WAL record payload (spec: `docs/format/wal.md`, "Batch
//! payload"):
//!
//! ```text
//! batch  := seqno: u64 LE | count: u32 LE | entry{count}
//! entry  := tag: u8 | [keyspace: varint] | key_len: varint | key | [value_len: varint | value]
//! tag    := kind | (0x80 if a keyspace id follows; absent = the default keyspace, 0)
//! kind   := 0 Delete | 1 Put | 2 Merge           (ValueKind's on-disk byte; value for Put/Merge)
//! ```
//!
//! Entry `i` gets sequence number `seqno + i`.

use crate::coding::{
    get_fixed32, get_fixed64, get_length_prefixed, get_varint64, put_length_prefixed, put_varint64,
};
use crate::types::{SeqNo, ValueKind};

/// Bytes of the batch header (`seqno` + `count`).
pub const HEADER_LEN: usize = 12;

/// Set in an entry's tag byte when a keyspace id follows it.
const KEYSPACE_FLAG: u8 = 0x80;

/// An ordered group of writes applied atomically by `Db::write`: after a crash either all of a
/// batch's entries are present or none. Later entries win over earlier ones for the same key.
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    /// The database whose keyspace handles `put_in` and friends were given (its identity),
    /// so that `Db::write` can refuse a batch built with another database's keyspaces.
    owner: Owner,
}

/// Which database a batch's keyspace entries belong to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Owner {
    /// No keyspace handle was used: the entries name the default keyspace only.
    #[default]
    Any,
    /// Every keyspace handle used belongs to the database with this identity.
    Db(usize),
    /// Handles of two different databases were mixed.
    Mixed,
}

impl Default for WriteBatch {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBatch")
            .field("len", &self.len())
            .field("size_bytes", &self.rep.len())
            .finish()
    }
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch {
            rep: vec![0; HEADER_LEN],
            owner: Owner::Any,
        }
    }

    /// An empty batch with room for about `bytes` bytes of encoded entries.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut rep = Vec::with_capacity(HEADER_LEN + bytes);
        rep.resize(HEADER_LEN, 0);
        WriteBatch {
            rep,
            owner: Owner::Any,
        }
    }

    /// Adds `key -> value`. Size limits are checked by `Db::write`, which returns
    /// [`crate::Error::InvalidArgument`] for a key over 64 KiB or a value over
    /// `Options::max_value_size`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) {
        self.push(ValueKind::Put, key, Some(value));
    }

    /// Adds a deletion of `key` (a tombstone). Deleting an absent key is not an error.
    pub fn delete(&mut self, key: &[u8]) {
        self.push(ValueKind::Delete, key, None);
    }

    /// Adds a merge operand for `key`, folded by the keyspace's merge operator.
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) {
        self.push(ValueKind::Merge, key, Some(operand));
    }

    /// Adds `key -> value` in `keyspace` (see [`crate::Db::keyspace`]); the batch stays atomic
    /// across keyspaces. `Db::write` returns [`crate::Error::InvalidArgument`] when the
    /// keyspace was dropped or belongs to another database.
    pub fn put_in(&mut self, keyspace: &crate::Keyspace, key: &[u8], value: &[u8]) {
        self.note_owner(keyspace.db_identity());
        self.push_in(keyspace.id(), ValueKind::Put, key, Some(value));
    }

    /// Adds a deletion of `key` in `keyspace`; see [`WriteBatch::put_in`].
    pub fn delete_in(&mut self, keyspace: &crate::Keyspace, key: &[u8]) {
        self.note_owner(keyspace.db_identity());
        self.push_in(keyspace.id(), ValueKind::Delete, key, None);
    }

    /// Adds a merge operand for `key` in `keyspace`; see [`WriteBatch::put_in`].
    pub fn merge_in(&mut self, keyspace: &crate::Keyspace, key: &[u8], operand: &[u8]) {
        self.note_owner(keyspace.db_identity());
        self.push_in(keyspace.id(), ValueKind::Merge, key, Some(operand));
    }

    fn note_owner(&mut self, db: usize) {
        self.owner = match self.owner {
            Owner::Any => Owner::Db(db),
            Owner::Db(d) if d == db => Owner::Db(d),
            _ => Owner::Mixed,
        };
    }

    /// Which database the keyspace handles used belong to.
    pub(crate) fn owner(&self) -> Owner {
        self.owner
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        get_fixed32(&self.rep, 8).map_or(0, |c| c as usize)
    }

    /// True when the batch has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Removes every entry.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(HEADER_LEN, 0);
        self.owner = Owner::Any;
    }

    /// Encoded size in bytes (what the batch adds to the WAL, before framing).
    pub fn size_bytes(&self) -> usize {
        self.rep.len()
    }

    fn push(&mut self, kind: ValueKind, key: &[u8], value: Option<&[u8]>) {
        self.push_in(0, kind, key, value);
    }

    /// Adds an entry for keyspace `keyspace` (0 is the default keyspace, encoded without id).
    pub(crate) fn push_in(
        &mut self,
        keyspace: u32,
        kind: ValueKind,
        key: &[u8],
        value: Option<&[u8]>,
    ) {
        if keyspace == 0 {
            self.rep.push(u8::from(kind));
        } else {
            self.rep.push(u8::from(kind) | KEYSPACE_FLAG);
            put_varint64(&mut self.rep, u64::from(keyspace));
        }
        put_length_prefixed(&mut self.rep, key);
        if let Some(value) = value {
            put_length_prefixed(&mut self.rep, value);
        }
        let count = u32::try_from(self.len() + 1).unwrap_or(u32::MAX);
        self.rep[8..12].copy_from_slice(&count.to_le_bytes());
    }

    /// Sets the sequence number of the first entry.
    #[cfg(test)]
    pub(crate) fn set_seqno(&mut self, seqno: SeqNo) {
        self.rep[0..8].copy_from_slice(&seqno.0.to_le_bytes());
    }

    /// Sequence number of the first entry (0 until the batch is written).
    pub(crate) fn seqno(&self) -> SeqNo {
        SeqNo(get_fixed64(&self.rep, 0).unwrap_or(0))
    }

    /// The encoded bytes (the WAL payload).
    #[cfg(test)]
    pub(crate) fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Appends `other`'s entries (used by group commit to merge followers' batches).
    pub(crate) fn append(&mut self, other: &WriteBatch) {
        self.rep.extend_from_slice(&other.rep[HEADER_LEN..]);
        let count = u32::try_from(self.len() + other.len()).unwrap_or(u32::MAX);
        self.rep[8..12].copy_from_slice(&count.to_le_bytes());
    }

    /// Decodes a WAL payload, checking that it holds exactly `count` well-formed entries.
    ///
    /// # Errors
    /// A description of the first problem; the caller adds file and offset.
    pub(crate) fn from_data(data: Vec<u8>) -> Result<WriteBatch, String> {
        if data.len() < HEADER_LEN {
            return Err(format!(
                "batch of {} bytes is shorter than its header",
                data.len()
            ));
        }
        let batch = WriteBatch {
            rep: data,
            owner: Owner::Any,
        };
        let mut seen = 0usize;
        for entry in batch.iter() {
            entry?;
            seen += 1;
        }
        if seen != batch.len() {
            return Err(format!(
                "batch header says {} entries, found {seen}",
                batch.len()
            ));
        }
        Ok(batch)
    }

    /// Iterates entries in order as `(keyspace, kind, key, value)`; `value` is empty for
    /// deletes.
    pub(crate) fn iter(&self) -> BatchIter<'_> {
        entries(&self.rep)
    }

    /// Takes the encoded bytes out, leaving an empty batch.
    pub(crate) fn into_data(self) -> Vec<u8> {
        self.rep
    }
}

/// Iterates the entries of an encoded batch (`data` starts with the 12-byte header).
pub(crate) fn entries(data: &[u8]) -> BatchIter<'_> {
    BatchIter {
        rest: data.get(HEADER_LEN..).unwrap_or_default(),
        offset: HEADER_LEN,
    }
}

/// Iterator over a batch's entries; yields `Err` (and then stops) on malformed input.
#[derive(Debug)]
pub(crate) struct BatchIter<'a> {
    rest: &'a [u8],
    offset: usize,
}

/// One decoded batch entry: `(keyspace id, kind, key, value)`.
pub(crate) type BatchEntry<'a> = (u32, ValueKind, &'a [u8], &'a [u8]);

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchEntry<'a>, String>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&tag, after_tag) = self.rest.split_first()?;
        let fail = |this: &mut Self, what: &str| {
            let msg = format!("{what} at batch offset {}", this.offset);
            this.rest = &[];
            Some(Err(msg))
        };
        let Ok(kind) = ValueKind::try_from(tag & !KEYSPACE_FLAG) else {
            return fail(self, &format!("unknown entry kind {tag}"));
        };
        let (keyspace, after_tag, id_len) = if tag & KEYSPACE_FLAG == 0 {
            (0, after_tag, 0)
        } else {
            let Some((id, n)) = get_varint64(after_tag) else {
                return fail(self, "truncated keyspace id");
            };
            let Ok(id) = u32::try_from(id) else {
                return fail(self, &format!("keyspace id {id} over 32 bits"));
            };
            (id, after_tag.get(n..).unwrap_or_default(), n)
        };
        let Some((key, klen)) = get_length_prefixed(after_tag) else {
            return fail(self, "truncated key");
        };
        let mut used = 1 + id_len + klen;
        let value: &[u8] = if kind == ValueKind::Delete {
            &[]
        } else {
            let Some((value, vlen)) = after_tag.get(klen..).and_then(get_length_prefixed) else {
                return fail(self, "truncated value");
            };
            used += vlen;
            value
        };
        self.rest = self.rest.get(used..).unwrap_or_default();
        self.offset += used;
        Some(Ok((keyspace, kind, key, value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_round_trips_through_its_encoding() {
        let mut b = WriteBatch::new();
        b.put(b"", b"");
        b.put(b"k", b"v");
        b.delete(b"\xff");
        b.merge(b"c", b"1");
        b.set_seqno(SeqNo(42));
        assert_eq!(b.len(), 4);
        let decoded = WriteBatch::from_data(b.data().to_vec()).expect("valid batch");
        assert_eq!(decoded.seqno(), SeqNo(42));
        let entries: Vec<_> = decoded.iter().collect::<Result<_, _>>().expect("entries");
        assert_eq!(
            entries,
            vec![
                (0, ValueKind::Put, &b""[..], &b""[..]),
                (0, ValueKind::Put, &b"k"[..], &b"v"[..]),
                (0, ValueKind::Delete, &b"\xff"[..], &b""[..]),
                (0, ValueKind::Merge, &b"c"[..], &b"1"[..]),
            ]
        );
        b.clear();
        assert!(b.is_empty());
    }

    #[test]
    fn keyspace_entries_carry_their_id() {
        let mut b = WriteBatch::new();
        b.push_in(0, ValueKind::Put, b"a", Some(b"1"));
        b.push_in(300, ValueKind::Delete, b"b", None);
        b.push_in(7, ValueKind::Merge, b"c", Some(b"2"));
        // Tag 0x80|0 (Delete), keyspace 300 as a two-byte varint.
        assert_eq!(
            &b.data()[HEADER_LEN + 5..HEADER_LEN + 8],
            &[0x80, 0xac, 0x02]
        );
        let decoded = WriteBatch::from_data(b.data().to_vec()).expect("valid batch");
        let entries: Vec<_> = decoded.iter().collect::<Result<_, _>>().expect("entries");
        assert_eq!(
            entries,
            vec![
                (0, ValueKind::Put, &b"a"[..], &b"1"[..]),
                (300, ValueKind::Delete, &b"b"[..], &b""[..]),
                (7, ValueKind::Merge, &b"c"[..], &b"2"[..]),
            ]
        );
        let data = b.data().to_vec();
        for cut in HEADER_LEN..data.len() {
            assert!(
                WriteBatch::from_data(data[..cut].to_vec()).is_err(),
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn truncated_or_flipped_batch_is_rejected_without_panic() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        b.delete(b"gone");
        let data = b.data().to_vec();
        for cut in 0..data.len() {
            assert!(
                WriteBatch::from_data(data[..cut].to_vec()).is_err(),
                "cut at {cut}"
            );
        }
        for i in 0..data.len() {
            for bit in 0..8 {
                let mut bad = data.clone();
                bad[i] ^= 1 << bit;
                // Must not panic; may or may not decode (a flipped value byte is still valid).
                let _ = WriteBatch::from_data(bad);
            }
        }
    }

    #[test]
    fn append_concatenates_entries() {
        let mut a = WriteBatch::new();
        a.put(b"a", b"1");
        let mut b = WriteBatch::new();
        b.delete(b"b");
        b.put(b"c", b"3");
        a.append(&b);
        assert_eq!(a.len(), 3);
        assert_eq!(a.iter().count(), 3);
    }
}
