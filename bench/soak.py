"""Soak: minutes of a realistic mix from many new customers against the release gateway (its own private PostgreSQL;
Desk is the release desk-emulator in its own process, as a real Desk would be, with a state file and signed webhooks
to the gateway), with retention shortened so housekeeping acts within the run. Every 30 s it samples the gateway's RSS, open files and threads, the database
size, row counts and each table's bytes, and the emulator's webhook queue (depth, dropped, the slowest event's lag); at the end it prints the
samples and the slopes: RSS MB/hour after warm-up, database MB/hour (reporting data apart from the rest) and bytes per new customer for
every table, p50/p99 of ticket reads in the first minute after warm-up and the last, the webhook lag, and every unexpected status.
Usage: soak.py [MINUTES]   (make soak; default 10). Not part of make test."""
import http.client
import json
import os
import pathlib
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

root = pathlib.Path(__file__).resolve().parent.parent
minutes = float(sys.argv[1]) if len(sys.argv) > 1 else float(os.environ.get("SOAK_MINUTES", "10"))
port = int(os.environ.get("SOAK_PORT", "18480"))
desk_port = int(os.environ.get("SOAK_EMULATOR_PORT", "19480"))
pg_port = int(os.environ.get("SOAK_PG_PORT", "25480"))
workers = int(os.environ.get("SOAK_WORKERS", "16"))
# Minutes before the slopes are taken: the caches' ages and the squeezed retention windows (about 4.3 minutes).
warmup = float(os.environ.get("SOAK_WARMUP_MINUTES", "5"))
# The CPU per new customer is compared over this many minutes after the warm-up and at the end.
span_minutes = max(1.0, min(5.0, (minutes - warmup) / 2))
# SOAK_HEAPTRACK=1: heaptrack (Debian's) attaches to the gateway after the warm-up and, at the end, the allocation
# sites still holding memory are printed: what grows after the warm-up shows there (the caches' contents too).
heaptrack = os.environ.get("SOAK_HEAPTRACK", "") not in ("", "0")
out = root / "bench" / "out"
out.mkdir(parents=True, exist_ok=True)
data = root / ".build" / "soak-postgres"
lock = threading.Lock()
unexpected = {}          # (route, status) -> count
reads = []               # (time, seconds)
counts = {"customers": 0, "requests": 0}
report_sources = {}      # "zone source" -> answered reports (rollup or raw, from X-Report-Source)
stop = threading.Event()


def call(conn, method, path, body=None, headers=None):
    payload = json.dumps(body) if body is not None else None
    all_headers = {"Content-Type": "application/json", **(headers or {})}
    conn.request(method, path, body=payload, headers=all_headers)
    response = conn.getresponse()
    text = response.read()
    with lock:
        counts["requests"] += 1
    try:
        return response.status, json.loads(text) if text else None
    except ValueError:
        return response.status, None


def expect(route, status, allowed):
    if status not in allowed:
        with lock:
            unexpected[(route, status)] = unexpected.get((route, status), 0) + 1
        return False
    return True


