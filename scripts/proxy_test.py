"""The gateway behind docs/tls.md's nginx server block, run as it is written there (Debian's nginx, a certificate made
here; the upstream addresses, the port and the certificate's paths replaced): two gateways and a Desk emulator,
clients on their own loopback addresses (127.0.0.2, .3), every request through nginx with curl over TLS and HTTP/2.
Checks a customer's journey with an Idempotency-Key replay across both gateways, gzip for those asking and its weak
ETag's 304, reports equal to the gateways' own answers, the client's address behind the proxy (the sign-in rate
limit per address, a forged X-Forwarded-For ignored), the report page's Secure cookie, and /livez kept private.
Usage: proxy_test.py ADMIN_CONNINFO. Prints one line per check and 'proxy: N passed, N failed'."""
import base64
import gzip
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

from testlib import call, check, psql, summary, terminate, wait_ready

root = pathlib.Path(__file__).resolve().parent.parent
admin = sys.argv[1]
database = f"proxy_{os.getpid()}"
conninfo = admin.replace("dbname=postgres", f"dbname={database}")
ports = [int(os.environ.get("PROXY_GATEWAY_PORT", "18371")), int(os.environ.get("PROXY_GATEWAY_PORT", "18371")) + 1]
emulator_port = int(os.environ.get("PROXY_EMULATOR_PORT", "19371"))
nginx_port = int(os.environ.get("PROXY_NGINX_PORT", "18443"))
server_name = "gateway.example.com"
out = root / ".build" / "proxy"
session_key = base64.b64encode(os.urandom(32)).decode()


def nginx_block():
    """The first nginx block of docs/tls.md with this test's addresses, each replacement checked to have happened."""
    text = (root / "docs/tls.md").read_text()
    block = re.search(r"```nginx\n(.*?)```", text, re.S).group(1)
    replacements = [
        ("server 10.0.0.11:8080; server 10.0.0.12:8080;", f"server 127.0.0.1:{ports[0]}; server 127.0.0.1:{ports[1]};"),
        ("listen 443 ssl http2;", f"listen 127.0.0.1:{nginx_port} ssl http2;"),
        (f"/etc/letsencrypt/live/{server_name}/fullchain.pem", str(out / "cert.pem")),
        (f"/etc/letsencrypt/live/{server_name}/privkey.pem", str(out / "key.pem")),
    ]
    for old, new in replacements:
        if block.count(old) != 1:
            raise RuntimeError(f"docs/tls.md's nginx block no longer has {old!r} once")
        block = block.replace(old, new)
    return block


