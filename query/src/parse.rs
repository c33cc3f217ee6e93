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
    let tokens = join_upper_hex(join_string_constants(tokens)?);
    check_not_chains(&tokens)?;
    check_operator_runs(&tokens)?;
    check_number_ends(&tokens)?;
    check_empty_identifiers(&tokens)?;
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

/// Deepest parse tree [`parse`] lets sqlparser build from chains of operators: the operators
/// of one chain plus those of its deepest parenthesized operand, nested (`(1 + ...) + 1 + ...`
/// counts both chains).
pub const MAX_OPERATOR_RUN: usize = 4096;

/// One parenthesis level of [`check_operator_runs`].
#[derive(Default)]
struct Level {
    /// Operators since the last comma at this level.
    run: usize,
    /// The deepest parenthesized operand since the last comma.
    operand: usize,
    /// The deepest comma-separated part finished at this level.
    best: usize,
}

impl Level {
    /// An upper bound on the tree depth of the current part: a left-deep chain of `run`
    /// operators with an operand of depth `operand` somewhere in it.
    fn depth(&self) -> usize {
        self.run + self.operand
    }
}

/// Refuses a statement whose chains of operators would build a parse tree deeper than
/// [`MAX_OPERATOR_RUN`] (`1 + 1 + ... + 1`, `a = 1 OR a = 2 OR ...`, `x::int::int...`, and
/// such chains nested in parentheses) as nested too deeply, before sqlparser builds it.
/// sqlparser builds a chain without recursion, but dropping the tree recurses once per level,
/// whether translation refuses it ([`crate::translate`] allows 128 levels) or the parser fails
/// after it: 40,000 `+ 1` (160 KB of SQL), or 9 nested parentheses of 4,000 each, overflowed a
/// server worker's 2 MiB stack and aborted the process. The bound adds every operator of a
/// comma-separated part to its deepest parenthesized operand, so it never undercounts; a tree
/// this deep cannot pass the depth limit in practice (its operators would have to be spread
/// over SQL's ten or so precedence levels evenly), so nothing useful is refused.
fn check_operator_runs(tokens: &[TokenWithSpan]) -> Result<(), ParserError> {
    // One entry per open parenthesis level; the last is the innermost.
    let mut levels: Vec<Level> = vec![Level::default()];
    for t in tokens {
        let operator = match &t.token {
            Token::LParen | Token::LBracket => {
                levels.push(Level::default());
                false
            }
            Token::RParen | Token::RBracket => {
                if levels.len() > 1
                    && let Some(inner) = levels.pop()
                    && let Some(outer) = levels.last_mut()
                {
                    // The parenthesized group is one operand of the level around it, one
                    // level deeper than its deepest part.
                    let group = inner.best.max(inner.depth()) + 1;
                    outer.operand = outer.operand.max(group);
                    if outer.depth() > MAX_OPERATOR_RUN {
                        return Err(ParserError::RecursionLimitExceeded);
                    }
                }
                false
            }
            Token::Comma | Token::SemiColon => {
                if let Some(level) = levels.last_mut() {
                    level.best = level.best.max(level.depth());
                    level.run = 0;
                    level.operand = 0;
                }
                false
            }
            Token::Word(w) => {
                w.quote_style.is_none()
                    && matches!(
                        w.keyword,
                        Keyword::AND
                            | Keyword::OR
                            | Keyword::XOR
                            | Keyword::IS
                            | Keyword::LIKE
                            | Keyword::ILIKE
                            | Keyword::BETWEEN
                            | Keyword::IN
                            | Keyword::DIV
                            | Keyword::COLLATE
                    )
            }
            // Operands and punctuation that build no tree.
            Token::EOF
            | Token::Number(..)
            | Token::Char(_)
            | Token::Placeholder(_)
            | Token::Whitespace(_)
            | Token::Period
            | Token::Colon
            | Token::LBrace
            | Token::RBrace
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::TripleSingleQuotedString(_)
            | Token::TripleDoubleQuotedString(_)
            | Token::DollarQuotedString(_)
            | Token::SingleQuotedByteStringLiteral(_)
            | Token::DoubleQuotedByteStringLiteral(_)
            | Token::TripleSingleQuotedByteStringLiteral(_)
            | Token::TripleDoubleQuotedByteStringLiteral(_)
            | Token::SingleQuotedRawStringLiteral(_)
            | Token::DoubleQuotedRawStringLiteral(_)
            | Token::TripleSingleQuotedRawStringLiteral(_)
            | Token::TripleDoubleQuotedRawStringLiteral(_)
            | Token::NationalStringLiteral(_)
            | Token::QuoteDelimitedStringLiteral(_)
            | Token::NationalQuoteDelimitedStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::UnicodeStringLiteral(_)
            | Token::HexStringLiteral(_) => false,
            // Every other token is an operator symbol (`+`, `||`, `=`, `::`, `->`, ...).
            _ => true,
        };
        if operator && let Some(level) = levels.last_mut() {
            level.run += 1;
            if level.depth() > MAX_OPERATOR_RUN {
                return Err(ParserError::RecursionLimitExceeded);
            }
        }
    }
    Ok(())
}

