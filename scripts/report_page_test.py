"""The report page in a real browser: headless Chromium (Debian's chromium + chromium-driver) against a live gateway
(debug build, a real PostgreSQL with seeded ratings and their rollups). Signs in with a reports key, reads the summary,
changes filters through the form, removes one with a click, follows a drill-down and a next page, downloads the CSVs,
and checks every number it reads from the DOM against the JSON API for the same filters. A wrong key, a customer's
token and a revoked key are refused. Fails on any console error; saves a screenshot of each page under
.build/report-page/.
Usage: report_page_test.py ADMIN_CONNINFO. Prints one line per check and 'report page: N passed, N failed'."""
import csv
import io
import json
import os
import pathlib
import subprocess
import sys
import time
import urllib.parse
import urllib.request

from testlib import call, check, psql, summary, terminate, wait_ready
from webdriver import Browser

root = pathlib.Path(__file__).resolve().parent.parent
admin = sys.argv[1]
database = f"report_page_{os.getpid()}"
out = root / ".build" / "report-page"
downloads = out / "downloads"
port = int(os.environ.get("REPORT_PAGE_PORT", "18330"))
emulator_port = port + 1000
gateway = f"http://127.0.0.1:{port}"
conninfo = admin.replace("dbname=postgres", f"dbname={database}")

# Deterministic ratings: 12 agents (one with a hostile name) in 4 teams, 120 days, some days without ratings.
SEED = """
SELECT setseed(0.7);
TRUNCATE csat_ratings, csat_requests, csat_detail_blocks, csat_blocks, report_zones;
INSERT INTO teams (id, key, name) SELECT 200 + t, 'team-' || t, 'Team ' || t FROM generate_series(1, 4) AS t
ON CONFLICT (id) DO UPDATE SET name = EXCLUDED.name;
INSERT INTO agents (id, display_name) SELECT 2000 + a, CASE WHEN a = 7 THEN '<b>Bold</b> & "Co"' ELSE 'Agent ' || a END
  FROM generate_series(1, 12) AS a ON CONFLICT (id) DO UPDATE SET display_name = EXCLUDED.display_name;
INSERT INTO csat_ratings (ticket_id, message_id, score, comment, agent_id, team_id, channel_type, priority, rated_at, source)
SELECT 700000 + n, 1, (ARRAY[1, 2, 3, 4, 4, 5, 5, 5])[1 + floor(random() * 8)::int],
       CASE WHEN n % 5 = 0 THEN 'comment <i>' || n || '</i>' END,
       2000 + 1 + n % 12, 200 + 1 + (n % 12) % 4,
       (ARRAY['SENDBIRD_JAVASCRIPT', 'SENDBIRD_IOS', 'SENDBIRD_ANDROID'])[1 + n % 3],
       (ARRAY['LOW', 'MEDIUM', 'HIGH', 'URGENT'])[1 + (n / 3) % 4],
       date_trunc('day', now()) - (floor(random() * 120) || ' days')::interval + interval '12 hours', 'sync'
  FROM generate_series(1, 3000) AS n;
DELETE FROM csat_ratings WHERE rated_at::date IN (current_date - 3, current_date - 11);
INSERT INTO csat_requests (ticket_id, message_id, agent_id, team_id, channel_type, priority, requested_at)
SELECT ticket_id, message_id, agent_id, team_id, channel_type, priority, rated_at - interval '1 hour' FROM csat_ratings;
ANALYZE csat_ratings;
"""


def start_gateway():
    env = {k: v for k, v in os.environ.items() if k not in ("DESK_BASE_URL", "DESK_API_TOKEN", "DESK_WEBHOOK_SECRET")}
    env.update({"DATABASE_URL": conninfo, "HOST": "127.0.0.1", "PORT": str(port), "DESK_EMULATOR_PORT": str(emulator_port),
                "SYNC_INTERVAL_S": "0", "REPORT_TIME_ZONES": "UTC,Asia/Kolkata",
                "LOG_LEVEL": "info", "ASSETS_DIR": str(root), "REPORT_CACHE_S": "0"})
    log = open(out / "gateway.log", "a")
    return subprocess.Popen([str(root / ".build/debug/desk-gateway"), "serve"], env=env, stdout=log, stderr=log)


