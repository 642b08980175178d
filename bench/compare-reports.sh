#!/usr/bin/env bash
# Two builds' report work side by side on the database `make bench` leaves behind (1,000,000 ratings): both gateways
# up at once on it with the report cache off, and wrk at one connection alternating between them ROUNDS times on the
# weekly and the unbucketed agents' report and the 30-day report page, which build goes first swapped each round.
# Prints the gateway's µs of CPU per request (from /proc), requests/s, p99 and the p99 as timed (bench/latency.lua)
# per round, the medians, and in how many rounds the new build was the cheaper. The answers are compared first: a
# change that alters a report is not a speed-up. COMPARE_CONNECTIONS (1) sets wrk's connections: 4 is the issue's
# "reports at four connections" (the page is then left out). COMPARE_BESIDE=1 reads a customer's open list at one
# connection beside each run, from the same gateway, and prints its requests/s and p99 too: what the reports leave to
# the gateway's other work. COMPARE_ONLY names the scenarios to run (week agents page teams teams-week teams-day
# agents-day; default week agents page). Each run also prints PostgreSQL's CPU a request (the cluster's postmaster
# and backends, both gateways' among them: only one runs at a time).
#   bench/compare-reports.sh OLD_BINARY NEW_BINARY [ROUNDS]   (after one `make bench`)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/cluster-cpu.sh
. bench/timed.sh
old_bin=$1 new_bin=$2 rounds=${3:-7} seconds=${COMPARE_SECONDS:-4} connections=${COMPARE_CONNECTIONS:-1} beside=${COMPARE_BESIDE:-0}
only=" ${COMPARE_ONLY:-week agents page} "
[ -d .build/bench-postgres/data ] || { echo "no bench database in .build/bench-postgres: run make bench first"; exit 1; }
pids=()
cleanup() {
  # The new build first: the old one started the cluster, and stops it when it exits.
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[$i]}" 2>/dev/null || true; wait "${pids[$i]}" 2>/dev/null || true; done
}
trap cleanup EXIT

export HOST=127.0.0.1 LOG_LEVEL=warning REPORT_CACHE_S=0 REPORT_TIME_ZONES=UTC,Asia/Kolkata SYNC_INTERVAL_S=0
export CACHE_TTL_S=600 SESSION_CACHE_S=300 RATE_LIMIT_PER_MINUTE=10000000 RATE_LIMIT_BURST=10000000
export HTTP_PER_ADDRESS_CONNECTION_LIMIT=0 SIGNIN_RATE_LIMIT_PER_MINUTE=10000000 SIGNIN_RATE_LIMIT_BURST=10000000
export EMBEDDED_PG_DIR=.build/bench-postgres EMBEDDED_PG_PORT=${BENCH_PG_PORT:-25435}
unset DATABASE_URL
start() {  # binary name port emulator-port
  PORT=$3 DESK_EMULATOR_PORT=$4 "$1" >".build/compare-reports-$2.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$3/readyz" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "$2 did not become ready"; cat ".build/compare-reports-$2.log"; exit 1
}
start "$old_bin" old 18641 19641
start "$new_bin" new 18642 19642
key=$("$old_bin" api-key create --scope reports --name compare-reports 2>/dev/null | awk '/^key/ {print $2}')
[ -n "$key" ] || { echo "could not create a reports key"; exit 1; }
cookie=$(curl -s -o /dev/null -D - -X POST --data-urlencode "key=$key" http://127.0.0.1:18641/reports/sign-in \
  | awk -F'[=;]' 'tolower($1) ~ /^set-cookie: dg_reports$/ {print $2}')
# The range `make bench` reports on: the 90 days to today.
to=$(date -u +%F)
range="from=$(date -u -d "$to - 89 days" +%F)&to=$to&tz=UTC"
# The daily report make bench sets the weekly one against: the 30 days to today.
month="from=$(date -u -d "$to - 29 days" +%F)&to=$to&tz=UTC"
# name path header
scenarios=("week|/v1/reports/csat?groupBy=agent&$range&bucket=week|Authorization: Bearer $key"
           "agents|/v1/reports/csat?groupBy=agent&$range|Authorization: Bearer $key"
           "page|/reports?tz=UTC|Cookie: dg_reports=$cookie"
           "teams|/v1/reports/csat?groupBy=team&$range|Authorization: Bearer $key"
           "teams-week|/v1/reports/csat?groupBy=team&$range&bucket=week|Authorization: Bearer $key"
           "teams-day|/v1/reports/csat?groupBy=team&$range&bucket=day|Authorization: Bearer $key"
           "agents-day|/v1/reports/csat?groupBy=agent&$month&bucket=day|Authorization: Bearer $key")
for index in "${!scenarios[@]}"; do
  name=${scenarios[$index]%%|*}
  # The page's comments are a raw listing, one at a time per key (REPORT_RAW_CONCURRENCY_PER_KEY): more connections
  # than one would measure its 429s.
  [[ "$only" == *" $name "* ]] && { ((connections == 1)) || [ "$name" != page ]; } || unset "scenarios[$index]"
done

# A signed-in demo customer with one ticket, for the open list read beside the reports: the session's token.
customer() {
  local base=http://127.0.0.1:$1 token
  token=$(curl -fs -X POST -H 'Content-Type: application/json' -d '{"userId":"demo-customer","accessToken":"demo-token"}' \
    "$base/v1/sessions" | python3 -c 'import sys, json; print(json.load(sys.stdin)["token"])')
  curl -fs -o /dev/null -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' \
    -d '{"title":"compare","userName":"C"}' "$base/v1/tickets"
  echo "$token"
}
((beside)) && tokens=([18641]=$(customer 18641) [18642]=$(customer 18642))

