//! [`MemFs`]: an in-memory file system that models power loss and injects I/O errors.
//!
//! What survives [`MemFs::crash`] (a simulated power loss):
//! - of each file, the bytes covered by its last [`WritableFile::sync`] (optionally plus a
//!   random part of the unsynced tail, possibly with one flipped bit: a torn write);
//! - of each directory, the entries as they were at its last [`FileSystem::sync_dir`]: a file
//!   created, renamed or removed after that sync is back to its state at the sync.
//!
//! Simplifications, all on the safe side for the engine's files: directories themselves are
//! durable as soon as they are created or removed (the engine creates its directory once, at
//! open); a truncation is durable at the next sync of the file.
//!
//! Faults: every mutating call (create, append, sync, truncate, rename, remove, link, directory
//! create or sync) is numbered. [`MemFs::cut_power_at`] makes the N-th call and every later one
//! fail with `EIO`, as if the machine stopped there; [`MemFs::inject`] fails chosen calls (by
//! kind and path) with a chosen `errno`, once or until [`MemFs::clear_faults`] (a full disk).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use super::{DirEntry, FileLock, FileSystem, RandomAccessFile, WritableFile};

/// An in-memory file system with power-loss simulation and fault injection. Cloning shares the
/// same files (a handle, like `Arc`). Meant for tests; thread safe.
#[derive(Debug, Clone, Default)]
pub struct MemFs {
    state: Arc<Mutex<State>>,
}

/// The kinds of call a [`Fault`] can fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultOp {
    /// Creating a file (`create_new`, `create`, `hard_link`) or a directory.
    Create,
    /// [`WritableFile::append`].
    Append,
    /// [`WritableFile::sync`].
    Sync,
    /// [`WritableFile::truncate`].
    Truncate,
    /// [`FileSystem::rename`].
    Rename,
    /// [`FileSystem::remove_file`] and [`FileSystem::remove_dir_all`].
    Remove,
    /// [`FileSystem::sync_dir`].
    SyncDir,
    /// Every mutating call.
    Any,
    /// [`FileSystem::open`] (opening a file for reading). Not a mutating call: not matched
    /// by [`FaultOp::Any`], and not counted by [`MemFs::calls`] or a power cut.
    Open,
}

/// An injected failure: the matching calls after the first `skip` ones fail with `errno`.
#[derive(Debug, Clone)]
pub struct Fault {
    /// Which calls it applies to.
    pub op: FaultOp,
    /// Only calls on a path whose file name contains this (for example `"MANIFEST"`, `".wal"`,
    /// `".sst"`); `None` for every path.
    pub path_contains: Option<String>,
    /// Matching calls let through before the first failure.
    pub skip: u64,
    /// The `errno` returned, for example [`super::ENOSPC`] or [`super::EIO`].
    pub errno: i32,
    /// Keep failing every later matching call (a full disk) instead of failing once.
    pub sticky: bool,
}

impl Fault {
    /// Fails the next `op` call on any path with `errno`, once.
    pub fn new(op: FaultOp, errno: i32) -> Fault {
        Fault {
            op,
            path_contains: None,
            skip: 0,
            errno,
            sticky: false,
        }
    }

    /// Only on paths whose file name contains `part`.
    #[must_use]
    pub fn on_path(mut self, part: &str) -> Fault {
        self.path_contains = Some(part.to_owned());
        self
    }

    /// Lets `calls` matching calls through first.
    #[must_use]
    pub fn after(mut self, calls: u64) -> Fault {
        self.skip = calls;
        self
    }

    /// Keeps failing until [`MemFs::clear_faults`].
    #[must_use]
    pub fn sticky(mut self) -> Fault {
        self.sticky = true;
        self
    }
}

/// How [`MemFs::crash`] treats bytes that were written but not synced.
#[derive(Debug, Clone, Copy, Default)]
pub struct CrashOptions {
    /// `Some(seed)`: keep a pseudo-random prefix of each file's unsynced tail (a torn write)
    /// instead of dropping all of it. The same seed tears the same way.
    pub tear_seed: Option<u64>,
    /// With `tear_seed`: also flip one bit inside what is kept of the file's last unsynced
    /// append (a sector written half-way). Earlier unsynced appends are kept intact or not at
    /// all.
    pub flip_bit: bool,
}

