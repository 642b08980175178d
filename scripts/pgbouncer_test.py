"""The gateway behind a real pgbouncer in transaction pooling mode (Debian's pgbouncer, 3 server connections for two
gateways of 6 connections each): both start together (the migrations and the zone backfill race through the
pooler), a customer journey with a CSAT rating runs across them, reports answer from rollups and equal the raw
computation, and the same setup without DB_TRANSACTION_POOLING is refused by pgbouncer.
Usage: pgbouncer_test.py ADMIN_CONNINFO. Prints one line per check and 'pgbouncer: N passed, N failed'."""
import base64
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from testlib import call, check, psql, reports_key, summary, terminate, wait_ready

root = pathlib.Path(__file__).resolve().parent.parent
admin = sys.argv[1]
database = f"pgbouncer_{os.getpid()}"
bouncer_port = int(os.environ.get("PGBOUNCER_PORT", "16432"))
ports = [18351, 18352]
emulator_port = 19351
out = root / ".build" / "pgbouncer"
session_key = base64.b64encode(os.urandom(32)).decode()
through_bouncer = f"host=127.0.0.1 port={bouncer_port} dbname={database} user=postgres"


def socket_and_port():
    host = re.search(r"host=(\S+)", admin).group(1)
    port = re.search(r"port=(\d+)", admin).group(1)
    return host, port


