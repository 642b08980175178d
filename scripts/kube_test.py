"""deploy/k8s run with `podman kube play`: the ConfigMap and the Deployment as written (the Deployment's pod with its
security context, envFrom, secretKeyRefs, args and probes' paths), the Secret's keys from secret.example.yaml with test
values, the gateway's image; PostgreSQL and a Desk emulator on the host. Checks what a cluster would see: the pod
starts within the startup probe's budget, the probes' paths answer on the admin port and the API port serves none of
them, /metrics where the pod's Prometheus annotations point, the process as the security context asks (user, a
read-only root with no writable /tmp given, no capabilities, no new privileges, seccomp), the Secret's values in use
(a customer's journey through Desk, a webhook signed with its secret and one signed otherwise refused), the image's CLI
inside the pod, and a stop that drains within terminationGracePeriodSeconds.

What podman on one host cannot do as a cluster does, and how the test stands in for it: the pod shares the host's
network (this machine runs containers that way), so it runs one replica, the ConfigMap's PORT and ADMIN_PORT move to
the test's ports (the named container ports and the annotation follow; the manifests' own ports may be in use), and
the container ports are dropped (podman maps them only on a bridge); the Secret is created as a podman secret in the
form podman 4.3 reads (a JSON map of base64 values; a Secret document in the played file is stored as YAML it cannot
read back); the Deployment and the Secret take names of the test's own, so that a pod or a podman secret of the
manifests' names on the machine is left alone; Service, PodDisruptionBudget and HorizontalPodAutoscaler have no
podman counterpart (deploy/validate.py checks them against the API schemas). Needs `make image` first.
Usage: kube_test.py ADMIN_CONNINFO. Prints one line per check and 'kube: N passed, N failed'."""
import base64
import hashlib
import hmac
import json
import os
import pathlib
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import yaml

from testlib import call, check, containers_conf, psql, summary, terminate, customer_ticket, check_json_lines, wait_for, podman as run

root = pathlib.Path(__file__).resolve().parent.parent
admin = sys.argv[1]
image = os.environ.get("IMAGE", "desk-gateway:latest")
database = f"kube_{os.getpid()}"
port = int(os.environ.get("KUBE_TEST_PORT", "18387"))
admin_port = int(os.environ.get("KUBE_TEST_ADMIN_PORT", "18388"))
emulator_port = int(os.environ.get("KUBE_EMULATOR_PORT", "19387"))
gateway = f"http://127.0.0.1:{port}"
out = root / ".build" / "kube-test"
webhook_secret = "kube-webhook-secret"
test_name = "desk-gateway-kube-test"


def manifests():
    """The kustomization's resources by kind, and the example Secret (the real one is made out of band)."""
    listed = yaml.safe_load((root / "deploy/k8s/kustomization.yaml").read_text())["resources"] + ["secret.example.yaml"]
    documents = [doc for name in listed for doc in yaml.safe_load_all((root / "deploy/k8s" / name).read_text()) if doc]
    return {doc["kind"]: doc for doc in documents}


