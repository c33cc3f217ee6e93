//! `strata serve`'s RESP front end driven by the `redis` crate and raw sockets: command
//! semantics and error replies as Redis gives them, pipelines, SCAN under concurrent
//! writes, databases, RESP3, AUTH, INFO/COMMAND/CLIENT, durability across restarts.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

mod server_util;

use std::collections::HashSet;
use std::io::Write;
use std::time::{Duration, Instant};

use redis::{Commands, Value};
use server_util::{TestServer, closed_by_peer, encode, read_exactly, roundtrip};
use strata_server::{RunningServer, SyncMode};

type TestResult = Result<(), Box<dyn std::error::Error>>;

#[test]
fn string_commands_follow_redis_semantics() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let () = c.set("k", "v1")?;
    assert_eq!(c.get::<_, Option<String>>("k")?, Some("v1".into()));
    assert_eq!(c.get::<_, Option<String>>("missing")?, None);
    assert_eq!(c.strlen::<_, i64>("k")?, 2);
    assert_eq!(c.append::<_, _, i64>("k", "23")?, 4);
    assert_eq!(c.get::<_, String>("k")?, "v123");
    // SET NX / XX / GET.
    let nx: Option<String> = redis::cmd("SET")
        .arg("k")
        .arg("x")
        .arg("NX")
        .query(&mut c)?;
    assert_eq!(nx, None);
    let nx: Option<String> = redis::cmd("SET")
        .arg("new")
        .arg("n")
        .arg("NX")
        .query(&mut c)?;
    assert_eq!(nx.as_deref(), Some("OK"));
    let xx: Option<String> = redis::cmd("SET")
        .arg("absent")
        .arg("x")
        .arg("XX")
        .query(&mut c)?;
    assert_eq!(xx, None);
    let old: Option<String> = redis::cmd("SET")
        .arg("k")
        .arg("v2")
        .arg("GET")
        .query(&mut c)?;
    assert_eq!(old.as_deref(), Some("v123"));
    let err = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .arg("NX")
        .arg("XX")
        .query::<()>(&mut c);
    assert!(err.unwrap_err().to_string().contains("syntax error"));
    // MSET / MGET / EXISTS / DEL / GETDEL.
    let () = c.mset(&[("a", "1"), ("b", "2")])?;
    let got: Vec<Option<String>> = c.mget(&["a", "b", "zz"])?;
    assert_eq!(got, vec![Some("1".into()), Some("2".into()), None]);
    let exists: i64 = redis::cmd("EXISTS")
        .arg("a")
        .arg("a")
        .arg("zz")
        .query(&mut c)?;
    assert_eq!(exists, 2);
    let deleted: i64 = redis::cmd("DEL")
        .arg("a")
        .arg("zz")
        .arg("a")
        .query(&mut c)?;
    assert_eq!(deleted, 1);
    let v: Option<String> = redis::cmd("GETDEL").arg("b").query(&mut c)?;
    assert_eq!(v.as_deref(), Some("2"));
    let v: Option<String> = redis::cmd("GETDEL").arg("b").query(&mut c)?;
    assert_eq!(v, None);
    // TYPE / TTL for keys without expiry.
    let t: String = redis::cmd("TYPE").arg("k").query(&mut c)?;
    assert_eq!(t, "string");
    let t: String = redis::cmd("TYPE").arg("b").query(&mut c)?;
    assert_eq!(t, "none");
    assert_eq!(redis::cmd("TTL").arg("k").query::<i64>(&mut c)?, -1);
    assert_eq!(redis::cmd("TTL").arg("b").query::<i64>(&mut c)?, -2);
    // Binary keys and values, empty value.
    let key = [0u8, 0xFF, b'\r', b'\n'];
    let () = c.set(&key[..], &[0u8, 1, 2][..])?;
    assert_eq!(c.get::<_, Vec<u8>>(&key[..])?, vec![0, 1, 2]);
    let () = c.set("empty", "")?;
    assert_eq!(c.get::<_, Option<String>>("empty")?, Some(String::new()));
    Ok(())
}

/// A reply as text: bulk and simple strings, integers, nil as "(nil)", errors as "ERR ...".
fn reply(c: &mut redis::Connection, args: &[&str]) -> String {
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    match cmd.query::<Value>(c) {
        Ok(Value::BulkString(b)) => String::from_utf8_lossy(&b).into_owned(),
        Ok(Value::SimpleString(s)) => s,
        Ok(Value::Okay) => "OK".into(),
        Ok(Value::Int(n)) => n.to_string(),
        Ok(Value::Nil) => "(nil)".into(),
        Ok(other) => format!("{other:?}"),
        Err(e) => e.to_string(),
    }
}

/// Asserts that the reply to `args` contains `expected`.
fn check(c: &mut redis::Connection, args: &[&str], expected: &str) {
    let got = reply(c, args);
    assert!(
        got.contains(expected),
        "{args:?}: got {got:?}, expected {expected:?}"
    );
}

#[test]
fn partial_value_and_multi_key_string_commands_follow_redis() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    check(&mut c, &["SETNX", "n", "1"], "1");
    check(&mut c, &["SETNX", "n", "2"], "0");
    check(&mut c, &["GETSET", "n", "3"], "1");
    check(&mut c, &["GETSET", "fresh", "x"], "(nil)");
    check(&mut c, &["MSETNX", "m1", "a", "m2", "b"], "1");
    check(&mut c, &["MSETNX", "m2", "c", "m3", "d"], "0");
    check(&mut c, &["EXISTS", "m3"], "0");
    check(&mut c, &["MSETNX", "m4", "a", "m4", "b"], "1");
    check(&mut c, &["GET", "m4"], "b");
    check(
        &mut c,
        &["MSETNX", "m5"],
        "wrong number of arguments for 'msetnx' command",
    );
    // SETRANGE pads with zero bytes; nothing is created by an empty patch.
    check(&mut c, &["SETRANGE", "r", "0", ""], "0");
    check(&mut c, &["EXISTS", "r"], "0");
    check(&mut c, &["SETRANGE", "r", "3", "ab"], "5");
    let padded: Vec<u8> = c.get("r")?;
    assert_eq!(padded, b"\0\0\0ab");
    check(
        &mut c,
        &["SETRANGE", "r", "-1", "x"],
        "offset is out of range",
    );
    check(
        &mut c,
        &["SETRANGE", "r", "x", "x"],
        "value is not an integer",
    );
    check(
        &mut c,
        &["SETRANGE", "r", "536870911", "xx"],
        "string exceeds maximum allowed size",
    );
    // GETRANGE / SUBSTR with Redis's index rules.
    let () = c.set("h", "Hello World")?;
    check(&mut c, &["GETRANGE", "h", "0", "3"], "Hell");
    check(&mut c, &["GETRANGE", "h", "-5", "-1"], "World");
    check(&mut c, &["SUBSTR", "h", "6", "5000"], "World");
    assert_eq!(reply(&mut c, &["GETRANGE", "h", "5", "3"]), "");
    assert_eq!(reply(&mut c, &["GETRANGE", "nope", "0", "-1"]), "");
    // Bits: bit 0 is the high bit of byte 0.
    check(&mut c, &["SETBIT", "b", "7", "1"], "0");
    check(&mut c, &["SETBIT", "b", "7", "0"], "1");
    check(&mut c, &["SETBIT", "b", "1", "1"], "0");
    check(&mut c, &["GET", "b"], "@");
    check(&mut c, &["GETBIT", "b", "1"], "1");
    check(&mut c, &["GETBIT", "b", "100"], "0");
    check(
        &mut c,
        &["SETBIT", "b", "1", "2"],
        "bit is not an integer or out of range",
    );
    check(
        &mut c,
        &["GETBIT", "b", "-1"],
        "bit offset is not an integer or out of range",
    );
    check(
        &mut c,
        &["GETBIT", "b", "4294967296000"],
        "bit offset is not an integer or out of range",
    );
    // INCRBYFLOAT adds decimals exactly.
    check(&mut c, &["INCRBYFLOAT", "f", "10.5"], "10.5");
    check(&mut c, &["INCRBYFLOAT", "f", "0.1"], "10.6");
    check(&mut c, &["SET", "f", "1"], "OK");
    assert_eq!(reply(&mut c, &["INCRBYFLOAT", "f", "-1.1"]), "-0.1");
    check(&mut c, &["SET", "f", "12345678901234567890"], "OK");
    check(
        &mut c,
        &["INCRBYFLOAT", "f", "1e-20"],
        "12345678901234567890.00000000000000000001",
    );
    check(
        &mut c,
        &["INCRBYFLOAT", "f", "+inf"],
        "increment would produce NaN or Infinity",
    );
    check(
        &mut c,
        &["INCRBYFLOAT", "h", "1"],
        "value is not a valid float",
    );
    // LCS, as in Redis's documentation.
    let () = c.mset(&[("l1", "ohmytext"), ("l2", "mynewtext")])?;
    check(&mut c, &["LCS", "l1", "l2"], "mytext");
    check(&mut c, &["LCS", "l1", "l2", "LEN"], "6");
    let idx: Value = redis::cmd("LCS")
        .arg("l1")
        .arg("l2")
        .arg("IDX")
        .arg("MINMATCHLEN")
        .arg("4")
        .arg("WITHMATCHLEN")
        .query(&mut c)?;
    assert_eq!(
        format!("{idx:?}"),
        format!(
            "{:?}",
            Value::Array(vec![
                Value::BulkString(b"matches".to_vec()),
                Value::Array(vec![Value::Array(vec![
                    Value::Array(vec![Value::Int(4), Value::Int(7)]),
                    Value::Array(vec![Value::Int(5), Value::Int(8)]),
                    Value::Int(4),
                ])]),
                Value::BulkString(b"len".to_vec()),
                Value::Int(6),
            ])
        )
    );
    check(
        &mut c,
        &["LCS", "l1", "l2", "LEN", "IDX"],
        "If you want both the length and indexes",
    );
    // Expiry: PERSIST and the *TIME commands answer as for keys without expiry; setting one
    // is refused.
    check(&mut c, &["GETEX", "h"], "Hello World");
    check(&mut c, &["GETEX", "h", "PERSIST"], "Hello World");
    check(&mut c, &["GETEX", "h", "PERSIST", "PERSIST"], "Hello World");
    check(
        &mut c,
        &["GETEX", "h", "PERSIST", "EX", "1"],
        "syntax error",
    );
    check(&mut c, &["GETEX", "h", "EX", "10"], "key expiry");
    check(&mut c, &["GETEX", "h", "BOGUS"], "syntax error");
    check(&mut c, &["SETEX", "h", "10", "v"], "key expiry");
    check(&mut c, &["PSETEX", "h", "10", "v"], "key expiry");
    // Redis's own checks of the options and the time come first (redis-server 7.0 replies).
    for (args, error) in [
        (
            &["SET", "h", "5", "PX", "10", "EX", "10"][..],
            "syntax error",
        ),
        (&["SET", "h", "5", "KEEPTTL", "EX", "10"], "syntax error"),
        (&["SET", "h", "5", "EX"], "syntax error"),
        (
            &["SET", "h", "5", "EX", "abc"],
            "value is not an integer or out of range",
        ),
        (
            &["SET", "h", "5", "EX", "0"],
            "invalid expire time in 'set' command",
        ),
        (
            &["SET", "h", "5", "PX", "-1"],
            "invalid expire time in 'set' command",
        ),
        (
            &["SET", "h", "5", "EX", "9223372036854776"],
            "invalid expire time in 'set' command",
        ),
        // EX in seconds overflows milliseconds, or overflows when added to now.
        (
            &["SET", "h", "5", "EX", "9223372036854775"],
            "invalid expire time in 'set' command",
        ),
        (&["SET", "h", "5", "PX", "9223372036854775"], "key expiry"),
        (&["SET", "h", "5", "EXAT", "9223372036854775"], "key expiry"),
        (
            &["GETEX", "h", "EX", "0"],
            "invalid expire time in 'getex' command",
        ),
        (
            &["GETEX", "h", "PXAT", "x"],
            "value is not an integer or out of range",
        ),
        (
            &["SETEX", "h", "0", "v"],
            "invalid expire time in 'setex' command",
        ),
        (
            &["PSETEX", "h", "-5", "v"],
            "invalid expire time in 'psetex' command",
        ),
        (
            &["SETEX", "h", "x", "v"],
            "value is not an integer or out of range",
        ),
    ] {
        check(&mut c, args, error);
    }
    check(&mut c, &["GET", "h"], "Hello World");
    // As Redis 7.0: the same time option may repeat; GETEX of a missing key is nil before
    // its time is checked.
    check(
        &mut c,
        &["SET", "h2", "v", "EX", "10", "EX", "20"],
        "key expiry",
    );
    check(
        &mut c,
        &["GETEX", "h", "PX", "10", "PX", "20"],
        "key expiry",
    );
    check(
        &mut c,
        &["GETEX", "h", "EX", "10", "PX", "20"],
        "syntax error",
    );
    check(&mut c, &["GETEX", "nokey", "EX", "abc"], "(nil)");
    check(&mut c, &["EXPIRE", "h", "10"], "key expiry");
    // EXPIRE's own checks, then 0 for a missing key, as Redis 7.0.
    for (args, reply) in [
        (&["EXPIRE", "nokey", "10"][..], "0"),
        (&["PEXPIREAT", "nokey", "10", "GT"], "0"),
        (
            &["EXPIRE", "h", "abc"],
            "value is not an integer or out of range",
        ),
        (&["EXPIRE", "h", "10", "FOO"], "Unsupported option FOO"),
        (
            &["EXPIRE", "h", "10", "NX", "XX"],
            "NX and XX, GT or LT options at the same time are not compatible",
        ),
        (
            &["EXPIRE", "h", "10", "GT", "LT"],
            "GT and LT options at the same time are not compatible",
        ),
        (
            &["EXPIRE", "h", "9223372036854776"],
            "invalid expire time in 'expire' command",
        ),
        (&["EXPIREAT", "h", "10", "XX"], "key expiry"),
    ] {
        check(&mut c, args, reply);
    }
    check(&mut c, &["PEXPIREAT", "h", "10"], "key expiry");
    check(&mut c, &["PERSIST", "h"], "0");
    check(&mut c, &["EXPIRETIME", "h"], "-1");
    check(&mut c, &["PEXPIRETIME", "nope"], "-2");
    check(&mut c, &["TOUCH", "h", "nope", "n"], "2");
    check(&mut c, &["UNLINK", "h", "nope"], "1");
    Ok(())
}

