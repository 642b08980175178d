"""The gateway behind docs/tls.md's nginx server block and its Caddyfile, each run as it is written there (Debian's
nginx and Caddy, a certificate made here; the upstream addresses, the port and the certificate replaced): two
gateways and a Desk emulator, clients on loopback addresses of their own, every request through the proxy with curl
over TLS and HTTP/2. For each proxy: a customer's journey with an Idempotency-Key replay, both instances used, gzip
for those asking and the 304 of the tag the proxy gave, a body over the gateway's limit answered with its 413
problem (and one over four times it with the proxy's same problem), reports equal to a gateway's own answer, the client's address behind the proxy (the sign-in limit per
address, a forged X-Forwarded-For ignored), the report page's Secure cookie signed in from the proxy's own origin and
port, its streamed export passed on whole, and /livez kept private.
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

from testlib import call, check, psql, reports_key, summary, terminate, wait_ready

root = pathlib.Path(__file__).resolve().parent.parent
admin = sys.argv[1]
database = f"proxy_{os.getpid()}"
conninfo = admin.replace("dbname=postgres", f"dbname={database}")
first_port = int(os.environ.get("PROXY_GATEWAY_PORT", "18371"))
ports = [first_port, first_port + 1]
emulator_port = int(os.environ.get("PROXY_EMULATOR_PORT", "19371"))
server_name = "gateway.example.com"
out = root / ".build" / "proxy"
session_key = base64.b64encode(os.urandom(32)).decode()


def docs_block(fence, replacements):
    """The first `fence` block of docs/tls.md with this test's addresses, each replacement checked to have happened."""
    block = re.search(r"```" + fence + r"\n(.*?)```", (root / "docs/tls.md").read_text(), re.S).group(1)
    for old, new in replacements:
        if block.count(old) != 1:
            raise RuntimeError(f"docs/tls.md's {fence} block no longer has {old!r} once")
        block = block.replace(old, new)
    return block