def played(kinds, pg_port):
    """The ConfigMap and the Deployment as podman plays them here (see the module's note); the pod's container."""
    config, deployment = kinds["ConfigMap"], kinds["Deployment"]
    data = config["data"]
    data.update(DESK_BASE_URL=f"http://127.0.0.1:{emulator_port}", DESK_APP_ID="emulated-app",
                PORT=str(port), ADMIN_PORT=str(admin_port), SYNC_INTERVAL_S="0")
    deployment["spec"]["replicas"] = 1
    template = deployment["spec"]["template"]
    container = next(c for c in template["spec"]["containers"] if c["name"] == "gateway")
    container["image"] = image
    numbers = {"http": port, "admin": admin_port}
    named = {p["name"]: p["containerPort"] for p in container.pop("ports")}
    annotations = template["metadata"]["annotations"]
    check("the annotation's scrape port is the admin container port", annotations["prometheus.io/port"] == str(named["admin"]),
          annotations)
    annotations["prometheus.io/port"] = str(admin_port)
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        container[kind]["httpGet"]["port"] = numbers[container[kind]["httpGet"]["port"]]
    secret = kinds["Secret"]["stringData"]
    values = {"DATABASE_URL": f"host=127.0.0.1 port={pg_port} user=postgres dbname={database}",
              "DESK_API_TOKEN": "emulator-api-token", "DESK_WEBHOOK_SECRET": webhook_secret,
              "SESSION_KEY": base64.b64encode(os.urandom(32)).decode()}
    references = [e["valueFrom"]["secretKeyRef"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})]
    check("every secretKeyRef names the Secret of secret.example.yaml",
          {r["name"] for r in references} == {kinds["Secret"]["metadata"]["name"]}, references)
    needed = {r["key"] for r in references if not r.get("optional")}
    check("every key the Deployment needs from the Secret is in secret.example.yaml", needed <= set(secret), needed - set(secret))
    # Names of the test's own, so that a pod or a secret of the manifests' names on this machine is left alone.
    for reference in references:
        reference["name"] = test_name
    deployment["metadata"]["name"] = test_name
    (out / "play.yaml").write_text(yaml.safe_dump_all([config, deployment]))
    (out / "secret.json").write_text(json.dumps({key: base64.b64encode(values[key].encode()).decode() for key in secret}))
    return deployment, container


def answers(url, status=200):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == status
    except urllib.error.HTTPError as error:
        return error.code == status
    except OSError:
        return False


def started(container, name):
    """The pod comes up within its startup probe's budget; the probes' paths answer where the kubelet asks."""
    startup = container["startupProbe"]
    budget = startup["periodSeconds"] * startup["failureThreshold"]
    probe = lambda kind: f"http://127.0.0.1:{container[kind]['httpGet']['port']}{container[kind]['httpGet']['path']}"
    up = wait_for(lambda: answers(probe("startupProbe")), budget)
    logged = run("logs", name)
    check(f"the startup probe passes within its budget ({budget} s)", up, (logged.stdout + logged.stderr)[-1500:])
    if not up:
        return False
    check("the readiness probe passes: PostgreSQL and Desk reached with the Secret's values",
          wait_for(lambda: answers(probe("readinessProbe")), 30), call("GET", probe("readinessProbe")))
    check("the liveness probe passes", answers(probe("livenessProbe")))
    inside = run("exec", name, "curl", "-fsS", f"http://localhost:{admin_port}/readyz")
    check("/readyz from inside the pod with the image's curl (docs/runbooks.md's way in)",
          inside.returncode == 0 and '"status":"pass"' in inside.stdout, inside.stderr[-300:])
    check("the API port serves none of the probes' paths, nor /metrics",
          all(answers(f"{gateway}{path}", 404) for path in ("/livez", "/readyz", "/metrics")))
    return True


def process(name, template):
    """The gateway's process as the pod's and the container's security contexts ask."""
    status = run("exec", name, "cat", "/proc/1/status").stdout
    user = template["spec"]["securityContext"]["runAsUser"]
    check(f"PID 1 is the gateway, as uid {user}", "desk-gateway" in status and re.search(rf"^Uid:\s+{user}\s", status, re.M) is not None,
          status[:200])
    check("no capabilities (drop ALL), not even bounded", re.search(r"^CapEff:\s+0+$", status, re.M) is not None
          and re.search(r"^CapBnd:\s+0+$", status, re.M) is not None, re.findall(r"^Cap.*$", status, re.M))
    check("no new privileges (allowPrivilegeEscalation: false)", re.search(r"^NoNewPrivs:\s+1$", status, re.M) is not None)
    check("a seccomp filter (RuntimeDefault)", re.search(r"^Seccomp:\s+2$", status, re.M) is not None)
    wrote = run("exec", name, "touch", "/tmp/x")
    check("the root is read-only and no writable /tmp is given, as in the manifest",
          wrote.returncode != 0 and "Read-only" in wrote.stderr, wrote.stderr)


