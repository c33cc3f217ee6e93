//! The string commands that read and rewrite part of a value or several keys at once:
//! `SETNX`, `GETSET`, `MSETNX`, `GETEX`, `SETRANGE`, `GETRANGE`/`SUBSTR`, `GETBIT`, `SETBIT`,
//! `INCRBYFLOAT`, `LCS`, and the expiry commands Strata refuses (`SETEX`, `PSETEX`).
//!
//! Each follows Redis 7.0's `t_string.c` and `bitops.c`: the same replies, error texts and
//! edge cases (negative `GETRANGE` indexes, `SETRANGE` of nothing on a missing key, the
//! `proto-max-bulk-len` limit on a string a command would grow). A read-modify-write holds
//! its keys' stripe locks exclusively, so it is atomic against every other command on those
//! keys. Lookups count in `INFO stats` as in Redis (see [`super::commands`]).

use std::sync::Arc;

use bytes::Bytes;

use super::commands::{NOT_INTEGER, SYNTAX, arg, count_lookup, read_together};
use super::session::Session;
use crate::databases::{Database, KvBatch};
use crate::error::resp_engine_error;
use crate::protocol::request::parse_decimal;

/// The reply to a command that would give a key an expiry time.
pub(crate) const EXPIRY_UNSUPPORTED: &str =
    "ERR key expiry (EX, PX, EXAT, PXAT) is not supported by strata";

/// Redis's reply to a string a command would grow past `proto-max-bulk-len`.
const TOO_LONG: &str = "ERR string exceeds maximum allowed size (proto-max-bulk-len)";

/// Reads `key`, replying with the engine's error (and returning `None`) when it fails.
pub(crate) fn read(s: &mut Session, db: &Database, key: &[u8]) -> Option<Option<Bytes>> {
    match db.get(key) {
        Ok(v) => Some(v),
        Err(e) => {
            s.out.error(&resp_engine_error(&e));
            None
        }
    }
}

/// Writes `batch`, replying with the engine's error (and returning false) when it fails.
pub(crate) fn write(s: &mut Session, db: &Database, batch: KvBatch) -> bool {
    match db.write(batch) {
        Ok(()) => true,
        Err(e) => {
            s.out.error(&resp_engine_error(&e));
            false
        }
    }
}

/// Puts `key` = `value`, replying with the engine's error (and returning false) when it fails.
pub(crate) fn put(s: &mut Session, db: &Database, key: &[u8], value: &[u8]) -> bool {
    let mut batch = KvBatch::new();
    batch.put(key, value);
    write(s, db, batch)
}

/// True when a string of `offset + len` bytes fits `proto-max-bulk-len`; replies Redis's
/// error otherwise (its `checkStringLength`).
fn fits(s: &mut Session, offset: u64, len: usize) -> bool {
    let max = u64::try_from(s.shared.config.limits.max_bulk_bytes).unwrap_or(u64::MAX);
    let total = offset.checked_add(u64::try_from(len).unwrap_or(u64::MAX));
    if total.is_none_or(|t| t > max) {
        s.out.error(TOO_LONG);
        return false;
    }
    true
}

fn length(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// SETNX key value: sets the key only if it does not exist; 1 if it was set, else 0.
pub(crate) fn setnx(s: &mut Session, args: &[Bytes]) {
    let (key, value) = (arg(args, 1), arg(args, 2));
    let db = Arc::clone(s.db());
    let _locks = db.lock_keys([key], true);
    let Some(old) = read(s, &db, key) else {
        return;
    };
    if old.is_some() {
        s.out.integer(0);
    } else if put(s, &db, key, value) {
        s.out.integer(1);
    }
}

/// GETSET key value: sets the key and returns its old value (nil when it had none).
pub(crate) fn getset(s: &mut Session, args: &[Bytes]) {
    let (key, value) = (arg(args, 1), arg(args, 2));
    let db = Arc::clone(s.db());
    let _locks = db.lock_keys([key], true);
    let Some(old) = read(s, &db, key) else {
        return;
    };
    count_lookup(s, old.is_some());
    if put(s, &db, key, value) {
        s.out.bulk_or_null(old.as_deref());
    }
}

/// MSETNX key value [key value ...]: sets every pair, in one batch, only if none of the keys
/// exists; 1 if they were set, else 0. A key given twice takes its last value, as in `MSET`.
pub(crate) fn msetnx(s: &mut Session, args: &[Bytes]) {
    let pairs = args.get(1..).unwrap_or_default();
    if pairs.len() % 2 != 0 {
        return s
            .out
            .error("ERR wrong number of arguments for 'msetnx' command");
    }
    let keys: Vec<&Bytes> = pairs.iter().step_by(2).collect();
    let db = Arc::clone(s.db());
    let _locks = db.lock_keys(&keys, true);
    for key in &keys {
        match read(s, &db, key) {
            Some(Some(_)) => return s.out.integer(0),
            Some(None) => {}
            None => return,
        }
    }
    let mut batch = KvBatch::new();
    for pair in pairs.chunks_exact(2) {
        if let [key, value] = pair {
            batch.put(key, value);
        }
    }
    if write(s, &db, batch) {
        s.out.integer(1);
    }
}

/// How an expiry option gives its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExpiryUnit {
    /// `EX`, `SETEX`: seconds from now.
    Seconds,
    /// `PX`, `PSETEX`: milliseconds from now.
    Millis,
    /// `EXAT`: a Unix time in seconds.
    UnixSeconds,
    /// `PXAT`: a Unix time in milliseconds.
    UnixMillis,
}