#[test]
fn rename_copy_move_and_randomkey_follow_redis() -> TestResult {
    let mut server = TestServer::start(|_| {});
    let mut c = server.client();
    check(&mut c, &["RANDOMKEY"], "(nil)");
    check(&mut c, &["RENAME", "a", "b"], "no such key");
    let () = c.set("a", "1")?;
    check(&mut c, &["RENAME", "a", "a"], "OK");
    check(&mut c, &["RENAMENX", "a", "a"], "0");
    check(&mut c, &["RENAME", "a", "b"], "OK");
    check(&mut c, &["EXISTS", "a"], "0");
    let () = c.set("c", "3")?;
    check(&mut c, &["RENAMENX", "b", "c"], "0");
    check(&mut c, &["RENAMENX", "b", "d"], "1");
    check(&mut c, &["GET", "d"], "1");
    // COPY within the database and to another one.
    check(
        &mut c,
        &["COPY", "d", "d"],
        "source and destination objects are the same",
    );
    check(&mut c, &["COPY", "d", "c"], "0");
    check(&mut c, &["COPY", "d", "c", "REPLACE"], "1");
    check(&mut c, &["GET", "c"], "1");
    check(&mut c, &["COPY", "nope", "x"], "0");
    check(&mut c, &["COPY", "d", "d", "DB", "3"], "1");
    check(
        &mut c,
        &["COPY", "d", "d", "DB", "16"],
        "DB index is out of range",
    );
    check(
        &mut c,
        &["COPY", "d", "d", "DB", "nosuchdb"],
        "value is not an integer",
    );
    check(&mut c, &["COPY", "d", "d", "BOGUS"], "syntax error");
    // Each DB is checked as it is read, as Redis does: the first bad one is the error.
    check(
        &mut c,
        &["COPY", "d", "e", "DB", "x", "DB", "1"],
        "value is not an integer",
    );
    check(
        &mut c,
        &["COPY", "d", "e", "DB", "99", "BOGUS"],
        "DB index is out of range",
    );
    check(&mut c, &["EXISTS", "e"], "0");
    // MOVE: 0 when the key is missing here or present there.
    check(
        &mut c,
        &["MOVE", "d", "0"],
        "source and destination objects are the same",
    );
    check(&mut c, &["MOVE", "d", "3"], "0");
    check(&mut c, &["MOVE", "c", "3"], "1");
    check(&mut c, &["EXISTS", "c"], "0");
    check(&mut c, &["MOVE", "c", "3"], "0");
    check(&mut c, &["SELECT", "3"], "OK");
    let moved: Vec<Option<String>> = c.mget(&["c", "d"])?;
    assert_eq!(moved, vec![Some("1".into()), Some("1".into())]);
    // RANDOMKEY returns every key of a small database.
    let mut seen = HashSet::new();
    for _ in 0..200 {
        seen.insert(reply(&mut c, &["RANDOMKEY"]));
    }
    assert_eq!(seen, HashSet::from(["c".to_owned(), "d".to_owned()]));
    // Moved and copied keys survive a restart.
    server.restart();
    let mut c = server.client();
    check(&mut c, &["SELECT", "3"], "OK");
    check(&mut c, &["GET", "c"], "1");
    check(&mut c, &["SELECT", "0"], "OK");
    check(&mut c, &["GET", "c"], "(nil)");
    check(&mut c, &["GET", "d"], "1");
    Ok(())
}

#[test]
fn counters_follow_redis_semantics() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    assert_eq!(c.incr::<_, _, i64>("n", 1)?, 1);
    assert_eq!(redis::cmd("INCR").arg("n").query::<i64>(&mut c)?, 2);
    assert_eq!(
        redis::cmd("INCRBY").arg("n").arg(40).query::<i64>(&mut c)?,
        42
    );
    assert_eq!(redis::cmd("DECR").arg("n").query::<i64>(&mut c)?, 41);
    assert_eq!(
        redis::cmd("DECRBY").arg("n").arg(50).query::<i64>(&mut c)?,
        -9
    );
    assert_eq!(c.get::<_, String>("n")?, "-9");
    let mut raw = server.raw();
    roundtrip(
        &mut raw,
        b"SET s abc\r\nINCR s\r\n",
        b"+OK\r\n-ERR value is not an integer or out of range\r\n",
    );
    roundtrip(
        &mut raw,
        b"SET z 007\r\nINCR z\r\n",
        b"+OK\r\n-ERR value is not an integer or out of range\r\n",
    );
    roundtrip(
        &mut raw,
        b"INCRBY n x\r\n",
        b"-ERR value is not an integer or out of range\r\n",
    );
    roundtrip(
        &mut raw,
        b"SET big 9223372036854775807\r\nINCR big\r\n",
        b"+OK\r\n-ERR increment or decrement would overflow\r\n",
    );
    roundtrip(
        &mut raw,
        b"DECRBY n -9223372036854775808\r\n",
        b"-ERR decrement would overflow\r\n",
    );
    // A failed INCR writes nothing.
    assert_eq!(c.get::<_, String>("s")?, "abc");
    Ok(())
}

#[test]
fn concurrent_incr_never_loses_an_update() -> TestResult {
    let server = TestServer::start(|_| {});
    let threads = 8;
    let per_thread = 300;
    let url = server.url();
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let url = url.clone();
            std::thread::spawn(move || -> Vec<i64> {
                let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                (0..per_thread)
                    .map(|i| {
                        if i % 10 == t % 10 {
                            // Blind writes to the same stripe must not slip between INCR's
                            // read and write.
                            let () = c.set("other", i).unwrap();
                        }
                        c.incr("counter", 1).unwrap()
                    })
                    .collect()
            })
        })
        .collect();
    let mut seen = HashSet::new();
    for h in handles {
        for v in h.join().expect("thread") {
            assert!(seen.insert(v), "INCR returned {v} twice");
        }
    }
    let total = i64::from(threads * per_thread);
    assert_eq!(seen.len() as i64, total);
    assert_eq!(server.client().get::<_, i64>("counter")?, total);
    Ok(())
}

#[test]
fn mget_and_exists_see_an_mset_whole_or_not_at_all() -> TestResult {
    let server = TestServer::start(|_| {});
    let keys: Vec<String> = (0..20).map(|i| format!("m{i:02}")).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (url, keys, stop) = (server.url(), keys.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                i += 1;
                let pairs: Vec<(&str, u64)> = keys.iter().map(|k| (k.as_str(), i)).collect();
                let () = c.mset(&pairs).unwrap();
                if i.is_multiple_of(2) {
                    let _: i64 = c.del(&keys[..10]).unwrap();
                }
            }
        })
    };
    let mut c = server.client();
    let deadline = Instant::now() + Duration::from_millis(1500);
    let mut reads = 0;
    while Instant::now() < deadline {
        let values: Vec<Option<u64>> = c.mget(&keys)?;
        // The last ten are only ever set together; the first ten are set with them and
        // deleted together.
        let (deleted, kept) = values.split_at(10);
        let last = kept.first().copied().flatten();
        let whole = kept.iter().all(|v| *v == last)
            && (deleted.iter().all(Option::is_none) || deleted.iter().all(|v| *v == last));
        assert!(whole, "MGET saw part of an MSET or DEL: {values:?}");
        let n: i64 = c.exists(&keys)?;
        assert!(
            n == 0 || n == 10 || n == 20,
            "EXISTS saw part of an MSET or DEL: {n}"
        );
        reads += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().expect("writer");
    assert!(reads > 0);
    Ok(())
}

