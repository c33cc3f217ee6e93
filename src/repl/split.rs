//! The shell's statement splitter: where a `;` ends a statement.
//!
//! It follows the lexing of the parser's dialect (`strata_query::parse::DIALECT`, sqlparser's
//! `GenericDialect`), so that each statement the splitter cuts out is one the parser reads as
//! a whole:
//! - `'...'`, `"..."` and `` `...` `` (a doubled quote stands for one and does not close);
//! - `E'...'` and `X'...'`: a backslash escapes the next character, so `E'a\'b'` is one string;
//! - `Q'[...]'` (also `NQ'...'`): closed by the closing delimiter followed by `'`;
//! - `R'''...'''` (and `R"""..."""`): a raw string closed by three quotes;
//! - `$$...$$` and `$tag$...$tag$` (a tag of letters, digits and `_`), starting only where a
//!   token starts: in `a$b$c` the `$` is part of the identifier, and `$1` is a placeholder;
//! - `-- ...` to the end of the line, and `/* ... */` comments, which nest.
//!
//! [`Splitter`] keeps its lexical state between calls, so input fed a line at a time is
//! scanned once: the work is linear in the input, however many lines a statement has.

/// Where the scan is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Code,
    /// Inside a string or quoted identifier closed by `quote` (a doubled one does not close);
    /// with `backslash`, a backslash escapes the next character.
    Quoted {
        quote: u8,
        backslash: bool,
    },
    /// Inside `R'''...'''` or `R"""..."""`: closed by three `quote`s.
    Triple(u8),
    /// Inside `Q'<open>...<close>'`: closed by `close` followed by `'`.
    QuoteDelimited(u8),
    /// Inside a dollar-quoted string closed by this delimiter (`$$` or `$tag$`).
    Dollar(String),
    LineComment,
    /// Inside `/* */` comments nested this deep (at least 1).
    BlockComment(u32),
}

/// An incremental statement splitter: [`Splitter::push`] text (whole lines, each ending in
/// `\n`, or a whole script), take out the complete statements.
#[derive(Debug, Clone)]
pub struct Splitter {
    /// Text of the statement not yet complete, from its start.
    pending: String,
    /// Bytes of `pending` already scanned.
    scanned: usize,
    state: State,
    /// Whether `pending` has anything besides whitespace and comments.
    has_code: bool,
}

impl Default for Splitter {
    fn default() -> Self {
        Splitter {
            pending: String::new(),
            scanned: 0,
            state: State::Code,
            has_code: false,
        }
    }
}

/// True for a byte that may start an unquoted identifier in `GenericDialect` (any non-ASCII
/// byte counts: a letter outside ASCII starts one, and other characters are errors anyway).
fn is_word_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || matches!(b, b'_' | b'#' | b'@') || b >= 0x80
}

/// True for a byte that may continue an unquoted identifier (`$` included, as in PostgreSQL).
fn is_word_part(b: u8) -> bool {
    is_word_start(b) || b.is_ascii_digit() || b == b'$'
}

impl Splitter {
    /// A splitter with nothing pending.
    pub fn new() -> Self {
        Self::default()
    }

