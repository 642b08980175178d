# Sourced by the bench scripts: `cluster_ticks DATA_DIR` prints the CPU time, in clock ticks, of a PostgreSQL cluster
# (its postmaster and every process under it, backends and background workers).
cluster_ticks() {
  local main
  main=$(head -n 1 "$1/postmaster.pid")
  for pid in "$main" $(pgrep -P "$main"); do awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null || true; done \
    | awk '{ s += $1 } END { print s + 0 }'
}
