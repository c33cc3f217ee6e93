//! The memtable's key and value types: byte strings stored inside the skiplist node when short
//! (up to [`INLINE_LEN`] bytes), so comparing keys during a skiplist search, and reading
//! entries in order during a flush, touch only the nodes, not a second allocation elsewhere in
//! memory. Longer ones share the write batch's buffer (`Bytes`).

use std::cmp::Ordering;

use bytes::Bytes;

use crate::types::{InternalKeyRef, SeqNo, ValueKind};

/// User keys up to this many bytes are stored inline.
pub(crate) const INLINE_LEN: usize = 22;

/// A byte string, inline when short.
#[derive(Clone, Debug)]
pub(crate) enum SmallBytes {
    Inline { len: u8, bytes: [u8; INLINE_LEN] },
    Shared(Bytes),
}

impl SmallBytes {
    /// Inline copy of `user_key` when short, else `shared()`.
    pub(crate) fn new(user_key: &[u8], shared: impl FnOnce() -> Bytes) -> Self {
        match u8::try_from(user_key.len()) {
            Ok(len) if user_key.len() <= INLINE_LEN => {
                let mut bytes = [0; INLINE_LEN];
                if let Some(dst) = bytes.get_mut(..user_key.len()) {
                    dst.copy_from_slice(user_key);
                }
                SmallBytes::Inline { len, bytes }
            }
            _ => SmallBytes::Shared(shared()),
        }
    }

    /// From a `Bytes`, sharing it when too long to inline.
    pub(crate) fn from_bytes(bytes: Bytes) -> Self {
        Self::new(&bytes, || bytes.clone())
    }

    /// As an independent `Bytes` (copies inline contents).
    pub(crate) fn to_bytes(&self) -> Bytes {
        match self {
            SmallBytes::Inline { .. } => Bytes::copy_from_slice(self.as_slice()),
            SmallBytes::Shared(b) => b.clone(),
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            SmallBytes::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or_default(),
            SmallBytes::Shared(b) => b,
        }
    }
}

/// An internal key as the memtable stores it.
#[derive(Clone, Debug)]
pub(crate) struct MemKey {
    user_key: SmallBytes,
    seqno: SeqNo,
    kind: ValueKind,
}

impl MemKey {
    /// A key sharing `user_key`'s buffer when it is too long to inline.
    pub(crate) fn from_bytes(user_key: Bytes, seqno: SeqNo, kind: ValueKind) -> Self {
        MemKey {
            user_key: SmallBytes::from_bytes(user_key),
            seqno,
            kind,
        }
    }

    /// A key copied from `user_key` (seek targets, single puts).
    pub(crate) fn from_slice(user_key: &[u8], seqno: SeqNo, kind: ValueKind) -> Self {
        MemKey {
            user_key: SmallBytes::new(user_key, || Bytes::copy_from_slice(user_key)),
            seqno,
            kind,
        }
    }

    pub(crate) fn as_ref(&self) -> InternalKeyRef<'_> {
        InternalKeyRef::new(self.user_key.as_slice(), self.seqno, self.kind)
    }
}

impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for MemKey {}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_ref().cmp(&other.as_ref())
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_and_shared_keys_compare_as_internal_keys() {
        let long = vec![b'a'; 40];
        let k1 = MemKey::from_slice(b"abc", SeqNo(5), ValueKind::Put);
        let k2 = MemKey::from_bytes(Bytes::from(long.clone()), SeqNo(1), ValueKind::Put);
        let k3 = MemKey::from_slice(b"abc", SeqNo(9), ValueKind::Delete);
        let k4 = MemKey::from_slice(&[0xff; INLINE_LEN], SeqNo(1), ValueKind::Put);
        let k5 = MemKey::from_slice(b"", SeqNo(1), ValueKind::Put);
        assert!(k2 < k1, "aaaa... sorts before abc");
        assert!(k3 < k1, "newer first");
        assert!(k1 < k4);
        assert!(k5 < k2);
        assert_eq!(k2.as_ref().user_key, &long[..]);
        assert_eq!(k4.as_ref().user_key, &[0xff; INLINE_LEN][..]);
        assert_eq!(k5.as_ref().user_key, b"");
    }
}
