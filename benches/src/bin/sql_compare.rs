//! `sql_compare`: the real-data SQL scenario (issue 6) on Strata's SQL layer and on SQLite
//! (bundled, via rusqlite), on the same data in one run.
//!
//! ```sh
//! cargo run --release -p strata-benches --features sqlite --bin sql_compare -- \
//!     --tsv /path/to/sim_counts.tsv            # built by shared/data/make_reads.sh
//! ```
//!
//! Measures: load time (all rows, one SQLite transaction; Strata in 10,000-row INSERT
//! batches, then a flush, or with `--bulk` as one bulk insert, what `.import` runs),
//! `--lookups` random primary-key lookups (`SELECT count FROM reads WHERE seq = ?`: prepared
//! on SQLite; on Strata a translated statement with the literal replaced, plus a smaller run
//! through the full parse path), `count > T` queries without and
//! with an index on `count` (`--repeats` runs each, more for a short query, alternating
//! between the stores; the median is reported, the first run in parentheses), and the size
//! on disk.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use strata_query::ast::{BinaryOp, Expr, Statement};
use strata_query::{Database, OnConflict, Output, Value};

#[derive(Debug, Parser)]
struct Args {
    /// `seq<TAB>count` file (sim_counts.tsv or real_counts.tsv from make_reads.sh).
    #[arg(long)]
    tsv: PathBuf,
    /// Random primary-key lookups to time.
    #[arg(long, default_value_t = 500_000)]
    lookups: usize,
    /// Lookups through the full SQL text path (parse, translate, plan) on Strata.
    #[arg(long, default_value_t = 50_000)]
    parsed_lookups: usize,
    /// Threshold T of the `count > T` queries.
    #[arg(long, default_value_t = 10)]
    threshold: i64,
    /// Work directory (default: a temporary directory).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// RNG seed for the lookup keys.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Load Strata's table as one bulk insert (what `.import` runs: sorted and ingested)
    /// instead of INSERT batches of 10,000 rows.
    #[arg(long)]
    bulk: bool,
    /// Strata's block cache, in MiB: 512 as `strata repl` and `strata serve` open databases
    /// with (the engine's own default is 64).
    #[arg(long, default_value_t = 512)]
    cache_mib: usize,
    /// Store Strata's table blocks uncompressed, as `strata --compression none` does (the
    /// default is LZ4 where it saves at least 12.5% of a block).
    #[arg(long)]
    no_compression: bool,
    /// Runs of each `count > T` query per store (alternating); the median is reported, and
    /// the first (cold) run in parentheses. A query whose runs are short runs more often,
    /// until both stores together have spent [`SHORT_QUERY_BUDGET`] on it (at most
    /// [`MAX_RUNS`] runs each): five runs of a 10 us query are too few for a median on a
    /// machine where one stray interruption takes longer than the query.
    #[arg(long, default_value_t = 5)]
    repeats: usize,
}

/// Time both stores together spend running one `count > T` query at least, by running it
/// more than `--repeats` times when its runs are short.
const SHORT_QUERY_BUDGET: Duration = Duration::from_millis(200);

/// Most runs of one query per store.
const MAX_RUNS: usize = 1000;

const BATCH: usize = 10_000;

