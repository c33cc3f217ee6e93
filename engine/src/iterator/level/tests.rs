use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use rand::Rng;

use super::*;
use crate::error::Error;
use crate::iterator::test_support::{FailingIterator, base_seed, current, entry, ik, rng};
use crate::iterator::vec_iter::VecIterator;

type Entries = Vec<(InternalKey, Bytes)>;

/// Files of a level: `(smallest, largest)` bounds and contents. Empty files get bounds that
/// fit between their neighbours but no entries (as if every entry were filtered out).
fn level_files() -> (Vec<(InternalKey, InternalKey)>, Vec<Entries>) {
    let put = ValueKind::Put;
    let contents: Vec<Entries> = vec![
        vec![],
        vec![
            entry(b"a", 3, put, "a3"),
            entry(b"a", 1, put, "a1"),
            entry(b"b", 2, put, "b2"),
        ],
        vec![],
        vec![],
        vec![
            entry(b"d", 7, ValueKind::Delete, ""),
            entry(b"e", 1, put, "e1"),
        ],
        vec![entry(b"g", 4, put, "g4")],
        vec![],
    ];
    let bounds = vec![
        (ik(b"0", 9, put), ik(b"0", 1, put)),
        (ik(b"a", 3, put), ik(b"b", 2, put)),
        (ik(b"ba", 5, put), ik(b"bb", 5, put)),
        (ik(b"c", 5, put), ik(b"c", 1, put)),
        (ik(b"d", 7, ValueKind::Delete), ik(b"e", 1, put)),
        (ik(b"g", 4, put), ik(b"g", 4, put)),
        (ik(b"x", 4, put), ik(b"z", 4, put)),
    ];
    (bounds, contents)
}

type Opener = Box<dyn FnMut(usize) -> Result<Box<dyn InternalIterator>> + Send>;

/// A level iterator over `level_files()`, counting opens in `opens`.
fn level(opens: Arc<AtomicUsize>) -> (LevelIterator<Opener>, Entries) {
    let (bounds, contents) = level_files();
    let all: Entries = contents.iter().flatten().cloned().collect();
    let open: Opener = Box::new(move |i| {
        opens.fetch_add(1, Ordering::Relaxed);
        let entries = contents.get(i).cloned().unwrap_or_default();
        Ok(Box::new(VecIterator::new(entries)) as Box<dyn InternalIterator>)
    });
    (LevelIterator::new(bounds, open), all)
}

#[test]
fn level_walks_files_in_order_skipping_empty_ones() -> Result<()> {
    let (mut it, all) = level(Arc::default());
    let mut forward = Vec::new();
    it.seek_to_first()?;
    while let Some(e) = current(&it) {
        forward.push(e);
        it.next()?;
    }
    assert_eq!(forward, all);
    let mut backward = Vec::new();
    it.seek_to_last()?;
    while let Some(e) = current(&it) {
        backward.push(e);
        it.prev()?;
    }
    backward.reverse();
    assert_eq!(backward, all);
    Ok(())
}

#[test]
fn level_of_only_empty_files_or_no_files_is_never_valid() -> Result<()> {
    let open = |_| Ok(Box::new(VecIterator::new(Vec::new())) as Box<dyn InternalIterator>);
    let files = vec![(ik(b"a", 1, ValueKind::Put), ik(b"b", 1, ValueKind::Put))];
    for files in [Vec::new(), files] {
        let mut it = LevelIterator::new(files, open);
        it.seek_to_first()?;
        assert!(!it.valid());
        it.seek_to_last()?;
        assert!(!it.valid());
        it.seek(ik(b"a", 1, ValueKind::Put).as_ref())?;
        assert!(!it.valid());
        it.seek_for_prev(ik(b"z", 1, ValueKind::Put).as_ref())?;
        assert!(!it.valid());
    }
    Ok(())
}

