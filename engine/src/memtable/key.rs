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
    /// `bytes[len..]` are always zero (`SmallBytes::new` is the only constructor), which
    /// [`SmallBytes::cmp_bytes`] relies on.
    Inline {
        len: u8,
        bytes: [u8; INLINE_LEN],
    },
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

    /// Compares as byte strings (lexicographically). Two inline strings compare as three
    /// big-endian words and then their lengths, without a call to `memcmp`: a skiplist search
    /// compares keys some 30 times per insert, and for short keys the call was most of the
    /// cost. The zero padding makes this exact: where one string is a prefix of the other, the
    /// longer one's next byte meets a zero, so it is greater, or equal when that byte is zero,
    /// and then the lengths decide.
    pub(crate) fn cmp_bytes(&self, other: &Self) -> Ordering {
        match (self, other) {
            (
                SmallBytes::Inline {
                    len: a_len,
                    bytes: a,
                },
                SmallBytes::Inline {
                    len: b_len,
                    bytes: b,
                },
            ) => words(a).cmp(&words(b)).then(a_len.cmp(b_len)),
            _ => self.as_slice().cmp(other.as_slice()),
        }
    }

    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            SmallBytes::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or_default(),
            SmallBytes::Shared(b) => b,
        }
    }
}

/// An inline string's bytes as big-endian words (the last one zero-padded), so that comparing
/// the words compares the bytes.
fn words(bytes: &[u8; INLINE_LEN]) -> (u64, u64, u64) {
    let word = |from: usize| {
        let mut w = [0u8; 8];
        let end = (from + 8).min(INLINE_LEN);
        if let (Some(dst), Some(src)) = (w.get_mut(..end - from), bytes.get(from..end)) {
            dst.copy_from_slice(src);
        }
        #[expect(
            clippy::big_endian_bytes,
            reason = "big-endian words compare in the bytes' order"
        )]
        let w = u64::from_be_bytes(w);
        w
    };
    (word(0), word(8), word(16))
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
    /// As [`InternalKeyRef`]'s order (user key ascending, then newest first), with the user
    /// keys compared by [`SmallBytes::cmp_bytes`].
    fn cmp(&self, other: &Self) -> Ordering {
        self.user_key
            .cmp_bytes(&other.user_key)
            .then_with(|| self.as_ref().cmp(&other.as_ref()))
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// Keys from a tiny alphabet (so prefixes and zero bytes are common), inline and shared.
    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(prop::sample::select(vec![0u8, 1, 0x7f, 0x80, 0xff]), 0..30)
    }

    proptest! {
        #[test]
        fn memkey_order_is_the_internal_key_order(
            a in key(), b in key(), sa in 0u64..4, sb in 0u64..4, shared in any::<bool>()
        ) {
            let make = |k: &[u8], s: u64| if shared {
                MemKey::from_bytes(Bytes::copy_from_slice(k), SeqNo(s), ValueKind::Put)
            } else {
                MemKey::from_slice(k, SeqNo(s), ValueKind::Put)
            };
            let (ka, kb) = (make(&a, sa), make(&b, sb));
            prop_assert_eq!(ka.cmp(&kb), ka.as_ref().cmp(&kb.as_ref()));
            prop_assert_eq!(
                ka.user_key.cmp_bytes(&kb.user_key),
                a.cmp(&b),
                "{:?} vs {:?}", a, b
            );
        }
    }

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
