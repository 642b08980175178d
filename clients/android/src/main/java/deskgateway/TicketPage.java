package deskgateway;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

import org.json.JSONArray;
import org.json.JSONObject;

/** One page of the customer's tickets, newest first. */
public final class TicketPage {
    private final JSONObject json;
    private final List<Ticket> items;

    TicketPage(JSONObject json) {
        this.json = json;
        List<Ticket> tickets = new ArrayList<Ticket>();
        JSONArray listed = json.optJSONArray("items");
        for (int index = 0; listed != null && index < listed.length(); index++) tickets.add(new Ticket(listed.optJSONObject(index)));
        items = Collections.unmodifiableList(tickets);
    }

    public List<Ticket> items() { return items; }
    /** The cursor of the next page, or null at the end. */
    public String nextCursor() { return Json.string(json, "nextCursor", null); }
    public boolean hasNext() { return json.optBoolean("hasNext"); }
    public boolean stale() { return json.optBoolean("stale"); }
}
