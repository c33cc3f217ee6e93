//! `strata repl`: an interactive SQL shell over `strata-query` (`docs/sql.md`, "The shell").
//!
//! Three ways in:
//! - interactive (stdin is a terminal): line editing and history (rustyline), statements may
//!   span lines and end with `;`, `.commands` at the start of a line;
//! - `-c "SQL"`: run the statements and exit;
//! - piped stdin: read line by line, each statement run (and its output flushed) as soon as
//!   its `;` has been read ([`run_lines`]).
//!
//! An error is printed (to stderr) and the session goes on; in the non-interactive modes the
//! exit status is 1 when any statement failed. In the interactive shell Ctrl-C stops the
//! running statement (it changes nothing, see [`strata_query::interrupt`]), an `.import`
//! (which then imports nothing), or the printing of rows, and the session goes on; a second Ctrl-C before
//! the first took effect quits. In the other modes Ctrl-C ends the process (a statement is
//! one write batch, so nothing is half applied either way). The history file is
//! `$STRATA_HISTORY`, else `$HOME/.strata_history`; without either there is no history file.

use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context;
use comfy_table::{CellAlignment, ColumnConstraint, Table, Width, presets};
use strata_query::{Database, Interrupt, KvStore, Output, RowSink, Value, import};

const HELP: &str = "\
Statements end with ';' and may span lines. Commands:
  .tables                 list the tables
  .schema [TABLE]         show CREATE statements (a \"Quoted\" name as SQL reads it)
  .timer on|off           show the time each statement takes
  .mode table|csv|tsv     output format
  .import FILE TABLE      load CSV (.csv) or TSV (.tsv, .tab; else by .mode) into TABLE
  .help                   this text
  .quit                   leave (also .exit, Ctrl-D)
SQL reference: docs/sql.md";

/// Output format of result sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Aligned table with a row count.
    Table,
    /// Comma-separated values with a header line.
    Csv,
    /// Tab-separated values with a header line.
    Tsv,
}

/// What the caller should do after a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Control {
    /// Read the next line.
    Continue,
    /// `.quit` was given.
    Quit,
}

/// One shell session: settings, the partial statement being typed, and whether any
/// statement failed.
pub struct Session<'a, S: KvStore> {
    db: &'a Database<S>,
    mode: Mode,
    timer: bool,
    /// The statement being typed, and where a `;` ends it.
    splitter: Splitter,
    /// Number of the first input line of the pending statement that was not UTF-8
    /// ([`Session::feed_bytes`]): that statement is refused instead of run.
    not_utf8: Option<usize>,
    /// Set by Ctrl-C (the interactive shell's SIGINT handler): stops the running statement,
    /// the rest of the line's statements, an `.import` and the printing of rows.
    interrupt: Interrupt,
    /// True once any statement or command failed.
    pub had_error: bool,
}

impl<'a, S: KvStore> Session<'a, S> {
    /// A session on `db`; `timer` sets whether elapsed times are shown.
    pub fn new(db: &'a Database<S>, timer: bool) -> Self {
        Session {
            db,
            mode: Mode::Table,
            timer,
            splitter: Splitter::new(),
            not_utf8: None,
            interrupt: Interrupt::new(),
            had_error: false,
        }
    }

    /// The flag that stops this session's running statement; see [`Interrupt`].
    pub fn interrupt(&self) -> &Interrupt {
        &self.interrupt
    }

    /// True while a statement is incomplete (no `;` yet).
    pub fn in_statement(&self) -> bool {
        self.splitter.in_statement()
    }

    /// Handles one input line (without its line break): a dot command (at the start of a
    /// statement; a trailing `;` is allowed), or SQL that is run as soon as a statement is
    /// complete. Only the new line is scanned for the `;` ([`Splitter`]), so a statement of
    /// many lines costs time linear in its length. Output is flushed after each statement.
    pub fn feed_line(&mut self, line: &str, out: &mut dyn Write, err: &mut dyn Write) -> Control {
        self.feed(line, None, out, err)
    }

