//! Checks the framing of what a PostgreSQL client sends before pgwire decodes it.
//!
//! Every message after the startup is a type byte and a 4-byte big-endian length that counts
//! itself and the body (PostgreSQL's "Message Formats"); the startup-phase messages
//! (StartupMessage, SSLRequest, GSSENCRequest, CancelRequest) have the length and no type
//! byte. pgwire's decoders trust the length: a length below 4 was read as if the message went
//! on, and `Sync`, `Flush`, `Terminate` and `CopyDone` ignore their bodies, so a message
//! hidden in a `Sync`'s body ran as the next message (a proxy or pooler that forwards
//! messages whole would have seen a harmless `Sync`). pgwire's decoders of the other messages
//! read their fields from the buffer without stopping at the declared end: a `Query` whose
//! length covered its string and a whole second message ran both, and a `Query` shorter than
//! its string read on into the next message. [`FrameCheck`] follows the message boundaries in
//! the bytes as they are read, and the fields of the messages pgwire decodes field by field
//! (`Query`, `Parse`, `Bind`, `Describe`, `Close`, `Execute`, `CopyFail`), and fails the read
//! with a [`FrameError`] on a length PostgreSQL refuses or a body that does not end exactly
//! where its fields do; the connection answers FATAL 08P01 and closes, as PostgreSQL does
//! ("invalid message length", "invalid message format").

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// A message length PostgreSQL refuses (the text is the FATAL message's).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct FrameError(String);

/// The `FrameError` inside `e`, if the read failed on a malformed frame.
pub(crate) fn frame_error(e: &io::Error) -> Option<&FrameError> {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<FrameError>())
}

/// Request codes of the startup-phase messages after which another untyped message comes
/// (the server answers them with one byte).
const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;

/// Where the checker is in the client's byte stream.
#[derive(Debug, Default)]
struct Frames {
    /// Past the startup phase: messages have a type byte.
    typed: bool,
    /// Header bytes of the message being read (type byte, if any, then the length).
    header: [u8; 5],
    header_len: usize,
    /// Body bytes of the current message still to come.
    body_left: u64,
    /// The first four body bytes of an untyped message (its request code).
    code: [u8; 4],
    code_len: usize,
    /// The fields of the current message, for the kinds whose fields are checked.
    body: Option<Body>,
}

impl Frames {
    /// Follows `bytes`, the next bytes of the stream.
    fn feed(&mut self, bytes: &[u8]) -> Result<(), FrameError> {
        self.feed_whole(bytes).map_err(|(e, _)| e)
    }

    /// [`Frames::feed`], saying on a malformed message how many of `bytes` come before it:
    /// the ends of whole, well-formed messages, which may be handed on.
    fn feed_whole(&mut self, all: &[u8]) -> Result<(), (FrameError, usize)> {
        let mut bytes = all;
        let mut whole = 0;
        while !bytes.is_empty() {
            if self.body_left > 0 {
                let take = usize::try_from(self.body_left)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                // An untyped message's fields follow its request code.
                let mut fields_from = 0;
                if !self.typed {
                    let want = (self.code.len() - self.code_len).min(take);
                    self.code[self.code_len..self.code_len + want].copy_from_slice(&bytes[..want]);
                    self.code_len += want;
                    fields_from = want;
                    if want > 0 && self.code_len == self.code.len() {
                        #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
                        let code = u32::from_be_bytes(self.code);
                        self.body = Body::for_request(code);
                    }
                }
                if let Some(body) = &mut self.body {
                    body.feed(&bytes[fields_from..take])
                        .map_err(|e| (e, whole))?;
                }
                self.body_left -= take as u64;
                bytes = &bytes[take..];
                if self.body_left == 0 {
                    self.message_done().map_err(|e| (e, whole))?;
                    whole = all.len() - bytes.len();
                }
                continue;
            }
            let header_size = if self.typed { 5 } else { 4 };
            let want = (header_size - self.header_len).min(bytes.len());
            self.header[self.header_len..self.header_len + want].copy_from_slice(&bytes[..want]);
            self.header_len += want;
            bytes = &bytes[want..];
            if self.header_len == header_size {
                self.header_done().map_err(|e| (e, whole))?;
                if self.body_left == 0 {
                    // A message without a body, done with its header.
                    whole = all.len() - bytes.len();
                }
            }
        }
        Ok(())
    }

