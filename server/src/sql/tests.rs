use std::sync::Arc;

use strata_query::{DataType, Value};

use super::*;
use crate::config::Config;
use crate::databases::Databases;

fn open() -> (tempfile::TempDir, Databases, Arc<Database>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let dbs = Databases::new(&Config::ephemeral(dir.path())).expect("registry");
    let db = dbs.get_or_open("db0").expect("open");
    (dir, dbs, db)
}

/// [`super::run`] without an interrupt.
fn run(database: &Database, stmt: &str) -> Result<Outcome, SqlError> {
    super::run(database, stmt, &Interrupt::new())
}

fn col(name: &str, ty: Option<DataType>) -> Column {
    Column {
        name: name.to_owned(),
        ty,
    }
}

#[test]
fn select_columns_are_typed_before_running() -> Result<(), SqlError> {
    let (_dir, _dbs, db) = open();
    run(
        &db,
        "CREATE TABLE reads (seq TEXT PRIMARY KEY, n BIGINT, q DOUBLE, ok BOOLEAN, raw BLOB)",
    )?;
    let cols = describe(
        &db,
        "SELECT seq, n + 1 AS n1, q * n, ok, raw, NULL AS nothing FROM reads WHERE n > 3",
    )?
    .expect("rows");
    assert_eq!(
        cols,
        vec![
            col("seq", Some(DataType::Text)),
            col("n1", Some(DataType::BigInt)),
            col("?column?", Some(DataType::Double)),
            col("ok", Some(DataType::Boolean)),
            col("raw", Some(DataType::Blob)),
            col("nothing", None),
        ]
    );
    let cols = describe(
        &db,
        "SELECT ok, COUNT(*), SUM(n), AVG(n), MAX(seq) FROM reads GROUP BY ok",
    )?
    .expect("rows");
    let types: Vec<Option<DataType>> = cols.into_iter().map(|c| c.ty).collect();
    assert_eq!(
        types,
        vec![
            Some(DataType::Boolean),
            Some(DataType::BigInt),
            Some(DataType::BigInt),
            Some(DataType::Double),
            Some(DataType::Text),
        ]
    );
    assert_eq!(describe(&db, "INSERT INTO reads (seq) VALUES ('A')")?, None);
    Ok(())
}

#[test]
fn statements_run_with_command_tags() -> Result<(), SqlError> {
    let (_dir, _dbs, db) = open();
    assert_eq!(
        run(&db, "CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT)")?,
        Outcome::Command("CREATE TABLE".into())
    );
    assert_eq!(
        run(&db, "INSERT INTO t VALUES (1, 'a'), (2, 'b')")?,
        Outcome::Command("INSERT 0 2".into())
    );
    assert_eq!(
        run(&db, "UPDATE t SET v = 'c' WHERE k = 2")?,
        Outcome::Command("UPDATE 1".into())
    );
    let Outcome::Rows { columns, rows } = run(&db, "SELECT k, v FROM t ORDER BY k")? else {
        panic!("no rows");
    };
    assert_eq!(columns[0], col("k", Some(DataType::BigInt)));
    assert_eq!(rows[1], vec![Value::Int(2), Value::Text("c".into())]);
    assert_eq!(
        run(&db, "DELETE FROM t")?,
        Outcome::Command("DELETE 2".into())
    );
    Ok(())
}

#[test]
fn session_statements_are_answered() -> Result<(), SqlError> {
    let (_dir, _dbs, db) = open();
    assert_eq!(run(&db, "BEGIN")?, Outcome::Begin);
    assert_eq!(run(&db, "start transaction")?, Outcome::Begin);
    assert_eq!(run(&db, "COMMIT")?, Outcome::Commit { chain: false });
    assert_eq!(run(&db, "rollback")?, Outcome::Rollback { chain: false });
    assert_eq!(
        run(&db, "COMMIT WORK AND CHAIN")?,
        Outcome::Commit { chain: true }
    );
    assert_eq!(
        run(&db, "abort and no chain")?,
        Outcome::Rollback { chain: false }
    );
    assert_eq!(
        run(&db, "SET datestyle = 'ISO'")?,
        Outcome::Command("SET".into())
    );
    let Outcome::Rows { rows, .. } = run(&db, "show transaction isolation level")? else {
        panic!("no rows");
    };
    assert_eq!(rows, vec![vec![Value::Text("read committed".into())]]);
    let Outcome::Rows { rows, .. } = run(&db, "SHOW standard_conforming_strings")? else {
        panic!("no rows");
    };
    assert_eq!(rows, vec![vec![Value::Text("on".into())]]);
    let Outcome::Rows { rows, .. } = run(&db, "select  current_database()")? else {
        panic!("no rows");
    };
    assert_eq!(rows, vec![vec![Value::Text("db0".into())]]);
    // Several in one list, with aliases.
    let Outcome::Rows { columns, rows } = run(
        &db,
        "SELECT current_database(), current_schema AS s, pg_catalog.version() as v;",
    )?
    else {
        panic!("no rows");
    };
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["current_database", "s", "v"]);
    assert_eq!(
        rows[0][..2],
        [Value::Text("db0".into()), Value::Text("public".into())]
    );
    // Anything else in the list: the SQL layer's answer (functions are not supported).
    assert!(run(&db, "SELECT current_database(), 1").is_err());
    assert!(matches!(
        run(&db, "SHOW nonsense"),
        Err(SqlError::UnknownSetting(_))
    ));
    Ok(())
}

