"""deploy/systemd/desk-gateway.service run by systemd, as the unit's header says to install it: in a podman container
whose PID 1 is systemd (Debian's, added to the gateway's image), the binary and assets where the image has them, the
configuration in /etc/desk-gateway/env (0600), `useradd --system --no-create-home desk-gateway && systemctl enable
--now desk-gateway`; PostgreSQL and a Desk emulator on the host, reached by name. Checks the migration before the
start, readiness, a customer journey (Desk reached through a host name under RestrictAddressFamilies), the sandbox
the unit asks for as the process sees it (user, no capabilities, no new privileges, a read-only system, its own
/tmp), a restart after a crash, and a stop that drains within TimeoutStopSec. Needs `make image` (scripts/image.sh)
first.
Usage: systemd_test.py ADMIN_CONNINFO. Prints one line per check and 'systemd: N passed, N failed'."""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from testlib import call, check, psql, summary, terminate, customer_ticket, wait_for, wait_ready, podman as run

root = pathlib.Path(__file__).resolve().parent.parent
admin = sys.argv[1]
base = os.environ.get("IMAGE", "desk-gateway:latest")
image = "localhost/desk-gateway-systemd:test"
database = f"systemd_{os.getpid()}"
port = int(os.environ.get("SYSTEMD_TEST_PORT", "18386"))
emulator_port = int(os.environ.get("SYSTEMD_EMULATOR_PORT", "19386"))
gateway = f"http://127.0.0.1:{port}"
name = f"desk-gateway-systemd-{os.getpid()}"
out = root / ".build" / "systemd-test"


def inside(*command):
    return run("exec", name, *command)


def build():
    """The gateway's image with systemd as its init and the unit in place (the test enables it, as the header says)."""
    (out / "Containerfile").write_text(f"""FROM {base}
USER root
RUN apt-get update && apt-get install -y --no-install-recommends systemd && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY deploy/systemd/desk-gateway.service /etc/systemd/system/desk-gateway.service
STOPSIGNAL SIGRTMIN+3
ENTRYPOINT ["/lib/systemd/systemd"]
CMD []
""")
    return run("build", "--network=host", "--isolation=chroot", "--format", "docker", "-f", str(out / "Containerfile"), "-t", image,
               str(root), timeout=900)


def unit_property(prop):
    return inside("systemctl", "show", "-p", prop, "--value", "desk-gateway").stdout.strip()


def main_pid():
    return unit_property("MainPID")


def sandbox():
    """What the unit asks for, as the running process sees it."""
    pid = main_pid()
    status = inside("cat", f"/proc/{pid}/status").stdout
    user = inside("id", "-u", "desk-gateway").stdout.strip()
    check("the gateway runs as the desk-gateway user", re.search(rf"^Uid:\s+{user}\s", status, re.M) is not None and user != "0",
          status[:300])
    check("it has no capabilities, not even in its bounding set", re.search(r"^CapBnd:\s+0+$", status, re.M) is not None
          and re.search(r"^CapEff:\s+0+$", status, re.M) is not None, re.findall(r"^Cap.*$", status, re.M))
    check("it cannot gain privileges (NoNewPrivileges)", re.search(r"^NoNewPrivs:\s+1$", status, re.M) is not None)
    mounts = inside("cat", f"/proc/{pid}/mountinfo").stdout
    # A path is on the mount whose point is its longest prefix, the last one made there.
    def mount(path):
        lines = [line.split() for line in mounts.splitlines()]
        points = [line for line in lines if path == line[4] or path.startswith(line[4].rstrip("/") + "/")]
        longest = max(len(line[4]) for line in points)
        return [line for line in points if len(line[4]) == longest][-1]
    paths = ["/usr/local/bin", "/etc/desk-gateway", "/var/lib", "/usr/share/desk-gateway"]
    check("the system is read-only to it (ProtectSystem=strict)", all("ro" in mount(path)[5].split(",") for path in paths),
          {path: mount(path)[5] for path in paths})
    check("its /tmp is its own (PrivateTmp)", "systemd-private-" in mount("/tmp")[3], mount("/tmp")[3])


def journal():
    return inside("journalctl", "-u", "desk-gateway", "--no-pager", "-o", "cat").stdout


