//! The manifest file and `CURRENT` (spec: `docs/format/manifest.md`, sections 1, 3 and 4).
//!
//! ```text
//! MANIFEST-NNNNNN := record*            WAL record framing (docs/format/wal.md)
//! record payload  := one encoded VersionEdit; the first is a snapshot of the whole state
//! CURRENT         := "MANIFEST-" digits{6,} "\n"
//! ```
//!
//! `CURRENT` is switched by writing `CURRENT.tmp`, fsyncing it, renaming it over `CURRENT` and
//! fsyncing the directory. Reading tolerates exactly one kind of damage: damage confined to the
//! last record, with no intact record after it (what a crash mid-append leaves). Everything
//! else is [`Error::Corruption`].

use std::fmt;
use std::path::{Path, PathBuf};

use crate::error::{Error, IoContext, Result};
use crate::filename::{self, FileKind};
use crate::fs::FileSystem;
use crate::types::FileNumber;
use crate::version::edit::VersionEdit;
use crate::wal::{self, ReadOutcome};

/// Size in bytes past which a manifest is rolled over: the next edit goes into a new manifest
/// that starts with a snapshot edit, instead of being appended.
pub const MAX_MANIFEST_SIZE: u64 = 64 << 20;

/// Temporary file used to replace `CURRENT` atomically.
const CURRENT_TMP: &str = "CURRENT.tmp";

/// A manifest open for appending. Not shared: the `VersionSet` owns it.
pub(crate) struct ManifestWriter {
    number: FileNumber,
    path: PathBuf,
    writer: wal::Writer,
}

impl fmt::Debug for ManifestWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ManifestWriter")
            .field("path", &self.path)
            .field("len", &self.writer.len())
            .finish()
    }
}

impl ManifestWriter {
    /// Creates `MANIFEST-<number>` in `dir` (replacing a leftover file of that name), writes
    /// the `snapshot` edits (one per keyspace) as its first records and fsyncs it. `CURRENT`
    /// is not touched.
    ///
    /// # Errors
    /// [`Error::Io`] naming the manifest; the partial file is removed.
    pub(crate) fn create(
        fs: &dyn FileSystem,
        dir: &Path,
        number: FileNumber,
        snapshot: &[VersionEdit],
    ) -> Result<Self> {
        let path = filename::manifest_path(dir, number);
        let write = || -> Result<wal::Writer> {
            let mut writer = wal::Writer::create(fs, &path)?;
            for edit in snapshot {
                let mut record = Vec::new();
                edit.encode(&mut record);
                writer.add_record(&record)?;
            }
            writer.sync()?;
            Ok(writer)
        };
        let writer = write().inspect_err(|_| {
            // Not named by `CURRENT` yet: on a full disk it holds space a retry needs.
            let _ = fs.remove_file(&path);
        })?;
        tracing::debug!(
            path = %path.display(),
            len = writer.len(),
            keyspaces = snapshot.len(),
            files = snapshot.iter().map(|e| e.new_files.len()).sum::<usize>(),
            "wrote manifest snapshot"
        );
        Ok(ManifestWriter {
            number,
            path,
            writer,
        })
    }

    /// Appends `edit` as one record and fsyncs. After an error the file's tail is in doubt:
    /// the caller must not append again.
    ///
    /// # Errors
    /// [`Error::Io`] naming the manifest.
    pub(crate) fn append(&mut self, edit: &VersionEdit) -> Result<()> {
        let mut record = Vec::new();
        edit.encode(&mut record);
        self.writer.add_record(&record)?;
        self.writer.sync()
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> u64 {
        self.writer.len()
    }

    /// The manifest's file number.
    pub(crate) fn number(&self) -> FileNumber {
        self.number
    }

    /// The manifest's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads `CURRENT` in `dir` and returns the number of the manifest it names.
///
/// # Errors
/// [`Error::Corruption`] naming `CURRENT` if it is missing or not exactly
/// `MANIFEST-<digits>\n`; [`Error::Io`] if it cannot be read for another reason.
pub fn read_current(fs: &dyn FileSystem, dir: &Path) -> Result<FileNumber> {
    let path = dir.join(filename::CURRENT);
    let bytes = match fs.read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::corruption(&path, 0, "CURRENT is missing"));
        }
        Err(e) => return Err(Error::io(&path, e)),
    };
    let name = bytes
        .strip_suffix(b"\n")
        .and_then(|b| std::str::from_utf8(b).ok());
    match name.map(|name| (name, filename::parse(name))) {
        // Exactly the name the manifest's number gives (docs/format/manifest.md, section 3):
        // `MANIFEST-3` or `MANIFEST-0000003` would name another file than the one opened.
        Some((name, Some(FileKind::Manifest(n)))) if name == filename::manifest_name(n) => Ok(n),
        _ => Err(Error::corruption(
            &path,
            0,
            format!(
                "CURRENT must hold a manifest name and a newline, found {:?}",
                String::from_utf8_lossy(bytes.get(..64).unwrap_or(&bytes))
            ),
        )),
    }
}

