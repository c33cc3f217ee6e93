//! Phase 1 of a load: read the input into runs that fit the memory budget, sort each run, drop
//! duplicates (or sum counts), and write it as tables with `TableWriter`.
//!
//! A run is one arena (`Vec<u8>` holding the input bytes as read) plus one [`Entry`] per pair;
//! sorting moves only the entries. The memory budget counts both.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::Context;
use bytes::Bytes;
use strata_engine::merge::parse_counter;
use strata_engine::{IngestFile, Options, TableWriter};

use super::parse::{BadLine, Entry, Format, Rules, key_prefix};

/// Bytes read from the input per `read` call.
const READ_CHUNK_BYTES: usize = 8 << 20;

/// Runs with fewer entries are written by one thread.
const PARALLEL_MIN_ENTRIES: usize = 10_000;

/// The tables one sorted run was written to, with its key range.
#[derive(Debug)]
pub(crate) struct RunTables {
    pub(crate) files: Vec<IngestFile>,
    pub(crate) smallest: Bytes,
    pub(crate) largest: Bytes,
}

/// A refused line, with its 1-based number.
#[derive(Debug)]
pub(crate) struct BadLineError {
    pub(crate) line: u64,
    pub(crate) reason: BadLine,
}

impl std::fmt::Display for BadLineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}", self.line, self.reason)
    }
}

impl std::error::Error for BadLineError {}

/// Counters of the reading phase.
#[derive(Debug, Default)]
pub(crate) struct ReadStats {
    pub(crate) bytes: u64,
    pub(crate) lines: u64,
    pub(crate) pairs: u64,
    pub(crate) bad_lines: u64,
}

/// Where and how runs are written.
pub(crate) struct RunWriter<'a> {
    pub(crate) tmp: &'a Path,
    pub(crate) options: &'a Options,
    /// Options for runs that will be merged again: no compression, no bloom filter.
    pub(crate) scratch_options: Options,
    pub(crate) rules: Rules,
    pub(crate) table_size_bytes: u64,
    pub(crate) memory_bytes: usize,
    /// Size of the input in bytes when known (a file): the arena is allocated once at
    /// `min(input_bytes, memory_bytes)` instead of growing by doubling, which copied it.
    pub(crate) input_bytes: Option<u64>,
    pub(crate) skip_bad: bool,
    /// Called with bytes read and pairs accepted so far, after every read.
    pub(crate) progress: &'a dyn Fn(&ReadStats),
    /// Called for every skipped line.
    pub(crate) on_bad: &'a mut dyn FnMut(&BadLineError),
}

