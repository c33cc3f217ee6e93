//! Job tests: real input tables in a temporary directory, compacted and read back.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::cache::{BlockCache, TableCache};
use crate::compaction::job::{JobContext, JobStats, run_compaction};
use crate::compaction::picker::{CompactionReason, CompactionTask};
use crate::error::{Error, Result};
use crate::filename::{self, FileKind};
use crate::iterator::InternalIterator;
use crate::options::Options;
use crate::sstable::{TableBuilder, TableBuilderOptions};
use crate::types::{FileNumber, InternalKey, InternalKeyRef, SeqNo, ValueKind};
use crate::version::{FileMeta, VersionEdit};

use ValueKind::{Delete as Del, Merge, Put};

/// One entry: user key, seqno, kind, value.
type Entry = (Vec<u8>, u64, ValueKind, Vec<u8>);

fn e(user_key: &str, seqno: u64, kind: ValueKind, value: &str) -> Entry {
    (
        user_key.as_bytes().to_vec(),
        seqno,
        kind,
        value.as_bytes().to_vec(),
    )
}

/// Puts of `value` at `seqno` for the keys `{prefix}{i:04}`, `i` in `keys`.
fn puts(prefix: &str, keys: std::ops::Range<u32>, seqno: u64, value: &str) -> Vec<Entry> {
    keys.map(|i| e(&format!("{prefix}{i:04}"), seqno, Put, value))
        .collect()
}

/// Options that make ~2 KiB tables of 256-byte uncompressed blocks, so a few hundred
/// entries span several output tables.
fn small_tables() -> Options {
    Options {
        target_file_size: 2048,
        block_size: 256,
        compression: false,
        ..Options::default()
    }
}

fn io(err: std::io::Error) -> Error {
    Error::io("tempdir", err)
}

struct Fixture {
    dir: tempfile::TempDir,
    options: Options,
    cache: Arc<TableCache>,
    next_number: u64,
}

impl Fixture {
    fn new() -> Result<Fixture> {
        Fixture::with_options(Options::default())
    }

    fn with_options(options: Options) -> Result<Fixture> {
        let dir = tempfile::tempdir().map_err(io)?;
        let cache = TableCache::new(
            crate::fs::os(),
            dir.path().to_path_buf(),
            100,
            BlockCache::new(1 << 20),
        );
        Ok(Fixture {
            dir,
            options,
            cache,
            next_number: 100,
        })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Writes a table with `entries` (sorted here into internal-key order).
    fn table(&mut self, number: u64, mut entries: Vec<Entry>) -> Result<Arc<FileMeta>> {
        entries.sort_by(|a, b| {
            let ka = InternalKeyRef::new(&a.0, SeqNo(a.1), a.2);
            let kb = InternalKeyRef::new(&b.0, SeqNo(b.1), b.2);
            ka.cmp(&kb)
        });
        let path = filename::table_path(self.path(), FileNumber(number));
        let mut b = TableBuilder::create(
            &crate::fs::os(),
            &path,
            TableBuilderOptions::from_options(&self.options),
        )?;
        for (k, s, kind, v) in &entries {
            b.add(InternalKeyRef::new(k, SeqNo(*s), *kind), v)?;
        }
        let (props, size) = b.finish()?;
        Ok(Arc::new(FileMeta {
            number: FileNumber(number),
            size,
            smallest: props.smallest_key,
            largest: props.largest_key,
            smallest_seqno: props.smallest_seqno,
            largest_seqno: props.largest_seqno,
            num_entries: props.num_entries,
            num_deletions: props.num_deletions,
            global_seqno: None,
            table_id: None,
        }))
    }

    fn run(
        &mut self,
        task: &CompactionTask,
        snapshots: &[SeqNo],
    ) -> Result<(VersionEdit, JobStats)> {
        let next = std::sync::atomic::AtomicU64::new(self.next_number);
        let new_number = || FileNumber(next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1);
        let ctx = JobContext {
            dir: self.dir.path(),
            options: &self.options,
            table_cache: &self.cache,
            snapshots,
            new_file_number: &new_number,
        };
        let result = run_compaction(task, &ctx);
        self.next_number = next.into_inner();
        result
    }

    /// Every entry of table `number`, in order.
    fn read(&self, number: FileNumber) -> Result<Vec<(InternalKey, Bytes)>> {
        let table = self
            .cache
            .get(&crate::cache::describe_table_file(self.dir.path(), number)?)?;
        let mut it = table.iter();
        it.seek_to_first()?;
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_owned(), Bytes::copy_from_slice(it.value())));
            it.next()?;
        }
        Ok(out)
    }

    /// Entries of all the edit's new tables, in table order, as compact tuples.
    fn outputs(&self, edit: &VersionEdit) -> Result<Vec<(String, u64, ValueKind)>> {
        let mut out = Vec::new();
        for (_, meta) in &edit.new_files {
            for (k, _) in self.read(meta.number)? {
                out.push((
                    String::from_utf8_lossy(&k.user_key).into_owned(),
                    k.seqno.0,
                    k.kind,
                ));
            }
        }
        Ok(out)
    }

    fn table_files(&self) -> Result<HashSet<u64>> {
        let mut found = HashSet::new();
        for entry in std::fs::read_dir(self.path()).map_err(io)? {
            let name = entry.map_err(io)?.file_name();
            if let Some(FileKind::Table(n)) = name.to_str().and_then(filename::parse) {
                found.insert(n.0);
            }
        }
        Ok(found)
    }
}

