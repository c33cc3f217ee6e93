//! [`TableSorter`]: builds tables for [`crate::Db::ingest`] from entries given in any order,
//! by an external merge sort in bounded memory.
//!
//! Entries are gathered in a buffer up to half the memory budget; each full buffer is sorted
//! and written as a *run* (one uncompressed table without a filter block, with 256 KiB data
//! blocks, in the scratch directory) on a background thread while the caller fills the other half. At
//! [`TableSorter::finish`] the runs are merged, at most [`MAX_MERGE_WIDTH`] at a time (wider
//! merges go in passes, so the open files stay bounded), into the final tables, laid out as the
//! database's options ask and cut at [`Options::target_file_size`]; the merge is cut into key
//! ranges (at quantiles of keys sampled from every run) merged on one thread per core. Input
//! that fits one buffer is sorted on every core and written straight to the final tables.
//! This is the classic two-phase sort (Knuth, TAOCP vol. 3, section 5.4; SQLite's and
//! PostgreSQL's `CREATE INDEX` sorters work the same way).
//!
//! Nothing here is a new file format: runs and final tables are ordinary tables
//! (`docs/format/sstable.md`) written by [`TableWriter`].

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::cache::BlockCache;
use crate::error::{Error, IoContext, Result};
use crate::ingest::{IngestFile, TableWriter};
use crate::iterator::{InternalIterator, MergingIterator};
use crate::options::Options;
use crate::sstable::{BlockCachePolicy, Table};
use crate::types::FileNumber;

/// Most runs merged at once; more runs are merged in passes of this width first.
pub const MAX_MERGE_WIDTH: usize = 64;

/// Most run files the final merge's threads hold open together (each opens every run, so
/// fewer threads merge more runs).
const MAX_OPEN_RUN_FILES: usize = 128;

/// The smallest memory budget, in bytes.
pub const MIN_MEMORY_BUDGET: usize = 64 << 10;

/// Bytes of bookkeeping counted per buffered entry besides its key and value.
const ENTRY_OVERHEAD_BYTES: usize = std::mem::size_of::<Slot>();

/// Size of the arena chunks entries are copied into, in bytes (an entry larger than this gets
/// a chunk of its own). Chunks are kept from one run to the next, so memory is touched once.
const CHUNK_BYTES: usize = 4 << 20;

/// Data block size of the runs, in bytes. Runs are only read front to back, and the merge
/// holds every run's index block in memory: with the database's 4 KiB blocks a run of long
/// keys (an index over 8 KB values) had an index block as large as its data, one block per
/// entry, and a merge of a few runs took gigabytes.
const RUN_BLOCK_BYTES: usize = 256 << 10;

/// Keys sampled from each run, evenly spaced, to cut the final merge into key ranges.
const SAMPLES_PER_RUN: usize = 64;

/// One buffered entry: where its key and value sit in the arena.
#[derive(Debug, Clone, Copy)]
struct Slot {
    chunk: u32,
    offset: u32,
    key_len: u32,
    value_len: u32,
}

/// Entries gathered in memory: copied into chunks, sorted by moving slots only.
#[derive(Debug, Default)]
struct Buffer {
    chunks: Vec<Vec<u8>>,
    /// Index of the chunk being filled.
    current: usize,
    slots: Vec<Slot>,
    bytes: usize,
}

impl Buffer {
    fn push(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let len = key.len() + value.len();
        let fits = |c: &Vec<u8>| c.capacity() - c.len() >= len;
        if !self.chunks.get(self.current).is_some_and(fits) {
            if !self.chunks.is_empty() {
                self.current += 1;
            }
            match self.chunks.get_mut(self.current) {
                Some(c) if c.capacity() >= len => {}
                Some(c) => c.reserve_exact(len),
                None => self.chunks.push(Vec::with_capacity(len.max(CHUNK_BYTES))),
            }
        }
        let too_long = |n: usize| {
            u32::try_from(n).map_err(|_| Error::InvalidArgument(format!("{n} bytes is too long")))
        };
        let chunk = &mut self.chunks[self.current];
        let slot = Slot {
            chunk: too_long(self.current)?,
            offset: too_long(chunk.len())?,
            key_len: too_long(key.len())?,
            value_len: too_long(value.len())?,
        };
        chunk.extend_from_slice(key);
        chunk.extend_from_slice(value);
        self.slots.push(slot);
        self.bytes += len + ENTRY_OVERHEAD_BYTES;
        Ok(())
    }

