//! Table-level tests: builder + reader round trips, point lookups, bloom filter behaviour,
//! compression choice, corruption and truncation, the spec's worked example, caches.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;

use super::block::Block;
use super::format::{
    BLOCK_TRAILER_LEN, BlockHandle, FOOTER_LEN, Footer, IndexValue, TableFormat, decode_block,
};
use super::{
    BlockCachePolicy, Table, TableBuilder, TableBuilderOptions, TableIter, TableProperties,
};
use crate::cache::{BlockCache, TableCache};
use crate::error::{Error, IoContext, Result};
use crate::filename::table_path;
use crate::iterator::InternalIterator;
use crate::types::{FileNumber, InternalKey, InternalKeyRef, SeqNo, ValueKind};

type Model = Vec<(InternalKey, Vec<u8>)>;

fn opts(block_size: usize, bloom: u32, compression: bool) -> TableBuilderOptions {
    TableBuilderOptions {
        block_size,
        block_restart_interval: 16,
        bloom_bits_per_key: bloom,
        compression,
        format: TableFormat::V3,
    }
}

fn tempdir() -> Result<tempfile::TempDir> {
    tempfile::tempdir().map_err(|e| Error::io("tempdir", e))
}

fn write(path: &Path, model: &Model, o: TableBuilderOptions) -> Result<(TableProperties, u64)> {
    let mut b = TableBuilder::create(&crate::fs::os(), path, o)?;
    for (k, v) in model {
        b.add(k.as_ref(), v)?;
    }
    assert_eq!(b.num_entries(), model.len() as u64);
    b.finish()
}

fn open(path: &Path) -> Result<Arc<Table>> {
    Table::open(
        &crate::fs::OsFs,
        path,
        FileNumber(1),
        None,
        BlockCache::new(1 << 20),
    )
}

fn entry(it: &TableIter) -> (InternalKey, Vec<u8>) {
    (it.key().to_owned(), it.value().to_vec())
}

/// Readahead limits every scan helper runs with: off, windows smaller than a block, and the
/// default 256 KiB.
const READAHEADS: [usize; 3] = [0, 1, 256 << 10];

fn scan_forward(t: &Arc<Table>) -> Result<Model> {
    same_with_every_readahead(t, scan_forward_with)
}

fn scan_backward(t: &Arc<Table>) -> Result<Model> {
    same_with_every_readahead(t, scan_backward_with)
}

/// Runs `scan` with each of [`READAHEADS`] and checks that every run returns what the first
/// (readahead off) did.
fn same_with_every_readahead(
    t: &Arc<Table>,
    scan: fn(&Arc<Table>, usize) -> Result<Model>,
) -> Result<Model> {
    let [first, rest @ ..] = READAHEADS.map(|ra| scan(t, ra));
    let first = first?;
    for (run, readahead) in rest.into_iter().zip(&READAHEADS[1..]) {
        assert_eq!(
            run?, first,
            "a scan with readahead {readahead} differs from one without"
        );
    }
    Ok(first)
}

fn scan_forward_with(t: &Arc<Table>, readahead: usize) -> Result<Model> {
    let mut it = t.iter().with_readahead(readahead);
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push(entry(&it));
        it.next()?;
    }
    Ok(out)
}

fn scan_backward_with(t: &Arc<Table>, readahead: usize) -> Result<Model> {
    let mut it = t.iter().with_readahead(readahead);
    let mut out = Vec::new();
    it.seek_to_last()?;
    while it.valid() {
        out.push(entry(&it));
        it.prev()?;
    }
    out.reverse();
    Ok(out)
}

/// What `Table::get(key)` must return according to the model.
fn model_get(model: &Model, key: InternalKeyRef<'_>) -> Option<(SeqNo, ValueKind, Vec<u8>)> {
    let i = model.partition_point(|(k, _)| k.as_ref() < key);
    let (k, v) = model.get(i)?;
    (k.user_key == key.user_key).then(|| (k.seqno, k.kind, v.clone()))
}

fn table_get(t: &Table, key: InternalKeyRef<'_>) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
    Ok(t.get(key, BlockCachePolicy::Fill)?
        .map(|(s, k, v)| (s, k, v.to_vec())))
}

/// Lookup targets: each key, each user key at "latest" and just below each version, outside.
fn targets(model: &Model) -> Vec<InternalKey> {
    let mut t = vec![
        InternalKey::new(Bytes::new(), SeqNo::MAX, ValueKind::FOR_SEEK),
        InternalKey::new(vec![0xff; 9], SeqNo::MAX, ValueKind::FOR_SEEK),
        InternalKey::new(&b"absent"[..], SeqNo::MAX, ValueKind::FOR_SEEK),
    ];
    for (k, _) in model {
        t.push(k.clone());
        t.push(InternalKey::new(
            k.user_key.clone(),
            SeqNo::MAX,
            ValueKind::FOR_SEEK,
        ));
        if let Some(s) = k.seqno.0.checked_sub(1) {
            t.push(InternalKey::new(
                k.user_key.clone(),
                SeqNo(s),
                ValueKind::FOR_SEEK,
            ));
        }
        let mut longer = k.user_key.to_vec();
        longer.push(0);
        t.push(InternalKey::new(longer, SeqNo::MAX, ValueKind::FOR_SEEK));
    }
    t
}