/// A task merging `inputs` (level 1) with `output_inputs` (level 2).
fn task(
    inputs: Vec<Arc<FileMeta>>,
    output_inputs: Vec<Arc<FileMeta>>,
    bottommost: bool,
) -> CompactionTask {
    CompactionTask {
        level: 1,
        output_level: 2,
        inputs,
        output_inputs,
        grandparents: Vec::new(),
        trivial_move: false,
        score: 1.0,
        reason: CompactionReason::Manual,
        bottommost,
    }
}

fn row(k: &str, s: u64, kind: ValueKind) -> (String, u64, ValueKind) {
    (k.to_owned(), s, kind)
}

#[test]
fn shadowed_versions_are_dropped() -> Result<()> {
    let mut fx = Fixture::new()?;
    let upper = fx.table(1, vec![e("a", 9, Put, "a9"), e("b", 8, Del, "")])?;
    let lower = fx.table(
        2,
        vec![
            e("a", 3, Put, "a3"),
            e("a", 2, Del, ""),
            e("b", 1, Put, "b1"),
        ],
    )?;
    let (edit, stats) = fx.run(&task(vec![upper], vec![lower], false), &[])?;
    assert_eq!(fx.outputs(&edit)?, vec![row("a", 9, Put), row("b", 8, Del)]);
    assert_eq!(
        edit.deleted_files,
        vec![(1, FileNumber(1)), (2, FileNumber(2))]
    );
    assert_eq!(
        (stats.entries_in, stats.entries_out, stats.dropped),
        (5, 2, 3)
    );
    assert_eq!(stats.output_files, 1);
    assert!(stats.bytes_read > 0 && stats.bytes_written > 0);
    // The value of the kept version is the newest one.
    let (_, meta) = &edit.new_files[0];
    assert_eq!(&fx.read(meta.number)?[0].1[..], b"a9");
    Ok(())
}