def cli(*args):
    env = dict(os.environ, DATABASE_URL=conninfo, ASSETS_DIR=str(root))
    return subprocess.run([str(root / ".build/debug/desk-gateway"), *args], env=env, check=True, capture_output=True, text=True).stdout


def new_key(name):
    for line in cli("api-key", "create", "--scope", "reports", "--name", name).splitlines():
        if line.startswith("key"):
            return line.split()[1]
    raise RuntimeError("no key printed")


def api(path, key):
    status, body = call("GET", f"{gateway}{path}", headers={"Authorization": f"Bearer {key}"})
    if status != 200:
        raise RuntimeError(f"{path}: {status} {body}")
    return body


def number(value):
    """The JSON API's spelling of a number, as the page writes it into its data attributes."""
    if value is None:
        return ""
    return json.dumps(value)


def api_query(url):
    """The JSON API's filters for a page URL (the page resolves presets into dates in its 'Period' line)."""
    return [(k, v) for k, v in urllib.parse.parse_qsl(urllib.parse.urlparse(url).query)
            if k in ("agentId", "teamId", "channelType", "priority", "score", "tz")]


def page_dates(browser):
    return browser.run("return [document.querySelector('input[name=from]').value, document.querySelector('input[name=to]').value]")


def compare_summary(browser, key, label):
    """Cards, agents and teams tables and the trend's total against the JSON API for the page's own filters."""
    start, end = page_dates(browser)
    query = urllib.parse.urlencode([("from", start), ("to", end)] + api_query(browser.run("return location.href")))
    agents = api(f"/v1/reports/csat?groupBy=agent&{query}", key)
    teams = api(f"/v1/reports/csat?groupBy=team&{query}", key)
    totals = agents["totals"]
    cards = browser.run("return Object.fromEntries([...document.querySelectorAll('.card')].map(c => [c.id, c.dataset.value]))")
    check(f"{label}: the cards are the API's totals",
          cards == {"card-responses": str(totals["responses"]), "card-average": number(totals["averageScore"]),
                    "card-csat": number(totals["csatPercent"]), "card-rate": number(totals["responseRate"])},
          f"{cards} vs {totals}")
    for table, report in (("agents", agents), ("teams", teams)):
        rows = browser.run(f"return [...document.querySelectorAll('#table-{table} tbody tr')].map(r => [r.dataset.id, "
                           "r.dataset.responses, r.dataset.average, r.dataset.csat])")
        expected = sorted([str(r["id"] or 0), str(r["responses"]), number(r["averageScore"]), number(r["csatPercent"])]
                          for r in report["rows"])
        check(f"{label}: the {table} table is the API's rows", sorted(rows) == expected, f"{rows[:3]} vs {expected[:3]}")
    trend = browser.run("return [...document.querySelectorAll('#trend tbody tr')].map(r => Number(r.dataset.responses))")
    check(f"{label}: the trend's buckets add up to the total", sum(trend) == totals["responses"], f"{sum(trend)} vs {totals['responses']}")
    return agents


