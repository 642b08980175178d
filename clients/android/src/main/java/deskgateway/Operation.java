package deskgateway;

import org.json.JSONObject;

/** A write queued while Desk could not be reached (202), as {@code GET /v1/operations/{id}} reports it. */
public final class Operation {
    private final JSONObject json;

    Operation(JSONObject json) { this.json = json; }

    public long id() { return json.optLong("id"); }
    /** feedback, closure-confirmation, close, reopen, cancel, custom-fields, related-channels or priority. */
    public String kind() { return Json.string(json, "kind", null); }
    public long ticketId() { return json.optLong("ticketId"); }
    /** pending, delivered or failed. */
    public String status() { return Json.string(json, "status", null); }
    public int attempts() { return json.optInt("attempts"); }
    /** Why the last attempt did not succeed ({@code code: text}), or null. */
    public String reason() { return Json.string(json, "reason", null); }
    public String createdAt() { return Json.string(json, "createdAt", null); }
    public String finishedAt() { return Json.string(json, "finishedAt", null); }
    /**
     * customer (the customer's Desk session) or application (Desk's Platform API, for a close, priority or cancel
     * whose customer did not sign in again in time); null while pending, when failed, or if an older gateway delivered it.
     */
    public String deliveredAs() { return Json.string(json, "deliveredAs", null); }
    public JSONObject json() { return json; }

    @Override public String toString() { return json.toString(); }
}
