//! [`VersionSet`]: the current version, the counters, and the live manifest.
//!
//! State machine: `create_new` or `recover` yields a set with an open manifest; every
//! `log_and_apply` appends one edit (or rolls over to a new manifest past
//! [`MAX_MANIFEST_SIZE`](super::MAX_MANIFEST_SIZE)). After a failed manifest write the set is
//! poisoned: it refuses further edits, because the manifest's tail is in doubt.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, IoContext, Result};
use crate::filename::{self, FileKind};
use crate::types::{FileNumber, SeqNo};
use crate::version::edit::VersionEdit;
use crate::version::manifest::{self, MAX_MANIFEST_SIZE, ManifestWriter};
use crate::version::version::{Builder, Version};

/// File numbers at or above this are refused by recovery as implausible (so the counter never
/// overflows).
const MAX_FILE_NUMBER: FileNumber = FileNumber(1 << 62);

/// The current [`Version`] plus the database-wide counters (file numbers, last sequence number,
/// log number) and the manifest that records them.
///
/// Not thread-safe by itself: the database keeps it behind its state mutex. Versions handed out
/// by [`VersionSet::current`] are immutable and may be used without the lock.
#[derive(Debug)]
pub struct VersionSet {
    dir: PathBuf,
    current: Arc<Version>,
    next_file_number: FileNumber,
    last_seqno: SeqNo,
    log_number: FileNumber,
    /// The live manifest; `CURRENT` names it.
    manifest: ManifestWriter,
    /// Set by the first failed manifest write; every later `log_and_apply` fails with it.
    poisoned: Option<String>,
    /// Rollover threshold, [`MAX_MANIFEST_SIZE`] except in tests.
    max_manifest_size: u64,
}

