"""Validates the deployment files without a container engine or a cluster:
Kubernetes manifests against the API schemas (kubernetes-validate), compose.yaml against the structure Compose
requires, and the Dockerfile and systemd unit for the settings the project relies on. Prints 'N passed, N failed'."""
import pathlib
import re
import sys

import yaml

root = pathlib.Path(__file__).resolve().parent
results = []


def check(name, ok, detail=""):
    results.append(ok)
    print(("ok    " if ok else "FAIL  ") + name + (f": {detail}" if detail and not ok else ""))


# Kubernetes: every manifest against the schema of a current Kubernetes version.
import kubernetes_validate

for path in sorted((root / "k8s").glob("*.yaml")):
    for document in yaml.safe_load_all(path.read_text()):
        if not document:
            continue
        if document.get("kind") == "Kustomization":
            listed = set(document.get("resources", []))
            missing = [r for r in listed if not (root / "k8s" / r).exists()]
            check(f"{path.name}: resources exist", not missing, str(missing))
            continue
        try:
            kubernetes_validate.validate(document, "1.30", strict=True)
            check(f"{path.name}: {document['kind']} is valid for Kubernetes 1.30", True)
        except Exception as error:  # noqa: BLE001 - any validation error fails the check
            check(f"{path.name}: {document.get('kind')}", False, str(error).splitlines()[0])

deployment = yaml.safe_load((root / "k8s" / "deployment.yaml").read_text())
spec = deployment["spec"]
container = spec["template"]["spec"]["containers"][0]
check("deployment: at least 2 replicas", spec["replicas"] >= 2)
check("deployment: liveness on /livez", container["livenessProbe"]["httpGet"]["path"] == "/livez")
check("deployment: readiness on /readyz", container["readinessProbe"]["httpGet"]["path"] == "/readyz")
check("deployment: requests and limits", {"requests", "limits"} <= set(container["resources"]))
config = yaml.safe_load((root / "k8s" / "configmap.yaml").read_text())["data"]
ports = {p["name"]: p["containerPort"] for p in container["ports"]}
check("deployment: probes on the admin port, which is ADMIN_PORT",
      all(container[probe]["httpGet"]["port"] == "admin" for probe in ("livenessProbe", "readinessProbe", "startupProbe"))
      and ports.get("admin") == int(config["ADMIN_PORT"]) and ports.get("http") == int(config["PORT"]))
service = yaml.safe_load((root / "k8s" / "service.yaml").read_text())
check("service: publishes the API port only", [p["targetPort"] for p in service["spec"]["ports"]] == ["http"])
drain = int(config["SHUTDOWN_DRAIN_S"])
pre_stop = int(container["lifecycle"]["preStop"]["exec"]["command"][-1])
check("deployment: grace period longer than preStop + drain",
      spec["template"]["spec"]["terminationGracePeriodSeconds"] > pre_stop + drain)
secret_keys = {e["valueFrom"]["secretKeyRef"]["key"] for e in container["env"] if "secretKeyRef" in e.get("valueFrom", {})}
check("deployment: Desk token, webhook secret and database URL come from a Secret",
      {"DESK_API_TOKEN", "DESK_WEBHOOK_SECRET", "DATABASE_URL"} <= secret_keys)

# Compose: the structure Compose requires, and references that resolve.
compose = yaml.safe_load((root / "compose.yaml").read_text())
services = compose.get("services", {})
check("compose: services are mappings with an image or a build", all(isinstance(s, dict) and ("image" in s or "build" in s) for s in services.values()))
allowed = {"image", "build", "restart", "environment", "volumes", "healthcheck", "depends_on", "ports", "profiles", "entrypoint",
           "command", "stop_grace_period", "read_only", "tmpfs"}
unknown = {k for s in services.values() for k in s if k not in allowed}
check("compose: only known service keys", not unknown, str(unknown))
for name, service in services.items():
    for dependency in service.get("depends_on", {}):
        check(f"compose: {name} depends on an existing service", dependency in services, dependency)
    for volume in service.get("volumes", []):
        source = volume.split(":")[0]
        if not source.startswith((".", "/")):
            check(f"compose: volume {source} is declared", source in (compose.get("volumes") or {}), source)
