//! Lexical helpers over SQL text: split a query string into statements, find and replace
//! `$n` parameters, and read a statement's leading keywords.
//!
//! The scanner knows just enough SQL to not be fooled by quotes and comments: `'...'`
//! strings (with `''`), `E'...'` strings (with backslash escapes), `"..."` identifiers,
//! `$tag$...$tag$` dollar-quoted strings, `-- line` and `/* block */` comments. A `$`
//! followed by digits anywhere else is a parameter.

/// One lexical piece of SQL text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Piece {
    /// Ordinary text (keywords, identifiers, numbers, punctuation).
    Code,
    /// A string, quoted identifier or comment: copied verbatim.
    Opaque,
    /// A `;` at the top level.
    Semicolon,
    /// `$n`, with `n` (1-based).
    Param(usize),
}

/// Splits `sql` into `(piece, start, end)` byte ranges.
fn scan(sql: &str) -> Vec<(Piece, usize, usize)> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let mut code_start = 0;
    let flush_code = |out: &mut Vec<(Piece, usize, usize)>, from: usize, to: usize| {
        if to > from {
            out.push((Piece::Code, from, to));
        }
    };
    while i < b.len() {
        let c = b.get(i).copied().unwrap_or(0);
        let next = b.get(i + 1).copied();
        let end = match c {
            b'\'' => {
                let escapes = i > 0
                    && matches!(b.get(i - 1), Some(b'E' | b'e'))
                    && !b
                        .get(i.wrapping_sub(2))
                        .is_some_and(|p| p.is_ascii_alphanumeric() || *p == b'_');
                Some(skip_quoted(b, i, b'\'', escapes))
            }
            b'"' => Some(skip_quoted(b, i, b'"', false)),
            b'-' if next == Some(b'-') => Some(
                b.get(i..)
                    .and_then(|r| r.iter().position(|&x| x == b'\n'))
                    .map_or(b.len(), |p| i + p + 1),
            ),
            b'/' if next == Some(b'*') => Some(skip_block_comment(b, i)),
            // Inside an identifier (`a$1`, `s$`) a `$` is one of its characters.
            b'$' if i > 0
                && b.get(i - 1)
                    .is_some_and(|p| p.is_ascii_alphanumeric() || *p == b'_' || *p >= 0x80) =>
            {
                None
            }
            b'$' => match dollar(b, i) {
                Dollar::Param(n, e) => {
                    flush_code(&mut out, code_start, i);
                    out.push((Piece::Param(n), i, e));
                    i = e;
                    code_start = i;
                    continue;
                }
                Dollar::Quote(e) => Some(e),
                Dollar::Plain => None,
            },
            b';' => {
                flush_code(&mut out, code_start, i);
                out.push((Piece::Semicolon, i, i + 1));
                i += 1;
                code_start = i;
                continue;
            }
            _ => None,
        };
        match end {
            Some(e) => {
                flush_code(&mut out, code_start, i);
                out.push((Piece::Opaque, i, e));
                i = e;
                code_start = i;
            }
            None => i += 1,
        }
    }
    flush_code(&mut out, code_start, b.len());
    out
}

/// End (exclusive) of a quoted run starting at `start` (the opening quote). Doubled quotes
/// stay inside; with `escapes`, so does a backslash-escaped quote. Unterminated: the end.
fn skip_quoted(b: &[u8], start: usize, quote: u8, escapes: bool) -> usize {
    let mut i = start + 1;
    while let Some(&c) = b.get(i) {
        if escapes && c == b'\\' {
            i += 2;
        } else if c == quote {
            if b.get(i + 1) == Some(&quote) {
                i += 2;
            } else {
                return i + 1;
            }
        } else {
            i += 1;
        }
    }
    b.len()
}

/// End of a `/* ... */` comment (nested, as PostgreSQL allows).
fn skip_block_comment(b: &[u8], start: usize) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < b.len() {
        match (b.get(i), b.get(i + 1)) {
            (Some(b'/'), Some(b'*')) => {
                depth += 1;
                i += 2;
            }
            (Some(b'*'), Some(b'/')) => {
                depth -= 1;
                i += 2;
                if depth == 0 {
                    return i;
                }
            }
            _ => i += 1,
        }
    }
    b.len()
}

enum Dollar {
    Param(usize, usize),
    Quote(usize),
    Plain,
}

