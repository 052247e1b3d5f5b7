#!/usr/bin/env bash
# Per-part PostgreSQL counters for the isolation scenario: loadgen runs this at each part's edges
# (LOADGEN_PHASE_CMD; arguments: round, hung endpoints, edge = backlog|burst|paced|end). At the
# start of a burst or paced part it resets pg_stat_statements and pg_stat_wal; at the part's end it
# writes each statement's calls, rows, buffers and time (OUT/rR_hH_PART.tsv) and the part's
# seconds and CPU ticks of hookd and of the cluster's processes (.tsv.meta); at every edge it
# appends the attempts so far and hookd_deliveries' vacuum state to OUT/edges.txt.
#   PHASE_OUT=DIR PHASE_PGHOST=SOCKETDIR [PHASE_PGDATA=DATADIR] \
#   LOADGEN_PHASE_CMD=bench/pg-phase-stats.sh build/bench/loadgen --scenario isolation --pg-dsn DSN
# The cluster needs shared_preload_libraries = 'pg_stat_statements' and the extension created in
# its postgres database.
set -u
round=$1 hung=$2 edge=$3
out=${PHASE_OUT:?} host=${PHASE_PGHOST:?} pgdata=${PHASE_PGDATA:-$host/data}
mkdir -p "$out"
psql_at() { psql -X -q -h "$host" -U "${PHASE_PGUSER:-postgres}" -At -F '|' "$@" 2>>"$out/psql.err"; }
ticks() { # utime + stime of the given pids
    local t=0 p
    for p in "$@"; do [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
    echo "$t"
}
# loadgen is an ancestor (sh -c runs this); hookd processes are its children.
p=$$ lg=
for _ in 1 2 3 4 5; do
    p=$(awk '{print $4}' "/proc/$p/stat")
    [ "$(cat "/proc/$p/comm")" = loadgen ] && { lg=$p; break; }
done
hookd=$(for c in $(cat /proc/"$lg"/task/*/children 2>/dev/null); do
    case "$(cat "/proc/$c/comm" 2>/dev/null)" in hookd*) echo "$c" ;; esac
done)
pm=$(head -1 "$pgdata/postmaster.pid")
now=$(date +%s.%N) hc=$(ticks $hookd) pc=$(ticks "$pm" $(cat /proc/"$pm"/task/*/children))
if [ -f "$out/.part" ]; then
    read -r label t0 hc0 pc0 <"$out/.part"
    psql_at -d postgres -c "SELECT calls, rows, shared_blks_hit, shared_blks_read + shared_blks_written,
        round(total_exec_time::numeric, 1), round(max_exec_time::numeric, 1),
        regexp_replace(left(query, 160), '\s+', ' ', 'g') FROM pg_stat_statements ORDER BY total_exec_time DESC" \
        >"$out/$label.tsv"
    psql_at -d postgres -c "SELECT 'wal', wal_records, wal_bytes, wal_sync, wal_write FROM pg_stat_wal" >"$out/$label.tsv.meta"
    echo "secs $(echo "$now - $t0" | bc) hookd_ticks $((hc - hc0)) pg_ticks $((pc - pc0))" >>"$out/$label.tsv.meta"
    rm -f "$out/.part"
fi
if [ "$edge" = burst ] || [ "$edge" = paced ]; then
    psql_at -d postgres -c "SELECT pg_stat_statements_reset()" -c "SELECT pg_stat_reset_shared('wal')" >/dev/null
    echo "r${round}_h${hung}_$edge $now $hc $pc" >"$out/.part"
fi
db=$(psql_at -d postgres -c "SELECT datname FROM pg_stat_activity WHERE application_name = 'hookd' LIMIT 1")
[ -n "$db" ] && psql_at -d "$db" -F ' ' -c "SELECT '$(date +%T.%N | cut -c1-12) r${round}_h${hung}_$edge',
    (SELECT count(*) FILTER (WHERE status_code BETWEEN 200 AND 299) || ' ok ' ||
     count(*) FILTER (WHERE status_code IS NULL OR status_code NOT BETWEEN 200 AND 299) || ' failed' FROM hookd_attempts),
    (SELECT 'dead_tup ' || n_dead_tup || ' autovacuums ' || autovacuum_count FROM pg_stat_user_tables
     WHERE relname = 'hookd_deliveries')" >>"$out/edges.txt"
exit 0