check("compose: PostgreSQL 15 unless POSTGRES_IMAGE says otherwise", services["postgres"]["image"] == "${POSTGRES_IMAGE:-postgres:15}")
check("compose: the gateway's root filesystem is read-only, /tmp a tmpfs", services["gateway"].get("read_only") is True
      and "/tmp" in services["gateway"].get("tmpfs", []))
check("compose: emulator behind a profile", services["desk-emulator"].get("profiles") == ["emulator"])
check("compose: gateway builds from deploy/Dockerfile", services["gateway"]["build"]["dockerfile"] == "deploy/Dockerfile")

# Dockerfile and systemd unit: what the project relies on.
dockerfile = (root / "Dockerfile").read_text()
check("Dockerfile: multi-stage", len(re.findall(r"^FROM ", dockerfile, re.M)) >= 2)
check("Dockerfile: runtime has libmicrohttpd12 and libpq5", "libmicrohttpd12" in dockerfile and "libpq5" in dockerfile)
users = re.findall(r"^USER (\S+)", dockerfile, re.M)
check("Dockerfile: the image runs as a non-root user (the last USER)", bool(users) and users[-1] not in ("root", "0"), users)
check("Dockerfile: HEALTHCHECK on /livez", re.search(r"^HEALTHCHECK[\s\S]*?/livez", dockerfile, re.M) is not None)
for line in dockerfile.splitlines():
    if line.startswith("COPY") and "--from" not in line:
        source = line.split()[1]
        if source.startswith(".image/"):
            continue   # made by scripts/image.sh before a `--target prebuilt` build
        check(f"Dockerfile: {source} exists", (root.parent / source).exists(), source)
unit = (root / "systemd" / "desk-gateway.service").read_text()
sections = set(re.findall(r"^\[(\w+)\]$", unit, re.M))
check("systemd: Unit, Service and Install sections", {"Unit", "Service", "Install"} <= sections)
check("systemd: runs serve and stops with SIGTERM", "ExecStart=/usr/local/bin/desk-gateway serve" in unit and "KillSignal=SIGTERM" in unit)

# Every setting the shipped files give is one the gateway knows and accepts: the binary checks them itself
# (`desk-gateway settings --check`: exit 2 on an invalid value, 1 on a misspelt name). Secrets get stand-ins of the
# right form; Compose's ${VAR:-default} takes its default.
import base64
import os
import subprocess

binary = root.parent / ".build" / "debug" / "desk-gateway"
stand_ins = {"SESSION_KEY": base64.b64encode(bytes(32)).decode(), "DATABASE_URL": "postgresql://gateway:x@localhost:5432/gateway",
             "DESK_API_TOKEN": "token", "DESK_WEBHOOK_SECRET": "secret", "DESK_WEBHOOK_SECRET_PREVIOUS": "old-secret"}


def compose_default(value):
    return re.sub(r"\$\{(\w+)(?::?-([^}]*)|:\?[^}]*)?\}", lambda m: m.group(2) if m.group(2) is not None else stand_ins.get(m.group(1), "x"), value)


sources = {
    "k8s configmap and secret names": {**config, **{key: stand_ins[key] for key in secret_keys}},
    "compose gateway": {k: compose_default(str(v)) for k, v in services["gateway"].get("environment", {}).items()},
    "systemd unit": dict(line.split("=", 2)[1:] for line in unit.splitlines() if line.startswith("Environment=")),
}
for name, environment in sources.items():
    if not binary.exists():
        check(f"{name}: settings checked by desk-gateway settings --check", False, f"{binary} is not built")
        continue
    run = subprocess.run([str(binary), "settings", "--check"], env={"PATH": os.environ.get("PATH", ""), **environment},
                         capture_output=True, text=True)
    check(f"{name}: every setting known and valid (desk-gateway settings --check)", run.returncode == 0, run.stderr.strip())

passed = sum(results)
failed = len(results) - passed
print(f"deploy: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
