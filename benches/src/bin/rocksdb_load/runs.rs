//! Phase 1 of a load: read the input into runs that fit the memory budget, sort each run, keep
//! the last occurrence of each key, and write the run as tables with `SstFileWriter`.
//!
//! A run is one arena (`Vec<u8>` holding the input bytes as read) plus one [`Entry`] per pair;
//! sorting moves only the entries. The memory budget counts both.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rocksdb::{Options, SstFileWriter};
use strata_engine::MAX_KEY_SIZE;

/// Runs with fewer entries are written by one thread.
const PARALLEL_MIN_ENTRIES: usize = 10_000;

/// One parsed pair: where its line starts in the arena, and its key and value lengths. The key
/// is `arena[off .. off + klen]`, the value follows the tab. `prefix` holds 8 key bytes
/// (big-endian, after the run's common prefix) so most comparisons stay in the entry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    prefix: u64,
    off: usize,
    klen: u32,
    vlen: u32,
}

/// Bytes of the entry list one pair costs, for the memory budget.
pub(crate) const ENTRY_SIZE: usize = std::mem::size_of::<Entry>();

impl Entry {
    fn key<'a>(&self, arena: &'a [u8]) -> &'a [u8] {
        &arena[self.off..self.off + self.klen as usize]
    }

    fn value<'a>(&self, arena: &'a [u8]) -> &'a [u8] {
        let start = self.off + self.klen as usize + 1;
        &arena[start..start + self.vlen as usize]
    }
}

/// The tables one sorted run was written to, with its key range.
#[derive(Debug)]
pub(crate) struct RunTables {
    pub(crate) files: Vec<PathBuf>,
    pub(crate) smallest: Vec<u8>,
    pub(crate) largest: Vec<u8>,
}

/// Counters of the reading phase.
#[derive(Debug, Default)]
pub(crate) struct ReadStats {
    pub(crate) bytes: u64,
    pub(crate) lines: u64,
    pub(crate) pairs: u64,
}

/// Where and how runs are written.
pub(crate) struct RunReader<'a> {
    pub(crate) tmp: &'a Path,
    /// Table settings of runs that may be ingested as they are.
    pub(crate) final_options: &'a Options,
    /// Table settings of runs that will be merged again.
    pub(crate) scratch_options: &'a Options,
    pub(crate) memory_bytes: usize,
    pub(crate) table_size_bytes: u64,
    pub(crate) threads: usize,
    pub(crate) max_value_size: usize,
}

/// Whether every run lies strictly above the previous one, so the run tables are final.
pub(crate) fn runs_ordered(runs: &[RunTables]) -> bool {
    runs.windows(2).all(|w| w[0].largest < w[1].smallest)
}

