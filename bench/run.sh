#!/usr/bin/env bash
# Benchmarks (not tests): starts the release gateway on its own private PostgreSQL, drives it with wrk on
# loopback, and prints one table row per scenario. wrk shares the 2 cores with the server and PostgreSQL, so
# the figures are whole-machine figures, good for comparing builds, not absolute capacity.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/cluster-cpu.sh
. bench/timed.sh

port=${BENCH_PORT:-18080}
duration=${BENCH_DURATION:-10s}
connections=${BENCH_CONNECTIONS:-64}
out=bench/out
mkdir -p "$out"

export PORT=$port HOST=127.0.0.1 LOG_LEVEL=${BENCH_LOG_LEVEL:-warning}
# Reads stay cached for the whole run; the limiter must not be what is measured.
export CACHE_TTL_S=${BENCH_CACHE_TTL_S:-600} SESSION_CACHE_S=300 RATE_LIMIT_PER_MINUTE=10000000 RATE_LIMIT_BURST=10000000
# wrk opens all its connections from one address, and the seeding signs in every customer from it.
export HTTP_PER_ADDRESS_CONNECTION_LIMIT=0 SIGNIN_RATE_LIMIT_PER_MINUTE=10000000 SIGNIN_RATE_LIMIT_BURST=10000000
export DESK_EMULATOR_PORT=${BENCH_EMULATOR_PORT:-19095}
export REPORT_TIME_ZONES=UTC,Asia/Kolkata SYNC_INTERVAL_S=0
export EMBEDDED_PG_DIR=.build/bench-postgres EMBEDDED_PG_PORT=${BENCH_PG_PORT:-25435}
unset DATABASE_URL
start_gateway() {
  ./.build/release/desk-gateway >>"$out/gateway.log" 2>&1 &
  gw=$!
  for _ in $(seq 1 1200); do
    curl -fs "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "gateway did not become ready"; cat "$out/gateway.log"; exit 1
}
# A fresh database every run: the embedded Desk emulator starts empty too.
pg_bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
as_postgres=(); [ "$(id -u)" -eq 0 ] && as_postgres=(runuser -u postgres --)
[ -d "$EMBEDDED_PG_DIR/data" ] && "${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$EMBEDDED_PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
rm -rf "$EMBEDDED_PG_DIR"
: >"$out/gateway.log"
start_gateway
cleanup() {
  if [ -n "${engine:-}" ]; then kill -TERM "$engine" 2>/dev/null || true; fi
  if [ -n "${engine_made:-}" ]; then kill -TERM "$engine_made" 2>/dev/null || true; fi
  kill -TERM "$gw" 2>/dev/null || true
  wait "$gw" 2>/dev/null || true
  pg=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
  as_pg=(); [ "$(id -u)" -eq 0 ] && as_pg=(runuser -u postgres --)
  "${as_pg[@]}" "$pg/pg_ctl" -D "$EMBEDDED_PG_DIR/data" -m fast -w stop >/dev/null 2>&1 || true
}
trap cleanup EXIT


