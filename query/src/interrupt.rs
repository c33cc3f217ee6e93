//! Stopping a running statement from another thread: what Ctrl-C in the REPL and a
//! PostgreSQL cancel request use (SQLite's `sqlite3_interrupt`, PostgreSQL's
//! `pg_cancel_backend`).
//!
//! A statement run with [`Database::run_with`](crate::Database::run_with) looks at its
//! [`Interrupt`] every [`CHECK_EVERY`] entries it reads (rows, index entries, point gets), and
//! once more before a write or an index build commits. When the flag is set it stops with
//! [`QueryError::Interrupted`] and has changed nothing: every statement writes one batch at
//! its end, and an index build that stops leaves only scratch files, deleted at once (or on
//! the next open after a crash). The flag stays set until [`Interrupt::clear`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::error::{QueryError, Result};

/// Entries a scan reads between two looks at the flag: an atomic load per 1,024 entries costs
/// nothing measurable, and at the slowest scan rate here (~1 µs per entry in a debug build) a
/// statement notices within about a millisecond.
pub const CHECK_EVERY: u32 = 1024;

/// A shared "stop" flag for running statements. Cheap to clone (the clones share the flag).
#[derive(Debug, Clone, Default)]
pub struct Interrupt {
    flag: Arc<AtomicBool>,
}

impl Interrupt {
    /// A flag that is not set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every statement running with this flag (or a clone of it) to stop. Safe to call
    /// from any thread, and from a signal handler's thread.
    pub fn interrupt(&self) {
        self.flag.store(true, Ordering::Release);
    }

    /// True once [`Interrupt::interrupt`] was called and until [`Interrupt::clear`].
    pub fn is_set(&self) -> bool {
        self.flag.load(Ordering::Acquire)
    }

    /// The flag itself, for a store call that looks at it ([`crate::KvRead::count`]).
    pub(crate) fn flag(&self) -> &AtomicBool {
        &self.flag
    }

    /// Unsets the flag, so the next statement runs.
    pub fn clear(&self) {
        self.flag.store(false, Ordering::Release);
    }

    /// `Err(QueryError::Interrupted)` when the flag is set.
    ///
    /// # Errors
    /// [`QueryError::Interrupted`].
    pub fn check(&self) -> Result<()> {
        if self.is_set() {
            Err(QueryError::Interrupted)
        } else {
            Ok(())
        }
    }
}

/// Counts entries and looks at the flag every [`CHECK_EVERY`] of them.
#[derive(Debug)]
pub(crate) struct Ticker<'a> {
    interrupt: &'a Interrupt,
    left: u32,
}

impl<'a> Ticker<'a> {
    pub(crate) fn new(interrupt: &'a Interrupt) -> Self {
        Ticker {
            interrupt,
            left: CHECK_EVERY,
        }
    }

    /// Counts one entry.
    ///
    /// # Errors
    /// [`QueryError::Interrupted`] when this is the entry that looks and the flag is set.
    #[inline]
    pub(crate) fn tick(&mut self) -> Result<()> {
        self.left -= 1;
        if self.left == 0 {
            self.left = CHECK_EVERY;
            self.interrupt.check()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag_and_clear_resets_it() {
        let a = Interrupt::new();
        let b = a.clone();
        assert!(a.check().is_ok());
        b.interrupt();
        assert!(a.is_set());
        assert!(matches!(a.check(), Err(QueryError::Interrupted)));
        a.clear();
        assert!(!b.is_set());
    }

    #[test]
    fn ticker_looks_once_per_check_every_entries() {
        let i = Interrupt::new();
        let mut t = Ticker::new(&i);
        for _ in 0..CHECK_EVERY - 1 {
            t.tick().unwrap();
        }
        i.interrupt();
        assert!(matches!(t.tick(), Err(QueryError::Interrupted)));
        // The next look is CHECK_EVERY entries later.
        for _ in 0..CHECK_EVERY - 1 {
            t.tick().unwrap();
        }
        assert!(t.tick().is_err());
    }
}
