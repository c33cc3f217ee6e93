//! A bound on expression nesting, checked before anything recurses over a statement.
//!
//! sqlparser builds chains such as `1 + 1 + ... + 1` or `a = 1 OR a = 2 OR ...` into left-deep
//! trees without a recursion limit, and translating, printing, planning and evaluating an
//! expression recurse once per level: a 10 KB `SELECT 1+1+...+1` overflowed a 2 MiB thread
//! stack (tokio's default for the server's workers) and killed the process. Found while
//! writing the `sql` fuzz target (`fuzz/fuzz_targets/sql.rs`), which now runs statements on a
//! 2 MiB stack. The walk below stops at the limit, so it recurses at most [`MAX_EXPR_DEPTH`]
//! levels itself.

use std::ops::ControlFlow;

use sqlparser::ast::{Expr as SqlExpr, Statement as SqlStatement, Visit, Visitor};

use crate::error::{QueryError, Result};

/// Deepest expression nesting a statement may have (every operator, function call and
/// parenthesis is one level; `a = 1 OR a = 2 OR ...` with 100 terms is 101 deep, an
/// `IN (...)` list of any length 2). Deeper statements get [`QueryError::Translate`]. Chosen so
/// that the deepest accepted statement runs on a 2 MiB stack in a debug build, where
/// sqlparser's `Display` of an expression takes about 10 KiB of stack per level.
pub const MAX_EXPR_DEPTH: usize = 128;

/// Depth of the expression being visited.
struct Depth(usize);

impl Visitor for Depth {
    type Break = ();

    fn pre_visit_expr(&mut self, _: &SqlExpr) -> ControlFlow<()> {
        self.0 += 1;
        if self.0 > MAX_EXPR_DEPTH {
            ControlFlow::Break(())
        } else {
            ControlFlow::Continue(())
        }
    }

    fn post_visit_expr(&mut self, _: &SqlExpr) -> ControlFlow<()> {
        self.0 -= 1;
        ControlFlow::Continue(())
    }
}

/// Checks that no expression in `s` is nested deeper than [`MAX_EXPR_DEPTH`].
///
/// # Errors
/// [`QueryError::Translate`] naming the limit.
pub(crate) fn check(s: &SqlStatement) -> Result<()> {
    match s.visit(&mut Depth(0)) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(()) => Err(QueryError::Translate(format!(
            "expression nested deeper than {MAX_EXPR_DEPTH} levels"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Database, MemStore};

    /// Runs `sql` on a fresh in-memory database in a thread with tokio's default worker stack.
    fn execute_on_small_stack(sql: String) -> std::result::Result<(), String> {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(move || {
                let db = Database::new(MemStore::new()).map_err(|e| e.to_string())?;
                db.execute(&sql).map(|_| ()).map_err(|e| e.to_string())
            })
            .map_err(|e| e.to_string())?
            .join()
            .map_err(|_| "the statement panicked".to_owned())?
    }

    fn chain(terms: usize, op: &str) -> String {
        format!("SELECT {}", vec!["1"; terms].join(op))
    }

    #[test]
    fn deep_operator_chain_is_an_error_not_a_stack_overflow() {
        // 5,000 terms overflowed a 2 MiB stack before the check existed.
        for sql in [chain(4000, " + "), chain(4000, " OR "), chain(200, " || ")] {
            let err = execute_on_small_stack(sql).expect_err("too deep");
            assert_eq!(err, "expression nested deeper than 128 levels");
        }
    }

    #[test]
    fn operator_runs_the_parser_accepts_are_dropped_on_a_small_stack() {
        use crate::parse::MAX_OPERATOR_RUN;
        // The longest run the parser builds, refused by the depth check or by a syntax error
        // after it (sqlparser then drops the tree it built itself).
        for op in [" + ", " OR ", " || ", " AND "] {
            let longest = chain(MAX_OPERATOR_RUN + 1, op);
            let err = execute_on_small_stack(longest.clone()).expect_err("too deep");
            assert!(err.contains("nested deeper"), "{err}");
            let err =
                execute_on_small_stack(format!("{longest} FROM t WHERE")).expect_err("syntax");
            assert!(err.starts_with("syntax error"), "{err}");
        }
        // Chains nested in parentheses, just under the bound together.
        let mut nested = "1".to_owned();
        for _ in 0..4 {
            nested = format!("({nested}{})", " + 1".repeat(1000));
        }
        let err = execute_on_small_stack(format!("SELECT {nested}")).expect_err("too deep");
        assert!(err.contains("nested deeper"), "{err}");
        let err = execute_on_small_stack(format!("SELECT {nested} )")).expect_err("syntax");
        assert!(err.starts_with("syntax error"), "{err}");
        // One more operator and the parser refuses before building anything.
        let err = execute_on_small_stack(chain(40_000, " + ")).expect_err("too long");
        assert_eq!(err, "syntax error: the statement is nested too deeply");
    }

    #[test]
    fn nesting_up_to_the_limit_runs_on_a_small_stack() {
        // A chain of n terms is n - 1 operators deep (plus the innermost literal).
        execute_on_small_stack(chain(MAX_EXPR_DEPTH, " + ")).expect("at the limit");
        let err = execute_on_small_stack(chain(MAX_EXPR_DEPTH + 1, " + ")).expect_err("over");
        assert!(err.contains("nested deeper"), "{err}");
        let or_chain = (0..100).map(|i| format!("{i} = 1")).collect::<Vec<_>>();
        execute_on_small_stack(format!("SELECT {}", or_chain.join(" OR "))).expect("100-way OR");
        let in_list = (0..5000).map(|i| i.to_string()).collect::<Vec<_>>();
        execute_on_small_stack(format!("SELECT 7 IN ({})", in_list.join(", "))).expect("IN list");
    }
}