/// Points `CURRENT` in `dir` at manifest `number`, atomically: write `CURRENT.tmp`, fsync it,
/// rename it over `CURRENT`, fsync `dir`. A crash leaves `CURRENT` naming the old or the new
/// manifest; the new one must be complete and fsynced before this is called.
///
/// # Errors
/// [`Error::Io`] naming the file or directory that failed. After an error `CURRENT` may name
/// either manifest.
pub fn set_current(fs: &dyn FileSystem, dir: &Path, number: FileNumber) -> Result<()> {
    let tmp = dir.join(CURRENT_TMP);
    let content = format!("{}\n", filename::manifest_name(number));
    let write = || -> std::io::Result<()> {
        let mut f = fs.create(&tmp)?;
        f.append(content.as_bytes())?;
        f.sync()
    };
    if let Err(e) = write() {
        // Best effort: a leftover CURRENT.tmp is also deleted on the next open.
        let _ = fs.remove_file(&tmp);
        return Err(Error::io(&tmp, e));
    }
    let current = dir.join(filename::CURRENT);
    fs.rename(&tmp, &current).ctx(&current)?;
    filename::sync_dir(fs, dir)?;
    tracing::debug!(dir = %dir.display(), manifest = %number, "switched CURRENT");
    Ok(())
}

/// How a replayed manifest ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReplayEnd {
    /// Every record was intact.
    Clean,
    /// The last record was damaged (torn by a crash) and was ignored.
    TornTail {
        /// Offset of the torn record.
        offset: u64,
    },
}

/// Reads the manifest at `path` and calls `apply(offset, edit)` for each record in order.
/// A damaged last record with nothing intact after it is ignored (see the module docs);
/// `apply`'s errors stop the replay and are returned.
///
/// # Errors
/// [`Error::Corruption`] naming `path` and the record's offset for a damaged record (other than
/// a torn tail) or an edit that does not decode; [`Error::Io`] from reading.
pub(crate) fn replay(
    fs: &dyn FileSystem,
    path: &Path,
    mut apply: impl FnMut(u64, VersionEdit) -> Result<()>,
) -> Result<ReplayEnd> {
    // Only the bytes there now: a read-only open beside a live writer must not take an edit
    // being appended for damage that an intact record follows.
    let end = fs.file_size(path).ctx(path)?;
    let mut reader = wal::Reader::open_prefix(fs, path, end)?;
    loop {
        match reader.next_outcome()? {
            ReadOutcome::Record { offset, payload } => {
                let edit = VersionEdit::decode(&payload).map_err(|reason| {
                    Error::corruption(path, offset, format!("bad version edit: {reason}"))
                })?;
                apply(offset, edit)?;
            }
            ReadOutcome::Bad {
                offset,
                reason,
                torn,
            } => {
                // Tolerated only when nothing intact follows: the reader says so with its next
                // outcome, and `later_record_start` checks the bytes the reader skipped (it drops the
                // rest of a damaged block, which may hold later records).
                let at_tail = matches!(reader.next_outcome()?, ReadOutcome::Eof);
                let later = if at_tail {
                    wal::scan::later_record_start_before(fs, path, offset, end)?
                } else {
                    None
                };
                if at_tail && later.is_none() {
                    tracing::debug!(
                        path = %path.display(),
                        offset,
                        torn,
                        %reason,
                        "ignoring torn last manifest record"
                    );
                    return Ok(ReplayEnd::TornTail { offset });
                }
                let after = later.map_or_else(
                    || "intact records follow".to_owned(),
                    |at| format!("the skipped bytes hold an intact record at byte {at}"),
                );
                return Err(Error::corruption(
                    path,
                    offset,
                    format!("damaged manifest record ({after}): {reason}"),
                ));
            }
            ReadOutcome::Eof => return Ok(ReplayEnd::Clean),
        }
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::fs::OsFs;

    #[test]
    fn current_round_trips_and_rejects_garbage() -> Result<()> {
        let dir = tempfile::tempdir().map_err(|e| Error::io("tempdir", e))?;
        let err = read_current(&OsFs, dir.path()).expect_err("missing CURRENT");
        assert!(matches!(err, Error::Corruption { ref file, .. } if file.ends_with("CURRENT")));

        set_current(&OsFs, dir.path(), FileNumber(14))?;
        let content = std::fs::read(dir.path().join("CURRENT")).map_err(|e| Error::io("r", e))?;
        assert_eq!(content, b"MANIFEST-000014\n");
        assert_eq!(read_current(&OsFs, dir.path())?, FileNumber(14));
        assert!(!dir.path().join(CURRENT_TMP).exists());

        for garbage in [
            &b""[..],
            b"MANIFEST-000014",
            b"MANIFEST-000014\n\n",
            b"MANIFEST-000014 \n",
            b"000014.sst\n",
            b"MANIFEST-\n",
            b"\xff\xfe\n",
        ] {
            std::fs::write(dir.path().join("CURRENT"), garbage).map_err(|e| Error::io("w", e))?;
            let err = read_current(&OsFs, dir.path()).expect_err("garbage CURRENT");
            assert!(
                matches!(err, Error::Corruption { ref file, .. } if file.ends_with("CURRENT")),
                "{garbage:?}: {err}"
            );
        }
        Ok(())
    }
}