def main():
    out.mkdir(parents=True, exist_ok=True)
    downloads.mkdir(parents=True, exist_ok=True)
    for old in downloads.iterdir():
        old.unlink()
    (out / "gateway.log").write_text("")
    psql(admin, f"CREATE DATABASE {database}")
    gateway_process = start_gateway()
    browser = None
    try:
        check("the gateway starts", wait_ready(gateway, process=gateway_process))
        seeded = subprocess.run(["psql", conninfo, "-q", "-v", "ON_ERROR_STOP=1", "-c", SEED], capture_output=True, text=True)
        check("ratings seeded", seeded.returncode == 0, seeded.stderr)
        # The rollups of the seeded ratings are built by a restarted gateway (as after an upgrade).
        terminate(gateway_process)
        gateway_process = start_gateway()
        check("the restarted gateway builds its rollups", wait_ready(gateway, process=gateway_process))
        deadline = time.time() + 60
        while time.time() < deadline and psql(admin, "SELECT count(*) FROM report_zones WHERE backfilled_at IS NOT NULL", db=database) != "2":
            time.sleep(0.3)
        key = new_key("lead")
        revoked = new_key("former lead")
        status, session = call("POST", f"{gateway}/v1/sessions", {"userId": "demo-customer", "accessToken": "demo-token"})
        customer_token = (session or {}).get("token", "")

        browser = Browser(str(out / "chromedriver.log"), width=1280, height=1800, downloads=downloads)
        console = []

        def shot(name):
            browser.screenshot(str(out / f"{name}.png"))
            console.extend(dict(entry, step=name) for entry in browser.console())

        def sign_in(secret):
            browser.get(f"{gateway}/reports")
            browser.wait_for("return !!document.querySelector('#key')")
            browser.type("#key", secret)
            browser.run("window.stale = true")
            browser.click("form[action='/reports/sign-in'] button")
            browser.wait_for("return !window.stale && document.readyState === 'complete' && !!document.querySelector('header.top')")

        # Refused: a wrong key, a customer's token, a revoked key.
        sign_in("dgk_not-a-key")
        check("a wrong key is refused", browser.text(".errors") and "unknown" in browser.text(".errors"), browser.text("main"))
        shot("01-wrong-key")
        sign_in(customer_token)
        check("a customer token is refused", "Customer sessions" in (browser.text(".errors") or ""), browser.text(".errors"))
        cli("api-key", "revoke", psql(admin, "SELECT id FROM api_keys WHERE name = 'former lead'", db=database))
        sign_in(revoked)
        check("a revoked key is refused", "revoked" in (browser.text(".errors") or ""), browser.text(".errors"))

        # The summary.
        sign_in(key)
        check("a reports key opens the summary", browser.wait_for("return !!document.querySelector('#card-responses')"), browser.text("main"))
        shot("02-summary")
        check("no script runs on the page", browser.run("return document.scripts.length") == 0)
        check("a hostile agent name is shown as text",
              browser.run("return [...document.querySelectorAll('#table-agents td a')].some(a => a.textContent === '<b>Bold</b> & \"Co\"')"))
        compare_summary(browser, key, "30 days")
        gaps = browser.run("return [...document.querySelectorAll('#trend tbody tr')].filter(r => r.dataset.average === '').length")
        check("days without ratings are gaps in the trend", gaps >= 2, gaps)

        # Filters through the form: a preset and two scores; they land in the URL.
        browser.select("select[name=range]", "90d")
        browser.run("document.querySelector('input[name=score][value=\"4\"]').checked = true;"
                    "document.querySelector('input[name=score][value=\"5\"]').checked = true;"
                    "document.querySelector('input[name=channelType][value=\"SENDBIRD_IOS\"]').checked = true;")
        browser.click("form.filters button[type=submit]")
        browser.wait_for("return location.search.includes('score=5')")
        url = browser.run("return location.href")
        check("the filters are in the URL, canonical", "range=90d" in url and "score=4" in url and "channelType=SENDBIRD_IOS" in url
              and "shownFrom" not in url and "from=" not in url, url)
        shot("03-filtered")
        compare_summary(browser, key, "90 days, scores 4-5, iOS")
        # A bookmarked view opens the same.
        browser.get(url)
        check("a bookmarked view shows the same filters", browser.wait_for("return document.querySelectorAll('.chip').length === 3"))
        # One click removes a filter.
        browser.click(".chip a[aria-label='Remove Channel: SENDBIRD_IOS']")
        browser.wait_for("return !location.search.includes('channelType')")
        check("one click removes a filter", "channelType" not in browser.run("return location.href") and "score=4" in browser.run("return location.href"))
        compare_summary(browser, key, "90 days, scores 4-5")

        # Sorting by a column header (no script: a link).
        browser.click("#table-agents th a[href*='sort=average']")
        browser.wait_for("return location.search.includes('sort=average')")
        averages = browser.run("return [...document.querySelectorAll('#table-agents tbody tr')].map(r => Number(r.dataset.average))")
        check("sorting by average", averages == sorted(averages, reverse=True), averages)

        # The CSV of the agents table: exactly the rows on screen, in their order.
        ids = browser.run("return [...document.querySelectorAll('#table-agents tbody tr')].map(r => r.dataset.id)")
        browser.click("section[aria-label=Agents] .actions a")
        csv_file = None
        for _ in range(100):
            files = [f for f in downloads.iterdir() if f.name.startswith("csat-agents") and f.suffix == ".csv"]
            if files:
                csv_file = files[0]
                break
            time.sleep(0.1)
        check("the agents CSV downloads", csv_file is not None, list(downloads.iterdir()))
        if csv_file:
            rows = list(csv.reader(io.StringIO(csv_file.read_text())))
            check("the CSV holds the rows on screen, in order", [r[0] or "0" for r in rows[1:-1]] == ids, f"{rows[:3]} vs {ids[:3]}")

        # Drill-down: an agent's responses, newest first, with the API's ticket ids; then the next page.
        first_agent = browser.run("return document.querySelector('#table-agents tbody tr').dataset.id")
        browser.click("#table-agents tbody tr td a")
        browser.wait_for("return location.pathname === '/reports/responses'")
        shot("04-responses")
        tickets = browser.run("return [...document.querySelectorAll('#responses tbody tr')].map(r => Number(r.dataset.ticket))")
        start, end = page_dates(browser)
        query = urllib.parse.urlencode([("from", start), ("to", end)] + api_query(browser.run("return location.href")))
        listed = api(f"/v1/reports/csat/responses?{query}", key)
        check("the drill-down lists the API's responses", tickets == [i["ticketId"] for i in listed["items"]] and len(tickets) > 0,
              f"{tickets[:5]} vs {[i['ticketId'] for i in listed['items']][:5]}")
        check("the drill-down keeps the agent filter", f"agentId={first_agent}" in browser.run("return location.href"))
        scores = browser.run("return [...document.querySelectorAll('#responses tbody tr')].map(r => r.dataset.score)")
        check("the drill-down keeps the score filter", set(scores) <= {"4", "5"}, scores)
        if listed.get("nextCursor"):
            browser.click("#next")
            browser.wait_for("return location.search.includes('cursor=')")
            second = browser.run("return [...document.querySelectorAll('#responses tbody tr')].map(r => Number(r.dataset.ticket))")
            more = api(f"/v1/reports/csat/responses?{query}&cursor={listed['nextCursor']}", key)
            check("the next page is the API's next page", second == [i["ticketId"] for i in more["items"]], second[:5])
            shot("05-responses-next")
        # A distribution bar opens the responses with that score.
        browser.get(f"{gateway}/reports")
        browser.click("#distribution a[data-score='1']")
        browser.wait_for("return location.pathname === '/reports/responses'")
        scores = browser.run("return [...document.querySelectorAll('#responses tbody tr')].map(r => r.dataset.score)")
        check("a distribution bar drills into its score", len(scores) > 0 and set(scores) == {"1"}, scores[:5])
        # A trend point opens the responses of its day.
        browser.get(f"{gateway}/reports")
        href = browser.run("return document.querySelector('svg.trend a.point').getAttribute('href')")
        browser.get(gateway + href)
        check("a trend point drills into its bucket", browser.wait_for("return location.pathname === '/reports/responses'")
              and "from=" in browser.run("return location.search"))
        shot("06-trend-drill")

        # Empty state: a period before any rating.
        browser.get(f"{gateway}/reports?from=2001-01-01&to=2001-01-31")
        check("an empty period says so", browser.wait_for("return !!document.querySelector('#empty')"))
        shot("07-empty")

        # Signing out ends the session.
        browser.get(f"{gateway}/reports")
        browser.click("header.top form button")
        browser.wait_for("return !!document.querySelector('#key')")
        browser.get(f"{gateway}/reports")
        check("after sign-out the page asks for a key", browser.wait_for("return !!document.querySelector('#key')"))

        console.extend(browser.console())
        # The refused sign-ins answer 401/403, which Chromium logs as network errors; nothing else may show.
        bad = [e for e in console if e.get("level") in ("SEVERE", "ERROR")
               and not (e.get("source") == "network" and ("status of 401" in e.get("message", "") or "status of 403" in e.get("message", "")))]
        check("no console errors", not bad, bad[:3])
    finally:
        if browser:
            browser.close()
        terminate(gateway_process)
        psql(admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    return summary("report page")


if __name__ == "__main__":
    sys.exit(main())
