#!/usr/bin/env bash
# End-to-end test of sharding over twemproxy (docs/scale-out.md, issue #9): three
# `strata serve --sync always` nodes and one nutcracker on loopback ports.
#   1. 100,000 keys load through the proxy with `strata load --resp`;
#   2. every node holds 20% to 45% of them (DBSIZE on each node, directly);
#   3. every key reads back through the proxy, with GET and with MGETs spanning the nodes,
#      and `strata rebalance --check` agrees with the proxy on where each key lives;
#   4. a node is killed with SIGKILL while a writer runs through the proxy, and restarted:
#      every acknowledged write is there;
#   5. a fourth node is added by the procedure of docs/scale-out.md (rebalance --keep,
#      restart the proxy, rebalance), and every key still reads back;
#   6. the proxy (SIGINT) and the nodes (SIGTERM, exit status 0) stop cleanly.
#
# Needs nutcracker and redis-cli (.ci/run installs them). Ports: STRATA_TEST_SCALEOUT_PORT
# (default 17400) for the proxy, the next four for the nodes, +10 for the proxy's stats.
set -euo pipefail
cd "$(dirname "$0")/../.."
PATH="$PATH:/usr/sbin"  # Debian installs nutcracker there
for tool in nutcracker redis-cli; do
    command -v "$tool" >/dev/null || { echo "scale-out: $tool is missing (apt-get install nutcracker redis-tools)"; exit 1; }
done
cargo build -q --release --bin strata
BIN="${CARGO_TARGET_DIR:-target}/release/strata"
BASE="${STRATA_TEST_SCALEOUT_PORT:-17400}"
PROXY=$BASE
KEYS=100000
ACKS=4000
DIR=$(mktemp -d)
declare -A NODE_PID=()
PROXY_PID=""
START=$SECONDS

cleanup() {
    for pid in "${NODE_PID[@]}" $PROXY_PID; do
        if kill -0 "$pid" 2>/dev/null; then kill -KILL "$pid" 2>/dev/null || true; fi
    done
    rm -rf "$DIR"
}
trap cleanup EXIT

