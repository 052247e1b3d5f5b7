#!/usr/bin/env bash
# `make bench`: builds the release binaries, describes the machine, runs the delivery scenarios on
# SQLite (throughput several times, median reported; latency; memory), then on PostgreSQL (rounds of
# throughput with 1 and with BENCH_PG_NODES nodes and latency with 1 node; medians reported), and
# compares the figures with the targets.
# Environment: BENCH_RUNS (throughput repeats, 3), BENCH_DIR (scratch parent, build/bench-work),
# BENCH_THROUGHPUT_ARGS / BENCH_LATENCY_ARGS / BENCH_MEMORY_ARGS (extra loadgen flags, SQLite),
# BENCH_INBOUND_RUNS (inbound and inbound-latency repeats on each store, 3; medians reported),
# BENCH_PG=0 (skip PostgreSQL), BENCH_PG_RUNS (PostgreSQL throughput repeats, BENCH_RUNS),
# BENCH_PG_NODES (3), BENCH_PG_THROUGHPUT_ARGS / BENCH_PG_LATENCY_ARGS / BENCH_PG_ISOLATION_ARGS,
# BENCH_BUDGET_S (780: repeats
# that would end past this many seconds are skipped, and the summary says so),
# BENCH_STRICT=1 (exit 1 when a figure misses its target, not only when a scenario fails).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

RUNS=${BENCH_RUNS:-3}
WORK=${BENCH_DIR:-build/bench-work}
LOADGEN=build/bench/loadgen
TARGET_TPUT=15000 # deliveries/s, durable bookkeeping on SQLite
TARGET_P99=5      # ms commit->arrival at 1,000 events/s
TARGET_RSS=64     # MiB with 100,000 events pending
TARGET_PG_TPUT=15000 # deliveries/s on PostgreSQL, one node
TARGET_PG_P99=10     # ms commit->arrival at 1,000 events/s on PostgreSQL, one node
TARGET_DRAIN=40000   # deliveries/s, SQLite's backlog drain of 20,000 events (issue 14)
TARGET_DRAIN_CPU=100 # us of CPU (hookd and cluster) a delivery, PostgreSQL's drain on one node (issue 14)
PG_RUNS=${BENCH_PG_RUNS:-$RUNS}
IN_RUNS=${BENCH_INBOUND_RUNS:-3}
PG_NODES=${BENCH_PG_NODES:-3}
BUDGET=${BENCH_BUDGET_S:-780}
START=$SECONDS

# The Makefile's bench rule does not know loadgen's headers: rebuild when one is newer.
for h in bench/*.h; do
    [ -e "$h" ] && [ "$h" -nt "$LOADGEN" ] && rm -f "$LOADGEN"
done
make -s -j2 build bench-build || { echo "bench: build failed" >&2; exit 1; }
mkdir -p "$WORK" || exit 1

# loadgen stops the clusters it starts (also on SIGINT/SIGTERM); this catches one it could not
# (loadgen killed with SIGKILL): any cluster still running under $WORK.
stop_leftover_clusters() {
    local d
    for d in "$WORK"/hookd-bench.*/pg; do
        [ -f "$d/data/postmaster.pid" ] && timeout 60 bash scripts/pg.sh ctl "$d" stop >/dev/null 2>&1
    done
    return 0
}
trap stop_leftover_clusters EXIT

pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
pg_ok=0
if [ "${BENCH_PG:-1}" != 0 ] && [ -x "$pg_bin/initdb" ]; then
    pg_ok=1
fi

echo "== machine"
uname -a
echo "nproc: $(nproc)"
sed -n 's/^model name[[:space:]]*: /cpu: /p' /proc/cpuinfo | head -1
awk '/^MemTotal/ { printf "memory: %.1f GiB\n", $2 / 1048576 }' /proc/meminfo
df -T "$WORK" | awk 'NR == 2 { print "store filesystem: " $2 " (" $1 ")" }'
echo "loadavg at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "sqlite $(pkg-config --modversion sqlite3), libcurl $(pkg-config --modversion libcurl)," \
    "hookd commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$( [ -n "$(git status --porcelain 2>/dev/null)" ] && echo ' (uncommitted changes)')"