/// Classifies a `$` at `start`: `$12` (parameter), `$tag$ ... $tag$` (string), or neither.
fn dollar(b: &[u8], start: usize) -> Dollar {
    let rest = b.get(start + 1..).unwrap_or_default();
    let digits = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    if digits > 0 {
        let text = std::str::from_utf8(rest.get(..digits).unwrap_or_default()).unwrap_or("");
        return match text.parse::<usize>() {
            Ok(n) if n > 0 => Dollar::Param(n, start + 1 + digits),
            _ => Dollar::Plain,
        };
    }
    let tag_len = rest
        .iter()
        .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_')
        .count();
    if rest.get(tag_len) != Some(&b'$') {
        return Dollar::Plain;
    }
    let delim = b.get(start..start + tag_len + 2).unwrap_or_default();
    let body_start = start + tag_len + 2;
    let body = b.get(body_start..).unwrap_or_default();
    let close = body.windows(delim.len()).position(|w| w == delim);
    Dollar::Quote(close.map_or(b.len(), |p| body_start + p + delim.len()))
}

/// `sql` with every `--` and `/* */` comment replaced by a space (strings and quoted
/// identifiers kept as they are).
pub fn without_comments(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    for (piece, s, e) in scan(sql) {
        let text = sql.get(s..e).unwrap_or_default();
        if piece == Piece::Opaque && (text.starts_with("--") || text.starts_with("/*")) {
            out.push(' ');
        } else {
            out.push_str(text);
        }
    }
    out
}

/// The statements of `sql`, split at top-level `;`, trimmed, empty ones dropped.
pub fn split_statements(sql: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for (piece, s, e) in scan(sql) {
        if piece == Piece::Semicolon {
            if let Some(stmt) = sql.get(start..s).map(str::trim).filter(|t| !t.is_empty()) {
                out.push(stmt);
            }
            start = e;
        }
    }
    if let Some(stmt) = sql.get(start..).map(str::trim).filter(|t| !t.is_empty()) {
        out.push(stmt);
    }
    out
}

/// The highest parameter number in `sql` (0 without parameters).
pub fn param_count(sql: &str) -> usize {
    scan(sql)
        .into_iter()
        .filter_map(|(p, _, _)| match p {
            Piece::Param(n) => Some(n),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// Replaces every `$n` with `literals[n - 1]`.
///
/// # Errors
/// A message when some `$n` has no literal.
pub fn substitute_params(sql: &str, literals: &[String]) -> Result<String, String> {
    let mut out = String::with_capacity(sql.len() + 16 * literals.len());
    for (piece, s, e) in scan(sql) {
        match piece {
            Piece::Param(n) => match literals.get(n - 1) {
                Some(lit) => out.push_str(lit),
                None => {
                    return Err(format!(
                        "there is no parameter ${n} ({} given)",
                        literals.len()
                    ));
                }
            },
            _ => out.push_str(sql.get(s..e).unwrap_or_default()),
        }
    }
    Ok(out)
}

/// The first `n` words of the statement's code (comments skipped), upper-cased.
pub fn leading_words(sql: &str, n: usize) -> Vec<String> {
    let mut words = Vec::new();
    for (piece, s, e) in scan(sql) {
        match piece {
            Piece::Code => {
                let text = sql.get(s..e).unwrap_or_default();
                for w in text
                    .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '.'))
                    .filter(|w| !w.is_empty())
                {
                    words.push(w.to_ascii_uppercase());
                    if words.len() == n {
                        return words;
                    }
                }
            }
            Piece::Opaque if sql.get(s..s + 2).is_some_and(|p| p == "--" || p == "/*") => {}
            _ => return words,
        }
    }
    words
}

/// True for `ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name`, which keeps the transaction
/// block open (any other `ROLLBACK` ends it), whether or not the name can be read.
pub fn is_rollback_to(sql: &str) -> bool {
    matches!(
        savepoint_statement(sql),
        Some((SavepointKind::RollbackTo, _))
    )
}

/// True for a transaction end with `AND CHAIN`: `COMMIT`, `END`, `ROLLBACK` or `ABORT`,
/// optionally `WORK` or `TRANSACTION`, then `AND CHAIN` (which starts a new block at once).
pub fn chains(sql: &str) -> bool {
    let upper: Vec<String> = statement_words(sql)
        .iter()
        .map(|w| w.to_ascii_uppercase())
        .collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    match upper.as_slice() {
        [end, rest @ ..] if ["COMMIT", "END", "ROLLBACK", "ABORT"].contains(end) => matches!(
            rest,
            ["AND", "CHAIN"] | ["WORK" | "TRANSACTION", "AND", "CHAIN"]
        ),
        _ => false,
    }
}

/// A savepoint statement and the savepoint it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SavepointOp {
    /// `SAVEPOINT name`.
    Define(String),
    /// `RELEASE [SAVEPOINT] name`.
    Release(String),
    /// `ROLLBACK [WORK | TRANSACTION] TO [SAVEPOINT] name`.
    RollbackTo(String),
}

