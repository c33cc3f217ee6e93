//! Core identifiers: sequence numbers, file numbers, value kinds and internal keys.
//!
//! An **internal key** is a user key tagged with the sequence number of the write that produced
//! it and the kind of that write. Encoded on disk (data and index blocks) it is
//!
//! ```text
//! [user_key bytes][trailer: u64 little-endian = seqno << 8 | kind]
//! ```
//!
//! Internal keys order by user key ascending (bytewise), then by trailer **descending**, so the
//! newest version of a key comes first (LevelDB's `db/dbformat.h` does the same). Encoded internal
//! keys are never compared as raw bytes: use [`InternalKeyRef::cmp`] or [`compare_internal`].

use std::cmp::Ordering;
use std::fmt;

use bytes::Bytes;

/// A write's position in the total order of writes. 56 bits are usable (the low byte of the
/// trailer holds the [`ValueKind`]); [`SeqNo::MAX`] is the largest valid value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SeqNo(pub u64);

impl SeqNo {
    /// Largest usable sequence number, 2^56 - 1. Writes past it are refused.
    pub const MAX: SeqNo = SeqNo((1 << 56) - 1);
    /// Sequence number 0: "before every write". Also what compaction may zero sequence numbers to.
    pub const ZERO: SeqNo = SeqNo(0);

    /// The raw value.
    pub fn get(self) -> u64 {
        self.0
    }

    /// `self + n`, or `None` past [`SeqNo::MAX`].
    pub fn checked_add(self, n: u64) -> Option<SeqNo> {
        let v = self.0.checked_add(n)?;
        (v <= Self::MAX.0).then_some(SeqNo(v))
    }
}

impl fmt::Display for SeqNo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// Number of a file in the database directory (WAL, SSTable, manifest). One counter serves all
/// file kinds, so a number never names two files (LevelDB's `db/filename.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileNumber(pub u64);

impl fmt::Display for FileNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:06}", self.0)
    }
}

/// What a versioned entry records. Stored as one byte in internal keys and WAL batches.
/// DO NOT CHANGE the byte values: they are on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ValueKind {
    /// A tombstone: the key is deleted as of this sequence number.
    Delete,
    /// A full value.
    Put,
    /// A merge operand, folded by the keyspace's merge operator.
    Merge,
}

impl ValueKind {
    /// The kind used to build seek keys: the largest byte value, so a seek key sorts before every
    /// entry with the same user key and sequence number.
    pub const FOR_SEEK: ValueKind = ValueKind::Merge;
}

impl From<ValueKind> for u8 {
    fn from(kind: ValueKind) -> u8 {
        // DO NOT CHANGE: on-disk values.
        match kind {
            ValueKind::Delete => 0,
            ValueKind::Put => 1,
            ValueKind::Merge => 2,
        }
    }
}

impl TryFrom<u8> for ValueKind {
    type Error = u8;

    fn try_from(byte: u8) -> Result<Self, u8> {
        match byte {
            0 => Ok(ValueKind::Delete),
            1 => Ok(ValueKind::Put),
            2 => Ok(ValueKind::Merge),
            other => Err(other),
        }
    }
}

/// Length of the trailer appended to a user key in an encoded internal key.
pub const TRAILER_LEN: usize = 8;

/// Packs a sequence number and kind into the 8-byte trailer value.
pub fn pack_trailer(seqno: SeqNo, kind: ValueKind) -> u64 {
    (seqno.0 << 8) | u64::from(u8::from(kind))
}

/// Unpacks a trailer; `None` if the kind byte is unknown.
pub fn unpack_trailer(trailer: u64) -> Option<(SeqNo, ValueKind)> {
    let kind = ValueKind::try_from((trailer & 0xff) as u8).ok()?;
    Some((SeqNo(trailer >> 8), kind))
}

/// A borrowed internal key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct InternalKeyRef<'a> {
    /// The key the user wrote.
    pub user_key: &'a [u8],
    /// Sequence number of the write.
    pub seqno: SeqNo,
    /// Kind of the write.
    pub kind: ValueKind,
}

impl<'a> InternalKeyRef<'a> {
    /// Builds a borrowed internal key.
    pub fn new(user_key: &'a [u8], seqno: SeqNo, kind: ValueKind) -> Self {
        InternalKeyRef {
            user_key,
            seqno,
            kind,
        }
    }

