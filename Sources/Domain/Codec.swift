/// The byte-to-text codecs the gateway uses (session tokens, cursors, keys, signatures, ETags), once each.
public enum Codec {
    private static let hexDigits = Array("0123456789abcdef".utf8)
    private static let base64URLAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Lowercase hex, two digits a byte.
    public static func hex(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        for byte in bytes {
            out.append(hexDigits[Int(byte >> 4)])
            out.append(hexDigits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `value` in lowercase hex, zero-padded to at least `width` digits, between `prefix` and `suffix`: one string
    /// made (ETags and request ids are written on every answer).
    public static func hex(_ value: UInt64, width: Int = 1, prefix: String = "", suffix: String = "") -> String {
        let significant = max(1, (64 - value.leadingZeroBitCount + 3) / 4)
        let digits = max(width, significant)
        let head = prefix.utf8.count
        return String(unsafeUninitializedCapacity: head + digits + suffix.utf8.count) { buffer in
            var at = 0
            for byte in prefix.utf8 { buffer[at] = byte; at += 1 }
            var rest = value
            for index in stride(from: head + digits - 1, through: head, by: -1) {
                // Computed, not looked up: the table is a lazily made global, checked on every access.
                let digit = UInt8(truncatingIfNeeded: rest & 0x0F)
                buffer[index] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") - 10 + digit
                rest >>= 4
            }
            at = head + digits
            for byte in suffix.utf8 { buffer[at] = byte; at += 1 }
            return at
        }
    }

    /// Hex in either case; nil for an odd length or any other character.
    public static func decodeHex(_ text: some StringProtocol) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var index = 0
        while index < digits.count {
            guard let high = nibble(digits[index]), let low = nibble(digits[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case 48...57: return c - 48
        case 97...102: return c - 87
        case 65...70: return c - 55
        default: return nil
        }
    }

    /// Base64url without padding (RFC 4648 §5).
    public static func base64URL(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var value = UInt32(0)
            for (offset, byte) in chunk.enumerated() { value |= UInt32(byte) << (16 - 8 * offset) }
            for position in 0...chunk.count { out.append(base64URLAlphabet[Int((value >> (18 - 6 * position)) & 0x3F)]) }
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Base64url or standard base64, padded or not; nil for anything else.
    public static func decodeBase64(_ text: some StringProtocol) -> [UInt8]? {
        var values: [UInt8] = []
        var padding = 0
        for c in text.utf8 {
            if c == UInt8(ascii: "=") { padding += 1; continue }
            guard padding == 0 else { return nil }
            switch c {
            case 65...90: values.append(c - 65)
            case 97...122: values.append(c - 71)
            case 48...57: values.append(c + 4)
            case UInt8(ascii: "-"), UInt8(ascii: "+"): values.append(62)
            case UInt8(ascii: "_"), UInt8(ascii: "/"): values.append(63)
            default: return nil
            }
        }
        guard values.count % 4 != 1, padding <= 2, padding == 0 || (values.count + padding) % 4 == 0 else { return nil }
        var out: [UInt8] = []
        var index = 0
        while index < values.count {
            let group = values[index..<min(index + 4, values.count)]
            var value = UInt32(0)
            for (offset, v) in group.enumerated() { value |= UInt32(v) << (18 - 6 * offset) }
            for position in 0..<(group.count - 1) { out.append(UInt8((value >> (16 - 8 * position)) & 0xFF)) }
            // Bits left over past the last whole byte must be zero, so each text decodes from one byte string only.
            let unused = (group.count * 6) % 8
            if unused > 0, value & ((1 << (24 - (group.count - 1) * 8)) - 1) != 0 { return nil }
            index += 4
        }
        return out
    }
}
