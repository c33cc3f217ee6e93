//! [`Readahead`]: larger file reads for a table iterator that walks its data blocks in order.
//!
//! A scan reads one data block (about 4 KiB) per `pread` when its blocks are not cached. Once
//! an iterator has read two blocks in a row that each lie right after (or, in a reverse scan,
//! right before) the previous one read, that read and each later one from the file covers a
//! whole window in the scan's direction (or the whole block, when it is larger), and the
//! following blocks are cut from the window without a system call. The window starts at
//! [`INITIAL_READAHEAD`] bytes, doubles with each refill up to the limit the iterator was
//! given, starts small again after a seek or a turn-around, and never reaches past the data
//! blocks. Blocks found in the block cache are not reads and do not count, as in RocksDB. This is RocksDB's automatic iterator readahead
//! (`BlockBasedTableOptions::max_auto_readahead_size`, 256 KiB by default, "Iterator
//! readahead" in its wiki), extended to reverse scans.
//!
//! Every block cut from the window is checked exactly as one read on its own (its CRC-32C,
//! then decompression), so readahead changes how many bytes one read asks for, never what is
//! trusted. A window is private to its iterator; tables are immutable, so it cannot go stale.

use std::path::Path;

use bytes::Bytes;

use super::format::BlockHandle;
use super::reader::read_at;
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;

/// Bytes of the first readahead window (RocksDB's `initial_auto_readahead_size`, 8 KiB).
pub const INITIAL_READAHEAD: usize = 8 << 10;

/// Blocks in a row, each adjacent to the one before in the same direction, from which reads go
/// ahead: the third block of a scan is the first read with a window.
const SEQUENTIAL_READS_BEFORE_READAHEAD: u32 = 2;

/// A table iterator's readahead state: the window of file bytes read ahead and the recent
/// access pattern. See the module docs.
#[derive(Debug, Default)]
pub(crate) struct Readahead {
    /// Largest window in bytes; 0 turns readahead off.
    max: usize,
    /// Size of the next window in bytes (0 before the first one).
    next_size: usize,
    /// The file's bytes `[window_start, window_start + window.len())`.
    window: Bytes,
    window_start: u64,
    /// The last block read (from the file or the window), `[start, end)` with its trailer.
    last: Option<(u64, u64)>,
    /// Consecutive blocks that each started where the previous one ended.
    forward_run: u32,
    /// Consecutive blocks that each ended where the previous one started.
    backward_run: u32,
}

impl Readahead {
    /// Readahead with windows of up to `max` bytes; 0 turns it off.
    pub(crate) fn new(max: usize) -> Self {
        Readahead {
            max,
            ..Readahead::default()
        }
    }

    /// The stored bytes of the block at `handle` (contents and trailer), unchecked: from the
    /// window when it holds them, else read from `file`, going ahead in the scan's direction
    /// when the recent reads were sequential. Reads never extend past `limit` (the end of the
    /// data blocks). Only reads count: blocks served from the block cache leave the state
    /// alone, so a scan over a mostly cached table, whose misses are scattered, reads just
    /// the blocks it misses.
    ///
    /// # Errors
    /// [`Error::Corruption`] if the block lies past `limit` or the file ends early;
    /// [`Error::Io`] if the read fails.
    pub(crate) fn read(
        &mut self,
        file: &dyn RandomAccessFile,
        path: &Path,
        handle: BlockHandle,
        limit: u64,
    ) -> Result<Bytes> {
        let start = handle.offset;
        let end = handle
            .end_with_trailer()
            .filter(|&e| e <= limit)
            .ok_or_else(|| {
                Error::corruption(path, start, "data block lies past the data blocks")
            })?;
        self.track(start, end);
        if let Some(bytes) = self.window_slice(start, end) {
            return Ok(bytes);
        }
        let len = usize::try_from(end - start)
            .map_err(|_| Error::corruption(path, start, "block size overflows"))?;
        let going_ahead = self.max > 0
            && (self.forward_run >= SEQUENTIAL_READS_BEFORE_READAHEAD
                || self.backward_run >= SEQUENTIAL_READS_BEFORE_READAHEAD);
        if !going_ahead {
            return read_exact_into(file, path, start, len, Vec::new(), 0).map(Bytes::from);
        }
        let size = match self.next_size {
            0 => INITIAL_READAHEAD.min(self.max),
            n => n,
        };
        self.next_size = size.saturating_mul(2).min(self.max);
        let size = size.max(len) as u64;
        let (from, to) = if self.forward_run > 0 {
            (start, start.saturating_add(size).min(limit))
        } else {
            (end.saturating_sub(size), end)
        };
        let window_len = usize::try_from(to - from)
            .map_err(|_| Error::corruption(path, from, "readahead window overflows"))?;
        // The old window's buffer is read into again when no block cut from it is alive. A
        // new buffer is sized for the largest window this scan of the table can still need,
        // so the growing windows do not reallocate it each time (each reallocation copied the
        // old window, and took fresh pages from the allocator).
        let spare = std::mem::take(&mut self.window)
            .try_into_mut()
            .map(Vec::from)
            .unwrap_or_default();
        let largest = if self.forward_run > 0 {
            usize::try_from(limit - from).unwrap_or(usize::MAX)
        } else {
            usize::try_from(end).unwrap_or(usize::MAX)
        }
        .min(self.max);
        self.window = Bytes::from(read_exact_into(
            file, path, from, window_len, spare, largest,
        )?);
        self.window_start = from;
        self.window_slice(start, end)
            .ok_or_else(|| Error::corruption(path, start, "readahead window misses its block"))
    }

