//! Phase 2 of a load, when the runs overlap: a k-way merge of the runs' tables into the final
//! tables. For a key in several runs the latest run wins (`tsv`) or the counts are summed
//! (`counts`).

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use strata_engine::cache::BlockCache;
use strata_engine::iterator::InternalIterator;
use strata_engine::merge::parse_counter;
use strata_engine::sstable::{Table, TableIter};
use strata_engine::{FileNumber, IngestFile, Keyspace, Options, ReadOptions};

use super::parse::Format;
use super::runs::{RunTables, TableSink, final_count, sum_counts};

/// A cursor over one run: its tables one after the other.
struct RunCursor {
    files: Vec<IngestFile>,
    next_file: usize,
    iter: Option<TableIter>,
    cache: Arc<BlockCache>,
}

impl RunCursor {
    fn new(run: RunTables) -> anyhow::Result<RunCursor> {
        let mut c = RunCursor {
            files: run.files,
            next_file: 0,
            iter: None,
            cache: BlockCache::new(0),
        };
        c.open_next()?;
        Ok(c)
    }

    /// Moves to the first entry of the next non-empty table, or ends the cursor.
    fn open_next(&mut self) -> anyhow::Result<()> {
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
            it.seek_to_first()?;
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
                self.open_next()?;
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
/// # Errors
/// The first key whose count cannot be added; I/O, corruption or a failing merge reading the
/// tables or `target`.
pub(crate) fn check_counts_add(target: &Keyspace, files: &[IngestFile]) -> anyhow::Result<()> {
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
    let mut cursor = RunCursor::new(RunTables {
        files: files.to_vec(),
        smallest: first.smallest_key.clone(),
        largest: last.largest_key.clone(),
    })?;
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
                    "key {:?}: the database holds {shown:?}, which is not a count the loaded \
                     count {} can be added to (not a decimal 64-bit integer, or the sum \
                     overflows); nothing was loaded",
                    String::from_utf8_lossy(key),
                    String::from_utf8_lossy(count)
                );
            }
        }
        cursor.advance()?;
    }
    Ok(())
}

/// Merges `runs` (in input order) into tables `<tmp>/final-NNNNN.sst`.
pub(crate) fn merge_runs(
    runs: Vec<RunTables>,
    tmp: &Path,
    options: &Options,
    format: Format,
    table_size_bytes: u64,
) -> anyhow::Result<Vec<IngestFile>> {
    let mut cursors = runs
        .into_iter()
        .map(RunCursor::new)
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
    // The runs' keys already carry any `--resp-keys` prefix.
    let mut out = TableSink::new(tmp, "final".to_string(), options, table_size_bytes, &[]);
    let mut key: Vec<u8> = Vec::new();
    let mut value: Vec<u8> = Vec::new();
    while let Some(&top) = heap.first() {
        let c = &cursors[top];
        key.clear();
        key.extend_from_slice(c.key().unwrap_or_default());
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
            Format::Counts => out.merge(&key, final_count(sum, &key)?.to_string().as_bytes())?,
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
