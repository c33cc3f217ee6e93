//! Merge operators: read-modify-write without a read.
//!
//! `Db::merge(key, operand)` stores an operand; reads fold every operand newer than the key's
//! last put or delete with the keyspace's [`MergeOperator`] (RocksDB's merge operator, without
//! partial merges). The built-in [`CounterAdd`] makes per-key counters (read counts, Redis
//! `INCRBY`) cost one blind write each.

use std::fmt;
use std::sync::Arc;

use crate::iterator::db_iter::MergeFn;

/// Combines a key's base value and its merge operands into a new value.
///
/// Must be deterministic and associative in effect: the result may be computed at any read, and
/// compaction may fold operands into a base ahead of time. Implementations must not panic on any
/// input: return `None` for operands that cannot be merged, which reads report as
/// [`crate::Error::InvalidArgument`].
pub trait MergeOperator: Send + Sync + fmt::Debug {
    /// A stable name, recorded for diagnostics.
    fn name(&self) -> &str;

    /// Folds `operands` (oldest first) into `existing` (`None` when the key was absent or
    /// deleted before the first operand). Returns the new value, or `None` on bad input.
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Option<Vec<u8>>;
}

/// Signed 64-bit counter with decimal ASCII values and operands, as Redis stores integers:
/// the value `b"12"` plus the operands `b"3"` and `b"-1"` gives `b"14"`. An absent base counts
/// as 0. A base or operand that is not a decimal `i64`, or a sum that overflows, fails the merge.
#[derive(Debug, Clone, Copy, Default)]
pub struct CounterAdd;

/// Parses a decimal `i64` the way Redis does: optional `-`, digits, no spaces or `+`.
pub fn parse_counter(bytes: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(bytes).ok()?;
    if text.is_empty() || text.starts_with('+') || text.len() > 20 {
        return None;
    }
    text.parse().ok()
}

impl MergeOperator for CounterAdd {
    fn name(&self) -> &str {
        "strata.CounterAdd"
    }

    fn full_merge(
        &self,
        _key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Option<Vec<u8>> {
        let mut total = match existing {
            Some(base) => parse_counter(base)?,
            None => 0,
        };
        for op in operands {
            total = total.checked_add(parse_counter(op)?)?;
        }
        Some(total.to_string().into_bytes())
    }
}

/// Adapts a merge operator to the iterator's merge function.
pub(crate) fn merge_fn(op: &Arc<dyn MergeOperator>) -> MergeFn {
    let op = Arc::clone(op);
    Arc::new(move |key: &[u8], base: Option<&[u8]>, operands: &[&[u8]]| {
        op.full_merge(key, base, operands)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_add_sums_decimal_operands() {
        let op = CounterAdd;
        assert_eq!(
            op.full_merge(b"k", None, &[b"1", b"2"]),
            Some(b"3".to_vec())
        );
        assert_eq!(
            op.full_merge(b"k", Some(b"10"), &[b"-11"]),
            Some(b"-1".to_vec())
        );
        assert_eq!(op.full_merge(b"k", Some(b"x"), &[b"1"]), None);
        assert_eq!(op.full_merge(b"k", None, &[b"+1"]), None);
        assert_eq!(op.full_merge(b"k", None, &[b" 1"]), None);
        assert_eq!(
            op.full_merge(b"k", Some(b"9223372036854775807"), &[b"1"]),
            None
        );
        assert_eq!(op.full_merge(b"k", None, &[]), Some(b"0".to_vec()));
    }
}
