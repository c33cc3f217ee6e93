//! The statement cache: the translated statements of recently run SQL texts, so a text run
//! again skips `sqlparser` and the translation (docs/sql.md, "Statement cache").
//!
//! Parsing is most of a short statement's time: `sqlparser` takes about 6 us to tokenize and
//! parse `SELECT seq, count FROM reads WHERE count > 10 ORDER BY count DESC LIMIT 20`, of
//! the 17 us the whole statement takes over an index. A shell re-running a query, a web
//! front end sending the same text through the PostgreSQL protocol, or a dashboard polling
//! one query pay it once.
//!
//! What is cached is the output of [`crate::translate`], which depends on the text alone:
//! names are bound to the catalog when a statement is planned, each time it runs, so DDL
//! needs no invalidation. Texts that fail to parse or translate are not kept, and neither
//! are texts over [`MAX_CACHED_TEXT_BYTES`] (large `INSERT ... VALUES` lists are seldom
//! sent twice).
//!
//! A text is kept the second time it is translated, not the first: a table of the hashes of
//! recently translated texts (a "doorkeeper", as in TinyLFU: Einziger, Friedman and Manes,
//! "TinyLFU: A Highly Efficient Cache Admission Policy", 2017) lets a text in only when its
//! hash is already there. A stream of one-off texts (lookups with the key spelled into the
//! text) then costs one hash each and never allocates, inserts or evicts; with every text
//! admitted, 20,000 such lookups ran 10-15% slower than without a cache in `sql_compare`.
//! Eviction among admitted texts is `quick_cache`'s CLOCK-Pro.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::ast::Statement;
use crate::error::Result;

/// Longest SQL text, in bytes, whose statements are kept.
pub const MAX_CACHED_TEXT_BYTES: usize = 4096;

/// Total weight the cache holds: the bytes of its texts, plus [`ENTRY_WEIGHT`] per text
/// (translated statements are roughly proportional to their text). With 4 KiB texts this is
/// 128 of them; with short ones (100 bytes), about 1,800.
const CAPACITY_WEIGHT: u64 = 512 * 1024;

/// Weight of an entry beyond its text's bytes (for the key, the `Arc` and the AST's fixed
/// part).
const ENTRY_WEIGHT: u64 = 192;

/// Texts the cache is sized for, a hint to `quick_cache`.
const ESTIMATED_ENTRIES: usize = 256;

/// Slots of the doorkeeper: hashes of the last texts translated, one per slot (8 KiB).
const DOORKEEPER_SLOTS: usize = 1024;

/// Weighs an entry by its text's length.
#[derive(Clone, Copy, Debug)]
struct TextWeighter;

impl Weighter<Box<str>, Arc<[Statement]>> for TextWeighter {
    fn weight(&self, key: &Box<str>, _statements: &Arc<[Statement]>) -> u64 {
        key.len() as u64 + ENTRY_WEIGHT
    }
}

/// Translated statements by SQL text; shared by every thread of a [`super::Database`].
pub(crate) struct StatementCache {
    cache: Cache<Box<str>, Arc<[Statement]>, TextWeighter>,
    /// Hashes of recently translated texts, each in slot `hash % DOORKEEPER_SLOTS`.
    doorkeeper: Box<[AtomicU64]>,
}

impl std::fmt::Debug for StatementCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatementCache")
            .field("texts", &self.cache.len())
            .field("weight", &self.cache.weight())
            .finish()
    }
}