    fn key(&self, s: Slot) -> &[u8] {
        let start = s.offset as usize;
        &self.chunks[s.chunk as usize][start..start + s.key_len as usize]
    }

    fn value(&self, s: Slot) -> &[u8] {
        let start = s.offset as usize + s.key_len as usize;
        &self.chunks[s.chunk as usize][start..start + s.value_len as usize]
    }

    /// Empties the buffer, keeping its chunks for the next run.
    fn clear(&mut self) {
        for c in &mut self.chunks {
            c.clear();
        }
        self.current = 0;
        self.slots.clear();
        self.bytes = 0;
    }

    /// Sorts the slots by key on up to `threads` threads and checks that no key repeats.
    fn sort(&mut self, threads: usize) -> Result<()> {
        let mut slots = std::mem::take(&mut self.slots);
        let this = &*self;
        let by_key = |a: &Slot, b: &Slot| this.key(*a).cmp(this.key(*b));
        let part = slots.len().div_ceil(threads.max(1)).max(1);
        if threads <= 1 || slots.len() < 1 << 16 {
            slots.sort_unstable_by(by_key);
        } else {
            std::thread::scope(|scope| {
                for piece in slots.chunks_mut(part) {
                    scope.spawn(move || piece.sort_unstable_by(by_key));
                }
            });
            // Merge the sorted pieces pairwise until one is left.
            let mut width = part;
            let mut scratch = Vec::with_capacity(slots.len());
            while width < slots.len() {
                scratch.clear();
                for pair in slots.chunks(2 * width) {
                    let (a, b) = pair.split_at(width.min(pair.len()));
                    let (mut i, mut j) = (0, 0);
                    while i < a.len() && j < b.len() {
                        if by_key(&b[j], &a[i]).is_lt() {
                            scratch.push(b[j]);
                            j += 1;
                        } else {
                            scratch.push(a[i]);
                            i += 1;
                        }
                    }
                    scratch.extend_from_slice(&a[i..]);
                    scratch.extend_from_slice(&b[j..]);
                }
                std::mem::swap(&mut slots, &mut scratch);
                width *= 2;
            }
        }
        if let Some(w) = slots.windows(2).find(|w| this.key(w[0]) == this.key(w[1])) {
            return Err(duplicate(this.key(w[0])));
        }
        self.slots = slots;
        Ok(())
    }
}

/// A run written (or being written) in the background: its table, the keys sampled from it,
/// and the buffer to reuse.
type RunResult = Result<(IngestFile, Vec<Vec<u8>>, Buffer)>;

/// Sorts `key -> value` pairs given in any order into SSTables ready for
/// [`crate::Db::ingest`], using about `memory_budget` bytes of memory and a scratch directory
/// for the sorted runs (see the module docs).
///
/// Keys must be distinct: a key given twice makes [`TableSorter::add`] or
/// [`TableSorter::finish`] fail with [`Error::DuplicateKey`]. The scratch directory is
/// created by [`TableSorter::new`] and removed with everything in it when the sorter, or the
/// [`SortedTables`] its `finish` returns, is dropped: ingest the final tables (which moves
/// them out) before dropping those.
///
/// ```
/// # fn main() -> strata_engine::Result<()> {
/// use strata_engine::{Db, Options, TableSorter};
/// let dir = tempfile::tempdir().map_err(|e| strata_engine::Error::InvalidArgument(e.to_string()))?;
/// let db = Db::open(dir.path().join("db"), Options::default())?;
/// let mut sorter = TableSorter::new(&dir.path().join("sort.tmp"), &db.options(), 1 << 20)?;
/// sorter.add(b"b", b"2")?;
/// sorter.add(b"a", b"1")?;
/// let sorted = sorter.finish()?;
/// db.ingest(&sorted.paths())?;
/// assert_eq!(db.get(b"a")?.as_deref(), Some(&b"1"[..]));
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TableSorter {
    dir: PathBuf,
    options: Options,
    run_options: Options,
    /// Bytes one buffer may hold: half the budget (one fills while the other is written).
    buffer_budget: usize,
    threads: usize,
    buffer: Buffer,
    /// The run being written in the background, if any.
    pending: Option<JoinHandle<RunResult>>,
    /// The sorted runs written so far, oldest first: one table each.
    runs: Vec<IngestFile>,
    samples: Vec<Vec<u8>>,
    next_run: u64,
    entries: u64,
}

