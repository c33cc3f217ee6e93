//! Regression tests for `strata serve`'s idle timeout, shutdown and connection limit on
//! connections that are busy: a PostgreSQL result being written, a RESP client that does
//! not read its replies, a multi-statement RESP `SQL` command, a PostgreSQL cancel request
//! at `--maxclients`.
//!
//! The bugs: (1) the PostgreSQL idle timeout ran from the query's start (or its engine
//! call's end) rather than the last byte moved, so a client reading a large result was cut
//! off, and the timeout's and the shutdown's FATAL were written through a second handle to
//! the socket, into the middle of a DataRow (psycopg: "lost synchronization with server");
//! (2) a RESP client that did not read its replies held the shutdown up for 70 s;
//! (3) RESP `SQL "a; b"` still ran `b` after shutdown had begun; (4) a CancelRequest beyond
//! `--maxclients` was answered 53300 and cancelled nothing.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "a panic is how a test fails"
)]

mod server_util;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use server_util::{TestServer, encode};

/// Rows in the large result, and the bytes of text in each (8 MB in all, more than the
/// socket buffers hold).
const ROWS: usize = 8000;
const ROW_TEXT: usize = 1000;

/// A TCP connection to `addr` with a 16 KiB receive buffer, set before connecting (set
/// after, the window stalls), so the server's writes block once its own send buffer is
/// full; 10 s read and write timeouts.
fn connect_small_buffer(addr: std::net::SocketAddr) -> TcpStream {
    use std::os::fd::FromRawFd;
    let std::net::SocketAddr::V4(v4) = addr else {
        panic!("IPv4 expected: {addr}");
    };
    let size: libc::c_int = 16 << 10;
    let address = libc::sockaddr_in {
        sin_family: libc::sa_family_t::try_from(libc::AF_INET).unwrap(),
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*v4.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    // SAFETY: a socket we create and own; setsockopt and connect read values we own, of the
    // lengths given; the descriptor is handed to the TcpStream, which closes it.
    #[allow(unsafe_code, reason = "libc calls in a test helper")]
    let stream = unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket");
        let rc = libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            std::ptr::from_ref(&size).cast(),
            libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap(),
        );
        assert_eq!(rc, 0, "setsockopt");
        let rc = libc::connect(
            fd,
            std::ptr::from_ref(&address).cast(),
            libc::socklen_t::try_from(std::mem::size_of::<libc::sockaddr_in>()).unwrap(),
        );
        assert_eq!(rc, 0, "connect: {}", std::io::Error::last_os_error());
        TcpStream::from_raw_fd(fd)
    };
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
        .set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// One frontend message: type byte, then the big-endian length (itself included) and body.
#[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
fn pg_message(kind: u8, body: &[u8]) -> Vec<u8> {
    let mut m = vec![kind];
    m.extend_from_slice(&u32::try_from(body.len() + 4).unwrap().to_be_bytes());
    m.extend_from_slice(body);
    m
}

/// A simple Query message.
fn query(sql: &str) -> Vec<u8> {
    pg_message(b'Q', &[sql.as_bytes(), b"\0"].concat())
}

/// Backend messages parsed from a byte stream as it arrives; every complete message is
/// checked to be well-formed (a known type; a DataRow's fields exactly fill its body), so
/// bytes spliced into a message fail the test.
#[derive(Default)]
struct Messages {
    bytes: Vec<u8>,
    pos: usize,
    parsed: Vec<(u8, Vec<u8>)>,
}

impl Messages {
    /// Appends `data` and parses the complete messages in it.
    #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
    fn push(&mut self, data: &[u8]) {
        self.bytes.extend_from_slice(data);
        loop {
            let rest = &self.bytes[self.pos..];
            if rest.len() < 5 {
                break;
            }
            let kind = rest[0];
            let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
            assert!(
                b"RSKTDCZEN".contains(&kind) && (4..=ROW_TEXT + 1000).contains(&len),
                "not a message at byte {}: type {:?}, length {len}",
                self.pos,
                kind as char
            );
            if rest.len() < 1 + len {
                break;
            }
            let body = rest[5..1 + len].to_vec();
            if kind == b'D' {
                check_data_row(&body);
            }
            self.parsed.push((kind, body));
            self.pos += 1 + len;
        }
        // Keep memory flat: drop the bytes of parsed messages.
        if self.pos > 1 << 20 {
            self.bytes.drain(..self.pos);
            self.pos = 0;
        }
    }

    fn rows(&self) -> usize {
        self.parsed.iter().filter(|(k, _)| *k == b'D').count()
    }