class Proxy:
    """One proxy of docs/tls.md: how it starts, the port it serves, and the client addresses its checks use."""

    def __init__(self, name, port, first_address):
        self.name, self.port, self.first_address = name, port, first_address
        self.folder = out / name
        self.instances = set()

    def address(self, n):
        return f"127.0.0.{self.first_address + n}"

    def start(self):
        self.folder.mkdir(parents=True)
        command = self.nginx() if self.name == "nginx" else self.caddy()
        process = subprocess.Popen(command, stdout=open(self.folder / "proxy.log", "w"), stderr=subprocess.STDOUT,
                                   env=dict(os.environ, HOME=str(self.folder), XDG_DATA_HOME=str(self.folder), XDG_CONFIG_HOME=str(self.folder)))
        deadline = time.time() + 20
        while time.time() < deadline and process.poll() is None:
            if subprocess.run(["curl", "-s", "-o", "/dev/null", "--cacert", str(out / "cert.pem"), "--resolve",
                               f"{server_name}:{self.port}:127.0.0.1", f"https://{server_name}:{self.port}/"]).returncode == 0:
                return process
            time.sleep(0.2)
        raise RuntimeError(f"{self.name} did not start: " + (self.folder / "proxy.log").read_text()[-2000:])

    def nginx(self):
        block = docs_block("nginx", [
            ("server 10.0.0.11:8080; server 10.0.0.12:8080;", f"server 127.0.0.1:{ports[0]}; server 127.0.0.1:{ports[1]};"),
            ("listen 443 ssl http2;", f"listen 127.0.0.1:{self.port} ssl http2;"),
            (f"/etc/letsencrypt/live/{server_name}/fullchain.pem", str(out / "cert.pem")),
            (f"/etc/letsencrypt/live/{server_name}/privkey.pem", str(out / "key.pem")),
        ])
        temp = "\n".join(f"    {kind}_temp_path {self.folder}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        (self.folder / "nginx.conf").write_text(f"""{"user root;" if os.geteuid() == 0 else ""}
daemon off;
worker_processes 1;
pid {self.folder}/nginx.pid;
error_log {self.folder}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log {self.folder}/access.log;
{temp}
{block}
}}
""")
        return ["nginx", "-p", str(self.folder), "-e", str(self.folder / "error.log"), "-c", str(self.folder / "nginx.conf")]

    def caddy(self):
        # The certificate is the test's (Caddy would fetch one from an ACME CA), and nothing else of Caddy's listens.
        block = docs_block("caddyfile", [
            (f"{server_name} {{", f"{{\n    admin off\n    auto_https off\n}}\n{server_name}:{self.port} {{\n"
                                  f"    tls {out / 'cert.pem'} {out / 'key.pem'}"),
            ("10.0.0.11:8080 10.0.0.12:8080", f"127.0.0.1:{ports[0]} 127.0.0.1:{ports[1]}"),
        ])
        (self.folder / "Caddyfile").write_text(block)
        return ["caddy", "run", "--adapter", "caddyfile", "--config", str(self.folder / "Caddyfile")]

    def get(self, path, source=0, **options):
        answer = curl(f"https://{server_name}:{self.port}{path}", source=self.address(source), **options)
        if answer.header("x-request-id"):
            self.instances.add(answer.header("x-request-id").split("-")[0])
        return answer


class Answer:
    def __init__(self, status, version, headers, body):
        self.status, self.version, self.headers, self.body = status, version, headers, body

    def header(self, name):
        values = self.headers.get(name.lower())
        return values[-1] if values else None

    def decoded(self):
        """The body as the gateway sent it: unzipped when the proxy compressed it."""
        return gzip.decompress(self.body) if self.header("content-encoding") == "gzip" else self.body

    def json(self):
        return json.loads(self.decoded())


def curl(url, method="GET", headers=None, body=None, source=None):
    """One request with curl (over TLS: checked against the test's certificate, HTTP/2 where offered; else plain
    HTTP/1.1); the body as sent."""
    command = ["curl", "-s", "-X", method, "-D", str(out / "headers"), "-o", str(out / "body"), "-w", "%{http_code} %{http_version}"]
    if url.startswith("https://"):
        command += ["--http2", "--cacert", str(out / "cert.pem"), "--resolve", f"{server_name}:{url.split(':')[2].split('/')[0]}:127.0.0.1"]
    if source:
        command += ["--interface", source]
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}: {value}"]
    data = b""
    if body is not None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        command += ["--data-binary", "@-"] + ([] if isinstance(body, str) else ["-H", "Content-Type: application/json"])
    (out / "body").unlink(missing_ok=True)
    (out / "headers").unlink(missing_ok=True)
    done = subprocess.run(command + [url], input=data, capture_output=True, timeout=30)
    status, version = (done.stdout.decode().split() + ["0", "0"])[:2]
    seen = {}
    if (out / "headers").exists():
        for line in (out / "headers").read_text(errors="replace").splitlines()[1:]:
            name, _, value = line.partition(":")
            if value:
                seen.setdefault(name.strip().lower(), []).append(value.strip())
    body_file = out / "body"
    return Answer(int(status), version, seen, body_file.read_bytes() if body_file.exists() else b"")


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


def journey(proxy):
    """A customer through the proxy: signs in, creates tickets (one replayed by its key), rates three."""
    user = f"{proxy.name}-customer"
    control("/customers", {"sendbirdId": user, "accessToken": "t", "displayName": user})
    signed = proxy.get("/v1/sessions", method="POST", body={"userId": user, "accessToken": "t"}, source=1)
    check(f"{proxy.name}: sign in over TLS and HTTP/2", signed.status == 201 and signed.version == "2",
          f"{signed.status} {signed.version} {signed.body[:200]}")
    if signed.status != 201:
        return None
    auth = {"Authorization": f"Bearer {signed.json()['token']}"}
    tickets = []
    for n in range(8):
        made = proxy.get("/v1/tickets", method="POST", body={"title": f"through {proxy.name} {n}", "userName": user},
                         headers={**auth, "Idempotency-Key": f"{proxy.name}-{n}"})
        if made.status != 201:
            check(f"{proxy.name}: create ticket {n}", False, made.body[:300])
            return None
        tickets.append(made.json()["id"])
    again = proxy.get("/v1/tickets", method="POST", body={"title": f"through {proxy.name} 0", "userName": user},
                      headers={**auth, "Idempotency-Key": f"{proxy.name}-0"})
    check(f"{proxy.name}: eight tickets made, a repeated key answered with its first answer",
          again.status == 201 and again.header("idempotent-replayed") == "true" and again.json()["id"] == tickets[0],
          f"{again.status} {again.headers}")
    for n, ticket in enumerate(tickets[:3]):
        control(f"/tickets/{ticket}/customer-message")
        control(f"/tickets/{ticket}/assign", {"agentId": 501 + n})
        control(f"/tickets/{ticket}/close")
        _, sent = control(f"/tickets/{ticket}/csat-request")
        rated = proxy.get(f"/v1/tickets/{ticket}/feedback", method="POST",
                          body={"messageId": sent["messageId"], "score": 3 + n, "comment": None}, headers=auth)
        check(f"{proxy.name}: rating {n + 1}", rated.status == 200, rated.body[:300])
    return auth


def compression(proxy, auth):
    """gzip for clients asking, and the tag the proxy gives a compressed answer revalidated to 304."""
    path = "/v1/tickets?status=all&limit=50"
    plain, packed = proxy.get(path, headers=auth), proxy.get(path, headers={**auth, "Accept-Encoding": "gzip"})
    check(f"{proxy.name}: a ticket list is gzipped for a client asking, and only then",
          packed.header("content-encoding") == "gzip" and plain.header("content-encoding") is None
          and "Accept-Encoding" in (packed.header("vary") or ""), f"{packed.headers} {plain.headers}")
    check(f"{proxy.name}: the gzipped list is the list", packed.json()["items"] == plain.json()["items"]
          and len(packed.body) < len(plain.body) / 2, f"{len(packed.body)} of {len(plain.body)} bytes")
    strong, given = plain.header("etag") or "", packed.header("etag") or ""
    # nginx marks a tag weak once it changed the body; Caddy 2.6 passes the gateway's tag on as it is.
    wanted = "W/" + strong if proxy.name == "nginx" else strong
    check(f"{proxy.name}: the compressed answer's tag", re.fullmatch(r'"[0-9a-f]{16}"', strong) is not None and given == wanted,
          f"{strong} {given}")
    again = proxy.get(path, headers={**auth, "Accept-Encoding": "gzip", "If-None-Match": given})
    check(f"{proxy.name}: that tag sent back is answered 304", again.status == 304 and again.body == b"", again.status)
    problem = proxy.get("/v1/tickets/999999999", headers=auth)
    check(f"{proxy.name}: a problem passes through as application/problem+json", problem.status == 404
          and (problem.header("content-type") or "").startswith("application/problem+json") and problem.json()["status"] == 404,
          problem.body[:200])
    # A body over the gateway's limit (HTTP_BODY_LIMIT_BYTES, 1 MiB) is refused by the gateway, as problem+json.
    large = proxy.get("/v1/tickets", method="POST", headers=auth,
                      body={"title": "large", "userName": "Proxied", "customFields": {"notes": "x" * 1_500_000}})
    check(f"{proxy.name}: a body over the gateway's limit is its 413 problem, not the proxy's page", large.status == 413
          and (large.header("content-type") or "").startswith("application/problem+json"), f"{large.status} {large.body[:200]}")
    # Over four times that, the gateway does not read it (nginx refuses it first; Caddy meets the closed connection):
    # the proxy's block answers the same problem.
    # Over HTTP/2 the proxy may end the stream it answered while the client is still sending, and curl then has the
    # answer's status and fields but not its body (seen once in about five runs through Caddy): an empty body passes,
    # any other must be the problem.
    huge = proxy.get("/v1/tickets", method="POST", headers=auth,
                     body={"title": "huge", "userName": "Proxied", "customFields": {"notes": "x" * 5_000_000}})
    try:
        code = huge.json().get("code") if huge.body else "payload_too_large"
    except ValueError:
        code = None
    check(f"{proxy.name}: a body over four times the limit is a 413 problem too", huge.status == 413
          and (huge.header("content-type") or "").startswith("application/problem+json")
          and code == "payload_too_large", f"{huge.status} {huge.headers} {huge.body[:200]}")
    spec = proxy.get("/openapi.yaml", headers={"Accept-Encoding": "gzip"})
    check(f"{proxy.name}: openapi.yaml served" + (", gzipped" if proxy.name == "nginx" else ""),
          spec.status == 200 and spec.decoded() == (root / "openapi.yaml").read_bytes()
          and (proxy.name != "nginx" or spec.header("content-encoding") == "gzip"), spec.headers)


def reports(proxy, key, ratings):
    """A weekly report through the proxy equals a gateway's own answer and counts every rating once."""
    path = "/v1/reports/csat?groupBy=agent&tz=UTC&bucket=week"
    deadline = time.time() + 30
    while True:
        through = proxy.get(path, headers={"X-API-Key": key, "Accept-Encoding": "gzip"})
        counted = through.json().get("totals", {}).get("responses") if through.status == 200 else None
        if counted == ratings or time.time() > deadline:
            break
        time.sleep(0.3)
    own = direct(path, headers={"X-API-Key": key})
    check(f"{proxy.name}: a weekly report equals the gateway's own and counts each of {ratings} ratings once",
          through.status == own.status == 200 and through.json() == own.json() and counted == ratings,
          f"{through.status} {own.status} {counted}")


