//! `strata load --resp HOST:PORT FILE`: sends a `key<TAB>value` file to a Redis-protocol
//! server (one `strata serve` node, or twemproxy in front of several: docs/scale-out.md) as
//! pipelined `SET key value` commands, or `INCRBY key count` with `--format counts`.
//!
//! Lines are read and checked as for a local load ([`Rules`]); commands go out in pipelines of
//! `--pipeline` (default 256), and every reply is checked before the next pipeline is sent:
//! `+OK` for SET, an integer for INCRBY. The first refused reply, or a bad line without
//! `--skip-bad`, stops the load with its line number.
//!
//! Unlike a local load this is **not atomic**: pairs sent before a failure stay written (the
//! error says how many were acknowledged), and loading the same file again rewrites the same
//! values (with `counts`, it adds the counts again). Duplicate keys keep input order, so the
//! last occurrence wins: a key repeated within one pipeline ends the pipeline first, so a
//! proxy with several connections to a server cannot reorder the two writes.

use std::collections::HashSet;
use std::hash::{BuildHasher, RandomState};
use std::io::BufRead;
use std::time::{Duration, Instant};

use anyhow::Context;
use redis::Value;

use super::client::{self, Expect};
use super::parse::{BadLine, Format, Rules};
use super::runs::BadLineError;
use super::{MAX_REPORTED_BAD_LINES, progress_bar};

/// How to send.
#[derive(Debug, Clone)]
pub(crate) struct RespConfig {
    pub(crate) rules: Rules,
    pub(crate) skip_bad: bool,
    /// Commands per pipeline (at least 1).
    pub(crate) pipeline_len: usize,
    /// Draw a progress bar on stderr.
    pub(crate) progress: bool,
}

/// What a load over RESP did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RespReport {
    /// `HOST:PORT` loaded into.
    pub(crate) target: String,
    /// Input bytes read.
    pub(crate) bytes: u64,
    /// Pairs sent and acknowledged (lines minus bad lines).
    pub(crate) pairs: u64,
    /// Bad lines skipped (`--skip-bad`).
    pub(crate) bad_lines: u64,
    /// Pipelines sent (round trips).
    pub(crate) pipelines: u64,
    pub(crate) elapsed: Duration,
}

impl std::fmt::Display for RespReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        #[expect(clippy::cast_precision_loss, reason = "rates for display")]
        let (pairs, bytes) = (self.pairs as f64, self.bytes as f64);
        write!(
            f,
            "loaded {} pairs ({:.1} MB) into {} in {:.2} s with {} pipelines: {:.0} pairs/s, \
             {:.1} MB/s",
            self.pairs,
            bytes / 1e6,
            self.target,
            secs,
            self.pipelines,
            pairs / secs,
            bytes / 1e6 / secs
        )?;
        if self.bad_lines > 0 {
            write!(f, "; {} bad lines skipped", self.bad_lines)?;
        }
        Ok(())
    }
}

/// One pipeline being filled: its commands, each command's line number and key, and the
/// hashes of its keys (a repeated key flushes the pipeline first; a hash collision only
/// flushes early).
struct Batch {
    pipe: redis::Pipeline,
    lines: Vec<(u64, Vec<u8>)>,
    key_hashes: HashSet<u64>,
    hasher: RandomState,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            pipe: redis::pipe(),
            lines: Vec::new(),
            key_hashes: HashSet::new(),
            hasher: RandomState::new(),
        }
    }

    fn clear(&mut self) {
        self.pipe.clear();
        self.lines.clear();
        self.key_hashes.clear();
    }
}