rows=()
declare -A rps_of cpu_of
# scenario NAME URL [wrk args...]
scenario() {
  local name=$1 url=$2; shift 2
  local file="$out/$(echo "$name" | tr -c 'a-zA-Z0-9\n' '_').txt"
  export BENCH_MODE=${BENCH_MODE:-ticket}
  local threads=$(( connections < 2 ? connections : 2 ))
  # The run's Lua script: bench/latency.lua, or one of the run's own that loads it (wrk_script: the ticket reads').
  local lua=${wrk_script:-bench/latency.lua}
  wrk -t"$threads" -c"$connections" -d2s -s "$lua" "$@" "$url" >/dev/null 2>&1 || true
  # wrk drops its connections with requests in flight; the gateway finishes them (a raw report holds its key's one
  # slot for a while): let them end, so the measured run does not start against leftovers.
  for _ in $(seq 1 100); do
    curl -s "http://127.0.0.1:$port/metrics" | grep -q '^http_requests_in_flight 0$' && break
    sleep 0.1
  done
  # The gateway's CPU time per request varies far less than requests/s, which wrk's share of the cores moves.
  local cpu_before cpu_after requests cpu
  cpu_before=$(awk '{print $14 + $15}' "/proc/$gw/stat")
  BENCH_CONNECTIONS=$connections wrk -t"$threads" -c"$connections" -d"$duration" --latency -s "$lua" "$@" "$url" \
    >"$file" 2>&1
  cpu_after=$(awk '{print $14 + $15}' "/proc/$gw/stat")
  requests=$(awk '/requests in/ {print $1}' "$file")
  cpu=$(awk -v a="$cpu_before" -v b="$cpu_after" -v n="${requests:-0}" -v hz="$(getconf CLK_TCK)" \
    'BEGIN { if (n > 0) printf "%.1f", (b - a) / hz * 1e6 / n; else print "-" }')
  local rps p50 p99 timed slowest errors
  rps=$(awk '/Requests\/sec/ {print $2}' "$file")
  p50=$(awk '$1=="50%" {print $2}' "$file")
  p99=$(awk '$1=="99%" {print $2}' "$file")
  read -r timed slowest < <(timed_of "$file")
  errors=$(awk '/Non-2xx/ {print $5}' "$file"); errors=${errors:-0}
  rows+=("$(printf '| %-36s | %12s | %9s | %9s | %9s | %9s | %8s | %10s |' "$name" "$rps" "$p50" "$p99" "$timed" \
    "$slowest" "$errors" "$cpu")")
  rps_of[$name]=$rps
  cpu_of[$name]=$cpu
}

# The engine's limit: a bare libmicrohttpd server (bench/engine-limit/server.c, the gateway's flags, a fixed JSON
# answer) built with the system's C compiler and measured in this sitting, between the gateway's own runs.
engine_port=${BENCH_ENGINE_PORT:-18090}
"${CC:-$(command -v cc || command -v clang)}" -O2 -o .build/engine-limit bench/engine-limit/server.c -lmicrohttpd
./.build/engine-limit "$engine_port" "${HTTP_THREADS:-2}" &
engine=$!
# The same server making each answer anew with /livez's four headers: what libmicrohttpd itself costs per response.
./.build/engine-limit "$((engine_port + 1))" "${HTTP_THREADS:-2}" per-request &
engine_made=$!
engine_runs=()
engine_scenario() {  # one measured run of the bare server, counted as its own row
  local saved=$gw
  gw=$engine
  scenario "engine limit (bare libmicrohttpd) $1" "http://127.0.0.1:$engine_port/livez"
  gw=$saved
  engine_runs+=("${rps_of["engine limit (bare libmicrohttpd) $1"]}")
}
ratio() {  # NAME REFERENCE: the scenario's requests/s over the reference's
  awk -v a="${rps_of[$1]:-0}" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'
}

engine_scenario 1
saved_gw=$gw
gw=$engine_made
scenario "engine, answer made per request" "http://127.0.0.1:$((engine_port + 1))/livez"
gw=$saved_gw
kill -TERM "$engine_made" 2>/dev/null || true
scenario "GET /livez" "http://127.0.0.1:$port/livez"
engine_scenario 2
scenario "GET /readyz (checks run once a second)" "http://127.0.0.1:$port/readyz"

# Customers and tickets: created through the gateway (so they are cached), agents' side through the emulator.
customers=${BENCH_CUSTOMERS:-50}
per_customer=${BENCH_TICKETS_PER_CUSTOMER:-20}
echo "seeding $customers customers x $per_customer tickets ..."
python3 bench/seed_tickets.py "http://127.0.0.1:$port" "http://127.0.0.1:$DESK_EMULATOR_PORT" "$customers" "$per_customer" "$out/tickets.lua"
# The seeding's Desk webhooks are applied in the background: let them finish so the reads are measured alone.
drained=$(date +%s)
for _ in $(seq 1 600); do
  pending=$(psql "host=$(realpath "$EMBEDDED_PG_DIR")/sock port=$EMBEDDED_PG_PORT user=postgres dbname=desk_gateway" -tAc \
    "SELECT count(*) FROM webhook_events WHERE status = 'pending'" 2>/dev/null)
  [ "${pending:-0}" = 0 ] && break
  sleep 0.2