if [ "$pg_ok" = 1 ]; then
    echo "postgresql: $("$pg_bin/postgres" --version), libpq $(pkg-config --modversion libpq); throwaway cluster per run (scripts/pg.sh: fsync on, synchronous_commit on)"
else
    echo "postgresql: not run (${BENCH_PG:+BENCH_PG=$BENCH_PG, }server binaries ${pg_bin:-not found})"
fi

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
    # Issue 14's backlog drains on SQLite: 20,000 events committed while hookd is down, to 1 and to 4 endpoints.
    for k in 1 4; do
        run "drain-${k}ep" --scenario memory --pending 20000 --endpoints "$k" ${BENCH_DRAIN_ARGS:-}
    done
    # Five rounds: a part's p99 is the tail of 2,500 samples, which one stall of the box decides.
    run isolation --scenario isolation --rounds 5 ${BENCH_ISOLATION_ARGS:-}
    # An ack's p99 follows the disk's sync tail of the minute: the median of IN_RUNS runs (alternated).
    rm -f "$WORK"/inbound-*.out
    for i in $(seq 1 "$IN_RUNS"); do
        run "inbound-$i" --scenario inbound ${BENCH_INBOUND_ARGS:-}
        run "inbound-latency-$i" --scenario inbound-latency ${BENCH_INBOUND_LATENCY_ARGS:-}
    done
    run machine --scenario machine --events 10000 --env HOOKD_INBOX_WORKERS=256 ${BENCH_MACHINE_ARGS:-}
    run machine-latency --scenario machine-latency --env HOOKD_INBOX_WORKERS=64 ${BENCH_MACHINE_LATENCY_ARGS:-}
    run retention --scenario retention ${BENCH_RETENTION_ARGS:-}
}

# PostgreSQL: one run of each kind first (so the budget never drops a kind), then the repeats while
# the budget allows. A repeat is skipped when the previous run of its kind, repeated, would end past it.
pg_tput1=()
pg_tputn=()
pg_skipped=""
declare -A last_secs=()
# pg_run KIND NAME ARGS...: like run, timed per kind; returns 1 without running when over budget.
pg_run() {
    local kind=$1 name=$2 t0=$SECONDS
    shift 2
    if [ -n "${last_secs[$kind]:-}" ] && [ $((SECONDS - START + last_secs[$kind])) -gt "$BUDGET" ]; then
        echo
        echo "== $name: skipped (would end past the ${BUDGET} s budget: $((SECONDS - START)) s so far, ${last_secs[$kind]} s per run)"
        pg_skipped="$pg_skipped $name"
        return 1
    fi
    run "$name" "$@"
    last_secs[$kind]=$((SECONDS - t0))
}
# shellcheck disable=SC2086 # the *_ARGS variables are word lists on purpose
pg_lat=()
pg_tput() { # pg_tput I: the throughput runs of round I, and a latency run
    local v
    pg_run tput1 "pg-throughput-1node-$1" --store pg --scenario throughput --timeout 240 ${BENCH_PG_THROUGHPUT_ARGS:-}
    v=$(field "pg-throughput-1node-$1" deliveries_per_s)
    [ -n "$v" ] && pg_tput1+=("$v")
    pg_run tputn "pg-throughput-${PG_NODES}nodes-$1" --store pg --nodes "$PG_NODES" --scenario throughput \
        --timeout 240 ${BENCH_PG_THROUGHPUT_ARGS:-}
    v=$(field "pg-throughput-${PG_NODES}nodes-$1" deliveries_per_s)
    [ -n "$v" ] && pg_tputn+=("$v")
    pg_run latency "pg-latency-$1" --store pg --scenario latency ${BENCH_PG_LATENCY_ARGS:-}
    v=$(field "pg-latency-$1" p99_ms)
    [ -n "$v" ] && pg_lat+=("$v")
    if [ "$1" = 1 ]; then
        pg_run isolation pg-isolation --store pg --scenario isolation --rounds 5 ${BENCH_PG_ISOLATION_ARGS:-}
        for j in $(seq 1 "$IN_RUNS"); do
            pg_run inbound "pg-inbound-$j" --store pg --scenario inbound ${BENCH_PG_INBOUND_ARGS:-}
            pg_run inbound-latency "pg-inbound-latency-$j" --store pg --scenario inbound-latency ${BENCH_PG_INBOUND_LATENCY_ARGS:-}
        done
        # A PostgreSQL store needs the key that seals secrets (sources hold them): one per run.
        key=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
        pg_run machine pg-machine --store pg --scenario machine --events 10000 --env HOOKD_INBOX_WORKERS=256 \
            --env "HOOKD_SERVER_SECRET_KEY=$key" ${BENCH_PG_MACHINE_ARGS:-}
        pg_run machine-latency pg-machine-latency --store pg --scenario machine-latency --env HOOKD_INBOX_WORKERS=64 \
            --env "HOOKD_SERVER_SECRET_KEY=$key" ${BENCH_PG_MACHINE_LATENCY_ARGS:-}
        # Issue 14's backlog drains: 20,000 events committed while hookd is down, to 1 and to 4 endpoints.
        for k in 1 4; do
            pg_run drain "pg-drain-${k}ep" --store pg --scenario memory --pending 20000 --endpoints "$k" \
                ${BENCH_PG_DRAIN_ARGS:-}
            pg_run drainn "pg-drain-${k}ep-${PG_NODES}nodes" --store pg --nodes "$PG_NODES" --scenario memory \
                --pending 20000 --endpoints "$k" ${BENCH_PG_DRAIN_ARGS:-}
        done
    fi
}
if [ "$pg_ok" = 1 ]; then
    rm -f "$WORK"/pg-*.out
    # shellcheck disable=SC2086
    {
        pg_tput 1
        for i in $(seq 2 "$PG_RUNS"); do
            pg_tput "$i"
        done
    }
