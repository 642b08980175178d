package deskgateway;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertNotEquals;
import static org.junit.Assert.assertNotNull;
import static org.junit.Assert.assertNull;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

import okhttp3.OkHttpClient;
import okhttp3.Request;
import okhttp3.RequestBody;
import okhttp3.Response;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;

import org.json.JSONObject;
import org.junit.Test;

/** Against a live gateway and its Desk emulator (make test starts both: DESK_GATEWAY_URL, DESK_EMULATOR_URL). */
public class JourneyTest {
    static final String GATEWAY = env("DESK_GATEWAY_URL", "http://127.0.0.1:18351");
    static final String EMULATOR = env("DESK_EMULATOR_URL", "http://127.0.0.1:19351");
    static final OkHttpClient HTTP = new OkHttpClient();

    static String env(String name, String fallback) {
        String value = System.getenv(name);
        return value == null ? fallback : value;
    }

    /** The demo customer, signed in on a client of its own. */
    static DeskGateway signedIn(int maxRetries, SessionExpiredHandler handler) throws IOException {
        DeskGateway gateway = new DeskGateway.Builder(GATEWAY).maxRetries(maxRetries).onSessionExpired(handler).httpClient(HTTP).build();
        gateway.authenticate("demo-customer", "demo-token");
        return gateway;
    }

    static DeskGateway signedIn() throws IOException { return signedIn(2, null); }

    /** The emulator's control API: what an agent or Desk itself would do. */
    static JSONObject control(String path, String body) throws Exception {
        Request request = new Request.Builder().url(EMULATOR + "/emulator" + path)
            .post(RequestBody.create(DeskGateway.JSON, body)).build();
        try (Response response = HTTP.newCall(request).execute()) {
            String text = response.body() == null ? "" : response.body().string();
            assertTrue(path + ": " + response.code() + " " + text, response.isSuccessful());
            return text.startsWith("{") ? new JSONObject(text) : new JSONObject();
        }
    }

    /** Waits until the gateway's copy of the ticket has {@code status} (Desk's webhooks arrive in the background). */
    static Ticket until(DeskGateway gateway, long id, String status) throws Exception {
        for (int attempt = 0; attempt < 100; attempt++) {
            Ticket ticket = gateway.tickets().get(id);
            if (status.equals(ticket.status())) return ticket;
            Thread.sleep(100);
        }
        fail("ticket " + id + " never became " + status);
        return null;
    }

    /** A hook that signs the demo customer in again on a client of its own, counting its calls in {@code asked}. */
    static SessionExpiredHandler signingInAgain(final AtomicInteger asked) {
        return new SessionExpiredHandler() {
            @Override public String onSessionExpired(DeskGatewayException error) {
                asked.incrementAndGet();
                try {
                    return new DeskGateway.Builder(GATEWAY).build().authenticate("demo-customer", "demo-token").token();
                } catch (IOException failed) {
                    return null;
                }
            }
        };
    }

    /** Runs {@code body} with Desk down, bringing it back also when the body throws. */
    static <T> T whileDeskIsDown(Callable<T> body) throws Exception {
        control("/faults", "{\"down\":true}");
        try {
            return body.call();
        } finally {
            control("/faults", "{\"down\":false}");
        }
    }