/// Checks a whole table against the model: scans both ways, seeks, gets, properties.
fn check_table(t: &Arc<Table>, model: &Model) -> Result<()> {
    assert_eq!(scan_forward(t)?, *model);
    assert_eq!(scan_backward(t)?, *model);
    let mut it = t.iter();
    for target in targets(model) {
        let target = target.as_ref();
        let i = model.partition_point(|(k, _)| k.as_ref() < target);
        it.seek(target)?;
        match model.get(i) {
            Some(e) => assert_eq!(&entry(&it), e, "seek {target:?}"),
            None => assert!(!it.valid(), "seek {target:?}"),
        }
        let j = model.partition_point(|(k, _)| k.as_ref() <= target);
        it.seek_for_prev(target)?;
        match j.checked_sub(1).and_then(|j| model.get(j)) {
            Some(e) => assert_eq!(&entry(&it), e, "seek_for_prev {target:?}"),
            None => assert!(!it.valid(), "seek_for_prev {target:?}"),
        }
        assert_eq!(
            table_get(t, target)?,
            model_get(model, target),
            "get {target:?}"
        );
    }
    let p = t.properties();
    assert_eq!(p.num_entries, model.len() as u64);
    let count = |kind| model.iter().filter(|(k, _)| k.kind == kind).count() as u64;
    assert_eq!(p.num_deletions, count(ValueKind::Delete));
    assert_eq!(p.num_merges, count(ValueKind::Merge));
    if let (Some(first), Some(last)) = (model.first(), model.last()) {
        assert_eq!(p.smallest_key, first.0);
        assert_eq!(p.largest_key, last.0);
        assert_eq!(
            p.smallest_seqno,
            model.iter().map(|e| e.0.seqno).min().unwrap_or_default()
        );
        assert_eq!(
            p.largest_seqno,
            model.iter().map(|e| e.0.seqno).max().unwrap_or_default()
        );
    }
    t.verify_checksums()
}

fn put(user: &[u8], seq: u64, value: &[u8]) -> (InternalKey, Vec<u8>) {
    (
        InternalKey::new(user.to_vec(), SeqNo(seq), ValueKind::Put),
        value.to_vec(),
    )
}

fn sorted(mut m: Model) -> Model {
    m.sort_by(|a, b| a.0.cmp(&b.0));
    m
}

/// Deterministic pseudo-random bytes (xorshift), incompressible.
fn noise(len: usize, mut seed: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed.to_le_bytes()[3]
        })
        .collect()
}

fn edge_model() -> Model {
    sorted(vec![
        put(b"", 5, b"empty key"),
        put(b"", 3, b""),
        put(b"\x00", 1, b"zero byte"),
        put(b"a", 9, &noise(1 << 20, 7)),
        put(b"a\xff", 4, b""),
        (
            InternalKey::new(&b"b"[..], SeqNo(8), ValueKind::Delete),
            Vec::new(),
        ),
        (
            InternalKey::new(&b"b"[..], SeqNo(2), ValueKind::Merge),
            b"+1".to_vec(),
        ),
        put(b"c", 1, &vec![b'z'; 1 << 20]),
        put(b"\xff", SeqNo::MAX.0, b"max seqno"),
        put(b"\xff\xff", 0, b""),
        put(b"\xff\xff\xff", 6, b"ff"),
    ])
}

#[test]
fn table_round_trips_edge_keys_and_values() -> Result<()> {
    let dir = tempdir()?;
    let model = edge_model();
    for (i, o) in [
        opts(4096, 10, true),
        opts(4096, 10, false),
        opts(1, 10, true),
        opts(32, 0, false),
    ]
    .into_iter()
    .enumerate()
    {
        let path = dir.path().join(format!("{i}.sst"));
        let (props, size) = write(&path, &model, o)?;
        let t = open(&path)?;
        assert_eq!(t.file_size(), size);
        assert_eq!(t.properties(), &props);
        assert_eq!(t.has_filter(), o.bloom_bits_per_key > 0);
        check_table(&t, &model)?;
    }
    Ok(())
}

#[test]
fn get_returns_newest_version_at_or_below_the_seqno() -> Result<()> {
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    let model = sorted(vec![
        put(b"k", 30, b"v30"),
        (
            InternalKey::new(&b"k"[..], SeqNo(20), ValueKind::Delete),
            Vec::new(),
        ),
        put(b"k", 10, b"v10"),
        put(b"m", 5, b"m5"),
    ]);
    write(&path, &model, opts(1, 10, false))?;
    let t = open(&path)?;
    let at = |user: &'static [u8], seq| InternalKeyRef::new(user, SeqNo(seq), ValueKind::FOR_SEEK);
    assert_eq!(
        table_get(&t, at(b"k", 100))?,
        Some((SeqNo(30), ValueKind::Put, b"v30".to_vec()))
    );
    assert_eq!(
        table_get(&t, at(b"k", 30))?,
        Some((SeqNo(30), ValueKind::Put, b"v30".to_vec()))
    );
    assert_eq!(
        table_get(&t, at(b"k", 25))?,
        Some((SeqNo(20), ValueKind::Delete, Vec::new()))
    );
    assert_eq!(
        table_get(&t, at(b"k", 15))?,
        Some((SeqNo(10), ValueKind::Put, b"v10".to_vec()))
    );
    assert_eq!(
        table_get(&t, at(b"k", 9))?,
        None,
        "older than every version"
    );
    assert_eq!(table_get(&t, at(b"m", 4))?, None);
    assert_eq!(table_get(&t, at(b"l", 100))?, None, "absent user key");
    assert_eq!(table_get(&t, at(b"z", 100))?, None, "past the last key");
    assert_eq!(table_get(&t, at(b"a", 100))?, None, "before the first key");
    Ok(())
}