fail() {
    echo "FAILED: $*"
    for log in "$DIR"/*.log; do
        [ -f "$log" ] && { echo "--- $log"; tail -n 20 "$log"; }
    done
    exit 1
}
step() { echo "== [$((SECONDS - START)) s] $*"; }
node_port() { echo $((BASE + $1)); }

for p in $(seq "$BASE" $((BASE + 4))) $((BASE + 10)); do
    if redis-cli -p "$p" PING >/dev/null 2>&1; then fail "port $p is in use"; fi
done

start_node() {
    local i=$1
    "$BIN" serve --dir "$DIR/node$i" --resp-addr "127.0.0.1:$(node_port "$i")" --no-pg \
        --sync always 2>>"$DIR/node$i.log" &
    NODE_PID[$i]=$!
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$(node_port "$i")" PING 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    fail "node $i did not start"
}

# The configuration of docs/scale-out.md, on this test's ports, for nodes 1..$1.
write_config() {
    local n=$1 file=$2
    {
        echo "strata:"
        echo "  listen: 127.0.0.1:$PROXY"
        echo "  hash: fnv1a_64"
        echo "  distribution: ketama"
        echo "  redis: true"
        echo "  auto_eject_hosts: false"
        echo "  timeout: 60000"
        echo "  server_connections: 1"
        echo "  servers:"
        for i in $(seq "$n"); do echo "    - 127.0.0.1:$(node_port "$i"):1 strata$i"; done
    } >"$file"
    nutcracker -t -c "$file" >/dev/null 2>&1 || fail "nutcracker -t refuses $file"
}

start_proxy() {
    nutcracker -c "$1" -s $((BASE + 10)) -a 127.0.0.1 -o "$DIR/proxy.log" &
    PROXY_PID=$!
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$PROXY" PING 2>/dev/null)" = PONG ] && return 0
        sleep 0.1
    done
    fail "nutcracker did not start"
}

# nutcracker exits with status 1 after logging SIGINT; that is its clean stop.
stop_proxy() {
    kill -INT "$PROXY_PID"
    wait "$PROXY_PID" || true
    grep -q "SIGINT) received, exiting" "$DIR/proxy.log" || fail "nutcracker did not stop on SIGINT"
    PROXY_PID=""
}

dbsize() { redis-cli -p "$(node_port "$1")" DBSIZE; }

# Reads keys.txt's keys through the proxy with MGETs of 100 (each spans the nodes) and
# compares with values.txt, line by line.
check_mget() {
    awk '{ line = line " " $0 } NR % 100 == 0 { print "MGET" line; line = "" }
         END { if (line != "") print "MGET" line }' "$1" | redis-cli -p "$PROXY" >"$DIR/mget.out"
    cmp -s "$DIR/mget.out" "$2" || fail "MGET through the proxy: $(diff "$DIR/mget.out" "$2" | head -5)"
}

step "three nodes and the proxy"
for i in 1 2 3; do start_node "$i"; done
write_config 3 "$DIR/nutcracker.yml"
start_proxy "$DIR/nutcracker.yml"

step "load $KEYS keys through the proxy (strata load --resp)"
seq 0 $((KEYS - 1)) | awk '{ printf "key:%06d\tvalue:%06d:%s\n", $1, $1, "ACGTTGCA" }' >"$DIR/keys.tsv"
cut -f1 "$DIR/keys.tsv" >"$DIR/keys.txt"
cut -f2 "$DIR/keys.tsv" >"$DIR/values.txt"
"$BIN" load --resp "127.0.0.1:$PROXY" "$DIR/keys.tsv" | tee "$DIR/load.out"
grep -q "^loaded $KEYS pairs" "$DIR/load.out" || fail "load did not report $KEYS pairs"

step "each node holds 20% to 45% of the keys"
total=0
for i in 1 2 3; do
    n=$(dbsize "$i")
    echo "node $i: $n keys"
    [ "$n" -ge $((KEYS / 5)) ] && [ "$n" -le $((KEYS * 45 / 100)) ] \
        || fail "node $i holds $n of $KEYS keys"
    total=$((total + n))
done
[ "$total" -eq "$KEYS" ] || fail "the nodes hold $total keys, not $KEYS"

step "every key reads back through the proxy: GET, then MGET"
sed 's/^/GET /' "$DIR/keys.txt" | redis-cli -p "$PROXY" >"$DIR/get.out"
cmp -s "$DIR/get.out" "$DIR/values.txt" || fail "GET through the proxy: $(diff "$DIR/get.out" "$DIR/values.txt" | head -5)"
check_mget "$DIR/keys.txt" "$DIR/values.txt"
"$BIN" rebalance "$DIR/nutcracker.yml" --check || fail "strata rebalance disagrees with the proxy"

step "SIGKILL node 2 under a write load through the proxy, restart it"
seq 0 $((ACKS - 1)) | awk '{ printf "SET ack:%05d v%05d\n", $1, $1 }' >"$DIR/acks.cmd"
redis-cli -p "$PROXY" <"$DIR/acks.cmd" >"$DIR/acks.out" 2>&1 &
WRITER=$!
while [ "$(wc -l <"$DIR/acks.out")" -lt $((ACKS / 5)) ]; do
    kill -0 "$WRITER" 2>/dev/null || fail "the writer ended before the kill: raise ACKS"
    sleep 0.02
done
kill -0 "$WRITER" 2>/dev/null || fail "the writer ended before the kill: raise ACKS"
before=$(wc -l <"$DIR/acks.out")
# Disowned first, so that the shell does not report the killed job.
disown "${NODE_PID[2]}"
kill -KILL "${NODE_PID[2]}"
while kill -0 "${NODE_PID[2]}" 2>/dev/null; do sleep 0.01; done
sleep 0.3
start_node 2
wait "$WRITER" || fail "the writer failed"
# redis-cli prints an empty line after each error reply; a SET's reply is never empty.
sed -i '/^$/d' "$DIR/acks.out"
[ "$(wc -l <"$DIR/acks.out")" -eq "$ACKS" ] \
    || fail "the writer got $(wc -l <"$DIR/acks.out") replies for $ACKS commands: $(grep -v '^OK$' "$DIR/acks.out" | sort | uniq -c | head)"
paste -d' ' "$DIR/acks.cmd" "$DIR/acks.out" | awk '$4 == "OK" { print $2 }' >"$DIR/acked.txt"
awk '{ print "v" substr($1, 5) }' "$DIR/acked.txt" >"$DIR/acked.values"
acked=$(wc -l <"$DIR/acked.txt")
refused=$((ACKS - acked))
echo "killed after $before replies; $acked writes acknowledged, $refused refused"
grep -v '^OK$' "$DIR/acks.out" | sort | uniq -c | head -3
[ "$acked" -gt 0 ] || fail "no write was acknowledged"
sed 's/^/GET /' "$DIR/acked.txt" | redis-cli -p "$PROXY" >"$DIR/acked.out"
cmp -s "$DIR/acked.out" "$DIR/acked.values" \
    || fail "acknowledged writes lost: $(diff "$DIR/acked.out" "$DIR/acked.values" | head -5)"
check_mget "$DIR/keys.txt" "$DIR/values.txt"

step "add a fourth node (docs/scale-out.md: rebalance --keep, restart the proxy, rebalance)"
start_node 4
write_config 4 "$DIR/nutcracker-4.yml"
if "$BIN" rebalance "$DIR/nutcracker-4.yml" --check >"$DIR/check4.out"; then
    fail "rebalance --check found nothing to move to the new node"
fi
tail -n 1 "$DIR/check4.out"
step "rebalance --keep"
"$BIN" rebalance "$DIR/nutcracker-4.yml" --keep | tail -n 1
step "restart the proxy with four nodes"
stop_proxy
start_proxy "$DIR/nutcracker-4.yml"
step "rebalance"
"$BIN" rebalance "$DIR/nutcracker-4.yml" | tail -n 1
"$BIN" rebalance "$DIR/nutcracker-4.yml" --check | tail -n 1 || fail "keys left misplaced"
total=0
for i in 1 2 3 4; do
    n=$(dbsize "$i")
    echo "node $i: $n keys"
    total=$((total + n))
done
n4=$(dbsize 4)
[ "$n4" -ge $((total * 15 / 100)) ] && [ "$n4" -le $((total * 35 / 100)) ] \
    || fail "the new node holds $n4 of $total keys"
# Writes refused by the proxy were never applied, except one in flight at the kill.
[ "$total" -ge $((KEYS + acked)) ] && [ "$total" -le $((KEYS + ACKS)) ] \
    || fail "$total keys after the move, expected $((KEYS + acked)) (+ at most $refused)"
step "every key reads back through the proxy (MGET)"
check_mget "$DIR/keys.txt" "$DIR/values.txt"
cat "$DIR/keys.txt" "$DIR/acked.txt" >"$DIR/all.txt"
cat "$DIR/values.txt" "$DIR/acked.values" >"$DIR/all.values"
check_mget "$DIR/all.txt" "$DIR/all.values"

step "stop the proxy and the nodes"
stop_proxy
for i in 1 2 3 4; do
    kill -TERM "${NODE_PID[$i]}"
    wait "${NODE_PID[$i]}" || fail "node $i exited with status $? on SIGTERM"
    unset "NODE_PID[$i]"
done
echo "scale-out: all checks passed in $((SECONDS - START)) s"