    /// True if the block `bytes` (as returned by [`Readahead::read`], decoded or not) shares
    /// memory with the window: keeping it alive would keep the whole window alive.
    pub(crate) fn shares_window(&self, bytes: &[u8]) -> bool {
        !bytes.is_empty() && self.window.as_ptr_range().contains(&bytes.as_ptr())
    }

    /// The window's bytes `[start, end)`, if it holds them all.
    fn window_slice(&self, start: u64, end: u64) -> Option<Bytes> {
        let lo = usize::try_from(start.checked_sub(self.window_start)?).ok()?;
        let hi = usize::try_from(end.checked_sub(self.window_start)?).ok()?;
        (hi <= self.window.len()).then(|| self.window.slice(lo..hi))
    }

    /// Updates the sequential-run counters for a move to the block `[start, end)`.
    fn track(&mut self, start: u64, end: u64) {
        match self.last {
            Some((_, last_end)) if start == last_end => {
                if self.backward_run > 0 {
                    // Turned around: small windows again.
                    self.next_size = 0;
                }
                self.forward_run = self.forward_run.saturating_add(1);
                self.backward_run = 0;
            }
            Some((last_start, _)) if end == last_start => {
                if self.forward_run > 0 {
                    self.next_size = 0;
                }
                self.backward_run = self.backward_run.saturating_add(1);
                self.forward_run = 0;
            }
            Some((last_start, _)) if start == last_start => {}
            _ => {
                // A seek elsewhere: start over, with small windows again.
                self.forward_run = 0;
                self.backward_run = 0;
                self.next_size = 0;
            }
        }
        self.last = Some((start, end));
    }
}