def customer_journey(gateway, desk, index):
    """One new customer: sign in, open a ticket, read it, list, count, get it answered and closed, rate it."""
    user = f"soak-{uuid.uuid4().hex[:12]}"
    status, _ = call(desk, "POST", "/emulator/customers", {"sendbirdId": user, "accessToken": "t", "displayName": user})
    expect("emulator customers", status, {200, 201})
    status, session = call(gateway, "POST", "/v1/sessions", {"userId": user, "accessToken": "t"})
    if not expect("POST /v1/sessions", status, {201}):
        return
    auth = {"Authorization": f"Bearer {session['token']}"}
    status, ticket = call(gateway, "POST", "/v1/tickets", {"title": f"soak {index}", "userName": user},
                          {**auth, "Idempotency-Key": uuid.uuid4().hex})
    if not expect("POST /v1/tickets", status, {201}):
        return
    tid = ticket["id"]
    for _ in range(3):
        started = time.perf_counter()
        status, _ = call(gateway, "GET", f"/v1/tickets/{tid}", headers=auth)
        elapsed = time.perf_counter() - started
        if expect("GET /v1/tickets/{id}", status, {200}):
            with lock:
                reads.append((time.time(), elapsed))
    expect("GET /v1/tickets", call(gateway, "GET", "/v1/tickets?status=all&limit=10", headers=auth)[0], {200})
    expect("GET /v1/tickets/open-count", call(gateway, "GET", "/v1/tickets/open-count", headers=auth)[0], {200})
    call(desk, "POST", f"/emulator/tickets/{tid}/customer-message", {"text": "hello"})
    call(desk, "POST", f"/emulator/tickets/{tid}/assign", {"agentId": 501 + index % 4})
    status, _ = call(gateway, "POST", f"/v1/tickets/{tid}/close", {"comment": None}, {**auth, "Idempotency-Key": uuid.uuid4().hex})
    # The assignment reaches the gateway by webhook; a close before it is a documented 409.
    if not expect("POST /v1/tickets/{id}/close", status, {200, 202, 409}):
        return
    if status == 409:
        time.sleep(0.3)
        status, _ = call(gateway, "POST", f"/v1/tickets/{tid}/close", {"comment": None}, {**auth, "Idempotency-Key": uuid.uuid4().hex})
        if not expect("POST /v1/tickets/{id}/close (again)", status, {200, 202}):
            return
    status, sent = call(desk, "POST", f"/emulator/tickets/{tid}/csat-request")
    if not expect("emulator csat-request", status, {200, 201}):
        return
    score = random.choice([None, 1, 2, 3, 4, 5, 5, 4])
    status, _ = call(gateway, "POST", f"/v1/tickets/{tid}/feedback",
                     {"messageId": sent["messageId"], "score": score, "comment": "soak"}, {**auth, "Idempotency-Key": uuid.uuid4().hex})
    expect("POST /v1/tickets/{id}/feedback", status, {200, 202})
    expect("POST /v1/messages/classify", call(gateway, "POST", "/v1/messages/classify",
                                              {"customType": "", "data": ""}, auth)[0], {200})
    if index % 3 == 0:
        expect("DELETE /v1/sessions/current", call(gateway, "DELETE", "/v1/sessions/current", headers=auth)[0], {204})
    with lock:
        counts["customers"] += 1


def worker(number):
    gateway = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    desk = http.client.HTTPConnection("127.0.0.1", desk_port, timeout=30)
    index = number
    while not stop.is_set():
        try:
            customer_journey(gateway, desk, index)
        except (OSError, http.client.HTTPException) as error:
            with lock:
                unexpected[("connection", type(error).__name__)] = unexpected.get(("connection", type(error).__name__), 0) + 1
            gateway = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            desk = http.client.HTTPConnection("127.0.0.1", desk_port, timeout=30)
        index += workers


def reporter(key):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    while not stop.wait(2):
        for query in ("?groupBy=agent", "?groupBy=team&bucket=day", "?groupBy=agent&tz=Asia/Tokyo"):
            conn.request("GET", "/v1/reports/csat" + query, headers={"X-API-Key": key})
            response = conn.getresponse()
            response.read()
            with lock:
                counts["requests"] += 1
                if response.status == 200:
                    zone = query.rsplit("tz=", 1)[1] if "tz=" in query else "UTC"
                    source = f"{zone} {response.getheader('X-Report-Source', '?')}"
                    report_sources[source] = report_sources.get(source, 0) + 1
            expect("GET /v1/reports/csat", response.status, {200, 429, 503})


def psql(sql):
    url = f"host={data}/sock port={pg_port} user=postgres dbname=desk_gateway"
    return subprocess.run(["psql", url, "-tAc", sql], capture_output=True, text=True).stdout.strip()


