package deskgateway;

import org.json.JSONObject;

/** A page's OpenGraph preview and the chat message that shows it in Desk ({@code POST /v1/link-previews}). */
public final class LinkPreview {
    private final JSONObject json;

    LinkPreview(JSONObject json) { this.json = json; }

    public String url() { return Json.string(json, "url", null); }
    public String title() { return Json.string(json, "title", null); }
    public String description() { return Json.string(json, "description", null); }
    public String image() { return Json.string(json, "image", null); }
    public String siteName() { return Json.string(json, "siteName", null); }
    /** Send a user message with this custom type ({@code SENDBIRD_DESK_RICH_MESSAGE}) ... */
    public String messageCustomType() { return Json.string(json.optJSONObject("message"), "customType", null); }
    /** ... and this data (a JSON string) through the Chat SDK, and Desk shows the preview. */
    public String messageData() { return Json.string(json.optJSONObject("message"), "data", null); }
    public JSONObject json() { return json; }
}
