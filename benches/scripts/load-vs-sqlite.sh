#!/usr/bin/env bash
# `strata load` against SQLite's `.import` of the same tab-separated file into a table with a
# primary key (what point lookups need), interleaved, in one run (docs/benchmarks.md, "Bulk
# load").
#
# Usage: benches/scripts/load-vs-sqlite.sh STRATA_BIN ROUNDS FILE...
# Prints: engine,file,round,seconds,pairs,pairs_per_s,mb_per_s,bytes_on_disk
set -euo pipefail
bin=${1:?strata binary}; rounds=${2:?rounds}; shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
now() { date +%s.%N; }
echo "engine,file,round,seconds,pairs,pairs_per_s,mb_per_s,bytes_on_disk"
for round in $(seq "$rounds"); do
    for file in "$@"; do
        pairs=$(wc -l < "$file"); bytes=$(stat -c %s "$file"); name=$(basename "$file")
        report() { # engine, t0, t1, disk bytes
            local s; s=$(echo "$3 - $2" | bc)
            echo "$1,$name,$round,$s,$pairs,$(echo "$pairs / $s" | bc),$(echo "$bytes / $s / 1000000" | bc -l | cut -c1-6),$4"
        }
        rm -rf "$work/strata"
        t0=$(now); "$bin" load "$work/strata" "$file" >/dev/null; t1=$(now)
        report strata "$t0" "$t1" "$(du -sb "$work/strata" | cut -f1)"
        rm -f "$work/sqlite.db"
        t0=$(now)
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
    done
done
