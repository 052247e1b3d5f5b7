#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests: an unprivileged user, a unix socket
# in a temp directory, no TCP.
#   scripts/pg.sh start DIR   initdb + start; prints the hookd store URL
#   scripts/pg.sh stop DIR    stop and remove DIR
#   scripts/pg.sh ctl DIR stop|start   stop or start the server, keeping the data (outage tests)
set -euo pipefail
cmd=${1:?start|stop|ctl}
dir=${2:?directory}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[ -x "$bin/initdb" ] || { echo "PostgreSQL server binaries not found (apt-get install postgresql)" >&2; exit 1; }

# PostgreSQL refuses to run as root: use the postgres account when we are root.
as_pg() {
    if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
pg_user() { if [ "$(id -u)" -eq 0 ]; then echo postgres; else id -un; fi; }

start_server() {
    as_pg "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 30 -o "-k $dir -c listen_addresses=''" start >/dev/null
}

case "$cmd" in
start)
    mkdir -p "$dir"
    if [ "$(id -u)" -eq 0 ]; then chown postgres "$dir"; chmod a+x "$(dirname "$dir")"; fi
    as_pg "$bin/initdb" -D "$dir/data" --auth=trust -U "$(pg_user)" -E UTF8 >"$dir/initdb.log" 2>&1 \
        || { cat "$dir/initdb.log" >&2; exit 1; }
    cat >>"$dir/data/postgresql.conf" <<CONF
fsync = on
max_connections = 200
unix_socket_permissions = 0777
CONF
    start_server
    as_pg "$bin/createdb" -h "$dir" -U "$(pg_user)" hookd
    echo "postgres:///hookd?host=$dir&user=$(pg_user)"
    ;;
ctl)
    case "${3:?stop|start}" in
    stop) as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null ;;
    start) start_server ;;
    esac
    ;;
stop)
    as_pg "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    rm -rf "$dir"
    ;;
*) echo "usage: $0 start|stop|ctl DIR" >&2; exit 2 ;;
esac
