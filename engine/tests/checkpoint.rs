//! Checkpoints under concurrent writes: the copy opens and equals the source as of the
//! checkpoint's sequence number.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use strata_engine::{Db, Options, ReadOptions};

#[test]
fn checkpoint_taken_during_writes_equals_the_source_at_its_sequence_number() {
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options::default()
        .write_buffer_size(64 << 10)
        .target_file_size(32 << 10)
        .max_bytes_for_level_base(128 << 10);
    let db = Db::open(dir.path(), options.clone()).expect("open");
    for i in 0..5000u32 {
        db.put(format!("pre{i:05}").as_bytes(), &[1; 50])
            .expect("put");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let db = db.clone();
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                db.put(format!("live{i:07}").as_bytes(), &[2; 50])
                    .expect("put");
                i += 1;
            }
            i
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(100));
    // A snapshot and a checkpoint taken back to back bracket the same writes when the
    // checkpoint reports its sequence number; compare against a snapshot at that number.
    let copy_dir = tempfile::tempdir().expect("tempdir");
    let dest = copy_dir.path().join("copy");
    let snap_before = db.snapshot();
    let seqno = db.checkpoint(&dest).expect("checkpoint");
    let snap_after = db.snapshot();
    std::thread::sleep(std::time::Duration::from_millis(50));
    stop.store(true, Ordering::Relaxed);
    let written = writer.join().expect("writer");
    assert!(written > 0);
    assert!(snap_before.seqno() <= seqno && seqno <= snap_after.seqno());

    let copy = Db::open(&dest, options).expect("open checkpoint");
    let live_keys = |db: &Db, ro: &ReadOptions| -> Vec<Vec<u8>> {
        db.prefix(ro, b"live")
            .map(|kv| kv.expect("item").0.to_vec())
            .collect()
    };
    let copied = live_keys(&copy, &ReadOptions::default());
    let before = live_keys(&db, &ReadOptions::at(&snap_before)).len();
    let after = live_keys(&db, &ReadOptions::at(&snap_after)).len();
    // The writer writes live0000000, live0000001, ... in order, so the source at the
    // checkpoint's sequence number holds a prefix of them, between the two snapshots' counts.
    assert!(
        before <= copied.len() && copied.len() <= after,
        "{before} <= {} <= {after}",
        copied.len()
    );
    for (i, k) in copied.iter().enumerate() {
        assert_eq!(
            k,
            format!("live{i:07}").as_bytes(),
            "the copy holds a prefix of the writes"
        );
    }
    assert_eq!(copy.prefix(&ReadOptions::default(), b"pre").count(), 5000);
    // The copy is independent: writes to it do not reach the source.
    copy.put(b"only-in-copy", b"x").expect("put");
    assert_eq!(db.get(b"only-in-copy").expect("get"), None);
    assert!(
        db.checkpoint(&dest).is_err(),
        "existing destination is refused"
    );
}

#[test]
fn a_damaged_table_fails_the_checkpoint_and_leaves_nothing_at_the_destination() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"a", b"1").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    // Damage the table's footer (its last byte) without changing its size: the writing open
    // reads tables lazily and does not notice.
    let table = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    let mut bytes = std::fs::read(&table).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&table, bytes).unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    // A destination inside the database directory is refused before anything is read.
    for inside in [dir.path().join("copy"), dir.path().join("a").join("b.tmp")] {
        match db.checkpoint(&inside) {
            Err(strata_engine::Error::InvalidArgument(m)) => {
                assert!(m.contains("inside the database directory"), "{m}");
            }
            other => panic!("expected InvalidArgument, got {other:?}"),
        }
        assert!(!inside.exists());
    }
    let outside = tempfile::tempdir().unwrap();
    let dest = outside.path().join("copy");
    let err = db.checkpoint(&dest).unwrap_err();
    assert!(
        matches!(
            err,
            strata_engine::Error::Corruption { .. } | strata_engine::Error::ChecksumMismatch { .. }
        ),
        "{err}"
    );
    assert!(!dest.exists());
    // Truncated: the size the manifest records no longer matches.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&table)
        .unwrap()
        .set_len(10)
        .unwrap();
    let err = db.checkpoint(&dest).unwrap_err();
    assert!(err.to_string().contains("the manifest says"), "{err}");
    assert!(!dest.exists());
}

/// The copy is written into `DEST.checkpoint-tmp` and renamed to `DEST` once complete: a
/// process that dies during a checkpoint leaves no half copy at `DEST`, and the next
/// checkpoint removes what it left. A directory there holding anything else is not touched.
#[test]
fn a_checkpoint_goes_through_a_temporary_directory_and_cleans_up_an_interrupted_one() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), Options::default()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    db.put(b"in-wal", b"w").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let dest = outside.path().join("copy");
    let tmp = outside.path().join("copy.checkpoint-tmp");

    // What a checkpoint killed halfway leaves: some copied files, no CURRENT.
    std::fs::create_dir(&tmp).unwrap();
    std::fs::write(tmp.join("000007.sst"), b"half a table").unwrap();
    std::fs::write(tmp.join("MANIFEST-000001"), b"").unwrap();
    db.checkpoint(&dest).unwrap();
    assert!(!tmp.exists(), "the interrupted copy is removed");
    let names: Vec<String> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, vec!["copy".to_owned()]);
    let copy = Db::open(&dest, Options::default()).unwrap();
    assert_eq!(copy.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(copy.get(b"in-wal").unwrap().as_deref(), Some(&b"w"[..]));
    copy.close().unwrap();

    // A directory of that name holding something else is refused, and kept.
    let dest2 = outside.path().join("copy2");
    let tmp2 = outside.path().join("copy2.checkpoint-tmp");
    std::fs::create_dir(&tmp2).unwrap();
    std::fs::write(tmp2.join("notes.txt"), b"mine").unwrap();
    match db.checkpoint(&dest2) {
        Err(strata_engine::Error::InvalidArgument(m)) => {
            assert!(m.contains("copy2.checkpoint-tmp"), "{m}");
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
    assert_eq!(std::fs::read(tmp2.join("notes.txt")).unwrap(), b"mine");
    assert!(!dest2.exists());
}

/// The in-memory file system renames directories too, so checkpoints work on it.
#[test]
fn a_checkpoint_works_on_the_in_memory_file_system() {
    use strata_engine::fs::MemFs;
    let fs = MemFs::new();
    let options = Options::default().file_system(Arc::new(fs.clone()));
    let db = Db::open("/db", options.clone()).unwrap();
    db.put(b"k", b"v").unwrap();
    db.flush().unwrap();
    db.put(b"in-wal", b"w").unwrap();
    db.checkpoint("/backups/copy").unwrap();
    db.close().unwrap();
    let copy = Db::open("/backups/copy", options).unwrap();
    assert_eq!(copy.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(copy.get(b"in-wal").unwrap().as_deref(), Some(&b"w"[..]));
}
