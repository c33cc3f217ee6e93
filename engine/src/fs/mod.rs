//! The file-system seam: every file the engine reads or writes goes through [`FileSystem`].
//!
//! [`OsFs`] is the real implementation (`std::fs`, positional reads, `fdatasync`, `flock`).
//! [`MemFs`] keeps files in memory and models what survives a power loss: per file, the length
//! that was synced; per directory, which entries were made durable by a directory sync.
//! [`MemFs::crash`] throws away everything else, and [`MemFs`] can fail the N-th write, sync or
//! rename with `ENOSPC` or `EIO`. The engine's tests use it to crash at every I/O call
//! (`engine/tests/crash_points.rs`) and to check that I/O errors reach the writer
//! (`engine/tests/io_errors.rs`). The design follows LevelDB's `Env` and its
//! fault-injection test environment, and RocksDB's `FileSystem` / `FaultInjectionTestFS`.
//!
//! The seam is deliberately small (`docs/design.md`, "File-system seam"): create, append,
//! sync, truncate, rename, remove, hard link, directory sync, list, positional read, lock.
//! Reads are positional (`pread`), so one open file serves many threads.

mod mem;
mod os;

use std::fmt::Debug;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use mem::{CrashOptions, Fault, FaultOp, MemFs};
pub use os::OsFs;

/// `errno` of "No space left on device", for [`Fault`]s.
pub const ENOSPC: i32 = libc::ENOSPC;
/// `errno` of "Input/output error", for [`Fault`]s.
pub const EIO: i32 = libc::EIO;
/// `errno` of "too many open files" (the process's limit), for [`Fault`].
pub const EMFILE: i32 = libc::EMFILE;

/// A file open for appending. Writes go to the end; nothing is durable before
/// [`WritableFile::sync`] returns.
pub trait WritableFile: Send + Sync + Debug {
    /// Appends all of `data` (one `write_all`).
    ///
    /// # Errors
    /// The operating system's error (`ENOSPC`, `EIO`, ...). Part of `data` may have been
    /// written.
    fn append(&mut self, data: &[u8]) -> io::Result<()>;

    /// Makes every byte appended so far durable (`fdatasync`).
    ///
    /// # Errors
    /// The operating system's error. After a failed sync the kernel may have dropped the dirty
    /// pages: callers must not retry and trust the result.
    fn sync(&mut self) -> io::Result<()>;

    /// Starts writing `len` bytes at `offset` (bytes appended already) back to storage without
    /// waiting for them: a hint that makes a later [`WritableFile::sync`] shorter, as RocksDB's
    /// `bytes_per_sync` does (Linux `sync_file_range(SYNC_FILE_RANGE_WRITE)`). Nothing is
    /// durable before `sync`. The default does nothing.
    ///
    /// # Errors
    /// The operating system's error; callers may ignore it, since `sync` reports any failure
    /// to write the data back.
    fn start_writeback(&mut self, offset: u64, len: u64) -> io::Result<()> {
        let _ = (offset, len);
        Ok(())
    }

    /// Cuts the file to `len` bytes; later appends continue at `len`. Not durable before
    /// [`WritableFile::sync`].
    ///
    /// # Errors
    /// The operating system's error.
    fn truncate(&mut self, len: u64) -> io::Result<()>;

    /// The file's current length in bytes.
    ///
    /// # Errors
    /// The operating system's error.
    fn size(&self) -> io::Result<u64>;
}

/// A file open for positional reads. Thread safe: reads take an offset and share no cursor.
pub trait RandomAccessFile: Send + Sync + Debug {
    /// Reads up to `buf.len()` bytes at `offset` and returns how many were read; fewer only at
    /// the end of the file (0 at or past it).
    ///
    /// # Errors
    /// The operating system's error.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;

    /// The file's length in bytes.
    ///
    /// # Errors
    /// The operating system's error.
    fn size(&self) -> io::Result<u64>;

    /// Fills `buf` from `offset`.
    ///
    /// # Errors
    /// [`io::ErrorKind::UnexpectedEof`] when the file ends first; otherwise the operating
    /// system's error.
    fn read_exact_at(&self, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_at(buf, offset) {
                Ok(0) => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file ends before the requested bytes",
                    ));
                }
                Ok(n) => {
                    buf = buf.get_mut(n..).unwrap_or_default();
                    offset += n as u64;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// A held directory lock; dropping it releases the lock.
pub trait FileLock: Send + Sync + Debug {}

/// One entry of [`FileSystem::list_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    /// Full path of the entry (the listed directory joined with its name).
    pub path: PathBuf,
    /// Whether the entry is a directory.
    pub is_dir: bool,
}

