#!/usr/bin/env bash
# Interleaved A/B of `strata serve` builds under redis-benchmark, reporting requests/s and the
# server's CPU time per request (utime + stime from /proc/PID/stat, before and after each test),
# which varies less than requests/s on a shared machine (docs/server.md, "Pipelined GETs").
#
# Usage: benches/scripts/server-cpu-ab.sh ROUNDS PIPELINE LABEL=STRATA_BIN [LABEL=STRATA_BIN...]
# Prints one line per run: label, then for SET and GET: requests/s and ns of server CPU per
# request. Each run starts a fresh server on an empty directory; GET follows SET, as in
# server-vs-redis.sh.
set -euo pipefail
rounds=${1:?rounds}; pipeline=${2:?pipeline}; shift 2
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
port=16397
ticks=$(getconf CLK_TCK)
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
echo "label,set_requests_per_s,set_cpu_ns,get_requests_per_s,get_cpu_ns"
for _ in $(seq "$rounds"); do
    for spec in "$@"; do
        label=${spec%%=*}; bin=${spec#*=}
        rm -rf "$work/db"
        "$bin" serve --dir "$work/db" --resp-addr "127.0.0.1:$port" --no-pg --sync batch \
            >/dev/null 2>&1 &
        pid=$!; sleep 1
        line=$label
        for test in set get; do
            before=$(cpu_ticks "$pid")
            rps=$(redis-benchmark -p "$port" -t "$test" -n 1000000 -r 10000000 -d 8 -c 50 \
                -P "$pipeline" --csv | awk -F'","' 'NR>1 {gsub(/"/,""); split($0,f,","); print f[2]}')
            after=$(cpu_ticks "$pid")
            line="$line,${rps%.*},$(( (after - before) * 1000000000 / ticks / 1000000 ))"
        done
        echo "$line"
        kill -INT "$pid"; wait "$pid" 2>/dev/null || true
    done
done
