#!/usr/bin/env bash
# Table churn on PostgreSQL: pushes CHURN_ROUNDS rounds of CHURN_EVENTS events through one hookd node to
# CHURN_ENDPOINTS endpoints, purges after each round what earlier rounds delivered (as a retention job
# would), and prints per round the tables' sizes, dead tuples, autovacuum runs and the time of the hot
# queries. Runs once per mode: "hookd" (the migration's per-table autovacuum settings) and "default"
# (those settings RESET), each on its own throwaway cluster, then compares them.
# Environment: CHURN_ROUNDS (10), CHURN_EVENTS (20000), CHURN_ENDPOINTS (2), CHURN_BATCH (1000 events per
# application transaction), CHURN_BACKLOG (4000: a transaction waits until at most this many deliveries are
# open, so the load is sustained rather than one burst per round; 0: no wait), CHURN_RETAIN (1: after round r, rows delivered before round r started are
# deleted; K keeps the last K rounds), CHURN_HISTORY (0: delivered events inserted before round 1 that
# no purge removes, a retention window's worth of history), CHURN_NAPTIME (autovacuum_naptime, 5s),
# CHURN_MODES ("hookd default"), CHURN_ROUND_TIMEOUT (300 s), BENCH_DIR (build/bench-work), CHURN_KEEP=1.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

ROUNDS=${CHURN_ROUNDS:-10}
EVENTS=${CHURN_EVENTS:-20000}
ENDPOINTS=${CHURN_ENDPOINTS:-2}
BATCH=${CHURN_BATCH:-1000}
BACKLOG=${CHURN_BACKLOG:-4000}
RETAIN=${CHURN_RETAIN:-1}
HISTORY=${CHURN_HISTORY:-0}
NAPTIME=${CHURN_NAPTIME:-5s}
MODES=${CHURN_MODES:-hookd default}
ROUND_TIMEOUT=${CHURN_ROUND_TIMEOUT:-300}
WORK=${BENCH_DIR:-build/bench-work}
HOOKD=build/hookd
LOADGEN=build/bench/loadgen
TABLES="hookd_outbox hookd_deliveries hookd_attempts hookd_inflight" # o/d/a/i in the columns, in this order
TABLES_SQL="array[$(printf "'%s'," $TABLES | sed 's/,$//')]"              # the same, as a SQL text[]
AV_OPTIONS="autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_vacuum_insert_scale_factor, autovacuum_analyze_scale_factor"
PAD=$(printf 'x%.0s' $(seq 1 100)) # the payload size of loadgen's events

# The hot queries, as hookd runs them (zero rows once a round is delivered: what they cost then is
# the dead index entries and pages they walk). The claim is asked per endpoint, as claim_lease() does
# (src/store/postgres_deliveries.c, without its caps and event join): since migration 3 dropped
# hookd_deliveries_due, a due query over all endpoints can only scan the whole of
# hookd_deliveries_endpoint_due and sort what it finds.
Q_OUTBOX="SELECT o.* FROM hookd_outbox o WHERE o.dispatched_at IS NULL AND o.seq > 0 ORDER BY o.seq LIMIT 256 FOR UPDATE SKIP LOCKED"
Q_CLAIM="SELECT q.id FROM hookd_endpoints e CROSS JOIN LATERAL (SELECT d.id, d.next_attempt_at FROM hookd_deliveries d
  WHERE d.endpoint_id = e.id AND d.status IN ('pending', 'retrying') AND d.next_attempt_at <= hookd_now_ms()
  AND (d.lease_owner IS NULL OR d.lease_until < hookd_now_ms()) ORDER BY d.next_attempt_at, d.id LIMIT 256
  FOR UPDATE OF d SKIP LOCKED) q WHERE e.enabled ORDER BY q.next_attempt_at, q.id LIMIT 256"

for bin in "$HOOKD" "$LOADGEN"; do
    [ -x "$bin" ] || { echo "churn: $bin missing (make build bench-build)" >&2; exit 1; }
done
mkdir -p "$WORK" || exit 1
WORK=$(cd "$WORK" && pwd)