    /// Decodes an encoded internal key; `None` if shorter than the trailer or the kind is unknown.
    pub fn decode(encoded: &'a [u8]) -> Option<Self> {
        let split = encoded.len().checked_sub(TRAILER_LEN)?;
        let (user_key, trailer) = encoded.split_at(split);
        let trailer = u64::from_le_bytes(trailer.try_into().ok()?);
        let (seqno, kind) = unpack_trailer(trailer)?;
        Some(InternalKeyRef {
            user_key,
            seqno,
            kind,
        })
    }

    /// The packed trailer value.
    pub fn trailer(&self) -> u64 {
        pack_trailer(self.seqno, self.kind)
    }

    /// Appends the encoded form to `dst`.
    pub fn encode_into(&self, dst: &mut Vec<u8>) {
        dst.extend_from_slice(self.user_key);
        dst.extend_from_slice(&self.trailer().to_le_bytes());
    }

    /// The encoded form as a new vector.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.user_key.len() + TRAILER_LEN);
        self.encode_into(&mut v);
        v
    }

    /// An owned copy.
    pub fn to_owned(&self) -> InternalKey {
        InternalKey {
            user_key: Bytes::copy_from_slice(self.user_key),
            seqno: self.seqno,
            kind: self.kind,
        }
    }
}

impl Ord for InternalKeyRef<'_> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.user_key
            .cmp(other.user_key)
            .then_with(|| other.trailer().cmp(&self.trailer()))
    }
}

impl PartialOrd for InternalKeyRef<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// An owned internal key (the memtable's key type).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InternalKey {
    /// The key the user wrote.
    pub user_key: Bytes,
    /// Sequence number of the write.
    pub seqno: SeqNo,
    /// Kind of the write.
    pub kind: ValueKind,
}

impl InternalKey {
    /// Builds an owned internal key.
    pub fn new(user_key: impl Into<Bytes>, seqno: SeqNo, kind: ValueKind) -> Self {
        InternalKey {
            user_key: user_key.into(),
            seqno,
            kind,
        }
    }

    /// Borrowed view.
    pub fn as_ref(&self) -> InternalKeyRef<'_> {
        InternalKeyRef {
            user_key: &self.user_key,
            seqno: self.seqno,
            kind: self.kind,
        }
    }
}

impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_ref().cmp(&other.as_ref())
    }
}

impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Compares two *encoded* internal keys by internal-key order. Malformed keys (shorter than
/// the trailer) sort by raw bytes before well-formed ones; decoders reject them before this.
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    match (
        a.len().checked_sub(TRAILER_LEN),
        b.len().checked_sub(TRAILER_LEN),
    ) {
        (Some(sa), Some(sb)) => {
            let (ua, ta) = a.split_at(sa);
            let (ub, tb) = b.split_at(sb);
            ua.cmp(ub).then_with(|| {
                let ta = u64::from_le_bytes(ta.try_into().unwrap_or([0; 8]));
                let tb = u64::from_le_bytes(tb.try_into().unwrap_or([0; 8]));
                tb.cmp(&ta)
            })
        }
        _ => a.cmp(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_keys_order_newest_first_within_user_key() {
        let a1 = InternalKeyRef::new(b"a", SeqNo(1), ValueKind::Put);
        let a2 = InternalKeyRef::new(b"a", SeqNo(2), ValueKind::Delete);
        let b0 = InternalKeyRef::new(b"b", SeqNo(0), ValueKind::Put);
        assert!(a2 < a1);
        assert!(a1 < b0);
        assert_eq!(compare_internal(&a2.encode(), &a1.encode()), Ordering::Less);
        assert_eq!(compare_internal(&a1.encode(), &b0.encode()), Ordering::Less);
        // The empty user key sorts before everything.
        let empty = InternalKeyRef::new(b"", SeqNo(9), ValueKind::Put);
        assert!(empty < a2);
    }

    #[test]
    fn internal_key_codec_round_trips_and_rejects_bad_input() {
        let k = InternalKeyRef::new(b"\xff\x00key", SeqNo::MAX, ValueKind::Merge);
        let enc = k.encode();
        assert_eq!(InternalKeyRef::decode(&enc), Some(k));
        assert_eq!(InternalKeyRef::decode(&enc[..7]), None);
        let mut bad = enc.clone();
        let kind_pos = bad.len() - 8;
        bad[kind_pos] = 9;
        assert_eq!(InternalKeyRef::decode(&bad), None);
    }

    #[test]
    fn seqno_checked_add_stops_at_56_bits() {
        assert_eq!(SeqNo::MAX.checked_add(1), None);
        assert_eq!(SeqNo(5).checked_add(2), Some(SeqNo(7)));
    }
}