impl ExpiryUnit {
    /// The unit of option `word` (upper case), if it is one.
    pub(crate) fn of_option(word: &[u8]) -> Option<ExpiryUnit> {
        match word {
            b"EX" => Some(ExpiryUnit::Seconds),
            b"PX" => Some(ExpiryUnit::Millis),
            b"EXAT" => Some(ExpiryUnit::UnixSeconds),
            b"PXAT" => Some(ExpiryUnit::UnixMillis),
            _ => None,
        }
    }

    /// The unit of command `name` (lower case) that takes a time: `setex`, `psetex`,
    /// `expire`, `pexpire`, `expireat`, `pexpireat`.
    pub(crate) fn of_command(name: &str) -> ExpiryUnit {
        match (name.starts_with('p'), name.ends_with("at")) {
            (false, false) => ExpiryUnit::Seconds,
            (true, false) => ExpiryUnit::Millis,
            (false, true) => ExpiryUnit::UnixSeconds,
            (true, true) => ExpiryUnit::UnixMillis,
        }
    }

    /// The Unix time in milliseconds that time `n` in this unit names (a relative one from
    /// now), or `None` where Redis's arithmetic would overflow.
    pub(crate) fn deadline_millis(self, n: i64) -> Option<i64> {
        let millis = match self {
            ExpiryUnit::Seconds | ExpiryUnit::UnixSeconds => n.checked_mul(1000)?,
            ExpiryUnit::Millis | ExpiryUnit::UnixMillis => n,
        };
        match self {
            ExpiryUnit::Seconds | ExpiryUnit::Millis => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
                millis.checked_add(now)
            }
            ExpiryUnit::UnixSeconds | ExpiryUnit::UnixMillis => Some(millis),
        }
    }
}

/// Redis's error for an expiry time that overflows, in `command`.
pub(crate) fn invalid_expire_time(command: &str) -> String {
    format!("ERR invalid expire time in '{command}' command")
}

/// The error Redis 7.0 replies for expiry time `value` of `command` (its
/// `getExpireMillisecondsOrReply`): not an integer; zero or negative; seconds that overflow
/// milliseconds; a relative time that overflows when added to now. `None` for a time Redis
/// would accept.
pub(crate) fn expire_time_error(value: &[u8], unit: ExpiryUnit, command: &str) -> Option<String> {
    let Some(n) = parse_decimal(value) else {
        return Some(NOT_INTEGER.to_owned());
    };
    if n <= 0 || unit.deadline_millis(n).is_none_or(|w| w <= 0) {
        Some(invalid_expire_time(command))
    } else {
        None
    }
}

/// GETEX key [EX seconds | PX ms | EXAT t | PXAT t | PERSIST]: `GET`, after checking the
/// options as Redis does. Keys never expire here, so `PERSIST` changes nothing and a valid
/// time option gets [`EXPIRY_UNSUPPORTED`].
pub(crate) fn getex(s: &mut Session, args: &[Bytes]) {
    let mut expiry: Option<(&Bytes, ExpiryUnit)> = None;
    let mut persist = false;
    let mut i = 2;
    while i < args.len() {
        let opt = arg(args, i).to_ascii_uppercase();
        let unit = ExpiryUnit::of_option(&opt);
        match opt.as_slice() {
            // As Redis 7.0: the same time option may repeat (the last counts), another may
            // not join it.
            _ if unit.is_some()
                && expiry.is_none_or(|(_, u)| Some(u) == unit)
                && !persist
                && i + 1 < args.len() =>
            {
                expiry = args.get(i + 1).zip(unit);
                i += 1;
            }
            // As Redis, PERSIST may repeat but not join a time option.
            b"PERSIST" if expiry.is_none() => persist = true,
            _ => return s.out.error(SYNTAX),
        }
        i += 1;
    }
    // As Redis 7.0: a missing key is nil before the time is looked at.
    let db = Arc::clone(s.db());
    let Some(v) = read(s, &db, arg(args, 1)) else {
        return;
    };
    count_lookup(s, v.is_some());
    match (v, expiry) {
        (Some(_), Some((time, unit))) => {
            let error = expire_time_error(time, unit, "getex");
            s.out.error(error.as_deref().unwrap_or(EXPIRY_UNSUPPORTED));
        }
        (v, _) => s.out.bulk_or_null(v.as_deref()),
    }
}

