//! Block handles, the footer, block trailers and per-block compression.
//!
//! Spec: `docs/format/sstable.md` (sections 2 and 6). Every constant of the format is defined
//! here once.
//!
//! ```text
//! block on disk := contents | compression: u8 | crc32c(contents ++ compression): u32 LE
//! lz4 contents  := uncompressed_len: varint | lz4 block
//! handle        := offset: varint | size: varint          (index block values, v1 and v2)
//! index value   := handle | entries: varint               (index block values, v3)
//! footer (64 B) := filter, properties, index handles: (offset u64 LE, size u64 LE) * 3
//!                  | format_version: u32 LE | crc32c(footer[0..52]): u32 LE | magic: u64 LE
//! ```

use std::path::Path;

use bytes::Bytes;

use crate::coding::{crc32c_parts, get_fixed32, get_fixed64, get_varint64, put_varint64};
use crate::error::{Error, Result};

/// Magic number closing every SSTable: the leading 64 bits of SHA-256("strata-sstable").
pub const TABLE_MAGIC: u64 = 0xdd52_6fc3_d45d_3aee;

/// A table's format version (footer `format_version`). Versions 1 and 2 differ only in how
/// block entries and the filter block are encoded (`docs/format/sstable.md` sections 3 and 4);
/// version 3 is version 2 with each data block's entry count in its index value (section 3,
/// "Index block"). This build reads all three.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TableFormat {
    /// Entries hold the encoded internal key (`user_key | trailer u64`), prefix-compressed
    /// as a whole (section 3.1).
    V1,
    /// Entries prefix-compress the user key only and store the sequence number as a varint,
    /// omitted when 0, with the kind in the value-length varint (section 3.2); the bloom
    /// filter is partitioned by key hash (section 4).
    V2,
    /// Version 2, and each index value carries the number of entries in its data block, so
    /// a count over whole blocks reads the index block alone. The default.
    #[default]
    V3,
}

impl TableFormat {
    /// The `format_version` field's value. DO NOT CHANGE: on disk.
    pub fn version(self) -> u32 {
        match self {
            TableFormat::V1 => 1,
            TableFormat::V2 => 2,
            TableFormat::V3 => 3,
        }
    }

    /// The format a `format_version` field names, if this build knows it.
    pub fn from_version(version: u32) -> Option<TableFormat> {
        match version {
            1 => Some(TableFormat::V1),
            2 => Some(TableFormat::V2),
            3 => Some(TableFormat::V3),
            _ => None,
        }
    }

    /// True if block entries are encoded as version 1's (section 3.1); versions 2 and 3
    /// share section 3.2's entries and filter layout.
    pub fn v1_entries(self) -> bool {
        self == TableFormat::V1
    }

    /// True if index values carry their data block's entry count (version 3).
    pub fn counts_block_entries(self) -> bool {
        self == TableFormat::V3
    }

    /// Every version this build knows, oldest first (for tests that cover each).
    pub const ALL: [TableFormat; 3] = [TableFormat::V1, TableFormat::V2, TableFormat::V3];
}

/// An index block entry's value: the data block's handle and, in [`TableFormat::V3`], the
/// number of entries in the block (`docs/format/sstable.md` section 3, "Index block").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexValue {
    /// Where the data block is.
    pub handle: BlockHandle,
    /// The number of entries in the data block (at least 1); `None` in versions 1 and 2.
    pub entries: Option<u64>,
}

impl IndexValue {
    /// Appends the encoding of `format` to `dst` (`entries` is written only in version 3).
    pub fn encode_into(&self, format: TableFormat, dst: &mut Vec<u8>) {
        self.handle.encode_into(dst);
        if format.counts_block_entries() {
            put_varint64(dst, self.entries.unwrap_or(0));
        }
    }

    /// Decodes a value of `format` that must span all of `src`; `None` on malformed input,
    /// trailing bytes, or (version 3) an entry count of 0.
    pub fn decode_exact(src: &[u8], format: TableFormat) -> Option<Self> {
        let (offset, n) = get_varint64(src)?;
        let (size, m) = get_varint64(src.get(n..)?)?;
        let handle = BlockHandle { offset, size };
        let rest = src.get(n + m..)?;
        if !format.counts_block_entries() {
            return rest.is_empty().then_some(IndexValue {
                handle,
                entries: None,
            });
        }
        let (entries, k) = get_varint64(rest)?;
        (k == rest.len() && entries > 0).then_some(IndexValue {
            handle,
            entries: Some(entries),
        })
    }
}

