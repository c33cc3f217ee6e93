#!/usr/bin/env bash
# Fuzz smoke run (CI): builds every target in fuzz/ and runs each for a few seconds from its
# committed seed corpus (fuzz/corpus/<target>/). Exits non-zero on any crash: a panic, a hang
# (-timeout), an allocation over 64 MiB (fuzz/src/lib.rs) or an RSS over -rss_limit_mb.
# A failing input is saved under fuzz/artifacts/<target>/ and printed in hex.
#
#   STRATA_FUZZ_SECONDS  seconds per target (default 10)
#   STRATA_FUZZ_TARGETS  space-separated targets to run (default: all, from `cargo fuzz list`)
#
# Only the stable toolchain exists here, so targets are built without a sanitizer (`-s none`;
# the engine has no unsafe code) and as a `--dev` build (fuzz/Cargo.toml gives the dev profile
# opt-level 1): it compiles in a fraction of the release build's time. Longer runs use the
# release build; see docs/testing.md.
set -euo pipefail
cd "$(dirname "$0")"

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi

seconds="${STRATA_FUZZ_SECONDS:-10}"
targets="${STRATA_FUZZ_TARGETS:-$(cargo fuzz list)}"
work="$(mktemp -d)"
# Scratch files of the targets that read and write files (fuzz/src/lib.rs `scratch`): on tmpfs
# when there is one, as the manifest and WAL targets fsync.
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
    scratch="$(mktemp -d -p /dev/shm strata-fuzz.XXXXXX)"
else
    scratch="$work/scratch"
fi
trap 'rm -rf "$work" "$scratch"' EXIT
export STRATA_FUZZ_SCRATCH="$scratch"

echo "== cargo fuzz build (dev profile, no sanitizer)"
start=$(date +%s)
cargo fuzz build -s none --dev
echo "built in $(( $(date +%s) - start )) s"

total=0
failed=""
for t in $targets; do
    mkdir -p "$work/corpus/$t" "artifacts/$t"
    log="$work/$t.log"
    # New inputs go to the scratch corpus (first directory); the committed seeds stay as they are.
    if cargo fuzz run -s none --dev "$t" "$work/corpus/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="artifacts/$t/" -print_final_stats=1 >"$log" 2>&1; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        total=$(( total + ${runs:-0} ))
        echo "fuzz $t: ${runs:-?} executions in ${seconds} s, no crash"
    else
        echo "fuzz $t: FAILED"
        grep -E "panicked|ERROR|SUMMARY|Test unit written|allocation" "$log" | head -20 || true
        tail -40 "$log"
        for a in artifacts/"$t"/*; do
            [ -f "$a" ] && { echo "input $a:"; od -A d -t x1 "$a" | head -40; }
        done
        failed="$failed $t"
    fi
done
echo "fuzz total: $total executions"
if [ -n "$failed" ]; then
    echo "fuzz smoke run FAILED:$failed"
    exit 1
fi