/// Which savepoint statement [`savepoint_statement`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SavepointKind {
    Define,
    Release,
    RollbackTo,
}

/// Reads a savepoint statement, comments skipped: `None` for any other statement, else
/// `Some(Ok(op))`, or `Some(Err(message))` when the savepoint name is missing or is not one
/// identifier (PostgreSQL answers a syntax error). The name is folded to lower case unless
/// quoted (`"Name"`, which may hold spaces and `""`), as PostgreSQL folds identifiers.
pub fn savepoint_op(sql: &str) -> Option<Result<SavepointOp, String>> {
    let (kind, name) = savepoint_statement(sql)?;
    let (make, command): (fn(String) -> SavepointOp, &str) = match kind {
        SavepointKind::Define => (SavepointOp::Define, "SAVEPOINT"),
        SavepointKind::Release => (SavepointOp::Release, "RELEASE"),
        SavepointKind::RollbackTo => (SavepointOp::RollbackTo, "ROLLBACK TO"),
    };
    Some(
        name.map(make)
            .ok_or_else(|| format!("syntax error: {command} needs one savepoint name")),
    )
}

/// The savepoint statement `sql` is, and its name folded as an identifier (`None` when it
/// is missing, followed by more words, or not an identifier).
fn savepoint_statement(sql: &str) -> Option<(SavepointKind, Option<String>)> {
    let words = statement_words(sql);
    let upper: Vec<String> = words
        .iter()
        .map(|w| {
            if w.starts_with('"') {
                String::new()
            } else {
                w.to_ascii_uppercase()
            }
        })
        .collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    // The name's position; `RELEASE SAVEPOINT` alone names a savepoint called `savepoint`,
    // as in PostgreSQL, where SAVEPOINT is not a reserved word.
    let (kind, at) = match upper.as_slice() {
        ["SAVEPOINT", ..] => (SavepointKind::Define, 1),
        ["RELEASE", "SAVEPOINT", _, ..] => (SavepointKind::Release, 2),
        ["RELEASE", ..] => (SavepointKind::Release, 1),
        ["ROLLBACK", "TO", "SAVEPOINT", _, ..] => (SavepointKind::RollbackTo, 3),
        ["ROLLBACK", "TO", ..] => (SavepointKind::RollbackTo, 2),
        ["ROLLBACK", "WORK" | "TRANSACTION", "TO", "SAVEPOINT", _, ..] => {
            (SavepointKind::RollbackTo, 4)
        }
        ["ROLLBACK", "WORK" | "TRANSACTION", "TO", ..] => (SavepointKind::RollbackTo, 3),
        _ => return None,
    };
    let name = match words.get(at..) {
        Some([name]) => identifier(name),
        _ => None,
    };
    Some((kind, name))
}

/// The words of one statement outside comments: runs of code split at whitespace (a `;`
/// ends the statement), each string or quoted identifier one word with its quotes.
fn statement_words(sql: &str) -> Vec<&str> {
    let mut words = Vec::new();
    for (piece, s, e) in scan(sql) {
        let text = sql.get(s..e).unwrap_or_default();
        match piece {
            Piece::Code => words.extend(text.split_whitespace()),
            Piece::Opaque if text.starts_with("--") || text.starts_with("/*") => {}
            Piece::Opaque | Piece::Param(_) => words.push(text),
            Piece::Semicolon => break,
        }
    }
    words
}