    /// The header is complete: checks the length and starts the body.
    fn header_done(&mut self) -> Result<(), FrameError> {
        let (kind, len_bytes) = if self.typed {
            (Some(self.header[0]), &self.header[1..5])
        } else {
            (None, &self.header[..4])
        };
        let mut len = [0u8; 4];
        len.copy_from_slice(len_bytes);
        #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
        let len = u32::from_be_bytes(len);
        let min = if self.typed { 4 } else { 8 };
        if len < min {
            return Err(FrameError(format!(
                "invalid message length {len}{}",
                kind.map(|k| format!(" of a message of type {}", printable(k)))
                    .unwrap_or_default()
            )));
        }
        // Messages without a body (PostgreSQL checks each: "invalid message format").
        if let Some(k @ (b'S' | b'H' | b'X' | b'c')) = kind
            && len != 4
        {
            let name = match k {
                b'S' => "Sync",
                b'H' => "Flush",
                b'X' => "Terminate",
                _ => "CopyDone",
            };
            return Err(FrameError(format!(
                "invalid message format: a {name} message has no body, its length is {len}"
            )));
        }
        self.header_len = 0;
        self.code_len = 0;
        self.body = kind.and_then(Body::for_kind);
        self.body_left = u64::from(len) - 4;
        if self.body_left == 0 {
            self.message_done()?;
        }
        Ok(())
    }

    /// A message ended: its fields must have ended with it; after an SSL or GSSAPI
    /// encryption request another untyped message comes, after any other startup-phase
    /// message typed ones.
    fn message_done(&mut self) -> Result<(), FrameError> {
        if let Some(body) = self.body.take() {
            body.finish()?;
        }
        if !self.typed {
            #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
            let code = u32::from_be_bytes(self.code);
            self.typed = !(self.code_len == 4 && (code == SSL_REQUEST || code == GSSENC_REQUEST));
        }
        Ok(())
    }
}

/// A field of a message body, as [`Body`] expects it next (PostgreSQL's "Message Formats").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    /// A string ending in a NUL byte.
    Str,
    /// This many bytes of anything.
    Bytes(u64),
    /// A 16-bit count, then that many elements of this many bytes each.
    Array16(u64),
    /// A 16-bit count of parameter values, then the values.
    ParamCount,
    /// This many parameter values still to come.
    Params(u16),
    /// A parameter value: a 32-bit length (-1 for NULL), then that many bytes.
    Param,
    /// The target of a Describe or Close: `S` (statement) or `P` (portal).
    Target,
    /// A startup parameter's name, or the empty name that ends them; a name's value follows.
    ParamName,
}

/// Follows the fields of one message's body as its bytes arrive, so that a body that ends
/// inside its fields, or goes on after them, is refused (PostgreSQL's `pq_getmsgend`).
#[derive(Debug)]
struct Body {
    /// The message's name, for errors.
    name: &'static str,
    /// The fields still expected, the next one last.
    fields: Vec<Field>,
    /// The bytes read so far of the integer field being read.
    num: [u8; 4],
    num_len: usize,
    /// Bytes read so far of the string field being read (to tell an empty one).
    str_len: u64,
}

impl Body {
    /// The checker for a message of type `kind`, for the kinds pgwire decodes field by field.
    fn for_kind(kind: u8) -> Option<Body> {
        use Field::{Array16, Bytes, ParamCount, Str, Target};
        let (name, fields): (_, &[Field]) = match kind {
            b'Q' => ("Query", &[Str]),
            b'P' => ("Parse", &[Str, Str, Array16(4)]),
            b'B' => ("Bind", &[Str, Str, Array16(2), ParamCount, Array16(2)]),
            b'D' => ("Describe", &[Target, Str]),
            b'C' => ("Close", &[Target, Str]),
            b'E' => ("Execute", &[Str, Bytes(4)]),
            b'f' => ("CopyFail", &[Str]),
            _ => return None,
        };
        Some(Body::new(name, fields))
    }

