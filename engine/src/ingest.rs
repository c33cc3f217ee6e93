//! Bulk ingest, outside half: [`TableWriter`] builds an SSTable from sorted input without a
//! database, for [`crate::Db::ingest`] to link in.
//!
//! The file is an ordinary table (`docs/format/sstable.md`, format version 1) with restricted
//! contents (section 9 there):
//!
//! ```text
//! entries := (user_key, seqno 0, Put | Merge, value)*    user keys strictly increasing
//! ```
//!
//! The database later gives the whole ingest one sequence number `S` and records it in the
//! manifest (tag 8, `docs/format/manifest.md` section 2.1); readers present every entry at `S`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::fs::FileSystem;
use crate::options::Options;
use crate::sstable::{TableBuilder, TableBuilderOptions};
use crate::types::{InternalKeyRef, SeqNo, ValueKind};

/// A finished table written by [`TableWriter`], ready for [`crate::Db::ingest`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IngestFile {
    /// Where the table was written.
    pub path: PathBuf,
    /// Entries in the table (one per user key).
    pub num_entries: u64,
    /// The first user key (empty when `num_entries == 0`).
    pub smallest_key: Bytes,
    /// The last user key (empty when `num_entries == 0`).
    pub largest_key: Bytes,
    /// Size of the file in bytes.
    pub size_bytes: u64,
}

/// Builds one SSTable for [`crate::Db::ingest`] from entries given in strictly increasing
/// user-key order, outside any database (another thread or process may build it while the
/// database serves reads and writes).
///
/// Every entry is written at sequence number 0: the database assigns the real one when it
/// ingests the file. The table layout (block size, bloom filter, compression) follows the
/// `Options` given to [`TableWriter::create`]; pass the database's options.
///
/// Dropping a writer without [`TableWriter::finish`] deletes the partial file.
///
/// ```
/// # fn main() -> strata_engine::Result<()> {
/// use strata_engine::{Db, Options, TableWriter};
/// let dir = tempfile::tempdir().map_err(|e| strata_engine::Error::InvalidArgument(e.to_string()))?;
/// let mut w = TableWriter::create(&dir.path().join("part-1.sst"), &Options::default())?;
/// w.put(b"read:AAAA", b"3")?;
/// w.put(b"read:CCCC", b"7")?;
/// let file = w.finish()?;
/// assert_eq!(file.num_entries, 2);
///
/// let db = Db::open(dir.path().join("db"), Options::default())?;
/// db.ingest(&[file.path])?;
/// assert_eq!(db.get(b"read:CCCC")?.as_deref(), Some(&b"7"[..]));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TableWriter {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    /// `None` once finished (or after a failed finish, whose file is removed).
    builder: Option<TableBuilder>,
    /// For the entry size limits.
    options: Options,
    first_key: Vec<u8>,
    last_key: Vec<u8>,
    entries: u64,
}

impl TableWriter {
    /// Starts a table at `path` (which must not exist) in `options.file_system`, laid out as
    /// `options` asks.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `options` do not validate; [`Error::Io`] naming `path`
    /// (including when it already exists).
    pub fn create(path: &Path, options: &Options) -> Result<TableWriter> {
        options.validate()?;
        let builder = TableBuilder::create(
            &options.file_system,
            path,
            TableBuilderOptions::from_options(options),
        )?;
        Ok(TableWriter {
            fs: Arc::clone(&options.file_system),
            path: path.to_path_buf(),
            builder: Some(builder),
            options: options.clone(),
            first_key: Vec::new(),
            last_key: Vec::new(),
            entries: 0,
        })
    }