/// SETEX / PSETEX key time value: the time checked as Redis checks it, then refused, as
/// `SET .. EX` is ([`EXPIRY_UNSUPPORTED`]).
pub(crate) fn setex(s: &mut Session, args: &[Bytes]) {
    let command = String::from_utf8_lossy(arg(args, 0)).to_ascii_lowercase();
    let error = expire_time_error(arg(args, 2), ExpiryUnit::of_command(&command), &command);
    s.out.error(error.as_deref().unwrap_or(EXPIRY_UNSUPPORTED));
}

/// SETRANGE key offset value: overwrites the value from byte `offset` on, padding with zero
/// bytes; returns the new length. Setting nothing on a missing key creates nothing.
pub(crate) fn setrange(s: &mut Session, args: &[Bytes]) {
    let (key, patch) = (arg(args, 1), arg(args, 3));
    let offset = match parse_decimal(arg(args, 2)) {
        None => return s.out.error(NOT_INTEGER),
        Some(n) => match u64::try_from(n) {
            Ok(n) => n,
            Err(_) => return s.out.error("ERR offset is out of range"),
        },
    };
    let db = Arc::clone(s.db());
    let _locks = db.lock_keys([key], true);
    let Some(old) = read(s, &db, key) else {
        return;
    };
    if patch.is_empty() {
        return s.out.integer(old.map_or(0, |v| length(v.len())));
    }
    if !fits(s, offset, patch.len()) {
        return;
    }
    // `fits` bounds the offset by proto-max-bulk-len, a usize.
    let start = usize::try_from(offset).unwrap_or(usize::MAX);
    let mut value = old.map(|v| v.to_vec()).unwrap_or_default();
    let end = start + patch.len();
    if value.len() < end {
        value.resize(end, 0);
    }
    value[start..end].copy_from_slice(patch);
    if put(s, &db, key, &value) {
        s.out.integer(length(value.len()));
    }
}

/// GETRANGE key start end (and its old name SUBSTR): bytes `start..=end` of the value;
/// negative indexes count from the end, and the range is clipped to the value.
pub(crate) fn getrange(s: &mut Session, args: &[Bytes]) {
    let (Some(start), Some(end)) = (parse_decimal(arg(args, 2)), parse_decimal(arg(args, 3)))
    else {
        return s.out.error(NOT_INTEGER);
    };
    let db = Arc::clone(s.db());
    let Some(value) = read(s, &db, arg(args, 1)) else {
        return;
    };
    count_lookup(s, value.is_some());
    let value = value.unwrap_or_default();
    match byte_range(value.len(), start, end) {
        Some((from, to)) => s.out.bulk(&value[from..=to]),
        None => s.out.bulk(b""),
    }
}

/// The inclusive byte range `GETRANGE start end` selects in a value of `len` bytes, by Redis
/// 7.0's rules; `None` when it is empty.
fn byte_range(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    if start < 0 && end < 0 && start > end {
        return None;
    }
    let n = length(len);
    let from_end = |i: i64| if i < 0 { n.saturating_add(i).max(0) } else { i };
    let (start, end) = (from_end(start), from_end(end).min(n - 1));
    if len == 0 || start > end {
        return None;
    }
    Some((usize::try_from(start).ok()?, usize::try_from(end).ok()?))
}

/// Redis's reply to a bad bit offset.
const BAD_BIT_OFFSET: &str = "ERR bit offset is not an integer or out of range";

/// A `GETBIT`/`SETBIT` bit offset: a non-negative integer whose byte lies within
/// `proto-max-bulk-len` (Redis's `getBitOffsetFromArgument`).
fn bit_offset(s: &Session, text: &[u8]) -> Option<u64> {
    let n = u64::try_from(parse_decimal(text)?).ok()?;
    let max = u64::try_from(s.shared.config.limits.max_bulk_bytes).unwrap_or(u64::MAX);
    (n >> 3 < max).then_some(n)
}

/// Byte index and bit mask of bit `offset` (bit 0 is the most significant bit of byte 0).
fn bit_position(offset: u64) -> (usize, u8) {
    let byte = usize::try_from(offset >> 3).unwrap_or(usize::MAX);
    (byte, 0x80 >> (offset & 7))
}

