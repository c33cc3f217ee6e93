//! Phase 1 of a load: read the input into runs that fit the memory budget, sort each run, drop
//! duplicates (or sum counts), and write it as tables with `TableWriter`.
//!
//! A run is one arena (`Vec<u8>` holding the input bytes as read) plus one [`Entry`] per pair;
//! sorting moves only the entries. The memory budget counts both.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use bytes::Bytes;
use strata_engine::{IngestFile, Options, TableWriter};

use super::check_interrupt;
use super::parse::{BadLine, Entry, Format, Rules, key_prefix};

/// Bytes read from the input per `read` call.
const READ_CHUNK_BYTES: usize = 8 << 20;

/// Bytes read at a time while the rest of a refused line is skipped.
const SKIP_CHUNK_BYTES: usize = 64 << 10;

/// The line not ended yet at the end of the arena, on the stream path: where it starts and
/// its first tab, looked for in the bytes read since (each byte once).
#[derive(Debug, Default)]
struct UnendedLine {
    /// Start of the line in the arena; `None` before the first look.
    start: Option<usize>,
    /// Offset of its first tab within the line, once found.
    tab: Option<usize>,
    /// Arena offset up to which a tab was looked for.
    scanned: usize,
}

impl UnendedLine {
    /// Why `arena[start..]`, a line without its newline yet, can be refused already
    /// ([`Rules::refuse_unended`]); `None` while it may still be good.
    fn refusal(&mut self, rules: &Rules, arena: &[u8], start: usize) -> Option<BadLine> {
        if self.start != Some(start) {
            *self = UnendedLine {
                start: Some(start),
                tab: None,
                scanned: start,
            };
        }
        if self.tab.is_none() {
            match memchr::memchr(b'\t', &arena[self.scanned..]) {
                Some(i) => self.tab = Some(self.scanned + i - start),
                None => self.scanned = arena.len(),
            }
        }
        rules.refuse_unended(arena.len() - start, self.tab)
    }
}

/// Runs with fewer entries are written by one thread.
const PARALLEL_MIN_ENTRIES: usize = 10_000;

