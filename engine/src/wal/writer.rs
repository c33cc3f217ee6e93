//! Appends records to a log (spec: `docs/format/wal.md` §5).
//!
//! ```text
//! append(record) := trailer? fragment+      one write(2) of all of it
//! trailer        := 0x00{1..6}              when fewer than 7 bytes are left in the block
//! fragment       := crc: u32 LE | length: u16 LE | type: u8 | payload
//! ```

use std::path::{Path, PathBuf};

use super::{BLOCK_SIZE, HEADER_SIZE, MAX_FRAGMENT_PAYLOAD, RecordType, fragment_crc};
use crate::error::{Error, IoContext, Result};
use crate::fs::{FileSystem, WritableFile};

/// Capacity above which the framing buffer is released after an append, so one huge record does
/// not pin its size in memory for the life of the log.
const MAX_RETAINED_BUFFER: usize = 4 << 20;

/// Appends records to one log file.
///
/// Not thread-safe by itself: the database serialises appends (group commit hands one merged
/// batch per group to the single writer). After a failed write or sync the tail of the file is
/// unknown and every later call fails with [`Error::Poisoned`].
pub struct Writer {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    /// Bytes written so far = the file length.
    len: u64,
    /// `len` at the last successful sync: a sync with nothing appended since is skipped.
    synced_len: u64,
    /// `len % BLOCK_SIZE`: where the next byte lands in its block.
    block_offset: usize,
    /// Reused framing buffer: trailer, headers and payloads of one append.
    buf: Vec<u8>,
    /// Set by the first failed write or sync.
    failed: Option<String>,
}

impl Writer {
    /// Creates a new, empty log file at `path` in `fs` (fails if it exists).
    ///
    /// The directory entry is not synced; the caller syncs the directory (`docs/format/files.md`).
    ///
    /// # Errors
    /// [`Error::Io`] naming `path`, including when the file already exists.
    pub fn create(fs: &dyn FileSystem, path: &Path) -> Result<Writer> {
        let file = fs.create_new(path).ctx(path)?;
        tracing::debug!(path = %path.display(), "created log");
        Ok(Writer::with_file(file, path, 0, 0))
    }

    /// Opens an existing log for appending after its first `len` bytes (truncating anything
    /// after `len`), continuing the block layout at offset `len`. Used to reuse a log after
    /// recovery, with `len` = the end of its intact prefix (a `ReadOutcome::Bad` offset, or the
    /// file length).
    ///
    /// When bytes are cut off, the truncation is made durable (fdatasync) before returning, so a
    /// power loss cannot bring the old tail back behind newly appended records.
    ///
    /// # Errors
    /// [`Error::Io`] naming `path`; [`Error::InvalidArgument`] when the file is shorter than `len`.
    pub fn open_append(fs: &dyn FileSystem, path: &Path, len: u64) -> Result<Writer> {
        let mut file = fs.open_writable(path).ctx(path)?;
        let file_len = file.size().ctx(path)?;
        if file_len < len {
            return Err(Error::InvalidArgument(format!(
                "cannot append to {} at byte {len}: the file is only {file_len} bytes long",
                path.display()
            )));
        }
        // The kept bytes may not be durable yet (a process killed before syncing leaves them
        // in the page cache), unless the truncation below syncs them.
        let mut synced_len = 0;
        if file_len > len {
            file.truncate(len).ctx(path)?;
            file.sync().ctx(path)?;
            synced_len = len;
        }
        tracing::debug!(
            path = %path.display(),
            len,
            cut_bytes = file_len - len,
            "opened log for appending"
        );
        Ok(Writer::with_file(file, path, len, synced_len))
    }

    /// `synced_len`: how much of the file is known to be durable.
    fn with_file(file: Box<dyn WritableFile>, path: &Path, len: u64, synced_len: u64) -> Writer {
        Writer {
            file,
            path: path.to_path_buf(),
            len,
            synced_len,
            block_offset: block_offset_of(len),
            buf: Vec::new(),
            failed: None,
        }
    }

