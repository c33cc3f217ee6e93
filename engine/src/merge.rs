//! Merge operators: read-modify-write without a read.
//!
//! `Db::merge(key, operand)` stores an operand; reads fold every operand newer than the key's
//! last put or delete with the keyspace's [`MergeOperator`] (RocksDB's merge operator).
//! Compaction folds them ahead of time: operands with a put or tombstone under them (or with
//! nothing older anywhere) become one put, other runs of operands one operand by
//! [`MergeOperator::partial_merge`] (`docs/compaction.md` section 3, rule 2), never across a
//! live snapshot. The built-in [`CounterAdd`] makes per-key counters (read counts, Redis
//! `INCRBY`) cost one blind write each.

use std::fmt;
use std::sync::Arc;

use crate::iterator::db_iter::MergeFn;

/// Combines a key's base value and its merge operands into a new value.
///
/// Must be deterministic and associative in effect: the result may be computed at any read, and
/// compaction may fold operands into a base ahead of time. Implementations must not panic on any
/// input: return `None` for operands that cannot be merged, which reads report as
/// [`crate::Error::InvalidArgument`]. (A panic in a background compaction poisons the
/// database: writes fail with [`crate::Error::Poisoned`] until it is reopened; in
/// [`crate::Db::compact_range`] it reaches the caller.)
///
/// The operator is not recorded in the database: open it with the operator its operands were
/// written for (another one reads them as its own; with none, reads of merged keys fail and
/// compaction keeps the operands as they are).
pub trait MergeOperator: Send + Sync + fmt::Debug {
    /// A stable name, for the caller's diagnostics (the engine does not store it).
    fn name(&self) -> &str;

    /// Folds `operands` (oldest first) into `existing` (`None` when the key was absent or
    /// deleted before the first operand). Returns the new value, or `None` on bad input.
    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Option<Vec<u8>>;

    /// Combines `operands` (oldest first, at least two) of `key` into one operand with the same
    /// effect on any base: `full_merge(k, base, &[partial])` must equal
    /// `full_merge(k, base, operands)` for every `base`. Compaction calls it for operands that
    /// have no base below them in what it merges (RocksDB's `PartialMergeMulti`), so a long run
    /// of counter increments shrinks to one entry before it reaches the key's value. `None`
    /// (the default) keeps the operands as they are.
    fn partial_merge(&self, key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        let _ = (key, operands);
        None
    }
}

/// Signed 64-bit counter with decimal ASCII values and operands, as Redis stores integers:
/// the value `b"12"` plus the operands `b"3"` and `b"-1"` gives `b"14"`. An absent base counts
/// as 0. A base or operand that is not a decimal `i64` ([`parse_counter`]), or a total outside
/// the `i64` range, fails the merge. Only the total is checked, not each partial sum, so the
/// result does not depend on which operands compaction combined ahead of time
/// ([`MergeOperator::partial_merge`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct CounterAdd;

/// Parses a decimal `i64` the way Redis's `string2ll` does: an optional `-`, then `0` alone or
/// digits without a leading zero; no spaces, no `+`, no `-0`.
pub fn parse_counter(bytes: &[u8]) -> Option<i64> {
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    let canonical = match digits {
        [b'0'] => digits.len() == bytes.len(),
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    };
    if !canonical || bytes.len() > 20 {
        return None;
    }
    std::str::from_utf8(bytes).ok()?.parse().ok()
}

/// The sum of `base` and `operands` as an `i64`, or `None` when one is not a counter or the
/// total is out of range (partial sums may be: an `i128` holds any sum of fewer than 2^64
/// `i64`s).
fn counter_total(base: Option<&[u8]>, operands: &[&[u8]]) -> Option<i64> {
    let mut total = i128::from(base.map_or(Some(0), parse_counter)?);
    for op in operands {
        total += i128::from(parse_counter(op)?);
    }
    i64::try_from(total).ok()
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
        counter_total(existing, operands).map(|total| total.to_string().into_bytes())
    }

    /// The operands' sum, as one operand; `None` when it is outside the `i64` range (the
    /// operands stay as they are, and a read gives the same total or failure as before).
    fn partial_merge(&self, _key: &[u8], operands: &[&[u8]]) -> Option<Vec<u8>> {
        counter_total(None, operands).map(|total| total.to_string().into_bytes())
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

    #[test]
    fn counters_parse_as_redis_does() {
        for good in [
            "0",
            "7",
            "-7",
            "10",
            "9223372036854775807",
            "-9223372036854775808",
        ] {
            assert!(parse_counter(good.as_bytes()).is_some(), "{good}");
        }
        for bad in [
            "",
            "-",
            "007",
            "-0",
            "-007",
            "00",
            "+1",
            " 1",
            "1 ",
            "1.0",
            "9223372036854775808",
        ] {
            assert_eq!(parse_counter(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn partial_sums_do_not_change_the_total() {
        let op = CounterAdd;
        let max = i64::MAX.to_string();
        // MAX + 1 - 1: the running sum leaves the range, the total does not.
        let ops: [&[u8]; 2] = [b"1", b"-1"];
        assert_eq!(
            op.full_merge(b"k", Some(max.as_bytes()), &ops),
            Some(max.clone().into_bytes())
        );
        let partial = op.partial_merge(b"k", &ops).unwrap();
        assert_eq!(partial, b"0");
        assert_eq!(
            op.full_merge(b"k", Some(max.as_bytes()), &[&partial]),
            Some(max.clone().into_bytes())
        );
        // A sum out of range stays unfolded and fails the read.
        assert_eq!(op.partial_merge(b"k", &[max.as_bytes(), b"1"]), None);
        assert_eq!(op.full_merge(b"k", None, &[max.as_bytes(), b"1"]), None);
        assert_eq!(op.partial_merge(b"k", &[b"x", b"1"]), None);
    }
}
