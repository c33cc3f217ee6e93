//! Tests for the WAL writer and reader (spec: `docs/format/wal.md`).

use std::path::{Path, PathBuf};

use anyhow::{Context, bail, ensure};
use proptest::prelude::*;
use rand::{Rng, SeedableRng, rngs::StdRng};

use super::*;
use crate::Error;

const B: u64 = BLOCK_SIZE as u64;
const H: u64 = HEADER_SIZE as u64;

/// Payload of `len` bytes that differs from record to record (`tag`).
fn payload(tag: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| tag.wrapping_mul(31).wrapping_add((i % 251) as u8))
        .collect()
}

/// Where a record appended at file length `len` starts (after any trailer).
fn record_start(len: u64) -> u64 {
    if B - len % B < H {
        len.next_multiple_of(B)
    } else {
        len
    }
}

/// Writes `records` to a new log at `dir/name`; returns its path and each record's offset.
fn write_log(dir: &Path, name: &str, records: &[Vec<u8>]) -> anyhow::Result<(PathBuf, Vec<u64>)> {
    let path = dir.join(name);
    let mut writer = Writer::create(&crate::fs::OsFs, &path)?;
    let mut offsets = Vec::new();
    for record in records {
        offsets.push(record_start(writer.len()));
        writer.add_record(record)?;
    }
    writer.sync()?;
    ensure!(writer.len() == std::fs::metadata(&path)?.len());
    Ok((path, offsets))
}

/// Every outcome up to and including the first `Eof`.
fn read_all(path: &Path) -> anyhow::Result<Vec<ReadOutcome>> {
    let mut reader = Reader::open(&crate::fs::OsFs, path)?;
    let mut out = Vec::new();
    loop {
        let outcome = reader.next_outcome()?;
        let eof = outcome == ReadOutcome::Eof;
        out.push(outcome);
        if eof {
            // Eof is sticky.
            ensure!(reader.next_outcome()? == ReadOutcome::Eof);
            return Ok(out);
        }
        ensure!(out.len() < 1_000_000, "reader does not terminate");
    }
}

fn record(offset: u64, payload: &[u8]) -> ReadOutcome {
    ReadOutcome::Record {
        offset,
        payload: payload.to_vec(),
    }
}

fn records(offsets: &[u64], payloads: &[Vec<u8>]) -> Vec<ReadOutcome> {
    offsets
        .iter()
        .zip(payloads)
        .map(|(&o, p)| record(o, p))
        .collect()
}

/// Checks that `outcome` is a `Bad` at `offset` with the given `torn`; returns its reason.
fn expect_bad(outcome: Option<&ReadOutcome>, offset: u64, torn: bool) -> anyhow::Result<String> {
    match outcome {
        Some(ReadOutcome::Bad {
            offset: o,
            reason,
            torn: t,
        }) if *o == offset && *t == torn => Ok(reason.clone()),
        other => bail!("expected Bad {{ offset: {offset}, torn: {torn} }}, got {other:?}"),
    }
}

/// One raw fragment with a correct checksum.
fn raw_fragment(type_byte: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = fragment_crc(type_byte, payload).to_le_bytes().to_vec();
    out.extend_from_slice(
        &u16::try_from(payload.len())
            .unwrap_or(u16::MAX)
            .to_le_bytes(),
    );
    out.push(type_byte);
    out.extend_from_slice(payload);
    out
}

#[test]
fn record_type_bytes_are_stable() {
    let all = [
        (RecordType::Full, 1),
        (RecordType::First, 2),
        (RecordType::Middle, 3),
        (RecordType::Last, 4),
    ];
    for (ty, byte) in all {
        assert_eq!(u8::from(ty), byte);
        assert_eq!(RecordType::try_from(byte), Ok(ty));
    }
    assert_eq!(RecordType::try_from(0), Err(0));
    assert_eq!(RecordType::try_from(5), Err(5));
}

#[test]
fn checksum_constants_match_the_spec() {
    assert_eq!(crate::coding::crc32c(b"123456789"), 0xe306_9283);
    for crc in [0, 1, 0xdead_beef, u32::MAX] {
        assert_eq!(unmask_crc(mask_crc(crc)), crc);
        assert_ne!(mask_crc(crc), crc);
    }
    // A zero-filled header never passes the check (spec §4).
    assert_eq!(fragment_crc(0, &[]), 0x4925_8fd2);
}

#[test]
fn empty_file_reads_as_eof() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (path, _) = write_log(dir.path(), "0.wal", &[])?;
    assert_eq!(read_all(&path)?, vec![ReadOutcome::Eof]);
    Ok(())
}

