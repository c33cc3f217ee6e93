//! The command table and the string commands.
//!
//! Every command has a [`CommandSpec`]: its arity in Redis's convention (`n` exactly, `-n`
//! at least `n` arguments including the name), how it may run (write, heavy, batchable,
//! allowed before AUTH) and what `COMMAND` / `COMMAND DOCS` report.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::session::Session;
use super::{admin, keyspace};
use crate::error::resp_engine_error;
use crate::protocol::request::parse_decimal;

/// Handler of one command; arity is checked before it runs.
pub(crate) type Handler = fn(&mut Session, &[Bytes]);

/// Static description of a command.
#[derive(Debug)]
pub(crate) struct CommandSpec {
    /// Upper-case name.
    pub name: &'static str,
    /// Redis arity: `n` = exactly n arguments (name included), `-n` = at least n.
    pub arity: i32,
    pub handler: Handler,
    /// Modifies data.
    pub write: bool,
    /// May take long (whole key space, opening a database, SQL): runs on the blocking pool.
    pub heavy: bool,
    /// Allowed before AUTH.
    pub no_auth: bool,
    /// May join the pending blind-write batch (the handler flushes it otherwise).
    pub batchable: bool,
    /// O(1)-ish (reported as `fast` by COMMAND).
    pub fast: bool,
    /// First key, last key, step (COMMAND's key positions; 0 = no keys).
    pub keys: (i32, i32, i32),
    pub group: &'static str,
    pub summary: &'static str,
}

const fn spec(
    name: &'static str,
    arity: i32,
    handler: Handler,
    group: &'static str,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        handler,
        write: false,
        heavy: false,
        no_auth: false,
        batchable: false,
        fast: false,
        keys: (0, 0, 0),
        group,
        summary: "",
    }
}

impl CommandSpec {
    const fn write(mut self) -> Self {
        self.write = true;
        self
    }
    const fn heavy(mut self) -> Self {
        self.heavy = true;
        self
    }
    const fn no_auth(mut self) -> Self {
        self.no_auth = true;
        self
    }
    const fn batchable(mut self) -> Self {
        self.batchable = true;
        self
    }
    const fn fast(mut self) -> Self {
        self.fast = true;
        self
    }
    const fn keys(mut self, first: i32, last: i32, step: i32) -> Self {
        self.keys = (first, last, step);
        self
    }
    const fn doc(mut self, summary: &'static str) -> Self {
        self.summary = summary;
        self
    }
}

