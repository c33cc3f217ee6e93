//! Block builder and iterator tests: round trips, seeks, prev/next symmetry, corrupt blocks.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;

use super::{Block, BlockBuilder, BlockIter};
use crate::coding::{put_fixed32, put_varint64};
use crate::error::Result;
use crate::iterator::InternalIterator;
use crate::sstable::format::TableFormat;
use crate::types::{InternalKey, InternalKeyRef, SeqNo, ValueKind};

type Model = Vec<(InternalKey, Vec<u8>)>;

fn path() -> Arc<Path> {
    Arc::from(Path::new("test.sst"))
}

/// Every format this build reads.
const FORMATS: [TableFormat; 3] = TableFormat::ALL;

fn build(format: TableFormat, entries: &Model, interval: usize) -> Result<Arc<Block>> {
    let mut b = BlockBuilder::new(format, interval);
    for (k, v) in entries {
        b.add(k.as_ref(), v)?;
    }
    let data = Bytes::copy_from_slice(b.finish());
    Ok(Arc::new(Block::new(data, format, path(), 0)?))
}

fn entry(it: &BlockIter) -> (InternalKey, Vec<u8>) {
    (it.key().to_owned(), it.value().to_vec())
}

fn forward(it: &mut BlockIter) -> Result<Model> {
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push(entry(it));
        it.next()?;
    }
    Ok(out)
}

fn backward(it: &mut BlockIter) -> Result<Model> {
    let mut out = Vec::new();
    it.seek_to_last()?;
    while it.valid() {
        out.push(entry(it));
        it.prev()?;
    }
    out.reverse();
    Ok(out)
}

/// Index of the first model entry `>= target`.
fn lower_bound(model: &Model, target: InternalKeyRef<'_>) -> usize {
    model.partition_point(|(k, _)| k.as_ref() < target)
}

/// Checks seek and seek_for_prev against the model for `target`.
fn check_seek(it: &mut BlockIter, model: &Model, target: InternalKeyRef<'_>) -> Result<()> {
    let i = lower_bound(model, target);
    it.seek(target)?;
    match model.get(i) {
        Some(e) => assert_eq!(&entry(it), e, "seek {target:?}"),
        None => assert!(!it.valid(), "seek past the end {target:?}"),
    }
    // Last entry <= target.
    let j = model.partition_point(|(k, _)| k.as_ref() <= target);
    it.seek_for_prev(target)?;
    match j.checked_sub(1).and_then(|j| model.get(j)) {
        Some(e) => assert_eq!(&entry(it), e, "seek_for_prev {target:?}"),
        None => assert!(!it.valid(), "seek_for_prev before the start {target:?}"),
    }
    Ok(())
}

/// Targets: every key, just before and after each key (same user key, adjacent seqnos), before
/// every version of each user key, and outside the range.
fn targets(model: &Model) -> Vec<InternalKey> {
    let mut t = vec![
        InternalKey::new(Bytes::new(), SeqNo::MAX, ValueKind::FOR_SEEK),
        InternalKey::new(vec![0xff; 40], SeqNo::ZERO, ValueKind::Delete),
    ];
    for (k, _) in model {
        t.push(k.clone());
        t.push(InternalKey::new(
            k.user_key.clone(),
            SeqNo::MAX,
            ValueKind::FOR_SEEK,
        ));
        t.push(InternalKey::new(
            k.user_key.clone(),
            SeqNo(k.seqno.0 + 1),
            k.kind,
        ));
        if let Some(s) = k.seqno.0.checked_sub(1) {
            t.push(InternalKey::new(k.user_key.clone(), SeqNo(s), k.kind));
        }
        let mut longer = k.user_key.to_vec();
        longer.push(0);
        t.push(InternalKey::new(longer, SeqNo::MAX, ValueKind::FOR_SEEK));
        // Gaps that share a shorter prefix with the keys around them: the key cut short, and
        // the key with its last byte moved up or down (seeks decide by the shared prefix).
        if let Some((&last, head)) = k.user_key.split_last() {
            t.push(InternalKey::new(head.to_vec(), SeqNo(7), ValueKind::Put));
            for moved in [last.wrapping_add(1), last.wrapping_sub(1)] {
                let mut key = head.to_vec();
                key.push(moved);
                t.push(InternalKey::new(key, SeqNo::MAX, ValueKind::FOR_SEEK));
            }
        }
    }
    t
}