impl StatementCache {
    pub(crate) fn new() -> Self {
        StatementCache {
            cache: Cache::with_weighter(ESTIMATED_ENTRIES, CAPACITY_WEIGHT, TextWeighter),
            doorkeeper: (0..DOORKEEPER_SLOTS).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// The statements of `sql` if cached.
    pub(crate) fn get(&self, sql: &str) -> Option<Arc<[Statement]>> {
        self.cache.get(sql)
    }

    /// Whether the statements of `sql`, just translated, should be kept: the text is short
    /// enough and was translated recently before (its hash is in the doorkeeper). Records
    /// the text's hash either way.
    pub(crate) fn admit(&self, sql: &str) -> bool {
        if sql.len() > MAX_CACHED_TEXT_BYTES {
            return false;
        }
        let mut hasher = std::hash::DefaultHasher::new();
        sql.hash(&mut hasher);
        // 0 marks an empty slot: a text hashing to 0 is never admitted, which only costs it
        // its parse.
        let hash = hasher.finish();
        let slot = usize::try_from(hash % DOORKEEPER_SLOTS as u64).unwrap_or_default();
        self.doorkeeper
            .get(slot)
            .is_some_and(|s| s.swap(hash, Ordering::Relaxed) == hash && hash != 0)
    }

    /// Keeps `statements` as the translation of `sql` (callers ask [`StatementCache::admit`]
    /// first).
    pub(crate) fn insert(&self, sql: &str, statements: Arc<[Statement]>) {
        self.cache.insert(sql.into(), statements);
    }

    /// Number of texts held (tests).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.cache.len()
    }

    /// Total weight held (tests).
    #[cfg(test)]
    pub(crate) fn weight(&self) -> u64 {
        self.cache.weight()
    }
}

/// Parses `sql` and translates each statement; `Err` at the first failure, with the
/// statements before it (which a caller running statement by statement still runs).
///
/// # Errors
/// The parse error (nothing translated), or the first translation error with the statements
/// translated before it.
pub(crate) fn translate_all(
    sql: &str,
) -> std::result::Result<Vec<Statement>, (Vec<Statement>, crate::QueryError)> {
    let parsed = crate::parse::parse(sql).map_err(|e| (Vec::new(), e))?;
    let mut out = Vec::with_capacity(parsed.len());
    for s in &parsed {
        match crate::translate::statement(s) {
            Ok(stmt) => out.push(stmt),
            Err(e) => return Err((out, e)),
        }
    }
    Ok(out)
}

/// The statements of `sql` from `cache`, else parsed, translated and kept if admitted.
///
/// # Errors
/// As [`translate_all`] (the statements before a translation error are dropped).
pub(crate) fn statements(cache: &StatementCache, sql: &str) -> Result<Arc<[Statement]>> {
    if let Some(hit) = cache.get(sql) {
        return Ok(hit);
    }
    let statements: Arc<[Statement]> = translate_all(sql).map_err(|(_, e)| e)?.into();
    if cache.admit(sql) {
        cache.insert(sql, Arc::clone(&statements));
    }
    Ok(statements)
}

#[cfg(test)]
mod tests {
    use crate::exec::store::MemStore;
    use crate::exec::{Database, Output};
    use crate::{QueryError, Value};

    fn rows(out: &[Output]) -> Vec<Vec<Value>> {
        match out.last() {
            Some(Output::Rows { rows, .. }) => rows.clone(),
            other => panic!("expected rows, got {other:?}"),
        }
    }

    #[test]
    fn a_text_is_kept_the_second_time_and_answers_the_same_from_the_cache() {
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT)")
            .unwrap();
        db.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
            .unwrap();
        let q = "SELECT v FROM t WHERE k >= 2 ORDER BY k DESC";
        let before = db.statements.len();
        let first = rows(&db.execute(q).unwrap());
        assert!(
            db.statements.get(q).is_none(),
            "one run: only its hash is recorded"
        );
        let second = rows(&db.execute(q).unwrap());
        assert!(db.statements.get(q).is_some(), "the second run keeps it");
        assert_eq!(db.statements.len(), before + 1);
        let third = rows(&db.execute(q).unwrap());
        assert_eq!(db.statements.len(), before + 1, "the hit adds nothing");
        assert_eq!(first, second);
        assert_eq!(first, third);
        assert_eq!(
            first,
            vec![vec![Value::Text("c".into())], vec![Value::Text("b".into())]]
        );
        // A write between the runs is seen: the cache holds statements, not results.
        db.execute("INSERT INTO t VALUES (4, 'd')").unwrap();
        assert_eq!(rows(&db.execute(q).unwrap()).len(), 3);
    }

