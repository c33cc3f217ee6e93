//! Inspection subcommands: `get`, `put`, `delete`, `scan`, `sst-dump`.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use strata_engine::sstable::Table;
use strata_engine::{Db, Keyspace, Options, ReadOptions, WriteBatch, WriteOptions};

/// Opens the existing database in `dir`: read-only for `get` and `scan`, which then write
/// nothing and work beside a running server or on a full disk (`Options::read_only`).
fn open_existing(dir: &Path, read_only: bool) -> anyhow::Result<Db> {
    crate::require_database(dir)?;
    // With the counter operator, so databases loaded with `strata load --format counts` read.
    let options = crate::engine_options()
        .create_if_missing(false)
        .read_only(read_only)
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

/// The bytes a command-line key or value stands for: the text itself, or with `hex` (`--hex`,
/// as RocksDB's `ldb`) the bytes written in hexadecimal, with or without a `0x` prefix.
pub(crate) fn arg_bytes(what: &str, text: &str, hex: bool) -> anyhow::Result<Vec<u8>> {
    if !hex {
        return Ok(text.as_bytes().to_vec());
    }
    let digits = text
        .strip_prefix("0x")
        .or_else(|| text.strip_prefix("0X"))
        .unwrap_or(text);
    // Checked here so the message names a character, not one byte of its UTF-8 encoding.
    if let Some(c) = digits.chars().find(|c| !c.is_ascii_hexdigit()) {
        anyhow::bail!("--hex: {what} {text:?} is not hexadecimal: {c:?} is not a hex digit");
    }
    hex::decode(digits).with_context(|| format!("--hex: {what} {text:?} is not hexadecimal"))
}

/// Writes `bytes` raw, or in lowercase hexadecimal with `hex`.
fn write_field(out: &mut dyn Write, bytes: &[u8], hex: bool) -> std::io::Result<()> {
    if hex {
        out.write_all(hex::encode(bytes).as_bytes())
    } else {
        out.write_all(bytes)
    }
}

pub(crate) fn get(
    dir: &Path,
    keyspace_name: Option<&str>,
    key: &[u8],
    hex: bool,
) -> anyhow::Result<ExitCode> {
    let db = open_existing(dir, true)?;
    let ks = keyspace(&db, keyspace_name, false)?;
    let value = ks.get(key)?;
    drop(ks);
    db.close()?;
    match value {
        Some(v) => {
            let mut out = std::io::stdout().lock();
            write_field(&mut out, &v, hex)?;
            out.write_all(b"\n")?;
            Ok(ExitCode::SUCCESS)
        }
        None if hex => {
            eprintln!("key not found: 0x{}", hex::encode(key));
            Ok(ExitCode::from(1))
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
    crate::check_database_dir(dir)?;
    let db = Db::open(dir, crate::engine_options())
        .with_context(|| format!("opening database at {}", dir.display()))?;
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
    let db = open_existing(dir, false)?;
    let ks = keyspace(&db, keyspace_name, false)?;
    let mut batch = WriteBatch::new();
    batch.delete_in(&ks, key);
    drop(ks);
    db.write(batch, &WriteOptions::synced())?;
    db.close()?;
    Ok(ExitCode::SUCCESS)
}

/// What `strata scan` prints: keys from `from` (inclusive) to `to` (exclusive) and with
/// `prefix`, descending with `reverse`, at most `limit` pairs, in hexadecimal with `hex`.
#[derive(Debug, Default)]
pub(crate) struct ScanArgs {
    pub(crate) from: Option<Vec<u8>>,
    pub(crate) to: Option<Vec<u8>>,
    pub(crate) prefix: Option<Vec<u8>>,
    pub(crate) reverse: bool,
    pub(crate) limit: Option<usize>,
    pub(crate) hex: bool,
}

/// Writes `key<TAB>value` lines of keyspace `keyspace_name` (the default one for `None`) of
/// the database in `dir` to `out`, as `args` say.
pub(crate) fn scan(
    dir: &Path,
    keyspace_name: Option<&str>,
    args: &ScanArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    use std::ops::Bound;
    let db = open_existing(dir, true)?;
    let ks = keyspace(&db, keyspace_name, false)?;
    // The tighter of --from and the prefix, and of --to and the prefix's successor.
    let (from, to, prefix) = (
        args.from.as_deref(),
        args.to.as_deref(),
        args.prefix.as_deref(),
    );
    let prefix_end = prefix.and_then(strata_engine::prefix_successor);
    let mut lower = from.map_or(Bound::Unbounded, Bound::Included);
    if let Some(p) = prefix
        && from.is_none_or(|f| f < p)
    {
        lower = Bound::Included(p);
    }
    let mut upper = to.map_or(Bound::Unbounded, Bound::Excluded);
    if let Some(end) = prefix_end.as_deref()
        && to.is_none_or(|t| end < t)
    {
        upper = Bound::Excluded(end);
    }
    let range = ks.range(&ReadOptions::default(), (lower, upper));
    let iter: Box<dyn Iterator<Item = _>> = if args.reverse {
        Box::new(range.rev())
    } else {
        Box::new(range)
    };
    let mut out = std::io::BufWriter::new(out);
    for kv in iter.take(args.limit.unwrap_or(usize::MAX)) {
        let (k, v) = kv?;
        write_field(&mut out, &k, args.hex)?;
        out.write_all(b"\t")?;
        write_field(&mut out, &v, args.hex)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    drop(out);
    drop(ks);
    db.close()?;
    Ok(ExitCode::SUCCESS)
}

pub(crate) fn sst_dump(file: &Path, entries: bool) -> anyhow::Result<ExitCode> {
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
    outln!("file:              {}", file.display())?;
    outln!("file size:         {} bytes", table.file_size())?;
    outln!("format version:    {}", table.format().version())?;
    outln!(
        "entries:           {} ({} deletions, {} merge operands)",
        p.num_entries,
        p.num_deletions,
        p.num_merges
    )?;
    outln!(
        "smallest key:      {} @ {} {:?}",
        escape(&p.smallest_key.user_key),
        p.smallest_key.seqno,
        p.smallest_key.kind
    )?;
    outln!(
        "largest key:       {} @ {} {:?}",
        escape(&p.largest_key.user_key),
        p.largest_key.seqno,
        p.largest_key.kind
    )?;
    outln!(
        "sequence numbers:  {} ..= {}",
        p.smallest_seqno,
        p.largest_seqno
    )?;
    outln!("raw key bytes:     {}", p.raw_key_bytes)?;
    outln!("raw value bytes:   {}", p.raw_value_bytes)?;
    outln!(
        "data blocks:       {} ({} bytes stored)",
        p.num_data_blocks,
        p.data_bytes
    )?;
    outln!("bloom bits/key:    {}", p.filter_bits_per_key)?;
    match p.table_id {
        Some(id) => outln!("table id:          {id}")?,
        None => outln!("table id:          none (written before table ids)")?,
    }
    match p.num_user_keys {
        Some(n) => outln!("user keys:         {n}")?,
        None => outln!("user keys:         not recorded (written before 2026-12-04)")?,
    }
    if entries {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        let problems = dump_entries(&table, &mut out)?;
        out.flush()?;
        if !problems.is_empty() {
            return Ok(ExitCode::FAILURE);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints every entry of `table` to `out`, block by block ([`Table::walk_data_blocks`]): a
/// data block that cannot be read (a checksum mismatch, a malformed entry) is reported on
/// stderr where it would have been printed and the walk goes on with the next block. Then the
/// table is checked as `strata check` checks it (key order included), and the problems not
/// reported yet are reported. Returns every problem reported.
///
/// # Errors
/// Writing to `out`.
fn dump_entries(table: &Table, out: &mut dyn Write) -> anyhow::Result<Vec<String>> {
    use strata_engine::sstable::DataBlockEvent;
    let mut reported: Vec<String> = Vec::new();
    table
        .walk_data_blocks(|event| match event {
            DataBlockEvent::Entry(k, value) => writeln!(
                out,
                "{} @ {} {:?} => {}",
                escape(k.user_key),
                k.seqno,
                k.kind,
                escape(value)
            ),
            DataBlockEvent::Damaged(e) => report(
                out,
                &mut reported,
                format!("{e}; going on with the next block"),
            ),
            DataBlockEvent::IndexEnds(e) => {
                report(out, &mut reported, format!("{e}; the index ends here"))
            }
        })
        .context("writing to standard output")?;
    // Reading entries checks each block's checksum, not the order of keys (a table written
    // wrong): the table check says whether what was printed is in order.
    for problem in table.block_problems() {
        let text = problem.to_string();
        if !reported.iter().any(|r| r.starts_with(&text)) {
            report(out, &mut reported, text).context("writing to standard output")?;
        }
    }
    Ok(reported)
}

/// Reports `problem` of `strata sst-dump` on stderr, after the entries printed before it.
fn report(out: &mut dyn Write, reported: &mut Vec<String>, problem: String) -> std::io::Result<()> {
    out.flush()?;
    eprintln!("problem: {problem}");
    reported.push(problem);
    Ok(())
}

/// Printable form of a byte string: ASCII as is, other bytes as `\xNN`.
fn escape(bytes: &[u8]) -> String {
    bytes.escape_ascii().to_string()
}

/// Attempts of `strata check` while another process changes the database's files.
const CHECK_ATTEMPTS: usize = 5;

pub(crate) fn check(dir: &Path) -> anyhow::Result<ExitCode> {
    // Read-only: checking changes nothing (a torn WAL tail stays in place). A server or repl
    // that has the database open may delete a table or WAL it has just made obsolete while
    // the check reads it, so problems found while the files changed are checked again.
    let mut attempt = 1;
    let (
        Checked {
            problems,
            unreferenced,
            damaged_tail,
            wal_tail,
        },
        changed,
    ) = loop {
        let before = file_names(dir);
        let checked = check_once(dir)?;
        let changed = file_names(dir) != before;
        if checked.problems.is_empty() || !changed || attempt == CHECK_ATTEMPTS {
            break (checked, changed);
        }
        attempt += 1;
    };
    for p in &problems {
        outln!("problem: {p}")?;
    }
    if let Some((manifest, offset)) = &damaged_tail {
        outln!(
            "note: the last record of {} (at byte offset {offset}) is damaged and is ignored: \
             a crash cut its write short, or the disk damaged an edit that was acknowledged \
             (nothing tells them apart; docs/format/manifest.md, the torn-tail rule). Reads do \
             not see what that edit did; the next writing open rewrites the manifest without \
             it and moves the tables no record names to lost/",
            manifest.display()
        )?;
    }
    if let Some((wal, offset)) = &wal_tail {
        outln!(
            "note: {} ends in a partial or damaged record at byte offset {offset}, which reads \
             do not see: a write a crash cut short (never acknowledged when writes are synced), \
             a record being appended by the process that has the database open, or damage to \
             the last record (nothing tells them apart; docs/format/wal.md). The next writing \
             open drops it",
            wal.display()
        )?;
    }
    for table in &unreferenced {
        outln!(
            "note: {} is a table the manifest does not name: the output of a flush, compaction \
             or ingest cut short (the next writing open deletes it, or moves it to lost/ when \
             the manifest's last record is damaged), one the process that has the database \
             open is writing now, or one a lost manifest edit had added",
            table.display()
        )?;
    }
    let lost = dir.join(strata_engine::filename::LOST_DIR);
    if std::fs::read_dir(&lost).is_ok_and(|mut entries| entries.next().is_some()) {
        outln!(
            "note: {} holds tables an open kept instead of deleting, after it ignored a damaged \
             last manifest record that may have added them (docs/format/manifest.md, the \
             torn-tail rule): read them with `strata sst-dump --entries`, then delete them",
            lost.display()
        )?;
    }
    for (scratch, what) in scratch_dirs(dir) {
        outln!(
            "note: {} is the scratch directory of {what} that is running or was \
             interrupted; nothing in it is part of the database, and the next writing open \
             removes it",
            scratch.display()
        )?;
    }
    if problems.is_empty() {
        outln!("ok: no problems found in {}", dir.display())?;
        return Ok(ExitCode::SUCCESS);
    }
    outln!("{} problem(s) found", problems.len())?;
    if changed {
        outln!(
            "note: another process changed the database's files during each of {attempt} checks; \
             problems with missing or changed files may come from it: check again while it is idle"
        )?;
    }
    Ok(ExitCode::from(1))
}

/// The scratch directories inside `dir` of loads (`strata-load-<pid>.tmp`, see
/// [`crate::load::scratch_dir`]) and of SQL index builds (`strata-index-<pid>-<n>.tmp`, see
/// [`strata_query::exec::store::bulk_scratch_dir`]), each with what made it.
fn scratch_dirs(dir: &Path) -> Vec<(std::path::PathBuf, &'static str)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found: Vec<_> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name();
            let name = name.to_str()?;
            let what = if crate::load::is_scratch_name(name) {
                "a `strata load`"
            } else if strata_query::exec::store::is_bulk_scratch_name(name) {
                "a `CREATE INDEX`"
            } else {
                return None;
            };
            Some((e.path(), what))
        })
        .collect();
    found.sort();
    found
}

/// What one read-only open and integrity check find.
#[derive(Debug, Default)]
struct Checked {
    /// The problems, as printable lines.
    problems: Vec<String>,
    /// The table files the manifest does not name.
    unreferenced: Vec<std::path::PathBuf>,
    /// The manifest and offset of a damaged last record the open ignored.
    damaged_tail: Option<(std::path::PathBuf, u64)>,
    /// The newest WAL and offset of the partial or damaged record it ends with.
    wal_tail: Option<(std::path::PathBuf, u64)>,
}

fn check_once(dir: &Path) -> anyhow::Result<Checked> {
    // No database at all is a wrong argument (exit 2, as other commands), not a damaged one.
    crate::refuse_server_directory(dir)?;
    if !crate::probe_current(dir)? {
        if let Some(damage) = crate::missing_current(dir) {
            let mut problems = vec![damage];
            problems.extend(table_file_problems(dir));
            return Ok(Checked {
                problems,
                ..Checked::default()
            });
        }
        anyhow::bail!("no database at {} (no CURRENT file)", dir.display());
    }
    let db = match Db::open(dir, Options::default().read_only(true)) {
        Ok(db) => db,
        // A file this user may not read is no damage: the check cannot run (exit status 2,
        // as for a directory whose CURRENT cannot be looked at).
        Err(strata_engine::Error::Io { path, source })
            if source.kind() == std::io::ErrorKind::PermissionDenied =>
        {
            anyhow::bail!(
                "cannot check {}: {}: {source}",
                dir.display(),
                path.display()
            );
        }
        Err(e) => {
            // What the database's own check would list beyond that: each table file, checked
            // on its own since no manifest says which tables are live.
            let mut problems = vec![format!("{e} (the database does not open)")];
            problems.extend(table_file_problems(dir));
            // The notes an open would give, from the manifest alone when it replays: a damaged
            // last record it ignored (often why the open failed: the edit of a flush lost,
            // the WAL it emptied is gone) and the tables it does not name.
            let (damaged_tail, unreferenced) = manifest_notes(dir);
            return Ok(Checked {
                problems,
                unreferenced,
                damaged_tail,
                ..Checked::default()
            });
        }
    };
    let checked = Checked {
        problems: db
            .integrity_problems()?
            .iter()
            .map(ToString::to_string)
            .collect(),
        unreferenced: db.unreferenced_tables()?,
        damaged_tail: db
            .ignored_manifest_tail()
            .map(|(path, offset)| (path.to_path_buf(), offset)),
        wal_tail: db
            .unreplayed_wal_tail()
            .map(|(path, offset)| (path.to_path_buf(), offset)),
    };
    db.close()?;
    Ok(checked)
}

/// For a database that does not open: the manifest's damaged last record that its replay
/// ignored (the manifest and the record's offset), and the table files in `dir` its replayed
/// versions do not name. Nothing when the manifest itself does not replay (the problem says
/// why).
fn manifest_notes(dir: &Path) -> (Option<(std::path::PathBuf, u64)>, Vec<std::path::PathBuf>) {
    let Ok(recovered) = strata_engine::version::VersionSet::replay(&strata_engine::fs::os(), dir)
    else {
        return (None, Vec::new());
    };
    let named = recovered.table_numbers();
    let mut unreferenced: Vec<(strata_engine::FileNumber, std::path::PathBuf)> =
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .filter_map(|entry| {
                let entry = entry.ok()?;
                match strata_engine::filename::parse(entry.file_name().to_str()?)? {
                    strata_engine::filename::FileKind::Table(number)
                        if !named.contains(&number) =>
                    {
                        Some((number, entry.path()))
                    }
                    _ => None,
                }
            })
            .collect();
    unreferenced.sort();
    (
        recovered
            .torn_tail()
            .map(|(path, offset)| (path.to_path_buf(), offset)),
        unreferenced.into_iter().map(|(_, path)| path).collect(),
    )
}

/// Every problem of the table files (`NNNNNN.sst`) in `dir`, each read and checked on its own
/// (every block's checksum, every entry, the counts against the properties), in file-name
/// order; for a database that does not open, so one damaged manifest or WAL does not hide
/// damaged tables. A table that is not live (not yet deleted) is checked all the same.
fn table_file_problems(dir: &Path) -> Vec<String> {
    let mut tables: Vec<(strata_engine::FileNumber, std::path::PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let entry = entry.ok()?;
            match strata_engine::filename::parse(entry.file_name().to_str()?)? {
                strata_engine::filename::FileKind::Table(number) => Some((number, entry.path())),
                _ => None,
            }
        })
        .collect();
    tables.sort();
    let cache = strata_engine::cache::BlockCache::new(8 << 20);
    let mut problems = Vec::new();
    for (number, path) in tables {
        match Table::open(&strata_engine::fs::OsFs, &path, number, None, cache.clone()) {
            Ok(table) => problems.extend(table.block_problems().iter().map(ToString::to_string)),
            Err(e) => problems.push(e.to_string()),
        }
    }
    problems
}

/// The sorted names of the files in `dir`, and `CURRENT`'s contents: what a writing process
/// changes when it flushes, compacts or switches manifests (appends to a WAL change neither).
fn file_names(dir: &Path) -> (Vec<std::ffi::OsString>, Option<Vec<u8>>) {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.file_name()))
                .collect()
        })
        .unwrap_or_default();
    names.sort_unstable();
    (names, std::fs::read(dir.join("CURRENT")).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_with_tables_but_no_current_is_damaged_not_missing() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        // Nothing of a database: "no database", an error of the arguments.
        std::fs::write(dir.path().join("notes.sst.txt"), b"")?;
        let e = check_once(dir.path()).expect_err("no database");
        assert!(e.to_string().contains("no database"), "{e}");
        assert!(crate::require_database(dir.path()).is_err());
        // A database whose CURRENT went missing: a problem of the database.
        let db = Db::open(dir.path(), Options::default())?;
        db.put(b"a", b"1")?;
        db.flush()?;
        db.close()?;
        std::fs::remove_file(dir.path().join("CURRENT"))?;
        let checked = check_once(dir.path())?;
        assert_eq!(checked.problems.len(), 1);
        assert!(
            checked.problems[0].contains("damaged"),
            "{:?}",
            checked.problems
        );
        let e = crate::require_database(dir.path()).expect_err("damaged");
        assert!(e.to_string().contains("damaged"), "{e}");
        Ok(())
    }

    #[test]
    fn a_database_that_does_not_open_still_gets_its_tables_checked() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let db = Db::open(dir.path(), Options::default())?;
        for key in [b"a", b"b", b"c"] {
            db.put(key, b"value")?;
            db.flush()?;
        }
        db.close()?;
        let tables = table_file_problems(dir.path());
        assert!(tables.is_empty(), "{tables:?}");
        // A damaged manifest keeps the database shut; a flipped byte in the second table
        // file is listed beside it, the sound tables are not.
        let mut names: Vec<_> = std::fs::read_dir(dir.path())?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        names.sort();
        let manifest = names
            .iter()
            .find(|p| p.to_string_lossy().contains("MANIFEST-"))
            .expect("a manifest");
        let mut bytes = std::fs::read(manifest)?;
        bytes[..8].copy_from_slice(b"garbage!");
        std::fs::write(manifest, bytes)?;
        let table = names
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "sst"))
            .nth(1)
            .expect("three tables");
        let mut bytes = std::fs::read(table)?;
        bytes[5] ^= 0xff;
        std::fs::write(table, bytes)?;
        let checked = check_once(dir.path())?;
        assert_eq!(checked.problems.len(), 2, "{:?}", checked.problems);
        assert!(checked.problems[0].contains("does not open"));
        let name = table.file_name().map(|n| n.to_string_lossy().into_owned());
        assert!(
            checked.problems[1].contains(name.as_deref().unwrap_or("?")),
            "{:?}",
            checked.problems
        );
        Ok(())
    }

    #[test]
    fn a_torn_last_manifest_record_that_shuts_the_database_is_noted_with_its_table()
    -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        // As `strata put` three times: each open flushes the WAL it replays.
        for key in [b"a", b"b", b"c"] {
            let db = Db::open(dir.path(), Options::default())?;
            db.put(key, b"value")?;
            db.close()?;
        }
        let mut names: Vec<_> = std::fs::read_dir(dir.path())?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()?;
        names.sort();
        let manifest = names
            .iter()
            .find(|p| p.to_string_lossy().contains("MANIFEST-"))
            .expect("a manifest");
        let newest_table = names
            .iter()
            .rfind(|p| p.extension().is_some_and(|e| e == "sst"))
            .expect("a table");
        let len = std::fs::metadata(manifest)?.len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(manifest)?
            .set_len(len - 3)?;
        let checked = check_once(dir.path())?;
        assert_eq!(checked.problems.len(), 1, "{:?}", checked.problems);
        let problem = &checked.problems[0];
        let manifest_name = manifest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned());
        assert!(
            problem.contains(manifest_name.as_deref().unwrap_or("?")),
            "{problem}"
        );
        assert!(!problem.contains("deleted by hand"), "{problem}");
        let (tail_file, tail_offset) = checked.damaged_tail.expect("the damaged record is noted");
        assert_eq!(&tail_file, manifest);
        assert!(tail_offset > 0 && tail_offset < len);
        assert_eq!(checked.unreferenced, vec![newest_table.clone()]);
        Ok(())
    }

    #[test]
    fn check_notes_only_the_scratch_directories_of_loads_and_index_builds() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        for name in [
            "strata-load-123.tmp",
            "strata-load-.tmp",
            "strata-load-12x.tmp",
            "strata-index-5-0.tmp",
            "strata-index-5.tmp",
            "strata-index-5-.tmp",
            "other.tmp",
        ] {
            std::fs::create_dir(dir.path().join(name))?;
        }
        std::fs::write(dir.path().join("strata-load-7.tmp"), b"")?;
        let found = scratch_dirs(dir.path());
        assert_eq!(
            found,
            [
                (dir.path().join("strata-index-5-0.tmp"), "a `CREATE INDEX`"),
                (dir.path().join("strata-load-123.tmp"), "a `strata load`"),
                (dir.path().join("strata-load-7.tmp"), "a `strata load`")
            ]
        );
        Ok(())
    }

    #[test]
    fn hex_arguments_take_an_optional_0x_and_bad_digits_are_errors() -> anyhow::Result<()> {
        assert_eq!(arg_bytes("KEY", "0x6b09", true)?, b"k\t");
        assert_eq!(arg_bytes("KEY", "0X6B09", true)?, b"k\t");
        assert_eq!(arg_bytes("KEY", "6b09", true)?, b"k\t");
        assert_eq!(arg_bytes("KEY", "", true)?, b"");
        assert_eq!(arg_bytes("KEY", "0x6b", false)?, b"0x6b");
        for bad in ["6", "0x6g", "k"] {
            let e = arg_bytes("KEY", bad, true).expect_err(bad);
            assert!(e.to_string().contains("not hexadecimal"), "{e}");
        }
        let e = arg_bytes("KEY", "\u{ff21}\u{ff22}", true).expect_err("full-width letters");
        assert!(
            e.to_string().ends_with("'\u{ff21}' is not a hex digit"),
            "{e}"
        );
        Ok(())
    }

    #[test]
    fn hex_scans_print_keys_and_values_with_tabs_and_newlines_unambiguously() -> anyhow::Result<()>
    {
        let dir = tempfile::tempdir()?;
        let db = Db::open(dir.path(), Options::default())?;
        db.put(b"a\tb", b"line\nbreak")?;
        db.put(b"\xff\x00", b"")?;
        db.put(b"z", b"plain")?;
        db.close()?;
        let run = |args: &ScanArgs| -> anyhow::Result<String> {
            let mut out = Vec::new();
            scan(dir.path(), None, args, &mut out)?;
            Ok(String::from_utf8(out)?)
        };
        let hex = ScanArgs {
            hex: true,
            ..ScanArgs::default()
        };
        assert_eq!(
            run(&hex)?,
            "610962\t6c696e650a627265616b\n7a\t706c61696e\nff00\t\n"
        );
        // Bounds and prefixes given in hex select binary keys.
        let prefix = ScanArgs {
            prefix: Some(arg_bytes("PREFIX", "0xff", true)?),
            ..hex
        };
        assert_eq!(run(&prefix)?, "ff00\t\n");
        // Raw, the same pairs cannot be told apart from the output.
        let raw = ScanArgs {
            to: Some(b"z".to_vec()),
            ..ScanArgs::default()
        };
        assert_eq!(run(&raw)?, "a\tb\tline\nbreak\n");
        Ok(())
    }

    #[test]
    fn sst_dump_reports_a_damaged_block_and_goes_on_with_the_next() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("000007.sst");
        let options = Options {
            block_size: 256,
            compression: false,
            ..Options::default()
        };
        let mut writer = strata_engine::TableWriter::create(&path, &options)?;
        for i in 0..200 {
            writer.put(
                format!("key-{i:04}").as_bytes(),
                format!("value-{i:04}-padding").as_bytes(),
            )?;
        }
        writer.finish()?;
        let sound = Table::open(
            &strata_engine::fs::OsFs,
            &path,
            strata_engine::FileNumber(7),
            None,
            strata_engine::cache::BlockCache::new(1 << 20),
        )?;
        let mut out = Vec::new();
        assert!(dump_entries(&sound, &mut out)?.is_empty());
        assert_eq!(String::from_utf8(out)?.lines().count(), 200);
        assert_eq!(sst_dump(&path, true)?, ExitCode::SUCCESS);
        // A flipped byte in the value of key 100, in a data block in the middle.
        let mut bytes = std::fs::read(&path)?;
        let at = bytes
            .windows(10)
            .position(|w| w == b"value-0100")
            .expect("stored uncompressed");
        bytes[at] ^= 0xff;
        std::fs::write(&path, bytes)?;
        let table = Table::open(
            &strata_engine::fs::OsFs,
            &path,
            strata_engine::FileNumber(7),
            None,
            strata_engine::cache::BlockCache::new(1 << 20),
        )?;
        let mut out = Vec::new();
        let problems = dump_entries(&table, &mut out)?;
        let out = String::from_utf8(out)?;
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert!(problems[0].contains("checksum mismatch"), "{problems:?}");
        assert!(problems[0].contains("going on with the next block"));
        assert!(
            out.contains("key-0000 @"),
            "entries before the damaged block"
        );
        assert!(
            out.contains("key-0199 @"),
            "entries after the damaged block"
        );
        assert!(!out.contains("key-0100 @"));
        let lines = out.lines().count();
        assert!((150..200).contains(&lines), "{lines} entries printed");
        // The command's status is 1, as its help says: a problem of the table.
        assert_eq!(sst_dump(&path, true)?, ExitCode::FAILURE);
        Ok(())
    }
}