#[test]
fn empty_record_is_a_seven_byte_full_fragment() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let recs = vec![vec![], b"x".to_vec(), vec![]];
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    assert_eq!(offsets, vec![0, 7, 15]);
    let bytes = std::fs::read(&path)?;
    assert_eq!(bytes.len(), 22);
    assert_eq!(bytes[..7], raw_fragment(1, &[])[..]);
    let mut want = records(&offsets, &recs);
    want.push(ReadOutcome::Eof);
    assert_eq!(read_all(&path)?, want);
    Ok(())
}

#[test]
fn round_trip_of_many_records_of_random_sizes() -> anyhow::Result<()> {
    let seed: u64 = rand::rng().random();
    println!("seed = {seed}");
    let mut rng = StdRng::seed_from_u64(seed);
    let recs: Vec<Vec<u8>> = (0..300u32)
        .map(|i| {
            let len = match rng.random_range(0..10) {
                0 => 0,
                1..=6 => rng.random_range(1..200),
                7 | 8 => rng.random_range(200..BLOCK_SIZE),
                _ => rng.random_range(BLOCK_SIZE..4 * BLOCK_SIZE),
            };
            payload(i as u8, len)
        })
        .collect();
    let dir = tempfile::tempdir()?;
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    let mut want = records(&offsets, &recs);
    want.push(ReadOutcome::Eof);
    assert!(read_all(&path)? == want, "seed = {seed}");
    Ok(())
}

#[test]
fn record_exactly_filling_a_block_leaves_no_trailer() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let recs = vec![payload(1, 100), payload(2, BLOCK_SIZE - 114), payload(3, 5)];
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    assert_eq!(offsets, vec![0, 107, B]);
    assert_eq!(std::fs::metadata(&path)?.len(), B + 12);
    let mut want = records(&offsets, &recs);
    want.push(ReadOutcome::Eof);
    assert_eq!(read_all(&path)?, want);
    Ok(())
}

#[test]
fn header_never_starts_in_the_last_six_bytes_of_a_block() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for left in 1..HEADER_SIZE {
        // The first record ends `left` bytes before the block end.
        let recs = vec![payload(1, BLOCK_SIZE - HEADER_SIZE - left), payload(2, 10)];
        let (path, offsets) = write_log(dir.path(), &format!("{left}.wal"), &recs)?;
        assert_eq!(offsets, vec![0, B]);
        let bytes = std::fs::read(&path)?;
        assert_eq!(bytes.len() as u64, B + H + 10);
        assert!(bytes[BLOCK_SIZE - left..BLOCK_SIZE].iter().all(|&b| b == 0));
        let mut want = records(&offsets, &recs);
        want.push(ReadOutcome::Eof);
        assert_eq!(read_all(&path)?, want, "left = {left}");

        // A file ending inside the trailer ends cleanly after the first record.
        for cut in BLOCK_SIZE - left..=BLOCK_SIZE {
            std::fs::write(&path, &bytes[..cut])?;
            assert_eq!(
                read_all(&path)?,
                vec![record(0, &recs[0]), ReadOutcome::Eof],
                "left = {left}, cut = {cut}"
            );
        }
    }
    Ok(())
}

#[test]
fn seven_bytes_left_hold_an_empty_fragment() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let filler = payload(1, BLOCK_SIZE - 2 * HEADER_SIZE);
    // An empty record fits exactly; a non-empty one starts with an empty FIRST fragment.
    let recs = vec![filler.clone(), vec![], filler, payload(2, 50)];
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    assert_eq!(offsets, vec![0, B - H, B, 2 * B - H]);
    let bytes = std::fs::read(&path)?;
    let first = &bytes[2 * BLOCK_SIZE - HEADER_SIZE..2 * BLOCK_SIZE];
    assert_eq!(first, &raw_fragment(2, &[])[..]);
    let mut want = records(&offsets, &recs);
    want.push(ReadOutcome::Eof);
    assert_eq!(read_all(&path)?, want);
    Ok(())
}

#[test]
fn record_spanning_many_blocks_round_trips() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let recs = vec![payload(1, 10), payload(2, 200 * 1024), payload(3, 10)];
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    let bytes = std::fs::read(&path)?;
    // FIRST in block 0, MIDDLEs filling blocks 1.., LAST in block 6.
    assert_eq!(bytes[17 + 6], 2);
    for block in 1..6 {
        assert_eq!(bytes[block * BLOCK_SIZE + 6], 3, "block {block}");
    }
    assert_eq!(bytes[6 * BLOCK_SIZE + 6], 4);
    let mut want = records(&offsets, &recs);
    want.push(ReadOutcome::Eof);
    assert_eq!(read_all(&path)?, want);
    Ok(())
}

