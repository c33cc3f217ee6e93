use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rand::Rng;

use super::*;
use crate::error::Error;
use crate::iterator::test_support::{FailingIterator, base_seed, entry, rng};
use crate::iterator::vec_iter::VecIterator;
use crate::types::{SeqNo, ValueKind};

/// A range over keys `k00`..`k{n-1}` (plus a deleted and an invisible key that never show).
fn range_of(
    n: usize,
    makes: Arc<AtomicUsize>,
) -> (Range<DbIter<VecIterator>>, Vec<(Bytes, Bytes)>) {
    let mut entries = Vec::new();
    let mut want = Vec::new();
    for i in 0..n {
        let (k, v) = (format!("k{i:02}"), format!("v{i}"));
        entries.push(entry(k.as_bytes(), 1, ValueKind::Put, &v));
        want.push((Bytes::from(k), Bytes::from(v)));
    }
    entries.push(entry(b"k05x", 2, ValueKind::Delete, ""));
    entries.push(entry(b"k05x", 1, ValueKind::Put, "deleted"));
    entries.push(entry(b"k07x", 9, ValueKind::Put, "too new"));
    let range = Range::new(move || {
        makes.fetch_add(1, Ordering::Relaxed);
        Ok(DbIter::new(
            VecIterator::new(entries.clone()),
            SeqNo(5),
            Bound::Unbounded,
            Bound::Unbounded,
            None,
        ))
    });
    (range, want)
}

#[test]
fn range_yields_keys_ascending_from_the_front() -> Result<()> {
    let (range, want) = range_of(12, Arc::default());
    assert_eq!(range.collect::<Result<Vec<_>>>()?, want);
    Ok(())
}

#[test]
fn range_yields_keys_descending_from_the_back() -> Result<()> {
    let (range, mut want) = range_of(12, Arc::default());
    want.reverse();
    assert_eq!(range.rev().collect::<Result<Vec<_>>>()?, want);
    Ok(())
}

#[test]
fn range_of_nothing_yields_nothing_either_way() {
    let (mut range, _) = range_of(0, Arc::default());
    assert!(range.next().is_none());
    let (mut range, _) = range_of(0, Arc::default());
    assert!(range.next_back().is_none());
}

#[test]
fn range_interleaved_ends_meet_and_yield_each_key_once() -> Result<()> {
    let seed = base_seed("range_interleaved_ends_meet_and_yield_each_key_once");
    let mut r = rng(seed);
    for case in 0..200 {
        let n = r.random_range(0..10);
        let (mut range, want) = range_of(n, Arc::default());
        let (mut front, mut back) = (Vec::new(), Vec::new());
        loop {
            let item = if r.random_bool(0.5) {
                range.next().map(|kv| kv.map(|kv| front.push(kv)))
            } else {
                range.next_back().map(|kv| kv.map(|kv| back.push(kv)))
            };
            match item {
                Some(result) => result?,
                None => break,
            }
        }
        // Once the ends met, both stay exhausted.
        assert!(range.next().is_none() && range.next_back().is_none());
        back.reverse();
        front.extend(back);
        assert_eq!(front, want, "seed {seed}, case {case}");
    }
    Ok(())
}

#[test]
fn range_builds_each_cursor_on_first_use() {
    let makes = Arc::new(AtomicUsize::new(0));
    let (mut range, _) = range_of(3, Arc::clone(&makes));
    assert_eq!(makes.load(Ordering::Relaxed), 0);
    assert!(range.next().is_some());
    assert!(range.next().is_some());
    assert_eq!(makes.load(Ordering::Relaxed), 1);
    assert!(range.next_back().is_some());
    assert_eq!(makes.load(Ordering::Relaxed), 2);
    assert!(range.next().is_none());
}

