#if canImport(Glibc)
import Glibc
#endif

/// RFC 3339 timestamps as Desk writes them (`2026-11-21T08:39:17.123Z`), from and to seconds since 1970.
public enum ISOTimestamp {
    public static func format(_ secondsSince1970: Double) -> String {
        var seconds = time_t(secondsSince1970.rounded(.down))
        var millis = Int((secondsSince1970 - Double(seconds)) * 1000)
        if millis >= 1000 { millis = 999 }
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return pad(Int(parts.tm_year) + 1900, 4) + "-" + pad(Int(parts.tm_mon) + 1, 2) + "-" + pad(Int(parts.tm_mday), 2)
            + "T" + pad(Int(parts.tm_hour), 2) + ":" + pad(Int(parts.tm_min), 2) + ":" + pad(Int(parts.tm_sec), 2)
            + "." + pad(millis, 3) + "Z"
    }

    /// Accepts `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; nil otherwise.
    public static func parse(_ text: String) -> Double? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20 else { return nil }
        func number(_ start: Int, _ length: Int) -> Int? {
            guard start + length <= bytes.count else { return nil }
            var value = 0
            for byte in bytes[start..<start + length] {
                guard byte >= 48, byte <= 57 else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            return value
        }
        guard let year = number(0, 4), bytes[4] == 45, let month = number(5, 2), bytes[7] == 45, let day = number(8, 2),
              bytes[10] == 84 || bytes[10] == 116 || bytes[10] == 32,
              let hour = number(11, 2), bytes[13] == 58, let minute = number(14, 2), bytes[16] == 58,
              let second = number(17, 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61 else { return nil }
        var index = 19
        var fraction = 0.0
        if index < bytes.count, bytes[index] == 46 {
            index += 1
            var scale = 0.1
            let start = index
            while index < bytes.count, bytes[index] >= 48, bytes[index] <= 57 {
                fraction += Double(bytes[index] - 48) * scale
                scale /= 10
                index += 1
            }
            guard index > start else { return nil }
        }
        var offset = 0
        guard index < bytes.count else { return nil }
        switch bytes[index] {
        case 90, 122: index += 1
        case 43, 45:
            guard let oh = number(index + 1, 2), bytes.count > index + 3, bytes[index + 3] == 58,
                  let om = number(index + 4, 2) else { return nil }
            offset = (oh * 3600 + om * 60) * (bytes[index] == 45 ? -1 : 1)
            index += 6
        default: return nil
        }
        guard index == bytes.count else { return nil }
        var parts = tm()
        parts.tm_year = Int32(year - 1900)
        parts.tm_mon = Int32(month - 1)
        parts.tm_mday = Int32(day)
        parts.tm_hour = Int32(hour)
        parts.tm_min = Int32(minute)
        parts.tm_sec = Int32(second)
        let epoch = timegm(&parts)
        return Double(epoch - offset) + fraction
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return text.count >= width ? text : String(repeating: "0", count: width - text.count) + text
    }
}
