"""The web client and its demo page in a real browser: headless Chromium (Debian's chromium + chromium-driver) opens
clients/web/demo.html from another origin and runs a customer's whole journey through a live gateway (debug build)
with its embedded Desk emulator over real HTTP and a real PostgreSQL; then a page on an origin that is not allowed
is refused by the browser. Fails on any console error or CORS refusal on the allowed origin; saves a screenshot of
each step under .build/browser/.
Usage: browser_test.py ADMIN_CONNINFO. Prints one line per check and 'browser: N passed, N failed'."""
import functools
import http.server
import json
import os
import pathlib
import re
import subprocess
import sys
import threading
import time

from testlib import call, check, psql, summary, terminate, wait_ready
from webdriver import Browser, WebDriverError

root = pathlib.Path(__file__).resolve().parent.parent
admin = sys.argv[1]
database = f"browser_{os.getpid()}"
out = root / ".build" / "browser"
out.mkdir(parents=True, exist_ok=True)
page_port = int(os.environ.get("BROWSER_PAGE_PORT", "18300"))
foreign_port = page_port + 1
gateway_port = int(os.environ.get("BROWSER_GATEWAY_PORT", "18310"))
emulator_port = int(os.environ.get("BROWSER_EMULATOR_PORT", "19310"))
page_origin = f"http://127.0.0.1:{page_port}"
foreign_origin = f"http://127.0.0.1:{foreign_port}"
gateway = f"http://127.0.0.1:{gateway_port}"
desk = f"http://127.0.0.1:{emulator_port}"
# Answers the journey provokes on purpose; Chromium logs each as a "network" console entry.
expected_network = re.compile(r"status of (401|404|409|422|429)\b")


class Pages(http.server.SimpleHTTPRequestHandler):
    def end_headers(self):
        self.send_header("Cache-Control", "no-store")
        super().end_headers()

    def log_message(self, *args):
        pass


