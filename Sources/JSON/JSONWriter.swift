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