for scenario in "${scenarios[@]}"; do
  IFS='|' read -r name path header <<<"$scenario"
  old_body=$(curl -fs -H "$header" "http://127.0.0.1:18641$path" | sed 's/"requestId":"[^"]*"//' | md5sum)
  new_body=$(curl -fs -H "$header" "http://127.0.0.1:18642$path" | sed 's/"requestId":"[^"]*"//' | md5sum)
  [ "$old_body" = "$new_body" ] || { echo "$name: the two builds answer differently"; exit 1; }
done

# wrk's output -> requests, requests/s, p99 in ms, p99 of the requests as timed in ms ("-" when bench/latency.lua
# did not undo wrk's fill-in or did not run)
rate() {
  awk 'function ms(v) { return v ~ /us$/ ? v / 1000 : v ~ /ms$/ ? v + 0 : v * 1000 }
    /requests in/ {n = $1} /Requests\/sec/ {r = $2} $1 == "99%" {p = ms($2)} END {printf "%s %s %s ", n, r, p}' "$1"
  timed_of "$1" | awk '{sub(/ms$/, "", $1); print $1}'
}
pg_ticks() { cluster_ticks .build/bench-postgres/data; }  # CPU time of the bench cluster, in ticks
measure() {  # pid port path header -> µs of gateway CPU per request, requests/s, p99 in ms, µs of PostgreSQL's CPU
             # per request, p99 as timed [, requests/s and p99 beside]
  local file=.build/compare-reports-wrk.txt c0 c1 p0 p1 n r p t side="" other
  wrk -t1 -c"$connections" -d1s -H "$4" "http://127.0.0.1:$2$3" >/dev/null
  c0=$(awk '{print $14 + $15}' "/proc/$1/stat"); p0=$(pg_ticks)
  if ((beside)); then
    wrk -t1 -c1 -d"${seconds}s" --latency -H "Authorization: Bearer ${tokens[$2]}" \
      "http://127.0.0.1:$2/v1/tickets?status=open" >.build/compare-reports-beside.txt &
    other=$!
  fi
  BENCH_CONNECTIONS=$connections wrk -t1 -c"$connections" -d"${seconds}s" --latency -s bench/latency.lua -H "$4" \
    "http://127.0.0.1:$2$3" >"$file"
  c1=$(awk '{print $14 + $15}' "/proc/$1/stat"); p1=$(pg_ticks)
  if ((beside)); then wait "$other"; side=$(rate .build/compare-reports-beside.txt | awk '{printf " %.1f %.2f", $2, $3}'); fi
  read -r n r p t < <(rate "$file")
  # With the list beside, the gateway's CPU is both loads' but still divided by the reports: a paired comparison only.
  awk -v a="$c0" -v b="$c1" -v pa="$p0" -v pb="$p1" -v hz="$(getconf CLK_TCK)" -v n="$n" -v r="$r" -v p="$p" -v t="$t" \
    -v side="$side" 'BEGIN {printf "%.0f %.1f %.2f %.0f %s%s\n", (b - a) / hz * 1e6 / n, r, p, (pb - pa) / hz * 1e6 / n, t, side}'
}
results=.build/compare-reports-results.txt
: >"$results"
for round in $(seq 1 "$rounds"); do
  for scenario in "${scenarios[@]}"; do
    IFS='|' read -r name path header <<<"$scenario"
    if ((round % 2)); then
      old=$(measure "${pids[0]}" 18641 "$path" "$header"); new=$(measure "${pids[1]}" 18642 "$path" "$header")
    else
      new=$(measure "${pids[1]}" 18642 "$path" "$header"); old=$(measure "${pids[0]}" 18641 "$path" "$header")
    fi
    echo "$name $old $new" | tee -a "$results"   # name, then cpu rps p99 pg timed [beside rps p99] of each
  done
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
width = (len(rows[0]) - 1) // 2  # cpu rps p99 pg timed, and the list's rps p99 when it ran beside
def median(values):  # "-": a run whose p99 as timed was not undone, left out
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None
def ms(value):
    return "-" if value is None else f"{value:.2f}"
for name in dict.fromkeys(r[0] for r in rows):
    old = [[None if v == "-" else float(v) for v in r[1:1 + width]] for r in rows if r[0] == name]
    new = [[None if v == "-" else float(v) for v in r[1 + width:]] for r in rows if r[0] == name]
    o, n = ([median(x[i] for x in runs) for i in range(width)] for runs in (old, new))
    cheaper = sum(1 for a, b in zip(old, new) if b[0] < a[0])
    line = (f"{name}: old {o[0]:.0f} µs, new {n[0]:.0f} µs of gateway CPU a request ({(n[0] / o[0] - 1) * 100:+.1f} %), "
            f"new cheaper in {cheaper} of {len(old)}; requests/s {o[1]:.0f} / {n[1]:.0f}, p99 {o[2]:.2f} / {n[2]:.2f} ms "
            f"({ms(o[4])} / {ms(n[4])} as timed); PostgreSQL {o[3]:.0f} / {n[3]:.0f} µs a request")
    if width == 7:
        line += f"; the open list beside: requests/s {o[5]:.0f} / {n[5]:.0f}, p99 {o[6]:.2f} / {n[6]:.2f} ms"
    print(line)
PY