/// Sends every pair of `input` (`total_bytes` long, if known, for the progress bar) over
/// `conn`, which is connected to `target`.
///
/// # Errors
/// A [`BadLineError`] (find it with `downcast_ref`) for the first bad line without
/// `skip_bad`; the first refused reply, with its line number, key and the count of pairs
/// acknowledged before; I/O and connection errors. Pairs sent before the error stay written.
pub(crate) fn load_resp(
    conn: &mut redis::Connection,
    target: &str,
    input: &mut dyn BufRead,
    total_bytes: Option<u64>,
    config: &RespConfig,
) -> anyhow::Result<RespReport> {
    let start = Instant::now();
    let bar = progress_bar(config.progress, total_bytes);
    let (expect, command) = match config.rules.format {
        Format::Tsv => (Expect::Ok, "SET"),
        Format::Counts => (Expect::Int, "INCRBY"),
    };
    let mut report = RespReport {
        target: target.to_string(),
        bytes: 0,
        pairs: 0,
        bad_lines: 0,
        pipelines: 0,
        elapsed: Duration::ZERO,
    };
    let mut batch = Batch::new();
    let mut line = Vec::new();
    let mut line_no: u64 = 0;
    let mut flush = |batch: &mut Batch, report: &mut RespReport| -> anyhow::Result<()> {
        if batch.lines.is_empty() {
            return Ok(());
        }
        let result = send(conn, batch, expect, report);
        batch.clear();
        bar.set_position(report.bytes);
        let secs = start.elapsed().as_secs_f64().max(1e-9);
        #[expect(clippy::cast_precision_loss, reason = "a rate for display")]
        let rate = report.pairs as f64 / secs;
        bar.set_message(format!("{} pairs, {rate:.0} pairs/s", report.pairs));
        result
    };
    loop {
        let (n, refused) =
            read_line(input, &mut line, &config.rules).context("reading the input")?;
        if n == 0 {
            break;
        }
        report.bytes += n;
        line_no += 1;
        let checked = match refused {
            Some(reason) => Err(reason),
            None => config.rules.check(&line),
        };
        let tab = match checked {
            Ok(tab) => tab,
            Err(reason) => {
                let err = BadLineError {
                    line: line_no,
                    reason,
                };
                if !config.skip_bad {
                    // Pairs already read are sent: they precede the bad line.
                    flush(&mut batch, &mut report)?;
                    return Err(err.into());
                }
                report.bad_lines += 1;
                if report.bad_lines <= MAX_REPORTED_BAD_LINES {
                    bar.suspend(|| eprintln!("strata: skipping {err}"));
                } else if report.bad_lines == MAX_REPORTED_BAD_LINES + 1 {
                    bar.suspend(|| {
                        eprintln!("strata: skipping more bad lines (counted, not shown)")
                    });
                }
                continue;
            }
        };
        let (key, value) = (&line[..tab], &line[tab + 1..]);
        let key_hash = batch.hasher.hash_one(key);
        if config.rules.format == Format::Tsv && batch.key_hashes.contains(&key_hash) {
            flush(&mut batch, &mut report)?;
        }
        batch.key_hashes.insert(key_hash);
        batch.pipe.cmd(command).arg(key).arg(value);
        batch.lines.push((line_no, key.to_vec()));
        if batch.lines.len() >= config.pipeline_len.max(1) {
            flush(&mut batch, &mut report)?;
        }
    }
    flush(&mut batch, &mut report)?;
    bar.finish_and_clear();
    report.elapsed = start.elapsed();
    Ok(report)
}