/// The tables one sorted run was written to, with its largest key.
#[derive(Debug)]
pub(crate) struct RunTables {
    pub(crate) files: Vec<IngestFile>,
    pub(crate) largest: Bytes,
    /// Written with the database's table options and final values, so that it can be ingested
    /// as it is when every run turns out to be in key order; false for runs that will be
    /// merged again (scratch options, partial count sums).
    pub(crate) final_tables: bool,
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
    /// Put before every key written (`--resp-keys`); the runs' bounds include it.
    pub(crate) key_prefix: &'a [u8],
    pub(crate) table_size_bytes: u64,
    pub(crate) memory_bytes: usize,
    /// Size of the input in bytes when known (a file): the arena is allocated once at
    /// `min(input_bytes, memory_bytes)` instead of growing by doubling, which copied it.
    pub(crate) input_bytes: Option<u64>,
    pub(crate) skip_bad: bool,
    /// Called with bytes read and pairs accepted so far, after every read.
    pub(crate) progress: &'a dyn Fn(&ReadStats),
    /// Called for skipped lines in input order: every one on the stream path; on the mapped
    /// path at most `MAX_KEPT_BAD_LINES` per part (all are counted in [`ReadStats`]).
    pub(crate) on_bad: &'a mut dyn FnMut(&BadLineError),
    /// Looked at after every read and every run: set, the load stops with
    /// [`super::Interrupted`].
    pub(crate) interrupt: Option<&'a AtomicBool>,
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
            let mut tail = UnendedLine::default();
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
                    .map_err(|e| self.read_error(e))?;
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
                // A line not ended yet is refused as soon as no good line can start so, and
                // the rest of it is skipped unread: a stream without newlines (/dev/zero)
                // never fills memory.
                if let Some(reason) = tail.refusal(&self.rules, &arena, parsed) {
                    arena.truncate(parsed);
                    self.bad_line(reason, stats)?;
                    tail = UnendedLine::default();
                    if !self.skip_rest_of_line(input, &mut arena, stats)? {
                        eof = true;
                        break;
                    }
                    parsed = self.parse_lines(&arena, parsed, parsed, &mut entries, stats)?;
                }
                (self.progress)(stats);
                check_interrupt(self.interrupt)?;
            }
            carry.extend_from_slice(&arena[parsed..]);
            arena.truncate(parsed);
            if !entries.is_empty() {
                let run = self.write_run(&arena, &mut entries, runs.len(), runs.last())?;
                runs.push(run);
            }
        }
        Ok(runs)
    }

    /// Splits `data` (a whole input file, mapped with [`map_file`]) into runs that fit the
    /// memory budget and writes each, like [`RunWriter::read_all`] but without copying the
    /// input and with every core busy: each run is a slice of `data`, parsed by one thread per
    /// core, sorted by two and written by one per core.
    ///
    /// Budget: a run's bytes plus **two** entries per pair (the parts' entry lists and the
    /// combined one, then the merge of the two sorted halves, each hold up to two), so a run of
    /// `R` bytes holds at most `(memory - R) / 48` pairs. The run's size is first estimated
    /// from the average line of its first MiB; a part that reaches its share of that entry
    /// limit ends the run early, so input whose lines get shorter cannot overrun the budget.
    pub(crate) fn read_mapped(
        &mut self,
        data: &[u8],
        stats: &mut ReadStats,
    ) -> anyhow::Result<Vec<RunTables>> {
        let mut runs: Vec<RunTables> = Vec::new();
        let mut entries: Vec<Entry> = Vec::new();
        let mut start = 0;
        while start < data.len() {
            let rest = &data[start..];
            let sample = &rest[..rest.len().min(1 << 20)];
            let lines = memchr::memchr_iter(b'\n', sample).count().max(1);
            let avg = (sample.len() / lines).max(1);
            let mut want = (self.memory_bytes / (avg + 2 * Entry::SIZE))
                .saturating_mul(avg)
                .clamp(1, rest.len());
            // A run ends at a line end (a line longer than the run budget makes the run
            // longer) or at the end of the input.
            let end = loop {
                if want == rest.len() {
                    break want;
                }
                if let Some(i) = memchr::memrchr(b'\n', &rest[..want]) {
                    break i + 1;
                }
                want = want.saturating_mul(2).min(rest.len());
            };
            let cap = (self.memory_bytes.saturating_sub(end) / (2 * Entry::SIZE)).max(1);
            entries.clear();
            let used = self.parse_parallel(&rest[..end], avg, cap, &mut entries, stats)?;
            let run = &rest[..used];
            stats.bytes += used as u64;
            (self.progress)(stats);
            check_interrupt(self.interrupt)?;
            if !entries.is_empty() {
                let run = self.write_run(run, &mut entries, runs.len(), runs.last())?;
                runs.push(run);
            }
            start += used;
        }
        Ok(runs)
    }

    /// Parses the lines of `run` (whole lines; the last may lack its newline) into `entries`
    /// (offsets into `run`), one part per core, each part cut at a line end, at most about
    /// `cap` entries in all (each part gets its share; `avg` is the estimated line length).
    /// Returns how many bytes of `run` were parsed: all of it, or up to the line where a part
    /// reached its share (later parts are dropped; the next run starts there). Bad lines are
    /// numbered and reported as [`RunWriter::parse_lines`] would, in input order.
    fn parse_parallel(
        &mut self,
        run: &[u8],
        avg: usize,
        cap: usize,
        entries: &mut Vec<Entry>,
        stats: &mut ReadStats,
    ) -> anyhow::Result<usize> {
        let parts = if run.len() < PARALLEL_MIN_PARSE_BYTES {
            1
        } else {
            std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
        };
        let mut bounds = vec![0];
        for p in 1..parts {
            let at = (run.len() / parts * p).max(bounds[p - 1]);
            let end = memchr::memchr(b'\n', &run[at..]).map_or(run.len(), |i| at + i + 1);
            bounds.push(end);
        }
        bounds.push(run.len());
        let (rules, skip_bad) = (self.rules, self.skip_bad);
        let parsed: Vec<ParsedPart> = std::thread::scope(|scope| {
            let handles: Vec<_> = bounds
                .windows(2)
                .map(|w| {
                    let (from, to) = (w[0], w[1]);
                    // This part's share of the entries, in proportion to its bytes.
                    let share =
                        u128::from(cap as u64) * (to - from) as u128 / (run.len().max(1) as u128);
                    let share = usize::try_from(share).unwrap_or(usize::MAX).max(1);
                    let limits = PartLimits {
                        cap: share,
                        reserve: share.min((to - from) / avg.max(1) + 1),
                    };
                    scope.spawn(move || parse_part(rules, skip_bad, run, from, to, limits))
                })
                .collect();
            join_all(handles, "parser")
        })?;
        let mut used = run.len();
        for (part, w) in parsed.into_iter().zip(bounds.windows(2)) {
            for (line, reason) in part.bad {
                let err = BadLineError {
                    line: stats.lines + line,
                    reason,
                };
                if !skip_bad {
                    return Err(err.into());
                }
                (self.on_bad)(&err);
            }
            stats.lines += part.lines;
            stats.pairs += part.entries.len() as u64;
            stats.bad_lines += part.bad_lines;
            entries.extend_from_slice(&part.entries);
            if part.end < w[1] {
                // The part reached its share of the budget: the run ends here.
                used = part.end;
                break;
            }
        }
        Ok(used)
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

    /// A failed read of the input: [`super::Interrupted`] when the load was interrupted
    /// (a read waiting for input gives up then), else the error.
    fn read_error(&self, e: std::io::Error) -> anyhow::Error {
        match check_interrupt(self.interrupt) {
            Err(interrupted) => interrupted,
            Ok(()) => anyhow::Error::new(e).context("reading the input"),
        }
    }

    /// Reads and drops input up to the next newline, counting it in `stats`; appends what
    /// follows the newline in the same read to `arena`. Returns false at the end of the input.
    /// Holds at most [`SKIP_CHUNK_BYTES`] of the line at a time.
    fn skip_rest_of_line(
        &mut self,
        input: &mut dyn Read,
        arena: &mut Vec<u8>,
        stats: &mut ReadStats,
    ) -> anyhow::Result<bool> {
        let mut buf = vec![0u8; SKIP_CHUNK_BYTES];
        loop {
            check_interrupt(self.interrupt)?;
            let n = match input.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.read_error(e)),
            };
            if n == 0 {
                return Ok(false);
            }
            stats.bytes += n as u64;
            if let Some(i) = memchr::memchr(b'\n', &buf[..n]) {
                arena.extend_from_slice(&buf[i + 1..n]);
                return Ok(true);
            }
            (self.progress)(stats);
        }
    }

    /// Counts a refused line (the next line number): an error without `skip_bad`, else
    /// reported through `on_bad`.
    fn bad_line(&mut self, reason: BadLine, stats: &mut ReadStats) -> anyhow::Result<()> {
        stats.lines += 1;
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

    /// Parses `arena[start..end]` (one line without its newline).
    fn parse_line(
        &mut self,
        arena: &[u8],
        start: usize,
        end: usize,
        entries: &mut Vec<Entry>,
        stats: &mut ReadStats,
    ) -> anyhow::Result<()> {
        match self.rules.entry(&arena[start..end], start) {
            Ok(entry) => {
                stats.lines += 1;
                stats.pairs += 1;
                entries.push(entry);
                Ok(())
            }
            Err(reason) => self.bad_line(reason, stats),
        }
    }

    /// Sorts `entries`, keeps one pair per key (the last, or the sum of the counts) and writes
    /// them to tables of about `table_size_bytes`, split in key order among the cores (each
    /// part on its own thread: LZ4 compression dominates). Runs that may be ingested as they
    /// are (the previous run was, and this one lies above it: so every run so far is in key
    /// order) use the database's table options; others are only merged again and skip
    /// compression and filters.
    fn write_run(
        &mut self,
        arena: &[u8],
        entries: &mut Vec<Entry>,
        index: usize,
        previous: Option<&RunTables>,
    ) -> anyhow::Result<RunTables> {
        sort_entries(arena, entries);
        let sums = self.reduce(arena, entries)?;
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            anyhow::bail!("empty run");
        };
        let (smallest, largest) = (first.key(arena), last.key(arena));
        // The previous run's bounds carry the key prefix; this run's keys do not yet.
        // A count sum past 64 bits may still come back in range with the counts of later
        // runs, so such a run keeps its partial sums and is merged again.
        let sums_fit = sums.iter().all(|&s| i64::try_from(s).is_ok());
        let maybe_final = sums_fit
            && previous.is_none_or(|p| {
                p.final_tables
                    && p.largest.get(self.key_prefix.len()..).unwrap_or_default() < smallest
            });
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
        let cuts = split_by_bytes(entries, parts);
        let (tmp, table_size, format) = (self.tmp, self.table_size_bytes, self.rules.format);
        let prefix = self.key_prefix;
        let entries = &entries[..];
        let results = std::thread::scope(|scope| {
            let handles: Vec<_> = cuts
                .windows(2)
                .enumerate()
                .map(|(p, w)| {
                    let part = &entries[w[0]..w[1]];
                    let sums = sums.get(w[0]..).unwrap_or_default();
                    scope.spawn(move || {
                        let stem = format!("run{index:05}-{p:02}");
                        let mut out = TableSink::new(tmp, stem, options, table_size, prefix);
                        let mut batch = Gathered::default();
                        let mut emit = |n: usize, key: &[u8], value: &[u8]| match format {
                            Format::Tsv => out.put(key, value),
                            Format::Counts => {
                                let sum = *sums.get(n).context("count missing")?;
                                // Tables that may be ingested as they are hold the 64-bit
                                // total; runs merged again keep the partial sum, which may
                                // not fit yet.
                                let text = if maybe_final {
                                    final_count(sum, key)?.to_string()
                                } else {
                                    sum.to_string()
                                };
                                out.merge(key, text.as_bytes())
                            }
                        };
                        for (b, chunk) in part.chunks(GATHER_ENTRIES).enumerate() {
                            let first = b * GATHER_ENTRIES;
                            if mostly_in_input_order(chunk) {
                                for (i, e) in chunk.iter().enumerate() {
                                    emit(first + i, e.key(arena), e.value(arena))?;
                                }
                            } else {
                                batch.gather(arena, chunk);
                                for (i, (key, value)) in batch.pairs().enumerate() {
                                    emit(first + i, key, value)?;
                                }
                            }
                        }
                        out.finish()
                    })
                })
                .collect();
            join_all(handles, "table writer")
        })?;
        let mut files = Vec::new();
        for r in results {
            files.extend(r?);
        }
        Ok(RunTables {
            final_tables: maybe_final,
            files,
            largest: Bytes::from([prefix, largest].concat()),
        })
    }

    /// Keeps one entry per key in sorted `entries`: the last occurrence (`tsv`), or the first
    /// with the sum of the group's counts in the returned vector (`counts`, one per entry).
    fn reduce(&self, arena: &[u8], entries: &mut Vec<Entry>) -> anyhow::Result<Vec<i128>> {
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

/// Maps `file` read-only for [`RunWriter::read_mapped`], or `None` where it cannot be mapped
/// (some file systems, an empty file, address space limits): the caller then reads it as a
/// stream.
pub(crate) fn map_file(file: &std::fs::File) -> Option<memmap2::Mmap> {
    // SAFETY: `Mmap::map` is unsafe because the map's bytes change if another process writes
    // the file, and reading past a truncated end raises SIGBUS. The map is read-only, and
    // every slice of it is bounds-checked against its length at mapping time. A concurrent
    // write can only give a torn line, or keys out of the sorted order, which the table
    // writer refuses as an error. A truncation kills the process before the ingest, which
    // leaves the database as it was. Both are documented for `strata load`. Tested by
    // `load::tests` (every `run_load` maps its input file) and `map_file_maps_the_whole_file`.
    #[expect(unsafe_code, reason = "a memory map of the input file; see SAFETY")]
    let map = unsafe { memmap2::Mmap::map(file) };
    map.ok().filter(|m| !m.is_empty())
}

/// Joins every thread of a scope, in order; a thread that panicked becomes an error naming
/// `what` it was (the others are still joined, so the scope does not panic).
pub(crate) fn join_all<T>(
    handles: Vec<std::thread::ScopedJoinHandle<'_, T>>,
    what: &str,
) -> anyhow::Result<Vec<T>> {
    let joined: Vec<_> = handles.into_iter().map(|h| h.join()).collect();
    joined
        .into_iter()
        .map(|r| r.map_err(|_| anyhow::anyhow!("a {what} thread panicked")))
        .collect()
}

/// Runs smaller than this are parsed by one thread.
const PARALLEL_MIN_PARSE_BYTES: usize = 1 << 20;

/// How many entries one parser thread may produce, and reserves up front.
#[derive(Debug, Clone, Copy)]
struct PartLimits {
    cap: usize,
    reserve: usize,
}

/// What one thread parsed of a run.
struct ParsedPart {
    entries: Vec<Entry>,
    /// Where parsing stopped: the part's end, or the first line not parsed once `cap`
    /// entries were reached.
    end: usize,
    /// Lines parsed, bad ones included.
    lines: u64,
    bad_lines: u64,
    /// Bad lines with their number within the part (1-based); only the first without
    /// `skip_bad` (parsing stops there), the first `MAX_KEPT_BAD_LINES` with it.
    bad: Vec<(u64, BadLine)>,
}

/// Bad lines a part keeps for reporting; the rest are only counted.
const MAX_KEPT_BAD_LINES: usize = 64;

/// Parses the whole lines of `run[from..to]` (`to` is a line end or the end of `run`), up to
/// `limits.cap` entries.
fn parse_part(
    rules: Rules,
    skip_bad: bool,
    run: &[u8],
    from: usize,
    to: usize,
    limits: PartLimits,
) -> ParsedPart {
    let mut part = ParsedPart {
        entries: Vec::with_capacity(limits.reserve),
        end: to,
        lines: 0,
        bad_lines: 0,
        bad: Vec::new(),
    };
    let mut start = from;
    while start < to {
        if part.entries.len() >= limits.cap {
            part.end = start;
            break;
        }
        let end = memchr::memchr(b'\n', &run[start..to]).map_or(to, |i| start + i);
        part.lines += 1;
        match rules.entry(&run[start..end], start) {
            Ok(entry) => part.entries.push(entry),
            Err(reason) => {
                part.bad_lines += 1;
                if part.bad.len() < MAX_KEPT_BAD_LINES {
                    part.bad.push((part.lines, reason));
                }
                if !skip_bad {
                    break;
                }
            }
        }
        start = end + 1;
    }
    part
}

/// Sorts entries by key; equal keys keep their input order (the arena offset), so the last
/// occurrence ends a group. The 8-byte prefix is taken after the prefix all keys of the run
/// share (JSON keys often start alike), so most comparisons never read the arena.
fn sort_entries(arena: &[u8], entries: &mut [Entry]) {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let parallel = entries.len() >= PARALLEL_MIN_ENTRIES && threads >= 2;
    let mid = if parallel { entries.len() / 2 } else { 0 };
    // The prefix shared by every key: of each half on its own thread, then of the two.
    let lcp = {
        let (left, right) = entries.split_at(mid);
        let (l, r) = if parallel {
            std::thread::scope(|scope| {
                let l = scope.spawn(|| common_prefix(arena, left));
                let r = common_prefix(arena, right);
                // A panicked thread (none is expected) leaves the prefix empty: always safe.
                (l.join().unwrap_or(Some((0, &[][..]))), r)
            })
        } else {
            (None, common_prefix(arena, right))
        };
        let Some((rl, rfirst)) = r else {
            return;
        };
        match l {
            Some((ll, lfirst)) => {
                let both = lfirst
                    .iter()
                    .zip(rfirst)
                    .take_while(|(a, b)| a == b)
                    .count();
                ll.min(rl).min(both)
            }
            None => rl,
        }
    };
    let set_prefixes = |part: &mut [Entry]| {
        for e in part {
            e.prefix = key_prefix(&e.key(arena)[lcp..]);
        }
    };
    let skip = lcp + 8;
    let cmp = |a: &Entry, b: &Entry| {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| {
                // Equal prefixes: bytes before `skip` are equal (or one key ended there).
                let (ka, kb) = (a.key(arena), b.key(arena));
                let s = skip.min(ka.len()).min(kb.len());
                ka[s..].cmp(&kb[s..])
            })
            .then(a.off.cmp(&b.off))
    };
    if !parallel {
        set_prefixes(entries);
        entries.sort_unstable_by(cmp);
        return;
    }
    // Two halves sorted on two threads, then merged (the order is total, so the result is the
    // one a single sort gives).
    let (left, right) = entries.split_at_mut(mid);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            set_prefixes(left);
            left.sort_unstable_by(cmp);
        });
        set_prefixes(right);
        right.sort_unstable_by(cmp);
    });
    if cmp(&entries[mid - 1], &entries[mid]).is_lt() {
        return; // Sorted input: the halves are already in order.
    }
    // Merge in place with a copy of the left half only: the output position `k` never
    // passes the right half's `j` (k = i + (j - mid) < j while i < mid).
    let left = entries[..mid].to_vec();
    let (mut i, mut j, mut k) = (0, mid, 0);
    while i < left.len() && j < entries.len() {
        if cmp(&entries[j], &left[i]).is_lt() {
            entries[k] = entries[j];
            j += 1;
        } else {
            entries[k] = left[i];
            i += 1;
        }
        k += 1;
    }
    // What is left of the right half is already in place.
    entries[k..k + (left.len() - i)].copy_from_slice(&left[i..]);
}