/// GETBIT key offset: the bit at `offset` (0 past the end or for a missing key).
pub(crate) fn getbit(s: &mut Session, args: &[Bytes]) {
    let Some(offset) = bit_offset(s, arg(args, 2)) else {
        return s.out.error(BAD_BIT_OFFSET);
    };
    let db = Arc::clone(s.db());
    let Some(value) = read(s, &db, arg(args, 1)) else {
        return;
    };
    count_lookup(s, value.is_some());
    let (byte, mask) = bit_position(offset);
    let set = value
        .as_deref()
        .and_then(|v| v.get(byte))
        .is_some_and(|b| b & mask != 0);
    s.out.integer(i64::from(set));
}

/// SETBIT key offset 0|1: sets or clears one bit, growing the value with zero bytes; returns
/// the bit's old value.
pub(crate) fn setbit(s: &mut Session, args: &[Bytes]) {
    let Some(offset) = bit_offset(s, arg(args, 2)) else {
        return s.out.error(BAD_BIT_OFFSET);
    };
    let on = match parse_decimal(arg(args, 3)) {
        Some(0) => false,
        Some(1) => true,
        _ => return s.out.error("ERR bit is not an integer or out of range"),
    };
    let key = arg(args, 1);
    let db = Arc::clone(s.db());
    let _locks = db.lock_keys([key], true);
    let Some(old) = read(s, &db, key) else {
        return;
    };
    let (byte, mask) = bit_position(offset);
    let mut value = old.map(|v| v.to_vec()).unwrap_or_default();
    if value.len() <= byte {
        value.resize(byte + 1, 0);
    }
    let was = value[byte] & mask != 0;
    if on {
        value[byte] |= mask;
    } else {
        value[byte] &= !mask;
    }
    if put(s, &db, key, &value) {
        s.out.integer(i64::from(was));
    }
}

/// INCRBYFLOAT key increment: adds a decimal number to the value and returns the new value
/// as it is stored (see [`add_decimals`]).
pub(crate) fn incrbyfloat(s: &mut Session, args: &[Bytes]) {
    let key = arg(args, 1);
    let db = Arc::clone(s.db());
    let _locks = db.lock_keys([key], true);
    let Some(old) = read(s, &db, key) else {
        return;
    };
    let sum = add_decimals(old.as_deref().unwrap_or(b"0"), arg(args, 2));
    match sum {
        Ok(text) => {
            if put(s, &db, key, text.as_bytes()) {
                s.out.bulk(text.as_bytes());
            }
        }
        Err(message) => s.out.error(message),
    }
}

/// Longest number `INCRBYFLOAT` reads or stores, in bytes (Redis's `MAX_LONG_DOUBLE_CHARS`).
const MAX_FLOAT_TEXT: usize = 5 * 1024;

/// Largest and smallest decimal exponents of a number's leading digit that `INCRBYFLOAT`
/// accepts: the range of C's x87 `long double` (about 1.19e4932 down to 3.6e-4951), which
/// bounds what Redis's `strtold` reads.
const MAX_EXPONENT: i64 = 4932;
const MIN_EXPONENT: i64 = -4951;

const NOT_FLOAT: &str = "ERR value is not a valid float";
const NOT_FINITE: &str = "ERR increment would produce NaN or Infinity";

/// `a + b` for `INCRBYFLOAT`, as the text stored and returned, or Redis's error.
///
/// Both must be numbers as Redis's `strtold` reads them without surrounding space: decimal
/// (`1.5`, `-2e3`, `.5`) within `long double`'s range, or an infinity (`inf`), whose sum is
/// `ERR increment would produce NaN or Infinity`; anything else (`nan`, ` 1`, `1e99999`) is
/// `ERR value is not a valid float`. Redis adds in C's `long double` and prints 17 decimals
/// with trailing zeros removed, which shows binary rounding (`0.1` + `1.5e3` reads
/// `1500.09999999999999998`) and loses digits past about 19. Strata adds the decimal
/// numbers exactly and prints the exact sum in plain notation (`1500.1`), never `-0`;
/// hexadecimal floats (`0x1p3`), which `strtold` also reads, are refused. A sum longer than
/// [`MAX_FLOAT_TEXT`] could not be read back, so it is refused too.
fn add_decimals(a: &[u8], b: &[u8]) -> Result<String, &'static str> {
    let (x, y) = (read_float(a)?, read_float(b)?);
    let (Some(x), Some(y)) = (x, y) else {
        return Err(NOT_FINITE);
    };
    let sum = x.add(&y);
    if sum.leading_exponent() > MAX_EXPONENT {
        return Err(NOT_FINITE);
    }
    let text = sum.to_string();
    if text.len() >= MAX_FLOAT_TEXT {
        return Err("ERR increment would produce a number longer than 5 KiB");
    }
    Ok(text)
}