#[test]
fn range_is_fused_after_an_error() {
    let entries = vec![
        entry(b"a", 1, ValueKind::Put, "a"),
        entry(b"b", 1, ValueKind::Put, "b"),
    ];
    let mut range = Range::new(move || {
        Ok(DbIter::new(
            FailingIterator::new(entries.clone(), 1),
            SeqNo(5),
            Bound::Unbounded,
            Bound::Unbounded,
            None,
        ))
    });
    assert_eq!(
        range.next().map(|r| r.ok()),
        Some(Some((Bytes::from_static(b"a"), Bytes::from_static(b"a"))))
    );
    assert!(matches!(range.next(), Some(Err(Error::Corruption { .. }))));
    assert!(range.next().is_none());
    assert!(range.next_back().is_none());

    // A cursor that cannot be built is an error too.
    let mut range: Range<DbIter<VecIterator>> =
        Range::new(|| Err(Error::InvalidArgument("no such snapshot".to_owned())));
    assert!(matches!(
        range.next_back(),
        Some(Err(Error::InvalidArgument(_)))
    ));
    assert!(range.next_back().is_none());
}

#[test]
fn range_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<Range<DbIter<VecIterator>>>();
}

/// Entries of a random view, its snapshot and the pairs a range over it must yield.
type RandomView = (
    Vec<(crate::types::InternalKey, Bytes)>,
    SeqNo,
    Vec<(Bytes, Bytes)>,
);

/// Random versions of keys `k00`..`k19` (puts, deletes, invisible entries) and the model of
/// what a range at `seqno` yields: the newest visible version per key, deleted keys hidden.
fn random_view(r: &mut impl Rng) -> RandomView {
    let seqno = SeqNo(r.random_range(1..12));
    let mut entries = Vec::new();
    let mut want = Vec::new();
    for i in 0..r.random_range(0..20) {
        let key = format!("k{i:02}");
        let mut newest_visible: Option<(u64, ValueKind, String)> = None;
        for s in 1..r.random_range(1..6u64) {
            let kind = if r.random_bool(0.25) {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let value = format!("v{i}.{s}");
            entries.push(entry(key.as_bytes(), s, kind, &value));
            if s <= seqno.0 && newest_visible.as_ref().is_none_or(|(n, _, _)| s > *n) {
                newest_visible = Some((s, kind, value));
            }
        }
        if let Some((_, ValueKind::Put, v)) = newest_visible {
            want.push((Bytes::from(key), Bytes::from(v)));
        }
    }
    (entries, seqno, want)
}

#[test]
fn lent_entries_match_the_model_with_both_ends_and_both_styles_mixed() -> Result<()> {
    let seed = base_seed("lent_entries_match_the_model_with_both_ends_and_both_styles_mixed");
    let mut r = rng(seed);
    for case in 0..300 {
        let (entries, seqno, want) = random_view(&mut r);
        let mut range = Range::new(move || {
            Ok(DbIter::new(
                VecIterator::new(entries.clone()),
                seqno,
                Bound::Unbounded,
                Bound::Unbounded,
                None,
            ))
        });
        let (mut front, mut back) = (Vec::new(), Vec::new());
        loop {
            let copy =
                |(k, v): (&[u8], &[u8])| (Bytes::copy_from_slice(k), Bytes::copy_from_slice(v));
            let more = match r.random_range(0..4) {
                0 => range.next_entry()?.map(copy).map(|kv| front.push(kv)),
                1 => range.next_back_entry()?.map(copy).map(|kv| back.push(kv)),
                2 => range.next().transpose()?.map(|kv| front.push(kv)),
                _ => range.next_back().transpose()?.map(|kv| back.push(kv)),
            };
            if more.is_none() {
                break;
            }
        }
        assert!(range.next_entry()?.is_none() && range.next_back_entry()?.is_none());
        back.reverse();
        front.extend(back);
        assert_eq!(front, want, "seed {seed}, case {case}");
    }
    Ok(())
}

#[test]
fn lending_range_returns_the_error_once_then_nothing() {
    let entries = vec![
        entry(b"a", 1, ValueKind::Put, "a"),
        entry(b"b", 1, ValueKind::Put, "b"),
    ];
    let mut range = Range::new(move || {
        Ok(DbIter::new(
            FailingIterator::new(entries.clone(), 1),
            SeqNo(5),
            Bound::Unbounded,
            Bound::Unbounded,
            None,
        ))
    });
    assert!(matches!(range.next_entry(), Ok(Some((b"a", b"a")))));
    assert!(matches!(range.next_entry(), Err(Error::Corruption { .. })));
    assert!(matches!(range.next_entry(), Ok(None)));
    assert!(matches!(range.next_back_entry(), Ok(None)));
}