    fn kinds(&self, kind: u8) -> Vec<&[u8]> {
        self.parsed
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, b)| b.as_slice())
            .collect()
    }

    /// The messages of `kind` before the first ReadyForQuery (what answers the query; the
    /// idle timeout's FATAL may follow it in the same read).
    fn kinds_before_ready(&self, kind: u8) -> Vec<&[u8]> {
        self.parsed
            .iter()
            .take_while(|(k, _)| *k != b'Z')
            .filter(|(k, _)| *k == kind)
            .map(|(_, b)| b.as_slice())
            .collect()
    }

    /// Bytes after the last complete message.
    fn tail(&self) -> usize {
        self.bytes.len() - self.pos
    }
}

/// A DataRow body: field count, then each field's length (-1: NULL) and bytes, exactly.
#[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
fn check_data_row(body: &[u8]) {
    let fields = u16::from_be_bytes([body[0], body[1]]);
    assert_eq!(fields, 2, "DataRow field count");
    let mut at = 2;
    for _ in 0..fields {
        let len = i32::from_be_bytes(body[at..at + 4].try_into().unwrap());
        at += 4;
        if len > 0 {
            at += usize::try_from(len).unwrap();
        }
        assert!(at <= body.len(), "DataRow field past its end");
    }
    assert_eq!(at, body.len(), "DataRow with bytes after its fields");
}

/// A raw PostgreSQL session on `database`, started up and ready for queries.
fn pg_session(server: &TestServer, database: &str) -> TcpStream {
    let mut stream = connect_small_buffer(server.pg_addr());
    let packet = server_util::pg_startup_packet(database);
    stream.write_all(&packet).unwrap();
    until_ready(&mut stream);
    stream
}

/// Reads messages up to ReadyForQuery; returns them.
fn until_ready(stream: &mut TcpStream) -> Messages {
    let mut messages = Messages::default();
    let mut buf = vec![0u8; 64 << 10];
    while messages.kinds(b'Z').is_empty() {
        let n = stream.read(&mut buf).expect("read");
        assert!(n > 0, "closed before ReadyForQuery");
        messages.push(&buf[..n]);
    }
    messages
}

/// Creates table `t` with [`ROWS`] rows of [`ROW_TEXT`] bytes of text.
fn fill(stream: &mut TcpStream) {
    stream
        .write_all(&query("CREATE TABLE t (k BIGINT PRIMARY KEY, s TEXT)"))
        .unwrap();
    until_ready(stream);
    let text = "x".repeat(ROW_TEXT);
    for chunk in (0..ROWS).collect::<Vec<_>>().chunks(1000) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, '{text}')")).collect();
        let insert = format!("INSERT INTO t VALUES {}", values.join(","));
        stream.write_all(&query(&insert)).unwrap();
        let replies = until_ready(stream);
        assert!(replies.kinds(b'E').is_empty(), "insert failed");
    }
}

/// Reads everything until the server closes the connection (or a reset) into `messages`,
/// pausing `pause` after each `every` bytes. `messages` goes on parsing where it was, so a
/// message split between an earlier read and this one is parsed whole.
fn read_paced(stream: &mut TcpStream, messages: &mut Messages, every: usize, pause: Duration) {
    let mut buf = vec![0u8; 64 << 10];
    let mut since_pause = 0;
    loop {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                messages.push(&buf[..n]);
                since_pause += n;
                if since_pause >= every {
                    since_pause = 0;
                    std::thread::sleep(pause);
                }
            }
        }
    }
}

