#!/usr/bin/env bash
# The genomics lab's network workload (issue 7): load ~2.8 million distinct reads with their
# counts through the Redis protocol (`strata load --resp`, pipelined SETs), then fetch 500,000
# of them with pipelined GETs (`redis-cli --pipe`), against `strata serve` and redis-server
# (no persistence) in one run. Input: sim_counts.tsv from ../shared/data/make_reads.sh.
#
# Usage: [SERVE_ARGS="--cache-mb 512"] benches/scripts/reads-over-network.sh STRATA_BIN COUNTS_TSV
# Prints: server,step,seconds,items,items_per_s
set -euo pipefail
bin=${1:?strata binary}; tsv=${2:?read<TAB>count file}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
# 500,000 GETs of loaded reads, in the Redis protocol, for redis-cli --pipe.
head -n 500000 "$tsv" | awk -F'\t' '{printf "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", length($1), $1}' > "$work/gets.resp"
pairs=$(wc -l < "$tsv")
now() { date +%s.%N; }
wait_ready() { # port: until the server answers PING (at most 20 s)
    for _ in $(seq 200); do
        redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "server on port $1 did not start" >&2; exit 1
}
measure() { # server, port
    local t0 t1
    t0=$(now)
    "$bin" load --resp "127.0.0.1:$2" "$tsv" >/dev/null
    t1=$(now)
    echo "$1,load,$(echo "$t1 - $t0" | bc),$pairs,$(echo "$pairs / ($t1 - $t0)" | bc)"
    t0=$(now)
    redis-cli -p "$2" --pipe < "$work/gets.resp" > "$work/pipe.out"
    t1=$(now)
    grep -q "errors: 0, replies: 500000" "$work/pipe.out" || { cat "$work/pipe.out"; exit 1; }
    echo "$1,get-500k,$(echo "$t1 - $t0" | bc),500000,$(echo "500000 / ($t1 - $t0)" | bc)"
}
echo "server,step,seconds,items,items_per_s"
redis-server --port 16490 --save '' --appendonly no >/dev/null &
pid=$!; wait_ready 16490
measure redis-server 16490
kill "$pid"; wait "$pid" 2>/dev/null || true
# shellcheck disable=SC2086 # SERVE_ARGS is a list of arguments
"$bin" serve --dir "$work/db" --resp-addr 127.0.0.1:16491 --no-pg --sync batch ${SERVE_ARGS:-} \
    >/dev/null 2>&1 &
pid=$!; wait_ready 16491
measure "strata${SERVE_ARGS:+ $SERVE_ARGS}" 16491
kill -INT "$pid"; wait "$pid" 2>/dev/null || true