def serve_pages(port):
    handler = functools.partial(Pages, directory=str(root / "clients" / "web"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def control(path, body=None):
    status, answer = call("POST", f"{desk}/emulator{path}", body or {})
    if status >= 300:
        raise RuntimeError(f"emulator {path}: {status} {answer}")
    return answer


def start_gateway():
    env = {k: v for k, v in os.environ.items() if k not in ("DESK_BASE_URL", "DESK_API_TOKEN", "DESK_WEBHOOK_SECRET")}
    env.update({
        "DATABASE_URL": admin.replace("dbname=postgres", f"dbname={database}"), "HOST": "127.0.0.1",
        "PORT": str(gateway_port), "DESK_EMULATOR_PORT": str(emulator_port), "DESK_EMULATOR_STATE": "memory",
        "CORS_ALLOWED_ORIGINS": page_origin, "RATE_LIMIT_BURST": "40", "RATE_LIMIT_PER_MINUTE": "600",
        "OUTBOX_MAX_BACKOFF_S": "1", "DESK_BREAKER_COOLDOWN_S": "1", "DESK_TIMEOUT_MS": "2000", "SYNC_INTERVAL_S": "0",
        "LOG_LEVEL": "info", "ASSETS_DIR": str(root),
    })
    log = open(out / "gateway.log", "w")
    return subprocess.Popen([str(root / ".build/debug/desk-gateway"), "serve"], env=env, stdout=log, stderr=log)


class Console:
    """Collects the page's console; on the allowed origin anything but an expected 4xx answer is a failure."""

    def __init__(self, browser):
        self.browser = browser
        self.entries = []

    def drain(self, step):
        for entry in self.browser.console():
            entry["step"] = step
            self.entries.append(entry)

    def unexpected(self):
        bad = []
        for entry in self.entries:
            message = entry.get("message", "")
            if "CORS" in message or "Access-Control" in message:
                bad.append(entry)
            elif entry.get("level") in ("SEVERE", "ERROR") and not (entry.get("source") == "network" and expected_network.search(message)):
                bad.append(entry)
        return bad


def journey(browser, console):
    """The demo page as a person uses it: sign in, open a ticket, read it, raise its priority, give it back to the queue,
    close it, rate it, see a problem."""
    def step(name):
        browser.screenshot(str(out / f"{name}.png"))
        console.drain(name)

    def reload_until_active():
        """Desk's webhook reaches the gateway in the background: reload as a person would until it shows."""
        for _ in range(40):
            browser.click("#reload")
            if browser.wait_for("return document.getElementById('ticket-status').textContent === 'ACTIVE'", seconds=0.5):
                return True
        return False

    # A link naming a gateway is not followed: the field still holds the page's own origin.
    browser.get(f"{page_origin}/demo.html?gateway=http://attacker.invalid")
    check("the demo page loads its module", browser.wait_for("return !!document.getElementById('sign-in')"))
    check("a link's ?gateway= is ignored", browser.run("return document.getElementById('gateway').value") == page_origin,
          browser.run("return document.getElementById('gateway').value"))
    # The person types the gateway's address, as they would to use another one.
    browser.type("#gateway", gateway)
    step("01-sign-in")
    browser.click("#sign-in button[type=submit]")
    check("sign-in from another origin", browser.wait_for("return !document.getElementById('app-view').hidden"),
          browser.text("#error"))
    check("the customer's name is shown", browser.text("#who") == "demo-customer")
    step("02-signed-in")

    title = "My parcel never arrived"
    browser.type("#title", title)
    browser.click("#create button[type=submit]")
    created = browser.wait_for("return document.getElementById('ticket-title').textContent === arguments[0]", title)
    check("create a ticket from the page", created, browser.text("#error"))
    ticket_id = int(browser.text("#ticket-id") or 0)
    etag = browser.text("#ticket-etag") or ""
    check("ETag readable from script", etag.startswith('"') or etag.startswith('W/"'), etag)
    check("the list shows the new ticket",
          browser.wait_for("return !!document.querySelector(`#tickets li[data-id='${arguments[0]}']`)", ticket_id))
    check("the open count is shown", int(browser.run("return document.getElementById('open-count').dataset.count") or 0) >= 1)
    browser.click("#reload")
    check("a second read is a 304 through If-None-Match",
          browser.wait_for("return document.getElementById('notice').textContent.includes('304')"), browser.text("#notice"))
    step("03-ticket")

    control(f"/tickets/{ticket_id}/customer-message", {"text": "Hello?"})
    control(f"/tickets/{ticket_id}/assign", {"agentId": 501})
    check("the agent's assignment shows after a reload", reload_until_active(), browser.text("#ticket-status"))
    browser.select("#priority", "HIGH")
    browser.click("#set-priority")
    check("raise the ticket's priority", browser.wait_for("return document.getElementById('ticket-priority').textContent === 'HIGH'"),
          browser.text("#error"))
    browser.click("#give-back")
    check("give the ticket back to the queue",
          browser.wait_for("return document.getElementById('ticket-status').textContent === 'PENDING'"
                           " && document.getElementById('ticket-agent').textContent === 'not assigned yet'"),
          f"{browser.text('#ticket-status')} {browser.text('#ticket-agent')} {browser.text('#error')}")
    _, on_desk = call("GET", f"{desk}/emulator/tickets/{ticket_id}")
    check("Desk has it back in the queue, at the new priority",
          (on_desk.get("status2"), on_desk.get("priority"), on_desk.get("recentAssignment")) == ("PENDING", "HIGH", None),
          {k: on_desk.get(k) for k in ("status2", "priority", "recentAssignment")})
    control(f"/tickets/{ticket_id}/assign", {"agentId": 502})
    check("another agent takes it", reload_until_active(), browser.text("#ticket-status"))
    browser.click("#close")
    check("close the ticket", browser.wait_for("return document.getElementById('ticket-status').textContent === 'CLOSED'"),
          browser.text("#error"))
    step("04-closed")

    message_id = control(f"/tickets/{ticket_id}/csat-request")["messageId"]
    browser.type("#csat-message", str(message_id))
    browser.select("#score", "4")
    browser.type("#comment", "Quick and kind")
    browser.click("#feedback button[type=submit]")
    check("answer the CSAT request", browser.wait_for("return document.getElementById('ticket-rating').textContent.startsWith('4 / 5')"),
          f"{browser.text('#ticket-rating')} {browser.text('#error')}")
    step("05-rated")

    browser.click("#feedback button[type=submit]")
    check("a problem answer is shown with its code",
          browser.wait_for("return document.getElementById('error').dataset.code === 'ticket_state_conflict'"), browser.text("#error"))
    step("06-problem")
    return ticket_id


def api(browser, console, ticket_id):
    """The module's calls that the page's buttons do not make, run in the page (so under its origin's CORS rules)."""
    setup = "const { DeskGateway, GatewayError } = await import('./desk-gateway.js'); const [base, token, id] = args;"
    result = browser.run_async(setup + """
        const g = new DeskGateway({ baseUrl: base });
        const session = await g.signIn('demo-customer', 'demo-token');
        for (let i = 0; i < 3; i++) await g.createTicket({ title: `Paged ${i}`, userName: 'Demo', priority: 'LOW' });
        const first = await g.listTickets({ limit: 2 });
        const second = await g.listTickets({ limit: 2, cursor: first.nextCursor });
        const all = [];
        for await (const ticket of g.allTickets({ limit: 2 })) all.push(ticket.id);
        const closed = await g.listTickets({ status: 'closed' });
        const count = await g.openCount();
        const read = await g.getTicket(id);
        const again = await g.getTicket(id);
        const byChannel = await g.getTicketByChannel(read.ticket.channelUrl);
        const fresh = first.items[0].id;
        const related = await g.setRelatedChannels(fresh, ['sendbird_group_channel_related_1']);
        const fields = await g.setCustomerCustomFields({ tier: 'gold' });
        const classified = await g.classifyMessage('SENDBIRD_DESK_RICH_MESSAGE',
            JSON.stringify({ type: 'SENDBIRD_DESK_CUSTOMER_SATISFACTION', body: { state: 'WAITING', ticketId: id } }));
        let preview = null;
        try { await g.linkPreview('http://127.0.0.1:1/private'); } catch (error) {
            preview = { typed: error instanceof GatewayError, code: error.code, status: error.status, requestId: error.requestId };
        }
        let invalid = null;
        try { await g.createTicket({ title: '', userName: 'Demo' }); } catch (error) {
            invalid = { code: error.code, fields: error.errors.map((e) => e.field) };
        }
        let reopenClosed = null;
        try { await g.reopenTicket(fresh); } catch (error) { reopenClosed = { code: error.code, ticketStatus: error.ticketStatus }; }
        const raised = await g.setPriority(fresh, 'HIGH');
        const asked = await g.selectQuestion(fresh, 7, 'How do I reset my password?');
        let cancelEarly = null;
        try { await g.cancelAssignment(fresh, { groupKey: 'billing' }); } catch (error) {
            cancelEarly = { code: error.code, ticketStatus: error.ticketStatus };
        }
        // An id that is a path of its own stays one path segment: it never reaches the customer's own fields route.
        let traversal = null;
        try { await g.setCustomFields('../customers/me/custom-fields?', { tier: 'platinum' }); traversal = 'answered'; }
        catch (error) { traversal = error.status; }
        return { token: session.token, firstIds: first.items.map((t) => t.id), secondIds: second.items.map((t) => t.id),
                 hasNext: first.hasNext, all, closedIds: closed.items.map((t) => t.id), count: count.count,
                 etag: read.etag, notModified: again.notModified, sameTicket: again.ticket.id === id, byChannel: byChannel.ticket.id,
                 related: related.ticket ? related.ticket.relatedChannelUrls : null, fields: fields.customFields,
                 classified: classified.kind, preview, invalid, reopenClosed, traversal,
                 raised: raised.ticket ? raised.ticket.priority : null, cancelEarly, asked: asked.id === fresh };
    """, gateway, None, ticket_id)
    console.drain("07-api")
    token = result["token"]
    check("list pages follow their cursors", result["hasNext"] and len(result["firstIds"]) == 2
          and not set(result["firstIds"]) & set(result["secondIds"]), result)
    check("allTickets walks every page", len(result["all"]) == 4 and len(set(result["all"])) == 4, result["all"])
    check("status filter", result["closedIds"] == [ticket_id], result["closedIds"])
    check("open count", result["count"] == 3, result["count"])
    check("read by id and by channel, 304 answered from the client's copy",
          result["notModified"] and result["sameTicket"] and result["byChannel"] == ticket_id and result["etag"], result)
    check("related channels and customer custom fields",
          result["related"] == ["sendbird_group_channel_related_1"] and result["fields"] == {"tier": "gold"}, result)
    check("classify a message", result["classified"] == "csat", result["classified"])
    check("ids are encoded as one path segment (no route of another kind reached)",
          result["traversal"] in (400, 404), result["traversal"])
    preview = result["preview"] or {}
    check("a problem surfaces as a typed GatewayError with its code and request id",
          preview.get("typed") and preview.get("code") == "url_not_allowed" and preview.get("status") == 422
          and preview.get("requestId"), preview)
    check("validation problems carry their fields", (result["invalid"] or {}).get("code") == "validation_failed"
          and "title" in (result["invalid"] or {}).get("fields", []), result["invalid"])
    # `ticketStatus` is Desk's, read after its refusal.
    check("a state conflict surfaces as ticket_state_conflict with the ticket's status",
          (result["reopenClosed"] or {}).get("code") == "ticket_state_conflict"
          and (result["reopenClosed"] or {}).get("ticketStatus") == "INITIALIZED", result["reopenClosed"])
    check("priority set; a ticket no agent has yet cannot be given back to the queue (409 with its status)",
          result["raised"] == "HIGH" and result["cancelEarly"] == {"code": "ticket_state_conflict", "ticketStatus": "INITIALIZED"},
          (result["raised"], result["cancelEarly"]))
    check("an FAQ bot's question picked (answered with the ticket)", result["asked"] is True, result["asked"])

    # A write while Desk is down is queued (202); the client polls the operation until Desk has it.
    fresh = result["firstIds"][0]
    control("/faults", {"down": True})
    queued = browser.run_async(setup + """
        const g = new DeskGateway({ baseUrl: base, token });
        return await g.setCustomFields(id, { tier: 'silver' });
    """, gateway, token, fresh)
    control("/faults", {"down": False})
    operation = (queued or {}).get("operation") or {}
    check("a write while Desk is down is queued (202 + operation)", operation.get("status") == "pending", queued)
    delivered = browser.run_async(setup + """
        const g = new DeskGateway({ baseUrl: base, token });
        const done = await g.waitForOperation(id, { intervalMs: 300, timeoutMs: 60000 });
        return done.status + ' ' + done.deliveredAs;
    """, gateway, token, operation.get("id", 0)) if operation else None
    check("waitForOperation sees it delivered with the customer's session", delivered == "delivered customer", delivered)

    # Desk ends the customer's session while a write waits: waitForOperation asks onSessionExpired once, and the
    # write goes to Desk with the new session instead of failing.
    control("/faults", {"down": True})
    queued = browser.run_async(setup + """
        const g = new DeskGateway({ baseUrl: base, token });
        return await g.setCustomFields(id, { tier: 'gold' });
    """, gateway, token, fresh)
    control("/customers/demo-customer/end-sessions", {})
    control("/faults", {"down": False})
    operation = (queued or {}).get("operation") or {}
    renewed_write = browser.run_async(setup + """
        let asked = 0;
        const g = new DeskGateway({ baseUrl: base, token, onSessionExpired: async () => {
            asked++;
            return (await new DeskGateway({ baseUrl: base }).signIn('demo-customer', 'demo-token')).token;
        } });
        const done = await g.waitForOperation(id, { intervalMs: 300, timeoutMs: 60000 });
        return { status: done.status, asked, renewed: g.token !== token };
    """, gateway, token, operation.get("id", 0)) if operation else None
    check("a write whose Desk session ended goes through once waitForOperation's hook signs in again",
          renewed_write == {"status": "delivered", "asked": 1, "renewed": True}, renewed_write)
    token = (browser.run_async(setup + """
        return (await new DeskGateway({ baseUrl: base }).signIn('demo-customer', 'demo-token')).token;
    """, gateway, token, 0))
    console.drain("08-operation")

    # 429: the client waits for Retry-After and tries again; with no retries left it throws rate_limited.
    limited = browser.run_async(setup + """
        const impatient = new DeskGateway({ baseUrl: base, token, maxRetries: 0 });
        let refused = null;
        try { await Promise.all(Array.from({ length: 50 }, () => impatient.openCount())); } catch (error) {
            refused = { code: error.code, retryAfter: error.retryAfter };
        }
        const retries = [];
        const patient = new DeskGateway({ baseUrl: base, token, maxRetries: 8, onRetry: (info) => retries.push(info) });
        const counts = await Promise.all(Array.from({ length: 30 }, () => patient.openCount()));
        return { refused, retries: retries.length, codes: [...new Set(retries.map((r) => r.code))],
                 answered: counts.filter((c) => typeof c.count === 'number').length };
    """, gateway, token, 0)
    console.drain("09-rate-limit")
    refused = limited["refused"] or {}
    check("past the limit a call throws rate_limited with Retry-After", refused.get("code") == "rate_limited"
          and isinstance(refused.get("retryAfter"), (int, float)), limited)
    check("with retries every call is answered after waiting out the 429s",
          limited["answered"] == 30 and limited["retries"] > 0 and limited["codes"] == ["rate_limited"], limited)

    # A Retry-After wait is interrupted by the call's timeout or its AbortSignal (the budget is spent again first).
    interrupted = browser.run_async(setup + """
        const spend = new DeskGateway({ baseUrl: base, token, maxRetries: 0 });
        // Until the gateway answers 429: then the next call has a Retry-After to wait out.
        const exhaust = async () => {
            for (let round = 0; round < 10; round++) {
                const outcomes = await Promise.allSettled(Array.from({ length: 40 }, () => spend.openCount()));
                if (outcomes.some((o) => o.status === 'rejected' && o.reason.code === 'rate_limited')) return;
            }
        };
        const g = new DeskGateway({ baseUrl: base, token, maxRetries: 8 });
        // The bucket refills a token every 100 ms: a call that slips in on a fresh token is answered without any wait
        // to interrupt, so that attempt says nothing and is made again.
        let started = 0, timedOut = null;
        for (let attempt = 0; attempt < 5 && (timedOut === null || timedOut === 'answered'); attempt++) {
            await exhaust();
            started = performance.now();
            try { await g.openCount({ timeoutMs: 600 }); timedOut = 'answered'; } catch (error) { timedOut = error.code; }
        }
        const timeoutMs = performance.now() - started;
        let aborted = null;
        for (let attempt = 0; attempt < 5 && (aborted === null || aborted === 'answered'); attempt++) {
            const controller = new AbortController();
            await exhaust();
            started = performance.now();
            setTimeout(() => controller.abort(), 300);
            try { await g.openCount({ signal: controller.signal }); aborted = 'answered'; } catch (error) { aborted = error.name; }
        }
        return { timedOut, timeoutMs, aborted, abortMs: performance.now() - started };
    """, gateway, token, 0)
    check("a call's timeoutMs ends its Retry-After wait with code timeout",
          interrupted["timedOut"] == "timeout" and interrupted["timeoutMs"] < 1500, interrupted)
    check("an AbortSignal cancels the call during its Retry-After wait",
          interrupted["aborted"] == "AbortError" and interrupted["abortMs"] < 1500, interrupted)

    # classifyMessage is computed in the page, and says what the gateway's route says for every kind of message.
    kinds = browser.run_async(setup + """
        const { classifyMessage, newIdempotencyKey } = await import('./desk-gateway.js');
        const rich = (type, body) => JSON.stringify({ type, body });
        const samples = [
            ['SENDBIRD_DESK_RICH_MESSAGE', rich('SENDBIRD_DESK_CUSTOMER_SATISFACTION', { state: 'CONFIRMED', ticketId: 7, customerSatisfactionScore: 4, customerSatisfactionComment: 'ok' })],
            ['SENDBIRD_DESK_RICH_MESSAGE', rich('SENDBIRD_DESK_INQUIRE_TICKET_CLOSURE', { state: 'WAITING', ticketId: 7 })],
            ['SENDBIRD_DESK_RICH_MESSAGE', rich('SENDBIRD_DESK_URL_PREVIEW', { url: 'https://example.com' })],
            ['SENDBIRD_DESK_RICH_MESSAGE', rich('SOMETHING_NEW', {})],
            ['SENDBIRD_DESK_ADMIN_MESSAGE_CUSTOM_TYPE', JSON.stringify({ type: 'NOTIFICATION_MANUAL_CLOSED', ticket: { id: 7 } })],
            ['SENDBIRD_DESK_ADMIN_MESSAGE_CUSTOM_TYPE', JSON.stringify({ type: 'SYSTEM_MESSAGE_TICKET_ASSIGNED_BY_SYSTEM' })],
            ['SENDBIRD_DESK_BOT_MESSAGE', JSON.stringify({ type: 'BOT' })],
            ['', ''],
        ];
        const g = new DeskGateway({ baseUrl: base, token });
        const differing = [];
        const started = performance.now();
        const local = samples.map(([customType, data]) => classifyMessage(customType, data));
        const localMs = performance.now() - started;
        for (let i = 0; i < samples.length; i++) {
            const [customType, data] = samples[i];
            const served = (await g.request('POST', '/v1/messages/classify', { body: { customType, data },
                headers: { 'Idempotency-Key': newIdempotencyKey() } })).body;
            if (JSON.stringify(served) !== JSON.stringify(local[i])) differing.push({ customType, data, served, local: local[i] });
        }
        return { count: samples.length, differing, kinds: local.map((c) => c.kind), localMs };
    """, gateway, token, 0)
    check("classifyMessage runs in the page and matches POST /v1/messages/classify for every kind",
          kinds["differing"] == [] and len(set(kinds["kinds"])) == 7, kinds)

    # A relative baseUrl resolves against the page (a same-origin deployment or a dev proxy), not a TypeError.
    relative = browser.run_async(setup + """
        const g = new DeskGateway({ baseUrl: '/gateway-behind-a-proxy' });
        try { await g.openCount(); return 'answered'; } catch (error) {
            return { name: error.name, status: error.status, code: error.code };
        }
    """, gateway, token, 0)
    check("a relative baseUrl is resolved against the page (its server answered 404)",
          isinstance(relative, dict) and relative.get("name") == "GatewayError" and relative.get("status") == 404, relative)
    console.drain("10-client-options")

    time.sleep(3)  # let the budget refill
    signed_out = browser.run_async(setup + """
        const g = new DeskGateway({ baseUrl: base, token });
        await g.signOut();
        try { await new DeskGateway({ baseUrl: base, token }).openCount(); return 'still signed in'; } catch (error) { return error.code; }
    """, gateway, token, 0)
    check("sign out revokes the token", signed_out == "unauthorized", signed_out)
    # An ended session: onSessionExpired signs in again (with the Sendbird token an app keeps) and the call goes on.
    renewed = browser.run_async(setup + """
        let asked = 0;
        const g = new DeskGateway({ baseUrl: base, token, onSessionExpired: async ({ code }) => {
            asked += 1;
            return (await new DeskGateway({ baseUrl: base }).signIn('demo-customer', 'demo-token')).token;
        } });
        const count = await g.openCount();
        return { asked, answered: typeof count.count === 'number', renewed: g.token !== token };
    """, gateway, token, 0)
    check("onSessionExpired renews the session once and the call is answered",
          renewed == {"asked": 1, "answered": True, "renewed": True}, renewed)
    console.drain("11-sign-out")
    browser.screenshot(str(out / "10-after-api.png"))


def foreign(browser):
    """A page on an origin that is not allowed: the browser refuses the gateway's answer."""
    browser.get(f"{foreign_origin}/demo.html")
    browser.console()
    outcome = browser.run_async("""
        const { DeskGateway } = await import('./desk-gateway.js');
        try { await new DeskGateway({ baseUrl: args[0] }).signIn('demo-customer', 'demo-token'); return 'answered'; }
        catch (error) { return error.code; }
    """, gateway)
    entries = browser.console()
    check("a page on another origin is refused by the browser", outcome == "network_error", outcome)
    check("the browser names CORS as the reason", any("CORS" in e.get("message", "") for e in entries),
          [e.get("message") for e in entries])
    browser.screenshot(str(out / "12-foreign-origin.png"))


def main():
    psql(admin, f"CREATE DATABASE {database}")
    servers = [serve_pages(page_port), serve_pages(foreign_port)]
    process = start_gateway()
    browser = None
    try:
        check("the gateway is ready", wait_ready(gateway, 120, process))
        browser = Browser(str(out / "chromedriver.log"))
        console = Console(browser)
        ticket_id = journey(browser, console)
        api(browser, console, ticket_id)
        bad = console.unexpected()
        check("no console error and no CORS refusal on the allowed origin", not bad, json.dumps(bad, indent=1)[:3000])
        foreign(browser)
    except (WebDriverError, RuntimeError, OSError) as error:
        check("the browser run completes", False, str(error))
        if browser:
            try:
                browser.screenshot(str(out / "failure.png"))
            except Exception:
                pass
    finally:
        if browser:
            browser.close()
        for server in servers:
            server.shutdown()
        terminate(process)
        psql(admin, f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
    print(f"screenshots: {out}")
    return summary("browser")


if __name__ == "__main__":
    sys.exit(main())
