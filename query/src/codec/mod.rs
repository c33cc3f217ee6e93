//! Byte encodings of the SQL layer, specified in `docs/format/keys.md`:
//! - [`key`]: the order-preserving encoding of values in engine keys (primary keys, index
//!   entries), big-endian on purpose so that bytewise key order is SQL value order;
//! - [`row`]: the compact encoding of a row's non-key columns in the engine value;
//! - [`schema`]: catalog records (table and index definitions).
//!
//! Decoders never panic on damaged input: they return [`CodecError`].

pub mod key;
pub mod row;
pub mod schema;

/// Stored bytes that do not follow `docs/format/keys.md`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed {what} at byte {offset}: {reason}")]
pub struct CodecError {
    /// What was being decoded: "key", "row" or "catalog record".
    pub what: &'static str,
    /// Byte offset within the key or value where decoding failed.
    pub offset: usize,
    /// What was wrong.
    pub reason: &'static str,
}

impl CodecError {
    pub(crate) fn key(offset: usize, reason: &'static str) -> Self {
        CodecError {
            what: "key",
            offset,
            reason,
        }
    }

    pub(crate) fn row(offset: usize, reason: &'static str) -> Self {
        CodecError {
            what: "row",
            offset,
            reason,
        }
    }

    pub(crate) fn catalog(offset: usize, reason: &'static str) -> Self {
        CodecError {
            what: "catalog record",
            offset,
            reason,
        }
    }
}
