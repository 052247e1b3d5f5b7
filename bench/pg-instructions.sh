#!/usr/bin/env bash
# bench/pg-instructions.sh: PostgreSQL's instructions per delivery for the happy path's store writes
# (an unrecorded delivery leased at fan-out, then its first result, delivered: insert_many and
# complete_many in batches, bench/pg-instructions/happy_path.c), counted by callgrind over every
# process of a throwaway cluster. Instructions, not seconds: the figure holds on a busy machine,
# where CPU time does not, and this machine's perf has no hardware counters. The marginal cost is
# the run of N2 deliveries less the run of N1 (connection, start and shutdown), over N2 - N1; each
# run starts from a freshly migrated database. Not part of `make bench`; a few minutes.
#   bash bench/pg-instructions.sh [N1 N2 BATCH]   (needs valgrind and build/libhookd_internal.a: make -s -j2 build)
set -euo pipefail
cd "$(dirname "$0")/.."
n1=${1:-1000} n2=${2:-6000} batch=${3:-100}
bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -1)
command -v valgrind >/dev/null || { echo "pg-instructions: valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
dir=$(mktemp -d /tmp/hookd-pg-instructions.XXXXXX)
trap 'bash scripts/pg.sh stop "$dir/pg" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
as_pg() { if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

cc -std=c17 -D_GNU_SOURCE -O2 -Iinclude -Isrc $(pkg-config --cflags libpq 2>/dev/null || echo -I/usr/include/postgresql) \
    -o "$dir/happy_path" bench/pg-instructions/happy_path.c build/libhookd_internal.a \
    -lcurl -lsqlite3 -ljansson -linih -lssl -lcrypto -lpq -lpthread -lm
dsn=$(bash scripts/pg.sh start "$dir/pg")
# No autovacuum: its runs come when they come, and would be counted in one run and not the other.
echo "autovacuum = off" >>"$dir/pg/data/postgresql.conf"
bash scripts/pg.sh ctl "$dir/pg" stop

# The cluster's instructions for one run of n deliveries.
run() {
    local n=$1 out="$dir/cg-$1"
    mkdir -p "$out"
    [ "$(id -u)" -ne 0 ] || chown postgres "$out"
    bash scripts/pg.sh ctl "$dir/pg" start
    psql -q "$dsn" -c "SET client_min_messages = warning" -c "DROP SCHEMA public CASCADE" -c "CREATE SCHEMA public"
    "$dir/happy_path" "$dsn" 0 1 2>"$dir/migrate.log" || { cat "$dir/migrate.log" >&2; exit 1; }
    psql -q "$dsn" -c "CHECKPOINT"
    bash scripts/pg.sh ctl "$dir/pg" stop
    as_pg valgrind --tool=callgrind --trace-children=yes --callgrind-out-file="$out/cg.%p" \
        "$bin/postgres" -D "$dir/pg/data" -k "$dir/pg" -c "listen_addresses=" >"$out/server.log" 2>&1 &
    for _ in $(seq 1 300); do psql -qAt "$dsn" -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.2; done
    "$dir/happy_path" "$dsn" "$n" "$batch" 2>"$out/client.log" >/dev/null || { cat "$out/client.log" >&2; exit 1; }
    as_pg "$bin/pg_ctl" -D "$dir/pg/data" -m fast -w -t 600 stop >/dev/null
    grep -h '^summary:' "$out"/cg.* | awk '{ s += $2 } END { printf "%.0f", s }'
}
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); $("$bin/postgres" --version); batch $batch"
i1=$(run "$n1")
i2=$(run "$n2")
printf '%-10s %s\n' "$n1" "$i1" "$n2" "$i2"
awk -v a="$i1" -v b="$i2" -v n1="$n1" -v n2="$n2" \
    'BEGIN { printf "PostgreSQL instructions per delivery (marginal): %.0f\n", (b - a) / (n2 - n1) }'