#[test]
fn level_seeks_match_a_flat_model() -> Result<()> {
    let (mut it, all) = level(Arc::default());
    let probes: &[&[u8]] = &[
        b"", b"0", b"a", b"aa", b"b", b"ba", b"c", b"d", b"e", b"f", b"g", b"y", b"\xff",
    ];
    for &p in probes {
        for seqno in [0, 2, 4, 9, SeqNo::MAX.get()] {
            for kind in [ValueKind::Delete, ValueKind::Put, ValueKind::Merge] {
                let t = ik(p, seqno, kind);
                it.seek(t.as_ref())?;
                let i = all.partition_point(|(k, _)| *k < t);
                assert_eq!(current(&it), all.get(i).cloned(), "seek {t:?}");
                it.seek_for_prev(t.as_ref())?;
                let want = all
                    .partition_point(|(k, _)| *k <= t)
                    .checked_sub(1)
                    .and_then(|i| all.get(i).cloned());
                assert_eq!(current(&it), want, "seek_for_prev {t:?}");
            }
        }
    }
    Ok(())
}

#[test]
fn level_matches_model_cursor_on_random_walks() -> Result<()> {
    let seed = base_seed("level_matches_model_cursor_on_random_walks");
    let opens = Arc::new(AtomicUsize::new(0));
    let (mut it, all) = level(Arc::clone(&opens));
    let mut r = rng(seed);
    let mut pos: Option<usize> = None;
    let probes: &[&[u8]] = &[b"", b"a", b"b", b"bb", b"c", b"e", b"f", b"g", b"zz"];
    for step in 0..2000 {
        let op = r.random_range(0..6);
        match op {
            0 => {
                it.seek_to_first()?;
                pos = Some(0);
            }
            1 => {
                it.seek_to_last()?;
                pos = all.len().checked_sub(1);
            }
            2 | 3 => {
                let t = ik(
                    probes[r.random_range(0..probes.len())],
                    r.random_range(0..9),
                    ValueKind::Put,
                );
                if op == 2 {
                    it.seek(t.as_ref())?;
                    pos = Some(all.partition_point(|(k, _)| *k < t)).filter(|&i| i < all.len());
                } else {
                    it.seek_for_prev(t.as_ref())?;
                    pos = all.partition_point(|(k, _)| *k <= t).checked_sub(1);
                }
            }
            4 if pos.is_some() => {
                it.next()?;
                pos = pos.map(|p| p + 1).filter(|&p| p < all.len());
            }
            5 if pos.is_some() => {
                it.prev()?;
                pos = pos.and_then(|p| p.checked_sub(1));
            }
            _ => continue,
        }
        assert_eq!(
            current(&it),
            pos.map(|p| all[p].clone()),
            "seed {seed} step {step} op {op}"
        );
    }
    Ok(())
}

#[test]
fn level_opens_only_the_file_a_seek_needs() -> Result<()> {
    let opens = Arc::new(AtomicUsize::new(0));
    let (mut it, _) = level(Arc::clone(&opens));
    it.seek(ik(b"g", 9, ValueKind::Put).as_ref())?;
    assert_eq!(it.file_index(), Some(5));
    assert_eq!(opens.load(Ordering::Relaxed), 1);
    // Steps within the open file do not reopen it.
    it.seek(ik(b"a", 9, ValueKind::Put).as_ref())?;
    it.next()?;
    it.next()?;
    assert_eq!(it.key().user_key, b"b");
    assert_eq!(opens.load(Ordering::Relaxed), 2);
    Ok(())
}

#[test]
fn level_returns_open_and_read_errors_and_unpositions() -> Result<()> {
    let (bounds, contents) = level_files();
    // File 4 cannot be opened.
    let c = contents.clone();
    let mut it = LevelIterator::new(bounds.clone(), move |i| {
        if i == 4 {
            return Err(Error::corruption("000004.sst", 0, "bad footer"));
        }
        Ok(Box::new(VecIterator::new(c[i].clone())) as Box<dyn InternalIterator>)
    });
    it.seek_to_first()?;
    let mut outcome = Ok(());
    while outcome.is_ok() && it.valid() {
        outcome = it.next();
    }
    assert!(matches!(outcome, Err(Error::Corruption { .. })));
    assert!(!it.valid());
    // The files before it still work after a re-seek.
    it.seek_to_first()?;
    assert_eq!(it.key().user_key, b"a");

    // File 1 fails on its second move.
    let mut it = LevelIterator::new(bounds, move |i| {
        Ok(Box::new(FailingIterator::new(contents[i].clone(), 1)) as Box<dyn InternalIterator>)
    });
    it.seek(ik(b"a", 9, ValueKind::Put).as_ref())?;
    assert!(it.valid());
    assert!(it.next().is_err());
    assert!(!it.valid());
    Ok(())
}
