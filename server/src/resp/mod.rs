//! The RESP (Redis protocol) front end: one task per connection.
//!
//! The connection loop reads into a buffer, parses every complete request in it (up to
//! [`MAX_BATCH`]), runs them in order and writes all their replies with one `write` before
//! reading again: a pipeline of 16 commands costs one read and one write, and consecutive
//! blind writes in it share one engine write (see [`session`]). Batches that may block (a
//! synced write, a scan over the whole key space, opening a database) run on the blocking
//! pool so they never stall other connections; the rest run inline.
//!
//! A malformed request gets `-ERR Protocol error: ...` after the replies of the requests
//! before it, and the connection is closed.

mod admin;
pub(crate) mod clients;
mod commands;
mod generic;
mod introspect;
pub(crate) mod keyspace;
mod session;
mod strings;
mod table;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

use crate::protocol::RequestParser;
use crate::server::Shared;
use session::Session;

/// Most requests run per batch before replies are written.
const MAX_BATCH: usize = 1024;

/// Read buffer growth step.
const READ_CHUNK: usize = 16 << 10;

/// Serves one RESP connection until the client quits or disconnects, a protocol error, the
/// idle timeout, or server shutdown.
pub(crate) async fn serve_connection(
    mut stream: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    // redis-benchmark -P 16 crawls with Nagle's algorithm on.
    let _ = stream.set_nodelay(true);
    // `db0` is opened by the first command that needs it (`Session::open_database`): PING,
    // AUTH, SELECT of another database and INFO work while it cannot be opened.
    let mut session = Session::new(Arc::clone(&shared), peer);
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::with_capacity(READ_CHUNK);
    let idle = shared.config.idle_timeout;
    // The futures that end the connection while it waits, made once: building them for every
    // read registered with the server's shared shutdown channel and the grace period's
    // channel each time, about 3% of the server's time under unpipelined SETs
    // (docs/benchmarks.md, "Connection waits registered once").
    let stopped = stop.clone();
    let shutdown = stop.changed();
    tokio::pin!(shutdown);
    let entry = Arc::clone(&session.registration.entry);
    let killed = entry.killed();
    tokio::pin!(killed);
    let grace_over = shared.grace_over();
    tokio::pin!(grace_over);
    loop {
        // Parse what is buffered. Before AUTH, one request at a time: AUTH changes the limits.
        let mut batch: Vec<Vec<Bytes>> = Vec::new();
        let mut protocol_error = None;
        while batch.len() < MAX_BATCH && (batch.is_empty() || !session.needs_auth()) {
            match parser.next_request(&mut buf, &session.limits()) {
                Ok(Some(args)) => batch.push(args),
                Ok(None) => break,
                Err(e) => {
                    protocol_error = Some(e);
                    break;
                }
            }
        }
        // Another complete request may be buffered only if the loop stopped at a limit, not
        // at an incomplete request: re-parsing an incomplete request without reading would
        // spin this worker forever.
        let more_buffered = protocol_error.is_none()
            && !buf.is_empty()
            && (batch.len() == MAX_BATCH || (session.needs_auth() && batch.len() == 1));
        if !batch.is_empty() {
            if session.batch_may_block(&batch) {
                let job = shared
                    .blocking(move || {
                        session.run_batch(batch);
                        session
                    })
                    .await;
                match job {
                    Ok(s) => session = s,
                    Err(_) => return,
                }
            } else {
                session.run_commands(&batch);
                session.flush_pending_async().await;
            }
        }
        if let Some(e) = protocol_error {
            shared.stats.protocol_errors.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(%peer, error = %e, "protocol error; closing connection");
            session.out.error(&format!("ERR Protocol error: {e}"));
            tokio::select! {
                biased;
                written = stream.write_all(session.out.bytes()) => {
                    if written.is_ok() {
                        close_lingering(&mut stream, &mut buf, grace_over).await;
                    }
                }
                () = &mut grace_over => {}
                () = &mut killed => {}
            }
            return;
        }
        // Published before the replies go out: a client that has its reply and then asks
        // CLIENT LIST on another connection sees this batch's last command.
        session.publish();
        if !session.out.is_empty() {
            // A client that does not read its replies holds the connection here; after the
            // shutdown's grace period, or once `CLIENT KILL` chose it, it is closed instead of
            // waited for (its unsent replies are dropped, as Redis frees a killed client).
            tokio::select! {
                biased;
                written = stream.write_all(session.out.bytes()) => {
                    if written.is_err() {
                        return;
                    }
                }
                () = &mut grace_over => return,
                () = &mut killed => return,
            }
            session.out.clear();
        }
        // Closing with the replies sent: QUIT, a kill seen after the batch, or shutdown while
        // more of a pipeline may be on its way.
        if session.quit || session.registration.entry.is_killed() || *stopped.borrow() {
            close_lingering(&mut stream, &mut buf, grace_over).await;
            return;
        }
        if more_buffered {
            continue;
        }
        if buf.capacity() - buf.len() < READ_CHUNK / 4 {
            buf.reserve(READ_CHUNK);
        }
        let read = async {
            match idle {
                Some(limit) => tokio::time::timeout(limit, stream.read_buf(&mut buf))
                    .await
                    .unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())),
                None => stream.read_buf(&mut buf).await,
            }
        };
        // Waiting for a request, every reply sent: shutdown or a kill closes at once.
        tokio::select! {
            biased;
            n = read => match n {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            },
            _ = &mut shutdown => return,
            () = &mut killed => return,
        }
    }
}

/// How long a closing connection keeps reading (and discarding) what its client still sends.
const LINGER: Duration = Duration::from_secs(2);

/// Closes `stream` without losing the replies still in its send buffer. Closing a TCP socket
/// with unread input makes the kernel reset the connection and drop whatever it had not sent
/// yet, so a client whose pipeline went on past a `QUIT`, a protocol error or the start of a
/// shutdown would lose replies to commands that ran. So the write side is shut down first (the
/// client reads the replies, then end of stream), and input is read and discarded until the
/// client closes its side, for at most [`LINGER`] or until the shutdown's grace period ends:
/// the "lingering close" of HTTP servers.
async fn close_lingering(
    stream: &mut TcpStream,
    buf: &mut BytesMut,
    grace_over: std::pin::Pin<&mut (impl std::future::Future<Output = ()> + ?Sized)>,
) {
    if stream.shutdown().await.is_err() {
        return;
    }
    let drain = async {
        loop {
            buf.clear();
            buf.reserve(READ_CHUNK);
            match stream.read_buf(buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    tokio::select! {
        () = drain => {}
        () = tokio::time::sleep(LINGER) => {}
        () = grace_over => {}
    }
}
