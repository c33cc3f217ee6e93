//! Reads a table file: [`Table`] (point lookups) and [`TableIter`] (a two-level cursor: index
//! block, then data blocks).
//!
//! Spec: `docs/format/sstable.md`, section 7. The footer, index, filter and properties blocks
//! are read and checked once at open and kept in memory; data blocks are read on demand with
//! positional reads (no shared file cursor, so one `Table` serves many threads) and cached in
//! the shared [`BlockCache`].
//!
//! A table opened with a *global sequence number* `S` (an ingested table, spec section 9) has
//! every entry stored at sequence number 0 and one entry per user key; it presents every entry
//! at `S` and translates seek targets to the stored keys.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use super::block::{Block, BlockIter};
use super::filter::{Filter, key_hash};
use super::format::{
    BlockHandle, FOOTER_LEN, Footer, IndexValue, TableFormat, decode_block, decode_block_into,
};
use super::properties::TableProperties;
use super::readahead::Readahead;
use crate::cache::BlockCache;
use crate::error::{Error, IoContext, Result};
use crate::fs::{FileSystem, RandomAccessFile};
use crate::iterator::{InternalIterator, bound_key, seek_to_user_key};
use crate::types::{FileNumber, InternalKeyRef, SeqNo, ValueKind};

/// How a read uses the shared block cache for data blocks, chosen from a read's
/// [`crate::ReadOptions`] (RocksDB's `fill_cache` and `verify_checksums`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BlockCachePolicy {
    /// Serve blocks from the cache; put blocks read from the file into it. User reads by
    /// default.
    #[default]
    Fill,
    /// Serve blocks from the cache; leave blocks read from the file out of it, so a large
    /// scan does not evict the working set (`fill_cache: Some(false)`; compaction inputs).
    NoFill,
    /// Read every block from the file, checking its stored CRC-32C, and leave it out of the
    /// cache (`verify_checksums: true`): a block cached before it went bad on disk is not
    /// trusted.
    Bypass,
}

/// An open, immutable SSTable. Thread safe (`Send + Sync`); share it as `Arc<Table>`.
#[derive(Debug)]
pub struct Table {
    path: Arc<Path>,
    file: Arc<dyn RandomAccessFile>,
    number: FileNumber,
    file_size: u64,
    /// Offset of the footer = end of the block area.
    footer_at: u64,
    /// End of the data blocks: the offset of the first meta block (filter, properties or
    /// index). Readahead windows stop here.
    data_end: u64,
    footer: Footer,
    cache: Arc<BlockCache>,
    index: Arc<Block>,
    filter: Option<Filter>,
    properties: TableProperties,
    /// `Some(S)`: an ingested table whose entries are presented at sequence number `S`.
    global_seqno: Option<SeqNo>,
}

/// What [`Table::walk_data_blocks`] hands its visitor.
#[derive(Debug)]
pub enum DataBlockEvent<'a> {
    /// An entry of a data block: its internal key and value.
    Entry(InternalKeyRef<'a>, &'a [u8]),
    /// A data block that could not be read or parsed past the entries already handed over;
    /// the walk goes on with the next block.
    Damaged(Error),
    /// The index could not be read further; the walk ends.
    IndexEnds(Error),
}