#[test]
fn errors_match_redis_replies() {
    let server = TestServer::start(|_| {});
    let mut raw = server.raw();
    roundtrip(
        &mut raw,
        &encode(&[b"FOO", b"a", b"b"]),
        b"-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n",
    );
    // Arguments are echoed as Redis 7 echoes them: raw bytes (not re-encoded as UTF-8), up to
    // a NUL byte, cut at 128 bytes of the list even inside a character; CR and LF as spaces.
    roundtrip(
        &mut raw,
        &encode(&[b"FOO", b"\xff", b"a\x00b", b"c\r\nd"]),
        b"-ERR unknown command 'FOO', with args beginning with: '\xff' 'a' 'c  d' \r\n",
    );
    let long = [&b"a"[..]; 127].concat();
    let mut cut = long.clone();
    cut.extend_from_slice("\u{e9}".as_bytes());
    let mut expected = b"-ERR unknown command 'FOO', with args beginning with: '".to_vec();
    expected.extend_from_slice(&long);
    expected.extend_from_slice(b"\xc3' \r\n");
    roundtrip(&mut raw, &encode(&[b"FOO", &cut, b"more"]), &expected);
    roundtrip(
        &mut raw,
        &encode(&[b"CLIENT", b"\xe9"]),
        b"-ERR unknown subcommand '\xe9'. Try CLIENT HELP.\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"HELLO", b"3", b"\xff"]),
        b"-ERR Syntax error in HELLO option '\xff'\r\n",
    );
    // SCAN reads its cursor as Redis's strtoul does: "" and -0 start a scan.
    for cursor in [&b""[..], b"-0", b"+0", b"0\x00x"] {
        roundtrip(
            &mut raw,
            &encode(&[b"SCAN", cursor]),
            b"*2\r\n$1\r\n0\r\n*0\r\n",
        );
    }
    for cursor in [&b" 0"[..], b"-", b"0x", b"18446744073709551616"] {
        roundtrip(
            &mut raw,
            &encode(&[b"SCAN", cursor]),
            b"-ERR invalid cursor\r\n",
        );
    }
    roundtrip(
        &mut raw,
        &encode(&[b"GET"]),
        b"-ERR wrong number of arguments for 'get' command\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"set", b"k"]),
        b"-ERR wrong number of arguments for 'set' command\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"MSET", b"a", b"1", b"b"]),
        b"-ERR wrong number of arguments for 'mset' command\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"SELECT", b"16"]),
        b"-ERR DB index is out of range\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"CLIENT", b"NOPE"]),
        b"-ERR unknown subcommand 'NOPE'. Try CLIENT HELP.\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"SET", b"k", b"v", b"EX", b"10"]),
        b"-ERR key expiry (EX, PX, EXAT, PXAT) is not supported by strata\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"AUTH", b"pw"]),
        b"-ERR AUTH <password> called without any password configured for the default user. \
          Are you sure your configuration is correct?\r\n",
    );
    for count in [&b"0"[..], b"-1"] {
        roundtrip(
            &mut raw,
            &encode(&[b"SCAN", b"0", b"COUNT", count]),
            b"-ERR syntax error\r\n",
        );
    }
    roundtrip(
        &mut raw,
        &encode(&[b"SCAN", b"0", b"COUNT", b"x"]),
        b"-ERR value is not an integer or out of range\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"FUNCTION", b"FLUSH", b"x"]),
        b"-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"FUNCTION", b"FLUSH", b"async"]),
        b"+OK\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"CLIENT", b"SETINFO", b"foo", b"1"]),
        b"-ERR Unrecognized option 'foo'\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"CLIENT", b"SETINFO", b"LIB-NAME", b"a b"]),
        b"-ERR lib-name cannot contain spaces, newlines or special characters.\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"CLIENT", b"SETINFO", b"lib-ver", b"1.2.3"]),
        b"+OK\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"DATABASES", b"CREATE", b"007"]),
        b"-ERR database name '007' has only digits and '-': SELECT would read it as an index; \
          include a letter or '_'\r\n",
    );
    let mut reply = Vec::new();
    std::io::Write::write_all(&mut raw, &encode(&[b"DATABASES", b"CREATE", b""])).unwrap();
    while !reply.ends_with(b"\r\n") {
        reply.extend(server_util::read_exactly(&mut raw, 1));
    }
    let reply = String::from_utf8_lossy(&reply);
    assert!(reply.contains("must be 1 to 64 characters long"), "{reply}");
    // Without a password the default user is `nopass`, as in Redis 7.
    roundtrip(&mut raw, &encode(&[b"AUTH", b"default", b"pw"]), b"+OK\r\n");
    roundtrip(
        &mut raw,
        &encode(&[b"AUTH", b"someone", b"pw"]),
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    // The connection still works after errors.
    roundtrip(&mut raw, b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn inline_commands_are_accepted() {
    let server = TestServer::start(|_| {});
    let mut raw = server.raw();
    roundtrip(
        &mut raw,
        b"SET greeting \"hello world\"\r\nGET greeting\nECHO 'a b'\r\nPING hi\r\n",
        b"+OK\r\n$11\r\nhello world\r\n$3\r\na b\r\n$2\r\nhi\r\n",
    );
}

#[test]
fn pipelined_commands_run_in_order_and_share_a_sync() -> TestResult {
    let server = TestServer::start(|c| c.sync = SyncMode::Always);
    let mut c = server.client();
    let syncs_before = wal_syncs(&mut c)?;
    let mut pipe = redis::pipe();
    for i in 0..200 {
        pipe.cmd("SET").arg(format!("p{i}")).arg(i);
    }
    pipe.cmd("GET").arg("p7");
    pipe.cmd("INCR").arg("p7");
    pipe.cmd("GET").arg("p7");
    pipe.cmd("DEL").arg("p7");
    pipe.cmd("GET").arg("p7");
    let replies: Vec<Value> = pipe.query(&mut c)?;
    assert_eq!(replies.len(), 205);
    assert!(replies[..200].iter().all(|v| *v == Value::Okay));
    assert_eq!(replies[200], Value::BulkString(b"7".to_vec()));
    assert_eq!(replies[201], Value::Int(8));
    assert_eq!(replies[202], Value::BulkString(b"8".to_vec()));
    assert_eq!(replies[203], Value::Int(1));
    assert_eq!(replies[204], Value::Nil);
    // 200 pipelined SETs became one engine write: a handful of fsyncs, not 200.
    let syncs = wal_syncs(&mut c)? - syncs_before;
    assert!(syncs <= 10, "{syncs} WAL syncs for one pipeline");
    assert_eq!(c.get::<_, i64>("p199")?, 199);
    Ok(())
}

/// Consecutive GETs in a pipeline are answered by one engine multi-get: the replies, their
/// order, read-your-writes after pending SETs and the INFO counters are those of single GETs.
#[test]
fn pipelined_gets_answer_like_single_gets() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c)?;
    let processed_before: u64 = info_field(&info, "total_commands_processed")
        .ok_or("no total_commands_processed")?
        .trim()
        .parse()?;
    let (hits_before, misses_before) = hits_misses(&mut c)?;
    let mut pipe = redis::pipe();
    for i in 0..50 {
        pipe.cmd("SET").arg(format!("g{i}")).arg(format!("v{i}"));
    }
    for i in 0..60 {
        // Mixed case, as clients may send it; g50..g59 do not exist.
        pipe.cmd(if i % 2 == 0 { "GET" } else { "get" })
            .arg(format!("g{i}"));
    }
    pipe.cmd("SET").arg("g3").arg("changed");
    pipe.cmd("GET").arg("g3");
    pipe.cmd("GET").arg("g51");
    pipe.cmd("GET").arg("g3").arg("extra");
    pipe.cmd("GET").arg("g4");
    // An INFO in the pipeline sees every command before it, not itself (as in Redis).
    pipe.cmd("INFO").arg("stats");
    let replies: Vec<redis::RedisResult<Value>> = pipe.ignore_errors().query(&mut c)?;
    let replies: Vec<Result<Value, String>> = replies
        .into_iter()
        .map(|r| r.map_err(|e| e.to_string()))
        .collect();
    assert_eq!(replies.len(), 116);
    assert!(replies[..50].iter().all(|v| *v == Ok(Value::Okay)));
    for i in 0..60 {
        let expected = if i < 50 {
            Value::BulkString(format!("v{i}").into_bytes())
        } else {
            Value::Nil
        };
        assert_eq!(replies[50 + i], Ok(expected), "GET g{i}");
    }
    assert_eq!(replies[110], Ok(Value::Okay));
    assert_eq!(replies[111], Ok(Value::BulkString(b"changed".to_vec())));
    assert_eq!(replies[112], Ok(Value::Nil));
    assert!(
        matches!(&replies[113], Err(e) if e.contains("wrong number of arguments for 'get'")),
        "{:?}",
        replies[113]
    );
    assert_eq!(replies[114], Ok(Value::BulkString(b"v4".to_vec())));
    let Ok(in_pipeline) = &replies[115] else {
        return Err(format!("INFO failed: {:?}", replies[115]).into());
    };
    let in_pipeline: String = redis::FromRedisValue::from_redis_value(in_pipeline.clone())?;
    let processed_in_pipeline: u64 = info_field(&in_pipeline, "total_commands_processed")
        .ok_or("no total_commands_processed")?
        .trim()
        .parse()?;
    // The 115 commands before it, the first INFO (counted after it ran) and hits_misses's.
    assert_eq!(processed_in_pipeline - processed_before, 115 + 2);
    let (hits, misses) = hits_misses(&mut c)?;
    assert_eq!((hits - hits_before, misses - misses_before), (52, 11));
    let info: String = redis::cmd("INFO").arg("stats").query(&mut c)?;
    let processed: u64 = info_field(&info, "total_commands_processed")
        .ok_or("no total_commands_processed")?
        .trim()
        .parse()?;
    // The pipeline's 116 commands and three INFOs: the first one (counted, as in Redis, after
    // it ran) and the two of `hits_misses`; this last one is not counted yet.
    assert_eq!(processed - processed_before, 116 + 3);
    Ok(())
}

fn info_field(info: &str, field: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix(&format!("{field}:")).map(str::to_owned))
}

fn wal_syncs(c: &mut redis::Connection) -> Result<u64, Box<dyn std::error::Error>> {
    let info: String = redis::cmd("INFO").arg("engine").query(c)?;
    Ok(info_field(&info, "wal_syncs")
        .ok_or("no wal_syncs")?
        .parse()?)
}

#[test]
fn scan_returns_every_key_once_despite_concurrent_writes() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let originals: HashSet<String> = (0..2000).map(|i| format!("orig:{i:05}")).collect();
    let mut pipe = redis::pipe();
    for k in &originals {
        pipe.cmd("SET").arg(k).arg("x").ignore();
    }
    let () = pipe.query(&mut c)?;
    let url = server.url();
    let writer = std::thread::spawn(move || {
        let mut w = redis::Client::open(url).unwrap().get_connection().unwrap();
        for i in 0..3000 {
            let () = w.set(format!("new:{i}"), "y").unwrap();
            if i % 3 == 0 {
                let _: i64 = w.del(format!("new:{}", i / 2)).unwrap();
            }
        }
    });
    let mut seen = Vec::new();
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("orig:*")
            .arg("COUNT")
            .arg(50)
            .query(&mut c)?;
        seen.extend(keys);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    writer.join().expect("writer");
    let unique: HashSet<String> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "a key was returned twice");
    assert_eq!(unique, originals);
    let err = redis::cmd("SCAN").arg(987_654_321).query::<Value>(&mut c);
    assert!(err.unwrap_err().to_string().contains("invalid cursor"));
    Ok(())
}