    #[test]
    fn a_cached_statement_is_bound_to_the_catalog_of_each_run() {
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT)")
            .unwrap();
        db.execute("INSERT INTO t VALUES (1, 'a')").unwrap();
        let q = "SELECT * FROM t";
        for _ in 0..2 {
            assert_eq!(
                rows(&db.execute(q).unwrap()),
                vec![vec![Value::Int(1), Value::Text("a".into())]]
            );
        }
        assert!(db.statements.get(q).is_some());
        db.execute("DROP TABLE t").unwrap();
        let gone = db.execute(q).unwrap_err();
        assert!(gone.to_string().contains("no such table"), "{gone}");
        db.execute("CREATE TABLE t (k TEXT PRIMARY KEY, n BIGINT, d DOUBLE)")
            .unwrap();
        db.execute("INSERT INTO t VALUES ('x', 7, 0.5)").unwrap();
        assert_eq!(
            rows(&db.execute(q).unwrap()),
            vec![vec![
                Value::Text("x".into()),
                Value::Int(7),
                Value::Double(0.5)
            ]]
        );
    }

    #[test]
    fn statements_before_one_that_does_not_translate_still_run_and_nothing_is_kept() {
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY)").unwrap();
        let sql = "INSERT INTO t VALUES (1); SELECT * FROM a JOIN b ON a.x = b.x";
        let before = db.statements.len();
        for round in 1..=2 {
            let mut outputs = Vec::new();
            let err = db.execute_each(sql, |o| outputs.push(o)).unwrap_err();
            assert!(matches!(err, QueryError::Unsupported(_)), "{err}");
            assert_eq!(outputs, vec![Output::Affected(1)], "round {round}");
            db.execute("DELETE FROM t").unwrap();
        }
        assert!(db.statements.get(sql).is_none());
        assert!(db.statements(sql).is_err());
        // The DELETE, run twice, was kept; the failing text was not.
        assert_eq!(db.statements.len(), before + 1);
    }

    #[test]
    fn syntax_errors_run_nothing_and_are_not_kept() {
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY)").unwrap();
        let sql = "INSERT INTO t VALUES (1); SELEC 1";
        for _ in 0..2 {
            let err = db.execute(sql).unwrap_err();
            assert!(matches!(err, QueryError::Parse(_)), "{err}");
        }
        assert!(db.statements.get(sql).is_none());
        assert_eq!(
            rows(&db.execute("SELECT count(*) FROM t").unwrap()),
            [[Value::Int(0)]]
        );
    }

    #[test]
    fn long_texts_are_run_but_not_kept() {
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY)").unwrap();
        let values: Vec<String> = (0..2000).map(|i| format!("({i})")).collect();
        let long = format!("INSERT INTO t VALUES {}", values.join(", "));
        assert!(long.len() > super::MAX_CACHED_TEXT_BYTES);
        assert_eq!(db.execute(&long).unwrap(), vec![Output::Affected(2000)]);
        db.execute("DELETE FROM t").unwrap();
        assert_eq!(db.execute(&long).unwrap(), vec![Output::Affected(2000)]);
        assert!(db.statements.get(&long).is_none());
        assert!(db.statements(&long).is_ok());
        assert!(db.statements.get(&long).is_none());
        let short = "SELECT count(*) FROM t";
        for _ in 0..2 {
            assert_eq!(rows(&db.execute(short).unwrap()), [[Value::Int(2000)]]);
        }
        assert!(db.statements.get(short).is_some());
    }

    #[test]
    fn one_off_texts_are_not_kept() {
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY)").unwrap();
        let before = db.statements.len();
        for i in 0..5_000 {
            db.execute(&format!("SELECT k FROM t WHERE k = {i}"))
                .unwrap();
        }
        // Each text ran once: none was translated before, so none is kept.
        assert_eq!(db.statements.len(), before);
    }

    #[test]
    fn the_cache_stays_within_its_weight_under_many_distinct_texts() {
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY)").unwrap();
        let repeated = "SELECT count(*) FROM t WHERE k > 10";
        db.execute(repeated).unwrap();
        db.execute(repeated).unwrap();
        // Each text runs twice in a row, so each is kept, and the older ones must go.
        for i in 0..20_000 {
            let text = format!("SELECT k FROM t WHERE k = {i}");
            db.execute(&text).unwrap();
            db.execute(&text).unwrap();
            if i % 100 == 0 {
                db.execute(repeated).unwrap();
            }
        }
        let held = db.statements.len();
        assert!(held < 20_000 / 4, "{held} texts held");
        assert!(db.statements.weight() <= super::CAPACITY_WEIGHT);
        assert!(
            db.statements.get(repeated).is_some(),
            "the repeated text outlives the one-off ones"
        );
    }
}