    /// [`Session::feed_line`], for a line that was not UTF-8 (`bad_line`, its number) too.
    fn feed(
        &mut self,
        line: &str,
        bad_line: Option<usize>,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Control {
        // A Ctrl-C from before this line (while rows were printed) is spent.
        self.interrupt.clear();
        if let Some(n) = bad_line {
            self.not_utf8.get_or_insert(n);
        }
        if !self.in_statement() && line.trim_start().starts_with('.') {
            if let Some(n) = self.not_utf8.take() {
                self.fail(
                    err,
                    format!("line {n} is not valid UTF-8: the command did not run"),
                );
                return Control::Continue;
            }
            // `.tables;` is `.tables`: a `;` out of habit does not become part of the command.
            let line = line.trim();
            let line = line.strip_suffix(';').map_or(line, str::trim_end);
            let control = self.command(line, out, err);
            let _ = out.flush();
            return control;
        }
        let complete = self.splitter.push(&format!("{line}\n"));
        let total = complete.len();
        for (i, stmt) in complete.into_iter().enumerate() {
            if self.interrupt.is_set() {
                // Ctrl-C during a statement of this line: the ones after it do not run.
                let left = total - i;
                let what = if left == 1 { "statement" } else { "statements" };
                self.fail(
                    err,
                    format!("interrupted: the {left} {what} after it did not run"),
                );
                break;
            }
            self.run_checked(&stmt, out, err);
            if bad_line.is_none() {
                // Only the first statement ended here had text on an earlier, bad line.
                self.not_utf8 = None;
            }
        }
        if !self.in_statement() {
            self.not_utf8 = None;
        }
        Control::Continue
    }

    /// [`Session::feed_line`] for a line read as bytes (piped stdin), numbered `number` from 1
    /// for error messages. A line that is not UTF-8 is an error for every statement with text
    /// on it, and for a dot command on it: those are reported (`line N is not valid UTF-8`)
    /// and not run; the statements after them run as usual.
    pub fn feed_bytes(
        &mut self,
        line: &[u8],
        number: usize,
        out: &mut dyn Write,
        err: &mut dyn Write,
    ) -> Control {
        match std::str::from_utf8(line) {
            Ok(text) => self.feed(text, None, out, err),
            // Split as the parser would lex it: an invalid byte reads as a letter.
            Err(_) => self.feed(&String::from_utf8_lossy(line), Some(number), out, err),
        }
    }

    /// Runs `sql` unless a line of it was not UTF-8, then flushes `out`.
    fn run_checked(&mut self, sql: &str, out: &mut dyn Write, err: &mut dyn Write) {
        if let Some(n) = self.not_utf8 {
            self.fail(
                err,
                format!("line {n} is not valid UTF-8: the statement did not run"),
            );
        } else {
            self.run_sql(sql, out, err);
        }
        let _ = out.flush();
    }

    /// Runs whatever is left of a statement (input ended without a final `;`).
    pub fn finish(&mut self, out: &mut dyn Write, err: &mut dyn Write) {
        if let Some(rest) = self.splitter.take_rest() {
            self.run_checked(&rest, out, err);
        }
        self.not_utf8 = None;
    }

    /// Clears a partial statement (Ctrl-C).
    pub fn clear(&mut self) {
        self.splitter.clear();
        self.not_utf8 = None;
    }

    fn fail(&mut self, err: &mut dyn Write, msg: impl std::fmt::Display) {
        self.had_error = true;
        let _ = writeln!(err, "Error: {msg}");
    }

    fn run_sql(&mut self, sql: &str, out: &mut dyn Write, err: &mut dyn Write) {
        if self.mode != Mode::Table {
            return self.stream_sql(sql, out, err);
        }
        let start = Instant::now();
        let mut outputs = Vec::new();
        let result = self
            .db
            .execute_each_with(sql, &self.interrupt, |o| outputs.push(o));
        let elapsed = start.elapsed();
        // Ctrl-C during a step that does not look at the flag (sorting the rows, writing the
        // statement's batch) did not stop the statement.
        let too_late = result.is_ok() && self.interrupt.is_set();
        for o in outputs {
            self.print(&o, elapsed, out);
        }
        if let Err(e) = result {
            self.fail(err, e);
        } else if too_late {
            too_late_note(err, "statement");
        }
    }

    /// `.mode csv` and `.mode tsv`: each statement's rows are written as the statement
    /// produces them ([`Database::run_streaming`]), so exporting a table larger than memory
    /// works, and the first rows appear at once. Ctrl-C stops the statement and the output;
    /// so does an output that went away (`| head`).
    fn stream_sql(&mut self, sql: &str, out: &mut dyn Write, err: &mut dyn Write) {
        let statements = match self.db.statements(sql) {
            Ok(s) => s,
            Err(e) => return self.fail(err, e),
        };
        let sep = if self.mode == Mode::Csv { ',' } else { '\t' };
        for stmt in statements.iter() {
            let start = Instant::now();
            let mut sink = DelimitedSink {
                out: &mut *out,
                sep,
                interrupt: &self.interrupt,
                written: 0,
                output_stopped: false,
            };
            let result = self.db.run_streaming(stmt, &self.interrupt, &mut sink);
            let (written, output_stopped) = (sink.written, sink.output_stopped);
            let _ = out.flush();
            match result {
                Ok(Some(o)) => self.print(&o, start.elapsed(), out),
                Ok(None) if output_stopped => {
                    let _ = writeln!(err, "(output interrupted after {written} rows)");
                    return;
                }
                Ok(None) => {}
                Err(e) => {
                    if matches!(e, strata_query::QueryError::Interrupted) && written > 0 {
                        let _ = writeln!(err, "(output interrupted after {written} rows)");
                    }
                    return self.fail(err, e);
                }
            }
        }
        if self.interrupt.is_set() {
            too_late_note(err, "statement");
        }
    }

    fn footer(&self, text: &str, elapsed: Duration) -> String {
        if self.timer {
            format!("{text} ({:.3} ms)", elapsed.as_secs_f64() * 1000.0)
        } else {
            text.to_owned()
        }
    }

    fn print(&self, o: &Output, elapsed: Duration, out: &mut dyn Write) {
        let _ = match o {
            Output::Rows { columns, rows } => {
                let n = rows.len();
                let written = write_table(out, columns, rows, &self.interrupt).unwrap_or(n);
                if written < n {
                    let _ = out.flush();
                    eprintln!("(output interrupted after {written} of {n} rows)");
                    return;
                }
                let text = format!("{n} row{}", if n == 1 { "" } else { "s" });
                writeln!(out, "{}", self.footer(&text, elapsed))
            }
            Output::Affected(n) => {
                let text = format!("{n} row{} affected", if *n == 1 { "" } else { "s" });
                writeln!(out, "{}", self.footer(&text, elapsed))
            }
            Output::Done(what) => writeln!(out, "{}", self.footer(&format!("OK: {what}"), elapsed)),
        };
    }

    fn command(&mut self, line: &str, out: &mut dyn Write, err: &mut dyn Write) -> Control {
        let words = match dot_arguments(line) {
            Ok(words) => words,
            Err(e) => {
                self.fail(err, e);
                return Control::Continue;
            }
        };
        let cmd = words.first().map_or("", |w| w.text.as_str());
        let args: Vec<&str> = words.iter().skip(1).map(|w| w.text.as_str()).collect();
        // A table name as SQL reads it: folded to lower case unless double-quoted.
        let table_name = |i: usize| {
            words.get(i).map(|w| {
                if w.quoted {
                    w.text.clone()
                } else {
                    w.text.to_lowercase()
                }
            })
        };
        match (cmd, args.as_slice()) {
            (".quit" | ".exit", []) => return Control::Quit,
            (".help", []) => {
                let _ = writeln!(out, "{HELP}");
            }
            (".tables", []) => {
                for name in self.db.catalog().tables.keys() {
                    let _ = writeln!(out, "{name}");
                }
            }
            (".schema", names) if names.len() <= 1 => {
                let catalog = self.db.catalog();
                let tables: Vec<_> = match names.first() {
                    Some(n) => match table_name(1)
                        .and_then(|name| catalog.table(&name))
                        .or(catalog.table(n))
                    {
                        Some(t) => vec![t.clone()],
                        None => {
                            self.fail(err, format!("no such table: {n}"));
                            return Control::Continue;
                        }
                    },
                    None => catalog.tables.values().cloned().collect(),
                };
                for t in tables {
                    let _ = writeln!(out, "{}", strata_query::schema_sql(&t));
                }
            }
            (".timer", ["on"]) => self.timer = true,
            (".timer", ["off"]) => self.timer = false,
            (".mode", ["table"]) => self.mode = Mode::Table,
            (".mode", ["csv"]) => self.mode = Mode::Csv,
            (".mode", ["tsv"]) => self.mode = Mode::Tsv,
            (".import", [file, _]) => {
                let table = table_name(2).unwrap_or_default();
                self.import(Path::new(file), &table, out, err);
            }
            (
                ".timer" | ".mode" | ".import" | ".schema" | ".tables" | ".help" | ".quit"
                | ".exit",
                _,
            ) => {
                self.fail(err, format!("bad arguments to {cmd}; try .help"));
            }
            _ => self.fail(err, format!("unknown command {cmd}; try .help")),
        }
        Control::Continue
    }

    /// `.import FILE TABLE`, `table` already folded as SQL folds names.
    fn import(&mut self, file: &Path, table: &str, out: &mut dyn Write, err: &mut dyn Write) {
        if self.db.is_read_only() {
            // Refused before the file or the table is looked at, as a writing statement is.
            let refusal = strata_query::QueryError::from(strata_engine::Error::ReadOnly);
            return self.fail(err, format!(".import: {refusal}"));
        }
        let ext = file
            .extension()
            .and_then(|e| e.to_str())
            .map(str::to_ascii_lowercase);
        let delimiter = match ext.as_deref() {
            Some("tsv" | "tab") => b'\t',
            Some("csv") => b',',
            _ if self.mode == Mode::Tsv => b'\t',
            _ => b',',
        };
        let f = match std::fs::File::open(file) {
            Ok(f) => f,
            Err(e) => return self.fail(err, format!("cannot open {}: {e}", file.display())),
        };
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let bar = indicatif::ProgressBar::with_draw_target(
            Some(len),
            indicatif::ProgressDrawTarget::stderr(),
        );
        if let Ok(style) = indicatif::ProgressStyle::with_template(
            "{bar:40} {bytes}/{total_bytes} {msg} ({eta} left)",
        ) {
            bar.set_style(style);
        }
        let start = Instant::now();
        let result = import::import(
            self.db,
            table,
            BufReader::new(f),
            delimiter,
            &self.interrupt,
            |p| {
                bar.set_position(p.bytes);
                bar.set_message(format!("{} rows", p.rows));
            },
        );
        bar.finish_and_clear();
        match result {
            Ok(n) => {
                let secs = start.elapsed().as_secs_f64();
                #[expect(clippy::cast_precision_loss, reason = "a rate for display")]
                let rate = if secs > 0.0 { n as f64 / secs } else { 0.0 };
                let text = if self.timer {
                    format!(
                        "imported {n} row{} into {table} in {secs:.2} s ({rate:.0} rows/s)",
                        if n == 1 { "" } else { "s" }
                    )
                } else {
                    format!(
                        "imported {n} row{} into {table}",
                        if n == 1 { "" } else { "s" }
                    )
                };
                let _ = writeln!(out, "{text}");
                if self.interrupt.is_set() {
                    too_late_note(err, "import");
                }
            }
            // An interrupt's error says itself that nothing was imported.
            Err(e) if self.interrupt.is_set() => {
                self.fail(err, format!("{}: {e}", file.display()));
            }
            Err(e) => self.fail(
                err,
                format!("{}: {e} (nothing was imported)", file.display()),
            ),
        }
    }
}

/// Says that a Ctrl-C came while `what` (a statement, an import) was in a step that does not
/// stop, so it completed.
fn too_late_note(err: &mut dyn Write, what: &str) {
    let _ = writeln!(
        err,
        "(Ctrl-C came during a step that does not stop, sorting or committing: the {what} \
         completed)"
    );
}

/// One argument of a dot command.
#[derive(Debug, PartialEq, Eq)]
struct DotArgument {
    text: String,
    /// Written in double quotes: a table name taken as it is, not folded to lower case.
    quoted: bool,
}

/// Splits a dot command into its words, on whitespace. A word in double quotes (a quoted SQL
/// name, `""` for a quote inside) or single quotes (a file name, `''` for a quote inside) may
/// hold spaces, as in SQLite's shell.
///
/// # Errors
/// A quote that is not closed.
fn dot_arguments(line: &str) -> Result<Vec<DotArgument>, String> {
    let mut words = Vec::new();
    let mut chars = line.trim().chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        let mut text = String::new();
        if c == '"' || c == '\'' {
            chars.next();
            loop {
                match chars.next() {
                    Some(q) if q == c && chars.peek() == Some(&c) => {
                        chars.next();
                        text.push(c);
                    }
                    Some(q) if q == c => break,
                    Some(other) => text.push(other),
                    None => return Err(format!("unterminated {c} in: {line}")),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                text.push(c);
                chars.next();
            }
        }
        words.push(DotArgument {
            text,
            quoted: c == '"',
        });
    }
    Ok(words)
}

/// Writes a result set as csv or tsv lines as its rows arrive (`.mode csv|tsv`).
struct DelimitedSink<'a> {
    out: &'a mut dyn Write,
    sep: char,
    interrupt: &'a Interrupt,
    /// Rows written.
    written: u64,
    /// Set when Ctrl-C stopped the output.
    output_stopped: bool,
}

