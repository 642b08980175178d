package deskgateway;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.json.JSONObject;

/** A ticket to open: title and the customer's name, and optionally its group, priority, custom fields and channels. */
public final class NewTicket {
    private final String title;
    private final String userName;
    private String groupKey;
    private String priority;
    private final Map<String, String> customFields = new LinkedHashMap<String, String>();
    private List<String> relatedChannelUrls;

    public NewTicket(String title, String userName) {
        this.title = title;
        this.userName = userName;
    }

    /** The Desk team's key the ticket goes to. */
    public NewTicket groupKey(String key) { groupKey = key; return this; }
    /** URGENT, HIGH, MEDIUM or LOW. */
    public NewTicket priority(String value) { priority = value; return this; }
    public NewTicket customField(String key, String value) { customFields.put(key, value); return this; }
    public NewTicket relatedChannelUrls(List<String> urls) { relatedChannelUrls = new ArrayList<String>(urls); return this; }

    JSONObject json() {
        JSONObject body = new JSONObject();
        Json.put(body, "title", title);
        Json.put(body, "userName", userName);
        if (groupKey != null) Json.put(body, "groupKey", groupKey);
        if (priority != null) Json.put(body, "priority", priority);
        if (!customFields.isEmpty()) Json.put(body, "customFields", Json.object(customFields));
        if (relatedChannelUrls != null) Json.put(body, "relatedChannelUrls", Json.array(relatedChannelUrls));
        return body;
    }
}
