//! Shared harness code for Strata's fuzz targets (`fuzz_targets/*.rs`, see `docs/testing.md`).
//!
//! - [`CappedAlloc`]: the targets' global allocator. libFuzzer's `-malloc_limit_mb` needs a
//!   sanitizer runtime, which the stable toolchain does not have (`cargo fuzz run -s none`),
//!   so any single allocation over [`MAX_ALLOC_BYTES`] is refused here instead; Rust then
//!   aborts with "memory allocation of N bytes failed" and libFuzzer records a crash. Inputs
//!   are a few KiB, so a request that large is a decoder trusting a length field.
//! - [`scratch`]: a per-process directory (on tmpfs when there is one) for the decoders that
//!   read files.
//! - [`repair_wal_checksums`] / [`repair_table_checksums`]: rewrite the CRCs of a mutated
//!   input so that the mutations reach the decoders behind the checksum checks. Each target
//!   runs the input as given (checksum paths) and, when the repair changed it, once more.

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::OnceLock;

use bytes::Bytes;
use strata_engine::coding::{crc32c_parts, get_fixed32, get_fixed64};
use strata_engine::iterator::InternalIterator;
use strata_engine::sstable::block::Block;
use strata_engine::sstable::format::{
    BLOCK_TRAILER_LEN, BlockHandle, FOOTER_LEN, IndexValue, TABLE_MAGIC, TableFormat, decode_block,
};
use strata_engine::wal::{BLOCK_SIZE, HEADER_SIZE, fragment_crc};

/// Largest single allocation a target may make, in bytes (64 MiB).
pub const MAX_ALLOC_BYTES: usize = 64 << 20;

/// The system allocator, refusing single allocations over [`MAX_ALLOC_BYTES`].
#[derive(Debug)]
pub struct CappedAlloc;