    /// The checker for the fields after request code `code` of a startup-phase message:
    /// a StartupMessage (protocol 3.x) holds name and value strings up to an empty name, an
    /// SSL or GSSAPI encryption request nothing (PostgreSQL: "invalid startup packet
    /// layout", "invalid length of startup packet"). A CancelRequest is not checked.
    fn for_request(code: u32) -> Option<Body> {
        match code {
            SSL_REQUEST => Some(Body::new("SSLRequest", &[])),
            GSSENC_REQUEST => Some(Body::new("GSSENCRequest", &[])),
            _ if code >> 16 == 3 => Some(Body::new("StartupMessage", &[Field::ParamName])),
            _ => None,
        }
    }

    fn new(name: &'static str, fields: &[Field]) -> Body {
        Body {
            name,
            fields: fields.iter().rev().copied().collect(),
            num: [0; 4],
            num_len: 0,
            str_len: 0,
        }
    }

    fn error(&self, what: impl std::fmt::Display) -> FrameError {
        FrameError(format!(
            "invalid message format: a {} message {what}",
            self.name
        ))
    }

    /// Follows `bytes`, the next bytes of the body.
    fn feed(&mut self, mut bytes: &[u8]) -> Result<(), FrameError> {
        while !bytes.is_empty() {
            let Some(field) = self.fields.pop() else {
                return Err(self.error(format_args!(
                    "goes on for {} bytes after its fields",
                    bytes.len()
                )));
            };
            match field {
                Field::Str | Field::ParamName => match bytes.iter().position(|&b| b == 0) {
                    Some(nul) => {
                        let empty = self.str_len == 0 && nul == 0;
                        self.str_len = 0;
                        bytes = &bytes[nul + 1..];
                        if field == Field::ParamName && !empty {
                            // Its value, then the next name.
                            self.fields.push(Field::ParamName);
                            self.fields.push(Field::Str);
                        }
                    }
                    None => {
                        self.str_len += bytes.len() as u64;
                        self.fields.push(field);
                        bytes = &[];
                    }
                },
                Field::Bytes(n) => {
                    let take = usize::try_from(n).unwrap_or(usize::MAX).min(bytes.len());
                    bytes = &bytes[take..];
                    self.push_bytes(n - take as u64);
                }
                Field::Target => {
                    let target = bytes[0];
                    if target != b'S' && target != b'P' {
                        return Err(self.error(format_args!(
                            "names target {}, not 'S' or 'P'",
                            printable(target)
                        )));
                    }
                    bytes = &bytes[1..];
                }
                Field::Params(n) => {
                    if n > 1 {
                        self.fields.push(Field::Params(n - 1));
                    }
                    self.fields.push(Field::Param);
                }
                Field::Array16(_) | Field::ParamCount | Field::Param => {
                    let width = if field == Field::Param { 4 } else { 2 };
                    let want = (width - self.num_len).min(bytes.len());
                    self.num[self.num_len..self.num_len + want].copy_from_slice(&bytes[..want]);
                    self.num_len += want;
                    bytes = &bytes[want..];
                    if self.num_len < width {
                        self.fields.push(field);
                        continue;
                    }
                    self.num_len = 0;
                    self.number_done(field)?;
                }
            }
        }
        Ok(())
    }