#[derive(Debug, Default)]
struct State {
    nodes: HashMap<u64, Node>,
    next_node: u64,
    dirs: BTreeMap<PathBuf, Dir>,
    locks: HashSet<PathBuf>,
    /// Mutating calls so far.
    calls: u64,
    /// The call number at which the power goes out.
    power_cut_at: Option<u64>,
    powered_off: bool,
    faults: Vec<Fault>,
    /// Bumped by every crash: handles from before it stop working.
    generation: u64,
    /// What [`FileSystem::available_space`] reports ([`MemFs::set_available_space`]).
    available: Option<u64>,
}

#[derive(Debug, Default)]
struct Node {
    data: Vec<u8>,
    synced: usize,
    /// Offset where the last append started.
    last_append: usize,
}

#[derive(Debug, Default, Clone)]
struct Dir {
    live: BTreeMap<OsString, u64>,
    durable: BTreeMap<OsString, u64>,
}

fn not_found(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} does not exist", path.display()),
    )
}

fn split(path: &Path) -> io::Result<(&Path, OsString)> {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => Ok((dir, name.to_os_string())),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} names no file", path.display()),
        )),
    }
}

impl State {
    /// Renames directory `from` (and everything under it) to `to`, which must not exist or
    /// be an empty directory, as `rename(2)` allows.
    fn rename_dir(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        if let Ok((parent, name)) = split(to)
            && self
                .dirs
                .get(parent)
                .is_some_and(|p| p.live.contains_key(&name))
        {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} is a file", to.display()),
            ));
        }
        let occupied = self
            .dirs
            .iter()
            .any(|(d, dir)| (d.starts_with(to) && d != to) || (d == to && !dir.live.is_empty()));
        if occupied {
            return Err(io::Error::new(
                io::ErrorKind::DirectoryNotEmpty,
                format!("{} is not empty", to.display()),
            ));
        }
        let moved: Vec<PathBuf> = self
            .dirs
            .keys()
            .filter(|d| d.starts_with(from))
            .cloned()
            .collect();
        for old in moved {
            let Some(dir) = self.dirs.remove(&old) else {
                continue;
            };
            let new = match old.strip_prefix(from) {
                Ok(rest) if !rest.as_os_str().is_empty() => to.join(rest),
                _ => to.to_path_buf(),
            };
            self.dirs.insert(new, dir);
        }
        Ok(())
    }

    /// The injected [`FaultOp::Open`] fault for opening `path` for reading, if one is due.
    fn open_fault(&mut self, path: &Path) -> io::Result<()> {
        self.due_fault(path, |op| op == FaultOp::Open)
    }

    /// Numbers a mutating call and decides whether it fails.
    fn begin(&mut self, op: FaultOp, path: &Path) -> io::Result<()> {
        self.calls += 1;
        if self.power_cut_at.is_some_and(|n| self.calls >= n) {
            self.powered_off = true;
        }
        if self.powered_off {
            return Err(io::Error::other(format!(
                "power cut (MemFs) before call {}",
                self.calls
            )));
        }
        self.due_fault(path, |f| f == op || f == FaultOp::Any)
    }

    /// Fails with the first injected fault whose op passes `matches` and whose path filter
    /// takes `path`, unless it still lets calls through (`skip`); a fault that is not sticky
    /// goes once it fires.
    fn due_fault(&mut self, path: &Path, matches: impl Fn(FaultOp) -> bool) -> io::Result<()> {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let hit = self.faults.iter().position(|f| {
            matches(f.op) && f.path_contains.as_ref().is_none_or(|p| name.contains(p))
        });
        if let Some(i) = hit
            && let Some(fault) = self.faults.get_mut(i)
        {
            if fault.skip > 0 {
                fault.skip -= 1;
            } else {
                let errno = fault.errno;
                if !fault.sticky {
                    self.faults.remove(i);
                }
                return Err(io::Error::from_raw_os_error(errno));
            }
        }
        Ok(())
    }

    fn dir(&self, path: &Path) -> io::Result<&Dir> {
        self.dirs.get(path).ok_or_else(|| not_found(path))
    }

    fn dir_mut(&mut self, path: &Path) -> io::Result<&mut Dir> {
        self.dirs.get_mut(path).ok_or_else(|| not_found(path))
    }

    fn lookup(&self, path: &Path) -> io::Result<u64> {
        let (dir, name) = split(path)?;
        self.dir(dir)?
            .live
            .get(&name)
            .copied()
            .ok_or_else(|| not_found(path))
    }

    fn new_node(&mut self) -> u64 {
        self.next_node += 1;
        self.nodes.insert(self.next_node, Node::default());
        self.next_node
    }

    fn node_mut(&mut self, id: u64, generation: u64) -> io::Result<&mut Node> {
        if generation != self.generation {
            return Err(io::Error::other(
                "file handle opened before a simulated crash",
            ));
        }
        self.nodes
            .get_mut(&id)
            .ok_or_else(|| io::Error::other("file vanished"))
    }
}