    /// True while a statement is open: text other than whitespace and complete comments, or
    /// an open quote or block comment, waits for its `;`.
    pub fn in_statement(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Appends `text` and returns the statements it completed, in order, each trimmed and
    /// without its `;`. A statement of nothing but comments is dropped. Only the new text is
    /// scanned, so feeding a long statement line by line costs time linear in its length.
    /// Lookahead (a doubled quote, `*/`) does not cross calls, so `text` should end at a line
    /// end (`\n`), or be the last of the input.
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.pending.push_str(text);
        let mut done = Vec::new();
        let mut start = 0;
        let bytes = self.pending.as_bytes();
        let mut i = self.scanned;
        while let Some(&b) = bytes.get(i) {
            let next = bytes.get(i + 1).copied();
            match &self.state {
                State::Quoted { quote, backslash } => {
                    if *backslash && b == b'\\' {
                        i += 1;
                    } else if b == *quote {
                        if next == Some(*quote) {
                            i += 1;
                        } else {
                            self.state = State::Code;
                        }
                    }
                }
                State::Triple(q) => {
                    if b == *q && next == Some(*q) && bytes.get(i + 2) == Some(q) {
                        i += 2;
                        self.state = State::Code;
                    }
                }
                State::QuoteDelimited(close) => {
                    if b == *close && next == Some(b'\'') {
                        i += 1;
                        self.state = State::Code;
                    }
                }
                State::Dollar(delimiter) => {
                    if bytes
                        .get(i..)
                        .is_some_and(|t| t.starts_with(delimiter.as_bytes()))
                    {
                        i += delimiter.len() - 1;
                        self.state = State::Code;
                    }
                }
                State::LineComment => {
                    if b == b'\n' {
                        self.state = State::Code;
                    }
                }
                State::BlockComment(depth) => {
                    let depth = *depth;
                    if b == b'/' && next == Some(b'*') {
                        i += 1;
                        self.state = State::BlockComment(depth + 1);
                    } else if b == b'*' && next == Some(b'/') {
                        i += 1;
                        self.state = if depth > 1 {
                            State::BlockComment(depth - 1)
                        } else {
                            State::Code
                        };
                    }
                }
                State::Code => match b {
                    b'\'' | b'"' | b'`' => {
                        self.has_code = true;
                        self.state = State::Quoted {
                            quote: b,
                            backslash: false,
                        };
                    }
                    b'-' if next == Some(b'-') => {
                        i += 1;
                        self.state = State::LineComment;
                    }
                    b'/' if next == Some(b'*') => {
                        i += 1;
                        self.state = State::BlockComment(1);
                    }
                    b'$' => {
                        self.has_code = true;
                        // A placeholder (`$1`, `$name`) or the opening of a dollar quote.
                        let tag_len = bytes
                            .get(i + 1..)
                            .unwrap_or_default()
                            .iter()
                            .take_while(|&&c| c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80)
                            .count();
                        let end = i + 1 + tag_len;
                        if bytes.get(end) == Some(&b'$') {
                            let delimiter = self.pending.get(i..=end).unwrap_or("$$");
                            self.state = State::Dollar(delimiter.to_owned());
                            i = end;
                        } else {
                            i = end - 1;
                        }
                    }
                    b'0'..=b'9' => {
                        self.has_code = true;
                        // A number; `0x` continues with hex digits (`0x1F`), as the tokenizer
                        // reads it, so the `x` is not an `X'...'` prefix.
                        let digits = |from: usize| {
                            bytes
                                .get(from..)
                                .unwrap_or_default()
                                .iter()
                                .take_while(|c| c.is_ascii_digit())
                                .count()
                        };
                        let mut end = i + digits(i);
                        if b == b'0' && end == i + 1 && matches!(bytes.get(end), Some(b'x' | b'X'))
                        {
                            end += 1;
                            end += bytes
                                .get(end..)
                                .unwrap_or_default()
                                .iter()
                                .take_while(|c| c.is_ascii_hexdigit())
                                .count();
                        }
                        i = end - 1;
                    }
                    b if is_word_start(b) => {
                        self.has_code = true;
                        let len = bytes
                            .get(i..)
                            .unwrap_or_default()
                            .iter()
                            .take_while(|&&c| is_word_part(c))
                            .count();
                        let end = i + len;
                        let after_period = i > 0 && bytes.get(i - 1) == Some(&b'.');
                        let word = bytes.get(i..end).unwrap_or_default();
                        let after = bytes.get(end..).unwrap_or_default();
                        if let Some((state, opening)) = prefixed_string(word, after, after_period) {
                            self.state = state;
                            i = end + opening;
                            continue;
                        }
                        i = end - 1;
                    }
                    b';' => {
                        let stmt = self.pending.get(start..i).unwrap_or_default();
                        if self.has_code {
                            done.push(stmt.trim().to_owned());
                        }
                        start = i + 1;
                        self.has_code = false;
                    }
                    b if !b.is_ascii_whitespace() => self.has_code = true,
                    _ => {}
                },
            }
            i += 1;
        }
        let end = i.min(self.pending.len());
        if !self.has_code && matches!(self.state, State::Code | State::LineComment) {
            // Only whitespace and complete comments since the last `;`: nothing is pending.
            self.pending.clear();
            self.scanned = 0;
        } else {
            // What remains is the end of the text just pushed, so this copy is linear too.
            self.pending.drain(..start);
            self.scanned = end - start;
        }
        done
    }

