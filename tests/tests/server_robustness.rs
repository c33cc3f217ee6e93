//! Hostile and broken clients: truncated frames, garbage, a 600 MiB bulk header,
//! 1,000 concurrent connections, a client vanishing mid-pipeline, connection limits, idle
//! timeouts and stalled clients over RESP, pipelines that go on past `QUIT` or a protocol
//! error, `CLIENT KILL` of a client that reads nothing; PostgreSQL startups without a user or
//! that never finish. After each, the server must still serve everyone else.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

mod server_util;

use std::io::Write;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use redis::Commands;
use server_util::{TestServer, closed_by_peer, encode, read_exactly, roundtrip};

fn assert_serving(server: &TestServer) {
    let mut raw = server.raw();
    roundtrip(&mut raw, b"PING\r\n", b"+PONG\r\n");
}

#[test]
fn truncated_frames_wait_and_then_complete() {
    let server = TestServer::start(|_| {});
    let mut raw = server.raw();
    let frame = encode(&[b"SET", b"key", b"value"]);
    for piece in frame.chunks(3) {
        raw.write_all(piece).unwrap();
        raw.flush().unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    roundtrip(&mut raw, b"", b"+OK\r\n");
    // A truncated frame followed by a disconnect leaves nothing behind.
    let mut raw2 = server.raw();
    raw2.write_all(b"*3\r\n$3\r\nSET\r\n$4\r\ntrun").unwrap();
    drop(raw2);
    let mut c = server.client();
    assert_eq!(c.get::<_, Option<String>>("trun").unwrap(), None);
    assert_eq!(c.get::<_, String>("key").unwrap(), "value");
}

#[test]
fn garbage_gets_a_protocol_error_and_the_connection_is_closed() {
    let server = TestServer::start(|_| {});
    let cases: &[(&[u8], &[u8])] = &[
        (
            b"*abc\r\n",
            b"-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n:5\r\n",
            b"-ERR Protocol error: expected '$', got ':'\r\n",
        ),
        (
            b"*1\r\n$x\r\n",
            b"-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"*1\r\n$1\r\nab\r\n",
            b"-ERR Protocol error: expected CRLF after bulk string data\r\n",
        ),
        (
            b"SET \"unterminated\r\n",
            b"-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ];
    for (garbage, reply) in cases {
        let mut raw = server.raw();
        roundtrip(&mut raw, garbage, reply);
        assert!(
            closed_by_peer(&mut raw),
            "connection left open after {garbage:?}"
        );
    }
    // Requests before the bad frame are answered first.
    let mut raw = server.raw();
    roundtrip(
        &mut raw,
        b"PING\r\n*x\r\n",
        b"+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n",
    );
    assert_serving(&server);
}

#[test]
fn an_http_request_on_the_resp_port_is_closed_before_its_body_runs() {
    // What a web page can make a browser send (a no-preflight text/plain POST).
    let server = TestServer::start(|_| {});
    let mut raw = server.raw();
    raw.write_all(
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\n\r\n\
          SET pwned yes\r\n",
    )
    .expect("send");
    assert!(
        closed_by_peer(&mut raw),
        "an HTTP request must close the connection"
    );
    let mut c = server.client();
    let pwned: Option<String> = c.get("pwned").expect("get");
    assert_eq!(pwned, None, "the request body must not run");
    assert_serving(&server);
}

#[test]
fn a_refused_multi_runs_none_of_the_queued_commands() {
    let server = TestServer::start(|_| {});
    // redis-py's default pipeline: MULTI, commands, EXEC in one write.
    let mut raw = server.raw();
    roundtrip(
        &mut raw,
        b"MULTI\r\nSET a 1\r\nINCR a\r\nEXEC\r\n",
        b"-ERR MULTI is not supported (no transactions): the commands up to EXEC or DISCARD \
          will be refused\r\n\
          -ERR command not run: MULTI is not supported; send EXEC or DISCARD\r\n\
          -ERR command not run: MULTI is not supported; send EXEC or DISCARD\r\n\
          -EXECABORT Transaction discarded because MULTI is not supported.\r\n",
    );
    let mut c = server.client();
    let a: Option<i64> = c.get("a").expect("get");
    assert_eq!(a, None, "no queued command may run");
    let mut raw = server.raw();
    roundtrip(&mut raw, b"EXEC\r\n", b"-ERR EXEC without MULTI\r\n");
    roundtrip(&mut raw, b"DISCARD\r\n", b"-ERR DISCARD without MULTI\r\n");
    assert_serving(&server);
}

#[test]
fn client_info_reports_numbered_databases_as_numbers() {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let info: String = redis::cmd("CLIENT")
        .arg("INFO")
        .query(&mut c)
        .expect("client info");
    assert!(info.contains(" db=0 "), "{info}");
    let _: () = redis::cmd("SELECT").arg(3).query(&mut c).expect("select");
    let info: String = redis::cmd("CLIENT")
        .arg("INFO")
        .query(&mut c)
        .expect("client info");
    assert!(info.contains(" db=3 "), "{info}");
}

#[test]
fn random_garbage_never_takes_the_server_down() {
    let server = TestServer::start(|_| {});
    let seed = 0x5eed_u64;
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for round in 0..100 {
        let mut raw = server.raw();
        raw.set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let len = rng.random_range(1..300);
        let mut bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        if round % 2 == 0 {
            // Start like a real frame so the parser goes deeper.
            bytes.splice(0..0, b"*2\r\n$3\r\nGET\r\n".iter().copied());
        }
        let _ = raw.write_all(&bytes);
        let _ = std::io::Read::read(&mut raw, &mut [0u8; 512]);
    }
    assert_serving(&server);
}

#[test]
fn huge_bulk_header_is_refused_without_allocating() {
    let server = TestServer::start(|_| {});
    let rss_before = server_util::rss_bytes();
    let mut raw = server.raw();
    roundtrip(
        &mut raw,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$629145600\r\nabc",
        b"-ERR Protocol error: invalid bulk length\r\n",
    );
    assert!(closed_by_peer(&mut raw));
    // Inline lines have their own limit.
    let mut raw = server.raw();
    let long = vec![b'a'; 70 << 10];
    let _ = raw.write_all(&long);
    let want = b"-ERR Protocol error: too big inline request\r\n";
    assert_eq!(read_exactly(&mut raw, want.len()), want);
    let grown = server_util::rss_bytes().saturating_sub(rss_before);
    assert!(grown < 200 << 20, "RSS grew by {grown} bytes");
    assert_serving(&server);
}

#[test]
fn a_thousand_concurrent_connections() {
    server_util::raise_fd_limit(4096);
    let server = TestServer::start(|_| {});
    let started = Instant::now();
    let mut conns: Vec<TcpStream> = (0..1000)
        .map(|_| {
            let s = TcpStream::connect(server.resp_addr()).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            s
        })
        .collect();
    for (i, c) in conns.iter_mut().enumerate() {
        c.write_all(&encode(&[b"SET", format!("conn:{i}").as_bytes(), b"1"]))
            .unwrap();
    }
    for c in &mut conns {
        assert_eq!(read_exactly(c, 5), b"+OK\r\n");
    }
    let mut c = server.client();
    let info: String = redis::cmd("INFO").arg("clients").query(&mut c).unwrap();
    let connected: usize = info
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    assert!(connected >= 1001, "connected_clients = {connected}");
    assert_eq!(c.keys::<_, Vec<String>>("conn:*").unwrap().len(), 1000);
    drop(conns);
    assert!(started.elapsed() < Duration::from_secs(60));
}

fn pipeline_then_partial_frame(prefix: &str, n: usize) -> Vec<u8> {
    let mut pipeline = Vec::new();
    for i in 0..n {
        pipeline.extend_from_slice(&encode(&[b"SET", format!("{prefix}:{i}").as_bytes(), b"v"]));
    }
    pipeline.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$4\r\nlast\r\n$100\r\nonly part");
    pipeline
}

/// Applied keys `prefix:0..` form a prefix of the pipeline (commands run in order).
fn applied_prefix(c: &mut redis::Connection, prefix: &str, n: usize) -> usize {
    let applied = c
        .keys::<_, Vec<String>>(format!("{prefix}:*"))
        .unwrap()
        .len();
    for i in 0..n {
        let present = c
            .get::<_, Option<String>>(format!("{prefix}:{i}"))
            .unwrap()
            .is_some();
        assert_eq!(
            present,
            i < applied,
            "{prefix}:{i} breaks the prefix of {applied}"
        );
    }
    applied
}

#[test]
fn client_disconnecting_mid_pipeline() {
    let server = TestServer::start(|_| {});
    let n = 2000;
    // Half-close: the server reads everything up to EOF; every complete command is applied
    // and the partial one is dropped.
    let mut raw = server.raw();
    raw.write_all(&pipeline_then_partial_frame("half", n))
        .unwrap();
    raw.shutdown(std::net::Shutdown::Write).unwrap();
    let mut c = server.client();
    let deadline = Instant::now() + Duration::from_secs(10);
    while c.get::<_, Option<String>>("half:1999").unwrap().is_none() {
        assert!(Instant::now() < deadline, "pipeline not applied");
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(closed_by_peer(&mut raw));
    assert_eq!(applied_prefix(&mut c, "half", n), n);
    // Full close without reading a reply (the kernel may answer our replies with a reset):
    // whatever was applied is a prefix, the partial frame never is, and the server goes on.
    let mut raw = server.raw();
    raw.write_all(&pipeline_then_partial_frame("gone", n))
        .unwrap();
    drop(raw);
    std::thread::sleep(Duration::from_millis(200));
    applied_prefix(&mut c, "gone", n);
    assert_eq!(c.get::<_, Option<String>>("last").unwrap(), None);
    assert_serving(&server);
}

#[test]
fn connections_beyond_maxclients_get_an_error() {
    let server = TestServer::start(|c| c.max_clients = 3);
    let held: Vec<TcpStream> = (0..3).map(|_| server.raw()).collect();
    let mut extra = server.raw();
    let want = b"-ERR max number of clients reached\r\n";
    assert_eq!(read_exactly(&mut extra, want.len()), want);
    assert!(closed_by_peer(&mut extra));
    drop(held);
    // Slots are released on disconnect.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let mut c = server.raw();
        c.write_all(b"PING\r\n").unwrap();
        if read_exactly(&mut c, 7) == b"+PONG\r\n" {
            break;
        }
        assert!(Instant::now() < deadline, "slots not released");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn idle_connections_are_closed_after_the_timeout() {
    let server = TestServer::start(|c| c.idle_timeout = Some(Duration::from_millis(300)));
    let mut raw = server.raw();
    // Timed from before the PING: the server's idle clock starts after it answers, so a
    // client slow to read the PONG cannot make the wait look shorter than the timeout.
    let start = Instant::now();
    roundtrip(&mut raw, b"PING\r\n", b"+PONG\r\n");
    assert!(closed_by_peer(&mut raw));
    assert!(start.elapsed() >= Duration::from_millis(300));
}

#[test]
fn a_stalled_huge_request_does_not_stall_other_clients() {
    let server = TestServer::start(|_| {});
    // Announce a 100 MiB value, send 1 MiB of it, then stall.
    let mut slow = server.raw();
    slow.write_all(b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$104857600\r\n")
        .unwrap();
    slow.write_all(&vec![b'x'; 1 << 20]).unwrap();
    // Another client keeps going; a whole-key-space command runs off the event loop.
    let mut c = server.client();
    let mut pipe = redis::pipe();
    for i in 0..5000 {
        pipe.cmd("SET").arg(format!("k{i}")).arg(i).ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    let start = Instant::now();
    for _ in 0..100 {
        let _: Option<String> = c.get("k1").unwrap();
    }
    let keys: Vec<String> = c.keys("*").unwrap();
    assert_eq!(keys.len(), 5000);
    assert!(start.elapsed() < Duration::from_secs(10));
    drop(slow);
}

/// A PostgreSQL startup packet (protocol 3.0) with these `name=value` parameters.
#[expect(
    clippy::big_endian_bytes,
    reason = "the PostgreSQL protocol's integers are big-endian"
)]
fn pg_startup(params: &[(&str, &str)]) -> Vec<u8> {
    let mut body = 196_608u32.to_be_bytes().to_vec();
    for (k, v) in params {
        body.extend_from_slice(k.as_bytes());
        body.push(0);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut packet = u32::try_from(body.len() + 4)
        .unwrap()
        .to_be_bytes()
        .to_vec();
    packet.extend_from_slice(&body);
    packet
}

/// Everything the server sends until it closes the connection (at most 10 s).
fn read_until_closed(stream: &mut TcpStream) -> Vec<u8> {
    use std::io::Read;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
        }
    }
}

/// True when `bytes` hold an ErrorResponse field `C` (SQLSTATE) equal to `code`.
fn has_sqlstate(bytes: &[u8], code: &str) -> bool {
    let field = format!("C{code}\0");
    bytes.first() == Some(&b'E') && bytes.windows(field.len()).any(|w| w == field.as_bytes())
}

#[test]
fn a_postgres_startup_without_a_user_is_refused_with_28000() {
    let server = TestServer::start(|_| {});
    let mut pg = TcpStream::connect(server.pg_addr()).unwrap();
    pg.write_all(&pg_startup(&[("database", "run1")])).unwrap();
    let reply = read_until_closed(&mut pg);
    assert!(
        has_sqlstate(&reply, "28000"),
        "{:?}",
        reply.escape_ascii().to_string()
    );
    assert!(!server.dir.path().join("run1").exists());
    assert!(!server.dir.path().join("postgres").exists());
}

#[test]
#[expect(
    clippy::big_endian_bytes,
    reason = "the PostgreSQL protocol's integers are big-endian"
)]
fn postgres_connections_beyond_maxclients_get_53300_after_declined_ssl() {
    let server = TestServer::start(|c| c.max_clients = 1);
    let _held = server.raw();
    std::thread::sleep(Duration::from_millis(100));
    // libpq's default (sslmode=prefer): SSLRequest first. It must be declined with `N` so
    // the client goes on to its startup packet and then reads the refusal.
    let mut pg = TcpStream::connect(server.pg_addr()).unwrap();
    let mut ssl_request = 8u32.to_be_bytes().to_vec();
    ssl_request.extend_from_slice(&80_877_103u32.to_be_bytes());
    pg.write_all(&ssl_request).unwrap();
    assert_eq!(read_exactly(&mut pg, 1), b"N");
    pg.write_all(&pg_startup(&[("user", "lab")])).unwrap();
    let reply = read_until_closed(&mut pg);
    assert!(has_sqlstate(&reply, "53300"), "{}", reply.escape_ascii());
    // Without SSL (sslmode=disable): the startup packet, then the refusal.
    let mut pg = TcpStream::connect(server.pg_addr()).unwrap();
    pg.write_all(&pg_startup(&[("user", "lab")])).unwrap();
    let reply = read_until_closed(&mut pg);
    assert!(has_sqlstate(&reply, "53300"), "{}", reply.escape_ascii());
}

/// A client that sends part of a startup packet and closes its end, or a startup length no
/// packet can have, is answered FATAL 08P01 and closed at once (PostgreSQL's "incomplete
/// startup packet" and "invalid length of startup packet"). Such connections used to keep
/// their slot until the startup timeout (55 s), so a few could lock out real clients.
#[test]
fn cut_off_or_impossible_startup_packets_close_at_once() {
    let server = TestServer::start(|c| c.max_clients = 1);
    for (first, message) in [
        (&b"\x00\x00"[..], "incomplete startup packet"),
        (
            &b"\x00\x00\x00\x10\x04\xd2"[..],
            "incomplete startup packet",
        ),
        (&b"\x00\x00\x00\x04"[..], "invalid length of startup packet"),
        (&b"\x7f\xff\xff\xff"[..], "invalid length of startup packet"),
    ] {
        let started = std::time::Instant::now();
        // The previous case's connection gives its one client slot back just after the
        // server closes it, so a connect right after that close can be refused (53300, or a
        // reset that loses the reply and may fail the write or the shutdown): try again.
        let reply = loop {
            let mut pg = TcpStream::connect(server.pg_addr()).unwrap();
            let _ = pg.write_all(first);
            let _ = pg.shutdown(std::net::Shutdown::Write);
            let reply = read_until_closed(&mut pg);
            let refused = reply.is_empty() || has_sqlstate(&reply, "53300");
            if !refused || started.elapsed() > Duration::from_secs(4) {
                break reply;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(has_sqlstate(&reply, "08P01"), "{}", reply.escape_ascii());
        assert!(
            reply
                .windows(message.len())
                .any(|w| w == message.as_bytes()),
            "{}",
            reply.escape_ascii()
        );
        assert!(started.elapsed() < Duration::from_secs(5), "{first:?}");
    }
    // The one client slot is free again: a real startup gets through.
    let mut pg = TcpStream::connect(server.pg_addr()).unwrap();
    pg.write_all(&pg_startup(&[("user", "lab"), ("database", "run1")]))
        .unwrap();
    let startup = pg_messages_until(&mut pg, b'Z');
    assert!(startup.iter().all(|(t, _)| *t != b'E'), "{startup:?}");
}

/// Reads backend messages until one with tag `until`; returns the tags and bodies read.
#[expect(
    clippy::big_endian_bytes,
    reason = "the PostgreSQL protocol's integers are big-endian"
)]
fn pg_messages_until(stream: &mut TcpStream, until: u8) -> Vec<(u8, Vec<u8>)> {
    let mut got = Vec::new();
    loop {
        let head = read_exactly(stream, 5);
        assert_eq!(head.len(), 5, "connection closed after {got:?}");
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
        let body = read_exactly(stream, usize::try_from(len).unwrap() - 4);
        got.push((head[0], body));
        if head[0] == until {
            return got;
        }
    }
}

/// A frontend message: tag, length, body.
#[expect(
    clippy::big_endian_bytes,
    reason = "the PostgreSQL protocol's integers are big-endian"
)]
fn pg_message(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![tag];
    m.extend_from_slice(&u32::try_from(body.len() + 4).unwrap().to_be_bytes());
    m.extend_from_slice(body);
    m
}

