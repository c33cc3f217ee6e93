//! Splitting input into `key<TAB>value` pairs and checking them, without a per-line allocation:
//! lines stay in the run's arena and are described by [`Entry`] offsets.

use strata_engine::merge::parse_counter;

/// Input format of `strata load`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// `key<TAB>value`: a put per pair; the last occurrence of a key wins.
    Tsv,
    /// `key<TAB>count` with a decimal integer count: the counts of a key are summed and added
    /// to the database's counter with the `CounterAdd` merge operator.
    Counts,
}

/// One parsed pair: where its line starts in the arena, and its key and value lengths. The
/// key is `arena[off .. off + klen]`, the value follows the tab. `prefix` holds the first 8
/// key bytes, big-endian, so most sort comparisons never touch the arena.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry {
    pub(crate) prefix: u64,
    pub(crate) off: usize,
    pub(crate) klen: u32,
    pub(crate) vlen: u32,
}

impl Entry {
    pub(crate) fn key<'a>(&self, arena: &'a [u8]) -> &'a [u8] {
        &arena[self.off..self.off + self.klen as usize]
    }

    pub(crate) fn value<'a>(&self, arena: &'a [u8]) -> &'a [u8] {
        let start = self.off + self.klen as usize + 1;
        &arena[start..start + self.vlen as usize]
    }

    /// Bytes of arena and entry list this pair costs, for the memory budget.
    pub(crate) const SIZE: usize = std::mem::size_of::<Entry>();
}

/// The first 8 bytes of `key` as a big-endian number (zero-padded): comparing two prefixes
/// orders keys as comparing the bytes would, up to the 8th byte.
#[expect(
    clippy::big_endian_bytes,
    reason = "a sort key: big-endian order is byte order"
)]
pub(crate) fn key_prefix(key: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = key.len().min(8);
    buf[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(buf)
}

/// Why a line was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BadLine {
    NoTab,
    /// The key's length and the limit, in bytes.
    KeyTooLong(usize, usize),
    ValueTooLong(usize, usize),
    NotUtf8,
    NotACount,
    /// A line not ended yet with no tab in its first `limit + 1` bytes: its key is over
    /// `limit` bytes (or it has no tab). The rest of the line is not read.
    KeyOverLimit(usize),
    /// A line not ended yet whose value already exceeds `limit` bytes. The rest of the line
    /// is not read.
    ValueOverLimit(usize),
    /// A decimal integer outside the signed 64-bit range.
    CountOutOfRange,
    /// A count followed by a carriage return: the file has CRLF line ends.
    CountWithCr,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadLine::NoTab => write!(f, "no tab between key and value"),
            BadLine::KeyTooLong(n, max) => {
                write!(f, "key of {n} bytes exceeds the limit of {max} bytes")
            }
            BadLine::ValueTooLong(n, max) => {
                write!(f, "value of {n} bytes exceeds the limit of {max} bytes")
            }
            BadLine::KeyOverLimit(max) => write!(
                f,
                "no tab in the first {} bytes: the key exceeds the limit of {max} bytes (or \
                 the line has no tab; the line was not read to its end)",
                max + 1
            ),
            BadLine::ValueOverLimit(max) => write!(
                f,
                "value exceeds the limit of {max} bytes (the line was not read to its end)"
            ),
            BadLine::NotUtf8 => write!(f, "key or value is not valid UTF-8 (--text)"),
            BadLine::NotACount => write!(f, "count is not a decimal integer"),
            BadLine::CountOutOfRange => write!(
                f,
                "count is out of the signed 64-bit range ({} ..= {})",
                i64::MIN,
                i64::MAX
            ),
            BadLine::CountWithCr => write!(
                f,
                "count is followed by a carriage return: the file has CRLF (Windows) line ends; \
                 convert them first (`tr -d '\\r'`)"
            ),
        }
    }
}

/// What makes a line acceptable.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    pub(crate) format: Format,
    pub(crate) text: bool,
    pub(crate) max_value_size: usize,
    /// Longest key in bytes: `MAX_KEY_SIZE`, less the prefix `--resp-keys` adds.
    pub(crate) max_key_size: usize,
}

impl Rules {
    /// Splits one line (without its newline) at its first tab and checks it. Returns the key
    /// length.
    pub(crate) fn check(&self, line: &[u8]) -> Result<usize, BadLine> {
        let tab = memchr::memchr(b'\t', line).ok_or(BadLine::NoTab)?;
        let (key, value) = (&line[..tab], &line[tab + 1..]);
        if key.len() > self.max_key_size {
            return Err(BadLine::KeyTooLong(key.len(), self.max_key_size));
        }
        if value.len() > self.max_value_size || u32::try_from(value.len()).is_err() {
            return Err(BadLine::ValueTooLong(value.len(), self.max_value_size));
        }
        if self.text && std::str::from_utf8(line).is_err() {
            return Err(BadLine::NotUtf8);
        }
        if self.format == Format::Counts && parse_counter(value).is_none() {
            return Err(match value.strip_suffix(b"\r") {
                Some(count) if parse_counter(count).is_some() => BadLine::CountWithCr,
                _ if is_decimal_integer(value) => BadLine::CountOutOfRange,
                _ => BadLine::NotACount,
            });
        }
        Ok(tab)
    }

    /// For a line read a piece at a time: why no line that starts with `len` bytes (no
    /// newline among them) can be good, its first tab at `tab` (`None`: no tab yet), so it can
    /// be refused before the rest is read. `None` while it may still be good.
    pub(crate) fn refuse_unended(&self, len: usize, tab: Option<usize>) -> Option<BadLine> {
        match tab {
            None if len > self.max_key_size => Some(BadLine::KeyOverLimit(self.max_key_size)),
            Some(tab) if len - tab - 1 > self.max_value_size => {
                Some(BadLine::ValueOverLimit(self.max_value_size))
            }
            _ => None,
        }
    }