impl MemFs {
    /// An empty file system with the root directory `/`.
    pub fn new() -> MemFs {
        let fs = MemFs::default();
        fs.state
            .lock()
            .dirs
            .insert(PathBuf::from("/"), Dir::default());
        fs
    }

    /// Mutating calls made so far (what [`MemFs::cut_power_at`] counts).
    pub fn calls(&self) -> u64 {
        self.state.lock().calls
    }

    /// Makes mutating call number `call` (1-based, counted as [`MemFs::calls`]) and every later
    /// one fail with an error, as if the power went out just before it. Reads still work.
    pub fn cut_power_at(&self, call: u64) {
        self.state.lock().power_cut_at = Some(call);
    }

    /// Whether the power is out ([`MemFs::cut_power_at`] was reached).
    pub fn powered_off(&self) -> bool {
        self.state.lock().powered_off
    }

    /// Adds a fault; several can be armed at once (the first matching one applies).
    pub fn inject(&self, fault: Fault) {
        self.state.lock().faults.push(fault);
    }

    /// Removes every armed fault (the disk has space again).
    pub fn clear_faults(&self) {
        self.state.lock().faults.clear();
    }

    /// Sets what [`FileSystem::available_space`] reports (`None`, unknown, by default). Only
    /// reported: writes are not refused by it (inject an `ENOSPC` [`Fault`] for that).
    pub fn set_available_space(&self, bytes: Option<u64>) {
        self.state.lock().available = bytes;
    }

    /// Simulates a power loss and restart: every directory goes back to its last synced entries,
    /// every file to its synced bytes (see [`CrashOptions`] for torn writes), locks are released,
    /// faults and the power cut are cleared, and handles opened before stop working.
    pub fn crash(&self, options: CrashOptions) {
        let mut st = self.state.lock();
        let mut durable = HashSet::new();
        for dir in st.dirs.values_mut() {
            dir.live = dir.durable.clone();
            durable.extend(dir.live.values().copied());
        }
        st.nodes.retain(|id, _| durable.contains(id));
        for (&id, node) in &mut st.nodes {
            let unsynced = node.data.len().saturating_sub(node.synced);
            let mut keep = node.synced;
            if let Some(seed) = options.tear_seed
                && unsynced > 0
            {
                let h = BuildHasherDefault::<DefaultHasher>::default().hash_one((seed, id));
                let extra = usize::try_from(h % (unsynced as u64 + 1)).unwrap_or(0);
                keep += extra;
                let from = node.last_append.max(node.synced);
                if options.flip_bit && keep > from {
                    let span = (keep - from) as u64;
                    let at = from + usize::try_from((h >> 20) % span).unwrap_or(0);
                    if let Some(b) = node.data.get_mut(at) {
                        *b ^= 1 << (h >> 56 & 7);
                    }
                }
            }
            node.data.truncate(keep);
            node.synced = node.data.len();
        }
        st.locks.clear();
        st.faults.clear();
        st.power_cut_at = None;
        st.powered_off = false;
        st.generation += 1;
    }

    /// The current contents of a file (for tests that damage files).
    pub fn contents(&self, path: &Path) -> Option<Vec<u8>> {
        let st = self.state.lock();
        let id = st.lookup(path).ok()?;
        st.nodes.get(&id).map(|n| n.data.clone())
    }