/// `word` read as an SQL identifier: unquoted (letters, digits, `_`, `$`; not starting with
/// a digit or `$`) folded to lower case, or quoted (`""` inside is one `"`), kept as written.
fn identifier(word: &str) -> Option<String> {
    if let Some(inner) = word.strip_prefix('"') {
        let quoted = inner.strip_suffix('"')?;
        return (!quoted.is_empty()).then(|| quoted.replace("\"\"", "\""));
    }
    let mut chars = word.chars();
    let first = chars.next()?;
    ((first.is_alphabetic() || first == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$'))
    .then(|| word.to_lowercase())
}

/// True when the statement's code (outside strings) reads a PostgreSQL system catalog: a name
/// qualified by `pg_catalog.` or `information_schema.`, or one of the catalogs psql and
/// drivers query (`pg_class`, `pg_type`, ...) as the table after `FROM` or `JOIN`, where
/// PostgreSQL would find the catalog first. Elsewhere such a word is an ordinary name: a
/// column or alias `pg_class`, `CREATE TABLE pg_type (...)`.
pub fn mentions_system_catalog(sql: &str) -> bool {
    const CATALOGS: [&str; 9] = [
        "pg_catalog",
        "information_schema",
        "pg_class",
        "pg_namespace",
        "pg_type",
        "pg_database",
        "pg_settings",
        "pg_roles",
        "pg_attribute",
    ];
    const SCHEMAS: [&str; 2] = ["pg_catalog.", "information_schema."];
    // The previous word of the statement's code; a string or quoted name in between resets it.
    let mut previous: Option<&str> = None;
    for (piece, s, e) in scan(sql) {
        if piece != Piece::Code {
            previous = None;
            continue;
        }
        let text = sql.get(s..e).unwrap_or_default();
        // Whole identifiers, dots kept: a column `jpg_type` is not the catalog `pg_type`.
        for word in text
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$' || c == '.'))
            .filter(|w| !w.is_empty())
        {
            let lower = word.to_ascii_lowercase();
            let qualified = SCHEMAS.iter().any(|schema| lower.starts_with(schema));
            let after_from = previous
                .is_some_and(|p| p.eq_ignore_ascii_case("FROM") || p.eq_ignore_ascii_case("JOIN"));
            if qualified || (after_from && CATALOGS.contains(&lower.as_str())) {
                return true;
            }
            previous = Some(word);
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_split_outside_quotes_and_comments() {
        let sql = "SELECT ';' ; -- a; comment\nSELECT \"a;b\" FROM t; /* x; */ SELECT $$;$$;;";
        assert_eq!(
            split_statements(sql),
            vec![
                "SELECT ';'",
                "-- a; comment\nSELECT \"a;b\" FROM t",
                "/* x; */ SELECT $$;$$"
            ]
        );
        assert!(split_statements(" ; ;").is_empty());
    }

    #[test]
    fn params_are_found_and_replaced_outside_strings() {
        let sql = "SELECT $1, '$2', \"$3\", $2 -- $4\n";
        assert_eq!(param_count(sql), 2);
        let out = substitute_params(sql, &["10".into(), "'x'".into()]).unwrap();
        assert_eq!(out, "SELECT 10, '$2', \"$3\", 'x' -- $4\n");
        assert!(substitute_params("SELECT $3", &["1".into()]).is_err());
        assert_eq!(param_count("SELECT $tag$ $1 $tag$, E'\\' $1'"), 0);
        // A `$` inside an identifier is part of it.
        assert_eq!(param_count("SELECT a$1, b$x$ FROM t"), 0);
        assert_eq!(param_count("SELECT a+$1"), 1);
    }

    #[test]
    fn savepoint_statements_name_their_savepoint() {
        use SavepointOp::{Define, Release, RollbackTo};
        for (sql, op) in [
            ("SAVEPOINT s1", Define("s1".into())),
            ("savepoint S1;", Define("s1".into())),
            ("SAVEPOINT \"Mixed\"", Define("Mixed".into())),
            ("SAVEPOINT \"two words\"", Define("two words".into())),
            ("SAVEPOINT \"a\"\"b\"", Define("a\"b".into())),
            ("SAVEPOINT /* c */ s -- end", Define("s".into())),
            ("RELEASE s1", Release("s1".into())),
            ("release savepoint s1", Release("s1".into())),
            ("RELEASE SAVEPOINT", Release("savepoint".into())),
            ("ROLLBACK TO s1", RollbackTo("s1".into())),
            ("ROLLBACK TO SAVEPOINT s1", RollbackTo("s1".into())),
            ("rollback work to savepoint _pg1", RollbackTo("_pg1".into())),
            ("ROLLBACK TRANSACTION TO x", RollbackTo("x".into())),
            ("ROLLBACK /* x */ TO\n-- y\n s$1", RollbackTo("s$1".into())),
        ] {
            assert_eq!(savepoint_op(sql), Some(Ok(op)), "{sql}");
        }
        for sql in ["ROLLBACK", "ROLLBACK AND CHAIN", "SELECT 1", "RELEASES x"] {
            assert_eq!(savepoint_op(sql), None, "{sql}");
        }
        // Savepoint statements whose name cannot be read: a syntax error, not another statement.
        for sql in [
            "SAVEPOINT",
            "SAVEPOINT a b",
            "SAVEPOINT 1a",
            "SAVEPOINT 'a'",
            "SAVEPOINT \"\"",
            "ROLLBACK TO",
            "RELEASE $1",
        ] {
            assert!(matches!(savepoint_op(sql), Some(Err(_))), "{sql}");
        }
    }

    #[test]
    fn rollback_to_in_each_spelling() {
        for sql in [
            "ROLLBACK TO s",
            "rollback to savepoint s",
            "ROLLBACK WORK TO SAVEPOINT s",
            "/* x */ Rollback Transaction To s",
            "ROLLBACK TO",
        ] {
            assert!(is_rollback_to(sql), "{sql}");
        }
        for sql in [
            "ROLLBACK",
            "ROLLBACK WORK",
            "ROLLBACK AND CHAIN",
            "ABORT",
            "COMMIT",
        ] {
            assert!(!is_rollback_to(sql), "{sql}");
        }
    }

    #[test]
    fn and_chain_in_each_spelling() {
        for sql in [
            "COMMIT AND CHAIN",
            "end work and chain;",
            "ROLLBACK TRANSACTION /* x */ AND CHAIN",
            "abort and chain",
        ] {
            assert!(chains(sql), "{sql}");
        }
        for sql in [
            "COMMIT",
            "COMMIT AND NO CHAIN",
            "ROLLBACK TO chain",
            "SELECT 'AND CHAIN'",
        ] {
            assert!(!chains(sql), "{sql}");
        }
    }

    #[test]
    fn leading_words_skip_comments() {
        assert_eq!(leading_words("  /* hi */ begin;", 2), vec!["BEGIN"]);
        assert_eq!(
            leading_words("SET search_path = x", 2),
            vec!["SET", "SEARCH_PATH"]
        );
        assert_eq!(
            leading_words("-- c\nshow server_version", 2),
            vec!["SHOW", "SERVER_VERSION"]
        );
    }

    #[test]
    fn catalog_mentions_are_detected_outside_strings() {
        assert!(mentions_system_catalog("SELECT * FROM pg_catalog.pg_class"));
        assert!(!mentions_system_catalog("SELECT 'pg_catalog'"));
        assert!(mentions_system_catalog("select typname from PG_TYPE"));
        assert!(!mentions_system_catalog(
            "CREATE TABLE images (id BIGINT PRIMARY KEY, jpg_type TEXT, pg_types_seen BIGINT)"
        ));
        // What psql's \\d and \\l send, and drivers' type lookups.
        assert!(mentions_system_catalog(
            "SELECT n.nspname FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n"
        ));
        assert!(mentions_system_catalog(
            "SELECT * FROM information_schema.tables"
        ));
        assert!(mentions_system_catalog(
            "SELECT oid FROM x JOIN pg_type ON true"
        ));
        // Ordinary names that happen to be catalog names.
        assert!(!mentions_system_catalog("SELECT 1 AS pg_class"));
        assert!(!mentions_system_catalog(
            "CREATE TABLE t2 (id BIGINT PRIMARY KEY, pg_class TEXT)"
        ));
        assert!(!mentions_system_catalog(
            "CREATE TABLE pg_type (id BIGINT PRIMARY KEY)"
        ));
        assert!(!mentions_system_catalog("SELECT pg_roles FROM t"));
        assert!(!mentions_system_catalog("SELECT * FROM 'x' pg_type"));
    }

    #[test]
    fn unterminated_constructs_never_panic() {
        for sql in [
            "'abc",
            "\"x",
            "/* open",
            "$tag$ body",
            "E'\\",
            "$",
            "$0",
            "--",
        ] {
            let _ = split_statements(sql);
            let _ = param_count(sql);
            let _ = leading_words(sql, 3);
        }
    }
}