done
echo "webhook backlog applied $(( $(date +%s) - drained )) s after seeding"
wrk_script="$out/tickets.lua" scenario "GET /v1/tickets/{id} (cached)" "http://127.0.0.1:$port"
engine_scenario 3
BENCH_MODE=list wrk_script="$out/tickets.lua" scenario "GET /v1/tickets?status=open" "http://127.0.0.1:$port"
# The issue's ratios are medians of interleaved runs: BENCH_ENGINE_ROUNDS more rounds of the bare server, /livez, the
# bare server, the cached read, each ratio taken against the bare runs on either side of it (a single run of either
# moves by a fifth on this host within minutes).
rps_run() {  # URL [wrk args...] -> requests/s of one measured run, after the same warm-up as a scenario
  local threads=$(( connections < 2 ? connections : 2 ))
  wrk -t"$threads" -c"$connections" -d2s "${@:2}" "$1" >/dev/null 2>&1 || true
  wrk -t"$threads" -c"$connections" -d"$duration" "${@:2}" "$1" 2>&1 | awk '/Requests\/sec/ {print $2}'
}
livez_ratios=() cached_ratios=()
bare_before=${engine_runs[2]}
for _ in $(seq 1 "${BENCH_ENGINE_ROUNDS:-5}"); do
  livez=$(rps_run "http://127.0.0.1:$port/livez")
  bare_between=$(rps_run "http://127.0.0.1:$engine_port/livez")
  cached=$(BENCH_MODE=ticket rps_run "http://127.0.0.1:$port" -s "$out/tickets.lua")
  bare_after=$(rps_run "http://127.0.0.1:$engine_port/livez")
  livez_ratios+=("$(awk -v a="$livez" -v b="$bare_before" -v c="$bare_between" 'BEGIN { printf "%.2f", 2 * a / (b + c) }')")
  cached_ratios+=("$(awk -v a="$cached" -v b="$bare_between" -v c="$bare_after" 'BEGIN { printf "%.2f", 2 * a / (b + c) }')")
  bare_before=$bare_after
done
kill -TERM "$engine" 2>/dev/null || true