/// Cuts sorted `entries` into `parts` consecutive parts of about equal key and value bytes
/// (LZ4 and the writes cost per byte, and pair sizes vary). Returns `parts + 1` indices, the
/// first 0 and the last `entries.len()`; parts may be empty.
fn split_by_bytes(entries: &[Entry], parts: usize) -> Vec<usize> {
    let bytes = |e: &Entry| u64::from(e.klen) + u64::from(e.vlen) + 1;
    let total: u64 = entries.iter().map(bytes).sum();
    let parts = parts.max(1);
    let mut cuts = Vec::with_capacity(parts + 1);
    cuts.push(0);
    let (mut sum, mut next) = (0u64, 1u64);
    for (i, e) in entries.iter().enumerate() {
        // Cut before the entry that would take the part past its share.
        while cuts.len() < parts && (sum + bytes(e)) * parts as u64 > total * next && i > 0 {
            cuts.push(i);
            next += 1;
        }
        sum += bytes(e);
    }
    while cuts.len() <= parts {
        cuts.push(entries.len());
    }
    cuts
}

/// The length of the prefix every key of `entries` shares, and the first key; `None` when
/// `entries` is empty.
fn common_prefix<'a>(arena: &'a [u8], entries: &[Entry]) -> Option<(usize, &'a [u8])> {
    let first = entries.first()?.key(arena);
    let mut lcp = first.len();
    for e in entries {
        let key = e.key(arena);
        // Most keys share the whole prefix found so far: one slice comparison.
        if key.get(..lcp) != Some(&first[..lcp]) {
            lcp = first[..lcp]
                .iter()
                .zip(key)
                .take_while(|(a, b)| a == b)
                .count();
        }
    }
    Some((lcp, first))
}