    /// Replaces a file's contents, durably (for tests that damage files).
    ///
    /// # Errors
    /// [`io::ErrorKind::NotFound`] when the file does not exist.
    pub fn set_contents(&self, path: &Path, data: Vec<u8>) -> io::Result<()> {
        let mut st = self.state.lock();
        let id = st.lookup(path)?;
        let generation = st.generation;
        let node = st.node_mut(id, generation)?;
        node.synced = data.len();
        node.data = data;
        Ok(())
    }

    fn writable(&self, id: u64, path: &Path, generation: u64) -> Box<dyn WritableFile> {
        Box::new(MemWritable {
            fs: self.clone(),
            id,
            path: path.to_path_buf(),
            generation,
        })
    }
}

#[derive(Debug)]
struct MemWritable {
    fs: MemFs,
    id: u64,
    path: PathBuf,
    generation: u64,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> io::Result<()> {
        let mut st = self.fs.state.lock();
        st.begin(FaultOp::Append, &self.path)?;
        let node = st.node_mut(self.id, self.generation)?;
        node.last_append = node.data.len();
        node.data.extend_from_slice(data);
        Ok(())
    }

    fn sync(&mut self) -> io::Result<()> {
        let mut st = self.fs.state.lock();
        st.begin(FaultOp::Sync, &self.path)?;
        let node = st.node_mut(self.id, self.generation)?;
        node.synced = node.data.len();
        Ok(())
    }

    fn truncate(&mut self, len: u64) -> io::Result<()> {
        let mut st = self.fs.state.lock();
        st.begin(FaultOp::Truncate, &self.path)?;
        let len = usize::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
        let node = st.node_mut(self.id, self.generation)?;
        node.data.resize(len, 0);
        node.synced = node.synced.min(len);
        node.last_append = node.last_append.min(len);
        Ok(())
    }

    fn size(&self) -> io::Result<u64> {
        let mut st = self.fs.state.lock();
        Ok(st.node_mut(self.id, self.generation)?.data.len() as u64)
    }
}

#[derive(Debug)]
struct MemReadable {
    fs: MemFs,
    id: u64,
    generation: u64,
}

impl RandomAccessFile for MemReadable {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut st = self.fs.state.lock();
        let node = st.node_mut(self.id, self.generation)?;
        let start = usize::try_from(offset).unwrap_or(usize::MAX);
        let Some(src) = node.data.get(start..) else {
            return Ok(0);
        };
        let n = src.len().min(buf.len());
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), src.get(..n)) {
            dst.copy_from_slice(src);
        }
        Ok(n)
    }

    fn size(&self) -> io::Result<u64> {
        let mut st = self.fs.state.lock();
        Ok(st.node_mut(self.id, self.generation)?.data.len() as u64)
    }
}

#[derive(Debug)]
struct MemLock {
    fs: MemFs,
    path: PathBuf,
    generation: u64,
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        let mut st = self.fs.state.lock();
        if st.generation == self.generation {
            st.locks.remove(&self.path);
        }
    }
}

