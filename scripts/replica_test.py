"""Report reads on a real streaming replica: pg_basebackup of the test cluster started as a hot standby, a gateway
(debug build, embedded Desk emulator) with DATABASE_READ_URL naming it. Reports and response listings are served
from the replica (X-Report-Database, report_reads_total) with the primary's data; with replay paused past the lag
bound they come from the primary and include the newest rating; with the replica stopped they keep answering from
the primary, without errors; once it is back, reads return to it.
Usage: replica_test.py ADMIN_CONNINFO. Prints one line per check and 'replica: N passed, N failed'."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request

from testlib import call, check, metric, psql, reports_key, summary, terminate, wait_ready

root = pathlib.Path(__file__).resolve().parent.parent
admin = sys.argv[1]
database = f"replica_{os.getpid()}"
replica_port = int(os.environ.get("REPLICA_PG_PORT", "25437"))
port = int(os.environ.get("REPLICA_GATEWAY_PORT", "18361"))
gateway = f"http://127.0.0.1:{port}"
out = root / ".build" / "replica"
data = out / "data"
sock = out / "sock"
pg_bin = sorted(pathlib.Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: [int(x) for x in re.findall(r"\d+", str(p))])[-1]
as_postgres = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
primary = admin.replace("dbname=postgres", f"dbname={database}")
replica = f"host={sock} port={replica_port} user=postgres dbname={database}"
MAX_LAG = 2


def pg_ctl(*args):
    return subprocess.run(as_postgres + [str(pg_bin / "pg_ctl"), "-D", str(data), *args], capture_output=True, text=True)


def start_replica():
    # A hot standby refuses to start with fewer connections than its primary allows.
    connections = psql(admin, "SHOW max_connections")
    result = pg_ctl("-l", str(out / "replica.log"), "-w", "-t", "60", "-o",
                    f"-p {replica_port} -k {sock} -c listen_addresses='' -c hot_standby=on -c fsync=off -c max_connections={connections}",
                    "start")
    if result.returncode != 0:
        raise RuntimeError("replica did not start: " + result.stderr + (out / "replica.log").read_text()[-1500:])


def rate(n, score):
    """One rating written on the primary, as the gateway records them."""
    psql(admin, f"""INSERT INTO csat_ratings (ticket_id, message_id, score, comment, agent_id, team_id, channel_type, priority, rated_at, source)
                    VALUES ({900000 + n}, 1, {score}, 'replica {n}', 501, NULL, 'SENDBIRD_IOS', 'LOW', now(), 'sync')""", db=database)


def served_by(key):
    """(status, X-Report-Database, responses) of one raw report."""
    request = urllib.request.Request(f"{gateway}/v1/reports/csat?groupBy=agent&tz=Etc/UTC", headers={"X-API-Key": key})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            body = json.loads(response.read())
            return response.status, response.headers.get("X-Report-Database"), body["totals"]["responses"]
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("X-Report-Database"), None


def wait_for_answer(key, expected, seconds=20):
    """Asks until the report answer is `expected` (status, database, responses); the last answer."""
    deadline = time.time() + seconds
    answer = (None, None, None)
    while time.time() < deadline:
        answer = served_by(key)
        if answer == expected:
            break
        time.sleep(0.3)
    return answer


def main():
    if out.exists():
        pg_ctl("-m", "immediate", "stop")
        shutil.rmtree(out)
    sock.mkdir(parents=True)
    if as_postgres:
        subprocess.run(["chown", "-R", "postgres", str(out)], check=True)
    psql(admin, f"CREATE DATABASE {database}")
    gateway_process = None
    try:
        # The standby: a base backup of the running test cluster, streaming from it.
        host = re.search(r"host=(\S+)", admin).group(1)
        primary_port = re.search(r"port=(\d+)", admin).group(1)
        backup = subprocess.run(as_postgres + [str(pg_bin / "pg_basebackup"), "-D", str(data), "-h", host, "-p", primary_port, "-U", "postgres",
                                               "-R", "-X", "stream", "-c", "fast"], capture_output=True, text=True)
        check("pg_basebackup of the test cluster", backup.returncode == 0, backup.stderr[-500:])
        start_replica()
        check("the replica is in recovery", subprocess.run(["psql", replica, "-tAc", "SELECT pg_is_in_recovery()"], capture_output=True,
                                                           text=True).stdout.strip() == "t")

        env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
        env.update({"DATABASE_URL": primary, "DATABASE_READ_URL": replica, "REPORT_REPLICA_MAX_LAG_S": str(MAX_LAG), "HOST": "127.0.0.1",
                    "PORT": str(port), "DESK_EMULATOR_PORT": str(port + 1000), "SYNC_INTERVAL_S": "0", "REPORT_CACHE_S": "0",
                    "LOG_LEVEL": "info", "ASSETS_DIR": str(root), "DB_CONNECT_TIMEOUT_S": "2"})
        log = open(out / "gateway.log", "w")
        gateway_process = subprocess.Popen([str(root / ".build/debug/desk-gateway"), "serve"], env=env, stdout=log, stderr=log)
        check("the gateway starts with a read replica", wait_ready(gateway, process=gateway_process))
        key = reports_key(env, "replica")[0] or ""
        # What a release would do to the schema, read from the standby (it takes no writes).
        migrations = len(list((root / "sql").glob("*.sql")))
        for _ in range(20):  # until the standby has replayed the gateway's migrations
            status = subprocess.run([str(root / ".build/debug/desk-gateway"), "migrate", "--status"], env={**env, "DATABASE_URL": replica},
                                    capture_output=True, text=True, timeout=120)
            if status.returncode != 3:
                break
            time.sleep(0.5)
        check("migrate --status reads the replica: every migration applied, exit 0",
              status.returncode == 0 and status.stdout.splitlines()[-1:] == [f"{migrations} applied, 0 pending, 0 changed, 0 newer, 0 unknown"],
              status.stdout[-300:] + status.stderr[-500:])
        for n in range(5):
            rate(n, 1 + n)

        # Served from the replica once it has replayed the ratings.
        answer = wait_for_answer(key, (200, "replica", 5))
        check("reports are served from the replica, with the primary's data", answer == (200, "replica", 5), answer)
        status, listing = call("GET", f"{gateway}/v1/reports/csat/responses?tz=Etc/UTC", headers={"X-API-Key": key})
        check("the responses listing too", status == 200 and len(listing["items"]) == 5, status)
        replica_reads = metric(gateway, "report_reads_total", {"database": "replica"})
        check("report_reads_total counts the replica's reads", (replica_reads or 0) >= 2, replica_reads)
        check("report_replica_usable is 1", metric(gateway, "report_replica_usable") == 1)

        # Replay paused while the primary moves on: past the lag bound, reads go to the primary (with the new rating).
        subprocess.run(["psql", replica, "-tAc", "SELECT pg_wal_replay_pause()"], check=True, capture_output=True)
        rate(5, 5)
        time.sleep(MAX_LAG + 2)
        answer = served_by(key)
        check("a replica lagging past REPORT_REPLICA_MAX_LAG_S is left for the primary", answer == (200, "primary", 6), answer)
        subprocess.run(["psql", replica, "-tAc", "SELECT pg_wal_replay_resume()"], check=True, capture_output=True)
        answer = wait_for_answer(key, (200, "replica", 6))
        check("caught up, reads return to the replica", answer == (200, "replica", 6), answer)

        # The replica stops: every report still answers, from the primary, without an error.
        stopped = pg_ctl("-m", "fast", "-w", "stop")
        check("the replica stopped", stopped.returncode == 0, stopped.stderr)
        answers = [served_by(key) for _ in range(20)]
        check("with the replica down every report answers 200 from the primary",
              all(a == (200, "primary", 6) for a in answers), answers[:3])
        check("readiness does not depend on the replica", call("GET", f"{gateway}/readyz")[0] == 200)
        check("report_replica_usable is 0", metric(gateway, "report_replica_usable") == 0)

        # Back up: reads return to it.
        start_replica()
        answer = wait_for_answer(key, (200, "replica", 6))
        check("the restarted replica serves reports again", answer == (200, "replica", 6), answer)
        logs = (out / "gateway.log").read_text()
        check("no 5xx answered", '"status":5' not in logs, [l for l in logs.splitlines() if '"status":5' in l][:2])
    finally:
        if gateway_process:
            terminate(gateway_process)
        pg_ctl("-m", "immediate", "stop")
        psql(admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return summary("replica")


if __name__ == "__main__":
    sys.exit(main())