/// Entries copied to a contiguous buffer at a time before they are written.
const GATHER_ENTRIES: usize = 4096;

/// True when at least 7 in 8 of `entries` are followed by the line after theirs in the input
/// (sorted input, or the nearly sorted runs of much real output). The table writers then read
/// those pairs where they are; other chunks are first copied together ([`Gathered`]), whose
/// copy loop fetches the scattered lines of unsorted input several at a time. Measured on
/// the 10 M small pairs (docs/benchmarks.md, "Writeback while tables are written"): reading
/// unsorted pairs in place took 2.9 s against 2.45 s gathered, while sorted pairs and the
/// JSON file were faster read in place.
fn mostly_in_input_order(entries: &[Entry]) -> bool {
    let next_line = entries
        .windows(2)
        // `key<TAB>value<LF>`: the next line starts one byte after the value.
        .filter(|w| w[1].off == w[0].off + w[0].klen as usize + 1 + w[0].vlen as usize + 1)
        .count();
    next_line * 8 >= entries.len().saturating_sub(1) * 7
}

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

/// Adds decimal counts (input counts, which fit an `i64`, or a run's partial sums, which may
/// not) in 128 bits, so whether a load fails does not depend on where runs were cut: only the
/// total of a key must fit a 64-bit counter ([`final_count`]).
pub(crate) fn sum_counts<'a>(
    counts: impl Iterator<Item = &'a [u8]>,
    key: &[u8],
) -> anyhow::Result<i128> {
    let mut sum: i128 = 0;
    for c in counts {
        let n = std::str::from_utf8(c)
            .ok()
            .filter(|t| !t.is_empty() && !t.starts_with('+') && t.len() <= 40)
            .and_then(|t| t.parse::<i128>().ok())
            .with_context(|| format!("bad count {:?}", String::from_utf8_lossy(c)))?;
        sum = sum.checked_add(n).with_context(|| overflow(key))?;
    }
    Ok(sum)
}

