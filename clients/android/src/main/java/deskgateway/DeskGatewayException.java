package deskgateway;

import java.io.IOException;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.json.JSONArray;
import org.json.JSONException;
import org.json.JSONObject;

/**
 * A problem+json answer of the gateway, typed by its stable {@link #code()} ({@code validation_failed},
 * {@code ticket_state_conflict}, {@code rate_limited}, {@code desk_session_expired}, ...), or a client-side end of a
 * queued write ({@code operation_failed}, {@code operation_pending}). A network failure is a plain {@link IOException}.
 */
public final class DeskGatewayException extends IOException {
    private static final long serialVersionUID = 1L;

    /** A field the gateway refused, with why (422 {@code validation_failed}). */
    public static final class FieldError {
        public final String field;
        public final String message;

        FieldError(String field, String message) {
            this.field = field;
            this.message = message;
        }

        @Override public String toString() { return field + ": " + message; }
    }

    private final int status;
    private final String code;
    private final String title;
    private final String detail;
    private final Integer retryAfter;
    private final String requestId;
    private final String ticketStatus;
    private final List<FieldError> fieldErrors;

    DeskGatewayException(int status, String code, String title, String detail, Integer retryAfter, String requestId,
                         String ticketStatus, List<FieldError> fieldErrors) {
        super(status + " " + code + ": " + (detail.isEmpty() ? title : detail));
        this.status = status;
        this.code = code;
        this.title = title;
        this.detail = detail;
        this.retryAfter = retryAfter;
        this.requestId = requestId;
        this.ticketStatus = ticketStatus;
        this.fieldErrors = Collections.unmodifiableList(fieldErrors);
    }

    /** One the client raises itself (no answer of the gateway carries it). */
    static DeskGatewayException client(String code, String detail) {
        return new DeskGatewayException(0, code, code, detail, null, null, null, new ArrayList<FieldError>());
    }

    /** The problem document of an error answer; a body that is not one still gives its status. */
    static DeskGatewayException fromAnswer(int status, String body, String retryAfter, String requestId) {
        JSONObject document;
        try {
            document = new JSONObject(body);
        } catch (JSONException notJSON) {
            document = new JSONObject();
        }
        List<FieldError> errors = new ArrayList<FieldError>();
        JSONArray listed = document.optJSONArray("errors");
        for (int index = 0; listed != null && index < listed.length(); index++) {
            JSONObject error = listed.optJSONObject(index);
            if (error != null) errors.add(new FieldError(error.optString("field"), error.optString("message")));
        }
        Integer seconds = null;
        if (retryAfter != null) {
            try {
                seconds = Integer.valueOf(retryAfter.trim());
            } catch (NumberFormatException dateForm) {
                seconds = null;
            }
        }
        return new DeskGatewayException(status, Json.string(document, "code", "http_" + status), Json.string(document, "title", "HTTP " + status),
                                        Json.string(document, "detail", ""), seconds, requestId, Json.string(document, "ticketStatus", null), errors);
    }

    /** The HTTP status; 0 when the client raised it. */
    public int status() { return status; }
    /** The problem's {@code code} as sent (see the gateway's docs/api.md for the table). */
    public String code() { return code; }
    public String title() { return title; }
    public String detail() { return detail; }
    /** Seconds to wait before trying again ({@code Retry-After}), or null. */
    public Integer retryAfter() { return retryAfter; }
    /** {@code X-Request-ID}: quote it when reporting a problem. */
    public String requestId() { return requestId; }
    /** The ticket's status on a 409 {@code ticket_state_conflict}, when the gateway knows it. */
    public String ticketStatus() { return ticketStatus; }
    public List<FieldError> fieldErrors() { return fieldErrors; }
}
