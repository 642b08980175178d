package deskgateway;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.HashMap;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

import okhttp3.HttpUrl;
import okhttp3.MediaType;
import okhttp3.OkHttpClient;
import okhttp3.Request;
import okhttp3.RequestBody;
import okhttp3.Response;
import okhttp3.ResponseBody;

import org.json.JSONException;
import org.json.JSONObject;

/**
 * desk-gateway for an Android app, in the Desk SDK's words: {@link #authenticate}, then {@code tickets().create},
 * {@code tickets().openedList}, {@code tickets().submitFeedback}, ... Calls block: make them off the main thread (an
 * executor, or Kotlin's {@code withContext(Dispatchers.IO)}); interrupting the thread ends a {@code Retry-After} wait at once.
 * 429s (and 503s of calls safe to repeat) wait out {@code Retry-After} and try again; writes carry one
 * {@code Idempotency-Key} across their attempts, so a retry after a lost connection is answered with the first result
 * instead of writing twice. Thread-safe: one instance per signed-in customer.
 */
public final class DeskGateway {
    static final MediaType JSON = MediaType.parse("application/json");

    /** Settings of a client; {@link #build()} makes it. */
    public static final class Builder {
        private final HttpUrl baseUrl;
        private String token;
        private int maxRetries = 2;
        private long maxRetryDelayMillis = 30_000;
        private OkHttpClient http;
        private SessionExpiredHandler onSessionExpired;

        /** @param baseUrl the gateway, e.g. {@code https://gateway.example.com} (a path such as {@code /api} is kept). */
        public Builder(String baseUrl) {
            HttpUrl parsed = HttpUrl.parse(baseUrl);
            if (parsed == null) throw new IllegalArgumentException("not an http(s) URL: " + baseUrl);
            this.baseUrl = parsed;
        }

        /** A session token from an earlier {@link DeskGateway#authenticate}, kept by the app. */
        public Builder token(String value) { token = value; return this; }
        /** Retries of a 429, and of a 503 when the call is safe to repeat (default 2). */
        public Builder maxRetries(int value) { maxRetries = value; return this; }
        /** The longest wait before a retry, whatever {@code Retry-After} says (default 30 s). */
        public Builder maxRetryDelayMillis(long value) { maxRetryDelayMillis = value; return this; }
        /** The app's OkHttpClient (its pool, timeouts, interceptors); otherwise one of its own (connect 10 s, read 30 s). */
        public Builder httpClient(OkHttpClient value) { http = value; return this; }
        public Builder onSessionExpired(SessionExpiredHandler handler) { onSessionExpired = handler; return this; }

        public DeskGateway build() { return new DeskGateway(this); }
    }

    /** An answer below 400: its status, ETag and body. */
    static final class Answer {
        final int status;
        final String etag;
        final String body;

        Answer(int status, String etag, String body) {
            this.status = status;
            this.etag = etag;
            this.body = body;
        }

        JSONObject json() throws DeskGatewayException {
            try {
                return new JSONObject(body);
            } catch (JSONException unreadable) {
                throw DeskGatewayException.client("unreadable_answer", "the gateway's answer (" + status + ") is not a JSON object");
            }
        }
    }

    private final HttpUrl baseUrl;
    private final OkHttpClient http;
    private final int maxRetries;
    private final long maxRetryDelayMillis;
    private final SessionExpiredHandler onSessionExpired;
    private final Object lock = new Object();
    private String token;
    /** The ETag and the last copy of each ticket read, by path. */
    private final Map<String, Copy> copies = new HashMap<String, Copy>();

    private static final class Copy {
        String etag;
        Ticket ticket;
    }
    private final Tickets tickets = new Tickets(this);

    private DeskGateway(Builder settings) {
        baseUrl = settings.baseUrl;
        // OkHttp's own 10 s read timeout is shorter than a write whose Desk call is tried again may take.
        http = settings.http != null ? settings.http
            : new OkHttpClient.Builder().connectTimeout(10, TimeUnit.SECONDS).readTimeout(30, TimeUnit.SECONDS).build();
        maxRetries = settings.maxRetries;
        maxRetryDelayMillis = settings.maxRetryDelayMillis;
        onSessionExpired = settings.onSessionExpired;
        token = settings.token;
    }

    public Tickets tickets() { return tickets; }

    /** The current session token (keep it to resume without signing in again), or null. */
    public String token() { synchronized (lock) { return token; } }

    /** Signs the customer in with their Sendbird user id and access token (the Desk SDK's {@code authenticate}). */
    public Session authenticate(String userId, String accessToken) throws IOException {
        JSONObject body = new JSONObject();
        Json.put(body, "userId", userId);
        Json.put(body, "accessToken", accessToken);
        Session session = new Session(send("POST", "/v1/sessions", body, null, false).json());
        synchronized (lock) { token = session.token(); }
        return session;
    }

    /** Ends the session on the gateway and forgets it here (also when the gateway answers with an error). */
    public void signOut() throws IOException {
        try {
            send("DELETE", "/v1/sessions/current", null, null, false);
        } finally {
            synchronized (lock) {
                token = null;
                copies.clear();
            }
        }
    }

    /** Merges the customer's own custom fields (the SDK's {@code setCustomerCustomFields}); returns all of them. */
    public Map<String, String> setCustomerCustomFields(Map<String, String> fields) throws IOException {
        JSONObject body = new JSONObject();
        Json.put(body, "customFields", Json.object(fields));
        return Json.strings(send("PATCH", "/v1/customers/me/custom-fields", body, null, false).json().optJSONObject("customFields"));
    }

