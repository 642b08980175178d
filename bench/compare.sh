#!/usr/bin/env bash
# Two builds side by side in one sitting: both gateways up at once (own ports, own databases on one private
# PostgreSQL, the embedded emulator each), wrk alternating between them on /livez, a cached authenticated ticket read
# and the customer's open list, ROUNDS times. Prints requests/s, gateway µs of CPU per request, p99 (ms) and the p99
# of the requests as timed (bench/latency.lua) for each, then the medians. Start-up, seeding and the machine's drift
# between separate `make bench` runs stay out of the comparison.
#   bench/compare.sh OLD_BINARY NEW_BINARY [ROUNDS]   (e.g. a worktree's .build/release/desk-gateway and this one's)
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/timed.sh
old_bin=$1 new_bin=$2 rounds=${3:-5}
pg_dir=.build/compare-pg
admin=$(scripts/test-postgres.sh start "$pg_dir" "${COMPARE_PG_PORT:-25437}")
pids=()
cleanup() { kill -TERM "${pids[@]}" 2>/dev/null || true; wait 2>/dev/null || true; scripts/test-postgres.sh stop "$pg_dir"; }
trap cleanup EXIT

start() {  # binary name port emulator-port
  psql "$admin" -qc "CREATE DATABASE compare_$2" >/dev/null
  DATABASE_URL="${admin/dbname=postgres/dbname=compare_$2}" PORT=$3 HOST=127.0.0.1 LOG_LEVEL=warning ASSETS_DIR="$PWD" \
  DESK_EMULATOR_PORT=$4 DESK_EMULATOR_STATE=memory SYNC_INTERVAL_S=0 HOUSEKEEPING_INTERVAL_S=0 CACHE_TTL_S=600 SESSION_CACHE_S=300 \
  RATE_LIMIT_PER_MINUTE=10000000 RATE_LIMIT_BURST=10000000 HTTP_PER_ADDRESS_CONNECTION_LIMIT=0 \
    "$1" serve >".build/compare-$2.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 600); do curl -fs "http://127.0.0.1:$3/readyz" >/dev/null 2>&1 && return 0; sleep 0.2; done
  echo "$2 did not become ready"; cat ".build/compare-$2.log"; exit 1
}
# A signed-in demo customer with one ticket, read once so it is cached: "token id".
customer() {
  local base=http://127.0.0.1:$1 token id
  token=$(curl -fs -X POST -H 'Content-Type: application/json' -d '{"userId":"demo-customer","accessToken":"demo-token"}' \
    "$base/v1/sessions" | python3 -c 'import sys, json; print(json.load(sys.stdin)["token"])')
  id=$(curl -fs -X POST -H "Authorization: Bearer $token" -H 'Content-Type: application/json' -d '{"title":"compare","userName":"C"}' \
    "$base/v1/tickets" | python3 -c 'import sys, json; print(json.load(sys.stdin)["id"])')
  curl -fs -o /dev/null -H "Authorization: Bearer $token" "$base/v1/tickets/$id"
  echo "$token $id"
}
# COMPARE_HEADERS: more fields sent with every request, one "Name: value" a line (bench/browser-headers.txt is
# what Chromium sends with a page's API call; wrk alone sends two).
extra=()
while IFS= read -r line; do [ -n "$line" ] && extra+=(-H "$line"); done <<<"${COMPARE_HEADERS:-}"
# pid url [token] -> "requests/s µs-per-request p99-ms timed-p99-ms" (the last "-" when bench/latency.lua did not undo
# wrk's fill-in after slow requests)
measure() {
  local auth=("${extra[@]}") c0 c1 timed _ file=.build/compare-wrk.txt
  [ -n "${3:-}" ] && auth+=(-H "Authorization: Bearer $3")
  wrk -t2 -c64 -d2s "${auth[@]}" "$2" >/dev/null
  c0=$(awk '{print $14 + $15}' "/proc/$1/stat")
  BENCH_CONNECTIONS=64 wrk -t2 -c64 -d8s --latency -s bench/latency.lua "${auth[@]}" "$2" >"$file"
  c1=$(awk '{print $14 + $15}' "/proc/$1/stat")
  read -r timed _ < <(timed_of "$file")
  awk -v a="$c0" -v b="$c1" -v hz="$(getconf CLK_TCK)" -v t="${timed%ms}" '
    function ms(v) { return v ~ /us$/ ? v / 1000 : v ~ /ms$/ ? v + 0 : v * 1000 }
    /requests in/ {n = $1} /Requests\/sec/ {r = $2} $1 == "99%" {p = ms($2)}
    END {printf "%s %.1f %.2f %s\n", r, (b - a) / hz * 1e6 / n, p, t}' "$file"
}

start "$old_bin" old 18631 19631
start "$new_bin" new 18632 19632
read -r old_token old_id < <(customer 18631)
read -r new_token new_id < <(customer 18632)
results=.build/compare-results.txt
: >"$results"
# One scenario on both builds, the order swapped every round so neither build always runs second.
pair() {  # round scenario old-url new-url [auth]
  local first=old second=new
  [ $(($1 % 2)) -eq 0 ] && first=new second=old
  for which in $first $second; do
    if [ "$which" = old ]; then echo "$2 old $(measure "${pids[0]}" "$3" "${5:-}")"
    else echo "$2 new $(measure "${pids[1]}" "$4" "${6:-}")"; fi
  done | tee -a "$results"
}
for round in $(seq 1 "$rounds"); do
  pair "$round" livez http://127.0.0.1:18631/livez http://127.0.0.1:18632/livez
  pair "$round" ticket "http://127.0.0.1:18631/v1/tickets/$old_id" "http://127.0.0.1:18632/v1/tickets/$new_id" "$old_token" "$new_token"
  pair "$round" list "http://127.0.0.1:18631/v1/tickets?status=open" "http://127.0.0.1:18632/v1/tickets?status=open" "$old_token" "$new_token"
done
python3 - "$results" <<'PY'
import statistics, sys
rows = [line.split() for line in open(sys.argv[1]) if line.strip()]
def timed(which):  # the median p99 as timed, over the runs bench/latency.lua undid
    values = [float(r[5]) for r in rows if r[0] == scenario and r[1] == which and r[5] != "-"]
    return f"{statistics.median(values):.2f}" if values else "-"
for scenario in ("livez", "ticket", "list"):
    med = {which: tuple(statistics.median(float(r[k]) for r in rows if r[0] == scenario and r[1] == which) for k in (2, 3, 4))
           for which in ("old", "new")}
    change = (med["new"][0] / med["old"][0] - 1) * 100
    # Each round's two runs are neighbours in time: the median of their ratios is less exposed to drift.
    olds = [float(r[2]) for r in rows if r[0] == scenario and r[1] == "old"]
    news = [float(r[2]) for r in rows if r[0] == scenario and r[1] == "new"]
    paired = (statistics.median(n / o for o, n in zip(olds, news)) - 1) * 100
    print(f"{scenario}: old {med['old'][0]:.0f} req/s {med['old'][1]:.1f} µs p99 {med['old'][2]:.2f} ms ({timed('old')} timed), "
          f"new {med['new'][0]:.0f} req/s {med['new'][1]:.1f} µs p99 {med['new'][2]:.2f} ms ({timed('new')} timed), "
          f"requests/s {change:+.1f} % (median of paired rounds {paired:+.1f} %)")
PY