scratch="" cluster="" hookd_pid="" sink_pid=""
cleanup() {
    [ -n "$hookd_pid" ] && stop_pid "$hookd_pid" hookd
    [ -n "$sink_pid" ] && stop_pid "$sink_pid" sink
    [ -n "$cluster" ] && timeout 120 bash scripts/pg.sh stop "$cluster" >/dev/null 2>&1
    [ -n "$scratch" ] && [ "${CHURN_KEEP:-0}" != 1 ] && rm -rf "$scratch"
    hookd_pid="" sink_pid="" cluster="" scratch=""
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# stop_pid PID NAME: SIGTERM, SIGKILL after 10 s.
stop_pid() {
    kill "$1" 2>/dev/null || return 0
    for _ in $(seq 1 100); do
        kill -0 "$1" 2>/dev/null || { wait "$1" 2>/dev/null; return 0; }
        sleep 0.1
    done
    echo "churn: $2 ignored SIGTERM for 10 s; killing it" >&2
    kill -9 "$1" 2>/dev/null
    wait "$1" 2>/dev/null
}

# q SQL: one statement's rows, unaligned (| between fields), bounded.
q() { timeout 120 psql "$DSN" -XAtq -v ON_ERROR_STOP=1 -c "$1"; }

# free_port: a loopback port nothing listens on now.
free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 40000))
        [ -z "$(ss -Htln "sport = :$p" 2>/dev/null)" ] && { echo "$p"; return 0; }
    done
    return 1
}

# wait_for SECONDS CMD...: runs CMD every 0.1 s until it succeeds; 1 after SECONDS.
wait_for() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@"; do
        [ "$SECONDS" -ge "$deadline" ] && return 1
        sleep 0.1
    done
}

# explain_ms SQL: "median execution ms of 5 runs (buffers of the last: shared hit+read)".
explain_ms() {
    local out times=() bufs=0 t
    for _ in 1 2 3 4 5; do
        out=$(q "EXPLAIN (ANALYZE, BUFFERS) $1") || return 1
        t=$(sed -n 's/^Execution Time: \([0-9.]*\) ms$/\1/p' <<<"$out")
        times+=("$t")
        bufs=$(sed -n 's/.*Buffers: shared \(.*\)/\1/p' <<<"$out" | head -1 |
            awk '{ n = 0; for (i = 1; i <= NF; i++) { split($i, kv, "="); n += kv[2] } print n }')
    done
    printf '%s (%s)' "$(printf '%s\n' "${times[@]}" | sort -g | sed -n 3p)" "${bufs:-0}"
}

# One row of a mode's table: round, secs, deliv/s, the 4 sizes, dead, av, the 2 query times.
ROW_FMT='%5s %6s %7s %9s %9s %9s %9s %23s %12s %13s %13s\n'

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

# backlog_ok: at most BACKLOG deliveries open (events not fanned out yet count once per endpoint).
backlog_ok() {
    [ "$(q "SELECT (SELECT count(*) FROM hookd_outbox WHERE dispatched_at IS NULL) * $ENDPOINTS
              + (SELECT count(*) FROM hookd_deliveries WHERE status IN ('pending', 'retrying')) <= $BACKLOG")" = t ]
}

# publish_round FIRST N ROUND: the application's transactions of one round, BATCH events each (one
# INSERT of generated rows: hookd's trigger sends one NOTIFY per statement), paced by BACKLOG.
publish_round() {
    local first=$1 n=$2 round=$3 b
    for ((b = 0; b < n; b += BATCH)); do
        local last=$((b + BATCH < n ? b + BATCH : n))
        if [ "$BACKLOG" -gt 0 ] && ! wait_for "$ROUND_TIMEOUT" backlog_ok; then
            echo "churn: round $round: the backlog stayed above $BACKLOG for $ROUND_TIMEOUT s" >&2
            return 1
        fi
        q "BEGIN; INSERT INTO hookd_outbox(event_type, payload) SELECT 'churn.event',
            '{\"round\": $round, \"seq\": ' || g || ', \"pad\": \"$PAD\"}'
            FROM generate_series($((first + b)), $((first + last - 1))) g; COMMIT;" || return 1
    done
}

