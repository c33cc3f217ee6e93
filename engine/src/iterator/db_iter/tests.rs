use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;
use rand::Rng;
use rand::rngs::StdRng;

use super::*;
use crate::iterator::merging::MergingIterator;
use crate::iterator::test_support::{FailingIterator, base_seed, entry, rng};
use crate::iterator::vec_iter::VecIterator;
use crate::types::InternalKey;

type Entries = Vec<(InternalKey, Bytes)>;
type Kv = (Vec<u8>, Vec<u8>);
type Keys = Vec<Vec<u8>>;
/// `(lower, upper, expected items)`.
type BoundsCase<T> = (Bound<&'static [u8]>, Bound<&'static [u8]>, Vec<T>);

/// Concatenates: `base` (or `~` without one), then `+operand` for each operand, oldest first.
/// An operand `FAIL` makes the merge fail.
fn concat_merge() -> MergeFn {
    Arc::new(|_key: &[u8], base: Option<&[u8]>, operands: &[&[u8]]| {
        let mut out = base.unwrap_or(b"~").to_vec();
        for op in operands {
            if *op == b"FAIL" {
                return None;
            }
            out.push(b'+');
            out.extend_from_slice(op);
        }
        Some(out)
    })
}

fn db_iter(entries: Entries, seqno: u64, merge: Option<MergeFn>) -> DbIter<VecIterator> {
    DbIter::new(
        VecIterator::new(entries),
        SeqNo(seqno),
        Bound::Unbounded,
        Bound::Unbounded,
        merge,
    )
}

fn forward<I: InternalIterator>(it: &mut DbIter<I>) -> Result<Vec<Kv>> {
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

fn backward<I: InternalIterator>(it: &mut DbIter<I>) -> Result<Vec<Kv>> {
    let mut out = Vec::new();
    it.seek_to_last()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev()?;
    }
    out.reverse();
    Ok(out)
}

