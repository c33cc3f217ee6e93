//! Helpers shared by the iterator tests: key builders, an error-injecting source, seeded RNGs.

use bytes::Bytes;
use rand::SeedableRng;
use rand::rngs::StdRng;

use super::InternalIterator;
use super::vec_iter::VecIterator;
use crate::error::{Error, Result};
use crate::types::{InternalKey, InternalKeyRef, SeqNo, ValueKind};

/// An owned internal key.
pub(crate) fn ik(user_key: &[u8], seqno: u64, kind: ValueKind) -> InternalKey {
    InternalKey::new(Bytes::copy_from_slice(user_key), SeqNo(seqno), kind)
}

/// An entry `(key, value)`.
pub(crate) fn entry(
    user_key: &[u8],
    seqno: u64,
    kind: ValueKind,
    value: &str,
) -> (InternalKey, Bytes) {
    (
        ik(user_key, seqno, kind),
        Bytes::copy_from_slice(value.as_bytes()),
    )
}

/// The current entry of `it` as owned data, or `None` when unpositioned.
pub(crate) fn current(it: &impl InternalIterator) -> Option<(InternalKey, Bytes)> {
    it.valid()
        .then(|| (it.key().to_owned(), Bytes::copy_from_slice(it.value())))
}

/// A base seed: `STRATA_TEST_SEED` if set, else random. Printed so failures can be replayed.
pub(crate) fn base_seed(test: &str) -> u64 {
    let seed = std::env::var("STRATA_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    eprintln!("{test}: base seed {seed} (replay with STRATA_TEST_SEED={seed})");
    seed
}

/// A deterministic RNG for one case.
pub(crate) fn rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed)
}

/// A source that fails: every call that moves it, from the `fail_at`-th on (counting from 0),
/// returns a corruption error and leaves it unpositioned.
#[derive(Debug)]
pub(crate) struct FailingIterator {
    inner: VecIterator,
    calls: usize,
    fail_at: usize,
    failed: bool,
}

impl FailingIterator {
    pub(crate) fn new(entries: Vec<(InternalKey, Bytes)>, fail_at: usize) -> Self {
        FailingIterator {
            inner: VecIterator::new(entries),
            calls: 0,
            fail_at,
            failed: false,
        }
    }

    /// Counts a move; errors from the `fail_at`-th on.
    fn check(&mut self) -> Result<()> {
        let call = self.calls;
        self.calls += 1;
        self.failed = call >= self.fail_at;
        if self.failed {
            return Err(Error::corruption(
                "failing.sst",
                u64::try_from(call).unwrap_or(u64::MAX),
                "injected failure",
            ));
        }
        Ok(())
    }
}

impl InternalIterator for FailingIterator {
    fn valid(&self) -> bool {
        !self.failed && self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.check()?;
        self.inner.seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.check()?;
        self.inner.seek_to_last()
    }
    fn seek(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        self.check()?;
        self.inner.seek(target)
    }
    fn seek_for_prev(&mut self, target: InternalKeyRef<'_>) -> Result<()> {
        self.check()?;
        self.inner.seek_for_prev(target)
    }
    fn next(&mut self) -> Result<()> {
        self.check()?;
        self.inner.next()
    }
    fn prev(&mut self) -> Result<()> {
        self.check()?;
        self.inner.prev()
    }
    fn key(&self) -> InternalKeyRef<'_> {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}
