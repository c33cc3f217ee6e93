//! [`VersionSet`]: the current version, the counters, and the live manifest.
//!
//! State machine: `create_new` or `recover` yields a set with an open manifest; every
//! `log_and_apply` appends one edit (or rolls over to a new manifest past
//! [`MAX_MANIFEST_SIZE`](super::MAX_MANIFEST_SIZE)). After a failed manifest write the set is
//! poisoned: it refuses further edits, because the manifest's tail is in doubt.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, IoContext, Result};
use crate::filename::{self, FileKind};
use crate::fs::FileSystem;
use crate::types::{FileNumber, SeqNo};
use crate::version::edit::VersionEdit;
use crate::version::manifest::{self, MAX_MANIFEST_SIZE, ManifestWriter};
use crate::version::version::{Builder, Version};

/// File numbers at or above this are refused by recovery as implausible (so the counter never
/// overflows).
const MAX_FILE_NUMBER: FileNumber = FileNumber(1 << 62);

/// Id of the default keyspace, which always exists and cannot be dropped.
pub const DEFAULT_KEYSPACE: u32 = 0;

/// Name of the default keyspace.
pub const DEFAULT_KEYSPACE_NAME: &str = "default";

/// One keyspace's state in the version set.
#[derive(Debug, Clone)]
struct KeyspaceVersion {
    name: String,
    current: Arc<Version>,
    /// WALs numbered below this hold no unflushed write of this keyspace.
    log_number: FileNumber,
}

/// The current [`Version`] of every keyspace plus the database-wide counters (file numbers,
/// last sequence number, largest keyspace id) and the manifest that records them.
///
/// Not thread-safe by itself: the database keeps it behind its state mutex. Versions handed out
/// by [`VersionSet::current`] are immutable and may be used without the lock.
#[derive(Debug)]
pub struct VersionSet {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// Live keyspaces by id; [`DEFAULT_KEYSPACE`] is always present.
    keyspaces: BTreeMap<u32, KeyspaceVersion>,
    /// Largest keyspace id ever assigned (dropped ones included).
    max_keyspace_id: u32,
    next_file_number: FileNumber,
    last_seqno: SeqNo,
    /// The manifest `CURRENT` names.
    manifest: Manifest,
    /// Set by the first failed manifest write; every later `log_and_apply` fails with it.
    poisoned: Option<String>,
    /// The failed write ran out of a resource ([`Error::is_resource_exhausted`]), so
    /// [`VersionSet::recover_from_failed_write`] may clear `poisoned`.
    poison_resumable: bool,
    /// Rollover threshold, [`MAX_MANIFEST_SIZE`] except in tests.
    max_manifest_size: u64,
}

/// The manifest of a [`VersionSet`].
#[derive(Debug)]
enum Manifest {
    /// Appended to by every `log_and_apply`.
    Live(ManifestWriter),
    /// The number of the manifest replayed by a read-only set
    /// ([`RecoveredManifest::into_read_only`]), whose every `log_and_apply` fails.
    ReadOnly(FileNumber),
}