fi

# median VALUES...: the median, or empty without values.
median_of() {
    [ "$#" -gt 0 ] || return 0
    printf '%s\n' "$@" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}
median=$(median_of "${tputs[@]}")
p50=$(field latency p50_ms)
p99=$(field latency p99_ms)
rate=$(field latency rate)
ach=$(field latency achieved_rate)
rss=$(field memory peak_rss_mib)
pending=$(field memory pending)
# iso KEY HUNG: the isolation run's median KEY with HUNG hung endpoints.
iso() { sed -n "s/^RESULT scenario=isolation hung=$2 \(.* \)*$1=\([^ ]*\).*/\2/p" "$WORK/${3:-isolation}.out" 2>/dev/null | tail -1; }
iso_d0=$(iso deliveries_per_s 0); iso_d8=$(iso deliveries_per_s 8); iso_d1=$(iso deliveries_per_s 1)
iso_p0=$(iso p99_ms 0); iso_p1=$(iso p99_ms 1); iso_p8=$(iso p99_ms 8)
# within10 A B: PASS when B is within 10 % of A (deliveries/s not below, p99 not above), MISS, or "no figure".
within10() {
    if [ -z "$1" ] || [ -z "$2" ]; then echo "no figure"
    elif awk -v a="$1" -v b="$2" -v up="$3" 'BEGIN { exit !(up ? b <= a * 1.1 : b >= a * 0.9) }'; then echo PASS
    else echo MISS; fi
}

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
# rate_missed NAME: for a paced run that fell short of its rate (achieved below 95 % of it), what it
# achieved; empty when it kept its rate (or has no figure). A p99 measured below the target rate says
# nothing about the target: the verdict of such a run is a MISS whatever its latency.
rate_missed() {
    local a r
    a=$(field "$1" achieved_rate)
    r=$(field "$1" rate)
    [ -n "$a" ] && [ -n "$r" ] && awk -v a="$a" -v r="$r" 'BEGIN { exit !(a < r * 0.95) }' &&
        echo "RATE MISSED: $a/s of $r/s"
    return 0
}
# latency_verdict NAME P99 TARGET: verdict's, unless the run missed its rate.
latency_verdict() {
    local missed
    missed=$(rate_missed "$1")
    if [ -n "$missed" ]; then echo "MISS ($missed)"; else verdict "$2" '<=' "$3"; fi
}
v_tput=$(verdict "$median" '>=' $TARGET_TPUT)
v_lat=$(latency_verdict latency "$p99" $TARGET_P99)
v_mem=$(verdict "$rss" '<=' $TARGET_RSS)

