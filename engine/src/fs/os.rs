//! [`OsFs`]: the real file system through `std::fs` (Unix only: positional reads with
//! `pread`, locks with `flock`).

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{self, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{DirEntry, FileLock, FileSystem, RandomAccessFile, WritableFile};

/// The operating system's file system. Stateless; share it as [`super::os()`].
#[derive(Debug, Clone, Copy, Default)]
pub struct OsFs;

#[derive(Debug)]
struct OsWritable(File);

impl WritableFile for OsWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        self.0.write_all(data)
    }

    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }

    #[cfg(target_os = "linux")]
    fn start_writeback(&mut self, offset: u64, len: u64) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return Ok(()); // past any file size: nothing to start
        };
        // SAFETY: `sync_file_range` takes an open descriptor (owned by `self.0` for the whole
        // call) and three integers, and reads or writes no memory of this process: it only
        // queues the range's dirty pages for writeback. Exercised by
        // `fs::tests::start_writeback_then_sync_keeps_the_bytes`.
        #[expect(unsafe_code, reason = "an FFI call without pointers; see SAFETY")]
        let rc = unsafe {
            libc::sync_file_range(self.0.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        self.0.set_len(len)?;
        self.0.seek(SeekFrom::Start(len)).map(|_| ())
    }

    fn size(&self) -> io::Result<u64> {
        self.0.metadata().map(|m| m.len())
    }
}

#[derive(Debug)]
struct OsReadable(File);

impl RandomAccessFile for OsReadable {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        FileExt::read_at(&self.0, buf, offset)
    }

    fn size(&self) -> io::Result<u64> {
        self.0.metadata().map(|m| m.len())
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        FileExt::read_exact_at(&self.0, buf, offset)
    }
}

/// An `flock` held on an open file description; closing the file releases it.
#[derive(Debug)]
struct OsLock(
    #[expect(dead_code, reason = "held only for its drop, which releases the lock")] File,
);

impl FileLock for OsLock {}

impl FileSystem for OsFs {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new().write(true).create_new(true).open(path)?;
        Ok(Box::new(OsWritable(file)))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        Ok(Box::new(OsWritable(File::create(path)?)))
    }

    fn open_writable(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let mut file = OpenOptions::new().write(true).open(path)?;
        file.seek(SeekFrom::End(0))?;
        Ok(Box::new(OsWritable(file)))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        Ok(Arc::new(OsReadable(File::open(path)?)))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir_all(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut entries = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            entries.push(DirEntry {
                path: entry.path(),
                is_dir: entry.file_type()?.is_dir(),
            });
        }
        Ok(entries)
    }

    fn file_size(&self, path: &Path) -> io::Result<u64> {
        std::fs::metadata(path).map(|m| m.len())
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn hard_link(&self, src: &Path, dst: &Path) -> io::Result<()> {
        std::fs::hard_link(src, dst)
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }

    fn available_space(&self, path: &Path) -> io::Result<Option<u64>> {
        let st = rustix::fs::statvfs(path)?;
        // Root may write into the blocks reserved for it (ext4's 5%), others may not.
        let blocks = if rustix::process::geteuid().is_root() {
            st.f_bfree
        } else {
            st.f_bavail
        };
        Ok(Some(blocks.saturating_mul(st.f_frsize)))
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(OsLock(file))),
            Err(TryLockError::WouldBlock) => Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the lock is held by another open file description",
            )),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }
}
