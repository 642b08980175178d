#!/usr/bin/env bash
# Heap allocations per request in a running server: perf counts libc's malloc, calloc, realloc and free calls in
# process PID (uprobes: needs root and Debian's linux-perf) while N keep-alive GETs of PATH go to 127.0.0.1:PORT;
# for a Swift server also the runtime's reference counting calls (retain and release of objects and of strings'
# storage; a call on a small string or an immortal object returns at once, so these count work, not cache misses),
# and the context switches of all its threads.
# Counts do not move with the machine's load, so a change of one allocation per request shows where timings cannot.
#   bench/allocs.sh PID PORT PATH [N] ["Name: value" ...]
#   e.g. bench/allocs.sh "$(pgrep -x desk-gateway)" 8080 /livez 2000
set -euo pipefail
pid=$1 port=$2 path=$3 n=${4:-2000}
shift $(( $# < 4 ? $# : 4 ))
libc=$(ldd "/proc/$pid/exe" | awk '$1 == "libc.so.6" {print $3}')  # not libswiftGlibc.so
for fn in malloc calloc realloc free clock_gettime; do
  perf probe -q -x "$libc" --add "$fn" 2>/dev/null || true  # already there from an earlier run
done
events=probe_libc:malloc,probe_libc:calloc,probe_libc:realloc,probe_libc:free,probe_libc:clock_gettime
swift=$(ldd "/proc/$pid/exe" | awk '/libswiftCore\.so/ {print $3}')
if [ -n "$swift" ]; then
  for fn in swift_retain swift_release swift_bridgeObjectRetain swift_bridgeObjectRelease; do
    perf probe -q -x "$swift" --add "$fn" 2>/dev/null || true
  done
  # Every Set or Dictionary lookup (and any other use of Hasher) ends in one call of Hasher._finalize.
  perf probe -q -x "$swift" --add 'hasher_finalize=$ss6HasherV9_finalizeSiyF' 2>/dev/null || true
  events+=,probe_libswiftCore:swift_retain,probe_libswiftCore:swift_release
  events+=,probe_libswiftCore:swift_bridgeObjectRetain,probe_libswiftCore:swift_bridgeObjectRelease
  # A runtime without that symbol (another Swift release) goes on without the hash count.
  if perf probe -l 2>/dev/null | grep -q 'probe_libswiftCore:hasher_finalize'; then events+=,probe_libswiftCore:hasher_finalize; fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat > "$work/client.py" <<'PY'
import http.client, sys
port, path, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
headers = {k.strip(): v.strip() for k, v in (h.split(":", 1) for h in sys.argv[4:])}
c = http.client.HTTPConnection("127.0.0.1", port)
for _ in range(n):
    c.request("GET", path, headers=headers)
    r = c.getresponse()
    r.read()
    if r.status not in (200, 304):
        sys.exit(f"{path}: status {r.status}")
PY
python3 "$work/client.py" "$port" "$path" 200 "$@"  # warm: caches filled, first-use allocations done
perf stat -x, -o "$work/counts" -e "$events" -p "$pid" -- \
  python3 "$work/client.py" "$port" "$path" "$n" "$@"
# Threads waking each other (a request handed to a task, a query to the pool's thread, the answer back): each switch
# is kernel time the request pays for. Counted in a run of its own: slowed by the probes, a server is still busy with
# one answer when the next request comes, and sleeps less often than it does.
perf stat -x, -o "$work/switches" -e context-switches -p "$pid" -- python3 "$work/client.py" "$port" "$path" "$n" "$@"
cat "$work/switches" >> "$work/counts"
awk -F, -v n="$n" '$3 ~ /probe_/ || $3 == "context-switches" {sub("probe_[a-zA-Z]*:", "", $3); v[$3] = $1 / n}
  END {printf "allocations per request: %.2f (malloc %.2f, calloc %.2f, realloc %.2f), frees %.2f\n",
       v["malloc"] + v["calloc"] + v["realloc"], v["malloc"], v["calloc"], v["realloc"], v["free"]
       printf "clock readings per request (clock_gettime): %.2f\n", v["clock_gettime"]
       if ("swift_retain" in v)
         printf "reference counting calls per request: retain %.2f, release %.2f; strings: retain %.2f, release %.2f\n",
           v["swift_retain"], v["swift_release"], v["swift_bridgeObjectRetain"], v["swift_bridgeObjectRelease"]
       if ("hasher_finalize" in v) printf "hashes per request (Set and Dictionary lookups): %.2f\n", v["hasher_finalize"]
       printf "context switches per request (all threads): %.2f\n", v["context-switches"]}' "$work/counts"