/// Bug 1: a client reading a large result, slowly but steadily, under a 1 s idle timeout
/// gets the whole result, its CommandComplete and ReadyForQuery: a result being written is
/// not idle. (Before, the connection was closed 1 s after the query's engine call, with
/// FATAL 57P05 written into the middle of a DataRow.)
#[test]
fn pg_slow_reader_gets_its_whole_result_under_the_idle_timeout() {
    let server = TestServer::start(|c| c.idle_timeout = Some(Duration::from_secs(1)));
    let mut setup = pg_session(&server, "slow");
    fill(&mut setup);
    drop(setup);
    let mut reader = pg_session(&server, "slow");
    reader.write_all(&query("SELECT k, s FROM t")).unwrap();
    let started = Instant::now();
    // About 3 s in all, in pauses of 0.4 s: each shorter than the timeout.
    let mut messages = Messages::default();
    let mut buf = vec![0u8; 64 << 10];
    let mut since_pause = 0;
    while messages.kinds(b'Z').is_empty() {
        let n = reader.read(&mut buf).expect("read");
        assert!(
            n > 0,
            "closed after {} rows, {:?}",
            messages.rows(),
            started.elapsed()
        );
        messages.push(&buf[..n]);
        since_pause += n;
        if since_pause >= 1 << 20 {
            since_pause = 0;
            std::thread::sleep(Duration::from_millis(400));
        }
    }
    assert!(
        started.elapsed() > Duration::from_millis(1500),
        "too fast to test"
    );
    assert_eq!(messages.rows(), ROWS);
    assert_eq!(
        messages.kinds(b'C'),
        vec![format!("SELECT {ROWS}\0").as_bytes()]
    );
    // The result has no error. Once ReadyForQuery is written the connection is idle on the
    // server's side, while this client may still be reading what the kernel buffered: the
    // idle timeout's FATAL may then arrive behind ReadyForQuery, as whole messages.
    let errors = messages.kinds_before_ready(b'E');
    assert!(
        errors.is_empty(),
        "{:?}",
        errors
            .iter()
            .map(|e| String::from_utf8_lossy(e))
            .collect::<Vec<_>>()
    );
}

/// Bug 1: a result being written is never idle, as in PostgreSQL: a client that stops
/// reading it for longer than the idle timeout, then reads on, gets all of it, whole
/// messages only.
#[test]
fn pg_client_pausing_mid_result_past_the_idle_timeout_gets_it_whole() {
    let server = TestServer::start(|c| c.idle_timeout = Some(Duration::from_secs(1)));
    let mut setup = pg_session(&server, "stall");
    fill(&mut setup);
    drop(setup);
    let mut reader = pg_session(&server, "stall");
    reader.write_all(&query("SELECT k, s FROM t")).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    let mut messages = Messages::default();
    let n = reader.read(&mut buf).unwrap();
    messages.push(&buf[..n]);
    std::thread::sleep(Duration::from_millis(2500));
    while messages.kinds(b'Z').is_empty() {
        let n = reader.read(&mut buf).expect("read");
        assert!(n > 0, "closed after {} rows", messages.rows());
        messages.push(&buf[..n]);
    }
    assert_eq!(messages.rows(), ROWS);
    assert!(messages.kinds(b'E').is_empty());
    assert_eq!(messages.tail(), 0);
    // Then, idle, it is closed with FATAL 57P05 after whole messages.
    read_paced(&mut reader, &mut messages, usize::MAX, Duration::ZERO);
    assert_eq!(messages.tail(), 0);
    let errors = messages.kinds(b'E');
    assert_eq!(errors.len(), 1);
    assert!(String::from_utf8_lossy(errors[0]).contains("C57P05"));
}

/// Bug 1: a shutdown while a result is being written lets it go on for the grace period,
/// then ends it after a whole DataRow with FATAL 57P01, never inside a message.
#[test]
fn pg_shutdown_during_a_result_ends_it_at_a_message_boundary() {
    let mut server = TestServer::start(|c| c.shutdown_grace = Duration::from_millis(800));
    let mut setup = pg_session(&server, "stop");
    fill(&mut setup);
    drop(setup);
    let mut reader = pg_session(&server, "stop");
    reader.write_all(&query("SELECT k, s FROM t")).unwrap();
    let mut buf = vec![0u8; 64 << 10];
    let mut messages = Messages::default();
    let n = reader.read(&mut buf).unwrap();
    messages.push(&buf[..n]);
    let started = Instant::now();
    let stopping = std::thread::spawn(move || {
        server.stop();
        started.elapsed()
    });
    // 8 MB at 0.25 s per 512 KiB: about 4 s, far past the grace period.
    read_paced(
        &mut reader,
        &mut messages,
        512 << 10,
        Duration::from_millis(250),
    );
    let stopped_after = stopping.join().unwrap();
    assert!(stopped_after < Duration::from_secs(5), "{stopped_after:?}");
    assert_eq!(messages.tail(), 0, "the connection ended inside a message");
    let (last_kind, last) = messages.parsed.last().unwrap();
    let kinds: Vec<u8> = messages
        .parsed
        .iter()
        .map(|(k, _)| *k)
        .filter(|k| *k != b'D')
        .collect();
    assert_eq!(
        *last_kind,
        b'E',
        "ends with the shutdown's FATAL: {} rows, then {:?}",
        messages.rows(),
        kinds.escape_ascii().to_string()
    );
    let last = String::from_utf8_lossy(last);
    assert!(last.contains("SFATAL") && last.contains("C57P01"), "{last}");
    assert!(
        messages.rows() < ROWS,
        "the result was cut: {}",
        messages.rows()
    );
}

