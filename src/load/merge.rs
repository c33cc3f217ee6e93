//! Phase 2 of a load, when the runs overlap: a k-way merge of the runs' tables into the final
//! tables. For a key in several runs the latest run wins (`tsv`) or the counts are summed
//! (`counts`). The key space is cut into one range per core (at keys taken from the largest
//! run's index blocks), each range merged and compressed on its own thread.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use anyhow::Context;
use strata_engine::cache::BlockCache;
use strata_engine::iterator::InternalIterator;
use strata_engine::merge::parse_counter;
use strata_engine::sstable::{Table, TableIter, byte_cuts};
use strata_engine::types::InternalKeyRef;
use strata_engine::{FileNumber, IngestFile, Keyspace, Options, ReadOptions, SeqNo, ValueKind};

use super::check_interrupt;
use super::parse::Format;
use super::runs::{RunTables, TableSink, final_count, join_all, sum_counts};

/// A cursor over one run: its tables one after the other.
struct RunCursor {
    files: Vec<IngestFile>,
    next_file: usize,
    iter: Option<TableIter>,
    cache: Arc<BlockCache>,
}

impl RunCursor {
    /// A cursor over `files` (one run's tables, in key order) from the first key at or after
    /// `lower` (from the start when `None`).
    fn new(files: &[IngestFile], lower: Option<&[u8]>) -> anyhow::Result<RunCursor> {
        let skip = lower.map_or(0, |lo| {
            files.iter().take_while(|f| &f.largest_key[..] < lo).count()
        });
        let mut c = RunCursor {
            files: files.get(skip..).unwrap_or_default().to_vec(),
            next_file: 0,
            iter: None,
            cache: BlockCache::new(0),
        };
        c.open_next(lower)?;
        Ok(c)
    }

    /// Moves to the first entry (at or after `lower`) of the next non-empty table, or ends the
    /// cursor.
    fn open_next(&mut self, lower: Option<&[u8]>) -> anyhow::Result<()> {
        self.iter = None;
        while let Some(f) = self.files.get(self.next_file) {
            self.next_file += 1;
            let table = Table::open(
                &strata_engine::fs::OsFs,
                &f.path,
                FileNumber(0),
                None,
                Arc::clone(&self.cache),
            )
            .with_context(|| format!("opening run table {}", f.path.display()))?;
            let mut it = table.iter();
            match lower {
                Some(lo) => it.seek(InternalKeyRef::new(lo, SeqNo::MAX, ValueKind::FOR_SEEK))?,
                None => it.seek_to_first()?,
            }
            if it.valid() {
                self.iter = Some(it);
                return Ok(());
            }
        }
        Ok(())
    }

    fn key(&self) -> Option<&[u8]> {
        self.iter.as_ref().map(|it| it.key().user_key)
    }

    fn value(&self) -> &[u8] {
        self.iter.as_ref().map_or(&[], |it| it.value())
    }

    fn advance(&mut self) -> anyhow::Result<()> {
        if let Some(it) = &mut self.iter {
            it.next()?;
            if !it.valid() {
                self.open_next(None)?;
            }
        }
        Ok(())
    }
}