impl Table {
    /// Opens a table file in `fs`: reads and checks the footer, index, filter and properties blocks.
    /// `number` keys the table's blocks in `cache`.
    ///
    /// `global_seqno` is `Some(S)` for an ingested table (the manifest's
    /// `FileMeta::global_seqno`): its entries, all stored at sequence number 0 with one entry
    /// per user key, are then read as if written at `S` (`docs/format/sstable.md` section 9).
    /// Pass `None` for every other table, or to see an ingested file as stored.
    ///
    /// # Errors
    /// [`Error::Io`] if the file cannot be opened or read; [`Error::Corruption`] or
    /// [`Error::ChecksumMismatch`] naming the file and the offset of the damaged part
    /// (including, in format version 3, index entry counts that do not add up to the
    /// properties' entry count).
    pub fn open(
        fs: &dyn FileSystem,
        path: &Path,
        number: FileNumber,
        global_seqno: Option<SeqNo>,
        cache: Arc<BlockCache>,
    ) -> Result<Arc<Table>> {
        let file = fs.open(path).ctx(path)?;
        let file_size = file.size().ctx(path)?;
        let path: Arc<Path> = Arc::from(path);
        let Some(footer_at) = file_size.checked_sub(FOOTER_LEN as u64) else {
            return Err(Error::corruption(
                &*path,
                0,
                format!("file of {file_size} bytes is shorter than the {FOOTER_LEN}-byte footer"),
            ));
        };
        let mut buf = [0u8; FOOTER_LEN];
        read_at(&*file, &path, &mut buf, footer_at)?;
        let footer = Footer::decode(&buf, &path, footer_at)?;

        let contents = read_block(&*file, &path, footer.index)?;
        let index = Arc::new(
            Block::new(
                contents,
                footer.format,
                Arc::clone(&path),
                footer.index.offset,
            )?
            .with_restart_prefixes()?,
        );
        let contents = read_block(&*file, &path, footer.properties)?;
        let properties = TableProperties::decode(&contents, &path, footer.properties.offset)?;
        let filter = if footer.filter.size == 0 {
            None
        } else {
            let contents = read_block(&*file, &path, footer.filter)?;
            Some(Filter::decode(
                &contents,
                footer.format,
                &path,
                footer.filter.offset,
            )?)
        };
        tracing::debug!(
            path = %path.display(),
            size_bytes = file_size,
            entries = properties.num_entries,
            "opened table"
        );
        let table = Table {
            path,
            file,
            number,
            file_size,
            footer_at,
            data_end: [
                (footer.filter.size > 0).then_some(footer.filter.offset),
                Some(footer.properties.offset),
                Some(footer.index.offset),
            ]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(footer_at),
            footer,
            cache,
            index,
            filter,
            properties,
            global_seqno,
        };
        table.check_index_counts()?;
        Ok(Arc::new(table))
    }

    /// Format version 3: the index values' block entry counts must add up to the properties'
    /// `num_entries`, since a count over whole blocks trusts them without reading the blocks
    /// (each count is checked against its block by [`Table::verify_checksums`]). One walk of
    /// the index block, which open has read anyway.
    ///
    /// # Errors
    /// [`Error::Corruption`] at the index block's offset for a malformed index value or counts
    /// that do not add up.
    fn check_index_counts(&self) -> Result<()> {
        if !self.footer.format.counts_block_entries() {
            return Ok(());
        }
        let mut index = self.index.iter();
        index.seek_to_first()?;
        let mut sum = 0u64;
        while index.valid() {
            let entries = self.decode_index_value(index.value())?.entries.unwrap_or(0);
            sum = sum.saturating_add(entries);
            index.next()?;
        }
        if sum != self.properties.num_entries {
            return Err(Error::corruption(
                &*self.path,
                self.footer.index.offset,
                format!(
                    "the index's block entry counts add up to {sum}, the properties give {} \
                     entries",
                    self.properties.num_entries
                ),
            ));
        }
        Ok(())
    }

    /// Point lookup of the newest entry for `key.user_key` with seqno `<= key.seqno`. Consults
    /// the bloom filter first (reading no data block when it says absent), then seeks the index
    /// and one data block. Returns the first entry `>= key` if its user key equals
    /// `key.user_key`: `Some((seqno, kind, value))` (the value shares the block's memory), else
    /// `None`. Tombstones are returned as entries of kind `Delete`. `policy` says whether the
    /// data block comes from and goes to the block cache.
    ///
    /// # Errors
    /// [`Error::Io`], [`Error::Corruption`] or [`Error::ChecksumMismatch`] from reading the data
    /// block.
    pub fn get(
        &self,
        key: InternalKeyRef<'_>,
        policy: BlockCachePolicy,
    ) -> Result<Option<(SeqNo, ValueKind, Bytes)>> {
        self.get_hashed(key, key_hash(key.user_key), policy)
    }

    /// [`Table::get`] with `hash`, the [`key_hash`] of `key.user_key`, computed by the
    /// caller: a point read through several tables hashes its key once.
    ///
    /// # Errors
    /// As [`Table::get`].
    pub fn get_hashed(
        &self,
        key: InternalKeyRef<'_>,
        hash: u64,
        policy: BlockCachePolicy,
    ) -> Result<Option<(SeqNo, ValueKind, Bytes)>> {
        if !self.may_contain_hash(hash) {
            return Ok(None);
        }
        let stored = stored_target(key, self.global_seqno);
        let mut index = self.index.iter();
        index.seek(stored)?;
        // The first block whose separator is >= key holds the answer; looping on is only a
        // safeguard should a block end before `key`.
        while index.valid() {
            let handle = self.decode_handle(index.value())?;
            let mut it = self
                .data_block(handle, policy, &mut Readahead::default(), Vec::new())?
                .iter();
            it.seek(stored)?;
            if it.valid() {
                let found = present(it.key(), self.global_seqno);
                // With a global sequence number the entry may be newer than the read; the
                // table holds nothing older for this user key.
                if found.user_key != key.user_key || found < key {
                    return Ok(None);
                }
                return Ok(Some((found.seqno, found.kind, it.value_bytes())));
            }
            index.next()?;
        }
        Ok(None)
    }