/// Reads exactly `len` bytes at `offset` into `buf` (its contents replaced, its capacity
/// reused when it holds `len`; else a new buffer of `len.max(capacity)` bytes, not a grown
/// copy); a short file is corruption. The bytes of `buf` are overwritten, not zeroed first,
/// since the read fills all `len` of them.
fn read_exact_into(
    file: &dyn RandomAccessFile,
    path: &Path,
    offset: u64,
    len: usize,
    mut buf: Vec<u8>,
    capacity: usize,
) -> Result<Vec<u8>> {
    if buf.capacity() < len {
        buf = Vec::with_capacity(len.max(capacity));
    }
    buf.resize(len, 0);
    read_at(file, path, &mut buf, offset)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use parking_lot::Mutex;

    use super::*;
    use crate::sstable::format::BLOCK_TRAILER_LEN;

    /// An in-memory file that records every read as `(offset, length)`.
    #[derive(Debug, Default)]
    struct Recording {
        data: Vec<u8>,
        reads: Mutex<Vec<(u64, usize)>>,
    }

    impl RandomAccessFile for Recording {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
            self.reads.lock().push((offset, buf.len()));
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            let src = self.data.get(start..).unwrap_or_default();
            let n = src.len().min(buf.len());
            buf[..n].copy_from_slice(&src[..n]);
            Ok(n)
        }

        fn size(&self) -> std::io::Result<u64> {
            Ok(self.data.len() as u64)
        }
    }

    /// `blocks` blocks of `size` bytes each (trailer included), back to back from offset 0;
    /// byte `i` of the file is `i as u8`.
    fn file(blocks: usize, size: usize) -> (Arc<Recording>, Vec<BlockHandle>) {
        let data = (0..blocks * size).map(|i| i as u8).collect();
        let handles = (0..blocks)
            .map(|i| BlockHandle {
                offset: (i * size) as u64,
                size: (size - BLOCK_TRAILER_LEN) as u64,
            })
            .collect();
        (
            Arc::new(Recording {
                data,
                reads: Mutex::default(),
            }),
            handles,
        )
    }

    fn read_all(
        ra: &mut Readahead,
        f: &Recording,
        handles: impl Iterator<Item = BlockHandle>,
        limit: u64,
    ) -> Result<()> {
        for h in handles {
            let got = ra.read(f, Path::new("t"), h, limit)?;
            let start = usize::try_from(h.offset).unwrap_or(usize::MAX);
            assert_eq!(
                &got[..],
                &f.data[start..start + got.len()],
                "block at {}",
                h.offset
            );
            assert_eq!(got.len() as u64, h.size + BLOCK_TRAILER_LEN as u64);
        }
        Ok(())
    }

    #[test]
    fn a_forward_scan_reads_ahead_after_two_sequential_blocks_doubling_to_the_limit() -> Result<()>
    {
        let (f, handles) = file(200, 1024);
        let limit = f.data.len() as u64;
        let mut ra = Readahead::new(32 << 10);
        read_all(&mut ra, &f, handles.iter().copied(), limit)?;
        let reads = f.reads.lock().clone();
        // Blocks 0 and 1 one by one; block 2 is the second in sequence, so its read covers a
        // window of 8 KiB, the next ones 16 and 32 KiB, then 32 KiB until the end.
        assert_eq!(reads[..3], [(0, 1024), (1024, 1024), (2048, 8 << 10)]);
        assert_eq!(reads[3], (2048 + (8 << 10), 16 << 10));
        assert_eq!(reads[4].1, 32 << 10);
        assert!(reads[5..].iter().all(|&(_, len)| len <= 32 << 10));
        let covered: usize = reads.iter().map(|&(_, len)| len).sum();
        assert_eq!(covered, f.data.len(), "every byte is read exactly once");
        assert!(reads.len() < 12, "{} reads for 200 blocks", reads.len());
        Ok(())
    }

    #[test]
    fn a_reverse_scan_reads_ahead_backwards() -> Result<()> {
        let (f, handles) = file(100, 1024);
        let limit = f.data.len() as u64;
        let mut ra = Readahead::new(16 << 10);
        read_all(&mut ra, &f, handles.iter().rev().copied(), limit)?;
        let reads = f.reads.lock().clone();
        let end = f.data.len() as u64;
        assert_eq!(reads[..2], [(end - 1024, 1024), (end - 2048, 1024)]);
        assert_eq!(reads[2], (end - 2048 - (8 << 10), 8 << 10));
        let covered: usize = reads.iter().map(|&(_, len)| len).sum();
        assert_eq!(covered, f.data.len(), "every byte is read exactly once");
        assert!(reads.len() < 15, "{} reads for 100 blocks", reads.len());
        // The first window never starts before offset 0.
        assert!(reads.iter().all(|&(off, len)| off + len as u64 <= end));
        Ok(())
    }

    #[test]
    fn windows_stop_at_the_limit_and_cover_a_block_larger_than_the_window() -> Result<()> {
        let (f, handles) = file(10, 20 << 10);
        // The block area ends half way through block 8.
        let limit = 8 * (20 << 10) + (10 << 10);
        let mut ra = Readahead::new(8 << 10);
        read_all(&mut ra, &f, handles.iter().take(8).copied(), limit)?;
        let reads = f.reads.lock().clone();
        assert!(reads.iter().all(|&(off, len)| off + len as u64 <= limit));
        assert!(reads.iter().all(|&(_, len)| len == 20 << 10), "{reads:?}");
        let past = handles[8];
        assert!(
            ra.read(&*f, Path::new("t"), past, limit)
                .is_err_and(|e| e.is_corruption())
        );
        Ok(())
    }

    #[test]
    fn random_access_and_a_zero_limit_read_one_block_at_a_time() -> Result<()> {
        let (f, handles) = file(64, 512);
        let limit = f.data.len() as u64;
        let mut off = Readahead::new(0);
        read_all(&mut off, &f, handles.iter().copied(), limit)?;
        assert_eq!(f.reads.lock().len(), 64);
        f.reads.lock().clear();
        // Every other block: never adjacent, never ahead.
        let mut on = Readahead::new(1 << 20);
        read_all(&mut on, &f, handles.iter().step_by(2).copied(), limit)?;
        assert!(f.reads.lock().iter().all(|&(_, len)| len == 512));
        Ok(())
    }

    #[test]
    fn a_seek_elsewhere_starts_over_with_a_small_window() -> Result<()> {
        let (f, handles) = file(400, 1024);
        let limit = f.data.len() as u64;
        let mut ra = Readahead::new(64 << 10);
        read_all(&mut ra, &f, handles[..100].iter().copied(), limit)?;
        f.reads.lock().clear();
        read_all(&mut ra, &f, handles[300..320].iter().copied(), limit)?;
        let reads = f.reads.lock().clone();
        assert_eq!(
            reads[..3],
            [
                (300 * 1024, 1024),
                (301 * 1024, 1024),
                (302 * 1024, 8 << 10)
            ]
        );
        Ok(())
    }

    #[test]
    fn a_turn_around_starts_again_with_a_small_window() -> Result<()> {
        let (f, handles) = file(200, 1024);
        let limit = f.data.len() as u64;
        let mut ra = Readahead::new(64 << 10);
        read_all(&mut ra, &f, handles[..150].iter().copied(), limit)?;
        assert!(f.reads.lock().iter().any(|&(_, len)| len == 64 << 10));
        f.reads.lock().clear();
        // Back from block 149: the first read below the current window covers 8 KiB again.
        read_all(&mut ra, &f, handles[..150].iter().rev().copied(), limit)?;
        let reads = f.reads.lock().clone();
        assert_eq!(
            reads.first().map(|&(_, len)| len),
            Some(8 << 10),
            "{reads:?}"
        );
        let block = ra.read(&*f, Path::new("t"), handles[1], limit)?;
        assert!(ra.shares_window(&block));
        assert!(!ra.shares_window(&Bytes::copy_from_slice(&block)));
        Ok(())
    }
}
