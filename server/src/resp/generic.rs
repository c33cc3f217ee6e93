//! The key commands of Redis's "generic" group beyond `DEL`/`EXISTS`/`TYPE`: `RENAME`,
//! `RENAMENX`, `COPY`, `MOVE`, `RANDOMKEY`, `UNLINK`, `TOUCH`, and the expiry commands, which
//! Strata answers as a store whose keys never expire (`PERSIST` 0, `EXPIRETIME` -1) or
//! refuses (`EXPIRE` and friends, which would set a time).
//!
//! Replies and errors follow Redis 7.0's `db.c` and `expire.c`. `COPY .. DB` and `MOVE` take a
//! database as `SELECT` does (`0`..`15`, or the name of an existing database). Within one
//! database a command's writes are one batch; across two databases (`MOVE`, `COPY .. DB`) they
//! are two writes, the target's first: a crash between them can leave a moved key in both
//! databases, never in neither.

use std::sync::Arc;

use bytes::Bytes;

use super::admin::{SelectTarget, database_for_select};
use super::commands::{NOT_INTEGER, SYNTAX, arg, count_lookup, read_together};
use super::session::Session;
use super::strings::{EXPIRY_UNSUPPORTED, ExpiryUnit, invalid_expire_time, put, read, write};
use crate::databases::{Database, KeyLocks, KvBatch};
use crate::error::{resp_engine_error, resp_server_error};
use crate::protocol::request::parse_decimal;

/// Redis's reply when the source and destination of `COPY`/`MOVE` are the same key.
const SAME_OBJECT: &str = "ERR source and destination objects are the same";

/// RENAME key newkey: moves the value to `newkey` (replacing it); `ERR no such key` when
/// `key` is missing.
pub(crate) fn rename(s: &mut Session, args: &[Bytes]) {
    rename_generic(s, args, false);
}

/// RENAMENX key newkey: `RENAME` only when `newkey` does not exist; 1 if renamed, else 0.
pub(crate) fn renamenx(s: &mut Session, args: &[Bytes]) {
    rename_generic(s, args, true);
}

fn rename_generic(s: &mut Session, args: &[Bytes], nx: bool) {
    let (from, to) = (arg(args, 1), arg(args, 2));
    let db = Arc::clone(s.db());
    let _locks = db.lock_keys([from, to], true);
    let Some(value) = read(s, &db, from) else {
        return;
    };
    let Some(value) = value else {
        return s.out.error("ERR no such key");
    };
    if from == to {
        return if nx { s.out.integer(0) } else { s.out.ok() };
    }
    if nx {
        match read(s, &db, to) {
            Some(Some(_)) => return s.out.integer(0),
            Some(None) => {}
            None => return,
        }
    }
    let mut batch = KvBatch::new();
    batch.delete(from);
    batch.put(to, &value);
    if write(s, &db, batch) {
        if nx {
            s.out.integer(1);
        } else {
            s.out.ok();
        }
    }
}

/// The database a `COPY .. DB` or `MOVE` argument names (as `SELECT` reads it), or the reply
/// for a bad one.
fn target_database(s: &mut Session, name: &[u8]) -> Option<Arc<Database>> {
    let name = match database_for_select(name) {
        Ok(SelectTarget::Numbered(n)) => n,
        Ok(SelectTarget::Named(n)) if s.shared.databases.exists(&n) => n,
        Ok(SelectTarget::Named(_)) => {
            s.out.error(NOT_INTEGER);
            return None;
        }
        Err(e) => {
            s.out.error(e);
            return None;
        }
    };
    if name == s.db().name() {
        return Some(Arc::clone(s.db()));
    }
    match s.shared.databases.get_or_open(&name) {
        Ok(db) => Some(db),
        Err(e) => {
            s.out.error(&resp_server_error(&e));
            None
        }
    }
}

/// Locks `key` in `from` and `to_key` in `to` exclusively: one call when they are one
/// database, else in database-name order, so two commands crossing the same pair of
/// databases in opposite directions cannot deadlock.
fn lock_across<'a>(
    from: &'a Database,
    key: &[u8],
    to: &'a Database,
    to_key: &[u8],
) -> Vec<KeyLocks<'a>> {
    if std::ptr::eq(from, to) {
        return vec![from.lock_keys([key, to_key], true)];
    }
    if from.name() < to.name() {
        vec![from.lock_keys([key], true), to.lock_keys([to_key], true)]
    } else {
        vec![to.lock_keys([to_key], true), from.lock_keys([key], true)]
    }
}

/// COPY source destination [DB db] [REPLACE]: copies the value; 1 if copied, 0 when the
/// source is missing or the destination exists (without `REPLACE`).
pub(crate) fn copy(s: &mut Session, args: &[Bytes]) {
    let (from, to) = (arg(args, 1), arg(args, 2));
    let db = Arc::clone(s.db());
    let (mut replace, mut target) = (false, Arc::clone(&db));
    let mut i = 3;
    while i < args.len() {
        let opt = arg(args, i).to_ascii_uppercase();
        match opt.as_slice() {
            b"REPLACE" => replace = true,
            // Checked as it is read, as Redis does: the first bad DB is the error.
            b"DB" if i + 1 < args.len() => {
                let Some(t) = target_database(s, arg(args, i + 1)) else {
                    return;
                };
                target = t;
                i += 1;
            }
            _ => return s.out.error(SYNTAX),
        }
        i += 1;
    }
    if Arc::ptr_eq(&db, &target) && from == to {
        return s.out.error(SAME_OBJECT);
    }
    let _locks = lock_across(&db, from, &target, to);
    let Some(value) = read(s, &db, from) else {
        return;
    };
    count_lookup(s, value.is_some());
    let Some(value) = value else {
        return s.out.integer(0);
    };
    if !replace {
        match read(s, &target, to) {
            Some(Some(_)) => return s.out.integer(0),
            Some(None) => {}
            None => return,
        }
    }
    if put(s, &target, to, &value) {
        s.out.integer(1);
    }
}

