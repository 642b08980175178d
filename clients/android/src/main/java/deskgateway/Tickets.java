package deskgateway;

import java.io.IOException;
import java.io.UnsupportedEncodingException;
import java.net.URLEncoder;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import java.util.TreeMap;

import org.json.JSONObject;

/** The signed-in customer's tickets ({@link DeskGateway#tickets()}). */
public final class Tickets {
    /** A page of {@link #openedList} or {@link #closedList} could not be read; {@link #getCause()} says why. */
    public static final class ListReadFailed extends RuntimeException {
        private static final long serialVersionUID = 1L;

        ListReadFailed(IOException cause) { super(cause); }

        @Override public synchronized IOException getCause() { return (IOException) super.getCause(); }
    }

    private final DeskGateway gateway;

    Tickets(DeskGateway gateway) { this.gateway = gateway; }

    /** Opens a ticket. */
    public Ticket create(NewTicket ticket) throws IOException {
        return create(ticket, DeskGateway.newIdempotencyKey());
    }

    /** Opens a ticket; keep {@code idempotencyKey} to retry the same creation later without opening a second one. */
    public Ticket create(NewTicket ticket, String idempotencyKey) throws IOException {
        return new Ticket(gateway.send("POST", "/v1/tickets", ticket.json(), idempotencyKey, false).json());
    }

    /** One page, newest first. @param status open, closed or all; @param cursor the previous page's nextCursor, or null. */
    public TicketPage page(String status, int limit, String cursor) throws IOException {
        return page(status, limit, cursor, new TreeMap<String, String>());
    }

    /** One page of the tickets whose custom fields hold every one of {@code customFields}. */
    public TicketPage page(String status, int limit, String cursor, Map<String, String> customFields) throws IOException {
        StringBuilder path = new StringBuilder("/v1/tickets?status=").append(encode(status)).append("&limit=").append(limit);
        if (cursor != null) path.append("&cursor=").append(encode(cursor));
        for (Map.Entry<String, String> field : new TreeMap<String, String>(customFields).entrySet()) {
            path.append("&customField=").append(encode(field.getKey() + ":" + field.getValue()));
        }
        return new TicketPage(gateway.send("GET", path.toString(), null, null, false).json());
    }

    /** The open tickets, page after page as they are iterated (the SDK's {@code getOpenedList}, with cursors for offsets). */
    public Iterable<Ticket> openedList(int pageSize) { return list("open", pageSize); }

    /** The closed tickets (the SDK's {@code getClosedList}). */
    public Iterable<Ticket> closedList(int pageSize) { return list("closed", pageSize); }

    /** Reads a ticket; an unchanged one costs a 304 (the client keeps the last copy and its ETag). */
    public Ticket get(long id) throws IOException { return cachedRead("/v1/tickets/" + id); }

    /** The ticket of a chat channel (the SDK's {@code getByChannelUrl}). */
    public Ticket byChannelUrl(String channelUrl) throws IOException {
        return cachedRead("/v1/tickets/by-channel/" + encode(channelUrl).replace("+", "%20"));
    }

    /** The SDK's {@code getOpenCount}. */
    public int openCount() throws IOException {
        return gateway.send("GET", "/v1/tickets/open-count", null, null, false).json().optInt("count");
    }

    /** Merges custom fields into the ticket's (the SDK's {@code setCustomFields}). */
    public WriteResult setCustomFields(long id, Map<String, String> fields) throws IOException {
        JSONObject body = new JSONObject();
        Json.put(body, "customFields", Json.object(fields));
        return write("PATCH", "/v1/tickets/" + id + "/custom-fields", body, null);
    }

    /** Replaces the ticket's related channels (the SDK's {@code setRelatedChannelUrls}). */
    public WriteResult setRelatedChannels(long id, List<String> channelUrls) throws IOException {
        JSONObject body = new JSONObject();
        Json.put(body, "channelUrls", Json.array(channelUrls));
        return write("PUT", "/v1/tickets/" + id + "/related-channels", body, null);
    }

    /**
     * Tells Desk which question the customer picked from an FAQ bot's suggestions (the SDK's {@code selectQuestion}):
     * {@code faqFileId} and the question come from the bot's message. Sent at once, never queued.
     */
    public Ticket selectQuestion(long id, long faqFileId, String question) throws IOException {
        return selectQuestion(id, faqFileId, question, DeskGateway.newIdempotencyKey());
    }

    public Ticket selectQuestion(long id, long faqFileId, String question, String idempotencyKey) throws IOException {
        JSONObject body = new JSONObject();
        Json.put(body, "faqFileId", faqFileId);
        Json.put(body, "question", question);
        return new Ticket(gateway.send("POST", "/v1/tickets/" + id + "/selected-question", body, idempotencyKey, false).json());
    }

    /** Sets the ticket's priority, {@code LOW}, {@code MEDIUM}, {@code HIGH} or {@code URGENT} (the SDK's {@code setPriority}). */
    public WriteResult setPriority(long id, String priority) throws IOException {
        return write("PUT", "/v1/tickets/" + id + "/priority", field("priority", priority), null);
    }