#[test]
fn parsing_an_existing_named_statement_again_is_refused_with_42p05() {
    let server = TestServer::start(|_| {});
    let mut pg = TcpStream::connect(server.pg_addr()).unwrap();
    pg.write_all(&pg_startup(&[("user", "lab"), ("database", "run1")]))
        .unwrap();
    // The startup reports the server_version `SHOW server_version` answers.
    let startup = pg_messages_until(&mut pg, b'Z');
    assert!(
        startup
            .iter()
            .any(|(t, body)| *t == b'S' && body.as_slice() == b"server_version\x0016.0\x00"),
        "{startup:?}"
    );
    let parse = |name: &str, sql: &str| {
        let body = [name.as_bytes(), b"\0", sql.as_bytes(), b"\0", &[0, 0]].concat();
        pg_message(b'P', &body)
    };
    let sync = pg_message(b'S', &[]);
    // s1, then s1 again: PostgreSQL refuses the second (pgwire replaced it silently).
    pg.write_all(
        &[
            parse("s1", "SELECT 1"),
            parse("s1", "SELECT 2"),
            sync.clone(),
        ]
        .concat(),
    )
    .unwrap();
    let got = pg_messages_until(&mut pg, b'Z');
    let tags: Vec<u8> = got.iter().map(|(t, _)| *t).collect();
    assert_eq!(tags, b"1EZ", "{got:?}");
    assert!(
        has_sqlstate(&pg_message(b'E', &got[1].1), "42P05"),
        "{got:?}"
    );
    // The unnamed statement is replaced, as in PostgreSQL.
    pg.write_all(&[parse("", "SELECT 1"), parse("", "SELECT 2"), sync.clone()].concat())
        .unwrap();
    let tags: Vec<u8> = pg_messages_until(&mut pg, b'Z')
        .iter()
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(tags, b"11Z");
    // After DEALLOCATE ALL (psycopg's rollback) or DEALLOCATE s1, the name can be used again.
    for deallocate in ["DEALLOCATE ALL", "DEALLOCATE s1"] {
        let query = pg_message(b'Q', &[deallocate.as_bytes(), b"\0"].concat());
        pg.write_all(&query).unwrap();
        let tags: Vec<u8> = pg_messages_until(&mut pg, b'Z')
            .iter()
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(tags, b"CZ", "{deallocate}");
        pg.write_all(&[parse("s1", "SELECT 3"), sync.clone()].concat())
            .unwrap();
        let tags: Vec<u8> = pg_messages_until(&mut pg, b'Z')
            .iter()
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(tags, b"1Z", "after {deallocate}");
    }
}