def served(name):
    """A customer's journey through Desk, webhooks checked with the Secret's key, the CLI and a report."""
    auth, ticket = customer_ticket(gateway, f"http://127.0.0.1:{emulator_port}", "kube-user", "from the pod",
                                   created="create a ticket in Desk (DESK_API_TOKEN and DESK_BASE_URL in use)")
    status, listed = call("GET", f"{gateway}/v1/tickets?status=all", headers=auth)
    check("list the customer's tickets", status == 200 and any(t["id"] == ticket.get("id") for t in listed["items"]), status)
    event = {"event": "ticket.updated", "ticket": {"id": ticket.get("id")}, "id": f"kube-{os.getpid()}"}
    raw = json.dumps(event).encode()
    for key, expected in ((webhook_secret, 200), ("another-secret", 401)):
        signature = "sha1=" + hmac.new(key.encode(), raw, hashlib.sha1).hexdigest()
        status, _ = call("POST", f"{gateway}/v1/webhooks/desk", event, {"x-hub-signature": signature})
        check(f"a webhook signed with {'the Secret' if expected == 200 else 'another'} key is answered {expected}",
              status == expected, status)
    created = run("exec", name, "desk-gateway", "api-key", "create", "--scope", "reports", "--name", "kube")
    key = next((line.split()[1] for line in created.stdout.splitlines() if line.startswith("key")), "")
    check("the image's CLI creates a reports key inside the pod", key.startswith("dgk_"), created.stderr[-300:])
    status, report = call("GET", f"{gateway}/v1/reports/csat?groupBy=agent", headers={"X-API-Key": key})
    check("a report", status == 200 and "totals" in (report or {}), status)


def scraped(template):
    annotations = template["metadata"]["annotations"]
    url = f"http://127.0.0.1:{annotations['prometheus.io/port']}{annotations['prometheus.io/path']}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
    except OSError as error:
        text = str(error)
    check("/metrics where the pod's annotations point", "http_requests_total{" in text, text[:200])


def stopped(pod, name, grace):
    """Kubernetes sends SIGTERM and waits terminationGracePeriodSeconds: the gateway drains and exits 0 within it."""
    began = time.time()
    result = run("pod", "stop", "-t", str(grace), pod)
    took = time.time() - began
    state = json.loads(run("inspect", name).stdout or "[{}]")[0].get("State", {})
    logged = run("logs", name)
    logs = logged.stdout + logged.stderr
    check(f"SIGTERM: drained and exited 0 within the grace period ({took:.1f} of {grace} s)",
          result.returncode == 0 and took < grace and state.get("ExitCode") == 0 and '"msg":"stopped"' in logs,
          f"exit {state.get('ExitCode')}, {logs[-400:]}")
    check("the start-up line names both ports", f'"admin_port":"{admin_port}"' in logs and f'"port":"{port}"' in logs, logs[:800])
    check_json_lines("every line it wrote, on stdout and stderr, is a JSON log record (as a cluster's log collector reads them)",
                     logs)


def main():
    out.mkdir(parents=True, exist_ok=True)
    kinds = manifests()
    deployment, container = played(kinds, re.search(r"port=(\d+)", admin).group(1))
    template = deployment["spec"]["template"]
    os.environ["CONTAINERS_CONF"] = containers_conf(out / "containers.conf")
    psql(admin, f"CREATE DATABASE {database}")
    emulator = subprocess.Popen([str(root / ".build/debug/desk-emulator"), "--port", str(emulator_port), "--demo"],
                                stdout=open(out / "emulator.log", "w"), stderr=subprocess.STDOUT)
    pod = f"{deployment['metadata']['name']}-pod-0"
    name = f"{pod}-{container['name']}"
    try:
        run("secret", "rm", test_name)
        made = run("secret", "create", test_name, str(out / "secret.json"))
        check("the Secret as a podman secret", made.returncode == 0, made.stderr)
        play = run("kube", "play", "--network", "host", "--replace", str(out / "play.yaml"), timeout=300)
        check("podman kube play of the ConfigMap and the Deployment", play.returncode == 0, play.stderr[-800:])
        if play.returncode == 0 and started(container, name):
            process(name, template)
            served(name)
            scraped(template)
            stopped(pod, name, template["spec"]["terminationGracePeriodSeconds"])
    finally:
        run("kube", "down", str(out / "play.yaml"))
        run("secret", "rm", test_name)
        terminate(emulator)
        psql(admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return summary("kube")


if __name__ == "__main__":
    sys.exit(main())
