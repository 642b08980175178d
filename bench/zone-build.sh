#!/usr/bin/env bash
# A reporting zone built on 1,000,000 ratings and 1,250,000 requests (bench/seed_ratings.sql) while a CSAT writer's
# stand-in takes the zone lock shared every 20 ms, as each CSAT write does: prints the build's length and how long
# the writer waited (pgbench's per-transaction latencies, the 20 ms pause taken out). Release build, a private
# cluster of its own (fsync off, as the test cluster). Not part of make test. ZONE_BUILD_VACUUM=1 also vacuums the
# raw tables over and over during the build, every page each time (an operator's VACUUM, an anti-wraparound one).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=.build/release/desk-gateway
[ -x "$bin" ] || { echo "run make build first" >&2; exit 1; }
command -v pgbench >/dev/null || { echo "pgbench is missing (PostgreSQL's client package)" >&2; exit 1; }
pg_dir=.build/zone-build-pg
work=$(mktemp -d)
gateway=""
vacuum=""
cleanup() {
  [ -z "$gateway" ] || kill "$gateway" 2>/dev/null || true
  [ -z "$vacuum" ] || kill "$vacuum" 2>/dev/null || true
  scripts/test-postgres.sh stop "$pg_dir"
  rm -rf "$work"
}
trap cleanup EXIT
admin=$(scripts/test-postgres.sh start "$pg_dir" "${ZONE_BUILD_PG_PORT:-25438}")
psql "$admin" -qc "CREATE DATABASE zones"
url="${admin%dbname=postgres}dbname=zones"
DATABASE_URL="$url" "$bin" migrate >/dev/null
echo "== seeding 1,000,000 ratings and 1,250,000 requests"
psql "$url" -q -v ON_ERROR_STOP=1 -f bench/seed_ratings.sql >/dev/null

# CSATStore.zoneLock, the key every CSAT writer takes shared.
cat > "$work/writer.sql" <<'SQL'
BEGIN;
SELECT pg_advisory_xact_lock_shared(75064540879438);
END;
\sleep 20 ms
SQL
(cd "$work" && exec pgbench "$url" -n -c1 -T600 -f writer.sql -l >/dev/null 2>&1) &
writer=$!

if [ "${ZONE_BUILD_VACUUM:-0}" = 1 ]; then
  (while true; do psql "$url" -qc "VACUUM (FREEZE, DISABLE_PAGE_SKIPPING) csat_ratings, csat_requests" >/dev/null 2>&1; done) &
  vacuum=$!
fi

echo "== building the UTC zone${vacuum:+ while the raw tables are vacuumed}"
started=$(date +%s.%N)
DATABASE_URL="$url" REPORT_TIME_ZONES=UTC HOST=127.0.0.1 PORT="${ZONE_BUILD_PORT:-18390}" \
  DESK_EMULATOR_PORT="${ZONE_BUILD_EMULATOR_PORT:-19390}" DESK_EMULATOR_STATE=memory CACHE_RESET_ON_DESK_CHANGE=true \
  "$bin" > "$work/gateway.log" 2>&1 &
gateway=$!
until grep -q "built CSAT rollups" "$work/gateway.log"; do
  kill -0 "$gateway" 2>/dev/null || { cat "$work/gateway.log" >&2; exit 1; }
  sleep 0.2
done
ended=$(date +%s.%N)
kill "$writer" $vacuum 2>/dev/null || true
wait "$writer" 2>/dev/null || true

# Only the writer's transactions that overlapped the build.
awk -v from="$started" -v to="$ended" '{ end = $5 + $6 / 1e6; if (end >= from && end - $3 / 1e6 <= to) print ($3 / 1000) - 20 }' \
  "$work"/pgbench_log.* | sort -n | awk -v from="$started" -v to="$ended" '
  { w[NR] = $1 < 0 ? 0 : $1 }
  END { printf "build %.1f s; the writer, %d transactions during it: waited p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
        to - from, NR, w[int(NR * 0.5) + 1], w[int(NR * 0.99) + 1], w[NR] }'
psql "$url" -Atc "SELECT 'rollups: ' || (SELECT count(*) FROM csat_blocks) || ' agent x team rows, ' || (SELECT count(*) FROM csat_detail_blocks) || ' detail rows, ' || (SELECT count(*) FROM csat_team_blocks) || ' team rows'"
