//! RESP reply encoding, in RESP2 or RESP3 (`docs/protocol.md`, "Replies").
//!
//! ```text
//! simple  = "+" text CRLF            error = "-" CODE " " text CRLF
//! integer = ":" decimal CRLF         bulk  = "$" length CRLF bytes CRLF
//! array   = "*" count CRLF items     null  = "$-1" CRLF (RESP2) / "_" CRLF (RESP3)
//! map     = "%" pairs CRLF items (RESP3) / "*" 2*pairs CRLF items (RESP2)
//! double  = "," text CRLF (RESP3) / bulk string (RESP2)
//! boolean = "#t" / "#f" CRLF (RESP3) / ":1" / ":0" (RESP2)
//! ```
//!
//! Replies are appended to one output buffer per connection, which is written to the socket
//! when the connection has no more complete requests buffered (so a pipeline of 16 commands
//! costs one `write`).

use std::fmt::Write as _;

use bytes::BytesMut;

/// An argument as Redis echoes it in an error message (C's `printf("%.*s")` of the argument's
/// C string): its raw bytes, not re-encoded, up to the first NUL byte and at most `max` bytes
/// (which may cut a UTF-8 character, as Redis does). Redis 7's `unknown command` and
/// `unknown subcommand` messages cut at 128 bytes; its other messages only at the NUL.
pub fn echoed(arg: &[u8], max: usize) -> &[u8] {
    let end = arg
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(arg.len())
        .min(max);
    arg.get(..end).unwrap_or_default()
}

/// An output buffer that encodes replies in the connection's protocol version.
#[derive(Debug, Default)]
pub struct ReplyBuffer {
    buf: BytesMut,
    resp3: bool,
}

impl ReplyBuffer {
    /// An empty RESP2 buffer.
    pub fn new() -> Self {
        ReplyBuffer::default()
    }

    /// True after `HELLO 3`.
    pub fn resp3(&self) -> bool {
        self.resp3
    }

    /// Switches the protocol version for the replies that follow.
    pub fn set_resp3(&mut self, resp3: bool) {
        self.resp3 = resp3;
    }

