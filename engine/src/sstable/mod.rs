//! SSTables: immutable sorted files of internal-key/value entries.
//!
//! Spec: `docs/format/sstable.md` (the source of truth for every byte). In short:
//!
//! ```text
//! table  := data_block* [filter_block] properties_block index_block footer
//! block  := contents | compression: u8 | crc32c(contents ++ compression): u32 LE
//! footer := (filter, properties, index handles: offset u64 LE, size u64 LE) | version: u32 LE
//!           | crc32c(footer[0..52]): u32 LE | magic: u64 LE                  (64 bytes)
//! ```
//!
//! - [`TableBuilder`] writes a table; [`Table`] opens one for point lookups ([`Table::get`],
//!   bloom filter first) and iteration ([`TableIter`], an
//!   [`InternalIterator`](crate::iterator::InternalIterator)).
//! - Data and index blocks use [`block`]'s prefix-compressed format with restart points; keys
//!   are encoded internal keys, always compared in internal-key order.
//! - Decoded data blocks are shared through [`crate::cache::BlockCache`]; open tables through
//!   [`crate::cache::TableCache`].
//!
//! This module knows nothing of versions or the database.

pub mod block;
mod builder;
pub mod filter;
pub mod format;
mod properties;
mod readahead;
mod reader;

pub use builder::{TableBuilder, TableBuilderOptions};
pub use format::TableFormat;
pub use properties::{TABLE_ID_LEN, TableId, TableProperties};
pub use readahead::INITIAL_READAHEAD;
pub use reader::{BlockCachePolicy, DataBlockEvent, Table, TableIter, byte_cuts};

#[cfg(test)]
mod tests;