#[test]
fn worked_example_has_the_documented_layout() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let recs = vec![
        payload(b'A', 500),
        payload(b'B', 97_773),
        payload(b'C', 2_000),
    ];
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    assert_eq!(offsets, vec![0, 507, 98_304]);
    let bytes = std::fs::read(&path)?;
    assert_eq!(bytes.len(), 100_311);
    // (header offset, length, type) of every fragment in spec §7.
    let table = [
        (0, 500, 1),
        (507, 32_254, 2),
        (32_768, 32_761, 3),
        (65_536, 32_758, 4),
        (98_304, 2_000, 1),
    ];
    for (at, len, ty) in table {
        assert_eq!(u16::from_le_bytes([bytes[at + 4], bytes[at + 5]]), len);
        assert_eq!(bytes[at + 6], ty);
    }
    assert_eq!(bytes[98_301..98_304], [0, 0, 0]);
    let mut want = records(&offsets, &recs);
    want.push(ReadOutcome::Eof);
    assert_eq!(read_all(&path)?, want);

    // The two damage scenarios of the example.
    std::fs::write(&path, &bytes[..98_400])?;
    let got = read_all(&path)?;
    assert_eq!(got[..2], want[..2]);
    expect_bad(got.get(2), 98_304, true)?;
    assert_eq!(got[3..], [ReadOutcome::Eof]);

    let mut wiped = bytes.clone();
    wiped[BLOCK_SIZE..2 * BLOCK_SIZE].fill(0);
    std::fs::write(&path, &wiped)?;
    let got = read_all(&path)?;
    assert_eq!(got[0], want[0]);
    expect_bad(got.get(1), 507, false)?;
    assert_eq!(got[2..], want[2..]);
    Ok(())
}

/// Cuts the log at every byte from the end of the second-to-last record to the end of the last,
/// and checks the reader returns the intact prefix then a torn `Bad` (or a clean `Eof`).
fn check_every_tear(recs: &[Vec<u8>]) -> anyhow::Result<()> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path();
    let (path, offsets) = write_log(dir, "full.wal", recs)?;
    let bytes = std::fs::read(&path)?;
    let n = recs.len();
    let last_start = offsets[n - 1];
    let prev_end = usize::try_from(offsets[n - 2] + H + recs[n - 2].len() as u64)?;
    let cut_path = dir.join("cut.wal");
    let intact = records(&offsets[..n - 1], &recs[..n - 1]);
    for cut in prev_end..=bytes.len() {
        std::fs::write(&cut_path, &bytes[..cut])?;
        let got = read_all(&cut_path).with_context(|| format!("cut = {cut}"))?;
        let mut want = intact.clone();
        if cut == bytes.len() {
            want.push(record(last_start, &recs[n - 1]));
        } else if cut as u64 > last_start {
            expect_bad(got.get(n - 1), last_start, true).with_context(|| format!("cut {cut}"))?;
            want.push(got[n - 1].clone());
        }
        want.push(ReadOutcome::Eof);
        assert_eq!(got, want, "cut = {cut}");
    }
    Ok(())
}

#[test]
fn tail_torn_at_every_byte_of_the_last_record_is_reported_torn() -> anyhow::Result<()> {
    // The last record starts 30 bytes before a block end and spans into the next block.
    check_every_tear(&[
        payload(1, 10),
        payload(2, BLOCK_SIZE - 54),
        payload(3, 3_000),
    ])?;
    // The last record follows a 3-byte trailer.
    check_every_tear(&[payload(1, BLOCK_SIZE - 17), payload(4, 0), payload(5, 900)])?;
    // The last record is empty.
    check_every_tear(&[payload(1, 100), vec![]])
}

#[test]
fn tail_torn_inside_a_middle_fragment_is_torn() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let recs = vec![payload(1, 10), payload(2, 3 * BLOCK_SIZE)];
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    let bytes = std::fs::read(&path)?;
    for cut in [
        BLOCK_SIZE,
        BLOCK_SIZE + 3,
        BLOCK_SIZE + 500,
        2 * BLOCK_SIZE,
        3 * BLOCK_SIZE,
    ] {
        std::fs::write(&path, &bytes[..cut])?;
        let got = read_all(&path)?;
        assert_eq!(got[0], record(0, &recs[0]));
        expect_bad(got.get(1), offsets[1], true)?;
        assert_eq!(got.len(), 3, "cut = {cut}");
    }
    Ok(())
}

