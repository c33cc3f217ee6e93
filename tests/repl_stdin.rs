//! `strata repl` with piped stdin runs each statement as soon as its `;` arrives and flushes
//! its output before reading on, so a program can drive the shell through pipes.
//!
//! Regression: the shell read stdin to EOF before running anything (a driver that waited for
//! an answer deadlocked), and one byte that was not UTF-8 anywhere refused the whole script
//! with exit status 2.
//!
//! This file belongs to the `strata` package (the tool; `[[test]]` in the root Cargo.toml); the
//! `strata-tests` crate's own tests are in `tests/tests/`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

#[test]
fn piped_statements_are_answered_one_at_a_time() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut child = Command::new(env!("CARGO_BIN_EXE_strata"))
        .arg("repl")
        .arg(dir.path().join("db"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let mut stdin = child.stdin.take().expect("piped stdin");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut answer = String::new();
    // Each answer is read while stdin is still open: the shell must not wait for EOF.
    writeln!(stdin, "CREATE TABLE t (a INT PRIMARY KEY, b TEXT);")?;
    stdout.read_line(&mut answer)?;
    assert_eq!(answer, "OK: CREATE TABLE\n");
    answer.clear();
    writeln!(stdin, "INSERT INTO t VALUES (1, 'one'),")?;
    writeln!(stdin, "  (2, 'two');")?;
    stdout.read_line(&mut answer)?;
    assert_eq!(answer, "2 rows affected\n");
    answer.clear();
    // A line that is not UTF-8 fails its statement; the next one still runs.
    stdin.write_all(
        b"INSERT INTO t VALUES (3, '\xff');\n.mode csv\nSELECT count(*) AS n FROM t;\n",
    )?;
    stdout.read_line(&mut answer)?;
    assert_eq!(answer, "n\n");
    answer.clear();
    stdout.read_line(&mut answer)?;
    assert_eq!(answer, "2\n");
    drop(stdin);
    let output = child.wait_with_output()?;
    assert_eq!(
        String::from_utf8(output.stderr)?,
        "Error: line 4 is not valid UTF-8: the statement did not run\n"
    );
    assert_eq!(output.status.code(), Some(1));
    Ok(())
}
