//! The engine's one error type.
//!
//! Variants are grouped by what a caller can do about them: retry after fixing the input
//! (`InvalidArgument`), repair or restore the files (`Corruption`, `ChecksumMismatch`), close and
//! reopen (`Poisoned`), or wait for the other owner (`Locked`).

use std::path::PathBuf;

/// Result alias used throughout the engine.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong inside the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed on `path`.
    #[error("I/O error on {}: {source}", path.display())]
    Io {
        /// File or directory the failing call touched.
        path: PathBuf,
        /// The error the operating system reported.
        #[source]
        source: std::io::Error,
    },

    /// A file's contents do not follow its format (`docs/format/*.md`).
    #[error("corruption in {} at byte offset {offset}: {reason}", file.display())]
    Corruption {
        /// The damaged file.
        file: PathBuf,
        /// Byte offset in `file` where the damage was detected.
        offset: u64,
        /// What was wrong, in words.
        reason: String,
    },

    /// A stored CRC32C does not match the bytes it covers.
    #[error(
        "checksum mismatch in {} at byte offset {offset}: stored {expected:#010x}, computed {actual:#010x}",
        file.display()
    )]
    ChecksumMismatch {
        /// The damaged file.
        file: PathBuf,
        /// Byte offset of the checksummed region in `file`.
        offset: u64,
        /// The checksum stored in the file.
        expected: u32,
        /// The checksum computed over the bytes read.
        actual: u32,
    },

    /// The caller passed something the engine refuses (a key over 64 KiB, a bad option, ...).
    /// Nothing was written; the database stays usable.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A [`crate::TableSorter`] was given the same key twice (its tables would hold two
    /// entries for one key). Nothing of the sort is ingested; the database is untouched.
    #[error("key {} was added to the sort twice", key_for_message(key))]
    DuplicateKey {
        /// The key given twice.
        key: Vec<u8>,
    },

    /// Another `Db` (in this or another process) holds the directory's `LOCK` file.
    #[error("database at {} is locked by another open instance", path.display())]
    Locked {
        /// The `LOCK` file that could not be acquired.
        path: PathBuf,
    },

    /// Writes are refused since an earlier failure (or this call's, for a manifest update
    /// whose durability is unknown). Either a write, fsync, flush or manifest update failed, so
    /// the durable state is in doubt: when a resource ran out (a full disk: `resumable`) the
    /// database resumes once it is back ([`crate::Db::resume`], automatic by default);
    /// otherwise close and reopen the database to recover from the files. Or a compaction read
    /// damaged data ([`Error::Corruption`] naming the table): nothing durable is in doubt, but
    /// the table must be restored or repaired (`strata check` lists the damage) before the
    /// database is reopened. `reason` says which, and what to do.
    #[error("database is poisoned: {reason}")]
    Poisoned {
        /// What failed first, and what to do about it.
        reason: String,
        /// The failure was a resource running out ([`Error::is_resource_exhausted`]), and the
        /// database takes writes again once it is back, without a reopen.
        resumable: bool,
    },

    /// The database was closed; no more operations are accepted on this handle.
    #[error("database is closed")]
    Closed,

    /// A write, flush, compaction, ingest or keyspace change on a database opened with
    /// [`crate::Options::read_only`].
    #[error("the database was opened read-only")]
    ReadOnly,

    /// The sequence number space (2^56 - 1 values) is exhausted; writes are refused.
    #[error("sequence numbers exhausted: last sequence number is {last}")]
    SeqNoExhausted {
        /// The last sequence number handed out.
        last: u64,
    },
}

impl Error {
    /// Wraps an I/O error with the path it concerns.
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }

    /// Builds a [`Error::Corruption`], logged at debug level only: whoever surfaces the error
    /// reports it (the `strata` commands print it, the server logs it with the command that
    /// met it, a background flush or compaction poisons the database with it). Some are
    /// expected and handled: a read-only open beside a writer that finds a table deleted
    /// under it starts over.
    pub(crate) fn corruption(
        file: impl Into<PathBuf>,
        offset: u64,
        reason: impl Into<String>,
    ) -> Self {
        let (file, reason) = (file.into(), reason.into());
        tracing::debug!(file = %file.display(), offset, %reason, "corruption detected");
        Error::Corruption {
            file,
            offset,
            reason,
        }
    }

    /// True for an I/O error whose `errno` is `EMFILE` or `ENFILE`: the process or the system
    /// has no file descriptor left.
    pub fn is_out_of_descriptors(&self) -> bool {
        use rustix::io::Errno;
        self.has_errno(&[Errno::MFILE, Errno::NFILE])
    }

    /// True for an I/O error that reports a resource running out rather than data in doubt:
    /// no space left (`ENOSPC`), the disk quota reached (`EDQUOT`), or no file descriptor
    /// left ([`Error::is_out_of_descriptors`]). A compaction failing so changed nothing (its
    /// inputs stay, its outputs are removed, nothing was logged), and may succeed once space
    /// or descriptors are freed; a database poisoned by a WAL write failing so can be resumed
    /// ([`crate::Db::resume`]).
    /// Also true for [`Error::Poisoned`] when such a failure caused it (`resumable`).
    pub fn is_resource_exhausted(&self) -> bool {
        use rustix::io::Errno;
        matches!(
            self,
            Error::Poisoned {
                resumable: true,
                ..
            }
        ) || self.is_out_of_descriptors()
            || self.has_errno(&[Errno::NOSPC, Errno::DQUOT])
    }

    /// True for an [`Error::Io`] whose OS error is one of `errnos`.
    fn has_errno(&self, errnos: &[rustix::io::Errno]) -> bool {
        let Error::Io { source, .. } = self else {
            return false;
        };
        source
            .raw_os_error()
            .is_some_and(|code| errnos.iter().any(|e| e.raw_os_error() == code))
    }

    /// True for the variants that mean on-disk data is damaged.
    pub fn is_corruption(&self) -> bool {
        matches!(
            self,
            Error::Corruption { .. } | Error::ChecksumMismatch { .. }
        )
    }
}

/// Bytes of a key shown in an error message; the rest is counted, not printed (keys reach
/// 64 KiB).
const KEY_BYTES_SHOWN: usize = 64;

/// `key` for an error message: its UTF-8 (lossy) quoted as `{:?}` quotes a string, cut after
/// the first 64 bytes with `... (N bytes)` appended when longer.
pub(crate) fn key_for_message(key: &[u8]) -> String {
    match key.get(..KEY_BYTES_SHOWN) {
        Some(shown) if key.len() > KEY_BYTES_SHOWN => format!(
            "{:?}... ({} bytes)",
            String::from_utf8_lossy(shown),
            key.len()
        ),
        _ => format!("{:?}", String::from_utf8_lossy(key)),
    }
}

/// Extension to attach a path to `std::io::Result`.
pub(crate) trait IoContext<T> {
    /// Maps an `io::Error` into [`Error::Io`] naming `path`.
    fn ctx(self, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| Error::io(path, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_keys_are_cut_in_messages() {
        assert_eq!(key_for_message(b"abc"), "\"abc\"");
        assert_eq!(
            key_for_message(&[b'x'; 64]),
            format!("\"{}\"", "x".repeat(64))
        );
        let long = vec![b'y'; 65_536];
        assert_eq!(
            key_for_message(&long),
            format!("\"{}\"... (65536 bytes)", "y".repeat(64))
        );
        let e = Error::DuplicateKey { key: long };
        assert!(e.to_string().len() < 200, "{e}");
    }
}