# history_sql: HISTORY delivered events with their deliveries and attempts, a day before the run.
history_sql() {
    cat <<SQL
BEGIN;
INSERT INTO hookd_outbox(event_type, payload, created_at, dispatched_at)
  SELECT 'churn.history', '{"seq": ' || g || ', "pad": "$PAD"}', $1, $1 FROM generate_series(1, $HISTORY) g;
INSERT INTO hookd_deliveries(id, event_id, endpoint_id, status, attempt_count, last_status_code, first_attempt_at,
    last_attempt_at, delivered_at, created_at, next_attempt_at)
  SELECT 'dlv_h' || o.seq || '_' || e.id, o.id, e.id, 'delivered', 1, 200, $1, $1, $1, $1, NULL
  FROM hookd_outbox o CROSS JOIN hookd_endpoints e WHERE o.event_type = 'churn.history';
INSERT INTO hookd_attempts(delivery_id, n, started_at, duration_ms, status_code, node)
  SELECT id, 1, $1, 1, 200, 'history' FROM hookd_deliveries WHERE id LIKE 'dlv\_h%';
COMMIT;
VACUUM ANALYZE hookd_outbox, hookd_deliveries, hookd_attempts;
SQL
}

round_done() {
    [ "$(q "SELECT NOT EXISTS (SELECT 1 FROM hookd_outbox WHERE dispatched_at IS NULL)
              AND NOT EXISTS (SELECT 1 FROM hookd_deliveries WHERE status IN ('pending', 'retrying'))")" = t ]
}