/// A key's total count as the 64-bit counter `CounterAdd` reads.
///
/// # Errors
/// When the total does not fit an `i64`.
pub(crate) fn final_count(sum: i128, key: &[u8]) -> anyhow::Result<i64> {
    // The conversion's own error adds nothing to the message.
    i64::try_from(sum).map_err(|_| anyhow::anyhow!(overflow(key)))
}

fn overflow(key: &[u8]) -> String {
    format!(
        "the counts of key {} overflow a 64-bit integer",
        super::shown_key(key)
    )
}

/// Writes sorted pairs to numbered tables `<dir>/<stem>-NNNNN.sst`, cutting at a size, with
/// `key_prefix` before every key (the same prefix keeps the order).
pub(crate) struct TableSink<'a> {
    dir: &'a Path,
    stem: String,
    options: &'a Options,
    table_size_bytes: u64,
    key_prefix: &'a [u8],
    /// The prefixed key being written (reused).
    key: Vec<u8>,
    current: Option<TableWriter>,
    done: Vec<IngestFile>,
}

impl<'a> TableSink<'a> {
    pub(crate) fn new(
        dir: &'a Path,
        stem: String,
        options: &'a Options,
        table_size_bytes: u64,
        key_prefix: &'a [u8],
    ) -> Self {
        TableSink {
            dir,
            stem,
            options,
            table_size_bytes,
            key_prefix,
            key: Vec::new(),
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
        self.add(key, |w, k| w.put(k, value))
    }

    pub(crate) fn merge(&mut self, key: &[u8], operand: &[u8]) -> anyhow::Result<()> {
        self.add(key, |w, k| w.merge(k, operand))
    }

    /// Writes `key` with `key_prefix` before it (copied into the reused buffer only when
    /// there is a prefix) through `write`.
    fn add(
        &mut self,
        key: &[u8],
        write: impl FnOnce(&mut TableWriter, &[u8]) -> strata_engine::Result<()>,
    ) -> anyhow::Result<()> {
        if self.key_prefix.is_empty() {
            return Ok(write(self.writer()?, key)?);
        }
        // Taken out of `self` while `writer` borrows it, then put back.
        let mut buf = std::mem::take(&mut self.key);
        buf.clear();
        buf.extend_from_slice(self.key_prefix);
        buf.extend_from_slice(key);
        let result = self.writer().and_then(|w| Ok(write(w, &buf)?));
        self.key = buf;
        result
    }

    pub(crate) fn finish(mut self) -> anyhow::Result<Vec<IngestFile>> {
        if let Some(w) = self.current.take() {
            self.done.push(w.finish()?);
        }
        Ok(self.done)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, reason = "a panic is how a test fails")]

