#!/usr/bin/env bash
# Runs every libFuzzer target in build-fuzz/ for SECONDS each (default 60),
# from its committed seed corpus (tests/fuzz/corpus/<target>/, read only: new
# inputs go to a scratch directory). A crash leaves its input in
# build-fuzz/artifacts/. One line per target; exits non-zero when any failed.
#   scripts/fuzz.sh [SECONDS] [TARGET...]
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -eq 0 ] && for f in tests/fuzz/fuzz_*.c; do targets+=("$(basename "$f" .c)"); done
mkdir -p build-fuzz/artifacts build-fuzz/logs
failed=0
for t in "${targets[@]}"; do
    scratch=$(mktemp -d /tmp/hookd-fuzz.XXXXXX)
    log=build-fuzz/logs/$t.log
    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:halt_on_error=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        timeout $((seconds + 60)) "build-fuzz/$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -max_len=8192 -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$t-" \
        "$scratch" "tests/fuzz/corpus/$t" >"$log" 2>&1
    status=$?
    rm -rf "$scratch"
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1)
    if [ "$status" -eq 0 ]; then
        printf '%-28s ok (%s runs in %ss)\n' "$t" "${runs:-?}" "$seconds"
    else
        failed=$((failed + 1))
        printf '%-28s FAILED (status %d, log %s)\n' "$t" "$status" "$log"
        grep -E 'ERROR|SUMMARY|runtime error|deadly signal' "$log" | head -5
    fi
done
[ "$failed" -eq 0 ]
