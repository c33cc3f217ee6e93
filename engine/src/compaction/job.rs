//! The compaction job: runs a [`CompactionTask`] against the table files and returns the
//! [`VersionEdit`] that records it (rules: `docs/compaction.md`, "What a compaction keeps").
//!
//! The inputs are merged in internal-key order (each L0 table is its own source; a level `>= 1`
//! is one concatenating source). For each user key, entries arrive newest first and fall into
//! *stripes*: the seqno ranges between consecutive live snapshots, plus the range above the
//! newest one. Stripe `i` holds the entries the snapshot `snapshots[i]` can see that the
//! snapshot below it cannot; stripe 0 (at or below the oldest snapshot, or everything when no
//! snapshot is live) is the *earliest stripe*.
//!
//! - The newest entry of each stripe is kept; older entries of the same stripe are shadowed and
//!   dropped. A merge operand does not end its stripe: the operands are folded with the
//!   keyspace's merge operator onto the put or tombstone under them in the stripe, into one put
//!   at the newest operand's seqno; with none under them, into one put in the earliest stripe
//!   of a bottommost task (nothing older exists), else into one operand by the operator's
//!   partial merge. Whatever the operator declines is kept as it was.
//! - A tombstone in the earliest stripe of a bottommost task is dropped together with
//!   everything older (no snapshot needs what it hides, and no deeper level holds the key).
//! - In a bottommost task, a put in the earliest stripe that is the only entry of its user key
//!   written is given sequence number 0: zeros compress, and a lone version at seqno 0 reads
//!   the same for every snapshot.
//!
//! Output tables are cut when they reach `target_file_size` or overlap more than
//! [`MAX_GRANDPARENT_OVERLAP_FACTOR`]` * target_file_size` bytes of the level below the output,
//! and only between two user keys, so the output tables are sorted and disjoint by user key.
//! Each is fsynced as it is finished, and the directory once at the end.
//!
//! **Subcompactions** (RocksDB's name): a task is split at the user keys
//! [`subcompaction_boundaries`] chooses into at most `Options::max_subcompactions` key ranges,
//! merged at once on their own threads with the same rules. A range holds every version of its
//! user keys, so the rules, which look at one user key at a time, give the same result as one
//! merge; the outputs of range `i` all sort before those of range `i + 1`
//! (`docs/compaction.md` section 2.7).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cache::TableCache;
use crate::compaction::picker::{
    CompactionTask, MAX_GRANDPARENT_OVERLAP_FACTOR, subcompaction_boundaries,
};
use crate::error::{Error, Result};
use crate::filename;
use crate::fs::FileSystem;
use crate::iterator::InternalIterator;
use crate::iterator::level::LevelIterator;
use crate::iterator::merging::MergingIterator;
use crate::merge::MergeOperator;
use crate::options::Options;
use crate::sstable::{BlockCachePolicy, TableBuilder, TableBuilderOptions};
use crate::types::{FileNumber, InternalKeyRef, SeqNo, ValueKind};
use crate::version::{FileMeta, VersionEdit};

/// What a compaction job needs from the database.
pub struct JobContext<'a> {
    /// The database directory (input and output tables live here).
    pub dir: &'a Path,
    /// The database's options (`target_file_size`, table layout).
    pub options: &'a Options,
    /// Opens the input tables.
    pub table_cache: &'a Arc<TableCache>,
    /// Sequence numbers of the live snapshots, ascending (duplicates allowed). Taken when the
    /// job starts; a snapshot taken later sees at least everything the job keeps.
    pub snapshots: &'a [SeqNo],
    /// Hands out a fresh file number for each output table (called from every subcompaction
    /// thread).
    pub new_file_number: &'a (dyn Fn() -> FileNumber + Sync),
}

impl fmt::Debug for JobContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobContext")
            .field("dir", &self.dir)
            .field("snapshots", &self.snapshots)
            .finish_non_exhaustive()
    }
}

/// Counters of one compaction job.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JobStats {
    /// Bytes of the input tables (0 for a trivial move).
    pub bytes_read: u64,
    /// Bytes of the output tables (0 for a trivial move).
    pub bytes_written: u64,
    /// Entries read from the inputs.
    pub entries_in: u64,
    /// Entries written to the outputs.
    pub entries_out: u64,
    /// Entries dropped: shadowed versions and tombstones no longer needed.
    pub dropped: u64,
    /// Output tables written.
    pub output_files: usize,
    /// Key ranges merged at once (`docs/compaction.md` section 2.7); 0 for a trivial move.
    pub subcompactions: usize,
    /// Wall-clock time of the job.
    pub duration: Duration,
}

