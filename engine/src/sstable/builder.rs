//! Writes a table file: data blocks, filter, properties, index, footer.
//!
//! Spec: `docs/format/sstable.md`. The index entry of a data block is written only when the
//! next key (or `finish`) arrives, so the separator can be shortened against it.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::block::BlockBuilder;
use super::filter::FilterBuilder;
use super::format::{
    BLOCK_TRAILER_LEN, BlockHandle, Compressor, Footer, IndexValue, TableFormat, block_trailer,
};
use super::properties::{TableId, TableProperties};
use crate::error::{Error, IoContext, Result};
use crate::fs::{FileSystem, WritableFile};
use crate::types::{InternalKeyRef, SeqNo, TRAILER_LEN, ValueKind};

/// Restart interval of the index block: every index entry is a restart point, so seeks
/// binary-search index entries directly.
pub(crate) const INDEX_RESTART_INTERVAL: usize = 1;

/// Size of the write buffer in front of the file, in bytes.
const WRITE_BUFFER_BYTES: usize = 256 << 10;

/// Every this many bytes written, the builder asks the OS to start writing them back
/// ([`WritableFile::start_writeback`]), so the table's closing `fdatasync` does not wait for
/// all of it at once: RocksDB's `bytes_per_sync`, at the 1 MiB its tuning guide recommends.
/// Measured on a JSON `strata load` (docs/benchmarks.md, "Writeback while tables are
/// written"): the two writer threads' final syncs had taken 15-25 ms with both cores idle.
const WRITEBACK_BYTES: u64 = 1 << 20;

/// How a [`TableBuilder`] lays out a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableBuilderOptions {
    /// Uncompressed bytes of entries after which a data block is cut. See
    /// [`crate::Options::block_size`].
    pub block_size: usize,
    /// Keys between restart points in data blocks (0 is treated as 1).
    pub block_restart_interval: usize,
    /// Bloom filter bits per distinct user key; 0 = no filter block.
    pub bloom_bits_per_key: u32,
    /// Compress data, index and properties blocks with LZ4 when that saves at least 12.5%.
    pub compression: bool,
    /// The format version to write ([`TableFormat::V3`] unless a table must stay readable by
    /// builds that know only older versions).
    pub format: TableFormat,
}

impl TableBuilderOptions {
    /// The table layout `o` asks for.
    pub fn from_options(o: &crate::Options) -> Self {
        TableBuilderOptions {
            block_size: o.block_size,
            block_restart_interval: o.block_restart_interval,
            bloom_bits_per_key: o.bloom_bits_per_key,
            compression: o.compression,
            format: o.table_format,
        }
    }
}

impl Default for TableBuilderOptions {
    fn default() -> Self {
        TableBuilderOptions::from_options(&crate::Options::default())
    }
}

/// Writes one SSTable. Add entries in strictly increasing internal-key order, then call
/// [`TableBuilder::finish`] (or [`TableBuilder::abandon`] to delete the partial file). Dropping
/// a builder without either leaves a partial file behind.
#[derive(Debug)]
pub struct TableBuilder {
    path: PathBuf,
    fs: Arc<dyn FileSystem>,
    file: BufWriter<Appender>,
    opts: TableBuilderOptions,
    /// Bytes handed to `file` so far (the offset of the next block).
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    filter: Option<FilterBuilder>,
    props: TableProperties,
    /// The last key added, encoded (empty before the first add).
    last_key: Vec<u8>,
    /// Handle and entry count of the last data block written, whose index entry waits for
    /// the next key.
    pending_index: Option<IndexValue>,
    compressor: Compressor,
    separator_scratch: Vec<u8>,
}