/// Bytes after every block's contents: compression type (1) + CRC32C (4).
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Size of the fixed footer at the end of every table, in bytes.
pub const FOOTER_LEN: usize = 64;

/// Offset of `format_version` inside the footer; the footer CRC covers `[0, this)`.
const FOOTER_VERSION_AT: usize = 48;
/// Offset of the footer CRC inside the footer.
const FOOTER_CRC_AT: usize = 52;
/// Offset of the magic number inside the footer.
const FOOTER_MAGIC_AT: usize = 56;

/// How a block's contents are stored. DO NOT CHANGE the byte values: they are on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompressionType {
    /// Stored as is.
    None,
    /// `uncompressed_len: varint` followed by an LZ4 block.
    Lz4,
}

impl From<CompressionType> for u8 {
    fn from(c: CompressionType) -> u8 {
        // DO NOT CHANGE: on-disk values.
        match c {
            CompressionType::None => 0,
            CompressionType::Lz4 => 1,
        }
    }
}

impl TryFrom<u8> for CompressionType {
    type Error = u8;

    fn try_from(byte: u8) -> Result<Self, u8> {
        match byte {
            0 => Ok(CompressionType::None),
            1 => Ok(CompressionType::Lz4),
            other => Err(other),
        }
    }
}

/// Where a block lives in a table file: `offset` of its first byte and `size` of its stored
/// contents, excluding the [`BLOCK_TRAILER_LEN`]-byte trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct BlockHandle {
    /// Byte offset of the block in the file.
    pub offset: u64,
    /// Length of the stored contents in bytes (trailer excluded).
    pub size: u64,
}

impl BlockHandle {
    /// Longest varint encoding of a handle, in bytes.
    pub const MAX_ENCODED_LEN: usize = 20;

    /// Builds a handle.
    pub fn new(offset: u64, size: u64) -> Self {
        BlockHandle { offset, size }
    }

    /// Appends the varint encoding (`offset: varint | size: varint`) to `dst`.
    pub fn encode_into(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// Offset one past the block's trailer, or `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }

    /// Checks that the block with its trailer lies within `[0, limit)`.
    ///
    /// # Errors
    /// [`Error::Corruption`] naming `file` and `at` (where the handle was read).
    pub fn check_within(&self, limit: u64, file: &Path, at: u64, what: &str) -> Result<()> {
        match self.end_with_trailer() {
            Some(end) if end <= limit => Ok(()),
            _ => Err(Error::corruption(
                file,
                at,
                format!(
                    "{what} handle (offset {}, size {}) points past the end of the block area ({limit} bytes)",
                    self.offset, self.size
                ),
            )),
        }
    }
}

/// The fixed-size footer: handles of the meta blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Footer {
    /// The filter block; `size == 0` means the table has none.
    pub filter: BlockHandle,
    /// The properties block.
    pub properties: BlockHandle,
    /// The index block.
    pub index: BlockHandle,
    /// How the table's block entries are encoded.
    pub format: TableFormat,
}

impl Footer {
    /// The 64-byte encoding.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = [0u8; FOOTER_LEN];
        let fields = [
            self.filter.offset,
            self.filter.size,
            self.properties.offset,
            self.properties.size,
            self.index.offset,
            self.index.size,
        ];
        for (chunk, v) in out.chunks_exact_mut(8).zip(fields) {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        out[FOOTER_VERSION_AT..FOOTER_CRC_AT].copy_from_slice(&self.format.version().to_le_bytes());
        let crc = crc32c_parts(&[&out[..FOOTER_VERSION_AT + 4]]);
        out[FOOTER_CRC_AT..FOOTER_MAGIC_AT].copy_from_slice(&crc.to_le_bytes());
        out[FOOTER_MAGIC_AT..].copy_from_slice(&TABLE_MAGIC.to_le_bytes());
        out
    }