/// Every command, sorted by name (binary search).
pub(crate) static COMMANDS: &[CommandSpec] = &[
    spec("APPEND", 3, append, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Appends a string to the value of a key. Creates the key if it doesn't exist."),
    spec("AUTH", -2, admin::auth, "connection")
        .no_auth()
        .fast()
        .doc("Authenticates the connection."),
    spec("CLIENT", -2, admin::client, "connection")
        .doc("CLIENT ID, GETNAME, SETNAME, SETINFO, INFO, LIST."),
    spec("COMMAND", -1, admin::command, "server")
        .doc("Returns detailed information about all commands."),
    spec("CONFIG", -2, admin::config, "server").doc("CONFIG GET of a few parameters."),
    spec("DATABASES", 1, keyspace::databases, "server")
        .heavy()
        .doc("Strata extension: the names of all databases under the data directory."),
    spec("DBSIZE", 1, keyspace::dbsize, "server")
        .heavy()
        .doc("Returns the number of keys in the database (exact, counted by a scan)."),
    spec("DECR", 2, decr, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Decrements the integer value of a key by one."),
    spec("DECRBY", 3, decrby, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Decrements a number from the integer value of a key."),
    spec("DEL", -2, del, "generic")
        .write()
        .keys(1, -1, 1)
        .doc("Deletes one or more keys."),
    spec("ECHO", 2, admin::echo, "connection")
        .fast()
        .doc("Returns the given string."),
    spec("EXISTS", -2, exists, "generic")
        .fast()
        .keys(1, -1, 1)
        .doc("Determines whether one or more keys exist."),
    spec("FLUSHALL", -1, keyspace::flushall, "server")
        .write()
        .heavy()
        .doc("Removes all keys from all databases (SQL tables are kept)."),
    spec("FLUSHDB", -1, keyspace::flushdb, "server")
        .write()
        .heavy()
        .doc("Remove all keys from the current database (SQL tables are kept)."),
    spec("FUNCTION", -2, admin::function, "scripting")
        .doc("FUNCTION FLUSH only (there are no functions)."),
    spec("GET", 2, get, "string")
        .fast()
        .keys(1, 1, 1)
        .doc("Returns the string value of a key."),
    spec("GETDEL", 2, getdel, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Returns the string value of a key after deleting the key."),
    spec("HELLO", -1, admin::hello, "connection")
        .no_auth()
        .fast()
        .doc("Handshakes with the server."),
    spec("INCR", 2, incr, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Increments the integer value of a key by one."),
    spec("INCRBY", 3, incrby, "string")
        .write()
        .fast()
        .keys(1, 1, 1)
        .doc("Increments the integer value of a key by a number."),
    spec("INFO", -1, admin::info, "server")
        .heavy()
        .doc("Returns information and statistics about the server and the engine."),
    spec("KEYS", 2, keyspace::keys, "generic")
        .heavy()
        .doc("Returns all key names that match a pattern."),
    spec("MGET", -2, mget, "string")
        .fast()
        .keys(1, -1, 1)
        .doc("Atomically returns the string values of one or more keys."),
    spec("MSET", -3, mset, "string")
        .write()
        .batchable()
        .keys(1, -1, 2)
        .doc("Atomically creates or modifies the string values of one or more keys."),
    spec("PING", -1, admin::ping, "connection")
        .fast()
        .doc("Returns the server's liveliness response."),
    spec("PTTL", 2, pttl, "generic")
        .fast()
        .keys(1, 1, 1)
        .doc("Returns -1 for an existing key (no expiry), -2 for a missing one."),
    spec("QUIT", -1, admin::quit, "connection")
        .no_auth()
        .fast()
        .doc("Closes the connection."),
    spec("SCAN", -2, keyspace::scan, "generic")
        .heavy()
        .doc("Iterates over the key names in the database."),
    spec("SELECT", 2, admin::select, "connection")
        .heavy()
        .doc("Changes the selected database (0-15 = db0-db15, or a database name)."),
    spec("SET", -3, set, "string")
        .write()
        .batchable()
        .keys(1, 1, 1)
        .doc("Sets the string value of a key (NX, XX, GET; no expiry)."),
    spec("SQL", 2, admin::sql, "strata")
        .write()
        .heavy()
        .doc("Strata extension: runs SQL on the current database."),
    spec("STRLEN", 2, strlen, "string")
        .fast()
        .keys(1, 1, 1)
        .doc("Returns the length of a string value."),
    spec("TTL", 2, ttl, "generic")
        .fast()
        .keys(1, 1, 1)
        .doc("Returns -1 for an existing key (no expiry), -2 for a missing one."),
    spec("TYPE", 2, key_type, "generic")
        .fast()
        .keys(1, 1, 1)
        .doc("Determines the type of value stored at a key."),
];

/// The spec of command `name` (case-insensitive).
pub(crate) fn lookup(name: &[u8]) -> Option<&'static CommandSpec> {
    let mut upper = [0u8; 16];
    let dst = upper.get_mut(..name.len())?;
    dst.copy_from_slice(name);
    dst.make_ascii_uppercase();
    let dst = &*dst;
    COMMANDS
        .binary_search_by(|c| c.name.as_bytes().cmp(dst))
        .ok()
        .and_then(|i| COMMANDS.get(i))
}

/// Argument `i` (empty when absent; arity checks make that unreachable).
pub(crate) fn arg(args: &[Bytes], i: usize) -> &[u8] {
    args.get(i).map_or(&[][..], |a| &a[..])
}

pub(crate) const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub(crate) const SYNTAX: &str = "ERR syntax error";

fn get(s: &mut Session, args: &[Bytes]) {
    match s.db.get(arg(args, 1)) {
        Ok(v) => {
            let counter = if v.is_some() {
                &s.shared.stats.keyspace_hits
            } else {
                &s.shared.stats.keyspace_misses
            };
            counter.fetch_add(1, Ordering::Relaxed);
            s.out.bulk_or_null(v.as_deref());
        }
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

/// SET key value [NX | XX] [GET] [KEEPTTL]
fn set(s: &mut Session, args: &[Bytes]) {
    let (mut nx, mut xx, mut get) = (false, false, false);
    for opt in args.iter().skip(3) {
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
            b"KEEPTTL" => {}
            b"EX" | b"PX" | b"EXAT" | b"PXAT" => {
                s.flush_pending();
                s.out
                    .error("ERR key expiry (EX, PX, EXAT, PXAT) is not supported by strata");
                return;
            }
            _ => {
                s.flush_pending();
                s.out.error(SYNTAX);
                return;
            }
        }
    }
    if !(nx || xx || get) {
        s.pend_put(args.get(1..3).unwrap_or_default());
        return;
    }
    s.flush_pending();
    let (key, value) = (arg(args, 1), arg(args, 2));
    let db = std::sync::Arc::clone(&s.db);
    let _locks = db.lock_keys([key], true);
    let old = match db.get(key) {
        Ok(old) => old,
        Err(e) => return s.out.error(&resp_engine_error(&e)),
    };
    let apply = !(nx && old.is_some() || xx && old.is_none());
    if apply {
        let mut batch = crate::databases::KvBatch::new();
        batch.put(key, value);
        if let Err(e) = db.write(batch) {
            return s.out.error(&resp_engine_error(&e));
        }
    }
    if get {
        s.out.bulk_or_null(old.as_deref());
    } else if apply {
        s.out.ok();
    } else {
        s.out.null();
    }
}

fn getdel(s: &mut Session, args: &[Bytes]) {
    let key = arg(args, 1);
    let db = std::sync::Arc::clone(&s.db);
    let _locks = db.lock_keys([key], true);
    match db.get(key) {
        Ok(Some(v)) => {
            let mut batch = crate::databases::KvBatch::new();
            batch.delete(key);
            match db.write(batch) {
                Ok(()) => s.out.bulk(&v),
                Err(e) => s.out.error(&resp_engine_error(&e)),
            }
        }
        Ok(None) => s.out.null(),
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

fn del(s: &mut Session, args: &[Bytes]) {
    let keys = args.get(1..).unwrap_or_default();
    let db = std::sync::Arc::clone(&s.db);
    let _locks = db.lock_keys(keys, true);
    let mut batch = crate::databases::KvBatch::new();
    let mut deleted: Vec<&[u8]> = Vec::new();
    for key in keys {
        if deleted.contains(&&key[..]) {
            continue;
        }
        match db.get(key) {
            Ok(Some(_)) => {
                batch.delete(key);
                deleted.push(key);
            }
            Ok(None) => {}
            Err(e) => return s.out.error(&resp_engine_error(&e)),
        }
    }
    match db.write(batch) {
        Ok(()) => s
            .out
            .integer(i64::try_from(deleted.len()).unwrap_or(i64::MAX)),
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

fn exists(s: &mut Session, args: &[Bytes]) {
    let mut n = 0i64;
    for key in args.iter().skip(1) {
        match s.db.get(key) {
            Ok(Some(_)) => n += 1,
            Ok(None) => {}
            Err(e) => return s.out.error(&resp_engine_error(&e)),
        }
    }
    s.out.integer(n);
}

fn mget(s: &mut Session, args: &[Bytes]) {
    let keys = args.get(1..).unwrap_or_default();
    let mut values = Vec::with_capacity(keys.len());
    for key in keys {
        match s.db.get(key) {
            Ok(v) => values.push(v),
            Err(e) => return s.out.error(&resp_engine_error(&e)),
        }
    }
    s.out.array(values.len());
    for v in values {
        s.out.bulk_or_null(v.as_deref());
    }
}

fn mset(s: &mut Session, args: &[Bytes]) {
    if args.len().is_multiple_of(2) {
        s.flush_pending();
        s.out
            .error("ERR wrong number of arguments for 'mset' command");
        return;
    }
    s.pend_put(args.get(1..).unwrap_or_default());
}

fn strlen(s: &mut Session, args: &[Bytes]) {
    match s.db.get(arg(args, 1)) {
        Ok(v) => s
            .out
            .integer(v.map_or(0, |v| i64::try_from(v.len()).unwrap_or(i64::MAX))),
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

fn append(s: &mut Session, args: &[Bytes]) {
    let (key, suffix) = (arg(args, 1), arg(args, 2));
    let db = std::sync::Arc::clone(&s.db);
    let _locks = db.lock_keys([key], true);
    let mut value = match db.get(key) {
        Ok(v) => v.map(|v| v.to_vec()).unwrap_or_default(),
        Err(e) => return s.out.error(&resp_engine_error(&e)),
    };
    value.extend_from_slice(suffix);
    let mut batch = crate::databases::KvBatch::new();
    batch.put(key, &value);
    match db.write(batch) {
        Ok(()) => s
            .out
            .integer(i64::try_from(value.len()).unwrap_or(i64::MAX)),
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

fn incr(s: &mut Session, args: &[Bytes]) {
    incr_by(s, arg(args, 1), 1);
}

fn decr(s: &mut Session, args: &[Bytes]) {
    incr_by(s, arg(args, 1), -1);
}

fn incrby(s: &mut Session, args: &[Bytes]) {
    match parse_decimal(arg(args, 2)) {
        Some(n) => incr_by(s, arg(args, 1), n),
        None => s.out.error(NOT_INTEGER),
    }
}

fn decrby(s: &mut Session, args: &[Bytes]) {
    match parse_decimal(arg(args, 2)) {
        Some(i64::MIN) => s.out.error("ERR decrement would overflow"),
        Some(n) => incr_by(s, arg(args, 1), -n),
        None => s.out.error(NOT_INTEGER),
    }
}

/// INCR and friends: a read-modify-write under the key's exclusive stripe lock, written as
/// a plain put (see `docs/server.md`, "Counters", for why not a blind merge).
fn incr_by(s: &mut Session, key: &[u8], delta: i64) {
    let db = std::sync::Arc::clone(&s.db);
    let _locks = db.lock_keys([key], true);
    let current = match db.get(key) {
        Ok(None) => 0,
        Ok(Some(v)) => match parse_decimal(&v) {
            Some(n) => n,
            None => return s.out.error(NOT_INTEGER),
        },
        Err(e) => return s.out.error(&resp_engine_error(&e)),
    };
    let Some(new) = current.checked_add(delta) else {
        return s.out.error("ERR increment or decrement would overflow");
    };
    let mut batch = crate::databases::KvBatch::new();
    batch.put(key, new.to_string().as_bytes());
    match db.write(batch) {
        Ok(()) => s.out.integer(new),
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

fn ttl(s: &mut Session, args: &[Bytes]) {
    match s.db.get(arg(args, 1)) {
        Ok(v) => s.out.integer(if v.is_some() { -1 } else { -2 }),
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

fn pttl(s: &mut Session, args: &[Bytes]) {
    ttl(s, args);
}

fn key_type(s: &mut Session, args: &[Bytes]) {
    match s.db.get(arg(args, 1)) {
        Ok(v) => s.out.simple(if v.is_some() { "string" } else { "none" }),
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_table_is_sorted_and_upper_case() {
        for pair in COMMANDS.windows(2) {
            if let [a, b] = pair {
                assert!(a.name < b.name, "{} before {}", a.name, b.name);
            }
        }
        for c in COMMANDS {
            assert_eq!(c.name, c.name.to_ascii_uppercase());
            assert!(c.name.len() <= 16);
            assert!(!c.summary.is_empty(), "{} has no summary", c.name);
        }
    }

    #[test]
    fn lookup_is_case_insensitive() {
        assert_eq!(lookup(b"get").map(|c| c.name), Some("GET"));
        assert_eq!(lookup(b"gEtDeL").map(|c| c.name), Some("GETDEL"));
        assert!(lookup(b"nosuchcommand").is_none());
        assert!(lookup(b"averyveryverylongname").is_none());
        assert!(lookup(b"").is_none());
    }
}
