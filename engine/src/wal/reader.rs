//! Reads records back from a log, block by block (spec: `docs/format/wal.md` §6).
//!
//! ```text
//! fragment := crc: u32 LE | length: u16 LE | type: u8 | payload: u8{length}
//! checks   := header within file -> 7 + length within block -> payload within file
//!             -> unmask(crc) == crc32c(type | payload) -> type in 1..=4
//! ```
//!
//! A failed check drops the rest of the block (its `length` cannot be trusted) and any record
//! being assembled; `MIDDLE`/`LAST` fragments without a record in progress are skipped as
//! orphans. Consecutive damage is reported as one [`ReadOutcome::Bad`].
#![deny(clippy::indexing_slicing)]

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{BLOCK_SIZE, HEADER_SIZE, RecordType, fragment_crc};
use crate::coding::get_fixed32;
use crate::error::{Error, IoContext, Result};
use crate::fs::{FileSystem, RandomAccessFile};

/// What [`Reader::next_outcome`] found next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    /// A complete, checksum-valid logical record. `offset` = file offset of its first fragment's
    /// header.
    Record {
        /// File offset of the record's first fragment header.
        offset: u64,
        /// The record's bytes.
        payload: Vec<u8>,
    },
    /// A damaged or incomplete logical record starting at `offset` (file offset of the first
    /// byte that could not be used, i.e. where a truncate should cut so that everything before
    /// is intact). `torn` is true when the damage runs to end-of-file (a fragment or header cut
    /// short by EOF, a FIRST/MIDDLE without its LAST at EOF, damage with nothing intact after
    /// it): what a crash mid-append leaves. `torn` is false for checksum mismatches, bad lengths
    /// or types, and orphan fragments in the middle, i.e. when an intact record follows.
    ///
    /// Consecutive damage is one `Bad`: after it the reader has resynchronised, and the next
    /// call returns the next good record (`torn == false`) or [`ReadOutcome::Eof`]
    /// (`torn == true`), so the caller can check whether anything valid follows the damage.
    Bad {
        /// First byte of the damage; truncating here keeps every earlier record intact.
        offset: u64,
        /// What was wrong, for logs and error messages.
        reason: String,
        /// True when nothing intact follows the damage (the next outcome is `Eof`).
        torn: bool,
    },
    /// End of file. Returned again by every later call.
    Eof,
}

/// Streams the records of one log file.
///
/// Holds one block (32 KiB) and the record being assembled in memory, whatever the file size.
/// Each returned payload is copied once out of the block buffer.
pub struct Reader {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    /// The current block; `block_len` bytes of it are valid.
    block: Vec<u8>,
    block_len: usize,
    /// Next unread byte within `block`.
    pos: usize,
    /// File offset of `block[0]`.
    block_start: u64,
    /// File offset of the block to load next.
    next_block: u64,
    /// File offset of the FIRST fragment of the record being assembled in `scratch`.
    partial: Option<u64>,
    scratch: Vec<u8>,
    /// Damage seen since the last outcome, not yet reported.
    damage: Option<Damage>,
    /// A record found after damage, returned by the call after the `Bad`.
    pending: Option<ReadOutcome>,
    /// End of file reached and reported.
    done: bool,
    /// Bytes of the file read at most ([`Reader::open_prefix`]); `u64::MAX` for all of it.
    limit: u64,
}

/// A stretch of damage being coalesced into one `Bad`.
#[derive(Debug)]
struct Damage {
    offset: u64,
    reason: String,
    /// Damaged fragments seen after the first one.
    more: u64,
}

/// One physical step through the file.
enum Step {
    /// A checksum-valid fragment: payload is `block[start..end]`.
    Fragment {
        offset: u64,
        ty: RecordType,
        start: usize,
        end: usize,
    },
    /// A fragment that failed a check at `offset`; the rest of its block has been skipped.
    Damaged { offset: u64, reason: String },
    /// No more bytes.
    Eof,
}

impl Reader {
    /// Opens the log at `path` in `fs` for reading from its start.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path`.
    pub fn open(fs: &dyn FileSystem, path: &Path) -> Result<Reader> {
        Reader::open_prefix(fs, path, u64::MAX)
    }