fn sample_model(n: usize) -> Model {
    let mut m: Model = (0..n)
        .flat_map(|i| {
            let user = format!("key{:04}", i * 3).into_bytes();
            let versions = 1 + i % 3;
            (0..versions).map(move |v| {
                let kind = [ValueKind::Put, ValueKind::Delete, ValueKind::Merge][(i + v) % 3];
                let value = if kind == ValueKind::Delete {
                    Vec::new()
                } else {
                    format!("value-{i}-{v}").into_bytes()
                };
                // Zero (stored without a varint in V2), small, large and the largest
                // sequence numbers; distinct within a user key.
                let seqno = match v {
                    0 if i % 5 == 0 => 0,
                    0 => (100 + i * 7) as u64,
                    1 => SeqNo::MAX.get() - i as u64,
                    _ => (1 << 40) + i as u64,
                };
                (InternalKey::new(user.clone(), SeqNo(seqno), kind), value)
            })
        })
        .collect();
    m.sort_by(|a, b| a.0.cmp(&b.0));
    m
}

#[test]
fn block_seeks_find_every_key_and_gap_for_common_restart_intervals() -> Result<()> {
    let model = sample_model(60);
    for (format, interval) in FORMATS.into_iter().flat_map(|f| [(f, 1), (f, 2), (f, 16)]) {
        let block = build(format, &model, interval)?;
        let mut it = block.iter();
        assert_eq!(forward(&mut it)?, model);
        assert_eq!(backward(&mut it)?, model);
        for t in targets(&model) {
            check_seek(&mut it, &model, t.as_ref())?;
        }
    }
    Ok(())
}

#[test]
fn block_next_and_prev_are_inverse() -> Result<()> {
    let model = sample_model(40);
    for (format, interval) in FORMATS
        .into_iter()
        .flat_map(|f| [(f, 1), (f, 2), (f, 3), (f, 16)])
    {
        let block = build(format, &model, interval)?;
        let mut it = block.iter();
        for (i, (k, _)) in model.iter().enumerate() {
            it.seek(k.as_ref())?;
            it.next()?;
            if i + 1 < model.len() {
                assert_eq!(&it.key().to_owned(), &model[i + 1].0);
                it.prev()?;
            } else {
                assert!(!it.valid());
                it.seek_to_last()?;
            }
            assert_eq!(&it.key().to_owned(), k);
            it.prev()?;
            if i > 0 {
                assert_eq!(&it.key().to_owned(), &model[i - 1].0);
                it.next()?;
                assert_eq!(&it.key().to_owned(), k);
            } else {
                assert!(!it.valid());
            }
        }
    }
    Ok(())
}

#[test]
fn empty_block_is_valid_and_yields_nothing() -> Result<()> {
    for format in FORMATS {
        empty_block_yields_nothing(format)?;
    }
    Ok(())
}

fn empty_block_yields_nothing(format: TableFormat) -> Result<()> {
    let block = build(format, &Vec::new(), 16)?;
    assert!(block.is_empty());
    assert_eq!(block.size_bytes(), 8);
    let mut it = block.iter();
    it.seek_to_first()?;
    assert!(!it.valid());
    it.seek_to_last()?;
    assert!(!it.valid());
    it.seek(InternalKeyRef::new(b"a", SeqNo(1), ValueKind::Put))?;
    assert!(!it.valid());
    it.seek_for_prev(InternalKeyRef::new(b"a", SeqNo(1), ValueKind::Put))?;
    assert!(!it.valid());
    Ok(())
}