#[test]
fn errors_carry_postgres_sqlstates() {
    let (_dir, _dbs, db) = open();
    let state = |sql: &str| run(&db, sql).err().map(|e| e.sqlstate());
    assert_eq!(state("SELEC 1"), Some("42601"));
    assert_eq!(state("SELECT * FROM missing"), Some("42P01"));
    assert_eq!(state("SELECT * FROM pg_catalog.pg_class"), Some("0A000"));
    assert!(run(&db, "CREATE TABLE u (k BIGINT PRIMARY KEY)").is_ok());
    assert!(run(&db, "INSERT INTO u VALUES (1)").is_ok());
    assert_eq!(state("INSERT INTO u VALUES (1)"), Some("23505"));
    assert_eq!(state("SELECT nope FROM u"), Some("42703"));
    assert_eq!(
        state("CREATE TABLE u (k BIGINT PRIMARY KEY)"),
        Some("42P07")
    );
    assert_eq!(state("SELECT 1 / 0"), Some("22012"));
    assert_eq!(state("SELECT a FROM u JOIN u AS v ON true"), Some("0A000"));
    // Numbers that do not fit: arithmetic, a literal, a 20-digit value for a BIGINT column.
    assert_eq!(state("SELECT 9223372036854775807 + 1"), Some("22003"));
    assert_eq!(state("SELECT 1e400"), Some("22003"));
    assert_eq!(
        state("INSERT INTO u VALUES (99999999999999999999)"),
        Some("22003")
    );
    // Not a number's range, the wrong type: a data exception.
    assert_eq!(state("INSERT INTO u VALUES (1.5)"), Some("22000"));
    assert!(
        run(
            &db,
            "CREATE TABLE n (k BIGINT PRIMARY KEY, v TEXT NOT NULL)"
        )
        .is_ok()
    );
    assert_eq!(state("INSERT INTO n VALUES (1, NULL)"), Some("23502"));
    assert_eq!(state("SELECT x.k FROM u"), Some("42P01"));
    assert_eq!(state("CREATE INDEX i ON u (nope)"), Some("42703"));
    assert_eq!(state("DROP INDEX nope"), Some("42704"));
    assert!(run(&db, "CREATE INDEX i ON n (v)").is_ok());
    assert_eq!(state("CREATE INDEX i ON n (v)"), Some("42P07"));
    // Planning errors that are not a missing or taken name: a datatype mismatch.
    assert_eq!(state("SELECT k FROM u WHERE k = 'a'"), Some("42804"));
    // A position that is not in the select list is an invalid column reference, as in
    // PostgreSQL, not a number out of range (it was 22003 while codes were read from the
    // messages); a negative LIMIT or OFFSET is an invalid row count.
    assert_eq!(state("SELECT k FROM u ORDER BY 5"), Some("42P10"));
    assert_eq!(state("SELECT k FROM u GROUP BY 3"), Some("42P10"));
    assert_eq!(state("SELECT k FROM u LIMIT -1"), Some("2201W"));
    assert_eq!(state("SELECT k FROM u OFFSET -1"), Some("2201X"));
}

#[test]
fn only_utf8_client_encodings_are_accepted() -> Result<(), SqlError> {
    let (_dir, _dbs, db) = open();
    for ok in [
        "SET client_encoding TO 'UTF8'",
        "set client_encoding = utf8",
        "SET client_encoding='UNICODE';",
        "SET SESSION client_encoding TO DEFAULT",
        "SET NAMES 'SQL_ASCII'",
        "SET names \"utf-8\"",
    ] {
        assert_eq!(run(&db, ok)?, Outcome::Command("SET".into()), "{ok}");
    }
    for bad in [
        "SET client_encoding TO 'LATIN1'",
        "set client_encoding=win1252",
        "SET LOCAL client_encoding = 'euc_jp'",
        "SET NAMES 'LATIN9'",
    ] {
        let e = run(&db, bad).expect_err(bad);
        assert_eq!(e.sqlstate(), "22023", "{bad}");
        assert!(e.to_string().contains("not supported"), "{e}");
    }
    // Other settings are still accepted as before.
    assert_eq!(
        run(&db, "SET application_name = 'latin1'")?,
        Outcome::Command("SET".into())
    );
    Ok(())
}