    /// The user key of the index entry of the data block that holds the byte `part / whole`
    /// of the way through the data blocks, or ends there (`None` when `whole` is 0 or the
    /// table has no data block). An index key is at or after every key of its block and
    /// before every key of the next, so the result cuts the table's data at the end of that
    /// block, near that share of its bytes ([`crate::Db::split_keys`]). Walks the in-memory
    /// index block: no data block is read.
    ///
    /// The last block's index key may be past the table's last key (a short successor);
    /// `split_keys` then cuts at the next table's first key. (The cut was the end of the first
    /// block *starting* at or after the share, which does not exist when the share falls
    /// inside the last block: with that and the short successor, a scan of the 2.79 M reads
    /// whose halfway point fell 400 bytes before the end of a table's data ran on one thread
    /// instead of two, at twice the time.)
    ///
    /// # Errors
    /// [`Error::Corruption`] for a malformed index entry.
    pub fn key_at_share(&self, part: u64, whole: u64) -> Result<Option<Bytes>> {
        if whole == 0 {
            return Ok(None);
        }
        let offset = u128::from(self.data_end) * u128::from(part) / u128::from(whole);
        let mut index = self.index.iter();
        index.seek_to_first()?;
        while index.valid() {
            let handle = self.decode_handle(index.value())?;
            let end = handle.end_with_trailer().unwrap_or(self.data_end);
            if u128::from(end) >= offset {
                return Ok(Some(Bytes::copy_from_slice(index.key().user_key)));
            }
            index.next()?;
        }
        Ok(None)
    }

    /// The share of the table's data between user keys `lower` and `upper` (`None`:
    /// unbounded), as `(start, end)` in the units of [`Table::key_at_share`]'s `part` with the
    /// file size as `whole`: from the data block that may hold `lower` to the end of the one
    /// that may hold `upper`, so the span of a small range inside a large table is small
    /// (RocksDB's `ApproximateOffsetOf`). Two seeks in the in-memory index: no data block
    /// is read.
    ///
    /// # Errors
    /// [`Error::Corruption`] for a malformed index entry.
    pub fn approximate_span(
        &self,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<(u64, u64)> {
        let mut index = self.index.iter();
        // Data offset of the block that may hold `key`, and of the end of that block.
        let mut block_of = |key: &[u8]| -> Result<Option<(u64, u64)>> {
            index.seek(InternalKeyRef::new(key, SeqNo::MAX, ValueKind::FOR_SEEK))?;
            if !index.valid() {
                return Ok(None);
            }
            let handle = self.decode_handle(index.value())?;
            let end = handle.end_with_trailer().unwrap_or(self.data_end);
            Ok(Some((handle.offset, end)))
        };
        let start = match lower {
            Some(l) => block_of(l)?.map_or(self.data_end, |(start, _)| start),
            None => 0,
        };
        let end = match upper {
            Some(u) => block_of(u)?.map_or(self.data_end, |(_, end)| end),
            None => self.data_end,
        };
        let share = |offset: u64| {
            let data_end = u128::from(self.data_end.max(1));
            let scaled =
                u128::from(offset.min(self.data_end)) * u128::from(self.file_size) / data_end;
            u64::try_from(scaled).unwrap_or(self.file_size)
        };
        Ok((share(start), share(end).max(share(start))))
    }

    /// True unless the bloom filter proves `user_key` absent (always true without a filter).
    /// Counted in [`BlockCache::bloom_checks`] / [`BlockCache::bloom_useful`].
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(key_hash(user_key))
    }

    /// [`Table::may_contain`] for a key whose [`key_hash`] is `hash`.
    pub fn may_contain_hash(&self, hash: u64) -> bool {
        match &self.filter {
            None => true,
            Some(f) => {
                let may = f.may_contain_hash(hash);
                self.cache.record_bloom_check(may);
                may
            }
        }
    }

    /// A cursor over all entries in internal-key order (not positioned until a seek).
    pub fn iter(self: &Arc<Self>) -> TableIter {
        self.iter_with(BlockCachePolicy::Fill)
    }

