//! Phase 1 of a load: read the input into runs that fit the memory budget, sort each run, keep
//! the last occurrence of each key, and write the run as tables with `SstFileWriter`.
//!
//! A run is one arena (`Vec<u8>` holding the input bytes as read) plus one [`Entry`] per pair;
//! sorting moves only the entries. The memory budget counts both.

use std::io::Read;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use rocksdb::{Options, SstFileWriter};
use strata_engine::MAX_KEY_SIZE;

/// Bytes read from the input per `read` call.
const READ_CHUNK_BYTES: usize = 8 << 20;

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
    /// Reads all of `input`, writing one [`RunTables`] per run, in input order.
    pub(crate) fn read_all(
        &self,
        input: &mut dyn Read,
        stats: &mut ReadStats,
    ) -> Result<Vec<RunTables>> {
        let mut runs: Vec<RunTables> = Vec::new();
        let mut arena: Vec<u8> = Vec::new();
        let mut entries: Vec<Entry> = Vec::new();
        let mut carry: Vec<u8> = Vec::new();
        let mut eof = false;
        while !eof {
            arena.clear();
            entries.clear();
            arena.extend_from_slice(&carry);
            carry.clear();
            // Start of the first line not yet parsed.
            let mut parsed = 0;
            loop {
                let used = arena.len() + entries.len() * ENTRY_SIZE;
                if used >= self.memory_bytes && !entries.is_empty() {
                    break;
                }
                // Leave room for the entries the new bytes bring: estimate from the average
                // line so far (half of what is left before the first line is known).
                let remaining = self.memory_bytes.saturating_sub(used);
                let want = if entries.is_empty() {
                    remaining / 2
                } else {
                    let avg = (parsed / entries.len()).max(1);
                    remaining / (avg + ENTRY_SIZE) * avg
                };
                let want = want.clamp(4096, READ_CHUNK_BYTES);
                let scan_from = arena.len();
                let n = (&mut *input)
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
                parsed = self.parse_lines(&arena, parsed, scan_from, &mut entries, stats)?;
            }
            carry.extend_from_slice(&arena[parsed..]);
            arena.truncate(parsed);
            if !entries.is_empty() {
                let may_be_final = runs_ordered(&runs);
                let run = self.write_run(&arena, &mut entries, runs.len(), may_be_final, &runs)?;
                runs.push(run);
            }
        }
        Ok(runs)
    }

    /// Parses every complete line in `arena[from..]`; no newline lies in
    /// `arena[from..scan_from]`. Returns the start of the incomplete tail.
    fn parse_lines(
        &self,
        arena: &[u8],
        from: usize,
        scan_from: usize,
        entries: &mut Vec<Entry>,
        stats: &mut ReadStats,
    ) -> Result<usize> {
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
        let per_part = entries.len().div_ceil(parts);
        let (tmp, table_size) = (self.tmp, self.table_size_bytes);
        let results: Vec<Result<Vec<PathBuf>>> = std::thread::scope(|scope| {
            let handles: Vec<_> = entries
                .chunks(per_part)
                .enumerate()
                .map(|(p, part)| {
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
        e.prefix = prefix_u64(&e.key(arena)[lcp..]);
    }
    let skip = lcp + 8;
    entries.sort_unstable_by(|a, b| {
        a.prefix
            .cmp(&b.prefix)
            .then_with(|| {
                // Equal prefixes: the bytes before `skip` are equal (or a key ended there).
                let (ka, kb) = (a.key(arena), b.key(arena));
                let s = skip.min(ka.len()).min(kb.len());
                ka[s..].cmp(&kb[s..])
            })
            .then(a.off.cmp(&b.off))
    });
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
