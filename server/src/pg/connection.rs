//! One PostgreSQL connection's message loop, its idle and startup timeouts, and how it ends
//! at shutdown.
//!
//! The loop is pgwire's own (`process_socket`), run here so that it knows whether it is
//! between messages or answering one. Every message the server writes to the client, a
//! timeout's or the shutdown's FATAL included, goes through the one framed socket, whole and
//! in order, so a FATAL can only ever follow a complete message:
//!
//! - **Between messages** (waiting for the client's next one, nothing in flight): the idle
//!   timeout (`--timeout`) counts here, and only here; at its end the client gets FATAL 57P05.
//!   Before the startup is finished the startup timeout runs too (FATAL 08P01). At shutdown
//!   the messages the client has sent already are answered (the rest of an extended-protocol
//!   command up to its Sync; new statements are refused with 57P01), then the client gets
//!   FATAL 57P01.
//! - **Answering a message** (a statement running, its result being written): never idle,
//!   as in PostgreSQL, however slowly the client reads. At shutdown the answer gets the
//!   server's grace period; then the statements still running are interrupted (57P01), a
//!   result still being sent stops after its last whole DataRow with FATAL 57P01
//!   ([`Activity::result_cut`]), and the connection closes. One still writing [`REPLY_WAIT`]
//!   after that with no engine call running (a client that does not read) is dropped
//!   without a message: the socket may be in the middle of one.

use std::cell::Cell;
use std::io::Write as _;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{FutureExt, SinkExt, StreamExt};
use pgwire::api::store::PortalStore as _;
use pgwire::api::{
    ClientInfo, ClientPortalStore, ErrorHandler, PgWireConnectionState, PgWireServerHandlers,
};
use pgwire::error::{ErrorInfo, PgWireError};
use pgwire::messages::response::TransactionStatus;
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};
use pgwire::tokio::server::{negotiate_tls, process_error, process_message};
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_util::codec::{Framed, FramedParts};

use super::PgHandlers;
use super::frames::{FrameCheck, frame_error};
use crate::server::Shared;

/// After the shutdown grace period, once no engine call runs on the connection: how long its
/// answer may still take to be written (the reply of a statement that was committing when
/// the grace period ended) before the connection is dropped.
const REPLY_WAIT: Duration = Duration::from_secs(1);

/// Longest time spent writing a timeout's or the shutdown's FATAL message to a client that
/// does not read.
const GOODBYE_WAIT: Duration = Duration::from_secs(1);

/// A FATAL ErrorResponse message with SQLSTATE `code`, as bytes, for a socket that pgwire
/// does not own.
fn fatal_message(code: &str, text: &str) -> Vec<u8> {
    let mut fields = Vec::new();
    for (tag, value) in [(b'S', "FATAL"), (b'V', "FATAL"), (b'C', code), (b'M', text)] {
        fields.push(tag);
        fields.extend_from_slice(value.as_bytes());
        fields.push(0);
    }
    fields.push(0);
    let len = u32::try_from(fields.len() + 4).unwrap_or(u32::MAX);
    let mut msg = vec![b'E'];
    #[expect(
        clippy::big_endian_bytes,
        reason = "PostgreSQL's wire format is big-endian (network order)"
    )]
    msg.extend_from_slice(&len.to_be_bytes());
    msg.extend_from_slice(&fields);
    msg
}

/// An ErrorResponse (SQLSTATE 53300, "too many connections") for connections over
/// `max_clients`.
pub(crate) fn too_many_connections() -> Vec<u8> {
    fatal_message("53300", "sorry, too many clients already")
}

/// Codes of the 8-byte requests a client may send before its startup packet: `SSLRequest`
/// and `GSSENCRequest` (PostgreSQL's protocol docs, "Message Formats").
const ENCRYPTION_REQUESTS: [u32; 2] = [80_877_103, 80_877_104];

