//! The only caller of `sqlparser`: SQL text → sqlparser statements.
//!
//! We parse with [`GenericDialect`] (accepts the common spellings of PostgreSQL, MySQL and
//! SQLite); [`crate::translate`] then maps the result onto our own AST. Between tokenizing and
//! parsing, adjacent string constants get PostgreSQL's rule (see `join_string_constants`).

use sqlparser::ast::Statement as SqlStatement;
use sqlparser::dialect::GenericDialect;
use sqlparser::keywords::Keyword;
use sqlparser::parser::{Parser, ParserError};
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer, Whitespace};

use crate::error::Result;

/// The dialect every statement is parsed with.
pub const DIALECT: GenericDialect = GenericDialect {};

/// Parses `sql` (one or more statements separated by `;`).
///
/// # Errors
/// [`crate::QueryError::Parse`] with the line and column of the first syntax error.
pub fn parse(sql: &str) -> Result<Vec<SqlStatement>> {
    let tokens = Tokenizer::new(&DIALECT, sql)
        .with_unescape(true)
        .tokenize_with_location()
        .map_err(ParserError::from)?;
    let tokens = join_string_constants(tokens)?;
    check_not_chains(&tokens)?;
    Ok(Parser::new(&DIALECT)
        .with_tokens_with_locations(tokens)
        .parse_statements()?)
}

/// Longest run of `NOT`s in a row [`parse`] accepts.
const MAX_NOT_RUN: usize = 32;

/// Refuses more than [`MAX_NOT_RUN`] `NOT`s in a row (`NOT NOT ... x`) as nested too deeply.
/// sqlparser gives up on such a chain at its recursion limit in a way that can read the last
/// `NOT` as a column name: from about 40 in a row, `SELECT NOT ... NOT TRUE FROM t` read a
/// column `not` (aliased `true`) instead of failing.
fn check_not_chains(tokens: &[TokenWithSpan]) -> Result<(), ParserError> {
    let mut run = 0;
    for t in tokens {
        match &t.token {
            Token::Whitespace(_) => {}
            Token::Word(w) if w.keyword == Keyword::NOT && w.quote_style.is_none() => {
                run += 1;
                if run > MAX_NOT_RUN {
                    return Err(ParserError::RecursionLimitExceeded);
                }
            }
            _ => run = 0,
        }
    }
    Ok(())
}

/// Applies PostgreSQL's rule for string constants that follow each other (from the SQL
/// standard; PostgreSQL manual, "Lexical Structure", section 4.1.2.1): separated only by
/// whitespace that includes at least one newline, they are one constant (`'a'` newline `'b'`
/// is `'ab'`); on one line, the second is a syntax error. `GenericDialect` would otherwise
/// read the second constant as a column alias (`SELECT 'a' 'b'` returned `a` named `b`).
fn join_string_constants(tokens: Vec<TokenWithSpan>) -> Result<Vec<TokenWithSpan>, ParserError> {
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    // Index in `out` of the string constant that only whitespace follows so far, and whether
    // that whitespace holds a newline.
    let mut open: Option<(usize, bool)> = None;
    for t in tokens {
        match (&t.token, &mut open) {
            (Token::Whitespace(w), Some((_, newline))) => {
                *newline |= matches!(
                    w,
                    Whitespace::Newline | Whitespace::SingleLineComment { .. }
                );
                out.push(t);
            }
            (Token::SingleQuotedString(next), Some((at, true))) => {
                let at = *at;
                if let Some(TokenWithSpan {
                    token: Token::SingleQuotedString(first),
                    span,
                }) = out.get_mut(at)
                {
                    first.push_str(next);
                    span.end = t.span.end;
                }
                // The whitespace between the two belongs inside the joined constant's span.
                out.truncate(at + 1);
                open = Some((at, false));
            }
            (Token::SingleQuotedString(_), Some((_, false))) => {
                return Err(ParserError::ParserError(format!(
                    "string constants on one line must be joined with || (or put on separate \
                     lines), found: {} at Line: {}, Column: {}",
                    t.token, t.span.start.line, t.span.start.column
                )));
            }
            (Token::SingleQuotedString(_), None) => {
                open = Some((out.len(), false));
                out.push(t);
            }
            _ => {
                open = None;
                out.push(t);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn select_text(sql: &str) -> String {
        match parse(sql) {
            Ok(stmts) => stmts
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn string_constants_on_separate_lines_are_joined() {
        assert_eq!(select_text("SELECT 'a'\n'b'"), "SELECT 'ab'");
        assert_eq!(
            select_text("SELECT 'a'  \n  'b' \n'c' AS x"),
            "SELECT 'abc' AS x"
        );
        assert_eq!(select_text("SELECT 'a' -- note\n'b'"), "SELECT 'ab'");
        // Quotes inside the constants survive the join.
        assert_eq!(select_text("SELECT 'it''s'\n' ok'"), "SELECT 'it''s ok'");
    }

    #[test]
    fn string_constants_on_one_line_are_a_syntax_error() {
        let e = select_text("SELECT 'a' 'b'");
        assert!(
            e.starts_with("error: syntax error: string constants on one line"),
            "{e}"
        );
        assert!(e.contains("Line: 1, Column: 12"), "{e}");
    }

    #[test]
    fn other_uses_of_string_constants_are_unchanged() {
        assert_eq!(select_text("SELECT 'a' AS 'b'"), "SELECT 'a' AS 'b'");
        assert_eq!(
            select_text("SELECT x FROM t WHERE x IN ('a',\n'b')"),
            "SELECT x FROM t WHERE x IN ('a', 'b')"
        );
        assert_eq!(select_text("SELECT 'a' || 'b'"), "SELECT 'a' || 'b'");
    }

    #[test]
    fn long_not_chains_are_nested_too_deeply_never_a_column() {
        // sqlparser's unoptimized frames need more than a test thread's 2 MiB for 32 NOTs
        // (release builds parse them on the server's 2 MiB threads).
        std::thread::Builder::new()
            .stack_size(32 << 20)
            .spawn(not_chains)
            .expect("spawn")
            .join()
            .expect("no panic");
    }

    fn not_chains() {
        let nots = |n: usize| "NOT ".repeat(n);
        let ok = select_text(&format!("SELECT {}TRUE FROM t", nots(MAX_NOT_RUN)));
        assert!(!ok.starts_with("error"), "{ok}");
        // From about 40 in a row sqlparser read the last NOT as a column named `not`.
        for n in [MAX_NOT_RUN + 1, 40, 47, 48, 200] {
            let e = select_text(&format!("SELECT {}TRUE FROM t", nots(n)));
            assert_eq!(
                e, "error: syntax error: the statement is nested too deeply",
                "{n}"
            );
        }
        // NOTs apart from each other, and a quoted column named not, are not a chain.
        let apart = format!("SELECT {} FROM t", vec!["NOT a"; 40].join(" AND "));
        assert!(!select_text(&apart).starts_with("error"));
        assert!(!select_text(&format!("SELECT {}\"not\" FROM t", nots(3))).starts_with("error"));
    }
}