    /// A cursor over the table whose data blocks are read under `policy` (see
    /// [`BlockCachePolicy`]); [`Table::iter`] is `iter_with(BlockCachePolicy::Fill)`.
    pub fn iter_with(self: &Arc<Self>, policy: BlockCachePolicy) -> TableIter {
        TableIter {
            table: Arc::clone(self),
            index: self.index.iter(),
            data: None,
            data_offset: 0,
            global_seqno: self.global_seqno,
            policy,
            readahead: Readahead::default(),
            spare: Vec::new(),
        }
    }

    /// Counts the entries whose user key lies within `(lower, upper)`, of every kind and
    /// sequence number, reading data blocks under `policy` with readahead windows of up to
    /// `readahead` bytes (0: none).
    ///
    /// A data block wholly inside the range, as the index's separators show, is counted from
    /// its index value's entry count (format version 3: the block is not read) or from its
    /// entry headers (versions 1 and 2: no key is assembled or compared); only the blocks
    /// where the range starts and ends are read and compare keys. [`crate::Db::count`]
    /// uses it for tables whose entries are all visible puts of distinct user keys
    /// ([`TableProperties::num_user_keys`]), where entries are rows.
    ///
    /// # Errors
    /// [`Error::Io`] reading a block; [`Error::Corruption`] or [`Error::ChecksumMismatch`] for
    /// a bad block or index entry.
    pub fn count_in_range(
        &self,
        lower: Bound<&[u8]>,
        upper: Bound<&[u8]>,
        policy: BlockCachePolicy,
        readahead: usize,
    ) -> Result<u64> {
        let mut index = self.index.iter();
        seek_to_user_key(&mut index, bound_key(lower))?;
        let mut readahead = Readahead::new(readahead);
        let mut count = 0u64;
        // The separator of the block before the current one (every key of the current block
        // sorts after it), once a block has been read.
        let mut before: Option<Vec<u8>> = None;
        while index.valid() {
            let separator = index.key().user_key;
            // Every key of the block sorts at or before its separator.
            let ends_inside = match upper {
                Bound::Unbounded => true,
                Bound::Included(u) => separator <= u,
                Bound::Excluded(u) => separator < u,
            };
            let starts_inside = before.as_deref().is_some_and(|b| match lower {
                Bound::Unbounded => true,
                Bound::Included(l) => b >= l,
                Bound::Excluded(l) => b > l,
            });
            let value = self.decode_index_value(index.value())?;
            count += match (starts_inside && ends_inside, value.entries) {
                // Version 3: the whole block's count is in the index (their sum was checked
                // against the properties at open).
                (true, Some(entries)) => entries,
                (whole, _) => {
                    let block =
                        self.data_block(value.handle, policy, &mut readahead, Vec::new())?;
                    if whole {
                        block.count_entries()?
                    } else {
                        count_block_range(&block, lower, upper)?
                    }
                }
            };
            if !ends_inside {
                // The next block's keys sort after this separator: beyond `upper`.
                break;
            }
            let b = before.get_or_insert_with(Vec::new);
            b.clear();
            b.extend_from_slice(separator);
            index.next()?;
        }
        Ok(count)
    }

    /// The global sequence number the table was opened with (`Some` for an ingested table).
    pub fn global_seqno(&self) -> Option<SeqNo> {
        self.global_seqno
    }

    /// The table's format version (how its block entries and filter are encoded).
    pub fn format(&self) -> TableFormat {
        self.footer.format
    }

    /// The properties recorded when the table was written.
    pub fn properties(&self) -> &TableProperties {
        &self.properties
    }

    /// The table's file number.
    pub fn file_number(&self) -> FileNumber {
        self.number
    }

    /// Size of the file in bytes.
    pub fn file_size(&self) -> u64 {
        self.file_size
    }

    /// Path of the file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// True if the table has a bloom filter block.
    pub fn has_filter(&self) -> bool {
        self.filter.is_some()
    }

    /// Reads every block from the file (bypassing the cache), checks every checksum, parses
    /// every entry, and checks the entry and block counts against the properties (for
    /// `Db::check_integrity`).
    ///
    /// # Errors
    /// As [`Table::open`]; the first problem [`Table::block_problems`] finds is returned.
    pub fn verify_checksums(&self) -> Result<()> {
        match self.block_problems().into_iter().next() {
            Some(problem) => Err(problem),
            None => Ok(()),
        }
    }

