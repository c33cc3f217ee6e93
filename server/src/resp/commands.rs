//! The string and key commands (`GET`, `SET`, `INCR`, ...); the table describing them is
//! [`super::table`].
//!
//! # Keyspace hits and misses
//! `INFO stats` counts key lookups the way Redis 7 does (its `lookupKeyRead`): one hit or
//! miss per key read by `GET`, `MGET`, `GETDEL`, `GETSET`, `GETEX`, `GETRANGE`, `SUBSTR`,
//! `GETBIT`, `LCS`, `STRLEN`, `EXISTS`, `TOUCH`, `TYPE`, `TTL`, `PTTL`, `EXPIRETIME`,
//! `PEXPIRETIME`, `COPY` (its source) and `SET .. GET`. Commands that read only to write
//! (`APPEND`, `INCR` and friends, `SETNX`, `MSETNX`, `SETRANGE`, `SETBIT`, `RENAME`, `MOVE`,
//! `SET NX/XX` without `GET`, `DEL`) count nothing, as in Redis.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use super::session::Session;
use super::strings::ExpiryUnit;
use crate::error::resp_engine_error;
use crate::protocol::request::parse_decimal;

/// Argument `i` (empty when absent; arity checks make that unreachable).
pub(crate) fn arg(args: &[Bytes], i: usize) -> &[u8] {
    args.get(i).map_or(&[][..], |a| &a[..])
}

/// Counts one key lookup in `INFO stats` (`keyspace_hits` / `keyspace_misses`).
pub(crate) fn count_lookup(s: &Session, found: bool) {
    let found = u64::from(found);
    count_lookups(s, found, 1 - found);
}

/// Counts `hits` and `misses` key lookups at once (see [`count_lookup`]).
pub(crate) fn count_lookups(s: &Session, hits: u64, misses: u64) {
    let stats = &s.shared.stats;
    if hits > 0 {
        stats.keyspace_hits.fetch_add(hits, Ordering::Relaxed);
    }
    if misses > 0 {
        stats.keyspace_misses.fetch_add(misses, Ordering::Relaxed);
    }
}

pub(crate) const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
pub(crate) const SYNTAX: &str = "ERR syntax error";

