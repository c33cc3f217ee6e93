use std::cmp::Ordering;

use proptest::prelude::*;

use super::*;

fn canonical(v: Value) -> Value {
    match v {
        Value::Double(d) if d.to_bits() << 1 == 0 => Value::Double(0.0),
        Value::Double(d) if d.is_nan() => Value::Double(f64::NAN),
        v => v,
    }
}

fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

fn encode(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    encode_value(&mut out, v);
    out
}

fn any_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::Int),
        prop_oneof![
            any::<f64>(),
            Just(0.0),
            Just(-0.0),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(f64::NAN)
        ]
        .prop_map(Value::Double),
        ".{0,12}".prop_map(Value::Text),
        "[a\\x00b]{0,8}".prop_map(Value::Text),
        proptest::collection::vec(
            prop_oneof![Just(0u8), Just(1u8), Just(0xffu8), any::<u8>()],
            0..10
        )
        .prop_map(Value::Blob),
    ]
}

fn tuple_order(a: &[Value], b: &[Value]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match key_order(x, y) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    a.len().cmp(&b.len())
}

proptest! {
    #[test]
    fn encoding_preserves_value_order(a in any_value(), b in any_value()) {
        prop_assert_eq!(encode(&a).cmp(&encode(&b)), key_order(&canonical(a), &canonical(b)));
    }

    #[test]
    fn decoding_inverts_encoding(a in any_value()) {
        let bytes = encode(&a);
        let (back, used) = decode_value(&bytes).unwrap();
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!(skip_value(&bytes).unwrap(), bytes.len());
        prop_assert!(same(&back, &canonical(a)));
    }

    #[test]
    fn tuple_encoding_preserves_tuple_order(
        a in proptest::collection::vec(any_value(), 0..4),
        b in proptest::collection::vec(any_value(), 0..4),
    ) {
        let enc = |t: &[Value]| { let mut out = Vec::new(); for v in t { encode_value(&mut out, v); } out };
        let (a, b): (Vec<Value>, Vec<Value>) =
            (a.into_iter().map(canonical).collect(), b.into_iter().map(canonical).collect());
        prop_assert_eq!(enc(&a).cmp(&enc(&b)), tuple_order(&a, &b));
        let bytes = enc(&a);
        let mut pos = 0;
        for v in &a {
            let (back, used) = decode_value(&bytes[pos..]).unwrap();
            prop_assert!(same(&back, v));
            pos += used;
        }
        prop_assert_eq!(pos, bytes.len());
    }

    #[test]
    fn text_prefix_encoding_bounds_every_extension(p in "[ACGT\\x00]{0,5}", s in "[ACGT\\x00]{0,5}") {
        let mut lo = Vec::new();
        encode_bytes_prefix(&mut lo, p.as_bytes(), false);
        let mut hi = lo.clone();
        prop_assert!(prefix_successor(&mut hi));
        let full = encode(&Value::Text(format!("{p}{s}")));
        prop_assert!(full >= lo && full < hi);
        let other = encode(&Value::Text(s.clone()));
        prop_assert_eq!(other >= lo && other < hi, s.starts_with(p.as_str()));
    }

    #[test]
    fn damaged_keys_return_errors_not_panics(a in any_value(), cut in 0usize..20, flip in 0usize..20) {
        let bytes = encode(&a);
        let cut = cut.min(bytes.len());
        let _ = decode_value(&bytes[..cut]);
        let _ = skip_value(&bytes[..cut]);
        let mut flipped = bytes.clone();
        if let Some(b) = flipped.get_mut(flip) { *b ^= 0x5a; }
        let _ = decode_value(&flipped);
        let _ = skip_value(&flipped);
    }
}

#[test]
fn truncated_values_are_errors() {
    for v in [
        Value::Bool(true),
        Value::Int(5),
        Value::Double(1.5),
        Value::Text("ab\0c".into()),
        Value::Blob(vec![0, 1, 2]),
    ] {
        let bytes = encode(&v);
        for cut in 0..bytes.len() {
            assert!(decode_value(&bytes[..cut]).is_err(), "{v:?} cut at {cut}");
            assert!(skip_value(&bytes[..cut]).is_err(), "{v:?} cut at {cut}");
        }
    }
    assert!(decode_value(&[0x77]).is_err());
    assert!(
        decode_value(&[TAG_TEXT, 0xff, 0xfe, 0x00, 0x01]).is_err(),
        "invalid UTF-8"
    );
    assert!(
        decode_value(&[TAG_TEXT, b'a', 0x00, 0x07]).is_err(),
        "bad escape"
    );
}

#[test]
fn integers_sort_numerically_across_sign() {
    let mut keys: Vec<Vec<u8>> = [i64::MIN, -2, -1, 0, 1, 255, 256, i64::MAX]
        .iter()
        .map(|&i| encode(&Value::Int(i)))
        .collect();
    let sorted = keys.clone();
    keys.sort();
    assert_eq!(keys, sorted);
}

#[test]
fn prefix_successor_handles_trailing_ff() {
    let mut k = vec![1, 0xff, 0xff];
    assert!(prefix_successor(&mut k));
    assert_eq!(k, vec![2]);
    let mut k = vec![0xff];
    assert!(!prefix_successor(&mut k));
}
