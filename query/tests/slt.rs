//! The SQL fixture suite: every `tests/slt/*.slt` file (sqllogictest format, expected results
//! inline) runs twice, once on the engine in a temporary directory and once on the in-memory
//! `MemStore`, and must pass on both.
#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::path::PathBuf;

use sqllogictest::{DBOutput, DefaultColumnType, Runner};
use strata_query::{Database, DbStore, KvStore, MemStore, Output, QueryError, Value};

struct Conn<S: KvStore> {
    db: Database<S>,
    _dir: Option<tempfile::TempDir>,
}

fn cell(v: &Value) -> String {
    match v {
        Value::Text(s) if s.is_empty() => "(empty)".to_owned(),
        v => v.to_string(),
    }
}

impl<S: KvStore> sqllogictest::DB for Conn<S> {
    type Error = QueryError;
    type ColumnType = DefaultColumnType;

    fn run(&mut self, sql: &str) -> Result<DBOutput<DefaultColumnType>, QueryError> {
        let outputs = self.db.execute(sql)?;
        Ok(match outputs.into_iter().last() {
            Some(Output::Rows { columns, rows }) => DBOutput::Rows {
                types: vec![DefaultColumnType::Any; columns.len()],
                rows: rows.iter().map(|r| r.iter().map(cell).collect()).collect(),
            },
            Some(Output::Affected(n)) => DBOutput::StatementComplete(n),
            Some(Output::Done(_)) | None => DBOutput::StatementComplete(0),
        })
    }

    fn engine_name(&self) -> &str {
        "strata"
    }
}

fn files() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/slt");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/slt exists")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "slt"))
        .collect();
    files.sort();
    assert!(!files.is_empty());
    files
}

fn run_all<S: KvStore + 'static>(label: &str, make: fn() -> Conn<S>) {
    let mut failures = Vec::new();
    for file in files() {
        let mut runner = Runner::new(move || async move { Ok::<_, QueryError>(make()) });
        if let Err(e) = runner.run_file(&file) {
            failures.push(format!("{}: {e}", file.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "[{label}] failures:\n{}",
        failures.join("\n\n")
    );
}

#[test]
fn sql_fixtures_pass_on_the_engine() {
    run_all("engine", || {
        let dir = tempfile::tempdir().unwrap();
        let db = Database::open(dir.path()).unwrap();
        Conn::<DbStore> {
            db,
            _dir: Some(dir),
        }
    });
}

#[test]
fn sql_fixtures_pass_on_the_memory_store() {
    run_all("memory", || Conn::<MemStore> {
        db: Database::new(MemStore::new()).unwrap(),
        _dir: None,
    });
}