#[test]
fn keys_are_prefix_compressed_between_restarts() -> Result<()> {
    let model = sample_model(32);
    for format in FORMATS {
        let dense = build(format, &model, 16)?.size_bytes();
        let sparse = build(format, &model, 1)?.size_bytes();
        assert!(dense < sparse, "{format:?}: {dense} >= {sparse}");
    }
    Ok(())
}

#[expect(clippy::big_endian_bytes, reason = "u64 keys sort as big-endian bytes")]
#[test]
fn v2_entries_store_user_key_deltas_and_omit_zero_sequence_numbers() -> Result<()> {
    // Two last-level records of the u64 -> (u32, u32) workload: 8-byte keys sharing 3 bytes.
    let k1 = 0x0011_2233_4455_6677u64.to_be_bytes();
    let k2 = 0x0011_22ff_0000_0001u64.to_be_bytes();
    let v = [9u8; 8];
    let mut b = BlockBuilder::new(TableFormat::V2, 16);
    b.add(InternalKeyRef::new(&k1, SeqNo::ZERO, ValueKind::Put), &v)?;
    b.add(InternalKeyRef::new(&k2, SeqNo::ZERO, ValueKind::Put), &v)?;
    let k3 = [&k2[..], &[7]].concat();
    b.add(InternalKeyRef::new(&k3, SeqNo(300), ValueKind::Delete), b"")?;
    let data = b.finish().to_vec();
    let mut want = vec![0x00, 0x08, 0x41];
    want.extend_from_slice(&k1);
    want.extend_from_slice(&v);
    // shared 3, 5 new bytes, tag 8 << 3 | Put: 16 bytes in all.
    want.extend_from_slice(&[0x03, 0x05, 0x41]);
    want.extend_from_slice(&k2[3..]);
    want.extend_from_slice(&v);
    // k2 ++ [7], with a sequence number: shared 8, 1 new byte, tag 0 << 3 | 4 | Delete, then
    // varint 300.
    want.extend_from_slice(&[0x08, 0x01, 0x04, 0xac, 0x02, 0x07]);
    want.extend_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]);
    assert_eq!(data, want);
    Ok(())
}

fn restarts_block(entries: &[u8], restarts: &[u32]) -> Bytes {
    let mut b = entries.to_vec();
    for &r in restarts {
        put_fixed32(&mut b, r);
    }
    put_fixed32(&mut b, u32::try_from(restarts.len()).unwrap_or(u32::MAX));
    Bytes::from(b)
}

fn one_entry(shared: u64, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut e = Vec::new();
    put_varint64(&mut e, shared);
    put_varint64(&mut e, key.len() as u64);
    put_varint64(&mut e, value.len() as u64);
    e.extend_from_slice(key);
    e.extend_from_slice(value);
    e
}

#[test]
fn bad_restart_arrays_are_corruption() {
    let e = one_entry(
        0,
        &InternalKeyRef::new(b"a", SeqNo(1), ValueKind::Put).encode(),
        b"v",
    );
    let n = u32::try_from(e.len()).unwrap_or(0);
    let cases: Vec<Bytes> = vec![
        Bytes::from_static(b""),
        Bytes::from_static(b"\x00\x00"),
        restarts_block(&e, &[]),           // zero restarts
        restarts_block(&e, &[1]),          // first restart not 0
        restarts_block(&e, &[0, 0]),       // not increasing
        restarts_block(&e, &[0, n]),       // restart at the array
        restarts_block(&e, &[0, n + 100]), // out of range
        Bytes::from_static(b"\x00\x00\x00\x00\xff\xff\xff\xff"), // count too large
    ];
    for (i, c) in cases.into_iter().enumerate() {
        for format in FORMATS {
            let r = Block::new(c.clone(), format, path(), 7);
            assert!(matches!(&r, Err(e) if e.is_corruption()), "case {i}: {r:?}");
        }
    }
}

fn scan_everything(block: Arc<Block>) -> Result<()> {
    let mut it = block.iter();
    forward(&mut it)?;
    backward(&mut it)?;
    it.seek(InternalKeyRef::new(b"m", SeqNo(5), ValueKind::Put))?;
    it.seek_for_prev(InternalKeyRef::new(b"m", SeqNo(5), ValueKind::Put))?;
    Ok(())
}