#[test]
fn filter_rejected_get_reads_no_data_block() -> Result<()> {
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    let model: Model = (0..1000u32)
        .map(|i| put(format!("key{i:06}").as_bytes(), 1, b"value"))
        .collect();
    write(&path, &model, opts(256, 10, true))?;
    let cache = BlockCache::new(1 << 20);
    let t = Table::open(
        &crate::fs::OsFs,
        &path,
        FileNumber(1),
        None,
        Arc::clone(&cache),
    )?;
    let (mut rejected, mut checked) = (0u64, 0u64);
    for i in 0..1000u32 {
        let absent = format!("nope{i:06}");
        let before = (cache.hits(), cache.misses());
        let r = t.get(
            InternalKeyRef::new(absent.as_bytes(), SeqNo::MAX, ValueKind::FOR_SEEK),
            BlockCachePolicy::Fill,
        )?;
        assert_eq!(r, None);
        checked += 1;
        if !t.may_contain(absent.as_bytes()) {
            rejected += 1;
            assert_eq!(
                (cache.hits(), cache.misses()),
                before,
                "a data block was read"
            );
        }
    }
    assert!(
        rejected > 950,
        "filter rejected only {rejected} of 1000 absent keys"
    );
    // Each loop iteration made two checks (get, may_contain).
    assert_eq!(cache.bloom_checks(), 2 * checked);
    assert_eq!(cache.bloom_useful(), 2 * rejected);
    // Present keys are found and do read data blocks.
    let r = t.get(
        InternalKeyRef::new(b"key000500", SeqNo::MAX, ValueKind::FOR_SEEK),
        BlockCachePolicy::Fill,
    )?;
    assert!(r.is_some());
    assert_eq!((cache.hits(), cache.misses()), (0, 1));
    t.get(
        InternalKeyRef::new(b"key000500", SeqNo::MAX, ValueKind::FOR_SEEK),
        BlockCachePolicy::Fill,
    )?;
    assert_eq!(
        (cache.hits(), cache.misses()),
        (1, 1),
        "second read is a cache hit"
    );
    assert!(cache.usage_bytes() > 0);
    Ok(())
}

/// A value of a block's size or more gets a data block of its own, so reading the small keys
/// before it never loads the large value (a RESP SCAN over the keys beside a 100 MB value
/// decompressed it on every page).
#[test]
fn a_large_entry_gets_a_block_of_its_own() -> Result<()> {
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    let large = noise(64 << 10, 7);
    let mut model: Model = (0..20u32)
        .map(|i| put(format!("a{i:02}").as_bytes(), 1, b"v"))
        .collect();
    model.push(put(b"b", 1, &large));
    model.extend((0..20u32).map(|i| put(format!("c{i:02}").as_bytes(), 1, b"v")));
    let (props, _) = write(&path, &model, opts(4096, 0, false))?;
    assert_eq!(props.num_data_blocks, 3);
    let sizes: Vec<u64> = data_handles(&path)?.iter().map(|h| h.size).collect();
    assert!(sizes[0] < 4096 && sizes[2] < 4096, "{sizes:?}");
    assert!(sizes[1] >= large.len() as u64, "{sizes:?}");
    let cache = BlockCache::new(1 << 20);
    let t = Table::open(
        &crate::fs::OsFs,
        &path,
        FileNumber(1),
        None,
        Arc::clone(&cache),
    )?;
    for key in [&b"a05"[..], b"a19", b"c00"] {
        let r = t.get(
            InternalKeyRef::new(key, SeqNo::MAX, ValueKind::FOR_SEEK),
            BlockCachePolicy::Fill,
        )?;
        assert_eq!(
            r.map(|(_, _, v)| v.to_vec()),
            Some(b"v".to_vec()),
            "{key:?}"
        );
    }
    assert!(
        cache.usage_bytes() < 3 * 4096,
        "the large block was loaded: {} bytes cached",
        cache.usage_bytes()
    );
    check_table(&t, &model)?;
    // The same with one version of a key small and the next one large.
    let path2 = dir.path().join("t2.sst");
    let model2: Model = vec![
        put(b"k", 9, b"small"),
        put(b"k", 8, &large),
        put(b"l", 1, b"v"),
    ];
    let model2 = sorted(model2);
    let (props2, _) = write(&path2, &model2, opts(4096, 0, false))?;
    assert_eq!(props2.num_data_blocks, 3);
    check_table(&open(&path2)?, &model2)?;
    Ok(())
}

#[test]
fn lz4_is_kept_only_when_it_saves_an_eighth() -> Result<()> {
    let dir = tempdir()?;
    let random: Model = (0..200u64)
        .map(|i| put(&i.to_le_bytes(), 1, &noise(100, i + 1)))
        .collect();
    let random = sorted(random);
    let repetitive: Model = sorted(
        (0..200u64)
            .map(|i| put(&i.to_le_bytes(), 1, &[b'x'; 100]))
            .collect(),
    );
    for (name, model, expect_compressed) in [("r", &random, false), ("p", &repetitive, true)] {
        let (on, _) = write(
            &dir.path().join(format!("{name}1.sst")),
            model,
            opts(4096, 0, true),
        )?;
        let (off, _) = write(
            &dir.path().join(format!("{name}0.sst")),
            model,
            opts(4096, 0, false),
        )?;
        if expect_compressed {
            assert!(
                on.data_bytes * 2 < off.data_bytes,
                "{} vs {}",
                on.data_bytes,
                off.data_bytes
            );
        } else {
            assert_eq!(
                on.data_bytes, off.data_bytes,
                "incompressible blocks are stored raw"
            );
        }
        // Every data block's type byte says so.
        let path = dir.path().join(format!("{name}1.sst"));
        let bytes = std::fs::read(&path).ctx(&path)?;
        for h in data_handles(&path)? {
            let ty = bytes[usize::try_from(h.offset + h.size).unwrap_or(usize::MAX)];
            assert_eq!(ty, u8::from(expect_compressed), "block at {}", h.offset);
        }
        check_table(&open(&path)?, model)?;
    }
    Ok(())
}