#[test]
fn wrong_length_field_is_bad_and_drops_the_rest_of_the_block() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // A, B, C in block 0; D's FIRST in block 0, its LAST and E in block 1.
    let recs = vec![
        payload(1, 10),
        payload(2, 10),
        payload(3, 10),
        payload(4, BLOCK_SIZE),
        payload(5, 10),
    ];
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    let bytes = std::fs::read(&path)?;
    let b_at = usize::try_from(offsets[1])?;
    for length in [0u16, 9, 11, 200, 32_761, u16::MAX] {
        let mut bad = bytes.clone();
        bad[b_at + 4..b_at + 6].copy_from_slice(&length.to_le_bytes());
        std::fs::write(&path, &bad)?;
        let got = read_all(&path)?;
        assert_eq!(got[0], record(offsets[0], &recs[0]), "length {length}");
        let reason = expect_bad(got.get(1), offsets[1], false)?;
        assert!(
            reason.contains("length") || reason.contains("checksum"),
            "{reason}"
        );
        // C and D (whose FIRST shares the damaged block) are lost; E is intact.
        assert_eq!(got[2..], [record(offsets[4], &recs[4]), ReadOutcome::Eof]);
    }

    // At the end of the file, nothing follows: torn.
    let (path, offsets) = write_log(dir.path(), "1.wal", &recs[..2])?;
    let mut bad = std::fs::read(&path)?;
    let b_at = usize::try_from(offsets[1])?;
    bad[b_at + 4..b_at + 6].copy_from_slice(&40_000u16.to_le_bytes());
    std::fs::write(&path, &bad)?;
    let got = read_all(&path)?;
    assert!(expect_bad(got.get(1), offsets[1], true)?.contains("bad fragment length"));
    assert_eq!(got.len(), 3);
    Ok(())
}

#[test]
fn flipping_any_bit_of_a_fragment_is_bad_never_a_wrong_payload() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // Target B in block 0; C after the damaged block survives.
    let recs = vec![
        payload(1, 10),
        payload(2, 12),
        payload(3, BLOCK_SIZE),
        payload(4, 10),
    ];
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    let bytes = std::fs::read(&path)?;
    let b_at = usize::try_from(offsets[1])?;
    for i in b_at..b_at + HEADER_SIZE + 12 {
        for bit in 0..8 {
            let mut bad = bytes.clone();
            bad[i] ^= 1 << bit;
            std::fs::write(&path, &bad)?;
            let got = read_all(&path)?;
            let ctx = format!("byte {i} bit {bit}: {got:?}");
            assert_eq!(got[0], record(offsets[0], &recs[0]), "{ctx}");
            expect_bad(got.get(1), offsets[1], false).context(ctx.clone())?;
            assert_eq!(
                got[2..],
                [record(offsets[3], &recs[3]), ReadOutcome::Eof],
                "{ctx}"
            );
        }
    }
    Ok(())
}

#[test]
fn unknown_type_byte_is_bad() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for type_byte in [0u8, 5, 0x80, 0xff] {
        let mut log = raw_fragment(1, b"first");
        log.extend(raw_fragment(type_byte, b"mystery"));
        log.resize(BLOCK_SIZE, 0);
        log.extend(raw_fragment(1, b"after"));
        let path = dir.path().join(format!("{type_byte}.wal"));
        std::fs::write(&path, &log)?;
        let got = read_all(&path)?;
        assert_eq!(got[0], record(0, b"first"));
        let reason = expect_bad(got.get(1), 12, false)?;
        assert!(reason.contains("unknown fragment type"), "{reason}");
        assert_eq!(got[2..], [record(B, b"after"), ReadOutcome::Eof]);
    }
    Ok(())
}