impl RunWriter<'_> {
    /// Reads all of `input`, writing one [`RunTables`] per run (in input order).
    pub(crate) fn read_all(
        &mut self,
        input: &mut dyn Read,
        stats: &mut ReadStats,
    ) -> anyhow::Result<Vec<RunTables>> {
        let mut runs: Vec<RunTables> = Vec::new();
        let mut arena: Vec<u8> = Vec::new();
        let mut entries: Vec<Entry> = Vec::new();
        let mut carry: Vec<u8> = Vec::new();
        if let Some(total) = self.input_bytes {
            // The last line may lack its newline: one byte of slack keeps the read of the
            // final 0 bytes from growing the arena.
            let whole = usize::try_from(total).unwrap_or(usize::MAX);
            arena.reserve(whole.min(self.memory_bytes).saturating_add(1));
        }
        let mut eof = false;
        while !eof {
            arena.clear();
            entries.clear();
            arena.extend_from_slice(&carry);
            carry.clear();
            // Start of the first line not yet parsed.
            let mut parsed = 0;
            loop {
                let used = arena.len() + entries.len() * Entry::SIZE;
                if used >= self.memory_bytes && !entries.is_empty() {
                    break;
                }
                // Leave room for the entries the new bytes will need: estimate from the
                // average line so far (or assume half of the budget for the first read).
                let remaining = self.memory_bytes.saturating_sub(used);
                let want = if entries.is_empty() {
                    remaining / 2
                } else {
                    let avg = (parsed / entries.len()).max(1);
                    remaining / (avg + Entry::SIZE) * avg
                };
                let want = want.clamp(4096, READ_CHUNK_BYTES);
                let before = arena.len();
                let n = input
                    .take(want as u64)
                    .read_to_end(&mut arena)
                    .context("reading the input")?;
                stats.bytes += n as u64;
                if n == 0 {
                    eof = true;
                    if parsed < arena.len() {
                        // A last line without a newline.
                        let end = arena.len();
                        self.parse_line(&arena, parsed, end, &mut entries, stats)?;
                        parsed = end;
                    }
                    break;
                }
                parsed = self.parse_lines(&arena, parsed, before, &mut entries, stats)?;
                (self.progress)(stats);
            }
            carry.extend_from_slice(&arena[parsed..]);
            arena.truncate(parsed);
            if !entries.is_empty() {
                let ordered = runs.last().is_none_or(|_| runs_ordered(&runs));
                let run = self.write_run(&arena, &mut entries, runs.len(), ordered, runs.last())?;
                runs.push(run);
            }
        }
        Ok(runs)
    }

    /// Parses every complete line in `arena[from..]`; `scan_from` is where new bytes start
    /// (no newline lies in `arena[from..scan_from]`). Returns the start of the incomplete tail.
    fn parse_lines(
        &mut self,
        arena: &[u8],
        from: usize,
        scan_from: usize,
        entries: &mut Vec<Entry>,
        stats: &mut ReadStats,
    ) -> anyhow::Result<usize> {
        let mut start = from;
        let mut scan = scan_from.max(from);
        while let Some(i) = memchr::memchr(b'\n', &arena[scan..]) {
            let end = scan + i;
            self.parse_line(arena, start, end, entries, stats)?;
            start = end + 1;
            scan = start;
        }
        Ok(start)
    }

    /// Parses `arena[start..end]` (one line without its newline).
    fn parse_line(
        &mut self,
        arena: &[u8],
        start: usize,
        end: usize,
        entries: &mut Vec<Entry>,
        stats: &mut ReadStats,
    ) -> anyhow::Result<()> {
        stats.lines += 1;
        let line = &arena[start..end];
        match self.rules.check(line) {
            Ok(klen) => {
                stats.pairs += 1;
                entries.push(Entry {
                    prefix: 0, // set by the sort
                    off: start,
                    klen: u32::try_from(klen).context("key length")?,
                    vlen: u32::try_from(line.len() - klen - 1).context("value length")?,
                });
                Ok(())
            }
            Err(reason) => {
                let err = BadLineError {
                    line: stats.lines,
                    reason,
                };
                if !self.skip_bad {
                    return Err(err.into());
                }
                stats.bad_lines += 1;
                (self.on_bad)(&err);
                Ok(())
            }
        }
    }

    /// Sorts `entries`, keeps one pair per key (the last, or the sum of the counts) and writes
    /// them to tables of about `table_size_bytes`, split in key order among the cores (each
    /// part on its own thread: LZ4 compression dominates). Runs that may be ingested as they
    /// are (every run so far in key order) use the database's table options; others are only
    /// merged again and skip compression and filters.
    fn write_run(
        &mut self,
        arena: &[u8],
        entries: &mut Vec<Entry>,
        index: usize,
        ordered_so_far: bool,
        previous: Option<&RunTables>,
    ) -> anyhow::Result<RunTables> {
        sort_entries(arena, entries);
        let sums = self.reduce(arena, entries)?;
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            anyhow::bail!("empty run");
        };
        let (smallest, largest) = (first.key(arena), last.key(arena));
        let maybe_final = ordered_so_far && previous.is_none_or(|p| &p.largest[..] < smallest);
        let options = if maybe_final {
            self.options
        } else {
            &self.scratch_options
        };
        let parts = if entries.len() < PARALLEL_MIN_ENTRIES {
            1
        } else {
            std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
        };
        let per_part = entries.len().div_ceil(parts);
        let (tmp, table_size, format) = (self.tmp, self.table_size_bytes, self.rules.format);
        let results: Vec<anyhow::Result<Vec<IngestFile>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = entries
                .chunks(per_part)
                .enumerate()
                .map(|(p, part)| {
                    let sums = sums.get(p * per_part..).unwrap_or_default();
                    scope.spawn(move || {
                        let stem = format!("run{index:05}-{p:02}");
                        let mut out = TableSink::new(tmp, stem, options, table_size);
                        let mut batch = Gathered::default();
                        for (b, chunk) in part.chunks(GATHER_ENTRIES).enumerate() {
                            batch.gather(arena, chunk);
                            for (i, (key, value)) in batch.pairs().enumerate() {
                                match format {
                                    Format::Tsv => out.put(key, value)?,
                                    Format::Counts => {
                                        let sum = sums
                                            .get(b * GATHER_ENTRIES + i)
                                            .context("count missing")?;
                                        out.merge(key, sum.to_string().as_bytes())?;
                                    }
                                }
                            }
                        }
                        out.finish()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a table writer thread panicked")))
                })
                .collect()
        });
        let mut files = Vec::new();
        for r in results {
            files.extend(r?);
        }
        Ok(RunTables {
            files,
            smallest: Bytes::copy_from_slice(smallest),
            largest: Bytes::copy_from_slice(largest),
        })
    }

    /// Keeps one entry per key in sorted `entries`: the last occurrence (`tsv`), or the first
    /// with the sum of the group's counts in the returned vector (`counts`, one per entry).
    fn reduce(&self, arena: &[u8], entries: &mut Vec<Entry>) -> anyhow::Result<Vec<i64>> {
        let mut sums = Vec::new();
        let (mut kept, mut i) = (0, 0);
        while i < entries.len() {
            let key = entries[i].key(arena);
            let mut j = i + 1;
            while j < entries.len()
                && entries[j].prefix == entries[i].prefix
                && entries[j].key(arena) == key
            {
                j += 1;
            }
            match self.rules.format {
                Format::Tsv => entries[kept] = entries[j - 1],
                Format::Counts => {
                    sums.push(sum_counts(
                        entries[i..j].iter().map(|e| e.value(arena)),
                        key,
                    )?);
                    entries[kept] = entries[i];
                }
            }
            kept += 1;
            i = j;
        }
        entries.truncate(kept);
        Ok(sums)
    }
}

