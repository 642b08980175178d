"""Scale-out proof with real processes: three gateways on one PostgreSQL and one Desk emulator.
Usage: scale_out.py ADMIN_CONNINFO. Prints one line per check and 'scale-out: N passed, N failed'."""
import base64
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import threading
import time

from testlib import call, check, summary, wait_ready

root = pathlib.Path(__file__).resolve().parent.parent
admin = sys.argv[1]
database = f"scale_{os.getpid()}"
emulator_port = int(os.environ.get("SCALE_EMULATOR_PORT", "19191"))
ports = [18191, 18192, 18193]
out = root / ".build" / "scale-out"
out.mkdir(parents=True, exist_ok=True)
processes = []




def psql(sql, db=None):
    conninfo = admin if db is None else admin.replace("dbname=postgres", f"dbname={db}")
    return subprocess.run(["psql", conninfo, "-tAc", sql], check=True, capture_output=True, text=True).stdout.strip()




def gateway_env(port):
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": admin.replace("dbname=postgres", f"dbname={database}"), "PORT": str(port), "HOST": "127.0.0.1",
        "DESK_BASE_URL": f"http://127.0.0.1:{emulator_port}", "DESK_APP_ID": "emulated-app", "DESK_API_TOKEN": "emulator-api-token",
        "DESK_WEBHOOK_SECRET": "scale-secret", "SESSION_KEY": session_key, "SYNC_INTERVAL_S": "1", "OUTBOX_MAX_BACKOFF_S": "1",
        "DESK_BREAKER_COOLDOWN_S": "1", "DESK_TIMEOUT_MS": "1000", "LOG_LEVEL": "info", "RATE_LIMIT_PER_MINUTE": "1000000",
        "RATE_LIMIT_BURST": "1000000", "CACHE_TTL_S": "1", "REPORT_CACHE_S": "0", "SHUTDOWN_DRAIN_S": "5", "ASSETS_DIR": str(root),
    })
    return env


def start_gateway(index):
    log = open(out / f"gateway-{index}.log", "w")
    process = subprocess.Popen([str(root / ".build/debug/desk-gateway"), "serve"], env=gateway_env(ports[index]), stdout=log, stderr=log)
    processes.append(process)
    return process


def wait_outbox_empty(seconds=90):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if psql("SELECT count(*) FROM outbox WHERE status = 'pending'", database) == "0":
            return True
        time.sleep(0.3)
    return False


def control(path, body=None):
    return call("POST", f"http://127.0.0.1:{emulator_port}/emulator{path}", body or {})


def message_state(ticket, message):
    _, state = call("GET", f"http://127.0.0.1:{emulator_port}/emulator/tickets/{ticket}")
    for entry in state["messages"]:
        if entry["messageId"] == message:
            return json.loads(entry["data"])["body"].get("state"), entry["answerAttempts"]
    return None, -1


def csat_ticket(gateway, token, index):
    _, ticket = call("POST", f"{gateway}/v1/tickets", {"title": f"rated {index}", "userName": "S"}, {"Authorization": f"Bearer {token}"})
    control(f"/tickets/{ticket['id']}/customer-message")
    control(f"/tickets/{ticket['id']}/assign", {"agentId": 501 + index % 4})
    control(f"/tickets/{ticket['id']}/close")
    _, sent = control(f"/tickets/{ticket['id']}/csat-request")
    return ticket["id"], sent["messageId"]