pub(crate) fn get(s: &mut Session, args: &[Bytes]) {
    match s.db().get(arg(args, 1)) {
        Ok(v) => {
            count_lookup(s, v.is_some());
            s.out.bulk_or_null(v.as_deref());
        }
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

/// SET key value [NX | XX] [GET] [KEEPTTL]; a time option (EX, PX, EXAT, PXAT) is checked
/// as Redis checks it (one of them, not with KEEPTTL, a positive integer), then refused with
/// [`super::strings::EXPIRY_UNSUPPORTED`].
pub(crate) fn set(s: &mut Session, args: &[Bytes]) {
    let (mut nx, mut xx, mut get, mut keep_ttl) = (false, false, false, false);
    let mut expiry: Option<(&Bytes, ExpiryUnit)> = None;
    let mut i = 3;
    while let Some(opt) = args.get(i) {
        let upper = opt.to_ascii_uppercase();
        let unit = ExpiryUnit::of_option(&upper);
        match upper.as_slice() {
            b"NX" if !xx => nx = true,
            b"XX" if !nx => xx = true,
            b"GET" => get = true,
            b"KEEPTTL" if expiry.is_none() => keep_ttl = true,
            // As Redis 7.0: the same time option may repeat (the last counts), another may
            // not join it, nor KEEPTTL.
            _ if unit.is_some() && !keep_ttl && expiry.is_none_or(|(_, u)| Some(u) == unit) => {
                let Some(time) = args.get(i + 1) else {
                    s.flush_pending();
                    return s.out.error(SYNTAX);
                };
                expiry = Some(time).zip(unit);
                i += 1;
            }
            _ => {
                s.flush_pending();
                s.out.error(SYNTAX);
                return;
            }
        }
        i += 1;
    }
    if let Some((time, unit)) = expiry {
        s.flush_pending();
        let error = super::strings::expire_time_error(time, unit, "set");
        return s.out.error(
            error
                .as_deref()
                .unwrap_or(super::strings::EXPIRY_UNSUPPORTED),
        );
    }
    if !(nx || xx || get) {
        s.pend_put(args.get(1..3).unwrap_or_default());
        return;
    }
    s.flush_pending();
    let (key, value) = (arg(args, 1), arg(args, 2));
    let db = std::sync::Arc::clone(s.db());
    let _locks = db.lock_keys([key], true);
    let old = match db.get(key) {
        Ok(old) => old,
        Err(e) => return s.out.error(&resp_engine_error(&e)),
    };
    if get {
        count_lookup(s, old.is_some());
    }
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

pub(crate) fn getdel(s: &mut Session, args: &[Bytes]) {
    let key = arg(args, 1);
    let db = std::sync::Arc::clone(s.db());
    let _locks = db.lock_keys([key], true);
    let found = db.get(key);
    if let Ok(v) = &found {
        count_lookup(s, v.is_some());
    }
    match found {
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

pub(crate) fn del(s: &mut Session, args: &[Bytes]) {
    let keys = args.get(1..).unwrap_or_default();
    let db = std::sync::Arc::clone(s.db());
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

/// The values of `keys`, all read at one sequence number (an MSET is seen whole or not at
/// all, as in Redis), counted as lookups; `Err` with the first key's error.
pub(crate) fn read_together(
    s: &Session,
    keys: &[Bytes],
) -> strata_engine::Result<Vec<Option<Bytes>>> {
    let keys: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
    let values = s
        .db()
        .multi_get(&keys)
        .into_iter()
        .collect::<strata_engine::Result<Vec<_>>>()?;
    let hits = values.iter().filter(|v| v.is_some()).count() as u64;
    count_lookups(s, hits, values.len() as u64 - hits);
    Ok(values)
}

pub(crate) fn exists(s: &mut Session, args: &[Bytes]) {
    match read_together(s, args.get(1..).unwrap_or_default()) {
        Ok(values) => {
            let n = values.iter().filter(|v| v.is_some()).count();
            s.out.integer(i64::try_from(n).unwrap_or(i64::MAX));
        }
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

pub(crate) fn mget(s: &mut Session, args: &[Bytes]) {
    match read_together(s, args.get(1..).unwrap_or_default()) {
        Ok(values) => {
            s.out.array(values.len());
            for v in values {
                s.out.bulk_or_null(v.as_deref());
            }
        }
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

pub(crate) fn mset(s: &mut Session, args: &[Bytes]) {
    if args.len().is_multiple_of(2) {
        s.flush_pending();
        s.out
            .error("ERR wrong number of arguments for 'mset' command");
        return;
    }
    s.pend_put(args.get(1..).unwrap_or_default());
}

pub(crate) fn strlen(s: &mut Session, args: &[Bytes]) {
    match s.db().get(arg(args, 1)) {
        Ok(v) => {
            count_lookup(s, v.is_some());
            s.out
                .integer(v.map_or(0, |v| i64::try_from(v.len()).unwrap_or(i64::MAX)));
        }
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

pub(crate) fn append(s: &mut Session, args: &[Bytes]) {
    let (key, suffix) = (arg(args, 1), arg(args, 2));
    let db = std::sync::Arc::clone(s.db());
    let _locks = db.lock_keys([key], true);
    let mut value = match db.get(key) {
        Ok(v) => v.map(|v| v.to_vec()).unwrap_or_default(),
        Err(e) => return s.out.error(&resp_engine_error(&e)),
    };
    if value.len().saturating_add(suffix.len()) > s.shared.config.limits.max_bulk_bytes {
        return s
            .out
            .error("ERR string exceeds maximum allowed size (proto-max-bulk-len)");
    }
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

pub(crate) fn incr(s: &mut Session, args: &[Bytes]) {
    incr_by(s, arg(args, 1), 1);
}

pub(crate) fn decr(s: &mut Session, args: &[Bytes]) {
    incr_by(s, arg(args, 1), -1);
}

pub(crate) fn incrby(s: &mut Session, args: &[Bytes]) {
    match parse_decimal(arg(args, 2)) {
        Some(n) => incr_by(s, arg(args, 1), n),
        None => s.out.error(NOT_INTEGER),
    }
}

pub(crate) fn decrby(s: &mut Session, args: &[Bytes]) {
    match parse_decimal(arg(args, 2)) {
        Some(i64::MIN) => s.out.error("ERR decrement would overflow"),
        Some(n) => incr_by(s, arg(args, 1), -n),
        None => s.out.error(NOT_INTEGER),
    }
}

/// INCR and friends: a read-modify-write under the key's exclusive stripe lock, written as
/// a plain put (see `docs/server.md`, "Counters", for why not a blind merge).
fn incr_by(s: &mut Session, key: &[u8], delta: i64) {
    let db = std::sync::Arc::clone(s.db());
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

pub(crate) fn ttl(s: &mut Session, args: &[Bytes]) {
    match s.db().get(arg(args, 1)) {
        Ok(v) => {
            count_lookup(s, v.is_some());
            s.out.integer(if v.is_some() { -1 } else { -2 });
        }
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

pub(crate) fn pttl(s: &mut Session, args: &[Bytes]) {
    ttl(s, args);
}

pub(crate) fn key_type(s: &mut Session, args: &[Bytes]) {
    match s.db().get(arg(args, 1)) {
        Ok(v) => {
            count_lookup(s, v.is_some());
            s.out.simple(if v.is_some() { "string" } else { "none" });
        }
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}
