//! A bidirectional cursor over one block (grammar in the parent module).
//!
//! Seeks binary-search the restart array, then scan forward. Entries can only be decoded
//! forwards, so `prev` decodes the restart region before the current entry once and keeps
//! every entry it passed (as RocksDB's data-block iterator does): the following `prev` calls in
//! that region pop them instead of re-decoding up to half a region each.

use std::cmp::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::{Block, TAG_HAS_SEQNO, TAG_KIND_MASK, TAG_VALUE_LEN_SHIFT};
use crate::coding::get_varint64;
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::sstable::format::TableFormat;
use crate::types::{InternalKeyRef, SeqNo, TRAILER_LEN, ValueKind};

/// Cursor over a [`Block`]'s entries in internal-key order. Owns an `Arc` of the block, so it
/// is `Send` and outlives the cache entry it came from.
///
/// Any malformed entry makes the moving call return [`crate::Error::Corruption`] (naming the
/// file and block offset) and leaves the iterator invalid.
#[derive(Debug)]
pub struct BlockIter {
    block: Arc<Block>,
    valid: bool,
    /// In-block offset of the current entry.
    current: usize,
    /// In-block offset just past the current entry.
    next: usize,
    /// Index of the restart region holding the current entry.
    restart_index: usize,
    /// The bytes prefix compression runs over for the current entry: its encoded internal key
    /// (V1) or its user key (V2).
    key: Vec<u8>,
    seqno: SeqNo,
    kind: ValueKind,
    /// The current value as `data[value_start..value_end]`.
    value_start: usize,
    value_end: usize,
    /// Entries decoded by the last `prev` that rescanned a region, in block order, before the
    /// current entry. Each records where it lies in the (immutable) block, so an entry is
    /// reused only when its `next` is the current entry's offset.
    prev_entries: Vec<PrevEntry>,
    /// The keys of `prev_entries`, back to back.
    prev_keys: Vec<u8>,
}

/// One entry remembered by `prev` (see [`BlockIter::prev_entries`]).
#[derive(Debug, Clone, Copy)]
struct PrevEntry {
    current: usize,
    next: usize,
    restart_index: usize,
    value_start: usize,
    value_end: usize,
    seqno: SeqNo,
    kind: ValueKind,
    /// The entry's key is `prev_keys[key_start..key_end]`.
    key_start: usize,
    key_end: usize,
}

/// Header of one entry, parsed but not applied.
struct EntryHeader {
    shared: usize,
    delta_start: usize,
    delta_end: usize,
    value_end: usize,
    /// V2: the sequence number and kind from the header (V1 keeps them in the key).
    seqno_kind: Option<(SeqNo, ValueKind)>,
}

impl BlockIter {
    pub(super) fn new(block: Arc<Block>) -> Self {
        BlockIter {
            block,
            valid: false,
            current: 0,
            next: 0,
            restart_index: 0,
            key: Vec::new(),
            seqno: SeqNo::ZERO,
            kind: ValueKind::Delete,
            value_start: 0,
            value_end: 0,
            prev_entries: Vec::new(),
            prev_keys: Vec::new(),
        }
    }

    /// Points the cursor at `block` (not positioned until a seek), keeping its buffers'
    /// capacity, and returns the block it was on, so a scan moving from block to block
    /// allocates neither a new cursor nor, through [`Block::reclaim`], a new block buffer.
    pub(crate) fn replace_block(&mut self, block: Arc<Block>) -> Arc<Block> {
        self.valid = false;
        self.current = 0;
        self.next = 0;
        self.restart_index = 0;
        self.key.clear();
        self.value_start = 0;
        self.value_end = 0;
        self.prev_entries.clear();
        self.prev_keys.clear();
        std::mem::replace(&mut self.block, block)
    }

    /// Remembers the current entry for later `prev` calls.
    fn remember_current(&mut self) {
        let key_start = self.prev_keys.len();
        self.prev_keys.extend_from_slice(&self.key);
        self.prev_entries.push(PrevEntry {
            current: self.current,
            next: self.next,
            restart_index: self.restart_index,
            value_start: self.value_start,
            value_end: self.value_end,
            seqno: self.seqno,
            kind: self.kind,
            key_start,
            key_end: self.prev_keys.len(),
        });
    }

    /// Makes the remembered entry before the current one current, if `prev` kept it. Returns
    /// false (and forgets every remembered entry) if it did not.
    fn pop_remembered(&mut self) -> bool {
        let Some(e) = self
            .prev_entries
            .pop()
            .filter(|e| e.next == self.current && e.current < self.current)
        else {
            self.prev_entries.clear();
            self.prev_keys.clear();
            return false;
        };
        self.key.clear();
        self.key.extend_from_slice(
            self.prev_keys
                .get(e.key_start..e.key_end)
                .unwrap_or_default(),
        );
        self.prev_keys.truncate(e.key_start);
        self.current = e.current;
        self.next = e.next;
        self.restart_index = e.restart_index;
        self.value_start = e.value_start;
        self.value_end = e.value_end;
        (self.seqno, self.kind) = (e.seqno, e.kind);
        true
    }

