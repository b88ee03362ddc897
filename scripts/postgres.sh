#!/usr/bin/env bash
# PostgreSQL 15 for the tests: installed from Debian's packages where absent, with a cluster
# listening on 127.0.0.1:5432 that trusts the `postgres` user over loopback, started where it
# is not running, and a database `test` for the tests' administration. Idempotent: on a
# machine where the server already answers it returns at once (a second run costs a
# fraction of a second); on one where it is installed but stopped it only starts it.
#   scripts/postgres.sh            # install (where absent), configure, start, wait until ready
#   ICECOMMIT_PG_PORT=5432, ICECOMMIT_PG_VERSION=15, ICECOMMIT_PG_CLUSTER=main (the defaults;
#   the tests make a second cluster on another port to check a stopped server is started)
# Run as root or with sudo (apt-get, pg_ctlcluster). What apt and the server print goes to a
# log, shown only when a step fails.
set -euo pipefail
port="${ICECOMMIT_PG_PORT:-5432}"
version="${ICECOMMIT_PG_VERSION:-15}"
cluster="${ICECOMMIT_PG_CLUSTER:-main}"
say() { echo "postgres: $*" >&2; }
if [ "$(id -u)" = 0 ]; then as_root=(); else as_root=(sudo -n); fi

ready() { pg_isready -q -h 127.0.0.1 -p "$port" -U postgres -d postgres -t 2 2>/dev/null; }
has_test_database() {
  psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -tAc \
    "select 1 from pg_database where datname = 'test'" 2>/dev/null | grep -q 1
}
if command -v pg_isready >/dev/null 2>&1 && ready && has_test_database; then
  exit 0
fi

log="$(mktemp -t icecommit-postgres.XXXXXX)"
fail() { tail -n 30 "$log" >&2; say "$* (log: $log)"; exit 1; }

bin="/usr/lib/postgresql/$version/bin"
if [ ! -x "$bin/postgres" ] || ! command -v pg_ctlcluster >/dev/null 2>&1; then
  say "installing PostgreSQL $version from Debian's packages"
  (DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq \
      "postgresql-$version" "postgresql-client-$version") >"$log" 2>&1 ||
    fail "apt-get install postgresql-$version failed"
fi

conf="/etc/postgresql/$version/$cluster"
if [ ! -f "$conf/postgresql.conf" ]; then
  say "creating cluster $version/$cluster on port $port"
  "${as_root[@]}" pg_createcluster "$version" "$cluster" --port "$port" >"$log" 2>&1 ||
    fail "pg_createcluster $version $cluster failed"
fi

# Trust the loopback connections the tests make (no password anywhere in the project): our
# lines go first in pg_hba.conf, where the first matching line wins; written once.
marker="# icecommit tests: trust loopback"
if ! "${as_root[@]}" grep -qF "$marker" "$conf/pg_hba.conf"; then
  say "trusting loopback connections in $conf/pg_hba.conf"
  tmp="$(mktemp)"
  {
    echo "$marker"
    echo "host    all    all    127.0.0.1/32    trust"
    echo "host    all    all    ::1/128         trust"
    "${as_root[@]}" cat "$conf/pg_hba.conf"
  } >"$tmp"
  "${as_root[@]}" cp "$tmp" "$conf/pg_hba.conf"
  rm -f "$tmp"
  # reloaded (or read on start) below
  "${as_root[@]}" pg_ctlcluster "$version" "$cluster" reload >/dev/null 2>&1 || true
fi
# The tests run two workers, each with its pools, plus subprocesses: keep the default's
# headroom explicit so that a changed distribution default does not starve them.
dropin="$conf/conf.d/icecommit-tests.conf"
if [ -d "$conf/conf.d" ] && [ ! -f "$dropin" ]; then
  printf "listen_addresses = 'localhost'\nport = %s\nmax_connections = 200\n" "$port" |
    "${as_root[@]}" tee "$dropin" >/dev/null
  "${as_root[@]}" pg_ctlcluster "$version" "$cluster" stop >/dev/null 2>&1 || true
fi

if ! ready; then
  say "starting cluster $version/$cluster on 127.0.0.1:$port"
  "${as_root[@]}" pg_ctlcluster "$version" "$cluster" start >"$log" 2>&1 ||
    { "${as_root[@]}" tail -n 20 "/var/log/postgresql/postgresql-$version-$cluster.log" >>"$log" 2>/dev/null || true
      fail "pg_ctlcluster $version $cluster start failed"; }
  for _ in $(seq 1 60); do
    ready && break
    sleep 0.5
  done
  ready || fail "the server did not answer on 127.0.0.1:$port within 30 s"
fi
if ! has_test_database; then
  psql -h 127.0.0.1 -p "$port" -U postgres -d postgres -qc "create database test" >"$log" 2>&1 ||
    fail "could not create the database 'test'"
fi
rm -f "$log"
say "ready on 127.0.0.1:$port (user postgres, trust)"