def report_page(proxy, key, ratings):
    """Signing in to the report page through the proxy: the Origin a browser sends (this port), a Secure cookie."""
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    through = proxy.get("/reports/sign-in", method="POST", body="key=" + key,
                        headers={**form, "Origin": f"https://{server_name}:{proxy.port}"})
    cookie = through.header("set-cookie") or ""
    check(f"{proxy.name}: the report page signs in with a Secure cookie", through.status == 303 and "; Secure" in cookie
          and cookie.startswith("dg_reports="), f"{through.status} {cookie} {through.body[:200]}")
    # From an address of its own: one sign-in per address and instance is all this test's limit lets through.
    elsewhere = proxy.get("/reports/sign-in", method="POST", body="key=" + key, headers={**form, "Origin": "https://evil.example"},
                          source=4)
    check(f"{proxy.name}: a form posted from another site is still refused", elsewhere.status == 403, elsewhere.status)
    page = proxy.get("/reports?tz=UTC", headers={"Cookie": cookie.split(";")[0], "Accept-Encoding": "gzip"})
    check(f"{proxy.name}: the report page is served gzipped", page.status == 200 and page.header("content-encoding") == "gzip"
          and b'id="card-responses"' in page.decoded(), f"{page.status} {page.headers}")
    # The ratings' export is streamed by the gateway (chunked, page after page): the proxy passes it on whole.
    export = "/reports/export/responses.csv?range=30d&tz=UTC"
    streamed = proxy.get(export, headers={"Cookie": cookie.split(";")[0], "Accept-Encoding": "gzip"})
    csv = streamed.decoded()
    own = direct(export, headers={"Cookie": cookie.split(";")[0]})
    check(f"{proxy.name}: the streamed ratings export equals the gateway's own", streamed.status == own.status == 200
          and csv == own.body and own.header("transfer-encoding") == "chunked" and csv.count(b"\r\n") == 1 + ratings,
          f"{streamed.status} {own.status} {own.headers} {csv[:300]}")