/// Runs `task`. A trivial move returns an edit moving the input tables to the output level,
/// with no I/O. Otherwise the inputs are merged, entries no snapshot can see are dropped (see
/// the module docs), and the rest is written to new tables at `task.output_level`, cut at
/// `options.target_file_size` (never between two versions of one user key), each fsynced,
/// then the directory fsynced. All input tables of both levels are deleted in the edit.
///
/// The caller appends the edit to the manifest, installs the new version, and only then
/// deletes the input files (the job never deletes inputs). No lock is needed meanwhile: the
/// inputs are immutable and the outputs are not referenced by any version yet.
///
/// # Errors
/// [`Error::Io`] from reading inputs or writing outputs, [`Error::Corruption`] /
/// [`Error::ChecksumMismatch`] from a damaged input (including inputs whose entries are out of
/// order). On error every output table written so far is removed and the version is
/// unchanged; the input tables are untouched.
pub fn run_compaction(
    task: &CompactionTask,
    ctx: &JobContext<'_>,
) -> Result<(VersionEdit, JobStats)> {
    let start = Instant::now();
    let mut edit = VersionEdit::default();
    for (level, f) in task.all_inputs() {
        edit.delete_file(level, f.number);
    }
    let mut stats = JobStats::default();
    if task.trivial_move {
        debug_assert!(task.output_inputs.is_empty(), "trivial move onto tables");
        for f in &task.inputs {
            edit.add_file(task.output_level, FileMeta::clone(f));
        }
        stats.duration = start.elapsed();
        tracing::debug!(
            level = task.level,
            output_level = task.output_level,
            tables = task.inputs.len(),
            "compaction: trivial move"
        );
        return Ok((edit, stats));
    }

    let bounds = subcompaction_boundaries(task, ctx.options.max_subcompactions);
    let (outputs, merged) = run_ranges(task, ctx, &bounds)?;
    stats.subcompactions = bounds.len() + 1;
    stats.entries_in = merged.entries_in;
    stats.entries_out = merged.entries_out;
    if !outputs.is_empty()
        && let Err(e) = filename::sync_dir(&*ctx.options.file_system, ctx.dir)
    {
        remove_tables(
            &*ctx.options.file_system,
            ctx.dir,
            outputs.iter().map(|m| m.number),
        );
        return Err(e);
    }
    stats.bytes_read = task.input_bytes();
    stats.bytes_written = outputs.iter().map(|m| m.size).sum();
    stats.output_files = outputs.len();
    stats.dropped = stats.entries_in - stats.entries_out;
    for meta in outputs {
        edit.add_file(task.output_level, meta);
    }
    stats.duration = start.elapsed();
    // The caller logs the installed result at debug level.
    tracing::trace!(
        level = task.level,
        output_level = task.output_level,
        inputs = task.inputs.len() + task.output_inputs.len(),
        subcompactions = stats.subcompactions,
        outputs = stats.output_files,
        read_bytes = stats.bytes_read,
        written_bytes = stats.bytes_written,
        dropped = stats.dropped,
        bottommost = task.bottommost,
        millis = stats.duration.as_millis(),
        "compaction job wrote its outputs"
    );
    Ok((edit, stats))
}