    /// Like [`Reader::open`], reading only the first `len` bytes: the end of the file is taken
    /// to be there. A reader beside the process appending to the log (a read-only open) uses
    /// the size it saw first, so records appended meanwhile are never half seen.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path`.
    pub fn open_prefix(fs: &dyn FileSystem, path: &Path, len: u64) -> Result<Reader> {
        let file = fs.open(path).ctx(path)?;
        Ok(Reader {
            file,
            path: path.to_path_buf(),
            block: vec![0; BLOCK_SIZE],
            // An exhausted, full-size pseudo-block, so the first step loads block 0.
            block_len: BLOCK_SIZE,
            pos: BLOCK_SIZE,
            block_start: 0,
            next_block: 0,
            partial: None,
            scratch: Vec::new(),
            damage: None,
            pending: None,
            done: false,
            limit: len,
        })
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Next outcome, in file order.
    ///
    /// # Errors
    /// Only [`Error::Io`] (naming the path) when reading the file fails; damaged contents are
    /// reported as [`ReadOutcome::Bad`], never as an error and never by panicking.
    pub fn next_outcome(&mut self) -> Result<ReadOutcome> {
        if let Some(outcome) = self.pending.take() {
            return Ok(outcome);
        }
        if self.done {
            return Ok(ReadOutcome::Eof);
        }
        loop {
            match self.step()? {
                Step::Fragment {
                    offset,
                    ty,
                    start,
                    end,
                } => {
                    if matches!(ty, RecordType::Full | RecordType::First) {
                        self.drop_partial(offset);
                    }
                    let piece = self.block.get(start..end).unwrap_or_default();
                    match ty {
                        RecordType::Full => {
                            let payload = piece.to_vec();
                            return Ok(self.deliver(offset, payload));
                        }
                        RecordType::First => {
                            self.partial = Some(offset);
                            self.scratch.clear();
                            self.scratch.extend_from_slice(piece);
                        }
                        RecordType::Middle | RecordType::Last => {
                            let Some(first) = self.partial else {
                                let what = if ty == RecordType::Middle {
                                    "MIDDLE"
                                } else {
                                    "LAST"
                                };
                                self.note_damage(
                                    offset,
                                    format!("orphan {what} fragment (no record in progress)"),
                                );
                                continue;
                            };
                            self.scratch.extend_from_slice(piece);
                            if ty == RecordType::Last {
                                self.partial = None;
                                let payload = std::mem::take(&mut self.scratch);
                                return Ok(self.deliver(first, payload));
                            }
                        }
                    }
                }
                Step::Damaged { offset, reason } => {
                    let at = self.partial.take().unwrap_or(offset);
                    self.note_damage(at, reason);
                }
                Step::Eof => {
                    if let Some(first) = self.partial.take() {
                        self.note_damage(
                            first,
                            "record has no LAST fragment before the end of the file".to_string(),
                        );
                    }
                    self.done = true;
                    return Ok(match self.damage.take() {
                        None => ReadOutcome::Eof,
                        Some(damage) => {
                            let file_end = self.block_start + self.block_len as u64;
                            let reason = format!(
                                "{}; no intact record was read after it up to the end of the file \
                                 at byte {file_end} (after damage the reader skips the rest of its \
                                 32 KiB block)",
                                damage.describe()
                            );
                            self.report_bad(damage.offset, reason, true)
                        }
                    });
                }
            }
        }
    }

    /// Returns the record at `offset`, or, when damage precedes it, the `Bad` for the damage
    /// (keeping the record for the next call).
    fn deliver(&mut self, offset: u64, payload: Vec<u8>) -> ReadOutcome {
        let record = ReadOutcome::Record { offset, payload };
        match self.damage.take() {
            None => record,
            Some(damage) => {
                self.pending = Some(record);
                let reason = format!(
                    "{}; the next intact record starts at byte {offset}",
                    damage.describe()
                );
                self.report_bad(damage.offset, reason, false)
            }
        }
    }

    fn report_bad(&self, offset: u64, reason: String, torn: bool) -> ReadOutcome {
        // Recovery logs what it does about it (drop a torn tail, stop, fail).
        tracing::debug!(path = %self.path.display(), offset, torn, %reason, "damaged log record");
        ReadOutcome::Bad {
            offset,
            reason,
            torn,
        }
    }

    /// A FULL or FIRST fragment at `offset` arrived: a record still being assembled lost its
    /// LAST fragment.
    fn drop_partial(&mut self, offset: u64) {
        if let Some(first) = self.partial.take() {
            self.note_damage(
                first,
                format!("record has no LAST fragment: a new record starts at byte {offset}"),
            );
        }
    }

    fn note_damage(&mut self, offset: u64, reason: String) {
        match &mut self.damage {
            None => {
                self.damage = Some(Damage {
                    offset,
                    reason,
                    more: 0,
                });
            }
            Some(damage) => damage.more += 1,
        }
    }

    /// Reads the next fragment, skipping block trailers and loading blocks as needed.
    fn step(&mut self) -> Result<Step> {
        loop {
            let left_in_block = BLOCK_SIZE - self.pos;
            if left_in_block < HEADER_SIZE {
                // Trailer (or a block used up). A short block is the file's last.
                if self.block_len < BLOCK_SIZE {
                    return Ok(Step::Eof);
                }
                self.load_next_block()?;
                continue;
            }
            let offset = self.block_start + self.pos as u64;
            let available = self.block_len - self.pos;
            if available == 0 {
                return Ok(Step::Eof);
            }
            let rest = self.block.get(self.pos..self.block_len).unwrap_or_default();
            let Some(header) = rest.get(..HEADER_SIZE) else {
                self.pos = self.block_len;
                return Ok(Step::Damaged {
                    offset,
                    reason: format!(
                        "fragment header cut short: the file ends {available} bytes into it"
                    ),
                });
            };
            let stored_crc = get_fixed32(header, 0).unwrap_or_default();
            let length = header
                .get(4..6)
                .and_then(|b| <[u8; 2]>::try_from(b).ok())
                .map_or(0, |b| usize::from(u16::from_le_bytes(b)));
            let type_byte = header.get(6).copied().unwrap_or_default();
            let zeroed = header.iter().all(|&b| b == 0);
            let end = HEADER_SIZE + length;
            if end > left_in_block {
                self.pos = self.block_len;
                return Ok(Step::Damaged {
                    offset,
                    reason: format!(
                        "bad fragment length {length}: only {} bytes are left in the block",
                        left_in_block - HEADER_SIZE
                    ),
                });
            }
            let Some(payload) = rest.get(HEADER_SIZE..end) else {
                self.pos = self.block_len;
                return Ok(Step::Damaged {
                    offset,
                    reason: format!(
                        "fragment payload cut short: the file ends after {} of its {length} bytes",
                        available - HEADER_SIZE
                    ),
                });
            };
            let actual_crc = fragment_crc(type_byte, payload);
            if actual_crc != stored_crc {
                self.pos = self.block_len;
                let reason = if zeroed {
                    "zero-filled fragment header (unwritten or wiped space)".to_string()
                } else {
                    format!(
                        "checksum mismatch: stored {stored_crc:#010x}, computed {actual_crc:#010x}"
                    )
                };
                return Ok(Step::Damaged { offset, reason });
            }
            let Ok(ty) = RecordType::try_from(type_byte) else {
                self.pos = self.block_len;
                return Ok(Step::Damaged {
                    offset,
                    reason: format!("unknown fragment type {type_byte}"),
                });
            };
            let start = self.pos + HEADER_SIZE;
            self.pos += end;
            return Ok(Step::Fragment {
                offset,
                ty,
                start,
                end: self.pos,
            });
        }
    }

    /// Reads the next block (fewer than `BLOCK_SIZE` bytes only at the end of the file).
    fn load_next_block(&mut self) -> Result<()> {
        let mut filled = 0;
        let want = usize::try_from(self.limit.saturating_sub(self.next_block))
            .map_or(BLOCK_SIZE, |left| left.min(BLOCK_SIZE));
        while let Some(room) = self.block.get_mut(filled..want).filter(|r| !r.is_empty()) {
            match self.file.read_at(room, self.next_block + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io(&self.path, e)),
            }
        }
        self.block_start = self.next_block;
        self.next_block += BLOCK_SIZE as u64;
        self.block_len = filled;
        self.pos = 0;
        Ok(())
    }
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader")
            .field("path", &self.path)
            .field("position", &(self.block_start + self.pos as u64))
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl Damage {
    fn describe(&self) -> String {
        if self.more == 0 {
            self.reason.clone()
        } else {
            format!(
                "{} (then {} more damaged or orphan fragments)",
                self.reason, self.more
            )
        }
    }
}