def client_addresses(proxy, user):
    """The sign-in limit (one per address and instance here) counts the client the proxy saw, not the proxy."""
    sign_in = {"userId": user, "accessToken": "t"}
    seen = {}  # instance -> statuses, in order
    for _ in range(40):
        answer = proxy.get("/v1/sessions", method="POST", body=sign_in, source=2)
        seen.setdefault((answer.header("x-request-id") or "-").split("-")[0], []).append(answer.status)
        if len(seen) == 2 and all(len(statuses) >= 2 for statuses in seen.values()):
            break
    check(f"{proxy.name}: one client address signs in once on each instance, then is refused",
          len(seen) == 2 and all(statuses[0] == 201 and set(statuses[1:]) == {429} for statuses in seen.values()), seen)
    forged = proxy.get("/v1/sessions", method="POST", body=sign_in, headers={"X-Forwarded-For": "198.51.100.7"}, source=2)
    check(f"{proxy.name}: a forged X-Forwarded-For does not make another client", forged.status == 429, forged.status)
    other = proxy.get("/v1/sessions", method="POST", body=sign_in, source=3)
    check(f"{proxy.name}: another client address behind the same proxy signs in", other.status == 201, other.status)


def through(proxy, key, ratings):
    hidden = proxy.get("/livez")
    check(f"{proxy.name}: /livez is not served", b'"status"' not in hidden.body, f"{hidden.status} {hidden.body[:100]}")
    auth = journey(proxy)
    if auth is None:
        return
    compression(proxy, auth)
    reports(proxy, key, ratings)
    report_page(proxy, key, ratings)
    client_addresses(proxy, f"{proxy.name}-customer")
    check(f"{proxy.name}: both instances answered", len(proxy.instances) == 2, proxy.instances)