    /// Every problem [`Table::verify_checksums`] looks for, one per damaged block: the footer,
    /// the index, properties and filter blocks, then each data block (a damaged one is
    /// reported and the check goes on with the next index entry), then the block and entry
    /// counts against the properties (only when every block read). Empty when the table is
    /// sound. Used by `Db::integrity_problems` (`strata check`).
    pub fn block_problems(&self) -> Vec<Error> {
        let mut problems = Vec::new();
        let mut buf = [0u8; FOOTER_LEN];
        if let Err(e) = read_at(&*self.file, &self.path, &mut buf, self.footer_at)
            .and_then(|()| Footer::decode(&buf, &self.path, self.footer_at).map(drop))
        {
            problems.push(e);
        }
        for handle in [
            self.footer.index,
            self.footer.properties,
            self.footer.filter,
        ] {
            if handle.size > 0
                && let Err(e) = read_block(&*self.file, &self.path, handle)
            {
                problems.push(e);
            }
        }
        let damaged_before = problems.len();
        let (mut blocks, mut entries) = (0u64, 0u64);
        let mut index = self.index.iter();
        if let Err(e) = index.seek_to_first() {
            problems.push(e);
            return problems;
        }
        // The last key seen (user key, trailer): keys must rise strictly, within a block and
        // from one block to the next, and stay at or below their block's index key.
        let mut last: Option<(Vec<u8>, u64)> = None;
        while index.valid() {
            blocks += 1;
            let separator = index.key();
            if let Err(e) =
                self.check_block_entries(index.value(), separator, &mut last, &mut entries)
            {
                problems.push(e);
            }
            if let Err(e) = index.next() {
                problems.push(e);
                return problems;
            }
        }
        let p = &self.properties;
        if problems.len() == damaged_before
            && (blocks != p.num_data_blocks || entries != p.num_entries)
        {
            problems.push(Error::corruption(
                &*self.path,
                self.footer.properties.offset,
                format!(
                    "table has {blocks} data blocks and {entries} entries, properties say {} and {}",
                    p.num_data_blocks, p.num_entries
                ),
            ));
        }
        problems
    }

