#!/usr/bin/env bash
# Interleaved A/B of `strata serve` builds under psycopg point lookups
# (benches/scripts/pg-lookups.py), reporting lookups/s and the server's CPU time per lookup
# (utime + stime from /proc/PID/stat around the timed lookups), which varies less than
# lookups/s on a shared machine (docs/server.md, "Quick statements and pipelined replies").
#
# Usage: benches/scripts/pg-lookups-ab.sh ROUNDS N DIR TSV LABEL=STRATA_BIN [LABEL=STRATA_BIN...]
# DIR/reads must hold a database with the reads of TSV (read<TAB>count lines), for example:
#   strata repl DIR/reads -c "CREATE TABLE reads (seq TEXT PRIMARY KEY, count BIGINT NOT NULL)"
#   printf '.import TSV reads\n' | strata repl DIR/reads
# Each run starts a fresh server on DIR (PostgreSQL port 27433, RESP off), warms it with 500
# lookups (which open the database), then times N.
set -euo pipefail
rounds=${1:?rounds}; n=${2:?lookups}; dir=${3:?dir}; tsv=${4:?tsv}; shift 4
here=$(dirname "$0")
port=27433
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
ticks=$(getconf CLK_TCK)
echo "label,round,lookups_per_s,server_cpu_us_per_lookup"
for round in $(seq "$rounds"); do
    for spec in "$@"; do
        label=${spec%%=*}; bin=${spec#*=}
        "$bin" serve --dir "$dir" --no-resp --pg-addr "127.0.0.1:$port" 2>/dev/null &
        pid=$!
        for _ in $(seq 100); do
            python3 -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.1)" \
                2>/dev/null && break
            sleep 0.1
        done
        python3 "$here/pg-lookups.py" "$port" reads "$tsv" 500 > /dev/null
        before=$(cpu_ticks "$pid")
        out=$(python3 "$here/pg-lookups.py" "$port" reads "$tsv" "$n")
        after=$(cpu_ticks "$pid")
        rate=${out%% lookups/s*}
        echo "$label,$round,$rate,$(( (after - before) * 1000000 / ticks / n ))"
        kill "$pid"; wait "$pid" 2>/dev/null || true
    done
done