echo
echo "== summary"
printf '%-11s %-54s %-12s %s\n' scenario figure target verdict
printf '%-11s %-54s %-12s %s\n' throughput "median ${median:-?} deliveries/s (runs: ${tputs[*]:-none})" \
    ">= $TARGET_TPUT/s" "$v_tput"
printf '%-11s %-54s %-12s %s\n' latency "p99 ${p99:-?} ms (p50 ${p50:-?} ms) at ${ach:-?} of ${rate:-?} events/s" "<= $TARGET_P99 ms" "$v_lat"
printf '%-11s %-54s %-12s %s\n' memory "peak RSS ${rss:-?} MiB with ${pending:-?} events pending" "<= $TARGET_RSS MiB" "$v_mem"
printf '%-11s %-54s %-12s %s\n' isolation "healthy deliveries/s: ${iso_d0:-?} alone, ${iso_d1:-?} / ${iso_d8:-?} beside 1 / 8 hung" \
    "within 10 %" "$(within10 "$iso_d0" "$iso_d1" 0) $(within10 "$iso_d0" "$iso_d8" 0)"
printf '%-11s %-54s %-12s %s\n' isolation "healthy p99 ms: ${iso_p0:-?} alone, ${iso_p1:-?} / ${iso_p8:-?} beside 1 / 8 hung" \
    "within 10 %" "$(within10 "$iso_p0" "$iso_p1" 1) $(within10 "$iso_p0" "$iso_p8" 1)"

sq_d1=$(field drain-1ep deliveries_per_s); sq_d4=$(field drain-4ep deliveries_per_s)
printf '%-11s %-54s %-12s %s\n' drain "20,000 events to 1 / 4 endpoints: ${sq_d1:-?} / ${sq_d4:-?} deliveries/s" \
    ">= $TARGET_DRAIN/s" "$(verdict "$sq_d1" '>=' $TARGET_DRAIN) $(verdict "$sq_d4" '>=' $TARGET_DRAIN)"
# drain_cpu NAME K: hookd's and the cluster's CPU a delivery over a drain of 20,000 x K ("?": no cluster figure).
drain_cpu() {
    awk -v h="$(field "$1" hookd_cpu_s)" -v p="$(field "$1" pg_cpu_s)" -v n=$((20000 * $2)) \
        'BEGIN { if (h != "" && p != "" && p >= 0) printf "%.0f + %.0f us", h * 1e6 / n, p * 1e6 / n; else print "?" }'
}