    /// Appends one logical record (fragmenting across blocks) and hands it to the OS with one
    /// `write_all` (normally one write system call) of the framed bytes, built in a reused
    /// buffer. Does not fsync: the
    /// record survives the process dying once this returns, and a power loss only after
    /// [`Writer::sync`].
    ///
    /// # Errors
    /// [`Error::Io`] naming the path when the write fails; from then on this writer is poisoned
    /// and every call returns [`Error::Poisoned`].
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
        self.check_usable()?;
        self.buf.clear();
        self.block_offset = frame_record(&mut self.buf, self.block_offset, payload);
        let written = self.file.append(&self.buf);
        let framed = self.buf.len();
        if self.buf.capacity() > MAX_RETAINED_BUFFER {
            self.buf = Vec::new();
        }
        if let Err(e) = written {
            self.failed = Some(format!("write to {} failed: {e}", self.path.display()));
            return Err(Error::io(&self.path, e));
        }
        self.len += framed as u64;
        Ok(())
    }

    /// fdatasync (`File::sync_data`): every record appended so far survives a power loss once
    /// this returns. Nothing is done when nothing was appended since the last sync (a flush
    /// after a synced write, say, syncs once).
    ///
    /// # Errors
    /// [`Error::Io`] naming the path; from then on this writer is poisoned (after a failed
    /// fsync the kernel may have dropped the dirty pages, so retrying cannot be trusted).
    pub fn sync(&mut self) -> Result<()> {
        self.check_usable()?;
        if self.synced_len == self.len {
            return Ok(());
        }
        if let Err(e) = self.file.sync() {
            self.failed = Some(format!("fdatasync of {} failed: {e}", self.path.display()));
            return Err(Error::io(&self.path, e));
        }
        self.synced_len = self.len;
        Ok(())
    }

    /// Bytes written so far (the file length).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing has been written.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn check_usable(&self) -> Result<()> {
        match &self.failed {
            Some(reason) => Err(Error::Poisoned {
                reason: reason.clone(),
                resumable: false,
            }),
            None => Ok(()),
        }
    }
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("path", &self.path)
            .field("len", &self.len)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

/// `len % BLOCK_SIZE`.
#[expect(
    clippy::cast_possible_truncation,
    reason = "the remainder is below BLOCK_SIZE (32 KiB)"
)]
fn block_offset_of(len: u64) -> usize {
    (len % BLOCK_SIZE as u64) as usize
}

/// Appends the framing of `payload` to `dst`, starting at `block_offset` within a block; returns
/// the block offset after it.
fn frame_record(dst: &mut Vec<u8>, mut block_offset: usize, payload: &[u8]) -> usize {
    debug_assert!(block_offset < BLOCK_SIZE);
    dst.reserve(payload.len() + HEADER_SIZE * (payload.len() / BLOCK_SIZE + 2));
    let mut rest = payload;
    let mut first = true;
    loop {
        let left_in_block = BLOCK_SIZE - block_offset;
        if left_in_block < HEADER_SIZE {
            dst.extend_from_slice(&[0; HEADER_SIZE][..left_in_block]);
            block_offset = 0;
        }
        let room = BLOCK_SIZE - block_offset - HEADER_SIZE;
        let (piece, after) = rest.split_at(rest.len().min(room));
        let last = after.is_empty();
        let ty = match (first, last) {
            (true, true) => RecordType::Full,
            (true, false) => RecordType::First,
            (false, false) => RecordType::Middle,
            (false, true) => RecordType::Last,
        };
        let type_byte = u8::from(ty);
        debug_assert!(piece.len() <= MAX_FRAGMENT_PAYLOAD);
        #[expect(
            clippy::cast_possible_truncation,
            reason = "a fragment payload is at most MAX_FRAGMENT_PAYLOAD (32761) bytes"
        )]
        let length = piece.len() as u16;
        dst.extend_from_slice(&fragment_crc(type_byte, piece).to_le_bytes());
        dst.extend_from_slice(&length.to_le_bytes());
        dst.push(type_byte);
        dst.extend_from_slice(piece);
        block_offset += HEADER_SIZE + piece.len();
        if last {
            // A record that ends exactly at the block end leaves the next one at offset 0.
            return block_offset % BLOCK_SIZE;
        }
        rest = after;
        first = false;
    }
}