    /// Decodes and checks a footer read at byte `at` of `file` (magic, CRC, version; handles
    /// within `[0, at)`).
    ///
    /// # Errors
    /// [`Error::Corruption`] for a short footer, a wrong magic or version, or a handle out of
    /// range; [`Error::ChecksumMismatch`] for a bad footer CRC.
    pub fn decode(src: &[u8], file: &Path, at: u64) -> Result<Footer> {
        let corrupt = |reason: String| Error::corruption(file, at, reason);
        if src.len() != FOOTER_LEN {
            return Err(corrupt(format!(
                "footer is {} bytes, expected {FOOTER_LEN}",
                src.len()
            )));
        }
        let field =
            |i: usize| get_fixed64(src, i * 8).ok_or_else(|| corrupt("short footer".into()));
        let magic =
            get_fixed64(src, FOOTER_MAGIC_AT).ok_or_else(|| corrupt("short footer".into()))?;
        if magic != TABLE_MAGIC {
            return Err(corrupt(format!(
                "bad magic {magic:#018x} (not an SSTable, or truncated)"
            )));
        }
        let stored_crc =
            get_fixed32(src, FOOTER_CRC_AT).ok_or_else(|| corrupt("short footer".into()))?;
        let actual_crc = crc32c_parts(&[src.get(..FOOTER_CRC_AT).unwrap_or_default()]);
        if stored_crc != actual_crc {
            return Err(Error::ChecksumMismatch {
                file: file.to_path_buf(),
                offset: at,
                expected: stored_crc,
                actual: actual_crc,
            });
        }
        let version =
            get_fixed32(src, FOOTER_VERSION_AT).ok_or_else(|| corrupt("short footer".into()))?;
        let Some(format) = TableFormat::from_version(version) else {
            return Err(corrupt(format!(
                "unsupported format version {version} (this build reads 1, 2 and 3)"
            )));
        };
        let footer = Footer {
            format,
            filter: BlockHandle::new(field(0)?, field(1)?),
            properties: BlockHandle::new(field(2)?, field(3)?),
            index: BlockHandle::new(field(4)?, field(5)?),
        };
        if footer.filter.size != 0 {
            footer.filter.check_within(at, file, at, "filter")?;
        }
        footer.properties.check_within(at, file, at, "properties")?;
        footer.index.check_within(at, file, at, "index")?;
        Ok(footer)
    }
}

/// Block compression with its state kept from block to block: the output buffer and LZ4's
/// hash table (`lz4_flex::block::CompressTable`), so a table builder neither allocates nor
/// zeroes either per block. `compress_into` allocated and zeroed an 8 KiB table, and the
/// buffer's 4.5 KiB were zeroed, for every 4 KiB block; keeping them made a JSON `strata
/// load` take 0.97x the CPU time (docs/benchmarks.md, "Block compression state kept").
///
/// `Compressor::default()` allocates nothing: the table is made by the first block compressed.
#[derive(Default)]
pub struct Compressor {
    /// Varint header and LZ4 output of the last block; its length only grows (bytes past the
    /// last output are stale, never read).
    out: Vec<u8>,
    table: Option<lz4_flex::block::CompressTable>,
}

impl std::fmt::Debug for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compressor")
            .field("out_capacity", &self.out.capacity())
            .finish_non_exhaustive()
    }
}

impl Compressor {
    /// Chooses how to store `raw`: LZ4 when `compress` is set and it saves at least 12.5%
    /// (`8 * stored <= 7 * raw`), else as is. Returns the compression type and the stored
    /// contents (in this compressor's buffer for LZ4, `raw` itself otherwise): for LZ4 the
    /// uncompressed length as a varint, then the LZ4 block (`docs/format/sstable.md`).
    pub fn compress<'a>(
        &'a mut self,
        raw: &'a [u8],
        compress: bool,
    ) -> (CompressionType, &'a [u8]) {
        if !compress || raw.is_empty() {
            return (CompressionType::None, raw);
        }
        let mut head = Vec::with_capacity(10);
        put_varint64(&mut head, raw.len() as u64);
        let header = head.len();
        let end = header + lz4_flex::block::get_maximum_output_size(raw.len());
        if self.out.len() < end {
            self.out.resize(end, 0);
        }
        self.out[..header].copy_from_slice(&head);
        let Ok(n) = lz4_flex::block::compress_into_with_table(
            raw,
            &mut self.out[header..end],
            self.table.get_or_insert_with(Default::default),
        ) else {
            return (CompressionType::None, raw);
        };
        let stored = header + n;
        let saves_enough = (stored as u128) * 8 <= (raw.len() as u128) * 7;
        if saves_enough {
            (CompressionType::Lz4, &self.out[..stored])
        } else {
            (CompressionType::None, raw)
        }
    }
}

