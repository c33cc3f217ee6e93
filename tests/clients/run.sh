#!/usr/bin/env bash
# Runs real clients against a fresh `strata serve`: redis-cli, psql, redis-py, psycopg 3 with
# pandas, and the Python examples of docs/python.md. Then stops the server with SIGTERM
# (it must exit 0), restarts it on the same directory and checks the data is still there.
#
# Needs redis-cli, psql and the Python packages redis, psycopg and pandas (.ci/run installs
# them). Ports: STRATA_TEST_RESP_PORT (default 16380) and STRATA_TEST_PG_PORT (15433).
set -euo pipefail
cd "$(dirname "$0")/../.."
HERE=tests/clients
cargo build -q -p strata
BIN="${CARGO_TARGET_DIR:-target}/debug/strata"
export STRATA_RESP_PORT="${STRATA_TEST_RESP_PORT:-16380}"
export STRATA_PG_PORT="${STRATA_TEST_PG_PORT:-15433}"
DIR=$(mktemp -d)
PID=""
cleanup() {
    if [ -n "$PID" ] && kill -0 "$PID" 2>/dev/null; then kill "$PID"; wait "$PID" || true; fi
    rm -rf "$DIR"
}
trap cleanup EXIT

start() {
    "$BIN" serve --dir "$DIR" --resp-addr "127.0.0.1:$STRATA_RESP_PORT" \
        --pg-addr "127.0.0.1:$STRATA_PG_PORT" --sync always 2>>"$DIR.log" &
    PID=$!
    for _ in $(seq 100); do
        # Our server must be the one answering: another process on the port (a server left
        # running) would answer PING while ours exits for want of the address.
        if ! kill -0 "$PID" 2>/dev/null; then break; fi
        if [ "$(redis-cli -p "$STRATA_RESP_PORT" PING 2>/dev/null)" = PONG ]; then
            sleep 0.2
            kill -0 "$PID" 2>/dev/null && return 0
            break
        fi
        sleep 0.1
    done
    echo "server did not start"; cat "$DIR.log"; exit 1
}

passed=0
failed=0
check() {
    local name=$1; shift
    if "$@" >"$DIR.out" 2>&1; then
        passed=$((passed + 1)); echo "ok: $name"
    else
        failed=$((failed + 1)); echo "FAILED: $name"; cat "$DIR.out"
    fi
}

start
check "redis-cli" bash "$HERE/redis_cli.sh"
check "psql" bash "$HERE/psql.sh"
check "redis-py" python3 "$HERE/redis_py.py"
check "psycopg + pandas" python3 "$HERE/psycopg_pandas.py"
check "docs/python.md examples" python3 "$HERE/python_docs.py" docs/python.md
stop_clean() { kill -TERM "$PID"; wait "$PID"; }
check "SIGTERM shuts down cleanly" stop_clean
PID=""
start
check "data survives a restart" bash -c \
    "[ \"\$(redis-cli -p $STRATA_RESP_PORT GET cli:greeting)\" = 'hello world' ] &&
     [ \"\$(PGHOST=127.0.0.1 PGPORT=$STRATA_PG_PORT PGUSER=ci psql -d clients -At -c 'SELECT COUNT(*) FROM reads')\" = 3 ]"
rm -f "$DIR.log" "$DIR.out"
echo "clients: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
