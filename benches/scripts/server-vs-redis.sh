#!/usr/bin/env bash
# redis-benchmark against redis-server (no persistence) and one or more `strata serve` binaries,
# interleaved, in one run (docs/server.md, "Benchmark").
#
# Usage: benches/scripts/server-vs-redis.sh ROUNDS PIPELINE STRATA_BIN [STRATA_BIN...]
# Prints one CSV line per run: server,test,pipeline,requests_per_s,p99_ms
set -euo pipefail
rounds=${1:?rounds}; pipeline=${2:?pipeline}; shift 2
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
port=16390
run_one() { # name, port
    redis-benchmark -p "$2" -t set,get -n 1000000 -r 10000000 -d 8 -c 50 -P "$pipeline" --csv \
        | awk -F'","' -v name="$1" -v p="$pipeline" 'NR>1 {gsub(/"/,""); split($0,f,","); print name "," f[1] "," p "," f[2] "," f[7]}'
}
echo "server,test,pipeline,requests_per_s,p99_ms"
for _ in $(seq "$rounds"); do
    redis-server --port "$port" --save '' --appendonly no --daemonize no >/dev/null &
    pid=$!; sleep 0.5
    run_one redis-server "$port"
    kill "$pid"; wait "$pid" 2>/dev/null || true
    for bin in "$@"; do
        rm -rf "$work/db"
        "$bin" serve --dir "$work/db" --resp-addr "127.0.0.1:$((port + 1))" --no-pg --sync batch \
            >/dev/null 2>&1 &
        pid=$!; sleep 1
        run_one "$(basename "$bin")" "$((port + 1))"
        kill -INT "$pid"; wait "$pid" 2>/dev/null || true
    done
done