    /// Reads every data block from the file (bypassing the cache), in index order, and hands
    /// `visit` each entry as [`DataBlockEvent::Entry`]; a block that cannot be read or parsed
    /// (a checksum mismatch, a malformed entry or handle) is handed over as
    /// [`DataBlockEvent::Damaged`] after the entries before the damage, and the walk goes on
    /// with the next block; an index that cannot be read further ends it with
    /// [`DataBlockEvent::IndexEnds`]. Key order is not checked (see
    /// [`Table::block_problems`]). For `strata sst-dump --entries`.
    ///
    /// # Errors
    /// Whatever `visit` returns (the walk stops there).
    pub fn walk_data_blocks<E>(
        &self,
        mut visit: impl FnMut(DataBlockEvent<'_>) -> std::result::Result<(), E>,
    ) -> std::result::Result<(), E> {
        let mut index = self.index.iter();
        if let Err(e) = index.seek_to_first() {
            return visit(DataBlockEvent::IndexEnds(e));
        }
        while index.valid() {
            let block = self.decode_handle(index.value()).and_then(|handle| {
                self.data_block(
                    handle,
                    BlockCachePolicy::Bypass,
                    &mut Readahead::default(),
                    Vec::new(),
                )
            });
            let walked = match block {
                Ok(block) => {
                    let mut it = block.iter();
                    let mut step = it.seek_to_first();
                    while step.is_ok() && it.valid() {
                        visit(DataBlockEvent::Entry(it.key(), it.value()))?;
                        step = it.next();
                    }
                    step
                }
                Err(e) => Err(e),
            };
            if let Err(e) = walked {
                visit(DataBlockEvent::Damaged(e))?;
            }
            if let Err(e) = index.next() {
                return visit(DataBlockEvent::IndexEnds(e));
            }
        }
        Ok(())
    }

    /// Reads the data block whose index value is `handle_value` from the file, adds its
    /// entries to `entries`, and checks that its keys rise strictly (internal-key order: user
    /// key ascending, then trailer (sequence number and kind) descending) from `last`, the
    /// previous block's last key (user key and trailer),
    /// which it then updates, and do not pass `separator`, the block's index key.
    ///
    /// # Errors
    /// As reading the block; [`Error::Corruption`] at the block's offset for a key out of order
    /// or past the index key (checksums pass for a table written wrong).
    fn check_block_entries(
        &self,
        handle_value: &[u8],
        separator: InternalKeyRef<'_>,
        last: &mut Option<(Vec<u8>, u64)>,
        entries: &mut u64,
    ) -> Result<()> {
        let IndexValue {
            handle,
            entries: recorded,
        } = self.decode_index_value(handle_value)?;
        let mut in_block = 0u64;
        let mut it = self
            .data_block(
                handle,
                BlockCachePolicy::Bypass,
                &mut Readahead::default(),
                Vec::new(),
            )?
            .iter();
        let order = |a: (&[u8], u64), b: (&[u8], u64)| a.0.cmp(b.0).then(b.1.cmp(&a.1));
        it.seek_to_first()?;
        while it.valid() {
            in_block += 1;
            let key = it.key();
            if let Some((user_key, trailer)) = last.as_ref()
                && order((user_key, *trailer), (key.user_key, key.trailer())).is_ge()
            {
                return Err(Error::corruption(
                    &*self.path,
                    handle.offset,
                    format!(
                        "keys out of order: {:?} (sequence number {}) after {:?} (sequence \
                         number {})",
                        String::from_utf8_lossy(key.user_key),
                        key.seqno,
                        String::from_utf8_lossy(user_key),
                        trailer >> 8,
                    ),
                ));
            }
            let slot = last.get_or_insert_with(|| (Vec::new(), 0));
            slot.0.clear();
            slot.0.extend_from_slice(key.user_key);
            slot.1 = key.trailer();
            it.next()?;
        }
        *entries += in_block;
        if let Some(recorded) = recorded
            && recorded != in_block
        {
            return Err(Error::corruption(
                &*self.path,
                handle.offset,
                format!("the index gives the block {recorded} entries, it holds {in_block}"),
            ));
        }
        if let Some((user_key, trailer)) = last.as_ref()
            && order(
                (user_key, *trailer),
                (separator.user_key, separator.trailer()),
            )
            .is_gt()
        {
            return Err(Error::corruption(
                &*self.path,
                handle.offset,
                format!(
                    "the block's last key {:?} is past its index key {:?}",
                    String::from_utf8_lossy(user_key),
                    String::from_utf8_lossy(separator.user_key),
                ),
            ));
        }
        Ok(())
    }

    /// Decodes an index value into a data block handle within the block area.
    fn decode_handle(&self, value: &[u8]) -> Result<BlockHandle> {
        Ok(self.decode_index_value(value)?.handle)
    }

    /// Decodes an index value of this table's format: a data block handle within the block
    /// area and, in version 3, the block's entry count.
    fn decode_index_value(&self, value: &[u8]) -> Result<IndexValue> {
        let at = self.footer.index.offset;
        let value = IndexValue::decode_exact(value, self.footer.format).ok_or_else(|| {
            let what = if self.footer.format.counts_block_entries() {
                "malformed index value (block handle and entry count of at least 1)"
            } else {
                "malformed block handle in index"
            };
            Error::corruption(&*self.path, at, what)
        })?;
        value
            .handle
            .check_within(self.footer_at, &self.path, at, "data block")?;
        Ok(value)
    }

    /// The data block at `handle`, from the cache or the file as `policy` says; a block read
    /// from the file comes through `readahead` (a point lookup passes a fresh one, which reads
    /// just the block). A block cut from a readahead window is copied out of it before it goes
    /// into the cache, so the cache never holds a window alive. A compressed block read from
    /// the file is decompressed into `spare` (a buffer handed back by [`Block::reclaim`], or
    /// empty).
    fn data_block(
        &self,
        handle: BlockHandle,
        policy: BlockCachePolicy,
        readahead: &mut Readahead,
        spare: Vec<u8>,
    ) -> Result<Arc<Block>> {
        if policy != BlockCachePolicy::Bypass
            && let Some(b) = self.cache.get(self.number, handle.offset)
        {
            return Ok(b);
        }
        let stored = readahead.read(&*self.file, &self.path, handle, self.data_end)?;
        // A block for the cache gets an exact fresh buffer: the cache charges its length, and
        // a reused one may be larger.
        let spare = if policy == BlockCachePolicy::Fill {
            Vec::new()
        } else {
            spare
        };
        let mut contents = decode_block_into(stored, &self.path, handle.offset, spare)?;
        if policy == BlockCachePolicy::Fill && readahead.shares_window(&contents) {
            contents = Bytes::copy_from_slice(&contents);
        }
        let block = Arc::new(Block::new(
            contents,
            self.footer.format,
            Arc::clone(&self.path),
            handle.offset,
        )?);
        if policy == BlockCachePolicy::Fill {
            self.cache
                .insert(self.number, handle.offset, Arc::clone(&block));
        }
        Ok(block)
    }
}

/// Entries of `block` whose user key lies within `(lower, upper)`, comparing each key.
fn count_block_range(block: &Arc<Block>, lower: Bound<&[u8]>, upper: Bound<&[u8]>) -> Result<u64> {
    let mut it = block.iter();
    seek_to_user_key(&mut it, bound_key(lower))?;
    let mut n = 0;
    while it.valid() {
        let key = it.key().user_key;
        let beyond = match upper {
            Bound::Unbounded => false,
            Bound::Included(u) => key > u,
            Bound::Excluded(u) => key >= u,
        };
        if beyond {
            break;
        }
        if !matches!(lower, Bound::Excluded(l) if key == l) {
            n += 1;
        }
        it.next()?;
    }
    Ok(n)
}

/// The stored key to seek for `target`: itself for an ordinary table; for an ingested table
/// (entries stored at seqno 0, one per user key) the first stored entry of `target.user_key`,
/// whichever its presented sequence number.
fn stored_target(target: InternalKeyRef<'_>, global_seqno: Option<SeqNo>) -> InternalKeyRef<'_> {
    match global_seqno {
        None => target,
        Some(_) => InternalKeyRef::new(target.user_key, SeqNo::MAX, ValueKind::FOR_SEEK),
    }
}

/// A stored key as readers see it: at the global sequence number, if any.
fn present(mut key: InternalKeyRef<'_>, global_seqno: Option<SeqNo>) -> InternalKeyRef<'_> {
    if let Some(s) = global_seqno {
        key.seqno = s;
    }
    key
}

/// Reads `buf.len()` bytes at `offset`; a short file is corruption, not an I/O error.
pub(super) fn read_at(
    file: &dyn RandomAccessFile,
    path: &Path,
    buf: &mut [u8],
    offset: u64,
) -> Result<()> {
    match file.read_exact_at(buf, offset) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(Error::corruption(
            path,
            offset,
            format!("file ends inside a {}-byte read", buf.len()),
        )),
        Err(e) => Err(Error::io(path, e)),
    }
}

/// Reads the block at `handle` with its trailer, checks it and returns the uncompressed
/// contents.
fn read_block(file: &dyn RandomAccessFile, path: &Path, handle: BlockHandle) -> Result<Bytes> {
    let len = handle
        .end_with_trailer()
        .and_then(|_| usize::try_from(handle.size).ok())
        .and_then(|n| n.checked_add(super::format::BLOCK_TRAILER_LEN))
        .ok_or_else(|| Error::corruption(path, handle.offset, "block size overflows"))?;
    let mut buf = vec![0u8; len];
    read_at(file, path, &mut buf, handle.offset)?;
    decode_block(Bytes::from(buf), path, handle.offset)
}

/// A cursor over a table's entries: an iterator over the index block picks the data block,
/// an iterator over that block yields entries. Holds an `Arc<Table>`; `Send`.
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    index: BlockIter,
    /// Iterator over the data block the index iterator points at.
    data: Option<BlockIter>,
    /// File offset of the block `data` iterates.
    data_offset: u64,
    /// The table's global sequence number (copied so `key()` needs no pointer chase).
    global_seqno: Option<SeqNo>,
    /// How data blocks are read.
    policy: BlockCachePolicy,
    /// Larger reads once the iterator walks blocks in order (off unless
    /// [`TableIter::with_readahead`] turned it on).
    readahead: Readahead,
    /// The buffer of a block this iterator left that nothing else held (not cached), for the
    /// next block read from the file to decompress into; see [`Block::reclaim`].
    spare: Vec<u8>,
}

impl TableIter {
    /// Turns on readahead (`docs/design.md`, "Scan readahead"): once the iterator has read
    /// two data blocks in file order, forward or backward, each read from the file covers a
    /// window of 8 KiB that doubles per read up to `max_bytes`. 0 leaves it off. Every block
    /// is checked as on its own.
    #[must_use]
    pub fn with_readahead(mut self, max_bytes: usize) -> Self {
        self.readahead = Readahead::new(max_bytes);
        self
    }