def start_bouncer():
    """pgbouncer refuses to run as root: its files belong to the postgres user, which runs it."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    host, port = socket_and_port()
    (out / "users.txt").write_text('"postgres" ""\n')
    (out / "pgbouncer.ini").write_text(f"""[databases]
{database} = host={host} port={port} dbname={database} user=postgres

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {bouncer_port}
unix_socket_dir =
auth_type = trust
auth_file = {out}/users.txt
pool_mode = transaction
default_pool_size = 3
max_client_conn = 100
server_reset_query =
logfile = {out}/pgbouncer.log
pidfile = {out}/pgbouncer.pid
admin_users = postgres
""")
    as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", "postgres", str(out)], check=True)
    process = subprocess.Popen(as_postgres + ["pgbouncer", str(out / "pgbouncer.ini")],
                               stdout=open(os.devnull, "w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while time.time() < deadline:
        if subprocess.run(["psql", through_bouncer, "-tAc", "SELECT 1"], capture_output=True).returncode == 0:
            return process
        time.sleep(0.2)
    raise RuntimeError("pgbouncer did not start: " + (out / "pgbouncer.log").read_text()[-2000:])


def gateway_env(port, pooling=True):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env.update({
        "DATABASE_URL": through_bouncer, "PORT": str(port), "HOST": "127.0.0.1", "DB_POOL_SIZE": "6",
        "DESK_BASE_URL": f"http://127.0.0.1:{emulator_port}", "DESK_APP_ID": "emulated-app", "DESK_API_TOKEN": "emulator-api-token",
        "DESK_WEBHOOK_SECRET": "bouncer-secret", "SESSION_KEY": session_key, "SYNC_INTERVAL_S": "0", "LOG_LEVEL": "info",
        "REPORT_TIME_ZONES": "UTC,Asia/Kolkata", "REPORT_CACHE_S": "0", "ASSETS_DIR": str(root),
    })
    if pooling:
        env["DB_TRANSACTION_POOLING"] = "true"
    return env


def control(path, body=None):
    return call("POST", f"http://127.0.0.1:{emulator_port}/emulator{path}", body or {})


def main():
    processes = []
    psql(admin, f"CREATE DATABASE {database}")
    # Behind a transaction pooler the statement timeout comes from the database (or role, or pgbouncer's query_timeout).
    psql(admin, f"ALTER DATABASE {database} SET statement_timeout = '10s'")
    bouncer = start_bouncer()
    try:
        emulator_log = open(out / "emulator.log", "w")
        processes.append(subprocess.Popen([str(root / ".build/debug/desk-emulator"), "--port", str(emulator_port), "--demo"],
                                          stdout=emulator_log, stderr=emulator_log))
        time.sleep(0.5)

        # Without the setting, pgbouncer refuses the connection (its `options` startup parameter).
        refused = subprocess.run([str(root / ".build/debug/desk-gateway"), "api-key", "list"], env=dict(gateway_env(ports[0], pooling=False),
                                 DB_STARTUP_WAIT_S="1"), capture_output=True, text=True, timeout=60)
        check("without DB_TRANSACTION_POOLING pgbouncer refuses the gateway", refused.returncode != 0 and "options" in refused.stdout + refused.stderr,
              (refused.stdout + refused.stderr)[-300:])

        # Two gateways start together through the pooler: migrations and the zone backfill race.
        for index, port in enumerate(ports):
            log = open(out / f"gateway-{index}.log", "w")
            processes.append(subprocess.Popen([str(root / ".build/debug/desk-gateway"), "serve"], env=gateway_env(port), stdout=log, stderr=log))
        ready = [wait_ready(f"http://127.0.0.1:{port}") for port in ports]
        check("two gateways start through pgbouncer", all(ready), str(ready))
        migrations = len(list((root / "sql").glob("*.sql")))
        check("every migration applied once", psql(admin, "SELECT count(*) FROM schema_migrations", db=database) == str(migrations))
        deadline = time.time() + 30
        while time.time() < deadline and psql(admin, "SELECT count(*) FROM report_zones WHERE backfilled_at IS NOT NULL", db=database) != "2":
            time.sleep(0.2)
        check("both reporting zones backfilled", psql(admin, "SELECT count(*) FROM report_zones WHERE backfilled_at IS NOT NULL", db=database) == "2")

        # A customer journey across both instances, with a rating.
        a, b = (f"http://127.0.0.1:{port}" for port in ports)
        control("/customers", {"sendbirdId": "bouncer-user", "accessToken": "t", "displayName": "Bouncer"})
        status, session = call("POST", f"{a}/v1/sessions", {"userId": "bouncer-user", "accessToken": "t"})
        check("sign in", status == 201, session)
        if status != 201:
            return summary("pgbouncer")
        auth = {"Authorization": f"Bearer {session['token']}"}
        tickets = []
        for n in range(12):
            status, ticket = call("POST", f"{(a, b)[n % 2]}/v1/tickets", {"title": f"through pgbouncer {n}", "userName": "B"}, auth)
            if status != 201:
                check(f"create ticket {n}", False, ticket)
                break
            tickets.append(ticket["id"])
        check("twelve tickets created across both gateways", len(tickets) == 12)
        statuses = set()
        for n, ticket in enumerate(tickets):
            statuses.add(call("GET", f"{(b, a)[n % 2]}/v1/tickets/{ticket}", headers=auth)[0])
        status, page = call("GET", f"{b}/v1/tickets?status=all&limit=50", headers=auth)
        check("reads and the list", statuses == {200} and status == 200 and len(page["items"]) >= 12, f"{statuses} {status}")
        scores = []
        for n, ticket in enumerate(tickets[:8]):
            control(f"/tickets/{ticket}/customer-message")
            control(f"/tickets/{ticket}/assign", {"agentId": 501 + n % 3})
            control(f"/tickets/{ticket}/close")
            _, sent = control(f"/tickets/{ticket}/csat-request")
            status, _ = call("POST", f"{(a, b)[n % 2]}/v1/tickets/{ticket}/feedback",
                             {"messageId": sent["messageId"], "score": 1 + n % 5, "comment": f"pooled {n}"}, auth)
            scores.append(status)
        check("eight ratings accepted", scores == [200] * 8, scores)

        # Reports: from rollups in UTC, equal to the raw computation (Etc/UTC has no rollups).
        key, errors = reports_key(gateway_env(ports[0]), "bouncer")
        check("an API key created through pgbouncer", key is not None, errors)
        deadline = time.time() + 30
        rollup = raw = None
        while time.time() < deadline:
            status, rollup = call("GET", f"{a}/v1/reports/csat?groupBy=agent&tz=UTC", headers={"X-API-Key": key or ""})
            if status == 200 and rollup["totals"]["responses"] == 8:
                break
            time.sleep(0.3)
        status_raw, raw = call("GET", f"{b}/v1/reports/csat?groupBy=agent&tz=Etc/UTC", headers={"X-API-Key": key or ""})
        check("the report counts every rating once", (rollup or {}).get("totals", {}).get("responses") == 8, (rollup or {}).get("totals"))
        check("rollups equal the raw computation", status_raw == 200 and rollup["totals"] == raw["totals"] and rollup["rows"] == raw["rows"],
              f"{rollup.get('totals')} vs {raw.get('totals')}")

        # The pooler really shared its three server connections among the gateways' twelve.
        pools = subprocess.run(["psql", f"host=127.0.0.1 port={bouncer_port} dbname=pgbouncer user=postgres", "-Ac", "SHOW POOLS"],
                               capture_output=True, text=True).stdout.splitlines()
        header = pools[0].split("|") if pools else []
        row = next((dict(zip(header, l.split("|"))) for l in pools[1:] if l.startswith(database + "|")), {})
        servers = sum(int(row.get(name, 0)) for name in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login"))
        clients = int(row.get("cl_active", 0)) + int(row.get("cl_waiting", 0))
        check("three server connections served both gateways' clients", 0 < servers <= 3 and clients > servers, row)
        logs = "".join((out / f"gateway-{i}.log").read_text() for i in range(2))
        check("no database errors in the gateways' logs", '"database error"' not in logs and "prepared statement" not in logs,
              [l for l in logs.splitlines() if "database error" in l][:2])
    finally:
        for process in processes:
            terminate(process)
        terminate(bouncer)
        psql(admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return summary("pgbouncer")


if __name__ == "__main__":
    sys.exit(main())