    @Test public void theSeedJourneySignInCreateListFeedback() throws Exception {
        DeskGateway gateway = signedIn();
        Ticket ticket = gateway.tickets().create(new NewTicket("Android client journey", "Demo").priority("HIGH").customField("plan", "gold"));
        assertEquals("INITIALIZED", ticket.status());
        assertEquals("HIGH", ticket.priority());
        assertEquals("gold", ticket.customFields().get("plan"));
        List<Long> opened = new ArrayList<Long>();
        for (Ticket each : gateway.tickets().openedList(5)) opened.add(each.id());
        assertTrue(opened.toString(), opened.contains(ticket.id()));
        assertEquals(ticket.id(), gateway.tickets().byChannelUrl(ticket.channelUrl()).id());
        assertTrue(gateway.tickets().openCount() >= 1);

        control("/tickets/" + ticket.id() + "/customer-message", "{\"text\":\"Hello?\"}");
        control("/tickets/" + ticket.id() + "/assign", "{\"agentId\":501}");
        Ticket active = until(gateway, ticket.id(), "ACTIVE");
        assertEquals(Long.valueOf(501), active.agentId());
        // Read again: answered 304 and served from the client's copy, the same ticket.
        assertEquals("ACTIVE", gateway.tickets().get(ticket.id()).status());
        WriteResult closed = gateway.tickets().close(ticket.id(), "solved");
        assertFalse(closed.toString(), closed.isQueued());
        assertEquals("CLOSED", closed.ticket().status());
        long messageId = control("/tickets/" + ticket.id() + "/csat-request", "{}").getLong("messageId");
        WriteResult rated = gateway.tickets().submitFeedback(ticket.id(), messageId, 5, "thanks");
        assertEquals(Integer.valueOf(5), rated.ticket().satisfactionScore());
        assertEquals("thanks", rated.ticket().satisfactionComment());
        assertEquals("solved", gateway.tickets().get(ticket.id()).closeComment());
    }

    @Test public void anEndOfChatConfirmedAKeyReusedAndASurveyDeclined() throws Exception {
        DeskGateway gateway = signedIn();
        // The same creation sent twice with one key opens one ticket.
        String key = DeskGateway.newIdempotencyKey();
        Ticket ticket = gateway.tickets().create(new NewTicket("Ended by the customer", "Demo"), key);
        assertEquals(ticket.id(), gateway.tickets().create(new NewTicket("Ended by the customer", "Demo"), key).id());
        control("/tickets/" + ticket.id() + "/customer-message", "{\"text\":\"Hi\"}");
        control("/tickets/" + ticket.id() + "/assign", "{\"agentId\":501}");
        until(gateway, ticket.id(), "ACTIVE");
        long inquiry = control("/tickets/" + ticket.id() + "/closure-inquiry", "{}").getLong("messageId");
        WriteResult confirmed = gateway.tickets().confirmEndOfChat(ticket.id(), inquiry, true);
        assertEquals("CLOSED", confirmed.ticket().status());
        assertEquals("CONFIRMED", confirmed.ticket().closeStatus());
        long survey = control("/tickets/" + ticket.id() + "/csat-request", "{}").getLong("messageId");
        WriteResult declined = gateway.tickets().submitFeedback(ticket.id(), survey, null, null);
        assertFalse(declined.toString(), declined.isQueued());
        assertNull(declined.ticket().satisfactionScore());
        List<Long> closed = new ArrayList<Long>();
        for (Ticket each : gateway.tickets().closedList(10)) closed.add(each.id());
        assertTrue(closed.toString(), closed.contains(ticket.id()));
    }

    @Test public void theCustomersOwnFieldsAndAReadsETag() throws Exception {
        DeskGateway gateway = signedIn();
        // Desk keeps the keys its project registered (the emulator: product, plan, region, ... on tickets; tier, company, ...
        // on customers) and drops others.
        assertEquals("android", gateway.setCustomerCustomFields(Collections.singletonMap("company", "android")).get("company"));
        Ticket ticket = gateway.tickets().create(new NewTicket("Fields", "Demo"));
        WriteResult changed = gateway.tickets().setCustomFields(ticket.id(), Collections.singletonMap("region", "emea"));
        assertEquals("emea", changed.ticket().customFields().get("region"));
        WriteResult related = gateway.tickets().setRelatedChannels(ticket.id(), Collections.singletonList("sendbird_group_channel_related"));
        assertEquals(Collections.singletonList("sendbird_group_channel_related"), related.ticket().relatedChannelUrls());
        Ticket first = gateway.tickets().get(ticket.id());
        // The second read carries the first's ETag; the gateway answers 304 and the client its own copy.
        assertTrue(first == gateway.tickets().get(ticket.id()));
    }

