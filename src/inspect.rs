//! Inspection subcommands: `get`, `put`, `delete`, `scan`, `sst-dump`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use strata_engine::sstable::Table;
use strata_engine::{Db, Options, ReadOptions, WriteBatch, WriteOptions};

fn open_existing(dir: &Path) -> anyhow::Result<Db> {
    // With the counter operator, so databases loaded with `strata load --format counts` read.
    let options = Options::default()
        .create_if_missing(false)
        .merge_operator(Some(std::sync::Arc::new(strata_engine::CounterAdd)));
    Db::open(dir, options).with_context(|| format!("opening database at {}", dir.display()))
}

pub(crate) fn get(dir: &Path, key: &[u8]) -> anyhow::Result<ExitCode> {
    let db = open_existing(dir)?;
    let value = db.get(key)?;
    db.close()?;
    match value {
        Some(v) => {
            let mut out = std::io::stdout().lock();
            out.write_all(&v)?;
            out.write_all(b"\n")?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            eprintln!("key not found: {}", String::from_utf8_lossy(key));
            Ok(ExitCode::from(1))
        }
    }
}

pub(crate) fn put(dir: &Path, key: &[u8], value: &[u8]) -> anyhow::Result<ExitCode> {
    let db = Db::open(dir, Options::default())?;
    let mut batch = WriteBatch::new();
    batch.put(key, value);
    db.write(batch, &WriteOptions::synced())?;
    db.close()?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn delete(dir: &Path, key: &[u8]) -> anyhow::Result<ExitCode> {
    let db = open_existing(dir)?;
    let mut batch = WriteBatch::new();
    batch.delete(key);
    db.write(batch, &WriteOptions::synced())?;
    db.close()?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn scan(
    dir: &Path,
    from: Option<&str>,
    to: Option<&str>,
    reverse: bool,
    limit: Option<usize>,
) -> anyhow::Result<ExitCode> {
    use std::ops::Bound;
    let db = open_existing(dir)?;
    let lower = from.map_or(Bound::Unbounded, |f| Bound::Included(f.as_bytes()));
    let upper = to.map_or(Bound::Unbounded, |t| Bound::Excluded(t.as_bytes()));
    let range = db.range(&ReadOptions::default(), (lower, upper));
    let iter: Box<dyn Iterator<Item = _>> = if reverse {
        Box::new(range.rev())
    } else {
        Box::new(range)
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for kv in iter.take(limit.unwrap_or(usize::MAX)) {
        let (k, v) = kv?;
        out.write_all(&k)?;
        out.write_all(b"\t")?;
        out.write_all(&v)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    drop(out);
    db.close()?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn sst_dump(file: &Path, entries: bool) -> anyhow::Result<ExitCode> {
    use strata_engine::iterator::InternalIterator;
    let number = file
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .map_or(strata_engine::FileNumber(0), strata_engine::FileNumber);
    let cache = strata_engine::cache::BlockCache::new(8 << 20);
    // An ingested table's global sequence number lives in the manifest: shown as stored (0).
    let table = Table::open(file, number, None, cache)
        .with_context(|| format!("opening table {}", file.display()))?;
    let p = table.properties();
    println!("file:              {}", file.display());
    println!("file size:         {} bytes", table.file_size());
    println!(
        "entries:           {} ({} deletions, {} merge operands)",
        p.num_entries, p.num_deletions, p.num_merges
    );
    println!(
        "smallest key:      {} @ {} {:?}",
        escape(&p.smallest_key.user_key),
        p.smallest_key.seqno,
        p.smallest_key.kind
    );
    println!(
        "largest key:       {} @ {} {:?}",
        escape(&p.largest_key.user_key),
        p.largest_key.seqno,
        p.largest_key.kind
    );
    println!(
        "sequence numbers:  {} ..= {}",
        p.smallest_seqno, p.largest_seqno
    );
    println!("raw key bytes:     {}", p.raw_key_bytes);
    println!("raw value bytes:   {}", p.raw_value_bytes);
    println!(
        "data blocks:       {} ({} bytes stored)",
        p.num_data_blocks, p.data_bytes
    );
    println!("bloom bits/key:    {}", p.filter_bits_per_key);
    if entries {
        let mut it = table.iter();
        it.seek_to_first()?;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        while it.valid() {
            let k = it.key();
            writeln!(
                out,
                "{} @ {} {:?} => {}",
                escape(k.user_key),
                k.seqno,
                k.kind,
                escape(it.value())
            )?;
            it.next()?;
        }
        out.flush()?;
    }
    Ok(ExitCode::SUCCESS)
}

/// Printable form of a byte string: ASCII as is, other bytes as `\xNN`.
fn escape(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

pub(crate) fn check(dir: &Path) -> anyhow::Result<ExitCode> {
    let db = match Db::open(dir, Options::default().create_if_missing(false)) {
        Ok(db) => db,
        Err(e) => {
            println!("problem: {e}");
            println!("1 problem found (the database does not open)");
            return Ok(ExitCode::from(1));
        }
    };
    let problems = db.integrity_problems()?;
    db.close()?;
    for p in &problems {
        println!("problem: {p}");
    }
    if problems.is_empty() {
        println!("ok: no problems found in {}", dir.display());
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{} problem(s) found", problems.len());
        Ok(ExitCode::from(1))
    }
}
