//! [`VersionEdit`]: a delta between two versions, and its codec (spec:
//! `docs/format/manifest.md`, section 2).
//!
//! ```text
//! edit   := field*                                    (the record's length ends it)
//! field  := tag: varint, then
//!   1 log_number        number: varint
//!   2 next_file_number  number: varint
//!   3 last_seqno        seqno: varint
//!   4 deleted_file      level: varint, number: varint
//!   5 new_file          level: varint, number: varint, size: varint,
//!                       smallest: bytes, largest: bytes,      (encoded internal keys)
//!                       smallest_seqno: varint, largest_seqno: varint,
//!                       num_entries: varint, num_deletions: varint
//!   8 new_file_global   the fields of tag 5, then global_seqno: varint   (an ingested table)
//!   6 keyspace_create   name: bytes            (creates the keyspace of tag 9)
//!   9 keyspace          id: varint             (the edit applies to it; absent = 0, default)
//!  10 keyspace_drop     (no payload)           (drops the keyspace of tag 9)
//!  11 max_keyspace_id   id: varint             (largest id ever assigned; never reused)
//!  12 table_id          id: bytes (16 bytes)   (the id of the new file just before it)
//!   7, 13..=31 reserved; 0 and everything else invalid
//! bytes  := len: varint, byte{len}
//! ```
#![deny(clippy::indexing_slicing)]

use std::fmt;

use crate::coding::{get_length_prefixed, get_varint64, put_length_prefixed, put_varint64};
use crate::sstable::TableId;
use crate::types::{FileNumber, InternalKey, InternalKeyRef, SeqNo};

/// Number of LSM levels, L0 through L6.
pub const NUM_LEVELS: usize = 7;

/// Field tags of an encoded edit. DO NOT CHANGE the byte values: they are on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    LogNumber,
    NextFileNumber,
    LastSeqNo,
    DeletedFile,
    NewFile,
    /// A new file with a global sequence number (an ingested table).
    NewFileGlobal,
    /// Creates the edit's keyspace under a name.
    KeyspaceCreate,
    /// The keyspace the edit applies to.
    Keyspace,
    /// Drops the edit's keyspace.
    KeyspaceDrop,
    /// The largest keyspace id ever assigned.
    MaxKeyspaceId,
    /// The table id of the new file just before it.
    TableId,
}

/// Tags 7 and 13..=31 are reserved for later formats (7: compaction pointer); 8..=12 are
/// assigned and matched before this range is looked at.
const RESERVED_TAGS: std::ops::RangeInclusive<u64> = 7..=31;

impl From<Tag> for u64 {
    fn from(tag: Tag) -> u64 {
        // DO NOT CHANGE: on-disk values.
        match tag {
            Tag::LogNumber => 1,
            Tag::NextFileNumber => 2,
            Tag::LastSeqNo => 3,
            Tag::DeletedFile => 4,
            Tag::NewFile => 5,
            Tag::NewFileGlobal => 8,
            Tag::KeyspaceCreate => 6,
            Tag::Keyspace => 9,
            Tag::KeyspaceDrop => 10,
            Tag::MaxKeyspaceId => 11,
            Tag::TableId => 12,
        }
    }
}

impl TryFrom<u64> for Tag {
    type Error = u64;

    fn try_from(v: u64) -> Result<Tag, u64> {
        match v {
            1 => Ok(Tag::LogNumber),
            2 => Ok(Tag::NextFileNumber),
            3 => Ok(Tag::LastSeqNo),
            4 => Ok(Tag::DeletedFile),
            5 => Ok(Tag::NewFile),
            8 => Ok(Tag::NewFileGlobal),
            6 => Ok(Tag::KeyspaceCreate),
            9 => Ok(Tag::Keyspace),
            10 => Ok(Tag::KeyspaceDrop),
            11 => Ok(Tag::MaxKeyspaceId),
            12 => Ok(Tag::TableId),
            other => Err(other),
        }
    }
}