/// The final tables of a [`TableSorter`], in key order and not overlapping, and the sorter's
/// scratch directory they sit in (removed when this is dropped).
#[derive(Debug)]
pub struct SortedTables {
    /// The tables, in key order; empty when nothing was added.
    pub files: Vec<IngestFile>,
    _sorter: TableSorter,
}

impl SortedTables {
    /// The tables' paths, for [`crate::Db::ingest`].
    pub fn paths(&self) -> Vec<PathBuf> {
        self.files.iter().map(|f| f.path.clone()).collect()
    }

    /// Entries in all tables.
    pub fn num_entries(&self) -> u64 {
        self.files.iter().map(|f| f.num_entries).sum()
    }
}

impl TableSorter {
    /// Starts a sort whose runs go to `dir` (created, with its parents; it must not exist, and
    /// must be on the database's file system for the ingest to link rather than copy) and
    /// whose final tables are laid out as `options` ask (pass the database's options). Up to
    /// `memory_budget` bytes (keys, values and 16 bytes per entry, in two buffers of half the
    /// budget each) are held in memory; a budget below [`MIN_MEMORY_BUDGET`] is raised to it.
    /// Sorting and the final merge use one thread per core
    /// (`std::thread::available_parallelism`, at most 8).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] if `options` do not validate or `dir` exists; [`Error::Io`]
    /// naming `dir` when it cannot be created.
    pub fn new(dir: &Path, options: &Options, memory_budget: usize) -> Result<TableSorter> {
        options.validate()?;
        let fs = &options.file_system;
        if fs.exists(dir) {
            return Err(Error::InvalidArgument(format!(
                "sort scratch directory {} already exists",
                dir.display()
            )));
        }
        fs.create_dir_all(dir).ctx(dir)?;
        let mut run_options = options.clone();
        run_options.compression = false;
        run_options.bloom_bits_per_key = 0;
        run_options.block_size = RUN_BLOCK_BYTES;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
        Ok(TableSorter {
            dir: dir.to_path_buf(),
            options: options.clone(),
            run_options,
            buffer_budget: memory_budget.max(MIN_MEMORY_BUDGET) / 2,
            threads,
            buffer: Buffer::default(),
            pending: None,
            runs: Vec::new(),
            samples: Vec::new(),
            next_run: 0,
            entries: 0,
        })
    }

