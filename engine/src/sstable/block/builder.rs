//! Builds one block (grammar in the parent module; spec `docs/format/sstable.md` section 3).

use std::cmp::Ordering;

use crate::coding::{put_fixed32, put_varint64};
use crate::error::{Error, Result};
use crate::types::compare_internal;

/// Accumulates sorted entries into the block format: prefix-compressed keys, with a full key
/// every `restart_interval` entries, and the restart array appended by [`BlockBuilder::finish`].
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    /// Entries since the last restart point.
    counter: usize,
    restart_interval: usize,
    last_key: Vec<u8>,
    num_entries: usize,
    finished: bool,
}

impl BlockBuilder {
    /// A builder placing a restart point every `restart_interval` entries (0 is treated as 1).
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            counter: 0,
            restart_interval: restart_interval.max(1),
            last_key: Vec::new(),
            num_entries: 0,
            finished: false,
        }
    }

    /// Appends an entry. `key` is an encoded internal key, strictly greater (internal-key order)
    /// than the previous one (checked with `debug_assert!`).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if the entry would start past 4 GiB into the block (restart
    /// offsets are u32); nothing is added then.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        debug_assert!(!self.finished, "add after finish");
        debug_assert!(
            self.num_entries == 0 || compare_internal(&self.last_key, key) == Ordering::Less,
            "block keys must be strictly increasing"
        );
        let entry_start = u32::try_from(self.buf.len()).map_err(|_| {
            Error::InvalidArgument("block grew past 4 GiB; entries are too large".into())
        })?;
        let mut shared = 0;
        if self.counter < self.restart_interval {
            shared = self
                .last_key
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count();
        } else {
            self.restarts.push(entry_start);
            self.counter = 0;
        }
        if self.num_entries == 0 {
            shared = 0;
        }
        let non_shared = &key[shared..];
        put_varint64(&mut self.buf, shared as u64);
        put_varint64(&mut self.buf, non_shared.len() as u64);
        put_varint64(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(non_shared);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(non_shared);
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

    /// The last key added (empty if none).
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
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