/// Refuses a zero-length quoted identifier (`""`, `` `` ``), as PostgreSQL does ("zero-length
/// delimited identifier"): a table, column or index named by nothing cannot be told apart
/// where names are listed.
fn check_empty_identifiers(tokens: &[TokenWithSpan]) -> Result<(), ParserError> {
    match tokens.iter().find(
        |t| matches!(&t.token, Token::Word(w) if w.quote_style.is_some() && w.value.is_empty()),
    ) {
        Some(t) => Err(ParserError::TokenizerError(format!(
            "zero-length quoted identifier{}",
            t.span.start
        ))),
        None => Ok(()),
    }
}

/// Refuses a number run into a name (`12abc`, `1e`, `1_000`, `0xGG`) and `0x` without
/// digits, as PostgreSQL 16 ("trailing junk after numeric literal") and SQLite do. sqlparser
/// reads `12abc` as the number 12 aliased `abc`, `1_000` as 1 aliased `_000`, and `0x` as an
/// empty blob.
fn check_number_ends(tokens: &[TokenWithSpan]) -> Result<(), ParserError> {
    let junk = |t: &TokenWithSpan, what: &str| {
        Err(ParserError::TokenizerError(format!(
            "{what}{}",
            t.span.start
        )))
    };
    for (i, t) in tokens.iter().enumerate() {
        let literal = match &t.token {
            Token::Number(..) => true,
            // `0x1F` is one column shorter than `X'1F'`.
            Token::HexStringLiteral(h) if is_zero_x(t, h) => {
                if h.is_empty() {
                    return junk(t, "0x needs hexadecimal digits");
                }
                true
            }
            _ => false,
        };
        if literal
            && let Some(next) = tokens.get(i + 1)
            && let Token::Word(w) = &next.token
            && w.quote_style.is_none()
        {
            return junk(
                t,
                &format!("trailing junk after numeric literal {}", t.token),
            );
        }
    }
    Ok(())
}

/// Reads `0X1F` as `0x1F` (a BLOB), as PostgreSQL 16 and SQLite do; sqlparser reads only a
/// lower-case `x` so, giving the number 0 and a word `X1F`.
fn join_upper_hex(tokens: Vec<TokenWithSpan>) -> Vec<TokenWithSpan> {
    let mut out: Vec<TokenWithSpan> = Vec::with_capacity(tokens.len());
    for t in tokens {
        if let Token::Word(w) = &t.token
            && w.quote_style.is_none()
            && let Some(digits) = w.value.strip_prefix('X')
            && !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_hexdigit())
            && let Some(prev) = out.last_mut()
            && matches!(&prev.token, Token::Number(n, _) if n == "0")
            && prev.span.end.line == t.span.start.line
            && prev.span.end.column == t.span.start.column
        {
            prev.token = Token::HexStringLiteral(digits.to_owned());
            prev.span.end = t.span.end;
            continue;
        }
        out.push(t);
    }
    out
}

