#!/usr/bin/env bash
# redis-cli against strata serve (port in STRATA_RESP_PORT).
set -euo pipefail
R="redis-cli -p $STRATA_RESP_PORT"
expect() { local want=$1; shift; local got; got=$("$@"); [ "$got" = "$want" ] || { echo "$*: got '$got', want '$want'"; exit 1; }; }
expect PONG $R PING
expect OK $R SET cli:greeting "hello world"
expect "hello world" $R GET cli:greeting
expect 1 $R INCR cli:n
expect 11 $R INCRBY cli:n 10
expect "ERR value is not an integer or out of range" $R INCR cli:greeting
expect "ERR unknown command 'NOPE', with args beginning with: 'x' " $R NOPE x
expect OK $R SELECT 3
$R -3 HELLO 3 | grep -q proto
# Mass insert with --pipe (uses ECHO to find the end).
for i in $(seq 1000); do printf 'SET pipe:%d %d\r\n' "$i" "$i"; done | $R --pipe | grep -q "errors: 0, replies: 1000"
expect 1000 bash -c "$R --scan --pattern 'pipe:*' | wc -l | tr -d ' '"
expect 500 $R GET pipe:500
$R INFO engine | grep -q '^wal_bytes:'
$R INFO keyspace | grep -q '^db0:keys='
expect "CREATE TABLE" $R -n 0 SQL "CREATE TABLE kv (k TEXT PRIMARY KEY, v BIGINT)"
expect "INSERT 0 1" $R SQL "INSERT INTO kv VALUES ('a', 1)"
$R DATABASES | grep -q db0
echo "redis-cli ok"
