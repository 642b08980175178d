"""State that survives restarts, with real processes: the gateway on its own private PostgreSQL (no DATABASE_URL) and
the embedded Desk emulator (no DESK_BASE_URL), stopped and started again on the same data folder; then the same data
folder against another Desk (refused with exit code 2 until `desk-gateway cache reset`).
Usage: restart_test.py. Prints one line per check and 'restart: N passed, N failed'."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

from testlib import call, check, free_port, metric, summary, wait_ready

root = pathlib.Path(__file__).resolve().parent.parent
binary = str(root / ".build/debug/desk-gateway")
data = root / ".build" / "restart-test"
port = int(os.environ.get("RESTART_PORT", "18291"))
emulator_port = int(os.environ.get("RESTART_EMULATOR_PORT", "19291"))
other_desk_port = emulator_port + 1
# Below the ephemeral range: the cluster is started four times, and a client socket must not hold its port.
pg_port = os.environ.get("RESTART_PG_PORT") or str(free_port())
gateway = f"http://127.0.0.1:{port}"
desk = f"http://127.0.0.1:{emulator_port}"
processes = []






def environment(**extra):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DESK_BASE_URL", "DESK_API_TOKEN", "DESK_WEBHOOK_SECRET")}
    env.update({
        "PORT": str(port), "HOST": "127.0.0.1", "EMBEDDED_PG_DIR": str(data / "postgres"),
        "EMBEDDED_PG_PORT": pg_port, "DESK_EMULATOR_PORT": str(emulator_port),
        "LOG_LEVEL": "info", "CACHE_TTL_S": "1", "REPORT_CACHE_S": "0", "SYNC_INTERVAL_S": "0", "SHUTDOWN_DRAIN_S": "5",
        "RATE_LIMIT_PER_MINUTE": "1000000", "RATE_LIMIT_BURST": "1000000", "ASSETS_DIR": str(root),
    })
    env.update(extra)
    return env


def start(run, **extra):
    log = open(data / f"gateway-{run}.log", "w")
    process = subprocess.Popen([binary, "serve"], env=environment(**extra), stdout=log, stderr=subprocess.PIPE, text=True)
    processes.append(process)
    return process


def stop(process):
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        return None


def sign_in(user, token):
    status, body = call("POST", f"{gateway}/v1/sessions", {"userId": user, "accessToken": token})
    assert status == 201 or status == 200, (status, body)
    return {"Authorization": f"Bearer {body['token']}"}


def control(path, body=None):
    return call("POST", f"{desk}/emulator{path}", body or {})


def new_ticket(auth, title):
    status, ticket = call("POST", f"{gateway}/v1/tickets", {"title": title, "userName": "Restart"}, auth)
    assert status == 201, (status, ticket)
    control(f"/tickets/{ticket['id']}/customer-message")
    control(f"/tickets/{ticket['id']}/assign", {"agentId": 501})
    return ticket["id"]


def rate(auth, ticket, score):
    """The agent closes and asks for CSAT; the customer answers through the gateway."""
    control(f"/tickets/{ticket}/close")
    _, sent = control(f"/tickets/{ticket}/csat-request")
    return call("POST", f"{gateway}/v1/tickets/{ticket}/feedback", {"messageId": sent["messageId"], "score": score, "comment": "restart"}, auth)


def settled(seconds=30):
    """Desk's webhooks sent and the gateway's inbox applied: what a clean stop before `cache reset` needs (the reset
    refuses while acknowledged events wait). `webhook_inbox_pending` is refreshed every 5 s, so a reading counts only
    once a refresh has passed since the emulator's queue emptied."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        _, stats = call("GET", f"{desk}/emulator/webhooks/stats")
        if stats.get("queued") == 0:
            break
        time.sleep(0.2)
    time.sleep(5.5)
    while time.time() < deadline:
        if metric(gateway, "webhook_inbox_pending", timeout=15) == 0:
            return True
        time.sleep(0.5)
    return False