/// What the manifest knows about one SSTable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// The table's file number (`NNNNNN.sst`).
    pub number: FileNumber,
    /// File size in bytes.
    pub size: u64,
    /// First entry of the table in internal-key order.
    pub smallest: InternalKey,
    /// Last entry of the table in internal-key order.
    pub largest: InternalKey,
    /// Smallest sequence number of any entry in the table.
    pub smallest_seqno: SeqNo,
    /// Largest sequence number of any entry in the table.
    pub largest_seqno: SeqNo,
    /// Number of entries (all kinds).
    pub num_entries: u64,
    /// Number of tombstones among the entries.
    pub num_deletions: u64,
    /// `Some(S)` for an ingested table (manifest tag 8): every entry is stored with sequence
    /// number 0 and read as `S` (`docs/format/sstable.md` section 9). `smallest`, `largest`,
    /// `smallest_seqno` and `largest_seqno` then describe the entries as read, at `S`. `None`
    /// for every table written by a flush or compaction.
    pub global_seqno: Option<SeqNo>,
    /// The id in the table's properties (manifest tag 12), compared with the file whenever it
    /// is opened; `None` for tables written before table ids existed.
    pub table_id: Option<TableId>,
}

impl FileMeta {
    /// True if the table's user-key range `[smallest.user_key, largest.user_key]` intersects
    /// `[lo, hi]` (`None` = unbounded on that side).
    pub fn overlaps(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> bool {
        let after_hi = hi.is_some_and(|hi| &self.smallest.user_key[..] > hi);
        let before_lo = lo.is_some_and(|lo| &self.largest.user_key[..] < lo);
        !after_hi && !before_lo
    }

    /// True if `user_key` lies within the table's user-key range.
    pub fn contains_user_key(&self, user_key: &[u8]) -> bool {
        self.overlaps(Some(user_key), Some(user_key))
    }
}

/// A delta between two versions of one keyspace: counters to set, tables to remove, tables
/// to add; or the creation or drop of a keyspace. One encoded edit is one manifest record.
///
/// Applying an edit (see [`crate::version::Version::apply`]) removes the deleted files first,
/// then adds the new ones, so one edit can move a table between levels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// New `log_number`: WALs numbered below it are obsolete.
    pub log_number: Option<FileNumber>,
    /// New value of the file-number counter.
    pub next_file_number: Option<FileNumber>,
    /// New last sequence number.
    pub last_seqno: Option<SeqNo>,
    /// Tables to remove, as `(level, number)`.
    pub deleted_files: Vec<(usize, FileNumber)>,
    /// Tables to add, as `(level, metadata)`.
    pub new_files: Vec<(usize, FileMeta)>,
    /// The keyspace whose log number and tables the edit changes (0 = the default keyspace).
    pub keyspace: u32,
    /// `Some(name)`: the edit creates keyspace `keyspace` named `name` (UTF-8, 1..=255 bytes).
    pub keyspace_create: Option<String>,
    /// The edit drops keyspace `keyspace`; its tables leave the database.
    pub keyspace_drop: bool,
    /// Largest keyspace id ever assigned, so ids of dropped keyspaces are never reused.
    pub max_keyspace_id: Option<u32>,
}

impl VersionEdit {
    /// Records that table `f` is added at `level`.
    pub fn add_file(&mut self, level: usize, f: FileMeta) {
        debug_assert!(level < NUM_LEVELS, "level {level} out of range");
        self.new_files.push((level, f));
    }

    /// Records that table number `n` is removed from `level`.
    pub fn delete_file(&mut self, level: usize, n: FileNumber) {
        debug_assert!(level < NUM_LEVELS, "level {level} out of range");
        self.deleted_files.push((level, n));
    }