/// The user keys `[lo, hi)` of one subcompaction; `None` is an open end.
type KeyRange<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// Merges the key ranges that `bounds` cut the task into (one range when it is empty), the
/// first on this thread and each other one on a thread of its own, and returns their output
/// tables in key order with their entry counts. If any range fails, the tables every range
/// wrote are removed and the first error is returned.
fn run_ranges(
    task: &CompactionTask,
    ctx: &JobContext<'_>,
    bounds: &[Vec<u8>],
) -> Result<(Vec<FileMeta>, JobStats)> {
    let ranges: Vec<KeyRange<'_>> = (0..=bounds.len())
        .map(|i| {
            let lo = i
                .checked_sub(1)
                .and_then(|j| bounds.get(j))
                .map(Vec::as_slice);
            (lo, bounds.get(i).map(Vec::as_slice))
        })
        .collect();
    let results: Vec<Result<(Vec<FileMeta>, JobStats)>> = std::thread::scope(|scope| {
        let spawned: Vec<_> = ranges
            .iter()
            .skip(1)
            .map(|&(lo, hi)| {
                let thread = std::thread::Builder::new()
                    .name("strata-subcompaction".to_owned())
                    .spawn_scoped(scope, move || run_range(task, ctx, lo, hi));
                (lo, hi, thread)
            })
            .collect();
        let mut results = Vec::with_capacity(ranges.len());
        if let Some(&(lo, hi)) = ranges.first() {
            results.push(run_range(task, ctx, lo, hi));
        }
        for (lo, hi, thread) in spawned {
            results.push(match thread {
                Ok(handle) => handle
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic)),
                // No thread to be had: merge the range here.
                Err(_) => run_range(task, ctx, lo, hi),
            });
        }
        results
    });
    let mut outputs = Vec::new();
    let mut stats = JobStats::default();
    let mut first_error = None;
    for result in results {
        match result {
            Ok((tables, range_stats)) => {
                outputs.extend(tables);
                stats.entries_in += range_stats.entries_in;
                stats.entries_out += range_stats.entries_out;
            }
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    if let Some(e) = first_error {
        remove_tables(
            &*ctx.options.file_system,
            ctx.dir,
            outputs.iter().map(|m| m.number),
        );
        return Err(e);
    }
    Ok((outputs, stats))
}

/// Merges the user keys in `[lo, hi)` (an open end where `None`) into finished output tables;
/// on error, the tables it wrote are removed.
fn run_range(
    task: &CompactionTask,
    ctx: &JobContext<'_>,
    lo: Option<&[u8]>,
    hi: Option<&[u8]>,
) -> Result<(Vec<FileMeta>, JobStats)> {
    let mut input = open_inputs(task, ctx.table_cache, ctx.options.compaction_readahead_size);
    let mut out = Outputs::new(task, ctx);
    let mut stats = JobStats::default();
    let merged = merge(task, ctx, (lo, hi), &mut input, &mut out, &mut stats);
    drop(input);
    match merged.and_then(|()| out.finish_current()) {
        Ok(()) => Ok((out.finished, stats)),
        Err(e) => {
            out.abandon();
            Err(e)
        }
    }
}

/// One merging iterator over every input: each L0 table alone, each deeper level as one
/// concatenation (its tables are sorted and disjoint). Tables are read with readahead windows
/// of up to `readahead` bytes.
fn open_inputs(
    task: &CompactionTask,
    cache: &Arc<TableCache>,
    readahead: usize,
) -> MergingIterator {
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
    if task.level == 0 {
        for f in &task.inputs {
            children.push(level_iter(std::slice::from_ref(f), cache, readahead));
        }
    } else if !task.inputs.is_empty() {
        children.push(level_iter(&task.inputs, cache, readahead));
    }
    if !task.output_inputs.is_empty() {
        children.push(level_iter(&task.output_inputs, cache, readahead));
    }
    MergingIterator::new(children)
}

/// A lazily opening iterator over `files` (sorted, disjoint).
fn level_iter(
    files: &[Arc<FileMeta>],
    cache: &Arc<TableCache>,
    readahead: usize,
) -> Box<dyn InternalIterator> {
    let ranges = files
        .iter()
        .map(|f| (f.smallest.clone(), f.largest.clone()))
        .collect();
    let files: Vec<Arc<FileMeta>> = files.to_vec();
    let cache = Arc::clone(cache);
    Box::new(LevelIterator::new(ranges, move |i| {
        // The level iterator only opens indices of its file list.
        let Some(file) = files.get(i) else {
            return Err(Error::InvalidArgument(format!(
                "level iterator asked for file {i} of {}",
                files.len()
            )));
        };
        let table = cache.get(file)?;
        // Compaction reads each input block once: caching it would only evict the blocks
        // readers use (RocksDB reads compaction inputs with `fill_cache = false` too).
        Ok(Box::new(
            table
                .iter_with(BlockCachePolicy::NoFill)
                .with_readahead(readahead),
        ) as Box<dyn InternalIterator>)
    }))
}

/// The merge loop: applies the dropping and folding rules of the module docs to every entry
/// whose user key lies in `range` (`[lo, hi)`, an open end where `None`).
fn merge(
    task: &CompactionTask,
    ctx: &JobContext<'_>,
    (lo, hi): KeyRange<'_>,
    input: &mut MergingIterator,
    out: &mut Outputs,
    stats: &mut JobStats,
) -> Result<()> {
    let snapshots = ctx.snapshots;
    debug_assert!(
        snapshots.windows(2).all(|w| w[0] <= w[1]),
        "snapshots must be ascending"
    );
    let mut emit = Emit {
        task,
        ctx,
        out,
        stats,
        operator: ctx.options.merge_operator.as_deref(),
        operands: Operands::default(),
        kept_for_key: 0,
    };
    // State for the current user key.
    let mut user_key: Vec<u8> = Vec::new();
    let mut started = false;
    let mut last_seqno = SeqNo::ZERO;
    let mut last_kind = ValueKind::Put;
    let mut stripe = usize::MAX;
    let mut stripe_done = false;

    crate::iterator::seek_to_user_key(input, lo)?;
    while input.valid() {
        let key = input.key();
        if hi.is_some_and(|hi| key.user_key >= hi) {
            break;
        }
        emit.stats.entries_in += 1;
        if !started || key.user_key != &user_key[..] {
            if started && key.user_key < &user_key[..] {
                return Err(out_of_order(ctx.dir, task, key));
            }
            // The previous key's last stripe ended without a put or tombstone under its
            // operands.
            emit.operands_without_base(&user_key, stripe == 0)?;
            user_key.clear();
            user_key.extend_from_slice(key.user_key);
            started = true;
            stripe = usize::MAX;
            stripe_done = false;
            emit.kept_for_key = 0;
        } else if (key.seqno, key.kind) >= (last_seqno, last_kind) {
            // Same user key: the trailer must strictly decrease.
            return Err(out_of_order(ctx.dir, task, key));
        }
        last_seqno = key.seqno;
        last_kind = key.kind;

        let entry_stripe = snapshots.partition_point(|&s| s < key.seqno);
        if entry_stripe != stripe {
            // An older stripe: the operands of the newer one had no base in it.
            emit.operands_without_base(&user_key, stripe == 0)?;
            stripe = entry_stripe;
            stripe_done = false;
        } else if stripe_done {
            // Shadowed by a newer entry of the same stripe: no snapshot sees it.
            input.next()?;
            continue;
        }
        let earliest = stripe == 0;
        match key.kind {
            ValueKind::Put => {
                stripe_done = true;
                emit.base(key, Some(input.value()), earliest)?;
            }
            ValueKind::Delete => {
                stripe_done = true;
                emit.base(key, None, earliest)?;
            }
            // Operands wait for the rest of their stripe: a put or tombstone under them
            // there is their base.
            ValueKind::Merge => emit.operand(key, input.value())?,
        }
        input.next()?;
    }
    emit.operands_without_base(&user_key, stripe == 0)
}

/// Most bytes of merge operands of one user key and stripe a compaction holds to fold them;
/// past it the operands held are written as they are and folding starts again after them.
const MAX_FOLD_BYTES: usize = 64 << 20;

/// Merge operands of the current user key and stripe that wait to be folded, newest first.
#[derive(Default)]
struct Operands {
    /// `(seqno, operand)`, newest first.
    held: Vec<(SeqNo, Vec<u8>)>,
    /// Bytes of the operands held.
    bytes: usize,
}

impl Operands {
    /// The operands held, oldest first (the order a merge operator takes them in).
    fn oldest_first(&self) -> Vec<&[u8]> {
        self.held
            .iter()
            .rev()
            .map(|(_, op)| op.as_slice())
            .collect()
    }
}

/// Writes the entries the merge loop keeps, folding merge operands with the keyspace's merge
/// operator (`docs/compaction.md` section 3, rule 2).
struct Emit<'a, 'b> {
    task: &'a CompactionTask,
    ctx: &'a JobContext<'b>,
    out: &'a mut Outputs,
    stats: &'a mut JobStats,
    operator: Option<&'a dyn MergeOperator>,
    operands: Operands,
    /// Entries written so far for the current user key.
    kept_for_key: u64,
}

impl Emit<'_, '_> {
    /// Writes one entry. A put in the earliest stripe of a bottommost task that is the first
    /// (so the only) entry of its user key written gets sequence number 0.
    fn write(&mut self, key: InternalKeyRef<'_>, value: &[u8], earliest: bool) -> Result<()> {
        let zero = self.task.bottommost
            && earliest
            && key.kind == ValueKind::Put
            && self.kept_for_key == 0;
        let seqno = if zero { SeqNo::ZERO } else { key.seqno };
        self.out.add(
            InternalKeyRef::new(key.user_key, seqno, key.kind),
            value,
            self.ctx.new_file_number,
        )?;
        self.kept_for_key += 1;
        self.stats.entries_out += 1;
        Ok(())
    }

    /// A merge operand: held for folding, or written now when there is no merge operator or
    /// the operands held are already [`MAX_FOLD_BYTES`].
    fn operand(&mut self, key: InternalKeyRef<'_>, value: &[u8]) -> Result<()> {
        if self.operator.is_some() && self.operands.bytes < MAX_FOLD_BYTES {
            self.operands.bytes += value.len();
            self.operands.held.push((key.seqno, value.to_vec()));
            Ok(())
        } else {
            self.write_operands(key.user_key)?;
            self.write(key, value, false)
        }
    }

    /// Writes the operands held, unfolded.
    fn write_operands(&mut self, user_key: &[u8]) -> Result<()> {
        let held = std::mem::take(&mut self.operands);
        for (seqno, operand) in &held.held {
            self.write(
                InternalKeyRef::new(user_key, *seqno, ValueKind::Merge),
                operand,
                false,
            )?;
        }
        Ok(())
    }

    /// The operands held folded onto `base` (`None`: the key is absent under them) with the
    /// merge operator, or `None` when there are none or the operator refuses them.
    fn full_merge(&self, user_key: &[u8], base: Option<&[u8]>) -> Option<(SeqNo, Vec<u8>)> {
        let operator = self.operator?;
        let &(newest, _) = self.operands.held.first()?;
        operator
            .full_merge(user_key, base, &self.operands.oldest_first())
            .map(|value| (newest, value))
    }

    /// The put (`value` = `Some`) or tombstone `key` that ends its stripe, with the operands
    /// held above it. They fold onto it into one put at the newest operand's sequence number,
    /// which hides the base; when the operator refuses them, both are written as they are.
    /// A tombstone under no operands in the earliest stripe of a bottommost task is dropped.
    fn base(
        &mut self,
        key: InternalKeyRef<'_>,
        value: Option<&[u8]>,
        earliest: bool,
    ) -> Result<()> {
        if let Some((seqno, merged)) = self.full_merge(key.user_key, value) {
            self.operands = Operands::default();
            let folded = InternalKeyRef::new(key.user_key, seqno, ValueKind::Put);
            return self.write(folded, &merged, earliest);
        }
        self.write_operands(key.user_key)?;
        match value {
            Some(value) => self.write(key, value, earliest),
            // Nothing deeper holds the key and no snapshot predates the tombstone: it and
            // everything older in the stripe can go.
            None if self.task.bottommost && earliest => Ok(()),
            None => self.write(key, &[], earliest),
        }
    }

    /// The end of a stripe of `user_key` with operands held and no put or tombstone under
    /// them in it. In the earliest stripe of a bottommost task nothing older exists, so they
    /// fold into a put (the operator's `None` base); otherwise older versions may lie in an
    /// older stripe or deeper level, so they can only be combined into one operand by the
    /// operator's partial merge. Written as they are when the operator declines.
    fn operands_without_base(&mut self, user_key: &[u8], earliest: bool) -> Result<()> {
        if self.operands.held.is_empty() {
            return Ok(());
        }
        if self.task.bottommost && earliest {
            if let Some((seqno, merged)) = self.full_merge(user_key, None) {
                self.operands = Operands::default();
                let folded = InternalKeyRef::new(user_key, seqno, ValueKind::Put);
                return self.write(folded, &merged, earliest);
            }
        } else if let (Some(operator), [(newest, _), _, ..]) =
            (self.operator, self.operands.held.as_slice())
        {
            let newest = *newest;
            if let Some(combined) = operator.partial_merge(user_key, &self.operands.oldest_first())
            {
                self.operands = Operands::default();
                let folded = InternalKeyRef::new(user_key, newest, ValueKind::Merge);
                return self.write(folded, &combined, earliest);
            }
        }
        self.write_operands(user_key)
    }
}

fn out_of_order(dir: &Path, task: &CompactionTask, key: InternalKeyRef<'_>) -> Error {
    let tables: Vec<String> = task
        .all_inputs()
        .map(|(_, f)| f.number.to_string())
        .collect();
    Error::corruption(
        dir,
        0,
        format!(
            "compaction inputs (tables {}) are out of order at user key {:?} seqno {}",
            tables.join(", "),
            String::from_utf8_lossy(key.user_key),
            key.seqno
        ),
    )
}

/// Deletes tables, best effort (error paths).
fn remove_tables(fs: &dyn FileSystem, dir: &Path, numbers: impl Iterator<Item = FileNumber>) {
    for n in numbers {
        let path = filename::table_path(dir, n);
        if let Err(e) = fs.remove_file(&path) {
            tracing::warn!(path = %path.display(), error = %e, "could not delete compaction output");
        }
    }
}

/// Tracks how many bytes of the grandparent level the current output table overlaps
/// (LevelDB's `ShouldStopBefore`).
#[derive(Debug)]
struct GrandparentOverlap {
    files: Vec<Arc<FileMeta>>,
    index: usize,
    overlapped: u64,
    seen_key: bool,
    max_bytes: u64,
}

impl GrandparentOverlap {
    /// Called with each new output user key; true if the output table should be cut before
    /// it (and then the count restarts).
    fn cut_before(&mut self, user_key: &[u8]) -> bool {
        while let Some(f) = self.files.get(self.index) {
            if user_key <= &f.largest.user_key[..] {
                break;
            }
            if self.seen_key {
                self.overlapped = self.overlapped.saturating_add(f.size);
            }
            self.index += 1;
        }
        self.seen_key = true;
        if self.overlapped > self.max_bytes {
            self.overlapped = 0;
            true
        } else {
            false
        }
    }
}

/// The output tables: the one being written and the finished ones.
#[derive(Debug)]
struct Outputs {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    builder_options: TableBuilderOptions,
    target_size: u64,
    grandparents: GrandparentOverlap,
    current: Option<(FileNumber, TableBuilder)>,
    /// The last user key written (valid when `written`).
    last_user_key: Vec<u8>,
    written: bool,
    finished: Vec<FileMeta>,
}

impl Outputs {
    fn new(task: &CompactionTask, ctx: &JobContext<'_>) -> Self {
        let target_size = ctx.options.target_file_size.max(1);
        Outputs {
            fs: Arc::clone(&ctx.options.file_system),
            dir: ctx.dir.to_path_buf(),
            builder_options: TableBuilderOptions::from_options(ctx.options),
            target_size,
            grandparents: GrandparentOverlap {
                files: task.grandparents.clone(),
                index: 0,
                overlapped: 0,
                seen_key: false,
                max_bytes: MAX_GRANDPARENT_OVERLAP_FACTOR.saturating_mul(target_size),
            },
            current: None,
            last_user_key: Vec::new(),
            written: false,
            finished: Vec::new(),
        }
    }

    /// Appends an entry, first cutting the current table if it is full and `key` starts a
    /// new user key.
    fn add(
        &mut self,
        key: InternalKeyRef<'_>,
        value: &[u8],
        new_file_number: &(dyn Fn() -> FileNumber + Sync),
    ) -> Result<()> {
        if !self.written || key.user_key != &self.last_user_key[..] {
            let gp_cut = self.grandparents.cut_before(key.user_key);
            let full = self
                .current
                .as_ref()
                .is_some_and(|(_, b)| b.estimated_size() >= self.target_size);
            if full || gp_cut {
                self.finish_current()?;
            }
            self.last_user_key.clear();
            self.last_user_key.extend_from_slice(key.user_key);
            self.written = true;
        }
        let (_, builder) = match &mut self.current {
            Some(current) => current,
            None => {
                let number = new_file_number();
                let path = filename::table_path(&self.dir, number);
                let builder = TableBuilder::create(&self.fs, &path, self.builder_options)?;
                self.current.insert((number, builder))
            }
        };
        builder.add(key, value)
    }

    /// Finishes (and fsyncs) the current table, if any.
    fn finish_current(&mut self) -> Result<()> {
        let Some((number, builder)) = self.current.take() else {
            return Ok(());
        };
        let (props, size) = match builder.finish() {
            Ok(done) => done,
            Err(e) => {
                remove_tables(&*self.fs, &self.dir, std::iter::once(number));
                return Err(e);
            }
        };
        self.finished.push(FileMeta {
            number,
            size,
            smallest: props.smallest_key,
            largest: props.largest_key,
            smallest_seqno: props.smallest_seqno,
            largest_seqno: props.largest_seqno,
            num_entries: props.num_entries,
            num_deletions: props.num_deletions,
            global_seqno: None,
            table_id: props.table_id,
        });
        Ok(())
    }

    /// Deletes every output table (error paths).
    fn abandon(mut self) {
        if let Some((_, builder)) = self.current.take() {
            builder.abandon();
        }
        remove_tables(&*self.fs, &self.dir, self.finished.iter().map(|m| m.number));
    }
}
