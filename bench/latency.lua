-- wrk's percentiles are not the requests it timed alone. After the run wrk fills in, for every latency L over twice
-- the run's interval e (its duration over the requests a connection made), the latencies L - e, L - 2e, ... down
-- to e that a client keeping to a schedule would have seen (stats_correct in wrk 4's stats.c): one pause of 0.66 s
-- at one connection adds some 780 of them and sets the p99 alone. This undoes that fill-in from wrk's own histogram
-- and prints the requests as timed, so a p99 can be told apart from a single pause. BENCH_CONNECTIONS must be the
-- run's -c; a script of its own (the ticket reads') loads this file.
done = function(summary, latency, requests)
  local connections = tonumber(os.getenv("BENCH_CONNECTIONS") or "")
  local per_connection = connections and math.floor(summary.requests / connections) or 0
  if per_connection == 0 or latency.max == 0 then return end
  local e = math.floor(summary.duration / per_connection)
  -- latency(i) is the i-th latency wrk holds and its count, each call a walk from the lowest: a pause of 0.7 s at 64
  -- connections holds some 80,000 latencies and takes 14 s to read, so a longer read is not made.
  local distinct = #latency
  if distinct * latency.max > 3e10 then
    io.write(string.format("timed: not undone (%d latencies held, up to %.2fms)\n", distinct, latency.max / 1000))
    return
  end
  -- Top down: what wrk added at L is the sum of the timed counts at L + e, L + 2e, ..., kept per residue of e.
  local added, values, counts, total, filled = {}, {}, {}, 0, 0
  for i = distinct, 1, -1 do
    local n, count = latency(i)
    filled = filled + count
    if n > e then
      local slot = n % e
      count = count - (added[slot] or 0)
      added[slot] = (added[slot] or 0) + count
    end
    if count > 0 then
      values[#values + 1] = n
      counts[#counts + 1] = count
      total = total + count
    end
  end
  -- wrk's own rank: the first latency whose count from the bottom reaches round(p / 100 * count + 0.5).
  local function percentile(p)
    local rank, seen = math.floor(p / 100 * total + 1), 0
    for i = #values, 1, -1 do
      seen = seen + counts[i]
      if seen >= rank then return values[i] end
    end
    return latency.max
  end
  io.write(string.format("timed: %d of %d requests, p50 %.2fms, p99 %.2fms, max %.2fms (wrk's fill-in: %d more)\n",
    total, summary.requests, percentile(50) / 1000, percentile(99) / 1000, latency.max / 1000, filled - total))
end
