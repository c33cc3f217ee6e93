//! Loading delimited text into a table: what the REPL's `.import FILE table` runs.
//!
//! - TSV (`delimiter = b'\t'`): one record per line, fields split on tabs, no quoting.
//! - CSV (any other delimiter): RFC 4180 quoting: a field in double quotes may hold the
//!   delimiter, newlines and `""` (one quote).
//!
//! Fields are read as the column's type: BIGINT and DOUBLE parse as numbers, BOOLEAN accepts
//! `true/false/t/f/1/0`, TEXT and BLOB take the bytes as they are. An empty field is NULL,
//! except in a TEXT column where it is the empty string. A first record whose fields are
//! exactly the column names is a header and is skipped.
//!
//! An import is atomic: on an error (reported with its line) or an interrupt nothing of it is
//! written. Up to [`IMPORT_BATCH_ROWS`] rows are inserted as one batch, as one INSERT of them
//! would be; a longer input becomes one bulk insert ([`Database::bulk_insert`]): the rows are
//! sorted into tables and ingested, written once instead of through the WAL, the memtable and
//! compactions (the 2.8 million genomic reads in 4.9 s instead of 13.1 s; `docs/sql.md`,
//! "Importing"). The bulk insert holds the statement lock, so other writers wait
//! for the import to finish.

use std::io::BufRead;

use crate::ast::OnConflict;
use crate::catalog::TableSchema;
use crate::error::{QueryError, Result};
use crate::exec::store::KvStore;
use crate::exec::{BulkInsert, Database};
use crate::interrupt::Interrupt;
use crate::value::{DataType, Value};

/// Rows an import inserts as one batch; a longer input becomes a bulk insert. Also how often
/// it reports progress and looks at its interrupt flag.
pub const IMPORT_BATCH_ROWS: usize = 10_000;

/// Progress of an import, passed to the callback every [`IMPORT_BATCH_ROWS`] rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// Bytes of input consumed.
    pub bytes: u64,
    /// Rows read (written at the end, all together).
    pub rows: u64,
}

fn field_value(col: DataType, field: &str, line: u64) -> Result<Value> {
    if field.is_empty() && col != DataType::Text {
        return Ok(Value::Null);
    }
    let bad = || QueryError::Import {
        line,
        message: format!("cannot read {field:?} as {col}"),
    };
    Ok(match col {
        DataType::Text => Value::Text(field.to_owned()),
        DataType::Blob => Value::Blob(field.as_bytes().to_vec()),
        DataType::BigInt => Value::Int(field.trim().parse().map_err(|_| bad())?),
        DataType::Double => {
            let d: f64 = field.trim().parse().map_err(|_| bad())?;
            if d.is_infinite() {
                // As a SQL literal beyond the largest double: no statement stores an infinity.
                return Err(QueryError::Import {
                    line,
                    message: format!("{field:?} is beyond the largest DOUBLE"),
                });
            }
            Value::Double(d)
        }
        DataType::Boolean => match field.trim().to_ascii_lowercase().as_str() {
            "true" | "t" | "1" => Value::Bool(true),
            "false" | "f" | "0" => Value::Bool(false),
            _ => return Err(bad()),
        },
    })
}

/// Splits one CSV record starting with `line` (without its line end, which was `ending`),
/// reading more lines from `input` while a quoted field is open; a quoted field keeps the line
/// ends inside it as they were (`\r\n` or `\n`). Returns the fields and the extra bytes and
/// lines consumed.
fn csv_record<R: BufRead>(
    line: &str,
    ending: &str,
    delimiter: char,
    input: &mut R,
    line_no: u64,
) -> Result<(Vec<String>, u64, u64)> {
    let mut fields = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut text = line.to_owned();
    let mut ending = ending.to_owned();
    let (mut extra_bytes, mut extra_lines) = (0u64, 0u64);
    loop {
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if quoted {
                if c == '"' {
                    if chars.peek() == Some(&'"') {
                        field.push('"');
                        chars.next();
                    } else {
                        quoted = false;
                    }
                } else {
                    field.push(c);
                }
            } else if c == '"' && field.is_empty() {
                quoted = true;
            } else if c == delimiter {
                fields.push(std::mem::take(&mut field));
            } else {
                field.push(c);
            }
        }
        if !quoted {
            fields.push(field);
            return Ok((fields, extra_bytes, extra_lines));
        }
        field.push_str(&ending);
        text.clear();
        let n = input.read_line(&mut text)?;
        if n == 0 {
            return Err(QueryError::Import {
                line: line_no,
                message: "unterminated quoted field".to_owned(),
            });
        }
        extra_bytes += n as u64;
        extra_lines += 1;
        split_line_end(&mut text, &mut ending);
    }
}