/// The code of a `CancelRequest` (in place of a startup packet's protocol version).
const CANCEL_REQUEST: u32 = 80_877_102;

/// Largest startup packet read (PostgreSQL's `MAX_STARTUP_PACKET_LENGTH`).
const MAX_STARTUP_PACKET: usize = 10_000;

/// Answers a connection over `max_clients` as PostgreSQL does: SSL and GSS encryption
/// requests are declined (`N`), then the packet that follows is read. A `CancelRequest` is
/// acted on and the connection closed without a reply, as for any cancel request (it needs
/// no connection slot: PostgreSQL handles cancel requests before its connection limit);
/// after a startup packet, FATAL 53300 is sent. Sent at once instead, libpq's default
/// `sslmode=prefer` took the error for the answer to its SSL request and only reported
/// "error response during SSL exchange". Reading the startup packet first also keeps unread
/// bytes from turning the close into a reset that can discard the error before the client
/// reads it. The caller bounds the time taken.
///
/// # Errors
/// The socket's, if reading or writing fails (the client went away).
pub(crate) async fn refuse_too_many(
    stream: &mut TcpStream,
    shared: &Shared,
) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    for _ in 0..=ENCRYPTION_REQUESTS.len() {
        let mut head = [0u8; 8];
        stream.read_exact(&mut head).await?;
        #[expect(
            clippy::big_endian_bytes,
            reason = "PostgreSQL's wire format is big-endian (network order)"
        )]
        let (len, code) = (
            u32::from_be_bytes([head[0], head[1], head[2], head[3]]),
            u32::from_be_bytes([head[4], head[5], head[6], head[7]]),
        );
        if len == 8 && ENCRYPTION_REQUESTS.contains(&code) {
            stream.write_all(b"N").await?;
            continue;
        }
        let rest = usize::try_from(len)
            .unwrap_or(usize::MAX)
            .clamp(8, MAX_STARTUP_PACKET)
            - 8;
        let mut body = vec![0u8; rest];
        stream.read_exact(&mut body).await?;
        if code == CANCEL_REQUEST {
            // Process id (4 bytes), then the secret key (4 bytes, or up to 256 in protocol
            // 3.2).
            if let (Some(pid), Some(secret)) = (body.get(..4), body.get(4..)) {
                #[expect(
                    clippy::big_endian_bytes,
                    reason = "PostgreSQL's wire format is big-endian (network order)"
                )]
                let pid = i32::from_be_bytes([pid[0], pid[1], pid[2], pid[3]]);
                let key = (pid, bytes::Bytes::copy_from_slice(secret));
                let found = shared.running_sql.cancel(&key);
                tracing::debug!(pid, found, "PostgreSQL cancel request beyond maxclients");
            }
            return Ok(());
        }
        break;
    }
    stream.write_all(&too_many_connections()).await
}

/// What a connection is doing, for its startup timeout and its shutdown.
#[derive(Debug)]
pub(super) struct Activity {
    started: Instant,
    /// Engine calls running now (a statement that may be committing: the shutdown waits for
    /// it).
    engine: AtomicUsize,
    /// Set once the startup (and authentication) finished: the connection is ready for
    /// queries.
    pub(super) ready: AtomicBool,
    /// Set when the shutdown's grace period ends while the connection answers a message: a
    /// result being sent stops after its last whole row, with FATAL 57P01
    /// ([`Activity::result_cut`]).
    cut: AtomicBool,
}

impl Activity {
    pub(super) fn new() -> Self {
        Activity {
            started: Instant::now(),
            engine: AtomicUsize::new(0),
            ready: AtomicBool::new(false),
            cut: AtomicBool::new(false),
        }
    }