    /// An integer field was read into `num`: pushes the fields it announces.
    fn number_done(&mut self, field: Field) -> Result<(), FrameError> {
        #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
        let count = u16::from_be_bytes([self.num[0], self.num[1]]);
        match field {
            Field::Array16(size) => self.push_bytes(u64::from(count) * size),
            Field::ParamCount if count > 0 => self.fields.push(Field::Params(count)),
            Field::Param => {
                #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
                let len = i32::from_be_bytes(self.num);
                match u64::try_from(len) {
                    Ok(len) => self.push_bytes(len),
                    Err(_) if len == -1 => {}
                    Err(_) => {
                        return Err(self.error(format_args!(
                            "has a parameter of length {len} (-1 is NULL; none is shorter)"
                        )));
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    fn push_bytes(&mut self, n: u64) {
        if n > 0 {
            self.fields.push(Field::Bytes(n));
        }
    }

    /// The body ended: so must its fields.
    fn finish(self) -> Result<(), FrameError> {
        if self.fields.is_empty() {
            Ok(())
        } else {
            Err(self.error("ends before its fields do"))
        }
    }
}

/// A message type byte as text for a message.
fn printable(kind: u8) -> String {
    if kind.is_ascii_graphic() {
        format!("'{}'", char::from(kind))
    } else {
        format!("{kind:#04x}")
    }
}

/// Most bytes a corked [`FrameCheck`] holds back; a write past it sends them first.
pub(crate) const CORK_LIMIT: usize = 64 << 10;

/// A stream whose reads fail with [`FrameError`] (as [`io::ErrorKind::InvalidData`]) once
/// the bytes read break PostgreSQL's message framing.
///
/// Writes pass through, except while it is *corked* ([`FrameCheck::set_corked`]): then up
/// to [`CORK_LIMIT`] bytes are held back, and a flush does not send them, so the replies to
/// messages a client pipelined (psycopg's Parse, Bind, Describe, Execute and Sync of one
/// statement) leave in one segment instead of one each. Uncorked, the next write or flush
/// sends what was held back first; a shutdown sends it too.
#[derive(Debug)]
pub(crate) struct FrameCheck<S> {
    inner: S,
    frames: Frames,
    /// A framing error found in bytes read before (reported by the next read).
    failed: Option<String>,
    corked: bool,
    /// Bytes written and not sent yet: `held[sent..]` is still to go.
    held: Vec<u8>,
    sent: usize,
}

impl<S> FrameCheck<S> {
    /// Checks the stream `inner` from a message boundary: `typed` once the startup message
    /// has been read, and `pending`, bytes already read from it that its reader holds
    /// undecoded, which come first.
    pub(crate) fn new(inner: S, typed: bool, pending: &[u8]) -> FrameCheck<S> {
        let mut frames = Frames {
            typed,
            ..Frames::default()
        };
        let failed = frames.feed(pending).err().map(|e| e.0);
        FrameCheck {
            inner,
            frames,
            failed,
            corked: false,
            held: Vec::new(),
            sent: 0,
        }
    }

    /// Corks (`true`) or uncorks the stream's writes (see [`FrameCheck`]).
    pub(crate) fn set_corked(&mut self, corked: bool) {
        self.corked = corked;
    }

    /// True while bytes written are held back, not sent.
    pub(crate) fn holds_bytes(&self) -> bool {
        self.sent < self.held.len()
    }
}

impl<S: AsyncWrite + Unpin> FrameCheck<S> {
    /// Sends the bytes held back; ready once none is left.
    fn poll_send_held(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.held.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &self.held[self.sent..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.sent += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.held.clear();
        self.sent = 0;
        Poll::Ready(Ok(()))
    }
}

impl<S> FrameCheck<S> {
    /// Why the bytes given to [`FrameCheck::new`] break the framing, if they do: the caller
    /// must not hand those bytes on (pgwire would run the messages in them).
    pub(crate) fn failed(&self) -> Option<&str> {
        self.failed.as_deref()
    }
}

/// Checks the first message of a connection, an SSL or GSSAPI encryption request if it is
/// one, from its first 8 bytes (`first`): such a request has nothing after its code (pgwire
/// answers it from those 8 bytes and read what followed inside its length as the next
/// message). `Err` is the FATAL message's text.
pub(crate) fn check_encryption_request(first: &[u8; 8]) -> Result<(), String> {
    #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
    let (len, code) = (
        u32::from_be_bytes([first[0], first[1], first[2], first[3]]),
        u32::from_be_bytes([first[4], first[5], first[6], first[7]]),
    );
    if (code == SSL_REQUEST || code == GSSENC_REQUEST) && len != 8 {
        return Err(format!(
            "invalid length of startup packet: an encryption request is 8 bytes, not {len}"
        ));
    }
    Ok(())
}

impl<S: AsyncRead + Unpin> AsyncRead for FrameCheck<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(reason) = this.failed.take() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                FrameError(reason),
            )));
        }
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled
            && let Err((e, whole)) = this.frames.feed_whole(&buf.filled()[before..])
        {
            // The connection ends at the malformed message: its bytes and those after it are
            // not handed on. The whole messages before it in this read are (a Query sent in
            // the same write as a bad message is answered, as PostgreSQL, reading message
            // by message, answers it), and the next read fails.
            buf.set_filled(before + whole);
            if whole == 0 {
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
            }
            this.failed = Some(e.0);
        }
        polled
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FrameCheck<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if (this.corked || this.holds_bytes()) && this.held.len() + data.len() <= CORK_LIMIT {
            this.held.extend_from_slice(data);
            if !this.corked {
                // Uncorked with bytes held back: all of them go in one write if they can.
                if let Poll::Ready(Err(e)) = this.poll_send_held(cx) {
                    return Poll::Ready(Err(e));
                }
            }
            return Poll::Ready(Ok(data.len()));
        }
        // Past the limit: what was held back goes first.
        std::task::ready!(this.poll_send_held(cx))?;
        Pin::new(&mut this.inner).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.corked {
            return Poll::Ready(Ok(()));
        }
        std::task::ready!(this.poll_send_held(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_send_held(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.corked || this.holds_bytes() {
            // One slice at a time through the corking path.
            let first = bufs
                .iter()
                .find(|b| !b.is_empty())
                .map_or(&[][..], |b| &**b);
            return Pin::new(this).poll_write(cx, first);
        }
        Pin::new(&mut this.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A typed message: type byte, length, body.
    fn msg(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut m = vec![kind];
        #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
        m.extend_from_slice(&u32::try_from(body.len() + 4).unwrap_or(0).to_be_bytes());
        m.extend_from_slice(body);
        m
    }

    /// An untyped startup-phase message with request code `code`.
    fn untyped(code: u32, rest: &[u8]) -> Vec<u8> {
        #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
        let mut m = u32::try_from(rest.len() + 8)
            .unwrap_or(0)
            .to_be_bytes()
            .to_vec();
        #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
        m.extend_from_slice(&code.to_be_bytes());
        m.extend_from_slice(rest);
        m
    }

    /// Feeds `stream` in chunks of `chunk` bytes from the startup phase.
    fn feed(stream: &[u8], chunk: usize) -> Result<Frames, FrameError> {
        let mut frames = Frames::default();
        for part in stream.chunks(chunk) {
            frames.feed(part)?;
        }
        Ok(frames)
    }

    fn session(tail: &[u8]) -> Vec<u8> {
        let mut s = untyped(SSL_REQUEST, b"");
        s.extend(untyped(196_608, b"user\0u\0\0"));
        s.extend(msg(b'Q', b"SELECT 1\0"));
        s.extend(msg(b'P', b"\0SELECT $1\0\0\0"));
        s.extend(msg(b'S', b""));
        s.extend_from_slice(tail);
        s
    }

    #[test]
    fn well_framed_sessions_pass_in_any_chunking() {
        for chunk in [1, 2, 3, 5, 7, 64, 4096] {
            let frames = feed(&session(&msg(b'X', b"")), chunk).expect("well framed");
            assert!(frames.typed);
            assert_eq!((frames.header_len, frames.body_left), (0, 0), "{chunk}");
        }
    }

    #[test]
    fn a_body_on_sync_flush_terminate_or_copydone_is_refused() {
        let hidden = msg(b'Q', b"INSERT INTO t VALUES (42)\0");
        for kind in [b'S', b'H', b'X', b'c'] {
            for chunk in [1, 4096] {
                let err = feed(&session(&msg(kind, &hidden)), chunk).expect_err("refused");
                assert!(err.0.contains("has no body"), "{err}");
            }
        }
    }

    #[test]
    fn lengths_below_the_header_are_refused() {
        for len in 0u32..4 {
            let mut bad = vec![b'Q'];
            #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
            bad.extend_from_slice(&len.to_be_bytes());
            bad.extend_from_slice(b"SELECT 1\0");
            let err = feed(&session(&bad), 3).expect_err("refused");
            assert!(
                err.0.contains(&format!("invalid message length {len}")),
                "{err}"
            );
        }
        // A startup packet shorter than its length and code.
        let err = feed(&[0, 0, 0, 4, 1, 2], 1).expect_err("refused");
        assert!(err.0.contains("invalid message length 4"), "{err}");
    }

    /// A Bind body: portal, statement, parameter formats, values (`None` is NULL), result
    /// formats.
    fn bind(values: &[Option<&[u8]>]) -> Vec<u8> {
        let mut b = b"\0s1\0\0\x01\0\x01".to_vec();
        #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
        b.extend_from_slice(&u16::try_from(values.len()).unwrap_or(0).to_be_bytes());
        for v in values {
            #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
            match v {
                Some(v) => {
                    b.extend_from_slice(&i32::try_from(v.len()).unwrap_or(0).to_be_bytes());
                    b.extend_from_slice(v);
                }
                None => b.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        b.extend_from_slice(b"\0\x02\0\0\0\x01");
        b
    }

    /// Every message kind whose fields are checked, well formed.
    fn all_kinds() -> Vec<u8> {
        let mut s = msg(b'P', b"s1\0SELECT $1, $2\0\0\x02\0\0\0\x14\0\0\0\x19");
        s.extend(msg(b'B', &bind(&[Some(b"42"), None])));
        s.extend(msg(b'B', &bind(&[])));
        s.extend(msg(b'B', &bind(&[Some(b"")])));
        s.extend(msg(b'D', b"P\0"));
        s.extend(msg(b'E', b"\0\0\0\0\x0a"));
        s.extend(msg(b'C', b"Ss1\0"));
        s.extend(msg(b'S', b""));
        s.extend(msg(b'Q', b"\0"));
        s.extend(msg(b'f', b"gave up\0"));
        s
    }

    #[test]
    fn every_checked_kind_passes_when_well_formed() {
        for chunk in [1, 2, 3, 5, 4096] {
            let frames = feed(&session(&all_kinds()), chunk).expect("well framed");
            assert_eq!((frames.header_len, frames.body_left), (0, 0), "{chunk}");
            assert!(frames.body.is_none());
        }
    }

    #[test]
    fn a_message_hidden_in_another_ones_body_is_refused() {
        let hidden = msg(b'Q', b"INSERT INTO t VALUES (903)\0");
        for (kind, fields) in [
            (b'Q', &b"SELECT 1\0"[..]),
            (b'P', b"\0SELECT 1\0\0\0"),
            (b'D', b"S\0"),
            (b'C', b"P\0"),
            (b'E', b"\0\0\0\0\0"),
            (b'f', b"x\0"),
        ] {
            let mut body = fields.to_vec();
            body.extend_from_slice(&hidden);
            for chunk in [1, 7, 4096] {
                let err = feed(&session(&msg(kind, &body)), chunk).expect_err("refused");
                assert!(
                    err.0.contains("after its fields"),
                    "{}: {err}",
                    kind as char
                );
            }
        }
        let mut body = bind(&[Some(b"1")]);
        body.extend_from_slice(&hidden);
        let err = feed(&session(&msg(b'B', &body)), 3).expect_err("refused");
        assert!(err.0.contains("a Bind message goes on"), "{err}");
    }

    #[test]
    fn a_body_that_ends_inside_its_fields_is_refused() {
        // `Q` of length 6 before `SELECT 1\0`: pgwire read the string on into the bytes
        // after the message.
        let mut stream = msg(b'Q', b"SE");
        stream.extend_from_slice(b"LECT 1\0");
        let err = feed(&session(&stream), 1).expect_err("refused");
        assert!(
            err.0.contains("a Query message ends before its fields"),
            "{err}"
        );
        for (kind, body) in [
            (b'Q', &b""[..]),
            (b'P', b"\0SELECT 1\0\0"),
            (b'P', b"\0SELECT $1\0\0\x01\0\0"),
            (b'E', b"\0\0\0"),
            (b'D', b"S"),
        ] {
            let err = feed(&session(&msg(kind, body)), 4096).expect_err("refused");
            assert!(err.0.contains("ends before its fields"), "{err}");
        }
        let mut short = bind(&[Some(b"1234")]);
        short.truncate(short.len() - 8);
        let err = feed(&session(&msg(b'B', &short)), 2).expect_err("refused");
        assert!(err.0.contains("ends before its fields"), "{err}");
    }

    #[test]
    fn bad_targets_and_parameter_lengths_are_refused() {
        let err = feed(&session(&msg(b'D', b"X\0")), 1).expect_err("refused");
        assert!(err.0.contains("names target 'X'"), "{err}");
        let err = feed(&session(&msg(b'C', b"\0\0")), 1).expect_err("refused");
        assert!(err.0.contains("names target 0x00"), "{err}");
        let mut body = b"\0\0\0\0\0\x01".to_vec();
        #[expect(clippy::big_endian_bytes, reason = "PostgreSQL's wire format")]
        body.extend_from_slice(&(-5i32).to_be_bytes());
        body.extend_from_slice(b"\0\0");
        let err = feed(&session(&msg(b'B', &body)), 4096).expect_err("refused");
        assert!(err.0.contains("parameter of length -5"), "{err}");
    }

    #[test]
    fn a_startup_packet_must_end_with_its_parameters() {
        let hidden = msg(b'Q', b"INSERT INTO t VALUES (950)\0");
        // A message after the terminating empty name, inside the declared length.
        let mut params = b"user\0u\0database\0db1\0\0".to_vec();
        params.extend_from_slice(&hidden);
        for chunk in [1, 5, 4096] {
            let err = feed(&untyped(196_608, &params), chunk).expect_err("refused");
            assert!(err.0.contains("a StartupMessage message goes on"), "{err}");
        }
        // A length that stops inside the parameters: pgwire read on past it.
        let mut stream = untyped(196_608, b"user\0u\0database\0db1\0");
        stream.extend_from_slice(b"d0000\0v\0\0");
        let err = feed(&stream, 3).expect_err("refused");
        assert!(err.0.contains("ends before its fields"), "{err}");
        let err = feed(&untyped(196_608, b""), 1).expect_err("refused");
        assert!(err.0.contains("ends before its fields"), "{err}");
        // An encryption request has nothing after its code.
        let err = feed(&untyped(SSL_REQUEST, b"\0"), 1).expect_err("refused");
        assert!(err.0.contains("SSLRequest message goes on"), "{err}");
        // Empty values are fine; so is a CancelRequest's key.
        feed(&untyped(196_608, b"user\0u\0options\0\0\0"), 2).expect("well formed");
        feed(&untyped(80_877_102, b"\0\0\0\x07\0\0\0\x09"), 1).expect("well formed");
    }

    #[test]
    fn an_encryption_request_is_eight_bytes() {
        let first = |bytes: Vec<u8>| -> [u8; 8] {
            let mut a = [0u8; 8];
            a.copy_from_slice(&bytes[..8]);
            a
        };
        assert!(check_encryption_request(&first(untyped(SSL_REQUEST, b""))).is_ok());
        assert!(check_encryption_request(&first(untyped(GSSENC_REQUEST, b""))).is_ok());
        assert!(check_encryption_request(&first(untyped(196_608, b"user\0u\0\0"))).is_ok());
        let mut hidden = untyped(SSL_REQUEST, &untyped(196_608, b"user\0u\0\0"));
        hidden.truncate(8);
        let err = check_encryption_request(&first(hidden)).expect_err("refused");
        assert!(
            err.contains("an encryption request is 8 bytes, not 24"),
            "{err}"
        );
    }

    #[test]
    fn pending_bytes_are_checked_first() {
        let mut pending = msg(b'S', b"xx");
        pending.extend(msg(b'Q', b"SELECT 1\0"));
        let check = FrameCheck::new(tokio::io::empty(), true, &pending);
        assert!(check.failed.is_some());
        let check = FrameCheck::new(tokio::io::empty(), true, &msg(b'Q', b"SELECT 1\0"));
        assert!(check.failed.is_none());
    }

    /// A read holding whole messages and then a malformed one hands on the whole ones; the
    /// next read fails with the framing error. A read that starts with the malformed one
    /// fails at once.
    #[tokio::test]
    async fn whole_messages_before_a_malformed_one_are_handed_on() {
        use tokio::io::AsyncReadExt as _;
        let good = [msg(b'Q', b"SELECT 1\0"), msg(b'S', b"")].concat();
        let stream = [good.clone(), msg(b'S', b"hidden")].concat();
        let mut check = FrameCheck::new(&stream[..], true, b"");
        let mut buf = vec![0u8; 1024];
        let n = check.read(&mut buf).await.expect("the whole messages");
        assert_eq!(&buf[..n], &good[..]);
        let err = check.read(&mut buf).await.expect_err("then the error");
        assert!(
            frame_error(&err).is_some_and(|e| e.0.contains("Sync message has no body")),
            "{err}"
        );
        let bad = msg(b'S', b"hidden");
        let mut check = FrameCheck::new(&bad[..], true, b"");
        let err = check.read(&mut buf).await.expect_err("at once");
        assert!(frame_error(&err).is_some(), "{err}");
    }

    /// A socket stand-in that records each write it is given, taking at most `take` bytes
    /// of each.
    struct Recorder {
        writes: Vec<Vec<u8>>,
        take: usize,
        shut: bool,
    }

    impl Recorder {
        fn new(take: usize) -> Recorder {
            Recorder {
                writes: Vec::new(),
                take,
                shut: false,
            }
        }

        fn bytes(&self) -> Vec<u8> {
            self.writes.concat()
        }
    }

    impl AsyncWrite for Recorder {
        fn poll_write(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            data: &[u8],
        ) -> Poll<io::Result<usize>> {
            let this = self.get_mut();
            let n = data.len().min(this.take);
            this.writes.push(data[..n].to_vec());
            Poll::Ready(Ok(n))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            self.get_mut().shut = true;
            Poll::Ready(Ok(()))
        }
    }

    #[tokio::test]
    async fn corked_writes_leave_together_once_uncorked() {
        use tokio::io::AsyncWriteExt as _;
        let mut check = FrameCheck::new(Recorder::new(usize::MAX), true, b"");
        check.set_corked(true);
        for part in [&b"ParseComplete"[..], b"BindComplete", b"DataRow"] {
            check.write_all(part).await.unwrap();
            check.flush().await.unwrap();
        }
        assert!(check.inner.writes.is_empty(), "nothing sent while corked");
        assert!(check.holds_bytes());
        check.set_corked(false);
        check.write_all(b"ReadyForQuery").await.unwrap();
        check.flush().await.unwrap();
        assert_eq!(
            check.inner.writes,
            vec![b"ParseCompleteBindCompleteDataRowReadyForQuery".to_vec()],
            "one write with everything, in order"
        );
        assert!(!check.holds_bytes());
        // Uncorked with nothing held back: writes pass straight through.
        check.write_all(b"next").await.unwrap();
        assert_eq!(check.inner.writes.len(), 2);
    }

    #[tokio::test]
    async fn a_flush_after_uncorking_sends_what_was_held_back() {
        use tokio::io::AsyncWriteExt as _;
        let mut check = FrameCheck::new(Recorder::new(usize::MAX), true, b"");
        check.set_corked(true);
        check.write_all(b"ErrorResponse").await.unwrap();
        check.flush().await.unwrap();
        assert!(check.inner.writes.is_empty());
        check.set_corked(false);
        check.flush().await.unwrap();
        assert_eq!(check.inner.bytes(), b"ErrorResponse");
        assert!(!check.holds_bytes());
    }

    #[tokio::test]
    async fn writes_past_the_cork_limit_go_out_in_order() {
        use tokio::io::AsyncWriteExt as _;
        // The socket takes 1,000 bytes per write, so sending what is held takes many.
        let mut check = FrameCheck::new(Recorder::new(1000), true, b"");
        check.set_corked(true);
        let mut expected = Vec::new();
        for i in 0..40u8 {
            let row = vec![i; 3000];
            check.write_all(&row).await.unwrap();
            expected.extend_from_slice(&row);
        }
        // 120,000 bytes against a 64 KiB limit: part of it went already, the rest is held.
        assert!(!check.inner.writes.is_empty());
        assert!(check.inner.bytes().len() < expected.len());
        assert!(check.held.len() <= CORK_LIMIT);
        check.shutdown().await.unwrap();
        assert!(check.inner.shut);
        assert_eq!(check.inner.bytes(), expected, "every byte once, in order");
    }

    #[tokio::test]
    async fn corked_vectored_writes_are_held_back_in_order() {
        use tokio::io::AsyncWriteExt as _;
        let mut check = FrameCheck::new(Recorder::new(usize::MAX), true, b"");
        check.set_corked(true);
        let mut parts: &mut [io::IoSlice<'_>] = &mut [
            io::IoSlice::new(b""),
            io::IoSlice::new(b"ab"),
            io::IoSlice::new(b"cd"),
        ];
        while !parts.is_empty() {
            let n = check.write_vectored(parts).await.unwrap();
            io::IoSlice::advance_slices(&mut parts, n);
        }
        assert!(check.inner.writes.is_empty());
        check.set_corked(false);
        check.flush().await.unwrap();
        assert_eq!(check.inner.writes, vec![b"abcd".to_vec()]);
    }
}
