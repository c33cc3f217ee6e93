//! Redis glob patterns, as `KEYS` and `SCAN MATCH` use them.
//!
//! `*` matches any sequence, `?` one byte, `[abc]` / `[^abc]` / `[a-z]` a byte in (or not
//! in) a set, `\x` the byte `x` literally. An unterminated `[` class runs to the end of the
//! pattern. Matching is on bytes, case-sensitive, and runs in O(pattern × key) time (one
//! backtrack point, the last `*`), so hostile patterns cannot blow up.

/// True when `key` matches `pattern`.
///
/// The empty key matches only the patterns `*` and the empty pattern, as in Redis 7.0 (its
/// `stringmatchlen` compares nothing for an empty string, and `KEYS` and `SCAN` take `*`
/// alone as "every key"): `**` or `*[a]*`-style patterns that would match it here do not.
pub fn matches(pattern: &[u8], key: &[u8]) -> bool {
    if key.is_empty() {
        return pattern.is_empty() || pattern == b"*";
    }
    let (mut p, mut k) = (0usize, 0usize);
    // Position after the last `*` seen, and the key position it is currently matched up to.
    let mut star: Option<(usize, usize)> = None;
    while k < key.len() {
        let step = match pattern.get(p) {
            Some(b'*') => {
                star = Some((p + 1, k));
                p += 1;
                continue;
            }
            Some(b'?') => Some(p + 1),
            Some(b'[') => match_class(pattern, p, key.get(k).copied()),
            Some(b'\\') if p + 1 < pattern.len() => {
                (pattern.get(p + 1) == key.get(k)).then_some(p + 2)
            }
            Some(&c) => (Some(&c) == key.get(k)).then_some(p + 1),
            None => None,
        };
        match step {
            Some(next) => {
                p = next;
                k += 1;
            }
            None => match star {
                Some((after_star, matched_to)) => {
                    p = after_star;
                    k = matched_to + 1;
                    star = Some((after_star, matched_to + 1));
                }
                None => return false,
            },
        }
    }
    pattern
        .get(p..)
        .unwrap_or_default()
        .iter()
        .all(|&c| c == b'*')
}

/// The bytes every key matching `pattern` starts with: the pattern up to its first `*`, `?`
/// or `[`, with `\x` read as `x` (a trailing `\` is itself, as in [`matches()`]). `KEYS` and
/// `SCAN` scan only the keys with this prefix, which are contiguous in key order.
pub fn literal_prefix(pattern: &[u8]) -> Vec<u8> {
    let mut prefix = Vec::new();
    let mut p = 0;
    while let Some(&c) = pattern.get(p) {
        match c {
            b'*' | b'?' | b'[' => break,
            b'\\' if p + 1 < pattern.len() => {
                prefix.extend(pattern.get(p + 1));
                p += 2;
            }
            c => {
                prefix.push(c);
                p += 1;
            }
        }
    }
    prefix
}

/// Matches byte `c` against the class starting at `pattern[start] == b'['`; returns the
/// pattern position after the class when it matches.
fn match_class(pattern: &[u8], start: usize, c: Option<u8>) -> Option<usize> {
    let c = c?;
    let mut p = start + 1;
    let negate = pattern.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut hit = false;
    loop {
        match pattern.get(p) {
            None => break,
            Some(b']') => {
                p += 1;
                break;
            }
            Some(b'\\') if p + 1 < pattern.len() => {
                hit |= pattern.get(p + 1) == Some(&c);
                p += 2;
            }
            Some(&lo) if pattern.get(p + 1) == Some(&b'-') && p + 2 < pattern.len() => {
                let hi = pattern.get(p + 2).copied().unwrap_or(lo);
                let (lo, hi) = if lo <= hi { (lo, hi) } else { (hi, lo) };
                hit |= (lo..=hi).contains(&c);
                p += 3;
            }
            Some(&x) => {
                hit |= x == c;
                p += 1;
            }
        }
    }
    (hit != negate).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::{literal_prefix, matches};

    #[test]
    fn literal_prefixes_stop_at_the_first_wildcard() {
        for (pattern, prefix) in [
            (&b"read:ACGT*"[..], &b"read:ACGT"[..]),
            (b"a?c", b"a"),
            (b"ab[cd]*", b"ab"),
            (b"a\\*b*", b"a*b"),
            (b"exact", b"exact"),
            (b"*", b""),
            (b"", b""),
            (b"tail\\", b"tail\\"),
        ] {
            assert_eq!(
                literal_prefix(pattern),
                prefix,
                "{}",
                pattern.escape_ascii()
            );
        }
        // Every key a pattern matches starts with its prefix.
        for (pattern, key) in [
            (&b"a\\*b*"[..], &b"a*bc"[..]),
            (b"ab[cd]*", b"abd"),
            (b"tail\\", b"tail\\"),
        ] {
            assert!(matches(pattern, key));
            assert!(key.starts_with(&literal_prefix(pattern)));
        }
    }

    #[test]
    fn wildcards_classes_and_escapes() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
            ("", "", true),
            // Redis 7.0: the empty key matches nothing else, not even `**`.
            ("**", "", false),
            ("*?*", "", false),
            ("", "a", false),
            ("*", "anything", true),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h*llo", "heeeello", true),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("h[b-a]llo", "hallo", true),
            ("a\\*b", "a*b", true),
            ("a\\*b", "axb", false),
            ("user:*:name", "user:42:name", true),
            ("user:*:name", "user:42:names", false),
            ("*a*b*c", "xaybzc", true),
            ("*a*b*c", "xaybz", false),
            ("abc", "abcd", false),
            ("[abc", "b", true),
        ];
        for (pattern, key, want) in cases {
            assert_eq!(
                matches(pattern.as_bytes(), key.as_bytes()),
                *want,
                "{pattern} {key}"
            );
        }
    }

    #[test]
    fn hostile_pattern_is_fast() {
        let pattern = "*a".repeat(50) + "b";
        let key = "a".repeat(10_000);
        let start = std::time::Instant::now();
        assert!(!matches(pattern.as_bytes(), key.as_bytes()));
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
    }
}