    use super::*;

    #[test]
    fn map_file_maps_the_whole_file() {
        let mut file = tempfile::tempfile().expect("tempfile");
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        std::io::Write::write_all(&mut file, &data).expect("write");
        let map = map_file(&file).expect("a regular file maps");
        assert_eq!(&map[..], &data[..]);
        // An empty file is read as a stream instead.
        let empty = tempfile::tempfile().expect("tempfile");
        assert!(map_file(&empty).is_none());
    }

    #[test]
    fn pairs_in_input_order_are_told_from_scattered_ones() {
        let mut arena = Vec::new();
        let mut entries = Vec::new();
        for i in 0..64u32 {
            let (key, value) = (format!("k{i:03}"), format!("v{i}"));
            let off = arena.len();
            arena.extend_from_slice(format!("{key}\t{value}\n").as_bytes());
            entries.push(Entry {
                prefix: 0,
                off,
                klen: key.len() as u32,
                vlen: value.len() as u32,
            });
        }
        assert!(mostly_in_input_order(&entries));
        assert!(mostly_in_input_order(&entries[..1]));
        assert!(mostly_in_input_order(&[]));
        // One pair in eight out of place still counts as in order; every other one does not.
        let mut few = entries.clone();
        few.swap(10, 11);
        assert!(mostly_in_input_order(&few));
        let scattered: Vec<Entry> = (0..64).map(|i| entries[(i * 37) % 64]).collect();
        assert!(!mostly_in_input_order(&scattered));
        let reversed: Vec<Entry> = entries.iter().rev().copied().collect();
        assert!(!mostly_in_input_order(&reversed));
    }

    #[test]
    fn merging_sorted_halves_in_place_orders_and_keeps_input_order_of_equal_keys() {
        // 30,000 entries (parallel sort): keys with many duplicates, shuffled.
        let mut arena = Vec::new();
        let mut entries = Vec::new();
        for i in 0u64..30_000 {
            let key = format!("k{:05}", (i * 7919) % 9_000);
            let off = arena.len();
            arena.extend_from_slice(key.as_bytes());
            arena.extend_from_slice(b"\tv\n");
            entries.push(Entry {
                prefix: 0,
                off,
                klen: key.len() as u32,
                vlen: 1,
            });
        }
        let mut want = entries.clone();
        want.sort_by(|a, b| a.key(&arena).cmp(b.key(&arena)).then(a.off.cmp(&b.off)));
        sort_entries(&arena, &mut entries);
        let got: Vec<usize> = entries.iter().map(|e| e.off).collect();
        let want: Vec<usize> = want.iter().map(|e| e.off).collect();
        assert_eq!(got, want);
    }
}
