use strata_query::MemStore;

use super::*;

fn db() -> Database<MemStore> {
    Database::new(MemStore::new()).unwrap()
}

/// Feeds `input` line by line like a terminal session; returns (stdout, stderr, had_error).
fn session(db: &Database<MemStore>, input: &str) -> (String, String, bool) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut s = Session::new(db, false);
    for line in input.lines() {
        if s.feed_line(line, &mut out, &mut err) == Control::Quit {
            break;
        }
    }
    s.finish(&mut out, &mut err);
    (
        String::from_utf8(out).unwrap(),
        String::from_utf8(err).unwrap(),
        s.had_error,
    )
}

#[test]
fn statements_may_span_lines_and_run_at_the_semicolon() {
    let db = db();
    let (out, err, failed) = session(
        &db,
        "CREATE TABLE reads (\n  seq TEXT PRIMARY KEY,\n  count BIGINT\n);\nINSERT INTO reads VALUES ('ACGT', 12),\n ('TTGA', 3);\nSELECT * FROM reads\nWHERE count > 10;",
    );
    assert_eq!(err, "");
    assert!(!failed);
    assert_eq!(
        out,
        "OK: CREATE TABLE\n2 rows affected\n\
+------+-------+\n\
| seq  | count |\n\
+==============+\n\
| ACGT |    12 |\n\
+------+-------+\n\
1 row\n"
    );
}

#[test]
fn an_error_does_not_end_the_session() {
    let db = db();
    let (out, err, failed) = session(
        &db,
        "SELEC 1;\nSELECT * FROM nope;\n.bogus\n.tables extra\nCREATE TABLE t (a INT PRIMARY KEY);\nINSERT INTO t VALUES (1);\nINSERT INTO t VALUES (1);\nSELECT count(*) AS n FROM t;",
    );
    assert!(failed);
    assert_eq!(
        err,
        "Error: syntax error: Expected: an SQL statement, found: SELEC at Line: 1, Column: 1\n\
Error: no such table: nope\n\
Error: unknown command .bogus; try .help\n\
Error: bad arguments to .tables; try .help\n\
Error: duplicate primary key (1) in table t\n"
    );
    assert!(out.ends_with("| 1 |\n+---+\n1 row\n"), "{out}");
}

#[test]
fn dot_commands_list_tables_show_schema_and_switch_modes() {
    let db = db();
    let (out, err, _) = session(
        &db,
        "CREATE TABLE b (k TEXT PRIMARY KEY, n BIGINT NOT NULL, x DOUBLE);\nCREATE TABLE a (id INT, v TEXT, PRIMARY KEY (id));\nCREATE INDEX b_n ON b (n);\n.tables\n.schema b\n.mode csv\nINSERT INTO b VALUES ('x,y', 1, NULL), ('plain', 2, 2.5);\nSELECT * FROM b;\n.mode tsv\nSELECT k, n FROM b WHERE n = 2;\n.mode table\n.timer on\n.timer off\n.help\n.quit\nSELECT 1;",
    );
    assert_eq!(err, "");
    let expected = "OK: CREATE TABLE\nOK: CREATE TABLE\nOK: CREATE INDEX\na\nb\n\
CREATE TABLE b (\n  k TEXT,\n  n BIGINT NOT NULL,\n  x DOUBLE,\n  PRIMARY KEY (k)\n);\n\
CREATE INDEX b_n ON b (n);\n\
2 rows affected\n\
k,n,x\nplain,2,2.5\n\"x,y\",1,\n\
k\tn\nplain\t2\n";
    assert!(out.starts_with(expected), "{out}");
    assert!(out.contains(".import FILE TABLE"));
    assert!(!out.contains("| 1 |"), "nothing runs after .quit");
}

