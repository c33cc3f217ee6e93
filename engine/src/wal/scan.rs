//! Scanning a damaged log for intact records after the damage.
//!
//! The reader resynchronises at the next block after damage, so damage in the last block of a
//! log looks like a torn tail even when intact records follow it in that block. Recovery uses
//! this scan to tell a torn tail (nothing intact after the damage) from damage in the middle.

use std::path::Path;

use crate::error::{Error, IoContext, Result};
use crate::fs::FileSystem;
use crate::wal;

/// Offset of the first intact `FULL` or `FIRST` fragment (the start of a record) that begins
/// after byte `damaged` of the log (WAL or manifest) at `path`, or `None` when nothing intact
/// follows (the damage is a torn tail).
///
/// # Errors
/// [`crate::Error::Io`] reading the file.
///
/// A torn append damages only the bytes of the last record, all of which follow `damaged` (the
/// offset of its first fragment); its own later fragments are `MIDDLE` or `LAST`. A fragment is
/// recognised with the WAL framing of `docs/format/wal.md`: a 7-byte header
/// `crc: u32 LE | length: u16 LE | type: u8` that fits in its 32 KiB block and whose masked
/// CRC32C of `[type][payload]` matches. Random bytes pass with probability 2^-32 per position.
pub fn later_record_start(fs: &dyn FileSystem, path: &Path, damaged: u64) -> Result<Option<u64>> {
    later_record_start_before(fs, path, damaged, u64::MAX)
}

/// [`later_record_start`] within the first `end` bytes of the file: the prefix a
/// [`wal::Reader::open_prefix`] read, so bytes appended since are not taken for a record after
/// the damage.
///
/// # Errors
/// [`crate::Error::Io`] reading the file.
pub fn later_record_start_before(
    fs: &dyn FileSystem,
    path: &Path,
    damaged: u64,
    end: u64,
) -> Result<Option<u64>> {
    let file = fs.open(path).ctx(path)?;
    let len = file.size().ctx(path)?.min(end);
    let tail_len = usize::try_from(len.saturating_sub(damaged))
        .map_err(|_| Error::corruption(path, damaged, "log tail too large to scan"))?;
    let mut tail = vec![0u8; tail_len];
    file.read_exact_at(&mut tail, damaged).ctx(path)?;
    let block = wal::BLOCK_SIZE as u64;
    for start in 1..tail.len() {
        let pos = damaged.saturating_add(start as u64);
        let left_in_block = block - pos % block;
        let Some(header) = tail.get(start..start.saturating_add(wal::HEADER_SIZE)) else {
            break;
        };
        let (Some(&ty), Some(len), Some(crc)) = (
            header.get(6),
            header
                .get(4..6)
                .and_then(|b| b.try_into().ok())
                .map(u16::from_le_bytes),
            header
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .map(u32::from_le_bytes),
        ) else {
            continue;
        };
        let frag_len = wal::HEADER_SIZE + usize::from(len);
        // A FULL fragment fits in its block; a FIRST one always fills it to the end.
        let plausible = match wal::RecordType::try_from(ty) {
            Ok(wal::RecordType::Full) => frag_len as u64 <= left_in_block,
            Ok(wal::RecordType::First) => frag_len as u64 == left_in_block,
            _ => false,
        };
        if !plausible {
            continue;
        }
        let Some(payload) = tail.get(start + wal::HEADER_SIZE..start + frag_len) else {
            continue;
        };
        if wal::fragment_crc(ty, payload) == crc {
            return Ok(Some(pos));
        }
    }
    Ok(None)
}