    /**
     * Gives the ticket back to the queue (the SDK's {@code cancel}): Desk takes it from its agent and routes it again,
     * into the team {@code groupKey} names when it is not null.
     */
    public WriteResult cancelAssignment(long id, String groupKey) throws IOException {
        return cancelAssignment(id, groupKey, DeskGateway.newIdempotencyKey());
    }

    public WriteResult cancelAssignment(long id, String groupKey, String idempotencyKey) throws IOException {
        return write("POST", "/v1/tickets/" + id + "/cancel", field("groupKey", groupKey), idempotencyKey);
    }

    public WriteResult close(long id, String comment) throws IOException {
        return close(id, comment, DeskGateway.newIdempotencyKey());
    }

    public WriteResult close(long id, String comment, String idempotencyKey) throws IOException {
        return write("POST", "/v1/tickets/" + id + "/close", field("comment", comment), idempotencyKey);
    }

    public WriteResult reopen(long id) throws IOException { return reopen(id, DeskGateway.newIdempotencyKey()); }

    public WriteResult reopen(long id, String idempotencyKey) throws IOException {
        return write("POST", "/v1/tickets/" + id + "/reopen", null, idempotencyKey);
    }

    /** Answers the agent's closure inquiry {@code messageId} (the SDK's {@code confirmEndOfChat}). */
    public WriteResult confirmEndOfChat(long id, long messageId, boolean confirm) throws IOException {
        return confirmEndOfChat(id, messageId, confirm, DeskGateway.newIdempotencyKey());
    }

    public WriteResult confirmEndOfChat(long id, long messageId, boolean confirm, String idempotencyKey) throws IOException {
        JSONObject body = new JSONObject();
        Json.put(body, "messageId", messageId);
        Json.put(body, "confirm", confirm);
        return write("POST", "/v1/tickets/" + id + "/closure-confirmation", body, idempotencyKey);
    }

    /** Answers the CSAT request {@code messageId}: a score of 1-5, or null to decline (the SDK's {@code submitFeedback}). */
    public WriteResult submitFeedback(long id, long messageId, Integer score, String comment) throws IOException {
        return submitFeedback(id, messageId, score, comment, DeskGateway.newIdempotencyKey());
    }

    public WriteResult submitFeedback(long id, long messageId, Integer score, String comment, String idempotencyKey) throws IOException {
        JSONObject body = new JSONObject();
        Json.put(body, "messageId", messageId);
        // Both always sent: the gateway takes null for a decline and for no comment, never a missing one.
        Json.put(body, "score", score);
        Json.put(body, "comment", comment);
        return write("POST", "/v1/tickets/" + id + "/feedback", body, idempotencyKey);
    }

    private Ticket cachedRead(String path) throws IOException {
        DeskGateway.Answer answer = gateway.send("GET", path, null, null, true);
        if (answer.status == 304) {
            Ticket kept = gateway.copy(path);
            if (kept != null) return kept;
            // A 304 without a copy (the copy was dropped meanwhile): ask again without an ETag.
            gateway.forget(path);
            answer = gateway.send("GET", path, null, null, true);
        }
        Ticket ticket = new Ticket(answer.json());
        gateway.remember(path, ticket);
        return ticket;
    }

    /** A body of one field, or an empty one when {@code value} is null. */
    private static JSONObject field(String name, String value) {
        JSONObject body = new JSONObject();
        if (value != null) Json.put(body, name, value);
        return body;
    }

    private WriteResult write(String method, String path, JSONObject body, String idempotencyKey) throws IOException {
        DeskGateway.Answer answer = gateway.send(method, path, body, idempotencyKey, false);
        return answer.status == 202 ? new WriteResult(null, new Operation(answer.json())) : new WriteResult(new Ticket(answer.json()), null);
    }

    private Iterable<Ticket> list(final String status, final int pageSize) {
        return new Iterable<Ticket>() {
            @Override public Iterator<Ticket> iterator() { return new Pages(status, pageSize); }
        };
    }

    /** The next page is read when the last one is used up. */
    private final class Pages implements Iterator<Ticket> {
        private final String status;
        private final int pageSize;
        private final List<Ticket> buffered = new ArrayList<Ticket>();
        private String cursor;
        private boolean finished;

        Pages(String status, int pageSize) {
            this.status = status;
            this.pageSize = pageSize;
        }

        @Override public boolean hasNext() {
            while (buffered.isEmpty() && !finished) {
                try {
                    TicketPage page = page(status, pageSize, cursor);
                    buffered.addAll(page.items());
                    cursor = page.nextCursor();
                    finished = !page.hasNext() || cursor == null;
                } catch (IOException failed) {
                    throw new ListReadFailed(failed);
                }
            }
            return !buffered.isEmpty();
        }

        @Override public Ticket next() {
            if (!hasNext()) throw new NoSuchElementException();
            return buffered.remove(0);
        }

        @Override public void remove() { throw new UnsupportedOperationException(); }
    }

    private static String encode(String text) {
        try {
            return URLEncoder.encode(text, "UTF-8");
        } catch (UnsupportedEncodingException impossible) {
            throw new IllegalStateException(impossible);
        }
    }
}