fn footer_of(bytes: &[u8]) -> Result<Footer> {
    let at = bytes.len() - FOOTER_LEN;
    Footer::decode(&bytes[at..], Path::new("t"), at as u64)
}

fn read_handle(bytes: &[u8], h: BlockHandle) -> Result<Bytes> {
    let end = usize::try_from(h.offset + h.size).unwrap_or(usize::MAX) + BLOCK_TRAILER_LEN;
    let start = usize::try_from(h.offset).unwrap_or(usize::MAX);
    decode_block(
        Bytes::copy_from_slice(&bytes[start..end]),
        Path::new("t"),
        h.offset,
    )
}

/// Puts of `key0000`, `key0001`, ... (`n` keys, all the same length), value `value`, at
/// sequence number 1.
fn numbered_puts(n: u32) -> Model {
    (0..n)
        .map(|i| put(format!("key{i:04}").as_bytes(), 1, b"value"))
        .collect()
}

/// The data block handles of a table, read through the format API.
fn data_handles(path: &Path) -> Result<Vec<BlockHandle>> {
    let bytes = std::fs::read(path).ctx(path)?;
    let footer = footer_of(&bytes)?;
    let index = Arc::new(Block::new(
        read_handle(&bytes, footer.index)?,
        footer.format,
        Arc::from(Path::new("t")),
        footer.index.offset,
    )?);
    let mut it = index.iter();
    it.seek_to_first()?;
    let mut out = Vec::new();
    while it.valid() {
        out.extend(IndexValue::decode_exact(it.value(), footer.format).map(|v| v.handle));
        it.next()?;
    }
    Ok(out)
}

/// Opens and fully reads a (possibly damaged) table. Any data returned must match the model.
fn read_all_checked(path: &Path, model: &Model) -> Result<()> {
    let t = open(path)?;
    for (k, v) in model {
        if let Some(got) = table_get(&t, k.as_ref())? {
            assert_eq!(got, (k.seqno, k.kind, v.clone()), "wrong data for {k:?}");
        }
    }
    for readahead in READAHEADS {
        let mut it = t.iter().with_readahead(readahead);
        it.seek_to_first()?;
        let mut i = 0;
        while it.valid() {
            assert_eq!(
                Some(&entry(&it)),
                model.get(i).map(|(k, v)| (k.clone(), v.clone())).as_ref()
            );
            i += 1;
            it.next()?;
        }
        let mut it = t.iter().with_readahead(readahead);
        it.seek_to_last()?;
        let mut i = model.len();
        while it.valid() {
            i = i
                .checked_sub(1)
                .unwrap_or_else(|| panic!("a reverse scan yields more entries than written"));
            assert_eq!(
                Some(&entry(&it)),
                model.get(i).map(|(k, v)| (k.clone(), v.clone())).as_ref()
            );
            it.prev()?;
        }
    }
    t.verify_checksums()
}

fn small_model() -> Model {
    sorted(
        (0..40u32)
            .map(|i| {
                put(
                    format!("key{i:03}").as_bytes(),
                    u64::from(i) + 1,
                    format!("v{i}").as_bytes(),
                )
            })
            .collect(),
    )
}

fn flip(path: &Path, at: u64, bit: u8) -> Result<()> {
    let mut bytes = std::fs::read(path).ctx(path)?;
    bytes[usize::try_from(at).unwrap_or(usize::MAX)] ^= 1 << bit;
    std::fs::write(path, bytes).ctx(path)?;
    Ok(())
}

fn assert_corrupt<T: std::fmt::Debug>(r: Result<T>, what: &str) {
    match r {
        Err(e) => assert!(e.is_corruption(), "{what}: expected corruption, got {e}"),
        Ok(v) => panic!("{what}: damage went unnoticed ({v:?})"),
    }
}

#[test]
fn bit_flips_in_each_block_kind_are_detected() -> Result<()> {
    let dir = tempdir()?;
    let good = dir.path().join("good.sst");
    let model = small_model();
    write(&good, &model, opts(128, 10, true))?;
    let bytes = std::fs::read(&good).ctx(&good)?;
    let footer = footer_of(&bytes)?;
    let handles = data_handles(&good)?;
    assert!(handles.len() >= 3);
    let mut regions: Vec<(String, u64)> = handles
        .iter()
        .enumerate()
        .map(|(i, h)| (format!("data block {i}"), h.offset + h.size / 2))
        .collect();
    regions.push(("index".into(), footer.index.offset + 1));
    regions.push(("filter".into(), footer.filter.offset + 50));
    regions.push(("properties".into(), footer.properties.offset));
    regions.push(("footer handles".into(), bytes.len() as u64 - 60));
    regions.push(("footer version".into(), bytes.len() as u64 - 16));
    regions.push(("footer magic".into(), bytes.len() as u64 - 1));
    let last = handles.last().map_or(0, |h| h.offset + h.size);
    regions.push(("trailer type byte".into(), last));
    for (what, at) in regions {
        let path = dir.path().join("bad.sst");
        std::fs::copy(&good, &path).ctx(&path)?;
        flip(&path, at, 3)?;
        assert_corrupt(read_all_checked(&path, &model), &what);
        std::fs::remove_file(&path).ctx(&path)?;
    }
    Ok(())
}