#[test]
fn wiped_middle_block_never_glues_two_records() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    // B: FIRST in block 0, MIDDLE = block 1, LAST in block 2; then C, D in block 2.
    let recs = vec![
        payload(1, 100),
        payload(2, 2 * BLOCK_SIZE + 100),
        payload(3, 30),
        payload(4, 40),
    ];
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    let mut bytes = std::fs::read(&path)?;
    bytes[BLOCK_SIZE..2 * BLOCK_SIZE].fill(0);
    std::fs::write(&path, &bytes)?;
    let got = read_all(&path)?;
    assert_eq!(got[0], record(offsets[0], &recs[0]));
    let reason = expect_bad(got.get(1), offsets[1], false)?;
    assert!(reason.contains("zero-filled"), "{reason}");
    assert_eq!(
        got[2..],
        [
            record(offsets[2], &recs[2]),
            record(offsets[3], &recs[3]),
            ReadOutcome::Eof
        ]
    );

    // X: FIRST in block 0, LAST in block 1; Y: FIRST in block 1, LAST in block 2; then Z.
    // Wiping block 1 must not glue X's FIRST to Y's LAST.
    let recs = vec![
        payload(5, BLOCK_SIZE - 1_000),
        payload(6, 2_000),
        payload(7, BLOCK_SIZE - 1_000),
        payload(8, 10),
    ];
    let (path, offsets) = write_log(dir.path(), "1.wal", &recs)?;
    assert!(offsets[1] < B && offsets[2] < 2 * B && offsets[3] > 2 * B);
    let mut bytes = std::fs::read(&path)?;
    bytes[BLOCK_SIZE..2 * BLOCK_SIZE].fill(0);
    std::fs::write(&path, &bytes)?;
    let got = read_all(&path)?;
    assert_eq!(got[0], record(offsets[0], &recs[0]));
    expect_bad(got.get(1), offsets[1], false)?;
    assert_eq!(got[2..], [record(offsets[3], &recs[3]), ReadOutcome::Eof]);
    Ok(())
}

#[test]
fn zero_filled_tail_is_one_torn_bad() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let recs = vec![payload(1, 100), payload(2, 200)];
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    let end = std::fs::metadata(&path)?.len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)?
        .set_len(3 * B + 77)?;
    let got = read_all(&path)?;
    assert_eq!(got[..2], records(&offsets, &recs)[..]);
    expect_bad(got.get(2), end, true)?;
    assert_eq!(got.len(), 4);
    Ok(())
}

#[test]
fn first_without_last_before_a_new_record_is_bad() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut log = raw_fragment(2, b"orphaned start");
    let second = log.len() as u64;
    log.extend(raw_fragment(1, b"whole"));
    let third = log.len() as u64;
    log.extend(raw_fragment(3, b"stray middle"));
    log.extend(raw_fragment(4, b"stray last"));
    let fifth = log.len() as u64;
    log.extend(raw_fragment(2, b"fi"));
    log.extend(raw_fragment(4, b"rst"));
    let path = dir.path().join("0.wal");
    std::fs::write(&path, &log)?;
    let got = read_all(&path)?;
    expect_bad(got.first(), 0, false)?;
    assert_eq!(got[1], record(second, b"whole"));
    let reason = expect_bad(got.get(2), third, false)?;
    assert!(
        reason.contains("orphan MIDDLE") && reason.contains("1 more"),
        "{reason}"
    );
    assert_eq!(got[3..], [record(fifth, b"first"), ReadOutcome::Eof]);
    Ok(())
}

#[test]
fn create_refuses_an_existing_file() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("0.wal");
    std::fs::write(&path, b"")?;
    assert!(matches!(
        Writer::create(&crate::fs::OsFs, &path),
        Err(Error::Io { .. })
    ));
    Ok(())
}

#[test]
fn open_append_continues_mid_block_and_in_a_trailer() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for first_len in [10, BLOCK_SIZE - HEADER_SIZE - 3, BLOCK_SIZE + 100] {
        let recs = vec![payload(1, first_len), payload(2, 40_000), vec![]];
        let path = dir.path().join(format!("{first_len}.wal"));
        let mut offsets = Vec::new();
        let mut len = 0;
        for rec in &recs {
            let mut writer = if len == 0 {
                Writer::create(&crate::fs::OsFs, &path)?
            } else {
                Writer::open_append(&crate::fs::OsFs, &path, len)?
            };
            assert_eq!(writer.len(), len);
            offsets.push(record_start(len));
            writer.add_record(rec)?;
            len = writer.len();
        }
        let mut want = records(&offsets, &recs);
        want.push(ReadOutcome::Eof);
        assert_eq!(read_all(&path)?, want, "first_len = {first_len}");
    }
    Ok(())
}