/// With `--format counts`, before anything is ingested: checks that each count in `files` (the
/// final tables, in key order) adds to what `target` already holds for its key. An existing
/// value that is not a decimal `i64`, or a sum past the `i64` range, would make every later
/// read of the key (and every scan over it) fail with a merge error, so the load is refused
/// instead, naming the key, as `INCRBY` refuses it over RESP.
///
/// The loaded keys and a cursor over `target` move forward together (a merge join): the cursor
/// steps with `next` while the next loaded key is a few keys ahead and seeks when it is
/// farther, so a load that covers the database costs about one scan of it and a sparse one a
/// seek per key. Nothing is read when the keyspace holds no key between the first and last
/// loaded ones (a fresh database).
///
/// `key_prefix` is the bytes the load put before every input key (`--resp-keys`); errors
/// name keys without it, as the input gave them.
///
/// # Errors
/// The first key whose count cannot be added; I/O, corruption or a failing merge reading the
/// tables or `target`.
pub(crate) fn check_counts_add(
    target: &Keyspace,
    files: &[IngestFile],
    key_prefix: &[u8],
) -> anyhow::Result<()> {
    /// `next` steps tried before a seek (RocksDB's `max_sequential_skip_in_iterations` idea).
    const STEPS_BEFORE_SEEK: usize = 8;
    let loaded = files.iter().filter(|f| f.num_entries > 0);
    let (Some(first), Some(last)) = (loaded.clone().next(), loaded.last()) else {
        return Ok(());
    };
    let read = ReadOptions {
        fill_cache: Some(false),
        ..ReadOptions::default()
    };
    let mut held = target.cursor(&read)?;
    held.seek(&first.smallest_key)?;
    if !held.valid() || held.key() > &last.largest_key[..] {
        return Ok(());
    }
    let mut cursor = RunCursor::new(files, None)?;
    while let Some(key) = cursor.key() {
        let mut steps = 0;
        while held.valid() && held.key() < key {
            if steps == STEPS_BEFORE_SEEK {
                held.seek(key)?;
                break;
            }
            held.next()?;
            steps += 1;
        }
        if !held.valid() {
            break;
        }
        if held.key() == key {
            let (existing, count) = (held.value(), cursor.value());
            let sum = parse_counter(existing)
                .zip(parse_counter(count))
                .and_then(|(base, add)| base.checked_add(add));
            if sum.is_none() {
                let shown: String = String::from_utf8_lossy(existing).chars().take(40).collect();
                anyhow::bail!(
                    "key {}: the database holds {shown:?}, which is not a count the loaded \
                     count {} can be added to (not a decimal 64-bit integer, or the sum \
                     overflows)",
                    super::shown_key(key.strip_prefix(key_prefix).unwrap_or(key)),
                    String::from_utf8_lossy(count)
                );
            }
        }
        cursor.advance()?;
    }
    Ok(())
}

/// Most run files the merge threads hold open together (each thread opens every run).
const MAX_OPEN_RUN_FILES: usize = 128;

/// Most runs one merge reads at once: more runs are first merged in groups of this many
/// consecutive runs (intermediate passes, as an external sort does), so the files a load holds
/// open stay within the process's limit however large the input is. Half the soft
/// `RLIMIT_NOFILE` less 64 (room for the database's own files), between 16 and 1,024: 480
/// under the usual limit of 1,024, so most loads merge in one pass (an extra pass rewrites
/// every run: a 420-run load took 1.1-1.2x the time with passes of 64). 4 in unit tests.
fn max_merge_fan_in() -> usize {
    if cfg!(test) {
        return 4;
    }
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX);
    usize::try_from(soft.saturating_sub(64) / 2)
        .unwrap_or(usize::MAX)
        .clamp(16, 1024)
}

/// Keys merged between two looks at the interrupt flag.
const KEYS_PER_INTERRUPT_CHECK: u64 = 1 << 16;

/// Runs smaller than this (bytes, the largest run's tables) are merged on one thread. 1 in
/// unit tests, so their small runs are merged in ranges too.
const PARALLEL_MERGE_MIN_BYTES: u64 = if cfg!(test) { 1 } else { 16 << 20 };

/// Merges `runs` (in input order) into tables `<tmp>/final-PP-NNNNN.sst`, in key order: one
/// key range `PP` per core, each merged on its own thread. More than [`max_merge_fan_in`] runs
/// are first merged in groups of consecutive runs ([`merge_passes`]).
///
/// # Errors
/// I/O or corruption reading the runs or writing the tables, a count sum out of range
/// (`counts`), [`Interrupted`] once `interrupt` is set.
pub(crate) fn merge_runs(
    runs: Vec<RunTables>,
    tmp: &Path,
    options: &Options,
    scratch_options: &Options,
    format: Format,
    table_size_bytes: u64,
    interrupt: Option<&AtomicBool>,
) -> anyhow::Result<Vec<IngestFile>> {
    let runs = merge_passes(
        runs,
        tmp,
        scratch_options,
        format,
        table_size_bytes,
        interrupt,
    )?;
    // Each thread has every run open (one table file and its index block at a time): fewer
    // threads when that would pass MAX_OPEN_RUN_FILES, down to one for many runs.
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get().min(8))
        .min((MAX_OPEN_RUN_FILES / runs.len().max(1)).max(1));
    let cuts = cut_keys(&runs, threads)?;
    let mut lowers: Vec<Option<&[u8]>> = vec![None];
    lowers.extend(cuts.iter().map(|c| Some(c.as_slice())));
    let mut uppers: Vec<Option<&[u8]>> = cuts.iter().map(|c| Some(c.as_slice())).collect();
    uppers.push(None);
    let runs = &runs;
    let results: Vec<anyhow::Result<Vec<IngestFile>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lowers
            .into_iter()
            .zip(uppers)
            .enumerate()
            .map(|(part, (lower, upper))| {
                // The runs' keys already carry any `--resp-keys` prefix.
                let out = TableSink::new(
                    tmp,
                    format!("final-{part:02}"),
                    options,
                    table_size_bytes,
                    &[],
                );
                let step = Merge {
                    format,
                    final_pass: true,
                    interrupt,
                };
                scope.spawn(move || merge_range(runs, lower, upper, &step, out))
            })
            .collect();
        join_all(handles, "merge")
    })?;
    let mut files = Vec::new();
    for part in results {
        files.extend(part?);
    }
    Ok(files)
}