#[test]
fn any_single_bit_flip_is_detected_and_never_returns_wrong_data() -> Result<()> {
    let dir = tempdir()?;
    let good = dir.path().join("good.sst");
    let model = small_model();
    write(&good, &model, opts(256, 10, true))?;
    let len = std::fs::metadata(&good).ctx(&good)?.len();
    let path = dir.path().join("bad.sst");
    for at in 0..len {
        std::fs::copy(&good, &path).ctx(&path)?;
        flip(&path, at, u8::try_from(at % 8).unwrap_or(0))?;
        assert_corrupt(read_all_checked(&path, &model), &format!("flip at {at}"));
    }
    Ok(())
}

#[test]
fn truncated_tables_fail_to_open() -> Result<()> {
    let dir = tempdir()?;
    let good = dir.path().join("good.sst");
    write(&good, &small_model(), opts(128, 10, true))?;
    let bytes = std::fs::read(&good).ctx(&good)?;
    let path = dir.path().join("cut.sst");
    for cut in [
        0,
        1,
        10,
        63,
        64,
        65,
        bytes.len() / 2,
        bytes.len() - 65,
        bytes.len() - 1,
    ] {
        std::fs::write(&path, &bytes[..cut]).ctx(&path)?;
        assert_corrupt(open(&path), &format!("cut at {cut}"));
    }
    Ok(())
}

#[test]
fn empty_table_round_trips() -> Result<()> {
    let dir = tempdir()?;
    let path = dir.path().join("empty.sst");
    let (props, size) = write(&path, &Vec::new(), opts(4096, 10, true))?;
    assert_eq!((props.num_entries, props.num_data_blocks), (0, 0));
    let t = open(&path)?;
    assert_eq!(t.file_size(), size);
    assert!(!t.has_filter());
    check_table(&t, &Vec::new())
}

#[test]
fn abandon_deletes_the_file_and_create_refuses_existing_files() -> Result<()> {
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    let mut b = TableBuilder::create(&crate::fs::os(), &path, TableBuilderOptions::default())?;
    b.add(InternalKeyRef::new(b"a", SeqNo(1), ValueKind::Put), b"1")?;
    assert!(b.estimated_size() > 0);
    assert!(matches!(
        TableBuilder::create(&crate::fs::os(), &path, TableBuilderOptions::default()),
        Err(Error::Io { .. })
    ));
    b.abandon();
    assert!(!path.exists());
    Ok(())
}

#[test]
fn estimated_size_tracks_the_file_being_written() -> Result<()> {
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    let mut b = TableBuilder::create(&crate::fs::os(), &path, opts(1024, 10, false))?;
    let mut last = 0;
    for i in 0..2000u32 {
        b.add(
            InternalKeyRef::new(format!("{i:08}").as_bytes(), SeqNo(1), ValueKind::Put),
            b"value",
        )?;
        assert!(b.estimated_size() >= last);
        last = b.estimated_size();
    }
    let (_, size) = b.finish()?;
    assert!(
        last <= size && size < last + last / 4,
        "estimate {last}, size {size}"
    );
    Ok(())
}

#[test]
fn tables_and_iterators_are_thread_safe() -> Result<()> {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Table>();
    send_sync::<BlockCache>();
    send_sync::<TableCache>();
    send::<TableIter>();
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    let model = small_model();
    write(&path, &model, opts(128, 10, true))?;
    let t = open(&path)?;
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| check_table(&t, &model));
        }
    });
    Ok(())
}

#[test]
fn table_cache_opens_once_and_evicts() -> Result<()> {
    let dir = tempdir()?;
    for n in 1..=3 {
        write(
            &table_path(dir.path(), FileNumber(n)),
            &small_model(),
            opts(128, 10, true),
        )?;
    }
    let cache = TableCache::new(
        crate::fs::os(),
        dir.path().to_path_buf(),
        2,
        BlockCache::new(1 << 20),
    );
    let meta = |n: u64| crate::cache::describe_table_file(dir.path(), FileNumber(n));
    let a = cache.get(&meta(1)?)?;
    assert!(Arc::ptr_eq(&a, &cache.get(&meta(1)?)?));
    assert_eq!(a.file_number(), FileNumber(1));
    assert_eq!(a.path(), table_path(dir.path(), FileNumber(1)));
    a.get(
        InternalKeyRef::new(b"key001", SeqNo::MAX, ValueKind::FOR_SEEK),
        BlockCachePolicy::Fill,
    )?;
    assert!(cache.block_cache().usage_bytes() > 0);
    cache.get(&meta(2)?)?;
    cache.get(&meta(3)?)?; // capacity 2: table 1 is evicted
    assert!(!Arc::ptr_eq(&a, &cache.get(&meta(1)?)?));
    cache.evict(FileNumber(1));
    assert_eq!(
        cache.block_cache().usage_bytes(),
        0,
        "evict drops the table's blocks"
    );
    // The evicted handle still works.
    check_table(&a, &small_model())?;
    let missing = crate::version::FileMeta {
        number: FileNumber(9),
        ..meta(1)?
    };
    assert!(matches!(cache.get(&missing), Err(Error::Io { .. })));
    Ok(())
}