def cpu_seconds(pid):
    """User and system CPU seconds a process has used."""
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def postgres_cpu_seconds():
    """CPU seconds of the private cluster: the postmaster and its live children (backends come and go with the pool,
    ended ones count through the postmaster's cutime/cstime)."""
    try:
        master = int((data / "data" / "postmaster.pid").read_text().split()[0])
        fields = pathlib.Path(f"/proc/{master}/stat").read_text().rsplit(")", 1)[1].split()
        total = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                text = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                if int(text[1]) == master:
                    total += cpu_seconds(int(entry.name))
            except (OSError, ValueError, IndexError):
                pass
    return total


def server_view():
    """From the gateway's /metrics: the ticket-read histogram of /v1/tickets/{id} and the ticket cache's results."""
    # A connection of its own each time: the gateway closes one idle for longer than its connection timeout.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    except (OSError, http.client.HTTPException):
        return {}
    finally:
        conn.close()
    view = {}
    for line in text.splitlines():
        if line.startswith("http_request_duration_seconds_bucket{") and 'route="/v1/tickets/{id}"' in line:
            bound = line.split('le="', 1)[1].split('"', 1)[0]
            view[("le", bound)] = view.get(("le", bound), 0) + float(line.rsplit(" ", 1)[1])
        elif line.startswith("ticket_cache_total{"):
            result = line.split('result="', 1)[1].split('"', 1)[0]
            view[("cache", result)] = float(line.rsplit(" ", 1)[1])
        elif line.startswith(("memory_entries{", "customer_memory_entries{")):
            structure = line.split('structure="', 1)[1].split('"', 1)[0]
            view[("entries", structure)] = float(line.rsplit(" ", 1)[1])
    return view


def webhook_stats():
    """The emulator's webhook queue: depth now, dropped so far, the slowest delivered event's lag since the last call."""
    try:
        conn = http.client.HTTPConnection("127.0.0.1", desk_port, timeout=5)
        conn.request("GET", "/emulator/webhooks/stats")
        return json.loads(conn.getresponse().read())
    except (OSError, ValueError):
        return {}


def table_bytes():
    """Every table's bytes, indexes and TOAST included."""
    text = psql("SELECT string_agg(c.relname || '=' || pg_total_relation_size(c.oid), ',') FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'")
    return {k: int(v) for k, v in (item.split("=") for item in text.split(",") if "=" in item)}


def host_loop_seconds():
    """CPU seconds a fixed loop takes in a process of its own: the host's speed at the moment, which a shared host's
    neighbours moved by a tenth within a run (the CPU per customer moves with it)."""
    child = subprocess.Popen([sys.executable, "-S", "-c", "x = 0\nfor i in range(1_000_000): x += i * i % 7"])
    _, _, usage = os.wait4(child.pid, 0)
    return usage.ru_utime + usage.ru_stime


def sample(pid, began, desk_pid):
    loop = host_loop_seconds()
    status = pathlib.Path(f"/proc/{pid}/status").read_text()
    field = lambda name: int(next(line.split()[1] for line in status.splitlines() if line.startswith(name)))
    desk_status = pathlib.Path(f"/proc/{desk_pid}/status").read_text()
    desk_rss = int(next(line.split()[1] for line in desk_status.splitlines() if line.startswith("VmRSS:")))
    tables = ["sessions", "idempotency_keys", "webhook_events", "outbox", "tickets", "customer_syncs", "csat_ratings"]
    rows = psql("SELECT " + ", ".join(f"(SELECT count(*) FROM {t})" for t in tables)).split("|")
    # Kept by design: reporting data (csat_*) and the directories ratings name (customers, agents, teams).
    kept = psql("SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'public' AND c.relkind = 'r' AND (c.relname LIKE 'csat%' OR c.relname IN ('customers', 'agents', 'teams'))")
    db = int(psql("SELECT pg_database_size('desk_gateway')") or 0) / 1e6
    return {"t": time.time() - began, "rss_mb": field("VmRSS:") / 1024, "threads": field("Threads:"), "desk_rss_mb": desk_rss / 1024,
            "fds": len(os.listdir(f"/proc/{pid}/fd")), "db_mb": db, "kept_mb": int(kept or 0) / 1e6,
            "customers": counts["customers"], "rows": dict(zip(tables, rows)), "webhooks": webhook_stats(), "tables": table_bytes(),
            "cpu": {"gateway": cpu_seconds(pid), "Desk": cpu_seconds(desk_pid), "PostgreSQL": postgres_cpu_seconds()}, "loop": loop}