#[test]
fn versions_visible_to_a_snapshot_are_kept() -> Result<()> {
    let mut fx = Fixture::new()?;
    let upper = fx.table(1, vec![e("a", 10, Put, ""), e("a", 7, Put, "")])?;
    let lower = fx.table(
        2,
        vec![e("a", 5, Put, ""), e("a", 2, Put, ""), e("b", 4, Del, "")],
    )?;
    // Snapshot 6 sees a@5; the latest state sees a@10. a@7 and a@2 are seen by nobody.
    let (edit, _) = fx.run(&task(vec![upper], vec![lower], false), &[SeqNo(6)])?;
    assert_eq!(
        fx.outputs(&edit)?,
        vec![row("a", 10, Put), row("a", 5, Put), row("b", 4, Del)]
    );
    // Two snapshots at 3 and 6: stripes (6, ..], (3, 6], [0, 3].
    let mut fx = Fixture::new()?;
    let t = fx.table(
        1,
        vec![
            e("a", 10, Put, ""),
            e("a", 7, Put, ""),
            e("a", 5, Put, ""),
            e("a", 3, Put, ""),
            e("a", 1, Put, ""),
        ],
    )?;
    let (edit, _) = fx.run(&task(vec![t], vec![], false), &[SeqNo(3), SeqNo(6)])?;
    assert_eq!(
        fx.outputs(&edit)?,
        vec![row("a", 10, Put), row("a", 5, Put), row("a", 3, Put)]
    );
    Ok(())
}

#[test]
fn tombstones_are_dropped_only_at_the_bottommost_level() -> Result<()> {
    let entries = || {
        vec![
            e("b", 5, Del, ""),
            e("b", 3, Put, "old"),
            e("c", 2, Put, "c"),
        ]
    };
    // Not bottommost: the tombstone must stay to hide b@3's possible copies deeper down.
    let mut fx = Fixture::new()?;
    let t = fx.table(1, entries())?;
    let (edit, _) = fx.run(&task(vec![t], vec![], false), &[])?;
    assert_eq!(fx.outputs(&edit)?, vec![row("b", 5, Del), row("c", 2, Put)]);

    // Bottommost, no snapshot: the tombstone and what it hides go; c's lone put gets seqno 0.
    let mut fx = Fixture::new()?;
    let t = fx.table(1, entries())?;
    let (edit, stats) = fx.run(&task(vec![t], vec![], true), &[])?;
    assert_eq!(fx.outputs(&edit)?, vec![row("c", 0, Put)]);
    assert_eq!(stats.dropped, 2);

    // Bottommost, but snapshot 4 still sees b@3: the tombstone (newer) is kept too.
    let mut fx = Fixture::new()?;
    let t = fx.table(1, entries())?;
    let (edit, _) = fx.run(&task(vec![t], vec![], true), &[SeqNo(4)])?;
    assert_eq!(
        fx.outputs(&edit)?,
        vec![row("b", 5, Del), row("b", 3, Put), row("c", 0, Put)]
    );
    Ok(())
}

#[test]
fn all_tombstone_input_compacts_to_nothing() -> Result<()> {
    let mut fx = Fixture::new()?;
    let upper = fx.table(1, vec![e("a", 9, Del, ""), e("b", 8, Del, "")])?;
    let lower = fx.table(2, vec![e("a", 3, Put, "x"), e("b", 2, Put, "y")])?;
    let (edit, stats) = fx.run(&task(vec![upper], vec![lower], true), &[])?;
    assert!(edit.new_files.is_empty());
    assert_eq!(edit.deleted_files.len(), 2);
    assert_eq!(
        (stats.output_files, stats.entries_out, stats.dropped),
        (0, 0, 4)
    );
    // No output file was created.
    assert_eq!(fx.table_files()?, [1, 2].into());
    Ok(())
}

