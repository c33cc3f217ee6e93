#!/usr/bin/env python3
"""Writes the small-pair inputs of the bulk-load benchmark (docs/benchmarks.md, "Bulk load").

    benches/scripts/make_small_pairs.py OUT_DIR [N]

OUT_DIR/small_kv.tsv: N lines (default 10,000,000) `<16 lowercase hex digits><TAB><line index>`,
keys distinct and in random order (seeded, so every run writes the same file);
OUT_DIR/small_kv_sorted.tsv: the same lines sorted by key (byte order).
"""
import os
import random
import sys


def main() -> None:
    out = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000_000
    os.makedirs(out, exist_ok=True)
    rng = random.Random(5)
    seen = set()
    lines = []
    while len(lines) < n:
        key = rng.getrandbits(64)
        if key in seen:
            continue
        seen.add(key)
        lines.append("%016x\t%d\n" % (key, len(lines)))
    with open(os.path.join(out, "small_kv.tsv"), "w") as f:
        f.writelines(lines)
    lines.sort()
    with open(os.path.join(out, "small_kv_sorted.tsv"), "w") as f:
        f.writelines(lines)


if __name__ == "__main__":
    main()
