//! Write-ahead log: records framed into 32 KiB blocks (spec: `docs/format/wal.md`).
//!
//! ```text
//! file     := block* last_block?          block = 32768 bytes, the last one may be shorter
//! block    := fragment* trailer?          trailer = 0x00{0..6}, when < 7 bytes are left
//! fragment := crc: u32 LE | length: u16 LE | type: u8 | payload: u8{length}
//! crc      := mask(crc32c(type | payload))
//! type     := 1 FULL | 2 FIRST | 3 MIDDLE | 4 LAST   (0 and 5..=255 are invalid)
//! record   := FULL | FIRST MIDDLE* LAST               (fragments in consecutive blocks)
//! ```
//!
//! [`Writer`] appends records; [`Reader`] streams them back and reports torn or damaged stretches
//! as [`ReadOutcome::Bad`]. WAL files (`NNNNNN.wal`, payload = an encoded `WriteBatch`) and the
//! manifest (`MANIFEST-NNNNNN`, payload = a version edit) share this framing.

pub mod reader;
pub mod scan;
pub mod writer;

#[cfg(test)]
mod tests;

pub use reader::{ReadOutcome, Reader};
pub use writer::Writer;

/// Size of a block, in bytes. Fragments never cross a block boundary.
pub const BLOCK_SIZE: usize = 32 * 1024;

/// Size of a fragment header, in bytes: `crc: u32 | length: u16 | type: u8`.
pub const HEADER_SIZE: usize = 7;

/// Largest payload of one fragment, in bytes (a whole block minus its header).
pub const MAX_FRAGMENT_PAYLOAD: usize = BLOCK_SIZE - HEADER_SIZE;

/// Added to the rotated CRC when masking (spec §4).
const CRC_MASK_DELTA: u32 = 0xa282_ead8;

/// Which part of a record a fragment holds. Stored as the header's type byte.
/// DO NOT CHANGE the byte values: they are on disk. 0 is reserved (zero-filled space reads as 0)
/// and 5..=255 are unknown to this version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RecordType {
    /// The whole record in one fragment.
    Full,
    /// The first fragment of a record spread over several blocks.
    First,
    /// An interior fragment; fills its whole block.
    Middle,
    /// The last fragment of a record spread over several blocks.
    Last,
}

impl From<RecordType> for u8 {
    fn from(ty: RecordType) -> u8 {
        // DO NOT CHANGE: on-disk values.
        match ty {
            RecordType::Full => 1,
            RecordType::First => 2,
            RecordType::Middle => 3,
            RecordType::Last => 4,
        }
    }
}

impl TryFrom<u8> for RecordType {
    /// The unknown byte.
    type Error = u8;

    fn try_from(byte: u8) -> Result<Self, u8> {
        match byte {
            1 => Ok(RecordType::Full),
            2 => Ok(RecordType::First),
            3 => Ok(RecordType::Middle),
            4 => Ok(RecordType::Last),
            other => Err(other),
        }
    }
}

/// Masks a CRC32C for storage (spec §4): rotate right by 15 bits, then add a constant.
pub fn mask_crc(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(CRC_MASK_DELTA)
}

/// Inverse of [`mask_crc`].
pub fn unmask_crc(masked: u32) -> u32 {
    masked.wrapping_sub(CRC_MASK_DELTA).rotate_left(15)
}

/// The value stored in a fragment's `crc` field: the masked CRC32C of `[type][payload]`.
pub fn fragment_crc(type_byte: u8, payload: &[u8]) -> u32 {
    mask_crc(crate::coding::crc32c_parts(&[&[type_byte], payload]))
}