def main():
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={server_name}",
                    "-addext", f"subjectAltName=DNS:{server_name}", "-keyout", str(out / "key.pem"), "-out", str(out / "cert.pem")],
                   check=True, capture_output=True)
    processes = []
    psql(admin, f"CREATE DATABASE {database}")
    try:
        emulator_log = open(out / "emulator.log", "w")
        processes.append(subprocess.Popen([str(root / ".build/debug/desk-emulator"), "--port", str(emulator_port), "--demo"],
                                          stdout=emulator_log, stderr=emulator_log))
        for index, port in enumerate(ports):
            log = open(out / f"gateway-{index}.log", "w")
            processes.append(subprocess.Popen([str(root / ".build/debug/desk-gateway"), "serve"], env=gateway_env(port), stdout=log, stderr=log))
        ready = [wait_ready(f"http://127.0.0.1:{port}") for port in ports]
        check("two gateways ready", all(ready), ready)
        if not all(ready):
            return summary("proxy")
        check("/livez answers directly", direct("/livez").status == 200)
        key, errors = reports_key(gateway_env(ports[0]), "proxied")
        check("an API key for reports", key is not None, errors)
        plain = direct("/reports/sign-in", method="POST", body=f"key={key}",
                       headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": f"http://127.0.0.1:{ports[0]}"})
        check("directly over plain HTTP the report page's cookie is not Secure",
              plain.status == 303 and "Secure" not in (plain.header("set-cookie") or ""), plain.headers)
        proxies = [Proxy("nginx", int(os.environ.get("PROXY_NGINX_PORT", "18443")), 2),
                   Proxy("caddy", int(os.environ.get("PROXY_CADDY_PORT", "18444")), 12)]
        for number, proxy in enumerate(proxies):
            process = proxy.start()
            try:
                through(proxy, key or "", 3 * (number + 1))
            finally:
                terminate(process)
    finally:
        for process in processes:
            terminate(process)
        psql(admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return summary("proxy")


if __name__ == "__main__":
    sys.exit(main())
