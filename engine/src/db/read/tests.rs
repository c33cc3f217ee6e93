//! Tests of the lending range API (`DbRange::next_entry`, `DbRange::next_back_entry`) against
//! the owning iterator and a `BTreeMap` model, over memtables and tables.

use std::collections::BTreeMap;
use std::ops::Bound;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::{Db, Options, ReadOptions};

type TestResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn bound(r: &mut StdRng) -> Bound<Vec<u8>> {
    let k = format!("k{:03}", r.random_range(0..120)).into_bytes();
    match r.random_range(0..3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(k),
        _ => Bound::Excluded(k),
    }
}

fn as_slice(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

#[test]
fn lent_pairs_match_the_owning_iterator_and_the_model() -> TestResult {
    let seed = std::env::var("STRATA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("base seed {seed} (replay with STRATA_TEST_SEED={seed})");
    let mut r = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir()?;
    let options = Options::default().write_buffer_size(4096).block_size(256);
    let db = Db::open(dir.path(), options)?;
    let mut model = BTreeMap::new();
    for round in 0..6 {
        for _ in 0..300 {
            let key = format!("k{:03}", r.random_range(0..100)).into_bytes();
            if r.random_bool(0.3) {
                db.delete(&key)?;
                model.remove(&key);
            } else {
                let value = vec![b'v'; r.random_range(0..40)];
                db.put(&key, &value)?;
                model.insert(key, value);
            }
        }
        if round % 2 == 0 {
            db.flush()?;
        }
        for case in 0..40 {
            let (lower, upper) = (bound(&mut r), bound(&mut r));
            let range = (as_slice(&lower), as_slice(&upper));
            let empty = matches!((&lower, &upper),
                (Bound::Included(l) | Bound::Excluded(l), Bound::Included(u) | Bound::Excluded(u))
                    if l > u || (l == u && !matches!((&lower, &upper), (Bound::Included(_), Bound::Included(_)))));
            let want: Vec<(Vec<u8>, Vec<u8>)> = if empty {
                Vec::new()
            } else {
                model
                    .range::<Vec<u8>, _>((lower.clone(), upper.clone()))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect()
            };
            let owned: Vec<(Vec<u8>, Vec<u8>)> = db
                .range(&ReadOptions::default(), range)
                .map(|kv| kv.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect::<crate::Result<_>>()?;
            let mut forward = Vec::new();
            let mut it = db.range(&ReadOptions::default(), range);
            while let Some((k, v)) = it.next_entry()? {
                forward.push((k.to_vec(), v.to_vec()));
            }
            let mut backward = Vec::new();
            let mut it = db.range(&ReadOptions::default(), range);
            while let Some((k, v)) = it.next_back_entry()? {
                backward.push((k.to_vec(), v.to_vec()));
            }
            backward.reverse();
            assert_eq!(owned, want, "seed {seed}, round {round}, case {case}");
            assert_eq!(forward, want, "seed {seed}, round {round}, case {case}");
            assert_eq!(backward, want, "seed {seed}, round {round}, case {case}");
        }
    }
    Ok(())
}

#[test]
fn lent_pairs_follow_the_snapshot() -> TestResult {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path(), Options::default())?;
    db.put(b"a", b"1")?;
    let snapshot = db.snapshot();
    db.put(b"a", b"2")?;
    db.put(b"b", b"3")?;
    let mut it = db.iter(&ReadOptions::at(&snapshot));
    assert_eq!(it.next_entry()?, Some((&b"a"[..], &b"1"[..])));
    assert_eq!(it.next_entry()?, None);
    Ok(())
}
