//! Blocks: sorted, prefix-compressed entries with restart points (data and index blocks).
//!
//! Spec: `docs/format/sstable.md`, section 3. The entry encoding depends on the table's
//! [`TableFormat`]:
//!
//! ```text
//! block        := entry* restarts num_restarts
//! entry_v1     := shared: varint | non_shared: varint | value_len: varint
//!                 | key_delta: u8[non_shared] | value: u8[value_len]
//!                 (prefix compression over the encoded internal key user_key | trailer u64)
//! entry_v2     := shared: varint | non_shared: varint | tag: varint
//!                 | seqno: varint (iff tag & 4) | key_delta: u8[non_shared] | value
//!                 (prefix compression over the user key; tag = value_len << 3
//!                  | has_seqno << 2 | kind; no seqno means 0)
//! restarts     := restart: u32 LE * num_restarts      (entry offsets; restarts[0] == 0)
//! num_restarts := u32 LE                              (>= 1)
//! ```
//!
//! Keys are internal keys and are compared with internal-key order, never as raw bytes.

mod builder;
mod iter;

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

pub use builder::BlockBuilder;
pub use iter::BlockIter;

use super::format::TableFormat;
use crate::coding::get_fixed32;
use crate::error::{Error, Result};

/// Bit of a version-2 entry's tag saying a sequence number varint follows.
const TAG_HAS_SEQNO: u64 = 1 << 2;
/// Bits of a version-2 entry's tag holding the kind.
const TAG_KIND_MASK: u64 = 0b11;
/// Bits of a version-2 entry's tag below the value length.
const TAG_VALUE_LEN_SHIFT: u32 = 3;

/// A decoded (uncompressed) block whose restart array has been checked. Shared between the
/// block cache and iterators through `Arc`; immutable.
#[derive(Debug)]
pub struct Block {
    /// The whole contents: entries, restart array, restart count.
    data: Bytes,
    /// End of the entries = start of the restart array.
    data_end: usize,
    /// Number of restart points (>= 1).
    num_restarts: usize,
    /// How entries are encoded.
    format: TableFormat,
    /// The file the block came from, for error messages.
    file: Arc<Path>,
    /// The block's byte offset in `file`, for error messages.
    offset: u64,
    /// For an index block ([`Block::with_restart_prefixes`]): [`key_prefix`] of each restart
    /// point's user key, so a seek's binary search compares `u64`s in one dense array instead
    /// of decoding an entry at a cache-cold offset per step.
    restart_prefixes: Option<Box<[u64]>>,
}

/// The first 8 bytes of `user_key` as a big-endian `u64`, zero-padded when shorter. When
/// `key_prefix(a) < key_prefix(b)`, `a < b` as byte strings (padding compares like a key that
/// ended, which sorts first); equal prefixes decide nothing.
#[expect(
    clippy::big_endian_bytes,
    reason = "big-endian makes integer order the byte order of the key"
)]
fn key_prefix(user_key: &[u8]) -> u64 {
    let mut bytes = [0u8; 8];
    let n = user_key.len().min(8);
    bytes[..n].copy_from_slice(&user_key[..n]);
    u64::from_be_bytes(bytes)
}

impl Block {
    /// Checks the restart array of `data` (a block's uncompressed contents, read at `offset` of
    /// `file`, a table of format `format`) and wraps it. Entries are checked as they are read.
    ///
    /// # Errors
    /// [`Error::Corruption`] naming `file` and `offset` if the contents are shorter than 4
    /// bytes, the restart count is 0 or does not fit, or the restarts are not strictly
    /// increasing offsets below the restart array starting at 0.
    pub fn new(data: Bytes, format: TableFormat, file: Arc<Path>, offset: u64) -> Result<Block> {
        let corrupt = |reason: String| Error::corruption(&*file, offset, reason);
        let len = data.len();
        let count = len
            .checked_sub(4)
            .and_then(|at| get_fixed32(&data, at))
            .ok_or_else(|| corrupt(format!("block of {len} bytes has no restart count")))?;
        let num_restarts = usize::try_from(count).map_err(|_| corrupt("restart count".into()))?;
        let array_len = num_restarts
            .checked_mul(4)
            .and_then(|n| n.checked_add(4))
            .filter(|&n| n <= len && num_restarts >= 1)
            .ok_or_else(|| corrupt(format!("bad restart count {count} for a {len}-byte block")))?;
        let data_end = len - array_len;
        let mut prev: Option<usize> = None;
        for i in 0..num_restarts {
            let r = get_fixed32(&data, data_end + 4 * i)
                .and_then(|r| usize::try_from(r).ok())
                .ok_or_else(|| corrupt("short restart array".into()))?;
            let ok = match prev {
                None => r == 0 && (data_end > 0 || num_restarts == 1),
                Some(p) => r > p && r < data_end,
            };
            if !ok {
                return Err(corrupt(format!(
                    "restart point {i} at in-block offset {r} is out of order or out of range (entries end at {data_end})"
                )));
            }
            prev = Some(r);
        }
        Ok(Block {
            data,
            data_end,
            num_restarts,
            format,
            file,
            offset,
            restart_prefixes: None,
        })
    }

    /// This block with the first 8 bytes of every restart point's user key copied into an
    /// array that seeks binary-search first (8 bytes per restart point; for an index block,
    /// where every entry is a restart point, per data block of the table). Meant for index
    /// blocks, which stay in memory while their table is open and are searched by every
    /// point read: measured in `docs/benchmarks.md`, "Point reads: index-block key
    /// prefixes, one key hash".
    ///
    /// # Errors
    /// [`Error::Corruption`] if a restart point's entry is malformed.
    pub fn with_restart_prefixes(mut self) -> Result<Block> {
        if self.is_empty() {
            return Ok(self);
        }
        let prefixes = (0..self.num_restarts)
            .map(|i| self.restart_key(i).map(|k| key_prefix(k.user_key)))
            .collect::<Result<Box<[u64]>>>()?;
        self.restart_prefixes = Some(prefixes);
        Ok(self)
    }

    /// Size of the uncompressed contents, in bytes (what the block cache charges).
    pub fn size_bytes(&self) -> usize {
        self.data.len()
    }

    /// True if the block has no entries.
    pub fn is_empty(&self) -> bool {
        self.data_end == 0
    }

    /// The buffer of `block` for reuse, when nothing else holds the block or its bytes:
    /// neither the block cache nor a readahead window it was cut from. Otherwise an empty
    /// `Vec`. The old contents stay in it, so the next block decoded into it overwrites them
    /// instead of zeroing the buffer first.
    pub(crate) fn reclaim(block: Arc<Block>) -> Vec<u8> {
        Arc::try_unwrap(block)
            .ok()
            .and_then(|b| b.data.try_into_mut().ok())
            .map(Vec::from)
            .unwrap_or_default()
    }

    /// A cursor over the block's entries (not positioned until a seek).
    pub fn iter(self: &Arc<Self>) -> BlockIter {
        BlockIter::new(Arc::clone(self))
    }

    /// In-block offset of restart point `i`; `i < num_restarts` (checked in `new`).
    fn restart_point(&self, i: usize) -> usize {
        get_fixed32(&self.data, self.data_end + 4 * i)
            .and_then(|r| usize::try_from(r).ok())
            .unwrap_or(self.data_end)
    }

    /// A [`Error::Corruption`] for this block, `at` bytes into it.
    fn corruption(&self, at: usize, what: &str) -> Error {
        Error::corruption(
            &*self.file,
            self.offset,
            format!("{what} (at in-block offset {at})"),
        )
    }
}

#[cfg(test)]
mod tests;
