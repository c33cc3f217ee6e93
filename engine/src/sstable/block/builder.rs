//! Builds one block (grammar in the parent module; spec `docs/format/sstable.md` section 3).

use super::{TAG_HAS_SEQNO, TAG_VALUE_LEN_SHIFT};
use crate::coding::{put_fixed32, put_varint64};
use crate::error::{Error, Result};
use crate::sstable::format::TableFormat;
use crate::types::{InternalKeyRef, SeqNo, ValueKind};

/// Accumulates sorted entries into the block format of one [`TableFormat`]: prefix-compressed
/// keys, with a full key every `restart_interval` entries, and the restart array appended by
/// [`BlockBuilder::finish`].
#[derive(Debug)]
pub struct BlockBuilder {
    format: TableFormat,
    buf: Vec<u8>,
    restarts: Vec<u32>,
    /// Entries since the last restart point.
    counter: usize,
    restart_interval: usize,
    /// The bytes prefix compression runs over for the last entry: its encoded internal key
    /// (V1) or its user key (V2).
    last_key: Vec<u8>,
    /// The last entry's sequence number and kind (for the ordering check).
    last_seqno: SeqNo,
    last_kind: ValueKind,
    /// Scratch for encoding a V1 key.
    encoded: Vec<u8>,
    num_entries: usize,
    finished: bool,
}

impl BlockBuilder {
    /// A builder of `format` entries placing a restart point every `restart_interval` entries
    /// (0 is treated as 1).
    pub fn new(format: TableFormat, restart_interval: usize) -> Self {
        BlockBuilder {
            format,
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            restart_interval: restart_interval.max(1),
            last_key: Vec::new(),
            last_seqno: SeqNo::ZERO,
            last_kind: ValueKind::Delete,
            encoded: Vec::new(),
            num_entries: 0,
            finished: false,
        }
    }

    /// The last entry added, if any.
    fn last(&self) -> Option<InternalKeyRef<'_>> {
        if self.num_entries == 0 {
            return None;
        }
        let user_key = match self.format {
            TableFormat::V1 => InternalKeyRef::decode(&self.last_key)?.user_key,
            TableFormat::V2 | TableFormat::V3 => &self.last_key,
        };
        Some(InternalKeyRef::new(
            user_key,
            self.last_seqno,
            self.last_kind,
        ))
    }

    /// Appends an entry. `key` must be strictly greater (internal-key order) than the previous
    /// one (checked with `debug_assert!`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the entry would start past 4 GiB into the block (restart
    /// offsets are u32); nothing is added then.
    pub fn add(&mut self, key: InternalKeyRef<'_>, value: &[u8]) -> Result<()> {
        debug_assert!(!self.finished, "add after finish");
        debug_assert!(
            self.last().is_none_or(|last| last < key),
            "block keys must be strictly increasing"
        );
        let entry_start = u32::try_from(self.buf.len()).map_err(|_| {
            Error::InvalidArgument("block grew past 4 GiB; entries are too large".into())
        })?;
        let restart = self.counter >= self.restart_interval;
        if restart {
            self.restarts.push(entry_start);
            self.counter = 0;
        }
        let compressed: &[u8] = match self.format {
            TableFormat::V1 => {
                self.encoded.clear();
                key.encode_into(&mut self.encoded);
                &self.encoded
            }
            TableFormat::V2 | TableFormat::V3 => key.user_key,
        };
        let shared = if restart || self.num_entries == 0 {
            0
        } else {
            self.last_key
                .iter()
                .zip(compressed)
                .take_while(|(a, b)| a == b)
                .count()
        };
        let non_shared = compressed.get(shared..).unwrap_or_default();
        put_varint64(&mut self.buf, shared as u64);
        put_varint64(&mut self.buf, non_shared.len() as u64);
        match self.format {
            TableFormat::V1 => put_varint64(&mut self.buf, value.len() as u64),
            TableFormat::V2 | TableFormat::V3 => {
                let seqno = key.seqno.get();
                let has_seqno = if seqno == 0 { 0 } else { TAG_HAS_SEQNO };
                let tag = ((value.len() as u64) << TAG_VALUE_LEN_SHIFT)
                    | has_seqno
                    | u64::from(u8::from(key.kind));
                put_varint64(&mut self.buf, tag);
                if seqno != 0 {
                    put_varint64(&mut self.buf, seqno);
                }
            }
        }
        self.buf.extend_from_slice(non_shared);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(non_shared);
        (self.last_seqno, self.last_kind) = (key.seqno, key.kind);
        self.counter += 1;
        self.num_entries += 1;
        Ok(())
    }

    /// Size the block would have if finished now, in bytes (entries + restart array).
    pub fn size_estimate(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// True if no entry was added since construction or the last [`BlockBuilder::reset`].
    pub fn is_empty(&self) -> bool {
        self.num_entries == 0
    }

    /// Number of entries added.
    pub fn len(&self) -> usize {
        self.num_entries
    }

    /// Appends the restart array and returns the finished contents. Call
    /// [`BlockBuilder::reset`] before adding again.
    pub fn finish(&mut self) -> &[u8] {
        if !self.finished {
            for &r in &self.restarts {
                put_fixed32(&mut self.buf, r);
            }
            #[expect(
                clippy::cast_possible_truncation,
                reason = "one restart per entry, and entries start below 4 GiB (checked in add)"
            )]
            put_fixed32(&mut self.buf, self.restarts.len() as u32);
            self.finished = true;
        }
        &self.buf
    }

    /// Empties the builder for the next block, keeping its allocations.
    pub fn reset(&mut self) {
        self.buf.clear();
        self.restarts.clear();
        self.restarts.push(0);
        self.counter = 0;
        self.last_key.clear();
        self.num_entries = 0;
        self.finished = false;
    }
}