#[test]
fn import_loads_a_tsv_file() {
    let db = db();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("reads.tsv");
    std::fs::write(&file, "ACGT\t12\nTTGA\t3\n").unwrap();
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, "ACGT,x\n").unwrap();
    let (out, err, failed) = session(
        &db,
        &format!(
            "CREATE TABLE reads (seq TEXT PRIMARY KEY, count BIGINT);\n.import {} reads\n.import {} reads\n.import /nonexistent/file reads\nSELECT sum(count) FROM reads;",
            file.display(),
            bad.display()
        ),
    );
    assert!(failed);
    assert!(out.contains("imported 2 rows into reads\n"), "{out}");
    assert!(out.contains("| sum |") && out.contains("|  15 |"), "{out}");
    assert!(
        err.contains("bad.csv: line 1: cannot read \"x\" as BIGINT (nothing was imported)"),
        "{err}"
    );
    assert!(err.contains("cannot open /nonexistent/file"), "{err}");
}

#[test]
fn scripts_report_failure_and_run_a_trailing_statement_without_semicolon() {
    let db = db();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let ok = run_script(
        &db,
        "CREATE TABLE t (a INT PRIMARY KEY); INSERT INTO t VALUES (1), (2); SELECT count(*) FROM t",
        &mut out,
        &mut err,
    );
    assert!(ok);
    let out = String::from_utf8(out).unwrap();
    assert!(out.contains("| count |"), "{out}");
    assert!(out.contains("|     2 |"), "{out}");
    let ok = run_script(
        &db,
        "SELECT nope FROM t;\nSELECT 1;",
        &mut Vec::new(),
        &mut err,
    );
    assert!(!ok);
}

#[test]
fn splitting_respects_quotes_and_comments() {
    let (done, rest) = split_statements("SELECT ';'; -- a; comment\nSELECT \"a;b\"; SELECT");
    assert_eq!(done, vec!["SELECT ';'", "-- a; comment\nSELECT \"a;b\""]);
    assert_eq!(rest, " SELECT");
    let (done, rest) = split_statements("-- only a comment;\n");
    assert!(done.is_empty());
    assert_eq!(rest, "");
    // Block comments and dollar-quoted strings hide `;` too.
    let (done, rest) = split_statements(
        "SELECT 1 /* x; */ + 1; /* a; b */ INSERT INTO t VALUES (4, $$a;b$$); SELECT $q$;$q$;",
    );
    assert_eq!(
        done,
        vec![
            "SELECT 1 /* x; */ + 1",
            "/* a; b */ INSERT INTO t VALUES (4, $$a;b$$)",
            "SELECT $q$;$q$",
        ]
    );
    assert_eq!(rest, "");
    let (done, rest) = split_statements("/* only; a comment */;\n");
    assert!(done.is_empty());
    assert_eq!(rest, "");
    // A block comment left open is kept for the next line.
    let (done, rest) = split_statements("SELECT 1; /* open;\n");
    assert_eq!(done, vec!["SELECT 1"]);
    assert_eq!(rest, " /* open;\n");
    let (done, rest) = split_statements(" /* open;\nclosed */ SELECT 2;");
    assert_eq!(done, vec!["/* open;\nclosed */ SELECT 2"]);
    assert_eq!(rest, "");
    // `$1` is not a dollar quote.
    let (done, _) = split_statements("SELECT $1; SELECT 2;");
    assert_eq!(done, vec!["SELECT $1", "SELECT 2"]);
}

#[test]
fn schema_output_quotes_names_so_it_runs_again() {
    let db = db();
    let (_, err, failed) = session(
        &db,
        "CREATE TABLE \"My Table\" (\"Count\" INT PRIMARY KEY, count INT NOT NULL, \"select\" TEXT, \"we\"\"ird\" TEXT, \"key\" TEXT, \"order\" DOUBLE);\n\
         CREATE INDEX \"Idx One\" ON \"My Table\" (\"select\");\n\
         CREATE TABLE plain (id INT PRIMARY KEY, value TEXT);\n",
    );
    assert_eq!((err.as_str(), failed), ("", false));
    let (schema, _, _) = session(&db, ".schema\n");
    assert!(schema.contains("CREATE TABLE \"My Table\" (\n  \"Count\" BIGINT,\n  count BIGINT NOT NULL,\n  \"select\" TEXT,\n  \"we\"\"ird\" TEXT,\n  \"key\" TEXT,\n  \"order\" DOUBLE,\n  PRIMARY KEY (\"Count\")\n);"), "{schema}");
    assert!(
        schema.contains("CREATE INDEX \"Idx One\" ON \"My Table\" (\"select\");"),
        "{schema}"
    );
    assert!(
        schema.contains("CREATE TABLE plain (\n  id BIGINT,\n  value TEXT,"),
        "{schema}"
    );
    // The printed schema, run in a fresh database, prints the same schema.
    let again = self::db();
    let (_, err, failed) = session(&again, &schema);
    assert_eq!((err.as_str(), failed), ("", false));
    assert_eq!(session(&again, ".schema\n").0, schema);
}