    /** A page's preview and the message that shows it in Desk (the SDK's URL previews). */
    public LinkPreview linkPreview(String url) throws IOException {
        JSONObject body = new JSONObject();
        Json.put(body, "url", url);
        return new LinkPreview(send("POST", "/v1/link-previews", body, newIdempotencyKey(), false).json());
    }

    public Operation operation(long id) throws IOException {
        return new Operation(send("GET", "/v1/operations/" + id, null, null, false).json());
    }

    /**
     * Polls a queued write until Desk took it ({@code delivered}) or refused it (throws {@code operation_failed}). A
     * write that waits for the customer to sign in again (Desk ended their session meanwhile) calls the
     * {@link SessionExpiredHandler} once.
     */
    public Operation waitForOperation(Operation operation, long everyMillis, long timeoutMillis) throws IOException {
        long deadline = System.nanoTime() + timeoutMillis * 1_000_000L;
        boolean renewed = false;
        while (true) {
            Operation current = operation(operation.id());
            if ("delivered".equals(current.status())) return current;
            if ("failed".equals(current.status())) {
                throw DeskGatewayException.client("operation_failed", current.reason() != null ? current.reason() : "Desk refused the change.");
            }
            String reason = current.reason();
            if (!renewed && reason != null && reason.startsWith("desk_session_expired") && onSessionExpired != null) {
                renewed = true;
                String fresh = onSessionExpired.onSessionExpired(DeskGatewayException.client("desk_session_expired", reason));
                if (fresh != null) synchronized (lock) { token = fresh; }
            }
            if (System.nanoTime() + everyMillis * 1_000_000L >= deadline) {
                throw DeskGatewayException.client("operation_pending", "operation " + operation.id() + " is still queued");
            }
            pause(everyMillis);
        }
    }

    /** A fresh {@code Idempotency-Key}. */
    public static String newIdempotencyKey() { return UUID.randomUUID().toString(); }

    /**
     * One call, with the bearer token, the ETag of a ticket read, the re-authentication hook and the Retry-After
     * waits; an answer of 400 or more is thrown as a {@link DeskGatewayException}.
     */
    Answer send(String method, String path, JSONObject body, String idempotencyKey, boolean cachedRead) throws IOException {
        HttpUrl url = HttpUrl.parse(baseUrl.toString().replaceAll("/+$", "") + path);
        if (url == null) throw new IllegalArgumentException(path);
        // One body for every attempt; POST and PUT need one even when empty (reopen takes none).
        RequestBody payload = body != null ? RequestBody.create(JSON, body.toString())
            : method.equals("POST") || method.equals("PUT") || method.equals("PATCH") ? RequestBody.create(null, new byte[0]) : null;
        boolean repeatable = method.equals("GET") || idempotencyKey != null;
        boolean renewed = false;
        int attempt = 0;
        while (true) {
            if (Thread.interrupted()) throw new InterruptedIOException("the call was interrupted");
            Request.Builder request = new Request.Builder().url(url).method(method, payload).header("Accept", "application/json");
            String current = token();
            if (current != null) request.header("Authorization", "Bearer " + current);
            if (idempotencyKey != null) request.header("Idempotency-Key", idempotencyKey);
            String etag = cachedRead ? etag(path) : null;
            if (etag != null) request.header("If-None-Match", etag);
            DeskGatewayException error;
            try (Response response = http.newCall(request.build()).execute()) {
                ResponseBody content = response.body();
                String text = content == null ? "" : content.string();
                if (response.code() < 400) {
                    Answer answer = new Answer(response.code(), response.header("ETag"), text);
                    if (cachedRead && answer.status == 200 && answer.etag != null) setETag(path, answer.etag);
                    return answer;
                }
                error = DeskGatewayException.fromAnswer(response.code(), text, response.header("Retry-After"), response.header("X-Request-ID"));
            }
            if (error.status() == 401 && ("unauthorized".equals(error.code()) || "desk_session_expired".equals(error.code()))
                && !path.startsWith("/v1/sessions") && !renewed && current != null && onSessionExpired != null) {
                // Not for signing in or out: a sign-out renewed first would end the new session instead.
                renewed = true;
                String fresh = onSessionExpired.onSessionExpired(error);
                if (fresh != null) {
                    synchronized (lock) { token = fresh; }
                    continue;
                }
            }
            if ((error.status() == 429 || (error.status() == 503 && repeatable)) && attempt < maxRetries && error.retryAfter() != null) {
                attempt++;
                // Never sooner than a second, never longer than the limit, whatever the hint says.
                pause(Math.min(maxRetryDelayMillis, Math.max(1, error.retryAfter()) * 1000L));
                continue;
            }
            throw error;
        }
    }

    private static void pause(long millis) throws InterruptedIOException {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("the call was interrupted while waiting");
        }
    }

    // The ETag is sent only while the copy it belongs to is kept: a 304 is answered from that copy.
    private String etag(String path) {
        synchronized (lock) {
            Copy copy = copies.get(path);
            return copy == null || copy.ticket == null ? null : copy.etag;
        }
    }

    private Copy copyAt(String path) {
        Copy copy = copies.get(path);
        if (copy == null) copies.put(path, copy = new Copy());
        return copy;
    }

    private void setETag(String path, String etag) {
        synchronized (lock) { copyAt(path).etag = etag; }
    }

    void remember(String path, Ticket ticket) {
        synchronized (lock) { copyAt(path).ticket = ticket; }
    }

    Ticket copy(String path) {
        synchronized (lock) {
            Copy copy = copies.get(path);
            return copy == null ? null : copy.ticket;
        }
    }

    void forget(String path) {
        synchronized (lock) { copies.remove(path); }
    }
}