#[test]
fn open_append_after_truncating_a_torn_tail() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let recs = vec![payload(1, 10), payload(2, 50_000), payload(3, 5_000)];
    let (path, offsets) = write_log(dir.path(), "0.wal", &recs)?;
    let full = std::fs::metadata(&path)?.len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)?
        .set_len(full - 100)?;
    let got = read_all(&path)?;
    expect_bad(got.get(2), offsets[2], true)?;

    let mut writer = Writer::open_append(&crate::fs::OsFs, &path, offsets[2])?;
    assert_eq!(std::fs::metadata(&path)?.len(), offsets[2]);
    let replacement = payload(4, 20);
    writer.add_record(&replacement)?;
    writer.sync()?;
    let mut want = records(&offsets[..2], &recs[..2]);
    want.push(record(offsets[2], &replacement));
    want.push(ReadOutcome::Eof);
    assert_eq!(read_all(&path)?, want);

    assert!(matches!(
        Writer::open_append(&crate::fs::OsFs, &path, 1 << 20),
        Err(Error::InvalidArgument(_))
    ));
    Ok(())
}

#[cfg(target_os = "linux")]
#[test]
fn writer_is_poisoned_after_a_failed_write() -> anyhow::Result<()> {
    let path = Path::new("/dev/full");
    if !path.exists() {
        return Ok(());
    }
    let mut writer = Writer::open_append(&crate::fs::OsFs, path, 0)?;
    assert!(matches!(writer.add_record(b"x"), Err(Error::Io { .. })));
    assert!(matches!(
        writer.add_record(b"x"),
        Err(Error::Poisoned { .. })
    ));
    assert!(matches!(writer.sync(), Err(Error::Poisoned { .. })));
    assert_eq!(writer.len(), 0);
    Ok(())
}

/// Writes an optional first record of `start_len - 7` bytes (so the rest start at block offset
/// `start_len % BLOCK_SIZE`), then `records_in`, and reads everything back.
fn round_trip(records_in: &[Vec<u8>], start_len: usize) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut all = Vec::new();
    if start_len >= HEADER_SIZE {
        all.push(vec![9u8; start_len - HEADER_SIZE]);
    }
    all.extend(records_in.iter().cloned());
    let (path, offsets) = write_log(dir.path(), "0.wal", &all)?;
    let mut want = records(&offsets, &all);
    want.push(ReadOutcome::Eof);
    ensure!(read_all(&path)? == want, "round trip differs");
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn proptest_records_round_trip(
        recs in prop::collection::vec(
            prop_oneof![
                4 => prop::collection::vec(any::<u8>(), 0..64),
                2 => prop::collection::vec(any::<u8>(), 0..2 * BLOCK_SIZE),
            ],
            0..12,
        ),
        start_len in prop_oneof![Just(0usize), HEADER_SIZE..2 * BLOCK_SIZE],
    ) {
        let result = round_trip(&recs, start_len);
        prop_assert!(result.is_ok(), "{result:?}");
    }
}

#[test]
fn sync_with_nothing_appended_since_the_last_sync_does_no_io() -> crate::Result<()> {
    use crate::fs::{EIO, Fault, FaultOp, FileSystem, MemFs};
    let fs = MemFs::new();
    fs.create_dir_all(Path::new("/d"))
        .map_err(|e| Error::io("/d", e))?;
    let mut w = Writer::create(&fs, Path::new("/d/1.wal"))?;
    w.add_record(b"one")?;
    w.sync()?;
    fs.inject(Fault::new(FaultOp::Sync, EIO).sticky());
    let calls = fs.calls();
    w.sync()?;
    assert_eq!(fs.calls(), calls, "no fsync for nothing new");
    w.add_record(b"two")?;
    assert!(
        w.sync().is_err(),
        "new bytes are synced (and the fault reaches the caller)"
    );
    Ok(())
}

#[test]
fn a_prefix_read_sees_a_record_being_appended_as_a_torn_tail() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let recs = vec![payload(1, 100), payload(2, 300), payload(3, 50)];
    let (path, offsets) = write_log(dir.path(), "000001.log", &recs)?;
    // What a reader beside the writer saw: the second record half written.
    let end = offsets[1] + 100;
    let mut reader = Reader::open_prefix(&crate::fs::OsFs, &path, end)?;
    ensure!(reader.next_outcome()? == record(offsets[0], &recs[0]));
    expect_bad(Some(&reader.next_outcome()?), offsets[1], true)?;
    ensure!(reader.next_outcome()? == ReadOutcome::Eof);
    // The bytes appended since hold intact records; only the prefix read counts.
    let fs = crate::fs::OsFs;
    ensure!(scan::later_record_start(&fs, &path, offsets[1])? == Some(offsets[2]));
    ensure!(scan::later_record_start_before(&fs, &path, offsets[1], end)?.is_none());
    Ok(())
}
