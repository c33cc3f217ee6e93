//! Inspection subcommands: `get`, `put`, `delete`, `scan`, `sst-dump`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use strata_engine::sstable::Table;
use strata_engine::{Db, Keyspace, Options, ReadOptions, WriteBatch, WriteOptions};

fn open_existing(dir: &Path) -> anyhow::Result<Db> {
    // With the counter operator, so databases loaded with `strata load --format counts` read.
    let options = Options::default()
        .create_if_missing(false)
        .merge_operator(Some(std::sync::Arc::new(strata_engine::CounterAdd)));
    Db::open(dir, options).with_context(|| format!("opening database at {}", dir.display()))
}

/// Keyspace `name` of `db` (the default one for `None`); an error naming the existing
/// keyspaces when it does not exist, unless `create`.
fn keyspace(db: &Db, name: Option<&str>, create: bool) -> anyhow::Result<Keyspace> {
    let Some(name) = name else {
        return Ok(db.default_keyspace());
    };
    let existing = db.list_keyspaces();
    if !create && !existing.iter().any(|n| n == name) {
        anyhow::bail!(
            "no keyspace named {name:?} in {} (keyspaces: {})",
            db.path().display(),
            existing.join(", ")
        );
    }
    Ok(db.keyspace(name)?)
}

pub(crate) fn get(dir: &Path, keyspace_name: Option<&str>, key: &[u8]) -> anyhow::Result<ExitCode> {
    let db = open_existing(dir)?;
    let ks = keyspace(&db, keyspace_name, false)?;
    let value = ks.get(key)?;
    drop(ks);
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

pub(crate) fn put(
    dir: &Path,
    keyspace_name: Option<&str>,
    key: &[u8],
    value: &[u8],
) -> anyhow::Result<ExitCode> {
    let db = Db::open(dir, Options::default())?;
    let ks = keyspace(&db, keyspace_name, true)?;
    let mut batch = WriteBatch::new();
    batch.put_in(&ks, key, value);
    drop(ks);
    db.write(batch, &WriteOptions::synced())?;
    db.close()?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn delete(
    dir: &Path,
    keyspace_name: Option<&str>,
    key: &[u8],
) -> anyhow::Result<ExitCode> {
    let db = open_existing(dir)?;
    let ks = keyspace(&db, keyspace_name, false)?;
    let mut batch = WriteBatch::new();
    batch.delete_in(&ks, key);
    drop(ks);
    db.write(batch, &WriteOptions::synced())?;
    db.close()?;
    Ok(ExitCode::SUCCESS)
}

/// Key bounds of `strata scan`: `--from` (inclusive), `--to` (exclusive), `--prefix`.
pub(crate) struct ScanBounds<'a> {
    pub(crate) from: Option<&'a str>,
    pub(crate) to: Option<&'a str>,
    pub(crate) prefix: Option<&'a str>,
}

pub(crate) fn scan(
    dir: &Path,
    keyspace_name: Option<&str>,
    bounds: &ScanBounds<'_>,
    reverse: bool,
    limit: Option<usize>,
) -> anyhow::Result<ExitCode> {
    use std::ops::Bound;
    let db = open_existing(dir)?;
    let ks = keyspace(&db, keyspace_name, false)?;
    // The tighter of --from and the prefix, and of --to and the prefix's successor.
    let prefix = bounds.prefix.map(str::as_bytes);
    let prefix_end = prefix.and_then(strata_engine::prefix_successor);
    let mut lower = bounds
        .from
        .map_or(Bound::Unbounded, |f| Bound::Included(f.as_bytes()));
    if let Some(p) = prefix
        && bounds.from.is_none_or(|f| f.as_bytes() < p)
    {
        lower = Bound::Included(p);
    }
    let mut upper = bounds
        .to
        .map_or(Bound::Unbounded, |t| Bound::Excluded(t.as_bytes()));
    if let Some(end) = prefix_end.as_deref()
        && bounds.to.is_none_or(|t| end < t.as_bytes())
    {
        upper = Bound::Excluded(end);
    }
    let range = ks.range(&ReadOptions::default(), (lower, upper));
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
    drop(ks);
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
    let table = Table::open(&strata_engine::fs::OsFs, file, number, None, cache)
        .with_context(|| format!("opening table {}", file.display()))?;
    let p = table.properties();
    println!("file:              {}", file.display());
    println!("file size:         {} bytes", table.file_size());
    println!("format version:    {}", table.format().version());
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