#[test]
fn keys_dbsize_and_flushdb() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let () = c.mset(&[("user:1", "a"), ("user:2", "b"), ("item:1", "c")])?;
    let mut keys: Vec<String> = c.keys("user:*")?;
    keys.sort();
    assert_eq!(keys, vec!["user:1", "user:2"]);
    let keys: Vec<String> = c.keys("*:[1]")?;
    assert_eq!(keys.len(), 2);
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c)?, 3);
    let () = redis::cmd("FLUSHDB").query(&mut c)?;
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c)?, 0);
    let () = redis::cmd("FLUSHALL").query(&mut c)?;
    // Redis 7.0: the empty key matches only `*` (and the empty pattern), not `**`.
    let () = c.mset(&[("", "e"), ("a", "x")])?;
    let mut keys: Vec<String> = c.keys("*")?;
    keys.sort();
    assert_eq!(keys, vec!["", "a"]);
    assert_eq!(c.keys::<_, Vec<String>>("**")?, vec!["a"]);
    let (_, scanned): (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg("*?*")
        .query(&mut c)?;
    assert_eq!(scanned, vec!["a"]);
    Ok(())
}

#[test]
fn help_and_client_list_follow_redis() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    for (command, listed) in [
        ("CLIENT", "SETNAME <name>"),
        ("COMMAND", "DOCS [<command-name> ...]"),
        ("CONFIG", "GET <pattern> [<pattern> ...]"),
        ("FUNCTION", "FLUSH [ASYNC|SYNC]"),
    ] {
        let help: Vec<String> = redis::cmd(command).arg("help").query(&mut c)?;
        assert!(
            help[0].starts_with(&format!("{command} <subcommand>")),
            "{help:?}"
        );
        assert!(help.iter().any(|l| l == listed), "{help:?}");
        assert_eq!(
            help.last().map(String::as_str),
            Some("    Print this help.")
        );
        let err = redis::cmd(command)
            .arg("HELP")
            .arg("x")
            .query::<Vec<String>>(&mut c)
            .unwrap_err();
        let sub = format!("{}|help", command.to_ascii_lowercase());
        assert!(err.to_string().contains(&sub), "{err}");
    }
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c)?;
    let list = |args: &[&str], c: &mut redis::Connection| -> redis::RedisResult<String> {
        redis::cmd("CLIENT").arg("LIST").arg(args).query(c)
    };
    let mine = format!("id={id} ");
    assert!(list(&[], &mut c)?.starts_with(&mine));
    assert!(list(&["TYPE", "normal"], &mut c)?.starts_with(&mine));
    assert_eq!(list(&["TYPE", "pubsub"], &mut c)?, "");
    assert!(list(&["ID", "999999", &id.to_string()], &mut c)?.starts_with(&mine));
    assert_eq!(list(&["ID", "999999"], &mut c)?, "");
    for (args, error) in [
        (&["foo"][..], "syntax error"),
        (&["TYPE", "bogus"], "Unknown client type 'bogus'"),
        (&["ID", "x"], "Invalid client ID"),
    ] {
        let err = list(args, &mut c).unwrap_err();
        assert!(err.to_string().contains(error), "{args:?}: {err}");
    }
    Ok(())
}

/// Waits (up to 10 s) until `admin` is the only connection CLIENT LIST shows: killed
/// connections leave the list as their tasks end, just after their sockets close.
fn wait_until_alone(admin: &mut redis::Connection) -> redis::RedisResult<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let listing: String = redis::cmd("CLIENT").arg("LIST").query(admin)?;
        if listing.lines().count() == 1 {
            return Ok(());
        }
        assert!(std::time::Instant::now() < deadline, "{listing}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn client_list_shows_every_connection_and_client_kill_closes_them() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut admin = server.client();
    let mut other = server.client();
    let () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("worker")
        .query(&mut other)?;
    let () = redis::cmd("SELECT").arg(3).query(&mut other)?;
    let other_id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut other)?;
    let admin_id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut admin)?;
    let listing: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin)?;
    let lines: Vec<&str> = listing.lines().collect();
    assert_eq!(lines.len(), 2, "{listing}");
    // By id, with what the other connection published after its last command.
    assert!(
        lines[0].starts_with(&format!("id={admin_id} ")),
        "{listing}"
    );
    let theirs = lines[1];
    for field in [
        format!("id={other_id} "),
        " name=worker ".to_owned(),
        " db=3 ".to_owned(),
        " cmd=client|id ".to_owned(),
        " flags=N ".to_owned(),
        " user=default ".to_owned(),
    ] {
        assert!(theirs.contains(&field), "{field:?} not in {theirs}");
    }
    // CLIENT KILL's errors, as Redis 7 gives them.
    for (args, error) in [
        (&["ID", "0"][..], "client-id should be greater than 0"),
        (&["ID", "x"], "client-id should be greater than 0"),
        (&["TYPE", "bogus"], "Unknown client type 'bogus'"),
        (&["USER", "alice"], "No such user 'alice'"),
        (&["SKIPME", "maybe"], "syntax error"),
        // One argument is the old form: an address.
        (&["ID"], "No such client"),
        (&["ID", "1", "TYPE"], "syntax error"),
        (&["BOGUS", "1"], "syntax error"),
        (&["10.0.0.1:1"], "No such client"),
    ] {
        let err = redis::cmd("CLIENT")
            .arg("KILL")
            .arg(args)
            .query::<redis::Value>(&mut admin)
            .unwrap_err();
        assert!(err.to_string().contains(error), "{args:?}: {err}");
    }
    // Filters that match nobody kill nobody; the caller is skipped unless SKIPME no.
    let kill = |args: &[&str], c: &mut redis::Connection| -> redis::RedisResult<i64> {
        redis::cmd("CLIENT").arg("KILL").arg(args).query(c)
    };
    assert_eq!(kill(&["TYPE", "pubsub"], &mut admin)?, 0);
    assert_eq!(kill(&["ID", &admin_id.to_string()], &mut admin)?, 0);
    assert_eq!(kill(&["MAXAGE", "100000"], &mut admin)?, 0);
    assert_eq!(kill(&["ID", &other_id.to_string()], &mut admin)?, 1);
    // The killed connection is closed: its next command fails, and it leaves the list.
    assert!(redis::cmd("PING").query::<String>(&mut other).is_err());
    wait_until_alone(&mut admin)?;
    // The old form names a client by address, and SKIPME no kills the caller after its
    // reply.
    let third = server.client();
    let listing: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin)?;
    let addr = listing
        .lines()
        .find(|l| !l.starts_with(&format!("id={admin_id} ")))
        .and_then(|l| l.split(' ').find_map(|f| f.strip_prefix("addr=")))
        .ok_or("no third client")?
        .to_owned();
    let () = redis::cmd("CLIENT")
        .arg("KILL")
        .arg(&addr)
        .query(&mut admin)?;
    drop(third);
    // A connection that kills itself gets the reply and runs nothing more of its pipeline.
    let mut raw = server.raw();
    raw.write_all(&encode(&[b"CLIENT", b"ID"]))?;
    let mut line = Vec::new();
    while !line.ends_with(b"\r\n") {
        line.extend(read_exactly(&mut raw, 1));
    }
    let raw_id = String::from_utf8_lossy(&line)
        .trim()
        .trim_start_matches(':')
        .to_owned();
    let mut pipeline = encode(&[
        b"CLIENT",
        b"KILL",
        b"ID",
        raw_id.as_bytes(),
        b"SKIPME",
        b"no",
    ]);
    pipeline.extend(encode(&[b"PING"]));
    pipeline.extend(encode(&[b"SET", b"selfk", b"1"]));
    roundtrip(&mut raw, &pipeline, b":1\r\n");
    assert!(closed_by_peer(&mut raw));
    assert_eq!(
        redis::cmd("EXISTS").arg("selfk").query::<i64>(&mut admin)?,
        0
    );
    // The killed connections leave the client list as their tasks end, just after their
    // sockets close: wait for the admin to be alone, so the kill below counts it only.
    wait_until_alone(&mut admin)?;
    assert_eq!(kill(&["SKIPME", "no", "USER", "default"], &mut admin)?, 1);
    assert!(redis::cmd("PING").query::<String>(&mut admin).is_err());
    Ok(())
}

/// Bytes of the files directly under `dir`.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(std::fs::Metadata::is_file)
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn flushdb_of_many_keys_frees_their_space_and_keeps_sql_tables() -> TestResult {
    // Small memtables, one per flush: the keys spread over many tables, most of which
    // FLUSHDB removes whole.
    let mut server = TestServer::start(|c| {
        c.write_buffer_size = 64 << 10;
        c.memtables_per_flush = 1;
    });
    let mut c = server.client();
    let _: String = redis::cmd("SQL")
        .arg("CREATE TABLE counts (k TEXT PRIMARY KEY, n BIGINT)")
        .query(&mut c)?;
    let _: String = redis::cmd("SQL")
        .arg("INSERT INTO counts VALUES ('a', 1), ('b', 2)")
        .query(&mut c)?;
    let value = "v".repeat(40);
    for chunk in 0..60 {
        let pairs: Vec<(String, &str)> = (0..1000)
            .map(|i| (format!("read:{:06}", chunk * 1000 + i), value.as_str()))
            .collect();
        let () = c.mset(&pairs)?;
    }
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c)?, 60_000);
    let db_dir = server.dir.path().join("db0");
    let before = dir_bytes(&db_dir);
    let () = redis::cmd("FLUSHDB").query(&mut c)?;
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c)?, 0);
    let after = dir_bytes(&db_dir);
    assert!(
        after < before / 4,
        "{before} bytes before FLUSHDB, {after} after"
    );
    let count = |c: &mut redis::Connection| -> redis::RedisResult<redis::Value> {
        redis::cmd("SQL")
            .arg("SELECT k, n FROM counts ORDER BY k")
            .query(c)
    };
    let rows = count(&mut c)?;
    let () = c.set("after", "flush")?;
    server.restart();
    let mut c = server.client();
    assert_eq!(count(&mut c)?, rows);
    let redis::Value::Array(ref r) = rows else {
        panic!("{rows:?}")
    };
    assert_eq!(r.len(), 3, "header and two rows: {rows:?}");
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c)?, 1);
    assert_eq!(c.get::<_, String>("after")?, "flush");
    Ok(())
}

