//! Tests of the file-system seam: [`MemFs`]'s power-loss model and faults, and [`OsFs`]
//! against the same expectations.

use std::io;
use std::path::Path;

use super::*;

fn write(fs: &dyn FileSystem, path: &Path, data: &[u8], sync: bool) -> io::Result<()> {
    let mut f = fs.create_new(path)?;
    f.append(data)?;
    if sync {
        f.sync()?;
    }
    Ok(())
}

#[test]
fn crash_keeps_only_synced_bytes_of_durable_entries() -> io::Result<()> {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir)?;
    let mut f = fs.create_new(&dir.join("a"))?;
    f.append(b"synced")?;
    f.sync()?;
    f.append(b" lost")?;
    write(
        &fs,
        &dir.join("b"),
        b"never durable: no directory sync",
        true,
    )?;
    // `a` became durable with this sync; `b` was created after it.
    fs.remove_file(&dir.join("b"))?;
    fs.sync_dir(dir)?;
    write(&fs, &dir.join("c"), b"synced file, unsynced entry", true)?;
    fs.crash(CrashOptions::default());
    assert_eq!(fs.read(&dir.join("a"))?, b"synced");
    assert!(!fs.exists(&dir.join("b")));
    assert!(!fs.exists(&dir.join("c")));
    // Handles from before the crash are dead.
    assert!(f.append(b"x").is_err());
    Ok(())
}

#[test]
fn rename_is_durable_only_after_directory_sync() -> io::Result<()> {
    let fs = MemFs::new();
    let dir = Path::new("/db");
    fs.create_dir_all(dir)?;
    write(&fs, &dir.join("CURRENT"), b"old", true)?;
    fs.sync_dir(dir)?;
    write(&fs, &dir.join("CURRENT.tmp"), b"new", true)?;
    fs.rename(&dir.join("CURRENT.tmp"), &dir.join("CURRENT"))?;
    assert_eq!(fs.read(&dir.join("CURRENT"))?, b"new");
    fs.crash(CrashOptions::default());
    assert_eq!(fs.read(&dir.join("CURRENT"))?, b"old");
    write(&fs, &dir.join("CURRENT.tmp"), b"new", true)?;
    fs.rename(&dir.join("CURRENT.tmp"), &dir.join("CURRENT"))?;
    fs.sync_dir(dir)?;
    fs.crash(CrashOptions::default());
    assert_eq!(fs.read(&dir.join("CURRENT"))?, b"new");
    assert!(!fs.exists(&dir.join("CURRENT.tmp")));
    Ok(())
}

#[test]
fn torn_crash_keeps_a_prefix_of_the_unsynced_tail() -> io::Result<()> {
    for seed in 0..50 {
        let fs = MemFs::new();
        let dir = Path::new("/d");
        fs.create_dir_all(dir)?;
        let mut f = fs.create_new(&dir.join("log"))?;
        f.append(b"0123")?;
        f.sync()?;
        fs.sync_dir(dir)?;
        f.append(b"456789")?;
        fs.crash(CrashOptions {
            tear_seed: Some(seed),
            flip_bit: false,
        });
        let data = fs.read(&dir.join("log"))?;
        assert!(data.len() >= 4 && data.len() <= 10, "seed {seed}: {data:?}");
        assert_eq!(&data[..], &b"0123456789"[..data.len()]);
    }
    Ok(())
}

#[test]
fn flipped_bit_lands_only_in_the_last_unsynced_append() -> io::Result<()> {
    let mut flipped = 0;
    for seed in 0..50 {
        let fs = MemFs::new();
        let dir = Path::new("/d");
        fs.create_dir_all(dir)?;
        let mut f = fs.create_new(&dir.join("log"))?;
        f.append(&[0u8; 8])?;
        f.sync()?;
        fs.sync_dir(dir)?;
        f.append(&[0u8; 32])?;
        f.append(&[0u8; 32])?;
        fs.crash(CrashOptions {
            tear_seed: Some(seed),
            flip_bit: true,
        });
        let data = fs.read(&dir.join("log"))?;
        // Synced bytes and the earlier unsynced append stay intact.
        assert_eq!(
            &data[..data.len().min(40)],
            &[0u8; 40][..data.len().min(40)],
            "seed {seed}"
        );
        flipped += data.iter().filter(|&&b| b != 0).count();
    }
    assert!(flipped > 0, "some seed keeps a tail with a flipped bit");
    Ok(())
}