def start_nginx():
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={server_name}",
                    "-addext", f"subjectAltName=DNS:{server_name}", "-keyout", str(out / "key.pem"), "-out", str(out / "cert.pem")],
                   check=True, capture_output=True)
    temp = "\n".join(f"    {kind}_temp_path {out}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    (out / "nginx.conf").write_text(f"""{"user root;" if os.geteuid() == 0 else ""}
daemon off;
worker_processes 1;
pid {out}/nginx.pid;
error_log {out}/error.log warn;
events {{ worker_connections 256; }}
http {{
    log_format upstreams '$request $status upstream="$upstream_addr"';
    access_log {out}/access.log upstreams;
{temp}
{nginx_block()}
}}
""")
    process = subprocess.Popen(["nginx", "-p", str(out), "-e", str(out / "error.log"), "-c", str(out / "nginx.conf")],
                               stdout=open(out / "nginx.out", "w"), stderr=subprocess.STDOUT)
    deadline = time.time() + 20
    while time.time() < deadline and process.poll() is None:
        if subprocess.run(["curl", "-s", "-o", "/dev/null", "--cacert", str(out / "cert.pem"), "--resolve",
                           f"{server_name}:{nginx_port}:127.0.0.1", f"https://{server_name}:{nginx_port}/"]).returncode == 0:
            return process
        time.sleep(0.2)
    raise RuntimeError("nginx did not start: " + (out / "nginx.out").read_text()[-1000:] + (out / "error.log").read_text()[-1000:])


class Answer:
    def __init__(self, status, version, headers, body):
        self.status, self.version, self.headers, self.body = status, version, headers, body

    def header(self, name):
        values = self.headers.get(name.lower())
        return values[-1] if values else None

    def json(self):
        body = gzip.decompress(self.body) if self.header("content-encoding") == "gzip" else self.body
        return json.loads(body)


def curl(url, method="GET", headers=None, body=None, source=None):
    """One request with curl (TLS checked against the test's certificate, HTTP/2 where offered); the body as sent."""
    command = ["curl", "-s", "--http2", "--cacert", str(out / "cert.pem"), "--resolve", f"{server_name}:{nginx_port}:127.0.0.1",
               "-X", method, "-D", str(out / "headers"), "-o", str(out / "body"), "-w", "%{http_code} %{http_version}"]
    if source:
        command += ["--interface", source]
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}: {value}"]
    if body is not None:
        data = body if isinstance(body, str) else json.dumps(body)
        command += ["--data-binary", "@-"]
        if not isinstance(body, str):
            command += ["-H", "Content-Type: application/json"]
    (out / "body").unlink(missing_ok=True)
    (out / "headers").unlink(missing_ok=True)
    done = subprocess.run(command + [url], input=(data if body is not None else "").encode(), capture_output=True, timeout=30)
    status, version = (done.stdout.decode().split() + ["0", "0"])[:2]
    headers_seen = {}
    for line in (out / "headers").read_text(errors="replace").splitlines()[1:]:
        name, _, value = line.partition(":")
        if value:
            headers_seen.setdefault(name.strip().lower(), []).append(value.strip())
    body_file = out / "body"
    return Answer(int(status), version, headers_seen, body_file.read_bytes() if body_file.exists() else b"")


def public(path, **options):
    return curl(f"https://{server_name}:{nginx_port}{path}", **{"source": "127.0.0.2", **options})


def direct(path, **options):
    return curl(f"http://127.0.0.1:{ports[0]}{path}", **options)


def control(path, body=None):
    return call("POST", f"http://127.0.0.1:{emulator_port}/emulator{path}", body or {})


def gateway_env(port):
    env = {k: v for k, v in os.environ.items() if not k.startswith("DESK_")}
    env.update({
        "DATABASE_URL": conninfo, "PORT": str(port), "HOST": "127.0.0.1", "DESK_BASE_URL": f"http://127.0.0.1:{emulator_port}",
        "DESK_APP_ID": "emulated-app", "DESK_API_TOKEN": "emulator-api-token", "DESK_WEBHOOK_SECRET": "proxy-secret",
        "SESSION_KEY": session_key, "SYNC_INTERVAL_S": "0", "LOG_LEVEL": "info", "REPORT_TIME_ZONES": "UTC",
        "REPORT_CACHE_S": "0", "ASSETS_DIR": str(root), "TRUSTED_PROXIES": "127.0.0.1", "HTTP_PER_ADDRESS_CONNECTION_LIMIT": "0",
        # One sign-in per client address and instance: met at the second, as the proxy forwards the address.
        "SIGNIN_RATE_LIMIT_BURST": "1", "SIGNIN_RATE_LIMIT_PER_MINUTE": "1",
    })
    return env


def journey():
    """A customer through nginx: signs in, creates tickets (one replayed by its key) on both gateways, rates three."""
    control("/customers", {"sendbirdId": "proxied", "accessToken": "t", "displayName": "Proxied"})
    signed = public("/v1/sessions", method="POST", body={"userId": "proxied", "accessToken": "t"}, source="127.0.0.4")
    check("sign in through nginx over HTTP/2", signed.status == 201 and signed.version == "2", f"{signed.status} {signed.version} {signed.body[:200]}")
    if signed.status != 201:
        return None
    auth = {"Authorization": f"Bearer {signed.json()['token']}"}
    tickets = []
    for n in range(8):
        made = public("/v1/tickets", method="POST", body={"title": f"through nginx {n}", "userName": "Proxied"},
                      headers={**auth, "Idempotency-Key": f"proxied-{n}"})
        if made.status != 201:
            check(f"create ticket {n}", False, made.body[:300])
            return None
        tickets.append(made.json()["id"])
    again = public("/v1/tickets", method="POST", body={"title": "through nginx 0", "userName": "Proxied"},
                   headers={**auth, "Idempotency-Key": "proxied-0"})
    check("eight tickets made, the repeated key answered from its first answer",
          again.status == 201 and again.header("idempotent-replayed") == "true" and again.json()["id"] == tickets[0],
          f"{again.status} {again.headers}")
    upstreams = set(re.findall(r'upstream="([^"-][^"]*)"', (out / "access.log").read_text()))
    check("nginx spread the requests over both gateways", len(upstreams) == 2, upstreams)
    for n, ticket in enumerate(tickets[:3]):
        control(f"/tickets/{ticket}/customer-message")
        control(f"/tickets/{ticket}/assign", {"agentId": 501 + n})
        control(f"/tickets/{ticket}/close")
        _, sent = control(f"/tickets/{ticket}/csat-request")
        rated = public(f"/v1/tickets/{ticket}/feedback", method="POST", body={"messageId": sent["messageId"], "score": 3 + n, "comment": None},
                       headers=auth)
        check(f"rating {n + 1} through nginx", rated.status == 200, rated.body[:300])
    return auth


def compression(auth):
    """gzip for clients asking, the weak ETag nginx makes of the gateway's strong one, and its 304."""
    plain = public("/v1/tickets?status=all&limit=50", headers=auth)
    packed = public("/v1/tickets?status=all&limit=50", headers={**auth, "Accept-Encoding": "gzip"})
    check("a ticket list is gzipped for a client asking, and only then",
          packed.header("content-encoding") == "gzip" and plain.header("content-encoding") is None
          and "Accept-Encoding" in (packed.header("vary") or ""), f"{packed.headers} {plain.headers}")
    check("the gzipped list is the list", packed.json()["items"] == plain.json()["items"] and len(packed.body) < len(plain.body) / 2,
          f"{len(packed.body)} of {len(plain.body)} bytes")
    strong, weak = plain.header("etag") or "", packed.header("etag") or ""
    check("nginx marks the gzipped answer's ETag weak", re.fullmatch(r'"[0-9a-f]{16}"', strong) is not None and weak == "W/" + strong,
          f"{strong} {weak}")
    revalidated = public("/v1/tickets?status=all&limit=50", headers={**auth, "Accept-Encoding": "gzip", "If-None-Match": weak})
    check("the weak tag sent back is answered 304", revalidated.status == 304 and revalidated.body == b"", revalidated.status)
    spec = public("/openapi.yaml", headers={"Accept-Encoding": "gzip"})
    check("openapi.yaml is gzipped", spec.status == 200 and spec.header("content-encoding") == "gzip"
          and gzip.decompress(spec.body) == (root / "openapi.yaml").read_bytes(), spec.headers)
    problem = public("/v1/tickets/999999999", headers=auth)
    check("a problem passes through as application/problem+json",
          problem.status == 404 and (problem.header("content-type") or "").startswith("application/problem+json")
          and problem.json()["status"] == 404, problem.body[:200])


def reports(key):
    """Reports through nginx equal a gateway's own answer, and count the three ratings."""
    deadline = time.time() + 30
    through = None
    while time.time() < deadline:
        through = public("/v1/reports/csat?groupBy=agent&tz=UTC&bucket=week", headers={"X-API-Key": key, "Accept-Encoding": "gzip"})
        if through.status == 200 and through.json().get("totals", {}).get("responses") == 3:
            break
        time.sleep(0.3)
    own = direct("/v1/reports/csat?groupBy=agent&tz=UTC&bucket=week", headers={"X-API-Key": key})
    check("a weekly report through nginx equals the gateway's own and counts each rating once",
          through.status == own.status == 200 and through.json() == own.json() and own.json().get("totals", {}).get("responses") == 3,
          f"{through.status} {own.status} {through.body[:200]}")


def client_addresses():
    """The sign-in limit (one per address and instance here; nginx takes the two instances in turn) counts the client
    nginx saw, not nginx."""
    sign_in = {"userId": "proxied", "accessToken": "t"}
    # An address of its own: the report page's sign-ins from 127.0.0.2 count against the same limit.
    statuses = [public("/v1/sessions", method="POST", body=sign_in, source="127.0.0.5").status for _ in range(4)]
    check("a client address's second sign-in on each instance is refused", statuses == [201, 201, 429, 429], statuses)
    forged = public("/v1/sessions", method="POST", body=sign_in, headers={"X-Forwarded-For": "198.51.100.7"}, source="127.0.0.5")
    check("a forged X-Forwarded-For does not make another client", forged.status == 429, forged.status)
    other = public("/v1/sessions", method="POST", body=sign_in, source="127.0.0.3")
    check("another client address behind the same nginx signs in", other.status == 201, other.status)


def report_page(key):
    """Signing in to the report page through nginx: the Origin a browser sends (this port), a Secure cookie."""
    form = "key=" + key
    origin = f"https://{server_name}:{nginx_port}"
    through = public("/reports/sign-in", method="POST", body=form,
                     headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": origin})
    cookie = through.header("set-cookie") or ""
    check("the report page signs in through nginx with a Secure cookie", through.status == 303 and "; Secure" in cookie
          and cookie.startswith("dg_reports="), f"{through.status} {cookie}")
    plain = direct("/reports/sign-in", method="POST", body=form,
                   headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": f"http://127.0.0.1:{ports[0]}"})
    check("directly over plain HTTP the cookie is not Secure", plain.status == 303 and "Secure" not in (plain.header("set-cookie") or ""),
          plain.headers)
    elsewhere = public("/reports/sign-in", method="POST", body=form,
                       headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": "https://evil.example"})
    check("a form posted from another site is still refused", elsewhere.status == 403, elsewhere.status)
    token = cookie.split(";")[0]
    page = public("/reports?tz=UTC", headers={"Cookie": token, "Accept-Encoding": "gzip"})
    html = gzip.decompress(page.body) if page.header("content-encoding") == "gzip" else page.body
    check("the report page is served through nginx, gzipped", page.status == 200 and page.header("content-encoding") == "gzip"
          and b'id="card-responses"' in html, f"{page.status} {page.headers}")


def main():
    processes = []
    psql(admin, f"CREATE DATABASE {database}")
    nginx = start_nginx()
    try:
        emulator_log = open(out / "emulator.log", "w")
        processes.append(subprocess.Popen([str(root / ".build/debug/desk-emulator"), "--port", str(emulator_port), "--demo"],
                                          stdout=emulator_log, stderr=emulator_log))
        for index, port in enumerate(ports):
            log = open(out / f"gateway-{index}.log", "w")
            processes.append(subprocess.Popen([str(root / ".build/debug/desk-gateway"), "serve"], env=gateway_env(port), stdout=log, stderr=log))
        ready = [wait_ready(f"http://127.0.0.1:{port}") for port in ports]
        check("two gateways ready behind nginx", all(ready), ready)
        if not all(ready):
            return summary("proxy")
        hidden, own = public("/livez"), direct("/livez")
        check("/livez is not served through nginx, only directly", hidden.status == 404 and own.status == 200, f"{hidden.status} {own.status}")
        auth = journey()
        if auth is None:
            return summary("proxy")
        compression(auth)
        created = subprocess.run([str(root / ".build/debug/desk-gateway"), "api-key", "create", "--scope", "reports", "--name", "proxied"],
                                 env=gateway_env(ports[0]), capture_output=True, text=True, timeout=60)
        key = next((line.split()[1] for line in created.stdout.splitlines() if line.startswith("key")), None)
        check("an API key for reports", key is not None, created.stderr[-300:])
        if key:
            reports(key)
            report_page(key)
        client_addresses()
    finally:
        for process in processes:
            terminate(process)
        terminate(nginx)
        psql(admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return summary("proxy")


if __name__ == "__main__":
    sys.exit(main())