#[test]
fn select_switches_between_named_databases() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let () = c.set("where", "db0")?;
    let () = redis::cmd("SELECT").arg(1).query(&mut c)?;
    assert_eq!(c.get::<_, Option<String>>("where")?, None);
    let () = c.set("where", "db1")?;
    // A named database must exist before SELECT switches to it.
    let () = redis::cmd("DATABASES")
        .arg("CREATE")
        .arg("run42")
        .query(&mut c)?;
    let () = redis::cmd("SELECT").arg("run42").query(&mut c)?;
    let () = c.set("where", "run42")?;
    let () = redis::cmd("SELECT").arg(0).query(&mut c)?;
    assert_eq!(c.get::<_, String>("where")?, "db0");
    let mut names: Vec<String> = redis::cmd("DATABASES").query(&mut c)?;
    names.sort();
    assert_eq!(names, vec!["db0", "db1", "run42"]);
    assert!(server.dir.path().join("run42").is_dir());
    for bad in ["../etc", "a/b", "x.y", &"n".repeat(65)] {
        let err = redis::cmd("SELECT").arg(bad).query::<()>(&mut c);
        assert!(err.is_err(), "SELECT {bad} was accepted");
    }
    // A URL with /2 selects db2 on connect.
    let mut c2 = redis::Client::open(format!("{}2", server.url()))?.get_connection()?;
    let () = c2.set("where", "db2")?;
    assert_eq!(c.get::<_, String>("where")?, "db0");
    Ok(())
}

#[test]
fn hello_3_switches_to_resp3() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut raw = server.raw();
    roundtrip(&mut raw, b"GET nothing\r\n", b"$-1\r\n");
    std::io::Write::write_all(&mut raw, b"HELLO 3\r\n")?;
    let reply = server_util::read_exactly(&mut raw, 3);
    assert_eq!(reply, b"%8\r");
    // Drain the rest of the map, then check a RESP3 null.
    let mut c =
        redis::Client::open(format!("{}?protocol=resp3", server.url()))?.get_connection()?;
    let v: Value = redis::cmd("GET").arg("nothing").query(&mut c)?;
    assert_eq!(v, Value::Nil);
    let hello: Value = redis::cmd("HELLO").arg(3).query(&mut c)?;
    let Value::Map(pairs) = hello else {
        panic!("HELLO 3 did not return a map: {hello:?}");
    };
    assert!(pairs.contains(&(Value::BulkString(b"proto".to_vec()), Value::Int(3))));
    let err = redis::cmd("HELLO").arg(4).query::<Value>(&mut c);
    assert!(
        err.unwrap_err()
            .to_string()
            .contains("unsupported protocol version")
    );
    Ok(())
}

#[test]
fn auth_is_required_when_a_password_is_set() -> TestResult {
    let server = TestServer::start(|c| c.requirepass = Some("s3cret".into()));
    let mut raw = server.raw();
    roundtrip(
        &mut raw,
        b"GET k\r\n",
        b"-NOAUTH Authentication required.\r\n",
    );
    roundtrip(
        &mut raw,
        b"AUTH wrong\r\n",
        b"-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    roundtrip(
        &mut raw,
        b"AUTH default s3cret\r\nGET k\r\n",
        b"+OK\r\n$-1\r\n",
    );
    // Before AUTH, requests are limited to 10 arguments of 16 KiB, with Redis's texts.
    let mut raw2 = server.raw();
    std::io::Write::write_all(&mut raw2, b"*11\r\n")?;
    let want = b"-ERR Protocol error: unauthenticated multibulk length\r\n";
    assert_eq!(server_util::read_exactly(&mut raw2, want.len()), want);
    let mut raw2 = server.raw();
    std::io::Write::write_all(&mut raw2, b"*1\r\n$20000\r\n")?;
    let want = b"-ERR Protocol error: unauthenticated bulk length\r\n";
    assert_eq!(server_util::read_exactly(&mut raw2, want.len()), want);
    roundtrip(
        &mut server.raw(),
        b"HELLO 3\r\n",
        b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the \
          HELLO AUTH <user> <pass> option can be used to authenticate the client and select \
          the RESP protocol version at the same time\r\n",
    );
    // The redis crate authenticates from the URL.
    let url = format!("redis://:s3cret@{}/", server.resp_addr());
    let mut c = redis::Client::open(url)?.get_connection()?;
    let () = c.set("k", "v")?;
    let url = format!(
        "redis://default:s3cret@{}/?protocol=resp3",
        server.resp_addr()
    );
    let mut c = redis::Client::open(url)?.get_connection()?;
    assert_eq!(c.get::<_, String>("k")?, "v");
    let bad = format!("redis://:nope@{}/", server.resp_addr());
    assert!(redis::Client::open(bad)?.get_connection().is_err());
    Ok(())
}

#[test]
fn a_set_with_a_key_over_the_limit_fails_alone_in_its_pipeline() {
    let server = TestServer::start(|_| {});
    let mut raw = server.raw();
    let long = vec![b'x'; 65_536];
    let error = b"-ERR invalid argument: key of 65536 bytes exceeds the limit of 65535 bytes\r\n";
    let mut pipeline = encode(&[b"SET", b"a", b"1"]);
    pipeline.extend(encode(&[b"SET", &long, b"v"]));
    pipeline.extend(encode(&[b"SET", b"b", b"2"]));
    pipeline.extend(encode(&[b"MSET", b"c", b"3", &long, b"4"]));
    pipeline.extend(encode(&[b"MSET", b"d", b"5"]));
    pipeline.extend(encode(&[b"MGET", b"a", b"b", b"c", b"d"]));
    let mut want = b"+OK\r\n".to_vec();
    want.extend_from_slice(error);
    want.extend_from_slice(b"+OK\r\n");
    want.extend_from_slice(error);
    want.extend_from_slice(b"+OK\r\n*4\r\n$1\r\n1\r\n$1\r\n2\r\n$-1\r\n$1\r\n5\r\n");
    roundtrip(&mut raw, &pipeline, &want);
}