/// An `INCRBYFLOAT` operand: `Some` decimal, `None` for an infinity, or the error.
fn read_float(text: &[u8]) -> Result<Option<BigDecimal>, &'static str> {
    if text.len() >= MAX_FLOAT_TEXT {
        return Err(NOT_FLOAT);
    }
    if let Some(d) = BigDecimal::parse(text) {
        let e = d.leading_exponent();
        return if d.is_zero() || (MIN_EXPONENT..=MAX_EXPONENT).contains(&e) {
            Ok(Some(d))
        } else {
            Err(NOT_FLOAT)
        };
    }
    // `inf`, `-Infinity` and the like: valid, but no finite sum follows.
    match std::str::from_utf8(text)
        .ok()
        .and_then(|t| t.parse::<f64>().ok())
    {
        Some(v) if v.is_infinite() => Ok(None),
        _ => Err(NOT_FLOAT),
    }
}

/// An exact decimal number: `digits` (most significant first, each 0..=9, no leading or
/// trailing zeros; empty for zero) × 10^`exponent`, negative when `negative`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BigDecimal {
    negative: bool,
    digits: Vec<u8>,
    exponent: i64,
}

impl BigDecimal {
    /// Reads `[+-]digits[.digits][(e|E)[+-]digits]` (at least one digit before or after the
    /// point, an exponent of at most 6 digits); `None` for anything else.
    fn parse(text: &[u8]) -> Option<BigDecimal> {
        let (negative, rest) = match text.split_first()? {
            (b'-', rest) => (true, rest),
            (b'+', rest) => (false, rest),
            _ => (false, text),
        };
        let (number, exponent) = match rest.iter().position(|&c| c == b'e' || c == b'E') {
            Some(i) => (&rest[..i], Some(&rest[i + 1..])),
            None => (rest, None),
        };
        let (whole, fraction) = match number.iter().position(|&c| c == b'.') {
            Some(i) => (&number[..i], &number[i + 1..]),
            None => (number, &number[number.len()..]),
        };
        if whole.is_empty() && fraction.is_empty() {
            return None;
        }
        let mut digits = Vec::with_capacity(whole.len() + fraction.len());
        for &c in whole.iter().chain(fraction) {
            if !c.is_ascii_digit() {
                return None;
            }
            digits.push(c - b'0');
        }
        let mut exp = -i64::try_from(fraction.len()).ok()?;
        if let Some(e) = exponent {
            let (sign, e) = match e.split_first()? {
                (b'-', rest) => (-1, rest),
                (b'+', rest) => (1, rest),
                _ => (1, e),
            };
            if e.is_empty() || e.len() > 6 || !e.iter().all(u8::is_ascii_digit) {
                return None;
            }
            exp += sign * std::str::from_utf8(e).ok()?.parse::<i64>().ok()?;
        }
        Some(BigDecimal::normalized(negative, digits, exp))
    }

    /// The number `digits` × 10^`exponent` with leading and trailing zeros removed.
    fn normalized(negative: bool, mut digits: Vec<u8>, mut exponent: i64) -> BigDecimal {
        let leading = digits.iter().take_while(|&&d| d == 0).count();
        digits.drain(..leading);
        while digits.last() == Some(&0) {
            digits.pop();
            exponent += 1;
        }
        let zero = digits.is_empty();
        BigDecimal {
            negative: negative && !zero,
            digits,
            exponent: if zero { 0 } else { exponent },
        }
    }

    fn is_zero(&self) -> bool {
        self.digits.is_empty()
    }

    /// The decimal exponent of the leading digit (`123.4` → 2, `0.05` → -2).
    fn leading_exponent(&self) -> i64 {
        self.exponent + i64::try_from(self.digits.len()).unwrap_or(i64::MAX) - 1
    }

    /// The digits scaled to exponent `exponent` (at most `self.exponent`): zeros appended.
    fn digits_at(&self, exponent: i64) -> Vec<u8> {
        let zeros = usize::try_from(self.exponent - exponent).unwrap_or(0);
        let mut digits = self.digits.clone();
        digits.resize(digits.len() + zeros, 0);
        digits
    }

    /// `self + other`, exactly.
    fn add(&self, other: &BigDecimal) -> BigDecimal {
        let exponent = self.exponent.min(other.exponent);
        let (a, b) = (self.digits_at(exponent), other.digits_at(exponent));
        if self.negative == other.negative {
            return BigDecimal::normalized(self.negative, add_magnitudes(&a, &b), exponent);
        }
        // Opposite signs: the larger magnitude less the smaller, with the larger's sign.
        let a_larger = compare_magnitudes(&a, &b) != std::cmp::Ordering::Less;
        let (big, small, negative) = if a_larger {
            (&a, &b, self.negative)
        } else {
            (&b, &a, other.negative)
        };
        BigDecimal::normalized(negative, subtract_magnitudes(big, small), exponent)
    }
}