impl TableBuilder {
    /// Writes to a new file at `path` in `fs` (which must not exist).
    ///
    /// # Errors
    /// [`Error::Io`] naming `path` (including when it already exists).
    pub fn create(
        fs: &Arc<dyn FileSystem>,
        path: &Path,
        opts: TableBuilderOptions,
    ) -> Result<TableBuilder> {
        let file = fs.create_new(path).ctx(path)?;
        let props = TableProperties {
            filter_bits_per_key: opts.bloom_bits_per_key,
            table_id: Some(TableId::random()),
            ..TableProperties::default()
        };
        Ok(TableBuilder {
            path: path.to_path_buf(),
            fs: Arc::clone(fs),
            file: BufWriter::with_capacity(WRITE_BUFFER_BYTES, Appender::new(file)),
            opts,
            offset: 0,
            data_block: BlockBuilder::new(opts.format, opts.block_restart_interval),
            index_block: BlockBuilder::new(opts.format, INDEX_RESTART_INTERVAL),
            filter: (opts.bloom_bits_per_key > 0)
                .then(|| FilterBuilder::new(opts.bloom_bits_per_key, opts.format)),
            props,
            last_key: Vec::new(),
            pending_index: None,
            compressor: Compressor::default(),
            separator_scratch: Vec::new(),
        })
    }

    /// Writes no table id, as builders before table ids did (the worked examples of
    /// `docs/format/sstable.md` section 8, whose bytes must not depend on a random id).
    #[cfg(test)]
    pub(crate) fn without_table_id(mut self) -> TableBuilder {
        self.props.table_id = None;
        self
    }