    /// Adds `key -> value`; written as a Put when ingested.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when `key` is over [`crate::MAX_KEY_SIZE`] bytes or `value` over
    /// [`Options::max_value_size`] (nothing is added then and the sorter stays usable);
    /// [`Error::DuplicateKey`] when a run written in the background found a key given twice;
    /// [`Error::Io`] from writing a run.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.options.check_entry_size(key, value)?;
        self.buffer.push(key, value)?;
        self.entries += 1;
        if self.buffer.bytes >= self.buffer_budget {
            self.start_run()?;
        }
        Ok(())
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.entries
    }

    /// Sorted runs written to the scratch directory so far (including one being written).
    pub fn num_runs(&self) -> usize {
        self.runs.len() + usize::from(self.pending.is_some())
    }

    fn next_run_path(&mut self) -> PathBuf {
        self.next_run += 1;
        self.dir.join(format!("run-{:06}.sst", self.next_run))
    }

    /// Waits for the run being written in the background and takes its buffer back.
    fn wait_pending(&mut self) -> Result<Option<Buffer>> {
        let Some(handle) = self.pending.take() else {
            return Ok(None);
        };
        let (run, samples, buffer) = handle
            .join()
            .map_err(|_| Error::InvalidArgument("the sort's run writer panicked".to_string()))??;
        self.runs.push(run);
        self.samples.extend(samples);
        Ok(Some(buffer))
    }

    /// Hands the full buffer to a background thread that sorts and writes it as a run, after
    /// the previous run is written (whose buffer becomes the one to fill).
    fn start_run(&mut self) -> Result<()> {
        let mut next = self.wait_pending()?.unwrap_or_default();
        next.clear();
        let full = std::mem::replace(&mut self.buffer, next);
        let path = self.next_run_path();
        let options = self.run_options.clone();
        let handle = std::thread::Builder::new()
            .name("strata-sort".to_string())
            .spawn(move || write_run(full, &path, &options, 1))
            .map_err(|e| Error::io(&self.dir, e))?;
        self.pending = Some(handle);
        Ok(())
    }

    /// Sorts what is left, merges the runs and writes the final tables.
    ///
    /// # Errors
    /// [`Error::DuplicateKey`] naming a key given twice; [`Error::Io`] and
    /// [`Error::Corruption`] writing or reading back the scratch tables.
    pub fn finish(mut self) -> Result<SortedTables> {
        let files = if self.runs.is_empty() && self.pending.is_none() {
            let mut buffer = std::mem::take(&mut self.buffer);
            buffer.sort(self.threads)?;
            self.write_sorted(&buffer)?
        } else {
            if !self.buffer.slots.is_empty() {
                let full = std::mem::take(&mut self.buffer);
                let path = self.next_run_path();
                let done = write_run(full, &path, &self.run_options, self.threads);
                self.wait_pending()?;
                let (run, samples, _) = done?;
                self.runs.push(run);
                self.samples.extend(samples);
            }
            self.wait_pending()?;
            while self.runs.len() > MAX_MERGE_WIDTH {
                let group: Vec<IngestFile> = self.runs.drain(..MAX_MERGE_WIDTH).collect();
                let path = self.next_run_path();
                let mut w = TableWriter::create(&path, &self.run_options)?;
                merge(&self.options, &group, None, None, |key, value| {
                    w.put(key, value)
                })?;
                self.runs.push(w.finish()?);
                remove(&self.options, &group)?;
            }
            let files = self.merge_runs()?;
            remove(&self.options, &self.runs)?;
            files
        };
        Ok(SortedTables {
            files,
            _sorter: self,
        })
    }

    /// Writes a sorted buffer as the final tables, its key range cut into one part per thread.
    fn write_sorted(&self, buffer: &Buffer) -> Result<Vec<IngestFile>> {
        let n = buffer.slots.len();
        let parts = if n < 1 << 16 { 1 } else { self.threads };
        let per_part = n.div_ceil(parts).max(1);
        let outputs: Vec<Result<Vec<IngestFile>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = buffer
                .slots
                .chunks(per_part)
                .enumerate()
                .map(|(part, slots)| {
                    scope.spawn(move || {
                        let mut out = Output::new(&self.dir, part, self.options.clone());
                        for &s in slots {
                            out.put(buffer.key(s), buffer.value(s))?;
                        }
                        out.finish()
                    })
                })
                .collect();
            handles.into_iter().map(join_part).collect()
        });
        concat(outputs)
    }

    /// Merges the runs into the final tables, one key range per thread, cut at quantiles of
    /// the sampled keys.
    fn merge_runs(&mut self) -> Result<Vec<IngestFile>> {
        self.samples.sort_unstable();
        self.samples.dedup();
        // Each part opens every run: at most MAX_OPEN_RUN_FILES files together.
        let parts = self
            .threads
            .min(self.samples.len() + 1)
            .min(MAX_OPEN_RUN_FILES / self.runs.len().max(1))
            .max(1);
        let cuts: Vec<&[u8]> = (1..parts)
            .map(|p| self.samples[p * self.samples.len() / parts].as_slice())
            .collect();
        let outputs: Vec<Result<Vec<IngestFile>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..parts)
                .map(|part| {
                    let lower = part.checked_sub(1).map(|i| cuts[i]);
                    let upper = cuts.get(part).copied();
                    let runs = &self.runs;
                    let (dir, options) = (&self.dir, &self.options);
                    scope.spawn(move || {
                        let mut out = Output::new(dir, part, options.clone());
                        merge(options, runs, lower, upper, |k, v| out.put(k, v))?;
                        out.finish()
                    })
                })
                .collect();
            handles.into_iter().map(join_part).collect()
        });
        concat(outputs)
    }
}

