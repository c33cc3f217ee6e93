//! Helpers shared by the `server_*` tests and `soak.rs`: an in-process server on free
//! loopback ports, a server in a child process (for SIGKILL tests), and raw-socket helpers
//! for framing tests.

#![allow(dead_code, reason = "each test file uses a different subset")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strata_server::{Config, RunningServer};

/// A server on `127.0.0.1:0` over a temporary directory.
pub struct TestServer {
    pub dir: tempfile::TempDir,
    pub server: Option<RunningServer>,
    pub config: Config,
}

impl TestServer {
    /// Starts a server with the test defaults, adjusted by `adjust`.
    pub fn start(adjust: impl FnOnce(&mut Config)) -> TestServer {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config::ephemeral(dir.path());
        config.write_buffer_size = 4 << 20;
        config.block_cache_size = 8 << 20;
        adjust(&mut config);
        let server = strata_server::spawn(config.clone()).expect("server starts");
        TestServer {
            dir,
            server: Some(server),
            config,
        }
    }

    pub fn resp_addr(&self) -> SocketAddr {
        self.server
            .as_ref()
            .and_then(RunningServer::resp_addr)
            .expect("RESP on")
    }

    pub fn pg_addr(&self) -> SocketAddr {
        self.server
            .as_ref()
            .and_then(RunningServer::pg_addr)
            .expect("pg on")
    }

    pub fn url(&self) -> String {
        format!("redis://{}/", self.resp_addr())
    }

    /// A `redis` crate connection (RESP2).
    pub fn client(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .expect("client")
            .get_connection()
            .expect("connect")
    }

    /// A raw socket with 10 s timeouts.
    pub fn raw(&self) -> TcpStream {
        let s = TcpStream::connect(self.resp_addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s.set_write_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        s
    }

    /// Stops the server cleanly (syncs and closes the databases).
    pub fn stop(&mut self) {
        if let Some(s) = self.server.take() {
            s.shutdown().expect("clean shutdown");
        }
    }

    /// Stops and starts again on the same directory (new ports).
    pub fn restart(&mut self) {
        self.stop();
        self.server = Some(strata_server::spawn(self.config.clone()).expect("restart"));
    }
}

/// Sends `request` and asserts the next bytes read are exactly `expected`.
pub fn roundtrip(stream: &mut TcpStream, request: &[u8], expected: &[u8]) {
    stream.write_all(request).expect("write");
    let got = read_exactly(stream, expected.len());
    assert_eq!(
        String::from_utf8_lossy(&got),
        String::from_utf8_lossy(expected),
        "reply to {:?}",
        String::from_utf8_lossy(request)
    );
}

/// Reads `n` bytes (fewer if the peer closes).
pub fn read_exactly(stream: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut got = vec![0u8; n];
    let mut filled = 0;
    while filled < n {
        match stream.read(&mut got[filled..]) {
            Ok(0) => break,
            Ok(k) => filled += k,
            Err(e) => panic!("read failed after {filled} of {n} bytes: {e}"),
        }
    }
    got.truncate(filled);
    got
}

/// True when the peer has closed the connection (reads EOF or a reset within 10 s).
pub fn closed_by_peer(stream: &mut TcpStream) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 256];
    while Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return false,
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => return false,
            Err(_) => return true,
        }
    }
    false
}

/// Encodes a command as a RESP multibulk request.
pub fn encode(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// A PostgreSQL startup packet (protocol 3.0) for user `tester` on `database`.
#[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
pub fn pg_startup_packet(database: &str) -> Vec<u8> {
    let mut startup = 196_608u32.to_be_bytes().to_vec();
    startup.extend_from_slice(format!("user\0tester\0database\0{database}\0\0").as_bytes());
    let mut packet = u32::try_from(startup.len() + 4)
        .expect("a short packet")
        .to_be_bytes()
        .to_vec();
    packet.extend_from_slice(&startup);
    packet
}

/// Raises the soft open-files limit to at least `n` (for many-connection tests).
pub fn raise_fd_limit(n: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit write/read a plain struct we own.
    #[allow(unsafe_code, reason = "libc call in a test helper")]
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < n {
            lim.rlim_cur = n.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Resident set size of this process, in bytes (Linux).
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// A `strata serve` in a child process: the test binary re-executed to run only the test
/// `child_test`, which calls [`run_child_server`]. SIGKILL it with [`ChildServer::kill`]
/// (or by dropping it, so a failed test leaves no server behind).
pub struct ChildServer {
    pub child: Child,
    pub resp: SocketAddr,
    /// The PostgreSQL address, when the child serves it.
    pub pg: Option<SocketAddr>,
}

impl ChildServer {
    /// Starts the child with `env` set to `dir` and waits until it listens.
    pub fn start(child_test: &str, env: &str, dir: &Path) -> ChildServer {
        let exe = std::env::current_exe().expect("test binary path");
        let mut child = Command::new(exe)
            .args([child_test, "--exact", "--nocapture", "--test-threads=1"])
            .env(env, dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn server process");
        let stdout = child.stdout.take().expect("child stdout");
        let mut lines = BufReader::new(stdout).lines();
        let (resp, pg) = loop {
            let line = lines
                .next()
                .expect("server process exited before listening")
                .expect("read child stdout");
            // The test harness prints "test <name> ... " before it on the line.
            if let Some((_, addrs)) = line.split_once("LISTENING ") {
                let mut parts = addrs.split_whitespace();
                let resp = parts
                    .next()
                    .expect("RESP address")
                    .parse()
                    .expect("address");
                let pg = parts.next().and_then(|a| a.parse().ok());
                break (resp, pg);
            }
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        ChildServer { child, resp, pg }
    }

    /// SIGKILLs the server and reaps it.
    pub fn kill(self) {
        drop(self);
    }
}

/// A failing test must not leave its server running: dropping kills it.
impl Drop for ChildServer {
    fn drop(&mut self) {
        // Errors only if it already exited; there is nothing more to do then.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The child side of [`ChildServer`]: when `env` names a directory, serves it with the test
/// defaults adjusted by `adjust`, prints `LISTENING <resp> <pg or ->` and never returns;
/// otherwise (the normal test run) returns at once.
pub fn run_child_server(env: &str, adjust: impl FnOnce(&mut Config)) {
    let Ok(dir) = std::env::var(env) else {
        return;
    };
    let mut config = Config::ephemeral(dir);
    adjust(&mut config);
    let server = strata_server::spawn(config).expect("child server starts");
    let resp = server.resp_addr().expect("RESP address");
    let pg = server
        .pg_addr()
        .map_or_else(|| "-".to_owned(), |a| a.to_string());
    println!("LISTENING {resp} {pg}");
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}