if [ "${BENCH_REPORTS:-1}" = 1 ]; then
  # 1,000,000 ratings: seeded with SQL, then the gateway restarts and builds the rollups of its zones (UTC, Asia/Kolkata).
  echo "seeding 1,000,000 ratings and 1,250,000 CSAT requests ..."
  pg_url="host=$(realpath "$EMBEDDED_PG_DIR")/sock port=$EMBEDDED_PG_PORT user=postgres dbname=desk_gateway"
  seeded=$(date +%s)
  psql "$pg_url" -q -v ON_ERROR_STOP=1 -f bench/seed_ratings.sql >/dev/null
  kill -TERM "$gw"; wait "$gw" 2>/dev/null || true
  start_gateway
  until [ "$(psql "$pg_url" -tAc "SELECT count(*) FROM report_zones WHERE backfilled_at IS NOT NULL")" = 2 ]; do sleep 1; done
  echo "seeded and rolled up in $(( $(date +%s) - seeded )) s"
  key=$(./.build/release/desk-gateway api-key create --scope reports --name bench 2>/dev/null | awk '/^key/ {print $2}')
  to=$(date -u +%F); from=$(date -u -d "$to - 89 days" +%F)
  q="from=$from&to=$to"
  auth=(-H "Authorization: Bearer $key")
  psql "$pg_url" -qc "VACUUM ANALYZE csat_detail_blocks, csat_blocks, csat_team_blocks" >/dev/null
  # Polling dashboards: the same report again and again (served from the report cache after the first).
  scenario "reports agent, UTC (cached)" "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=UTC" "${auth[@]}"
  scenario "reports team, UTC (cached)" "http://127.0.0.1:$port/v1/reports/csat?groupBy=team&$q&tz=UTC" "${auth[@]}"
  # Every request computed (report cache off): from the rollups, then from raw ratings.
  kill -TERM "$gw"; wait "$gw" 2>/dev/null || true
  REPORT_CACHE_S=0 start_gateway
  connections_saved=$connections; connections=1
  scenario "reports agent, UTC (rollup) c1" "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=UTC" "${auth[@]}"
  scenario "reports team, UTC (rollup) c1" "http://127.0.0.1:$port/v1/reports/csat?groupBy=team&$q&tz=UTC" "${auth[@]}"
  scenario "reports agent, Kolkata (rollup) c1" "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=Asia/Kolkata" "${auth[@]}"
  scenario "reports agent, 1 channel (rollup) c1" "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=UTC&channelType=SENDBIRD_IOS" "${auth[@]}"
  scenario "reports agent by week (rollup) c1" "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=UTC&bucket=week" "${auth[@]}"
  scenario "reports team by week (rollup) c1" "http://127.0.0.1:$port/v1/reports/csat?groupBy=team&$q&tz=UTC&bucket=week" "${auth[@]}"
  # By day, 90 days of 200 agents is 18,000 rows (over REPORT_MAX_CELLS): the daily buckets are measured over 30 days.
  from30=$(date -u -d "$to - 29 days" +%F)
  scenario "reports agent by day, 30 days c1" "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&from=$from30&to=$to&tz=UTC&bucket=day" "${auth[@]}"
  # Rows of each bucketed report, for its gateway CPU a row (a weekly report no dearer than a daily one).
  report_rows() { curl -s "${auth[@]}" "$1" | python3 -c 'import json, sys; print(len(json.load(sys.stdin)["rows"]))'; }
  weekly_rows=$(report_rows "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=UTC&bucket=week")
  daily_rows=$(report_rows "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&from=$from30&to=$to&tz=UTC&bucket=day")
  # The report page (/reports): three reports (agents, teams, the trend) and the HTML around them, per request.
  cookie=$(curl -s -o /dev/null -D - -X POST --data-urlencode "key=$key" "http://127.0.0.1:$port/reports/sign-in" \
    | awk -F'[=;]' 'tolower($1) ~ /^set-cookie: dg_reports$/ {print $2}')
  curl -s -H "Cookie: dg_reports=$cookie" "http://127.0.0.1:$port/reports?tz=UTC" | grep -q 'id="card-responses"' \
    || { echo "report page: signing in failed"; exit 1; }
  scenario "report page, 30 days (rollup) c1" "http://127.0.0.1:$port/reports?tz=UTC" -H "Cookie: dg_reports=$cookie"
  scenario "report page, 90 days (rollup) c1" "http://127.0.0.1:$port/reports?range=90d&tz=UTC" -H "Cookie: dg_reports=$cookie"
  scenario "report page, comments only c1" "http://127.0.0.1:$port/reports/responses?range=90d&tz=UTC&hasComment=true" -H "Cookie: dg_reports=$cookie"
  # A team lead's key (its one team): the same page narrowed to that team's blocks.
  lead=$(./.build/release/desk-gateway api-key create --scope reports --name bench-lead --team team-1 2>/dev/null | awk '/^key/ {print $2}')
  lead_cookie=$(curl -s -o /dev/null -D - -X POST --data-urlencode "key=$lead" "http://127.0.0.1:$port/reports/sign-in" \
    | awk -F'[=;]' 'tolower($1) ~ /^set-cookie: dg_reports$/ {print $2}')
  scenario "report page, team lead (rollup) c1" "http://127.0.0.1:$port/reports?range=90d&tz=UTC" -H "Cookie: dg_reports=$lead_cookie"
  # The full responses export of 90 days (every rating, streamed a page at a time): time, size, and the gateway's
  # resident memory before and at its end (flat: one page held at once).
  rss_before=$(awk '/VmRSS/ {print $2}' "/proc/$gw/status")
  export_start=$(date +%s.%N)
  export_bytes=$(curl -s -H "Cookie: dg_reports=$cookie" "http://127.0.0.1:$port/reports/export/responses.csv?range=90d&tz=UTC" | wc -c)
  export_s=$(awk -v a="$export_start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
  rss_after=$(awk '/VmRSS/ {print $2}' "/proc/$gw/status")
  echo "responses.csv, 90 days: $export_bytes bytes in ${export_s} s; gateway RSS ${rss_before} kB before, ${rss_after} kB after"
  connections=4
  scenario "reports agent, UTC (rollup) c4" "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=UTC" "${auth[@]}"
  scenario "reports team, UTC (rollup) c4" "http://127.0.0.1:$port/v1/reports/csat?groupBy=team&$q&tz=UTC" "${auth[@]}"
  scenario "reports agent by week (rollup) c4" "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=UTC&bucket=week" "${auth[@]}"
  scenario "reports team by week (rollup) c4" "http://127.0.0.1:$port/v1/reports/csat?groupBy=team&$q&tz=UTC&bucket=week" "${auth[@]}"
  # The reports' targets as medians of interleaved runs too (one run of a report moves as much as the engine's):
  # BENCH_ENGINE_ROUNDS rounds of the weekly and the daily report at one connection (gateway CPU a row) and of the
  # four reports at four connections (p99).
  # CPU time of the bench cluster (its postmaster and the backends under it, the gateway's pool among them), in ticks.
  pg_ticks() { cluster_ticks "$EMBEDDED_PG_DIR/data"; }
  # One series of the gateway's /metrics (0 when it has none yet).
  gateway_metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v series="$1" '$1 == series {v = $2} END {print v + 0}'; }
  raw_reports() { gateway_metric 'report_computations_total{source="raw"}'; }
  # CONNECTIONS URL -> µs of gateway CPU a request, p99 in ms, µs of PostgreSQL's CPU a request, requests, non-2xx
  # answers, reports computed from raw ratings, the slowest request in ms (these four tell a run that stalled), the p99
  # of the requests as timed (without wrk's fill-in after slow ones: bench/latency.lua).
  report_run() {
    local file="$out/report_round.txt" threads=$(( $1 < 2 ? $1 : 2 )) c0 c1 p0 p1 r0
    wrk -t"$threads" -c"$1" -d1s "${auth[@]}" "$2" >/dev/null 2>&1 || true
    r0=$(raw_reports)  # before the CPU is read: the scrape is not the run's
    c0=$(awk '{print $14 + $15}' "/proc/$gw/stat"); p0=$(pg_ticks)
    BENCH_CONNECTIONS=$1 wrk -t"$threads" -c"$1" -d"${BENCH_ROUND_DURATION:-5s}" --latency -s bench/latency.lua "${auth[@]}" \
      "$2" >"$file" 2>&1
    c1=$(awk '{print $14 + $15}' "/proc/$gw/stat"); p1=$(pg_ticks)
    local timed _
    read -r timed _ < <(timed_of "$file")
    awk -v a="$c0" -v b="$c1" -v pa="$p0" -v pb="$p1" -v hz="$(getconf CLK_TCK)" -v raw="$(( $(raw_reports) - ${r0:-0} ))" \
      -v t="${timed%ms}" '
      function ms(v) { return v ~ /us$/ ? v / 1000 : v ~ /ms$/ ? v + 0 : v * 1000 }
      /requests in/ {n = $1} $1 == "99%" {p = ms($2)} $1 == "Latency" && !max {max = ms($4)} /Non-2xx/ {e = $5}
      END { printf "%.1f %.2f %.1f %d %d %d %.2f %s\n", (n > 0 ? (b - a) / hz * 1e6 / n : 0), p,
                   (n > 0 ? (pb - pa) / hz * 1e6 / n : 0), n, e, raw, max, t }' "$file"
  }
  weekly_url="http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=UTC&bucket=week"
  daily_url="http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&from=$from30&to=$to&tz=UTC&bucket=day"
  c4_names=("agents" "teams" "agents by week" "teams by week")
  c4_urls=("http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=UTC"
           "http://127.0.0.1:$port/v1/reports/csat?groupBy=team&$q&tz=UTC" "$weekly_url"
           "http://127.0.0.1:$port/v1/reports/csat?groupBy=team&$q&tz=UTC&bucket=week")
  row_ratios=() c4_p99=() c4_timed=() c4_gw=() c4_pg=() c4_n=() odd_runs=()
  for round in $(seq 1 "${BENCH_ENGINE_ROUNDS:-5}"); do
    read -r weekly_cpu _ < <(report_run 1 "$weekly_url")
    read -r daily_cpu _ < <(report_run 1 "$daily_url")
    row_ratios+=("$(awk -v w="$weekly_cpu" -v d="$daily_cpu" -v wn="$weekly_rows" -v dn="$daily_rows" \
      'BEGIN { printf "%.2f", (w / wn) / (d / dn) }')")
    for index in "${!c4_urls[@]}"; do
      read -r gw_us p99 pg_us n errors raw slowest timed < <(report_run 4 "${c4_urls[$index]}")
      c4_p99[$index]="${c4_p99[$index]:-} $p99"
      c4_timed[$index]="${c4_timed[$index]:-} $timed"
      c4_n[$index]="${c4_n[$index]:-} $n"
      if [ "$errors" -gt 0 ] || [ "$raw" -gt 0 ]; then
        odd_runs+=("round $round, ${c4_names[$index]}: $errors of $n answers not 2xx, $raw reports from raw ratings, slowest $slowest ms")
      fi
      # wrk's p99 over twice the timed one: set by what wrk filled in after a few slow requests, not by the run.
      if awk -v p="$p99" -v t="$timed" 'BEGIN { exit !(t != "-" && p > 2 * t) }'; then
        odd_runs+=("round $round, ${c4_names[$index]}: p99 $p99 ms from wrk's fill-in, $timed ms as timed, slowest $slowest ms")
      fi
      c4_gw[$index]="${c4_gw[$index]:-} $gw_us"
      c4_pg[$index]="${c4_pg[$index]:-} $pg_us"
    done
  done
  connections=1
  # This host's VM gives back its page cache within minutes (the rollup rounds read blocks only): read from disk, the
  # first raw report ran past the statement timeout three times in a row in the sixty-sixth session's sitting. The raw
  # reports measure the computation, so the ratings and requests are read into the cache first.
  psql "$pg_url" -qAt -c "CREATE EXTENSION IF NOT EXISTS pg_prewarm" -c "SELECT pg_prewarm(relation, 'read') FROM unnest(array[
    'csat_ratings', 'csat_ratings_rated_at_idx', 'csat_requests', 'csat_requests_requested_at_idx']::regclass[]) AS relation" >/dev/null
  scenario "reports agent, Etc/UTC (raw)" "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=Etc/UTC" "${auth[@]}"
  scenario "reports team, Etc/UTC (raw)" "http://127.0.0.1:$port/v1/reports/csat?groupBy=team&$q&tz=Etc/UTC" "${auth[@]}"
  scenario "reports agent, Denver (raw)" "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=America/Denver" "${auth[@]}"
  connections=$connections_saved
