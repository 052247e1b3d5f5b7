#!/usr/bin/env bash
# bench/write-model.sh: PostgreSQL's CPU per delivery for the write set issue 14 proposes (an
# outbox claim per 64 events, then each delivery's first result inserted as its row, with and
# without an attempt row, and the events marked; bench/write-model.sql), on hookd's own schema.
# The figure to set beside loadgen's `--store pg --scenario throughput` pg_cpu_s per delivery
# (today's write model). Not part of `make bench`; about a minute.
#   bash bench/write-model.sh [ROUNDS]   (needs build/hookd: make -s -j2 build)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
dir=$(mktemp -d /tmp/hookd-write-model.XXXXXX)
trap 'bash scripts/pg.sh stop "$dir/pg" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
dsn=$(bash scripts/pg.sh start "$dir/pg")

# The schema: hookd migrates the store when it starts.
ports=$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1",0)) for x in s]
print(" ".join(str(x.getsockname()[1]) for x in s))')
set -- $ports
HOOKD_SERVER_STORE="$dsn" HOOKD_SERVER_ADMIN_TOKEN="tok_$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')" \
    HOOKD_SERVER_ADMIN_LISTEN="127.0.0.1:$1" HOOKD_SERVER_PUBLIC_LISTEN="127.0.0.1:$2" \
    HOOKD_SERVER_SECRET_KEY="$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')" HOOKD_SERVER_LOG_LEVEL=warn \
    build/hookd serve >"$dir/hookd.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
    curl -fs "http://127.0.0.1:$1/healthz" >/dev/null 2>&1 && break
    sleep 0.1
done
kill "$pid"
wait "$pid" || true

# CPU seconds of the cluster's processes (the postmaster, its children, and the children it reaped).
cluster_cpu() {
    local pm t=0 s
    pm=$(head -1 "$dir/pg/data/postmaster.pid")
    for p in $pm $(pgrep -P "$pm"); do
        s=$(cut -d' ' -f14-17 "/proc/$p/stat" 2>/dev/null) || continue
        for v in $s; do t=$((t + v)); done
    done
    echo "$t"
}
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $("$bin/postgres" --version)"
printf '%-22s %-12s %-10s %s\n' "write set" deliveries "pg CPU-s" "pg µs per delivery"
for r in $(seq 1 "$rounds"); do
    for att in 1 0; do
        psql -q "$dsn" -c "TRUNCATE hookd_deliveries, hookd_attempts, hookd_outbox" -c "DELETE FROM hookd_endpoints" \
            -c "INSERT INTO hookd_endpoints(id, url) SELECT 'ep_' || i, 'http://127.0.0.1:1/' FROM generate_series(1, 4) i" \
            -c "INSERT INTO hookd_outbox(event_type, payload) SELECT 'bench.event', '{\"n\":1}' FROM generate_series(1, 25600)" \
            -c "VACUUM ANALYZE" >/dev/null
        t0=$(cluster_cpu)
        "$bin/pgbench" -n -f bench/write-model.sql -D att=$att -t 200 -c 2 "$dsn" >"$dir/pgbench.out" 2>&1 ||
            { cat "$dir/pgbench.out" >&2; exit 1; }
        t1=$(cluster_cpu)
        n=$(psql -At "$dsn" -c "SELECT count(*) FROM hookd_deliveries")
        [ "$n" -eq 102400 ] || { echo "write-model: $n deliveries written, 102400 expected" >&2; exit 1; }
        hz=$(getconf CLK_TCK)
        printf '%-22s %-12s %-10s %s\n' "$([ $att = 1 ] && echo "row + attempt row" || echo "row only")" "$n" \
            "$(awk -v t=$((t1 - t0)) -v hz="$hz" 'BEGIN { printf "%.2f", t / hz }')" \
            "$(awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.0f", t / hz * 1e6 / n }')"
    done
done