/// Reads `input` as delimited text and inserts it into `table`, atomically (see the module
/// docs), calling `progress` every [`IMPORT_BATCH_ROWS`] rows and at the end. Returns the
/// number of rows inserted. Once `interrupt` is set the import stops within
/// [`IMPORT_BATCH_ROWS`] rows, having written nothing.
///
/// # Errors
/// [`QueryError::Import`] (with the line number) for a record of the wrong width, a field
/// that does not fit its column, an INSERT error (duplicate key, NOT NULL, key size), and an
/// interrupt; [`QueryError::DuplicateInput`] for a primary key given twice in a long input
/// (with the line by which the sort found it, or none when it was found at the end);
/// [`QueryError::Io`] when reading fails; [`QueryError::NoSuchTable`] for an unknown table.
/// Nothing is written on any of them.
pub fn import<S: KvStore, R: BufRead>(
    db: &Database<S>,
    table: &str,
    mut input: R,
    delimiter: u8,
    interrupt: &Interrupt,
    mut progress: impl FnMut(Progress),
) -> Result<u64> {
    let schema: std::sync::Arc<TableSchema> = crate::plan::table(&db.catalog(), table)?;
    let delimiter = char::from(delimiter);
    let mut done = Progress::default();
    // The first rows, with their lines, until they fill a batch; then the bulk insert.
    let mut batch: Vec<(u64, Vec<Value>)> = Vec::with_capacity(IMPORT_BATCH_ROWS);
    let mut bulk: Option<BulkInsert<'_, S>> = None;
    let mut line = String::new();
    let mut ending = String::new();
    let mut line_no = 0u64;
    // Whether a record was read (blank lines before the header are not records).
    let mut seen_record = false;
    loop {
        line.clear();
        let n = match input.read_line(&mut line) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(QueryError::Import {
                    line: line_no + 1,
                    message: "the line is not valid UTF-8".to_owned(),
                });
            }
            Err(e) => return Err(e.into()),
        };
        if n == 0 {
            break;
        }
        line_no += 1;
        done.bytes += n as u64;
        if line_no == 1 && line.starts_with('\u{feff}') {
            // A byte-order mark, as spreadsheet programs write before the header.
            line.drain(..'\u{feff}'.len_utf8());
        }
        split_line_end(&mut line, &mut ending);
        if line.is_empty() {
            continue;
        }
        let record_line = line_no;
        let owned: Vec<String>;
        let fields: Vec<&str> = if delimiter == '\t' {
            line.split('\t').collect()
        } else {
            let (f, b, l) = csv_record(&line, &ending, delimiter, &mut input, line_no)?;
            done.bytes += b;
            line_no += l;
            owned = f;
            owned.iter().map(String::as_str).collect()
        };
        let first_record = !std::mem::replace(&mut seen_record, true);
        if first_record
            && fields.len() == schema.columns.len()
            && fields
                .iter()
                .zip(&schema.columns)
                .all(|(f, c)| f.trim().eq_ignore_ascii_case(&c.name))
        {
            continue;
        }
        if fields.len() != schema.columns.len() {
            return Err(QueryError::Import {
                line: record_line,
                message: format!(
                    "{} field{}, but table {} has {} column{}",
                    fields.len(),
                    if fields.len() == 1 { "" } else { "s" },
                    schema.name,
                    schema.columns.len(),
                    if schema.columns.len() == 1 { "" } else { "s" }
                ),
            });
        }
        let row = fields
            .iter()
            .zip(&schema.columns)
            .map(|(f, c)| field_value(c.ty, f, record_line))
            .collect::<Result<Vec<_>>>()?;
        done.rows += 1;
        if bulk.is_none() && batch.len() == IMPORT_BATCH_ROWS {
            // A row past one batch: the import becomes a bulk insert.
            let mut b = db.bulk_insert(table)?;
            for (line, row) in batch.drain(..) {
                b.add(row).map_err(|e| at_line(line, e))?;
            }
            bulk = Some(b);
        }
        match &mut bulk {
            Some(b) => b.add(row).map_err(|e| at_line(record_line, e))?,
            None => batch.push((record_line, row)),
        }
        if done.rows % IMPORT_BATCH_ROWS as u64 == 0 {
            stop_if_interrupted(interrupt, record_line)?;
            progress(done);
        }
    }
    // Sorting and ingesting take a while too: the last moment to stop with nothing written.
    stop_if_interrupted(interrupt, line_no)?;
    let rows = match bulk {
        Some(b) => b.finish()?,
        None => {
            let lines: Vec<u64> = batch.iter().map(|(line, _)| *line).collect();
            let rows = batch.into_iter().map(|(_, row)| row).collect::<Vec<_>>();
            let mut failed = None;
            db.insert_rows_noting(table, None, rows, OnConflict::Error, &mut failed)
                .map_err(|e| match failed.and_then(|n| lines.get(n)) {
                    Some(&line) => at_line(line, e),
                    None => e,
                })?
        }
    };
    progress(done);
    Ok(rows)
}