fi

echo
echo "wrk -t2 -c$connections (computed reports: -c1 / -c4 as marked, raw: -c1) -d$duration on 127.0.0.1 ($(nproc) cores shared by wrk, gateway and PostgreSQL)"
printf '| %-36s | %12s | %9s | %9s | %9s | %9s | %8s | %10s |\n' "scenario" "requests/s" "p50" "p99" "p99 timed" "slowest" \
  "non-2xx" "gw µs/req"
printf '|%s|%s|%s|%s|%s|%s|%s|%s|\n' "--------------------------------------" "--------------" "-----------" "-----------" \
  "-----------" "-----------" "----------" "------------"
printf '%s\n' "${rows[@]}"
# Each core scenario against the engine runs around it (their mean).
around() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.0f", (a + b) / 2 }'; }
echo
echo "Ratios to the bare libmicrohttpd server in this sitting (engine runs: ${engine_runs[*]} requests/s):"
echo "  engine, answer made per request $(ratio "engine, answer made per request" "$(around "${engine_runs[0]}" "${engine_runs[1]}")")"
echo "  GET /livez                      $(ratio "GET /livez" "$(around "${engine_runs[0]}" "${engine_runs[1]}")")"
echo "  GET /v1/tickets/{id} (cached)   $(ratio "GET /v1/tickets/{id} (cached)" "$(around "${engine_runs[1]}" "${engine_runs[2]}")")"
echo "  GET /v1/tickets?status=open     $(ratio "GET /v1/tickets?status=open" "${engine_runs[2]}")"
# The median of the numbers given; a "-" (a run bench/latency.lua did not undo) is left out, and none at all is "-".
median() { printf '%s\n' "$@" | awk '$1 ~ /^[0-9.]+$/' | sort -n | awk '{ v[NR] = $1 } END { if (!NR) printf "-"; else printf "%.2f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
if [ "${#livez_ratios[@]}" -gt 0 ]; then
  echo "Interleaved rounds after the table (${#livez_ratios[@]}; the bare server's runs between them), each against its neighbours:"
  echo "  GET /livez                      ${livez_ratios[*]}  median $(median "${livez_ratios[@]}")"
  echo "  GET /v1/tickets/{id} (cached)   ${cached_ratios[*]}  median $(median "${cached_ratios[@]}")"
fi
if [ -n "${weekly_rows:-}" ]; then
  per_row() { awk -v c="${cpu_of[$1]:-0}" -v n="$2" 'BEGIN { if (n > 0) printf "%.2f", c / n; else print "-" }'; }
  weekly=$(per_row "reports agent by week (rollup) c1" "$weekly_rows")
  daily=$(per_row "reports agent by day, 30 days c1" "$daily_rows")
  echo
  echo "Gateway CPU a report row, one connection (a weekly report no dearer than a daily one):"
  echo "  agents by week, 90 days ($weekly_rows rows)   $weekly µs"
  echo "  agents by day, 30 days ($daily_rows rows)    $daily µs"
  echo "  weekly over daily                    $(awk -v a="$weekly" -v b="$daily" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }')"
  echo "Interleaved report rounds after the table (${#row_ratios[@]}; ${BENCH_ROUND_DURATION:-5s} each):"
  echo "  weekly over daily a row, one connection  ${row_ratios[*]}  median $(median "${row_ratios[@]}")"
  for index in "${!c4_names[@]}"; do
    read -r -a runs <<<"${c4_p99[$index]}"
    printf '  p99 at four connections, %-15s %s ms  median %s ms\n' "${c4_names[$index]}" "${runs[*]}" "$(median "${runs[@]}")"
  done
  for index in "${!c4_names[@]}"; do
    read -r -a runs <<<"${c4_timed[$index]}"
    printf '  the same as timed (bench/latency.lua), %-15s %s ms  median %s ms\n' "${c4_names[$index]}" "${runs[*]}" \
      "$(median "${runs[@]}")"
  done
  # A run whose p99 is far off its neighbours' did fewer requests than they: a stall, or reports that were not computed
  # as the others (an error, a fall to the raw ratings), which the lines after say.
  for index in "${!c4_names[@]}"; do
    printf '  requests a run at four connections, %-15s %s\n' "${c4_names[$index]}" "${c4_n[$index]# }"
  done
  for line in "${odd_runs[@]}"; do echo "  $line"; done
  # What bounds the p99 above: four clients keep four reports in flight on two cores shared by the gateway and
  # PostgreSQL, so the mean wait is at least four over the rate the two cores' CPU a report allows (their system time
  # counted, wrk's own CPU not).
  # A report reads one rollup row per agent and block, and how many blocks a 90-day range and the one before it take
  # depends on how the dates fall (RollupBlocks.signedCover): sittings on different days read different amounts. The
  # gateway counts them (report_rollup_blocks_total); one more report tells this date's number.
  blocks_before=$(gateway_metric report_rollup_blocks_total)
  curl -s -o /dev/null "${auth[@]}" "http://127.0.0.1:$port/v1/reports/csat?groupBy=agent&$q&tz=UTC"
  blocks=$(awk -v a="$blocks_before" -v b="$(gateway_metric report_rollup_blocks_total)" 'BEGIN { printf "%d", b - a }')
  echo "The 90-day reports and their previous periods read $blocks blocks on $to (8 to 14 over a year's dates, 10.5 on average)."
  echo "CPU a report in those rounds (medians), and what two cores allow at that cost:"
  for index in "${!c4_names[@]}"; do
    read -r -a gw_runs <<<"${c4_gw[$index]}"
    read -r -a pg_runs <<<"${c4_pg[$index]}"
    awk -v name="${c4_names[$index]}" -v g="$(median "${gw_runs[@]}")" -v p="$(median "${pg_runs[@]}")" -v cores="$(nproc)" \
      'BEGIN { r = cores * 1e6 / (g + p)
               printf "  %-15s gateway %6.0f µs, PostgreSQL %6.0f µs: at most %5.0f a second, a mean wait of %.2f ms or more at four connections\n", name, g, p, r, 4000 / r }'
  done
fi