# run_mode MODE: one cluster, one hookd, ROUNDS rounds; the table goes to stdout and $WORK/churn-MODE.txt.
run_mode() {
    local mode=$1 token port_pub port_adm sink_port run_start r
    scratch=$(mktemp -d "$WORK/churn.XXXXXX") || return 1
    cluster=$scratch/pg
    DSN=$(timeout 120 bash scripts/pg.sh start "$cluster" | tail -1) || { echo "churn: cluster start failed" >&2; return 1; }
    q "ALTER SYSTEM SET autovacuum_naptime = '$NAPTIME'" && q "SELECT pg_reload_conf()" >/dev/null || return 1

    "$LOADGEN" --sink-only 86400 >"$scratch/sink.out" 2>&1 &
    sink_pid=$!
    wait_for 10 grep -q '^sink listening' "$scratch/sink.out" || { echo "churn: the sink did not start" >&2; return 1; }
    sink_port=$(sed -n 's|^sink listening on http://127.0.0.1:\([0-9]*\)/.*|\1|p' "$scratch/sink.out")

    token=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
    port_pub=$(free_port) && port_adm=$(free_port) || return 1
    (
        for v in $(compgen -e | grep '^HOOKD_'); do unset "$v"; done
        export HOOKD_SERVER_STORE="$DSN" HOOKD_SERVER_ADMIN_TOKEN="$token" HOOKD_SERVER_LOG_LEVEL=warn \
            HOOKD_SERVER_PUBLIC_LISTEN="127.0.0.1:$port_pub" HOOKD_SERVER_ADMIN_LISTEN="127.0.0.1:$port_adm" \
            HOOKD_DELIVERY_ALLOW_PRIVATE_NETWORKS=true
        exec "$HOOKD" serve
    ) >"$scratch/hookd.log" 2>&1 </dev/null &
    hookd_pid=$!
    if ! wait_for 20 curl -sf --noproxy '*' -m 2 -o /dev/null "http://127.0.0.1:$port_pub/healthz"; then
        echo "churn: hookd did not become healthy; its log:" >&2
        tail -20 "$scratch/hookd.log" >&2
        return 1
    fi

    [ "$mode" = default ] && for t in $TABLES; do q "ALTER TABLE $t RESET ($AV_OPTIONS)" || return 1; done
    for ((i = 0; i < ENDPOINTS; i++)); do
        curl -sf --noproxy '*' -m 5 -o /dev/null -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
            -d "{\"url\": \"http://127.0.0.1:$sink_port/\", \"max_in_flight\": 64}" \
            "http://127.0.0.1:$port_adm/v1/endpoints" || { echo "churn: POST /v1/endpoints failed" >&2; return 1; }
    done
    run_start=$(q "SELECT hookd_now_ms()")
    if [ "$HISTORY" -gt 0 ]; then
        timeout 600 psql "$DSN" -XAtq -v ON_ERROR_STOP=1 -f <(history_sql $((run_start - 86400000))) >/dev/null || return 1
    fi

    echo
    echo "== mode $mode: autovacuum_naptime $NAPTIME; $ROUNDS rounds x $EVENTS events x $ENDPOINTS endpoints" \
        "(transactions of $BATCH, backlog <= $BACKLOG deliveries); purge keeps $RETAIN round(s); history $HISTORY events"
    for t in $TABLES; do
        echo "   $t: $(q "SELECT coalesce(array_to_string(reloptions, ', '), 'server defaults') FROM pg_class WHERE relname = '$t'")"
    done
    echo "   autovacuum server defaults: $(q "SELECT string_agg(name || '=' || setting, ', ' ORDER BY name) FROM pg_settings
        WHERE name IN ('autovacuum_vacuum_scale_factor', 'autovacuum_vacuum_threshold', 'autovacuum_vacuum_insert_scale_factor', 'autovacuum_naptime')")"
    echo "   dead = n_dead_tup at the round's end (before its purge); sizes (pg_total_relation_size) and query times after the purge;"
    echo "   o/d/a/i = outbox/deliveries/attempts/inflight; av = autovacuum runs so far; query: median ms of 5 EXPLAIN ANALYZE (buffers)"
    printf "$ROW_FMT" round secs deliv/s outbox deliveries attempts inflight \
        "dead o/d/a/i" "av o/d/a/i" "q outbox" "q claim" | tee "$WORK/churn-$mode.txt"
    local starts=() seq_next=1
    for ((r = 1; r <= ROUNDS; r++)); do
        local t_ms secs dead av sizes deleted cutoff
        starts[r]=$(q "SELECT hookd_now_ms()")
        publish_round "$seq_next" "$EVENTS" "$r" || return 1
        seq_next=$((seq_next + EVENTS))
        if ! wait_for "$ROUND_TIMEOUT" round_done; then
            echo "churn: round $r not delivered within $ROUND_TIMEOUT s" >&2
            return 1
        fi
        kill -0 "$hookd_pid" 2>/dev/null || { echo "churn: hookd exited" >&2; tail -20 "$scratch/hookd.log" >&2; return 1; }
        t_ms=$(($(q "SELECT max(delivered_at) FROM hookd_deliveries") - starts[r]))
        secs=$(awk -v ms="$t_ms" 'BEGIN { printf "%.2f", ms / 1000 }')
        local got
        got=$(q "SELECT count(*) FILTER (WHERE status = 'delivered') || ' ' || count(*) FROM hookd_deliveries WHERE created_at >= ${starts[r]}")
        if [ "$got" != "$((EVENTS * ENDPOINTS)) $((EVENTS * ENDPOINTS))" ]; then
            echo "churn: round $r: delivered/total deliveries $got, expected $((EVENTS * ENDPOINTS))" >&2
            return 1
        fi
        sleep 1 # table statistics reach pg_stat_user_tables within a second
        dead=$(q "SELECT string_agg(n_dead_tup::text, '/' ORDER BY array_position($TABLES_SQL, relname::text))
            FROM pg_stat_user_tables WHERE relname = ANY ($TABLES_SQL)")
        cutoff=""
        [ $((r - RETAIN + 1)) -ge 1 ] && cutoff=${starts[r - RETAIN + 1]}
        if [ -n "$cutoff" ]; then
            deleted=$(timeout 300 psql "$DSN" -XAtq -v ON_ERROR_STOP=1 <<SQL
BEGIN;
WITH a AS (DELETE FROM hookd_attempts a USING hookd_deliveries d WHERE a.delivery_id = d.id AND d.status = 'delivered'
    AND d.delivered_at >= $run_start AND d.delivered_at < $cutoff RETURNING 1) SELECT count(*) FROM a;
WITH i AS (DELETE FROM hookd_inflight i USING hookd_deliveries d WHERE i.delivery_id = d.id AND d.status = 'delivered'
    AND d.delivered_at >= $run_start AND d.delivered_at < $cutoff RETURNING 1) SELECT count(*) FROM i;
WITH d AS (DELETE FROM hookd_deliveries WHERE status = 'delivered' AND delivered_at >= $run_start
    AND delivered_at < $cutoff RETURNING 1) SELECT count(*) FROM d;
WITH o AS (DELETE FROM hookd_outbox o WHERE dispatched_at >= $run_start AND dispatched_at < $cutoff
    AND NOT EXISTS (SELECT 1 FROM hookd_deliveries d WHERE d.event_id = o.id) RETURNING 1) SELECT count(*) FROM o;
COMMIT;
SQL
            ) || return 1
            echo "round $r purge: deleted attempts/inflight/deliveries/outbox $(paste -sd/ <<<"$deleted")" >>"$scratch/purge.log"
        fi
        sizes=$(q "SELECT string_agg(pg_total_relation_size(t)::text, ' ' ORDER BY n) FROM unnest($TABLES_SQL) WITH ORDINALITY AS u(t, n)")
        av=$(q "SELECT string_agg(autovacuum_count::text, '/' ORDER BY array_position($TABLES_SQL, relname::text))
            FROM pg_stat_user_tables WHERE relname = ANY ($TABLES_SQL)")
        read -r s_o s_d s_a s_i <<<"$sizes"
        printf "$ROW_FMT" "$r" "$secs" "$((EVENTS * ENDPOINTS * 1000 / (t_ms > 0 ? t_ms : 1)))" \
            "$(mib "$s_o")M" "$(mib "$s_d")M" "$(mib "$s_a")M" "$(mib "$s_i")M" "$dead" "$av" "$(explain_ms "$Q_OUTBOX")" \
            "$(explain_ms "$Q_CLAIM")" | tee -a "$WORK/churn-$mode.txt"
    done
    echo "   purges: $(tail -1 "$scratch/purge.log" 2>/dev/null || echo none) (last round)"
    echo "   hookd_inflight rows purged over all rounds: $(awk '{ split($NF, c, "/"); n += c[2] } END { print n + 0 }' \
        "$scratch/purge.log" 2>/dev/null || echo 0); left after the last round: $(q "SELECT count(*) FROM hookd_inflight")"
    cleanup
}

echo "== churn: $(uname -srm), nproc $(nproc), $(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)," \
    "loadavg $(cut -d' ' -f1-3 /proc/loadavg)"
echo "   $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)/postgres: $("$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)/postgres" --version)"
echo "   store filesystem: $(df -T "$WORK" | awk 'NR == 2 { print $2 " (" $1 ")" }')"
failed=0
for mode in $MODES; do
    case "$mode" in hookd | default) ;; *) echo "churn: unknown mode $mode (hookd, default)" >&2; exit 2 ;; esac
    if ! run_mode "$mode"; then
        echo "churn: mode $mode failed${scratch:+ (kept $scratch)}" >&2
        CHURN_KEEP=1 cleanup
        failed=1
    fi
done

echo
echo "== comparison (last round; growth = total size of the 4 tables, last round / round $((ROUNDS < 2 ? 1 : 2)))"
printf '%-8s %12s %8s %26s %14s %14s %12s\n' mode "total size" growth "max dead o/d/a/i" "q outbox" "q claim" "av o/d/a/i"
for mode in $MODES; do
    f="$WORK/churn-$mode.txt"
    [ -f "$f" ] || continue
    awk -v mode="$mode" -v base=$((ROUNDS < 2 ? 1 : 2)) 'NR > 1 {
        tot = $4 + $5 + $6 + $7; if ($1 == base) b = tot
        split($8, d, "/"); for (i = 1; i <= 4; i++) if (d[i] > m[i]) m[i] = d[i]
        last = tot; av = $9; qo = $10 " " $11; qc = $12 " " $13 }
        END { printf "%-8s %11.1fM %7.2fx %26s %14s %14s %12s\n", mode, last, (b > 0 ? last / b : 0),
            m[1] + 0 "/" m[2] + 0 "/" m[3] + 0 "/" m[4] + 0, qo, qc, av }' "$f"
done
exit "$failed"
