#!/usr/bin/env bash
# One private PostgreSQL cluster for a whole test run: 'start DIR PORT' prints its admin connection string,
# 'stop DIR' stops it and removes the folder. Runs the server as 'postgres' when invoked as root.
set -euo pipefail
cmd=$1 dir=$(realpath -m "$2")
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
as_pg=()
[ "$(id -u)" -eq 0 ] && as_pg=(runuser -u postgres --)

case "$cmd" in
start)
  port=$3
  # Unix socket paths are limited to 107 bytes.
  sock="$dir/sock"; [ ${#sock} -lt 80 ] || sock="/tmp/dg-test-pg-$port"
  if [ -f "$dir/data/postmaster.pid" ]; then "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true; fi
  rm -rf "$dir"; mkdir -p "$dir/data" "$sock"
  [ ${#as_pg[@]} -eq 0 ] || chown postgres:postgres "$dir" "$dir/data" "$sock"
  "${as_pg[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 --no-sync >/dev/null
  "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/data/server.log" -w -t 60 -o \
    "-p $port -k $sock -c listen_addresses=127.0.0.1 -c max_connections=2000 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
    start >/dev/null
  echo "host=$sock port=$port user=postgres dbname=postgres"
  ;;
stop)
  if [ -d "$dir/data" ]; then "${as_pg[@]}" "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$dir"
  ;;
*) echo "usage: $0 start DIR PORT | stop DIR" >&2; exit 2 ;;
esac