verdicts="$v_tput$v_lat$v_mem"
if [ "$pg_ok" = 1 ]; then
    pg_med1=$(median_of "${pg_tput1[@]}")
    pg_medn=$(median_of "${pg_tputn[@]}")
    pg_p99=$(median_of "${pg_lat[@]}")
    pg_p50=$(field pg-latency-1 p50_ms)
    pg_ach=$(field pg-latency-1 achieved_rate)
    v_pg_tput=$(verdict "$pg_med1" '>=' $TARGET_PG_TPUT)
    v_pg_lat=$(verdict "$pg_p99" '<=' $TARGET_PG_P99)
    pg_missed=""
    for f in "$WORK"/pg-latency-*.out; do
        [ -e "$f" ] || continue
        m=$(rate_missed "$(basename "$f" .out)")
        [ -n "$m" ] && pg_missed="$pg_missed $(basename "$f" .out): $m;"
    done
    [ -n "$pg_missed" ] && v_pg_lat="MISS (rate missed in${pg_missed%;})"
    verdicts="$verdicts$v_pg_tput$v_pg_lat"
    echo
    echo "== summary: PostgreSQL beside SQLite (throughput: median of the runs listed)"
    printf '%-28s %-10s %-32s %-32s %-10s %s\n' figure sqlite "pg, 1 node" "pg, $PG_NODES nodes" "pg target" verdict
    printf '%-28s %-10s %-32s %-32s %-10s %s\n' "throughput (deliveries/s)" "${median:-?}" \
        "${pg_med1:-?} (runs: ${pg_tput1[*]:-none})" "${pg_medn:-?} (runs: ${pg_tputn[*]:-none})" ">= $TARGET_PG_TPUT" "$v_pg_tput"
    printf '%-28s %-10s %-32s %-32s %-10s %s\n' "latency p99 (ms)" "${p99:-?}" "${pg_p99:-?} (runs: ${pg_lat[*]:-none})" \
        "-" "<= $TARGET_PG_P99" "$v_pg_lat"
    printf '%-28s %-10s %-32s %-32s %-10s %s\n' "latency p50 (ms)" "${p50:-?}" "${pg_p50:-?} (first run, at ${pg_ach:-?}/s)" \
        "-" "-" "-"
    pi_d0=$(iso deliveries_per_s 0 pg-isolation); pi_d1=$(iso deliveries_per_s 1 pg-isolation)
    pi_d8=$(iso deliveries_per_s 8 pg-isolation)
    pi_p0=$(iso p99_ms 0 pg-isolation); pi_p1=$(iso p99_ms 1 pg-isolation); pi_p8=$(iso p99_ms 8 pg-isolation)
    printf '%-28s %-10s %-32s %-32s %-10s %s\n' "isolation deliveries/s" "${iso_d0:-?}" \
        "${pi_d0:-?} alone, ${pi_d1:-?} / ${pi_d8:-?} (1 / 8 hung)" "-" "within 10 %" \
        "$(within10 "$pi_d0" "$pi_d1" 0) $(within10 "$pi_d0" "$pi_d8" 0)"
    printf '%-28s %-10s %-32s %-32s %-10s %s\n' "isolation p99 (ms)" "${iso_p0:-?}" \
        "${pi_p0:-?} alone, ${pi_p1:-?} / ${pi_p8:-?} (1 / 8 hung)" "-" "within 10 %" \
        "$(within10 "$pi_p0" "$pi_p1" 1) $(within10 "$pi_p0" "$pi_p8" 1)"
    for k in 1 4; do
        sq=$(field "drain-${k}ep" deliveries_per_s)
        dr=$(field "pg-drain-${k}ep" deliveries_per_s)
        drn=$(field "pg-drain-${k}ep-${PG_NODES}nodes" deliveries_per_s)
        per=$(drain_cpu "pg-drain-${k}ep" "$k")
        pern=$(drain_cpu "pg-drain-${k}ep-${PG_NODES}nodes" "$k")
        printf '%-28s %-10s %-32s %-32s %-10s %s\n' "drain 20,000 x $k (deliv/s)" "${sq:-?}" "${dr:-?} (cpu $per)" \
            "${drn:-?} (cpu $pern)" "<= $TARGET_DRAIN_CPU us" "$(awk -v c="$per" -v t=$TARGET_DRAIN_CPU 'BEGIN {
                split(c, a, " "); if (a[1] == "?") print "no figure"; else print (a[1] + a[3] <= t) ? "PASS" : "MISS" }')"
    done
    [ -n "$pg_skipped" ] && echo "skipped for the time budget (${BUDGET} s):$pg_skipped"
