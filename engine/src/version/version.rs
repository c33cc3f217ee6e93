//! [`Version`]: the set of live tables per level at one point in time, and [`Builder`], which
//! applies edits to a version (rules: `docs/format/manifest.md`, "Applying an edit").
//!
//! A version is immutable once built and shared through `Arc`, so readers keep using the tables
//! of the version they started with while flushes and compactions install newer ones.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::Arc;

use crate::types::FileNumber;
use crate::version::edit::{FileMeta, NUM_LEVELS, VersionEdit};

/// The tables of the database, per level.
///
/// Invariants (checked by [`Version::check_invariants`], enforced by [`Builder::finish`]):
/// `levels.len() == NUM_LEVELS`; L0 is ordered newest first (by `largest_seqno` descending,
/// then file number descending) and may overlap; L1 and up are sorted by smallest key and
/// disjoint by user key; no file number appears twice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version {
    /// `NUM_LEVELS` lists of tables; see the type's invariants for their order.
    pub levels: Vec<Vec<Arc<FileMeta>>>,
}

impl Default for Version {
    fn default() -> Self {
        Version::empty()
    }
}

/// L0 order: newest first.
fn cmp_l0(a: &FileMeta, b: &FileMeta) -> Ordering {
    b.largest_seqno
        .cmp(&a.largest_seqno)
        .then(b.number.cmp(&a.number))
}

/// L1+ order: by smallest internal key, then number (ties only in broken versions).
fn cmp_sorted(a: &FileMeta, b: &FileMeta) -> Ordering {
    a.smallest.cmp(&b.smallest).then(a.number.cmp(&b.number))
}

impl Version {
    /// A version with no tables.
    pub fn empty() -> Self {
        Version {
            levels: vec![Vec::new(); NUM_LEVELS],
        }
    }

    /// The tables of `level` in the level's order; empty for a level `>= NUM_LEVELS`.
    pub fn files(&self, level: usize) -> &[Arc<FileMeta>] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }

    /// Total size in bytes of the tables of `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.files(level).iter().map(|f| f.size).sum()
    }

    /// Number of tables across all levels.
    pub fn num_files(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    /// Files whose user-key range may contain `user_key`, in the order a point lookup must
    /// consult them: every overlapping L0 file newest first, then at most one file per level 1..
    /// (found by binary search).
    ///
    /// Borrows from the version (no allocation, no reference counts touched), so a point
    /// lookup costs no shared-memory writes here.
    pub fn files_for_get<'a>(
        &'a self,
        user_key: &'a [u8],
    ) -> impl Iterator<Item = (usize, &'a Arc<FileMeta>)> + 'a {
        let level0 = self
            .files(0)
            .iter()
            .filter(move |f| f.contains_user_key(user_key))
            .map(|f| (0, f));
        let deeper = (1..self.levels.len()).filter_map(move |level| {
            let files = self.files(level);
            let i = files.partition_point(|f| &f.largest.user_key[..] < user_key);
            files
                .get(i)
                .filter(|f| &f.smallest.user_key[..] <= user_key)
                .map(|f| (level, f))
        });
        level0.chain(deeper)
    }

    /// Files in `level` overlapping the user-key range `[smallest, largest]` (`None` =
    /// unbounded on that side), in the level's order. For L0 this is every overlapping file; it
    /// does not widen the range by the files it finds (a compaction picker that needs the
    /// transitive closure of L0 overlaps computes it from this).
    pub fn overlapping_files(
        &self,
        level: usize,
        smallest: Option<&[u8]>,
        largest: Option<&[u8]>,
    ) -> Vec<Arc<FileMeta>> {
        let files = self.files(level);
        if level == 0 {
            return files
                .iter()
                .filter(|f| f.overlaps(smallest, largest))
                .cloned()
                .collect();
        }
        let start = smallest.map_or(0, |lo| {
            files.partition_point(|f| &f.largest.user_key[..] < lo)
        });
        files
            .get(start..)
            .unwrap_or_default()
            .iter()
            .take_while(|f| largest.is_none_or(|hi| &f.smallest.user_key[..] <= hi))
            .cloned()
            .collect()
    }

    /// Every table number of the version, level by level.
    pub fn all_file_numbers(&self) -> impl Iterator<Item = FileNumber> + '_ {
        self.levels.iter().flatten().map(|f| f.number)
    }

    /// The version with `edit` applied (deletes first, then adds), with the invariants checked.
    ///
    /// # Errors
    /// A description of the problem: a deleted file missing from its level, an added number
    /// already present, a level `>= NUM_LEVELS`, or a broken invariant.
    pub fn apply(&self, edit: &VersionEdit) -> Result<Version, String> {
        let mut b = Builder::new(self);
        b.apply(edit)?;
        b.finish()
    }

    /// Checks the invariants (see the type's docs) and returns every problem found, in words;
    /// empty when the version is sound.
    pub fn check_invariants(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.levels.len() != NUM_LEVELS {
            problems.push(format!(
                "{} levels instead of {NUM_LEVELS}",
                self.levels.len()
            ));
        }
        let mut seen: HashMap<FileNumber, usize> = HashMap::new();
        for (level, files) in self.levels.iter().enumerate() {
            for f in files {
                if let Some(other) = seen.insert(f.number, level) {
                    problems.push(format!(
                        "file {} appears twice (L{other} and L{level})",
                        f.number
                    ));
                }
                if f.smallest > f.largest {
                    problems.push(format!(
                        "L{level} file {}: smallest key sorts after largest key",
                        f.number
                    ));
                }
                if f.smallest_seqno > f.largest_seqno {
                    problems.push(format!(
                        "L{level} file {}: smallest_seqno {} > largest_seqno {}",
                        f.number, f.smallest_seqno, f.largest_seqno
                    ));
                }
            }
            for pair in files.windows(2) {
                let [a, b] = pair else { continue };
                if level == 0 {
                    if cmp_l0(a, b) != Ordering::Less {
                        problems.push(format!(
                            "L0 files {} and {} are not ordered newest first",
                            a.number, b.number
                        ));
                    }
                } else if a.largest.user_key >= b.smallest.user_key {
                    problems.push(format!(
                        "L{level} files {} and {} overlap or are out of order \
                         (largest user key {:?} >= next smallest user key {:?})",
                        a.number, b.number, a.largest.user_key, b.smallest.user_key
                    ));
                }
            }
        }
        problems
    }
}