/// Sorts entries by key; equal keys keep their input order (the arena offset), so the last
/// occurrence ends a group. The 8-byte prefix is taken after the prefix all keys of the run
/// share (JSON keys often start alike), so most comparisons never read the arena.
fn sort_entries(arena: &[u8], entries: &mut [Entry]) {
    let Some(first) = entries.first().map(|e| e.key(arena)) else {
        return;
    };
    let mut lcp = first.len();
    for e in entries.iter() {
        let key = e.key(arena);
        lcp = first[..lcp]
            .iter()
            .zip(key)
            .take_while(|(a, b)| a == b)
            .count();
    }
    for e in entries.iter_mut() {
        e.prefix = key_prefix(&e.key(arena)[lcp..]);
    }
    let skip = lcp + 8;
    entries.sort_unstable_by(|a, b| {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| {
                // Equal prefixes: bytes before `skip` are equal (or one key ended there).
                let (ka, kb) = (a.key(arena), b.key(arena));
                let s = skip.min(ka.len()).min(kb.len());
                ka[s..].cmp(&kb[s..])
            })
            .then(a.off.cmp(&b.off))
    });
}

/// Entries copied to a contiguous buffer at a time before they are written.
const GATHER_ENTRIES: usize = 4096;

/// Pairs copied out of the arena in sorted order. After sorting unsorted input, consecutive
/// entries point to random places in the arena; copying a batch in a tight loop lets the CPU
/// overlap those cache misses, which the table writer's much longer per-entry path cannot.
#[derive(Default)]
struct Gathered {
    bytes: Vec<u8>,
    lens: Vec<(u32, u32)>,
}