    /// True if the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        self.log_number.is_none()
            && self.next_file_number.is_none()
            && self.last_seqno.is_none()
            && self.deleted_files.is_empty()
            && self.new_files.is_empty()
            && self.keyspace_create.is_none()
            && !self.keyspace_drop
            && self.max_keyspace_id.is_none()
    }

    /// Appends the encoding of the edit to `dst`: scalar fields first (each only if set), then
    /// deleted files, then new files, in the edit's order.
    pub fn encode(&self, dst: &mut Vec<u8>) {
        if self.keyspace != 0 {
            put_varint64(dst, Tag::Keyspace.into());
            put_varint64(dst, u64::from(self.keyspace));
        }
        if let Some(name) = &self.keyspace_create {
            put_varint64(dst, Tag::KeyspaceCreate.into());
            put_length_prefixed(dst, name.as_bytes());
        }
        if self.keyspace_drop {
            put_varint64(dst, Tag::KeyspaceDrop.into());
        }
        if let Some(id) = self.max_keyspace_id {
            put_varint64(dst, Tag::MaxKeyspaceId.into());
            put_varint64(dst, u64::from(id));
        }
        if let Some(n) = self.log_number {
            put_varint64(dst, Tag::LogNumber.into());
            put_varint64(dst, n.0);
        }
        if let Some(n) = self.next_file_number {
            put_varint64(dst, Tag::NextFileNumber.into());
            put_varint64(dst, n.0);
        }
        if let Some(s) = self.last_seqno {
            put_varint64(dst, Tag::LastSeqNo.into());
            put_varint64(dst, s.0);
        }
        for &(level, number) in &self.deleted_files {
            put_varint64(dst, Tag::DeletedFile.into());
            put_varint64(dst, level as u64);
            put_varint64(dst, number.0);
        }
        for (level, f) in &self.new_files {
            let tag = if f.global_seqno.is_some() {
                Tag::NewFileGlobal
            } else {
                Tag::NewFile
            };
            put_varint64(dst, tag.into());
            put_varint64(dst, *level as u64);
            put_varint64(dst, f.number.0);
            put_varint64(dst, f.size);
            put_length_prefixed(dst, &f.smallest.as_ref().encode());
            put_length_prefixed(dst, &f.largest.as_ref().encode());
            put_varint64(dst, f.smallest_seqno.0);
            put_varint64(dst, f.largest_seqno.0);
            put_varint64(dst, f.num_entries);
            put_varint64(dst, f.num_deletions);
            if let Some(s) = f.global_seqno {
                put_varint64(dst, s.0);
            }
            if let Some(id) = &f.table_id {
                put_varint64(dst, Tag::TableId.into());
                put_length_prefixed(dst, &id.0);
            }
        }
    }

    /// Decodes one encoded edit (a whole manifest record payload).
    ///
    /// # Errors
    /// A description of the first problem, with its byte position in `src`: an unknown or
    /// reserved tag, a truncated or overlong varint, a truncated key, a malformed internal key,
    /// a level `>= NUM_LEVELS`, a sequence number above [`SeqNo::MAX`], or a scalar field given
    /// twice. The manifest reader wraps it in [`crate::Error::Corruption`] with the file and
    /// record offset. Never panics.
    pub fn decode(src: &[u8]) -> std::result::Result<VersionEdit, String> {
        let mut input = Input { src, pos: 0 };
        let mut edit = VersionEdit::default();
        let mut seen_keyspace = false;
        // The tag before this one, for tag 12 (which must follow a new file directly).
        let mut previous = None;
        while !input.is_empty() {
            let at = input.pos;
            let raw = input.varint("tag")?;
            let tag = Tag::try_from(raw).map_err(|t| {
                if RESERVED_TAGS.contains(&t) {
                    format!("reserved tag {t} at byte {at} (written by a newer format?)")
                } else {
                    format!("unknown tag {t} at byte {at}")
                }
            })?;
            match tag {
                Tag::LogNumber => {
                    let n = FileNumber(input.varint("log_number")?);
                    set_once(&mut edit.log_number, n, "log_number", at)?;
                }
                Tag::NextFileNumber => {
                    let n = FileNumber(input.varint("next_file_number")?);
                    set_once(&mut edit.next_file_number, n, "next_file_number", at)?;
                }
                Tag::LastSeqNo => {
                    let s = input.seqno("last_seqno")?;
                    set_once(&mut edit.last_seqno, s, "last_seqno", at)?;
                }
                Tag::DeletedFile => {
                    let level = input.level("deleted_file level")?;
                    let number = FileNumber(input.varint("deleted_file number")?);
                    edit.deleted_files.push((level, number));
                }
                Tag::NewFile | Tag::NewFileGlobal => {
                    let level = input.level("new_file level")?;
                    let mut meta = FileMeta {
                        number: FileNumber(input.varint("new_file number")?),
                        size: input.varint("new_file size")?,
                        smallest: input.internal_key("new_file smallest")?,
                        largest: input.internal_key("new_file largest")?,
                        smallest_seqno: input.seqno("new_file smallest_seqno")?,
                        largest_seqno: input.seqno("new_file largest_seqno")?,
                        num_entries: input.varint("new_file num_entries")?,
                        num_deletions: input.varint("new_file num_deletions")?,
                        global_seqno: None,
                        table_id: None,
                    };
                    if tag == Tag::NewFileGlobal {
                        meta.global_seqno = Some(input.seqno("new_file global_seqno")?);
                    }
                    edit.new_files.push((level, meta));
                }
                Tag::Keyspace => {
                    if seen_keyspace {
                        return Err(format!("keyspace given twice (second at byte {at})"));
                    }
                    seen_keyspace = true;
                    edit.keyspace = input.keyspace_id("keyspace")?;
                }
                Tag::KeyspaceCreate => {
                    let name = input.keyspace_name()?;
                    set_once(&mut edit.keyspace_create, name, "keyspace_create", at)?;
                }
                Tag::KeyspaceDrop => {
                    if edit.keyspace_drop {
                        return Err(format!("keyspace_drop given twice (second at byte {at})"));
                    }
                    edit.keyspace_drop = true;
                }
                Tag::MaxKeyspaceId => {
                    let id = input.keyspace_id("max_keyspace_id")?;
                    set_once(&mut edit.max_keyspace_id, id, "max_keyspace_id", at)?;
                }
                Tag::TableId => {
                    let id = input.table_id()?;
                    let file = edit
                        .new_files
                        .last_mut()
                        .filter(|_| matches!(previous, Some(Tag::NewFile | Tag::NewFileGlobal)))
                        .ok_or_else(|| {
                            format!("table_id at byte {at} does not follow a new file")
                        })?;
                    file.1.table_id = Some(id);
                }
            }
            previous = Some(tag);
        }
        Ok(edit)
    }
}