#[test]
fn tsv_output_writes_values_as_they_are() {
    let db = db();
    let (out, err, _) = session(
        &db,
        "CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT);\nINSERT INTO t VALUES ('a', 'tab\there');\n.mode tsv\nSELECT k, v FROM t;\n",
    );
    assert_eq!(err, "");
    assert!(out.ends_with("k\tv\na\ttab\there\n"), "{out:?}");
}

#[test]
fn a_read_only_shell_queries_beside_the_writer_and_refuses_writes() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Database::open(dir.path()).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert!(run_script(
        &writer,
        "CREATE TABLE t (a BIGINT PRIMARY KEY, b TEXT); INSERT INTO t VALUES (1, 'x'), (2, 'y');",
        &mut out,
        &mut err,
    ));
    // The writer keeps the database (and its LOCK) open.
    let reader = Database::open_read_only(dir.path()).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    assert!(run_script(
        &reader,
        "SELECT count(*) FROM t WHERE a > 1;",
        &mut out,
        &mut err
    ));
    assert!(String::from_utf8(out).unwrap().contains("|     1 |"));
    // Every writing statement is refused as such, whether it would have failed otherwise
    // (a duplicate key) or changed nothing.
    for write in [
        "INSERT INTO t VALUES (3, 'z');",
        "INSERT INTO t VALUES (1, 'dup');",
        "INSERT OR IGNORE INTO t VALUES (1, 'x');",
        "DELETE FROM t WHERE a = 99;",
        "UPDATE t SET b = 'q' WHERE a = 99;",
        "CREATE TABLE u (a BIGINT PRIMARY KEY);",
        "CREATE TABLE IF NOT EXISTS t (a BIGINT PRIMARY KEY);",
        "DROP TABLE IF EXISTS nope;",
    ] {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        assert!(!run_script(&reader, write, &mut out, &mut err), "{write}");
        let err = String::from_utf8(err).unwrap();
        assert!(err.contains("opened read-only"), "{write}: {err}");
    }
    // `.import` is refused before its file or table is looked at: an empty file, and a table
    // that does not exist.
    let inputs = tempfile::tempdir().unwrap();
    let empty = inputs.path().join("empty.tsv");
    std::fs::write(&empty, "").unwrap();
    for table in ["t", "nope"] {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let script = format!(".import {} {table}\n", empty.display());
        assert!(!run_script(&reader, &script, &mut out, &mut err), "{table}");
        let err = String::from_utf8(err).unwrap();
        assert!(err.contains("opened read-only"), "{table}: {err}");
    }
    // An engine database that never held SQL opens with no tables and is not written.
    let plain = tempfile::tempdir().unwrap();
    strata_engine::Db::open(plain.path(), strata_engine::Options::default())
        .unwrap()
        .close()
        .unwrap();
    let reader = Database::open_read_only(plain.path()).unwrap();
    assert!(reader.catalog().tables.is_empty());
    drop(reader);
    let db = strata_engine::Db::open(plain.path(), strata_engine::Options::default()).unwrap();
    assert_eq!(
        db.range(&strata_engine::ReadOptions::default(), ..).count(),
        0
    );
    db.close().unwrap();
}

