#!/usr/bin/env bash
# Bulk load of the same tab-separated key<TAB>value files, interleaved in one run
# (docs/benchmarks.md, "Bulk load"):
#   strata   `strata load DB FILE` (external sort, TableWriter, one atomic ingest)
#   rocksdb  `rocksdb_load DB FILE` (the same steps with RocksDB's SstFileWriter and one
#            ingest_external_file; benches/src/bin/rocksdb_load), skipped when its binary is `-`
#   sqlite   sqlite3's `.import` into a table with a primary key (what point lookups need)
# Each round loads every file with each engine (sqlite, then strata and rocksdb, their order
# swapped every round), into a fresh directory, after
# reading the file once so all three start from the page cache, and after a `sync` so none waits
# for the previous one's dirty pages to be written. Time is wall time of the whole
# process (open, load, close).
#
# Usage: benches/scripts/load-vs-sqlite.sh STRATA_BIN ROCKSDB_LOAD_BIN|- ROUNDS FILE...
#   WORK=DIR puts the databases under DIR (default: a new directory in $TMPDIR or /tmp).
# Prints: engine,file,round,seconds,pairs,input_bytes,pairs_per_s,mb_per_s,bytes_on_disk,load_average
# then, per file, the median seconds of each engine and the ratios strata/engine (time of the
# engine over time of strata: above 1, strata is faster).
set -euo pipefail
strata=${1:?strata binary}; rocks=${2:?rocksdb_load binary or -}; rounds=${3:?rounds}; shift 3
work=$(mktemp -d ${WORK:+-p "$WORK"})
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
loadavg() { cut -d' ' -f1 /proc/loadavg; }
csv="$work/results.csv"
echo "engine,file,round,seconds,pairs,input_bytes,pairs_per_s,mb_per_s,bytes_on_disk,load_average" | tee "$csv"
for round in $(seq "$rounds"); do
    for file in "$@"; do
        pairs=$(wc -l < "$file"); bytes=$(stat -c %s "$file"); name=$(basename "$file")
        report() { # engine, t0, t1, disk bytes
            local s; s=$(printf '%.3f' "$(echo "$3 - $2" | bc)")
            printf '%s,%s,%s,%s,%s,%s,%.0f,%.1f,%s,%s\n' "$1" "$name" "$round" "$s" "$pairs" \
                "$bytes" "$(echo "$pairs / $s" | bc -l)" "$(echo "$bytes / $s / 1000000" | bc -l)" \
                "$4" "$(loadavg)" | tee -a "$csv"
        }
        run_strata() {
            rm -rf "$work/strata"
            sync; t0=$(now); "$strata" load "$work/strata" "$file" >/dev/null; t1=$(now)
            report strata "$t0" "$t1" "$(du -sb "$work/strata" | cut -f1)"
            rm -rf "$work/strata"
        }
        run_rocksdb() {
            [ "$rocks" != "-" ] || return 0
            rm -rf "$work/rocksdb"
            sync; t0=$(now); "$rocks" "$work/rocksdb" "$file" >/dev/null; t1=$(now)
            report rocksdb "$t0" "$t1" "$(du -sb "$work/rocksdb" | cut -f1)"
            rm -rf "$work/rocksdb"
        }
        run_sqlite() {
            rm -f "$work"/sqlite.db*
            sync; t0=$(now)
            sqlite3 "$work/sqlite.db" >/dev/null <<SQL
PRAGMA journal_mode=WAL;
PRAGMA synchronous=NORMAL;
CREATE TABLE kv (k TEXT PRIMARY KEY, v TEXT) WITHOUT ROWID;
.mode ascii
.separator "\t" "\n"
.import $file kv
SQL
            t1=$(now)
            report sqlite "$t0" "$t1" "$(stat -c %s "$work/sqlite.db")"
            rm -f "$work"/sqlite.db*
        }
        cat "$file" > /dev/null
        # SQLite first, then strata and RocksDB in turns: deleting SQLite's 190-330 MB frees
        # page cache that this VM hands back to its host, and the next process's fresh memory
        # then faults slowly (docs/benchmarks.md, "Writeback while tables are written"), so
        # each of the two closest rivals follows it in half the rounds.
        run_sqlite
        if (( round % 2 )); then run_strata; run_rocksdb; else run_rocksdb; run_strata; fi
    done
done
echo
echo "file,engine,median_seconds,median_pairs_per_s,median_mb_per_s,time_over_strata"
# Median seconds per (file, engine); the ratio is engine median / strata median.
tail -n +2 "$csv" | sort -t, -k2,2 -k1,1 -k4,4g | awk -F, '
    { key = $2 "," $1; n[key]++; s[key, n[key]] = $4; p[key] = $5; files[$2] = 1; b[$2] = $6 }
    END {
        for (f in files) {
            split("strata rocksdb sqlite", engines, " ")
            for (i = 1; i <= 3; i++) {
                key = f "," engines[i]; if (!(key in n)) continue
                c = n[key]; m = (c % 2) ? s[key, (c + 1) / 2] : (s[key, c / 2] + s[key, c / 2 + 1]) / 2
                med[engines[i]] = m
                ratio = ("strata" in med) ? sprintf("%.2f", m / med["strata"]) : "?"
                printf "%s,%s,%.3f,%.0f,%.1f,%s\n", f, engines[i], m, p[key] / m, b[f] / m / 1e6, ratio
            }
            delete med
        }
    }'