#[test]
fn databases_beyond_max_databases_are_refused_and_open_ones_still_work() {
    let server = TestServer::start(|c| c.max_databases = 2);
    let mut raw = server.raw();
    // db0 (the connection's) and one more.
    roundtrip(
        &mut raw,
        &encode(&[b"DATABASES", b"CREATE", b"run1"]),
        b"+OK\r\n",
    );
    roundtrip(
        &mut raw,
        &encode(&[b"DATABASES", b"CREATE", b"run2"]),
        b"-ERR too many open databases: 2 are open (--max-databases); run2 was not opened\r\n",
    );
    roundtrip(&mut raw, &encode(&[b"SELECT", b"run1"]), b"+OK\r\n");
    roundtrip(&mut raw, &encode(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    // Nothing was created for the refused name.
    let names: Vec<String> = redis::cmd("DATABASES")
        .query(&mut server.client())
        .expect("list");
    assert!(!names.contains(&"run2".to_owned()), "{names:?}");
}

#[test]
fn idle_databases_are_closed_and_reopen_with_their_data() {
    let server = TestServer::start(|c| {
        c.max_databases = 2;
        c.close_idle_databases = Some(Duration::from_millis(100));
    });
    let mut a = server.raw();
    roundtrip(
        &mut a,
        &encode(&[b"DATABASES", b"CREATE", b"run1"]),
        b"+OK\r\n",
    );
    roundtrip(&mut a, &encode(&[b"SELECT", b"run1"]), b"+OK\r\n");
    roundtrip(&mut a, &encode(&[b"SET", b"k", b"one"]), b"+OK\r\n");
    // A second connection holds run1: it stays open however long it idles, so with db0
    // (held by `a`) the limit of two is reached.
    let mut b = server.raw();
    roundtrip(&mut b, &encode(&[b"SELECT", b"run1"]), b"+OK\r\n");
    roundtrip(&mut a, &encode(&[b"SELECT", b"0"]), b"+OK\r\n");
    std::thread::sleep(Duration::from_millis(400));
    let refused =
        b"-ERR too many open databases: 2 are open (--max-databases); run2 was not opened\r\n";
    roundtrip(
        &mut a,
        &encode(&[b"DATABASES", b"CREATE", b"run2"]),
        refused,
    );
    // Once no connection holds run1 it is closed, which makes room for run2.
    roundtrip(&mut b, &encode(&[b"SELECT", b"0"]), b"+OK\r\n");
    when_room(&mut a, &[b"DATABASES", b"CREATE", b"run2"], "run2");
    roundtrip(&mut a, &encode(&[b"SELECT", b"run2"]), b"+OK\r\n");
    roundtrip(&mut a, &encode(&[b"SET", b"k", b"two"]), b"+OK\r\n");
    roundtrip(&mut a, &encode(&[b"SELECT", b"0"]), b"+OK\r\n");
    // run1 opens again (after run2 is closed in turn) with what was written before.
    std::thread::sleep(Duration::from_millis(400));
    roundtrip(&mut b, &encode(&[b"SELECT", b"run1"]), b"+OK\r\n");
    roundtrip(&mut b, &encode(&[b"GET", b"k"]), b"$3\r\none\r\n");
}

/// Regression: with `--max-databases` reached and `db0` closed as idle, a new connection's
/// first command, even `PING`, got `too many open databases ... db0 was not opened` and the
/// connection was closed, so `SELECT` of an open database was out of reach. `db0` is now
/// opened by the first command that needs a database, and a refusal keeps the connection.
#[test]
fn a_connection_opens_db0_only_for_a_command_that_needs_it() {
    let server = TestServer::start(|c| {
        c.max_databases = 2;
        c.close_idle_databases = Some(Duration::from_millis(100));
    });
    let mut b = server.raw();
    roundtrip(
        &mut b,
        &encode(&[b"DATABASES", b"CREATE", b"run1"]),
        b"+OK\r\n",
    );
    roundtrip(&mut b, &encode(&[b"SELECT", b"run1"]), b"+OK\r\n");
    // db0 is held by no one: it is closed, which makes room for run2, held by `c`.
    let mut c = server.raw();
    when_room(&mut c, &[b"DATABASES", b"CREATE", b"run2"], "run2");
    roundtrip(&mut c, &encode(&[b"SELECT", b"run2"]), b"+OK\r\n");
    let mut d = server.raw();
    roundtrip(&mut d, &encode(&[b"PING"]), b"+PONG\r\n");
    roundtrip(
        &mut d,
        &encode(&[b"GET", b"k"]),
        b"-ERR too many open databases: 2 are open (--max-databases); db0 was not opened\r\n",
    );
    roundtrip(&mut d, &encode(&[b"PING"]), b"+PONG\r\n");
    // INFO, CLIENT and the rest that need no database work on another new connection.
    let mut e = server.client();
    let info: String = redis::cmd("INFO").arg("engine").query(&mut e).unwrap();
    assert!(info.contains("database:db0\r\ndatabase_open:0"), "{info}");
    // The server's memtable budget is shown with no database open too.
    assert!(
        info.contains("memtable_budget_bytes:1073741824\r\n"),
        "{info}"
    );
    assert!(info.contains("memtable_budget_usage_bytes:"), "{info}");
    let me: String = redis::cmd("CLIENT").arg("INFO").query(&mut e).unwrap();
    assert!(me.contains(" db=0 "), "{me}");
    roundtrip(&mut d, &encode(&[b"SELECT", b"run1"]), b"+OK\r\n");
    roundtrip(&mut d, &encode(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    roundtrip(&mut d, &encode(&[b"GET", b"k"]), b"$1\r\nv\r\n");
}

/// Sends `command`, which opens database `name`, on `conn` until it answers `+OK` instead of
/// the server's refusal with `--max-databases 2` (until the idle closer makes room).
fn when_room(conn: &mut std::net::TcpStream, command: &[&[u8]], name: &str) {
    let refused = format!(
        "-ERR too many open databases: 2 are open (--max-databases); {name} was not opened\r\n"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        conn.write_all(&encode(command)).expect("write");
        let reply = read_exactly(conn, 5);
        if reply == b"+OK\r\n" {
            return;
        }
        let rest = read_exactly(conn, refused.len() - 5);
        assert_eq!(
            String::from_utf8_lossy(&[reply, rest].concat()),
            refused,
            "reply to {command:?}"
        );
        assert!(Instant::now() < deadline, "no database was ever closed");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn an_idle_database_with_memtables_waiting_for_a_flush_is_flushed_and_closed() {
    let server = TestServer::start(|c| {
        c.max_databases = 2;
        c.close_idle_databases = Some(Duration::from_millis(100));
        c.write_buffer_size = 64 << 10;
        c.memtables_per_flush = 16;
        // The close must flush them itself.
        c.flush_when_quiet = None;
    });
    let mut a = server.raw();
    roundtrip(
        &mut a,
        &encode(&[b"DATABASES", b"CREATE", b"big"]),
        b"+OK\r\n",
    );
    roundtrip(&mut a, &encode(&[b"SELECT", b"big"]), b"+OK\r\n");
    // About 400 KiB: several frozen memtables, far from the 16 a flush waits for.
    let value = vec![b'x'; 1000];
    for i in 0..400 {
        let key = format!("k{i}");
        roundtrip(
            &mut a,
            &encode(&[b"SET", key.as_bytes(), &value]),
            b"+OK\r\n",
        );
    }
    roundtrip(&mut a, &encode(&[b"SELECT", b"0"]), b"+OK\r\n");
    when_room(&mut a, &[b"DATABASES", b"CREATE", b"other"], "other");
    when_room(&mut a, &[b"SELECT", b"big"], "big");
    roundtrip(&mut a, &encode(&[b"DBSIZE"]), b":400\r\n");
}

#[test]
fn memtables_waiting_for_a_flush_are_flushed_once_writes_go_quiet() -> TestResult {
    let server = TestServer::start(|c| {
        c.write_buffer_size = 64 << 10;
        c.memtables_per_flush = 16;
        c.flush_when_quiet = Some(Duration::from_secs(1));
    });
    let mut c = server.client();
    // About 400 KiB: several frozen memtables, far from the 16 a flush waits for.
    let value = vec![b'x'; 1000];
    let mut pipe = redis::pipe();
    for i in 0..400 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(&value).ignore();
    }
    let () = pipe.query(&mut c)?;
    let field =
        |c: &mut redis::Connection, name: &str| -> Result<String, Box<dyn std::error::Error>> {
            let info: String = redis::cmd("INFO").arg("engine").query(c)?;
            Ok(info_field(&info, name).ok_or("no such field")?)
        };
    assert_ne!(field(&mut c, "immutable_memtables")?, "0");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while field(&mut c, "immutable_memtables")? != "0" {
        assert!(std::time::Instant::now() < deadline, "never flushed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(field(&mut c, "level0")?.starts_with("tables=1,"));
    let got: Vec<u8> = c.get("k399")?;
    assert_eq!(got, value);
    let n: u64 = redis::cmd("DBSIZE").query(&mut c)?;
    assert_eq!(n, 400);
    Ok(())
}

#[test]
fn databases_written_at_once_keep_their_memtables_within_the_shared_budget() -> TestResult {
    let server = TestServer::start(|c| {
        c.write_buffer_size = 64 << 10;
        c.memtables_per_flush = 16;
        c.flush_when_quiet = None;
        // Alone, each database could hold 32 memtables of 64 KiB (2 MiB).
        c.memtable_budget = Some(512 << 10);
    });
    let mut c = server.client();
    let value = vec![b'x'; 1000];
    let mut most = 0u64;
    for round in 0..4 {
        for db in 1..=3 {
            redis::cmd("SELECT").arg(db).exec(&mut c)?;
            // About 300 KiB per database and round.
            let mut pipe = redis::pipe();
            for i in 0..300 {
                pipe.cmd("SET")
                    .arg(format!("k{round}-{i}"))
                    .arg(&value)
                    .ignore();
            }
            let () = pipe.query(&mut c)?;
            let info: String = redis::cmd("INFO").arg("engine").query(&mut c)?;
            let used: u64 = info_field(&info, "memtable_budget_usage_bytes")
                .ok_or("no usage field")?
                .parse()?;
            assert_eq!(
                info_field(&info, "memtable_budget_bytes").as_deref(),
                Some("524288")
            );
            most = most.max(used);
        }
    }
    // The budget, plus up to one active memtable per database and a write group's slack.
    assert!(
        most <= (512 << 10) + 3 * (64 << 10) + (64 << 10),
        "{most} bytes"
    );
    for db in 1..=3 {
        redis::cmd("SELECT").arg(db).exec(&mut c)?;
        let n: u64 = redis::cmd("DBSIZE").query(&mut c)?;
        assert_eq!(n, 1200, "database {db}");
        let got: Vec<u8> = c.get("k3-299")?;
        assert_eq!(got, value);
    }
    Ok(())
}

#[test]
fn a_quiet_database_gives_back_its_share_of_a_pressed_budget() -> TestResult {
    let server = TestServer::start(|c| {
        // One active memtable holds all that is written here: nothing is frozen.
        c.write_buffer_size = 4 << 20;
        c.memtable_budget = Some(1 << 20);
        c.flush_when_quiet = Some(Duration::from_millis(200));
    });
    let mut c = server.client();
    redis::cmd("SELECT").arg(1).exec(&mut c)?;
    let value = vec![b'x'; 1000];
    let mut pipe = redis::pipe();
    // About 700 KiB, past half the budget.
    for i in 0..650 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(&value).ignore();
    }
    let () = pipe.query(&mut c)?;
    let usage = |c: &mut redis::Connection| -> Result<u64, Box<dyn std::error::Error>> {
        let info: String = redis::cmd("INFO").arg("engine").query(c)?;
        Ok(info_field(&info, "memtable_budget_usage_bytes")
            .ok_or("no usage field")?
            .parse()?)
    };
    assert!(usage(&mut c)? >= 512 << 10);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while usage(&mut c)? > 0 {
        assert!(std::time::Instant::now() < deadline, "never flushed");
        std::thread::sleep(Duration::from_millis(50));
    }
    let got: Vec<u8> = c.get("k649")?;
    assert_eq!(got, value);
    Ok(())
}

#[test]
fn shutdown_stops_the_server_cleanly_as_sigterm_does() {
    let mut server = TestServer::start(|_| {});
    let mut c = server.raw();
    roundtrip(
        &mut c,
        &encode(&[b"SHUTDOWN", b"ABORT"]),
        b"-ERR No shutdown in progress.\r\n",
    );
    roundtrip(
        &mut c,
        &encode(&[b"SHUTDOWN", b"NOSAVE", b"SAVE"]),
        b"-ERR syntax error\r\n",
    );
    roundtrip(&mut c, &encode(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    // As Redis: no reply, the connection closes; the commands after it do not run.
    c.write_all(
        &[
            encode(&[b"SHUTDOWN", b"NOSAVE", b"NOW"]),
            encode(&[b"SET", b"k", b"late"]),
        ]
        .concat(),
    )
    .expect("write");
    assert!(closed_by_peer(&mut c), "the connection stays open");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !server
        .server
        .as_ref()
        .is_some_and(RunningServer::has_stopped)
    {
        assert!(Instant::now() < deadline, "the server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    server.restart();
    let mut c = server.raw();
    roundtrip(&mut c, &encode(&[b"GET", b"k"]), b"$1\r\nv\r\n");
}

#[test]
fn flushall_that_cannot_open_every_database_deletes_nothing() {
    let server = TestServer::start(|c| {
        c.max_databases = 2;
        c.close_idle_databases = Some(Duration::from_millis(100));
    });
    let mut a = server.raw();
    for name in ["dba", "dbb"] {
        when_room(&mut a, &[b"DATABASES", b"CREATE", name.as_bytes()], name);
        roundtrip(&mut a, &encode(&[b"SELECT", name.as_bytes()]), b"+OK\r\n");
        roundtrip(&mut a, &encode(&[b"SET", b"k", b"v"]), b"+OK\r\n");
        roundtrip(&mut a, &encode(&[b"SELECT", b"0"]), b"+OK\r\n");
        roundtrip(&mut a, &encode(&[b"SET", b"k", b"v"]), b"+OK\r\n");
    }
    // db0 (held), dba and dbb do not fit in two open databases.
    a.write_all(&encode(&[b"FLUSHALL"])).expect("write");
    let mut reply = Vec::new();
    while !reply.ends_with(b"\r\n") {
        reply.extend(read_exactly(&mut a, 1));
    }
    assert!(
        reply.starts_with(b"-ERR too many open databases"),
        "{}",
        String::from_utf8_lossy(&reply)
    );
    roundtrip(&mut a, &encode(&[b"EXISTS", b"k"]), b":1\r\n");
    for name in ["dba", "dbb"] {
        when_room(&mut a, &[b"SELECT", name.as_bytes()], name);
        roundtrip(&mut a, &encode(&[b"EXISTS", b"k"]), b":1\r\n");
        roundtrip(&mut a, &encode(&[b"SELECT", b"0"]), b"+OK\r\n");
    }
}

#[test]
fn command_info_describes_subcommands_by_their_full_name() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let info: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("CLIENT|SETNAME")
        .arg("config|get")
        .arg("client|nope")
        .query(&mut c)?;
    let Value::Array(entries) = info else {
        panic!("{info:?}")
    };
    let names: Vec<Option<String>> = entries
        .iter()
        .map(|e| match e {
            Value::Array(fields) => text(fields.first()),
            _ => None,
        })
        .collect();
    assert_eq!(
        names,
        vec![
            Some("client|setname".into()),
            Some("config|get".into()),
            None
        ]
    );
    Ok(())
}

#[test]
fn append_beyond_the_bulk_limit_gets_redis_error() {
    let server = TestServer::start(|c| c.limits.max_bulk_bytes = 1 << 10);
    let mut raw = server.raw();
    let half = vec![b'x'; 600];
    roundtrip(&mut raw, &encode(&[b"APPEND", b"k", &half]), b":600\r\n");
    roundtrip(
        &mut raw,
        &encode(&[b"APPEND", b"k", &half]),
        b"-ERR string exceeds maximum allowed size (proto-max-bulk-len)\r\n",
    );
    roundtrip(&mut raw, &encode(&[b"STRLEN", b"k"]), b":600\r\n");
}

#[test]
fn a_partial_request_before_auth_waits_for_the_rest_without_stalling_others() -> TestResult {
    // One worker thread: a connection that spun on its incomplete request would starve all.
    let server = TestServer::start(|c| {
        c.requirepass = Some("s3cret".into());
        c.worker_threads = 1;
    });
    let mut stalled = server.raw();
    std::io::Write::write_all(&mut stalled, b"PI")?;
    let mut split = server.raw();
    std::io::Write::write_all(&mut split, b"*2\r\n$4\r\nAUTH\r\n$6\r\ns3")?;
    std::thread::sleep(std::time::Duration::from_millis(200));
    // Other clients are served meanwhile.
    let url = format!("redis://:s3cret@{}/", server.resp_addr());
    let mut c = redis::Client::open(url)?
        .get_connection_with_timeout(std::time::Duration::from_secs(10))?;
    c.set_read_timeout(Some(std::time::Duration::from_secs(10)))?;
    let () = c.set("k", "v")?;
    // The rests arrive: both requests complete and are answered.
    roundtrip(
        &mut stalled,
        b"NG\r\n",
        b"-NOAUTH Authentication required.\r\n",
    );
    roundtrip(&mut split, b"cret\r\nGET k\r\n", b"+OK\r\n$1\r\nv\r\n");
    Ok(())
}

#[test]
fn info_command_and_client_introspection() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let () = c.set("k", "v")?;
    let info: String = redis::cmd("INFO").query(&mut c)?;
    for section in [
        "# Server",
        "# Clients",
        "# Memory",
        "# Persistence",
        "# Stats",
        "# CPU",
        "# Keyspace",
        "# Engine",
    ] {
        assert!(info.contains(section), "INFO lacks {section}");
    }
    // What monitoring tools read (redis-cli --stat: used_memory; readiness checks: loading).
    let rss: u64 = info_field(&info, "used_memory")
        .ok_or("no used_memory")?
        .parse()?;
    assert!(rss > 1 << 20, "used_memory {rss}");
    assert_eq!(info_field(&info, "loading").as_deref(), Some("0"));
    assert_eq!(info_field(&info, "blocked_clients").as_deref(), Some("0"));
    let cpu: String = redis::cmd("INFO").arg("cpu").query(&mut c)?;
    let user: f64 = info_field(&cpu, "used_cpu_user")
        .ok_or("no used_cpu_user")?
        .parse()?;
    assert!(user >= 0.0 && !cpu.contains("# Memory"), "{cpu}");
    assert_eq!(
        info_field(&info, "db0").as_deref(),
        Some("keys=1,expires=0,avg_ttl=0")
    );
    assert!(info_field(&info, "connected_clients").is_some());
    let engine: String = redis::cmd("INFO").arg("engine").query(&mut c)?;
    assert!(!engine.contains("# Server"));
    assert!(info_field(&engine, "level0").is_some());
    // The block cache shared by all databases: the size the test server was given.
    assert_eq!(
        info_field(&engine, "block_cache_capacity_bytes").as_deref(),
        Some("8388608")
    );
    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut c)?;
    assert!(count >= 30);
    let docs: Value = redis::cmd("COMMAND").arg("DOCS").arg("get").query(&mut c)?;
    assert!(
        matches!(docs, Value::Array(ref a) if a.len() == 2),
        "{docs:?}"
    );
    let all: Value = redis::cmd("COMMAND").query(&mut c)?;
    assert!(matches!(all, Value::Array(ref a) if a.len() as i64 == count));
    let id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut c)?;
    assert!(id > 0);
    let () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("loader")
        .query(&mut c)?;
    let name: String = redis::cmd("CLIENT").arg("GETNAME").query(&mut c)?;
    assert_eq!(name, "loader");
    let save: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("save").query(&mut c)?;
    assert_eq!(save, vec!["save".to_owned(), String::new()]);
    Ok(())
}

/// `INFO stats` hits and misses, checked against redis-server 7.0.15 running the same
/// commands: every key read counts once, read-to-write commands count nothing.
#[test]
fn keyspace_hits_and_misses_count_key_reads_as_redis_does() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let () = c.set("k", "5")?;
    let () = c.set("s", "hello")?;
    let mut check = |cmd: &[&str], hits: u64, misses: u64| -> TestResult {
        let before = hits_misses(&mut c)?;
        let mut command = redis::cmd(cmd[0]);
        for a in &cmd[1..] {
            command.arg(*a);
        }
        let _: Value = command.query(&mut c)?;
        let after = hits_misses(&mut c)?;
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            (hits, misses),
            "{cmd:?}: (hits, misses)"
        );
        Ok(())
    };
    check(&["GET", "k"], 1, 0)?;
    check(&["GET", "nope"], 0, 1)?;
    check(&["MGET", "k", "nope", "s"], 2, 1)?;
    check(&["STRLEN", "s"], 1, 0)?;
    check(&["STRLEN", "nope"], 0, 1)?;
    check(&["EXISTS", "k", "nope"], 1, 1)?;
    check(&["TYPE", "k"], 1, 0)?;
    check(&["TTL", "nope"], 0, 1)?;
    check(&["PTTL", "k"], 1, 0)?;
    check(&["SET", "k", "6", "GET"], 1, 0)?;
    check(&["SET", "fresh", "1", "GET"], 0, 1)?;
    check(&["GETDEL", "fresh"], 1, 0)?;
    check(&["GETDEL", "fresh"], 0, 1)?;
    // The same for the other reading commands, checked against redis-server 7.0.15.
    check(&["GETSET", "s", "hello"], 1, 0)?;
    check(&["GETEX", "nope"], 0, 1)?;
    check(&["GETRANGE", "s", "0", "1"], 1, 0)?;
    check(&["GETBIT", "nope", "1"], 0, 1)?;
    check(&["LCS", "s", "nope"], 1, 1)?;
    check(&["TOUCH", "s", "nope"], 1, 1)?;
    check(&["EXPIRETIME", "s"], 1, 0)?;
    check(&["COPY", "s", "s2"], 1, 0)?;
    // Reads that only serve a write count nothing in Redis.
    check(&["SETNX", "s", "x"], 0, 0)?;
    check(&["SETRANGE", "s", "1", "x"], 0, 0)?;
    check(&["SETBIT", "s", "1", "1"], 0, 0)?;
    check(&["RENAME", "s2", "s3"], 0, 0)?;
    check(&["MOVE", "s3", "2"], 0, 0)?;
    check(&["APPEND", "s", "x"], 0, 0)?;
    check(&["INCR", "k"], 0, 0)?;
    check(&["INCRBY", "nope2", "2"], 0, 0)?;
    check(&["SET", "k", "1", "NX"], 0, 0)?;
    check(&["SET", "k", "1", "XX"], 0, 0)?;
    check(&["DEL", "k", "nope"], 0, 0)?;
    check(&["MSET", "a", "1", "b", "2"], 0, 0)?;
    Ok(())
}

fn hits_misses(c: &mut redis::Connection) -> Result<(u64, u64), Box<dyn std::error::Error>> {
    let info: String = redis::cmd("INFO").arg("stats").query(c)?;
    let field = |f: &str| -> Result<u64, Box<dyn std::error::Error>> {
        Ok(info_field(&info, f).ok_or("no field")?.trim().parse()?)
    };
    Ok((field("keyspace_hits")?, field("keyspace_misses")?))
}

/// Redis answers `SELECT abc` with "not an integer", and creating databases by typo is
/// worse than unhelpful: a name that is not an existing database is refused the same way.
#[test]
fn select_refuses_what_redis_refuses_and_creates_nothing() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut raw = server.raw();
    for (arg, reply) in [
        ("abc", "-ERR value is not an integer or out of range\r\n"),
        ("-1", "-ERR DB index is out of range\r\n"),
        ("16", "-ERR DB index is out of range\r\n"),
        (
            "99999999999",
            "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n",
        ),
        ("1.5", "-ERR value is not an integer or out of range\r\n"),
    ] {
        roundtrip(
            &mut raw,
            &encode(&[b"SELECT", arg.as_bytes()]),
            reply.as_bytes(),
        );
    }
    assert!(
        !server.dir.path().join("abc").exists(),
        "SELECT abc created a database"
    );
    let mut c = server.client();
    let names: Vec<String> = redis::cmd("DATABASES").query(&mut c)?;
    assert_eq!(names, vec!["db0"]);
    // Created explicitly, the name works; a bad name is refused by CREATE too.
    let () = redis::cmd("DATABASES")
        .arg("CREATE")
        .arg("abc")
        .query(&mut c)?;
    let () = redis::cmd("SELECT").arg("abc").query(&mut c)?;
    assert!(
        redis::cmd("DATABASES")
            .arg("CREATE")
            .arg("a/b")
            .query::<()>(&mut c)
            .is_err()
    );
    Ok(())
}

fn map_get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let Value::Array(items) = v else { return None };
    items.chunks(2).find_map(|kv| match kv {
        [Value::BulkString(k), value] if k == key.as_bytes() => Some(value),
        _ => None,
    })
}

fn text(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// `COMMAND DOCS` in Redis 7's shape, with arguments (redis-cli builds its hints from
/// them); `COMMAND`, `COMMAND INFO`, `COMMAND COUNT` and `COMMAND LIST` agree with it.
#[test]
fn command_docs_describe_arguments_in_redis_shape() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let docs: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("set")
        .arg("nosuch")
        .query(&mut c)?;
    let set = map_get(&docs, "set").expect("set documented; unknown names left out");
    let Value::Array(top) = &docs else {
        panic!("{docs:?}")
    };
    assert_eq!(top.len(), 2);
    assert_eq!(text(map_get(set, "since")).as_deref(), Some("1.0.0"));
    assert_eq!(text(map_get(set, "group")).as_deref(), Some("string"));
    assert!(text(map_get(set, "complexity")).is_some());
    assert!(text(map_get(set, "summary")).is_some());
    let Some(Value::Array(args)) = map_get(set, "arguments") else {
        panic!("SET has no arguments: {set:?}")
    };
    let names: Vec<String> = args
        .iter()
        .filter_map(|a| text(map_get(a, "name")))
        .collect();
    assert_eq!(names, ["key", "value", "condition", "get", "keepttl"]);
    let key = &args[0];
    assert_eq!(text(map_get(key, "type")).as_deref(), Some("key"));
    assert_eq!(map_get(key, "key_spec_index"), Some(&Value::Int(0)));
    let condition = &args[2];
    assert_eq!(text(map_get(condition, "type")).as_deref(), Some("oneof"));
    assert_eq!(
        map_get(condition, "flags"),
        Some(&Value::Array(vec![Value::SimpleString("optional".into())]))
    );
    let Some(Value::Array(choices)) = map_get(condition, "arguments") else {
        panic!("{condition:?}")
    };
    let tokens: Vec<String> = choices
        .iter()
        .filter_map(|a| text(map_get(a, "token")))
        .collect();
    assert_eq!(tokens, ["NX", "XX"]);
    // A container documents its subcommands.
    let docs: Value = redis::cmd("COMMAND")
        .arg("DOCS")
        .arg("config")
        .query(&mut c)?;
    let config = map_get(&docs, "config").expect("config");
    let get = map_get(
        map_get(config, "subcommands").expect("subcommands"),
        "config|get",
    );
    assert!(map_get(get.expect("config|get"), "arguments").is_some());
    // Every command is documented, and the counts agree.
    let count: i64 = redis::cmd("COMMAND").arg("COUNT").query(&mut c)?;
    let Value::Array(all_docs) = redis::cmd("COMMAND").arg("DOCS").query(&mut c)? else {
        panic!("DOCS")
    };
    assert_eq!(all_docs.len() as i64, 2 * count);
    let Value::Array(all_info) = redis::cmd("COMMAND").query(&mut c)? else {
        panic!("COMMAND")
    };
    assert_eq!(all_info.len() as i64, count);
    let list: Vec<String> = redis::cmd("COMMAND").arg("LIST").query(&mut c)?;
    assert!(list.contains(&"get".to_owned()) && list.contains(&"config|get".to_owned()));
    assert_eq!(
        list.iter().filter(|n| !n.contains('|')).count() as i64,
        count
    );
    // COMMAND INFO: Redis 7's ten fields, key positions and a key specification.
    let Value::Array(info) = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("mget")
        .query(&mut c)?
    else {
        panic!("INFO")
    };
    let Value::Array(mget) = &info[0] else {
        panic!("{info:?}")
    };
    assert_eq!(mget.len(), 10);
    assert_eq!(
        &mget[1..6],
        &[
            Value::Int(-2),
            Value::Array(vec![
                Value::SimpleString("readonly".into()),
                Value::SimpleString("fast".into())
            ]),
            Value::Int(1),
            Value::Int(-1),
            Value::Int(1),
        ]
    );
    assert!(matches!(&mget[8], Value::Array(specs) if specs.len() == 1));
    Ok(())
}

/// `CONFIG GET appendfsync` answers Redis's values for the `--sync` modes; patterns are
/// globs and case-insensitive, as in Redis.
#[test]
fn config_get_answers_redis_values_and_globs() -> TestResult {
    for (mode, fsync) in [
        (SyncMode::Always, "always"),
        (SyncMode::Batch, "everysec"),
        (SyncMode::None, "no"),
    ] {
        let server = TestServer::start(|c| c.sync = mode);
        let mut c = server.client();
        let got: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("appendfsync")
            .query(&mut c)?;
        assert_eq!(got, ["appendfsync", fsync], "--sync {mode}");
    }
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("append*")
        .arg("APPEND*")
        .query(&mut c)?;
    assert_eq!(got, ["appendfsync", "everysec", "appendonly", "yes"]);
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("APPENDFSYNC")
        .query(&mut c)?;
    assert_eq!(got, ["APPENDFSYNC", "everysec"]);
    let got: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("nosuch")
        .query(&mut c)?;
    assert!(got.is_empty());
    let all: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("*").query(&mut c)?;
    assert!(all.len() >= 16 && all.contains(&"maxclients".to_owned()));
    Ok(())
}

#[test]
fn writes_survive_a_restart() -> TestResult {
    let mut server = TestServer::start(|c| c.sync = SyncMode::None);
    {
        let mut c = server.client();
        let () = c.set("persist", "yes")?;
        let _: i64 = c.incr("visits", 5)?;
        let () = redis::cmd("DATABASES")
            .arg("CREATE")
            .arg("run7")
            .query(&mut c)?;
        let () = redis::cmd("SELECT").arg("run7").query(&mut c)?;
        let () = c.set("in7", "x")?;
    }
    server.restart();
    let mut c = server.client();
    assert_eq!(c.get::<_, String>("persist")?, "yes");
    assert_eq!(c.get::<_, i64>("visits")?, 5);
    let () = redis::cmd("SELECT").arg("run7").query(&mut c)?;
    assert_eq!(c.get::<_, String>("in7")?, "x");
    Ok(())
}

#[test]
fn quit_closes_after_replying() {
    let server = TestServer::start(|_| {});
    let mut raw = server.raw();
    roundtrip(&mut raw, b"QUIT\r\nPING\r\n", b"+OK\r\n");
    assert!(server_util::closed_by_peer(&mut raw));
}

#[test]
fn counts_loaded_offline_as_merge_operands_are_served_and_flushable() -> TestResult {
    let mut server = TestServer::start(|_| {});
    server.stop();
    // What `strata load --resp-keys --format counts DIR/db0` leaves: `CounterAdd` operands
    // under Redis keys, beside a plain value.
    let options = strata_engine::Options::default()
        .merge_operator(Some(std::sync::Arc::new(strata_engine::CounterAdd)));
    let db = strata_engine::Db::open(server.dir.path().join("db0"), options)?;
    db.put(b"kplain", b"v")?;
    db.merge(b"kreads", b"5")?;
    db.merge(b"kreads", b"4")?;
    db.close()?;
    server.restart();
    let mut c = server.client();
    assert_eq!(c.get::<_, String>("reads")?, "9");
    assert_eq!(c.incr::<_, _, i64>("reads", 1)?, 10);
    let mut keys: Vec<String> = c.keys("*")?;
    keys.sort();
    assert_eq!(keys, ["plain", "reads"]);
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c)?, 2);
    let () = redis::cmd("FLUSHDB").query(&mut c)?;
    assert_eq!(redis::cmd("DBSIZE").query::<i64>(&mut c)?, 0);
    Ok(())
}

