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
//! are texts over [`MAX_CACHED_TEXT_BYTES`].
//!
//! A text is kept the second time it is translated to run, not the first (a PostgreSQL
//! Describe does not count): a small Bloom filter of the texts translated recently (a
//! "doorkeeper", as in TinyLFU: Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient
//! Cache Admission Policy", 2017) lets a text in only when it is already there. A stream of
//! one-off texts (lookups with the key spelled into the text) then costs one hash each and,
//! but for the filter's false positives (about 0.5%), never allocates, inserts or evicts;
//! with every text admitted, 20,000 such lookups ran 10-15% slower than without a cache in
//! `sql_compare`. The filter is cleared after every [`DOORKEEPER_RESET`] texts it records,
//! so it remembers only recent ones. Eviction among admitted texts is `quick_cache`'s
//! CLOCK-Pro.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use quick_cache::Weighter;
use quick_cache::sync::Cache;

use crate::ast::Statement;

/// Longest SQL text, in bytes, whose statements are kept. Longer texts are mostly long
/// value lists, seldom sent twice, and one of 4 KiB can translate to 320 KB of statements
/// (docs/sql.md, "Statement cache").
pub const MAX_CACHED_TEXT_BYTES: usize = 1024;

/// Total weight the cache holds: an upper estimate, in bytes, of the memory its entries use
/// (see [`TextWeighter`]): 2 MiB, per `Database`. About 160 texts like `SELECT seq, count
/// FROM reads WHERE count > 10 ORDER BY count DESC LIMIT 20`, or 12 SELECTs of 1 KiB (21
/// other statements).
const CAPACITY_WEIGHT: u64 = 2 << 20;

/// Estimated bytes of translated statements per byte of SQL text, above the most measured
/// over the statement shapes tried (a select list of 257 literals: 91, its `Vec` grown to
/// 512 items; 112 `SELECT 1;` statements: 80; 2,000 projected literals or columns: 45-48; an
/// `IN` list of 800 numbers: 41; a `VALUES` list: 26; a lookup with a 150-character
/// string: 5.5).
const BYTES_PER_TEXT_BYTE: u64 = 96;

/// Estimated bytes per byte of SQL text that a SELECT's plan memo adds once it has run
/// ([`crate::plan::PlanMemo`]: a copy of the statement and its plan), above the most measured
/// with a counting allocator (a select list of 257 literals: 61; an `IN` list of 800
/// numbers: 41; the `LIMIT 20` above: 27; a lookup with a 150-character string: 12).
const MEMO_BYTES_PER_TEXT_BYTE: u64 = 64;

/// Estimated bytes of an entry beyond [`BYTES_PER_TEXT_BYTE`] (`SELECT 1` translates to 736
/// bytes of heap; plus the key and the cache's own entry).
const ENTRY_WEIGHT: u64 = 1024;

/// Texts the cache is sized for, a hint to `quick_cache`.
const ESTIMATED_ENTRIES: usize = 256;

/// Bits of the doorkeeper's Bloom filter (2 KiB), and bits set per text.
const DOORKEEPER_BITS: u64 = 16 * 1024;
const DOORKEEPER_HASHES: u64 = 3;

/// Texts the doorkeeper records before it is cleared: with 1,024 texts in 16 Ki bits and 3
/// bits each, a text never seen passes for seen about 0.5% of the time.
const DOORKEEPER_RESET: usize = 1024;

/// Weighs an entry by an upper estimate of its memory (see [`BYTES_PER_TEXT_BYTE`], and
/// [`MEMO_BYTES_PER_TEXT_BYTE`] for a text with a SELECT in it).
#[derive(Clone, Copy, Debug)]
struct TextWeighter;

impl Weighter<Box<str>, Arc<[Statement]>> for TextWeighter {
    fn weight(&self, key: &Box<str>, statements: &Arc<[Statement]>) -> u64 {
        let selects = statements.iter().any(|s| matches!(s, Statement::Select(_)));
        let per_byte = BYTES_PER_TEXT_BYTE + if selects { MEMO_BYTES_PER_TEXT_BYTE } else { 0 };
        key.len() as u64 * per_byte + ENTRY_WEIGHT
    }
}