impl fmt::Display for VersionEdit {
    /// A one-line summary for logs: counters, deleted and added file numbers with levels.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "edit{{")?;
        if self.keyspace != 0 {
            write!(f, " keyspace={}", self.keyspace)?;
        }
        if let Some(name) = &self.keyspace_create {
            write!(f, " create={name:?}")?;
        }
        if self.keyspace_drop {
            write!(f, " drop")?;
        }
        if let Some(id) = self.max_keyspace_id {
            write!(f, " max_keyspace_id={id}")?;
        }
        if let Some(n) = self.log_number {
            write!(f, " log_number={n}")?;
        }
        if let Some(n) = self.next_file_number {
            write!(f, " next_file_number={n}")?;
        }
        if let Some(s) = self.last_seqno {
            write!(f, " last_seqno={s}")?;
        }
        for (level, n) in &self.deleted_files {
            write!(f, " -L{level}:{n}")?;
        }
        for (level, m) in &self.new_files {
            write!(f, " +L{level}:{}({}B", m.number, m.size)?;
            if let Some(s) = m.global_seqno {
                write!(f, " @{s}")?;
            }
            write!(f, ")")?;
        }
        write!(f, " }}")
    }
}

fn set_once<T>(slot: &mut Option<T>, v: T, what: &str, at: usize) -> Result<(), String> {
    if slot.is_some() {
        return Err(format!("{what} given twice (second at byte {at})"));
    }
    *slot = Some(v);
    Ok(())
}