impl Gathered {
    fn gather(&mut self, arena: &[u8], entries: &[Entry]) {
        self.bytes.clear();
        self.lens.clear();
        for e in entries {
            let len = e.klen as usize + 1 + e.vlen as usize;
            self.bytes.extend_from_slice(&arena[e.off..e.off + len]);
            self.lens.push((e.klen, e.vlen));
        }
    }

    fn pairs(&self) -> impl Iterator<Item = (&[u8], &[u8])> {
        let mut at = 0;
        self.lens.iter().map(move |&(k, v)| {
            let (k, v) = (k as usize, v as usize);
            let key = &self.bytes[at..at + k];
            let value = &self.bytes[at + k + 1..at + k + 1 + v];
            at += k + 1 + v;
            (key, value)
        })
    }
}

/// True if every run's keys lie above the previous run's.
pub(crate) fn runs_ordered(runs: &[RunTables]) -> bool {
    runs.windows(2).all(|w| match w {
        [a, b] => a.largest < b.smallest,
        _ => true,
    })
}

/// Adds decimal counts, failing on overflow.
pub(crate) fn sum_counts<'a>(
    counts: impl Iterator<Item = &'a [u8]>,
    key: &[u8],
) -> anyhow::Result<i64> {
    let mut sum: i64 = 0;
    for c in counts {
        let n = parse_counter(c)
            .with_context(|| format!("bad count {:?}", String::from_utf8_lossy(c)))?;
        sum = sum.checked_add(n).with_context(|| {
            format!(
                "the counts of key {:?} overflow a 64-bit integer",
                String::from_utf8_lossy(key)
            )
        })?;
    }
    Ok(sum)
}

/// Writes sorted pairs to numbered tables `<dir>/<stem>-NNNNN.sst`, cutting at a size.
pub(crate) struct TableSink<'a> {
    dir: &'a Path,
    stem: String,
    options: &'a Options,
    table_size_bytes: u64,
    current: Option<TableWriter>,
    done: Vec<IngestFile>,
}

impl<'a> TableSink<'a> {
    pub(crate) fn new(
        dir: &'a Path,
        stem: String,
        options: &'a Options,
        table_size_bytes: u64,
    ) -> Self {
        TableSink {
            dir,
            stem,
            options,
            table_size_bytes,
            current: None,
            done: Vec::new(),
        }
    }

    fn writer(&mut self) -> anyhow::Result<&mut TableWriter> {
        if self
            .current
            .as_ref()
            .is_some_and(|w| w.estimated_size() >= self.table_size_bytes)
            && let Some(w) = self.current.take()
        {
            self.done.push(w.finish()?);
        }
        if self.current.is_none() {
            let path: PathBuf = self
                .dir
                .join(format!("{}-{:05}.sst", self.stem, self.done.len()));
            self.current = Some(TableWriter::create(&path, self.options)?);
        }
        self.current.as_mut().context("table writer vanished")
    }

    pub(crate) fn put(&mut self, key: &[u8], value: &[u8]) -> anyhow::Result<()> {
        Ok(self.writer()?.put(key, value)?)
    }

    pub(crate) fn merge(&mut self, key: &[u8], operand: &[u8]) -> anyhow::Result<()> {
        Ok(self.writer()?.merge(key, operand)?)
    }

    pub(crate) fn finish(mut self) -> anyhow::Result<Vec<IngestFile>> {
        if let Some(w) = self.current.take() {
            self.done.push(w.finish()?);
        }
        Ok(self.done)
    }
}
