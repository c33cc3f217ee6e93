//! File names in a database directory (spec: `docs/format/files.md`).
//!
//! ```text
//! 000012.wal        write-ahead log (one per memtable)
//! 000013.sst        SSTable
//! MANIFEST-000001   manifest: a log of version edits
//! CURRENT           names the live manifest ("MANIFEST-000001\n")
//! LOCK              flock'd by the open instance
//! *.tmp             temporary files, deleted on open
//! ```

use std::path::{Path, PathBuf};

use crate::types::FileNumber;

/// Name of the lock file.
pub const LOCK: &str = "LOCK";
/// Name of the file naming the live manifest.
pub const CURRENT: &str = "CURRENT";

/// Whether `dir` holds a database: a [`CURRENT`] file, which names the live manifest (the
/// test LevelDB's `DB::Open` makes for an existing database). No file is opened.
pub fn holds_database(dir: &Path) -> bool {
    probe_database(dir).unwrap_or(false)
}

/// Like [`holds_database`], but a `CURRENT` that cannot be looked at (permission denied, `dir`
/// a regular file) is an error instead of "no database": `Ok(false)` only when it is absent
/// or not a file.
///
/// # Errors
/// The operating system's error from looking `CURRENT` up, other than "not found".
pub fn probe_database(dir: &Path) -> std::io::Result<bool> {
    match std::fs::metadata(dir.join(CURRENT)) {
        Ok(m) => Ok(m.is_file()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// Directory inside the database directory where an open that ignored a damaged last manifest
/// record puts the tables no record names, instead of deleting them (`docs/format/files.md`).
pub const LOST_DIR: &str = "lost";

/// What a file in the database directory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FileKind {
    /// A WAL, `NNNNNN.wal`.
    Wal(FileNumber),
    /// An SSTable, `NNNNNN.sst`.
    Table(FileNumber),
    /// A manifest, `MANIFEST-NNNNNN`.
    Manifest(FileNumber),
    /// `CURRENT`.
    Current,
    /// `LOCK`.
    Lock,
    /// A temporary file (`*.tmp`).
    Temp,
}

/// Path of WAL number `n` in `dir`.
pub fn wal_path(dir: &Path, n: FileNumber) -> PathBuf {
    dir.join(format!("{n}.wal"))
}

/// Path of SSTable number `n` in `dir`.
pub fn table_path(dir: &Path, n: FileNumber) -> PathBuf {
    dir.join(format!("{n}.sst"))
}

/// Path of manifest number `n` in `dir`.
pub fn manifest_path(dir: &Path, n: FileNumber) -> PathBuf {
    dir.join(manifest_name(n))
}

/// File name (no directory) of manifest number `n`.
pub fn manifest_name(n: FileNumber) -> String {
    format!("MANIFEST-{n}")
}

/// Classifies a directory entry name; `None` for files Strata does not own.
pub fn parse(name: &str) -> Option<FileKind> {
    let number = |digits: &str| -> Option<FileNumber> {
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok().map(FileNumber))
            .flatten()
    };
    match name {
        CURRENT => Some(FileKind::Current),
        LOCK => Some(FileKind::Lock),
        _ if name.ends_with(".tmp") => Some(FileKind::Temp),
        _ => {
            if let Some(rest) = name.strip_prefix("MANIFEST-") {
                number(rest).map(FileKind::Manifest)
            } else if let Some(stem) = name.strip_suffix(".wal") {
                number(stem).map(FileKind::Wal)
            } else if let Some(stem) = name.strip_suffix(".sst") {
                number(stem).map(FileKind::Table)
            } else {
                None
            }
        }
    }
}

/// fsyncs a directory so renames and file creations in it are durable.
///
/// # Errors
/// [`crate::Error::Io`] naming `dir`.
pub fn sync_dir(fs: &dyn crate::fs::FileSystem, dir: &Path) -> crate::Result<()> {
    use crate::error::IoContext;
    fs.sync_dir(dir).ctx(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_parse() {
        let dir = Path::new("/db");
        let n = FileNumber(12);
        let name = |p: PathBuf| p.file_name().and_then(|s| s.to_str()).map(str::to_owned);
        assert_eq!(name(wal_path(dir, n)).as_deref(), Some("000012.wal"));
        assert_eq!(parse("000012.wal"), Some(FileKind::Wal(n)));
        assert_eq!(parse("000012.sst"), Some(FileKind::Table(n)));
        assert_eq!(parse("MANIFEST-000012"), Some(FileKind::Manifest(n)));
        assert_eq!(
            parse("1234567.sst"),
            Some(FileKind::Table(FileNumber(1_234_567)))
        );
        assert_eq!(parse("CURRENT"), Some(FileKind::Current));
        assert_eq!(parse("x.sst"), None);
        assert_eq!(parse(".sst"), None);
        assert_eq!(parse("MANIFEST-"), None);
        assert_eq!(parse("notes.txt"), None);
    }
}