    @Test public void aPagesPreviewAndItsDeskMessage() throws Exception {
        // A page of the app's own site (the test's gateway lets previews fetch loopback addresses).
        int port = Integer.parseInt(env("ANDROID_CLIENT_PAGE_PORT", "19352"));
        HttpServer site = HttpServer.create(new InetSocketAddress("127.0.0.1", port), 0);
        site.createContext("/parcel", new HttpHandler() {
            @Override public void handle(HttpExchange exchange) throws IOException {
                byte[] page = ("<html><head><meta property=\"og:title\" content=\"Where is my parcel?\">"
                    + "<meta property=\"og:site_name\" content=\"Shop\"><meta property=\"og:description\" content=\"Tracking\">"
                    + "</head><body></body></html>").getBytes("UTF-8");
                exchange.getResponseHeaders().set("Content-Type", "text/html; charset=utf-8");
                exchange.sendResponseHeaders(200, page.length);
                exchange.getResponseBody().write(page);
                exchange.close();
            }
        });
        site.start();
        try {
            LinkPreview preview = signedIn().linkPreview("http://127.0.0.1:" + port + "/parcel");
            assertEquals("Where is my parcel?", preview.title());
            assertEquals("Shop", preview.siteName());
            assertEquals("Tracking", preview.description());
            assertNull(preview.image());
            assertEquals("SENDBIRD_DESK_RICH_MESSAGE", preview.messageCustomType());
            JSONObject data = new JSONObject(preview.messageData());
            assertEquals("SENDBIRD_DESK_URL_PREVIEW", data.getString("type"));
            assertEquals("Where is my parcel?", data.getJSONObject("body").getString("title"));
        } finally {
            site.stop(0);
        }
    }

    @Test public void aWriteWhileDeskIsDownIsQueuedAndWaitedFor() throws Exception {
        final DeskGateway gateway = signedIn();
        final Ticket ticket = gateway.tickets().create(new NewTicket("Queued write", "Demo"));
        WriteResult result = whileDeskIsDown(new Callable<WriteResult>() {
            @Override public WriteResult call() throws Exception {
                return gateway.tickets().setCustomFields(ticket.id(), Collections.singletonMap("region", "apac"));
            }
        });
        assertTrue(result.toString(), result.isQueued());
        assertEquals("pending", result.operation().status());
        Operation delivered = gateway.waitForOperation(result.operation(), 300, 60_000);
        assertEquals("delivered", delivered.status());
        assertEquals(ticket.id(), delivered.ticketId());
        assertEquals("custom-fields", delivered.kind());
        assertEquals("customer", delivered.deliveredAs());
        assertEquals("apac", gateway.tickets().get(ticket.id()).customFields().get("region"));
    }

    @Test public void aQueuedWriteWhoseDeskSessionEndedGoesThroughOnceTheHookSignsIn() throws Exception {
        final AtomicInteger asked = new AtomicInteger();
        final DeskGateway gateway = signedIn(2, signingInAgain(asked));
        final Ticket ticket = gateway.tickets().create(new NewTicket("Queued across a Desk session", "Demo"));
        WriteResult result = whileDeskIsDown(new Callable<WriteResult>() {
            @Override public WriteResult call() throws Exception {
                WriteResult queued = gateway.tickets().setCustomFields(ticket.id(), Collections.singletonMap("plan", "bronze"));
                // Desk ends the customer's sessions while the write waits: it then waits for a new sign-in.
                control("/customers/demo-customer/end-sessions", "{}");
                return queued;
            }
        });
        assertTrue(result.toString(), result.isQueued());
        Operation delivered = gateway.waitForOperation(result.operation(), 300, 90_000);
        assertEquals("delivered", delivered.status());
        assertEquals(1, asked.get());
        assertEquals("bronze", gateway.tickets().get(ticket.id()).customFields().get("plan"));
    }