#[test]
fn bottommost_seqno_zeroing_only_touches_lone_puts() -> Result<()> {
    let mut fx = Fixture::new()?;
    let t = fx.table(
        1,
        vec![
            e("a", 5, Put, "a"),
            // b: a newer version visible to snapshot 6's successors, and b@4 for snapshot 6.
            e("b", 9, Put, "b9"),
            e("b", 4, Put, "b4"),
            // c: merge operands stay, with the put under them; c@2 is shadowed by c@6.
            e("c", 8, Merge, "+1"),
            e("c", 7, Merge, "+2"),
            e("c", 6, Put, "base"),
            e("c", 2, Put, "old"),
            // d: a snapshot-visible tombstone over a put.
            e("d", 7, Del, ""),
            e("d", 1, Put, "d"),
        ],
    )?;
    let (edit, _) = fx.run(&task(vec![t], vec![], true), &[SeqNo(6)])?;
    assert_eq!(
        fx.outputs(&edit)?,
        vec![
            row("a", 0, Put),
            row("b", 9, Put),
            row("b", 4, Put),
            row("c", 8, Merge),
            row("c", 7, Merge),
            row("c", 6, Put),
            row("d", 7, Del),
            row("d", 1, Put),
        ]
    );
    let (_, meta) = &edit.new_files[0];
    assert_eq!(meta.smallest_seqno, SeqNo(0));
    assert_eq!(meta.largest_seqno, SeqNo(9));
    Ok(())
}

#[test]
fn merge_operands_above_a_tombstone_are_kept_with_it() -> Result<()> {
    let mut fx = Fixture::new()?;
    let t = fx.table(
        1,
        vec![
            e("k", 9, Merge, "+1"),
            e("k", 8, Del, ""),
            e("k", 3, Put, "x"),
        ],
    )?;
    let (edit, _) = fx.run(&task(vec![t], vec![], false), &[])?;
    assert_eq!(
        fx.outputs(&edit)?,
        vec![row("k", 9, Merge), row("k", 8, Del)]
    );
    Ok(())
}

/// A fixture whose keyspace folds operands with [`crate::CounterAdd`].
fn counters() -> Result<Fixture> {
    Fixture::with_options(Options::default().merge_operator(Some(Arc::new(crate::CounterAdd))))
}

/// The edit's output entries with their values.
fn outputs_with_values(
    fx: &Fixture,
    edit: &VersionEdit,
) -> Result<Vec<(String, u64, ValueKind, String)>> {
    let mut out = Vec::new();
    for (_, meta) in &edit.new_files {
        for (k, v) in fx.read(meta.number)? {
            out.push((
                String::from_utf8_lossy(&k.user_key).into_owned(),
                k.seqno.0,
                k.kind,
                String::from_utf8_lossy(&v).into_owned(),
            ));
        }
    }
    Ok(out)
}

fn vrow(k: &str, s: u64, kind: ValueKind, v: &str) -> (String, u64, ValueKind, String) {
    (k.to_owned(), s, kind, v.to_owned())
}

#[test]
fn operands_fold_onto_their_base_in_each_stripe() -> Result<()> {
    let mut fx = counters()?;
    let t = fx.table(
        1,
        vec![
            // a: operands over a put, one stripe: one put at the newest operand's seqno.
            e("a", 9, Merge, "1"),
            e("a", 8, Merge, "2"),
            e("a", 7, Put, "10"),
            e("a", 2, Put, "old"),
            // b: operands over a tombstone: the tombstone is the absent base.
            e("b", 9, Merge, "5"),
            e("b", 8, Del, ""),
            e("b", 1, Put, "99"),
            // c: snapshot 6 separates the operands from the put: partial merge above it.
            e("c", 9, Merge, "1"),
            e("c", 8, Merge, "2"),
            e("c", 6, Merge, "4"),
            e("c", 5, Put, "100"),
            // d: one operand alone above the snapshot stays as it is.
            e("d", 9, Merge, "3"),
            e("d", 4, Put, "1"),
            // x: an operand the operator refuses keeps everything as it was.
            e("x", 9, Merge, "1"),
            e("x", 8, Merge, "nope"),
            e("x", 7, Put, "1"),
        ],
    )?;
    // Not bottommost: operands with no base in their stripe cannot become puts.
    let (edit, _) = fx.run(&task(vec![t], vec![], false), &[SeqNo(6)])?;
    assert_eq!(
        outputs_with_values(&fx, &edit)?,
        vec![
            vrow("a", 9, Put, "13"),
            vrow("a", 2, Put, "old"),
            vrow("b", 9, Put, "5"),
            vrow("b", 1, Put, "99"),
            vrow("c", 9, Merge, "3"),
            vrow("c", 6, Put, "104"),
            vrow("d", 9, Merge, "3"),
            vrow("d", 4, Put, "1"),
            vrow("x", 9, Merge, "1"),
            vrow("x", 8, Merge, "nope"),
            vrow("x", 7, Put, "1"),
        ]
    );
    Ok(())
}