/// Reads one line into `line` (without its newline), holding no more of it than a good line
/// can be: a line that `rules` refuses before its end ([`Rules::refuse_unended`]) is refused
/// then, and the rest of it is skipped a buffer at a time. Returns the bytes read (newline and
/// skipped bytes included; 0 at the end of the input) and that refusal.
fn read_line(
    input: &mut dyn BufRead,
    line: &mut Vec<u8>,
    rules: &Rules,
) -> std::io::Result<(u64, Option<BadLine>)> {
    line.clear();
    let (mut read, mut tab) = (0u64, None);
    loop {
        let buf = match input.fill_buf() {
            Ok(buf) => buf,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if buf.is_empty() {
            return Ok((read, None));
        }
        let end = memchr::memchr(b'\n', buf);
        let from = line.len();
        line.extend_from_slice(&buf[..end.unwrap_or(buf.len())]);
        let used = end.map_or(buf.len(), |i| i + 1);
        input.consume(used);
        read += used as u64;
        if end.is_some() {
            return Ok((read, None));
        }
        if tab.is_none() {
            tab = memchr::memchr(b'\t', &line[from..]).map(|i| from + i);
        }
        if let Some(reason) = rules.refuse_unended(line.len(), tab) {
            let skipped = input.skip_until(b'\n')?;
            return Ok((read + skipped as u64, Some(reason)));
        }
    }
}

/// Sends one pipeline and checks every reply; acknowledged pairs are added to `report`.
fn send(
    conn: &mut redis::Connection,
    batch: &mut Batch,
    expect: Expect,
    report: &mut RespReport,
) -> anyhow::Result<()> {
    report.pipelines += 1;
    let replies: Vec<Value> = client::replies(conn, &mut batch.pipe).map_err(|e| {
        e.context(format!(
            "sending lines {} to {}; {} pairs were acknowledged before",
            batch.lines.first().map_or(0, |l| l.0),
            batch.lines.last().map_or(0, |l| l.0),
            report.pairs
        ))
    })?;
    let mut first_refusal = None;
    let mut refusals = 0u64;
    for (reply, (line, key)) in replies.iter().zip(&batch.lines) {
        match client::refused(reply, expect) {
            None => report.pairs += 1,
            Some(why) => {
                refusals += 1;
                first_refusal.get_or_insert((*line, key, why));
            }
        }
    }
    match first_refusal {
        None => Ok(()),
        Some((line, key, why)) => anyhow::bail!(
            "line {line} (key {}): {why} ({refusals} of the {} commands of this pipeline \
             were refused; {} pairs were acknowledged in all)",
            super::shown_key(key),
            batch.lines.len(),
            report.pairs
        ),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used, reason = "a panic is how a test fails")]

    use super::*;

    fn rules() -> Rules {
        Rules {
            format: Format::Tsv,
            text: false,
            max_value_size: 8,
            max_key_size: 4,
        }
    }

    #[test]
    fn lines_over_the_limits_are_refused_before_their_end_and_skipped() {
        let input = b"k\tv\nkkkkk-and-more-key\tv\nk\t123456789-and-more\nlast\tv";
        let mut reader = std::io::BufReader::with_capacity(4, &input[..]);
        let mut line = Vec::new();
        let mut got = Vec::new();
        loop {
            let (n, refused) = read_line(&mut reader, &mut line, &rules()).expect("read");
            if n == 0 {
                break;
            }
            got.push((n, refused, line.clone()));
        }
        assert_eq!(got.len(), 4);
        assert_eq!(got[0], (4, None, b"k\tv".to_vec()));
        assert_eq!(got[1].1, Some(BadLine::KeyOverLimit(4)));
        assert_eq!(got[2].1, Some(BadLine::ValueOverLimit(8)));
        assert!(
            got[2].2.len() <= 4 + 1 + 8 + 4,
            "held at most a buffer past the limit"
        );
        assert_eq!(got[3], (6, None, b"last\tv".to_vec()));
        let total: u64 = got.iter().map(|g| g.0).sum();
        assert_eq!(total, input.len() as u64);
    }

    #[test]
    fn long_keys_are_shown_cut_in_messages() {
        let shown = super::super::shown_key(&[b'k'; 65_536]);
        assert!(shown.starts_with("\"kkkk"), "{shown}");
        assert!(shown.ends_with("\"... (65536 bytes)"), "{shown}");
        assert!(shown.len() < 100, "{shown}");
        assert_eq!(super::super::shown_key(b"read:1"), "\"read:1\"");
    }
}