/// Translated statements by SQL text; shared by every thread of a [`super::Database`].
pub(crate) struct StatementCache {
    cache: Cache<Box<str>, Arc<[Statement]>, TextWeighter>,
    /// The doorkeeper's Bloom filter over recently translated texts.
    doorkeeper: Box<[AtomicU64]>,
    /// Texts recorded in the doorkeeper since it was last cleared.
    recorded: AtomicUsize,
    /// Seeds the doorkeeper's hash (random per cache, so no fixed pair of texts collides).
    hasher: std::hash::RandomState,
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
        let words = usize::try_from(DOORKEEPER_BITS / 64).unwrap_or(1);
        StatementCache {
            cache: Cache::with_weighter(ESTIMATED_ENTRIES, CAPACITY_WEIGHT, TextWeighter),
            doorkeeper: (0..words).map(|_| AtomicU64::new(0)).collect(),
            recorded: AtomicUsize::new(0),
            hasher: std::hash::RandomState::new(),
        }
    }

    /// The statements of `sql` if cached.
    pub(crate) fn get(&self, sql: &str) -> Option<Arc<[Statement]>> {
        self.cache.get(sql)
    }

    /// Whether the statements of `sql`, just translated, should be kept: the text is short
    /// enough and the doorkeeper has seen it recently. Records the text in the doorkeeper
    /// either way.
    pub(crate) fn admit(&self, sql: &str) -> bool {
        if sql.len() > MAX_CACHED_TEXT_BYTES {
            return false;
        }
        if self.recorded.fetch_add(1, Ordering::Relaxed) >= DOORKEEPER_RESET {
            // Racing admissions may see a half-cleared filter: they only miss a keep.
            self.recorded.store(1, Ordering::Relaxed);
            for word in &self.doorkeeper {
                word.store(0, Ordering::Relaxed);
            }
        }
        // Double hashing: bit i is h1 + i * h2 (Kirsch and Mitzenmacher, "Less Hashing, Same
        // Performance: Building a Better Bloom Filter", 2006).
        let hash = self.hasher.hash_one(sql);
        let (h1, h2) = (hash & 0xFFFF_FFFF, (hash >> 32) | 1);
        let mut seen = true;
        for i in 0..DOORKEEPER_HASHES {
            let bit = h1.wrapping_add(i.wrapping_mul(h2)) % DOORKEEPER_BITS;
            let mask = 1u64 << (bit % 64);
            let word = usize::try_from(bit / 64).unwrap_or_default();
            if let Some(w) = self.doorkeeper.get(word) {
                seen &= w.fetch_or(mask, Ordering::Relaxed) & mask != 0;
            }
        }
        seen
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

/// A text's statements: shared with the cache, or just translated and not kept.
pub(crate) enum Translated {
    Cached(Arc<[Statement]>),
    Fresh(Vec<Statement>),
}

impl std::ops::Deref for Translated {
    type Target = [Statement];

    fn deref(&self) -> &[Statement] {
        match self {
            Translated::Cached(shared) => shared,
            Translated::Fresh(own) => own,
        }
    }
}

impl From<Translated> for Arc<[Statement]> {
    fn from(t: Translated) -> Self {
        match t {
            Translated::Cached(shared) => shared,
            Translated::Fresh(own) => own.into(),
        }
    }
}

/// The statements of `sql` from `cache`, else parsed and translated; then kept if admitted
/// when `count` is set (a translation that is only looked at, not run, does not count). A
/// translation not kept is handed back as it is, without a copy into an `Arc`.
///
/// # Errors
/// As [`translate_all`]: the first failure, with the statements translated before it.
pub(crate) fn statements(
    cache: &StatementCache,
    sql: &str,
    count: bool,
) -> std::result::Result<Translated, (Vec<Statement>, crate::QueryError)> {
    if let Some(hit) = cache.get(sql) {
        return Ok(Translated::Cached(hit));
    }
    let translated = translate_all(sql)?;
    if count && cache.admit(sql) {
        let shared: Arc<[Statement]> = translated.into();
        cache.insert(sql, Arc::clone(&shared));
        return Ok(Translated::Cached(shared));
    }
    Ok(Translated::Fresh(translated))
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
    fn a_cached_select_keeps_its_plan_until_the_catalog_changes() {
        use crate::ast::Statement;
        use crate::plan::{Access, plan_select_memo};
        use std::sync::Arc;

        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT)")
            .unwrap();
        db.execute("INSERT INTO t VALUES (1, 10), (2, 20), (3, 30)")
            .unwrap();
        let q = "SELECT k FROM t WHERE v > 15 ORDER BY v DESC";
        let expected = vec![vec![Value::Int(3)], vec![Value::Int(2)]];
        for _ in 0..2 {
            assert_eq!(rows(&db.execute(q).unwrap()), expected);
        }
        let cached = db.statements.get(q).expect("kept after two runs");
        let Some(Statement::Select(select)) = cached.first() else {
            panic!("not a SELECT: {cached:?}");
        };
        let plan = |db: &Database<MemStore>| plan_select_memo(&db.catalog(), select).unwrap();
        let full = plan(&db);
        assert!(
            Arc::ptr_eq(&full, &plan(&db)),
            "same catalog: the kept plan"
        );
        assert!(matches!(
            full.scan.as_ref().unwrap().access,
            Access::KeyRange { .. }
        ));

        // A new index is a new catalog: the cached text is planned again and uses it.
        db.execute("CREATE INDEX by_v ON t (v)").unwrap();
        let indexed = plan(&db);
        assert!(!Arc::ptr_eq(&full, &indexed));
        assert!(matches!(
            indexed.scan.as_ref().unwrap().access,
            Access::IndexRange { .. }
        ));
        assert_eq!(rows(&db.execute(q).unwrap()), expected);

        // Dropping the index must not leave a plan that reads the dropped index's (now
        // empty) key range: that would answer no rows instead of two.
        db.execute("DROP INDEX by_v").unwrap();
        assert_eq!(rows(&db.execute(q).unwrap()), expected);
        assert!(matches!(
            plan(&db).scan.as_ref().unwrap().access,
            Access::KeyRange { .. }
        ));
        // A write is seen by the kept plan: it holds how to read, not what was read.
        db.execute("INSERT INTO t VALUES (4, 40)").unwrap();
        assert_eq!(rows(&db.execute(q).unwrap()).len(), 3);
    }

    #[test]
    fn a_select_changed_after_it_ran_is_planned_again() {
        use crate::ast::{Expr, Statement};
        use std::sync::Arc;

        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT)")
            .unwrap();
        db.execute("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
            .unwrap();
        let translated = db.statements("SELECT v FROM t WHERE k = 1").unwrap();
        let Some(Statement::Select(select)) = translated.first() else {
            panic!("not a SELECT: {translated:?}");
        };
        // A caller reusing one statement with another key each time (sql_compare's planned
        // lookups do it on clones; this one changes the statement in place).
        let mut stmt = Statement::Select(select.clone());
        for k in 1..=3 {
            if let Statement::Select(s) = &mut stmt
                && let Some(Expr::Binary { right, .. }) = &mut s.filter
            {
                **right = Expr::Literal(Value::Int(k));
            }
            let want = ["a", "b", "c"][usize::try_from(k - 1).unwrap()];
            assert_eq!(
                rows(&[db.run(&stmt).unwrap()]),
                vec![vec![Value::Text(want.into())]],
                "key {k}"
            );
        }
        // Run twice unchanged, the kept plan is reused.
        let Statement::Select(s) = &stmt else {
            unreachable!()
        };
        let first = crate::plan::plan_select_memo(&db.catalog(), s).unwrap();
        let again = crate::plan::plan_select_memo(&db.catalog(), s).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
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
        // Each text ran once: only the doorkeeper's false positives (about 0.5%) get in.
        let kept = db.statements.len() - before;
        assert!(kept < 100, "{kept} of 5,000 one-off texts kept");
    }

    #[test]
    fn two_texts_run_in_turn_are_both_kept() {
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT)")
            .unwrap();
        // A tester found this pair sharing a slot of the first doorkeeper (one hash per
        // slot, overwritten), so neither was ever kept when they alternated.
        let (a, b) = ("SELECT count(*) FROM t", "SELECT v FROM t WHERE k = 2434");
        for _ in 0..3 {
            db.execute(a).unwrap();
            db.execute(b).unwrap();
        }
        assert!(db.statements.get(a).is_some());
        assert!(db.statements.get(b).is_some());
    }

    #[test]
    fn a_described_text_run_once_is_not_kept() {
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY)").unwrap();
        let q = "SELECT k FROM t WHERE k = 7";
        // A PostgreSQL Describe, then its Execute: one use.
        assert_eq!(db.statements_to_describe(q).unwrap().len(), 1);
        db.execute(q).unwrap();
        assert!(db.statements.get(q).is_none());
        // Run again, it is kept, and a Describe of it is served from the cache.
        db.execute(q).unwrap();
        let kept = db.statements.get(q).unwrap();
        let described = db.statements_to_describe(q).unwrap();
        assert!(std::sync::Arc::ptr_eq(&kept, &described));
    }

    #[test]
    fn the_doorkeeper_forgets_texts_after_it_is_cleared() {
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY)").unwrap();
        let q = "SELECT count(*) FROM t";
        db.execute(q).unwrap();
        for i in 0..super::DOORKEEPER_RESET + 100 {
            db.execute(&format!("SELECT k FROM t WHERE k = {i}"))
                .unwrap();
        }
        // Cleared once since `q` ran: its second run is its first in the filter.
        db.execute(q).unwrap();
        assert!(db.statements.get(q).is_none());
        db.execute(q).unwrap();
        assert!(db.statements.get(q).is_some());
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