/// Compares two digit strings of the same scale as numbers.
fn compare_magnitudes(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let skip = |d: &[u8]| d.iter().take_while(|&&x| x == 0).count();
    let (a, b) = (&a[skip(a)..], &b[skip(b)..]);
    a.len().cmp(&b.len()).then_with(|| a.cmp(b))
}

/// `a + b` of two digit strings of the same scale.
fn add_magnitudes(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 1);
    let (mut ia, mut ib, mut carry) = (a.iter().rev(), b.iter().rev(), 0u8);
    loop {
        let (x, y) = (ia.next(), ib.next());
        if x.is_none() && y.is_none() {
            break;
        }
        let sum = x.copied().unwrap_or(0) + y.copied().unwrap_or(0) + carry;
        out.push(sum % 10);
        carry = sum / 10;
    }
    if carry > 0 {
        out.push(carry);
    }
    out.reverse();
    out
}

/// `big - small` of two digit strings of the same scale, `big` not the smaller.
fn subtract_magnitudes(big: &[u8], small: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(big.len());
    let (mut small, mut borrow) = (small.iter().rev(), 0u8);
    for &x in big.iter().rev() {
        let y = small.next().copied().unwrap_or(0) + borrow;
        let (digit, next_borrow) = if x >= y { (x - y, 0) } else { (x + 10 - y, 1) };
        out.push(digit);
        borrow = next_borrow;
    }
    out.reverse();
    out
}

impl std::fmt::Display for BigDecimal {
    /// Plain decimal notation (`-0.1`, `1500`, `0.00001`), never an exponent or `-0`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_zero() {
            return f.write_str("0");
        }
        if self.negative {
            f.write_str("-")?;
        }
        let digit = |d: &u8| char::from(b'0' + d);
        let len = i64::try_from(self.digits.len()).unwrap_or(i64::MAX);
        if self.exponent >= 0 {
            let text: String = self.digits.iter().map(digit).collect();
            let zeros = usize::try_from(self.exponent).unwrap_or(0);
            return write!(f, "{text}{}", "0".repeat(zeros));
        }
        let fraction_len = -self.exponent;
        if len > fraction_len {
            let split = usize::try_from(len - fraction_len).unwrap_or(0);
            let (whole, fraction) = self.digits.split_at(split);
            let whole: String = whole.iter().map(digit).collect();
            let fraction: String = fraction.iter().map(digit).collect();
            write!(f, "{whole}.{fraction}")
        } else {
            let zeros = usize::try_from(fraction_len - len).unwrap_or(0);
            let text: String = self.digits.iter().map(digit).collect();
            write!(f, "0.{}{text}", "0".repeat(zeros))
        }
    }
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN]: the longest common subsequence
/// of two values (a missing key is empty), its length, or the matching ranges, as Redis 7.0
/// computes them: the dynamic-programming table of (len1 + 1) × (len2 + 1) `u32`s, refused
/// when it would take more than `proto-max-bulk-len` bytes.
pub(crate) fn lcs(s: &mut Session, args: &[Bytes]) {
    // The command table's arity (-3) guarantees both keys; a missing one would read as empty.
    let (a, b) = match read_together(s, args.get(1..3).unwrap_or_default()) {
        Ok(values) => {
            let mut values = values.into_iter();
            (values.next().flatten(), values.next().flatten())
        }
        Err(e) => return s.out.error(&resp_engine_error(&e)),
    };
    let (mut len_only, mut idx, mut with_len, mut min_len) = (false, false, false, 0usize);
    let mut i = 3;
    while i < args.len() {
        let opt = arg(args, i).to_ascii_uppercase();
        match opt.as_slice() {
            b"IDX" => idx = true,
            b"LEN" => len_only = true,
            b"WITHMATCHLEN" => with_len = true,
            b"MINMATCHLEN" if i + 1 < args.len() => {
                let Some(n) = parse_decimal(arg(args, i + 1)) else {
                    return s.out.error(NOT_INTEGER);
                };
                min_len = usize::try_from(n.max(0)).unwrap_or(usize::MAX);
                i += 1;
            }
            _ => return s.out.error(SYNTAX),
        }
        i += 1;
    }
    if len_only && idx {
        return s
            .out
            .error("ERR If you want both the length and indexes, please just use IDX.");
    }
    let (a, b) = (a.unwrap_or_default(), b.unwrap_or_default());
    let cells = (a.len() + 1).checked_mul(b.len() + 1);
    if cells
        .and_then(|c| c.checked_mul(4))
        .is_none_or(|bytes| bytes > s.shared.config.limits.max_bulk_bytes)
    {
        return s
            .out
            .error("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len");
    }
    let table = Lcs::new(&a, &b);
    if len_only {
        return s.out.integer(i64::from(table.len()));
    }
    let (common, matches) = table.walk(min_len);
    if !idx {
        return s.out.bulk(&common);
    }
    s.out.map(2);
    s.out.bulk(b"matches");
    s.out.array(matches.len());
    for m in &matches {
        s.out.array(2 + usize::from(with_len));
        for (start, end) in [m.a, m.b] {
            s.out.array(2);
            s.out.integer(length(start));
            s.out.integer(length(end));
        }
        if with_len {
            s.out.integer(length(m.a.1 - m.a.0 + 1));
        }
    }
    s.out.bulk(b"len");
    s.out.integer(i64::from(table.len()));
}