/// The trailer for stored `contents` of type `compression`.
pub fn block_trailer(contents: &[u8], compression: CompressionType) -> [u8; BLOCK_TRAILER_LEN] {
    let ty = u8::from(compression);
    let crc = crc32c_parts(&[contents, &[ty]]);
    let mut t = [0u8; BLOCK_TRAILER_LEN];
    t[0] = ty;
    t[1..].copy_from_slice(&crc.to_le_bytes());
    t
}

/// Checks the trailer of a block read from disk (`stored` = contents + trailer, read at
/// `offset` of `file`) and returns its uncompressed contents.
///
/// # Errors
/// [`Error::ChecksumMismatch`] for a bad CRC; [`Error::Corruption`] for a short block, an
/// unknown compression type or an LZ4 failure.
pub fn decode_block(stored: Bytes, file: &Path, offset: u64) -> Result<Bytes> {
    decode_block_into(stored, file, offset, Vec::new())
}

/// [`decode_block`], decompressing into `spare` (whose contents are discarded and whose
/// capacity is reused): a scan that does not cache its blocks hands back the buffer of the
/// block it has finished with, instead of allocating a fresh one per block.
///
/// # Errors
/// As [`decode_block`].
pub(crate) fn decode_block_into(
    stored: Bytes,
    file: &Path,
    offset: u64,
    spare: Vec<u8>,
) -> Result<Bytes> {
    let corrupt = |reason: String| Error::corruption(file, offset, reason);
    let Some(size) = stored.len().checked_sub(BLOCK_TRAILER_LEN) else {
        return Err(corrupt(format!(
            "block of {} bytes has no trailer",
            stored.len()
        )));
    };
    let contents = stored.slice(..size);
    let ty = *stored
        .get(size)
        .ok_or_else(|| corrupt("short block".into()))?;
    let expected = get_fixed32(&stored, size + 1).ok_or_else(|| corrupt("short block".into()))?;
    let actual = crc32c_parts(&[&contents, &[ty]]);
    if expected != actual {
        return Err(Error::ChecksumMismatch {
            file: file.to_path_buf(),
            offset,
            expected,
            actual,
        });
    }
    match CompressionType::try_from(ty) {
        Ok(CompressionType::None) => Ok(contents),
        Ok(CompressionType::Lz4) => decompress_lz4(&contents, spare).map_err(corrupt),
        Err(other) => Err(corrupt(format!("unknown compression type {other}"))),
    }
}

