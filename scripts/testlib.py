"""Helpers shared by the process-level test scripts: JSON over HTTP, /metrics readings and check lines."""
import json
import pathlib
import random
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request

results = []
root = pathlib.Path(__file__).resolve().parent.parent


def check(name, ok, detail=""):
    results.append(bool(ok))
    print(("ok    " if ok else "FAIL  ") + name + ("" if ok or not detail else f": {detail}"), flush=True)


def call(method, url, body=None, headers=None, timeout=15):
    """(status, parsed JSON or None) of one request; HTTP errors are answers too."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            text = response.read()
            return response.status, json.loads(text) if text else None
    except urllib.error.HTTPError as error:
        text = error.read()
        try:
            return error.code, json.loads(text)
        except ValueError:
            return error.code, None


def reports_key(env, name, *options):
    """A key with the reports scope, made by the debug build's CLI with `env` (its DATABASE_URL): the key (None when the
    command printed none) and the end of the command's error output."""
    created = subprocess.run([str(root / ".build/debug/desk-gateway"), "api-key", "create", "--scope", "reports", "--name", name, *options],
                             env=env, capture_output=True, text=True, timeout=60)
    return next((line.split()[1] for line in created.stdout.splitlines() if line.startswith("key")), None), created.stderr[-300:]


def metric(base_url, name, labels=None, timeout=10):
    """The value of the series `name` on base_url's /metrics whose labels include `labels`; None when there is none."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=timeout) as response:
        text = response.read().decode()
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        metric_name, _, label_text = series.partition("{")
        if metric_name != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', label_text))
        if all(found.get(key) == str(want) for key, want in (labels or {}).items()):
            return float(value)
    return None


def wait_ready(base_url, seconds=90, process=None):
    """True once GET /readyz answers 200; False after `seconds` or as soon as `process` has exited."""
    deadline = time.time() + seconds
    while time.time() < deadline and (process is None or process.poll() is None):
        try:
            if call("GET", f"{base_url}/readyz", timeout=2)[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def wait_for(predicate, seconds, interval=0.2):
    """True once predicate() is, within seconds."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def customer_ticket(gateway, emulator, user, title, signed_in="sign in", created="create a ticket"):
    """A customer the emulator knows signs in and creates a ticket, each a check; (the bearer header, the ticket)."""
    call("POST", f"{emulator}/emulator/customers", {"sendbirdId": user, "accessToken": "t", "displayName": user})
    status, session = call("POST", f"{gateway}/v1/sessions", {"userId": user, "accessToken": "t"})
    check(signed_in, status == 201, session)
    auth = {"Authorization": f"Bearer {(session or {}).get('token', '')}"}
    status, ticket = call("POST", f"{gateway}/v1/tickets", {"title": title, "userName": user}, auth)
    check(created, status == 201, ticket)
    return auth, ticket or {}


def check_json_lines(name, text):
    """A check that every line of a log is a JSON record, as a log collector reading JSON lines takes them."""
    def record(line):
        try:
            return isinstance(json.loads(line), dict)
        except ValueError:
            return False
    stray = [line for line in text.splitlines() if not record(line)]
    check(name, not stray, stray[:3])


def free_port():
    """A free loopback port below the kernel's ephemeral range (32768 up), so no client socket can take it meanwhile."""
    while True:
        port = random.randint(20000, 29999)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
                return port
            except OSError:
                continue


def summary(name):
    """Prints 'NAME: N passed, N failed' and gives the exit code."""
    passed, failed = results.count(True), results.count(False)
    print(f"{name}: {passed} passed, {failed} failed")
    return 1 if failed or not results else 0


def terminate(process, timeout=30):
    """SIGTERM, then SIGKILL if the process has not ended within `timeout` seconds."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()


def psql(admin, sql, db="postgres"):
    """One statement through psql against database `db` of the cluster `admin` connects to; its output, trimmed."""
    return subprocess.run(["psql", admin.replace("dbname=postgres", f"dbname={db}"), "-tAc", sql],
                          check=True, capture_output=True, text=True).stdout.strip()


# runc where it is installed: crun refuses a host whose cgroups are in hybrid mode.
PODMAN = ["podman", "--cgroup-manager=cgroupfs"] + (["--runtime", "runc"] if shutil.which("runc") else [])


def containers_conf(path):
    """A containers.conf for podman commands that take no flags for these (podman-compose, kube play): PODMAN's runc and
    cgroupfs, and the open-files and process limits this host can grant (podman's defaults are above its hard limit,
    for a pod's pause container too). Its path, for CONTAINERS_CONF."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[containers]\ndefault_ulimits = ["nofile=16384:16384", "nproc=4096:4096"]\n'
                    '[engine]\ncgroup_manager = "cgroupfs"\n' + ('runtime = "runc"\n' if shutil.which("runc") else ""))
    return str(path)


def podman(*args, **kwargs):
    """One podman command (cgroupfs, runc where installed), its output captured as text."""
    return subprocess.run(PODMAN + list(args), capture_output=True, text=True, **kwargs)