/// One matching range of `LCS .. IDX`: inclusive byte ranges in the first and second value.
#[derive(Debug, PartialEq, Eq)]
struct LcsMatch {
    a: (usize, usize),
    b: (usize, usize),
}

/// The LCS table of two byte strings: `cell(i, j)` is the length of the longest common
/// subsequence of `a[..i]` and `b[..j]`.
struct Lcs<'a> {
    a: &'a [u8],
    b: &'a [u8],
    cells: Vec<u32>,
}

impl<'a> Lcs<'a> {
    fn new(a: &'a [u8], b: &'a [u8]) -> Lcs<'a> {
        let width = b.len() + 1;
        let mut cells = vec![0u32; (a.len() + 1) * width];
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * width + j - 1] + 1
                } else {
                    cells[(i - 1) * width + j].max(cells[i * width + j - 1])
                };
            }
        }
        Lcs { a, b, cells }
    }

    fn cell(&self, i: usize, j: usize) -> u32 {
        self.cells[i * (self.b.len() + 1) + j]
    }

    /// Length of the longest common subsequence.
    fn len(&self) -> u32 {
        self.cell(self.a.len(), self.b.len())
    }

    /// The subsequence and its contiguous matching ranges of at least `min_len` bytes, last
    /// first, walking back from the table's corner as Redis does.
    fn walk(&self, min_len: usize) -> (Vec<u8>, Vec<LcsMatch>) {
        let (a, b) = (self.a, self.b);
        let mut common = Vec::with_capacity(usize::try_from(self.len()).unwrap_or(0));
        let mut matches = Vec::new();
        let mut current: Option<LcsMatch> = None;
        let (mut i, mut j) = (a.len(), b.len());
        while i > 0 && j > 0 {
            let mut emit = false;
            if a[i - 1] == b[j - 1] {
                common.push(a[i - 1]);
                match &mut current {
                    None => {
                        current = Some(LcsMatch {
                            a: (i - 1, i - 1),
                            b: (j - 1, j - 1),
                        });
                    }
                    // Contiguous with the range so far: extend it backwards.
                    Some(m) if m.a.0 == i && m.b.0 == j => {
                        m.a.0 -= 1;
                        m.b.0 -= 1;
                    }
                    Some(_) => emit = true,
                }
                if let Some(m) = &current
                    && (m.a.0 == 0 || m.b.0 == 0)
                {
                    emit = true;
                }
                i -= 1;
                j -= 1;
            } else {
                if self.cell(i - 1, j) > self.cell(i, j - 1) {
                    i -= 1;
                } else {
                    j -= 1;
                }
                emit = current.is_some();
            }
            if emit
                && let Some(m) = current.take()
                && m.a.1 - m.a.0 + 1 >= min_len
            {
                matches.push(m);
            }
        }
        common.reverse();
        (common, matches)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn getrange_follows_redis_index_rules() {
        // "Hello World", as in Redis's GETRANGE tests.
        let n = 11;
        assert_eq!(byte_range(n, 0, 3), Some((0, 3)));
        assert_eq!(byte_range(n, 0, -1), Some((0, 10)));
        assert_eq!(byte_range(n, -4, -1), Some((7, 10)));
        assert_eq!(byte_range(n, 5, 3), None);
        assert_eq!(byte_range(n, 5, 5000), Some((5, 10)));
        assert_eq!(byte_range(n, -5000, 10000), Some((0, 10)));
        assert_eq!(byte_range(n, -1, -5), None);
        assert_eq!(byte_range(0, 0, -1), None);
        assert_eq!(byte_range(n, i64::MIN, i64::MAX), Some((0, 10)));
        assert_eq!(byte_range(n, 0, i64::MIN), Some((0, 0)));
    }

    #[test]
    fn incrbyfloat_adds_decimals_exactly() {
        let add = |a: &str, b: &str| add_decimals(a.as_bytes(), b.as_bytes());
        let ok = |s: &str| Ok(s.to_owned());
        assert_eq!(add("1", "-1.1"), ok("-0.1"));
        assert_eq!(add("10.5", "0.1"), ok("10.6"));
        assert_eq!(add("0.1", "1.5e3"), ok("1500.1"));
        assert_eq!(add("17179869184", "1.5"), ok("17179869185.5"));
        assert_eq!(add("1.5", "1.5"), ok("3"));
        assert_eq!(add("0", "5.0e3"), ok("5000"));
        assert_eq!(add("0.25", "-0.25"), ok("0"));
        assert_eq!(add("-0", "0"), ok("0"));
        assert_eq!(add("+.5", "5."), ok("5.5"));
        assert_eq!(add("007", "-.5E+1"), ok("2"));
        assert_eq!(
            add("0.024390243902439025", "-0.024390243902439025"),
            ok("0")
        );
        assert_eq!(add("-5", "3"), ok("-2"));
        assert_eq!(add("999", "1"), ok("1000"));
        assert_eq!(add("1000", "-0.001"), ok("999.999"));
        // Any number of digits stays exact (Redis keeps about 19).
        assert_eq!(
            add("12345678901234567890", "0.00000000000000000001"),
            ok("12345678901234567890.00000000000000000001")
        );
        assert_eq!(
            add("170141183460469231731687303715884105727", "1"),
            ok("170141183460469231731687303715884105728")
        );
        assert_eq!(add("1e300", "0"), ok(&format!("1{}", "0".repeat(300))));
        assert_eq!(add("1e-40", "0"), ok(&format!("0.{}1", "0".repeat(39))));
        // Within long double's range, beyond double's.
        assert_eq!(add("1e308", "1e308"), ok(&format!("2{}", "0".repeat(308))));
        assert_eq!(add("1e-4950", "0"), ok(&format!("0.{}1", "0".repeat(4949))));
    }

    #[test]
    fn incrbyfloat_refuses_what_redis_refuses() {
        let add = |a: &[u8], b: &[u8]| add_decimals(a, b);
        for bad in [
            &b" 11"[..],
            b"11 ",
            b"",
            b"abc",
            b"nan",
            b"1\x002",
            b"0x10",
            b"1e",
            b"-",
            b".",
            b"1e99999",
            b"1e5000",
            b"1e-5000",
        ] {
            assert_eq!(add(bad, b"1"), Err(NOT_FLOAT), "{bad:?}");
        }
        assert_eq!(add(b"0", b"+inf"), Err(NOT_FINITE));
        assert_eq!(add(b"-Infinity", b"1"), Err(NOT_FINITE));
        assert_eq!(add(b"9e4932", b"9e4932"), Err(NOT_FINITE));
        assert_eq!(add(&vec![b'1'; MAX_FLOAT_TEXT], b"1"), Err(NOT_FLOAT));
        // A sum too long to read back.
        assert_eq!(
            add(b"1e4000", b"1e-2000"),
            Err("ERR increment would produce a number longer than 5 KiB")
        );
    }

    #[test]
    fn big_decimal_parses_and_prints() {
        for (text, printed) in [
            ("0", "0"),
            ("-1.50", "-1.5"),
            ("123e-2", "1.23"),
            ("1.5E+2", "150"),
            ("000.000", "0"),
            ("-0.0001", "-0.0001"),
            ("-0e5", "0"),
        ] {
            let d = BigDecimal::parse(text.as_bytes()).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(d.to_string(), printed);
        }
        for bad in [
            "",
            ".",
            "-",
            "1e",
            "1e-",
            "1.2.3",
            "e5",
            "1e9999999",
            "--1",
            "1e+-1",
        ] {
            assert_eq!(BigDecimal::parse(bad.as_bytes()), None, "{bad}");
        }
    }

    #[test]
    fn lcs_matches_redis_examples() {
        // From Redis's LCS documentation and tests.
        let (a, b) = (b"ohmytext".as_slice(), b"mynewtext".as_slice());
        let table = Lcs::new(a, b);
        assert_eq!(table.len(), 6);
        let (common, matches) = table.walk(0);
        assert_eq!(common, b"mytext");
        assert_eq!(
            matches,
            vec![
                LcsMatch {
                    a: (4, 7),
                    b: (5, 8)
                },
                LcsMatch {
                    a: (2, 3),
                    b: (0, 1)
                },
            ]
        );
        assert_eq!(
            table.walk(4).1,
            vec![LcsMatch {
                a: (4, 7),
                b: (5, 8)
            }]
        );
        assert_eq!(Lcs::new(b"abc", b"abc").walk(0).0, b"abc");
        assert_eq!(Lcs::new(b"", b"abc").walk(0), (Vec::new(), Vec::new()));
    }
}