impl VersionSet {
    /// Creates `MANIFEST-000001` (file number 1) holding an initial edit (`log_number` 0,
    /// `next_file_number` 2, `last_seqno` 0, no tables) in `dir`, which must hold no database,
    /// and points `CURRENT` at it. A `MANIFEST-000001` left by a crashed earlier creation is
    /// overwritten.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `dir` already has a `CURRENT` file; [`Error::Io`].
    pub fn create_new(dir: &Path) -> Result<VersionSet> {
        let current = dir.join(filename::CURRENT);
        if current.try_exists().ctx(&current)? {
            return Err(Error::InvalidArgument(format!(
                "{} already holds a database (CURRENT exists)",
                dir.display()
            )));
        }
        let number = FileNumber(1);
        let next_file_number = FileNumber(2);
        // Without CURRENT a leftover MANIFEST-000001 was never live.
        let leftover = filename::manifest_path(dir, number);
        match std::fs::remove_file(&leftover) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(Error::io(&leftover, e));
            }
            _ => {}
        }
        let snapshot = VersionEdit {
            log_number: Some(FileNumber(0)),
            next_file_number: Some(next_file_number),
            last_seqno: Some(SeqNo::ZERO),
            ..VersionEdit::default()
        };
        let manifest = ManifestWriter::create(dir, number, &snapshot)?;
        manifest::set_current(dir, number)?;
        tracing::debug!(dir = %dir.display(), "created new database manifest");
        Ok(VersionSet {
            dir: dir.to_owned(),
            current: Arc::new(Version::empty()),
            next_file_number,
            last_seqno: SeqNo::ZERO,
            log_number: FileNumber(0),
            manifest,
            poisoned: None,
            max_manifest_size: MAX_MANIFEST_SIZE,
        })
    }

    /// Reads `CURRENT`, replays every edit of the manifest it names, then writes a new manifest
    /// holding one snapshot edit of the whole state, switches `CURRENT` to it and deletes the old
    /// manifest.
    ///
    /// Counters are made consistent on the way: the file-number counter is raised above every
    /// number the manifest mentions and every numbered file in `dir` (a WAL created after the
    /// last edit may exist), and `last_seqno` to at least every table's `largest_seqno`.
    ///
    /// A damaged **last** record with nothing intact after it (what a crash mid-append leaves:
    /// cut short, zero-filled or garbage) is ignored: that edit was never acknowledged. Any other
    /// damage fails (see `docs/format/manifest.md`, "the torn-tail rule").
    ///
    /// # Errors
    /// - [`Error::Corruption`] naming `CURRENT` if it is missing, garbage, or names a manifest
    ///   that does not exist;
    /// - [`Error::Corruption`] naming the manifest and the record's offset for a damaged record,
    ///   an edit that does not decode (a level `>= NUM_LEVELS` included) or does not apply
    ///   (deleting a missing table, adding a duplicate), a final version that breaks the
    ///   invariants, or a manifest that never sets the counters;
    /// - [`Error::Io`].
    pub fn recover(dir: &Path) -> Result<VersionSet> {
        let old_number = manifest::read_current(dir)?;
        let path = filename::manifest_path(dir, old_number);
        if !path.try_exists().ctx(&path)? {
            return Err(Error::corruption(
                dir.join(filename::CURRENT),
                0,
                format!(
                    "CURRENT names {}, which does not exist",
                    filename::manifest_name(old_number)
                ),
            ));
        }

        let mut builder = Builder::new(&Version::empty());
        let (mut log_number, mut next_file_number, mut last_seqno) = (None, None, None);
        let mut max_referenced = old_number;
        let mut last_offset = 0;
        let mut records = 0_u64;
        let end = manifest::replay(&path, |offset, edit| {
            builder.apply(&edit).map_err(|reason| {
                Error::corruption(&path, offset, format!("edit does not apply: {reason}"))
            })?;
            log_number = edit.log_number.or(log_number);
            next_file_number = edit.next_file_number.or(next_file_number);
            last_seqno = edit.last_seqno.or(last_seqno);
            let numbers = edit.new_files.iter().map(|(_, f)| f.number);
            max_referenced = numbers
                .chain(edit.log_number)
                .fold(max_referenced, FileNumber::max);
            last_offset = offset;
            records += 1;
            Ok(())
        })?;
        let version = builder.finish().map_err(|reason| {
            Error::corruption(
                &path,
                last_offset,
                format!("replayed version is invalid: {reason}"),
            )
        })?;
        let (Some(log_number), Some(next_file_number), Some(last_seqno)) =
            (log_number, next_file_number, last_seqno)
        else {
            let len = std::fs::metadata(&path).ctx(&path)?.len();
            return Err(Error::corruption(
                &path,
                len,
                "manifest does not set log_number, next_file_number and last_seqno",
            ));
        };

        let last_seqno = version
            .levels
            .iter()
            .flatten()
            .map(|f| f.largest_seqno)
            .fold(last_seqno, SeqNo::max);
        // The new manifest's number must exceed every number in use, including files created
        // after the last edit was written (the newest WAL).
        let new_number = numbered_files(dir)?
            .into_iter()
            .chain([max_referenced])
            .map(|n| FileNumber(n.0.saturating_add(1)))
            .fold(next_file_number, FileNumber::max);
        tracing::debug!(
            manifest = %path.display(),
            records,
            end = ?end,
            files = version.num_files(),
            "replayed manifest"
        );

        if new_number >= MAX_FILE_NUMBER {
            return Err(Error::corruption(
                &path,
                0,
                format!("implausible file number {new_number}: the counter would overflow"),
            ));
        }
        let next_file_number = FileNumber(new_number.0 + 1);
        let snapshot = snapshot_edit(&version, log_number, next_file_number, last_seqno);
        let manifest = ManifestWriter::create(dir, new_number, &snapshot)?;
        manifest::set_current(dir, new_number)?;
        remove_old_manifest(&path);
        Ok(VersionSet {
            dir: dir.to_owned(),
            current: Arc::new(version),
            next_file_number,
            last_seqno,
            log_number,
            manifest,
            poisoned: None,
            max_manifest_size: MAX_MANIFEST_SIZE,
        })
    }

    /// The database directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The current version. It stays valid (and its tables alive on disk, as long as the
    /// database honours [`VersionSet::live_files`]) while the caller holds it.
    pub fn current(&self) -> Arc<Version> {
        Arc::clone(&self.current)
    }

    /// Allocates a new file number (for a WAL or table). It is durable only with the next
    /// edit, which records the counter.
    pub fn new_file_number(&mut self) -> FileNumber {
        let n = self.next_file_number;
        self.next_file_number = FileNumber(n.0 + 1);
        n
    }

    /// Ensures the counter is above `n` (for files found on disk during recovery).
    pub fn mark_file_number_used(&mut self, n: FileNumber) {
        if self.next_file_number <= n {
            self.next_file_number = FileNumber(n.0.saturating_add(1));
        }
    }

    /// The number the next [`VersionSet::new_file_number`] will return.
    pub fn next_file_number(&self) -> FileNumber {
        self.next_file_number
    }

    /// The last sequence number used by a write (as far as this set knows).
    pub fn last_seqno(&self) -> SeqNo {
        self.last_seqno
    }

    /// Sets the last sequence number; it becomes durable with the next edit. Must not go
    /// backwards.
    pub fn set_last_seqno(&mut self, s: SeqNo) {
        debug_assert!(
            s >= self.last_seqno,
            "last seqno going backwards: {s} < {}",
            self.last_seqno
        );
        self.last_seqno = s;
    }

    /// WALs numbered below this are obsolete: their writes are in tables.
    pub fn log_number(&self) -> FileNumber {
        self.log_number
    }

    /// File number of the live manifest (the one `CURRENT` names).
    pub fn manifest_number(&self) -> FileNumber {
        self.manifest.number()
    }

    /// Records `edit` durably and installs the resulting version.
    ///
    /// Fills in `next_file_number` (the current counter) and `last_seqno` (the largest of the
    /// set's, the edit's and the new tables' `largest_seqno`), checks that the edit applies
    /// (see [`Version::apply`]), appends it to the manifest and fsyncs, then installs the new
    /// version and counters. When the manifest has grown past the rollover size, the state is
    /// written as a snapshot into a new manifest instead, `CURRENT` is switched to it and the
    /// old manifest deleted.
    ///
    /// # Errors
    /// - [`Error::InvalidArgument`] if the edit does not apply (deleting a missing table, adding
    ///   a duplicate, breaking the level invariants), moves `log_number` backwards, or names a
    ///   file number that was never allocated. Nothing was written; the set stays usable.
    /// - [`Error::Io`] from the manifest write. The set is then poisoned: the manifest's tail is
    ///   in doubt, so this and every later call fail ([`Error::Poisoned`]) and the database must
    ///   be reopened.
    ///
    /// On every error the in-memory version and counters are unchanged.
    pub fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<Arc<Version>> {
        if let Some(reason) = &self.poisoned {
            return Err(Error::Poisoned {
                reason: reason.clone(),
            });
        }
        self.check_numbers(&edit)?;
        let version = self
            .current
            .apply(&edit)
            .map_err(|reason| Error::InvalidArgument(format!("version edit rejected: {reason}")))?;
        let last_seqno = edit
            .new_files
            .iter()
            .map(|(_, f)| f.largest_seqno)
            .chain(edit.last_seqno)
            .fold(self.last_seqno, SeqNo::max);
        edit.next_file_number = Some(self.next_file_number);
        edit.last_seqno = Some(last_seqno);
        let log_number = edit.log_number.unwrap_or(self.log_number);

        if self.manifest.len() >= self.max_manifest_size {
            self.roll_over(&version, log_number, last_seqno)
                .map_err(|e| self.poison(e))?;
        } else {
            self.manifest.append(&edit).map_err(|e| self.poison(e))?;
        }
        tracing::debug!(%edit, "applied version edit");
        self.current = Arc::new(version);
        self.log_number = log_number;
        self.last_seqno = last_seqno;
        Ok(Arc::clone(&self.current))
    }

    /// Every file number the current version references, plus the live manifest. WALs are not
    /// included (the database keeps those numbered `>= log_number`), nor tables still being
    /// written by a flush or compaction (the database tracks those as pending outputs).
    pub fn live_files(&self) -> HashSet<FileNumber> {
        self.current
            .all_file_numbers()
            .chain(std::iter::once(self.manifest.number()))
            .collect()
    }

    /// Sets the rollover size (tests use a small one). Default [`MAX_MANIFEST_SIZE`].
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn set_max_manifest_size(&mut self, bytes: u64) {
        self.max_manifest_size = bytes;
    }

    /// Writes `version` with the given counters into a new manifest and makes it live. The new
    /// manifest's number is allocated here.
    fn roll_over(&mut self, version: &Version, log_number: FileNumber, last: SeqNo) -> Result<()> {
        let number = self.next_file_number;
        let next = FileNumber(number.0.saturating_add(1));
        let snapshot = snapshot_edit(version, log_number, next, last);
        let new = ManifestWriter::create(&self.dir, number, &snapshot)?;
        manifest::set_current(&self.dir, number)?;
        tracing::debug!(
            old = %self.manifest.path().display(),
            old_len = self.manifest.len(),
            new = %new.path().display(),
            "rolled over manifest"
        );
        self.next_file_number = next;
        let old = std::mem::replace(&mut self.manifest, new);
        remove_old_manifest(old.path());
        Ok(())
    }

    /// Refuses edits naming file numbers that were never handed out or moving `log_number`
    /// backwards.
    fn check_numbers(&self, edit: &VersionEdit) -> Result<()> {
        let next = self.next_file_number;
        if let Some(n) = edit.log_number
            && (n < self.log_number || n >= next)
        {
            return Err(Error::InvalidArgument(format!(
                "version edit rejected: log_number {n} outside [{}, {next})",
                self.log_number
            )));
        }
        if let Some((_, f)) = edit.new_files.iter().find(|(_, f)| f.number >= next) {
            return Err(Error::InvalidArgument(format!(
                "version edit rejected: table {} was never allocated (next file number {next})",
                f.number
            )));
        }
        Ok(())
    }

    /// Records the first manifest failure and passes the error on.
    fn poison(&mut self, e: Error) -> Error {
        tracing::error!(error = %e, "manifest write failed; refusing further version edits");
        self.poisoned = Some(format!("manifest write failed: {e}"));
        e
    }
}