/// A cursor over an encoded edit; every read checks bounds.
struct Input<'a> {
    src: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    fn is_empty(&self) -> bool {
        self.pos >= self.src.len()
    }

    fn rest(&self) -> &'a [u8] {
        self.src.get(self.pos..).unwrap_or_default()
    }

    fn varint(&mut self, what: &str) -> Result<u64, String> {
        let (v, n) = get_varint64(self.rest())
            .ok_or_else(|| format!("truncated or overlong varint ({what}) at byte {}", self.pos))?;
        self.pos += n;
        Ok(v)
    }

    fn keyspace_id(&mut self, what: &str) -> Result<u32, String> {
        let at = self.pos;
        let v = self.varint(what)?;
        u32::try_from(v).map_err(|_| format!("{what} {v} at byte {at} does not fit in 32 bits"))
    }

    fn keyspace_name(&mut self) -> Result<String, String> {
        let at = self.pos;
        let (bytes, n) = get_length_prefixed(self.rest())
            .ok_or_else(|| format!("truncated keyspace name at byte {at}"))?;
        self.pos += n;
        let name = std::str::from_utf8(bytes)
            .map_err(|_| format!("keyspace name at byte {at} is not UTF-8"))?;
        if name.is_empty() || name.len() > 255 {
            return Err(format!(
                "keyspace name at byte {at} is not 1 to 255 bytes long"
            ));
        }
        Ok(name.to_owned())
    }

    fn table_id(&mut self) -> Result<TableId, String> {
        let at = self.pos;
        let (bytes, n) = get_length_prefixed(self.rest())
            .ok_or_else(|| format!("truncated table_id at byte {at}"))?;
        let id = bytes
            .try_into()
            .map_err(|_| format!("table_id at byte {at} is not 16 bytes"))?;
        self.pos += n;
        Ok(TableId(id))
    }

    fn level(&mut self, what: &str) -> Result<usize, String> {
        let at = self.pos;
        let v = self.varint(what)?;
        usize::try_from(v)
            .ok()
            .filter(|&l| l < NUM_LEVELS)
            .ok_or_else(|| format!("{what} {v} at byte {at} is not below {NUM_LEVELS}"))
    }

    fn seqno(&mut self, what: &str) -> Result<SeqNo, String> {
        let at = self.pos;
        let v = self.varint(what)?;
        if v > SeqNo::MAX.0 {
            return Err(format!(
                "{what} {v} at byte {at} exceeds the largest sequence number"
            ));
        }
        Ok(SeqNo(v))
    }

    fn internal_key(&mut self, what: &str) -> Result<InternalKey, String> {
        let at = self.pos;
        let (bytes, n) = get_length_prefixed(self.rest())
            .ok_or_else(|| format!("truncated {what} at byte {at}"))?;
        let key = InternalKeyRef::decode(bytes)
            .ok_or_else(|| format!("malformed internal key ({what}) at byte {at}"))?;
        self.pos += n;
        Ok(key.to_owned())
    }
}

#[cfg(test)]
mod tests {
    #![expect(clippy::indexing_slicing, reason = "tests slice known buffers")]

    use super::*;
    use crate::types::ValueKind;
    use proptest::prelude::*;

    fn meta(number: u64, smallest: &[u8], largest: &[u8], seqs: (u64, u64)) -> FileMeta {
        FileMeta {
            number: FileNumber(number),
            size: 4096,
            smallest: InternalKey::new(smallest.to_vec(), SeqNo(seqs.0), ValueKind::Put),
            largest: InternalKey::new(largest.to_vec(), SeqNo(seqs.1), ValueKind::Delete),
            smallest_seqno: SeqNo(seqs.0),
            largest_seqno: SeqNo(seqs.1),
            num_entries: 20,
            num_deletions: 1,
            global_seqno: None,
            table_id: None,
        }
    }

    fn flush_edit() -> VersionEdit {
        let mut e = VersionEdit {
            log_number: Some(FileNumber(7)),
            next_file_number: Some(FileNumber(9)),
            last_seqno: Some(SeqNo(120)),
            ..Default::default()
        };
        e.add_file(0, meta(8, b"apple", b"cherry", (101, 120)));
        e
    }

    #[test]
    fn flush_edit_matches_documented_bytes() {
        // The worked example of docs/format/manifest.md, section 2.
        let mut buf = Vec::new();
        flush_edit().encode(&mut buf);
        let mut expected = vec![
            0x01, 0x07, 0x02, 0x09, 0x03, 0x78, 0x05, 0x00, 0x08, 0x80, 0x20,
        ];
        expected.push(0x0d);
        expected.extend_from_slice(b"apple");
        expected.extend_from_slice(&[0x01, 0x65, 0, 0, 0, 0, 0, 0]);
        expected.push(0x0e);
        expected.extend_from_slice(b"cherry");
        expected.extend_from_slice(&[0x00, 0x78, 0, 0, 0, 0, 0, 0]);
        expected.extend_from_slice(&[0x65, 0x78, 0x14, 0x01]);
        assert_eq!(buf, expected);
        assert_eq!(buf.len(), 44);
        assert_eq!(VersionEdit::decode(&buf), Ok(flush_edit()));
    }