#[test]
fn power_cut_fails_that_call_and_every_later_one() -> io::Result<()> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/d"))?;
    let before = fs.calls();
    fs.cut_power_at(before + 3);
    let mut f = fs.create_new(Path::new("/d/x"))?; // call 1
    f.append(b"a")?; // call 2
    assert!(f.sync().is_err()); // call 3: the power is out
    assert!(f.append(b"b").is_err());
    assert!(fs.rename(Path::new("/d/x"), Path::new("/d/y")).is_err());
    assert!(fs.powered_off());
    // Reads still work, as for a process that has not noticed yet.
    assert_eq!(fs.read(Path::new("/d/x"))?, b"a");
    fs.crash(CrashOptions::default());
    assert!(!fs.powered_off());
    assert!(!fs.exists(Path::new("/d/x")));
    Ok(())
}

#[test]
fn faults_match_kind_and_path_and_can_stick() -> io::Result<()> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/d"))?;
    fs.inject(
        Fault::new(FaultOp::Append, ENOSPC)
            .on_path("MANIFEST")
            .after(1),
    );
    let mut log = fs.create_new(Path::new("/d/000001.wal"))?;
    let mut man = fs.create_new(Path::new("/d/MANIFEST-000002"))?;
    log.append(b"x")?;
    man.append(b"first passes")?;
    let err = man.append(b"second fails").expect_err("injected");
    assert_eq!(err.raw_os_error(), Some(ENOSPC));
    man.append(b"one-shot: passes again")?;
    fs.inject(Fault::new(FaultOp::Sync, EIO).sticky());
    assert_eq!(log.sync().map_err(|e| e.raw_os_error()), Err(Some(EIO)));
    assert_eq!(man.sync().map_err(|e| e.raw_os_error()), Err(Some(EIO)));
    fs.clear_faults();
    log.sync()?;
    Ok(())
}

/// A copy's error names the file the failing call was on: a full destination disk is the
/// destination's error, a missing source the source's.
#[test]
fn copy_errors_name_the_file_that_failed() -> io::Result<()> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/src"))?;
    fs.create_dir_all(Path::new("/dst"))?;
    write(&fs, Path::new("/src/a"), b"payload", true)?;
    fs.inject(Fault::new(FaultOp::Append, ENOSPC).on_path("copy"));
    match fs.copy(Path::new("/src/a"), Path::new("/dst/copy")) {
        Err(crate::Error::Io { path, source }) => {
            assert_eq!(path, Path::new("/dst/copy"));
            assert_eq!(source.raw_os_error(), Some(ENOSPC));
        }
        other => panic!("expected the destination's ENOSPC, got {other:?}"),
    }
    match fs.copy(Path::new("/src/missing"), Path::new("/dst/b")) {
        Err(crate::Error::Io { path, source }) => {
            assert_eq!(path, Path::new("/src/missing"));
            assert_eq!(source.kind(), io::ErrorKind::NotFound);
        }
        other => panic!("expected the source's NotFound, got {other:?}"),
    }
    Ok(())
}

/// A directory renames with everything under it; a non-empty target is refused, as by
/// `rename(2)`.
#[test]
fn directories_rename_with_their_contents() -> io::Result<()> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/a/sub"))?;
    write(&fs, Path::new("/a/f"), b"top", true)?;
    write(&fs, Path::new("/a/sub/g"), b"nested", true)?;
    fs.create_dir_all(Path::new("/full"))?;
    write(&fs, Path::new("/full/x"), b"x", true)?;
    let err = fs
        .rename(Path::new("/a"), Path::new("/full"))
        .expect_err("not empty");
    assert_eq!(err.kind(), io::ErrorKind::DirectoryNotEmpty);
    fs.rename(Path::new("/a"), Path::new("/b"))?;
    assert!(!fs.exists(Path::new("/a")));
    assert_eq!(fs.read(Path::new("/b/f"))?, b"top");
    assert_eq!(fs.read(Path::new("/b/sub/g"))?, b"nested");
    Ok(())
}

#[test]
fn locks_are_exclusive_and_released_on_drop_and_crash() -> io::Result<()> {
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/d"))?;
    let lock = fs.lock(Path::new("/d/LOCK"))?;
    let err = fs.lock(Path::new("/d/LOCK")).expect_err("held");
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    drop(lock);
    let _held = fs.lock(Path::new("/d/LOCK"))?;
    fs.crash(CrashOptions::default());
    let _again = fs.lock(Path::new("/d/LOCK"))?;
    Ok(())
}