session_key = base64.b64encode(os.urandom(32)).decode()
try:
    psql(f"CREATE DATABASE {database}")
    emulator_log = open(out / "emulator.log", "w")
    processes.append(subprocess.Popen([str(root / ".build/debug/desk-emulator"), "--port", str(emulator_port), "--demo"],
                                      stdout=emulator_log, stderr=emulator_log))
    time.sleep(0.5)

    # Three instances start together: the migrations race.
    for index in range(3):
        start_gateway(index)
    ready = [wait_ready(f"http://127.0.0.1:{port}") for port in ports]
    check("three gateways became ready", all(ready), str(ready))
    migrations = len(list((root / "sql").glob("*.sql")))
    check("every migration applied exactly once", psql("SELECT count(*) FROM schema_migrations", database) == str(migrations))
    applied = [("\"applied\":\"[]\"" not in (out / f"gateway-{i}.log").read_text()) for i in range(3)]
    check("exactly one instance applied the migrations", sum(applied) == 1, str(applied))
    gateways = [f"http://127.0.0.1:{port}" for port in ports]

    # Concurrent customers through all three instances.
    errors = []

    def customer(index):
        try:
            user = f"scale-{index}"
            control("/customers", {"sendbirdId": user, "accessToken": f"t{index}", "displayName": user})
            status, session = call("POST", f"{gateways[index % 3]}/v1/sessions", {"userId": user, "accessToken": f"t{index}"})
            assert status == 201, status
            auth = {"Authorization": f"Bearer {session['token']}"}
            ids = []
            for n in range(5):
                status, ticket = call("POST", f"{gateways[(index + n) % 3]}/v1/tickets", {"title": f"c{index}-{n}", "userName": user}, auth)
                assert status == 201, (status, ticket)
                ids.append(ticket["id"])
            for n, ticket in enumerate(ids):
                status, body = call("GET", f"{gateways[(index + n + 1) % 3]}/v1/tickets/{ticket}", headers=auth)
                assert status == 200 and body["id"] == ticket, status
            status, page = call("GET", f"{gateways[(index + 2) % 3]}/v1/tickets?status=all&limit=50", headers=auth)
            assert status == 200 and sorted(t["id"] for t in page["items"]) == sorted(ids), page
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(f"customer {index}: {error!r}")

    threads = [threading.Thread(target=customer, args=(i,)) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    check("6 concurrent customers created and read tickets through all three instances", not errors, "; ".join(errors[:3]))

    # A rating given through one instance is in the report served by another.
    control("/customers", {"sendbirdId": "rater", "accessToken": "rt", "displayName": "Rater"})
    _, session = call("POST", f"{gateways[0]}/v1/sessions", {"userId": "rater", "accessToken": "rt"})
    token = session["token"]
    auth = {"Authorization": f"Bearer {token}"}
    ticket, message = csat_ticket(gateways[0], token, 0)
    status, _ = call("POST", f"{gateways[0]}/v1/tickets/{ticket}/feedback", {"messageId": message, "score": 5, "comment": "via instance 0"}, auth)
    check("feedback accepted by instance 0", status == 200, str(status))
    key_output = subprocess.run([str(root / ".build/debug/desk-gateway"), "api-key", "create", "--scope", "reports"], env=gateway_env(0),
                                capture_output=True, text=True).stdout
    key = next(line.split()[1] for line in key_output.splitlines() if line.startswith("key "))
    status, listing = call("GET", f"{gateways[2]}/v1/reports/csat/responses?limit=500", headers={"X-API-Key": key})
    check("the rating is listed by instance 2", status == 200 and any(i["ticketId"] == ticket and i["comment"] == "via instance 0" for i in listing["items"]))
    status, report = call("GET", f"{gateways[1]}/v1/reports/csat?groupBy=agent", headers={"X-API-Key": key})
    check("and counted in the report of instance 1", status == 200 and report["totals"]["responses"] >= 1, str(report and report.get("totals")))

    # Outbox: writes accepted by all three while Desk fails, each delivered exactly once by the three relays.
    pending = [csat_ticket(gateways[n % 3], token, n) for n in range(1, 31)]
    control("/faults", {"down": True})
    statuses = []
    for n, (ticket, message) in enumerate(pending):
        status, _ = call("POST", f"{gateways[n % 3]}/v1/tickets/{ticket}/feedback", {"messageId": message, "score": 1 + n % 5, "comment": None}, auth)
        statuses.append(status)
    check("30 feedbacks queued (202) across the instances while Desk is down", statuses == [202] * 30, str(sorted(set(statuses))))
    control("/faults", {"down": False})
    check("the relays emptied the outbox", wait_outbox_empty())
    states = [message_state(t, m) for t, m in pending]
    check("every queued answer reached Desk exactly once", all(s == ("CONFIRMED", 1) for s in states),
          str([s for s in states if s != ("CONFIRMED", 1)][:5]))
    time.sleep(2.5)  # let the periodic syncs of all three instances run over the same tickets
    duplicates = psql("SELECT count(*) - count(DISTINCT (ticket_id, message_id)) FROM csat_ratings", database)
    total = psql("SELECT count(*) FROM csat_ratings", database)
    check("syncs on every instance stored no rating twice", duplicates == "0" and total == "31", f"{total} ratings, {duplicates} duplicates")
    delivered = psql("SELECT count(*) FROM outbox WHERE status = 'delivered'", database)
    check("31 operations delivered, none twice", delivered == "31", delivered)

    # Stop one instance mid-load: everything it acknowledged still reaches Desk.
    targets = []
    for n in range(40):
        _, created = call("POST", f"{gateways[0]}/v1/tickets", {"title": f"load {n}", "userName": "S"}, auth)
        targets.append(created["id"])
    acknowledged = {}
    control("/faults", {"down": False, "latencyMs": 30})

    def load():
        for n, ticket in enumerate(targets):
            try:
                status, _ = call("PATCH", f"{gateways[1]}/v1/tickets/{ticket}/custom-fields", {"customFields": {"seats": str(100 + n)}}, auth, timeout=10)
                if status in (200, 202):
                    acknowledged[ticket] = str(100 + n)
            except OSError:
                pass

    loader = threading.Thread(target=load)
    loader.start()
    time.sleep(0.6)
    processes[2].send_signal(signal.SIGTERM)  # gateway 1 (processes: emulator, gw0, gw1, gw2)
    loader.join()
    processes[2].wait(timeout=30)
    control("/faults", {"down": False})
    check("instance 1 acknowledged some writes before it stopped", 0 < len(acknowledged) < len(targets), f"{len(acknowledged)} of {len(targets)}")
    check("the other instances delivered whatever was still pending", wait_outbox_empty())
    lost = []
    for ticket, seats in acknowledged.items():
        _, state = call("GET", f"http://127.0.0.1:{emulator_port}/emulator/tickets/{ticket}")
        fields = {f["key"]: f["value"] for f in state["customFields"]}
        if fields.get("seats") != seats:
            lost.append(ticket)
    check("nothing the stopped instance acknowledged was lost", not lost, str(lost[:5]))

    # The audit command against this Desk: clean, then a rating deleted is found (exit 1) and repaired (exit 0).
    # The gateways stop first: they sync every second and could put the deleted rating back before the audit reads.
    for process in processes[1:]:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes[1:]:
        process.wait(timeout=30)
    day = time.strftime("%Y-%m-%d", time.gmtime())
    before = time.strftime("%Y-%m-%d", time.gmtime(time.time() - 86400))
    audit = [str(root / ".build/debug/desk-gateway"), "csat", "audit", "--from", before, "--to", day]
    env = gateway_env(ports[0])
    clean = subprocess.run(audit, env=env, capture_output=True, text=True, timeout=120)
    check("csat audit finds nothing to report", clean.returncode == 0, clean.stdout[-300:] + clean.stderr[-300:])
    victim = psql("SELECT ticket_id FROM csat_ratings ORDER BY ticket_id LIMIT 1", database)
    psql(f"DELETE FROM csat_ratings WHERE ticket_id = {victim}", database)
    found = subprocess.run(audit, env=env, capture_output=True, text=True, timeout=120)
    check("csat audit exits 1 and names the missing rating", found.returncode == 1 and f"ticket {victim}: missing" in found.stdout,
          found.stdout[-300:] + found.stderr[-300:])
    repaired = subprocess.run(audit + ["--repair"], env=env, capture_output=True, text=True, timeout=120)
    check("csat audit --repair restores it", repaired.returncode == 0 and
          psql(f"SELECT count(*) FROM csat_ratings WHERE ticket_id = {victim}", database) == "1", repaired.stdout[-300:])
finally:
    for process in processes:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
    try:
        psql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    except subprocess.CalledProcessError:
        pass

sys.exit(summary("scale-out"))
