"""psycopg 3 (extended protocol, binary int parameters) and pandas.read_sql against strata serve."""
import os
import threading
import time
import warnings

import pandas as pd
import psycopg

conninfo = f"host=127.0.0.1 port={os.environ['STRATA_PG_PORT']} user=ci dbname=pyclients"
with psycopg.connect(conninfo, autocommit=True) as conn:
    conn.execute("CREATE TABLE reads (seq TEXT PRIMARY KEY, count BIGINT, quality DOUBLE, "
                 "paired BOOLEAN, raw BYTEA)")
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO reads VALUES (%s, %s, %s, %s, %s)",
            [("ACGT", 12, 31.5, True, b"\x00\x01"), ("TTGA", 3, None, False, None),
             ("GGCC", 2**40, 28.25, None, b"")],
        )
        cur.execute("SELECT seq, count, quality, paired, raw FROM reads WHERE count > %s "
                    "ORDER BY count", (5,))
        rows = cur.fetchall()
        assert rows == [("ACGT", 12, 31.5, True, b"\x00\x01"), ("GGCC", 2**40, 28.25, None, b"")], rows
        cur.execute("SELECT COUNT(*) AS n, AVG(count) FROM reads")
        assert cur.fetchone()[0] == 3
        try:
            cur.execute("SELECT * FROM missing")
            raise AssertionError("no error")
        except psycopg.errors.UndefinedTable:
            pass
        try:
            cur.execute("INSERT INTO reads (seq, count) VALUES (%s, %s)", ("ACGT", 1))
            raise AssertionError("no error")
        except psycopg.errors.UniqueViolation:
            pass
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pandas prefers SQLAlchemy connections
        df = pd.read_sql("SELECT seq, count, quality FROM reads ORDER BY seq", conn)
    assert list(df["seq"]) == ["ACGT", "GGCC", "TTGA"]
    assert str(df["count"].dtype) == "int64"
    assert df["quality"].isna().sum() == 1
# Non-autocommit: psycopg sends BEGIN ... COMMIT.
with psycopg.connect(conninfo) as conn:
    conn.execute("UPDATE reads SET count = %s WHERE seq = %s", (13, "ACGT"))
    conn.commit()
    assert conn.execute("SELECT count FROM reads WHERE seq = 'ACGT'").fetchone() == (13,)
# psycopg prepares a query it has run 5 times; its rollback after an error then sends
# DEALLOCATE ALL, and its statements must still work afterwards.
with psycopg.connect(conninfo) as conn:
    for i in range(8):
        assert conn.execute("SELECT count(*) FROM reads WHERE count > %s", (i,)).fetchone()[0] >= 1
    try:
        conn.execute("SELECT * FROM missing")
        raise AssertionError("no error")
    except psycopg.errors.UndefinedTable:
        pass
    conn.rollback()
    for i in range(8):
        assert conn.execute("SELECT count(*) FROM reads WHERE count > %s", (i,)).fetchone()[0] >= 1
    conn.commit()
# A cancel request (psycopg's cancel from another thread, as Ctrl-C in a psycopg program
# sends) stops the running statement with QueryCanceled (57014); it changed nothing and the
# connection goes on.
with psycopg.connect(conninfo, autocommit=True) as conn:
    conn.execute("CREATE TABLE big (id BIGINT PRIMARY KEY, g BIGINT)")
    conn.execute("INSERT INTO big VALUES " + ", ".join(f"({i}, 0)" for i in range(50_000)))
    running = threading.Event()
    running.set()

    def cancel_until_done():
        cancel = getattr(conn, "cancel_safe", conn.cancel)
        while running.is_set():
            time.sleep(0.02)
            cancel()

    canceller = threading.Thread(target=cancel_until_done)
    canceller.start()
    try:
        conn.execute("UPDATE big SET g = g + 1")
        raise AssertionError("the UPDATE was not canceled")
    except psycopg.errors.QueryCanceled as e:
        assert "interrupted" in str(e), e
    finally:
        running.clear()
        canceller.join()
    time.sleep(0.3)  # a last cancel request in flight lands on no statement
    assert conn.execute("SELECT count(*), sum(g) FROM big").fetchone() == (50_000, 0)
print("psycopg + pandas ok")