    @Test public void aTicketRaisedAndGivenBackToTheQueueInAnotherTeam() throws Exception {
        DeskGateway gateway = signedIn();
        Ticket ticket = gateway.tickets().create(new NewTicket("A billing question", "Demo"));
        try {
            gateway.tickets().cancelAssignment(ticket.id(), "billing");
            fail("a ticket no agent has had was given back to the queue");
        } catch (DeskGatewayException error) {
            assertEquals(error.toString(), 409, error.status());
            assertEquals("INITIALIZED", error.ticketStatus());
        }
        assertEquals(ticket.id(), gateway.tickets().selectQuestion(ticket.id(), 7, "Where is my invoice?").id());
        assertEquals("URGENT", gateway.tickets().setPriority(ticket.id(), "URGENT").ticket().priority());
        control("/tickets/" + ticket.id() + "/customer-message", "{\"text\":\"About my invoice\"}");
        control("/tickets/" + ticket.id() + "/assign", "{\"agentId\":501}");
        until(gateway, ticket.id(), "ACTIVE");
        Ticket given = gateway.tickets().cancelAssignment(ticket.id(), "billing").ticket();
        assertEquals("PENDING", given.status());
        assertNull(given.agentId());
        assertEquals("billing", given.teamKey());
    }

    @Test public void problemsAreTypedExceptions() throws Exception {
        DeskGateway gateway = signedIn();
        try {
            gateway.tickets().create(new NewTicket("", "Demo"));
            fail("an empty title was accepted");
        } catch (DeskGatewayException error) {
            assertEquals(error.toString(), 422, error.status());
            assertEquals("validation_failed", error.code());
            assertEquals("title", error.fieldErrors().get(0).field);
            assertNotNull(error.requestId());
        }
        Ticket ticket = gateway.tickets().create(new NewTicket("Not closed", "Demo"));
        try {
            gateway.tickets().reopen(ticket.id());
            fail("reopening an open ticket was accepted");
        } catch (DeskGatewayException error) {
            assertEquals(error.toString(), 409, error.status());
            assertEquals("ticket_state_conflict", error.code());
        }
        try {
            gateway.tickets().get(999_999_999L);
            fail("a ticket that does not exist was read");
        } catch (DeskGatewayException error) {
            assertEquals(404, error.status());
        }
    }

    @Test public void pastTheRateLimitWithoutRetriesThenWithThem() throws Exception {
        final DeskGateway impatient = signedIn(0, null);
        List<DeskGatewayException> limited = new ArrayList<DeskGatewayException>();
        for (Throwable outcome : spend(impatient, 80)) {
            if (outcome instanceof DeskGatewayException && "rate_limited".equals(((DeskGatewayException) outcome).code())) {
                limited.add((DeskGatewayException) outcome);
            }
        }
        assertFalse("no call was rate limited", limited.isEmpty());
        assertEquals(429, limited.get(0).status());
        assertTrue(limited.get(0).retryAfter() >= 1);
        // With retries the same calls are answered after waiting out Retry-After.
        assertTrue(signedIn(10, null).tickets().openCount() >= 0);
    }

    @Test public void anInterruptedThreadEndsItsCallDuringARetryAfterWait() throws Exception {
        DeskGateway spender = signedIn(0, null);
        final DeskGateway patient = signedIn(10, null);
        spend(spender, 80);
        final AtomicReference<Throwable> outcome = new AtomicReference<Throwable>();
        Thread caller = new Thread(new Runnable() {
            @Override public void run() {
                try {
                    patient.tickets().openCount();
                } catch (Throwable error) {
                    outcome.set(error);
                }
            }
        });
        long started = System.nanoTime();
        caller.start();
        Thread.sleep(300);
        caller.interrupt();
        caller.join(5_000);
        assertFalse("the call still runs", caller.isAlive());
        assertTrue(System.nanoTime() - started < TimeUnit.SECONDS.toNanos(2));
        // The budget may have refilled before the call: then there was nothing to interrupt, but no long wait either.
        if (outcome.get() != null) assertTrue(String.valueOf(outcome.get()), outcome.get() instanceof InterruptedIOException);
    }

