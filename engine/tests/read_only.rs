//! `Options::read_only`: an open that writes nothing reads every write (tables and WAL records
//! alike), refuses every change with `Error::ReadOnly`, and works where a read-write open
//! cannot: beside the process holding the `LOCK` file, and on a full disk.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use strata_engine::fs::{
    DirEntry, ENOSPC, Fault, FaultOp, FileLock, FileSystem, MemFs, RandomAccessFile, WritableFile,
};
use strata_engine::{Db, Error, Options, ReadOptions};

fn options() -> Options {
    Options::default()
        .write_buffer_size(16 << 10)
        .block_size(256)
        .target_file_size(8 << 10)
}

fn key(i: usize) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Every file under `dir` with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Writes 2,000 keys (flushed and compacted into tables), a keyspace, and then overwrites,
/// deletes and keyspace writes that stay in the WAL only; closes without a flush.
fn fill(db: &Db) {
    for i in 0..2000 {
        db.put(&key(i), format!("old{i}").as_bytes()).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let runs = db.keyspace("runs").unwrap();
    runs.put(b"run42", b"7").unwrap();
    for i in 0..100 {
        db.put(&key(i), b"new").unwrap();
    }
    db.delete(&key(5)).unwrap();
}

/// What `fill` left, read through `db`.
fn check(db: &Db) {
    assert_eq!(db.get(&key(0)).unwrap().as_deref(), Some(&b"new"[..]));
    assert_eq!(db.get(&key(5)).unwrap(), None);
    assert_eq!(
        db.get(&key(1500)).unwrap().as_deref(),
        Some(&b"old1500"[..])
    );
    assert_eq!(db.range(&ReadOptions::default(), ..).count(), 1999);
    let runs = db.keyspace("runs").unwrap();
    assert_eq!(runs.get(b"run42").unwrap().as_deref(), Some(&b"7"[..]));
}

#[test]
fn a_read_only_open_reads_every_write_refuses_changes_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    fill(&db);
    db.close().unwrap();
    let before = files(dir.path());
    assert!(before.keys().any(|n| n.ends_with(".wal")));

    let ro = Db::open(dir.path(), options().read_only(true)).unwrap();
    check(&ro);
    // Another read-only open beside it: no LOCK is taken.
    let ro2 = Db::open(dir.path(), options().read_only(true)).unwrap();
    check(&ro2);
    ro2.close().unwrap();
    let refused: Vec<(&str, strata_engine::Result<()>)> = vec![
        ("put", ro.put(b"k", b"v")),
        ("delete", ro.delete(&key(1))),
        ("merge", ro.merge(b"k", b"1")),
        ("flush", ro.flush()),
        ("compact_range", ro.compact_range(None, None)),
        ("keyspace", ro.keyspace("new").map(drop)),
        ("drop_keyspace", ro.drop_keyspace("runs")),
        ("ingest", ro.ingest(&[dir.path().join("none.sst")])),
    ];
    for (what, result) in refused {
        assert!(matches!(result, Err(Error::ReadOnly)), "{what}: {result:?}");
    }
    // A checkpoint writes only to its destination.
    let copy = tempfile::tempdir().unwrap();
    ro.checkpoint(copy.path().join("cp")).unwrap();
    check(&ro);
    ro.close().unwrap();
    assert_eq!(
        files(dir.path()),
        before,
        "a read-only open changed the directory"
    );

    let cp = Db::open(copy.path().join("cp"), options()).unwrap();
    check(&cp);
    cp.close().unwrap();
    // A normal open afterwards sees the same.
    let db = Db::open(dir.path(), options()).unwrap();
    check(&db);
    db.close().unwrap();
}

#[test]
fn a_read_only_open_leaves_a_torn_wal_tail_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    fill(&db);
    db.close().unwrap();
    let wal = files(dir.path())
        .into_keys()
        .filter(|n| n.ends_with(".wal"))
        .max()
        .unwrap();
    let path = dir.path().join(&wal);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes.extend_from_slice(&[0xAB; 11]);
    std::fs::write(&path, &bytes).unwrap();

    let ro = Db::open(dir.path(), options().read_only(true)).unwrap();
    check(&ro);
    ro.close().unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
}

#[test]
fn a_read_only_open_of_a_missing_database_fails_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let result = Db::open(&missing, options().read_only(true));
    assert!(
        matches!(result, Err(Error::InvalidArgument(_))),
        "{result:?}"
    );
    assert!(!missing.exists());
}

