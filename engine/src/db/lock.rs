//! The `LOCK` file: an exclusive advisory lock (`flock`) on `DIR/LOCK`, so only one `Db`, in
//! this process or any other, has a directory open. `flock` locks belong to the open file
//! description, so a second `open` of the same directory in the same process is refused too.

use std::path::Path;

use crate::error::{Error, Result};
use crate::filename;
use crate::fs::{FileLock, FileSystem};

/// Takes the lock on `dir/LOCK`, creating the file if needed. The lock is held until the
/// returned guard is dropped.
///
/// # Errors
/// [`Error::Locked`] when another open file description holds it; [`Error::Io`] otherwise.
pub(crate) fn lock_dir(fs: &dyn FileSystem, dir: &Path) -> Result<Box<dyn FileLock>> {
    let path = dir.join(filename::LOCK);
    match fs.lock(&path) {
        Ok(lock) => Ok(lock),
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Err(Error::Locked { path }),
        Err(e) => Err(Error::io(path, e)),
    }
}