#[test]
fn operands_with_nothing_older_become_a_put_only_at_the_bottom() -> Result<()> {
    let mut fx = counters()?;
    let entries = || {
        vec![
            e("k", 9, Merge, "1"),
            e("k", 8, Merge, "2"),
            e("k", 7, Merge, "3"),
        ]
    };
    let t = fx.table(1, entries())?;
    // Bottommost, no snapshot: nothing older exists, so a put, at seqno 0 (the key's only
    // version).
    let (edit, stats) = fx.run(&task(vec![t], vec![], true), &[])?;
    assert_eq!(
        outputs_with_values(&fx, &edit)?,
        vec![vrow("k", 0, Put, "6")]
    );
    assert_eq!((stats.entries_in, stats.entries_out), (3, 1));
    // Above a deeper level: one operand, by the partial merge.
    let t = fx.table(2, entries())?;
    let (edit, _) = fx.run(&task(vec![t], vec![], false), &[])?;
    assert_eq!(
        outputs_with_values(&fx, &edit)?,
        vec![vrow("k", 9, Merge, "6")]
    );
    // Bottommost but a snapshot between them: the older operand is the earliest stripe's,
    // the newer ones partially merged.
    let t = fx.table(3, entries())?;
    let (edit, _) = fx.run(&task(vec![t], vec![], true), &[SeqNo(7)])?;
    assert_eq!(
        outputs_with_values(&fx, &edit)?,
        vec![vrow("k", 9, Merge, "3"), vrow("k", 7, Put, "3")]
    );
    Ok(())
}

#[test]
fn without_a_merge_operator_operands_are_kept() -> Result<()> {
    let mut fx = Fixture::new()?;
    let t = fx.table(1, vec![e("k", 9, Merge, "1"), e("k", 8, Merge, "2")])?;
    let (edit, _) = fx.run(&task(vec![t], vec![], true), &[])?;
    assert_eq!(
        fx.outputs(&edit)?,
        vec![row("k", 9, Merge), row("k", 8, Merge)]
    );
    Ok(())
}

/// Three versions of each of 300 keys, all visible to snapshots, with ~1 KiB tables.
fn many_versions(fx: &mut Fixture) -> Result<(Vec<Arc<FileMeta>>, Vec<SeqNo>)> {
    let value = "v".repeat(20);
    let mut l0 = Vec::new();
    for round in 0..3u64 {
        let entries = (0..300u64)
            .map(|i| e(&format!("key{i:04}"), 10 * (round + 1) + i % 7, Put, &value))
            .collect();
        l0.push(fx.table(round + 1, entries)?);
    }
    l0.reverse(); // newest first, as in L0
    Ok((l0, vec![SeqNo(19), SeqNo(29)]))
}