fn kv(k: &str, v: &str) -> Kv {
    (k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

#[test]
fn db_iter_shows_newest_visible_version_and_hides_tombstones() -> Result<()> {
    let put = ValueKind::Put;
    let entries = vec![
        entry(b"a", 1, put, "a1"),
        entry(b"a", 4, put, "a4"),
        entry(b"b", 2, put, "b2"),
        entry(b"b", 3, ValueKind::Delete, ""),
        entry(b"c", 5, ValueKind::Delete, ""),
        entry(b"c", 6, put, "c6"),
        entry(b"d", 7, put, "d7"),
    ];
    let mut it = db_iter(entries.clone(), 10, None);
    let want = vec![kv("a", "a4"), kv("c", "c6"), kv("d", "d7")];
    assert_eq!(forward(&mut it)?, want);
    assert_eq!(backward(&mut it)?, want);
    let mut it = db_iter(entries.clone(), 2, None);
    let want = vec![kv("a", "a1"), kv("b", "b2")];
    assert_eq!(forward(&mut it)?, want);
    assert_eq!(backward(&mut it)?, want);
    let mut it = db_iter(entries, 0, None);
    assert_eq!(forward(&mut it)?, vec![]);
    assert_eq!(backward(&mut it)?, vec![]);
    Ok(())
}

#[test]
fn db_iter_folds_merge_operands_in_both_directions() -> Result<()> {
    let (put, del, merge) = (ValueKind::Put, ValueKind::Delete, ValueKind::Merge);
    let entries = vec![
        // a: put, merge, delete, merge, merge -> no base.
        entry(b"a", 1, put, "a1"),
        entry(b"a", 2, merge, "m2"),
        entry(b"a", 3, del, ""),
        entry(b"a", 4, merge, "m4"),
        entry(b"a", 5, merge, "m5"),
        // b: put then merges -> base b1.
        entry(b"b", 1, put, "b1"),
        entry(b"b", 6, merge, "m6"),
        entry(b"b", 7, merge, "m7"),
        // c: merges only.
        entry(b"c", 8, merge, "m8"),
        // d: merge covered by a newer put.
        entry(b"d", 2, merge, "m2"),
        entry(b"d", 9, put, "d9"),
    ];
    let mut it = db_iter(entries.clone(), 10, Some(concat_merge()));
    let want = vec![
        kv("a", "~+m4+m5"),
        kv("b", "b1+m6+m7"),
        kv("c", "~+m8"),
        kv("d", "d9"),
    ];
    assert_eq!(forward(&mut it)?, want);
    assert_eq!(backward(&mut it)?, want);
    // At seqno 6 only part of the history is visible.
    let mut it = db_iter(entries, 6, Some(concat_merge()));
    let want = vec![kv("a", "~+m4+m5"), kv("b", "b1+m6"), kv("d", "~+m2")];
    assert_eq!(forward(&mut it)?, want);
    assert_eq!(backward(&mut it)?, want);
    // Turning around on a merged key.
    it.seek(b"b")?;
    it.prev()?;
    assert_eq!((it.key(), it.value()), (&b"a"[..], &b"~+m4+m5"[..]));
    it.next()?;
    it.next()?;
    assert_eq!((it.key(), it.value()), (&b"d"[..], &b"~+m2"[..]));
    it.prev()?;
    assert_eq!((it.key(), it.value()), (&b"b"[..], &b"b1+m6"[..]));
    Ok(())
}

#[test]
fn db_iter_without_merge_operator_reports_invalid_argument() -> Result<()> {
    let entries = vec![
        entry(b"a", 1, ValueKind::Put, "a1"),
        entry(b"b", 2, ValueKind::Merge, "m"),
        // A merge operand hidden by a newer put needs no operator.
        entry(b"c", 3, ValueKind::Merge, "m"),
        entry(b"c", 4, ValueKind::Put, "c4"),
    ];
    let mut it = db_iter(entries, 10, None);
    it.seek_to_first()?;
    assert_eq!(it.key(), b"a");
    let outcome = it.next();
    assert!(
        matches!(outcome, Err(Error::InvalidArgument(ref m)) if m.contains("no merge operator")),
        "{outcome:?}"
    );
    assert!(!it.valid());
    it.seek(b"c")?;
    assert_eq!(it.value(), b"c4");
    assert!(it.prev().is_err());
    assert!(!it.valid());
    Ok(())
}

#[test]
fn db_iter_reports_a_failed_merge_naming_the_key() {
    let entries = vec![entry(b"k\xff", 1, ValueKind::Merge, "FAIL")];
    let mut it = db_iter(entries, 10, Some(concat_merge()));
    for result in [it.seek_to_first(), it.seek_to_last()] {
        match result {
            Err(Error::InvalidArgument(m)) => assert!(m.contains("k\\xff"), "{m}"),
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
        assert!(!it.valid());
    }
}

#[test]
fn db_iter_propagates_inner_errors_and_unpositions() {
    let entries = vec![
        entry(b"a", 1, ValueKind::Put, "a"),
        entry(b"b", 1, ValueKind::Put, "b"),
        entry(b"c", 1, ValueKind::Put, "c"),
    ];
    for fail_at in 0..4 {
        let inner = FailingIterator::new(entries.clone(), fail_at);
        let mut it = DbIter::new(inner, SeqNo(5), Bound::Unbounded, Bound::Unbounded, None);
        let mut outcome = it.seek_to_first();
        while outcome.is_ok() && it.valid() {
            outcome = it.next();
        }
        assert!(
            matches!(outcome, Err(Error::Corruption { .. })),
            "fail_at {fail_at}"
        );
        assert!(!it.valid());
    }
}

#[test]
fn db_iter_honours_bounds_including_empty_and_ff_keys() -> Result<()> {
    let put = ValueKind::Put;
    let entries = vec![
        entry(b"", 1, put, "empty"),
        entry(b"a", 1, put, "a"),
        entry(b"\xff", 1, put, "ff"),
        entry(b"\xff\xff", 1, put, "ffff"),
    ];
    let keys = |lower: Bound<&[u8]>, upper: Bound<&[u8]>| -> Result<(Keys, Keys)> {
        let mut it = DbIter::new(
            VecIterator::new(entries.clone()),
            SeqNo(1),
            lower.map(<[u8]>::to_vec),
            upper.map(<[u8]>::to_vec),
            None,
        );
        let f = forward(&mut it)?.into_iter().map(|(k, _)| k).collect();
        let b = backward(&mut it)?.into_iter().map(|(k, _)| k).collect();
        Ok((f, b))
    };
    let v = |ks: &[&[u8]]| ks.iter().map(|k| k.to_vec()).collect::<Vec<_>>();
    let cases: Vec<BoundsCase<Vec<u8>>> = vec![
        (
            Bound::Excluded(b""),
            Bound::Unbounded,
            v(&[b"a", b"\xff", b"\xff\xff"]),
        ),
        (Bound::Included(b""), Bound::Excluded(b"a"), v(&[b""])),
        (Bound::Unbounded, Bound::Excluded(b""), v(&[])),
        (
            Bound::Included(b"\xff"),
            Bound::Excluded(b"\xff\xff"),
            v(&[b"\xff"]),
        ),
        (
            Bound::Excluded(b"\xff"),
            Bound::Included(b"\xff\xff"),
            v(&[b"\xff\xff"]),
        ),
        (Bound::Included(b"b"), Bound::Included(b"a"), v(&[])),
    ];
    for (lower, upper, want) in cases {
        let (f, b) = keys(lower, upper)?;
        assert_eq!(f, want, "forward {lower:?}..{upper:?}");
        assert_eq!(b, want, "backward {lower:?}..{upper:?}");
    }
    Ok(())
}

#[test]
fn db_iter_exclusive_bounds_hold_with_extreme_seqnos() -> Result<()> {
    let max = SeqNo::MAX.get();
    let entries = vec![
        entry(b"a", 0, ValueKind::Put, "a0"),
        entry(b"b", max, ValueKind::Merge, "m"),
        entry(b"b", 0, ValueKind::Put, "b0"),
        entry(b"c", max, ValueKind::Put, "c"),
        entry(b"c", 0, ValueKind::Delete, ""),
    ];
    let cases: Vec<BoundsCase<Kv>> = vec![
        (Bound::Excluded(b"b"), Bound::Unbounded, vec![kv("c", "c")]),
        (Bound::Unbounded, Bound::Excluded(b"b"), vec![kv("a", "a0")]),
        (
            Bound::Excluded(b"a"),
            Bound::Excluded(b"c"),
            vec![kv("b", "b0+m")],
        ),
        (
            Bound::Included(b"a"),
            Bound::Included(b"c"),
            vec![kv("a", "a0"), kv("b", "b0+m"), kv("c", "c")],
        ),
    ];
    for (lower, upper, want) in cases {
        let mut it = DbIter::new(
            VecIterator::new(entries.clone()),
            // Past MAX: clamped, so everything is visible.
            SeqNo(u64::MAX),
            lower.map(<[u8]>::to_vec),
            upper.map(<[u8]>::to_vec),
            Some(concat_merge()),
        );
        assert_eq!(forward(&mut it)?, want, "forward {lower:?}..{upper:?}");
        assert_eq!(backward(&mut it)?, want, "backward {lower:?}..{upper:?}");
        it.seek_for_prev(b"c")?;
        assert_eq!(current(&it), want.last().cloned());
        it.seek(b"a")?;
        assert_eq!(current(&it), want.first().cloned());
    }
    Ok(())
}

// ---- Randomized model test ----

/// User keys written by the model test: prefixes of each other, the empty key and 0xFF keys.
const KEYS: &[&[u8]] = &[b"", b"a", b"a\x00", b"ab", b"b", b"c", b"\xff", b"\xff\xff"];
/// Keys used as bounds and seek targets: every written key plus keys falling in the gaps.
const PROBES: &[&[u8]] = &[
    b"",
    b"\x00",
    b"a",
    b"a\x00",
    b"a\x01",
    b"ab",
    b"abc",
    b"b",
    b"bb",
    b"c",
    b"d",
    b"\xff",
    b"\xff\x00",
    b"\xff\xff",
    b"\xff\xff\xff",
];

/// One write of the history.
struct Write {
    key: &'static [u8],
    seqno: u64,
    kind: ValueKind,
    value: String,
}

fn random_history(r: &mut StdRng) -> Vec<Write> {
    let len = r.random_range(0..40);
    (1..=len)
        .map(|seqno| {
            let kind = match r.random_range(0..4) {
                0 => ValueKind::Delete,
                1 => ValueKind::Merge,
                _ => ValueKind::Put,
            };
            Write {
                key: KEYS[r.random_range(0..KEYS.len())],
                seqno,
                kind,
                value: format!("v{seqno}"),
            }
        })
        .collect()
}

fn random_bound(r: &mut StdRng) -> Bound<Vec<u8>> {
    let key = PROBES[r.random_range(0..PROBES.len())].to_vec();
    match r.random_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(key),
        _ => Bound::Excluded(key),
    }
}

/// The visible view: for each key, the newest visible write decides (see `DbIter`).
fn oracle(
    history: &[Write],
    snapshot: u64,
    lower: &Bound<Vec<u8>>,
    upper: &Bound<Vec<u8>>,
) -> Vec<Kv> {
    let mut versions: BTreeMap<&[u8], Vec<&Write>> = BTreeMap::new();
    for w in history.iter().filter(|w| w.seqno <= snapshot) {
        versions.entry(w.key).or_default().push(w);
    }
    let merge = concat_merge();
    let mut out = Vec::new();
    for (key, writes) in versions {
        let bounds = (
            lower.as_ref().map(Vec::as_slice),
            upper.as_ref().map(Vec::as_slice),
        );
        if !RangeBounds::<[u8]>::contains(&bounds, key) {
            continue;
        }
        // Newest first.
        let mut operands: Vec<&[u8]> = Vec::new();
        let mut value = None;
        for w in writes.iter().rev() {
            match w.kind {
                ValueKind::Put if operands.is_empty() => {
                    value = Some(w.value.as_bytes().to_vec());
                    break;
                }
                ValueKind::Put => {
                    operands.reverse();
                    value = merge(key, Some(w.value.as_bytes()), &operands);
                    break;
                }
                ValueKind::Delete => break,
                ValueKind::Merge => operands.push(w.value.as_bytes()),
            }
        }
        if value.is_none() && !operands.is_empty() {
            operands.reverse();
            value = merge(key, None, &operands);
        }
        if let Some(v) = value {
            out.push((key.to_vec(), v));
        }
    }
    out
}

/// The history split at random over 1 to 4 children of a merging iterator.
fn source(r: &mut StdRng, history: &[Write]) -> MergingIterator {
    let n = r.random_range(1..=4);
    let mut children: Vec<Entries> = vec![Vec::new(); n];
    for w in history {
        children[r.random_range(0..n)].push(entry(w.key, w.seqno, w.kind, &w.value));
    }
    MergingIterator::new(
        children
            .into_iter()
            .map(|c| Box::new(VecIterator::new(c)) as Box<dyn InternalIterator>)
            .collect(),
    )
}

fn current<I: InternalIterator>(it: &DbIter<I>) -> Option<Kv> {
    it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
}

#[test]
fn db_iter_matches_btreemap_oracle_on_random_histories() -> Result<()> {
    let seed = base_seed("db_iter_matches_btreemap_oracle_on_random_histories");
    for case in 0..400u64 {
        let case_seed = seed.wrapping_add(case);
        let mut r = rng(case_seed);
        let history = random_history(&mut r);
        let snapshot = r.random_range(0..=history.len() as u64 + 1);
        let (lower, upper) = (random_bound(&mut r), random_bound(&mut r));
        let want = oracle(&history, snapshot, &lower, &upper);
        let ctx = format!("seed {case_seed}, snapshot {snapshot}, bounds {lower:?}..{upper:?}");
        let mut it = DbIter::new(
            source(&mut r, &history),
            SeqNo(snapshot),
            lower,
            upper,
            Some(concat_merge()),
        );

        check_against(&mut it, &want, &mut r, &ctx)?;
    }
    Ok(())
}

/// Forward and backward scans, seeks to every probe, then a random walk of seeks and steps
/// against a model cursor over `want`.
fn check_against<I: InternalIterator>(
    it: &mut DbIter<I>,
    want: &[Kv],
    r: &mut StdRng,
    ctx: &str,
) -> Result<()> {
    assert_eq!(forward(it)?, want, "forward, {ctx}");
    assert_eq!(backward(it)?, want, "backward, {ctx}");
    for &p in PROBES {
        it.seek(p)?;
        let first = want.iter().find(|(k, _)| k.as_slice() >= p).cloned();
        assert_eq!(current(it), first, "seek {p:?}, {ctx}");
        it.seek_for_prev(p)?;
        let last = want.iter().rev().find(|(k, _)| k.as_slice() <= p).cloned();
        assert_eq!(current(it), last, "seek_for_prev {p:?}, {ctx}");
    }

    // Random walk against a model cursor over `want`.
    let mut pos: Option<usize> = None;
    for step in 0..60 {
        let op = r.random_range(0..7);
        let p = PROBES[r.random_range(0..PROBES.len())];
        match op {
            0 => {
                it.seek_to_first()?;
                pos = (!want.is_empty()).then_some(0);
            }
            1 => {
                it.seek_to_last()?;
                pos = want.len().checked_sub(1);
            }
            2 => {
                it.seek(p)?;
                pos = Some(want.partition_point(|(k, _)| k.as_slice() < p))
                    .filter(|&i| i < want.len());
            }
            3 => {
                it.seek_for_prev(p)?;
                pos = want
                    .partition_point(|(k, _)| k.as_slice() <= p)
                    .checked_sub(1);
            }
            4 | 5 if pos.is_some() => {
                it.next()?;
                pos = pos.map(|i| i + 1).filter(|&i| i < want.len());
            }
            6 if pos.is_some() => {
                it.prev()?;
                pos = pos.and_then(|i| i.checked_sub(1));
            }
            _ => continue,
        }
        let expected = pos.map(|i| want[i].clone());
        assert_eq!(
            current(it),
            expected,
            "walk step {step} op {op} probe {p:?}, {ctx}"
        );
    }
    Ok(())
}