/// MOVE key db: moves the key to another database; 1 if moved, 0 when it is missing here or
/// exists there.
pub(crate) fn move_key(s: &mut Session, args: &[Bytes]) {
    let key = arg(args, 1);
    let db = Arc::clone(s.db());
    let Some(target) = target_database(s, arg(args, 2)) else {
        return;
    };
    if Arc::ptr_eq(&db, &target) {
        return s.out.error(SAME_OBJECT);
    }
    let _locks = lock_across(&db, key, &target, key);
    let Some(value) = read(s, &db, key) else {
        return;
    };
    let Some(value) = value else {
        return s.out.integer(0);
    };
    match read(s, &target, key) {
        Some(Some(_)) => return s.out.integer(0),
        Some(None) => {}
        None => return,
    }
    // The target first: a crash between the two writes leaves the key in both databases.
    if !put(s, &target, key, &value) {
        return;
    }
    let mut delete = KvBatch::new();
    delete.delete(key);
    if write(s, &db, delete) {
        s.out.integer(1);
    }
}

/// Keys `RANDOMKEY` reads to pick one.
const RANDOM_SAMPLE: usize = 64;

/// RANDOMKEY: a key of the database, or nil when it has none.
///
/// Reads up to [`RANDOM_SAMPLE`] keys from a random 8-byte position on (wrapping around to
/// the first key) and returns one of them at random: uniform in a database of at most that
/// many keys; in a larger one every key can come back, but a key after a wide gap in the key
/// order more often. Redis's own pick is not uniform either.
pub(crate) fn randomkey(s: &mut Session, _args: &[Bytes]) {
    #[expect(
        clippy::big_endian_bytes,
        reason = "a random start key: byte order does not matter"
    )]
    let start = random_u64().to_be_bytes();
    let db = Arc::clone(s.db());
    let mut sample = Vec::with_capacity(RANDOM_SAMPLE);
    let wrapped = db
        .scan_from(None)
        .take_while(|kv| kv.as_ref().map_or(true, |(k, _)| k[..] < start[..]));
    for kv in db
        .scan_from(Some(&start))
        .chain(wrapped)
        .take(RANDOM_SAMPLE)
    {
        match kv {
            Ok((key, _)) => sample.push(key),
            Err(e) => return s.out.error(&crate::error::resp_engine_error(&e)),
        }
    }
    let len = u64::try_from(sample.len()).unwrap_or(u64::MAX).max(1);
    let pick = usize::try_from(random_u64() % len).unwrap_or(0);
    match sample.get(pick) {
        Some(key) => s.out.bulk(key),
        None => s.out.null(),
    }
}

/// 64 random bits from the standard library's randomly keyed hasher.
fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::hash::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.finish()
}

/// TOUCH key [key ...]: the number of the keys that exist (there is no access time to
/// update).
pub(crate) fn touch(s: &mut Session, args: &[Bytes]) {
    match read_together(s, args.get(1..).unwrap_or_default()) {
        Ok(values) => {
            let n = values.iter().filter(|v| v.is_some()).count();
            s.out.integer(i64::try_from(n).unwrap_or(i64::MAX));
        }
        Err(e) => s.out.error(&resp_engine_error(&e)),
    }
}

/// PERSIST key: 0, since no key has an expiry to remove.
pub(crate) fn persist(s: &mut Session, _args: &[Bytes]) {
    s.out.integer(0);
}

/// EXPIRETIME / PEXPIRETIME key: -1 for an existing key (no expiry), -2 for a missing one.
pub(crate) fn expiretime(s: &mut Session, args: &[Bytes]) {
    let db = Arc::clone(s.db());
    if let Some(v) = read(s, &db, arg(args, 1)) {
        count_lookup(s, v.is_some());
        s.out.integer(if v.is_some() { -1 } else { -2 });
    }
}

/// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT key time [NX | XX | GT | LT]: checked as Redis
/// 7.0's `expireGenericCommand` checks them (the options, then the time as an integer that
/// does not overflow in milliseconds); a missing key answers 0, as there; an existing key
/// gets [`EXPIRY_UNSUPPORTED`], since it cannot be given a time.
pub(crate) fn expire(s: &mut Session, args: &[Bytes]) {
    let command = String::from_utf8_lossy(arg(args, 0)).to_ascii_lowercase();
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for opt in args.get(3..).unwrap_or_default() {
        match opt.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                let opt = String::from_utf8_lossy(opt).into_owned();
                return s.out.error(&format!("ERR Unsupported option {opt}"));
            }
        }
    }
    if nx && (xx || gt || lt) {
        return s
            .out
            .error("ERR NX and XX, GT or LT options at the same time are not compatible");
    }
    if gt && lt {
        return s
            .out
            .error("ERR GT and LT options at the same time are not compatible");
    }
    let Some(when) = parse_decimal(arg(args, 2)) else {
        return s.out.error(NOT_INTEGER);
    };
    // Zero and negative times are valid here (Redis deletes the key); only overflow is not.
    if ExpiryUnit::of_command(&command)
        .deadline_millis(when)
        .is_none()
    {
        return s.out.error(&invalid_expire_time(&command));
    }
    let db = Arc::clone(s.db());
    if let Some(v) = read(s, &db, arg(args, 1)) {
        if v.is_some() {
            s.out.error(EXPIRY_UNSUPPORTED);
        } else {
            s.out.integer(0);
        }
    }
}
