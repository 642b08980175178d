"""The report page in a real browser: headless Chromium (Debian's chromium + chromium-driver) against a live gateway
(debug build, a real PostgreSQL with seeded ratings and their rollups). Signs in with a reports key, reads the summary,
changes filters through the form, removes one with a click, follows a drill-down and a next page, downloads the CSVs,
and checks every number it reads from the DOM against the JSON API for the same filters. A wrong key, a customer's
token and a revoked key are refused. Fails on any console error; saves a screenshot of each page under
.build/report-page/.
Usage: report_page_test.py ADMIN_CONNINFO. Prints one line per check and 'report page: N passed, N failed'."""
import csv
import datetime
import io
import json
import os
import pathlib
import subprocess
import sys
import time
import urllib.parse
import urllib.request
import zoneinfo

from testlib import call, check, psql, reports_key, summary, terminate, wait_ready
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
TRUNCATE csat_ratings, csat_requests, csat_detail_blocks, csat_blocks, csat_team_blocks, report_zones;
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


DASHBOARD = "https://dashboard.example.com/APP/desk"

# Contrast of every visible text against the background it sits on, from the page's own computed styles (WCAG 2
# relative luminance); SVG text is checked through its fill.
CONTRAST = """
const rgb = (c) => { const p = c.match(/rgba?\\(([^)]+)\\)/)[1].split(',').map(Number); return p; };
const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
                     const p = rgb(c); return 0.2126 * f(p[0]) + 0.7152 * f(p[1]) + 0.0722 * f(p[2]); };
const ratio = (a, b) => { const x = lum(a), y = lum(b); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
const background = (el) => { for (; el; el = el.parentElement) { const c = getComputedStyle(el).backgroundColor; const p = rgb(c);
                               if (p.length < 4 || p[3] > 0.99) return c; } return 'rgb(255, 255, 255)'; };
const bad = [];
for (const el of document.querySelectorAll('body *')) {
  if (![...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) continue;
  const style = getComputedStyle(el);
  if (style.visibility === 'hidden' || el.getClientRects().length === 0 || el.tagName === 'OPTION') continue;
  const inSvg = el instanceof SVGElement;
  const fg = inSvg ? style.fill : style.color;
  const r = ratio(fg, background(inSvg ? el.closest('svg').parentElement : el));
  if (r < 4.5) bad.push([el.tagName, el.className && el.className.baseVal !== undefined ? el.className.baseVal : el.className,
                         el.textContent.trim().slice(0, 30), fg, r.toFixed(2)]);
}
return bad;
"""

# Neighbouring score colours (the legend's swatches) and their contrast with each other.
PALETTE = """
const rgb = (c) => c.match(/rgba?\\(([^)]+)\\)/)[1].split(',').map(Number);
const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
                     const p = rgb(c); return 0.2126 * f(p[0]) + 0.7152 * f(p[1]) + 0.0722 * f(p[2]); };
const colours = [1, 2, 3, 4, 5].map(s => getComputedStyle(document.querySelector('#distribution i.s' + s)).backgroundColor);
return colours.slice(1).map((c, i) => { const x = lum(c), y = lum(colours[i]); return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); });
"""

# The trend's x-axis labels: each box ends before the next begins.
AXIS_OVERLAPS = """
const boxes = [...document.querySelectorAll('svg.trend text.axis')].filter(t => t.getAttribute('text-anchor') === 'middle')
  .map(t => t.getBoundingClientRect()).sort((a, b) => a.left - b.left);
return boxes.slice(1).filter((b, i) => b.left < boxes[i].right).length;
"""


def wait_download(prefix, seconds=30):
    deadline = time.time() + seconds
    while time.time() < deadline:
        files = [f for f in downloads.iterdir() if f.name.startswith(prefix) and f.suffix == ".csv"]
        if files:
            return files[0]
        time.sleep(0.1)
    return None


def start_gateway():
    env = {k: v for k, v in os.environ.items() if k not in ("DESK_BASE_URL", "DESK_API_TOKEN", "DESK_WEBHOOK_SECRET")}
    env.update({"DATABASE_URL": conninfo, "HOST": "127.0.0.1", "PORT": str(port), "DESK_EMULATOR_PORT": str(emulator_port),
                "SYNC_INTERVAL_S": "0", "REPORT_TIME_ZONES": "UTC,Asia/Kolkata",
                "LOG_LEVEL": "info", "ASSETS_DIR": str(root), "REPORT_CACHE_S": "0",
                "DESK_DASHBOARD_URL": DASHBOARD, "REPORT_CSAT_TARGET": "80", "REPORT_CSAT_TEAM_TARGETS": "201=90"})
    log = open(out / "gateway.log", "a")
    return subprocess.Popen([str(root / ".build/debug/desk-gateway"), "serve"], env=env, stdout=log, stderr=log)