impl RowSink for DelimitedSink<'_> {
    fn columns(&mut self, columns: &[String]) {
        let _ = writeln!(self.out, "{}", delimited_line(columns.iter(), self.sep));
    }

    fn row(&mut self, row: Vec<Value>) -> ControlFlow<()> {
        // The rows of a sort or an aggregate come after the statement's scan, which was the
        // part that looked at the flag.
        if self.interrupt.is_set() {
            self.output_stopped = true;
            return ControlFlow::Break(());
        }
        let line = delimited_line(row.iter().map(cell_text), self.sep);
        if writeln!(self.out, "{line}").is_err() {
            return ControlFlow::Break(());
        }
        self.written += 1;
        ControlFlow::Continue(())
    }
}

/// The text of a value in csv/tsv output: NULL is empty.
fn cell_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        v => v.to_string(),
    }
}

/// One line of csv/tsv output: `cells` as [`delimited`] fields joined by `sep`. In CSV, a
/// line of one empty field is written `""`, as Python's `csv` module writes it: a blank line
/// is no record at all to CSV readers (pandas, `csv`), so one-column rows of NULL or `''`
/// went missing.
fn delimited_line<T: AsRef<str>>(cells: impl Iterator<Item = T>, sep: char) -> String {
    let mut line = String::new();
    let mut fields = 0;
    for c in cells {
        if fields > 0 {
            line.push(sep);
        }
        line.push_str(&delimited(c.as_ref(), sep));
        fields += 1;
    }
    if sep == ',' && fields == 1 && line.is_empty() {
        line.push_str("\"\"");
    }
    line
}