    /// Adds `key -> value` (a Put).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `key` is not strictly greater than the previous key,
    /// is over [`crate::MAX_KEY_SIZE`] bytes, or `value` is over [`Options::max_value_size`]; nothing
    /// is added then and the writer stays usable. [`Error::Io`] from writing a block: the
    /// writer is then unusable (drop it to delete the partial file).
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.add(key, ValueKind::Put, value)
    }

    /// Adds merge operand `operand` for `key`: once ingested, reads fold it onto the value the
    /// database held for `key` before the ingest, with [`Options::merge_operator`] (e.g.
    /// [`crate::CounterAdd`] adds a count). One entry per key, as for [`TableWriter::put`].
    ///
    /// # Errors
    /// As [`TableWriter::put`].
    pub fn merge(&mut self, key: &[u8], operand: &[u8]) -> Result<()> {
        self.add(key, ValueKind::Merge, operand)
    }

    fn add(&mut self, key: &[u8], kind: ValueKind, value: &[u8]) -> Result<()> {
        self.options.check_entry_size(key, value)?;
        if self.entries > 0 && key <= self.last_key.as_slice() {
            return Err(Error::InvalidArgument(format!(
                "keys must be strictly increasing: {} after {}",
                crate::error::key_for_message(key),
                crate::error::key_for_message(&self.last_key)
            )));
        }
        let builder = self.builder.as_mut().ok_or_else(|| {
            Error::InvalidArgument("table writer already finished or failed".to_string())
        })?;
        if let Err(e) = builder.add(InternalKeyRef::new(key, SeqNo::ZERO, kind), value) {
            if let Some(b) = self.builder.take() {
                b.abandon();
            }
            return Err(e);
        }
        if self.entries == 0 {
            self.first_key.extend_from_slice(key);
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.entries += 1;
        Ok(())
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.entries
    }

    /// Bytes written so far plus the uncompressed size of the block being filled: to cut
    /// files at a target size.
    pub fn estimated_size(&self) -> u64 {
        self.builder
            .as_ref()
            .map_or(0, TableBuilder::estimated_size)
    }

    /// Writes the remaining blocks and the footer and fsyncs the file (not its directory:
    /// [`crate::Db::ingest`] syncs where the table ends up). A table with no entries is
    /// written too, but `Db::ingest` refuses it.
    ///
    /// # Errors
    /// [`Error::Io`]; the partial file is deleted.
    pub fn finish(mut self) -> Result<IngestFile> {
        let builder = self
            .builder
            .take()
            .ok_or_else(|| Error::InvalidArgument("table writer already failed".to_string()))?;
        let (_, size_bytes) = match builder.finish() {
            Ok(done) => done,
            Err(e) => {
                let _ = self.fs.remove_file(&self.path);
                return Err(e);
            }
        };
        Ok(IngestFile {
            path: std::mem::take(&mut self.path),
            num_entries: self.entries,
            smallest_key: Bytes::from(std::mem::take(&mut self.first_key)),
            largest_key: Bytes::from(std::mem::take(&mut self.last_key)),
            size_bytes,
        })
    }
}

