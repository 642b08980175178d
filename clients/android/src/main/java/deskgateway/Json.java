package deskgateway;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.json.JSONArray;
import org.json.JSONObject;

/** org.json's optString turns null into "null"; the gateway's nulls stay null here. */
final class Json {
    private Json() {}

    static String string(JSONObject object, String key, String absent) {
        return object.isNull(key) ? absent : object.optString(key, absent);
    }

    static Long number(JSONObject object, String key) {
        return object.isNull(key) ? null : Long.valueOf(object.optLong(key));
    }

    static Map<String, String> strings(JSONObject object) {
        Map<String, String> out = new LinkedHashMap<String, String>();
        if (object == null) return out;
        Iterator<String> keys = object.keys();
        while (keys.hasNext()) {
            String key = keys.next();
            out.put(key, object.optString(key));
        }
        return Collections.unmodifiableMap(out);
    }

    static List<String> strings(JSONArray array) {
        List<String> out = new ArrayList<String>();
        for (int index = 0; array != null && index < array.length(); index++) out.add(array.optString(index));
        return Collections.unmodifiableList(out);
    }

    static JSONObject object(Map<String, String> fields) {
        JSONObject object = new JSONObject();
        for (Map.Entry<String, String> field : fields.entrySet()) put(object, field.getKey(), field.getValue());
        return object;
    }

    static JSONArray array(List<String> values) {
        JSONArray array = new JSONArray();
        for (String value : values) array.put(value);
        return array;
    }

    /** put without the checked exception: the keys are the client's own, never null. */
    static JSONObject put(JSONObject object, String key, Object value) {
        try {
            return object.put(key, value == null ? JSONObject.NULL : value);
        } catch (org.json.JSONException impossible) {
            throw new IllegalArgumentException(impossible);
        }
    }
}