/// A message hidden inside the startup packet's length, or an encryption request whose
/// length covers a startup packet, is refused with FATAL 08P01 before anything in it runs
/// (pgwire ran the hidden statement, then refused the packet).
#[test]
#[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
fn postgres_messages_hidden_in_startup_packets_never_run() {
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let _: String = redis::cmd("SQL")
        .arg("CREATE TABLE t (k BIGINT PRIMARY KEY)")
        .query(&mut c)
        .unwrap();
    let query = |sql: &str| {
        let mut m = vec![b'Q'];
        m.extend_from_slice(&u32::try_from(sql.len() + 5).unwrap().to_be_bytes());
        m.extend_from_slice(sql.as_bytes());
        m.push(0);
        m
    };
    // The startup packet's length also covers a whole Query after its terminator.
    let mut packet = pg_startup(&[("user", "u"), ("database", "db0")]);
    let hidden = query("INSERT INTO t VALUES (950)");
    let len = u32::from_be_bytes([packet[0], packet[1], packet[2], packet[3]]);
    packet.splice(
        0..4,
        (len + u32::try_from(hidden.len()).unwrap()).to_be_bytes(),
    );
    packet.extend_from_slice(&hidden);
    // An SSLRequest whose length covers a startup packet and a Query after it.
    let mut ssl = Vec::new();
    let inner = [
        pg_startup(&[("user", "u"), ("database", "db0")]),
        query("INSERT INTO t VALUES (951)"),
    ]
    .concat();
    ssl.extend_from_slice(&(8 + u32::try_from(inner.len()).unwrap()).to_be_bytes());
    ssl.extend_from_slice(&80_877_103u32.to_be_bytes());
    ssl.extend_from_slice(&inner);
    for bytes in [packet, ssl] {
        let mut stream = TcpStream::connect(server.pg_addr()).unwrap();
        stream.write_all(&bytes).unwrap();
        let reply = read_until_closed(&mut stream);
        assert!(
            has_sqlstate(&reply, "08P01"),
            "{:?}",
            reply.escape_ascii().to_string()
        );
        assert!(
            !reply.windows(6).any(|w| w == b"INSERT"),
            "{:?}",
            reply.escape_ascii().to_string()
        );
    }
    let rows: Vec<Vec<redis::Value>> = redis::cmd("SQL")
        .arg("SELECT count(*) FROM t")
        .query(&mut c)
        .unwrap();
    assert_eq!(rows.get(1), Some(&vec![redis::Value::Int(0)]), "{rows:?}");
    assert_serving(&server);
}