/// Moves the line end (`\n`, `\r\n`, any `\r`s before it) from the end of `line` to
/// `ending`.
fn split_line_end(line: &mut String, ending: &mut String) {
    let content = line.trim_end_matches(['\n', '\r']).len();
    ending.clear();
    ending.push_str(line.get(content..).unwrap_or_default());
    line.truncate(content);
}

/// An error of the record on `line`; a primary key given twice, which the sort finds some
/// rows later, says it was found by `line`.
fn at_line(line: u64, e: QueryError) -> QueryError {
    match e {
        QueryError::DuplicateInput { table, key, .. } => QueryError::DuplicateInput {
            table,
            key,
            by_line: Some(line),
        },
        e => QueryError::Import {
            line,
            message: e.to_string(),
        },
    }
}

/// The import's error for an interrupt noticed at `line`.
fn stop_if_interrupted(interrupt: &Interrupt, line: u64) -> Result<()> {
    if interrupt.is_set() {
        return Err(QueryError::Import {
            line,
            message: "interrupted; nothing was imported".to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemStore, Output};

    /// Imports `input` into table `t`, not interrupted and without progress.
    fn import_into_t(db: &Database<MemStore>, input: &[u8], delimiter: u8) -> Result<u64> {
        import(db, "t", input, delimiter, &Interrupt::new(), |_| {})
    }

    fn db() -> Database<MemStore> {
        let db = Database::new(MemStore::new()).unwrap();
        db.execute("CREATE TABLE t (name TEXT PRIMARY KEY, n BIGINT, x DOUBLE, ok BOOLEAN)")
            .unwrap();
        db
    }

    fn rows(db: &Database<MemStore>) -> Vec<Vec<Value>> {
        match db.execute("SELECT * FROM t").unwrap().remove(0) {
            Output::Rows { rows, .. } => rows,
            o => panic!("{o:?}"),
        }
    }

    #[test]
    fn csv_import_handles_quotes_headers_and_nulls() {
        let db = db();
        let text = "name,n,x,ok\n\"a,b\",1,1.5,true\n\"say \"\"hi\"\"\nthere\",,2,f\n";
        let mut seen = Vec::new();
        let n = import(&db, "t", text.as_bytes(), b',', &Interrupt::new(), |p| {
            seen.push(p)
        })
        .unwrap();
        assert_eq!(n, 2);
        assert_eq!(seen.last().unwrap().bytes, text.len() as u64);
        assert_eq!(
            rows(&db),
            vec![
                vec![
                    Value::Text("a,b".into()),
                    Value::Int(1),
                    Value::Double(1.5),
                    Value::Bool(true)
                ],
                vec![
                    Value::Text("say \"hi\"\nthere".into()),
                    Value::Null,
                    Value::Double(2.0),
                    Value::Bool(false)
                ],
            ]
        );
    }

    #[test]
    fn tsv_import_reports_the_bad_line() {
        let db = db();
        let text = "a\t1\t1\t1\nb\tx\t1\t1\n";
        let e = import_into_t(&db, text.as_bytes(), b'\t').unwrap_err();
        assert_eq!(e.to_string(), "line 2: cannot read \"x\" as BIGINT");
        let e = import_into_t(&db, "c\t1\n".as_bytes(), b'\t').unwrap_err();
        assert_eq!(e.to_string(), "line 1: 2 fields, but table t has 4 columns");
        let e = import_into_t(&db, "a\t1\t1\t1\na\t2\t2\t0\n".as_bytes(), b'\t').unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 2: duplicate primary key ('a') in table t"
        );
        let e = import_into_t(&db, "a\t1\tinf\t1\n".as_bytes(), b'\t').unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1: \"inf\" is beyond the largest DOUBLE"
        );
        let e = import_into_t(&db, "a\n".as_bytes(), b'\t').unwrap_err();
        assert_eq!(e.to_string(), "line 1: 1 field, but table t has 4 columns");
        // A key over the engine's limit in a short input: the line of its record.
        let long = "k".repeat(strata_engine::MAX_KEY_SIZE);
        let text = format!("a\t1\t1\t1\n{long}\t1\t1\t1\n");
        let e = import_into_t(&db, text.as_bytes(), b'\t').unwrap_err();
        assert!(
            e.to_string()
                .starts_with("line 2: the primary key of a row of t is"),
            "{e}"
        );
        let bad: &[u8] = b"a\t1\t1\t1\n\xff\xfe\t1\t1\t1\n";
        let e = import_into_t(&db, bad, b'\t').unwrap_err();
        assert_eq!(e.to_string(), "line 2: the line is not valid UTF-8");
    }

    /// `n` TSV lines `r{i}\t{i}\t0.5\ttrue` for `i` in `range`.
    fn lines(range: std::ops::Range<usize>) -> String {
        range.map(|i| format!("r{i}\t{i}\t0.5\ttrue\n")).collect()
    }

    #[test]
    fn an_interrupt_stops_the_import_with_nothing_written() {
        let db = db();
        let text = lines(0..25_000);
        let interrupt = Interrupt::new();
        let e = import(&db, "t", text.as_bytes(), b'\t', &interrupt, |p| {
            assert_eq!(p.rows, 10_000, "one report, then the interrupt");
            interrupt.interrupt();
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 20000: interrupted; nothing was imported"
        );
        assert!(rows(&db).is_empty());
        // Set before the first row, and with a short input: nothing is imported either.
        let e = import(
            &db,
            "t",
            "x\t1\t1\t1\n".as_bytes(),
            b'\t',
            &interrupt,
            |_| {},
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "line 1: interrupted; nothing was imported");
        assert!(rows(&db).is_empty());
        // The statement lock was released: the table takes writes.
        interrupt.clear();
        assert_eq!(import_into_t(&db, text.as_bytes(), b'\t').unwrap(), 25_000);
    }

    /// A long input is one bulk insert: all of it with its index entries, or nothing.
    #[test]
    fn a_long_import_is_one_bulk_insert_checked_as_insert() {
        let db = db();
        db.execute("CREATE INDEX t_n ON t (n)").unwrap();
        assert_eq!(
            import_into_t(&db, lines(0..15_000).as_bytes(), b'\t').unwrap(),
            15_000
        );
        let count = |sql: &str| match db.execute(sql).unwrap().remove(0) {
            Output::Rows { rows, .. } => rows[0][0].clone(),
            o => panic!("{o:?}"),
        };
        assert_eq!(count("SELECT count(*) FROM t"), Value::Int(15_000));
        // Through the index, which the import filled.
        assert_eq!(
            count("SELECT count(*) FROM t WHERE n >= 14000"),
            Value::Int(1_000)
        );

        // A key the table holds: the line of the record; nothing of the file is written.
        let mut text = lines(20_000..32_000);
        text.push_str("r7\t7\t0.5\ttrue\n");
        let e = import_into_t(&db, text.as_bytes(), b'\t').unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 12001: duplicate primary key ('r7') in table t"
        );
        // A bad field after the switch to the bulk insert.
        let mut text = lines(20_000..32_000);
        text.push_str("z\tx\t0.5\ttrue\n");
        let e = import_into_t(&db, text.as_bytes(), b'\t').unwrap_err();
        assert_eq!(e.to_string(), "line 12001: cannot read \"x\" as BIGINT");
        // A key the table holds among the first (buffered) rows.
        let mut text = lines(40_000..40_005);
        text.push_str("r9\t1\t1\t1\n");
        text.push_str(&lines(40_005..52_000));
        let e = import_into_t(&db, text.as_bytes(), b'\t').unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 6: duplicate primary key ('r9') in table t"
        );
        assert_eq!(count("SELECT count(*) FROM t"), Value::Int(15_000));

        // A key twice in the input, in a table that was empty: found by the bulk write.
        let db2 = self::db();
        let mut text = lines(0..12_000);
        text.push_str("r3\t3\t0.5\ttrue\n");
        let e = import_into_t(&db2, text.as_bytes(), b'\t').unwrap_err();
        assert_eq!(
            e.to_string(),
            "primary key ('r3') is given twice to the bulk insert into t (both copies are on \
             line 12001 or before it)"
        );
        assert!(rows(&db2).is_empty());
        // Exactly one batch of rows is one INSERT: its duplicate is named at its line.
        let mut text = lines(0..9_999);
        text.push_str("r3\t3\t0.5\ttrue\n");
        let e = import_into_t(&db2, text.as_bytes(), b'\t').unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 10000: duplicate primary key ('r3') in table t"
        );
    }

    /// A quoted CSV field keeps the line ends inside it as the file has them.
    #[test]
    fn quoted_csv_fields_keep_their_line_ends() {
        let db = db();
        let text = "name,n,x,ok\r\n\"a\r\nb\",1,1,t\r\n\"c\nd\",2,2,f\n";
        assert_eq!(import_into_t(&db, text.as_bytes(), b',').unwrap(), 2);
        let names: Vec<Value> = rows(&db).into_iter().map(|r| r[0].clone()).collect();
        assert_eq!(
            names,
            vec![Value::Text("a\r\nb".into()), Value::Text("c\nd".into())]
        );
    }

    #[test]
    fn a_byte_order_mark_before_the_header_is_skipped() {
        let db = db();
        let mut text = "\u{feff}".to_owned();
        text.push_str(&header_of(&db));
        text.push_str("a\t1\t1\t1\n");
        assert_eq!(import_into_t(&db, text.as_bytes(), b'\t').unwrap(), 1);
    }

    #[test]
    fn a_header_after_blank_lines_is_skipped() {
        let db = db();
        let mut text = "\n\r\n".to_owned();
        text.push_str(&header_of(&db));
        text.push_str("a\t1\t1\t1\n");
        assert_eq!(import_into_t(&db, text.as_bytes(), b'\t').unwrap(), 1);
    }

    /// The tab-separated header line of table `t`.
    fn header_of(db: &Database<MemStore>) -> String {
        let t = crate::plan::table(&db.catalog(), "t").unwrap();
        let names: Vec<&str> = t.columns.iter().map(|c| c.name.as_str()).collect();
        format!("{}\n", names.join("\t"))
    }
}
