use bytes::Bytes;
use rand::Rng;
use rand::rngs::StdRng;

use super::*;
use crate::error::Error;
use crate::iterator::test_support::{FailingIterator, base_seed, current, entry, ik, rng};
use crate::iterator::vec_iter::VecIterator;
use crate::types::InternalKey;

type Entries = Vec<(InternalKey, Bytes)>;

/// User keys with shared prefixes, the empty key and 0xFF bytes.
const KEYS: &[&[u8]] = &[b"", b"a", b"a\x00", b"ab", b"b", b"c", b"\xff", b"\xff\xff"];

/// `n` children of random entries. Many versions of one user key land in different children,
/// and an identical internal key can appear in several children (to pin the tie-break).
fn random_children(r: &mut StdRng, n: usize) -> Vec<Entries> {
    let mut id = 0;
    (0..n)
        .map(|child| {
            let len = r.random_range(0..12);
            (0..len)
                .map(|_| {
                    id += 1;
                    let key = KEYS[r.random_range(0..KEYS.len())];
                    let kind =
                        [ValueKind::Put, ValueKind::Delete, ValueKind::Merge][r.random_range(0..3)];
                    entry(key, r.random_range(0..6), kind, &format!("c{child}#{id}"))
                })
                .collect()
        })
        .collect()
}

