#!/usr/bin/env bash
# Builds the comparison harness with both peers and runs every workload against Strata, RocksDB
# and fjall (engines interleaved per run, medians of 3). See docs/benchmarks.md.
#
# Usage: benches/scripts/compare-all.sh [OUT_FILE]
# Environment: CARGO_TARGET_DIR (default /work/target-peers: RocksDB's C++ takes an hour or more
# to build on 2 shared cores, so keep it in one place), BENCH_DIR (databases; default
# /work/bench-data), BUILD_TRIES (default 6, 10 minutes apart: the engine may be mid-edit).
set -euo pipefail
cd "$(dirname "$0")/../.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/work/target-peers}"
out="${1:-/dev/stdout}"
data="${BENCH_DIR:-/work/bench-data}"
mkdir -p "$data"

tries="${BUILD_TRIES:-6}"
until nice -n 19 cargo build --release -p strata-benches --features rocksdb,fjall --bin compare; do
    tries=$((tries - 1))
    if [ "$tries" -le 0 ]; then
        echo "compare-all: build failed" >&2
        exit 1
    fi
    sleep 600
done
bin="$CARGO_TARGET_DIR/release/compare"
cp "$bin" "$data/compare.bin"  # later builds must not swap the binary under a running measurement

{
    echo "# $(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null || echo '?') | $(uptime)"
    "$data/compare.bin" --engines strata,rocksdb,fjall --workload fill-mem,group-commit --dir "$data"
    "$data/compare.bin" --engines strata,rocksdb,fjall --workload read-random,read-missing,scan \
        --dir "$data"
    echo "# $(date -u +%FT%TZ) | $(uptime)"
} 2>&1 | tee "$out"