/// A large result written piece by piece is the same text as one table of it: the widest
/// cell (here in the last piece, and a wide unicode one) sets every piece's column width.
#[test]
fn a_large_table_streams_in_pieces_with_the_same_output() {
    let columns = vec!["seq".to_owned(), "count".to_owned(), "note".to_owned()];
    let n = TABLE_PIECE_ROWS * 2 + 345;
    let rows: Vec<Vec<Value>> = (0..n)
        .map(|i| {
            vec![
                Value::Text(format!("read{i}")),
                if i % 7 == 0 {
                    Value::Null
                } else {
                    Value::Int(i as i64 * if i == n - 1 { 1_000_000 } else { 1 })
                },
                Value::Text(match i % 500 {
                    0 => "two\nlines".to_owned(),
                    1 => "読み取り".to_owned(),
                    _ => String::new(),
                }),
            ]
        })
        .collect();
    let mut out = Vec::new();
    let written = write_table(&mut out, &columns, &rows, &Interrupt::new()).unwrap();
    assert_eq!(written, n);
    let whole = format!("{}\n", render_table(&columns, &rows));
    assert_eq!(String::from_utf8(out).unwrap(), whole);
    // Set before it starts: nothing is written.
    let interrupt = Interrupt::new();
    interrupt.interrupt();
    let mut out = Vec::new();
    assert_eq!(
        write_table(&mut out, &columns, &rows, &interrupt).unwrap(),
        0
    );
    assert!(out.is_empty());
}

/// An output that sets the session's interrupt (as Ctrl-C would) once it has taken `after`
/// lines, or fails from then on (as a closed pipe does) when `fail` is set.
struct StopAfter {
    text: Vec<u8>,
    after: usize,
    interrupt: Option<Interrupt>,
}

impl Write for StopAfter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.text.iter().filter(|&&b| b == b'\n').count() >= self.after {
            match &self.interrupt {
                Some(i) => i.interrupt(),
                None => return Err(std::io::ErrorKind::BrokenPipe.into()),
            }
        }
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A table of `n` rows `(k, v)`, `k` = 0..n, `v` = `k * 10`.
fn numbers(n: usize) -> Database<MemStore> {
    let db = db();
    db.execute("CREATE TABLE t (k BIGINT PRIMARY KEY, v BIGINT)")
        .unwrap();
    let rows = (0..n as i64)
        .map(|k| vec![Value::Int(k), Value::Int(k * 10)])
        .collect();
    db.insert_values("t", None, rows, strata_query::OnConflict::Error)
        .unwrap();
    db
}

#[test]
fn csv_and_tsv_stream_every_result_set_as_the_table_mode_shows_it() {
    let db = numbers(5_000);
    let (out, err, failed) = session(
        &db,
        ".mode csv\nSELECT k, v FROM t WHERE v >= 49970;\nSELECT k FROM t WHERE k < 0;\nSELECT count(*), max(v) FROM t;\nSELECT k FROM t ORDER BY v DESC LIMIT 2;\nSHOW TABLES;\nINSERT INTO t VALUES (-1, NULL);\nSELECT k, v FROM t WHERE k < 1;\n.mode tsv\nSELECT k, v FROM t LIMIT 2 OFFSET 1;\nSELECT nope FROM t;\n",
    );
    assert!(failed);
    assert_eq!(err, "Error: no column nope in table t\n");
    assert_eq!(
        out,
        "k,v\n4997,49970\n4998,49980\n4999,49990\nk\ncount,max\n5000,49990\nk\n4999\n4998\ntable\nt\n1 row affected\nk,v\n-1,\n0,0\nk\tv\n0\t0\n1\t10\n"
    );
    // Every row of a large scan, in key order.
    let (out, _, failed) = session(&db, ".mode csv\nSELECT k FROM t;\n");
    assert!(!failed);
    let keys: Vec<i64> = out.lines().skip(1).map(|l| l.parse().unwrap()).collect();
    assert_eq!(keys, (-1..5_000).collect::<Vec<_>>());
}