/// A field of csv/tsv output: CSV quotes fields that need it (RFC 4180); TSV writes every
/// value as it is, as sqlite3's `.mode tabs` does (a value holding a tab or a newline makes
/// its line ambiguous; `.mode csv` keeps such values intact).
fn delimited(s: &str, sep: char) -> String {
    if sep == ',' && (s.contains([',', '"', '\n', '\r'])) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Rows rendered at a time by [`write_table`]: a large result streams out piece by piece,
/// instead of being built into one table in memory first (2.8 million rows took 4.6 GB and
/// 16 s that way, and could not be interrupted).
const TABLE_PIECE_ROWS: usize = 1_000;

/// A comfy-table table of `rows` under `columns`: numeric columns (`numeric[i]`)
/// right-aligned, and each column at least `min_widths[i]` characters wide (content plus
/// padding) when given.
fn table_of(
    columns: &[String],
    rows: &[Vec<Value>],
    numeric: &[bool],
    min_widths: Option<&[u16]>,
) -> Table {
    let mut t = Table::new();
    t.load_style(presets::ASCII_FULL_CONDENSED);
    t.set_header(columns.to_vec());
    for r in rows {
        t.add_row(r.iter().map(table_cell).collect::<Vec<_>>());
    }
    for (i, col) in t.column_iter_mut().enumerate() {
        if numeric.get(i) == Some(&true) {
            col.set_cell_alignment(CellAlignment::Right);
        }
        if let Some(w) = min_widths.and_then(|w| w.get(i)) {
            col.set_constraint(ColumnConstraint::LowerBoundary(Width::Fixed(*w)));
        }
    }
    t
}

/// The text of a value in a table cell: control characters other than a line break (which
/// the table shows as a line break within the cell) are written as escapes (`\t`, `\r`,
/// `\u{1b}`), so a tab or carriage return does not break the column alignment.
fn table_cell(v: &Value) -> String {
    let text = v.to_string();
    if !text.chars().any(|c| c.is_control() && c != '\n') {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push('\n'),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

/// Which columns hold only numbers (and NULLs): those are right-aligned.
fn numeric_columns(width: usize, rows: &[Vec<Value>]) -> Vec<bool> {
    (0..width)
        .map(|i| {
            !rows.is_empty()
                && rows.iter().all(|r| {
                    matches!(
                        r.get(i),
                        Some(Value::Int(_) | Value::Double(_) | Value::Null)
                    )
                })
        })
        .collect()
}

/// Renders a result set as an aligned ASCII table; numeric columns are right-aligned.
pub fn render_table(columns: &[String], rows: &[Vec<Value>]) -> String {
    table_of(columns, rows, &numeric_columns(columns.len(), rows), None).to_string()
}

/// Writes what [`render_table`] renders, [`TABLE_PIECE_ROWS`] rows at a time: every piece
/// is a comfy-table table whose columns are as wide as the whole result's (measured by
/// comfy-table, piece by piece, before anything is written), printed without the borders
/// where two pieces meet, so the output is the same. Stops between pieces once `interrupt` is
/// set. Returns the number of rows written.
///
/// # Errors
/// Errors writing to `out`.
pub fn write_table(
    out: &mut dyn Write,
    columns: &[String],
    rows: &[Vec<Value>],
    interrupt: &Interrupt,
) -> std::io::Result<usize> {
    if rows.len() <= TABLE_PIECE_ROWS {
        writeln!(out, "{}", render_table(columns, rows))?;
        return Ok(rows.len());
    }
    let numeric = numeric_columns(columns.len(), rows);
    let mut widths = vec![0u16; columns.len()];
    for piece in rows.chunks(TABLE_PIECE_ROWS) {
        if interrupt.is_set() {
            return Ok(0);
        }
        let t = table_of(columns, piece, &numeric, None);
        for (w, piece_w) in widths.iter_mut().zip(t.column_max_content_widths()) {
            *w = (*w).max(piece_w);
        }
    }
    // The constraint counts the cell padding (one space on each side) too.
    let min_widths: Vec<u16> = widths.iter().map(|w| w.saturating_add(2)).collect();
    let pieces = rows.len().div_ceil(TABLE_PIECE_ROWS);
    let mut written = 0;
    for (n, piece) in rows.chunks(TABLE_PIECE_ROWS).enumerate() {
        if interrupt.is_set() {
            break;
        }
        let text = table_of(columns, piece, &numeric, Some(&min_widths)).to_string();
        let lines: Vec<&str> = text.lines().collect();
        // Lines: top border, the header's lines, the `+===+` separator, rows, bottom border.
        let body_start = if n == 0 {
            0
        } else {
            lines
                .iter()
                .position(|l| l.starts_with("+="))
                .map_or(0, |i| i + 1)
        };
        let body_end = if n + 1 == pieces {
            lines.len()
        } else {
            lines.len().saturating_sub(1)
        };
        for line in lines.get(body_start..body_end).unwrap_or_default() {
            writeln!(out, "{line}")?;
        }
        written += piece.len();
    }
    Ok(written)
}

/// Runs a whole script (from `-c`). Returns true when everything succeeded.
pub fn run_script<S: KvStore>(
    db: &Database<S>,
    script: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> bool {
    // Reading from a string cannot fail.
    run_lines(db, script.as_bytes(), out, err).unwrap_or(false)
}

/// Runs the statements read from `input` (piped stdin) line by line: each statement runs as
/// soon as the line with its `;` has been read, and its output is flushed before the next
/// line is read, so a program can drive the shell through pipes. A line that is not UTF-8 is
/// an error for its statements ([`Session::feed_bytes`]); the others still run. Returns true
/// when everything succeeded.
///
/// # Errors
/// Reading `input` failed (statement errors are printed to `err` and give `Ok(false)`).
pub fn run_lines<S: KvStore>(
    db: &Database<S>,
    mut input: impl BufRead,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> std::io::Result<bool> {
    let mut session = Session::new(db, false);
    let mut line = Vec::new();
    let mut number = 0;
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        number += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if session.feed_bytes(text, number, out, err) == Control::Quit {
            return Ok(!session.had_error);
        }
    }
    session.finish(out, err);
    Ok(!session.had_error)
}

fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("STRATA_HISTORY") {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".strata_history"))
}

fn interactive<S: KvStore>(
    db: &Database<S>,
    dir: &Path,
    out: &mut dyn Write,
) -> anyhow::Result<bool> {
    use rustyline::error::ReadlineError;
    let mut rl = rustyline::DefaultEditor::new().context("starting line editor")?;
    let history = history_path();
    if let Some(h) = &history {
        let _ = rl.load_history(h);
    }
    let tables = db.catalog().tables.len();
    writeln!(
        out,
        "strata SQL shell on {} ({tables} table{}). Statements end with ';'. .help for help.",
        dir.display(),
        if tables == 1 { "" } else { "s" }
    )
    .context("writing to standard output")?;
    let mut session = Session::new(db, true);
    // Ctrl-C at the prompt is a key rustyline reads (it clears the line being typed); while a
    // statement runs it is SIGINT: the first stops the statement, a second one while the flag
    // is still set (a step that does not look at it: a sort, a drop's clean-up) quits.
    let flag = session.interrupt().clone();
    ctrlc::set_handler(move || {
        if flag.is_set() {
            eprintln!(
                "\ninterrupted twice: quitting (a statement that was committing may have \
                 completed; the database is consistent either way)"
            );
            std::process::exit(130);
        }
        flag.interrupt();
    })
    .context("installing the Ctrl-C handler")?;
    let mut err = std::io::stderr();
    loop {
        let prompt = if session.in_statement() {
            "   ...> "
        } else {
            "strata> "
        };
        match rl.readline(prompt) {
            Ok(line) => {
                // Where rustyline cannot take the terminal raw (TERM=dumb), Ctrl-C is SIGINT,
                // not a key: the handler above set the flag while the line was typed. It
                // discards the statement typed before it, as the key does (the terminal
                // dropped the part of the line typed before it; `line` is the rest).
                if session.interrupt().is_set() {
                    session.clear();
                }
                if !line.trim().is_empty() {
                    let _ = rl.add_history_entry(line.as_str());
                }
                if session.feed_line(&line, out, &mut err) == Control::Quit {
                    break;
                }
            }
            Err(ReadlineError::Interrupted) => session.clear(),
            Err(ReadlineError::Eof) => {
                // As at the end of piped input: a statement typed without its `;` runs.
                session.finish(out, &mut err);
                break;
            }
            Err(e) => return Err(e).context("reading input"),
        }
    }
    if let Some(h) = &history {
        let _ = rl.save_history(h);
    }
    Ok(true)
}

/// Standard output that remembers its first write error, other than a closed pipe: a reader
/// that stops early (`| head`) ends the output quietly, as with `cat`, but a full disk or an
/// I/O error must not let a script's export look whole, so [`run`] reports it and exits with
/// an error status after the statements ran.
struct CheckedOutput<W: Write> {
    inner: W,
    error: Option<std::io::Error>,
}

impl<W: Write> CheckedOutput<W> {
    fn new(inner: W) -> Self {
        CheckedOutput { inner, error: None }
    }

    fn note<T>(&mut self, result: std::io::Result<T>) -> std::io::Result<T> {
        if let Err(e) = &result
            && self.error.is_none()
            && e.kind() != std::io::ErrorKind::BrokenPipe
        {
            self.error = Some(std::io::Error::new(e.kind(), e.to_string()));
        }
        result
    }
}

impl<W: Write> Write for CheckedOutput<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let result = self.inner.write(buf);
        self.note(result)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let result = self.inner.flush();
        self.note(result)
    }
}

