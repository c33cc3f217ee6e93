#!/usr/bin/env bash
# Throughput through twemproxy (nutcracker) in front of one, two and three `strata serve`
# nodes, and directly against one node, in one run: `redis-benchmark -t set,get -P 16 -q`
# against each target, rounds interleaved (every target once per round), medians of ROUNDS.
# Prints a Markdown table with ratios to the direct run. See docs/scale-out.md.
#
# Usage: benches/scripts/scaleout.sh [OUT_FILE]
# Environment: ROUNDS (default 3), REQUESTS per test (default 200000), CLIENTS (default 50),
# KEYSPACE for -r (default 1000000: random keys, so they spread over the nodes), SYNC (the
# nodes' --sync, default batch, the server's default), STRATA_BENCH_PORT (default 17500:
# proxies on +0..+2, nodes on +11..+13, proxy stats on +20).
# Needs nutcracker and redis-benchmark (Debian: nutcracker, redis-tools).
set -euo pipefail
cd "$(dirname "$0")/../.."
PATH="$PATH:/usr/sbin"  # Debian installs nutcracker there
out="${1:-/dev/stdout}"
rounds="${ROUNDS:-3}"
requests="${REQUESTS:-200000}"
clients="${CLIENTS:-50}"
keyspace="${KEYSPACE:-1000000}"
sync="${SYNC:-batch}"
base="${STRATA_BENCH_PORT:-17500}"

cargo build -q --release --bin strata
bin="${CARGO_TARGET_DIR:-target}/release/strata"
dir=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$dir"
}
trap cleanup EXIT

node_port() { echo $((base + 10 + $1)); }
for i in 1 2 3; do
    "$bin" serve --dir "$dir/node$i" --resp-addr "127.0.0.1:$(node_port "$i")" --no-pg \
        --sync "$sync" 2>>"$dir/node$i.log" &
    pids+=($!)
done

# One nutcracker, three pools: the first one, two and three nodes, each on its own port.
{
    for n in 1 2 3; do
        echo "nodes$n:"
        echo "  listen: 127.0.0.1:$((base + n - 1))"
        echo "  hash: fnv1a_64"
        echo "  distribution: ketama"
        echo "  redis: true"
        echo "  auto_eject_hosts: false"
        echo "  servers:"
        for i in $(seq "$n"); do echo "    - 127.0.0.1:$(node_port "$i"):1 strata$i"; done
    done
} >"$dir/nutcracker.yml"
nutcracker -t -c "$dir/nutcracker.yml" >/dev/null 2>&1
nutcracker -c "$dir/nutcracker.yml" -s $((base + 20)) -a 127.0.0.1 -o "$dir/proxy.log" &
pids+=($!)
for port in $(node_port 1) $(node_port 2) $(node_port 3) "$base" $((base + 1)) $((base + 2)); do
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$port" PING 2>/dev/null)" = PONG ] && break
        sleep 0.1
    done
done

started="$(date -u +%FT%TZ) | load at start:$(uptime | sed 's/.*load average://')"
targets=("direct:$(node_port 1)" "proxy-1:$base" "proxy-2:$((base + 1))" "proxy-3:$((base + 2))")
declare -A runs=()
for round in $(seq "$rounds"); do
    for t in "${targets[@]}"; do
        name=${t%%:*} port=${t##*:}
        # -q prints "SET: 123456.79 requests per second, p50=0.303 msec" per test (redis-
        # benchmark's CONFIG GET is refused by nutcracker; it goes on without it).
        result=$(redis-benchmark -h 127.0.0.1 -p "$port" -t set,get -P 16 -q \
            -n "$requests" -c "$clients" -r "$keyspace" 2>/dev/null | tr '\r' '\n')
        for test in SET GET; do
            rps=$(grep "^$test: " <<<"$result" | tail -n 1 | awk '{ print $2 }')
            [ -n "$rps" ] || { echo "no $test result for $name: $result" >&2; exit 1; }
            runs[$name.$test]="${runs[$name.$test]:-} $rps"
        done
        echo "round $round $name: SET ${runs[$name.SET]##* } GET ${runs[$name.GET]##* }" >&2
    done
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
{
    echo "# $started | at end:$(uptime | sed 's/.*load average://') | $(nproc) cores"
    echo "# redis-benchmark -t set,get -P 16 -q -n $requests -c $clients -r $keyspace;" \
        "nodes --sync $sync; medians of $rounds rounds"
    echo
    echo "| target | SET req/s | GET req/s | SET vs direct | GET vs direct |"
    echo "|---|---:|---:|---:|---:|"
    direct_set=$(median "${runs[direct.SET]}")
    direct_get=$(median "${runs[direct.GET]}")
    for t in "${targets[@]}"; do
        name=${t%%:*}
        set_rps=$(median "${runs[$name.SET]}")
        get_rps=$(median "${runs[$name.GET]}")
        awk -v n="$name" -v s="$set_rps" -v g="$get_rps" -v ds="$direct_set" -v dg="$direct_get" \
            'BEGIN { printf "| %s | %.0f | %.0f | %.2f | %.2f |\n", n, s, g, s / ds, g / dg }'
    done
} | tee "$out"