/// The same basic expectations hold for both implementations.
fn basic_contract(fs: &dyn FileSystem, dir: &Path) -> io::Result<()> {
    fs.create_dir_all(&dir.join("sub"))?;
    write(fs, &dir.join("f"), b"hello world", true)?;
    let err = fs.create_new(&dir.join("f")).expect_err("exists");
    assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
    let r = fs.open(&dir.join("f"))?;
    let mut buf = [0u8; 5];
    r.read_exact_at(&mut buf, 6)?;
    assert_eq!(&buf, b"world");
    assert_eq!(r.read_at(&mut buf, 11)?, 0);
    let err = r.read_exact_at(&mut buf, 8).expect_err("past the end");
    assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
    let mut w = fs.open_writable(&dir.join("f"))?;
    w.truncate(5)?;
    w.append(b"!")?;
    w.sync()?;
    assert_eq!(fs.read(&dir.join("f"))?, b"hello!");
    assert_eq!(fs.file_size(&dir.join("f"))?, 6);
    fs.hard_link(&dir.join("f"), &dir.join("g"))?;
    assert_eq!(
        fs.copy(&dir.join("g"), &dir.join("h"))
            .map_err(io::Error::other)?,
        6
    );
    fs.rename(&dir.join("h"), &dir.join("i"))?;
    fs.remove_file(&dir.join("g"))?;
    let mut names: Vec<(String, bool)> = fs
        .list_dir(dir)?
        .into_iter()
        .filter_map(|e| Some((e.path.file_name()?.to_str()?.to_owned(), e.is_dir)))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            ("f".to_owned(), false),
            ("i".to_owned(), false),
            ("sub".to_owned(), true)
        ]
    );
    assert_eq!(fs.read(&dir.join("i"))?, b"hello!");
    fs.remove_dir_all(&dir.join("sub"))?;
    assert!(!fs.exists(&dir.join("sub")));
    assert_eq!(
        fs.remove_file(&dir.join("g")).map_err(|e| e.kind()),
        Err(io::ErrorKind::NotFound)
    );
    fs.sync_dir(dir)?;
    Ok(())
}

#[test]
fn os_and_mem_file_systems_agree_on_the_basics() -> io::Result<()> {
    let tmp = tempfile::tempdir()?;
    basic_contract(&OsFs, tmp.path())?;
    basic_contract(&MemFs::new(), Path::new("/db"))?;
    Ok(())
}

#[test]
fn available_space_is_the_file_systems_or_what_a_memfs_was_told() -> io::Result<()> {
    let dir = tempfile::tempdir()?;
    let free = OsFs.available_space(dir.path())?;
    assert!(free.is_some_and(|n| n > 0), "{free:?}");
    assert!(OsFs.available_space(&dir.path().join("missing")).is_err());
    let fs = MemFs::new();
    assert_eq!(fs.available_space(Path::new("/"))?, None);
    fs.set_available_space(Some(7));
    assert_eq!(fs.available_space(Path::new("/"))?, Some(7));
    assert!(fs.available_space(Path::new("/missing")).is_err());
    Ok(())
}

#[test]
fn start_writeback_then_sync_keeps_the_bytes() -> io::Result<()> {
    let tmp = tempfile::tempdir()?;
    let path = tmp.path().join("t");
    for fs in [&OsFs as &dyn FileSystem, &MemFs::new()] {
        fs.create_dir_all(tmp.path())?;
        let mut f = fs.create_new(&path)?;
        let data: Vec<u8> = (0..3u32 << 20).map(|i| (i % 251) as u8).collect();
        f.append(&data[..2 << 20])?;
        f.start_writeback(0, 2 << 20)?;
        f.append(&data[2 << 20..])?;
        // A range reaching past the end, and one past any offset, are harmless.
        f.start_writeback(2 << 20, 4 << 20)?;
        f.start_writeback(u64::MAX, 1)?;
        f.sync()?;
        assert_eq!(f.size()?, data.len() as u64);
        drop(f);
        let r = fs.open(&path)?;
        let mut back = vec![0; data.len()];
        r.read_exact_at(&mut back, 0)?;
        assert_eq!(back, data);
        fs.remove_file(&path)?;
    }
    Ok(())
}