    /// Marks an engine call running until the guard drops.
    pub(super) fn enter(&self) -> EngineCall<'_> {
        self.engine.fetch_add(1, Ordering::AcqRel);
        EngineCall(self)
    }

    /// `Err(FATAL 57P01)` once the shutdown's grace period has ended during the answer (see
    /// [`Activity::cut`]): the row stream yields it in place of its next row, and pgwire then
    /// sends it after the rows already sent and closes the connection.
    ///
    /// # Errors
    /// As above.
    pub(super) fn result_cut(&self) -> pgwire::error::PgWireResult<()> {
        if self.cut.load(Ordering::Relaxed) {
            let (code, text) = Goodbye::Shutdown.sqlstate_and_text();
            return Err(pgwire::error::PgWireError::UserError(Box::new(
                ErrorInfo::new("FATAL".to_owned(), code.to_owned(), text.to_owned()),
            )));
        }
        Ok(())
    }

    fn in_engine(&self) -> bool {
        self.engine.load(Ordering::Acquire) > 0
    }
}

/// A running engine call (see [`Activity::enter`]).
pub(super) struct EngineCall<'a>(&'a Activity);

impl Drop for EngineCall<'_> {
    fn drop(&mut self) {
        self.0.engine.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Completes once the shutdown's grace period is over, no engine call runs on the
/// connection and [`REPLY_WAIT`] has passed since: the answer being written is then given up.
async fn answer_given_up(shared: &Shared, activity: &Activity) {
    shared.grace_over().await;
    loop {
        while activity.in_engine() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(REPLY_WAIT).await;
        if !activity.in_engine() {
            return;
        }
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// Completes once `stop` is set (never if its sender is gone without setting it).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    if stop.wait_for(|s| *s).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Why a connection is closed with a FATAL message.
#[derive(Debug, Clone, Copy)]
enum Goodbye {
    Idle,
    Startup,
    Shutdown,
}

impl Goodbye {
    fn sqlstate_and_text(self) -> (&'static str, &'static str) {
        match self {
            Goodbye::Idle => (
                "57P05",
                "terminating connection due to idle-session timeout",
            ),
            Goodbye::Startup => ("08P01", "canceling authentication due to timeout"),
            Goodbye::Shutdown => (
                "57P01",
                "terminating connection due to administrator command",
            ),
        }
    }
}

/// Serves one PostgreSQL connection until it ends, the server stops, or a timeout closes it
/// (see the module docs).
pub(crate) async fn serve_connection(
    stream: TcpStream,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let idle_limit = shared.config.idle_timeout;
    let startup_deadline = Instant::now()
        + shared
            .config
            .pg_startup_timeout
            .min(crate::config::PGWIRE_STARTUP_LIMIT);
    let activity = Arc::new(Activity::new());
    let idle_deadline = |since: Instant| idle_limit.map(|limit| since + limit);

    // SSL negotiation: `negotiate_tls` owns the stream until it returns; nothing has been
    // written but whole one-byte answers, so a second handle may write the FATAL.
    let (stream, mut closer) = match split_closer(stream) {
        Ok(pair) => pair,
        Err(e) => {
            tracing::debug!(error = %e, "cannot set up the connection; closing");
            return;
        }
    };
    let negotiated = tokio::select! {
        socket = async {
            // An encryption request is checked before pgwire reads it (`frames.rs`).
            if let Err(why) = first_request_ok(&stream).await {
                tracing::debug!(why, "closing a PostgreSQL connection after a bad first message");
                goodbye_text(&mut closer, &why);
                return None;
            }
            negotiate_tls::<super::PgStatement>(stream, None).await.ok().flatten()
        } => socket,
        () = sleep_until(idle_deadline(activity.started)) => {
            goodbye_raw(&mut closer, Goodbye::Idle);
            None
        }
        () = sleep_until(Some(startup_deadline)) => {
            goodbye_raw(&mut closer, Goodbye::Startup);
            None
        }
        () = stopped(&mut stop) => {
            goodbye_raw(&mut closer, Goodbye::Shutdown);
            None
        }
    };
    // The second handle would keep the socket open after the framed stream is dropped.
    drop(closer);
    let Some(socket) = negotiated else {
        return;
    };
    // From here on the client's bytes pass the framing check before pgwire decodes them
    // (`frames.rs`); the bytes pgwire read ahead are checked first.
    let parts = socket.into_parts();
    let mut checked = FrameCheck::new(parts.io, false, &parts.read_buf);
    if let Some(why) = checked.failed() {
        // The bytes read ahead break the framing: none of them may reach pgwire.
        tracing::debug!(why, "closing a PostgreSQL connection after a bad message");
        let message = fatal_message("08P01", why);
        let _ = tokio::time::timeout(GOODBYE_WAIT, async {
            use tokio::io::AsyncWriteExt as _;
            let _ = checked.write_all(&message).await;
            let _ = checked.shutdown().await;
        })
        .await;
        return;
    }
    let mut checked_parts = FramedParts::new(checked, parts.codec);
    checked_parts.read_buf = parts.read_buf;
    checked_parts.write_buf = parts.write_buf;
    let mut socket = Framed::from_parts(checked_parts);

    let handlers = PgHandlers::new(Arc::clone(&shared), Arc::clone(&activity));
    let copy = handlers.copy_handler();
    let errors = handlers.error_handler();
    let mut idle_since = Instant::now();
    loop {
        // Between messages.
        let startup_pending = !activity.ready.load(Ordering::Acquire);
        let message = if *stop.borrow() {
            // Shutting down: messages the client sent already are answered (the rest of an
            // extended-protocol command, up to its Sync; new statements are refused with
            // 57P01), until the grace period ends; then, or once none is waiting, FATAL 57P01.
            match next_message(&mut socket).now_or_never() {
                Some(message) if shared.grace_over().now_or_never().is_none() => message,
                _ => return goodbye(&mut socket, Goodbye::Shutdown).await,
            }
        } else {
            tokio::select! {
                biased;
                message = next_message(&mut socket) => message,
                () = sleep_until(idle_deadline(idle_since)) => {
                    tracing::debug!("closing idle PostgreSQL connection");
                    return goodbye(&mut socket, Goodbye::Idle).await;
                }
                () = sleep_until(Some(startup_deadline)), if startup_pending => {
                    tracing::debug!("closing a PostgreSQL connection that did not finish its startup");
                    return goodbye(&mut socket, Goodbye::Startup).await;
                }
                () = stopped(&mut stop) => continue,
            }
        };
        let mut message = match message {
            Next::Message(PgWireFrontendMessage::Terminate(_)) | Next::End => {
                // Replies held back behind the Terminate go first.
                if socket.get_ref().holds_bytes() {
                    socket.get_mut().set_corked(false);
                    let _ = tokio::time::timeout(GOODBYE_WAIT, socket.flush()).await;
                }
                return;
            }
            Next::Message(message) => message,
            Next::Malformed(code, text) => {
                tracing::debug!(
                    code,
                    text,
                    "closing a PostgreSQL connection after a bad message"
                );
                return fatal(&mut socket, code, &text).await;
            }
        };
        // Answering it (as pgwire's `process_socket` does).
        let is_extended_query = match socket.state() {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => message.is_extended_query(),
        };
        let is_cancel_request = matches!(message, PgWireFrontendMessage::CancelRequest(_));
        // pgwire's transaction status and the handler's follow each other: an error pgwire
        // answered fails the block for the handler too (its statements get 25P02), and a
        // `ROLLBACK TO` in a failed block sets pgwire's status back to in-transaction before
        // pgwire answers it (it cannot leave its failed state within a message).
        if socket.transaction_status() == TransactionStatus::Error {
            handlers.query.message_failed();
        }
        let resumes = match &mut message {
            PgWireFrontendMessage::Query(query) => {
                handlers.query.resumes_failed_block(&query.query)
            }
            PgWireFrontendMessage::Execute(execute) => {
                // PostgreSQL reads a row limit of 0 or less as none; pgwire panicked on one
                // below 0 ("capacity overflow").
                execute.max_rows = execute.max_rows.max(0);
                let name = execute.name.as_deref().unwrap_or(pgwire::api::DEFAULT_NAME);
                match socket.portal_store().get_portal(name) {
                    Some(pgwire::api::store::Entry::Value(portal)) => handlers
                        .query
                        .resumes_failed_block(&portal.statement.statement.sql),
                    _ => false,
                }
            }
            _ => false,
        };
        if resumes {
            socket.set_transaction_status(TransactionStatus::Transaction);
        }
        // The replies to an extended-protocol message the client has sent another whole one
        // behind are held back (up to `CORK_LIMIT`), so those of a pipeline leave together:
        // psycopg's Parse, Bind, Describe, Execute and Sync get one segment, not five. As
        // PostgreSQL's backend, everything goes at each ReadyForQuery (ending a Query or a
        // Sync) and at a Flush.
        let corked = activity.ready.load(Ordering::Acquire)
            && holds_its_reply(&message)
            && whole_message_buffered(socket.read_buffer());
        socket.get_mut().set_corked(corked);
        let answer = async {
            // `Ok(false)`: close the connection.
            let go_on = process_message(
                message,
                &mut socket,
                Arc::clone(&handlers.startup),
                Arc::clone(&handlers.query),
                Arc::clone(&handlers.query),
                Arc::clone(&copy),
                Arc::clone(&handlers.cancel),
            )
            .await;
            let go_on = match go_on {
                Ok(()) => Ok(!is_cancel_request),
                Err(mut e) => {
                    errors.on_error(&socket, &mut e);
                    // PostgreSQL's code for a portal that does not exist (pgwire sends 26000,
                    // the code for a missing prepared statement).
                    if let PgWireError::PortalNotFound(name) = &e {
                        e = PgWireError::UserError(Box::new(ErrorInfo::new(
                            "ERROR".to_owned(),
                            "34000".to_owned(),
                            format!("portal \"{name}\" does not exist"),
                        )));
                    }
                    if e.is_fatal() {
                        // A FATAL error ends the session, as in PostgreSQL: no ReadyForQuery
                        // after it (pgwire's `process_error` would send one). It goes out
                        // at once, after any replies held back.
                        let info: ErrorInfo = e.into();
                        socket.get_mut().set_corked(false);
                        socket
                            .send(PgWireBackendMessage::ErrorResponse(info.into()))
                            .await?;
                        return Ok(false);
                    }
                    process_error(&mut socket, e, is_extended_query)
                        .await
                        .map(|()| !is_cancel_request)
                }
            };
            // Nothing more to answer now: what was held back goes (an answer that sent
            // nothing of its own, as messages skipped after an error until Sync, did not
            // send it).
            if matches!(go_on, Ok(true))
                && socket.get_ref().holds_bytes()
                && !whole_message_buffered(socket.read_buffer())
            {
                socket.get_mut().set_corked(false);
                socket.flush().await?;
            }
            go_on
        };
        tokio::pin!(answer);
        let mut cut = false;
        let go_on = loop {
            tokio::select! {
                result = &mut answer => break result,
                () = shared.grace_over(), if !cut => {
                    activity.cut.store(true, Ordering::Relaxed);
                    cut = true;
                }
                () = answer_given_up(&shared, &activity) => {
                    tracing::debug!("dropping a PostgreSQL connection still answering after the grace period");
                    return;
                }
            }
        };
        match go_on {
            Ok(true) => idle_since = Instant::now(),
            Ok(false) => return,
            Err(e) => {
                tracing::debug!(error = %e, "PostgreSQL connection ended with an error");
                return;
            }
        }
    }
}

/// True for a message whose replies may wait for the next message's: Parse, Bind,
/// Describe, Execute and Close, which PostgreSQL answers without flushing. A Query or a Sync
/// (which end with ReadyForQuery), a Flush, and every other message send at once.
fn holds_its_reply(message: &PgWireFrontendMessage) -> bool {
    matches!(
        message,
        PgWireFrontendMessage::Parse(_)
            | PgWireFrontendMessage::Bind(_)
            | PgWireFrontendMessage::Describe(_)
            | PgWireFrontendMessage::Execute(_)
            | PgWireFrontendMessage::Close(_)
    )
}

/// True when `buffered` (bytes read from the client and not decoded yet) starts with a
/// whole typed message: its type byte, its length, and as many bytes as that says.
#[expect(
    clippy::big_endian_bytes,
    reason = "PostgreSQL's wire format is big-endian (network order)"
)]
fn whole_message_buffered(buffered: &[u8]) -> bool {
    let [_, a, b, c, d, ..] = *buffered else {
        return false;
    };
    let len = u32::from_be_bytes([a, b, c, d]) as usize;
    buffered.len() > len
}

/// What reading the client's next message gave.
enum Next {
    Message(PgWireFrontendMessage),
    /// The client closed the connection, or reading failed.
    End,
    /// A message that could not be decoded: the SQLSTATE and text of the FATAL answer (the
    /// stream cannot be read past it).
    Malformed(&'static str, String),
}

/// Reads the client's next message. pgwire's decoders slice message bodies without checking
/// their lengths (a Parse without its parameter count, a truncated Bind): such a message
/// panics in the decoder, which is caught here and answered as PostgreSQL answers a malformed
/// message, FATAL 08P01, instead of dropping the connection without a word.
async fn next_message<S>(socket: &mut S) -> Next
where
    S: futures::Stream<Item = Result<PgWireFrontendMessage, PgWireError>> + Unpin,
{
    quiet_decoder_panics();
    let mut next = socket.next();
    let decoding = std::future::poll_fn(move |cx| {
        let _flag = Decoding::start();
        next.poll_unpin(cx)
    });
    match AssertUnwindSafe(decoding).catch_unwind().await {
        Ok(Some(Ok(message))) => Next::Message(message),
        Ok(None) => Next::End,
        Ok(Some(Err(PgWireError::IoError(e)))) => {
            if let Some(malformed) = frame_error(&e) {
                return Next::Malformed("08P01", malformed.to_string());
            }
            tracing::debug!(error = %e, "PostgreSQL connection ended with an error");
            Next::End
        }
        Ok(Some(Err(PgWireError::InvalidMessageType(b'F')))) => Next::Malformed(
            "0A000",
            "the FunctionCall message (fast-path function call) is not supported".to_owned(),
        ),
        Ok(Some(Err(PgWireError::InvalidMessageType(t)))) => {
            Next::Malformed("08P01", format!("invalid frontend message type {t}"))
        }
        Ok(Some(Err(e))) => Next::Malformed("08P01", format!("invalid message: {e}")),
        Err(_) => Next::Malformed(
            "08P01",
            "invalid message format: a message is shorter than its fields".to_owned(),
        ),
    }
}

thread_local! {
    /// Set while this thread polls for a client's next message ([`next_message`]).
    static DECODING: Cell<bool> = const { Cell::new(false) };
}

/// Marks the thread as decoding a client's message until dropped (also when a decoder panic
/// unwinds through it).
struct Decoding;

impl Decoding {
    fn start() -> Decoding {
        DECODING.with(|d| d.set(true));
        Decoding
    }
}

impl Drop for Decoding {
    fn drop(&mut self) {
        DECODING.with(|d| d.set(false));
    }
}

/// Installs, once, a panic hook that logs a panic of pgwire's decoder (a malformed message,
/// caught and answered by [`next_message`]) at debug level instead of printing it as a crash
/// with its backtrace; every other panic goes to the hook that was there before.
fn quiet_decoder_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if DECODING.with(Cell::get) {
                tracing::debug!(panic = %info, "malformed PostgreSQL message: the decoder panicked");
            } else {
                previous(info);
            }
        }));
    });
}

