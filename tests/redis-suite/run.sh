#!/usr/bin/env bash
# Runs Redis's own Tcl test suite (the `string`, `incr`, `keyspace`, `scan`, `other`,
# `protocol` and `quit` units of redis 7.0.15)
# against a fresh `strata serve`, as runtest's external-server mode allows. Tests that need
# what Strata deliberately lacks (key expiry, data types other than strings) are skipped by
# tests/redis-suite/skips.txt, one reason per group. Everything else must pass.
#
# The suite comes from Debian's `redis` source package (fetched without changing the
# system's apt configuration) into REDIS_SUITE_CACHE (default /tmp/strata-redis-suite).
# Needs tclsh (Debian's `tcl`, which .ci/run installs) and redis-cli. Port:
# STRATA_TEST_SUITE_PORT (default 16390). Usage: tests/redis-suite/run.sh [STRATA_BINARY]
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=tests/redis-suite
if [ $# -ge 1 ]; then
    BIN=$1
else
    cargo build -q -p strata
    BIN="${CARGO_TARGET_DIR:-target}/debug/strata"
fi
PORT="${STRATA_TEST_SUITE_PORT:-16390}"
CACHE="${REDIS_SUITE_CACHE:-/tmp/strata-redis-suite}"

fetch_suite() {
    local apt="$CACHE/apt"
    mkdir -p "$apt/lists/partial" "$apt/parts"
    if [ -f /etc/apt/sources.list.d/debian.sources ]; then
        sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources \
            > "$apt/parts/src.sources"
    fi
    if [ -f /etc/apt/sources.list ]; then
        sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > "$apt/parts/src.list"
    fi
    local opts=(-o "Dir::Etc::SourceParts=$apt/parts" -o Dir::Etc::SourceList=/dev/null
        -o "Dir::State::Lists=$apt/lists")
    apt-get "${opts[@]}" update -qq
    (cd "$CACHE" && apt-get "${opts[@]}" source --download-only -qq redis)
    tar -xzf "$CACHE"/redis_*.orig.tar.gz -C "$CACHE"
}
SUITE=$(ls -d "$CACHE"/redis-[0-9]*/ 2>/dev/null | head -n 1 || true)
if [ -z "$SUITE" ]; then
    fetch_suite
    SUITE=$(ls -d "$CACHE"/redis-[0-9]*/ | head -n 1)
fi

DIR=$(mktemp -d)
PID=""
cleanup() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then kill "$PID"; wait "$PID" || true; fi
    rm -rf "$DIR"
}
trap cleanup EXIT
"$BIN" serve --dir "$DIR/data" --resp-addr "127.0.0.1:$PORT" --no-pg 2>"$DIR/server.log" &
PID=$!
for _ in $(seq 100); do
    if [ "$(redis-cli -p "$PORT" PING 2>/dev/null)" = PONG ]; then break; fi
    sleep 0.1
done
grep -v -e '^#' -e '^$' "$HERE/skips.txt" > "$DIR/skipfile"
# --host selects external mode; the tags leave out tests that need a server runtest starts
# itself (DEBUG, replication, CONFIG SET of internals).
(cd "$SUITE" && ./runtest --host 127.0.0.1 --port "$PORT" --ignore-encoding --ignore-digest \
    --skipfile "$DIR/skipfile" \
    --tags "-needs:debug -needs:repl -needs:pfdebug -needs:config-maxmemory -needs:config-resetstat -needs:reset -needs:save" \
    --single unit/type/string --single unit/type/incr --single unit/keyspace \
    --single unit/scan --single unit/other --single unit/protocol --single unit/quit) \
    | tee "$DIR/suite.log"
grep -q 'All tests passed without errors' "$DIR/suite.log"
