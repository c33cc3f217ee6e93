//! `Database::run_streaming`: the same result sets as `run_with`, handed over row by row, and
//! ended early by the sink.

#![allow(clippy::unwrap_used, reason = "a panic is how a test fails")]

use std::ops::ControlFlow;

use strata_query::ast::Statement;
use strata_query::{Database, Interrupt, MemStore, OnConflict, Output, RowSink, Value};

/// Collects a result set; breaks after `stop_after` rows when given.
#[derive(Default)]
struct Collect {
    columns: Option<Vec<String>>,
    rows: Vec<Vec<Value>>,
    stop_after: Option<usize>,
}

impl RowSink for Collect {
    fn columns(&mut self, columns: &[String]) {
        assert!(self.columns.is_none(), "columns given twice");
        self.columns = Some(columns.to_vec());
    }

    fn row(&mut self, row: Vec<Value>) -> ControlFlow<()> {
        assert!(self.columns.is_some(), "a row before the columns");
        self.rows.push(row);
        if self.stop_after.is_some_and(|n| self.rows.len() >= n) {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }
}

fn statement(sql: &str) -> Statement {
    strata_query::translate::statement(&strata_query::parse::parse(sql).unwrap()[0]).unwrap()
}

fn database() -> Database<MemStore> {
    let db = Database::new(MemStore::new()).unwrap();
    db.execute("CREATE TABLE reads (seq TEXT PRIMARY KEY, count BIGINT); CREATE INDEX reads_count ON reads (count)")
        .unwrap();
    let rows = (0..3_000i64)
        .map(|i| vec![Value::Text(format!("read{i:05}")), Value::Int(i % 37)])
        .collect();
    db.insert_values("reads", None, rows, OnConflict::Error)
        .unwrap();
    db
}

#[test]
fn every_result_set_streams_as_run_with_returns_it() {
    let db = database();
    for sql in [
        "SELECT * FROM reads",
        "SELECT seq FROM reads WHERE count > 30 LIMIT 10 OFFSET 5",
        "SELECT seq, count FROM reads WHERE count = 7",
        "SELECT seq FROM reads WHERE seq = 'read00042'",
        "SELECT seq FROM reads WHERE seq LIKE 'read001%' ORDER BY seq DESC",
        "SELECT seq, count FROM reads ORDER BY count DESC, seq LIMIT 20",
        "SELECT count, count(*) FROM reads GROUP BY count",
        "SELECT count(*) FROM reads WHERE count > 100",
        "SELECT 1 + 1",
        "SELECT seq FROM reads LIMIT 0",
        "EXPLAIN SELECT seq FROM reads WHERE count = 3",
        "SHOW TABLES",
        "DESCRIBE reads",
    ] {
        let stmt = statement(sql);
        let Output::Rows { columns, rows } = db.run_with(&stmt, &Interrupt::new()).unwrap() else {
            panic!("{sql}: no result set");
        };
        let mut sink = Collect::default();
        let out = db
            .run_streaming(&stmt, &Interrupt::new(), &mut sink)
            .unwrap();
        assert_eq!(out, None, "{sql}");
        assert_eq!(sink.columns.as_ref(), Some(&columns), "{sql}");
        assert_eq!(sink.rows, rows, "{sql}");
    }
}

#[test]
fn statements_without_a_result_set_return_their_output() {
    let db = database();
    let mut sink = Collect::default();
    let stmt = statement("UPDATE reads SET count = 0 WHERE count = 1");
    let out = db
        .run_streaming(&stmt, &Interrupt::new(), &mut sink)
        .unwrap();
    assert_eq!(out, Some(Output::Affected(82)));
    let stmt = statement("DROP INDEX reads_count");
    let out = db
        .run_streaming(&stmt, &Interrupt::new(), &mut sink)
        .unwrap();
    assert_eq!(out, Some(Output::Done("DROP INDEX")));
    assert!(sink.columns.is_none() && sink.rows.is_empty());
}

#[test]
fn a_break_ends_the_statement_and_an_interrupt_stops_it() {
    let db = database();
    for sql in [
        "SELECT seq FROM reads",
        "SELECT seq FROM reads ORDER BY count",
        "SHOW TABLES",
    ] {
        let mut sink = Collect {
            stop_after: Some(1),
            ..Collect::default()
        };
        let out = db
            .run_streaming(&statement(sql), &Interrupt::new(), &mut sink)
            .unwrap();
        assert_eq!(out, None, "{sql}");
        assert_eq!(sink.rows.len(), 1, "{sql}");
    }
    let interrupt = Interrupt::new();
    interrupt.interrupt();
    let mut sink = Collect::default();
    let err = db
        .run_streaming(&statement("SELECT * FROM reads"), &interrupt, &mut sink)
        .unwrap_err();
    assert!(
        matches!(err, strata_query::QueryError::Interrupted),
        "{err}"
    );
    assert!(sink.columns.is_none() && sink.rows.is_empty());
}

/// Signals when the statement was planned (its columns given), then takes its time before
/// reading the first row.
struct PausedAfterPlanning {
    planned: std::sync::mpsc::Sender<()>,
    rows: Collect,
}

impl RowSink for PausedAfterPlanning {
    fn columns(&mut self, columns: &[String]) {
        self.rows.columns(columns);
        self.planned.send(()).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(300));
    }

    fn row(&mut self, row: Vec<Value>) -> ControlFlow<()> {
        self.rows.row(row)
    }
}

/// A tester's concurrent `DROP INDEX` made a `count(*)` over the index answer 0: the SELECT had
/// planned with the catalog before the drop and read after the drop deleted the entries. The
/// drop now waits for such SELECTs, which answer in full.
#[test]
fn a_drop_waits_for_the_selects_planned_with_what_it_drops() {
    let cases = [
        // Index-only: the rows come from the dropped index's entries (i % 37 == 7 for i below
        // 3,000: 81 rows).
        (
            "DROP INDEX reads_count",
            "SELECT seq FROM reads WHERE count = 7",
            81,
        ),
        (
            "DROP TABLE reads",
            "SELECT seq FROM reads WHERE seq >= 'read'",
            3_000,
        ),
    ];
    for (drop, select, rows) in cases {
        let db = std::sync::Arc::new(database());
        let (planned, was_planned) = std::sync::mpsc::channel();
        let reader = {
            let db = std::sync::Arc::clone(&db);
            std::thread::spawn(move || {
                let mut sink = PausedAfterPlanning {
                    planned,
                    rows: Collect::default(),
                };
                db.run_streaming(&statement(select), &Interrupt::new(), &mut sink)
                    .unwrap();
                sink.rows.rows.len()
            })
        };
        was_planned.recv().unwrap();
        db.execute(drop).unwrap();
        assert_eq!(reader.join().unwrap(), rows, "{select} beside {drop}");
    }
}