/// Sends FATAL `why` after the messages already sent (so at a message boundary) and closes
/// the connection; gives up after [`GOODBYE_WAIT`] on a client that does not read.
async fn goodbye<S>(socket: &mut S, why: Goodbye)
where
    S: futures::Sink<PgWireBackendMessage> + Unpin,
{
    let (code, text) = why.sqlstate_and_text();
    fatal(socket, code, text).await;
}

/// Sends FATAL with SQLSTATE `code` and closes the connection, as [`goodbye`].
async fn fatal<S>(socket: &mut S, code: &str, text: &str)
where
    S: futures::Sink<PgWireBackendMessage> + Unpin,
{
    let message = ErrorInfo::new("FATAL".to_owned(), code.to_owned(), text.to_owned());
    let _ = tokio::time::timeout(GOODBYE_WAIT, async {
        let _ = socket
            .send(PgWireBackendMessage::ErrorResponse(message.into()))
            .await;
        let _ = socket.close().await;
    })
    .await;
}

/// [`goodbye`] on the second handle of a socket whose stream is not framed yet.
fn goodbye_raw(closer: &mut std::net::TcpStream, why: Goodbye) {
    let (code, text) = why.sqlstate_and_text();
    let _ = closer.set_write_timeout(Some(GOODBYE_WAIT));
    let _ = closer.write_all(&fatal_message(code, text));
    let _ = closer.shutdown(std::net::Shutdown::Both);
}

