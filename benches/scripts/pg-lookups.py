"""Point lookups through psycopg 3, one statement at a time, as a web front end fetches one
read at a time: `SELECT count FROM reads WHERE seq = %s` with a random read of TSV's first
200,000 lines per lookup (psycopg's extended protocol: Parse, Bind, Describe, Execute, Sync).

Usage: python3 pg-lookups.py PORT DBNAME TSV N
Prints: lookups/s and microseconds per lookup. Every lookup must find its read.
"""

import random
import sys
import time

import psycopg


def main() -> None:
    port, dbname, tsv, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
    with open(tsv, encoding="utf-8") as f:
        seqs = [line.split("\t", 1)[0] for _, line in zip(range(200_000), f)]
    rng = random.Random(1)
    picks = [rng.choice(seqs) for _ in range(n)]
    query = "SELECT count FROM reads WHERE seq = %s"
    with psycopg.connect(
        f"host=127.0.0.1 port={port} dbname={dbname} user=bench", autocommit=True
    ) as conn:
        cur = conn.cursor()
        for seq in picks[:50]:
            cur.execute(query, (seq,))
            cur.fetchone()
        started = time.perf_counter()
        for seq in picks:
            cur.execute(query, (seq,))
            if cur.fetchone() is None:
                sys.exit(f"CHECK FAILED: {seq} not found")
        took = time.perf_counter() - started
    print(f"{n / took:.0f} lookups/s, {took / n * 1e6:.1f} us each")


if __name__ == "__main__":
    main()