def responses(key, expected, seconds=20):
    deadline = time.time() + seconds
    count = None
    while time.time() < deadline:
        status, report = call("GET", f"{gateway}/v1/reports/csat", headers={"Authorization": f"Bearer {key}"})
        count = report["totals"]["responses"] if status == 200 else None
        if count == expected:
            break
        time.sleep(0.2)
    return count


def api_key():
    output = subprocess.run([binary, "api-key", "create", "--scope", "reports", "--name", "restart"], env=environment(),
                            capture_output=True, text=True, timeout=120).stdout
    return next(line.split()[1] for line in output.splitlines() if line.startswith("key "))


shutil.rmtree(data, ignore_errors=True)
data.mkdir(parents=True)
other_desk = None
try:
    # Run 1: two customers, each with a rated ticket and an open one.
    first = start(1)
    check("first run becomes ready", wait_ready(gateway, 120, first))
    key = api_key()
    alice, bob = sign_in("demo-customer", "demo-token"), sign_in("demo-customer-2", "demo-token-2")
    alice_rated, alice_open = new_ticket(alice, "alice rated"), new_ticket(alice, "alice open")
    bob_rated, bob_later = new_ticket(bob, "bob rated"), new_ticket(bob, "bob rated later")
    check("first-run ratings answered 200", [rate(alice, alice_rated, 5)[0], rate(bob, bob_rated, 2)[0]] == [200, 200])
    check("first-run report counts 2 responses", responses(key, 2) == 2)
    first_ids = {alice_rated, alice_open, bob_rated, bob_later}
    check("first run stops cleanly", stop(first) == 0)

    # The commands an operator runs before starting a release: the schema's state and the settings, all at once.
    migrations = sorted(path.stem for path in (root / "sql").glob("*.sql"))
    status = subprocess.run([binary, "migrate", "--status"], env=environment(), capture_output=True, text=True, timeout=120)
    listed = [line.split()[:2] for line in status.stdout.splitlines()[:-1]]
    check("migrate --status lists every migration as applied and exits 0",
          status.returncode == 0 and listed == [[name, "applied"] for name in migrations]
          and status.stdout.splitlines()[-1] == f"{len(migrations)} applied, 0 pending, 0 changed, 0 newer, 0 unknown", status.stdout + status.stderr)
    later = data / "later-release"
    shutil.copytree(root / "sql", later / "sql")
    (later / "sql" / "9999_add_probe.sql").write_text("CREATE TABLE probe (id int);\n")
    status = subprocess.run([binary, "migrate", "--status"], env=environment(ASSETS_DIR=str(later)), capture_output=True, text=True, timeout=120)
    check("a release's new migration is listed pending, exit 3",
          status.returncode == 3 and status.stdout.splitlines()[-2].split() == ["9999_add_probe", "pending"], status.stdout + status.stderr)
    status = subprocess.run([binary, "migrate", "--status"], env=environment(), capture_output=True, text=True, timeout=120)
    check("and nothing was applied (no migration of a later release recorded)",
          status.returncode == 0 and "newer" not in status.stdout.splitlines()[-2], status.stdout + status.stderr)
    # The --json forms, as a deploy script reads them: one document on stdout, the same exit codes.
    def listing(*arguments, **extra):
        result = subprocess.run([binary, *arguments, "--json"], env=environment(**extra), capture_output=True, text=True, timeout=120)
        try:
            return result.returncode, json.loads(result.stdout), result.stderr
        except ValueError:
            return result.returncode, None, result.stdout + result.stderr
    code, document, detail = listing("migrate", "--status", ASSETS_DIR=str(later))
    check("migrate --status --json: the later release's migration pending, the counts, exit 3",
          code == 3 and document and document["migrations"][-1] == {"version": 9999, "name": "add_probe", "status": "pending", "appliedAt": None}
          and document["counts"] == {"applied": len(migrations), "pending": 1, "changed": 0, "newer": 0, "unknown": 0}, f"{code} {document} {detail}")
    code, document, detail = listing("api-key", "list")
    check("api-key list --json: the report key, used, never the key itself",
          code == 0 and document and [(k["name"], k["state"], k["lastUsedAt"] is not None) for k in document["keys"]] == [("restart", "active", True)]
          and key not in json.dumps(document), f"{code} {document} {detail}")
    code, document, detail = listing("csat", "zones")
    check("csat zones --json: UTC complete with the two ratings' rows",
          code == 0 and document and [(z["zone"], z["state"], z["listed"], z["rows"] > 0) for z in document["zones"]] == [("UTC", "complete", True, True)],
          f"{code} {document} {detail}")
    code, document, detail = listing("outbox", "list")
    check("outbox list --json: nothing waits after a clean stop", code == 0 and document == {"operations": []}, f"{code} {document} {detail}")
    code, document, detail = listing("outbox", "list", "--failed", "--within-hours", "720")
    check("outbox list --failed --json: no write failed", code == 0 and document == {"operations": []}, f"{code} {document} {detail}")
    dry = subprocess.run([binary, "outbox", "revive", "--dry-run"], env=environment(), capture_output=True, text=True, timeout=120)
    check("outbox revive --dry-run: nothing to revive, nothing changed", dry.returncode == 0
          and dry.stdout.strip() == "outbox revive --dry-run: 0 failed writes would be pending again", f"{dry.returncode} {dry.stdout} {dry.stderr}")
    for arguments, message in [(["list", "--within-hours", "5"], "--within-hours applies only with --failed"),
                               (["revive", "--within-hours", "721"], "--within-hours must be from 1 to 720")]:
        refused = subprocess.run([binary, "outbox", *arguments], env=environment(), capture_output=True, text=True, timeout=60)
        check(f"outbox {' '.join(arguments)}: refused, exit 64", refused.returncode == 64 and f"Error: {message}" in refused.stderr,
              f"{refused.returncode} {refused.stderr}")
    refused = subprocess.run([binary, "migrate"], env=environment(PORT="eighty", RATE_LIMIT_BURST="-1", DESK_TIMOUT_MS="5"),
                             capture_output=True, text=True, timeout=60)
    check("every refused setting is named at once, then the misspelt one, exit 2",
          refused.returncode == 2 and refused.stderr.splitlines() == [
              "desk-gateway: invalid configuration, 2 settings:",
              "  PORT: expected a whole number from 0 to 65535, got 'eighty'",
              "  RATE_LIMIT_BURST: expected a whole number from 1 to 10000000, got '-1'",
              "desk-gateway: DESK_TIMOUT_MS is not a setting; did you mean DESK_TIMEOUT_MS?"], refused.stderr)

    # Run 2: same data folder.
    second = start(2)
    check("second run becomes ready", wait_ready(gateway, 120, second))
    log = (data / "gateway-2.log").read_text()
    check("embedded emulator state restored", "restored from the database" in log)
    for ticket, auth in [(alice_rated, alice), (alice_open, alice), (bob_rated, bob), (bob_later, bob)]:
        status, body = call("GET", f"{gateway}/v1/tickets/{ticket}", headers=auth)
        check(f"ticket {ticket} reads after the restart with the first run's session", status == 200 and body["id"] == ticket, f"{status} {body}")
    status, body = call("POST", f"{gateway}/v1/tickets/{alice_open}/close", {}, alice)
    check("an earlier ticket closes", status == 200 and body["status"] == "CLOSED", f"{status} {body}")
    status, body = call("POST", f"{gateway}/v1/tickets/{alice_open}/reopen", {}, alice)
    check("and reopens", status == 200 and body["status"] != "CLOSED", f"{status} {body}")
    status, _ = rate(bob, bob_later, 4)
    check("an earlier ticket is rated", status == 200, status)

    control("/customers", {"sendbirdId": "restart-new", "accessToken": "restart-token", "displayName": "New"})
    carol = sign_in("restart-new", "restart-token")
    carol_ticket = new_ticket(carol, "carol after restart")
    check("a new customer's ticket gets a new id", carol_ticket not in first_ids and carol_ticket > max(first_ids), carol_ticket)
    status, body = call("GET", f"{gateway}/v1/tickets/{carol_ticket}", headers=carol)
    check("the new ticket reads", status == 200 and body["id"] == carol_ticket, f"{status} {body}")
    status, body = call("GET", f"{gateway}/v1/tickets?status=all", headers=carol)
    check("the new customer's list holds it", status == 200 and [t["id"] for t in body["items"]] == [carol_ticket], f"{status} {body}")
    status, body = call("GET", f"{gateway}/v1/tickets/open-count", headers=carol)
    check("the new customer's open count is 1", status == 200 and body.get("count") == 1, f"{status} {body}")
    status, body = call("PATCH", f"{gateway}/v1/tickets/{carol_ticket}/custom-fields", {"customFields": {"product": "restart"}}, carol)
    check("the new ticket takes custom fields", status == 200, f"{status} {body}")
    status, _ = rate(carol, carol_ticket, 3)
    check("the new ticket is rated", status == 200, status)
    check("the report counts every rating once (4)", responses(key, 4) == 4)
    check("Desk's webhooks are all applied before the stop", settled())
    check("second run stops cleanly", stop(second) == 0)

    # The same data folder against another Desk: refused until the cache is reset.
    other_log = open(data / "other-desk.log", "w")
    other_desk = subprocess.Popen([str(root / ".build/debug/desk-emulator"), "--port", str(other_desk_port), "--demo"],
                                  stdout=other_log, stderr=other_log)
    processes.append(other_desk)
    time.sleep(0.5)
    other = {"DESK_BASE_URL": f"http://127.0.0.1:{other_desk_port}", "DESK_APP_ID": "emulated-app",
             "DESK_API_TOKEN": "emulator-api-token", "DESK_WEBHOOK_SECRET": "emulator-webhook-secret"}
    refused = start(3, **other)
    try:
        code = refused.wait(timeout=120)
    except subprocess.TimeoutExpired:
        refused.kill()
        code = None
    message = refused.stderr.read()
    check("another Desk on the same database exits with code 2", code == 2, code)
    check("the message names both Desks and the way out",
          "embedded emulator" in message and f"http://127.0.0.1:{other_desk_port} (app emulated-app)" in message
          and "desk-gateway cache reset" in message, message)
    reset = subprocess.run([binary, "cache", "reset"], env=environment(**other), capture_output=True, text=True, timeout=120)
    check("desk-gateway cache reset succeeds", reset.returncode == 0 and "cache reset: removed" in reset.stdout, reset.stdout + reset.stderr)
    after = start(4, **other)
    check("after the reset the gateway starts against the other Desk", wait_ready(gateway, 120, after))
    desk = f"http://127.0.0.1:{other_desk_port}"
    alice = sign_in("demo-customer", "demo-token")
    fresh = new_ticket(alice, "other desk")
    status, body = call("GET", f"{gateway}/v1/tickets/{fresh}", headers=alice)
    check("the other Desk's ticket reads", status == 200 and body["title"] == "other desk", f"{status} {body}")
    check("ratings survive the reset (report still counts 4)", responses(key, 4) == 4)
    check("the last run stops cleanly", stop(after) == 0)
finally:
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()
    # A gateway killed above may have left its private cluster running.
    pg_bin = sorted(pathlib.Path("/usr/lib/postgresql").glob("*/bin"))
    cluster = data / "postgres" / "data"
    if pg_bin and cluster.exists():
        command = [str(pg_bin[-1] / "pg_ctl"), "-D", str(cluster), "-m", "immediate", "stop"]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--"] + command
        subprocess.run(command, capture_output=True)

sys.exit(summary("restart"))
