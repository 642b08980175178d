package deskgateway;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

import org.json.JSONArray;
import org.json.JSONObject;

/** A ticket as the gateway answers it (openapi.yaml's {@code Ticket}); {@link #json()} holds every field. */
public final class Ticket {
    private final JSONObject json;

    Ticket(JSONObject json) { this.json = json; }

    public long id() { return json.optLong("id"); }
    /** The Sendbird group channel of the conversation. */
    public String channelUrl() { return Json.string(json, "channelUrl", null); }
    public String title() { return Json.string(json, "title", null); }
    /** INITIALIZED, PROACTIVE, UNASSIGNED, ASSIGNED, OPEN, CLOSED, IDLE, WORK_IN_PROGRESS. */
    public String status() { return Json.string(json, "status", null); }
    public String closeStatus() { return Json.string(json, "closeStatus", null); }
    /** URGENT, HIGH, MEDIUM or LOW. */
    public String priority() { return Json.string(json, "priority", null); }
    /** The agent's id, or null while nobody is assigned. */
    public Long agentId() { return json.isNull("agent") ? null : Json.number(json.optJSONObject("agent"), "id"); }
    public String agentName() { return json.isNull("agent") ? null : Json.string(json.optJSONObject("agent"), "name", null); }
    /** The team's id, or null. */
    public Long teamId() { return json.isNull("team") ? null : Json.number(json.optJSONObject("team"), "id"); }
    /** The team's key (the {@code groupKey} tickets are created and transferred with), or null. */
    public String teamKey() { return json.isNull("team") ? null : Json.string(json.optJSONObject("team"), "key", null); }
    public Map<String, String> customFields() { return Json.strings(json.optJSONObject("customFields")); }
    public List<String> relatedChannelUrls() { return Json.strings(json.optJSONArray("relatedChannelUrls")); }
    /** RFC 3339 with milliseconds, UTC. */
    public String createdAt() { return Json.string(json, "createdAt", null); }
    public String updatedAt() { return Json.string(json, "updatedAt", null); }
    public String closedAt() { return Json.string(json, "closedAt", null); }
    public String closeComment() { return Json.string(json, "closeComment", null); }
    /** The customer's CSAT score (1-5), or null when not rated. */
    public Integer satisfactionScore() {
        JSONObject satisfaction = json.isNull("satisfaction") ? null : json.optJSONObject("satisfaction");
        return satisfaction == null ? null : Integer.valueOf(satisfaction.optInt("score"));
    }
    public String satisfactionComment() {
        JSONObject satisfaction = json.isNull("satisfaction") ? null : json.optJSONObject("satisfaction");
        return satisfaction == null ? null : Json.string(satisfaction, "comment", null);
    }
    /** Ids of the changes queued for Desk and not delivered yet. */
    public List<Long> pendingOperationIds() {
        List<Long> ids = new ArrayList<Long>();
        JSONArray pending = json.optJSONArray("pendingOperations");
        for (int index = 0; pending != null && index < pending.length(); index++) ids.add(pending.optJSONObject(index).optLong("id"));
        return Collections.unmodifiableList(ids);
    }
    /** True when Desk could not be reached and this is the gateway's cached copy. */
    public boolean stale() { return json.optBoolean("stale"); }
    public JSONObject json() { return json; }

    @Override public String toString() { return json.toString(); }
}