    @Test public void cursorsPageThroughEveryTicketOnce() throws Exception {
        DeskGateway gateway = signedIn();
        for (int index = 0; index < 5; index++) gateway.tickets().create(new NewTicket("Paged " + index, "Demo"));
        TicketPage first = gateway.tickets().page("open", 2, null);
        assertEquals(2, first.items().size());
        assertTrue(first.hasNext());
        assertNotNull(first.nextCursor());
        TicketPage second = gateway.tickets().page("open", 2, first.nextCursor());
        Set<Long> ids = new HashSet<Long>();
        for (Ticket ticket : first.items()) ids.add(ticket.id());
        for (Ticket ticket : second.items()) assertTrue("seen twice: " + ticket.id(), ids.add(ticket.id()));
        List<Long> seen = new ArrayList<Long>();
        for (Ticket ticket : gateway.tickets().openedList(2)) seen.add(ticket.id());
        assertEquals(seen.size(), new HashSet<Long>(seen).size());
        assertTrue(seen.size() >= 5);
    }

    @Test public void anEndedSessionIsRenewedThroughTheHook() throws Exception {
        final AtomicInteger asked = new AtomicInteger();
        DeskGateway gateway = signedIn(2, signingInAgain(asked));
        String old = gateway.token();
        // Sign the token out through another client: this one still holds it.
        new DeskGateway.Builder(GATEWAY).token(old).build().signOut();
        assertTrue(gateway.tickets().openCount() >= 0);
        assertEquals(1, asked.get());
        assertNotEquals(old, gateway.token());
        // Without a hook the 401 comes through.
        DeskGateway signedOut = new DeskGateway.Builder(GATEWAY).token(old).build();
        try {
            signedOut.tickets().openCount();
            fail("a signed-out token was accepted");
        } catch (DeskGatewayException error) {
            assertEquals(401, error.status());
        }
        // Signing out an ended session says so, forgets it, and never asks the hook for a session to end instead.
        final AtomicInteger askedAtSignOut = new AtomicInteger();
        DeskGateway ending = new DeskGateway.Builder(GATEWAY).token(old).onSessionExpired(new SessionExpiredHandler() {
            @Override public String onSessionExpired(DeskGatewayException error) {
                askedAtSignOut.incrementAndGet();
                return null;
            }
        }).build();
        try {
            ending.signOut();
            fail("an ended session was signed out without a word");
        } catch (DeskGatewayException error) {
            assertEquals(401, error.status());
        }
        assertNull(ending.token());
        assertEquals(0, askedAtSignOut.get());
        // The renewed session is still good.
        assertTrue(gateway.tickets().openCount() >= 0);
    }

    /** {@code calls} open counts at once; what each threw (null when it was answered). */
    static List<Throwable> spend(final DeskGateway gateway, int calls) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(16);
        try {
            List<Future<Throwable>> futures = new ArrayList<Future<Throwable>>();
            for (int index = 0; index < calls; index++) {
                futures.add(pool.submit(new Callable<Throwable>() {
                    @Override public Throwable call() {
                        try {
                            gateway.tickets().openCount();
                            return null;
                        } catch (IOException error) {
                            return error;
                        }
                    }
                }));
            }
            List<Throwable> outcomes = new ArrayList<Throwable>();
            for (Future<Throwable> future : futures) outcomes.add(future.get());
            return outcomes;
        } finally {
            pool.shutdown();
        }
    }
}
