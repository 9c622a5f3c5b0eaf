#!/usr/bin/env bash
# A three-node Citus cluster on loopback (a coordinator and two workers),
# for tally's tests and benchmark: `scripts/citus-cluster.sh start|stop|status`.
#
# - Needs PostgreSQL 15's server binaries and the Citus extension. When
#   Citus is missing, the script runs as root and the archive of the shared
#   folder is beside the checkout (CI), it installs that archive first.
# - Each node runs as the `postgres` user (PostgreSQL refuses root), trust
#   authentication on 127.0.0.1 only, in TALLY_CITUS_DIR (default
#   /tmp/tally-citus) on TALLY_CITUS_PORT (default 9700) and the next two.
# - `start` is idempotent: nodes already running are kept. It prints the
#   coordinator's admin URL, the value for TALLY_TEST_CITUS_URL.
# - Every database that CREATE DATABASE makes on the coordinator is made on
#   the workers too (citus.enable_create_database_propagation), and
#   template1 carries the extension on every node, so a test's fresh
#   database only has to register the workers (tally-testdb does).
set -euo pipefail

dir="${TALLY_CITUS_DIR:-/tmp/tally-citus}"
port0="${TALLY_CITUS_PORT:-9700}"
ports=("$port0" "$((port0 + 1))" "$((port0 + 2))")
pgbin="${PG_BIN:-/usr/lib/postgresql/15/bin}"
here="$(cd "$(dirname "$0")/.." && pwd)"
archive="${TALLY_CITUS_ARCHIVE:-$here/../shared/citus/citus-13.2.2-pg15-debian12-amd64.tar.gz}"

as_postgres() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

psql_node() { # port database sql
    as_postgres psql -X -q -h 127.0.0.1 -p "$1" -U postgres -d "$2" -v ON_ERROR_STOP=1 -tAc "$3"
}

install_citus() {
    local libdir
    libdir="$("$pgbin/pg_config" --pkglibdir 2>/dev/null || echo /usr/lib/postgresql/15/lib)"
    if [ -f "$libdir/citus.so" ]; then
        return
    fi
    if [ "$(id -u)" != 0 ] || [ ! -f "$archive" ]; then
        echo "FATAL: Citus is not installed ($libdir/citus.so missing), and it can be installed" \
            "only as root from $archive" >&2
        exit 1
    fi
    # Standard error: standard output is the URL alone.
    echo "Citus is missing; installing $archive" >&2
    tar -xzf "$archive" -C /
    [ -f "$libdir/citus.so" ] || { echo "FATAL: $archive did not install citus.so" >&2; exit 1; }
}

running() { as_postgres "$pgbin/pg_ctl" -D "$dir/n$1" status >/dev/null 2>&1; }

start() {
    [ -x "$pgbin/initdb" ] || { echo "FATAL: no PostgreSQL server binaries in $pgbin" >&2; exit 1; }
    install_citus
    mkdir -p "$dir"
    [ "$(id -u)" = 0 ] && chown postgres: "$dir"
    local fresh=0
    for i in 0 1 2; do
        if [ ! -f "$dir/n$i/PG_VERSION" ]; then
            fresh=1
            as_postgres "$pgbin/initdb" -D "$dir/n$i" -A trust -U postgres >"$dir/n$i.initdb.log"
            echo "include_if_exists = 'tally.conf'" >>"$dir/n$i/postgresql.conf"
        fi
        # The node's settings, written anew at every start (a running node
        # takes them at its next restart: `stop`, then `start`).
        cat >"$dir/n$i/tally.conf" <<CONF
shared_preload_libraries = 'citus'
port = ${ports[$i]}
listen_addresses = '127.0.0.1'
unix_socket_directories = '$dir'
max_connections = 300
# A maintenance daemon per database and node: tests make many databases.
max_worker_processes = 128
citus.enable_create_database_propagation = on
citus.enable_unsafe_triggers = on
CONF
        [ "$(id -u)" = 0 ] && chown postgres: "$dir/n$i/tally.conf"
        if ! running "$i"; then
            as_postgres "$pgbin/pg_ctl" -D "$dir/n$i" -l "$dir/n$i.log" -w -t 60 start >/dev/null
        fi
    done
    if [ "$fresh" = 1 ]; then
        for i in 0 1 2; do
            psql_node "${ports[$i]}" template1 "CREATE EXTENSION IF NOT EXISTS citus"
            psql_node "${ports[$i]}" postgres "CREATE EXTENSION IF NOT EXISTS citus"
        done
        psql_node "$port0" postgres "SELECT citus_set_coordinator_host('127.0.0.1', $port0)" >/dev/null
        psql_node "$port0" postgres "SELECT citus_add_node('127.0.0.1', ${ports[1]})" >/dev/null
        psql_node "$port0" postgres "SELECT citus_add_node('127.0.0.1', ${ports[2]})" >/dev/null
    fi
    local workers
    workers="$(psql_node "$port0" postgres "SELECT count(*) FROM pg_dist_node WHERE noderole = 'primary' AND groupid <> 0")"
    [ "$workers" = 2 ] || { echo "FATAL: the coordinator lists $workers workers, not 2" >&2; exit 1; }
    echo "postgres://postgres@127.0.0.1:$port0/postgres"
}

stop() {
    for i in 2 1 0; do
        if running "$i"; then
            as_postgres "$pgbin/pg_ctl" -D "$dir/n$i" -m fast -w stop >/dev/null
        fi
    done
}

case "${1:-}" in
start) start ;;
stop) stop ;;
status) for i in 0 1 2; do running "$i" && echo "n$i up on ${ports[$i]}" || echo "n$i down"; done ;;
*) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