#[test]
fn postgres_connections_that_never_finish_their_startup_are_closed() {
    let server = TestServer::start(|c| c.pg_startup_timeout = Duration::from_millis(500));
    // A length field too small for any startup packet, then nothing (pgwire waits for more);
    // a client that sends nothing at all.
    let mut short = TcpStream::connect(server.pg_addr()).unwrap();
    short.write_all(&[0, 0, 0, 4]).unwrap();
    let mut silent = TcpStream::connect(server.pg_addr()).unwrap();
    // A client that finished its startup stays, idle, past the startup timeout.
    let mut ready = TcpStream::connect(server.pg_addr()).unwrap();
    ready.write_all(&pg_startup(&[("user", "lab")])).unwrap();
    let start = Instant::now();
    for stream in [&mut short, &mut silent] {
        let reply = read_until_closed(stream);
        assert!(
            has_sqlstate(&reply, "08P01"),
            "{:?}",
            reply.escape_ascii().to_string()
        );
    }
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(400) && waited < Duration::from_secs(5),
        "{waited:?}"
    );
    let query = b"Q\0\0\0\x0eSELECT 1;\0";
    ready.write_all(query).unwrap();
    ready
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // Startup replies, then the query's row and ReadyForQuery.
    while !got.windows(2).any(|w| w == b"\x01\x31") {
        use std::io::Read;
        let n = ready.read(&mut buf).unwrap();
        assert!(n > 0, "closed: {:?}", got.escape_ascii().to_string());
        got.extend_from_slice(&buf[..n]);
    }
    assert_serving(&server);
}