/// Up to `parts - 1` increasing keys that cut the largest run into parts of about equal
/// bytes (index keys of its tables, [`Table::key_at_share`]; no data block is read); none
/// for a run under [`PARALLEL_MERGE_MIN_BYTES`]. The runs hold keys spread alike (each is a
/// slice of the same input), so the cuts balance the others too.
fn cut_keys(runs: &[RunTables], parts: usize) -> anyhow::Result<Vec<Vec<u8>>> {
    let size = |r: &RunTables| r.files.iter().map(|f| f.size_bytes).sum::<u64>();
    let Some(run) = runs.iter().max_by_key(|r| size(r)) else {
        return Ok(Vec::new());
    };
    let total = size(run);
    if parts < 2 || total < PARALLEL_MERGE_MIN_BYTES {
        return Ok(Vec::new());
    }
    let cache = BlockCache::new(0);
    let sizes: Vec<u64> = run.files.iter().map(|f| f.size_bytes).collect();
    let mut cuts: Vec<Vec<u8>> = Vec::new();
    for (i, within) in byte_cuts(&sizes, parts) {
        let f = &run.files[i];
        let table = Table::open(
            &strata_engine::fs::OsFs,
            &f.path,
            FileNumber(0),
            None,
            Arc::clone(&cache),
        )
        .with_context(|| format!("opening run table {}", f.path.display()))?;
        if let Some(key) = table.key_at_share(within, f.size_bytes)?
            && cuts.last().is_none_or(|c| c[..] < key[..])
        {
            cuts.push(key.to_vec());
        }
    }
    Ok(cuts)
}

/// Merges runs in groups of [`max_merge_fan_in`] consecutive ones, pass after pass, until at
/// most that many remain; each group becomes one run of uncompressed scratch tables
/// `<tmp>/passPP-GGGGG-00-NNNNN.sst` and its input tables are deleted, so the scratch space
/// stays about the size of one copy of the runs. Merging consecutive runs keeps the input
/// order that decides which value of a key wins; counts keep their partial sums. The groups of
/// a pass are merged on up to one thread per core.
fn merge_passes(
    mut runs: Vec<RunTables>,
    tmp: &Path,
    scratch_options: &Options,
    format: Format,
    table_size_bytes: u64,
    interrupt: Option<&AtomicBool>,
) -> anyhow::Result<Vec<RunTables>> {
    let step = Merge {
        format,
        final_pass: false,
        interrupt,
    };
    let mut pass = 0;
    let fan_in = max_merge_fan_in();
    while runs.len() > fan_in {
        pass += 1;
        let groups: Vec<&[RunTables]> = runs.chunks(fan_in).collect();
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get().min(8))
            .min((MAX_OPEN_RUN_FILES / fan_in).max(1))
            .min(groups.len());
        let next_group = AtomicUsize::new(0);
        // Set by a thread that failed, so the others stop at their next group.
        let failed = AtomicBool::new(false);
        let merged: Vec<anyhow::Result<Vec<(usize, RunTables)>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads)
                .map(|_| {
                    let (groups, next_group, step) = (&groups, &next_group, &step);
                    let failed = &failed;
                    scope.spawn(move || {
                        let mut done = Vec::new();
                        loop {
                            let g = next_group.fetch_add(1, Ordering::Relaxed);
                            let Some(group) = groups.get(g) else {
                                return Ok(done);
                            };
                            if failed.load(Ordering::Relaxed) {
                                return Ok(done);
                            }
                            let name = format!("pass{pass:02}-{g:05}");
                            let sink =
                                TableSink::new(tmp, name, scratch_options, table_size_bytes, &[]);
                            match merge_group(group, sink, step) {
                                Ok(run) => done.push((g, run)),
                                Err(e) => {
                                    failed.store(true, Ordering::Relaxed);
                                    return Err(e);
                                }
                            }
                        }
                    })
                })
                .collect();
            join_all(handles, "merge")
        })?;
        let mut next: Vec<(usize, RunTables)> = Vec::with_capacity(groups.len());
        for part in merged {
            next.extend(part?);
        }
        next.sort_by_key(|(g, _)| *g);
        runs = next.into_iter().map(|(_, run)| run).collect();
    }
    Ok(runs)
}