/// Applies a sequence of edits to a base version without rebuilding it after every edit
/// (replaying a long manifest stays linear). Invariants are checked once, by
/// [`Builder::finish`].
#[derive(Debug)]
pub struct Builder {
    /// Per level: table number -> metadata.
    levels: Vec<HashMap<FileNumber, Arc<FileMeta>>>,
    /// Table number -> level, for duplicate checks across levels.
    where_is: HashMap<FileNumber, usize>,
}

impl Builder {
    /// A builder starting from `base`.
    pub fn new(base: &Version) -> Self {
        let mut levels = vec![HashMap::new(); NUM_LEVELS];
        let mut where_is = HashMap::new();
        for (level, files) in base.levels.iter().enumerate() {
            for f in files {
                if let Some(slot) = levels.get_mut(level) {
                    slot.insert(f.number, Arc::clone(f));
                }
                where_is.insert(f.number, level);
            }
        }
        Builder { levels, where_is }
    }

    /// Applies the file changes of `edit` (its counters are the caller's business): deletes,
    /// then adds.
    ///
    /// # Errors
    /// A deleted file that is not at that level, an added number already present at any level,
    /// or a level `>= NUM_LEVELS`. On error the builder may hold part of the edit; discard it.
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<(), String> {
        for &(level, number) in &edit.deleted_files {
            let files = self
                .levels
                .get_mut(level)
                .ok_or_else(|| format!("deleted file {number} at level {level} >= {NUM_LEVELS}"))?;
            if files.remove(&number).is_none() {
                return Err(format!("deleted file {number} is not in level {level}"));
            }
            self.where_is.remove(&number);
        }
        for (level, meta) in &edit.new_files {
            let files = self.levels.get_mut(*level).ok_or_else(|| {
                format!("new file {} at level {level} >= {NUM_LEVELS}", meta.number)
            })?;
            if let Some(other) = self.where_is.get(&meta.number) {
                return Err(format!(
                    "new file {} at level {level} is already in level {other}",
                    meta.number
                ));
            }
            files.insert(meta.number, Arc::new(meta.clone()));
            self.where_is.insert(meta.number, *level);
        }
        Ok(())
    }

    /// The resulting version, with each level in its order.
    ///
    /// # Errors
    /// The invariant violations of the result, joined into one description.
    pub fn finish(self) -> Result<Version, String> {
        let levels = self
            .levels
            .into_iter()
            .enumerate()
            .map(|(level, files)| {
                let mut files: Vec<Arc<FileMeta>> = files.into_values().collect();
                if level == 0 {
                    files.sort_by(|a, b| cmp_l0(a, b));
                } else {
                    files.sort_by(|a, b| cmp_sorted(a, b));
                }
                files
            })
            .collect();
        let version = Version { levels };
        let problems = version.check_invariants();
        if problems.is_empty() {
            Ok(version)
        } else {
            Err(problems.join("; "))
        }
    }
}
