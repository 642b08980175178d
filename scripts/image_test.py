"""The container image, run with podman (no daemon): against the test PostgreSQL over TCP, read-only root filesystem,
as the image's own non-root user, on the host network. Waits for /readyz, runs a customer journey and a report
(a reports key made with the image's own CLI), checks the user and the read-only root, stops the container with
SIGTERM inside the drain time, and holds the Kubernetes manifests and the Compose file to the image's real user,
port and probes. Needs `make image` (scripts/image.sh) first.
Usage: image_test.py ADMIN_CONNINFO. Prints one line per check and 'image: N passed, N failed'."""
import json
import os
import pathlib
import re
import sys
import time

import yaml
from testlib import call, check, check_json_lines, psql, summary, wait_ready, podman as run

root = pathlib.Path(__file__).resolve().parent.parent
admin = sys.argv[1]
image = os.environ.get("IMAGE", "desk-gateway:latest")
database = f"image_{os.getpid()}"
port = int(os.environ.get("IMAGE_TEST_PORT", "18381"))
gateway = f"http://127.0.0.1:{port}"
name = f"desk-gateway-test-{os.getpid()}"
# Limits are given explicitly (and low) to podman run: podman's defaults for root exceed what a container host may grant.
drain = 10


def main():
    pg_port = re.search(r"port=(\d+)", admin).group(1)
    psql(admin, f"CREATE DATABASE {database}")
    try:
        inspected = json.loads(run("image", "inspect", image).stdout or "[{}]")[0]
        config = inspected.get("Config", {})
        size = inspected.get("Size", 0)
        check("the image exists", bool(inspected), image)
        print(f"image size: {size / 1e6:.1f} MB", flush=True)
        check("the image runs as uid 10001, not root", config.get("User") == "10001", config.get("User"))
        check("the image exposes 8080", "8080/tcp" in (config.get("ExposedPorts") or {}), config.get("ExposedPorts"))

        started = run("run", "-d", "--name", name, "--network=host", "--read-only", "--tmpfs", "/tmp",
                      "--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096",
                      "--stop-timeout", str(drain + 5),
                      "-e", f"DATABASE_URL=host=127.0.0.1 port={pg_port} user=postgres dbname={database}",
                      "-e", f"PORT={port}", "-e", "HOST=127.0.0.1", "-e", f"DESK_EMULATOR_PORT={port + 1000}",
                      "-e", f"SHUTDOWN_DRAIN_S={drain}", "-e", "SYNC_INTERVAL_S=0", image)
        check("podman run", started.returncode == 0, started.stderr[-500:])
        check("the container becomes ready", wait_ready(gateway, seconds=90), run("logs", name).stderr[-1500:])

        uid = run("exec", name, "id", "-u").stdout.strip()
        check("the process runs as a non-root user", uid == "10001", uid)
        pid1 = run("exec", name, "cat", "/proc/1/status").stdout
        check("PID 1 is the gateway, as 10001", "desk-gateway" in pid1 and re.search(r"^Uid:\s+10001", pid1, re.M) is not None)
        wrote = run("exec", name, "touch", "/usr/local/bin/x")
        check("the root filesystem is read-only", wrote.returncode != 0 and "Read-only" in wrote.stderr, wrote.stderr)

        # A customer journey and a report.
        status, session = call("POST", f"{gateway}/v1/sessions", {"userId": "demo-customer", "accessToken": "demo-token"})
        check("sign in", status == 201, session)
        auth = {"Authorization": f"Bearer {(session or {}).get('token', '')}"}
        status, ticket = call("POST", f"{gateway}/v1/tickets", {"title": "from the container", "userName": "Demo"}, auth)
        check("create a ticket", status == 201, ticket)
        status, listed = call("GET", f"{gateway}/v1/tickets?status=all", headers=auth)
        check("list tickets", status == 200 and any(t["id"] == (ticket or {}).get("id") for t in listed["items"]), status)
        created = run("exec", name, "desk-gateway", "api-key", "create", "--scope", "reports", "--name", "image")
        key = next((line.split()[1] for line in created.stdout.splitlines() if line.startswith("key")), "")
        check("the image's CLI creates a reports key", key.startswith("dgk_"), created.stderr[-300:])
        status, report = call("GET", f"{gateway}/v1/reports/csat?groupBy=team", headers={"X-API-Key": key})
        check("a report", status == 200 and "totals" in (report or {}), status)
        # A named zone needs the zone database and Foundation's calendar (ICU, a shared library in the image).
        status, report = call("GET", f"{gateway}/v1/reports/csat?groupBy=agent&tz=Asia/Tokyo&bucket=day",
                              headers={"X-API-Key": key})
        check("a report in Asia/Tokyo, by day", status == 200 and (report or {}).get("timeZone") == "Asia/Tokyo"
              and (report or {}).get("bucket") == "day", (status, report))
        check("the health check passes", run("healthcheck", "run", name).returncode == 0)

        # The manifests hold to what the image and the running container really are.
        deployment = yaml.safe_load((root / "deploy/k8s/deployment.yaml").read_text())
        pod = deployment["spec"]["template"]["spec"]
        container = next(c for c in pod["containers"] if c["name"] == "gateway")
        security = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
        check("Kubernetes: runAsUser is the image's user", str(security.get("runAsUser")) == config.get("User"),
              f"{security.get('runAsUser')} vs {config.get('User')}")
        named = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
        check("Kubernetes: containerPort is the port the image exposes", all(f"{n}/tcp" in (config.get("ExposedPorts") or {}) for n in named.values()),
              named)
        check("Kubernetes: args are the image's command", container.get("args") == config.get("Cmd"), f"{container.get('args')} vs {config.get('Cmd')}")
        probes = {kind: container[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe") if kind in container}
        for kind, probe in probes.items():
            probed, _ = call("GET", f"{gateway}{probe['path']}")
            check(f"Kubernetes: {kind} {probe['path']} on port {probe['port']} answers 200 from the container",
                  probed == 200 and probe["port"] in named, probed)
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
        check("Kubernetes: the preStop command runs in the image", bool(pre_stop) and run("exec", name, *pre_stop[:1], "0").returncode == 0, pre_stop)
        check("Kubernetes: read-only root, as run here", security.get("readOnlyRootFilesystem") is True)
        check("Kubernetes: the grace period covers the preStop pause and the drain",
              pod.get("terminationGracePeriodSeconds", 30) > drain + int(pre_stop[-1] if pre_stop and pre_stop[-1].isdigit() else 0))
        compose = yaml.safe_load((root / "deploy/compose.yaml").read_text())
        check("Compose: the gateway's port maps to the image's port",
              any(str(m).split(":")[-1].split("/")[0].endswith("8080") for m in compose["services"]["gateway"].get("ports", []))
              and "8080/tcp" in (config.get("ExposedPorts") or {}), compose["services"]["gateway"].get("ports"))

        # SIGTERM: the gateway drains and exits 0 within the drain time.
        begun = time.time()
        stopped = run("stop", "-t", str(drain + 5), name)
        took = time.time() - begun
        state = json.loads(run("inspect", name).stdout or "[{}]")[0].get("State", {})
        check(f"SIGTERM stops it cleanly within the drain time ({took:.1f} s)",
              stopped.returncode == 0 and took < drain and state.get("ExitCode") == 0, f"{took:.1f}s exit {state.get('ExitCode')}")
        logged = run("logs", name)
        check_json_lines("every line it wrote, on stdout and stderr, is a JSON log record", logged.stdout + logged.stderr)

    finally:
        run("rm", "-f", name)
        psql(admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return summary("image")


if __name__ == "__main__":
    sys.exit(main())