    /// The current value as a zero-copy slice of the block. Requires `valid()`.
    pub fn value_bytes(&self) -> Bytes {
        self.block.data.slice(self.value_start..self.value_end)
    }

    /// The user-key part of `compressed` (the bytes prefix compression runs over).
    fn user_key_of(format: TableFormat, compressed: &[u8]) -> &[u8] {
        match format {
            TableFormat::V1 => compressed
                .get(..compressed.len().saturating_sub(TRAILER_LEN))
                .unwrap_or_default(),
            TableFormat::V2 | TableFormat::V3 => compressed,
        }
    }

    fn invalidate(&mut self) {
        self.valid = false;
        self.key.clear();
        self.current = self.block.data_end;
        self.next = self.block.data_end;
    }

    fn parse_header(&self, at: usize) -> Result<EntryHeader> {
        self.block.parse_header(at)
    }

    /// Parses the entry at `at` on top of the current key (empty at a restart point) and makes
    /// it current.
    fn parse_entry_at(&mut self, at: usize) -> Result<()> {
        match self.try_parse_entry_at(at) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.invalidate();
                Err(e)
            }
        }
    }

    fn try_parse_entry_at(&mut self, at: usize) -> Result<()> {
        let h = self.parse_header(at)?;
        let mut region = self.restart_index;
        while region + 1 < self.block.num_restarts && self.block.restart_point(region + 1) <= at {
            region += 1;
        }
        if h.shared != 0 && self.block.restart_point(region) == at {
            return Err(self.block.corruption(at, "restart entry shares a prefix"));
        }
        if h.shared > self.key.len() {
            return Err(self
                .block
                .corruption(at, "shared prefix longer than the previous key"));
        }
        let delta = self
            .block
            .data
            .get(h.delta_start..h.delta_end)
            .ok_or_else(|| self.block.corruption(at, "key runs past the block"))?;
        self.key.truncate(h.shared);
        self.key.extend_from_slice(delta);
        (self.seqno, self.kind) = match h.seqno_kind {
            Some(sk) => sk,
            None => {
                let Some(k) = InternalKeyRef::decode(&self.key) else {
                    return Err(self.block.corruption(at, "malformed internal key"));
                };
                (k.seqno, k.kind)
            }
        };
        self.restart_index = region;
        self.current = at;
        self.next = h.value_end;
        self.value_start = h.delta_end;
        self.value_end = h.value_end;
        self.valid = true;
        Ok(())
    }

    /// Positions on restart point `i`'s entry (its key is stored whole).
    fn seek_to_restart(&mut self, i: usize) -> Result<()> {
        self.key.clear();
        self.restart_index = i;
        let at = self.block.restart_point(i);
        if at >= self.block.data_end {
            self.invalidate();
            return Ok(());
        }
        self.parse_entry_at(at)
    }

    /// Key stored at restart point `i`, decoded without moving the cursor.
    fn restart_key(&self, i: usize) -> Result<InternalKeyRef<'_>> {
        self.block.restart_key(i)
    }

    fn step_forward(&mut self) -> Result<()> {
        if self.next >= self.block.data_end {
            self.invalidate();
            return Ok(());
        }
        self.parse_entry_at(self.next)
    }
}

impl InternalIterator for BlockIter {
    fn valid(&self) -> bool {
        self.valid
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.seek_to_restart(0)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.seek_to_restart(self.block.num_restarts - 1)?;
        while self.valid && self.next < self.block.data_end {
            self.step_forward()?;
        }
        Ok(())
    }