def slope(points):
    """Least-squares slope of (x, y) points."""
    n = len(points)
    if n < 2:
        return 0.0
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    den = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / den if den else 0.0


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] * 1000 if values else float("nan")


def main():
    if heaptrack and not shutil.which("heaptrack"):
        raise SystemExit("SOAK_HEAPTRACK needs heaptrack (apt-get install heaptrack)")
    for old_profile in out.glob("soak-heaptrack*"):
        old_profile.unlink()
    pg_bin = sorted(pathlib.Path("/usr/lib/postgresql").glob("*/bin"))[-1]
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if (data / "data").exists():
        subprocess.run(as_postgres + [str(pg_bin / "pg_ctl"), "-D", str(data / "data"), "-m", "fast", "-w", "stop"], capture_output=True)
    shutil.rmtree(data, ignore_errors=True)
    state = out / "soak-emulator.jsonl"
    state.unlink(missing_ok=True)
    desk_process = subprocess.Popen([str(root / ".build/release/desk-emulator"), "--port", str(desk_port), "--demo", "--state", str(state),
                                     "--webhook-url", f"http://127.0.0.1:{port}/v1/webhooks/desk", "--webhook-secret", "soak-secret"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
    env.update({
        "PORT": str(port), "HOST": "127.0.0.1", "EMBEDDED_PG_DIR": str(data), "EMBEDDED_PG_PORT": str(pg_port),
        "DESK_BASE_URL": f"http://127.0.0.1:{desk_port}", "DESK_APP_ID": "emulated-app", "DESK_API_TOKEN": "emulator-api-token",
        "DESK_WEBHOOK_SECRET": "soak-secret", "LOG_LEVEL": "warning", "RATE_LIMIT_PER_MINUTE": "10000000",
        "RATE_LIMIT_BURST": "10000000", "SIGNIN_RATE_LIMIT_PER_MINUTE": "10000000", "SIGNIN_RATE_LIMIT_BURST": "10000000",
        "HTTP_PER_ADDRESS_CONNECTION_LIMIT": "0", "SYNC_INTERVAL_S": "0", "ASSETS_DIR": str(root),
        # Retention squeezed into the run: sessions live 2 minutes and go when dead; applied events and finished
        # operations go at once; idempotency keys after 3 minutes, closed tickets (and the customer's last listing)
        # after about 4; housekeeping every 30 s. After the warm-up everything but reporting data has reached its
        # steady state.
        "SESSION_TTL_S": "120", "HOUSEKEEPING_INTERVAL_S": "30", "RETENTION_DEAD_SESSION_DAYS": "0",
        "RETENTION_WEBHOOK_DAYS": "0", "RETENTION_OUTBOX_DAYS": "0", "RETENTION_UNAPPLIED_WEBHOOK_DAYS": "0",
        "RETENTION_IDEMPOTENCY_HOURS": "0.05", "RETENTION_CLOSED_TICKET_DAYS": "0.003",
        # The reporter's zones have rollups, as a deployment lists the zones its dashboards use. Without Tokyo here
        # (SOAK_GATEWAY_ENV=REPORT_TIME_ZONES=UTC) its report is computed from raw ratings, and every rating of the run
        # lies in its 30-day window: its cost then grows through the run by construction, and with it the wait for a core.
        "REPORT_TIME_ZONES": "UTC,Asia/Tokyo",
    })
    # SOAK_GATEWAY_ENV="NAME=value ...": settings for the gateway alone (an allocator tunable, a cache size), on top.
    env.update(item.split("=", 1) for item in os.environ.get("SOAK_GATEWAY_ENV", "").split() if "=" in item)
    log = open(out / "soak-gateway.log", "w")
    gateway = subprocess.Popen([str(root / ".build/release/desk-gateway"), "serve"], env=env, stdout=log, stderr=log)
    profiler = None
    try:
        deadline = time.time() + 120
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                if call(conn, "GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            if time.time() > deadline or gateway.poll() is not None:
                raise SystemExit("the gateway did not become ready; see bench/out/soak-gateway.log")
            time.sleep(0.2)
        key_env = {**env, "DATABASE_URL": f"host={data}/sock port={pg_port} user=postgres dbname=desk_gateway"}
        created = subprocess.run([str(root / ".build/release/desk-gateway"), "api-key", "create", "--scope", "reports"],
                                 env=key_env, capture_output=True, text=True).stdout
        key = next(line.split()[1] for line in created.splitlines() if line.startswith("key"))
        began = time.time()
        threads = [threading.Thread(target=worker, args=(n,), daemon=True) for n in range(workers)]
        threads.append(threading.Thread(target=reporter, args=(key,), daemon=True))
        for thread in threads:
            thread.start()
        samples = [sample(gateway.pid, began, desk_process.pid)]
        views = {"start": server_view()}
        while time.time() - began < minutes * 60:
            if "first" not in views and time.time() - began >= 60:
                views["first"] = server_view()
            if "warm" not in views and time.time() - began >= warmup * 60:
                views["warm"] = server_view()
            if "last" not in views and time.time() - began >= minutes * 60 - 60:
                views["last"] = server_view()
            if heaptrack and profiler is None and time.time() - began >= warmup * 60:
                # -o before -p: heaptrack reads no option after the pid.
                profiler = subprocess.Popen(["heaptrack", "-o", str(out / "soak-heaptrack"), "-p", str(gateway.pid)],
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            upcoming = [began + 60, began + warmup * 60, began + (warmup + span_minutes) * 60,
                        began + (minutes - span_minutes) * 60, began + minutes * 60 - 60, began + minutes * 60]
            wake = min([w for w in upcoming if w > time.time()] + [time.time() + 30])
            time.sleep(min(30, max(0.1, wake - time.time())))
            samples.append(sample(gateway.pid, began, desk_process.pid))
            last = samples[-1]
            hooks = last["webhooks"]
            print(f"{last['t']:6.0f} s  rss {last['rss_mb']:6.1f} MB (Desk {last['desk_rss_mb']:6.1f})  db {last['db_mb']:6.1f} MB "
                  f"(reporting {last['kept_mb']:5.1f})  fds {last['fds']:4d}  "
                  f"threads {last['threads']:3d}  customers {last['customers']:6d}  webhooks queued {hooks.get('queued', '?')} "
                  f"lag max {hooks.get('maxLagMs', '?')} ms  rows {last['rows']}", flush=True)
        views["end"] = server_view()
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
    finally:
        gateway.send_signal(signal.SIGTERM)
        try:
            gateway.wait(timeout=60)
        except subprocess.TimeoutExpired:
            gateway.kill()
        if profiler is not None:
            profiler.wait(timeout=300)   # heaptrack writes its file once the gateway has ended
        desk_process.terminate()
        desk_process.wait(timeout=30)

    if heaptrack:
        profiles = sorted(out.glob("soak-heaptrack*.zst"), key=lambda f: f.stat().st_mtime)
        if profiles:
            report = subprocess.run(["heaptrack_print", "-f", str(profiles[-1]), "--print-leaks", "1", "--print-peaks", "0",
                                     "--print-allocators", "0", "--print-temporary", "0", "--merge-backtraces", "0", "-n", "12"],
                                    capture_output=True, text=True).stdout
            (out / "soak-heaptrack.txt").write_text(report)
            print(f"heaptrack: {profiles[-1]}; still held at the end, by site: bench/out/soak-heaptrack.txt")
    warm = [s for s in samples if s["t"] >= warmup * 60] or samples
    rss_slope = slope([(s["t"] / 3600, s["rss_mb"]) for s in warm])
    db_slope = slope([(s["t"] / 3600, s["db_mb"]) for s in warm])
    kept_slope = slope([(s["t"] / 3600, s["kept_mb"]) for s in warm])
    other_slope = slope([(s["t"] / 3600, s["db_mb"] - s["kept_mb"]) for s in warm])
    # Retention here ends a closed ticket 4.3 minutes after its customer's last listing, itself up to 4.3 minutes
    # old, and vacuum reuses the space later still: the level is reached after the warm-up, so the last half says
    # whether it holds.
    late = [s for s in samples if s["t"] >= minutes * 30] or samples
    late_slope = slope([(s["t"] / 3600, s["db_mb"] - s["kept_mb"]) for s in late])
    customers_per_hour = slope([(s["t"] / 3600, s["customers"]) for s in warm])
    # Drift from the first minute after the warm-up (the caches and retention windows have filled by then) to the last.
    first = [d for t, d in reads if warmup * 60 <= t - began <= warmup * 60 + 60]
    last = [d for t, d in reads if t - began >= minutes * 60 - 60]
    p99_drift = (percentile(last, 0.99) / percentile(first, 0.99) - 1) * 100 if first and last else float("nan")
    print()
    print(f"soak: {minutes:g} min, {counts['customers']} customers, {counts['requests']} requests, {workers} workers")
    print("| figure | value |")
    print("|---|---|")
    per_customer = lambda mb_per_hour: mb_per_hour * 1e6 / customers_per_hour if customers_per_hour else float("nan")
    print(f"| RSS after warm-up ({warmup:g} min) | {warm[0]['rss_mb']:.1f} → {samples[-1]['rss_mb']:.1f} MB, slope {rss_slope:+.1f} MB/hour "
          f"({per_customer(rss_slope):.0f} bytes per new customer) |")
    print(f"| database | {samples[0]['db_mb']:.1f} → {samples[-1]['db_mb']:.1f} MB, slope after warm-up {db_slope:+.1f} MB/hour |")
    print(f"| of which reporting data and directories (kept by design) | {warm[0]['kept_mb']:.1f} → {samples[-1]['kept_mb']:.1f} MB, "
          f"{kept_slope:+.1f} MB/hour ({per_customer(kept_slope):.0f} bytes per rated customer) |")
    print(f"| everything else (under retention) | {warm[0]['db_mb'] - warm[0]['kept_mb']:.1f} → {samples[-1]['db_mb'] - samples[-1]['kept_mb']:.1f} MB, "
          f"{other_slope:+.1f} MB/hour; over the last half {late[0]['db_mb'] - late[0]['kept_mb']:.1f} → "
          f"{samples[-1]['db_mb'] - samples[-1]['kept_mb']:.1f} MB, {late_slope:+.1f} MB/hour |")
    print(f"| open files / threads | {samples[0]['fds']} → {samples[-1]['fds']} / {samples[0]['threads']} → {samples[-1]['threads']} |")
    print(f"| ticket reads, first minute after warm-up | p50 {percentile(first, 0.5):.2f} ms, p99 {percentile(first, 0.99):.2f} ms ({len(first)}) |")
    print(f"| ticket reads, last minute | p50 {percentile(last, 0.5):.2f} ms, p99 {percentile(last, 0.99):.2f} ms ({len(last)}) |")
    print(f"| p99 drift | {p99_drift:+.0f} % |")
    # Where the time goes: CPU per new customer of each process on the shared cores, and the gateway's own view of the
    # same reads (its histogram, from the routed request to its answer, so without the time spent in sockets and run
    # queues, and the ticket cache's results). The run's first minute is before the webhooks, retention and
    # housekeeping have reached their level, and a minute's throughput moves by a tenth on a machine the workers keep
    # busy (CPU per customer with it): the drift is read over minutes after the warm-up.
    def window(a, b):
        return [s for s in samples if a - 1 <= s["t"] <= b + 1]
    spans = (("the run's first minute", 0, 60),
             (f"the {span_minutes:g} minutes after the warm-up", warmup * 60, (warmup + span_minutes) * 60),
             (f"the last {span_minutes:g} minutes", (minutes - span_minutes) * 60, minutes * 60))
    for name, a, b in spans:
        span = window(a, b)
        if len(span) >= 2 and span[-1]["customers"] > span[0]["customers"]:
            new = span[-1]["customers"] - span[0]["customers"]
            per = ", ".join(f"{proc} {(span[-1]['cpu'][proc] - span[0]['cpu'][proc]) * 1000 / new:.1f}" for proc in span[0]["cpu"])
            rate = new / (span[-1]["t"] - span[0]["t"])
            loop = sum(s["loop"] for s in span) / len(span) * 1000
            print(f"| CPU ms per new customer, {name} | {per} ({rate:.0f} new customers/s; the host's fixed loop {loop:.0f} ms) |")
    def server_line(before, after):
        if not before or not after:
            return "not scraped"
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
        total = delta.get(("le", "+Inf"), 0)
        if not total:
            return "no reads"
        share = lambda bound: delta.get(("le", bound), 0) / total * 100
        cache = {k[1]: v for k, v in delta.items() if k[0] == "cache"}
        hits = cache.get("hit", 0) / sum(cache.values()) * 100 if sum(cache.values()) else float("nan")
        return (f"{total:.0f} reads: {share('0.001'):.1f} % within 1 ms, {share('0.0025'):.1f} % within 2.5 ms, "
                f"{share('0.01'):.2f} % within 10 ms; cache hits {hits:.1f} %")
    print(f"| ticket reads inside the gateway, first minute | {server_line(views.get('start'), views.get('first'))} |")
    print(f"| ticket reads inside the gateway, last minute | {server_line(views.get('last'), views.get('end'))} |")
    # The bounded in-memory structures: once full they should stay level while RSS is measured.
    warm_entries, end_entries = views.get("warm") or {}, views.get("end") or {}
    entries = ", ".join(f"{k[1]} {warm_entries.get(k, 0):.0f} → {v:.0f}" for k, v in sorted(end_entries.items()) if k[0] == "entries")
    print(f"| in-memory entries, end of warm-up → end | {entries or 'not scraped'} |")
    print(f"| rows at the end | {samples[-1]['rows']} |")
    lags = [s["webhooks"].get("maxLagMs", 0) for s in samples if s["webhooks"]]
    warm_lags = [s["webhooks"].get("maxLagMs", 0) for s in warm if s["webhooks"]]
    hooks = samples[-1]["webhooks"]
    print(f"| Desk webhooks (emulator) | {hooks.get('delivered', '?')} delivered, {hooks.get('failed', '?')} failed, {hooks.get('dropped', '?')} dropped; "
          f"slowest lag per 30 s {max(lags, default=0) / 1000:.1f} s over the run, {max(warm_lags, default=0) / 1000:.1f} s after warm-up; "
          f"queue at most {max((s['webhooks'].get('queued', 0) for s in samples if s['webhooks']), default=0)} |")
    # Bytes per new customer, table by table, from the warm-up's end: what a day of N new customers adds (a table under
    # retention levels off, so its figure falls toward 0 as the run lengthens; the plateau is its size at the end).
    if len(warm) >= 2 and warm[-1]["customers"] > warm[0]["customers"]:
        new = warm[-1]["customers"] - warm[0]["customers"]
        rows = sorted(warm[-1]["tables"].items(), key=lambda kv: -kv[1])
        per = ", ".join(f"{name} {(size - warm[0]['tables'].get(name, 0)) / new:+.0f} B ({size / 1e6:.1f} MB)" for name, size in rows if size > 100_000)
        print(f"| table growth per new customer after warm-up (size at the end) | {per} |")
    print(f"| reports answered, by zone and source | {', '.join(f'{k} {v}' for k, v in sorted(report_sources.items())) or 'none'} |")
    print(f"| unexpected statuses | {sum(unexpected.values())} {dict((f'{r} {s}', c) for (r, s), c in unexpected.items())} |")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