    /// Takes the pending text (input ended without a final `;`), trimmed; `None` when it holds
    /// nothing but whitespace and comments. The splitter is empty afterwards.
    pub fn take_rest(&mut self) -> Option<String> {
        let rest = std::mem::take(&mut self.pending);
        *self = Self::default();
        (!rest.is_empty()).then(|| rest.trim().to_owned())
    }

    /// Forgets the pending statement (Ctrl-C at the prompt).
    pub fn clear(&mut self) {
        *self = Self::default();
    }
}

/// A string literal opened by a prefix word (`E'`, `X'`, `Q'[`, `R'''`), or `None` when `word`
/// is no such prefix or the quote does not follow it at once. Returns the state inside the
/// string and how many bytes of `after` (the text after the word) the opening takes. After a
/// `.` (a qualified name) the tokenizer reads a word, never a prefix.
fn prefixed_string(word: &[u8], after: &[u8], after_period: bool) -> Option<(State, usize)> {
    let quote = *after.first()?;
    if after_period || !matches!(quote, b'\'' | b'"') {
        return None;
    }
    let lower = word.to_ascii_lowercase();
    match (lower.as_slice(), quote) {
        (b"e" | b"x", b'\'') => Some((
            State::Quoted {
                quote,
                backslash: true,
            },
            1,
        )),
        (b"r", q) if after.get(1) == Some(&q) && after.get(2) == Some(&q) => {
            Some((State::Triple(q), 3))
        }
        (b"q" | b"nq", b'\'') => {
            let open = *after.get(1)?;
            if open.is_ascii_whitespace() || open >= 0x80 {
                return None;
            }
            let close = match open {
                b'[' => b']',
                b'{' => b'}',
                b'<' => b'>',
                b'(' => b')',
                c => c,
            };
            Some((State::QuoteDelimited(close), 2))
        }
        _ => None,
    }
}

