"""The alerts and the dashboard against a real Prometheus (Debian's prometheus): it scrapes a live gateway (debug
build, embedded Desk emulator, real PostgreSQL) every second while a short load runs; then every alert expression and
every dashboard panel query is evaluated through Prometheus's HTTP API: each must evaluate without error, each panel
query must return data, and each alert's measured side (the expression left of its threshold) must return data.
Usage: prometheus_test.py ADMIN_CONNINFO. Prints one line per check and 'prometheus: N passed, N failed'."""
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import yaml

from testlib import call, check, psql, reports_key, summary, terminate, wait_ready

root = pathlib.Path(__file__).resolve().parent.parent
admin = sys.argv[1]
database = f"prometheus_{os.getpid()}"
port = int(os.environ.get("PROM_GATEWAY_PORT", "18520"))
desk_port = int(os.environ.get("PROM_EMULATOR_PORT", "19520"))
prom_port = int(os.environ.get("PROM_PORT", "18590"))
out = root / ".build" / "prometheus-test"
gateway = f"http://127.0.0.1:{port}"
# Scraped, as deploy/prometheus/prometheus.yml says, on the admin port (ADMIN_PORT).
admin_port = port + 1
admin_url = f"http://127.0.0.1:{admin_port}"
desk = f"http://127.0.0.1:{desk_port}"
prometheus = f"http://127.0.0.1:{prom_port}"


def query(expr):
    url = f"{prometheus}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        return json.loads(error.read() or b"{}") or {"status": "error", "error": str(error)}


runbook_anchors = {re.sub(r"[^a-z0-9 -]", "", line[3:].strip().lower()).replace(" ", "-")
                   for line in (root / "docs/runbooks.md").read_text().splitlines() if line.startswith("## ")}


def measured_side(expr):
    """The expression an alert compares with its threshold (the part before the last comparison)."""
    flat = " ".join(expr.split())
    match = re.match(r"^(.*?)\s*(==|>|<|>=|<=|!=)\s*[0-9.]+$", flat)
    return match.group(1) if match else flat


def load(key):
    _, session = call("POST", f"{gateway}/v1/sessions", {"userId": "demo-customer", "accessToken": "demo-token"})
    auth = {"Authorization": f"Bearer {session['token']}"}
    for index in range(12):
        _, ticket = call("POST", f"{gateway}/v1/tickets", {"title": f"prom {index}", "userName": "P"}, auth)
        for _ in range(3):
            call("GET", f"{gateway}/v1/tickets/{ticket['id']}", headers=auth)
        call("POST", f"{desk}/emulator/tickets/{ticket['id']}/customer-message", {"text": "hi"})
        call("POST", f"{desk}/emulator/tickets/{ticket['id']}/assign", {"agentId": 501})
        time.sleep(0.2)
        call("POST", f"{gateway}/v1/tickets/{ticket['id']}/close", {}, auth)
    call("GET", f"{gateway}/v1/tickets?status=all", headers=auth)
    call("GET", f"{gateway}/v1/nowhere", headers=auth)
    for _ in range(5):
        call("GET", f"{admin_url}/readyz")
    # Reports from the rollups (UTC is in REPORT_TIME_ZONES by default) and from raw ratings (Denver is not), each
    # computed anew: the cache keys on the parameters.
    for days in range(3):
        for zone in ("UTC", "America/Denver"):
            call("GET", f"{gateway}/v1/reports/csat?groupBy=agent&tz={zone}&from=2026-01-01&to=2026-01-{days + 2:02d}",
                 headers={"X-API-Key": key})