/// The RESP `SQL` command has no cancel request, but the shutdown stops a statement still
/// running after the grace period, as over PostgreSQL: `-ERR [57P01] ...`, nothing changed.
#[test]
fn a_sql_command_still_running_after_the_grace_period_is_stopped() -> TestResult {
    let mut server =
        TestServer::start(|c| c.shutdown_grace = std::time::Duration::from_millis(100));
    let mut c = server.client();
    let _: String = redis::cmd("SQL")
        .arg("CREATE TABLE big (id BIGINT PRIMARY KEY, g BIGINT)")
        .query(&mut c)?;
    let ids: Vec<usize> = (0..100_000).collect();
    for chunk in ids.chunks(20_000) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, 0)")).collect();
        let _: String = redis::cmd("SQL")
            .arg(format!("INSERT INTO big VALUES {}", values.join(", ")))
            .query(&mut c)?;
    }
    // The stop must come while the UPDATE runs, which timing on a loaded machine does not
    // promise: when the command had not been read yet (the stop closes the idle connection:
    // the client sees it end), the wait was too short; when it finished first (`UPDATE
    // 100000`, the rows are set back), too long. The next wait is bisected between the
    // longest too short and the shortest too long (doubled while none was too long).
    let (mut too_short, mut too_long): (u64, Option<u64>) = (0, None);
    let mut wait_ms: u64 = 20;
    let mut attempts = 0;
    let mut c = loop {
        attempts += 1;
        assert!(
            attempts <= 20,
            "the stop never came while the UPDATE ran (waits between {too_short} and \
             {too_long:?} ms)"
        );
        let update = std::thread::spawn(move || {
            redis::cmd("SQL")
                .arg("UPDATE big SET g = g + 1")
                .query::<String>(&mut c)
        });
        std::thread::sleep(std::time::Duration::from_millis(wait_ms));
        server.stop();
        let outcome = update.join().expect("no panic");
        server.restart();
        match outcome {
            Err(err) if err.is_connection_dropped() || err.is_io_error() => {
                c = server.client();
                let rows: Vec<Vec<redis::Value>> = redis::cmd("SQL")
                    .arg("SELECT sum(g) FROM big")
                    .query(&mut c)?;
                if rows.get(1) == Some(&vec![redis::Value::Int(0)]) {
                    too_short = too_short.max(wait_ms);
                    wait_ms = match too_long {
                        Some(long) => (too_short + long) / 2,
                        None => (wait_ms * 2).min(4_000),
                    };
                } else {
                    // The UPDATE committed and the stop closed the connection before its
                    // reply went out (a loaded machine: the batch was waited for past the
                    // grace period): too long, as a reply would have been.
                    too_long = Some(too_long.map_or(wait_ms, |long| long.min(wait_ms)));
                    wait_ms = (too_short + wait_ms) / 2;
                    let _: String = redis::cmd("SQL")
                        .arg("UPDATE big SET g = 0")
                        .query(&mut c)?;
                }
            }
            Err(err) => {
                assert!(err.to_string().contains("57P01"), "{err}");
                break server.client();
            }
            Ok(done) => {
                assert_eq!(done, "UPDATE 100000");
                too_long = Some(too_long.map_or(wait_ms, |long| long.min(wait_ms)));
                wait_ms = (too_short + wait_ms) / 2;
                c = server.client();
                let _: String = redis::cmd("SQL")
                    .arg("UPDATE big SET g = 0")
                    .query(&mut c)?;
            }
        }
    };
    let rows: Vec<Vec<redis::Value>> = redis::cmd("SQL")
        .arg("SELECT count(*), sum(g) FROM big")
        .query(&mut c)?;
    assert_eq!(
        rows.get(1),
        Some(&vec![redis::Value::Int(100_000), redis::Value::Int(0)]),
        "{rows:?}"
    );
    Ok(())
}