/// Splits `text` into complete statements (see [`Splitter::push`]) and the incomplete rest
/// (empty when the rest holds only whitespace and complete comments).
#[cfg(test)]
pub fn split_statements(text: &str) -> (Vec<String>, String) {
    let mut splitter = Splitter::new();
    let done = splitter.push(text);
    (done, splitter.pending)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splits `text` whole and line by line; checks both agree, that every statement parses
    /// as exactly one statement, and that the parser finds as many in the whole text.
    fn split_as_parser(text: &str) -> Vec<String> {
        let (whole, rest) = split_statements(text);
        assert_eq!(rest, "", "{text}");
        let mut splitter = Splitter::new();
        let mut by_line = Vec::new();
        for line in text.lines() {
            by_line.extend(splitter.push(&format!("{line}\n")));
        }
        assert!(!splitter.in_statement(), "{text}");
        assert_eq!(by_line, whole, "{text}");
        for stmt in &whole {
            let parsed = strata_query::parse::parse(stmt).unwrap();
            assert_eq!(parsed.len(), 1, "{stmt}");
        }
        assert_eq!(
            strata_query::parse::parse(text).unwrap().len(),
            whole.len(),
            "{text}"
        );
        whole
    }

    #[test]
    fn a_dollar_inside_an_identifier_is_part_of_it() {
        let done = split_as_parser(
            "create table t (id int primary key, a$b$c int); insert into t values (1, 2);",
        );
        assert_eq!(
            done,
            vec![
                "create table t (id int primary key, a$b$c int)",
                "insert into t values (1, 2)"
            ]
        );
        // Where a token starts, `$tag$` opens a dollar quote, and `$1` is a placeholder.
        let done = split_as_parser("select ($a$;$a$); select $1; select 1;");
        assert_eq!(done, vec!["select ($a$;$a$)", "select $1", "select 1"]);
    }

    #[test]
    fn backticks_quote_identifiers() {
        let done = split_as_parser("select 1 as `it's`;\nselect 2 as `a``;b`;");
        assert_eq!(done, vec!["select 1 as `it's`", "select 2 as `a``;b`"]);
    }

    #[test]
    fn a_backslash_escapes_a_quote_in_escape_strings_only() {
        let done = split_as_parser("select E'a\\'b;'; select e'\\\\'; select 'c\\'; select 3;");
        assert_eq!(
            done,
            vec![
                "select E'a\\'b;'",
                "select e'\\\\'",
                "select 'c\\'",
                "select 3"
            ]
        );
        // A column named `e` before a string is no prefix, nor is `t.e`.
        let done = split_as_parser("select e, 'x\\'; select t.e'y\\'; select 4;");
        assert_eq!(done, vec!["select e, 'x\\'", "select t.e'y\\'", "select 4"]);
        // `0x1F` is a number: its `x` is no prefix of the string after it.
        let (done, rest) = split_statements("select 0x'a\\'; select 5;");
        assert_eq!(done, vec!["select 0x'a\\'", "select 5"]);
        assert_eq!(rest, "");
    }

    #[test]
    fn block_comments_nest() {
        let done = split_as_parser("/* x /* y */ ; z */ select 1; select /* a /* b */ */ 2;");
        assert_eq!(
            done,
            vec!["/* x /* y */ ; z */ select 1", "select /* a /* b */ */ 2"]
        );
        // Still open after one `*/`: the statement waits for the next line.
        let mut splitter = Splitter::new();
        assert!(splitter.push("/* a /* b */ ;\n").is_empty());
        assert!(splitter.in_statement());
        assert_eq!(
            splitter.push("*/ select 1;\n"),
            vec!["/* a /* b */ ;\n*/ select 1"]
        );
    }

    #[test]
    fn raw_and_quote_delimited_strings_hide_semicolons() {
        let done = split_as_parser("select r'''it's;'''; select q'[it's;]'; select 6;");
        assert_eq!(
            done,
            vec!["select r'''it's;'''", "select q'[it's;]'", "select 6"]
        );
    }

    #[test]
    fn a_statement_fed_by_lines_keeps_its_state_between_them() {
        let mut splitter = Splitter::new();
        assert!(splitter.push("insert into t values ('a;\n").is_empty());
        assert!(splitter.push("b', $x$;\n").is_empty());
        assert!(splitter.push("$x$), (\"q;\n").is_empty());
        assert_eq!(
            splitter.push("\"); select 1; sel\n"),
            vec![
                "insert into t values ('a;\nb', $x$;\n$x$), (\"q;\n\")",
                "select 1"
            ]
        );
        assert!(splitter.in_statement());
        assert_eq!(splitter.take_rest().as_deref(), Some("sel"));
        assert!(!splitter.in_statement());
        // Comments alone leave nothing pending.
        assert!(splitter.push("-- a; b\n").is_empty());
        assert!(!splitter.in_statement());
        assert_eq!(splitter.take_rest(), None);
    }

    /// Random statements built of the lexically tricky pieces agree with the parser, split
    /// whole and line by line.
    #[test]
    fn random_statements_split_as_the_parser_reads_them() {
        const PIECES: &[&str] = &[
            "1",
            "'a;b'",
            "'it''s;'",
            "'x\\'",
            "E'c\\';'",
            "e'\\\\'",
            "X'0a'",
            "0x1F",
            "a$b$c",
            "$$;'$$",
            "$t$;$$;$t$",
            "$1",
            "`q;`",
            "`it's`",
            "\"d;\"\"\"",
            "r'''it's;'''",
            "q'[;']'",
            "'multi\nline;'",
            "$$two\n;lines$$",
            "/* c; /* nested; */ ; */ 2",
            "3 -- tail; comment\n",
            "t.e",
            "e",
        ];
        let mut seed: u64 = 0x5eed_1234_abcd_0042;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            usize::try_from(seed % n as u64).unwrap()
        };
        for round in 0..300 {
            let mut text = String::new();
            for _ in 0..1 + next(4) {
                text.push_str("select ");
                for k in 0..1 + next(5) {
                    if k > 0 {
                        text.push_str(if next(3) == 0 { ",\n" } else { ", " });
                    }
                    text.push_str(PIECES[next(PIECES.len())]);
                }
                text.push_str(if next(2) == 0 { ";\n" } else { "; " });
            }
            let done = split_as_parser(&text);
            assert!(!done.is_empty(), "round {round}: {text}");
        }
    }
}
