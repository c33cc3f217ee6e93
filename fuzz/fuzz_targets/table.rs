//! Table reader (`engine/src/sstable/reader.rs`, `format.rs`, `filter.rs`, `properties.rs`).
//!
//! The input is a table file. It is opened with `Table::open` (footer, index, filter and
//! properties blocks) as given and, after `repair_table_checksums`, again. An opened table is
//! scanned forwards and backwards, every key found is looked up with `get` and `seek`, a few
//! keys cut from the input are looked up too, and `verify_checksums` runs; all of it must end
//! without panicking, within a bounded number of steps.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_engine::FileNumber;
use strata_engine::cache::BlockCache;
use strata_engine::iterator::InternalIterator;
use strata_engine::sstable::{BlockCachePolicy, Table};
use strata_engine::types::{InternalKey, InternalKeyRef, SeqNo, ValueKind};
use strata_fuzz::{repair_table_checksums, scratch_file};

strata_fuzz::capped_allocator!();

fn exercise(data: &[u8]) {
    let path = scratch_file("fuzz.sst", data);
    // Read twice: as written, and presented at a global sequence number (an ingested table).
    for global_seqno in [None, Some(SeqNo(1 << 40))] {
        let cache = BlockCache::new(1 << 20);
        let Ok(table) = Table::open(
            &strata_engine::fs::OsFs,
            &path,
            FileNumber(7),
            global_seqno,
            cache,
        ) else {
            return;
        };
        let _ = table.properties();
        // Entries are at least 11 bytes (3 header bytes and an 8-byte key trailer) in a data
        // block of at most the file's size, and LZ4 expands at most 256 times.
        let limit = data.len() * 256 / 11 + 2;
        let mut it = table.iter();
        let mut keys: Vec<InternalKey> = Vec::new();
        if it.seek_to_first().is_ok() {
            while it.valid() {
                assert!(keys.len() < limit, "table scan does not end");
                keys.push(it.key().to_owned());
                let _ = it.value_bytes();
                if it.next().is_err() {
                    break;
                }
            }
        }
        let mut steps = 0;
        if it.seek_to_last().is_ok() {
            while it.valid() {
                steps += 1;
                assert!(steps < limit, "backward table scan does not end");
                if it.prev().is_err() {
                    break;
                }
            }
        }
        let cut = data.chunks(16).take(8).map(|c| {
            InternalKey::new(
                bytes::Bytes::copy_from_slice(c),
                SeqNo::MAX,
                ValueKind::FOR_SEEK,
            )
        });
        for k in keys.iter().take(64).cloned().chain(cut) {
            let _ = table.may_contain(&k.user_key);
            let _ = table.get(
                InternalKeyRef::new(&k.user_key, SeqNo::MAX, ValueKind::FOR_SEEK),
                BlockCachePolicy::Fill,
            );
            let _ = table.get(k.as_ref(), BlockCachePolicy::Bypass);
            if it.seek(k.as_ref()).is_ok() && it.valid() {
                let _ = it.next();
            }
            if it.seek_for_prev(k.as_ref()).is_ok() && it.valid() {
                let _ = it.prev();
            }
        }
        let _ = table.verify_checksums();
    }
}

fuzz_target!(|data: &[u8]| {
    exercise(data);
    let mut repaired = data.to_vec();
    if repair_table_checksums(&mut repaired) {
        exercise(&repaired);
    }
});