/// Bug 2: a RESP client that pipelines GETs of a large value and never reads the replies
/// does not hold up the shutdown past the grace period (before: 70 s).
#[test]
fn resp_client_not_reading_its_replies_does_not_hold_up_shutdown() {
    let mut server = TestServer::start(|c| c.shutdown_grace = Duration::from_millis(500));
    let mut c = server.client();
    let big = vec![b'v'; 100 << 10];
    let _: () = redis::cmd("SET")
        .arg("big")
        .arg(&big)
        .query(&mut c)
        .unwrap();
    let mut stalled = connect_small_buffer(server.resp_addr());
    let get = encode(&[b"GET", b"big"]);
    stalled.write_all(&get.repeat(3000)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    server.stop();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "shutdown took {:?}",
        started.elapsed()
    );
}

/// Bug 3: RESP `SQL "a; b"` refuses `b` with 57P01 once shutdown has begun while `a` ran,
/// as over PostgreSQL; `a` commits and `b` changes nothing.
#[test]
fn resp_sql_statements_after_shutdown_began_are_refused() {
    let mut server = TestServer::start(|_| {});
    let mut c = server.client();
    let _: redis::Value = redis::cmd("SQL")
        .arg("CREATE TABLE big (id BIGINT PRIMARY KEY, g BIGINT)")
        .query(&mut c)
        .unwrap();
    for chunk in (0..50_000).collect::<Vec<u32>>().chunks(25_000) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, 0)")).collect();
        let _: redis::Value = redis::cmd("SQL")
            .arg(format!("INSERT INTO big VALUES {}", values.join(",")))
            .query(&mut c)
            .unwrap();
    }
    let running = std::thread::spawn(move || {
        redis::cmd("SQL")
            .arg("UPDATE big SET g = g + 1; CREATE TABLE after_stop (k BIGINT PRIMARY KEY)")
            .query::<redis::Value>(&mut c)
    });
    // Long enough for the command to reach the server on a slow machine, and well within
    // the UPDATE of 50,000 rows (0.6-2.5 s in a debug build), which must still be running.
    std::thread::sleep(Duration::from_millis(200));
    server.stop();
    let err = running
        .join()
        .unwrap()
        .expect_err("the second statement is refused");
    let text = err.to_string();
    assert!(
        text.contains("57P01") && text.contains("statement 2 of 2"),
        "{text}"
    );
    server.restart();
    let mut c = server.client();
    let count: redis::Value = redis::cmd("SQL")
        .arg("SELECT count(*) FROM big WHERE g = 1")
        .query(&mut c)
        .unwrap();
    assert!(format!("{count:?}").contains("50000"), "{count:?}");
    let missing = redis::cmd("SQL")
        .arg("SELECT * FROM after_stop")
        .query::<redis::Value>(&mut c)
        .expect_err("after_stop was never created");
    assert!(missing.to_string().contains("42P01"), "{missing}");
}

/// Bug 4: a CancelRequest needs no connection slot: at `--maxclients` it still stops the
/// running statement (before: answered 53300, and the statement ran on).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pg_cancel_request_at_maxclients_stops_the_statement() {
    use tokio_postgres::NoTls;
    use tokio_postgres::error::SqlState;
    let server = TestServer::start(|c| c.max_clients = 2);
    let addr = server.pg_addr();
    let conninfo = format!(
        "host={} port={} user=tester dbname=full",
        addr.ip(),
        addr.port()
    );
    let mut clients = Vec::new();
    for _ in 0..2 {
        let (client, connection) = tokio_postgres::connect(&conninfo, NoTls).await.unwrap();
        tokio::spawn(connection);
        clients.push(client);
    }
    let client = clients.pop().unwrap();
    client
        .batch_execute("CREATE TABLE big (id BIGINT PRIMARY KEY, g BIGINT)")
        .await
        .unwrap();
    for chunk in (0..100_000).collect::<Vec<u32>>().chunks(40_000) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, 0)")).collect();
        client
            .batch_execute(&format!("INSERT INTO big VALUES {}", values.join(",")))
            .await
            .unwrap();
    }
    let token = client.cancel_token();
    let running =
        tokio::spawn(async move { client.execute("UPDATE big SET g = g + 1", &[]).await });
    while !running.is_finished() {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let _ = token.cancel_query(NoTls).await;
    }
    let err = running.await.unwrap().expect_err("cancelled");
    assert_eq!(err.code(), Some(&SqlState::QUERY_CANCELED), "{err}");
}