#[test]
fn table_cache_refuses_a_table_that_is_not_the_one_listed() -> Result<()> {
    let dir = tempdir()?;
    let other: Model = vec![put(b"zzz", 9, b"v")];
    write(
        &table_path(dir.path(), FileNumber(1)),
        &small_model(),
        opts(128, 10, true),
    )?;
    write(
        &table_path(dir.path(), FileNumber(2)),
        &other,
        opts(128, 10, true),
    )?;
    let listed = crate::cache::describe_table_file(dir.path(), FileNumber(1))?;
    // Table 1's file replaced by table 2's: a valid table, but not the one the manifest lists.
    std::fs::rename(
        table_path(dir.path(), FileNumber(2)),
        table_path(dir.path(), FileNumber(1)),
    )
    .map_err(|e| Error::io("rename", e))?;
    let cache = TableCache::new(
        crate::fs::os(),
        dir.path().to_path_buf(),
        2,
        BlockCache::new(1 << 20),
    );
    match cache.get(&listed) {
        Err(Error::Corruption { reason, .. }) => {
            assert!(
                reason.contains("not the table the manifest lists"),
                "{reason}"
            );
            assert!(reason.contains("entries"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    Ok(())
}

/// The exact file from section 8 of `docs/format/sstable.md`.
#[test]
fn worked_example_matches_spec() -> Result<()> {
    check_worked_example(TableFormat::V1, include_str!("testdata/worked_example.hex"))
}

/// Section 8.1.
#[test]
fn worked_example_v2_matches_spec() -> Result<()> {
    check_worked_example(
        TableFormat::V2,
        include_str!("testdata/worked_example_v2.hex"),
    )
}

/// Section 8.2.
#[test]
fn worked_example_v3_matches_spec() -> Result<()> {
    check_worked_example(
        TableFormat::V3,
        include_str!("testdata/worked_example_v3.hex"),
    )
}

/// Writes the three entries of `docs/format/sstable.md` section 8 in `format` (4 KiB blocks,
/// no filter, no compression) and compares the file with `expected` (hex, 16 bytes per line).
fn check_worked_example(format: TableFormat, expected: &str) -> Result<()> {
    let o = TableBuilderOptions {
        format,
        ..opts(4096, 0, false)
    };
    let dir = tempdir()?;
    let path = dir.path().join("ex.sst");
    let model = vec![
        put(b"apple", 7, b"red"),
        (
            InternalKey::new(&b"apple"[..], SeqNo(3), ValueKind::Delete),
            Vec::new(),
        ),
        put(b"banana", 5, b"yellow"),
    ];
    // The example predates table ids: its bytes must not depend on a random one.
    let mut b = TableBuilder::create(&crate::fs::os(), &path, o)?.without_table_id();
    for (k, v) in &model {
        b.add(k.as_ref(), v)?;
    }
    let (_, size) = b.finish()?;
    let bytes = std::fs::read(&path).ctx(&path)?;
    assert_eq!(bytes.len() as u64, size);
    let hex: Vec<String> = bytes
        .chunks(16)
        .map(|c| {
            c.iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    assert_eq!(
        hex.join("\n").trim(),
        expected.trim(),
        "\n{}",
        hex.join("\n")
    );
    check_table(&open(&path)?, &model)
}

fn arb_model() -> impl Strategy<Value = Model> {
    let byte = prop::sample::select(vec![0u8, 1, b'a', b'b', 0xfe, 0xff]);
    let user_key = prop::collection::vec(byte, 0..5);
    let kind = prop::sample::select(vec![ValueKind::Delete, ValueKind::Put, ValueKind::Merge]);
    let value = prop::collection::vec(any::<u8>(), 0..40);
    prop::collection::vec(
        (user_key, prop_oneof![Just(0u64), 0u64..50], kind, value),
        0..80,
    )
    .prop_map(|raw| {
        let mut m = sorted(
            raw.into_iter()
                .map(|(u, s, k, v)| (InternalKey::new(u, SeqNo(s), k), v))
                .collect(),
        );
        m.dedup_by(|a, b| a.0 == b.0 || a.0.as_ref().cmp(&b.0.as_ref()).is_eq());
        m
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn table_round_trips_random_entries(
        model in arb_model(),
        block_size in prop::sample::select(vec![1usize, 40, 4096]),
        restart in 1usize..=16,
        bloom in prop::sample::select(vec![0u32, 10]),
        compression in any::<bool>(),
        format in prop::sample::select(TableFormat::ALL.to_vec()),
    ) {
        let run = || -> Result<()> {
            let dir = tempdir()?;
            let path = dir.path().join("t.sst");
            let o = TableBuilderOptions {
                block_restart_interval: restart,
                format,
                ..opts(block_size, bloom, compression)
            };
            write(&path, &model, o)?;
            check_table(&open(&path)?, &model)
        };
        run().map_err(|e| TestCaseError::fail(e.to_string()))?;
    }
}

/// A table of many small blocks for the readahead tests: 2,000 entries in blocks of about
/// 256 bytes.
fn many_blocks_model() -> Model {
    sorted(
        (0..2000u32)
            .map(|i| {
                put(
                    format!("key{i:05}").as_bytes(),
                    u64::from(i) + 1,
                    &noise(usize::try_from(i % 40).unwrap_or(0), u64::from(i)),
                )
            })
            .collect(),
    )
}

#[test]
fn readahead_iterators_match_plain_ones_step_by_step() -> Result<()> {
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    let model = many_blocks_model();
    write(&path, &model, opts(256, 10, true))?;
    let t = open(&path)?;
    let tgts = targets(&model);
    // A random walk of seeks, runs of next and runs of prev, the same on every iterator.
    let mut seed = 0x5eed_u64;
    let mut rand = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        usize::try_from(seed % n.max(1) as u64).unwrap_or(0)
    };
    for policy in [
        BlockCachePolicy::Fill,
        BlockCachePolicy::NoFill,
        BlockCachePolicy::Bypass,
    ] {
        let mut plain = t.iter_with(policy);
        let mut ahead = [64usize, 4096, 256 << 10].map(|ra| t.iter_with(policy).with_readahead(ra));
        for _ in 0..300 {
            let op = rand(4);
            let target = tgts.get(rand(tgts.len())).map(InternalKey::as_ref);
            let steps = rand(200);
            let mut all: Vec<&mut TableIter> = std::iter::once(&mut plain)
                .chain(ahead.iter_mut())
                .collect();
            for it in &mut all {
                match (op, target) {
                    (0, Some(k)) => it.seek(k)?,
                    (1, Some(k)) => it.seek_for_prev(k)?,
                    (2, _) => it.seek_to_first()?,
                    _ => it.seek_to_last()?,
                }
                let forward = steps % 2 == 0;
                for _ in 0..steps {
                    if !it.valid() {
                        break;
                    }
                    if forward { it.next()? } else { it.prev()? }
                }
            }
            let want = plain.valid().then(|| entry(&plain));
            for it in &ahead {
                assert_eq!(it.valid().then(|| entry(it)), want, "policy {policy:?}");
            }
        }
    }
    Ok(())
}

/// Cuts fall at `total * k / parts` bytes: the table holding that byte and the offset into it;
/// a cut on a table boundary starts the next table (offset 0); nothing past the end.
#[test]
fn byte_cuts_locate_each_share_among_the_tables() {
    use super::byte_cuts;
    assert_eq!(byte_cuts(&[100, 100], 2), [(1, 0)]);
    assert_eq!(byte_cuts(&[300], 3), [(0, 100), (0, 200)]);
    assert_eq!(byte_cuts(&[10, 50, 40], 4), [(1, 15), (1, 40), (2, 15)]);
    assert!(byte_cuts(&[], 4).is_empty());
    assert!(byte_cuts(&[7], 1).is_empty());
}

#[test]
fn scans_that_cache_nothing_reuse_block_buffers() -> Result<()> {
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    let model = many_blocks_model();
    write(&path, &model, opts(256, 10, true))?;
    let t = open(&path)?;
    for readahead in READAHEADS {
        let mut it = t
            .iter_with(BlockCachePolicy::NoFill)
            .with_readahead(readahead);
        let mut out = Vec::new();
        it.seek_to_first()?;
        let mut reused = 0;
        while it.valid() {
            out.push(entry(&it));
            it.next()?;
            reused += usize::from(it.spare_capacity() > 0);
        }
        assert_eq!(out, model, "readahead {readahead}");
        assert!(
            reused > 0,
            "readahead {readahead}: no block buffer came back"
        );
    }
    // Blocks that go into the cache stay there: their buffers are never taken back.
    let mut it = t.iter_with(BlockCachePolicy::Fill);
    it.seek_to_first()?;
    while it.valid() {
        it.next()?;
        assert_eq!(it.spare_capacity(), 0);
    }
    Ok(())
}

#[test]
fn keys_out_of_order_in_sound_blocks_are_found_by_the_check() -> Result<()> {
    // One entry per block, every block the same size: swapping two blocks keeps every
    // checksum valid, so only the key-order check can see it (a table written wrong).
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    let model = numbered_puts(4);
    write(&path, &model, opts(1, 10, false))?;
    assert!(open(&path)?.block_problems().is_empty());
    let handles = data_handles(&path)?;
    assert_eq!(handles.len(), 4);
    let (b1, b2) = (handles[1], handles[2]);
    assert_eq!(b1.size, b2.size);
    let stored = usize::try_from(b1.size).unwrap_or(0) + BLOCK_TRAILER_LEN;
    let (o1, o2) = (
        usize::try_from(b1.offset).unwrap_or(0),
        usize::try_from(b2.offset).unwrap_or(0),
    );
    let mut bytes = std::fs::read(&path).ctx(&path)?;
    let first = bytes[o1..o1 + stored].to_vec();
    bytes.copy_within(o2..o2 + stored, o1);
    bytes[o2..o2 + stored].copy_from_slice(&first);
    std::fs::write(&path, &bytes).ctx(&path)?;

    let t = open(&path)?;
    let problems = t.block_problems();
    assert!(!problems.is_empty(), "swapped blocks went unnoticed");
    for p in &problems {
        assert!(p.is_corruption(), "{p}");
    }
    let message = problems[0].to_string();
    assert!(
        message.contains("out of order") || message.contains("past its index key"),
        "{message}"
    );
    assert_corrupt(t.verify_checksums(), "swapped blocks");
    Ok(())
}

/// Version 3 (`docs/format/sstable.md` section 3, "Index block"): a count over whole data
/// blocks takes their entry counts from the index block and reads only the blocks where the
/// range starts and ends; versions 1 and 2 read every block in the range. Both count alike.
#[test]
fn a_version_3_count_reads_only_the_blocks_at_the_ends_of_the_range() -> Result<()> {
    let dir = tempdir()?;
    let model = numbered_puts(400);
    let key = |i: u32| format!("key{i:04}").into_bytes();
    let (lower, upper) = (key(15), key(390));
    for format in TableFormat::ALL {
        let path = dir.path().join(format!("v{}.sst", format.version()));
        let o = TableBuilderOptions {
            format,
            ..opts(128, 10, false)
        };
        write(&path, &model, o)?;
        let blocks = data_handles(&path)?.len();
        assert!(blocks > 20, "{blocks} blocks");
        let cache = BlockCache::new(1 << 20);
        let t = Table::open(
            &crate::fs::OsFs,
            &path,
            FileNumber(1),
            None,
            Arc::clone(&cache),
        )?;
        let count = t.count_in_range(
            std::ops::Bound::Included(&lower),
            std::ops::Bound::Excluded(&upper),
            BlockCachePolicy::Fill,
            0,
        )?;
        assert_eq!(count, 375, "{format:?}");
        let read = cache.misses();
        if format.counts_block_entries() {
            assert_eq!(read, 2, "only the two boundary blocks are read");
        } else {
            assert!(read as usize > blocks / 2, "{format:?}: {read} blocks read");
        }
        // The whole table: the last block ends inside an unbounded range.
        let all = t.count_in_range(
            std::ops::Bound::Unbounded,
            std::ops::Bound::Unbounded,
            BlockCachePolicy::Fill,
            0,
        )?;
        assert_eq!(all, 400, "{format:?}");
    }
    Ok(())
}

/// Rewrites the index block of the version-3 table at `path` (uncompressed blocks) with each
/// data block's entry count plus `delta(i)` for block `i`, keeping every value's length (the
/// counts stay one-byte varints), under a valid CRC: a table written wrong, not damaged on
/// disk. Returns the data blocks' offsets.
fn rewrite_index_counts(path: &Path, delta: impl Fn(usize) -> i64) -> Result<Vec<u64>> {
    let mut bytes = std::fs::read(path).ctx(path)?;
    let footer = footer_of(&bytes)?;
    assert_eq!(footer.format, TableFormat::V3);
    let index = Arc::new(Block::new(
        read_handle(&bytes, footer.index)?,
        footer.format,
        Arc::from(Path::new("t")),
        footer.index.offset,
    )?);
    let mut rebuilt = super::block::BlockBuilder::new(TableFormat::V3, 1);
    let mut it = index.iter();
    it.seek_to_first()?;
    let mut offsets = Vec::new();
    while it.valid() {
        let mut v = IndexValue::decode_exact(it.value(), TableFormat::V3)
            .ok_or_else(|| Error::InvalidArgument("index value".into()))?;
        let d = delta(offsets.len());
        v.entries = v.entries.map(|n| n.saturating_add_signed(d));
        offsets.push(v.handle.offset);
        let mut value = Vec::new();
        v.encode_into(TableFormat::V3, &mut value);
        rebuilt.add(it.key(), &value)?;
        it.next()?;
    }
    let contents = rebuilt.finish().to_vec();
    assert_eq!(contents.len() as u64, footer.index.size);
    let at = usize::try_from(footer.index.offset).unwrap_or(usize::MAX);
    bytes[at..at + contents.len()].copy_from_slice(&contents);
    let trailer = super::format::block_trailer(&contents, super::format::CompressionType::None);
    bytes[at + contents.len()..at + contents.len() + BLOCK_TRAILER_LEN].copy_from_slice(&trailer);
    std::fs::write(path, &bytes).ctx(path)?;
    Ok(offsets)
}

/// Version-3 index values whose entry counts disagree with their blocks but still add up to
/// the table's entries (checksums pass for a table written wrong) are found by the integrity
/// check, each at its data block.
#[test]
fn a_wrong_entry_count_in_the_index_is_found_by_the_check() -> Result<()> {
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    write(&path, &numbered_puts(40), opts(128, 10, false))?;
    assert!(open(&path)?.block_problems().is_empty());
    // One entry moved from the third block's count to the second's.
    let offsets = rewrite_index_counts(&path, |i| match i {
        1 => 1,
        2 => -1,
        _ => 0,
    })?;
    let t = open(&path)?;
    let problems = t.block_problems();
    assert_eq!(problems.len(), 2, "{problems:?}");
    for (problem, wrong) in problems.iter().zip(&offsets[1..3]) {
        match problem {
            Error::Corruption { offset, reason, .. } => {
                assert_eq!(offset, wrong);
                assert!(reason.contains("the index gives the block"), "{reason}");
            }
            other => panic!("expected corruption, got {other}"),
        }
    }
    assert_corrupt(t.verify_checksums(), "a wrong entry count");
    Ok(())
}

/// Entry counts that do not add up to the table's entries (one too many here; a sum that
/// would overflow saturates and fails the same way) make the table fail to open, so a count
/// never uses them.
#[test]
fn index_entry_counts_that_do_not_add_up_fail_the_open() -> Result<()> {
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    write(&path, &numbered_puts(40), opts(128, 10, false))?;
    rewrite_index_counts(&path, |i| i64::from(i == 1))?;
    match open(&path) {
        Err(Error::Corruption { reason, .. }) => {
            assert!(reason.contains("add up to 41"), "{reason}");
            assert!(reason.contains("40 entries"), "{reason}");
        }
        other => panic!("expected corruption, got {other:?}"),
    }
    Ok(())
}

/// `key_at_share` cuts at the end of the data block holding the share, the last block
/// included: a share past the start of the last block found no block before, and a scan
/// whose halfway point fell there ran on one thread (docs/sql.md, "Index builds by sort and
/// ingest").
#[test]
fn key_at_share_cuts_inside_the_last_data_block_too() -> Result<()> {
    let dir = tempdir()?;
    let path = dir.path().join("t.sst");
    let model: Model = (0..2_000u32)
        .map(|i| {
            let key = InternalKey::new(format!("k{i:06}").into_bytes(), SeqNo(1), ValueKind::Put);
            (key, vec![b'v'; 40])
        })
        .collect();
    let (_, size) = write(&path, &model, opts(1024, 10, false))?;
    let t = open(&path)?;
    let largest = &model
        .last()
        .map(|(k, _)| k.user_key.to_vec())
        .unwrap_or_default();
    let mut previous: Option<Bytes> = None;
    for part in [1, size / 4, size / 2, size - size / 50, size - 2, size] {
        let cut = t.key_at_share(part, size)?;
        let Some(cut) = cut else {
            panic!("no cut at {part} of {size} bytes");
        };
        assert!(
            previous.as_ref().is_none_or(|p| *p <= cut),
            "cuts go forward"
        );
        previous = Some(cut);
    }
    // The last share cuts at the last block's index key: at or after every key of the table.
    assert!(previous.is_some_and(|last| last[..] >= largest[..]));
    assert_eq!(t.key_at_share(1, 0)?, None);
    Ok(())
}
