//! Byte-level codecs shared by every on-disk format: LEB128 varints, fixed-width
//! little-endian integers and CRC32C.
//!
//! All multi-byte integers Strata writes are little-endian (see `docs/format/`). Decoders never
//! panic: they return `None` on truncated or overlong input and the caller turns that into
//! [`crate::Error::Corruption`] with the file and offset it knows.

/// Longest encoding of a `u64` varint, in bytes.
pub const MAX_VARINT64_LEN: usize = 10;

/// Appends `v` as an unsigned LEB128 varint (7 bits per byte, low group first).
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        #[expect(clippy::cast_possible_truncation, reason = "masked to 7 bits")]
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    #[expect(clippy::cast_possible_truncation, reason = "v < 0x80 here")]
    dst.push(v as u8);
}

/// Appends `v` as a varint (same encoding as [`put_varint64`]).
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Number of bytes [`put_varint64`] writes for `v`.
pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Decodes a varint from the front of `src`: `(value, bytes consumed)`, or `None` when the input
/// is truncated or longer than 10 bytes / overflows 64 bits.
///
/// Inlined for the one-byte case (values below 128: most lengths in block entries), as
/// LevelDB's `GetVarint32Ptr` is; longer varints take the loop.
#[inline]
pub fn get_varint64(src: &[u8]) -> Option<(u64, usize)> {
    match src.first() {
        Some(&b) if b < 0x80 => Some((u64::from(b), 1)),
        _ => get_varint64_long(src),
    }
}

fn get_varint64_long(src: &[u8]) -> Option<(u64, usize)> {
    let mut result: u64 = 0;
    for (i, &byte) in src.iter().enumerate().take(MAX_VARINT64_LEN) {
        let part = u64::from(byte & 0x7f);
        let shift = 7 * u32::try_from(i).ok()?;
        if shift == 63 && part > 1 {
            return None;
        }
        result |= part << shift;
        if byte & 0x80 == 0 {
            return Some((result, i + 1));
        }
    }
    None
}

/// Decodes a varint that must fit in 32 bits.
pub fn get_varint32(src: &[u8]) -> Option<(u32, usize)> {
    let (v, n) = get_varint64(src)?;
    Some((u32::try_from(v).ok()?, n))
}

/// Appends `v` as 4 little-endian bytes.
pub fn put_fixed32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
pub fn put_fixed64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Reads 4 little-endian bytes at `src[pos..]`, or `None` if out of range.
pub fn get_fixed32(src: &[u8], pos: usize) -> Option<u32> {
    let bytes = src.get(pos..pos.checked_add(4)?)?;
    Some(u32::from_le_bytes(bytes.try_into().ok()?))
}

/// Reads 8 little-endian bytes at `src[pos..]`, or `None` if out of range.
pub fn get_fixed64(src: &[u8], pos: usize) -> Option<u64> {
    let bytes = src.get(pos..pos.checked_add(8)?)?;
    Some(u64::from_le_bytes(bytes.try_into().ok()?))
}

/// Appends a varint length followed by `bytes`.
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// Decodes a varint-length-prefixed slice from the front of `src`: `(slice, bytes consumed)`.
pub fn get_length_prefixed(src: &[u8]) -> Option<(&[u8], usize)> {
    let (len, n) = get_varint64(src)?;
    let len = usize::try_from(len).ok()?;
    let end = n.checked_add(len)?;
    Some((src.get(n..end)?, end))
}

/// CRC32C (Castagnoli) of `data`, as stored in every Strata checksum field.
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// CRC32C of the concatenation of `parts`, without copying them together.
pub fn crc32c_parts(parts: &[&[u8]]) -> u32 {
    parts
        .iter()
        .fold(0, |crc, part| crc32c::crc32c_append(crc, part))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trips_edge_values() {
        for v in [
            0,
            1,
            127,
            128,
            255,
            300,
            u64::from(u32::MAX),
            u64::MAX - 1,
            u64::MAX,
        ] {
            let mut buf = Vec::new();
            put_varint64(&mut buf, v);
            assert_eq!(buf.len(), varint_len(v));
            assert_eq!(get_varint64(&buf), Some((v, buf.len())));
            // Every strict prefix is truncated input.
            for cut in 0..buf.len() {
                assert_eq!(get_varint64(&buf[..cut]), None);
            }
        }
    }

    #[test]
    fn varint_rejects_overflow_and_overlong() {
        assert_eq!(get_varint64(&[0xff; 11]), None);
        assert_eq!(
            get_varint64(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]),
            None
        );
        assert_eq!(get_varint32(&[0xff, 0xff, 0xff, 0xff, 0x1f]), None);
    }

    #[test]
    fn fixed_and_length_prefixed_round_trip() {
        let mut buf = Vec::new();
        put_fixed32(&mut buf, 0xdead_beef);
        put_fixed64(&mut buf, 0x0123_4567_89ab_cdef);
        put_length_prefixed(&mut buf, b"hello");
        assert_eq!(get_fixed32(&buf, 0), Some(0xdead_beef));
        assert_eq!(get_fixed64(&buf, 4), Some(0x0123_4567_89ab_cdef));
        assert_eq!(get_length_prefixed(&buf[12..]), Some((&b"hello"[..], 6)));
        assert_eq!(get_length_prefixed(&buf[12..17]), None);
        assert_eq!(get_fixed64(&buf, 11), None);
    }

    #[test]
    fn crc_parts_equals_whole() {
        assert_eq!(crc32c_parts(&[b"abc", b"def"]), crc32c(b"abcdef"));
    }
}
