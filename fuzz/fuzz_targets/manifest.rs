//! Manifest replay and the version edit codec (`engine/src/version/`).
//!
//! 1. The input as one encoded `VersionEdit`: `decode` must not panic, and whatever decodes
//!    must survive `encode` + `decode` unchanged.
//! 2. The input as a manifest file (WAL framing, `docs/format/manifest.md`), as given and after
//!    `repair_wal_checksums`: `VersionSet::recover` reads `CURRENT`, replays every edit
//!    (torn-tail rule, edit application, version invariants) and writes a new manifest. It
//!    must return a version or an error, never panic; a recovered set must recover again from
//!    the manifest it wrote, to the same keyspaces, versions and counters.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_engine::version::{VersionEdit, VersionSet};
use strata_fuzz::{fresh_dir, repair_wal_checksums};

strata_fuzz::capped_allocator!();

fn edit_round_trip(data: &[u8]) {
    let Ok(edit) = VersionEdit::decode(data) else {
        return;
    };
    let _ = edit.to_string();
    let mut encoded = Vec::new();
    edit.encode(&mut encoded);
    let again = VersionEdit::decode(&encoded).expect("an encoded edit decodes");
    assert_eq!(again, edit, "edit changed in an encode/decode round trip");
}

/// Everything a recovered set knows, for comparing two recoveries.
fn state(set: &VersionSet) -> String {
    let keyspaces: Vec<_> = set
        .keyspaces()
        .into_iter()
        .map(|(id, name)| {
            let levels = set.current_of(id).map(|v| v.levels.clone());
            (id, name, levels, set.keyspace_log_number(id))
        })
        .collect();
    format!(
        "{keyspaces:?} log {} last {}",
        set.log_number(),
        set.last_seqno().get()
    )
}

fn recover(manifest: &[u8]) {
    let dir = fresh_dir("manifest-db");
    std::fs::write(dir.join("CURRENT"), b"MANIFEST-000001\n").expect("write CURRENT");
    std::fs::write(dir.join("MANIFEST-000001"), manifest).expect("write the manifest");
    let Ok(set) = VersionSet::recover(&strata_engine::fs::os(), &dir) else {
        return;
    };
    let _ = set.current().num_files();
    let (before, next) = (state(&set), set.next_file_number());
    drop(set);
    let again = VersionSet::recover(&strata_engine::fs::os(), &dir)
        .expect("a manifest written by recovery recovers");
    assert_eq!(state(&again), before, "the state changed on a re-recovery");
    assert!(
        again.next_file_number() > next,
        "file numbers must not go back"
    );
}

fuzz_target!(|data: &[u8]| {
    edit_round_trip(data);
    recover(data);
    let mut repaired = data.to_vec();
    if repair_wal_checksums(&mut repaired) {
        recover(&repaired);
    }
});