impl VersionSet {
    /// Creates `MANIFEST-000001` (file number 1) holding an initial edit (`log_number` 0,
    /// `next_file_number` 2, `last_seqno` 0, no tables) in `dir`, which must hold no database,
    /// and points `CURRENT` at it. A `MANIFEST-000001` left by a crashed earlier creation is
    /// overwritten.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `dir` already has a `CURRENT` file; [`Error::Io`].
    pub fn create_new(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<VersionSet> {
        let current = dir.join(filename::CURRENT);
        if fs.exists(&current) {
            return Err(Error::InvalidArgument(format!(
                "{} already holds a database (CURRENT exists)",
                dir.display()
            )));
        }
        let number = FileNumber(1);
        let next_file_number = FileNumber(2);
        // Without CURRENT a leftover MANIFEST-000001 was never live.
        let leftover = filename::manifest_path(dir, number);
        match fs.remove_file(&leftover) {
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
        let manifest = ManifestWriter::create(&**fs, dir, number, &[snapshot])?;
        manifest::set_current(&**fs, dir, number)?;
        tracing::debug!(dir = %dir.display(), "created new database manifest");
        Ok(VersionSet {
            fs: Arc::clone(fs),
            dir: dir.to_owned(),
            keyspaces: default_keyspaces(Arc::new(Version::empty()), FileNumber(0)),
            max_keyspace_id: DEFAULT_KEYSPACE,
            next_file_number,
            last_seqno: SeqNo::ZERO,
            manifest: Manifest::Live(manifest),
            poisoned: None,
            poison_resumable: false,
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
    pub fn recover(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<VersionSet> {
        Self::replay(fs, dir)?.install()
    }

    /// The first half of [`VersionSet::recover`]: reads `CURRENT` and replays the manifest
    /// without writing anything, so the caller can check the result (that every table it
    /// names exists, [`RecoveredManifest::check_tables`]) before [`RecoveredManifest::install`]
    /// writes the new manifest.
    ///
    /// # Errors
    /// As [`VersionSet::recover`], but never from writing.
    pub fn replay(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<RecoveredManifest> {
        let old_number = manifest::read_current(&**fs, dir)?;
        let path = filename::manifest_path(dir, old_number);
        if !fs.exists(&path) {
            return Err(Error::corruption(
                dir.join(filename::CURRENT),
                0,
                format!(
                    "CURRENT names {}, which does not exist",
                    filename::manifest_name(old_number)
                ),
            ));
        }

        let mut replayed = Replayed::default();
        let mut max_referenced = old_number;
        let mut last_offset = 0;
        let mut records = 0_u64;
        let end = manifest::replay(&**fs, &path, |offset, edit| {
            replayed.apply(&edit).map_err(|reason| {
                Error::corruption(&path, offset, format!("edit does not apply: {reason}"))
            })?;
            let numbers = edit.new_files.iter().map(|(_, f)| f.number);
            max_referenced = numbers
                .chain(edit.log_number)
                .fold(max_referenced, FileNumber::max);
            last_offset = offset;
            records += 1;
            Ok(())
        })?;
        let mut keyspaces = BTreeMap::new();
        for (id, ks) in replayed.keyspaces {
            let version = ks.builder.finish().map_err(|reason| {
                Error::corruption(
                    &path,
                    last_offset,
                    format!(
                        "replayed version of keyspace {:?} is invalid: {reason}",
                        ks.name
                    ),
                )
            })?;
            keyspaces.insert(
                id,
                KeyspaceVersion {
                    name: ks.name,
                    current: Arc::new(version),
                    log_number: ks.log_number.unwrap_or(FileNumber(0)),
                },
            );
        }
        let (Some(_), Some(next_file_number), Some(last_seqno)) = (
            keyspaces
                .get(&DEFAULT_KEYSPACE)
                .and(replayed.default_log_number),
            replayed.next_file_number,
            replayed.last_seqno,
        ) else {
            let len = fs.file_size(&path).ctx(&path)?;
            return Err(Error::corruption(
                &path,
                len,
                "manifest does not set log_number, next_file_number and last_seqno",
            ));
        };
        let max_keyspace_id = replayed.max_keyspace_id;

        let last_seqno = keyspaces
            .values()
            .flat_map(|ks| ks.current.levels.iter().flatten())
            .map(|f| f.largest_seqno)
            .fold(last_seqno, SeqNo::max);
        // The new manifest's number must exceed every number in use, including files created
        // after the last edit was written (the newest WAL).
        let new_number = numbered_files(&**fs, dir)?
            .into_iter()
            .chain([max_referenced])
            .map(|n| FileNumber(n.0.saturating_add(1)))
            .fold(next_file_number, FileNumber::max);
        tracing::debug!(
            manifest = %path.display(),
            records,
            end = ?end,
            keyspaces = keyspaces.len(),
            "replayed manifest"
        );

        if new_number >= MAX_FILE_NUMBER {
            return Err(Error::corruption(
                &path,
                0,
                format!("implausible file number {new_number}: the counter would overflow"),
            ));
        }
        Ok(RecoveredManifest {
            fs: Arc::clone(fs),
            dir: dir.to_owned(),
            path,
            old_number,
            last_offset,
            torn_tail: match end {
                manifest::ReplayEnd::Clean => None,
                manifest::ReplayEnd::TornTail { offset } => Some(offset),
            },
            new_number,
            keyspaces,
            max_keyspace_id,
            last_seqno,
        })
    }

    /// The file system the database lives in.
    pub fn fs(&self) -> &Arc<dyn FileSystem> {
        &self.fs
    }

    /// The database directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The current version of the default keyspace. It stays valid (and its tables alive on
    /// disk, as long as the database honours [`VersionSet::live_files`]) while the caller
    /// holds it.
    pub fn current(&self) -> Arc<Version> {
        self.current_of(DEFAULT_KEYSPACE)
            .unwrap_or_else(|| Arc::new(Version::empty()))
    }

    /// The current version of keyspace `id`, or `None` when no such keyspace is live.
    pub fn current_of(&self, id: u32) -> Option<Arc<Version>> {
        self.keyspaces.get(&id).map(|ks| Arc::clone(&ks.current))
    }

    /// The live keyspaces as `(id, name)`, by id (the default keyspace, id 0, first).
    pub fn keyspaces(&self) -> Vec<(u32, String)> {
        self.keyspaces
            .iter()
            .map(|(&id, ks)| (id, ks.name.clone()))
            .collect()
    }

    /// The largest keyspace id ever assigned (ids are never reused; the default keyspace's is
    /// 0): a WAL record for a higher id cannot come from this database.
    pub fn max_keyspace_id(&self) -> u32 {
        self.max_keyspace_id
    }

    /// The id the next created keyspace gets (one above every id ever assigned).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when every 32-bit id has been used.
    pub fn next_keyspace_id(&self) -> Result<u32> {
        self.max_keyspace_id
            .checked_add(1)
            .ok_or_else(|| Error::InvalidArgument("keyspace ids exhausted".to_owned()))
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

    /// WALs numbered below this are obsolete: every keyspace's writes in them are in tables
    /// (the smallest of the keyspaces' log numbers).
    pub fn log_number(&self) -> FileNumber {
        self.keyspaces
            .values()
            .map(|ks| ks.log_number)
            .min()
            .unwrap_or(FileNumber(0))
    }

    /// Keyspace `id`'s log number: WALs numbered below it hold none of its unflushed writes, so
    /// recovery replays its records only from WALs numbered at or above it.
    pub fn keyspace_log_number(&self, id: u32) -> Option<FileNumber> {
        self.keyspaces.get(&id).map(|ks| ks.log_number)
    }

    /// File number of the live manifest (the one `CURRENT` names).
    pub fn manifest_number(&self) -> FileNumber {
        match &self.manifest {
            Manifest::Live(writer) => writer.number(),
            Manifest::ReadOnly(number) => *number,
        }
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
    ///   in doubt, so this and every later call fail ([`Error::Poisoned`]) until the database is
    ///   reopened or, when a resource ran out, [`VersionSet::recover_from_failed_write`]
    ///   succeeds.
    /// - [`Error::ReadOnly`] for a set from [`RecoveredManifest::into_read_only`].
    ///
    /// On every error the in-memory version and counters are unchanged.
    pub fn log_and_apply(&mut self, mut edit: VersionEdit) -> Result<Arc<Version>> {
        if let Some(reason) = &self.poisoned {
            return Err(Error::Poisoned {
                reason: reason.clone(),
                resumable: self.poison_resumable,
            });
        }
        self.check_numbers(&edit)?;
        let id = edit.keyspace;
        let reject =
            |reason: String| Error::InvalidArgument(format!("version edit rejected: {reason}"));
        let mut keyspace = match (&edit.keyspace_create, self.keyspaces.get(&id)) {
            (Some(_), Some(_)) => return Err(reject(format!("keyspace {id} already exists"))),
            (Some(name), None) => {
                if id <= self.max_keyspace_id {
                    return Err(reject(format!("keyspace id {id} was used before")));
                }
                KeyspaceVersion {
                    name: name.clone(),
                    current: Arc::new(Version::empty()),
                    log_number: FileNumber(0),
                }
            }
            (None, Some(ks)) => ks.clone(),
            (None, None) => return Err(reject(format!("no keyspace {id}"))),
        };
        if edit.keyspace_drop && id == DEFAULT_KEYSPACE {
            return Err(reject("the default keyspace cannot be dropped".to_owned()));
        }
        let version = keyspace.current.apply(&edit).map_err(reject)?;
        let last_seqno = edit
            .new_files
            .iter()
            .map(|(_, f)| f.largest_seqno)
            .chain(edit.last_seqno)
            .fold(self.last_seqno, SeqNo::max);
        edit.next_file_number = Some(self.next_file_number);
        edit.last_seqno = Some(last_seqno);
        let max_keyspace_id = if edit.keyspace_create.is_some() {
            edit.max_keyspace_id = Some(id);
            id
        } else {
            self.max_keyspace_id
        };
        keyspace.current = Arc::new(version);
        keyspace.log_number = edit.log_number.unwrap_or(keyspace.log_number);
        let mut keyspaces = self.keyspaces.clone();
        if edit.keyspace_drop {
            keyspaces.remove(&id);
        } else {
            keyspaces.insert(id, keyspace);
        }

        let Manifest::Live(manifest) = &mut self.manifest else {
            return Err(Error::ReadOnly);
        };
        if manifest.len() >= self.max_manifest_size {
            self.roll_over(&keyspaces, max_keyspace_id, last_seqno)
                .map_err(|e| self.poison(e))?;
        } else if let Err(e) = manifest.append(&edit) {
            return Err(self.poison(e));
        }
        tracing::debug!(%edit, "applied version edit");
        self.keyspaces = keyspaces;
        self.max_keyspace_id = max_keyspace_id;
        self.last_seqno = last_seqno;
        Ok(self
            .current_of(id)
            .unwrap_or_else(|| Arc::new(Version::empty())))
    }

    /// Every file number the current version references, plus the live manifest. WALs are not
    /// included (the database keeps those numbered `>= log_number`), nor tables still being
    /// written by a flush or compaction (the database tracks those as pending outputs).
    pub fn live_files(&self) -> HashSet<FileNumber> {
        self.keyspaces
            .values()
            .flat_map(|ks| ks.current.all_file_numbers())
            .chain(std::iter::once(self.manifest_number()))
            .collect()
    }

    /// Sets the rollover size (tests use a small one). Default [`MAX_MANIFEST_SIZE`].
    #[cfg(any(test, feature = "test-hooks"))]
    pub fn set_max_manifest_size(&mut self, bytes: u64) {
        self.max_manifest_size = bytes;
    }

    /// Writes `version` with the given counters into a new manifest and makes it live. The new
    /// manifest's number is allocated here.
    fn roll_over(
        &mut self,
        keyspaces: &BTreeMap<u32, KeyspaceVersion>,
        max_keyspace_id: u32,
        last: SeqNo,
    ) -> Result<()> {
        let number = self.next_file_number;
        let next = FileNumber(number.0.saturating_add(1));
        let snapshot = snapshot_edits(keyspaces, max_keyspace_id, next, last);
        let new = ManifestWriter::create(&*self.fs, &self.dir, number, &snapshot)?;
        manifest::set_current(&*self.fs, &self.dir, number)?;
        tracing::debug!(
            old = self.manifest_number().0,
            new = %new.path().display(),
            "rolled over manifest"
        );
        self.next_file_number = next;
        if let Manifest::Live(old) = std::mem::replace(&mut self.manifest, Manifest::Live(new)) {
            remove_old_manifest(&*self.fs, old.path());
        }
        Ok(())
    }

    /// Clears a poisoning by a manifest write that failed for want of a resource (a full
    /// disk): the current state, which never took the failed edit, is written as a snapshot
    /// into a new manifest under a new number, `CURRENT` is switched to it and the manifest
    /// with the doubtful tail deleted, as RocksDB does when it resumes after a manifest write
    /// error. Whether the failed edit reached the old manifest no longer matters: a crash
    /// before the switch recovers from the old manifest (with or without the edit, either of
    /// which the database can open), one after it from the new. Returns `true` when it
    /// cleared a poisoning, `false` when the set was not poisoned.
    ///
    /// # Errors
    /// [`Error::Poisoned`] when the failure was of another kind (only a reopen clears it);
    /// [`Error::Io`] when the new manifest cannot be written either (the set stays poisoned,
    /// and a later call tries again with yet another number); [`Error::ReadOnly`].
    pub fn recover_from_failed_write(&mut self) -> Result<bool> {
        let Some(reason) = &self.poisoned else {
            return Ok(false);
        };
        if !self.poison_resumable {
            return Err(Error::Poisoned {
                reason: reason.clone(),
                resumable: self.poison_resumable,
            });
        }
        if !matches!(self.manifest, Manifest::Live(_)) {
            return Err(Error::ReadOnly);
        }
        // A fresh number for every attempt: a failed one may have left `CURRENT` naming its
        // manifest, which must not be rewritten.
        self.next_file_number = FileNumber(self.next_file_number.0.saturating_add(1));
        let keyspaces = self.keyspaces.clone();
        self.roll_over(&keyspaces, self.max_keyspace_id, self.last_seqno)?;
        tracing::info!(
            manifest = %self.manifest_number(),
            "wrote a new manifest after a failed manifest write"
        );
        self.poisoned = None;
        self.poison_resumable = false;
        Ok(true)
    }

    /// Refuses edits naming file numbers that were never handed out or moving a keyspace's
    /// `log_number` backwards.
    fn check_numbers(&self, edit: &VersionEdit) -> Result<()> {
        let next = self.next_file_number;
        let current = self
            .keyspace_log_number(edit.keyspace)
            .unwrap_or(FileNumber(0));
        if let Some(n) = edit.log_number
            && (n < current || n >= next)
        {
            return Err(Error::InvalidArgument(format!(
                "version edit rejected: log_number {n} outside [{current}, {next})"
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
        self.poison_resumable = e.is_resource_exhausted();
        self.poisoned = Some(format!(
            "manifest write failed: {e}; the manifest's tail is in doubt: close and reopen the \
             database (free disk space first if the disk is full)"
        ));
        e
    }
}

/// The live keyspaces of a fresh set: only the default one.
fn default_keyspaces(
    version: Arc<Version>,
    log_number: FileNumber,
) -> BTreeMap<u32, KeyspaceVersion> {
    BTreeMap::from([(
        DEFAULT_KEYSPACE,
        KeyspaceVersion {
            name: DEFAULT_KEYSPACE_NAME.to_owned(),
            current: version,
            log_number,
        },
    )])
}

/// The records that start a new manifest: first the counters with the default keyspace's log
/// number and tables, then one edit per other keyspace creating it with its log number and
/// tables (`docs/format/manifest.md`, "Snapshot edit").
fn snapshot_edits(
    keyspaces: &BTreeMap<u32, KeyspaceVersion>,
    max_keyspace_id: u32,
    next_file_number: FileNumber,
    last_seqno: SeqNo,
) -> Vec<VersionEdit> {
    keyspaces
        .iter()
        .map(|(&id, ks)| {
            let mut edit = VersionEdit {
                keyspace: id,
                log_number: Some(ks.log_number),
                ..VersionEdit::default()
            };
            if id == DEFAULT_KEYSPACE {
                edit.next_file_number = Some(next_file_number);
                edit.last_seqno = Some(last_seqno);
                edit.max_keyspace_id =
                    (max_keyspace_id != DEFAULT_KEYSPACE).then_some(max_keyspace_id);
            } else {
                edit.keyspace_create = Some(ks.name.clone());
            }
            for (level, files) in ks.current.levels.iter().enumerate() {
                for f in files {
                    edit.add_file(level, f.as_ref().clone());
                }
            }
            edit
        })
        .collect()
}

/// What replaying a manifest has found so far.
#[derive(Default)]
struct Replayed {
    keyspaces: BTreeMap<u32, ReplayedKeyspace>,
    default_log_number: Option<FileNumber>,
    next_file_number: Option<FileNumber>,
    last_seqno: Option<SeqNo>,
    max_keyspace_id: u32,
}

struct ReplayedKeyspace {
    name: String,
    builder: Builder,
    log_number: Option<FileNumber>,
}

impl Replayed {
    /// Applies one manifest edit.
    fn apply(&mut self, edit: &VersionEdit) -> std::result::Result<(), String> {
        let id = edit.keyspace;
        if id == DEFAULT_KEYSPACE && !self.keyspaces.contains_key(&id) {
            self.keyspaces.insert(
                id,
                ReplayedKeyspace {
                    name: DEFAULT_KEYSPACE_NAME.to_owned(),
                    builder: Builder::new(&Version::empty()),
                    log_number: None,
                },
            );
        }
        if let Some(name) = &edit.keyspace_create {
            if id == DEFAULT_KEYSPACE || self.keyspaces.contains_key(&id) {
                return Err(format!("keyspace {id} created twice"));
            }
            if self.keyspaces.values().any(|ks| &ks.name == name) {
                return Err(format!("two keyspaces named {name:?}"));
            }
            self.keyspaces.insert(
                id,
                ReplayedKeyspace {
                    name: name.clone(),
                    builder: Builder::new(&Version::empty()),
                    log_number: None,
                },
            );
        }
        let ks = self
            .keyspaces
            .get_mut(&id)
            .ok_or_else(|| format!("edit for keyspace {id}, which does not exist"))?;
        ks.builder.apply(edit)?;
        ks.log_number = edit.log_number.or(ks.log_number);
        if id == DEFAULT_KEYSPACE {
            self.default_log_number = edit.log_number.or(self.default_log_number);
        }
        if edit.keyspace_drop {
            if id == DEFAULT_KEYSPACE {
                return Err("the default keyspace is dropped".to_owned());
            }
            self.keyspaces.remove(&id);
        }
        self.next_file_number = edit.next_file_number.or(self.next_file_number);
        self.last_seqno = edit.last_seqno.or(self.last_seqno);
        self.max_keyspace_id = self
            .max_keyspace_id
            .max(id)
            .max(edit.max_keyspace_id.unwrap_or(0));
        Ok(())
    }
}

/// Numbers of every WAL, table and manifest in `dir`.
///
/// # Errors
/// [`Error::Io`] when `dir` cannot be listed; [`Error::Corruption`] naming a file whose number
/// is at or above [`MAX_FILE_NUMBER`] − 1 (a stray file, or a damaged name: the counter could not
/// go past it).
fn numbered_files(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<FileNumber>> {
    let mut out = Vec::new();
    for entry in fs.list_dir(dir).ctx(dir)? {
        let name = entry.path.file_name().and_then(|n| n.to_str());
        if let Some(FileKind::Wal(n) | FileKind::Table(n) | FileKind::Manifest(n)) =
            name.and_then(filename::parse)
        {
            if n.0 >= MAX_FILE_NUMBER.0 - 1 {
                return Err(Error::corruption(
                    &entry.path,
                    0,
                    format!(
                        "implausible file number {n} (the database's numbers stay below \
                         {}); if the file does not belong to the database, move it out of \
                         the directory",
                        MAX_FILE_NUMBER.0 - 1
                    ),
                ));
            }
            out.push(n);
        }
    }
    Ok(out)
}

/// Deletes a manifest that `CURRENT` no longer names. Failure only leaves garbage for the next
/// file collection, so it is logged, not returned.
fn remove_old_manifest(fs: &dyn FileSystem, path: &Path) {
    if let Err(e) = fs.remove_file(path) {
        tracing::warn!(path = %path.display(), error = %e, "could not delete old manifest");
    }
}

/// A manifest replayed by [`VersionSet::replay`], not yet replaced by a new one.
#[derive(Debug)]
pub struct RecoveredManifest {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// The manifest replayed, and its number.
    path: PathBuf,
    old_number: FileNumber,
    /// Offset of its last record applied.
    last_offset: u64,
    /// Offset of a torn last record that was ignored, if any.
    torn_tail: Option<u64>,
    /// The number of the manifest [`RecoveredManifest::install`] writes.
    new_number: FileNumber,
    keyspaces: BTreeMap<u32, KeyspaceVersion>,
    max_keyspace_id: u32,
    last_seqno: SeqNo,
}

impl RecoveredManifest {
    /// The manifest replayed and the offset of its torn last record, when one was ignored
    /// (a crash cut its write short; the edit in it never took effect).
    pub fn torn_tail(&self) -> Option<(&Path, u64)> {
        self.torn_tail.map(|offset| (self.path.as_path(), offset))
    }

    /// The numbers of the tables the recovered versions name.
    pub fn table_numbers(&self) -> HashSet<FileNumber> {
        self.keyspaces
            .values()
            .flat_map(|ks| ks.current.all_file_numbers())
            .collect()
    }

    /// Checks that every table the recovered versions name exists (`fs.exists`).
    ///
    /// A version replayed without a lost (damaged or missing) last edit can name tables a
    /// compaction has since deleted, and the tables that edit added are then unreferenced: an
    /// open that went on would delete them as obsolete, destroying the only copy of their data
    /// (`docs/format/manifest.md`, "Damaged records").
    ///
    /// # Errors
    /// [`Error::Corruption`] naming the manifest, the offset of its last record applied and
    /// the first missing table.
    pub fn check_tables(&self) -> Result<()> {
        for ks in self.keyspaces.values() {
            for (level, files) in ks.current.levels.iter().enumerate() {
                for f in files {
                    let table = filename::table_path(&self.dir, f.number);
                    if !self.fs.exists(&table) {
                        return Err(Error::corruption(
                            &self.path,
                            self.last_offset,
                            format!(
                                "table {} of level {level} named by the manifest is missing (a \
                                 lost last manifest edit, or a deleted file); nothing was changed",
                                table.display()
                            ),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The second half of [`VersionSet::recover`]: writes a new manifest holding one snapshot
    /// edit per keyspace, switches `CURRENT` to it and deletes the old manifest.
    ///
    /// # Errors
    /// [`Error::Io`] writing the manifest or `CURRENT`.
    pub fn install(self) -> Result<VersionSet> {
        let RecoveredManifest {
            fs,
            dir,
            path,
            new_number,
            keyspaces,
            max_keyspace_id,
            last_seqno,
            ..
        } = self;
        let next_file_number = FileNumber(new_number.0 + 1);
        let snapshot = snapshot_edits(&keyspaces, max_keyspace_id, next_file_number, last_seqno);
        let manifest = ManifestWriter::create(&*fs, &dir, new_number, &snapshot)?;
        manifest::set_current(&*fs, &dir, new_number)?;
        remove_old_manifest(&*fs, &path);
        Ok(VersionSet {
            fs,
            dir,
            keyspaces,
            max_keyspace_id,
            next_file_number,
            last_seqno,
            manifest: Manifest::Live(manifest),
            poisoned: None,
            poison_resumable: false,
            max_manifest_size: MAX_MANIFEST_SIZE,
        })
    }

    /// The recovered state as a read-only set, writing nothing: every
    /// [`VersionSet::log_and_apply`] fails with [`Error::ReadOnly`]. File numbers it hands
    /// out are never used for files.
    pub fn into_read_only(self) -> VersionSet {
        let RecoveredManifest {
            fs,
            dir,
            old_number,
            new_number,
            keyspaces,
            max_keyspace_id,
            last_seqno,
            ..
        } = self;
        VersionSet {
            fs,
            dir,
            keyspaces,
            max_keyspace_id,
            next_file_number: FileNumber(new_number.0.saturating_add(1)),
            last_seqno,
            manifest: Manifest::ReadOnly(old_number),
            poisoned: None,
            poison_resumable: false,
            max_manifest_size: MAX_MANIFEST_SIZE,
        }
    }
}