#[test]
fn a_read_only_open_works_beside_the_writer_and_on_a_full_disk() {
    let fs = MemFs::new();
    let opts = || options().file_system(Arc::new(fs.clone()));
    let db = Db::open("/db", opts()).unwrap();
    fill(&db);
    // The writer holds the LOCK file: a read-write open is refused, a read-only one reads
    // what was written so far.
    assert!(Db::open("/db", opts()).is_err());
    let ro = Db::open("/db", opts().read_only(true)).unwrap();
    check(&ro);
    ro.close().unwrap();
    db.close().unwrap();

    // The disk is full: every create, append, rename, sync and delete fails.
    fs.inject(Fault::new(FaultOp::Any, ENOSPC).sticky());
    let result = Db::open("/db", opts());
    assert!(result.is_err(), "a read-write open needs to write");
    drop(result);
    let listing = |fs: &MemFs| -> BTreeMap<String, Vec<u8>> {
        fs.list_dir(Path::new("/db"))
            .unwrap()
            .into_iter()
            .map(|e| {
                let bytes = fs.contents(&e.path).unwrap_or_default();
                (e.path.display().to_string(), bytes)
            })
            .collect()
    };
    let before = listing(&fs);
    let ro = Db::open("/db", opts().read_only(true)).unwrap();
    check(&ro);
    ro.close().unwrap();
    assert_eq!(listing(&fs), before);
}

/// A file system that runs `hook` once, the first time the engine asks whether a table exists:
/// the moment a read-only open checks the tables its manifest names.
#[derive(Debug)]
struct Racing {
    inner: MemFs,
    hook: Hook,
}

struct Hook(std::sync::Mutex<Option<Box<dyn FnOnce() + Send>>>);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

impl FileSystem for Racing {
    fn create_new(&self, path: &Path) -> std::io::Result<Box<dyn WritableFile>> {
        self.inner.create_new(path)
    }
    fn create(&self, path: &Path) -> std::io::Result<Box<dyn WritableFile>> {
        self.inner.create(path)
    }
    fn open_writable(&self, path: &Path) -> std::io::Result<Box<dyn WritableFile>> {
        self.inner.open_writable(path)
    }
    fn open(&self, path: &Path) -> std::io::Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> std::io::Result<()> {
        self.inner.rename(from, to)
    }
    fn remove_file(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> std::io::Result<()> {
        self.inner.remove_dir_all(path)
    }
    fn create_dir_all(&self, path: &Path) -> std::io::Result<()> {
        self.inner.create_dir_all(path)
    }
    fn sync_dir(&self, path: &Path) -> std::io::Result<()> {
        self.inner.sync_dir(path)
    }
    fn list_dir(&self, path: &Path) -> std::io::Result<Vec<DirEntry>> {
        self.inner.list_dir(path)
    }
    fn file_size(&self, path: &Path) -> std::io::Result<u64> {
        self.inner.file_size(path)
    }
    fn exists(&self, path: &Path) -> bool {
        if path.extension().is_some_and(|e| e == "sst") {
            let hook = self.hook.0.lock().unwrap().take();
            if let Some(hook) = hook {
                hook();
            }
        }
        self.inner.exists(path)
    }
    fn hard_link(&self, src: &Path, dst: &Path) -> std::io::Result<()> {
        self.inner.hard_link(src, dst)
    }
    fn canonicalize(&self, path: &Path) -> std::io::Result<std::path::PathBuf> {
        self.inner.canonicalize(path)
    }
    fn lock(&self, path: &Path) -> std::io::Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

#[test]
fn a_read_only_open_starts_over_when_the_writer_deletes_the_tables_it_was_reading() {
    let fs = MemFs::new();
    let db = Db::open("/db", options().file_system(Arc::new(fs.clone()))).unwrap();
    fill(&db);
    // Between reading the manifest and checking its tables, the writer compacts everything
    // and deletes the tables that manifest named (what a live server does at any moment).
    let writer = db.clone();
    let hook: Box<dyn FnOnce() + Send> = Box::new(move || {
        writer.flush().unwrap();
        writer.compact_range(None, None).unwrap();
    });
    let racing = Racing {
        inner: fs.clone(),
        hook: Hook(std::sync::Mutex::new(Some(hook))),
    };
    let ro = Db::open(
        "/db",
        options().file_system(Arc::new(racing)).read_only(true),
    )
    .unwrap();
    check(&ro);
    ro.close().unwrap();
    db.close().unwrap();
}

#[test]
fn a_read_only_database_keeps_reading_tables_the_writer_deletes_after_its_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path(), options()).unwrap();
    fill(&db);
    db.flush().unwrap();
    let ro = Db::open(dir.path(), options().read_only(true)).unwrap();
    // The writer rewrites every table and deletes the ones the reader's version names.
    let before: Vec<String> = files(dir.path()).into_keys().collect();
    for i in 0..2000 {
        db.put(&key(i), format!("old{i}").as_bytes()).unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let after = files(dir.path());
    let gone = before
        .iter()
        .filter(|n| n.ends_with(".sst") && !after.contains_key(*n))
        .count();
    assert!(gone > 0, "the writer deleted no table");
    // The reader still sees the state as of its open, from tables it opened then.
    check(&ro);
    ro.close().unwrap();
    db.close().unwrap();
}
