/// JSON string escaping for hand-built lines (logs, small fixed bodies) and for the serializer.
public enum JSONText {
    public static func append(_ text: String, to out: inout String) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 2)
        append(text, to: &bytes)
        out += String(decoding: bytes, as: UTF8.self)
    }

    /// Escapes at the UTF-8 level: quote, backslash and control characters, plus U+2028/U+2029 (which break
    /// JavaScript embedding); everything else is copied as is.
    public static func append(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var runStart = 0
            var index = 0
            while index < utf8.count {
                let byte = utf8[index]
                let escape: StaticString?
                var width = 1
                switch byte {
                case UInt8(ascii: "\""): escape = "\\\""
                case UInt8(ascii: "\\"): escape = "\\\\"
                case UInt8(ascii: "\n"): escape = "\\n"
                case UInt8(ascii: "\r"): escape = "\\r"
                case UInt8(ascii: "\t"): escape = "\\t"
                case 0..<0x20: escape = ""
                case 0xE2 where index + 2 < utf8.count && utf8[index + 1] == 0x80 && (utf8[index + 2] == 0xA8 || utf8[index + 2] == 0xA9):
                    escape = utf8[index + 2] == 0xA8 ? "\\u2028" : "\\u2029"
                    width = 3
                default: escape = nil
                }
                guard let escape else {
                    index += 1
                    continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                if escape.utf8CodeUnitCount == 0 {
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                            hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                } else {
                    escape.withUTF8Buffer { out.append(contentsOf: $0) }
                }
                index += width
                runStart = index
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
        out.append(UInt8(ascii: "\""))
    }

    public static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        append(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `scaled / 10^decimals` in decimal, trailing zeros of the fraction dropped (`scaled` is not a multiple of
    /// 10^decimals, so there is a fraction).
    public static func appendFixed(_ scaled: Int64, decimals: Int, to out: inout [UInt8]) {
        var divisor: Int64 = 1
        for _ in 0..<decimals { divisor *= 10 }
        if scaled < 0 { out.append(UInt8(ascii: "-")) }
        let magnitude = scaled.magnitude
        appendInteger(Int64(magnitude / UInt64(divisor)), to: &out)
        out.append(UInt8(ascii: "."))
        var fraction = magnitude % UInt64(divisor)
        var width = decimals
        while fraction % 10 == 0 {
            fraction /= 10
            width -= 1
        }
        out.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: width))
        var index = out.count - 1
        while fraction > 0 {
            out[index] = UInt8(ascii: "0") + UInt8(fraction % 10)
            fraction /= 10
            index -= 1
        }
    }

    /// A JSON number: integral values without a fraction, up to four decimals exactly, others as Swift prints
    /// them; not finite is null.
    public static func appendNumber(_ d: Double, to out: inout [UInt8]) {
        if !d.isFinite {
            out.append(contentsOf: "null".utf8)
        } else if d == d.rounded() && abs(d) < 1e15 {
            appendInteger(Int64(d), to: &out)
        } else if abs(d) < 1e9, case let scaled = (d * 10_000).rounded(), scaled / 10_000 == d {
            // Up to four decimals (averages, percentages, rates): the decimal reads back as the same Double,
            // so it is the shortest form, written without going through String.
            appendFixed(Int64(scaled), decimals: 4, to: &out)
        } else {
            out.append(contentsOf: String(d).utf8)
        }
    }

    /// Decimal digits without going through String.
    public static func appendInteger(_ value: Int64, to out: inout [UInt8]) {
        if value == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        var magnitude = value.magnitude
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                buffer[23 - count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            }
            if value < 0 { out.append(UInt8(ascii: "-")) }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }
}
