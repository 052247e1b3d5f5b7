#!/usr/bin/env bash
# `make test`: builds (warnings are errors), then runs every suite under ASan+UBSan:
# unit and store tests (cmocka), scenario and interop tests (node --test) against
# a running daemon. Every suite runs even when one fails; the last line is
# "N passed, N failed" over all test cases.
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD
logdir=$root/build-asan/test-logs
passed=0
failed=0
failed_suites=()

bash scripts/deps.sh test || exit 1
make -s -j2 WERROR=1 build || { echo "0 passed, 1 failed"; exit 1; }
make -s -j2 WERROR=1 VARIANT=asan tests-build || { echo "0 passed, 1 failed"; exit 1; }
rm -rf "$logdir" && mkdir -p "$logdir"

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:halt_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export HOOKD_BIN=$root/build-asan/hookd
export HOOKD_TEST_LIB=$root/build-asan

# Adds a suite's counts; a suite that crashed or exited non-zero without
# reporting a failure counts as one failed case, so nothing is lost silently.
tally() { # name status pass fail
    local name=$1 status=$2 p=$3 f=$4
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then f=1; fi
    passed=$((passed + p)); failed=$((failed + f))
    [ "$f" -gt 0 ] && failed_suites+=("$name")
    printf '%-40s %4d passed %4d failed\n' "$name" "$p" "$f"
}

run_cmocka() {
    local bin=$1 name log status p f
    name=${bin#"$root"/build-asan/tests/}
    log=$logdir/${name//\//_}.log
    timeout 600 "$bin" >"$log" 2>&1; status=$?
    p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | head -1)
    f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | head -1)
    tally "$name" "$status" "${p:-0}" "${f:-0}"
    [ "$status" -ne 0 ] && tail -n 40 "$log"
}

run_node() {
    local dir=$1 name log status p f
    name=${dir#"$root"/tests/}
    log=$logdir/node_${name//\//_}.log
    (cd "$root/tests" && timeout 900 node --test --test-reporter=tap --test-concurrency=1 \
        "$dir"/*.test.mjs) >"$log" 2>&1; status=$?
    p=$(grep -E '^# pass [0-9]+' "$log" | grep -oE '[0-9]+' | tail -1)
    f=$(grep -E '^# fail [0-9]+' "$log" | grep -oE '[0-9]+' | tail -1)
    tally "$name" "$status" "${p:-0}" "${f:-0}"
    [ "$status" -ne 0 ] && grep -E -B2 -A25 '^not ok' "$log" | head -n 120
}

for bin in build-asan/tests/unit/* build-asan/tests/store/*; do
    [ -x "$bin" ] && [ -f "$bin" ] && run_cmocka "$root/$bin"
done

if [ -f tests/package.json ]; then
    (cd tests && npm ci --silent --no-audit --no-fund >"$logdir/npm.log" 2>&1) || {
        cat "$logdir/npm.log"; tally "npm ci" 1 0 1; }
fi
for dir in tests/integration tests/interop; do
    ls "$dir"/*.test.mjs >/dev/null 2>&1 && run_node "$root/$dir"
done

[ ${#failed_suites[@]} -gt 0 ] && echo "failed suites: ${failed_suites[*]} (logs in $logdir)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