/// The file operations the engine uses. Paths are used as given (no normalisation).
///
/// Every method returns the operating system's error unchanged, so callers can attach the path
/// ([`crate::Error::Io`]).
pub trait FileSystem: Send + Sync + Debug {
    /// Creates a new, empty file for appending.
    ///
    /// # Errors
    /// [`io::ErrorKind::AlreadyExists`] when `path` exists; otherwise the operating system's
    /// error.
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;

    /// Creates `path`, or truncates it to 0 bytes when it exists, for appending.
    ///
    /// # Errors
    /// The operating system's error.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;

    /// Opens an existing file for appending at its end.
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] when missing; otherwise the operating system's error.
    fn open_writable(&self, path: &Path) -> io::Result<Box<dyn WritableFile>>;

    /// Opens an existing file for positional reads.
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] when missing; otherwise the operating system's error.
    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>>;

    /// Renames `from` to `to`, replacing `to` atomically. Durable after [`FileSystem::sync_dir`].
    ///
    /// # Errors
    /// The operating system's error.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;

    /// Removes a file. Durable after [`FileSystem::sync_dir`].
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] when missing; otherwise the operating system's error.
    fn remove_file(&self, path: &Path) -> io::Result<()>;

    /// Removes a directory and everything in it.
    ///
    /// # Errors
    /// The operating system's error.
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Creates a directory and its missing parents.
    ///
    /// # Errors
    /// The operating system's error.
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;

    /// Makes the directory's entries (creations, renames, removals) durable (`fsync` of the
    /// directory).
    ///
    /// # Errors
    /// The operating system's error.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;

    /// Lists a directory's entries (not `.` and `..`), in no particular order.
    ///
    /// # Errors
    /// The operating system's error.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>>;

    /// The length of the file at `path`, in bytes.
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] when missing; otherwise the operating system's error.
    fn file_size(&self, path: &Path) -> io::Result<u64>;

    /// Whether `path` exists (a file or a directory).
    fn exists(&self, path: &Path) -> bool;

    /// Makes `dst` a second name of the file `src`.
    ///
    /// # Errors
    /// The operating system's error (for example across file systems).
    fn hard_link(&self, src: &Path, dst: &Path) -> io::Result<()>;

    /// The absolute form of `path` with symbolic links resolved.
    ///
    /// # Errors
    /// The operating system's error (for example when `path` does not exist).
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf>;

    /// Bytes this process may still write on the file system holding `path` (`statvfs`'s
    /// `f_bavail * f_frsize`, or `f_bfree` for root, who may use the reserved blocks), or
    /// `None` where that is unknown. Used to put off an automatic resume after a full disk
    /// while the disk is still full ([`crate::Db::resume`]). The default is `None`.
    ///
    /// # Errors
    /// The operating system's error (for example when `path` does not exist).
    fn available_space(&self, path: &Path) -> io::Result<Option<u64>> {
        let _ = path;
        Ok(None)
    }

    /// Takes an exclusive lock on `path` (created if missing), held until the returned guard is
    /// dropped.
    ///
    /// # Errors
    /// [`io::ErrorKind::WouldBlock`] when someone else holds it; otherwise the operating
    /// system's error.
    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>>;

    /// Reads a whole file.
    ///
    /// # Errors
    /// As [`FileSystem::open`], and read errors.
    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let file = self.open(path)?;
        let len = usize::try_from(file.size()?)
            .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "file too large to read"))?;
        let mut buf = vec![0u8; len];
        file.read_exact_at(&mut buf, 0)?;
        Ok(buf)
    }

    /// Copies the file `src` to a new file `dst` and syncs the copy (not the directory).
    /// Returns the bytes copied.
    ///
    /// # Errors
    /// [`crate::Error::Io`] naming the file the failed operation was on: `src` when it cannot
    /// be opened or read, `dst` when it cannot be created, written or synced (a full
    /// destination disk names `dst`).
    fn copy(&self, src: &Path, dst: &Path) -> crate::Result<u64> {
        let from = self.open(src).map_err(|e| crate::Error::io(src, e))?;
        let mut to = self.create_new(dst).map_err(|e| crate::Error::io(dst, e))?;
        let mut buf = vec![0u8; 1 << 20];
        let mut offset = 0u64;
        loop {
            let n = from
                .read_at(&mut buf, offset)
                .map_err(|e| crate::Error::io(src, e))?;
            let Some(chunk) = buf.get(..n).filter(|c| !c.is_empty()) else {
                break;
            };
            to.append(chunk).map_err(|e| crate::Error::io(dst, e))?;
            offset += n as u64;
        }
        to.sync().map_err(|e| crate::Error::io(dst, e))?;
        Ok(offset)
    }
}

/// The shared real file system, the default of [`crate::Options::file_system`].
pub fn os() -> Arc<dyn FileSystem> {
    static OS: std::sync::OnceLock<Arc<dyn FileSystem>> = std::sync::OnceLock::new();
    Arc::clone(OS.get_or_init(|| Arc::new(OsFs)))
}

#[cfg(test)]
mod tests;