/// Sorts `buffer` and writes it to a run table at `path`; returns the run, keys sampled from
/// it and the buffer.
fn write_run(mut buffer: Buffer, path: &Path, options: &Options, threads: usize) -> RunResult {
    buffer.sort(threads)?;
    let mut w = TableWriter::create(path, options)?;
    for &s in &buffer.slots {
        w.put(buffer.key(s), buffer.value(s))?;
    }
    let step = buffer.slots.len().div_ceil(SAMPLES_PER_RUN).max(1);
    let samples = buffer
        .slots
        .iter()
        .step_by(step)
        .skip(1)
        .map(|&s| buffer.key(s).to_vec())
        .collect();
    Ok((w.finish()?, samples, buffer))
}

/// Merges the entries of `runs` with keys in `[lower, upper)` (unbounded where `None`) in key
/// order into `sink`.
fn merge(
    options: &Options,
    runs: &[IngestFile],
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
    mut sink: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    let fs = &options.file_system;
    let cache = BlockCache::new(0);
    let mut children: Vec<Box<dyn InternalIterator>> = Vec::with_capacity(runs.len());
    for run in runs {
        let table = Table::open(&**fs, &run.path, FileNumber(0), None, Arc::clone(&cache))?;
        children.push(Box::new(table.iter_with(BlockCachePolicy::NoFill)));
    }
    let mut merged = MergingIterator::new(children);
    crate::iterator::seek_to_user_key(&mut merged, lower)?;
    let mut previous: Vec<u8> = Vec::new();
    let mut first = true;
    while merged.valid() {
        let key = merged.key().user_key;
        if upper.is_some_and(|u| key >= u) {
            break;
        }
        if !first && key == previous.as_slice() {
            return Err(duplicate(key));
        }
        sink(key, merged.value())?;
        previous.clear();
        previous.extend_from_slice(key);
        first = false;
        merged.next()?;
    }
    Ok(())
}

fn remove(options: &Options, runs: &[IngestFile]) -> Result<()> {
    for run in runs {
        options.file_system.remove_file(&run.path).ctx(&run.path)?;
    }
    Ok(())
}

fn join_part(
    h: std::thread::ScopedJoinHandle<'_, Result<Vec<IngestFile>>>,
) -> Result<Vec<IngestFile>> {
    h.join()
        .map_err(|_| Error::InvalidArgument("a sort thread panicked".to_string()))?
}

/// The parts' tables in part order (key order), or the first part's error.
fn concat(outputs: Vec<Result<Vec<IngestFile>>>) -> Result<Vec<IngestFile>> {
    let mut files = Vec::new();
    for out in outputs {
        files.extend(out?);
    }
    Ok(files)
}

impl Drop for TableSorter {
    fn drop(&mut self) {
        // A run still being written holds files in the directory: wait for it first.
        if let Some(handle) = self.pending.take() {
            let _ = handle.join();
        }
        if let Err(e) = self.options.file_system.remove_dir_all(&self.dir) {
            tracing::warn!(dir = %self.dir.display(), error = %e, "could not remove sort scratch directory");
        }
    }
}

fn duplicate(key: &[u8]) -> Error {
    Error::DuplicateKey { key: key.to_vec() }
}

/// The final tables of one key range being written, cut at [`Options::target_file_size`].
struct Output {
    dir: PathBuf,
    part: usize,
    options: Options,
    next_file: u64,
    current: Option<TableWriter>,
    done: Vec<IngestFile>,
}