def main():
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    psql(admin, f"CREATE DATABASE {database}")
    env = {k: v for k, v in os.environ.items() if k not in ("DESK_BASE_URL", "DESK_API_TOKEN", "DESK_WEBHOOK_SECRET")}
    env.update({
        "DATABASE_URL": admin.replace("dbname=postgres", f"dbname={database}"), "HOST": "127.0.0.1", "PORT": str(port), "ADMIN_PORT": str(admin_port),
        "DESK_EMULATOR_PORT": str(desk_port), "DESK_EMULATOR_STATE": "memory", "SYNC_INTERVAL_S": "2",
        "HOUSEKEEPING_INTERVAL_S": "2", "RETENTION_OUTBOX_DAYS": "0", "RETENTION_WEBHOOK_DAYS": "0",
        "LOG_LEVEL": "warning", "ASSETS_DIR": str(root),
    })
    gw = subprocess.Popen([str(root / ".build/debug/desk-gateway"), "serve"], env=env,
                          stdout=open(out / "gateway.log", "w"), stderr=subprocess.STDOUT)
    config = yaml.safe_load((root / "deploy/prometheus/prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    config["rule_files"] = [str(root / "deploy/prometheus/alerts.yml")]
    config["scrape_configs"][0]["static_configs"] = [{"targets": [f"127.0.0.1:{admin_port}"]}]
    (out / "prometheus.yml").write_text(yaml.safe_dump(config))
    prom = subprocess.Popen(["prometheus", f"--config.file={out / 'prometheus.yml'}", f"--storage.tsdb.path={out / 'data'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"],
                            stdout=open(out / "prometheus.log", "w"), stderr=subprocess.STDOUT)
    try:
        check("the gateway is ready (admin port)", wait_ready(admin_url, 120, gw))
        deadline = time.time() + 60
        while time.time() < deadline:
            result = query('up{job="desk-gateway"}')
            if result.get("status") == "success" and result["data"]["result"] and result["data"]["result"][0]["value"][1] == "1":
                break
            time.sleep(0.5)
        check("Prometheus scrapes the gateway", query('up{job="desk-gateway"}')["data"]["result"][0]["value"][1] == "1")
        key, errors = reports_key(env, "prometheus")
        check("a reports key for the dashboard's report panels", (key or "").startswith("dgk_"), errors)
        load(key)
        time.sleep(12)   # scrapes, a sync and a housekeeping pass, and enough samples for 1m rates
        rules = yaml.safe_load((root / "deploy/prometheus/alerts.yml").read_text())
        recorded = [rule for group in rules["groups"] for rule in group["rules"] if "record" in rule]
        alerts = [rule for group in rules["groups"] for rule in group["rules"] if "alert" in rule]
        # The SLO's recorded series, as Prometheus evaluated them from the gateway's own metrics.
        for rule in recorded:
            result = query(rule["record"])
            check(f"recording rule {rule['record']}: has data", result.get("status") == "success" and result["data"]["result"],
                  json.dumps(result)[:200])
        for rule in alerts:
            full = query(rule["expr"])
            check(f"alert {rule['alert']}: evaluates", full.get("status") == "success", full.get("error", ""))
            if rule["expr"].startswith("absent("):
                continue
            # A burn-rate alert compares recorded series: each must have data; any other alert its measured side.
            names = sorted(set(re.findall(r"desk_gateway:[a-z_:0-9]+", rule["expr"])))
            for expression in names or [measured_side(rule["expr"])]:
                side = query(expression)
                check(f"alert {rule['alert']}: {expression[:60]} has data", side.get("status") == "success" and side["data"]["result"],
                      expression + " " + json.dumps(side)[:200])
            anchor = rule["annotations"]["runbook_url"].split("#", 1)[1]
            check(f"alert {rule['alert']}: its runbook section exists", anchor in runbook_anchors, anchor)
        loaded = query("ALERTS")
        check("Prometheus loaded the rule file", loaded.get("status") == "success")
        dashboard = json.loads((root / "deploy/grafana/desk-gateway.json").read_text())
        rows = [panel["title"] for panel in dashboard["panels"] if panel["type"] == "row"]
        check("the dashboard is in rows (API, dependencies, background work, reports, the process)", len(rows) == 5, str(rows))
        variables = {v["name"] for v in dashboard["templating"]["list"]}
        check("the dashboard has job and instance variables", {"job", "instance"} <= variables, str(variables))
        check("the dashboard's job and instance variables find the gateway",
              query(f'group by (job, instance) (desk_gateway_build_info{{job="desk-gateway"}})')["data"]["result"] != [])
        for panel in dashboard["panels"]:
            if panel["type"] == "row":
                continue
            check(f"panel '{panel['title']}': has a description and a unit",
                  bool(panel.get("description")) and bool(panel["fieldConfig"]["defaults"].get("unit")))
            for target in panel["targets"]:
                # Grafana's variables as a dashboard opened on this job with every instance would set them.
                expr = target["expr"].replace('"$job"', '"desk-gateway"').replace('"$instance"', '".*"')
                result = query(expr)
                check(f"panel '{panel['title']}' {target['refId']}: returns data",
                      result.get("status") == "success" and result["data"]["result"], expr + " " + json.dumps(result)[:200])
        # The load's three UTC reports read 2, 4 and 4 blocks (their ranges and the ones before them).
        per_report = query('sum(rate(report_rollup_blocks_total[5m])) / sum(rate(report_computations_total{source="rollup"}[5m]))')
        value = float(per_report["data"]["result"][0]["value"][1]) if per_report.get("data", {}).get("result") else 0
        check("rollup blocks per report: what the load's reports read (10 over 3)", 3.2 < value < 3.5, json.dumps(per_report)[:200])
    finally:
        for process in (prom, gw):
            terminate(process)
        psql(admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return summary("prometheus")


if __name__ == "__main__":
    sys.exit(main())
