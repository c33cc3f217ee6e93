//! RESP request framing: turns the bytes a client sends into commands (argument lists).
//!
//! Specified in `docs/protocol.md`. A request is either
//!
//! ```text
//! multibulk = "*" count CRLF count * ( "$" length CRLF length*OCTET CRLF )
//! inline    = *( WSP / arg ) LF          ; CRLF or a bare LF ends the line
//! ```
//!
//! `count` and `length` are decimal without sign or leading zeros (`count <= 0` is an empty
//! request and is skipped, as Redis does). Inline arguments are split on spaces and tabs;
//! `"..."` may contain `\n \r \t \b \a \\ \" \xHH` escapes and `'...'` may contain `\'`, and a
//! closing quote must be followed by a space or the end of the line (Redis's `sdssplitargs`).
//!
//! The parser is resumable: when the buffer ends inside a request it remembers how far it got
//! and continues from there when more bytes arrive, so a request with a million arguments
//! arriving in small reads is parsed in linear time. It never allocates more than the bytes
//! actually received: a header announcing 600 MiB is refused by the limit check, and a legal
//! large header reserves nothing up front.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

/// Framing limits. Exceeding one is a protocol error that closes the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest bulk string (one argument), in bytes. Redis's `proto-max-bulk-len`.
    pub max_bulk_bytes: usize,
    /// Most arguments in one multibulk request.
    pub max_args: usize,
    /// Longest inline request line, in bytes (Redis: 64 KiB).
    pub max_inline_bytes: usize,
    /// These are [`Limits::unauthenticated`]'s limits: going over `max_args` or
    /// `max_bulk_bytes` is reported as Redis reports it to a client that has not
    /// authenticated ([`ProtocolError::UnauthenticatedMultibulkLength`] and
    /// [`ProtocolError::UnauthenticatedBulkLength`]).
    pub unauthenticated: bool,
}

impl Default for Limits {
    /// 512 MiB bulk strings, 1,048,576 arguments, 64 KiB inline lines.
    fn default() -> Self {
        Limits {
            max_bulk_bytes: 512 << 20,
            max_args: 1 << 20,
            max_inline_bytes: 64 << 10,
            unauthenticated: false,
        }
    }
}

impl Limits {
    /// The limits for a client that has not authenticated yet while a password is required:
    /// at most 10 arguments of at most 16 KiB each (as Redis does), so an unauthenticated
    /// client cannot make the server buffer much.
    pub fn unauthenticated(self) -> Limits {
        Limits {
            max_bulk_bytes: self.max_bulk_bytes.min(16 << 10),
            max_args: self.max_args.min(10),
            max_inline_bytes: self.max_inline_bytes.min(16 << 10),
            unauthenticated: true,
        }
    }
}

/// A malformed request. The server answers `-ERR Protocol error: <text>` and closes the
/// connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The `*count` line is not a number or is over [`Limits::max_args`].
    #[error("invalid multibulk length")]
    InvalidMultibulkLength,
    /// The `$length` line is not a number or is over [`Limits::max_bulk_bytes`].
    #[error("invalid bulk length")]
    InvalidBulkLength,
    /// The `*count` line is over the unauthenticated limit (10 arguments).
    #[error("unauthenticated multibulk length")]
    UnauthenticatedMultibulkLength,
    /// The `$length` line is over the unauthenticated limit (16 KiB).
    #[error("unauthenticated bulk length")]
    UnauthenticatedBulkLength,
    /// An argument of a multibulk request does not start with `$`.
    #[error("expected '$', got '{0}'")]
    ExpectedDollar(char),
    /// The two bytes after a bulk string's data are not CRLF.
    #[error("expected CRLF after bulk string data")]
    MissingCrlf,
    /// A `*count` or `$length` line is too long to be a number.
    #[error("too big count string")]
    TooBigCountString,
    /// An inline request line is over [`Limits::max_inline_bytes`].
    #[error("too big inline request")]
    TooBigInline,
    /// An inline request has an unterminated quote, or a closing quote not followed by a space.
    #[error("unbalanced quotes in request")]
    UnbalancedQuotes,
}

/// Longest `*count` / `$length` line we wait for (sign, 20 digits, CRLF and some slack).
const MAX_COUNT_LINE: usize = 32;

/// Where the parser is inside the request at the front of the buffer.
#[derive(Debug, Default)]
enum State {
    /// At the start of a request.
    #[default]
    Start,
    /// Inside a multibulk request: `remaining` arguments still to read, starting at `pos`;
    /// `args` are the byte ranges (relative to the buffer front) of those already read.
    Multibulk {
        remaining: usize,
        pos: usize,
        args: Vec<Range<usize>>,
    },
}

