//! Whole-key-space commands: `SCAN`, `KEYS`, `DBSIZE`, `FLUSHDB`, `FLUSHALL`, `DATABASES`.
//!
//! # SCAN cursors
//! Redis clients treat the cursor as an unsigned decimal number, so a cursor cannot carry
//! the key to resume from. The server keeps a table of cursors instead: cursor `n` names
//! (database, next key). Resuming continues at that key in key order, so every key present
//! for the whole scan is returned exactly once, whatever is written meanwhile (stronger than
//! Redis's guarantee, which may repeat keys). The table holds the newest
//! [`MAX_CURSORS`] cursors, fewer when their resume keys would take more than
//! [`MAX_CURSOR_BYTES`] (keys may be 64 KiB long); an older or unknown cursor gets
//! `ERR invalid cursor`. Numbers
//! start at a random point each time the server starts, so a cursor from before a restart is
//! unknown rather than another client's scan (numbering from 1 each time, a client holding
//! cursor 1 across a restart continued someone else's scan, skipping keys silently).

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use parking_lot::Mutex;
use strata_query::exec::{RECLAIM_MIN_BYTES, RECLAIM_MIN_ENTRIES};

use super::commands::{NOT_INTEGER, SYNTAX, arg};
use super::session::Session;
use crate::databases::{Database, KV_PREFIX, KvBatch};
use crate::error::{resp_engine_error, resp_server_error};
use crate::glob;
use crate::protocol::request::parse_decimal;

/// Most live SCAN cursors kept.
pub(crate) const MAX_CURSORS: usize = 65_536;

/// Most bytes the live SCAN cursors' entries take, counted as [`CursorEntry::cost`]: 64 MiB,
/// a thousand cursors at the longest keys (64 KiB), all 65,536 at keys up to ~900 bytes.
pub(crate) const MAX_CURSOR_BYTES: usize = 64 << 20;

/// Keys deleted per engine write by FLUSHDB.
const FLUSH_BATCH: usize = 10_000;

#[derive(Debug)]
struct CursorEntry {
    database: String,
    next_key: Bytes,
}

impl CursorEntry {
    /// What the entry costs toward [`MAX_CURSOR_BYTES`], in bytes: its key and database name,
    /// and a fixed 64 for the table's own slots.
    fn cost(&self) -> usize {
        self.next_key.len() + self.database.len() + 64
    }
}

#[derive(Debug)]
struct CursorState {
    next_id: u64,
    entries: HashMap<u64, CursorEntry>,
    order: VecDeque<u64>,
    /// The sum of the entries' [`CursorEntry::cost`].
    bytes: usize,
}

impl Default for CursorState {
    fn default() -> Self {
        // The standard library's per-process random hash keys; the low 32 bits are left
        // clear, so a server hands out 4 billion cursors before its numbers wrap.
        let random = std::hash::BuildHasher::hash_one(&std::hash::RandomState::new(), 0u8);
        CursorState {
            next_id: random & !u64::from(u32::MAX),
            entries: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
        }
    }
}

/// Live SCAN cursors, shared by all connections.
#[derive(Debug, Default)]
pub(crate) struct CursorTable {
    state: Mutex<CursorState>,
}

impl CursorTable {
    /// Stores a cursor resuming at `next_key`; returns its number (never 0).
    fn insert(&self, database: &str, next_key: Bytes) -> u64 {
        let mut st = self.state.lock();
        st.next_id = st.next_id.wrapping_add(1).max(1);
        let id = st.next_id;
        // A copy: the key must not keep a larger buffer it was cut from alive.
        let entry = CursorEntry {
            database: database.to_owned(),
            next_key: Bytes::copy_from_slice(&next_key),
        };
        st.bytes += entry.cost();
        if let Some(replaced) = st.entries.insert(id, entry) {
            st.bytes -= replaced.cost();
        }
        st.order.push_back(id);
        while st.order.len() > MAX_CURSORS || st.bytes > MAX_CURSOR_BYTES {
            let Some(old) = st.order.pop_front() else {
                break;
            };
            if let Some(evicted) = st.entries.remove(&old) {
                st.bytes -= evicted.cost();
            }
        }
        id
    }