    fn ingest_edit() -> VersionEdit {
        let s = SeqNo(121);
        let mut e = VersionEdit {
            next_file_number: Some(FileNumber(13)),
            last_seqno: Some(s),
            ..Default::default()
        };
        e.add_file(
            6,
            FileMeta {
                number: FileNumber(12),
                size: 65536,
                smallest: InternalKey::new(b"ant".to_vec(), s, ValueKind::Put),
                largest: InternalKey::new(b"zebra".to_vec(), s, ValueKind::Put),
                smallest_seqno: s,
                largest_seqno: s,
                num_entries: 1000,
                num_deletions: 0,
                global_seqno: Some(s),
                table_id: None,
            },
        );
        e
    }

    #[test]
    fn ingest_edit_matches_documented_bytes() {
        // The ingest example of docs/format/manifest.md, section 2.
        let mut buf = Vec::new();
        ingest_edit().encode(&mut buf);
        let mut expected = vec![0x02, 0x0d, 0x03, 0x79, 0x08, 0x06, 0x0c, 0x80, 0x80, 0x04];
        expected.push(0x0b);
        expected.extend_from_slice(b"ant");
        expected.extend_from_slice(&[0x01, 0x79, 0, 0, 0, 0, 0, 0]);
        expected.push(0x0d);
        expected.extend_from_slice(b"zebra");
        expected.extend_from_slice(&[0x01, 0x79, 0, 0, 0, 0, 0, 0]);
        expected.extend_from_slice(&[0x79, 0x79, 0xe8, 0x07, 0x00, 0x79]);
        assert_eq!(buf, expected);
        assert_eq!(buf.len(), 42);
        assert_eq!(VersionEdit::decode(&buf), Ok(ingest_edit()));
        // Cut before the global sequence number: truncated, not a tag-5 file.
        assert!(VersionEdit::decode(&buf[..buf.len() - 1]).is_err());
        // A global sequence number above SeqNo::MAX.
        let mut bad = buf[..buf.len() - 1].to_vec();
        put_varint64(&mut bad, SeqNo::MAX.0 + 1);
        assert!(VersionEdit::decode(&bad).is_err());
    }