#[test]
fn malformed_entries_are_corruption() -> Result<()> {
    let good = InternalKeyRef::new(b"a", SeqNo(1), ValueKind::Put).encode();
    let mut bad_kind = good.clone();
    bad_kind[1] = 9;
    let mut two = one_entry(0, &good, b"v");
    let second_at = u32::try_from(two.len()).unwrap_or(0);
    two.extend(one_entry(3, b"zz", b"")); // shares 3 bytes at a restart point
    let cases = vec![
        restarts_block(&one_entry(0, &bad_kind, b"v"), &[0]), // unknown kind
        restarts_block(&one_entry(0, b"short", b"v"), &[0]),  // key below 8 bytes
        restarts_block(&one_entry(2, &good, b"v"), &[0]),     // shared > previous key
        restarts_block(&one_entry(0, &good, b"v")[..6], &[0]), // entry runs past the end
        restarts_block(&[0x80, 0x80], &[0]),                  // truncated varint
        restarts_block(&two, &[0, second_at]),
    ];
    for (i, c) in cases.into_iter().enumerate() {
        let block = Arc::new(Block::new(c, TableFormat::V1, path(), 7)?);
        let r = scan_everything(block);
        assert!(matches!(&r, Err(e) if e.is_corruption()), "case {i}: {r:?}");
    }
    Ok(())
}

/// A version-2 entry: `tag` is given whole so tests can write bad kinds and flags.
fn one_entry_v2(
    shared: u64,
    user_key: &[u8],
    tag: u64,
    seqno: Option<u64>,
    value: &[u8],
) -> Vec<u8> {
    let mut e = Vec::new();
    put_varint64(&mut e, shared);
    put_varint64(&mut e, user_key.len() as u64);
    put_varint64(&mut e, tag);
    if let Some(s) = seqno {
        put_varint64(&mut e, s);
    }
    e.extend_from_slice(user_key);
    e.extend_from_slice(value);
    e
}

#[test]
fn malformed_v2_entries_are_corruption() -> Result<()> {
    let put_v = (1 << 3) | 1; // value_len 1, Put
    let mut two = one_entry_v2(0, b"abc", put_v, None, b"v");
    let second_at = u32::try_from(two.len()).unwrap_or(0);
    two.extend(one_entry_v2(3, b"zz", 1, None, b"")); // shares 3 bytes at a restart point
    let cases = vec![
        restarts_block(&one_entry_v2(0, b"a", (1 << 3) | 3, None, b"v"), &[0]), // kind 3
        // Sequence number 2^56: above SeqNo::MAX.
        restarts_block(&one_entry_v2(0, b"a", put_v | 4, Some(1 << 56), b"v"), &[0]),
        restarts_block(&one_entry_v2(0, b"a", put_v | 4, None, b"")[..3], &[0]), // seqno cut
        restarts_block(&one_entry_v2(2, b"a", put_v, None, b"v"), &[0]), // shared > previous key
        restarts_block(&one_entry_v2(0, b"a", (9 << 3) | 1, None, b"v"), &[0]), // value past end
        restarts_block(&one_entry_v2(0, b"a", u64::MAX, None, b"v"), &[0]), // huge value length
        restarts_block(&two, &[0, second_at]),
    ];
    for (i, c) in cases.into_iter().enumerate() {
        let block = Arc::new(Block::new(c, TableFormat::V2, path(), 7)?);
        let r = scan_everything(block);
        assert!(matches!(&r, Err(e) if e.is_corruption()), "case {i}: {r:?}");
    }
    // A stored zero sequence number is accepted (writers omit it) and reads as 0.
    let block = Arc::new(Block::new(
        restarts_block(&one_entry_v2(0, b"a", put_v | 4, Some(0), b"v"), &[0]),
        TableFormat::V2,
        path(),
        7,
    )?);
    let mut it = block.iter();
    it.seek_to_first()?;
    assert_eq!(
        entry(&it),
        (
            InternalKey::new(&b"a"[..], SeqNo::ZERO, ValueKind::Put),
            b"v".to_vec()
        )
    );
    Ok(())
}