    /// Capacity in bytes of the buffer kept for the next block read (see `spare`).
    #[cfg(test)]
    pub(super) fn spare_capacity(&self) -> usize {
        self.spare.capacity()
    }

    /// The current value as a zero-copy slice of the cached block. Requires `valid()`.
    pub fn value_bytes(&self) -> Bytes {
        self.data
            .as_ref()
            .map(BlockIter::value_bytes)
            .unwrap_or_default()
    }

    /// Points `data` at the block the index iterator is on (or `None` past the end).
    fn init_data_block(&mut self) -> Result<()> {
        if !self.index.valid() {
            self.data = None;
            return Ok(());
        }
        let handle = self.table.decode_handle(self.index.value())?;
        if self.data.is_none() || self.data_offset != handle.offset {
            let spare = std::mem::take(&mut self.spare);
            let block = self
                .table
                .data_block(handle, self.policy, &mut self.readahead, spare)?;
            match &mut self.data {
                Some(data) => self.spare = Block::reclaim(data.replace_block(block)),
                None => self.data = Some(block.iter()),
            }
            self.data_offset = handle.offset;
        }
        Ok(())
    }

    fn data_valid(&self) -> bool {
        self.data.as_ref().is_some_and(BlockIter::valid)
    }

    /// Moves to following blocks while the current one is exhausted.
    fn skip_empty_forward(&mut self) -> Result<()> {
        while !self.data_valid() {
            if !self.index.valid() {
                self.data = None;
                return Ok(());
            }
            self.index.next()?;
            self.init_data_block()?;
            if let Some(d) = &mut self.data {
                d.seek_to_first()?;
            }
        }
        Ok(())
    }

