use proptest::prelude::*;

use super::*;

fn parse_all(input: &[u8]) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::from(input);
    let mut out = Vec::new();
    while let Some(args) = parser.next_request(&mut buf, &Limits::default())? {
        out.push(args.iter().map(|a| a.to_vec()).collect());
    }
    Ok(out)
}

fn args(list: &[&str]) -> Vec<Vec<u8>> {
    list.iter().map(|a| a.as_bytes().to_vec()).collect()
}

/// Encodes a request as a multibulk frame.
fn encode(request: &[Vec<u8>]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", request.len()).into_bytes();
    for a in request {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

#[test]
fn multibulk_request_is_parsed() {
    let got = parse_all(b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n").unwrap();
    assert_eq!(got, vec![args(&["GET", "key"])]);
}

#[test]
fn pipelined_requests_are_parsed_in_order() {
    let got = parse_all(b"*1\r\n$4\r\nPING\r\nECHO hi\r\n*2\r\n$3\r\nGET\r\n$0\r\n\r\n").unwrap();
    assert_eq!(
        got,
        vec![
            args(&["PING"]),
            args(&["ECHO", "hi"]),
            vec![b"GET".to_vec(), Vec::new()]
        ]
    );
}

#[test]
fn inline_request_with_quotes_and_escapes() {
    let got = parse_all(b"SET \"a b\" 'it\\'s' \"\\x41\\n\"\r\n").unwrap();
    assert_eq!(
        got,
        vec![vec![
            b"SET".to_vec(),
            b"a b".to_vec(),
            b"it's".to_vec(),
            b"A\n".to_vec()
        ]]
    );
}

#[test]
fn inline_request_accepts_bare_lf_and_skips_blank_lines() {
    let got = parse_all(b"\r\n\nPING\n  \t \r\nDBSIZE\r\n").unwrap();
    assert_eq!(got, vec![args(&["PING"]), args(&["DBSIZE"])]);
}

#[test]
fn vertical_tab_and_form_feed_separate_arguments_but_do_not_end_one() {
    // Redis's sdssplitargs: isspace() between arguments, only ' ', \t, \n, \r end one.
    let got = parse_all(b"ECHO a\x0bb\r\nECHO \x0b\x0ca\x0cb \x0b\r\n").unwrap();
    assert_eq!(
        got,
        vec![
            vec![b"ECHO".to_vec(), b"a\x0bb".to_vec()],
            vec![b"ECHO".to_vec(), b"a\x0cb".to_vec()],
        ]
    );
}

#[test]
fn unbalanced_quotes_are_refused() {
    for bad in [&b"SET \"abc\r\n"[..], b"SET 'abc\r\n", b"SET \"a\"b\r\n"] {
        assert_eq!(
            parse_all(bad),
            Err(ProtocolError::UnbalancedQuotes),
            "{bad:?}"
        );
    }
}

#[test]
fn empty_multibulk_is_skipped() {
    assert_eq!(
        parse_all(b"*0\r\n*-1\r\nPING\r\n").unwrap(),
        vec![args(&["PING"])]
    );
}

#[test]
fn huge_bulk_header_is_refused_without_allocating() {
    let mut parser = RequestParser::new();
    let mut buf = BytesMut::from(&b"*2\r\n$3\r\nSET\r\n$629145600\r\n"[..]);
    let capacity = buf.capacity();
    assert_eq!(
        parser.next_request(&mut buf, &Limits::default()),
        Err(ProtocolError::InvalidBulkLength)
    );
    assert_eq!(buf.capacity(), capacity);
}

#[test]
fn too_many_arguments_are_refused() {
    let limits = Limits::default().unauthenticated();
    let mut buf = BytesMut::from(&b"*11\r\n"[..]);
    let got = RequestParser::new().next_request(&mut buf, &limits);
    // Redis's text for a client that has not authenticated.
    assert_eq!(got, Err(ProtocolError::UnauthenticatedMultibulkLength));
    let mut buf = BytesMut::from(&b"*1\r\n$16385\r\n"[..]);
    let got = RequestParser::new().next_request(&mut buf, &limits);
    assert_eq!(got, Err(ProtocolError::UnauthenticatedBulkLength));
    // Within the limits, after authentication, the usual texts.
    let small = Limits {
        max_args: 10,
        ..Limits::default()
    };
    let mut buf = BytesMut::from(&b"*11\r\n"[..]);
    let got = RequestParser::new().next_request(&mut buf, &small);
    assert_eq!(got, Err(ProtocolError::InvalidMultibulkLength));
}

#[test]
fn malformed_headers_are_refused() {
    let cases: &[(&[u8], ProtocolError)] = &[
        (b"*x\r\n", ProtocolError::InvalidMultibulkLength),
        (b"*+1\r\n", ProtocolError::InvalidMultibulkLength),
        (b"*01\r\n", ProtocolError::InvalidMultibulkLength),
        (b"*1\r\n$-1\r\n", ProtocolError::InvalidBulkLength),
        (b"*1\r\n$ 1\r\n", ProtocolError::InvalidBulkLength),
        (b"*1\r\n:1\r\n", ProtocolError::ExpectedDollar(':')),
        (b"*1\r\n$1\r\nab\r\n", ProtocolError::MissingCrlf),
        (b"*1\rx", ProtocolError::InvalidMultibulkLength),
        (
            b"*111111111111111111111111111111111111",
            ProtocolError::TooBigCountString,
        ),
    ];
    for (input, want) in cases {
        assert_eq!(parse_all(input).as_ref(), Err(want), "{input:?}");
    }
}

#[test]
fn inline_line_over_limit_is_refused() {
    let long = vec![b'a'; (64 << 10) + 1];
    assert_eq!(parse_all(&long), Err(ProtocolError::TooBigInline));
}

#[test]
fn truncated_requests_wait_for_more_bytes() {
    let full = encode(&args(&["SET", "key", "value"]));
    for cut in 0..full.len() {
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::from(&full[..cut]);
        assert_eq!(
            parser.next_request(&mut buf, &Limits::default()),
            Ok(None),
            "cut {cut}"
        );
        buf.extend_from_slice(&full[cut..]);
        let got = parser
            .next_request(&mut buf, &Limits::default())
            .unwrap()
            .unwrap();
        assert_eq!(got, vec![&b"SET"[..], b"key", b"value"]);
        assert!(buf.is_empty());
    }
}

#[test]
fn decimal_parsing_follows_redis() {
    assert_eq!(parse_decimal(b"0"), Some(0));
    assert_eq!(parse_decimal(b"-12"), Some(-12));
    assert_eq!(parse_decimal(b"9223372036854775807"), Some(i64::MAX));
    assert_eq!(parse_decimal(b"-9223372036854775808"), Some(i64::MIN));
    for bad in [
        &b""[..],
        b"-",
        b"-0",
        b"007",
        b"+1",
        b" 1",
        b"1 ",
        b"9223372036854775808",
    ] {
        assert_eq!(parse_decimal(bad), None, "{bad:?}");
    }
}

proptest! {
    /// Any request survives encoding and parsing, fed in arbitrary chunks.
    #[test]
    fn multibulk_round_trips_in_chunks(
        requests in prop::collection::vec(
            prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..6), 1..5),
        chunk in 1usize..17,
    ) {
        let wire: Vec<u8> = requests.iter().flat_map(|r| encode(r)).collect();
        let mut parser = RequestParser::new();
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for piece in wire.chunks(chunk) {
            buf.extend_from_slice(piece);
            while let Some(args) = parser.next_request(&mut buf, &Limits::default()).unwrap() {
                got.push(args.iter().map(|a| a.to_vec()).collect::<Vec<_>>());
            }
        }
        prop_assert_eq!(got, requests);
        prop_assert!(buf.is_empty());
    }

    /// Garbage never panics: it parses, waits or errors.
    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let _ = parse_all(&bytes);
    }

    /// Bit flips in a valid pipeline never panic.
    #[test]
    fn bit_flipped_frames_never_panic(pos in 0usize..64, bit in 0u8..8) {
        let mut wire = encode(&args(&["SET", "key", "value"]));
        wire.extend_from_slice(&encode(&args(&["GET", "key"])));
        let p = pos % wire.len();
        wire[p] ^= 1 << bit;
        let _ = parse_all(&wire);
    }
}