/// A resumable RESP request parser for one connection.
#[derive(Debug, Default)]
pub struct RequestParser {
    state: State,
}

/// The outcome of one parse step.
type Step = Result<Option<Vec<Bytes>>, ProtocolError>;

impl RequestParser {
    /// A parser at the start of a request.
    pub fn new() -> Self {
        RequestParser::default()
    }

    /// True when the parser is in the middle of a request (some of its bytes were consumed
    /// into the parser's state but the request is not complete).
    pub fn in_request(&self) -> bool {
        matches!(self.state, State::Multibulk { .. })
    }

    /// Takes the next complete request from the front of `buf`, removing its bytes.
    ///
    /// Returns `Ok(None)` when `buf` holds no complete request yet (call again after more
    /// bytes arrived; the parser keeps its progress). Empty requests (blank inline lines,
    /// `*0`) are skipped. The returned arguments share `buf`'s memory (no copy).
    ///
    /// # Errors
    /// A [`ProtocolError`] for a malformed request or one over `limits`; the connection
    /// should be closed, as the stream cannot be resynchronized.
    pub fn next_request(&mut self, buf: &mut BytesMut, limits: &Limits) -> Step {
        loop {
            let step = match self.state {
                State::Start => self.start(buf, limits),
                State::Multibulk { .. } => self.continue_multibulk(buf, limits),
            };
            match step {
                Ok(Some(args)) if args.is_empty() => {}
                other => return other,
            }
        }
    }

    /// At a request boundary: dispatch on the first byte.
    fn start(&mut self, buf: &mut BytesMut, limits: &Limits) -> Step {
        match buf.first() {
            None => Ok(None),
            Some(b'*') => {
                let Some((count, line_end)) =
                    read_count_line(buf, 0, ProtocolError::InvalidMultibulkLength)?
                else {
                    return Ok(None);
                };
                if count > i64::try_from(limits.max_args).unwrap_or(i64::MAX) {
                    return Err(if limits.unauthenticated {
                        ProtocolError::UnauthenticatedMultibulkLength
                    } else {
                        ProtocolError::InvalidMultibulkLength
                    });
                }
                if count <= 0 {
                    let _ = buf.split_to(line_end);
                    return Ok(Some(Vec::new()));
                }
                let remaining =
                    usize::try_from(count).map_err(|_| ProtocolError::InvalidMultibulkLength)?;
                self.state = State::Multibulk {
                    remaining,
                    pos: line_end,
                    // Grows with the arguments actually received, not the announced count.
                    args: Vec::with_capacity(remaining.min(64)),
                };
                self.continue_multibulk(buf, limits)
            }
            Some(_) => parse_inline(buf, limits),
        }
    }

    fn continue_multibulk(&mut self, buf: &mut BytesMut, limits: &Limits) -> Step {
        let State::Multibulk {
            remaining,
            pos,
            args,
        } = &mut self.state
        else {
            return Ok(None);
        };
        while *remaining > 0 {
            let Some(&first) = buf.get(*pos) else {
                return Ok(None);
            };
            if first != b'$' {
                return Err(ProtocolError::ExpectedDollar(char::from(first)));
            }
            let Some((len, line_end)) =
                read_count_line(buf, *pos, ProtocolError::InvalidBulkLength)?
            else {
                return Ok(None);
            };
            let len = usize::try_from(len).map_err(|_| ProtocolError::InvalidBulkLength)?;
            if len > limits.max_bulk_bytes {
                return Err(if limits.unauthenticated {
                    ProtocolError::UnauthenticatedBulkLength
                } else {
                    ProtocolError::InvalidBulkLength
                });
            }
            let data_end = line_end
                .checked_add(len)
                .ok_or(ProtocolError::InvalidBulkLength)?;
            let trailer_end = data_end
                .checked_add(2)
                .ok_or(ProtocolError::InvalidBulkLength)?;
            let Some(trailer) = buf.get(data_end..trailer_end) else {
                return Ok(None);
            };
            if trailer != b"\r\n" {
                return Err(ProtocolError::MissingCrlf);
            }
            args.push(line_end..data_end);
            *pos = trailer_end;
            *remaining -= 1;
        }
        let end = *pos;
        let ranges = std::mem::take(args);
        self.state = State::Start;
        let frame = buf.split_to(end).freeze();
        Ok(Some(ranges.into_iter().map(|r| frame.slice(r)).collect()))
    }
}

