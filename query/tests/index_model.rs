//! Index consistency under a randomized mix of INSERT, INSERT OR REPLACE, UPDATE (values and
//! primary keys) and DELETE: after every statement the table must equal a `BTreeMap` model,
//! and every index must hold exactly one entry per row (checked against a full scan of the
//! raw index key range). Runs on the in-memory store and on the engine; prints the seed.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_query::codec::key::{encode_value, prefix_successor};
use strata_query::{Database, KvRead, KvStore, MemStore, Output, QueryError, Value};

type Model = BTreeMap<i64, (Option<i64>, Option<String>)>;

fn rows<S: KvStore>(db: &Database<S>, sql: &str) -> Vec<Vec<Value>> {
    match db.execute(sql).unwrap().remove(0) {
        Output::Rows { rows, .. } => rows,
        o => panic!("{o:?}"),
    }
}

fn lit_k(k: Option<i64>) -> String {
    k.map_or("NULL".to_owned(), |k| k.to_string())
}

fn lit_s(s: &Option<String>) -> String {
    s.as_ref().map_or("NULL".to_owned(), |s| format!("'{s}'"))
}

fn model_rows(m: &Model) -> Vec<Vec<Value>> {
    m.iter()
        .map(|(id, (k, s))| {
            vec![
                Value::Int(*id),
                k.map_or(Value::Null, Value::Int),
                s.clone().map_or(Value::Null, Value::Text),
            ]
        })
        .collect()
}

/// Every index entry must be exactly `prefix, value, pk` for some row, and vice versa.
fn check_indexes<S: KvStore>(db: &Database<S>, m: &Model) {
    let catalog = db.catalog();
    let t = catalog.table("t").unwrap();
    let reader = db.store().reader();
    for index in &t.indexes {
        let prefix = index.key_prefix();
        let mut hi = prefix.clone();
        assert!(prefix_successor(&mut hi));
        let actual: BTreeSet<Vec<u8>> = reader
            .scan(Bound::Included(&prefix), Bound::Excluded(&hi), false)
            .map(|kv| kv.unwrap().0.to_vec())
            .collect();
        let expected: BTreeSet<Vec<u8>> = model_rows(m)
            .iter()
            .map(|row| {
                let mut k = prefix.clone();
                encode_value(&mut k, &row[index.column]);
                encode_value(&mut k, &row[0]);
                k
            })
            .collect();
        assert_eq!(
            actual, expected,
            "index {} differs from the rows",
            index.name
        );
    }
}

fn random_s(rng: &mut StdRng) -> Option<String> {
    if rng.random_bool(0.15) {
        None
    } else {
        let len = rng.random_range(0..4);
        Some(
            (0..len)
                .map(|_| ['a', 'b', 'c'][rng.random_range(0..3)])
                .collect(),
        )
    }
}

fn random_k(rng: &mut StdRng) -> Option<i64> {
    if rng.random_bool(0.15) {
        None
    } else {
        Some(rng.random_range(-5..15))
    }
}

fn run_model<S: KvStore>(db: &Database<S>, seed: u64, steps: usize) {
    println!("seed {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    db.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT, s TEXT)")
        .unwrap();
    db.execute("CREATE INDEX t_k ON t (k)").unwrap();
    let mut m = Model::new();
    for step in 0..steps {
        if step == steps / 3 {
            // An index built over existing rows must match too.
            db.execute("CREATE INDEX t_s ON t (s)").unwrap();
        }
        if step == 2 * steps / 3 {
            // Dropped and built again over the rows of now.
            db.execute("DROP INDEX t_s").unwrap();
            db.execute("CREATE INDEX t_s ON t (s)").unwrap();
        }
        let id = rng.random_range(0..40);
        let (k, s) = (random_k(&mut rng), random_s(&mut rng));
        match rng.random_range(0..9) {
            0 | 1 => {
                let r = db.execute(&format!(
                    "INSERT INTO t VALUES ({id}, {}, {})",
                    lit_k(k),
                    lit_s(&s)
                ));
                if let std::collections::btree_map::Entry::Vacant(e) = m.entry(id) {
                    r.unwrap();
                    e.insert((k, s));
                } else {
                    assert!(matches!(r, Err(QueryError::DuplicateKey { .. })), "{r:?}");
                }
            }
            2 => {
                db.execute(&format!(
                    "INSERT OR REPLACE INTO t VALUES ({id}, {}, {})",
                    lit_k(k),
                    lit_s(&s)
                ))
                .unwrap();
                m.insert(id, (k, s));
            }
            3 => {
                db.execute(&format!(
                    "UPDATE t SET k = {}, s = {} WHERE id = {id}",
                    lit_k(k),
                    lit_s(&s)
                ))
                .unwrap();
                if let Some(v) = m.get_mut(&id) {
                    *v = (k, s);
                }
            }
            4 => {
                let limit = rng.random_range(-5..15);
                db.execute(&format!("UPDATE t SET k = k + 1 WHERE k < {limit}"))
                    .unwrap();
                for v in m.values_mut() {
                    if let Some(x) = v.0.as_mut().filter(|x| **x < limit) {
                        *x += 1;
                    }
                }
            }
            5 => {
                let to = rng.random_range(0..40);
                let r = db.execute(&format!("UPDATE t SET id = {to} WHERE id = {id}"));
                if !m.contains_key(&id) || to == id {
                    r.unwrap();
                } else if m.contains_key(&to) {
                    assert!(matches!(r, Err(QueryError::DuplicateKey { .. })), "{r:?}");
                } else {
                    r.unwrap();
                    let v = m.remove(&id).unwrap();
                    m.insert(to, v);
                }
            }
            6 => {
                db.execute(&format!("DELETE FROM t WHERE id = {id}"))
                    .unwrap();
                m.remove(&id);
            }
            7 => {
                let v = rng.random_range(-5..15);
                db.execute(&format!("DELETE FROM t WHERE k = {v}")).unwrap();
                m.retain(|_, (k, _)| *k != Some(v));
            }
            _ => {
                db.execute("DELETE FROM t WHERE s LIKE 'ab%'").unwrap();
                m.retain(|_, (_, s)| !s.as_deref().is_some_and(|s| s.starts_with("ab")));
            }
        }
        assert_eq!(rows(db, "SELECT * FROM t"), model_rows(&m), "step {step}");
        check_indexes(db, &m);
        // Index scans answer like the model.
        let v = rng.random_range(-5..15);
        let got: Vec<i64> = rows(db, &format!("SELECT id FROM t WHERE k >= {v} ORDER BY id"))
            .iter()
            .map(|r| match r[0] {
                Value::Int(i) => i,
                _ => panic!(),
            })
            .collect();
        let want: Vec<i64> = m
            .iter()
            .filter(|(_, (k, _))| k.is_some_and(|k| k >= v))
            .map(|(id, _)| *id)
            .collect();
        assert_eq!(got, want, "step {step}: k >= {v}");
    }
}

fn seed() -> u64 {
    std::env::var("STRATA_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| rand::rng().random())
}

#[test]
fn indexes_stay_exact_under_random_writes_in_memory() {
    let db = Database::new(MemStore::new()).unwrap();
    run_model(&db, seed(), 400);
}

#[test]
fn indexes_stay_exact_under_random_writes_on_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let db = Database::open(dir.path()).unwrap();
    run_model(&db, seed(), 150);
}