    /// Appends an entry. Keys must be strictly increasing in internal-key order (checked with
    /// `debug_assert!`).
    ///
    /// # Errors
    /// [`Error::Io`] if writing a finished block fails; [`Error::InvalidArgument`] for an entry
    /// too large for a block (4 GiB). After an error, call [`TableBuilder::abandon`].
    pub fn add(&mut self, key: InternalKeyRef<'_>, value: &[u8]) -> Result<()> {
        let new_user_key = self.props.num_entries == 0 || {
            let last = InternalKeyRef::decode(&self.last_key);
            debug_assert!(
                last.is_some_and(|l| l < key),
                "table keys must be strictly increasing"
            );
            last.is_none_or(|l| l.user_key != key.user_key)
        };
        // An entry of a block's size or more gets a block of its own: sharing the block
        // before it would make every read of a small key there load (and decompress) the
        // large value too. (A large entry after a small one otherwise joins its block.)
        if !self.data_block.is_empty()
            && key.user_key.len() + TRAILER_LEN + value.len() >= self.opts.block_size
        {
            self.flush_data_block()?;
        }
        if let Some(pending) = self.pending_index.take() {
            shortest_separator(&self.last_key, key, &mut self.separator_scratch);
            self.add_index_entry(pending)?;
        }
        self.last_key.clear();
        key.encode_into(&mut self.last_key);
        self.data_block.add(key, value)?;
        if new_user_key && let Some(f) = &mut self.filter {
            f.add_key(key.user_key);
        }
        self.props.record(key, value.len(), new_user_key);
        if self.data_block.size_estimate() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    /// Bytes written so far plus the uncompressed size of the block being filled, to cut output
    /// files at a target size.
    pub fn estimated_size(&self) -> u64 {
        self.offset + self.data_block.size_estimate() as u64
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Writes the remaining blocks and the footer, fsyncs the file, and returns the table's
    /// properties and its size in bytes. A table with no entries is valid (no data blocks).
    /// The directory entry is not synced: sync the directory (`filename::sync_dir`) before the
    /// table is recorded in the manifest.
    ///
    /// # Errors
    /// [`Error::Io`] naming the file; the partial file is left for the caller to delete (the
    /// builder is consumed, so use the path it was created with).
    pub fn finish(mut self) -> Result<(TableProperties, u64)> {
        self.flush_data_block()?;
        if let Some(pending) = self.pending_index.take() {
            short_successor(&self.last_key, &mut self.separator_scratch);
            self.add_index_entry(pending)?;
        }
        let mut footer = Footer {
            format: self.opts.format,
            ..Footer::default()
        };
        if let Some(blob) = self
            .filter
            .as_ref()
            .map(FilterBuilder::finish)
            .transpose()?
            .flatten()
        {
            // Bloom bits are random: never worth compressing.
            footer.filter = self.write_block(&blob, false)?;
        }
        if let Some(last) = InternalKeyRef::decode(&self.last_key) {
            self.props.largest_key = last.to_owned();
        }
        let mut encoded = Vec::new();
        self.props.encode_into(&mut encoded);
        footer.properties = self.write_block(&encoded, self.opts.compression)?;
        let placeholder = BlockBuilder::new(self.opts.format, 1);
        let mut index = std::mem::replace(&mut self.index_block, placeholder);
        footer.index = self.write_block_from(&mut index)?;
        self.write_raw(&footer.encode())?;
        self.file.flush().ctx(&self.path)?;
        self.file.get_mut().file.sync().ctx(&self.path)?;
        tracing::debug!(
            path = %self.path.display(),
            entries = self.props.num_entries,
            data_blocks = self.props.num_data_blocks,
            size_bytes = self.offset,
            "finished table"
        );
        Ok((self.props, self.offset))
    }

    /// Deletes the partial file (on error paths). Best effort: a failure to delete is logged.
    pub fn abandon(self) {
        let TableBuilder { path, file, fs, .. } = self;
        drop(file);
        if let Err(e) = fs.remove_file(&path) {
            tracing::warn!(path = %path.display(), error = %e, "could not delete abandoned table");
        }
    }

    fn add_index_entry(&mut self, pending: IndexValue) -> Result<()> {
        let mut value = Vec::with_capacity(BlockHandle::MAX_ENCODED_LEN + 10);
        pending.encode_into(self.opts.format, &mut value);
        let separator = InternalKeyRef::decode(&self.separator_scratch).ok_or_else(|| {
            Error::InvalidArgument("index separator is not an internal key".into())
        })?;
        self.index_block.add(separator, &value)
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data_block.is_empty() {
            return Ok(());
        }
        let placeholder = BlockBuilder::new(self.opts.format, 1);
        let mut block = std::mem::replace(&mut self.data_block, placeholder);
        let entries = block.len() as u64;
        let handle = self.write_block_from(&mut block);
        block.reset();
        self.data_block = block;
        let handle = handle?;
        self.props.num_data_blocks += 1;
        self.props.data_bytes += handle.size + BLOCK_TRAILER_LEN as u64;
        self.pending_index = Some(IndexValue {
            handle,
            entries: Some(entries),
        });
        Ok(())
    }

    fn write_block_from(&mut self, block: &mut BlockBuilder) -> Result<BlockHandle> {
        let compress = self.opts.compression;
        self.write_block(block.finish(), compress)
    }

    /// Writes `raw` as a block (maybe compressed) with its trailer; returns its handle.
    fn write_block(&mut self, raw: &[u8], compress: bool) -> Result<BlockHandle> {
        // Taken out while `stored` borrows its buffer (an empty compressor allocates nothing).
        let mut compressor = std::mem::take(&mut self.compressor);
        let (ty, stored) = compressor.compress(raw, compress);
        let handle = BlockHandle::new(self.offset, stored.len() as u64);
        let trailer = block_trailer(stored, ty);
        let result = self
            .write_raw(stored)
            .and_then(|()| self.write_raw(&trailer));
        self.compressor = compressor;
        result.map(|()| handle)
    }

    fn write_raw(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.write_all(bytes).ctx(&self.path)?;
        self.offset += bytes.len() as u64;
        Ok(())
    }
}

/// Sets `out` to an encoded internal key `sep` with `last <= sep < next` (`last` encoded, both
/// in internal-key order), shortened on the user key when possible (LevelDB's
/// `FindShortestSeparator`): `a[..p] ++ [a[p] + 1]` with trailer (`SeqNo::MAX`, `FOR_SEEK`).
pub(crate) fn shortest_separator(last: &[u8], next: InternalKeyRef<'_>, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(last);
    let Some(a) = last.get(..last.len().saturating_sub(TRAILER_LEN)) else {
        return;
    };
    let b = next.user_key;
    let p = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let (Some(&ap), Some(&bp)) = (a.get(p), b.get(p)) else {
        return; // one is a prefix of the other (or equal): nothing shorter fits
    };
    if ap < 0xff && ap + 1 < bp {
        let mut user = a[..p].to_vec();
        user.push(ap + 1);
        debug_assert!(user.as_slice() > a && user.as_slice() < b);
        out.clear();
        InternalKeyRef::new(&user, SeqNo::MAX, ValueKind::FOR_SEEK).encode_into(out);
    }
}

/// Sets `out` to an encoded internal key `>= last`, shortened on the user key when possible
/// (LevelDB's `FindShortSuccessor`): the first non-0xFF byte incremented, the rest dropped.
pub(crate) fn short_successor(last: &[u8], out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(last);
    let Some(a) = last.get(..last.len().saturating_sub(TRAILER_LEN)) else {
        return;
    };
    if let Some(p) = a.iter().position(|&b| b != 0xff) {
        let mut user = a[..p].to_vec();
        user.push(a[p] + 1);
        out.clear();
        InternalKeyRef::new(&user, SeqNo::MAX, ValueKind::FOR_SEEK).encode_into(out);
    }
}

/// [`std::io::Write`] over a [`WritableFile`], so the builder can buffer with `BufWriter`;
/// starts the writeback of every [`WRITEBACK_BYTES`] appended.
#[derive(Debug)]
struct Appender {
    file: Box<dyn WritableFile>,
    /// Bytes appended.
    written: u64,
    /// Bytes whose writeback was started.
    started: u64,
}

impl Appender {
    fn new(file: Box<dyn WritableFile>) -> Appender {
        Appender {
            file,
            written: 0,
            started: 0,
        }
    }
}

impl Write for Appender {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file.append(buf)?;
        self.written += buf.len() as u64;
        if self.written - self.started >= WRITEBACK_BYTES {
            // Only a hint: the closing sync reports any failure to write the bytes back.
            let _ = self
                .file
                .start_writeback(self.started, self.written - self.started);
            self.started = self.written;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ik(user: &[u8], seq: u64) -> Vec<u8> {
        InternalKeyRef::new(user, SeqNo(seq), ValueKind::Put).encode()
    }

    fn user_of(enc: &[u8]) -> Vec<u8> {
        InternalKeyRef::decode(enc)
            .map(|k| k.user_key.to_vec())
            .unwrap_or_default()
    }

    #[test]
    fn separator_is_shortened_between_distinct_user_keys() {
        let mut out = Vec::new();
        let next = InternalKeyRef::new(b"abzz", SeqNo(1), ValueKind::Put);
        shortest_separator(&ik(b"abcdef", 5), next, &mut out);
        assert_eq!(user_of(&out), b"abd");
        // Adjacent bytes, prefixes and equal user keys leave the last key as is.
        for (a, b) in [
            (&b"abc"[..], &b"abd"[..]),
            (b"ab", b"abc"),
            (b"abc", b"abc"),
            (b"a\xff", b"b"),
        ] {
            let last = ik(a, 9);
            shortest_separator(
                &last,
                InternalKeyRef::new(b, SeqNo(1), ValueKind::Put),
                &mut out,
            );
            assert_eq!(out, last, "{a:?} {b:?}");
        }
    }

    #[test]
    fn successor_increments_first_non_ff_byte() {
        let mut out = Vec::new();
        short_successor(&ik(b"\xff\xffabc", 3), &mut out);
        assert_eq!(user_of(&out), b"\xff\xffb");
        let last = ik(b"\xff\xff", 3);
        short_successor(&last, &mut out);
        assert_eq!(out, last);
        let last = ik(b"", 3);
        short_successor(&last, &mut out);
        assert_eq!(out, last);
    }
}