/// Merges `group` (consecutive runs) into one scratch run of [`merge_passes`] written to
/// `out`, then deletes the group's tables.
fn merge_group(
    group: &[RunTables],
    out: TableSink<'_>,
    step: &Merge<'_>,
) -> anyhow::Result<RunTables> {
    let files = merge_range(group, None, None, step, out)?;
    for f in group.iter().flat_map(|r| &r.files) {
        std::fs::remove_file(&f.path)
            .with_context(|| format!("removing run table {}", f.path.display()))?;
    }
    Ok(RunTables {
        final_tables: false,
        largest: files
            .last()
            .map(|f| f.largest_key.clone())
            .unwrap_or_default(),
        files,
    })
}

/// How [`merge_range`] merges.
struct Merge<'a> {
    format: Format,
    /// The tables written are the final ones: counts must fit in 64 bits. An intermediate
    /// pass keeps partial sums (which may not fit yet), as runs do.
    final_pass: bool,
    interrupt: Option<&'a AtomicBool>,
}

/// Merges the keys of `runs` in `[lower, upper)` (unbounded where `None`) into `out`.
fn merge_range(
    runs: &[RunTables],
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
    step: &Merge<'_>,
    mut out: TableSink<'_>,
) -> anyhow::Result<Vec<IngestFile>> {
    let format = step.format;
    let mut cursors = runs
        .iter()
        .map(|r| RunCursor::new(&r.files, lower))
        .collect::<anyhow::Result<Vec<_>>>()?;
    // A binary min-heap of cursor indices by (key, newest run first).
    let mut heap: Vec<usize> = (0..cursors.len())
        .filter(|&i| cursors[i].key().is_some())
        .collect();
    let less =
        |cursors: &[RunCursor], a: usize, b: usize| match (cursors[a].key(), cursors[b].key()) {
            (Some(ka), Some(kb)) => ka < kb || (ka == kb && a > b),
            _ => false,
        };
    for i in (0..heap.len() / 2).rev() {
        sift_down(&mut heap, i, &cursors, less);
    }
    let mut key: Vec<u8> = Vec::new();
    let mut value: Vec<u8> = Vec::new();
    let mut merged: u64 = 0;
    while let Some(&top) = heap.first() {
        merged += 1;
        if merged.is_multiple_of(KEYS_PER_INTERRUPT_CHECK) {
            check_interrupt(step.interrupt)?;
        }
        let c = &cursors[top];
        let current = c.key().unwrap_or_default();
        if upper.is_some_and(|u| current >= u) {
            break;
        }
        key.clear();
        key.extend_from_slice(current);
        value.clear();
        value.extend_from_slice(c.value());
        let mut sum: i128 = 0;
        // Take every cursor positioned on `key`, newest run first.
        while let Some(&top) = heap.first() {
            if cursors[top].key() != Some(&key[..]) {
                break;
            }
            if format == Format::Counts {
                sum += sum_counts(std::iter::once(cursors[top].value()), &key)?;
            }
            cursors[top].advance()?;
            if cursors[top].key().is_none() {
                let last = heap.len() - 1;
                heap.swap(0, last);
                heap.pop();
            }
            sift_down(&mut heap, 0, &cursors, less);
        }
        match format {
            Format::Tsv => out.put(&key, &value)?,
            Format::Counts if step.final_pass => {
                out.merge(&key, final_count(sum, &key)?.to_string().as_bytes())?;
            }
            Format::Counts => out.merge(&key, sum.to_string().as_bytes())?,
        }
    }
    out.finish()
}

fn sift_down(
    heap: &mut [usize],
    mut i: usize,
    cursors: &[RunCursor],
    less: impl Fn(&[RunCursor], usize, usize) -> bool,
) {
    loop {
        let (l, r) = (2 * i + 1, 2 * i + 2);
        let mut smallest = i;
        if l < heap.len() && less(cursors, heap[l], heap[smallest]) {
            smallest = l;
        }
        if r < heap.len() && less(cursors, heap[r], heap[smallest]) {
            smallest = r;
        }
        if smallest == i {
            return;
        }
        heap.swap(i, smallest);
        i = smallest;
    }
}