fi
# runs_of PREFIX KEY: KEY of every run PREFIX-1, PREFIX-2, … that has one, space-separated.
runs_of() {
    local f v out=()
    for f in "$WORK/$1"-[0-9]*.out; do
        [ -e "$f" ] || continue
        v=$(field "$(basename "$f" .out)" "$2")
        [ -n "$v" ] && out+=("$v")
    done
    echo "${out[*]}"
}
# inbound_latency_verdict PREFIX P99 TARGET: the median's verdict, a MISS when any run missed its rate.
inbound_latency_verdict() {
    local f m
    for f in "$WORK/$1"-[0-9]*.out; do
        [ -e "$f" ] || continue
        m=$(rate_missed "$(basename "$f" .out)")
        [ -n "$m" ] && { echo "MISS ($(basename "$f" .out): $m)"; return 0; }
    done
    verdict "$2" '<=' "$3"
}
in_accs=$(runs_of inbound accepts_per_s)
in_p99s=$(runs_of inbound-latency p99_ms)
in_p50s=$(runs_of inbound-latency p50_ms)
# shellcheck disable=SC2086 # word lists on purpose
in_acc=$(median_of $in_accs); in_p99=$(median_of $in_p99s); in_p50=$(median_of $in_p50s)
pg_in_accs=$(runs_of pg-inbound accepts_per_s)
pg_in_p99s=$(runs_of pg-inbound-latency p99_ms)
pg_in_p50s=$(runs_of pg-inbound-latency p50_ms)
# shellcheck disable=SC2086
pg_in_acc=$(median_of $pg_in_accs); pg_in_p99=$(median_of $pg_in_p99s); pg_in_p50=$(median_of $pg_in_p50s)
v_in_acc=$(verdict "$in_acc" '>=' 25000)
v_in_p99=$(inbound_latency_verdict inbound-latency "$in_p99" 5)
verdicts="$verdicts$v_in_acc$v_in_p99"
echo
echo "== summary: inbound (durable accepts, signed Standard Webhooks, keep-alive; every ack looked up; medians)"
printf '%-28s %-36s %-10s %-36s %-10s\n' figure sqlite verdict pg verdict
printf '%-28s %-36s %-10s %-36s %-10s\n' "accepts/s (>= 25,000 / 12,000)" "${in_acc:-?} (runs: ${in_accs:-none})" "$v_in_acc" \
    "${pg_in_acc:-?} (runs: ${pg_in_accs:-none})" "$( [ "$pg_ok" = 1 ] && verdict "$pg_in_acc" '>=' 12000 || echo -)"
printf '%-28s %-36s %-10s %-36s %-10s\n' "ack p99 ms at 5,000/s (<= 5 / 10)" "${in_p99:-?} (runs: ${in_p99s:-none})" "$v_in_p99" \
    "${pg_in_p99:-?} (runs: ${pg_in_p99s:-none})" \
    "$( [ "$pg_ok" = 1 ] && inbound_latency_verdict pg-inbound-latency "$pg_in_p99" 10 || echo -)"
printf '%-28s %-36s %-10s %-36s %-10s\n' "ack p50 ms" "${in_p50:-?}" "-" "${pg_in_p50:-?}" "-"
m_tput=$(field machine processed_per_s)
m_p99=$(field machine-latency p99_ms)
m_p50=$(field machine-latency accept_to_applied_p50_ms)
pg_m_tput=$(field pg-machine processed_per_s)
pg_m_p99=$(field pg-machine-latency p99_ms)
v_m_tput=$(verdict "$m_tput" '>=' 10000)
v_m_p99=$(latency_verdict machine-latency "$m_p99" 20)
verdicts="$verdicts$v_m_tput$v_m_p99"
echo
echo "== summary: state machines (shuffled versioned events through a contiguous machine; all applied)"
printf '%-28s %-28s %-10s %-28s %-10s\n' figure sqlite verdict pg verdict
printf '%-28s %-28s %-10s %-28s %-10s\n' "processed/s (>= 10,000 / 5,000)" "${m_tput:-?}" "$v_m_tput" "${pg_m_tput:-?}" \
    "$( [ "$pg_ok" = 1 ] && verdict "$pg_m_tput" '>=' 5000 || echo -)"
printf '%-28s %-28s %-10s %-28s %-10s\n' "accept->applied p99 ms (<= 20)" "${m_p99:-?} (p50 ${m_p50:-?}, 1,000/s)" "$v_m_p99" \
    "${pg_m_p99:-?}" "-"
echo "loadavg at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "(full outputs: $WORK/*.out; $((SECONDS - START)) s in all)"

if [ "$failed" -ne 0 ]; then
    echo "bench: a scenario failed (see above)" >&2
    exit 1
fi
if [ "${BENCH_STRICT:-0}" = 1 ] && [ -n "${verdicts//PASS/}" ]; then
    echo "bench: a figure missed its target" >&2
    exit 1
fi
exit 0