/// Entry point of `strata repl [DIR] [-c SQL]`, with a block cache of `cache_bytes`.
///
/// # Errors
/// When the database cannot be opened (e.g. another process has it open), the terminal
/// cannot be read, or standard output could not be written (a full disk; not a reader that
/// closed the pipe).
pub fn run(
    dir: &Path,
    command: Option<&str>,
    read_only: bool,
    cache_bytes: usize,
) -> anyhow::Result<ExitCode> {
    crate::check_database_dir(dir)?;
    let options = crate::engine_options()
        .read_only(read_only)
        .block_cache_size(cache_bytes);
    let db = Database::open_with(dir, options)
        .with_context(|| format!("opening database at {}", dir.display()))?;
    let mut out = CheckedOutput::new(std::io::stdout());
    let ok = if let Some(sql) = command {
        run_script(&db, sql, &mut out, &mut std::io::stderr())
    } else if std::io::stdin().is_terminal() {
        interactive(&db, dir, &mut out)?
    } else {
        run_lines(
            &db,
            std::io::stdin().lock(),
            &mut out,
            &mut std::io::stderr(),
        )
        .context("reading statements from stdin")?
    };
    let _ = out.flush();
    if let Some(e) = out.error {
        return Err(anyhow::Error::new(e).context("writing to standard output"));
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

mod split;

pub use split::Splitter;
#[cfg(test)]
use split::split_statements;

#[cfg(test)]
mod tests;
