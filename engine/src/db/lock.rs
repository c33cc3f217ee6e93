//! The `LOCK` file: an exclusive advisory lock (`flock`) on `DIR/LOCK`, so only one `Db`, in
//! this process or any other, has a directory open. `flock` locks belong to the open file
//! description, so a second `open` of the same directory in the same process is refused too.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::Path;

use crate::error::{Error, IoContext, Result};
use crate::filename;

/// Takes the lock on `dir/LOCK`, creating the file if needed. The lock is held until the
/// returned file is closed.
///
/// # Errors
/// [`Error::Locked`] when another open file description holds it; [`Error::Io`] otherwise.
pub(crate) fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join(filename::LOCK);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .ctx(&path)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(TryLockError::WouldBlock) => Err(Error::Locked { path }),
        Err(TryLockError::Error(e)) => Err(Error::io(path, e)),
    }
}
