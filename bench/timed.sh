# Sourced by the bench scripts: `timed_of WRK_OUTPUT` prints the p99 and the slowest of the requests as timed (e.g.
# "1.23ms 4.56ms") from the line bench/latency.lua adds to wrk's output; "- -" when there is none (the script could
# not undo wrk's fill-in, or did not run), so a `read` of it never fails.
timed_of() { awk '$1 == "timed:" && $2 ~ /^[0-9]/ {gsub(",", ""); t = $9 " " $11} END {print (t == "" ? "- -" : t)}' "$1"; }