    fn seek(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        if self.block.is_empty() {
            self.invalidate();
            return Ok(());
        }
        // Last restart point whose key is < target (or 0). With restart prefixes, a step
        // whose prefix differs from the target's is decided without decoding the entry.
        let (mut lo, mut hi) = (0, self.block.num_restarts - 1);
        let prefixes = self
            .block
            .restart_prefixes
            .as_deref()
            .map(|p| (p, super::key_prefix(target.user_key)));
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            let by_prefix = prefixes
                .and_then(|(p, target_prefix)| Some(p.get(mid)?.cmp(&target_prefix)))
                .filter(|&o| o != Ordering::Equal);
            let ord = match by_prefix {
                Some(o) => o,
                None => match self.restart_key(mid) {
                    Ok(k) => k.cmp(&target),
                    Err(e) => {
                        self.invalidate();
                        return Err(e);
                    }
                },
            };
            if ord == Ordering::Less {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.seek_to_restart(lo)?;
        while self.valid && self.key() < target {
            self.step_forward()?;
        }
        Ok(())
    }

    fn seek_for_prev(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        self.seek(target)?;
        if !self.valid {
            return self.seek_to_last();
        }
        if self.key() > target {
            self.prev()?;
        }
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid, "next on an invalid iterator");
        if !self.valid {
            return Ok(());
        }
        self.step_forward()
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid, "prev on an invalid iterator");
        if !self.valid {
            return Ok(());
        }
        if self.pop_remembered() {
            return Ok(());
        }
        let original = self.current;
        // The restart region that starts strictly before the current entry.
        let mut region = self.restart_index;
        while self.block.restart_point(region) >= original {
            if region == 0 {
                self.invalidate();
                return Ok(());
            }
            region -= 1;
        }
        self.seek_to_restart(region)?;
        while self.valid && self.next < original {
            self.remember_current();
            self.step_forward()?;
        }
        if self.valid && self.next != original {
            let at = self.current;
            self.invalidate();
            self.prev_entries.clear();
            self.prev_keys.clear();
            return Err(self
                .block
                .corruption(at, "entries do not chain to the previous position"));
        }
        Ok(())
    }

    fn key(&self) -> InternalKeyRef<'_> {
        debug_assert!(self.valid, "key on an invalid iterator");
        let user_key = Self::user_key_of(self.block.format, &self.key);
        InternalKeyRef::new(user_key, self.seqno, self.kind)
    }

    fn value(&self) -> &[u8] {
        debug_assert!(self.valid, "value on an invalid iterator");
        self.block
            .data
            .get(self.value_start..self.value_end)
            .unwrap_or_default()
    }
}

/// Entry decoding shared by iterators and [`Block::with_restart_prefixes`].
impl Block {
    /// Parses the entry header at `at`.
    fn parse_header(&self, at: usize) -> Result<EntryHeader> {
        let block = self;
        let bad = |what: &str| block.corruption(at, what);
        let src = block
            .data
            .get(at..block.data_end)
            .ok_or_else(|| bad("entry offset"))?;
        let mut pos = 0;
        let mut varint = || -> Result<u64> {
            let (v, n) = src
                .get(pos..)
                .and_then(get_varint64)
                .ok_or_else(|| bad("truncated entry header"))?;
            pos += n;
            Ok(v)
        };
        let length = |v: u64| usize::try_from(v).map_err(|_| bad("entry length overflows"));
        let shared = length(varint()?)?;
        let non_shared = length(varint()?)?;
        let (value_len, seqno_kind) = match block.format {
            TableFormat::V1 => (length(varint()?)?, None),
            TableFormat::V2 | TableFormat::V3 => {
                let tag = varint()?;
                let kind = ValueKind::try_from((tag & TAG_KIND_MASK) as u8)
                    .map_err(|_| bad("unknown entry kind"))?;
                let seqno = if tag & TAG_HAS_SEQNO == 0 {
                    SeqNo::ZERO
                } else {
                    Some(varint()?)
                        .filter(|&s| s <= SeqNo::MAX.get())
                        .map(SeqNo)
                        .ok_or_else(|| bad("sequence number above 2^56 - 1"))?
                };
                (length(tag >> TAG_VALUE_LEN_SHIFT)?, Some((seqno, kind)))
            }
        };
        let delta_start = at + pos;
        let delta_end = delta_start
            .checked_add(non_shared)
            .ok_or_else(|| bad("entry length overflows"))?;
        let value_end = delta_end
            .checked_add(value_len)
            .filter(|&e| e <= block.data_end)
            .ok_or_else(|| bad("entry runs past the restart array"))?;
        Ok(EntryHeader {
            shared,
            delta_start,
            delta_end,
            value_end,
            seqno_kind,
        })
    }

    /// Number of entries in the block, read from their headers alone: no key is assembled,
    /// so counting a block costs a few varint reads per entry (`crate::Db::count`).
    ///
    /// # Errors
    /// [`crate::Error::Corruption`] if an entry header is malformed or runs past the entries.
    pub(crate) fn count_entries(&self) -> Result<u64> {
        let (mut at, mut n) = (0, 0u64);
        while at < self.data_end {
            // `value_end` is past the header, so the walk always moves on.
            at = self.parse_header(at)?.value_end;
            n += 1;
        }
        Ok(n)
    }

    /// Key stored at restart point `i`, decoded without moving the cursor.
    pub(super) fn restart_key(&self, i: usize) -> Result<InternalKeyRef<'_>> {
        let at = self.restart_point(i);
        let h = self.parse_header(at)?;
        if h.shared != 0 {
            return Err(self.corruption(at, "restart entry shares a prefix"));
        }
        let delta = self.data.get(h.delta_start..h.delta_end);
        match h.seqno_kind {
            Some((seqno, kind)) => delta.map(|user_key| InternalKeyRef::new(user_key, seqno, kind)),
            None => delta.and_then(InternalKeyRef::decode),
        }
        .ok_or_else(|| self.corruption(at, "malformed internal key"))
    }
}