def install(pg_port):
    """systemd up as PID 1, then the unit's header: the configuration in /etc/desk-gateway/env (0600), the user, and
    enable --now. True once the gateway answers /readyz."""
    # CAP_SYS_ADMIN for systemd itself, as on a VM: without it systemd in a container leaves out the unit's mount
    # sandbox (ProtectSystem, PrivateTmp) without a word. The gateway's own bounding set stays empty (checked).
    started = run("run", "-d", "--name", name, "--network=host", "--systemd=always", "--cap-add", "SYS_ADMIN", "--no-healthcheck",
                  "--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096", "--stop-timeout", "40", image)
    check("systemd starts as the container's PID 1", started.returncode == 0 and wait_for(
        lambda: inside("systemctl", "is-system-running").stdout.strip() in ("running", "degraded"), 60), started.stderr[-500:])
    key = subprocess.run(["openssl", "rand", "-base64", "32"], capture_output=True, text=True).stdout.strip()
    (out / "env").write_text(f"DATABASE_URL=host=localhost port={pg_port} user=postgres dbname={database}\n"
                             f"PORT={port}\nHOST=127.0.0.1\nDESK_BASE_URL=http://localhost:{emulator_port}\nDESK_APP_ID=emulated-app\n"
                             "DESK_API_TOKEN=emulator-api-token\nDESK_WEBHOOK_SECRET=systemd-secret\nSYNC_INTERVAL_S=0\n"
                             f"SHUTDOWN_DRAIN_S=10\nSESSION_KEY={key}\n")
    inside("mkdir", "-p", "/etc/desk-gateway")
    run("cp", str(out / "env"), f"{name}:/etc/desk-gateway/env")
    inside("chmod", "600", "/etc/desk-gateway/env")
    installed = inside("sh", "-c", "useradd --system --no-create-home desk-gateway && systemctl enable --now desk-gateway")
    check("useradd and systemctl enable --now, as the unit's header says", installed.returncode == 0, installed.stderr[-500:])
    ready = wait_ready(gateway, seconds=90)
    check("the unit migrates first, then serves: /readyz 200", ready and "schema is current" in journal(), journal()[-1500:])
    if ready:
        check("systemd calls it active, started after its ExecStartPre", unit_property("ActiveState") == "active"
              and unit_property("ExecMainStatus") == "0" and "ExecStartPre" in inside("systemctl", "status", "desk-gateway").stdout,
              inside("systemctl", "status", "desk-gateway", "--no-pager").stdout[-800:])
    return ready


def customer():
    """A customer's sign-in and ticket; the bearer header and the ticket."""
    return customer_ticket(gateway, f"http://127.0.0.1:{emulator_port}", "systemd-user", "from systemd",
                           signed_in="sign in (Desk reached at localhost: name resolution inside the sandbox)")


def crash_and_stop(auth, ticket):
    """Restart=on-failure brings a killed gateway back; systemctl stop drains and ends it within TimeoutStopSec."""
    crashed = main_pid()
    inside("sh", "-c", f"kill -KILL {crashed}")
    back = wait_for(lambda: main_pid() not in ("0", "", crashed) and unit_property("ActiveState") == "active", 30)
    check("killed, it is started again (Restart=on-failure)", back and wait_ready(gateway, seconds=60), unit_property("NRestarts"))
    status, listed = call("GET", f"{gateway}/v1/tickets?status=all", headers=auth)
    check("after the restart the customer's session and ticket are there", status == 200
          and any(t["id"] == ticket.get("id") for t in listed["items"]), status)
    began = time.time()
    stopped = inside("systemctl", "stop", "desk-gateway")
    took = time.time() - began
    check("systemctl stop ends it cleanly within TimeoutStopSec (30 s)", stopped.returncode == 0 and took < 30
          and unit_property("ActiveState") == "inactive" and unit_property("Result") == "success",
          f"{took:.1f} s, {unit_property('Result')}, {journal()[-600:]}")
    lines = journal()
    check("it drained on SIGTERM and said so", '"msg":"stopping"' in lines and '"drain_s":"10"' in lines and '"msg":"stopped"' in lines,
          lines[-600:])


def main():
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    built = build()
    check("an image with systemd as init, from the gateway's", built.returncode == 0, (built.stdout + built.stderr)[-800:])
    if built.returncode != 0:
        return summary("systemd")
    psql(admin, f"CREATE DATABASE {database}")
    emulator = subprocess.Popen([str(root / ".build/debug/desk-emulator"), "--port", str(emulator_port), "--demo"],
                                stdout=open(out / "emulator.log", "w"), stderr=subprocess.STDOUT)
    try:
        if install(re.search(r"port=(\d+)", admin).group(1)):
            sandbox()
            crash_and_stop(*customer())
    finally:
        run("rm", "-f", "-t", "5", name)
        terminate(emulator)
        psql(admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return summary("systemd")


if __name__ == "__main__":
    sys.exit(main())