    /// The resume key of cursor `id` in `database` (the cursor stays valid: a client may
    /// retry a SCAN call).
    fn get(&self, database: &str, id: u64) -> Option<Bytes> {
        let st = self.state.lock();
        st.entries
            .get(&id)
            .filter(|e| e.database == database)
            .map(|e| e.next_key.clone())
    }
}

/// A SCAN cursor read as Redis reads it (C's `strtoul` over the argument up to a NUL byte,
/// all of it consumed, no leading space, no overflow): decimal digits after an optional `+`
/// or `-` (negation wraps, so `-0` is 0), and the empty string is 0. `None` is
/// `ERR invalid cursor`.
fn parse_cursor(arg: &[u8]) -> Option<u64> {
    let text = crate::protocol::reply::echoed(arg, usize::MAX);
    let (negative, digits) = match text.split_first() {
        None => return Some(0),
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some(_) => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = digits.iter().try_fold(0u64, |n, d| {
        n.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })?;
    Some(if negative { n.wrapping_neg() } else { n })
}

/// SCAN cursor [MATCH pattern] [COUNT n] [TYPE type]
pub(crate) fn scan(s: &mut Session, args: &[Bytes]) {
    let Some(cursor) = parse_cursor(arg(args, 1)) else {
        return s.out.error("ERR invalid cursor");
    };
    let mut pattern: Option<&[u8]> = None;
    let mut count: usize = 10;
    let mut only_strings = true;
    let mut i = 2;
    while i < args.len() {
        let opt = arg(args, i).to_ascii_uppercase();
        let value = args.get(i + 1);
        match (opt.as_slice(), value) {
            (b"MATCH", Some(p)) => pattern = Some(p),
            // As Redis: a valid integer below 1 is a syntax error, not a bad integer.
            (b"COUNT", Some(n)) => match parse_decimal(n) {
                Some(n) if n >= 1 => count = usize::try_from(n).unwrap_or(usize::MAX),
                Some(_) => return s.out.error(SYNTAX),
                None => return s.out.error(NOT_INTEGER),
            },
            (b"TYPE", Some(t)) => only_strings = t.eq_ignore_ascii_case(b"string"),
            _ => return s.out.error(SYNTAX),
        }
        i += 2;
    }
    let start = if cursor == 0 {
        None
    } else {
        match s.shared.cursors.get(s.db().name(), cursor) {
            Some(k) => Some(k),
            None => return s.out.error("ERR invalid cursor"),
        }
    };
    // Keys matching the pattern share its literal prefix and lie together in key order: the
    // scan starts there (or at the cursor, if later) and ends past them.
    let prefix = pattern.map(glob::literal_prefix).unwrap_or_default();
    let start = match start {
        Some(k) if k.as_ref() >= prefix.as_slice() => Some(k.to_vec()),
        _ => Some(prefix.clone()).filter(|p| !p.is_empty()),
    };
    let mut found = Vec::new();
    let mut next = None;
    for (examined, kv) in s.db().scan_from(start.as_deref()).enumerate() {
        let (key, _) = match kv {
            Ok(kv) => kv,
            Err(e) => return s.out.error(&resp_engine_error(&e)),
        };
        if !key.starts_with(&prefix) {
            break;
        }
        if examined == count {
            next = Some(key);
            break;
        }
        if only_strings && pattern.is_none_or(|p| glob::matches(p, &key)) {
            found.push(key);
        }
    }
    let next_id = next.map_or(0, |k| s.shared.cursors.insert(s.db().name(), k));
    s.out.array(2);
    s.out.bulk(next_id.to_string().as_bytes());
    s.out.array(found.len());
    for k in &found {
        s.out.bulk(k);
    }
}

/// KEYS pattern
pub(crate) fn keys(s: &mut Session, args: &[Bytes]) {
    let pattern = arg(args, 1);
    let prefix = glob::literal_prefix(pattern);
    let mut found = Vec::new();
    for kv in s
        .db()
        .scan_from(Some(prefix.as_slice()).filter(|p| !p.is_empty()))
    {
        match kv {
            Ok((key, _)) if !key.starts_with(&prefix) => break,
            Ok((key, _)) if glob::matches(pattern, &key) => found.push(key),
            Ok(_) => {}
            Err(e) => return s.out.error(&resp_engine_error(&e)),
        }
    }
    s.out.array(found.len());
    for k in &found {
        s.out.bulk(k);
    }
}

/// Exact number of Redis keys in `db` (a full scan).
pub(crate) fn count_keys(db: &Database) -> strata_engine::Result<u64> {
    let mut n = 0u64;
    for kv in db.scan_from(None) {
        kv?;
        n += 1;
    }
    Ok(n)
}

/// DBSIZE: exact, counted by a scan of the key space.
pub(crate) fn dbsize(s: &mut Session, _args: &[Bytes]) {
    match count_keys(s.db()) {
        Ok(n) => s.out.integer(i64::try_from(n).unwrap_or(i64::MAX)),
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

/// Deletes every Redis key of `db`, holding all key locks (commands that lock keys wait
/// meanwhile): first the engine's tables holding nothing else, whole and without tombstones
/// (`Db::delete_files_in_range`: keys vanish, none comes back with an older value), then the
/// rest in batches. After as many deletes as make `DROP TABLE` compact
/// ([`RECLAIM_MIN_ENTRIES`] keys or [`RECLAIM_MIN_BYTES`] of keys and values), the Redis key
/// range is compacted, with the locks released, so the space is freed and later scans do not
/// step over the tombstones (docs/server.md, "FLUSHDB").
fn flush(db: &Database) -> strata_engine::Result<()> {
    let (lo, hi) = ([KV_PREFIX], [KV_PREFIX + 1]);
    let (mut deleted, mut deleted_bytes) = (0_usize, 0_usize);
    {
        let _locks = db.lock_all();
        db.db().delete_files_in_range(&lo, &hi)?;
        let mut batch = KvBatch::new();
        for kv in db.scan_from(None) {
            let (key, value) = kv?;
            batch.delete(&key);
            deleted += 1;
            deleted_bytes = deleted_bytes.saturating_add(key.len() + value.len());
            if batch.len() >= FLUSH_BATCH {
                db.write(std::mem::take(&mut batch))?;
            }
        }
        db.write(batch)?;
    }
    // After the key locks are released: the compaction does not change what anyone reads.
    if deleted >= RECLAIM_MIN_ENTRIES || deleted_bytes >= RECLAIM_MIN_BYTES {
        db.db().compact_range(Some(&lo), Some(&hi))?;
    }
    Ok(())
}

fn flush_mode_ok(args: &[Bytes]) -> bool {
    match args.get(1) {
        None => args.len() == 1,
        Some(m) => {
            args.len() == 2 && (m.eq_ignore_ascii_case(b"SYNC") || m.eq_ignore_ascii_case(b"ASYNC"))
        }
    }
}

/// FLUSHDB [ASYNC | SYNC] (always synchronous).
pub(crate) fn flushdb(s: &mut Session, args: &[Bytes]) {
    if !flush_mode_ok(args) {
        return s.out.error(SYNTAX);
    }
    match flush(s.db()) {
        Ok(()) => s.out.ok(),
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

/// FLUSHALL [ASYNC | SYNC]: every database under the data directory.
pub(crate) fn flushall(s: &mut Session, args: &[Bytes]) {
    if !flush_mode_ok(args) {
        return s.out.error(SYNTAX);
    }
    // Every database is opened before any is emptied, so one that cannot be opened (more on
    // disk than --max-databases, a damaged one) fails the command with nothing flushed.
    let mut dbs = Vec::new();
    for name in s.shared.databases.list() {
        match s.shared.databases.get_or_open(&name) {
            Ok(db) => dbs.push(db),
            Err(e) => return s.out.error(&resp_server_error(&e)),
        }
    }
    for db in &dbs {
        if let Err(e) = flush(db) {
            return s.out.error(&resp_engine_error(&e));
        }
    }
    s.out.ok();
}

/// DATABASES [LIST]: names of every database under the data directory.
/// DATABASES CREATE name: creates (or just opens) database `name`, so `SELECT name` can
/// switch to it.
pub(crate) fn databases(s: &mut Session, args: &[Bytes]) {
    let sub = args.get(1).map(|a| a.to_ascii_uppercase());
    match (sub.as_deref(), args.len()) {
        (None, _) | (Some(b"LIST"), 2) => {
            let names = s.shared.databases.list();
            s.out.array(names.len());
            for n in &names {
                s.out.bulk(n.as_bytes());
            }
        }
        (Some(b"CREATE"), 3) => {
            let Ok(name) = std::str::from_utf8(arg(args, 2)) else {
                return s
                    .out
                    .error("ERR database names are ASCII letters, digits, '_' and '-'");
            };
            // `SELECT` reads such a name as an index, so it could never switch to it.
            // (The empty name is left to the name check, which gives the length rule.)
            if !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit() || b == b'-') {
                return s.out.error(&format!(
                    "ERR database name '{name}' has only digits and '-': SELECT would read it \
                     as an index; include a letter or '_'"
                ));
            }
            match s.shared.databases.get_or_open(name) {
                Ok(_) => s.out.ok(),
                Err(e) => s.out.error(&resp_server_error(&e)),
            }
        }
        (Some(b"LIST" | b"CREATE"), _) => {
            let sub = String::from_utf8_lossy(arg(args, 1)).to_ascii_lowercase();
            s.out.error(&format!(
                "ERR wrong number of arguments for 'databases|{sub}' command"
            ));
        }
        _ => {
            s.out.error_echo(
                "ERR unknown subcommand '",
                arg(args, 1),
                128,
                "'. Try DATABASES LIST or DATABASES CREATE name.",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursor_numbers_start_at_a_random_point_per_table() {
        // Two tables stand for two runs of the server: a cursor of the first is unknown to
        // the second (the chance that both start at the same point is 2^-32).
        let (first, second) = (CursorTable::default(), CursorTable::default());
        let a = first.insert("db0", Bytes::from_static(b"k10"));
        let b = second.insert("db0", Bytes::from_static(b"k50"));
        assert_ne!(a, b);
        assert_eq!(second.get("db0", a), None);
        assert_eq!(first.get("db0", a).as_deref(), Some(&b"k10"[..]));
        assert_eq!(first.get("db1", a), None);
        assert_eq!(first.insert("db0", Bytes::new()), a.wrapping_add(1).max(1));
    }

    #[test]
    fn cursors_with_long_keys_are_bounded_by_bytes() {
        let table = CursorTable::default();
        let long = Bytes::from(vec![b'k'; 60_000]);
        let ids: Vec<u64> = (0..4_000)
            .map(|_| table.insert("db0", long.clone()))
            .collect();
        let st = table.state.lock();
        assert!(st.bytes <= MAX_CURSOR_BYTES, "{} bytes kept", st.bytes);
        assert_eq!(st.entries.len(), st.order.len());
        assert_eq!(
            st.bytes,
            st.entries.values().map(CursorEntry::cost).sum::<usize>()
        );
        drop(st);
        // The newest cursors survive, the oldest were evicted.
        assert!(table.get("db0", ids[3_999]).is_some());
        assert!(table.get("db0", ids[0]).is_none());
    }
}
