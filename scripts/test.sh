#!/usr/bin/env bash
# `make test`: builds (warnings are errors), starts a throwaway PostgreSQL
# cluster, then runs every suite under ASan+UBSan: unit tests, the fuzz
# targets for a bounded time each (FUZZ_TEST_TIME, 10 s), the store
# conformance suite on SQLite and on PostgreSQL, and the scenario and interop
# tests (node --test) against running daemons on both backends, and the
# browser tests of the dashboard and portal (tests/ui/, Debian's chromium). Every suite
# runs even when one fails; the last line is "N passed, N failed" over all
# test cases.
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

# The PostgreSQL cluster: an unprivileged user, a unix socket in a temp dir.
pgroot=$(mktemp -d /tmp/hookd-pg.XXXXXX)
chmod 755 "$pgroot"
cleanup() { bash scripts/pg.sh stop "$pgroot/cluster" >/dev/null 2>&1; rm -rf "$pgroot"; }
trap cleanup EXIT
if PG_DSN=$(bash scripts/pg.sh start "$pgroot/cluster" 2>"$logdir/pg-start.log"); then
    export HOOKD_TEST_PG=$PG_DSN
else
    cat "$logdir/pg-start.log"
    PG_DSN=""
fi

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

run_cmocka() { # binary [label]
    local bin=$1 name log status p f
    name=${bin#"$root"/build-asan/tests/}${2:+ ($2)}
    log=$logdir/${name//[^a-zA-Z0-9]/_}.log
    timeout 600 "$bin" >"$log" 2>&1; status=$?
    p=$(grep -E '^\[  PASSED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | head -1)
    f=$(grep -E '^\[  FAILED  \] [0-9]+ test' "$log" | grep -oE '[0-9]+' | head -1)
    tally "$name" "$status" "${p:-0}" "${f:-0}"
    [ "$status" -ne 0 ] && tail -n 40 "$log"
}

run_node() { # dir [label]
    local dir=$1 name log status p f sk
    name=${dir#"$root"/tests/}${2:+ ($2)}
    log=$logdir/node_${name//[^a-zA-Z0-9]/_}.log
    (cd "$root/tests" && timeout 1800 node --test --test-reporter=tap --test-concurrency=1 \
        "$dir"/*.test.mjs) >"$log" 2>&1; status=$?
    p=$(grep -E '^# pass [0-9]+' "$log" | grep -oE '[0-9]+' | tail -1)
    f=$(grep -E '^# fail [0-9]+' "$log" | grep -oE '[0-9]+' | tail -1)
    sk=$(grep -E '^# skipped [0-9]+' "$log" | grep -oE '[0-9]+' | tail -1)
    tally "$name" "$status" "${p:-0}" "${f:-0}"
    # Skipped tests (e.g. the multi-node ones on SQLite) are neither passed nor failed; say so.
    [ "${sk:-0}" -gt 0 ] && printf '%-40s %4d skipped: %s\n' "" "$sk" \
        "$(grep -oE '# SKIP .*' "$log" | sed 's/^# SKIP //' | sort -u | head -3 | paste -sd '|' | sed 's/|/; /g')"
    [ "$status" -ne 0 ] && grep -E -B2 -A25 '^not ok' "$log" | head -n 120
}

for bin in build-asan/tests/unit/* build-asan/tests/store/*; do
    [ -x "$bin" ] && [ -f "$bin" ] && run_cmocka "$root/$bin"
done
# Fuzz targets: each from its committed corpus for a bounded time; one case each, failed on a crash.
if make -s -j2 WERROR=1 fuzz-build >"$logdir/fuzz-build.log" 2>&1; then
    for src in tests/fuzz/fuzz_*.c; do
        t=$(basename "$src" .c)
        bash scripts/fuzz.sh "${FUZZ_TEST_TIME:-10}" "$t" >"$logdir/fuzz_$t.log" 2>&1; status=$?
        if [ "$status" -eq 0 ]; then tally "fuzz/$t" 0 1 0; else tally "fuzz/$t" "$status" 0 1; cat "$logdir/fuzz_$t.log"; fi
    done
else
    cat "$logdir/fuzz-build.log"
    tally "fuzz build" 1 0 1
fi
# The conformance suite again on PostgreSQL (a database of its own).
pg_db() { # name → DSN of a fresh database in the test cluster
    PGOPTIONS="-c client_min_messages=warning" psql -X -q "$PG_DSN" -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" >/dev/null && echo "${PG_DSN/\/\/\/hookd/\/\/\/$1}"
}
if [ -n "$PG_DSN" ]; then
    # Every store test but the ones that pick their backend themselves (test_postgres,
    # test_publish on SQLite, test_publish_pg): a new store test runs here without a list to update.
    for bin in build-asan/tests/store/test_*; do
        t=$(basename "$bin")
        case $t in test_postgres|test_publish|test_publish_pg) continue ;; esac
        HOOKD_TEST_STORE=$(pg_db "conf_$t") run_cmocka "$root/build-asan/tests/store/$t" postgres
    done
else
    tally "postgres cluster" 1 0 1
fi

if [ -f tests/package.json ]; then
    (cd tests && npm ci --silent --no-audit --no-fund >"$logdir/npm.log" 2>&1) || {
        cat "$logdir/npm.log"; tally "npm ci" 1 0 1; }
fi
for dir in tests/integration tests/interop tests/ui; do
    ls "$dir"/*.test.mjs >/dev/null 2>&1 && run_node "$root/$dir" sqlite
done
# The outbound scenarios again on PostgreSQL: the harness makes a database per daemon.
if [ -n "$PG_DSN" ]; then
    HOOKD_TEST_BACKEND=postgres run_node "$root/tests/integration" postgres
    HOOKD_TEST_BACKEND=postgres run_node "$root/tests/ui" postgres
fi

[ ${#failed_suites[@]} -gt 0 ] && echo "failed suites: ${failed_suites[*]} (logs in $logdir)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