def cli_env():
    """The environment of the CLI's commands: the test's database."""
    return dict(os.environ, DATABASE_URL=conninfo, ASSETS_DIR=str(root))


def cli(*args):
    return subprocess.run([str(root / ".build/debug/desk-gateway"), *args], env=cli_env(), check=True, capture_output=True, text=True).stdout


def new_key(name):
    key, errors = reports_key(cli_env(), name)
    if key is None:
        raise RuntimeError(f"no key printed: {errors}")
    return key


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

        # Comments first-class: the summary's panel, lowest scores first, the API's score-1 comments newest first.
        browser.get(f"{gateway}/reports?range=90d")
        panel = browser.run("return [...document.querySelectorAll('#comments li')].map(l => [Number(l.dataset.score), Number(l.dataset.ticket),"
                            " l.querySelector('q').textContent, l.querySelector('.muted').textContent])")
        start, end = page_dates(browser)
        lowest = api(f"/v1/reports/csat/responses?from={start}&to={end}&hasComment=true&score=1&limit=8", key)["items"]
        check("the summary shows comments, lowest score first", len(panel) == 8 and [r[0] for r in panel] == sorted(r[0] for r in panel), panel[:3])
        check("the panel's score-1 comments are the API's, newest first",
              [r[1] for r in panel if r[0] == 1] == [i["ticketId"] for i in lowest][:len([r for r in panel if r[0] == 1])] and panel[0][0] == 1,
              f"{[r[1] for r in panel][:8]} vs {[i['ticketId'] for i in lowest]}")
        check("each comment names its agent, team and date", all(r[2].startswith("comment <i>") and " · Team " in r[3] and "Agent" in r[3] or "Bold" in r[3]
                                                                for r in panel), panel[:2])
        shot("08-comments")
        # The has-comment filter on the responses page, and ticket ids linking to Desk's dashboard.
        browser.click("#all-comments")
        browser.wait_for("return location.pathname === '/reports/responses' && location.search.includes('hasComment=true')")
        rows = browser.run("return [...document.querySelectorAll('#responses tbody tr')].map(r => [Number(r.dataset.ticket), r.cells[2].textContent,"
                           " r.querySelector('a.ticket') && r.querySelector('a.ticket').getAttribute('href')])")
        listed = api(f"/v1/reports/csat/responses?from={start}&to={end}&hasComment=true", key)["items"]
        check("the has-comment filter lists the API's commented responses", [r[0] for r in rows] == [i["ticketId"] for i in listed]
              and all(r[1] for r in rows) and len(rows) > 0, rows[:3])
        check("ticket ids link to the ticket in Desk's dashboard", all(r[2] == f"{DASHBOARD}/tickets/{r[0]}" for r in rows), rows[:2])
        check("the comment filter shows as a removable chip", browser.run("return !!document.querySelector(\".chip a[aria-label='Remove With a comment']\")"))
        # The score filter with it (checkboxes through the form): only 1s with comments.
        browser.run("document.querySelector('input[name=score][value=\"1\"]').checked = true;")
        browser.click("form.filters button[type=submit]")
        browser.wait_for("return location.search.includes('score=1')")
        scores = browser.run("return [...document.querySelectorAll('#responses tbody tr')].map(r => [r.dataset.score, r.cells[2].textContent])")
        check("the score filter and the comment filter together", len(scores) > 0 and all(sc == "1" and text for sc, text in scores), scores[:3])
        # Times are shown in the chosen zone (Kolkata is UTC+05:30).
        browser.get(f"{gateway}/reports/responses?range=90d&tz=Asia/Kolkata")
        start, end = page_dates(browser)
        shown = browser.run("return [...document.querySelectorAll('#responses tbody tr')].slice(0, 5).map(r => r.cells[0].textContent)")
        first = api(f"/v1/reports/csat/responses?from={start}&to={end}&tz=Asia/Kolkata&limit=5", key)["items"]
        expected = [datetime.datetime.fromisoformat(i["ratedAt"].replace("Z", "+00:00")).astimezone(zoneinfo.ZoneInfo("Asia/Kolkata"))
                    .strftime("%Y-%m-%d %H:%M") for i in first]
        check("response times are shown in the chosen zone", shown == expected, f"{shown} vs {expected}")
        # The full export: every response matching the filters (not the page on screen), as many as the API counts.
        browser.get(f"{gateway}/reports/responses?range=90d")
        start, end = page_dates(browser)
        total = api(f"/v1/reports/csat?from={start}&to={end}", key)["totals"]["responses"]
        browser.click("#export")
        export = wait_download("csat-responses")
        check("the responses CSV downloads", export is not None, list(downloads.iterdir()))
        if export:
            exported = list(csv.reader(io.StringIO(export.read_text())))
            check("the responses CSV holds every matching response", len(exported) - 1 == total and total > 500,
                  f"{len(exported) - 1} rows vs {total} responses")
            check("the responses CSV has no row twice", len({(r[1], r[2]) for r in exported[1:]}) == len(exported) - 1)

        # Targets: the goal line, the CSAT card's target, each team against its own (team 201: 90, others 80).
        browser.get(f"{gateway}/reports?range=90d")
        check("the trend draws the CSAT target", browser.run("return !!document.querySelector('svg.trend line.target')"))
        check("the CSAT card shows the target", browser.run("return document.querySelector('#card-target').dataset.target") == "80")
        targets = browser.run("return Object.fromEntries([...document.querySelectorAll('#table-teams tbody tr')].map(r => [r.dataset.id, r.dataset.target]))")
        check("each team is held to its own target", targets.get("201") == "90" and targets.get("202") == "80", targets)
        headers = browser.run("return [...document.querySelectorAll('#table-agents thead th')].map(t => t.textContent)")
        check("agents show vs all, vs target and the change of CSAT", "vs all" in headers and "vs target" in headers and "CSAT change" in headers, headers)
        # Accessibility: aria-sort on the header cell, contrast, palette, distinct chart names, axis labels.
        check("aria-sort sits on the header cell", browser.run("return document.querySelectorAll('th[aria-sort]').length === 2 && "
                                                               "document.querySelectorAll('a[aria-sort]').length === 0"))
        low = browser.run(CONTRAST)
        check("every text has contrast of at least 4.5:1", not low, low[:5])
        palette = browser.run(PALETTE)
        check("neighbouring score colours stand 3:1 apart", all(r >= 3 for r in palette), palette)
        names = browser.run("return [...document.querySelectorAll('svg[role=img]')].map(s => s.getAttribute('aria-label'))")
        check("every chart has its own accessible name", len(names) == len(set(names)) and len(names) > 3, names[:4])
        check("every row's distribution has its numbers in text",
              browser.run("return [...document.querySelectorAll('#table-agents tbody tr')].every(r => "
                          "r.querySelector('td.dist small').textContent.split(' · ').map(Number).join(',') === r.dataset.distribution)"))
        for bucket in ("day", "week"):
            for days in ("30d", "90d"):
                browser.get(f"{gateway}/reports?range={days}&bucket={bucket}")
                check(f"no overlapping axis labels ({days} by {bucket})", browser.run(AXIS_OVERLAPS) == 0)
        # Filters: agents and teams picked by name, channel types only where there are ratings.
        browser.get(f"{gateway}/reports")
        agents_offered = browser.run("return [...document.querySelectorAll('#pick-agentId input')].map(i => i.parentElement.textContent)")
        check("agents are picked by name", len(agents_offered) == 12 and "Agent 1" in agents_offered, agents_offered[:3])
        channels = browser.run("return [...document.querySelectorAll('input[name=channelType]')].map(i => i.value)")
        check("only channel types with ratings are offered", sorted(channels) == ["SENDBIRD_ANDROID", "SENDBIRD_IOS", "SENDBIRD_JAVASCRIPT"], channels)
        browser.run("document.querySelector('#pick-teamId details').open = true;"
                    "[...document.querySelectorAll('#pick-teamId input')].find(i => i.parentElement.textContent === 'Team 2').checked = true;")
        browser.click("form.filters button[type=submit]")
        browser.wait_for("return location.search.includes('teamId=202')")
        check("a team picked by name filters the view", browser.run("return [...document.querySelectorAll('#table-teams tbody tr')].map(r => r.dataset.id)") == ["202"])
        # Phones: at 390 px the page does not scroll sideways; the wide tables scroll inside their box.
        browser.viewport(390, 844, mobile=True)
        for path in ("/reports?range=90d", "/reports/responses?range=90d"):
            browser.get(gateway + path)
            width = browser.run("return [document.documentElement.scrollWidth, window.innerWidth]")
            check(f"no sideways scroll at 390 px ({path.split('?')[0]})", width[0] <= width[1] and width[1] == 390, width)
            table = "#table-agents" if path.startswith("/reports?") else "#responses"
            check(f"the {table[1:]} table scrolls inside its box at 390 px",
                  browser.run("const box = document.querySelector(arguments[0]).parentElement; return getComputedStyle(box).overflowX === 'auto';", table))
            shot("09-phone-" + table[1:])
        browser.viewport()

        # Signing out ends the session.
        browser.get(f"{gateway}/reports")
        browser.click("header.top form button")
        browser.wait_for("return !!document.querySelector('#key')")
        browser.get(f"{gateway}/reports")
        check("after sign-out the page asks for a key", browser.wait_for("return !!document.querySelector('#key')"))

        # A team lead's key sees its team only, on the page and through the API; another team is 403 by URL.
        lead_key = reports_key(cli_env(), "team lead", "--team", "team-1")[0]
        unknown = subprocess.run([str(root / ".build/debug/desk-gateway"), "api-key", "create", "--scope", "reports", "--team", "no-such-team"],
                                 env=cli_env(), capture_output=True, text=True)
        check("a key for an unknown team is refused", unknown.returncode == 1 and "no-such-team" in unknown.stderr, unknown.stderr[-300:])
        check("a refused command logs no failure besides its message", "command failed" not in unknown.stderr, unknown.stderr[-300:])
        for name in ("two\nlines", "tab\there", "x" * 101):
            refused = subprocess.run([str(root / ".build/debug/desk-gateway"), "api-key", "create", "--scope", "reports", "--name", name],
                                     env=cli_env(), capture_output=True, text=True)
            check(f"a key named {name[:12]!r} is refused", refused.returncode == 64 and "--name must be one line" in refused.stderr,
                  refused.stderr[-300:])
        listed_keys = cli("api-key", "list")
        check("api-key list shows a key's teams", any("teams 201" in line and "team lead" in line for line in listed_keys.splitlines()), listed_keys)
        # Logs go to stderr: every line a command prints is its answer, for scripts to read.
        check("api-key list prints one tab-separated line per key and no log line",
              listed_keys.strip() and all(line.count("\t") == 5 and not line.startswith("{") for line in listed_keys.splitlines()), listed_keys)
        sign_in(lead_key)
        browser.get(f"{gateway}/reports?range=90d")
        check("the page says which teams the key sees", "Team 1" in (browser.text("#scope") or ""), browser.text("#scope"))
        check("the lead's teams table holds its team only",
              browser.run("return [...document.querySelectorAll('#table-teams tbody tr')].map(r => r.dataset.id)") == ["201"])
        check("the lead picks from its team only", browser.run("return [...document.querySelectorAll('#pick-teamId input')].map(i => i.value)") == ["201"])
        compare_summary(browser, lead_key, "team lead")
        start, end = page_dates(browser)
        scoped = api(f"/v1/reports/csat?from={start}&to={end}", lead_key)["totals"]
        team_one = api(f"/v1/reports/csat?from={start}&to={end}&teamId=201", key)["totals"]
        everyone = api(f"/v1/reports/csat?from={start}&to={end}", key)["totals"]
        check("the lead's totals are its team's, not everyone's", scoped == team_one and scoped["responses"] < everyone["responses"], f"{scoped} {team_one}")
        shot("10-team-lead")
        browser.get(f"{gateway}/reports?range=90d&teamId=202")
        check("another team by URL is refused on the page", "403" in (browser.text("main") or "") or "sees the teams" in (browser.text(".errors") or ""),
              browser.text("main"))
        status, body = call("GET", f"{gateway}/v1/reports/csat?teamId=202", headers={"Authorization": f"Bearer {lead_key}"})
        check("another team through the API is 403", status == 403, status)
        status, body = call("GET", f"{gateway}/v1/reports/csat/responses?teamId=202&teamId=201", headers={"Authorization": f"Bearer {lead_key}"})
        check("another team among its own is 403 too", status == 403, status)
        listed = api("/v1/reports/csat/responses?limit=500", lead_key)["items"]
        check("the lead's listing holds its team's responses only", listed and all((i["team"] or {}).get("id") == 201 for i in listed), listed[:1])

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
