//! The SQL front end (`strata-query`): parse, translate, plan and execute.
//!
//! The input is SQL text (invalid UTF-8 replaced). It runs, after a fixed schema with a few
//! rows and an index, on two databases: the in-memory `MemStore` and the engine (a new `Db` in
//! the scratch directory for every input). At most
//! `MAX_STATEMENTS` statements run, so `INSERT INTO t SELECT ... FROM t` cannot double the
//! table without bound. Every statement must return a result or an error, never panic, and
//! both stores must give the same results and the same errors (engine errors aside: the
//! engine limits key and value sizes, the in-memory store does not). Statements run on a
//! thread with a 2 MiB stack, like the server's.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use strata_engine::{Db, Options};
use strata_fuzz::fresh_dir;
use strata_query::ast::Statement;
use strata_query::{Database, DbStore, KvStore, MemStore, Output, QueryError};

strata_fuzz::capped_allocator!();

/// Statements run per input.
const MAX_STATEMENTS: usize = 8;

const SCHEMA: &str = "
CREATE TABLE t (id BIGINT PRIMARY KEY, name TEXT, score DOUBLE, flag BOOLEAN);
CREATE INDEX t_name ON t (name);
INSERT INTO t VALUES (1, 'ACGT', 0.5, true), (2, 'TTGA', -1.5, NULL), (3, NULL, 2.5, false);
CREATE TABLE p (a TEXT, b INT, v BLOB, PRIMARY KEY (a, b));
INSERT INTO p VALUES ('x', 1, NULL), ('x', -2, NULL), ('y', 0, NULL);
";

/// `SCHEMA`, parsed and translated once.
fn schema() -> &'static [Statement] {
    static SCHEMA_STATEMENTS: OnceLock<Vec<Statement>> = OnceLock::new();
    SCHEMA_STATEMENTS.get_or_init(|| {
        strata_query::parse::parse(SCHEMA)
            .expect("the schema parses")
            .iter()
            .map(|s| strata_query::translate::statement(s).expect("the schema translates"))
            .collect()
    })
}

/// Creates the schema in `db`.
fn create_schema<S: KvStore>(db: &Database<S>) {
    for s in schema() {
        db.run(s).expect("the schema runs");
    }
}

/// A new, empty engine database in the scratch directory.
fn engine() -> Db {
    let options = Options {
        max_background_jobs: 1,
        ..Options::default()
    };
    Db::open(fresh_dir("sql-db"), options).expect("open the fuzz database")
}

/// Runs `sql` on `db`: one entry per statement (at most `MAX_STATEMENTS`), `Err` text for a
/// statement that failed (and ends the run, as `Database::execute` does).
fn run<S: KvStore>(db: &Database<S>, sql: &str) -> Vec<Result<Output, QueryError>> {
    let mut out = Vec::new();
    let statements = match strata_query::parse::parse(sql) {
        Ok(s) => s,
        Err(e) => return vec![Err(e)],
    };
    for s in statements.iter().take(MAX_STATEMENTS) {
        let r = strata_query::translate::statement(s).and_then(|stmt| db.run(&stmt));
        let failed = r.is_err();
        out.push(r);
        if failed {
            break;
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let sql = String::from_utf8_lossy(data).into_owned();
    // The server runs statements on tokio worker threads, whose stacks are 2 MiB: so do we, so
    // that recursion proportional to the input (a stack overflow kills the process) shows up.
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || check(&sql))
        .expect("spawn the statement thread")
        .join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
});

/// Runs `sql` after the schema on both stores and compares the results.
fn check(sql: &str) {
    let mem = Database::new(MemStore::new()).expect("open the in-memory database");
    create_schema(&mem);
    let mem_out = run(&mem, sql);

    let db = engine();
    let eng = Database::new(DbStore::new(db.clone())).expect("open the engine database");
    create_schema(&eng);
    let eng_out = run(&eng, sql);

    let engine_error = |r: &Result<Output, QueryError>| matches!(r, Err(QueryError::Engine(_)));
    if !eng_out.iter().any(engine_error) {
        let text = |v: &[Result<Output, QueryError>]| -> Vec<String> {
            v.iter()
                .map(|r| match r {
                    Ok(o) => format!("{o:?}"),
                    Err(e) => format!("error: {e}"),
                })
                .collect()
        };
        assert_eq!(
            text(&mem_out),
            text(&eng_out),
            "MemStore and the engine disagree"
        );
    }
    drop(eng);
    db.close().expect("close the fuzz database");
}