impl RunReader<'_> {
    /// Reads the regular file `file` (`len` bytes) into runs and writes each, as `strata load`
    /// reads a file: the file is mapped, and each run (a window of the map) is parsed by one
    /// thread per core, split at line ends.
    pub(crate) fn read_file(
        &self,
        file: &std::fs::File,
        len: u64,
        stats: &mut ReadStats,
    ) -> Result<Vec<RunTables>> {
        let mut runs: Vec<RunTables> = Vec::new();
        // SAFETY: as in `strata load` (src/load/runs.rs, `Source::open`): a read-only map,
        // every slice bounds-checked against its length; a concurrent truncation of the input
        // kills the process before anything is ingested. Exercised by this binary's tests.
        #[expect(
            unsafe_code,
            reason = "a memory map of the input file, as strata load's"
        )]
        let map = unsafe { memmap2::Mmap::map(file) }.context("mapping the input")?;
        let data = usize::try_from(len)
            .ok()
            .and_then(|len| map.get(..len))
            .context("the input file is shorter than when the load started")?;
        let mut start = 0;
        while start < data.len() {
            let left = data.len() - start;
            // The budget less two entries per pair (as `strata load` counts a mapped file),
            // from the average line of the next MiB.
            let sample = &data[start..start + left.min(1 << 20)];
            let avg = (sample.len() / memchr::memchr_iter(b'\n', sample).count().max(1)).max(1);
            let mut want = (self.memory_bytes / (avg + 2 * ENTRY_SIZE) * avg).clamp(1, left);
            let used = loop {
                if want == left {
                    break want;
                }
                if let Some(i) = memchr::memrchr(b'\n', &data[start..start + want]) {
                    break i + 1;
                }
                want = want.saturating_mul(2).min(left);
            };
            let run = &data[start..start + used];
            let mut entries = self.parse_parallel(run, stats)?;
            stats.bytes += used as u64;
            if !entries.is_empty() {
                let may_be_final = runs_ordered(&runs);
                let run = self.write_run(run, &mut entries, runs.len(), may_be_final, &runs)?;
                runs.push(run);
            }
            start += used;
        }
        Ok(runs)
    }

    /// Parses the whole lines of `run` on one thread per core, each part split at a line end.
    fn parse_parallel(&self, run: &[u8], stats: &mut ReadStats) -> Result<Vec<Entry>> {
        let parts = if run.len() < (1 << 20) {
            1
        } else {
            self.threads
        };
        let mut bounds = vec![0];
        for p in 1..parts {
            let at = (run.len() / parts * p).max(bounds[p - 1]);
            bounds.push(memchr::memchr(b'\n', &run[at..]).map_or(run.len(), |i| at + i + 1));
        }
        bounds.push(run.len());
        let parsed: Vec<Result<(Vec<Entry>, ReadStats)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = bounds
                .windows(2)
                .map(|w| {
                    let (from, to) = (w[0], w[1]);
                    scope.spawn(move || {
                        let (mut entries, mut part) = (Vec::new(), ReadStats::default());
                        self.parse_range(run, from, to, &mut entries, &mut part)?;
                        Ok((entries, part))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a parser thread panicked")))
                })
                .collect()
        });
        let mut entries = Vec::new();
        for (p, part) in parsed.into_iter().enumerate() {
            let Ok((part_entries, part)) = part else {
                // Parse the failed part again, counting from the lines before it, for the
                // error with the line's number in the input.
                self.parse_range(run, bounds[p], bounds[p + 1], &mut Vec::new(), stats)?;
                bail!("a parser thread failed");
            };
            stats.lines += part.lines;
            stats.pairs += part.pairs;
            entries.extend_from_slice(&part_entries);
        }
        Ok(entries)
    }

    /// Parses the lines of `run[from..to]` (`to` is a line end or the end of `run`), counting
    /// in `stats` (a bad line's number is `stats.lines` at that line).
    fn parse_range(
        &self,
        run: &[u8],
        from: usize,
        to: usize,
        entries: &mut Vec<Entry>,
        stats: &mut ReadStats,
    ) -> Result<()> {
        let mut start = from;
        while start < to {
            let end = memchr::memchr(b'\n', &run[start..to]).map_or(to, |i| start + i);
            self.parse_line(run, start, end, entries, stats)?;
            start = end + 1;
        }
        Ok(())
    }

    /// Parses `arena[start..end]`, one line without its newline.
    fn parse_line(
        &self,
        arena: &[u8],
        start: usize,
        end: usize,
        entries: &mut Vec<Entry>,
        stats: &mut ReadStats,
    ) -> Result<()> {
        stats.lines += 1;
        let line = &arena[start..end];
        let Some(tab) = memchr::memchr(b'\t', line) else {
            bail!("line {}: no tab between key and value", stats.lines);
        };
        let vlen = line.len() - tab - 1;
        if tab > MAX_KEY_SIZE {
            bail!("line {}: key of {tab} bytes is too long", stats.lines);
        }
        if vlen > self.max_value_size {
            bail!("line {}: value of {vlen} bytes is too long", stats.lines);
        }
        stats.pairs += 1;
        entries.push(Entry {
            prefix: 0, // set by the sort
            off: start,
            klen: u32::try_from(tab).context("key length")?,
            vlen: u32::try_from(vlen).context("value length")?,
        });
        Ok(())
    }

    /// Sorts `entries`, keeps the last occurrence of each key and writes the run to tables of
    /// about `table_size_bytes`, split in key order among `threads` threads. A run above every
    /// earlier (final) run gets the final table settings; any other is only merged again.
    fn write_run(
        &self,
        arena: &[u8],
        entries: &mut Vec<Entry>,
        index: usize,
        ordered_so_far: bool,
        previous: &[RunTables],
    ) -> Result<RunTables> {
        sort_entries(arena, entries);
        keep_last(arena, entries);
        let (Some(first), Some(last)) = (entries.first(), entries.last()) else {
            bail!("empty run");
        };
        let (smallest, largest) = (first.key(arena), last.key(arena));
        let is_final = ordered_so_far
            && previous
                .last()
                .is_none_or(|p| p.largest.as_slice() < smallest);
        let options = if is_final {
            self.final_options
        } else {
            self.scratch_options
        };
        let parts = if entries.len() < PARALLEL_MIN_ENTRIES {
            1
        } else {
            self.threads
        };
        let cuts = split_by_bytes(entries, parts);
        let (tmp, table_size) = (self.tmp, self.table_size_bytes);
        let entries = &entries[..];
        let results: Vec<Result<Vec<PathBuf>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = cuts
                .windows(2)
                .enumerate()
                .map(|(p, w)| {
                    let part = &entries[w[0]..w[1]];
                    let stem = format!("run{index:05}-{p:02}");
                    scope.spawn(move || {
                        write_tables(
                            tmp,
                            &stem,
                            options,
                            table_size,
                            part.iter().map(|e| (e.key(arena), e.value(arena))),
                        )
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
            smallest: smallest.to_vec(),
            largest: largest.to_vec(),
        })
    }
}

/// Sorts entries by key; equal keys keep their input order (the arena offset). The 8-byte
/// prefix is taken after the prefix all keys of the run share (JSON keys often start alike).
fn sort_entries(arena: &[u8], entries: &mut [Entry]) {
    let threads = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let parallel = entries.len() >= PARALLEL_MIN_ENTRIES && threads >= 2;
    let mid = if parallel { entries.len() / 2 } else { 0 };
    let lcp = {
        let (left, right) = entries.split_at(mid);
        let (l, r) = if parallel {
            std::thread::scope(|scope| {
                let l = scope.spawn(|| common_prefix(arena, left));
                let r = common_prefix(arena, right);
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
            e.prefix = prefix_u64(&e.key(arena)[lcp..]);
        }
    };
    let skip = lcp + 8;
    let cmp = |a: &Entry, b: &Entry| {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| {
                // Equal prefixes: the bytes before `skip` are equal (or a key ended there).
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
    // Two halves sorted on two threads, then merged.
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
    // Merge in place with a copy of the left half only (as `strata load` does).
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
    entries[k..k + (left.len() - i)].copy_from_slice(&left[i..]);
}

/// The length of the prefix every key of `entries` shares, and the first key.
fn common_prefix<'a>(arena: &'a [u8], entries: &[Entry]) -> Option<(usize, &'a [u8])> {
    let first = entries.first()?.key(arena);
    let mut lcp = first.len();
    for e in entries {
        let key = e.key(arena);
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

/// Cuts sorted `entries` into `parts` consecutive parts of about equal bytes; returns
/// `parts + 1` indices.
fn split_by_bytes(entries: &[Entry], parts: usize) -> Vec<usize> {
    let bytes = |e: &Entry| u64::from(e.klen) + u64::from(e.vlen) + 1;
    let total: u64 = entries.iter().map(bytes).sum();
    let parts = parts.max(1);
    let mut cuts = vec![0];
    let (mut sum, mut next) = (0u64, 1u64);
    for (i, e) in entries.iter().enumerate() {
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

/// The first 8 bytes of `key`, zero-padded, as a big-endian number: prefixes compare as the
/// bytes do, up to the 8th.
#[expect(
    clippy::big_endian_bytes,
    reason = "a sort key: big-endian order is byte order"
)]
fn prefix_u64(key: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = key.len().min(8);
    buf[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(buf)
}

/// Keeps the last entry of each group of equal keys in sorted `entries`.
fn keep_last(arena: &[u8], entries: &mut Vec<Entry>) {
    let mut kept = 0;
    for i in 0..entries.len() {
        let next_is_same = entries
            .get(i + 1)
            .is_some_and(|n| n.key(arena) == entries[i].key(arena));
        if !next_is_same {
            entries[kept] = entries[i];
            kept += 1;
        }
    }
    entries.truncate(kept);
}

/// Writes strictly increasing `pairs` to tables `<dir>/<stem>-NNNNN.sst` of about
/// `table_size_bytes` each; returns their paths in key order.
pub(crate) fn write_tables<'p>(
    dir: &Path,
    stem: &str,
    options: &Options,
    table_size_bytes: u64,
    pairs: impl Iterator<Item = (&'p [u8], &'p [u8])>,
) -> Result<Vec<PathBuf>> {
    let mut pairs = pairs.peekable();
    let mut files = Vec::new();
    while pairs.peek().is_some() {
        let path = dir.join(format!("{stem}-{:05}.sst", files.len()));
        let mut writer = SstFileWriter::create(options);
        writer
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        for (key, value) in pairs.by_ref() {
            writer.put(key, value)?;
            if writer.file_size() >= table_size_bytes {
                break;
            }
        }
        writer
            .finish()
            .with_context(|| format!("finishing {}", path.display()))?;
        files.push(path);
    }
    Ok(files)
}
