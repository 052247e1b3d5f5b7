#!/usr/bin/env bash
# `make bench`: builds the release binaries, describes the machine, runs the delivery scenarios
# (throughput several times, median reported; latency; memory) and compares the figures with the targets.
# Environment: BENCH_RUNS (throughput repeats, 3), BENCH_DIR (scratch parent, build/bench-work),
# BENCH_THROUGHPUT_ARGS / BENCH_LATENCY_ARGS / BENCH_MEMORY_ARGS (extra loadgen flags),
# BENCH_STRICT=1 (exit 1 when a figure misses its target, not only when a scenario fails).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

RUNS=${BENCH_RUNS:-3}
WORK=${BENCH_DIR:-build/bench-work}
LOADGEN=build/bench/loadgen
TARGET_TPUT=15000 # deliveries/s, durable bookkeeping on SQLite
TARGET_P99=5      # ms commit->arrival at 1,000 events/s
TARGET_RSS=64     # MiB with 100,000 events pending

make -s -j2 build bench-build || { echo "bench: build failed" >&2; exit 1; }
mkdir -p "$WORK" || exit 1

echo "== machine"
uname -a
echo "nproc: $(nproc)"
sed -n 's/^model name[[:space:]]*: /cpu: /p' /proc/cpuinfo | head -1
awk '/^MemTotal/ { printf "memory: %.1f GiB\n", $2 / 1048576 }' /proc/meminfo
df -T "$WORK" | awk 'NR == 2 { print "store filesystem: " $2 " (" $1 ")" }'
echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sqlite $(pkg-config --modversion sqlite3), libcurl $(pkg-config --modversion libcurl)," \
    "hookd commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$( [ -n "$(git status --porcelain 2>/dev/null)" ] && echo ' (uncommitted changes)')"

failed=0
# run NAME ARGS...: one loadgen run; its output goes to the terminal and to $WORK/NAME.out.
run() {
    local name=$1
    shift
    echo
    echo "== $name: $LOADGEN --dir $WORK $*"
    "$LOADGEN" --dir "$WORK" "$@" 2>&1 | tee "$WORK/$name.out"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" -ne 0 ]; then
        echo "bench: $name failed (exit $rc)" >&2
        failed=1
    fi
    return "$rc"
}

# field NAME KEY: KEY's value on the RESULT line of run NAME (empty when the run failed).
field() {
    sed -n "s/^RESULT .* $2=\([^ ]*\).*/\1/p" "$WORK/$1.out" 2>/dev/null | tail -1
}

# shellcheck disable=SC2086 # the *_ARGS variables are word lists on purpose
{
    tputs=()
    for i in $(seq 1 "$RUNS"); do
        run "throughput-$i" --scenario throughput ${BENCH_THROUGHPUT_ARGS:-}
        v=$(field "throughput-$i" deliveries_per_s)
        [ -n "$v" ] && tputs+=("$v")
    done
    run latency --scenario latency ${BENCH_LATENCY_ARGS:-}
    run memory --scenario memory ${BENCH_MEMORY_ARGS:-}
}

median=""
if [ "${#tputs[@]}" -gt 0 ]; then
    median=$(printf '%s\n' "${tputs[@]}" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
fi
p50=$(field latency p50_ms)
p99=$(field latency p99_ms)
rate=$(field latency rate)
rss=$(field memory peak_rss_mib)
pending=$(field memory pending)

# verdict VALUE OP TARGET: PASS, MISS, or "no figure" when the run failed.
verdict() {
    if [ -z "$1" ]; then
        echo "no figure"
    elif awk -v v="$1" -v t="$3" -v op="$2" 'BEGIN { exit !((op == ">=") ? v >= t : v <= t) }'; then
        echo PASS
    else
        echo MISS
    fi
}
v_tput=$(verdict "$median" '>=' $TARGET_TPUT)
v_lat=$(verdict "$p99" '<=' $TARGET_P99)
v_mem=$(verdict "$rss" '<=' $TARGET_RSS)

echo
echo "== summary"
printf '%-11s %-54s %-12s %s\n' scenario figure target verdict
printf '%-11s %-54s %-12s %s\n' throughput "median ${median:-?} deliveries/s (runs: ${tputs[*]:-none})" \
    ">= $TARGET_TPUT/s" "$v_tput"
printf '%-11s %-54s %-12s %s\n' latency "p99 ${p99:-?} ms (p50 ${p50:-?} ms) at ${rate:-?} events/s" "<= $TARGET_P99 ms" "$v_lat"
printf '%-11s %-54s %-12s %s\n' memory "peak RSS ${rss:-?} MiB with ${pending:-?} events pending" "<= $TARGET_RSS MiB" "$v_mem"
echo "(full outputs: $WORK/*.out)"

if [ "$failed" -ne 0 ]; then
    echo "bench: a scenario failed (see above)" >&2
    exit 1
fi
if [ "${BENCH_STRICT:-0}" = 1 ] && [ "$v_tput$v_lat$v_mem" != PASSPASSPASS ]; then
    echo "bench: a figure missed its target" >&2
    exit 1
fi
exit 0