#[test]
fn bit_flipped_blocks_never_panic() -> Result<()> {
    for format in FORMATS {
        bit_flips_never_panic(format)?;
    }
    Ok(())
}

fn bit_flips_never_panic(format: TableFormat) -> Result<()> {
    let model = sample_model(12);
    let mut b = BlockBuilder::new(format, 4);
    for (k, v) in &model {
        b.add(k.as_ref(), v)?;
    }
    let good = b.finish().to_vec();
    // One bit per byte, cycling through the bit positions.
    for byte in 0..good.len() {
        let mut bad = good.clone();
        bad[byte] ^= 1 << (byte % 8);
        if let Ok(block) = Block::new(Bytes::from(bad), format, path(), 0) {
            let block = Arc::new(block);
            let _ = scan_everything(Arc::clone(&block));
            let mut it = block.iter();
            for t in targets(&model) {
                let _ = it.seek(t.as_ref());
                if it.valid() {
                    let _ = it.prev();
                }
            }
        }
    }
    Ok(())
}

fn arb_model() -> impl Strategy<Value = Model> {
    let user_key = prop::collection::vec(
        prop::sample::select(vec![0u8, 1, b'a', b'b', 0xfe, 0xff]),
        0..12,
    );
    let kind = prop::sample::select(vec![ValueKind::Delete, ValueKind::Put, ValueKind::Merge]);
    let entry = (
        user_key,
        prop_oneof![Just(0u64), 0u64..1000, Just(SeqNo::MAX.get())],
        kind,
        prop::collection::vec(any::<u8>(), 0..20),
    );
    prop::collection::vec(entry, 0..120).prop_map(|raw| {
        let mut m: Model = raw
            .into_iter()
            .map(|(u, s, k, v)| (InternalKey::new(u, SeqNo(s), k), v))
            .collect();
        m.sort_by(|a, b| a.0.cmp(&b.0));
        m.dedup_by(|a, b| a.0.as_ref().cmp(&b.0.as_ref()).is_eq());
        m
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn block_round_trips_random_sorted_keys(
        model in arb_model(),
        interval in 1usize..=16,
        v2 in any::<bool>(),
    ) {
        let format = if v2 { TableFormat::V2 } else { TableFormat::V1 };
        let block = build(format, &model, interval)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut it = block.iter();
        let run = |it: &mut BlockIter| -> Result<()> {
            assert_eq!(forward(it)?, model);
            assert_eq!(backward(it)?, model);
            for t in targets(&model) {
                check_seek(it, &model, t.as_ref())?;
            }
            Ok(())
        };
        run(&mut it).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // The same seeks through the restart-prefix array of an index block: keys up to 11
        // bytes from six byte values share 8-byte prefixes, end inside them, and hold zeros
        // that the padding must not be confused with.
        let data = Bytes::copy_from_slice(&block.data);
        let indexed = Arc::new(
            Block::new(data, format, path(), 0)
                .and_then(Block::with_restart_prefixes)
                .map_err(|e| TestCaseError::fail(e.to_string()))?,
        );
        run(&mut indexed.iter()).map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}

#[test]
fn restart_prefixes_decide_only_on_unequal_prefixes() {
    use super::key_prefix;
    // A key that ends sorts before its extensions, even by a zero byte.
    assert!(key_prefix(b"ab") < key_prefix(b"ab\0\x01"));
    assert_eq!(key_prefix(b"ab"), key_prefix(b"ab\0"));
    assert_eq!(key_prefix(b""), 0);
    assert_eq!(key_prefix(b"12345678"), key_prefix(b"123456789"));
    assert!(key_prefix(b"\xff") > key_prefix(b"\xfe\xff\xff\xff\xff\xff\xff\xff\xff"));
}
