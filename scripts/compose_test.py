"""deploy/compose.yaml, run as written with podman-compose (Debian's 1.0.3, no daemon): PostgreSQL, the gateway and the
Desk emulator on a Compose network where they find each other by service name. The database is a local stand-in for
postgres:15 (scripts/compose/postgres.Dockerfile: no registry is reachable here) named through POSTGRES_IMAGE.
Checks readiness, a customer journey, a webhook the emulator sends to `gateway:8080`, a report with a key made by the
image's CLI, the read-only root, a stop inside the grace period with exit 0, and that a restart finds the data in the
named volume. Needs `make image` first.
Prints one line per check and 'compose: N passed, N failed'."""
import base64
import json
import os
import pathlib
import subprocess
import sys
import time

from testlib import call, check, containers_conf, metric, check_json_lines, summary, wait_ready

root = pathlib.Path(__file__).resolve().parent.parent
project = "dgcompose"
postgres_image = "localhost/desk-gateway-test-postgres:15"
gateway_port = int(os.environ.get("COMPOSE_GATEWAY_PORT", "18391"))
emulator_port = gateway_port + 1000
gateway = f"http://127.0.0.1:{gateway_port}"
# Health and metrics: the admin port (ADMIN_PORT in compose.yaml), published on loopback.
admin_port = gateway_port + 2000
admin = f"http://127.0.0.1:{admin_port}"
grace = 20
# podman reads only this file: runc (crun refuses this host's hybrid cgroups), cgroupfs, limits the host can grant.
conf = root / ".build" / "compose-containers.conf"
env = dict(os.environ, POSTGRES_IMAGE=postgres_image, GATEWAY_PORT=str(gateway_port), GATEWAY_ADMIN_PORT=str(admin_port), EMULATOR_PORT=str(emulator_port),
           SESSION_KEY=base64.b64encode(os.urandom(32)).decode(), CONTAINERS_CONF=str(conf))
podman = ["podman"]


def compose(*args):
    return subprocess.run(["podman-compose", "-p", project, "-f", str(root / "deploy/compose.yaml"), *args],
                          capture_output=True, text=True, env=env, cwd=root)


def run(*args):
    return subprocess.run(podman + list(args), capture_output=True, text=True, env=env)


def container(service):
    return f"{project}_{service}_1"


def admin_metric(name, labels):
    """The value of one series on the admin port's /metrics; 0 when absent or while the gateway is not answering."""
    try:
        return metric(admin, name, labels, timeout=5) or 0
    except OSError:
        return 0


def main():
    containers_conf(conf)
    if run("image", "exists", postgres_image).returncode != 0:
        built = run("build", "--network=host", "--isolation=chroot", "-f", str(root / "scripts/compose/postgres.Dockerfile"),
                    "-t", postgres_image, str(root))
        check("the PostgreSQL stand-in image builds", built.returncode == 0, built.stderr[-800:])
    compose("down", "-v", "-t", "1")
    try:
        up = compose("up", "-d")
        check("podman-compose up", up.returncode == 0, (up.stdout + up.stderr)[-1500:])
        ready = wait_ready(admin, seconds=120)
        check("the gateway becomes ready (PostgreSQL and the emulator found by service name)", ready,
              run("logs", "--tail", "30", container("gateway")).stderr[-1500:])
        if not ready:
            return summary("compose")

        status, session = call("POST", f"{gateway}/v1/sessions", {"userId": "demo-customer", "accessToken": "demo-token"})
        check("sign in", status == 201, session)
        auth = {"Authorization": f"Bearer {(session or {}).get('token', '')}"}
        status, ticket = call("POST", f"{gateway}/v1/tickets", {"title": "from compose", "userName": "Demo"}, auth)
        check("create a ticket", status == 201, ticket)
        ticket_id = (ticket or {}).get("id")

        # The emulator posts TICKET.CREATED to http://gateway:8080/v1/webhooks/desk, signed with the shared secret.
        deadline = time.time() + 30
        while time.time() < deadline and admin_metric("webhook_events_total", {"outcome": "applied"}) < 1:
            time.sleep(0.5)
        check("a webhook from the emulator reaches the gateway over the Compose network and is applied",
              admin_metric("webhook_events_total", {"outcome": "applied"}) >= 1,
              f"rejected {admin_metric('webhook_events_total', {'outcome': 'rejected'})}")

        created = run("exec", container("gateway"), "desk-gateway", "api-key", "create", "--scope", "reports", "--name", "compose")
        key = next((line.split()[1] for line in created.stdout.splitlines() if line.startswith("key")), "")
        check("the gateway's CLI creates a reports key in the Compose database", key.startswith("dgk_"), (created.stdout + created.stderr)[-600:])
        status, report = call("GET", f"{gateway}/v1/reports/csat?groupBy=team", headers={"X-API-Key": key})
        check("a report", status == 200 and "totals" in (report or {}), status)

        uid = run("exec", container("gateway"), "id", "-u").stdout.strip()
        check("the gateway runs as uid 10001", uid == "10001", uid)
        wrote = run("exec", container("gateway"), "touch", "/usr/local/bin/x")
        check("the gateway's root filesystem is read-only (read_only: true)", wrote.returncode != 0 and "Read-only" in wrote.stderr,
              wrote.stderr)

        begun = time.time()
        stopped = compose("stop", "-t", str(grace))
        took = time.time() - begun
        codes = {service: json.loads(run("inspect", container(service)).stdout or "[{}]")[0].get("State", {}).get("ExitCode")
                 for service in ("gateway", "desk-emulator", "postgres")}
        check(f"podman-compose stop: all three end on their stop signal, none killed ({took:.1f} s in all)",
              stopped.returncode == 0 and took < grace, str(codes))
        check("the gateway and the emulator exit 0", codes["gateway"] == 0 and codes["desk-emulator"] == 0, str(codes))
        logged = run("logs", container("gateway"))
        check_json_lines("every line the gateway wrote, on stdout and stderr, is a JSON log record", logged.stdout + logged.stderr)

        again = compose("up", "-d")
        check("podman-compose up again", again.returncode == 0, (again.stdout + again.stderr)[-800:])
        check("ready again", wait_ready(admin, seconds=120))
        status, listed = call("GET", f"{gateway}/v1/tickets?status=all", headers=auth)
        check("the session and the ticket survived in the named volumes (gateway and Desk emulator)",
              status == 200 and any(t["id"] == ticket_id for t in (listed or {}).get("items", [])), f"{status} {listed}")
        status, _ = call("GET", f"{gateway}/v1/reports/csat?groupBy=team", headers={"X-API-Key": key})
        check("the reports key survived", status == 200, status)
    finally:
        down = compose("down", "-v", "-t", str(grace))
        left = run("ps", "-a", "--filter", f"name={project}_", "--format", "{{.Names}}").stdout.split()
        volumes = [v for v in run("volume", "ls", "--format", "{{.Name}}").stdout.split() if v.startswith(project)]
        check("podman-compose down -v leaves no container and no volume", down.returncode == 0 and not left and not volumes,
              f"{left} {volumes}")
    return summary("compose")


if __name__ == "__main__":
    sys.exit(main())