    /// Bytes encoded so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True when nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Drops everything after the first `len` bytes (to replace replies already encoded).
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }

    /// The encoded bytes, for writing to the socket.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Forgets the encoded bytes (after they were written).
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// `+text`. `text` must not contain CR or LF (ours never do).
    pub fn simple(&mut self, text: &str) {
        debug_assert!(!text.contains(['\r', '\n']));
        self.buf.reserve(text.len() + 3);
        self.buf.extend_from_slice(b"+");
        self.buf.extend_from_slice(text.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `+OK`.
    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// `-message`: `message` starts with the error code (`ERR`, `WRONGPASS`, ...). CR and LF
    /// inside are replaced by spaces, as the frame would otherwise break.
    pub fn error(&mut self, message: &str) {
        self.error_bytes(message.as_bytes());
    }

    /// [`ReplyBuffer::error`] of a message in raw bytes (one that echoes a client's arguments byte
    /// for byte, as Redis's do: see [`echoed`]).
    pub fn error_bytes(&mut self, message: &[u8]) {
        self.buf.reserve(message.len() + 3);
        self.buf.extend_from_slice(b"-");
        self.buf.extend(
            message
                .iter()
                .map(|&b| if b == b'\r' || b == b'\n' { b' ' } else { b }),
        );
        self.buf.extend_from_slice(b"\r\n");
    }

    /// `-{before}{arg}{after}`: an error echoing one argument as Redis does (see [`echoed`];
    /// `max` bytes at most).
    pub fn error_echo(&mut self, before: &str, arg: &[u8], max: usize, after: &str) {
        let mut message = Vec::with_capacity(before.len() + arg.len().min(max) + after.len());
        message.extend_from_slice(before.as_bytes());
        message.extend_from_slice(echoed(arg, max));
        message.extend_from_slice(after.as_bytes());
        self.error_bytes(&message);
    }

    /// `:n`.
    pub fn integer(&mut self, n: i64) {
        let _ = write!(self.buf, ":{n}\r\n");
    }

    /// `$len bytes`.
    pub fn bulk(&mut self, bytes: &[u8]) {
        self.buf.reserve(bytes.len() + 16);
        let _ = write!(self.buf, "${}\r\n", bytes.len());
        self.buf.extend_from_slice(bytes);
        self.buf.extend_from_slice(b"\r\n");
    }

    /// A bulk string, or null for `None`.
    pub fn bulk_or_null(&mut self, bytes: Option<&[u8]>) {
        match bytes {
            Some(b) => self.bulk(b),
            None => self.null(),
        }
    }

    /// The null reply: `$-1` in RESP2, `_` in RESP3.
    pub fn null(&mut self) {
        if self.resp3 {
            self.buf.extend_from_slice(b"_\r\n");
        } else {
            self.buf.extend_from_slice(b"$-1\r\n");
        }
    }

    /// An array header for `n` items that follow.
    pub fn array(&mut self, n: usize) {
        let _ = write!(self.buf, "*{n}\r\n");
    }

    /// A map header for `n` key/value pairs that follow (a flat array of `2n` in RESP2).
    pub fn map(&mut self, n: usize) {
        if self.resp3 {
            let _ = write!(self.buf, "%{n}\r\n");
        } else {
            let _ = write!(self.buf, "*{}\r\n", n.saturating_mul(2));
        }
    }

    /// A set header for `n` items (an array in RESP2).
    pub fn set(&mut self, n: usize) {
        if self.resp3 {
            let _ = write!(self.buf, "~{n}\r\n");
        } else {
            self.array(n);
        }
    }

    /// A double: `,text` in RESP3, a bulk string in RESP2 (Redis's formatting: `inf`,
    /// `-inf`, `nan`, else the shortest text that reads back as the same value).
    pub fn double(&mut self, value: f64) {
        self.double_text(&format_double(value));
    }

    /// A double already formatted as `text` (which must read back as a double: digits with an
    /// optional `.` and exponent, `inf`, `-inf` or `nan`).
    pub fn double_text(&mut self, text: &str) {
        if self.resp3 {
            let _ = write!(self.buf, ",{text}\r\n");
        } else {
            self.bulk(text.as_bytes());
        }
    }

    /// A boolean: `#t`/`#f` in RESP3, `:1`/`:0` in RESP2.
    pub fn boolean(&mut self, value: bool) {
        match (self.resp3, value) {
            (true, true) => self.buf.extend_from_slice(b"#t\r\n"),
            (true, false) => self.buf.extend_from_slice(b"#f\r\n"),
            (false, v) => self.integer(i64::from(v)),
        }
    }

    /// A text blob (`INFO`): a verbatim string `=len txt:...` in RESP3, bulk in RESP2.
    pub fn verbatim(&mut self, text: &str) {
        if self.resp3 {
            let _ = write!(self.buf, "={}\r\ntxt:", text.len() + 4);
            self.buf.extend_from_slice(text.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(text.as_bytes());
        }
    }
}

/// Formats a double for a reply.
pub fn format_double(value: f64) -> String {
    if value.is_nan() {
        "nan".to_owned()
    } else if value.is_infinite() {
        if value > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        format!("{value}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp2_and_resp3_encode_nulls_maps_and_doubles_differently() {
        let mut r2 = ReplyBuffer::new();
        r2.null();
        r2.map(1);
        r2.double(1.5);
        r2.boolean(true);
        assert_eq!(r2.bytes(), b"$-1\r\n*2\r\n$3\r\n1.5\r\n:1\r\n");
        let mut r3 = ReplyBuffer::new();
        r3.set_resp3(true);
        r3.null();
        r3.map(1);
        r3.double(1.5);
        r3.boolean(true);
        assert_eq!(r3.bytes(), b"_\r\n%1\r\n,1.5\r\n#t\r\n");
    }

    #[test]
    fn errors_cannot_break_the_frame() {
        let mut r = ReplyBuffer::new();
        r.error("ERR bad\r\nthing");
        assert_eq!(r.bytes(), b"-ERR bad  thing\r\n");
    }

    #[test]
    fn verbatim_in_resp3_has_txt_prefix() {
        let mut r = ReplyBuffer::new();
        r.set_resp3(true);
        r.verbatim("a:1\r\n");
        assert_eq!(r.bytes(), b"=9\r\ntxt:a:1\r\n\r\n");
    }
}