#[test]
fn an_address_in_use_leaves_the_directory_alone() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("not-yet");
    let mut config = strata_server::Config::ephemeral(&dir);
    config.resp_addr = Some(taken.local_addr().unwrap());
    let Err(e) = strata_server::spawn(config) else {
        panic!("started on an address in use");
    };
    assert!(matches!(e, strata_server::ServerError::Bind { .. }), "{e}");
    assert!(!dir.exists(), "a failed start created {}", dir.display());
}

/// Regression: a Parse message without its parameter count, or a truncated Bind, panicked in
/// pgwire's decoder ("advance out of bounds") and the client was dropped without a word; an
/// unknown message type or a FunctionCall closed the connection silently. Each now gets a
/// FATAL ErrorResponse (08P01, 0A000 for FunctionCall) before the close, and the server goes
/// on serving.
///
/// Framing (`server/src/pg/frames.rs`): a Sync or Flush with a body ran the message hidden in
/// it (a proxy forwarding whole messages would have seen a Sync), and a length below 4 was
/// read past; both are FATAL 08P01 now, and the hidden statement does not run.
#[test]
fn malformed_postgres_messages_get_a_fatal_error_response() {
    let hidden = pg_message(b'Q', b"CREATE TABLE smuggled (k BIGINT PRIMARY KEY)\0");
    let mut short_query = vec![b'Q', 0, 0, 0, 3];
    short_query.extend_from_slice(b"SELECT 1\0");
    let cases: [(&[u8], &str); 7] = [
        (&pg_message(b'P', b"\0SELECT 1\0"), "08P01"),
        (&pg_message(b'B', b"\0\0\0\x01"), "08P01"),
        (&pg_message(b'y', b"zz"), "08P01"),
        (&pg_message(b'F', b"\0\0\0\x01\0\0\0\0\0\0"), "0A000"),
        (&pg_message(b'S', &hidden), "08P01"),
        (&pg_message(b'H', &hidden), "08P01"),
        (&short_query, "08P01"),
    ];
    let server = TestServer::start(|_| {});
    for (message, code) in cases {
        let mut pg = TcpStream::connect(server.pg_addr()).unwrap();
        pg.write_all(&pg_startup(&[("user", "lab"), ("database", "bad")]))
            .unwrap();
        pg_messages_until(&mut pg, b'Z');
        pg.write_all(message).unwrap();
        let reply = read_until_closed(&mut pg);
        assert!(
            has_sqlstate(&reply, code) && reply.windows(6).any(|w| w == b"SFATAL"),
            "{:?}: {:?}",
            message.escape_ascii().to_string(),
            reply.escape_ascii().to_string()
        );
    }
    // A good Query sent in the same write as a malformed message is answered, then the
    // FATAL comes (before, the whole write was dropped); what is hidden in it never runs.
    for bad in [pg_message(b'S', &hidden), short_query.clone()] {
        let mut pg = TcpStream::connect(server.pg_addr()).unwrap();
        pg.write_all(&pg_startup(&[("user", "lab"), ("database", "bad")]))
            .unwrap();
        pg_messages_until(&mut pg, b'Z');
        pg.write_all(&[pg_message(b'Q', b"SELECT 1\0"), bad].concat())
            .unwrap();
        let tags: Vec<u8> = pg_messages_until(&mut pg, b'Z')
            .iter()
            .map(|(t, _)| *t)
            .collect();
        assert_eq!(tags, b"TDCZ");
        let reply = read_until_closed(&mut pg);
        assert!(
            has_sqlstate(&reply, "08P01") && reply.windows(6).any(|w| w == b"SFATAL"),
            "{:?}",
            reply.escape_ascii().to_string()
        );
    }
    let mut pg = TcpStream::connect(server.pg_addr()).unwrap();
    pg.write_all(&pg_startup(&[("user", "lab"), ("database", "bad")]))
        .unwrap();
    pg_messages_until(&mut pg, b'Z');
    pg.write_all(&pg_message(b'Q', b"SELECT 1\0")).unwrap();
    let tags: Vec<u8> = pg_messages_until(&mut pg, b'Z')
        .iter()
        .map(|(t, _)| *t)
        .collect();
    assert_eq!(tags, b"TDCZ");
    pg.write_all(&pg_message(b'Q', b"SELECT * FROM smuggled\0"))
        .unwrap();
    let reply: Vec<u8> = pg_messages_until(&mut pg, b'Z')
        .into_iter()
        .flat_map(|(t, body)| std::iter::once(t).chain(body))
        .collect();
    assert!(
        has_sqlstate(&reply, "42P01"),
        "{:?}",
        reply.escape_ascii().to_string()
    );
    assert_serving(&server);
}