    /// Checks the line `line` that starts at `off` in its arena, as [`Rules::check`] does,
    /// and describes it as an [`Entry`] (its sort prefix not set yet).
    pub(crate) fn entry(&self, line: &[u8], off: usize) -> Result<Entry, BadLine> {
        let klen = self.check(line)?;
        // `check` bounds both lengths; these conversions cannot fail past it.
        let vlen = line.len() - klen - 1;
        Ok(Entry {
            prefix: 0,
            off,
            klen: u32::try_from(klen).map_err(|_| BadLine::KeyTooLong(klen, self.max_key_size))?,
            vlen: u32::try_from(vlen)
                .map_err(|_| BadLine::ValueTooLong(vlen, self.max_value_size))?,
        })
    }
}

/// True for an optional `-` and then digits without a leading zero (the form
/// [`parse_counter`] takes), whatever its size: such a count that does not parse is out of the
/// `i64` range.
fn is_decimal_integer(bytes: &[u8]) -> bool {
    let digits = bytes.strip_prefix(b"-").unwrap_or(bytes);
    match digits {
        [b'1'..=b'9', rest @ ..] => rest.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_engine::MAX_KEY_SIZE;

    fn rules(format: Format, text: bool) -> Rules {
        Rules {
            format,
            text,
            max_value_size: 8,
            max_key_size: MAX_KEY_SIZE,
        }
    }

    #[test]
    fn lines_split_at_the_first_tab() {
        let r = rules(Format::Tsv, false);
        assert_eq!(r.check(b"k\tv\tw"), Ok(1));
        assert_eq!(r.check(b"\t"), Ok(0));
        assert_eq!(r.check(b"kv"), Err(BadLine::NoTab));
        assert_eq!(r.check(b"k\t123456789"), Err(BadLine::ValueTooLong(9, 8)));
        let long = [vec![b'k'; MAX_KEY_SIZE + 1], b"\tv".to_vec()].concat();
        assert_eq!(
            r.check(&long),
            Err(BadLine::KeyTooLong(MAX_KEY_SIZE + 1, MAX_KEY_SIZE))
        );
        let prefixed = Rules {
            max_key_size: MAX_KEY_SIZE - 1,
            ..r
        };
        let at_limit = [vec![b'k'; MAX_KEY_SIZE], b"\tv".to_vec()].concat();
        assert_eq!(r.check(&at_limit), Ok(MAX_KEY_SIZE));
        assert_eq!(
            prefixed.check(&at_limit),
            Err(BadLine::KeyTooLong(MAX_KEY_SIZE, MAX_KEY_SIZE - 1))
        );
        assert_eq!(r.check(b"\xff\tv"), Ok(1));
        assert_eq!(
            rules(Format::Tsv, true).check(b"\xff\tv"),
            Err(BadLine::NotUtf8)
        );
    }

    #[test]
    fn counts_must_be_decimal_integers() {
        let r = rules(Format::Counts, false);
        assert_eq!(r.check(b"read\t12"), Ok(4));
        assert_eq!(r.check(b"read\t-3"), Ok(4));
        assert_eq!(r.check(b"read\t1.5"), Err(BadLine::NotACount));
        assert_eq!(r.check(b"read\t"), Err(BadLine::NotACount));
        assert_eq!(r.check(b"read\t12\r"), Err(BadLine::CountWithCr));
        let r = Rules {
            max_value_size: 64,
            ..r
        };
        assert_eq!(r.check(b"read\t9223372036854775807"), Ok(4));
        assert_eq!(r.check(b"read\t-9223372036854775808"), Ok(4));
        assert_eq!(
            r.check(b"read\t18446744073709551616"),
            Err(BadLine::CountOutOfRange)
        );
        assert_eq!(
            r.check(b"read\t-9223372036854775809"),
            Err(BadLine::CountOutOfRange)
        );
        assert_eq!(r.check(b"read\t012"), Err(BadLine::NotACount));
        assert!(
            BadLine::CountOutOfRange
                .to_string()
                .contains("out of the signed 64-bit range")
        );
        assert!(BadLine::CountWithCr.to_string().contains("CRLF"));
    }

    #[test]
    fn an_unended_line_is_refused_once_no_good_line_can_start_so() {
        let r = Rules {
            max_key_size: 4,
            ..rules(Format::Tsv, false)
        };
        assert_eq!(r.refuse_unended(4, None), None);
        assert_eq!(r.refuse_unended(5, None), Some(BadLine::KeyOverLimit(4)));
        // Key of 4 bytes, tab, 8 bytes of value: still good; one more is not.
        assert_eq!(r.refuse_unended(13, Some(4)), None);
        assert_eq!(
            r.refuse_unended(14, Some(4)),
            Some(BadLine::ValueOverLimit(8))
        );
        assert_eq!(
            r.refuse_unended(10, Some(0)),
            Some(BadLine::ValueOverLimit(8))
        );
        assert!(
            BadLine::KeyOverLimit(4)
                .to_string()
                .starts_with("no tab in the first 5 bytes")
        );
    }

    #[test]
    fn prefixes_order_like_bytes() {
        assert!(key_prefix(b"a") < key_prefix(b"b"));
        assert!(key_prefix(b"") < key_prefix(b"\x00\x01"));
        assert_eq!(key_prefix(b"abcdefgh1"), key_prefix(b"abcdefgh2"));
    }
}
