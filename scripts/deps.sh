#!/usr/bin/env bash
# Installs the Debian packages hookd needs, when some are missing.
#   scripts/deps.sh build   compile and run hookd
#   scripts/deps.sh test    also what the test suites need (cmocka, sqlite3 CLI, PostgreSQL, Node.js,
#                           clang and libFuzzer for the fuzz targets)
set -euo pipefail
profile=${1:-build}

pkgs=(gcc make pkg-config libc6-dev libcurl4-openssl-dev libsqlite3-dev libjansson-dev
      libinih-dev libssl-dev libpq-dev sqlite3
      curl jq) # curl, jq and sqlite3: the README quickstart uses them
if [ "$profile" = test ]; then
    pkgs+=(libcmocka-dev postgresql procps clang libfuzzer-14-dev chromium fonts-dejavu-core)
    command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
    command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "hookd needs these Debian packages: ${missing[*]}" >&2
    echo "install them with: sudo apt-get install ${missing[*]}" >&2
    exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
