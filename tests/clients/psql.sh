#!/usr/bin/env bash
# psql against strata serve (port in STRATA_PG_PORT), database "clients".
set -euo pipefail
export PGHOST=127.0.0.1 PGPORT=$STRATA_PG_PORT PGUSER=ci PGDATABASE=clients
P="psql -X -v ON_ERROR_STOP=1"
$P -c "CREATE TABLE reads (seq TEXT PRIMARY KEY, count BIGINT NOT NULL, quality DOUBLE)" \
   -c "INSERT INTO reads VALUES ('ACGTACGTAC', 12, 31.5), ('TTGACCAGTA', 3, NULL), ('GGGCCCAAAT', 7, 28.0)" \
   -c "CREATE INDEX reads_by_count ON reads (count)"
got=$($P -At -c "SELECT seq, count FROM reads WHERE count > 5 ORDER BY count")
[ "$got" = $'GGGCCCAAAT|7\nACGTACGTAC|12' ] || { echo "got: $got"; exit 1; }
got=$($P -At -c "SELECT COUNT(*), SUM(count) FROM reads")
[ "$got" = "3|22" ] || { echo "got: $got"; exit 1; }
# Errors carry SQLSTATEs and do not break the session.
err=$($P -c '\set VERBOSITY verbose' -c "SELECT * FROM missing" 2>&1 || true)
echo "$err" | grep -q "42P01" || { echo "no 42P01 in: $err"; exit 1; }
err=$($P -c '\set VERBOSITY verbose' -c "INSERT INTO reads VALUES ('ACGTACGTAC', 1, NULL)" 2>&1 || true)
echo "$err" | grep -q "23505" || { echo "no 23505 in: $err"; exit 1; }
# Catalog queries (\d) get a clear error, not a hang.
err=$(timeout 20 psql -X -c '\d' 2>&1 || true)
echo "$err" | grep -q "not supported" || { echo "\\d said: $err"; exit 1; }
# Transactions are accepted.
$P -c "BEGIN" -c "UPDATE reads SET count = 13 WHERE seq = 'ACGTACGTAC'" -c "COMMIT"
[ "$($P -At -c "SELECT count FROM reads WHERE seq = 'ACGTACGTAC'")" = 13 ]
# Text that is not UTF-8 is refused (22021), never stored as U+FFFD; so is a client encoding
# the server would not convert (it converts none).
err=$(printf "SELECT 'caf\xe9';" | $P -v VERBOSITY=verbose 2>&1 || true)
echo "$err" | grep -q "22021" || { echo "no 22021 in: $err"; exit 1; }
err=$(PGCLIENTENCODING=LATIN1 $P -c "SELECT 1" 2>&1 || true)
echo "$err" | grep -q 'client_encoding "LATIN1" is not supported' || { echo "LATIN1: $err"; exit 1; }
[ "$(PGCLIENTENCODING=SQL_ASCII $P -At -c "SELECT 'ok'")" = ok ]
echo "psql ok"