    /// Moves to preceding blocks while the current one is exhausted.
    fn skip_empty_backward(&mut self) -> Result<()> {
        while !self.data_valid() {
            if !self.index.valid() {
                self.data = None;
                return Ok(());
            }
            self.index.prev()?;
            self.init_data_block()?;
            if let Some(d) = &mut self.data {
                d.seek_to_last()?;
            }
        }
        Ok(())
    }

    /// Runs a move; on error leaves the iterator invalid.
    fn guarded(&mut self, op: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let r = op(self);
        if r.is_err() {
            self.data = None;
        }
        r
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.data_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.guarded(|it| {
            it.index.seek_to_first()?;
            it.init_data_block()?;
            if let Some(d) = &mut it.data {
                d.seek_to_first()?;
            }
            it.skip_empty_forward()
        })
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.guarded(|it| {
            it.index.seek_to_last()?;
            it.init_data_block()?;
            if let Some(d) = &mut it.data {
                d.seek_to_last()?;
            }
            it.skip_empty_backward()
        })
    }

    fn seek(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        let stored = stored_target(target, self.global_seqno);
        self.guarded(|it| {
            it.index.seek(stored)?;
            it.init_data_block()?;
            if let Some(d) = &mut it.data {
                d.seek(stored)?;
            }
            it.skip_empty_forward()?;
            // Ingested table: on `target.user_key` but newer than the target; the next entry
            // has the next user key.
            if it.global_seqno.is_some() && it.data_valid() && it.key() < target {
                if let Some(d) = &mut it.data {
                    d.next()?;
                }
                it.skip_empty_forward()?;
            }
            Ok(())
        })
    }

    fn seek_for_prev(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        self.seek(target)?;
        if !self.valid() {
            return self.seek_to_last();
        }
        if self.key() > target {
            self.prev()?;
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "next on an invalid iterator");
        self.guarded(|it| {
            if let Some(d) = &mut it.data {
                d.next()?;
            }
            it.skip_empty_forward()
        })
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid(), "prev on an invalid iterator");
        self.guarded(|it| {
            if let Some(d) = &mut it.data {
                d.prev()?;
            }
            it.skip_empty_backward()
        })
    }

    fn key(&self) -> InternalKeyRef<'_> {
        match &self.data {
            Some(d) => present(d.key(), self.global_seqno),
            None => InternalKeyRef::new(&[], SeqNo::ZERO, ValueKind::Delete),
        }
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], |d| d.value())
    }
}

/// Where cuts fall among tables of `sizes` bytes (in key order) that cut them into `parts`
/// parts of about equal bytes: for each cut `k` in `1..parts`, the index of the table holding
/// byte `total * k / parts` and how many bytes into that table it is (pass those to
/// [`Table::key_at_share`] with the table's size). Cuts at or past the end are left out.
/// Used by [`crate::Db::split_keys`] and by `strata load`'s parallel merge.
pub fn byte_cuts(sizes: &[u64], parts: usize) -> Vec<(usize, u64)> {
    let total = sizes.iter().fold(0u64, |a, &s| a.saturating_add(s));
    let mut cuts = Vec::with_capacity(parts.saturating_sub(1));
    let (mut i, mut before) = (0, 0u64);
    for k in 1..parts as u64 {
        let target = total.saturating_mul(k) / parts as u64;
        while let Some(&size) = sizes.get(i)
            && before.saturating_add(size) <= target
        {
            before = before.saturating_add(size);
            i += 1;
        }
        if i >= sizes.len() {
            break;
        }
        cuts.push((i, target - before));
    }
    cuts
}
