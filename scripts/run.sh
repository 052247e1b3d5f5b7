#!/usr/bin/env bash
# `make run`: installs what is missing (as root), builds, and starts `hookd serve`
# on SQLite (./hookd.db) with hookd.dev.conf, printing the listeners and the admin token.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh build
make -s -j2 build
conf=${HOOKD_CONF:-hookd.dev.conf}
echo "starting: build/hookd serve -c $conf   (Ctrl-C stops it)"
( # Print the token once the daemon has written it (first start generates it).
    for _ in $(seq 1 50); do
        if [ -s hookd.db.admin-token ]; then
            echo "  admin token: $(cat hookd.db.admin-token)"
            echo "  try: export HOOKD_ADMIN_TOKEN=\$(cat hookd.db.admin-token); build/hookd endpoints list"
            break
        fi
        sleep 0.1
    done
) &
exec build/hookd serve -c "$conf"