impl FileSystem for MemFs {
    fn create_new(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        st.begin(FaultOp::Create, path)?;
        let (dir, name) = split(path)?;
        if st.dir(dir)?.live.contains_key(&name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", path.display()),
            ));
        }
        let id = st.new_node();
        st.dir_mut(dir)?.live.insert(name, id);
        let generation = st.generation;
        Ok(self.writable(id, path, generation))
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let mut st = self.state.lock();
        st.begin(FaultOp::Create, path)?;
        let (dir, name) = split(path)?;
        let generation = st.generation;
        let id = match st.dir(dir)?.live.get(&name).copied() {
            Some(id) => {
                let node = st.node_mut(id, generation)?;
                node.data.clear();
                node.synced = 0;
                id
            }
            None => {
                let id = st.new_node();
                st.dir_mut(dir)?.live.insert(name, id);
                id
            }
        };
        Ok(self.writable(id, path, generation))
    }

    fn open_writable(&self, path: &Path) -> io::Result<Box<dyn WritableFile>> {
        let st = self.state.lock();
        let id = st.lookup(path)?;
        Ok(self.writable(id, path, st.generation))
    }

    fn open(&self, path: &Path) -> io::Result<Arc<dyn RandomAccessFile>> {
        let mut st = self.state.lock();
        st.open_fault(path)?;
        let id = st.lookup(path)?;
        Ok(Arc::new(MemReadable {
            fs: self.clone(),
            id,
            generation: st.generation,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.begin(FaultOp::Rename, to)?;
        if st.dirs.contains_key(from) {
            return st.rename_dir(from, to);
        }
        let (from_dir, from_name) = split(from)?;
        let (to_dir, to_name) = split(to)?;
        st.dir(to_dir)?;
        let id = st
            .dir_mut(from_dir)?
            .live
            .remove(&from_name)
            .ok_or_else(|| not_found(from))?;
        st.dir_mut(to_dir)?.live.insert(to_name, id);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.begin(FaultOp::Remove, path)?;
        let (dir, name) = split(path)?;
        st.dir_mut(dir)?
            .live
            .remove(&name)
            .map(|_| ())
            .ok_or_else(|| not_found(path))
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.begin(FaultOp::Remove, path)?;
        st.dir(path)?;
        st.dirs.retain(|d, _| !d.starts_with(path));
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.begin(FaultOp::Create, path)?;
        for dir in path.ancestors() {
            if dir.as_os_str().is_empty() {
                continue;
            }
            if let Ok((parent, name)) = split(dir)
                && st
                    .dirs
                    .get(parent)
                    .is_some_and(|p| p.live.contains_key(&name))
            {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} is a file", dir.display()),
                ));
            }
            st.dirs.entry(dir.to_path_buf()).or_default();
        }
        Ok(())
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.begin(FaultOp::SyncDir, path)?;
        let dir = st.dir_mut(path)?;
        dir.durable = dir.live.clone();
        Ok(())
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let st = self.state.lock();
        let mut entries: Vec<DirEntry> = st
            .dir(path)?
            .live
            .keys()
            .map(|name| DirEntry {
                path: path.join(name),
                is_dir: false,
            })
            .collect();
        entries.extend(
            st.dirs
                .keys()
                .filter(|d| d.parent() == Some(path))
                .map(|d| DirEntry {
                    path: d.clone(),
                    is_dir: true,
                }),
        );
        Ok(entries)
    }

    fn file_size(&self, path: &Path) -> io::Result<u64> {
        let st = self.state.lock();
        let id = st.lookup(path)?;
        Ok(st.nodes.get(&id).map_or(0, |n| n.data.len() as u64))
    }

    fn exists(&self, path: &Path) -> bool {
        let st = self.state.lock();
        st.dirs.contains_key(path) || st.lookup(path).is_ok()
    }

    fn hard_link(&self, src: &Path, dst: &Path) -> io::Result<()> {
        let mut st = self.state.lock();
        st.begin(FaultOp::Create, dst)?;
        let id = st.lookup(src)?;
        let (dir, name) = split(dst)?;
        let dir = st.dir_mut(dir)?;
        if dir.live.contains_key(&name) {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists", dst.display()),
            ));
        }
        dir.live.insert(name, id);
        Ok(())
    }

    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        if self.exists(path) {
            Ok(path.to_path_buf())
        } else {
            Err(not_found(path))
        }
    }

    fn available_space(&self, path: &Path) -> io::Result<Option<u64>> {
        if self.exists(path) {
            Ok(self.state.lock().available)
        } else {
            Err(not_found(path))
        }
    }

    fn lock(&self, path: &Path) -> io::Result<Box<dyn FileLock>> {
        let mut st = self.state.lock();
        if st.locks.contains(path) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                format!("{} is locked", path.display()),
            ));
        }
        if st.lookup(path).is_err() {
            let (dir, name) = split(path)?;
            st.dir(dir)?;
            let id = st.new_node();
            let dir = st.dir_mut(dir)?;
            dir.live.insert(name.clone(), id);
            dir.durable.insert(name, id);
        }
        st.locks.insert(path.to_path_buf());
        Ok(Box::new(MemLock {
            fs: self.clone(),
            path: path.to_path_buf(),
            generation: st.generation,
        }))
    }
}