fn dir_size(p: &Path) -> u64 {
    std::fs::read_dir(p)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| match e.metadata() {
                    Ok(m) if m.is_dir() => dir_size(&e.path()),
                    Ok(m) => m.len(),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

struct Row {
    what: String,
    strata: String,
    sqlite: String,
    ratio: String,
}

fn speed_row(what: &str, n: usize, s: Duration, q: Duration) -> Row {
    Row {
        what: what.to_owned(),
        strata: format!("{:.0}/s ({:.2} s)", rate(n, s), s.as_secs_f64()),
        sqlite: format!("{:.0}/s ({:.2} s)", rate(n, q), q.as_secs_f64()),
        ratio: format!("{:.2}x", q.as_secs_f64() / s.as_secs_f64()),
    }
}

fn time_row(what: &str, s: Duration, q: Duration) -> Row {
    Row {
        what: what.to_owned(),
        strata: format!("{:.3} ms", s.as_secs_f64() * 1e3),
        sqlite: format!("{:.3} ms", q.as_secs_f64() * 1e3),
        ratio: format!("{:.2}x", q.as_secs_f64() / s.as_secs_f64()),
    }
}

/// The median of `runs` (upper median for an even count).
fn median(runs: &[Duration]) -> Duration {
    let mut sorted = runs.to_vec();
    sorted.sort();
    sorted.get(sorted.len() / 2).copied().unwrap_or_default()
}

/// A row of median times, with the first (cold) run in parentheses.
fn median_row(what: &str, s: &[Duration], q: &[Duration]) -> Row {
    let first = |runs: &[Duration]| runs.first().copied().unwrap_or_default();
    let (sm, qm) = (median(s), median(q));
    Row {
        what: what.to_owned(),
        strata: format!(
            "{:.3} ms (first {:.3} ms, {} runs)",
            sm.as_secs_f64() * 1e3,
            first(s).as_secs_f64() * 1e3,
            s.len()
        ),
        sqlite: format!(
            "{:.3} ms (first {:.3} ms)",
            qm.as_secs_f64() * 1e3,
            first(q).as_secs_f64() * 1e3
        ),
        ratio: format!("{:.2}x", qm.as_secs_f64() / sm.as_secs_f64()),
    }
}

fn first_int(out: Vec<Output>) -> Option<i64> {
    match out.into_iter().next() {
        Some(Output::Rows { rows, .. }) => match rows.first().and_then(|r| r.first()) {
            Some(Value::Int(i)) => Some(*i),
            _ => None,
        },
        _ => None,
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let text = std::fs::read_to_string(&args.tsv)
        .with_context(|| format!("reading {}", args.tsv.display()))?;
    let reads: Vec<(String, i64)> = text
        .lines()
        .map(|l| {
            let (s, c) = l.split_once('\t').context("line without a tab")?;
            Ok((s.to_owned(), c.trim().parse()?))
        })
        .collect::<Result<_>>()?;
    drop(text);
    let tmp = tempfile::tempdir()?;
    let work = args.dir.clone().unwrap_or_else(|| tmp.path().to_owned());
    std::fs::create_dir_all(&work)?;
    let strata_dir = work.join("strata");
    let sqlite_path = work.join("reads.sqlite");
    let _ = std::fs::remove_dir_all(&strata_dir);
    let _ = std::fs::remove_file(&sqlite_path);
    println!(
        "sql_compare: {} rows from {}, {} lookups, threshold {}, block cache {} MiB, \
         compression {}, work dir {}",
        reads.len(),
        args.tsv.display(),
        args.lookups,
        args.threshold,
        args.cache_mib,
        if args.no_compression { "none" } else { "lz4" },
        work.display()
    );
    let mut rng = StdRng::seed_from_u64(args.seed);
    let keys: Vec<usize> = (0..args.lookups)
        .map(|_| rng.random_range(0..reads.len()))
        .collect();
    let mut table = Vec::new();

    // ---- load
    let options = strata_engine::Options::default()
        .block_cache_size(args.cache_mib << 20)
        .compression(!args.no_compression);
    let db = Database::open_with(&strata_dir, options)?;
    db.execute("CREATE TABLE reads (seq TEXT PRIMARY KEY, count BIGINT NOT NULL)")?;
    let t = Instant::now();
    if args.bulk {
        let mut bulk = db.bulk_insert("reads")?;
        for (s, c) in &reads {
            bulk.add(vec![Value::Text(s.clone()), Value::Int(*c)])?;
        }
        bulk.finish()?;
    } else {
        for chunk in reads.chunks(BATCH) {
            let rows = chunk
                .iter()
                .map(|(s, c)| vec![Value::Text(s.clone()), Value::Int(*c)])
                .collect();
            db.insert_values("reads", None, rows, OnConflict::Error)?;
        }
        db.store().db().flush()?;
    }
    let s_load = t.elapsed();

    let conn = rusqlite::Connection::open(&sqlite_path)?;
    conn.execute_batch("CREATE TABLE reads (seq TEXT PRIMARY KEY, count INTEGER NOT NULL)")?;
    let t = Instant::now();
    {
        let tx = conn.unchecked_transaction()?;
        {
            let mut ins = tx.prepare("INSERT INTO reads VALUES (?1, ?2)")?;
            for (s, c) in &reads {
                ins.execute(rusqlite::params![s, c])?;
            }
        }
        tx.commit()?;
    }
    let q_load = t.elapsed();
    let load = if args.bulk {
        "load (rows), Strata as one bulk insert"
    } else {
        "load (rows)"
    };
    table.push(speed_row(load, reads.len(), s_load, q_load));

    // ---- primary-key lookups
    let template = match strata_query::parse::parse("SELECT count FROM reads WHERE seq = 'x'")?
        .first()
        .map(strata_query::translate::statement)
        .transpose()?
    {
        Some(Statement::Select(s)) => s,
        _ => bail!("unexpected translation"),
    };
    let t = Instant::now();
    let mut sum = 0i64;
    for &i in &keys {
        let mut s = template.clone();
        s.filter = Some(Expr::Binary {
            op: BinaryOp::Eq,
            left: Box::new(Expr::Column("seq".into())),
            right: Box::new(Expr::Literal(Value::Text(reads[i].0.clone()))),
        });
        sum += first_int(vec![db.run(&Statement::Select(s))?]).context("missing row")?;
    }
    let s_get = t.elapsed();
    let t = Instant::now();
    let mut sum2 = 0i64;
    {
        let mut q = conn.prepare("SELECT count FROM reads WHERE seq = ?1")?;
        for &i in &keys {
            sum2 += q.query_row([&reads[i].0], |r| r.get::<_, i64>(0))?;
        }
    }
    let q_get = t.elapsed();
    if sum != sum2 {
        bail!("lookup results differ: {sum} vs {sum2}");
    }
    table.push(speed_row(
        "pk lookups (planned statement)",
        keys.len(),
        s_get,
        q_get,
    ));
    let n = args.parsed_lookups.min(keys.len());
    let t = Instant::now();
    for &i in &keys[..n] {
        let sql = format!("SELECT count FROM reads WHERE seq = '{}'", reads[i].0);
        first_int(db.execute(&sql)?).context("missing row")?;
    }
    let s_parsed = t.elapsed();
    let t = Instant::now();
    for &i in &keys[..n] {
        let sql = format!("SELECT count FROM reads WHERE seq = '{}'", reads[i].0);
        conn.query_row(&sql, [], |r| r.get::<_, i64>(0))?;
    }
    let q_parsed = t.elapsed();
    table.push(speed_row(
        "pk lookups (SQL text each time)",
        n,
        s_parsed,
        q_parsed,
    ));

    // ---- count > T, without and with an index
    let th = args.threshold;
    let queries = [
        format!("SELECT count(*) FROM reads WHERE count > {th}"),
        format!("SELECT seq, count FROM reads WHERE count > {th} ORDER BY count DESC LIMIT 20"),
    ];
    let repeats = args.repeats.max(1);
    let run_both = |label: &str, table: &mut Vec<Row>| -> Result<()> {
        for q in &queries {
            let (mut s_runs, mut q_runs) = (Vec::new(), Vec::new());
            let mut spent = Duration::ZERO;
            while s_runs.len() < repeats || (spent < SHORT_QUERY_BUDGET && s_runs.len() < MAX_RUNS)
            {
                let t = Instant::now();
                let out = db.execute(q)?;
                s_runs.push(t.elapsed());
                let t = Instant::now();
                let mut stmt = conn.prepare(q)?;
                let cols = stmt.column_count();
                let mut rows = stmt.query([])?;
                let mut n = 0;
                while let Some(r) = rows.next()? {
                    for c in 0..cols {
                        let _: rusqlite::types::Value = r.get(c)?;
                    }
                    n += 1;
                }
                q_runs.push(t.elapsed());
                spent += s_runs.last().copied().unwrap_or_default()
                    + q_runs.last().copied().unwrap_or_default();
                if let Some(Output::Rows { rows, .. }) = out.first()
                    && rows.len() != n
                {
                    bail!("{q}: {} rows vs {n}", rows.len());
                }
            }
            table.push(median_row(&format!("{q} [{label}]"), &s_runs, &q_runs));
        }
        Ok(())
    };
    run_both("no index", &mut table)?;
    let t = Instant::now();
    db.execute("CREATE INDEX reads_count ON reads (count)")?;
    db.store().db().flush()?;
    let s_idx = t.elapsed();
    let t = Instant::now();
    conn.execute_batch("CREATE INDEX reads_count ON reads (count)")?;
    let q_idx = t.elapsed();
    table.push(time_row("CREATE INDEX on count", s_idx, q_idx));
    run_both("index", &mut table)?;

    // ---- size on disk
    let s_size = dir_size(&strata_dir);
    drop(conn);
    let q_size = std::fs::metadata(&sqlite_path)?.len();
    table.push(Row {
        what: "size on disk, with the index (MiB)".into(),
        strata: format!("{:.1}", mib(s_size)),
        sqlite: format!("{:.1}", mib(q_size)),
        ratio: format!("{:.2}x", q_size as f64 / s_size as f64),
    });

    println!("\n| measure | strata | sqlite | strata speedup (sqlite time / strata time) |");
    println!("|---|---|---|---|");
    for r in &table {
        println!("| {} | {} | {} | {} |", r.what, r.strata, r.sqlite, r.ratio);
    }
    Ok(())
}