impl Drop for TableWriter {
    fn drop(&mut self) {
        if let Some(builder) = self.builder.take() {
            builder.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::MAX_KEY_SIZE;
    use crate::cache::BlockCache;
    use crate::iterator::InternalIterator;
    use crate::sstable::{BlockCachePolicy, Table};
    use crate::types::FileNumber;

    fn tmp() -> Result<tempfile::TempDir> {
        tempfile::tempdir().map_err(|e| Error::InvalidArgument(e.to_string()))
    }

    #[test]
    fn table_writer_rejects_unsorted_and_duplicate_keys() -> Result<()> {
        let dir = tmp()?;
        let mut w = TableWriter::create(&dir.path().join("t.sst"), &Options::default())?;
        w.put(b"b", b"1")?;
        assert!(matches!(w.put(b"b", b"2"), Err(Error::InvalidArgument(_))));
        assert!(matches!(w.put(b"a", b"2"), Err(Error::InvalidArgument(_))));
        assert!(matches!(
            w.merge(b"b", b"2"),
            Err(Error::InvalidArgument(_))
        ));
        // Still usable after a refused entry.
        w.put(b"c", b"3")?;
        let f = w.finish()?;
        assert_eq!(f.num_entries, 2);
        assert_eq!(
            (&f.smallest_key[..], &f.largest_key[..]),
            (&b"b"[..], &b"c"[..])
        );
        Ok(())
    }

    #[test]
    fn table_writer_cuts_long_keys_in_its_order_error() -> Result<()> {
        let dir = tmp()?;
        let mut w = TableWriter::create(&dir.path().join("t.sst"), &Options::default())?;
        let big = vec![b'z'; 60_000];
        w.put(&big, b"1")?;
        let mut smaller = vec![b'a'; 50_000];
        smaller[0] = b'y';
        let msg = match w.put(&smaller, b"2") {
            Err(Error::InvalidArgument(msg)) => msg,
            other => {
                return Err(Error::InvalidArgument(format!(
                    "expected the key order to be refused, got {other:?}"
                )));
            }
        };
        assert!(msg.len() < 300, "{msg}");
        assert!(msg.contains("... (50000 bytes)"), "{msg}");
        assert!(msg.contains("... (60000 bytes)"), "{msg}");
        assert!(msg.contains(&format!("\"y{}\"", "a".repeat(63))), "{msg}");
        Ok(())
    }

    #[test]
    fn table_writer_rejects_oversize_keys_and_values() -> Result<()> {
        let dir = tmp()?;
        let options = Options::default().max_value_size(10);
        let mut w = TableWriter::create(&dir.path().join("t.sst"), &options)?;
        let big_key = vec![b'k'; MAX_KEY_SIZE + 1];
        assert!(matches!(
            w.put(&big_key, b""),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            w.put(b"k", &[0; 11]),
            Err(Error::InvalidArgument(_))
        ));
        w.put(&big_key[..MAX_KEY_SIZE], &[0; 10])?;
        assert_eq!(w.num_entries(), 1);
        Ok(())
    }

    #[test]
    fn dropped_table_writer_removes_its_file() -> Result<()> {
        let dir = tmp()?;
        let path = dir.path().join("t.sst");
        let mut w = TableWriter::create(&path, &Options::default())?;
        w.put(b"a", b"1")?;
        assert!(path.exists());
        drop(w);
        assert!(!path.exists());
        Ok(())
    }

    /// Entries of the table at `path`, opened with `global_seqno`, as (key, seqno, kind).
    fn read(path: &Path, global_seqno: Option<SeqNo>) -> Result<Vec<(Vec<u8>, u64, ValueKind)>> {
        let t = Table::open(
            &crate::fs::OsFs,
            path,
            FileNumber(1),
            global_seqno,
            BlockCache::new(1 << 20),
        )?;
        let mut it = t.iter();
        it.seek_to_first()?;
        let mut out = Vec::new();
        while it.valid() {
            let k = it.key();
            out.push((k.user_key.to_vec(), k.seqno.get(), k.kind));
            it.next()?;
        }
        Ok(out)
    }

    #[test]
    fn written_entries_have_seqno_zero_and_read_at_the_global_seqno() -> Result<()> {
        let dir = tmp()?;
        let path = dir.path().join("t.sst");
        let mut w = TableWriter::create(&path, &Options::default().block_size(64))?;
        for i in 0..200u32 {
            let key = format!("key{i:05}");
            if i % 2 == 0 {
                w.put(key.as_bytes(), b"value")?;
            } else {
                w.merge(key.as_bytes(), b"1")?;
            }
        }
        let f = w.finish()?;
        assert_eq!(
            f.size_bytes,
            std::fs::metadata(&path)
                .map_err(|e| Error::io(&path, e))?
                .len()
        );
        let stored = read(&path, None)?;
        assert_eq!(stored.len(), 200);
        assert!(stored.iter().all(|(_, s, _)| *s == 0));
        let presented = read(&path, Some(SeqNo(50)))?;
        assert!(presented.iter().all(|(_, s, _)| *s == 50));
        assert_eq!(presented[1].2, ValueKind::Merge);
        Ok(())
    }

    #[test]
    fn global_seqno_hides_entries_from_older_reads() -> Result<()> {
        let dir = tmp()?;
        let path = dir.path().join("t.sst");
        let mut w = TableWriter::create(&path, &Options::default().block_size(64))?;
        for i in 0..100u32 {
            w.put(format!("k{i:03}").as_bytes(), format!("v{i}").as_bytes())?;
        }
        w.finish()?;
        let t: Arc<Table> = Table::open(
            &crate::fs::OsFs,
            &path,
            FileNumber(7),
            Some(SeqNo(10)),
            BlockCache::new(1 << 20),
        )?;
        let at = |k: &'static [u8], s: u64| InternalKeyRef::new(k, SeqNo(s), ValueKind::FOR_SEEK);
        // Point lookups: visible at 10 and later, absent before.
        let got = t.get(at(b"k042", 10), BlockCachePolicy::Fill)?;
        assert_eq!(got, Some((SeqNo(10), ValueKind::Put, Bytes::from("v42"))));
        assert!(t.get(at(b"k042", 9), BlockCachePolicy::Fill)?.is_none());
        assert!(
            t.get(at(b"k042", SeqNo::MAX.get()), BlockCachePolicy::Fill)?
                .is_some()
        );
        // Seeks: at 9 the seek skips k042 to k043; at 10 it lands on k042.
        let mut it = t.iter();
        it.seek(at(b"k042", 9))?;
        assert_eq!(it.key().user_key, b"k043");
        it.seek(at(b"k042", 10))?;
        assert_eq!(it.key().user_key, b"k042");
        assert_eq!(it.key().seqno, SeqNo(10));
        // seek_for_prev: k042@10 sorts before k042@9 (newest first), after k042@11.
        it.seek_for_prev(at(b"k042", 9))?;
        assert_eq!(it.key().user_key, b"k042");
        it.seek_for_prev(at(b"k042", 11))?;
        assert_eq!(it.key().user_key, b"k041");
        it.seek_for_prev(InternalKeyRef::new(b"k042", SeqNo(10), ValueKind::Delete))?;
        assert_eq!(it.key().user_key, b"k042");
        // Past the last key at an old seqno: exhausted.
        it.seek(at(b"k099", 3))?;
        assert!(!it.valid());
        Ok(())
    }
}