#[test]
fn statement_text_with_the_replacement_character_is_refused() {
    assert!(super::check_statement_text("SELECT 'café'").is_ok());
    let e = super::check_statement_text("INSERT INTO t VALUES ('caf\u{fffd}')")
        .expect_err("U+FFFD is what pgwire makes of bytes that are not UTF-8");
    assert_eq!(e.sqlstate(), "22021");
    assert!(e.to_string().contains("near byte 26"), "{e}");
}

#[test]
fn a_database_that_cannot_open_for_want_of_a_resource_gets_the_statements_sqlstate() {
    let open_failed = |errno: i32| {
        SqlError::Server(crate::ServerError::Engine {
            name: "run42".into(),
            source: strata_engine::Error::Io {
                path: "run42/MANIFEST-000001".into(),
                source: std::io::Error::from_raw_os_error(errno),
            },
        })
    };
    // As `QueryError::sqlstate` gives a statement whose engine call fails so.
    assert_eq!(open_failed(28).sqlstate(), "53100", "ENOSPC: disk_full");
    assert_eq!(
        open_failed(24).sqlstate(),
        "53000",
        "EMFILE: insufficient_resources"
    );
    assert_eq!(open_failed(5).sqlstate(), "58000", "EIO: system_error");
}

/// Which statements a PostgreSQL connection runs on its own task: reads of at most
/// `QUICK_KEYS` rows by primary key without LIKE; and a prepared statement runs as `run`
/// runs it.
#[test]
fn quick_statements_are_short_reads_by_key() -> Result<(), SqlError> {
    let (_dir, _dbs, db) = open();
    run(&db, "CREATE TABLE t (k BIGINT PRIMARY KEY, v TEXT)")?;
    run(
        &db,
        "INSERT INTO t VALUES (1, 'one'), (2, 'two'), (3, 'three')",
    )?;
    let quick = |stmt: &str| match prepare(&db, stmt, false) {
        Ok(Prepared::Ready(ready)) => Ok(ready.is_quick()),
        Ok(Prepared::Answered(_)) => Ok(false),
        Err(e) => Err(e),
    };
    let keys = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    assert!(quick("SELECT v FROM t WHERE k = 2")?);
    assert!(quick("SELECT upper(v), k * 2 FROM t WHERE k = 2")?);
    assert!(quick("SELECT 1 + 1")?);
    assert!(quick(&format!(
        "SELECT v FROM t WHERE k IN ({})",
        keys(QUICK_KEYS)
    ))?);
    assert!(!quick(&format!(
        "SELECT v FROM t WHERE k IN ({})",
        keys(QUICK_KEYS + 1)
    ))?);
    assert!(!quick("SELECT v FROM t WHERE k = 2 AND v LIKE '%w%'")?);
    assert!(!quick("SELECT v LIKE 't%' FROM t WHERE k = 2")?);
    assert!(!quick("SELECT v FROM t WHERE k > 1")?);
    assert!(!quick("SELECT count(*) FROM t")?);
    assert!(!quick("INSERT INTO t VALUES (4, 'four')")?);
    assert!(!quick("DELETE FROM t WHERE k = 4")?);
    assert!(!quick("BEGIN")?);
    // The text check RESP's `SQL` uses agrees, and wants one statement.
    assert!(is_quick_text(&db, "SELECT v FROM t WHERE k = 2"));
    assert!(is_quick_text(&db, "SELECT v FROM t WHERE k = 2;"));
    assert!(!is_quick_text(&db, "SELECT v FROM t WHERE k = 2; SELECT 1"));
    assert!(!is_quick_text(&db, "SELECT v FROM t WHERE k > 2"));
    assert!(!is_quick_text(&db, "SET statement_timeout = 5"));
    assert!(!is_quick_text(&db, "SELECT v FROM nope WHERE k = 2"));
    assert!(!is_quick_text(&db, "SELEC v"));
    let long = format!(
        "SELECT v FROM t WHERE k = 2 {}",
        " ".repeat(QUICK_TEXT_BYTES)
    );
    assert!(!is_quick_text(&db, &long));
    // Prepared, then run: the rows `run` gives.
    let Prepared::Ready(ready) = prepare(&db, "SELECT v FROM t WHERE k IN (3, 1)", false)? else {
        panic!("a statement to run");
    };
    let Outcome::Rows { columns, rows } = ready.run(&db, &Interrupt::new())? else {
        panic!("rows");
    };
    assert_eq!(columns, vec![col("v", Some(DataType::Text))]);
    assert_eq!(
        rows,
        vec![
            vec![Value::Text("one".into())],
            vec![Value::Text("three".into())]
        ]
    );
    // A write in a read-only transaction is refused before it runs.
    assert!(matches!(
        prepare(&db, "DELETE FROM t", true),
        Err(SqlError::ReadOnlyTransaction(_))
    ));
    Ok(())
}
