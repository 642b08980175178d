/// JSON written straight into bytes, for answers large enough that building a `JSONValue` tree first costs more
/// than writing them (a weekly report of every agent is thousands of rows). The caller writes the punctuation and
/// keys (`raw`); values are escaped and formatted exactly as `JSONValue` does.
public struct JSONWriter {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int = 256) {
        bytes.reserveCapacity(capacity)
    }

    /// Punctuation and keys, copied as they are (no escaping: literals only).
    public mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// A civil date as a JSON string, YYYY-MM-DD (years 0–9999), digit by digit: a weekly report writes thousands.
    public mutating func date(year: Int, month: Int, day: Int) {
        let zero = UInt8(ascii: "0"), quote = UInt8(ascii: "\""), dash = UInt8(ascii: "-")
        bytes.append(quote)
        bytes.append(zero + UInt8(year / 1000 % 10))
        bytes.append(zero + UInt8(year / 100 % 10))
        bytes.append(zero + UInt8(year / 10 % 10))
        bytes.append(zero + UInt8(year % 10))
        bytes.append(dash)
        bytes.append(zero + UInt8(month / 10 % 10))
        bytes.append(zero + UInt8(month % 10))
        bytes.append(dash)
        bytes.append(zero + UInt8(day / 10 % 10))
        bytes.append(zero + UInt8(day % 10))
        bytes.append(quote)
    }

    public mutating func string(_ text: String) {
        JSONText.append(text, to: &bytes)
    }

    public mutating func integer(_ value: Int) {
        JSONText.appendInteger(Int64(value), to: &bytes)
    }

    /// A number, or null for nil.
    public mutating func number(_ value: Double?) {
        if let value { JSONText.appendNumber(value, to: &bytes) } else { raw("null") }
    }
}