/// Decodes `uncompressed_len: varint | lz4 block` into `out`, whose old contents are
/// overwritten.
fn decompress_lz4(contents: &[u8], mut out: Vec<u8>) -> std::result::Result<Bytes, String> {
    let (len, n) = get_varint64(contents).ok_or("bad LZ4 uncompressed length")?;
    let body = contents.get(n..).ok_or("bad LZ4 uncompressed length")?;
    let limit = (body.len() as u64).saturating_mul(256).saturating_add(64);
    if len > limit {
        return Err(format!(
            "LZ4 uncompressed length {len} is impossible for {} compressed bytes",
            body.len()
        ));
    }
    let len = usize::try_from(len).map_err(|_| "LZ4 uncompressed length overflows")?;
    if out.capacity() > 0 && out.capacity() < len {
        // A reused buffer grows with an eighth to spare, so the slightly larger blocks that
        // follow fit without a reallocation each; a fresh one (a block for the cache) is exact.
        out.reserve(len + len / 8 - out.len());
    }
    // A reused buffer's old bytes are overwritten by the decoder, not zeroed first: only the
    // bytes past its old length are (the decoder takes an initialized slice). `written == len`
    // below checks that every byte was written.
    out.resize(len, 0);
    match lz4_flex::block::decompress_into(body, &mut out) {
        Ok(written) if written == len => Ok(Bytes::from(out)),
        Ok(written) => Err(format!(
            "LZ4 block decoded to {written} bytes, expected {len}"
        )),
        Err(e) => Err(format!("LZ4 decoding failed: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path() -> &'static Path {
        Path::new("t.sst")
    }

    #[test]
    fn compression_type_bytes_are_stable() {
        assert_eq!(u8::from(CompressionType::None), 0);
        assert_eq!(u8::from(CompressionType::Lz4), 1);
        assert_eq!(CompressionType::try_from(1), Ok(CompressionType::Lz4));
        assert_eq!(CompressionType::try_from(2), Err(2));
    }

    #[test]
    fn index_values_round_trip_and_reject_trailing_bytes() {
        let handle = BlockHandle::new(1 << 40, 4096);
        for format in TableFormat::ALL {
            let entries = format.counts_block_entries().then_some(300);
            let v = IndexValue { handle, entries };
            let mut buf = Vec::new();
            v.encode_into(format, &mut buf);
            assert!(buf.len() <= BlockHandle::MAX_ENCODED_LEN + 10);
            assert_eq!(IndexValue::decode_exact(&buf, format), Some(v));
            for cut in 0..buf.len() {
                assert_eq!(IndexValue::decode_exact(&buf[..cut], format), None);
            }
            let mut longer = buf.clone();
            longer.push(0);
            assert_eq!(IndexValue::decode_exact(&longer, format), None);
        }
        // Version 3 needs the count, and a count of at least 1; versions 1 and 2 refuse one.
        let mut two = Vec::new();
        handle.encode_into(&mut two);
        assert_eq!(IndexValue::decode_exact(&two, TableFormat::V3), None);
        let mut zero = two.clone();
        zero.push(0);
        assert_eq!(IndexValue::decode_exact(&zero, TableFormat::V3), None);
        let mut one = two.clone();
        one.push(1);
        assert_eq!(IndexValue::decode_exact(&one, TableFormat::V2), None);
        assert_eq!(
            IndexValue::decode_exact(&one, TableFormat::V3).and_then(|v| v.entries),
            Some(1)
        );
    }

    #[test]
    fn footer_round_trips_and_every_bit_flip_is_detected() -> Result<()> {
        let v1 = Footer {
            filter: BlockHandle::new(100, 20),
            properties: BlockHandle::new(125, 30),
            index: BlockHandle::new(160, 10),
            format: TableFormat::V1,
        };
        assert_eq!(v1.encode()[48..52], [1, 0, 0, 0]);
        assert_eq!(Footer::decode(&v1.encode(), path(), 1000)?, v1);
        let v2 = Footer {
            format: TableFormat::V2,
            ..v1
        };
        assert_eq!(v2.encode()[48..52], [2, 0, 0, 0]);
        assert_eq!(Footer::decode(&v2.encode(), path(), 1000)?, v2);
        let f = Footer {
            format: TableFormat::V3,
            ..v1
        };
        let enc = f.encode();
        assert_eq!(enc[48..52], [3, 0, 0, 0]);
        assert_eq!(Footer::decode(&enc, path(), 1000)?, f);
        for bit in 0..FOOTER_LEN * 8 {
            let mut bad = enc;
            bad[bit / 8] ^= 1 << (bit % 8);
            match Footer::decode(&bad, path(), 1000) {
                Err(e) => assert!(e.is_corruption(), "{e}"),
                Ok(_) => panic!("flipped bit {bit} accepted"),
            }
        }
        assert!(Footer::decode(&enc[..63], path(), 1000).is_err());
        // Handles past the footer offset are rejected.
        assert!(Footer::decode(&enc, path(), 170).is_err());
        Ok(())
    }

    #[test]
    fn unknown_format_versions_are_refused_even_with_a_valid_crc() {
        for version in [0u32, 4, u32::MAX] {
            let mut enc = Footer::default().encode();
            enc[48..52].copy_from_slice(&version.to_le_bytes());
            let crc = crc32c_parts(&[&enc[..52]]);
            enc[52..56].copy_from_slice(&crc.to_le_bytes());
            let err = Footer::decode(&enc, path(), 1000).map(|_| ()).unwrap_err();
            assert!(
                err.to_string().contains("unsupported format version"),
                "{err}"
            );
        }
    }

    /// One compressor across blocks of different sizes and contents (the LZ4 table grows to
    /// 32-bit entries for a block of 64 KiB or more and stays so; the buffer keeps stale bytes
    /// past each output): every block decodes to its own contents.
    #[test]
    fn a_reused_compressor_round_trips_every_block() -> Result<()> {
        let mut compressor = Compressor::default();
        let mut compressed = 0;
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for (i, len) in [
            4096usize, 17, 100_000, 4096, 1, 70_000, 300, 4096, 65_535, 2,
        ]
        .into_iter()
        .enumerate()
        {
            // Text-like blocks: words from a small vocabulary, which LZ4 compresses.
            let mut raw = Vec::with_capacity(len + 16);
            while raw.len() < len {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let words: [&[u8]; 4] = [b"read ", b"count ", b"genome ", b"{\"key\": "];
                raw.extend_from_slice(words[(x % 4) as usize]);
                raw.push(b'0' + (i as u8));
            }
            raw.truncate(len);
            let (ty, stored) = compressor.compress(&raw, true);
            compressed += usize::from(ty == CompressionType::Lz4);
            let mut disk = stored.to_vec();
            disk.extend_from_slice(&block_trailer(&disk, ty));
            assert_eq!(
                &decode_block(Bytes::from(disk), path(), 0)?[..],
                &raw[..],
                "block {i}"
            );
        }
        // All but the blocks too short to save an eighth went through LZ4.
        assert_eq!(compressed, 7);
        Ok(())
    }

    #[test]
    fn lz4_kept_only_when_it_saves_an_eighth() -> Result<()> {
        let mut compressor = Compressor::default();
        let compressible = vec![7u8; 4096];
        let (ty, stored) = compressor.compress(&compressible, true);
        assert_eq!(ty, CompressionType::Lz4);
        let mut disk = stored.to_vec();
        disk.extend_from_slice(&block_trailer(&disk, ty));
        assert_eq!(
            &decode_block(Bytes::from(disk), path(), 0)?[..],
            &compressible[..]
        );

        // Pseudo-random bytes do not compress: stored raw.
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let random: Vec<u8> = (0..4096)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x.to_le_bytes()[0]
            })
            .collect();
        let (ty, stored) = compressor.compress(&random, true);
        assert_eq!(ty, CompressionType::None);
        assert_eq!(stored, &random[..]);
        let (ty, _) = compressor.compress(&compressible, false);
        assert_eq!(ty, CompressionType::None);
        Ok(())
    }

    #[test]
    fn bad_trailers_and_lz4_payloads_are_errors_not_panics() {
        let mut disk = b"hello".to_vec();
        disk.extend_from_slice(&block_trailer(b"hello", CompressionType::None));
        for bit in 0..disk.len() * 8 {
            let mut bad = disk.clone();
            bad[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_block(Bytes::from(bad), path(), 0).is_err());
        }
        assert!(decode_block(Bytes::from_static(b"abcd"), path(), 0).is_err());
        // Valid CRC, unknown compression type.
        let mut t = b"x".to_vec();
        let crc = crc32c_parts(&[b"x", &[9]]);
        t.push(9);
        t.extend_from_slice(&crc.to_le_bytes());
        assert!(decode_block(Bytes::from(t), path(), 0).is_err());
        // Valid CRC, garbage LZ4 payloads (random and a huge claimed length).
        let mut seed: u32 = 1;
        for len in 0..200 {
            let mut body = Vec::new();
            put_varint64(&mut body, len as u64 * 3);
            for _ in 0..len {
                seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
                body.push(seed.to_le_bytes()[2]);
            }
            let mut b = body.clone();
            b.extend_from_slice(&block_trailer(&body, CompressionType::Lz4));
            let _ = decode_block(Bytes::from(b), path(), 0);
        }
        let mut body = Vec::new();
        put_varint64(&mut body, u64::MAX);
        body.extend_from_slice(&[0x10, 0x41]);
        let mut b = body.clone();
        b.extend_from_slice(&block_trailer(&body, CompressionType::Lz4));
        assert!(decode_block(Bytes::from(b), path(), 0).is_err());
    }
}
