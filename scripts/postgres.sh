#!/usr/bin/env bash
# A throwaway PostgreSQL for the tests (issue 19): `scripts/postgres.sh start DIR` makes a
# cluster in DIR (initdb: UTF8, C locale, trust auth for the superuser `headroom`), starts it
# listening on a Unix socket in DIR only (no TCP port, so runs never collide and nothing off
# the machine can reach it) and prints the URL to use; `scripts/postgres.sh stop DIR` stops
# it. Durability is off (fsync, full-page writes): the data lives only as long as the run.
# Needs Debian's `postgresql` package (scripts/test-deps.sh installs it). PostgreSQL refuses
# to run as root, so as root the server runs as the package's `postgres` user.
set -euo pipefail

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1
dir=$2

bindir=""
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then bindir=$d; break; fi
done
if [ -z "$bindir" ]; then
    echo "postgres.sh: no PostgreSQL server found under /usr/lib/postgresql (Debian package postgresql)" >&2
    exit 1
fi

as_owner() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

case "$action" in
start)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    # The folder goes into a server option and the URL as it is: keep it to plain characters.
    case "$dir" in
    *[!A-Za-z0-9/._-]*) echo "postgres.sh: use a folder path of letters, digits and /._- only" >&2; exit 2 ;;
    esac
    [ "$(id -u)" -ne 0 ] || chown postgres: "$dir"
    as_owner "$bindir/initdb" -D "$dir/data" -U headroom -A trust -E UTF8 --locale=C \
        --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    # Unix socket only; enough connections for the suite's parallel tests, each on a
    # database of its own.
    as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-c listen_addresses='' -k $dir -c max_connections=400 -c fsync=off -c full_page_writes=off -c synchronous_commit=off" \
        start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }
    echo "postgres://headroom@localhost/postgres?host=$dir"
    ;;
stop)
    dir=$(cd "$dir" && pwd)
    as_owner "$bindir/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
    ;;
*) usage ;;
esac