impl Output {
    fn new(dir: &Path, part: usize, options: Options) -> Output {
        Output {
            dir: dir.to_path_buf(),
            part,
            options,
            next_file: 0,
            current: None,
            done: Vec::new(),
        }
    }

    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if self
            .current
            .as_ref()
            .is_some_and(|w| w.estimated_size() >= self.options.target_file_size)
            && let Some(w) = self.current.take()
        {
            self.done.push(w.finish()?);
        }
        let w = match &mut self.current {
            Some(w) => w,
            None => {
                self.next_file += 1;
                let name = format!("table-{:02}-{:06}.sst", self.part, self.next_file);
                self.current
                    .insert(TableWriter::create(&self.dir.join(name), &self.options)?)
            }
        };
        w.put(key, value)
    }

    fn finish(mut self) -> Result<Vec<IngestFile>> {
        if let Some(w) = self.current.take() {
            self.done.push(w.finish()?);
        }
        Ok(self.done)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::{Db, MAX_KEY_SIZE};

    fn random_pairs(n: usize, seed: u64) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut map = BTreeMap::new();
        while map.len() < n {
            let klen = rng.random_range(0..40);
            let key: Vec<u8> = (0..klen).map(|_| rng.random()).collect();
            let vlen = rng.random_range(0..300);
            let value: Vec<u8> = (0..vlen).map(|_| rng.random()).collect();
            map.insert(key, value);
        }
        map
    }

    /// Adds `pairs` in a shuffled order.
    fn add_shuffled(sorter: &mut TableSorter, pairs: &BTreeMap<Vec<u8>, Vec<u8>>, seed: u64) {
        let mut order: Vec<(&Vec<u8>, &Vec<u8>)> = pairs.iter().collect();
        let mut rng = StdRng::seed_from_u64(seed);
        for i in (1..order.len()).rev() {
            order.swap(i, rng.random_range(0..=i));
        }
        for (k, v) in order {
            sorter.add(k, v).unwrap();
        }
    }

    fn small_tables() -> Options {
        Options {
            target_file_size: 64 << 10,
            block_size: 1024,
            ..Options::default()
        }
    }

    /// Many runs merged in passes (more than `MAX_MERGE_WIDTH`), cut into many final tables,
    /// ingested: the database holds exactly the pairs, and the tables are in order without
    /// overlap.
    #[test]
    fn many_runs_in_passes_sort_into_ordered_tables_that_ingest_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let pairs = random_pairs(40_000, 7);
        let scratch = dir.path().join("sort.tmp");
        let mut sorter = TableSorter::new(&scratch, &small_tables(), 0).unwrap();
        sorter.threads = 3;
        add_shuffled(&mut sorter, &pairs, 8);
        assert!(
            sorter.num_runs() > MAX_MERGE_WIDTH,
            "{} runs",
            sorter.num_runs()
        );
        let sorted = sorter.finish().unwrap();
        assert_eq!(sorted.num_entries(), pairs.len() as u64);
        assert!(sorted.files.len() > 10);
        for w in sorted.files.windows(2) {
            assert!(w[0].largest_key < w[1].smallest_key);
        }
        let listed: Vec<_> = std::fs::read_dir(&scratch)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(listed.iter().all(|n| n.starts_with("table-")), "{listed:?}");

        let db = Db::open(dir.path().join("db"), small_tables()).unwrap();
        db.ingest(&sorted.paths()).unwrap();
        drop(sorted);
        assert!(
            !scratch.exists(),
            "the scratch directory goes with the sorter"
        );
        let got: Vec<(Vec<u8>, Vec<u8>)> = db
            .iter(&crate::ReadOptions::default())
            .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())))
            .collect::<Result<_>>()
            .unwrap();
        let want: Vec<(Vec<u8>, Vec<u8>)> = pairs.into_iter().collect();
        assert_eq!(got, want);
    }

    /// Input within the budget is written straight to the final tables, no run.
    #[test]
    fn input_within_the_budget_writes_no_run() {
        let dir = tempfile::tempdir().unwrap();
        let pairs = random_pairs(500, 1);
        let mut sorter =
            TableSorter::new(&dir.path().join("s.tmp"), &Options::default(), 64 << 20).unwrap();
        add_shuffled(&mut sorter, &pairs, 2);
        assert_eq!(sorter.num_runs(), 0);
        let sorted = sorter.finish().unwrap();
        assert_eq!(sorted.files.len(), 1);
        assert_eq!(sorted.files[0].num_entries, 500);
        assert_eq!(
            &sorted.files[0].smallest_key[..],
            &pairs.keys().next().unwrap()[..]
        );
    }

    /// A key given twice is refused, within one buffer and across runs; nothing is left in
    /// the scratch directory once the sorter is dropped.
    #[test]
    fn a_key_given_twice_is_refused_in_a_buffer_and_across_runs() {
        let dir = tempfile::tempdir().unwrap();
        let scratch = dir.path().join("s.tmp");
        let mut sorter = TableSorter::new(&scratch, &Options::default(), 0).unwrap();
        sorter.add(b"x", b"1").unwrap();
        sorter.add(b"x", b"2").unwrap();
        let e = sorter.finish().unwrap_err();
        assert!(
            e.to_string().contains("\"x\" was added to the sort twice"),
            "{e}"
        );
        assert!(
            matches!(&e, Error::DuplicateKey { key } if key == b"x"),
            "{e:?}"
        );
        assert!(!scratch.exists());

        let mut sorter = TableSorter::new(&scratch, &Options::default(), 0).unwrap();
        sorter.add(b"dup", b"first").unwrap();
        let filler = vec![7u8; 1000];
        for i in 0..200u32 {
            sorter.add(&i.to_le_bytes(), &filler).unwrap();
        }
        assert!(sorter.num_runs() >= 2);
        sorter.add(b"dup", b"second").unwrap();
        let e = sorter.finish().unwrap_err();
        assert!(
            matches!(&e, Error::DuplicateKey { key } if key == b"dup"),
            "{e}"
        );
        assert!(!scratch.exists());
    }

    /// Over-long keys and values are refused and the sorter goes on; an existing scratch
    /// directory is refused; an empty sort gives no table.
    #[test]
    fn bad_input_is_refused_and_the_sorter_stays_usable() {
        let dir = tempfile::tempdir().unwrap();
        let scratch = dir.path().join("s.tmp");
        let options = Options {
            max_value_size: 10,
            ..Options::default()
        };
        let mut sorter = TableSorter::new(&scratch, &options, 0).unwrap();
        assert!(TableSorter::new(&scratch, &options, 0).is_err());
        let long_key = vec![0u8; MAX_KEY_SIZE + 1];
        assert!(matches!(
            sorter.add(&long_key, b""),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            sorter.add(b"k", &[0u8; 11]),
            Err(Error::InvalidArgument(_))
        ));
        sorter.add(b"k", b"v").unwrap();
        assert_eq!(sorter.num_entries(), 1);
        assert_eq!(sorter.finish().unwrap().num_entries(), 1);

        let empty = TableSorter::new(&scratch, &options, 0)
            .unwrap()
            .finish()
            .unwrap();
        assert!(empty.files.is_empty());
    }

    /// A buffer of over 65,536 entries is sorted in pieces on several threads and written in
    /// several key ranges at once; a key repeated across the pieces is still found.
    #[test]
    fn a_large_buffer_sorts_and_writes_on_several_threads() {
        let dir = tempfile::tempdir().unwrap();
        let n: u32 = 150_000;
        let key = |i: u32| i.wrapping_mul(2_654_435_761).to_le_bytes();
        let mut sorter =
            TableSorter::new(&dir.path().join("s.tmp"), &small_tables(), 64 << 20).unwrap();
        sorter.threads = 3;
        for i in 0..n {
            sorter.add(&key(i), &i.to_le_bytes()).unwrap();
        }
        let sorted = sorter.finish().unwrap();
        assert_eq!(sorted.num_entries(), u64::from(n));
        let names: Vec<String> = sorted
            .files
            .iter()
            .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(
            names.iter().any(|n| n.starts_with("table-02-")),
            "{names:?}"
        );
        for w in sorted.files.windows(2) {
            assert!(w[0].largest_key < w[1].smallest_key);
        }
        let db = Db::open(dir.path().join("db"), small_tables()).unwrap();
        db.ingest(&sorted.paths()).unwrap();
        for i in (0..n).step_by(997) {
            assert_eq!(
                db.get(&key(i)).unwrap().as_deref(),
                Some(&i.to_le_bytes()[..])
            );
        }

        let mut sorter =
            TableSorter::new(&dir.path().join("d.tmp"), &small_tables(), 64 << 20).unwrap();
        sorter.threads = 3;
        for i in 0..n {
            sorter.add(&key(i), b"").unwrap();
        }
        sorter.add(&key(3), b"again").unwrap();
        assert!(sorter.finish().unwrap_err().to_string().contains("twice"));
    }
}