// SAFETY: every method forwards to `System` unchanged, or returns null (a refused
// allocation, which `GlobalAlloc` permits) before calling it.
#[expect(unsafe_code, reason = "a global allocator is an unsafe trait impl")]
unsafe impl GlobalAlloc for CappedAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOC_BYTES {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if layout.size() > MAX_ALLOC_BYTES {
            return std::ptr::null_mut();
        }
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` through this allocator with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size > MAX_ALLOC_BYTES {
            return std::ptr::null_mut();
        }
        // SAFETY: `ptr` came from `System` through this allocator with this layout.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Declares [`CappedAlloc`] as the global allocator of a fuzz target binary.
#[macro_export]
macro_rules! capped_allocator {
    () => {
        #[global_allocator]
        static ALLOC: $crate::CappedAlloc = $crate::CappedAlloc;
    };
}

/// This process's scratch directory: `$STRATA_FUZZ_SCRATCH/<pid>` when the variable is set
/// (`fuzz/smoke.sh` sets it and deletes it afterwards), else `/dev/shm/strata-fuzz-<pid>`
/// (or under the temp dir without `/dev/shm`). Created on first use.
///
/// # Panics
/// If the directory cannot be created (a broken harness, not a finding).
pub fn scratch() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let pid = std::process::id();
        let dir = match std::env::var_os("STRATA_FUZZ_SCRATCH") {
            Some(base) => PathBuf::from(base).join(pid.to_string()),
            None => {
                let shm = Path::new("/dev/shm");
                let base = if shm.is_dir() {
                    shm.to_path_buf()
                } else {
                    std::env::temp_dir()
                };
                base.join(format!("strata-fuzz-{pid}"))
            }
        };
        std::fs::create_dir_all(&dir).expect("create the fuzz scratch directory");
        dir
    })
}

/// A fresh, empty directory `name` inside [`scratch`].
///
/// # Panics
/// If the directory cannot be recreated.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = scratch().join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).expect("clear a fuzz scratch directory");
    }
    std::fs::create_dir_all(&dir).expect("create a fuzz scratch directory");
    dir
}

/// Writes `data` to `name` inside [`scratch`] and returns the path.
///
/// # Panics
/// If the file cannot be written.
pub fn scratch_file(name: &str, data: &[u8]) -> PathBuf {
    let path = scratch().join(name);
    std::fs::write(&path, data).expect("write a fuzz scratch file");
    path
}

/// Rewrites the CRC of every fragment whose header and payload fit in its 32 KiB block, as the
/// WAL writer would have computed it (`docs/format/wal.md` §4). Lengths and types are kept,
/// so torn, orphan and unknown-type fragments still reach the reader. Returns whether
/// anything changed.
pub fn repair_wal_checksums(data: &mut [u8]) -> bool {
    let mut changed = false;
    for block in data.chunks_mut(BLOCK_SIZE) {
        let mut pos = 0;
        while let Some(header) = block.get(pos..pos + HEADER_SIZE) {
            let length = usize::from(u16::from_le_bytes([header[4], header[5]]));
            let ty = header[6];
            let end = pos + HEADER_SIZE + length;
            let Some(payload) = block.get(pos + HEADER_SIZE..end) else {
                break;
            };
            let crc = fragment_crc(ty, payload).to_le_bytes();
            if block[pos..pos + 4] != crc {
                block[pos..pos + 4].copy_from_slice(&crc);
                changed = true;
            }
            pos = end;
        }
    }
    changed
}

/// Rewrites, as the table builder would have computed them (`docs/format/sstable.md`), the
/// footer CRC, the trailers of the blocks the footer points at, and the trailers of the data
/// blocks the index points at. Magic, version, handles and compression bytes are kept.
/// Returns whether anything changed.
pub fn repair_table_checksums(data: &mut [u8]) -> bool {
    let Some(footer_at) = data.len().checked_sub(FOOTER_LEN) else {
        return false;
    };
    let mut changed = false;
    {
        let footer = &mut data[footer_at..];
        let crc = crc32c_parts(&[&footer[..52]]).to_le_bytes();
        if footer[52..56] != crc {
            footer[52..56].copy_from_slice(&crc);
            changed = true;
        }
        if get_fixed64(footer, 56) != Some(TABLE_MAGIC) {
            return changed;
        }
    }
    let field = |data: &[u8], i: usize| get_fixed64(data, footer_at + 8 * i).unwrap_or(u64::MAX);
    let handles: Vec<BlockHandle> = (0..3)
        .map(|i| BlockHandle::new(field(data, 2 * i), field(data, 2 * i + 1)))
        .collect();
    for h in &handles {
        changed |= repair_block_trailer(data, *h, footer_at);
    }
    // The index block is the third handle; its values are data block handles.
    let index = handles[2];
    let Some(contents) = block_contents(data, index, footer_at) else {
        return changed;
    };
    let path: Arc<Path> = Arc::from(Path::new("index"));
    let version = get_fixed32(data, footer_at + 48).unwrap_or(0);
    let format = TableFormat::from_version(version).unwrap_or_default();
    let Ok(block) = Block::new(contents, format, path, index.offset).map(Arc::new) else {
        return changed;
    };
    let mut it = block.iter();
    let mut data_handles = Vec::new();
    if it.seek_to_first().is_ok() {
        while it.valid() && data_handles.len() < 10_000 {
            if let Some(v) = IndexValue::decode_exact(it.value(), format) {
                data_handles.push(v.handle);
            }
            if it.next().is_err() {
                break;
            }
        }
    }
    for h in data_handles {
        changed |= repair_block_trailer(data, h, footer_at);
    }
    changed
}

/// The block at `handle` as `[start, end)` of `data` including its trailer, if it lies within
/// `[0, limit)`.
fn block_range(handle: BlockHandle, limit: usize) -> Option<(usize, usize)> {
    let start = usize::try_from(handle.offset).ok()?;
    let size = usize::try_from(handle.size).ok()?;
    let end = start.checked_add(size)?.checked_add(BLOCK_TRAILER_LEN)?;
    (end <= limit).then_some((start, end))
}

/// Fixes the CRC in the trailer of the block at `handle`; returns whether it changed.
fn repair_block_trailer(data: &mut [u8], handle: BlockHandle, limit: usize) -> bool {
    let Some((start, end)) = block_range(handle, limit) else {
        return false;
    };
    let block = &mut data[start..end];
    let size = block.len() - BLOCK_TRAILER_LEN;
    let crc = crc32c_parts(&[&block[..=size]]).to_le_bytes();
    if block[size + 1..] == crc {
        return false;
    }
    block[size + 1..].copy_from_slice(&crc);
    true
}

/// The decoded (decompressed) contents of the block at `handle`, if it is in range and valid.
fn block_contents(data: &[u8], handle: BlockHandle, limit: usize) -> Option<Bytes> {
    let (start, end) = block_range(handle, limit)?;
    let stored = Bytes::copy_from_slice(data.get(start..end)?);
    decode_block(stored, Path::new("table"), handle.offset).ok()
}