/// Commands after a `QUIT` or a protocol error in the same pipeline: every reply before it
/// arrives, then the connection closes. The server shuts its side and discards the rest of
/// the input instead of closing with it unread, which made the kernel reset the connection
/// and drop the replies it had not sent yet.
#[test]
fn replies_before_quit_or_a_protocol_error_all_arrive() {
    const GETS: usize = 20_000;
    let server = TestServer::start(|_| {});
    let mut c = server.client();
    let _: () = c.set("big", vec![b'v'; 1000]).unwrap();
    for (trigger, last) in [
        (&b"QUIT\r\n"[..], &b"+OK\r\n"[..]),
        (&b"*1\r\n$x\r\n"[..], &b"-ERR Protocol error"[..]),
    ] {
        let mut pipeline = Vec::new();
        for _ in 0..GETS {
            pipeline.extend_from_slice(&encode(&[b"GET", b"big"]));
        }
        pipeline.extend_from_slice(trigger);
        for _ in 0..GETS {
            pipeline.extend_from_slice(&encode(&[b"GET", b"big"]));
        }
        let mut stream = server.raw();
        // Written from a thread: the server stops running commands at the trigger.
        let mut writer = stream.try_clone().unwrap();
        let sender = std::thread::spawn(move || {
            let _ = writer.write_all(&pipeline);
        });
        // A slow reader: the server's last replies are still in its send buffer when it
        // closes.
        let mut all = Vec::new();
        let mut chunk = vec![0u8; 64 << 10];
        loop {
            match std::io::Read::read(&mut stream, &mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => all.extend_from_slice(&chunk[..n]),
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        sender.join().unwrap();
        let replies = all.windows(7).filter(|w| w == b"$1000\r\n").count();
        assert_eq!(replies, GETS, "replies before {trigger:?}");
        let tail = &all[GETS * (7 + 1000 + 2)..];
        assert!(
            tail.starts_with(last),
            "{:?}",
            String::from_utf8_lossy(tail)
        );
    }
    assert_serving(&server);
}

/// `CLIENT KILL` closes a connection that is stuck writing replies its client does not read
/// (Redis frees a killed client at once too), instead of waiting for the client or for a
/// shutdown's grace period.
#[test]
fn client_kill_closes_a_connection_that_does_not_read_its_replies() {
    let server = TestServer::start(|_| {});
    let mut admin = server.client();
    let _: () = admin.set("big", vec![b'v'; 1 << 20]).unwrap();
    let mut stuck = server.raw();
    stuck.write_all(&encode(&[b"CLIENT", b"ID"])).unwrap();
    let id_line = read_exactly(&mut stuck, 3);
    let mut id = String::from_utf8_lossy(&id_line[1..]).to_string();
    // `:N\r\n`: read to the end of the line.
    while !id.ends_with("\r\n") {
        id.push(char::from(read_exactly(&mut stuck, 1)[0]));
    }
    let id = id.trim_end().to_owned();
    for _ in 0..50 {
        stuck.write_all(&encode(&[b"GET", b"big"])).unwrap();
    }
    std::thread::sleep(Duration::from_millis(300));
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(&id)
        .query(&mut admin)
        .unwrap();
    assert_eq!(killed, 1);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let list: String = redis::cmd("CLIENT").arg("LIST").query(&mut admin).unwrap();
        if !list.lines().any(|l| l.starts_with(&format!("id={id} "))) {
            break;
        }
        assert!(Instant::now() < deadline, "still listed: {list}");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_serving(&server);
}
