//! # strata-engine
//!
//! Strata's LSM-tree storage engine: a write-ahead log (WAL) and skiplist memtable in front of
//! leveled, immutable SSTables with bloom filters and LZ4-compressed blocks, tracked by a
//! manifest. Keys and values are arbitrary byte strings; keys sort bytewise.
//!
//! The engine is embedded: one process opens a database directory at a time (an exclusive
//! `LOCK` file enforces it). It is not a SQL database or a server; see the `strata-query` and
//! `strata-server` crates for those.
//!
//! ```
//! # fn main() -> strata_engine::Result<()> {
//! use strata_engine::{Db, Options, WriteBatch, WriteOptions};
//! let dir = tempfile::tempdir().map_err(|e| strata_engine::Error::InvalidArgument(e.to_string()))?;
//! let db = Db::open(dir.path(), Options::default())?;
//! db.put(b"read:ACGT", b"12")?;
//! assert_eq!(db.get(b"read:ACGT")?.as_deref(), Some(&b"12"[..]));
//! let mut batch = WriteBatch::new();
//! batch.put(b"a", b"1");
//! batch.delete(b"read:ACGT");
//! db.write(batch, &WriteOptions { sync: true, ..Default::default() })?;
//! assert_eq!(db.get(b"read:ACGT")?, None);
//! db.close()?;
//! # Ok(())
//! # }
//! ```
//!
//! On-disk formats are specified in the repository's `docs/format/` directory.
#![deny(missing_docs)]

pub mod batch;
pub mod cache;
pub mod coding;
pub mod compaction;
mod db;
pub mod error;
pub mod filename;
pub mod fs;
pub mod ingest;
pub mod iterator;
pub mod memtable;
pub mod merge;
pub mod options;
pub mod snapshot;
pub mod sorter;
pub mod sstable;
pub mod stats;
#[cfg(test)]
mod test_util;
pub mod types;
pub mod version;
pub mod wal;
pub mod write_buffer;

pub use batch::WriteBatch;
pub use bytes::Bytes;
pub use cache::{BlockCache, SharedTableCache, TableCache};
pub use db::{
    Db, DbCursor, DbRange, Keyspace, MAX_KEYSPACE_NAME_LEN, WriteFuture, prefix_successor,
};
pub use error::{Error, Result};
pub use ingest::{IngestFile, TableWriter};
pub use merge::{CounterAdd, MergeOperator};
pub use options::{MAX_KEY_SIZE, Options, ReadOptions, WalRecoveryMode, WriteOptions};
pub use snapshot::Snapshot;
pub use sorter::{SortedTables, TableSorter};
pub use sstable::TableFormat;
pub use stats::{DbStats, LevelStats};
pub use types::{FileNumber, SeqNo, ValueKind};
pub use write_buffer::WriteBufferManager;