/// The expected merge: every entry in `(internal key, child index)` order.
fn model(children: &[Entries]) -> Entries {
    let mut all: Vec<(InternalKey, usize, Bytes)> = children
        .iter()
        .enumerate()
        .flat_map(|(i, c)| {
            let mut c = c.clone();
            c.sort_by(|a, b| a.0.cmp(&b.0));
            c.into_iter().map(move |(k, v)| (k, i, v))
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    all.into_iter().map(|(k, _, v)| (k, v)).collect()
}

fn merge_of(children: &[Entries]) -> MergingIterator {
    MergingIterator::new(
        children
            .iter()
            .map(|c| Box::new(VecIterator::new(c.clone())) as Box<dyn InternalIterator>)
            .collect(),
    )
}

fn collect_forward(it: &mut MergingIterator) -> Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_first()?;
    while let Some(e) = current(it) {
        out.push(e);
        it.next()?;
    }
    Ok(out)
}

fn collect_backward(it: &mut MergingIterator) -> Result<Entries> {
    let mut out = Vec::new();
    it.seek_to_last()?;
    while let Some(e) = current(it) {
        out.push(e);
        it.prev()?;
    }
    Ok(out)
}

/// A random internal key near the model's keys (existing, between, before first, after last).
fn random_target(r: &mut StdRng) -> InternalKey {
    let probes: &[&[u8]] = &[
        b"",
        b"0",
        b"a",
        b"aa",
        b"ab",
        b"b",
        b"bb",
        b"\xff",
        b"\xff\xff\xff",
    ];
    let kind = [ValueKind::Put, ValueKind::Delete, ValueKind::Merge][r.random_range(0..3)];
    ik(
        probes[r.random_range(0..probes.len())],
        r.random_range(0..7),
        kind,
    )
}

#[test]
fn merging_of_no_children_is_never_valid() -> Result<()> {
    let mut it = MergingIterator::new(Vec::new());
    it.seek_to_first()?;
    assert!(!it.valid());
    it.seek_to_last()?;
    assert!(!it.valid());
    it.seek(ik(b"a", 1, ValueKind::Put).as_ref())?;
    assert!(!it.valid());
    it.seek_for_prev(ik(b"a", 1, ValueKind::Put).as_ref())?;
    assert!(!it.valid());
    Ok(())
}

#[test]
fn merging_yields_sorted_union_in_both_directions() -> Result<()> {
    let seed = base_seed("merging_yields_sorted_union_in_both_directions");
    for case in 0..200u64 {
        let mut r = rng(seed.wrapping_add(case));
        for n in [0, 1, 3, 10] {
            let children = random_children(&mut r, n);
            let expected = model(&children);
            let mut it = merge_of(&children);
            assert_eq!(
                collect_forward(&mut it)?,
                expected,
                "seed {}",
                seed.wrapping_add(case)
            );
            let mut reversed = expected.clone();
            reversed.reverse();
            assert_eq!(
                collect_backward(&mut it)?,
                reversed,
                "seed {}",
                seed.wrapping_add(case)
            );
        }
    }
    Ok(())
}

#[test]
fn merging_matches_model_cursor_across_direction_switches_and_seeks() -> Result<()> {
    let seed = base_seed("merging_matches_model_cursor_across_direction_switches_and_seeks");
    for case in 0..300u64 {
        let case_seed = seed.wrapping_add(case);
        let mut r = rng(case_seed);
        let n = [1, 2, 3, 10][r.random_range(0..4)];
        let children = random_children(&mut r, n);
        let expected = model(&children);
        let mut it = merge_of(&children);
        let mut pos: Option<usize> = None;
        for step in 0..60 {
            let op = r.random_range(0..6);
            match op {
                0 => {
                    it.seek_to_first()?;
                    pos = (!expected.is_empty()).then_some(0);
                }
                1 => {
                    it.seek_to_last()?;
                    pos = expected.len().checked_sub(1);
                }
                2 => {
                    let t = random_target(&mut r);
                    it.seek(t.as_ref())?;
                    let i = expected.partition_point(|(k, _)| *k < t);
                    pos = (i < expected.len()).then_some(i);
                }
                3 => {
                    let t = random_target(&mut r);
                    it.seek_for_prev(t.as_ref())?;
                    pos = expected.partition_point(|(k, _)| *k <= t).checked_sub(1);
                }
                4 if pos.is_some() => {
                    it.next()?;
                    pos = pos.map(|p| p + 1).filter(|&p| p < expected.len());
                }
                5 if pos.is_some() => {
                    it.prev()?;
                    pos = pos.and_then(|p| p.checked_sub(1));
                }
                _ => continue,
            }
            let want = pos.map(|p| expected[p].clone());
            assert_eq!(current(&it), want, "seed {case_seed}, step {step}, op {op}");
        }
    }
    Ok(())
}

#[test]
fn merging_seeks_to_existing_between_before_and_after_keys() -> Result<()> {
    let children = vec![
        vec![
            entry(b"b", 5, ValueKind::Put, "b5"),
            entry(b"d", 1, ValueKind::Put, "d1"),
        ],
        vec![
            entry(b"b", 3, ValueKind::Delete, ""),
            entry(b"f", 2, ValueKind::Put, "f2"),
        ],
        vec![entry(b"b", 9, ValueKind::Merge, "b9")],
    ];
    let mut it = merge_of(&children);
    let seek_key = |k: &[u8]| ik(k, SeqNo::MAX.get(), ValueKind::FOR_SEEK);
    let key_of = |it: &MergingIterator| it.valid().then(|| it.key().to_owned());

    it.seek(seek_key(b"b").as_ref())?;
    assert_eq!(key_of(&it), Some(ik(b"b", 9, ValueKind::Merge)));
    it.seek(ik(b"b", 4, ValueKind::Put).as_ref())?;
    assert_eq!(key_of(&it), Some(ik(b"b", 3, ValueKind::Delete)));
    it.seek(seek_key(b"c").as_ref())?;
    assert_eq!(key_of(&it), Some(ik(b"d", 1, ValueKind::Put)));
    it.seek(seek_key(b"").as_ref())?;
    assert_eq!(key_of(&it), Some(ik(b"b", 9, ValueKind::Merge)));
    it.seek(seek_key(b"g").as_ref())?;
    assert_eq!(key_of(&it), None);

    it.seek_for_prev(ik(b"b", 4, ValueKind::Put).as_ref())?;
    assert_eq!(key_of(&it), Some(ik(b"b", 5, ValueKind::Put)));
    it.seek_for_prev(seek_key(b"e").as_ref())?;
    assert_eq!(key_of(&it), Some(ik(b"d", 1, ValueKind::Put)));
    it.seek_for_prev(ik(b"\xff", 0, ValueKind::Delete).as_ref())?;
    assert_eq!(key_of(&it), Some(ik(b"f", 2, ValueKind::Put)));
    it.seek_for_prev(seek_key(b"a").as_ref())?;
    assert_eq!(key_of(&it), None);
    // Turn around right after a seek: prev from the first entry >= "d".
    it.seek(seek_key(b"d").as_ref())?;
    it.prev()?;
    assert_eq!(key_of(&it), Some(ik(b"b", 3, ValueKind::Delete)));
    it.next()?;
    assert_eq!(key_of(&it), Some(ik(b"d", 1, ValueKind::Put)));
    Ok(())
}

#[test]
fn merging_returns_child_errors_and_unpositions() -> Result<()> {
    let good = vec![
        entry(b"a", 1, ValueKind::Put, "a"),
        entry(b"c", 1, ValueKind::Put, "c"),
    ];
    let bad = vec![
        entry(b"b", 1, ValueKind::Put, "b"),
        entry(b"d", 1, ValueKind::Put, "d"),
    ];
    for fail_at in 0..4 {
        let mut it = MergingIterator::new(vec![
            Box::new(VecIterator::new(good.clone())),
            Box::new(FailingIterator::new(bad.clone(), fail_at)),
        ]);
        // Walk forward to the end, then backward from the last entry: somewhere the failing
        // child's `fail_at`-th call must surface.
        let walk = |it: &mut MergingIterator| -> Result<()> {
            it.seek_to_first()?;
            while it.valid() {
                it.next()?;
            }
            it.seek_to_last()?;
            while it.valid() {
                it.prev()?;
            }
            Ok(())
        };
        match walk(&mut it) {
            Err(Error::Corruption { .. }) => assert!(!it.valid(), "fail_at {fail_at}"),
            other => panic!("fail_at {fail_at}: expected a corruption error, got {other:?}"),
        }
        // The child keeps failing, so a re-seek reports the error again.
        assert!(it.seek_to_first().is_err());
        assert!(!it.valid());
    }
    Ok(())
}