/// Reads a `*N` / `$N` line starting at `start`: returns the number and the offset just past
/// its line end, or `None` when the line is not complete yet.
fn read_count_line(
    buf: &[u8],
    start: usize,
    invalid: ProtocolError,
) -> Result<Option<(i64, usize)>, ProtocolError> {
    let window = buf.get(start + 1..).unwrap_or_default();
    let Some(cr) = window.iter().take(MAX_COUNT_LINE).position(|&b| b == b'\r') else {
        if window.len() >= MAX_COUNT_LINE {
            return Err(ProtocolError::TooBigCountString);
        }
        return Ok(None);
    };
    match window.get(cr + 1) {
        None => return Ok(None),
        Some(b'\n') => {}
        Some(_) => return Err(invalid),
    }
    let digits = window.get(..cr).unwrap_or_default();
    let n = parse_decimal(digits).ok_or(invalid)?;
    Ok(Some((n, start + 1 + cr + 2)))
}

/// Parses a decimal `i64` the way Redis's `string2ll` does: an optional `-`, then digits
/// without leading zeros (a lone `0` is fine); no `+`, spaces or other bytes.
pub fn parse_decimal(digits: &[u8]) -> Option<i64> {
    let (negative, body) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    match body {
        [] => return None,
        [b'0'] => return if negative { None } else { Some(0) },
        [b'0', ..] => return None,
        _ => {}
    }
    let mut value: i64 = 0;
    for &b in body {
        if !b.is_ascii_digit() {
            return None;
        }
        let digit = i64::from(b - b'0');
        value = value.checked_mul(10)?;
        value = if negative {
            value.checked_sub(digit)?
        } else {
            value.checked_add(digit)?
        };
    }
    Some(value)
}

/// Parses one inline request line at the front of `buf`.
fn parse_inline(buf: &mut BytesMut, limits: &Limits) -> Step {
    let Some(lf) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > limits.max_inline_bytes {
            return Err(ProtocolError::TooBigInline);
        }
        return Ok(None);
    };
    if lf > limits.max_inline_bytes {
        return Err(ProtocolError::TooBigInline);
    }
    let line = buf.split_to(lf + 1);
    let text = line.get(..lf).unwrap_or_default();
    let text = text.strip_suffix(b"\r").unwrap_or(text);
    split_args(text).map(|args| Some(args.into_iter().map(Bytes::from).collect()))
}

/// Splits an inline line into arguments (Redis's `sdssplitargs` rules).
pub fn split_args(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut args = Vec::new();
    let mut i = 0;
    let at = |i: usize| line.get(i).copied();
    loop {
        while at(i).is_some_and(is_space) {
            i += 1;
        }
        let Some(_) = at(i) else {
            return Ok(args);
        };
        let mut arg = Vec::new();
        let mut in_double = false;
        let mut in_single = false;
        loop {
            let c = at(i);
            if in_double {
                match c {
                    None => return Err(ProtocolError::UnbalancedQuotes),
                    Some(b'\\') => {
                        let hex = (at(i + 2), at(i + 3));
                        if at(i + 1) == Some(b'x')
                            && let (Some(h), Some(l)) = hex
                            && let (Some(h), Some(l)) = (hex_value(h), hex_value(l))
                        {
                            arg.push(h * 16 + l);
                            i += 4;
                            continue;
                        }
                        match at(i + 1) {
                            Some(e) => {
                                arg.push(match e {
                                    b'n' => b'\n',
                                    b'r' => b'\r',
                                    b't' => b'\t',
                                    b'b' => 0x08,
                                    b'a' => 0x07,
                                    other => other,
                                });
                                i += 2;
                            }
                            None => return Err(ProtocolError::UnbalancedQuotes),
                        }
                    }
                    Some(b'"') => {
                        if at(i + 1).is_some_and(|n| !is_space(n)) {
                            return Err(ProtocolError::UnbalancedQuotes);
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => {
                        arg.push(other);
                        i += 1;
                    }
                }
            } else if in_single {
                match c {
                    None => return Err(ProtocolError::UnbalancedQuotes),
                    Some(b'\\') if at(i + 1) == Some(b'\'') => {
                        arg.push(b'\'');
                        i += 2;
                    }
                    Some(b'\'') => {
                        if at(i + 1).is_some_and(|n| !is_space(n)) {
                            return Err(ProtocolError::UnbalancedQuotes);
                        }
                        i += 1;
                        break;
                    }
                    Some(other) => {
                        arg.push(other);
                        i += 1;
                    }
                }
            } else {
                match c {
                    None => break,
                    // As Redis's `sdssplitargs`: `\v` and `\f` separate arguments but do not
                    // end an unquoted one.
                    Some(b' ' | b'\t' | b'\n' | b'\r') => break,
                    Some(b'"') => {
                        in_double = true;
                        i += 1;
                    }
                    Some(b'\'') => {
                        in_single = true;
                        i += 1;
                    }
                    Some(other) => {
                        arg.push(other);
                        i += 1;
                    }
                }
            }
        }
        args.push(arg);
    }
}

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex_value(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests;