/// Waits for the connection's first 8 bytes (without reading them) and checks them with
/// [`check_encryption_request`]. A client that closes the connection without sending any is
/// left to pgwire (it reads the end of the stream and closes too). One that sends 1 to 7
/// bytes and then closes its end gets "incomplete startup packet", and one whose first 4
/// bytes give a length outside 8 to [`MAX_STARTUP_PACKET`] "invalid length of startup
/// packet" (PostgreSQL's checks): either way the connection closes at once, instead of
/// waiting for bytes that cannot come until the startup timeout.
async fn first_request_ok(stream: &TcpStream) -> Result<(), String> {
    let mut first = [0u8; 8];
    // Peeking does not wait for more bytes: the wait between looks grows to 100 ms, so a
    // client sending its first bytes slowly costs little.
    let mut pause = Duration::from_millis(2);
    loop {
        match stream.peek(&mut first).await {
            Ok(n) if n >= first.len() => return super::frames::check_encryption_request(&first),
            Ok(0) | Err(_) => return Ok(()),
            Ok(n) => {
                if let Some(len) = first.first_chunk::<4>().filter(|_| n >= 4) {
                    #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
                    let len = u32::from_be_bytes(*len);
                    if !(8..=MAX_STARTUP_PACKET as u32).contains(&len) {
                        return Err(format!("invalid length of startup packet: {len}"));
                    }
                }
                let closed = stream
                    .ready(tokio::io::Interest::READABLE)
                    .await
                    .map_or(true, |ready| ready.is_read_closed());
                if closed {
                    return Err("incomplete startup packet".to_owned());
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(100));
            }
        }
    }
}

/// Sends FATAL 08P01 `text` on the second handle of a socket whose stream is not framed yet,
/// and closes it, as [`goodbye_raw`].
fn goodbye_text(closer: &mut std::net::TcpStream, text: &str) {
    let _ = closer.set_write_timeout(Some(GOODBYE_WAIT));
    let _ = closer.write_all(&fatal_message("08P01", text));
    let _ = closer.shutdown(std::net::Shutdown::Both);
}

/// The stream back, and a second handle to the same socket.
fn split_closer(stream: TcpStream) -> std::io::Result<(TcpStream, std::net::TcpStream)> {
    let std_stream = stream.into_std()?;
    let closer = std_stream.try_clone()?;
    Ok((TcpStream::from_std(std_stream)?, closer))
}