#[test]
fn streamed_output_stops_at_ctrl_c_and_at_a_closed_pipe() {
    let db = numbers(20_000);
    for interrupted in [true, false] {
        let mut s = Session::new(&db, false);
        let mut out = StopAfter {
            text: Vec::new(),
            after: 100,
            interrupt: interrupted.then(|| s.interrupt().clone()),
        };
        let mut err = Vec::new();
        s.feed_line(".mode csv", &mut out, &mut err);
        s.feed_line("SELECT k FROM t; SELECT 1;", &mut out, &mut err);
        let err = String::from_utf8(err).unwrap();
        let lines = out.text.iter().filter(|&&b| b == b'\n').count();
        if interrupted {
            // The scan looks at the flag every 1,024 entries; the output at every row.
            assert!((100..=102).contains(&lines), "{lines} lines");
            assert!(err.starts_with("(output interrupted after "), "{err}");
            assert!(
                err.contains("the 1 statement after it did not run"),
                "{err}"
            );
            assert!(s.had_error);
        } else {
            // The pipe closed: the scan ends there and the next statement runs.
            assert_eq!(lines, 100, "{err}");
            assert_eq!(err, "");
        }
    }
}

/// An output that fails every write with `kind`.
struct Failing(std::io::ErrorKind);

impl Write for Failing {
    fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
        Err(self.0.into())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn an_output_error_is_kept_for_the_exit_status_but_a_closed_pipe_is_not() {
    let db = numbers(10);
    // A full disk: the script still runs, and the error is there to report.
    let mut out = CheckedOutput::new(Failing(std::io::ErrorKind::StorageFull));
    assert!(run_script(
        &db,
        "SELECT * FROM t;",
        &mut out,
        &mut Vec::new()
    ));
    assert_eq!(
        out.error.map(|e| e.kind()),
        Some(std::io::ErrorKind::StorageFull)
    );
    // The reader went away (`| head`): quiet, as with cat.
    let mut out = CheckedOutput::new(Failing(std::io::ErrorKind::BrokenPipe));
    assert!(run_script(
        &db,
        ".mode csv\nSELECT * FROM t;",
        &mut out,
        &mut Vec::new()
    ));
    assert!(out.error.is_none());
}

#[test]
fn dot_command_words_may_be_quoted() {
    let words = dot_arguments(r#".import 'my ''reads''.tsv' "My ""T"" x""#).unwrap();
    let got: Vec<(&str, bool)> = words.iter().map(|w| (w.text.as_str(), w.quoted)).collect();
    assert_eq!(
        got,
        vec![
            (".import", false),
            ("my 'reads'.tsv", false),
            ("My \"T\" x", true)
        ]
    );
    assert!(dot_arguments(".schema \"open").is_err());
    let db = db();
    let (out, err, failed) = session(
        &db,
        "CREATE TABLE \"My T\" (id BIGINT PRIMARY KEY);\nCREATE TABLE low (id BIGINT PRIMARY KEY);\n.schema \"My T\"\n.schema LOW\n.schema \"LOW\"",
    );
    assert!(out.contains("CREATE TABLE \"My T\""), "{out}");
    assert!(out.contains("CREATE TABLE low"), "{out}");
    assert!(failed && err.contains("no such table: LOW"), "{err}");
}

#[test]
fn dot_commands_take_a_trailing_semicolon() {
    let db = db();
    let (out, err, failed) = session(
        &db,
        "CREATE TABLE a (id INT PRIMARY KEY);\n.tables;\n.schema a ;\n.bogus;",
    );
    assert!(failed);
    assert_eq!(err, "Error: unknown command .bogus; try .help\n");
    assert_eq!(
        out,
        "OK: CREATE TABLE\na\nCREATE TABLE a (\n  id BIGINT,\n  PRIMARY KEY (id)\n);\n"
    );
}

#[test]
fn a_line_that_is_not_utf8_fails_its_statement_and_the_rest_run() {
    let db = db();
    let mut input = b"CREATE TABLE t (a INT PRIMARY KEY, b TEXT);\n".to_vec();
    // Line 3 has text of three statements: none of them runs.
    input.extend_from_slice(b"INSERT INTO t VALUES (1,\n");
    input.extend_from_slice(b"'\xff'); INSERT INTO t VALUES (3, 'x'); INSERT INTO t VALUES (5,\n");
    // The one after the third, on a good line, runs.
    input.extend_from_slice(b"'y'); INSERT INTO t VALUES (2, 'ok');\n");
    input.extend_from_slice(b".tables \xfe\n");
    input.extend_from_slice(b"SELECT count(*) AS n FROM t;\n");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let ok = run_lines(&db, input.as_slice(), &mut out, &mut err).unwrap();
    assert!(!ok);
    assert_eq!(
        String::from_utf8(err).unwrap(),
        "Error: line 3 is not valid UTF-8: the statement did not run\n\
         Error: line 3 is not valid UTF-8: the statement did not run\n\
         Error: line 3 is not valid UTF-8: the statement did not run\n\
         Error: line 5 is not valid UTF-8: the command did not run\n"
    );
    let out = String::from_utf8(out).unwrap();
    assert!(
        out.starts_with("OK: CREATE TABLE\n1 row affected\n"),
        "{out}"
    );
    assert!(out.contains("| 1 |"), "{out}");
}

#[test]
fn piped_lines_run_each_statement_before_the_next_line_is_read() {
    use std::io::{BufRead, BufReader, Write};
    let db = db();
    let (input, mut to_shell) = std::io::pipe().unwrap();
    let (from_shell, mut output) = std::io::pipe().unwrap();
    std::thread::scope(|scope| {
        let shell = scope
            .spawn(|| run_lines(&db, BufReader::new(input), &mut output, &mut Vec::new()).unwrap());
        let mut from_shell = BufReader::new(from_shell);
        let mut answer = String::new();
        // The writing end stays open: each answer must come before more input (or EOF).
        writeln!(to_shell, "CREATE TABLE t (a INT PRIMARY KEY);").unwrap();
        from_shell.read_line(&mut answer).unwrap();
        assert_eq!(answer, "OK: CREATE TABLE\n");
        answer.clear();
        writeln!(to_shell, "INSERT INTO t\nVALUES (1), (2);").unwrap();
        from_shell.read_line(&mut answer).unwrap();
        assert_eq!(answer, "2 rows affected\n");
        drop(to_shell);
        assert!(shell.join().unwrap());
    });
}

#[test]
fn control_characters_in_table_cells_are_escaped_and_keep_the_columns_aligned() {
    let columns = vec!["a".to_owned(), "b".to_owned()];
    let rows = vec![
        vec![Value::Text("x\ty\rz\u{1b}".into()), Value::Int(1)],
        vec![Value::Text("plain".into()), Value::Int(2)],
    ];
    let text = render_table(&columns, &rows);
    assert!(text.contains(r"x\ty\rz\u{1b}"), "{text}");
    assert!(!text.contains('\t') && !text.contains('\r'), "{text}");
    let widths: Vec<usize> = text.lines().map(|l| l.chars().count()).collect();
    assert!(widths.windows(2).all(|w| w[0] == w[1]), "{text}");
    // csv/tsv keep values as they are.
    assert_eq!(cell_text(&rows[0][0]), "x\ty\rz\u{1b}");
}

/// CSV output writes a one-column row of NULL or '' as `""`, so CSV readers count it; a wider
/// row's empty fields need nothing, and TSV writes values as they are.
#[test]
fn one_column_csv_rows_of_empty_values_are_not_blank_lines() {
    let db = db();
    let (out, _, failed) = session(
        &db,
        "CREATE TABLE t (id INT PRIMARY KEY, s TEXT);\nINSERT INTO t VALUES (1, 'a'), (2, NULL), (3, ''), (4, 'b');\n.mode csv\nSELECT s FROM t;\nSELECT id, s FROM t WHERE id = 2;\n.mode tsv\nSELECT s FROM t WHERE id = 3;",
    );
    assert!(!failed, "{out}");
    assert!(
        out.contains("s\na\n\"\"\n\"\"\nb\nid,s\n2,\ns\n\n"),
        "{out:?}"
    );
}
