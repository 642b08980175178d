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
    public static func append(_ text: String, to out: inout [UInt8]) { escape(text, into: &out) }

    static func escape<Sink: ByteSink & ~Copyable>(_ text: String, into out: inout Sink) {
        out.put(UInt8(ascii: "\""))
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
                out.put(UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                if escape.utf8CodeUnitCount == 0 {
                    let hex: StaticString = "0123456789abcdef"
                    for prefix in "\\u00".utf8 { out.put(prefix) }
                    out.put(hex.utf8Start[Int(byte >> 4)])
                    out.put(hex.utf8Start[Int(byte & 0xF)])
                } else {
                    escape.withUTF8Buffer { out.put($0) }
                }
                index += width
                runStart = index
            }
            out.put(UnsafeBufferPointer(rebasing: utf8[runStart..<utf8.count]))
        }
        out.put(UInt8(ascii: "\""))
    }

    public static func quoted(_ text: String) -> String {
        var out: [UInt8] = []
        append(text, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `scaled / 10^decimals` in decimal, trailing zeros of the fraction dropped (`scaled` is not a multiple of
    /// 10^decimals, so there is a fraction).
    public static func appendFixed(_ scaled: Int64, decimals: Int, to out: inout [UInt8]) { fixed(scaled, decimals: decimals, into: &out) }

    @inlinable
    static func fixed<Sink: ByteSink & ~Copyable>(_ scaled: Int64, decimals: Int, into out: inout Sink) {
        var divisor: UInt64 = 1
        for _ in 0..<decimals { divisor *= 10 }
        if scaled < 0 { out.put(UInt8(ascii: "-")) }
        let magnitude = scaled.magnitude
        out.putDecimal(magnitude / divisor)
        out.put(UInt8(ascii: "."))
        var fraction = magnitude % divisor
        var width = decimals
        while fraction % 10 == 0 {
            fraction /= 10
            width -= 1
        }
        // Right to left into a small buffer, by constant divisions (a division by a varying power of ten per digit
        // was a twentieth of a weekly report's time), then byte by byte (a copy of a varying length is a call to
        // memcpy); the fraction is left-padded with zeros to its width.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            let start = buffer.baseAddress!
            for index in stride(from: width - 1, through: 0, by: -1) {
                start[index] = UInt8(ascii: "0") + UInt8(fraction % 10)
                fraction /= 10
            }
            for index in 0..<width { out.put(start[index]) }
        }
    }

    /// A JSON number: integral values without a fraction, up to four decimals exactly, others as Swift prints
    /// them; not finite is null.
    public static func appendNumber(_ d: Double, to out: inout [UInt8]) { number(d, into: &out) }

    @inlinable
    static func number<Sink: ByteSink & ~Copyable>(_ d: Double, into out: inout Sink) {
        if !d.isFinite {
            for byte in "null".utf8 { out.put(byte) }
        } else if abs(d) < 1e15, case let whole = Int64(d), Double(whole) == d {
            // Integral (the conversion truncates in one instruction; `rounded()` is a call into libm).
            integer(whole, into: &out)
        } else if abs(d) < 1e9, case let product = d * 10_000,
                  case let scaled = Int64(product < 0 ? product - 0.5 : product + 0.5), Double(scaled) / 10_000 == d {
            // Up to four decimals (averages, percentages, rates): the decimal reads back as the same Double, so it
            // is the shortest form, written without going through String. Were `scaled` ever a neighbour of the
            // nearest integer, the check fails and Swift prints the number, still exactly.
            fixed(scaled, decimals: 4, into: &out)
        } else {
            for byte in String(d).utf8 { out.put(byte) }
        }
    }

    /// Decimal digits without going through String.
    public static func appendInteger(_ value: Int64, to out: inout [UInt8]) { integer(value, into: &out) }

    @inlinable
    static func integer<Sink: ByteSink & ~Copyable>(_ value: Int64, into out: inout Sink) {
        out.putInteger(value)
    }
}

extension JSONText {
    /// `YYYY-MM-DD` of a year 0…9999 into the ten bytes at `start`, digit by digit (reports write thousands of dates).
    @inlinable
    static func date(year: Int, month: Int, day: Int, at start: UnsafeMutablePointer<UInt8>) {
        let zero = UInt8(ascii: "0"), dash = UInt8(ascii: "-")
        start[0] = zero + UInt8(year / 1000 % 10)
        start[1] = zero + UInt8(year / 100 % 10)
        start[2] = zero + UInt8(year / 10 % 10)
        start[3] = zero + UInt8(year % 10)
        start[4] = dash
        start[5] = zero + UInt8(month / 10 % 10)
        start[6] = zero + UInt8(month % 10)
        start[7] = dash
        start[8] = zero + UInt8(day / 10 % 10)
        start[9] = zero + UInt8(day % 10)
    }

    /// The same date as a string.
    public static func date(year: Int, month: Int, day: Int) -> String {
        String(unsafeUninitializedCapacity: 10) { buffer in
            date(year: year, month: month, day: day, at: buffer.baseAddress!)
            return 10
        }
    }
}

/// Where the escaping and number formatting write: an array, or the JSON writer's own buffer (which the report
/// page's HTML writer uses too).
public protocol ByteSink: ~Copyable {
    mutating func put(_ byte: UInt8)
    mutating func put(_ bytes: UnsafeBufferPointer<UInt8>)
    /// Decimal digits of a number, without going through String.
    mutating func putDecimal(_ value: UInt64)
}

extension ByteSink where Self: ~Copyable {
    @inlinable
    public mutating func putDecimal(_ value: UInt64) {
        // UInt64.max has 20 digits.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buffer in
            let digits = DecimalDigits.count(value)
            DecimalDigits.write(value, digits: digits, at: buffer.baseAddress!)
            put(UnsafeBufferPointer(start: buffer.baseAddress, count: digits))
        }
    }

    /// Literal text, copied as it is.
    @inlinable @inline(__always)
    public mutating func put(_ text: StaticString) {
        put(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    /// A signed integer in decimal.
    @inlinable
    public mutating func putInteger(_ value: Int64) {
        if value < 0 { put(UInt8(ascii: "-")) }
        putDecimal(value.magnitude)
    }
}

/// Decimal digits of an unsigned number, counted first so they can be written in place, right to left.
@usableFromInline
enum DecimalDigits {
    @inlinable
    static func count(_ value: UInt64) -> Int {
        var digits = 1
        var rest = value
        while rest >= 10 {
            rest /= 10
            digits += 1
        }
        return digits
    }

    @inlinable
    static func write(_ value: UInt64, digits: Int, at start: UnsafeMutablePointer<UInt8>) {
        var magnitude = value
        var index = digits
        repeat {
            index -= 1
            start[index] = UInt8(ascii: "0") + UInt8(magnitude % 10)
            magnitude /= 10
        } while magnitude > 0
    }
}

/// Bytes written into memory made ready elsewhere, such as a string's storage while
/// `String(unsafeUninitializedCapacity:initializingUTF8With:)` makes it.
public struct MemorySink: ByteSink {
    @usableFromInline let base: UnsafeMutablePointer<UInt8>
    @usableFromInline let capacity: Int
    /// Bytes written so far.
    public var count = 0

    public init(_ buffer: UnsafeMutableBufferPointer<UInt8>) {
        base = buffer.baseAddress!
        capacity = buffer.count
    }

    @inlinable public mutating func put(_ byte: UInt8) {
        precondition(count < capacity, "written past the memory")
        base[count] = byte
        count += 1
    }

    @inlinable public mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) {
        precondition(count + bytes.count <= capacity, "written past the memory")
        guard let source = bytes.baseAddress else { return }
        (base + count).update(from: source, count: bytes.count)
        count += bytes.count
    }
}

extension Array: ByteSink where Element == UInt8 {
    @inlinable public mutating func put(_ byte: UInt8) { append(byte) }
    @inlinable public mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) { append(contentsOf: bytes) }
}