/// A snapshot edit: the counters and every table of `version`, level by level.
fn snapshot_edit(
    version: &Version,
    log_number: FileNumber,
    next_file_number: FileNumber,
    last_seqno: SeqNo,
) -> VersionEdit {
    let mut edit = VersionEdit {
        log_number: Some(log_number),
        next_file_number: Some(next_file_number),
        last_seqno: Some(last_seqno),
        ..VersionEdit::default()
    };
    for (level, files) in version.levels.iter().enumerate() {
        for f in files {
            edit.add_file(level, f.as_ref().clone());
        }
    }
    edit
}

/// Numbers of every WAL, table and manifest in `dir`.
fn numbered_files(dir: &Path) -> Result<Vec<FileNumber>> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).ctx(dir)? {
        let entry = entry.ctx(dir)?;
        let name = entry.file_name();
        if let Some(FileKind::Wal(n) | FileKind::Table(n) | FileKind::Manifest(n)) =
            name.to_str().and_then(filename::parse)
        {
            out.push(n);
        }
    }
    Ok(out)
}

/// Deletes a manifest that `CURRENT` no longer names. Failure only leaves garbage for the next
/// file collection, so it is logged, not returned.
fn remove_old_manifest(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        tracing::warn!(path = %path.display(), error = %e, "could not delete old manifest");
    }
}
