//! Block decoder and block iterator (`engine/src/sstable/block/`).
//!
//! 1. The input as a block's uncompressed contents: `Block::new` checks the restart array;
//!    then a forward scan, a backward scan and seeks (to every key found and to keys cut from
//!    the input) must finish without panicking, within a bounded number of steps.
//! 2. The input as a list of entries (`[key_len u8][value_len u8][key][value]`...): they are
//!    sorted, built into a block with `BlockBuilder` (restart interval from the first byte) and
//!    must read back exactly, forwards, backwards and by seek.
#![no_main]

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use libfuzzer_sys::fuzz_target;
use strata_engine::iterator::InternalIterator;
use strata_engine::sstable::block::{Block, BlockBuilder, BlockIter};
use strata_engine::sstable::format::TableFormat;
use strata_engine::types::{InternalKey, InternalKeyRef, SeqNo, ValueKind};

strata_fuzz::capped_allocator!();

/// Entries of a well-formed block are at least 3 header bytes + an 8-byte key trailer.
fn max_entries(len: usize) -> usize {
    len / 3 + 2
}

/// Forward scan; returns the keys seen before the end or the first error.
fn scan_forward(it: &mut BlockIter, limit: usize) -> Vec<InternalKey> {
    let mut keys = Vec::new();
    if it.seek_to_first().is_err() {
        return keys;
    }
    while it.valid() {
        assert!(keys.len() < limit, "forward scan does not end");
        keys.push(it.key().to_owned());
        let _ = it.value();
        let _ = it.value_bytes();
        if it.next().is_err() {
            break;
        }
    }
    keys
}

/// Backward scan; returns the keys seen (last first).
fn scan_backward(it: &mut BlockIter, limit: usize) -> Vec<InternalKey> {
    let mut keys = Vec::new();
    if it.seek_to_last().is_err() {
        return keys;
    }
    while it.valid() {
        assert!(keys.len() < limit, "backward scan does not end");
        keys.push(it.key().to_owned());
        if it.prev().is_err() {
            break;
        }
    }
    keys
}

fn raw(data: &[u8]) {
    for format in TableFormat::ALL {
        raw_as(data, format);
    }
}

fn raw_as(data: &[u8], format: TableFormat) {
    let file: Arc<Path> = Arc::from(Path::new("fuzz.block"));
    let Ok(block) = Block::new(Bytes::copy_from_slice(data), format, file, 0) else {
        return;
    };
    let block = Arc::new(block);
    let limit = max_entries(data.len());
    let mut it = block.iter();
    let forward = scan_forward(&mut it, limit);
    scan_backward(&mut it, limit);
    let targets = forward.iter().take(64).cloned().chain(
        data.chunks(12)
            .take(16)
            .map(|c| InternalKey::new(Bytes::copy_from_slice(c), SeqNo(7), ValueKind::Put)),
    );
    for target in targets {
        if it.seek(target.as_ref()).is_ok() && it.valid() {
            let _ = it.next();
        }
        if it.seek_for_prev(target.as_ref()).is_ok() && it.valid() {
            let _ = it.prev();
        }
    }
}

/// Parses `[key_len][value_len][key][value]...` into sorted, distinct entries.
fn entries(data: &[u8]) -> Vec<(InternalKey, Vec<u8>)> {
    let mut out = Vec::new();
    let mut rest = data;
    let mut seqno = 0u64;
    while let [klen, vlen, tail @ ..] = rest {
        let (klen, vlen) = (usize::from(*klen % 32), usize::from(*vlen));
        let Some(key) = tail.get(..klen) else { break };
        let Some(value) = tail.get(klen..klen + vlen) else {
            break;
        };
        let kind = match seqno % 3 {
            0 => ValueKind::Put,
            1 => ValueKind::Delete,
            _ => ValueKind::Merge,
        };
        out.push((
            InternalKey::new(Bytes::copy_from_slice(key), SeqNo(seqno % 5), kind),
            value.to_vec(),
        ));
        seqno += 1;
        rest = tail.get(klen + vlen..).unwrap_or_default();
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out.dedup_by(|a, b| a.0 == b.0);
    out
}

fn round_trip(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let want = entries(rest);
    let format = if first & 0x80 == 0 {
        TableFormat::V2
    } else {
        TableFormat::V1
    };
    let mut builder = BlockBuilder::new(format, usize::from(first % 20));
    for (k, v) in &want {
        builder
            .add(k.as_ref(), v)
            .expect("a small block accepts every entry");
    }
    let contents = Bytes::copy_from_slice(builder.finish());
    let file: Arc<Path> = Arc::from(Path::new("built.block"));
    let block = Arc::new(Block::new(contents, format, file, 0).expect("a built block decodes"));
    let mut it = block.iter();
    let limit = want.len() + 1;

    it.seek_to_first().expect("built block: seek_to_first");
    for (k, v) in &want {
        assert!(it.valid(), "built block ends early");
        assert_eq!(it.key(), k.as_ref(), "built block: wrong key");
        assert_eq!(it.value(), v.as_slice(), "built block: wrong value");
        it.next().expect("built block: next");
    }
    assert!(!it.valid(), "built block has extra entries");

    let backward = scan_backward(&mut it, limit);
    assert!(
        backward.iter().rev().eq(want.iter().map(|(k, _)| k)),
        "built block reads back differently backwards"
    );

    for (i, (k, v)) in want.iter().enumerate() {
        it.seek(k.as_ref()).expect("built block: seek");
        assert!(
            it.valid() && it.key() == k.as_ref(),
            "seek misses an existing key"
        );
        assert_eq!(it.value(), v.as_slice());
        it.seek_for_prev(k.as_ref())
            .expect("built block: seek_for_prev");
        assert!(
            it.valid() && it.key() == k.as_ref(),
            "seek_for_prev misses an existing key"
        );
        // Just past `k` in internal-key order (the next smaller trailer): the next entry.
        let uk: &[u8] = &k.user_key;
        let probe = match k.kind {
            ValueKind::Merge => Some(InternalKeyRef::new(uk, k.seqno, ValueKind::Put)),
            ValueKind::Put => Some(InternalKeyRef::new(uk, k.seqno, ValueKind::Delete)),
            ValueKind::Delete => k
                .seqno
                .0
                .checked_sub(1)
                .map(|s| InternalKeyRef::new(uk, SeqNo(s), ValueKind::Merge)),
        };
        if let Some(probe) = probe {
            it.seek(probe).expect("built block: seek past a key");
            match want.get(i + 1) {
                Some((next, _)) => {
                    assert!(it.valid() && it.key() == next.as_ref(), "seek past a key");
                }
                None => assert!(!it.valid(), "seek past the last key"),
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    raw(data);
    round_trip(data);
});