/// Whether hex literal token `t` with digits `h` was written `0x...` (not `X'...'`).
fn is_zero_x(t: &TokenWithSpan, h: &str) -> bool {
    let (start, end) = (t.span.start, t.span.end);
    start.line == end.line
        && usize::try_from(end.column.saturating_sub(start.column)).ok() == Some(h.len() + 2)
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
    fn numbers_run_into_names_are_syntax_errors() {
        for bad in [
            "12abc", "1e", "1_000", "0xGG", "0x", "1.5e", "0x1Fz", "1 + 2x", "0X", "0XZZ", "0X1G",
        ] {
            let e = select_text(&format!("SELECT {bad}"));
            assert!(
                e.starts_with("error: syntax error: ")
                    && (e.contains("trailing junk") || e.contains("0x needs"))
                    && e.contains(" at Line: 1, Column: "),
                "{bad}: {e}"
            );
        }
        for good in [
            "12 abc",
            "1e5",
            "0x1F",
            "0X1f",
            "X''",
            "X'1F'",
            "1.5",
            "1 AS \"x\"",
            "(1)x",
        ] {
            let e = select_text(&format!("SELECT {good}"));
            assert!(!e.starts_with("error"), "{good}: {e}");
        }
    }

    #[test]
    fn long_operator_runs_are_refused_before_parsing() {
        // Each of these overflowed a 2 MiB stack when its tree was dropped.
        // Each with the number of operators it adds.
        for (op, k) in [
            (" + 1", 1),
            (" || 'a'", 1),
            (" OR a = 1", 2),
            (" AND TRUE", 1),
            ("::BIGINT", 1),
            (" = 1", 1),
        ] {
            let sql = format!("SELECT 1{}", op.repeat(MAX_OPERATOR_RUN + 1));
            assert!(
                matches!(
                    parse(&sql),
                    Err(crate::QueryError::Parse(
                        ParserError::RecursionLimitExceeded
                    ))
                ),
                "{op}"
            );
            // The same run cut by commas into shorter ones parses, and so do parenthesized
            // runs whose nesting stays within the bound.
            let quarter = op.repeat(MAX_OPERATOR_RUN / 4 / k);
            assert!(
                parse(&format!("SELECT 1{quarter}, (1{quarter}){quarter}")).is_ok(),
                "{op}"
            );
            // Runs nested in parentheses add up: each level under the bound, all together
            // over it (9 levels of 4,000 `+ 1` overflowed a 2 MiB stack).
            let mut nested = "1".to_owned();
            for _ in 0..5 {
                nested = format!("({nested}{quarter})");
            }
            assert!(
                matches!(
                    parse(&format!("SELECT {nested}")),
                    Err(crate::QueryError::Parse(
                        ParserError::RecursionLimitExceeded
                    ))
                ),
                "{op} nested"
            );
            // A group before the chain counts too: `(... ) + ...`.
            let three = op.repeat(MAX_OPERATOR_RUN * 3 / 4 / k);
            assert!(
                parse(&format!("SELECT (1{three}){three}")).is_err(),
                "{op} group first"
            );
            // Sibling groups do not add up.
            assert!(
                parse(&format!(
                    "SELECT (1{quarter}), (1{quarter}), f((1{quarter}), 2)"
                ))
                .is_ok(),
                "{op} siblings"
            );
        }
        // Long statements of many short expressions are not runs.
        let rows = vec!["(-1, -2, 'a' || 'b')"; 20_000].join(", ");
        assert!(parse(&format!("INSERT INTO t VALUES {rows}")).is_ok());
        let list = vec!["-1"; 20_000].join(", ");
        assert!(parse(&format!("SELECT * FROM t WHERE a IN ({list})")).is_ok());
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