#[test]
fn prefix_patterns_scan_only_their_range_and_miss_nothing() -> TestResult {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let keys = [
        "read:",
        "read:A",
        "read:AC",
        "read:ACG",
        "read:ACGT",
        "read:ACGTA",
        "read:ACGU",
        "read;",
        "reac",
        "r*ad",
        "r*adx",
        "",
        "zzz",
    ];
    for k in keys {
        let () = redis::cmd("SET").arg(k).arg("1").query(&mut c)?;
    }
    for pattern in [
        "read:ACG*",
        "read:*",
        "read:ACGT",
        "r\\*ad*",
        "read:A?G*",
        "*",
        "read;*",
        "x*",
    ] {
        let expected: std::collections::BTreeSet<String> = keys
            .iter()
            .filter(|k| !k.is_empty() || pattern == "*")
            .filter(|k| glob_like(pattern, k))
            .map(ToString::to_string)
            .collect();
        let got: Vec<String> = redis::cmd("KEYS").arg(pattern).query(&mut c)?;
        assert_eq!(
            got.into_iter().collect::<std::collections::BTreeSet<_>>(),
            expected,
            "KEYS {pattern}"
        );
        // SCAN with a small COUNT, resuming until the cursor is 0.
        let mut cursor = 0u64;
        let mut scanned = std::collections::BTreeSet::new();
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(2)
                .query(&mut c)?;
            for k in batch {
                assert!(scanned.insert(k), "SCAN {pattern} returned a key twice");
            }
            if next == 0 {
                break;
            }
            cursor = next;
        }
        assert_eq!(scanned, expected, "SCAN {pattern}");
    }
    Ok(())
}

/// The test's own reading of the few glob forms it uses (`*`, `?`, `\*`).
fn glob_like(pattern: &str, key: &str) -> bool {
    fn go(p: &[u8], k: &[u8]) -> bool {
        match (p.first(), k.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], k) || (!k.is_empty() && go(p, &k[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &k[1..]),
            (Some(b'\\'), Some(c)) if p.get(1) == Some(c) => go(&p[2..], &k[1..]),
            (Some(a), Some(b)) if a == b && *a != b'\\' => go(&p[1..], &k[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), key.as_bytes())
}