    #[test]
    fn keyspace_edits_round_trip_with_documented_bytes() {
        let create = VersionEdit {
            keyspace: 3,
            keyspace_create: Some("reads".to_owned()),
            max_keyspace_id: Some(3),
            log_number: Some(FileNumber(7)),
            ..Default::default()
        };
        let mut buf = Vec::new();
        create.encode(&mut buf);
        let mut expected = vec![0x09, 0x03, 0x06, 0x05];
        expected.extend_from_slice(b"reads");
        expected.extend_from_slice(&[0x0b, 0x03, 0x01, 0x07]);
        assert_eq!(buf, expected);
        assert_eq!(VersionEdit::decode(&buf), Ok(create));
        let drop = VersionEdit {
            keyspace: 3,
            keyspace_drop: true,
            ..Default::default()
        };
        let mut buf = Vec::new();
        drop.encode(&mut buf);
        assert_eq!(buf, vec![0x09, 0x03, 0x0a]);
        assert_eq!(VersionEdit::decode(&buf), Ok(drop));
        // Twice the keyspace, a drop twice, an empty or non-UTF-8 name, an id over 32 bits.
        for bad in [
            &[0x09, 0x03, 0x09, 0x04][..],
            &[0x09, 0x03, 0x0a, 0x0a],
            &[0x06, 0x00],
            &[0x06, 0x01, 0xff],
            &[0x09, 0x80, 0x80, 0x80, 0x80, 0x10],
        ] {
            assert!(VersionEdit::decode(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn empty_edit_encodes_to_nothing_and_back() {
        let mut buf = Vec::new();
        VersionEdit::default().encode(&mut buf);
        assert!(buf.is_empty());
        assert_eq!(VersionEdit::decode(&buf), Ok(VersionEdit::default()));
        assert!(VersionEdit::default().is_empty());
    }

    #[test]
    fn every_truncation_of_an_edit_is_an_error() {
        let mut buf = Vec::new();
        let mut e = flush_edit();
        e.delete_file(3, FileNumber(300));
        e.encode(&mut buf);
        // Cutting at a field boundary yields a shorter valid edit; anywhere else is an error.
        let mut boundaries = vec![0, 2, 4, 6, 10];
        boundaries.push(buf.len());
        for cut in 0..buf.len() {
            let r = VersionEdit::decode(&buf[..cut]);
            if boundaries.contains(&cut) {
                assert!(r.is_ok(), "cut at {cut}: {r:?}");
            } else {
                assert!(r.is_err(), "cut at {cut} decoded: {r:?}");
            }
        }
    }

    #[test]
    fn unknown_reserved_and_zero_tags_are_errors() {
        for tag in [0_u64, 7, 13, 31, 32, 1000] {
            let mut buf = Vec::new();
            put_varint64(&mut buf, tag);
            put_varint64(&mut buf, 1);
            let err = VersionEdit::decode(&buf).expect_err("bad tag must fail");
            assert!(err.contains(&tag.to_string()), "{err}");
        }
    }

    #[test]
    fn table_id_follows_its_new_file_and_is_sixteen_bytes() {
        let id = TableId(*b"0123456789abcdef");
        let mut e = flush_edit();
        e.new_files[0].1.table_id = Some(id);
        e.add_file(1, meta(10, b"d", b"e", (1, 2)));
        let mut buf = Vec::new();
        e.encode(&mut buf);
        let decoded = VersionEdit::decode(&buf);
        assert_eq!(decoded, Ok(e.clone()));
        // Tag 12 then 16 bytes, right after the first new file.
        let mut plain = Vec::new();
        flush_edit().encode(&mut plain);
        assert_eq!(buf.get(plain.len()..plain.len() + 2), Some(&[12, 16][..]));
        // Alone, after a scalar field, after another table id, or of another length: errors.
        let mut alone = Vec::new();
        put_varint64(&mut alone, 12);
        put_length_prefixed(&mut alone, &id.0);
        assert!(VersionEdit::decode(&alone).is_err());
        let mut after_scalar = vec![0x01, 0x07];
        after_scalar.extend_from_slice(&alone);
        assert!(VersionEdit::decode(&after_scalar).is_err());
        let mut twice = plain.clone();
        twice.extend_from_slice(&alone);
        twice.extend_from_slice(&alone);
        assert!(VersionEdit::decode(&twice).is_err());
        let mut short = plain.clone();
        put_varint64(&mut short, 12);
        put_length_prefixed(&mut short, &id.0[..15]);
        assert!(VersionEdit::decode(&short).is_err());
    }

    #[test]
    fn out_of_range_values_are_errors() {
        // Level 7 in a deleted file and in a new file.
        assert!(VersionEdit::decode(&[0x04, 0x07, 0x01]).is_err());
        let mut buf = Vec::new();
        flush_edit().encode(&mut buf);
        buf[7] = 0x07;
        assert!(VersionEdit::decode(&buf).is_err());
        // A sequence number above SeqNo::MAX.
        let mut buf = vec![0x03];
        put_varint64(&mut buf, SeqNo::MAX.0 + 1);
        assert!(VersionEdit::decode(&buf).is_err());
        // A scalar given twice.
        assert!(VersionEdit::decode(&[0x01, 0x07, 0x01, 0x08]).is_err());
        // An internal key shorter than its trailer, and one with an unknown kind.
        let mut buf = vec![0x05, 0x00, 0x08, 0x01, 0x03];
        buf.extend_from_slice(b"abc");
        assert!(VersionEdit::decode(&buf).is_err());
        let mut buf = vec![0x05, 0x00, 0x08, 0x01, 0x08];
        buf.extend_from_slice(&[9, 0, 0, 0, 0, 0, 0, 0]);
        assert!(VersionEdit::decode(&buf).is_err());
    }

    #[test]
    fn display_summarises_the_edit() {
        let mut e = flush_edit();
        e.delete_file(1, FileNumber(4));
        assert_eq!(
            e.to_string(),
            "edit{ log_number=000007 next_file_number=000009 last_seqno=120 -L1:000004 \
             +L0:000008(4096B) }"
        );
    }

    #[test]
    fn overlap_checks_use_user_keys_only() {
        let m = meta(1, b"b", b"d", (5, 9));
        assert!(m.contains_user_key(b"b"));
        assert!(m.contains_user_key(b"d"));
        assert!(!m.contains_user_key(b"a"));
        assert!(!m.contains_user_key(b"d\x00"));
        assert!(m.overlaps(None, None));
        assert!(m.overlaps(Some(b"d"), None));
        assert!(!m.overlaps(None, Some(b"a")));
        assert!(m.overlaps(Some(b"a"), Some(b"b")));
    }

    pub(crate) fn arb_key() -> impl Strategy<Value = InternalKey> {
        (
            prop::collection::vec(any::<u8>(), 0..12),
            0..=SeqNo::MAX.0,
            prop_oneof![
                Just(ValueKind::Delete),
                Just(ValueKind::Put),
                Just(ValueKind::Merge)
            ],
        )
            .prop_map(|(k, s, kind)| InternalKey::new(k, SeqNo(s), kind))
    }

    fn arb_meta() -> impl Strategy<Value = FileMeta> {
        (
            any::<u64>(),
            any::<u64>(),
            arb_key(),
            arb_key(),
            0..=SeqNo::MAX.0,
            0..=SeqNo::MAX.0,
            any::<u64>(),
            any::<u64>(),
            (
                proptest::option::of(0..=SeqNo::MAX.0),
                proptest::option::of(any::<[u8; 16]>()),
            ),
        )
            .prop_map(|(n, size, a, b, s1, s2, ne, nd, (g, id))| FileMeta {
                number: FileNumber(n),
                size,
                smallest: a,
                largest: b,
                smallest_seqno: SeqNo(s1),
                largest_seqno: SeqNo(s2),
                num_entries: ne,
                num_deletions: nd,
                global_seqno: g.map(SeqNo),
                table_id: id.map(TableId),
            })
    }

    fn arb_edit() -> impl Strategy<Value = VersionEdit> {
        (
            proptest::option::of(any::<u64>()),
            proptest::option::of(any::<u64>()),
            proptest::option::of(0..=SeqNo::MAX.0),
            prop::collection::vec((0..NUM_LEVELS, any::<u64>()), 0..5),
            prop::collection::vec((0..NUM_LEVELS, arb_meta()), 0..5),
            (
                any::<u32>(),
                proptest::option::of("[a-z0-9_]{1,12}"),
                any::<bool>(),
                proptest::option::of(any::<u32>()),
            ),
        )
            .prop_map(
                |(log, next, last, del, new, (ks, create, drop, max))| VersionEdit {
                    log_number: log.map(FileNumber),
                    next_file_number: next.map(FileNumber),
                    last_seqno: last.map(SeqNo),
                    deleted_files: del.into_iter().map(|(l, n)| (l, FileNumber(n))).collect(),
                    new_files: new,
                    keyspace: ks,
                    keyspace_create: create,
                    keyspace_drop: drop,
                    max_keyspace_id: max,
                },
            )
    }

    proptest! {
        #[test]
        fn random_edits_round_trip(edit in arb_edit()) {
            let mut buf = Vec::new();
            edit.encode(&mut buf);
            prop_assert_eq!(VersionEdit::decode(&buf), Ok(edit));
        }

        #[test]
        fn damaged_encodings_never_panic(
            edit in arb_edit(),
            cut in any::<prop::sample::Index>(),
            flip in any::<prop::sample::Index>(),
            bit in 0_u8..8,
        ) {
            let mut buf = Vec::new();
            edit.encode(&mut buf);
            if !buf.is_empty() {
                let mut flipped = buf.clone();
                flipped[flip.index(buf.len())] ^= 1 << bit;
                // Either an error or some edit; it must differ from the original.
                prop_assert_ne!(VersionEdit::decode(&flipped), Ok(edit.clone()));
                let cut = cut.index(buf.len());
                // A strict prefix never decodes to the whole edit.
                prop_assert_ne!(VersionEdit::decode(&buf[..cut]), Ok(edit));
            }
        }

        #[test]
        fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = VersionEdit::decode(&bytes);
        }
    }
}
