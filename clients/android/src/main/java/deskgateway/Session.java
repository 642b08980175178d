package deskgateway;

import org.json.JSONObject;

/** A customer's gateway session ({@code POST /v1/sessions}). */
public final class Session {
    private final JSONObject json;

    Session(JSONObject json) { this.json = json; }

    /** The bearer token; keep it (e.g. in EncryptedSharedPreferences) to resume without signing in again. */
    public String token() { return Json.string(json, "token", null); }
    public String tokenType() { return Json.string(json, "tokenType", null); }
    public String expiresAt() { return Json.string(json, "expiresAt", null); }
    public String userId() { return Json.string(json, "userId", null); }
    public JSONObject json() { return json; }
}
