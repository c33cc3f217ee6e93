//! RESP request framing (`server/src/protocol/request.rs`, compiled into this target).
//!
//! The input is a byte stream from a client. It is parsed with `RequestParser` twice: from one
//! buffer holding all of it, and fed in small pieces (sizes taken from the bytes themselves)
//! as a socket would deliver them. Both must give the same requests and end in the same state
//! or error: the parser is resumable. Runs under the default limits, under tiny limits (so
//! every limit check is reached) and under the unauthenticated limits. Arguments can never
//! add up to more bytes than were received.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;

// The server's request parser, compiled here as a module (it depends only on `bytes` and
// `thiserror`), so this target does not build the whole server.
#[rustfmt::skip] // rustfmt would look for the parser's test module next to this path
#[path = "../../server/src/protocol/request.rs"]
mod request;

use request::{Limits, ProtocolError, RequestParser, parse_decimal, split_args};

strata_fuzz::capped_allocator!();

#[derive(Debug, PartialEq, Eq)]
struct Outcome {
    requests: Vec<Vec<Bytes>>,
    error: Option<ProtocolError>,
    in_request: bool,
}

/// Takes every complete request from `buf`; `false` after an error.
fn drain(
    parser: &mut RequestParser,
    buf: &mut BytesMut,
    limits: &Limits,
    out: &mut Outcome,
) -> bool {
    loop {
        match parser.next_request(buf, limits) {
            Ok(Some(args)) => {
                assert!(!args.is_empty(), "empty requests are skipped");
                out.requests.push(args);
            }
            Ok(None) => return true,
            Err(e) => {
                out.error = Some(e);
                return false;
            }
        }
    }
}

fn whole(data: &[u8], limits: &Limits) -> Outcome {
    let mut out = Outcome {
        requests: Vec::new(),
        error: None,
        in_request: false,
    };
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::from(data);
    drain(&mut parser, &mut buf, limits, &mut out);
    out.in_request = parser.in_request();
    out
}

fn pieces(data: &[u8], limits: &Limits) -> Outcome {
    let mut out = Outcome {
        requests: Vec::new(),
        error: None,
        in_request: false,
    };
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::new();
    let mut rest = data;
    while let Some(&b) = rest.first() {
        let n = (1 + usize::from(b % 13)).min(rest.len());
        let (piece, tail) = rest.split_at(n);
        buf.extend_from_slice(piece);
        rest = tail;
        if !drain(&mut parser, &mut buf, limits, &mut out) {
            break;
        }
    }
    out.in_request = parser.in_request();
    out
}

fuzz_target!(|data: &[u8]| {
    let tiny = Limits {
        max_bulk_bytes: 8,
        max_args: 3,
        max_inline_bytes: 24,
        unauthenticated: false,
    };
    for limits in [Limits::default(), tiny, Limits::default().unauthenticated()] {
        let a = whole(data, &limits);
        let b = pieces(data, &limits);
        let received: usize = a.requests.iter().flatten().map(Bytes::len).sum();
        assert!(received <= data.len(), "arguments larger than the input");
        assert_eq!(a, b, "parsing in pieces differs from parsing at once");
    }
    for line in data.split(|&b| b == b'\n') {
        if let Ok(args) = split_args(line) {
            assert!(args.iter().map(Vec::len).sum::<usize>() <= line.len());
        }
        let _ = parse_decimal(line);
    }
});