#[test]
fn outputs_are_cut_at_the_target_size_and_never_inside_a_user_key() -> Result<()> {
    let mut fx = Fixture::with_options(small_tables())?;
    let (l0, snapshots) = many_versions(&mut fx)?;
    let mut t = task(l0, vec![], false);
    t.level = 0;
    t.output_level = 1;
    let (edit, stats) = fx.run(&t, &snapshots)?;
    assert!(stats.output_files > 5, "{} outputs", stats.output_files);
    assert_eq!(stats.entries_out, 900);
    let metas: Vec<&FileMeta> = edit.new_files.iter().map(|(_, m)| m).collect();
    for pair in metas.windows(2) {
        // Sorted and disjoint by user key: no user key spans two tables.
        assert!(pair[0].largest.user_key < pair[1].smallest.user_key);
    }
    for m in &metas {
        // Cut once past the target: at most one block (plus the rest of its key) over.
        assert!(m.size < 2048 + 1024, "table of {} bytes", m.size);
        let entries = fx.read(m.number)?;
        assert_eq!(entries.len() as u64, m.num_entries);
        assert!(entries.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(entries.first().map(|e| &e.0), Some(&m.smallest));
        assert_eq!(entries.last().map(|e| &e.0), Some(&m.largest));
    }
    // Every version survived, in order.
    let all = fx.outputs(&edit)?;
    assert_eq!(all.len(), 900);
    assert!(
        all.windows(2)
            .all(|w| (&w[0].0, std::cmp::Reverse(w[0].1)) < (&w[1].0, std::cmp::Reverse(w[1].1)))
    );
    Ok(())
}

#[test]
fn outputs_are_cut_where_the_grandparent_overlap_grows_too_large() -> Result<()> {
    let options = Options {
        target_file_size: 1 << 20,
        ..Options::default()
    };
    let mut fx = Fixture::with_options(options)?;
    let t1 = fx.table(
        1,
        (0..100)
            .map(|i| e(&format!("k{i:03}"), 5, Put, "v"))
            .collect(),
    )?;
    let mut t = task(vec![t1], vec![], false);
    // Grandparents: 30 tables of 1 MiB each over the key space: an output overlaps more than
    // 10 MiB of them after 11 tables, so about three outputs.
    t.grandparents = (0..30u64)
        .map(|i| {
            let k = format!("k{:03}", i * 3);
            Arc::new(FileMeta {
                number: FileNumber(1000 + i),
                size: 1 << 20,
                smallest: InternalKey::new(k.clone().into_bytes(), SeqNo(1), Put),
                largest: InternalKey::new(k.into_bytes(), SeqNo(1), Put),
                smallest_seqno: SeqNo(1),
                largest_seqno: SeqNo(1),
                num_entries: 1,
                num_deletions: 0,
                global_seqno: None,
                table_id: None,
            })
        })
        .collect();
    let (edit, stats) = fx.run(&t, &[])?;
    assert_eq!(stats.output_files, 3);
    assert_eq!(stats.entries_out, 100);
    assert!(
        edit.new_files
            .windows(2)
            .all(|w| w[0].1.largest < w[1].1.smallest)
    );
    Ok(())
}

#[test]
fn trivial_move_rewrites_nothing() -> Result<()> {
    let mut fx = Fixture::new()?;
    let t1 = fx.table(1, vec![e("a", 1, Put, "x")])?;
    let mut t = task(vec![Arc::clone(&t1)], vec![], false);
    t.trivial_move = true;
    let (edit, stats) = fx.run(&t, &[])?;
    assert_eq!(edit.deleted_files, vec![(1, FileNumber(1))]);
    assert_eq!(edit.new_files, vec![(2, FileMeta::clone(&t1))]);
    assert_eq!((stats.bytes_read, stats.bytes_written), (0, 0));
    assert_eq!(fx.table_files()?, [1].into());
    Ok(())
}

/// Damages a data block of table `number` ([`crate::test_util::damage_data_block`]).
fn damage_data_block(fx: &Fixture, number: u64) -> Result<()> {
    let path = filename::table_path(fx.path(), FileNumber(number));
    crate::test_util::damage_data_block(&path).map_err(io)
}

/// Runs `task` (no snapshots), which must fail with a corruption error.
fn expect_corruption(fx: &mut Fixture, task: &CompactionTask) -> Result<()> {
    match fx.run(task, &[]) {
        Ok(_) => panic!("compaction of a damaged table succeeded"),
        Err(e) => assert!(e.is_corruption(), "{e}"),
    }
    Ok(())
}

#[test]
fn failed_compaction_removes_its_partial_outputs() -> Result<()> {
    let mut fx = Fixture::with_options(small_tables())?;
    let good = fx.table(1, puts("a", 0..400, 5, "value"))?;
    let bad = fx.table(2, puts("b", 0..400, 4, "value"))?;
    // Damage a data block in the middle of the second table: the merge fails after several
    // outputs of the first table's keys are finished.
    damage_data_block(&fx, 2)?;
    expect_corruption(&mut fx, &task(vec![good], vec![bad], false))?;
    assert!(
        fx.next_number > 102,
        "outputs were started before the failure"
    );
    assert_eq!(fx.table_files()?, [1, 2].into());
    Ok(())
}

/// Four level-1 tables of older versions (some deleted by the upper level) under `l0`.
fn lower_level(fx: &mut Fixture, first_number: u64) -> Result<Vec<Arc<FileMeta>>> {
    (0..4u64)
        .map(|t| {
            let entries = (t * 75..(t + 1) * 75)
                .flat_map(|i| {
                    let key = format!("key{i:04}");
                    [e(&key, 2, Put, "old"), e(&key, 1, Del, "")]
                })
                .collect();
            fx.table(first_number + t, entries)
        })
        .collect()
}

#[test]
fn subcompactions_write_what_one_merge_writes() -> Result<()> {
    let mut results = Vec::new();
    for (subcompactions, bottommost) in [(1, false), (4, false), (1, true), (3, true)] {
        let options = Options {
            max_subcompactions: subcompactions,
            ..small_tables()
        };
        let mut fx = Fixture::with_options(options)?;
        let (l0, snapshots) = many_versions(&mut fx)?;
        let lower = lower_level(&mut fx, 10)?;
        let mut t = task(l0, lower, bottommost);
        t.level = 0;
        t.output_level = 1;
        let bounds = crate::compaction::subcompaction_boundaries(&t, subcompactions);
        assert_eq!(bounds.len(), subcompactions.min(4) - 1);
        let (edit, stats) = fx.run(&t, &snapshots)?;
        let metas: Vec<&FileMeta> = edit.new_files.iter().map(|(_, m)| m).collect();
        for pair in metas.windows(2) {
            assert!(pair[0].largest.user_key < pair[1].smallest.user_key);
        }
        // Every bound starts a new output table: no table spans two ranges.
        for bound in &bounds {
            assert!(
                metas.iter().any(|m| m.smallest.user_key == *bound),
                "no output starts at {:?}",
                String::from_utf8_lossy(bound)
            );
        }
        assert_eq!(stats.entries_in, 900 + 600);
        assert_eq!(stats.subcompactions, bounds.len() + 1);
        results.push((bottommost, fx.outputs(&edit)?, stats.entries_out));
    }
    assert_eq!(
        results[0].1, results[1].1,
        "split and unsplit merges differ"
    );
    assert_eq!(
        results[2].1, results[3].1,
        "split and unsplit merges differ"
    );
    // The lower level's versions are shadowed inside the oldest stripe.
    assert!(results.iter().all(|r| r.2 == 900));
    Ok(())
}

#[test]
fn a_failed_subcompaction_removes_the_outputs_of_every_range() -> Result<()> {
    let options = Options {
        max_subcompactions: 2,
        ..small_tables()
    };
    let mut fx = Fixture::with_options(options)?;
    let upper = fx.table(1, puts("k", 0..800, 9, "new"))?;
    let good = fx.table(2, puts("k", 0..400, 5, "value"))?;
    let bad = fx.table(3, puts("k", 400..800, 4, "value"))?;
    damage_data_block(&fx, 3)?;
    let t = task(vec![upper], vec![good, bad], false);
    assert_eq!(
        crate::compaction::subcompaction_boundaries(&t, 2),
        vec![b"k0400".to_vec()]
    );
    expect_corruption(&mut fx, &t)?;
    assert!(
        fx.next_number > 102,
        "outputs were started before the failure"
    );
    // The first range finished its tables; they are gone with the failed range's.
    assert_eq!(fx.table_files()?, [1, 2, 3].into());
    Ok(())
}
