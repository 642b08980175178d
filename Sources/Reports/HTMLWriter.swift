import JSON

/// Markup written straight into UTF-8 bytes. The report page writes hundreds of rows of small pieces; appended to a
/// `String`, each piece paid the string's capacity, uniqueness and ASCII checks (a third of the page's CPU).
public struct HTMLWriter {
    public private(set) var bytes: [UInt8] = []

    public init(capacity: Int) {
        bytes.reserveCapacity(capacity)
    }

    public mutating func reserve(_ extra: Int) {
        bytes.reserveCapacity(bytes.count + extra)
    }

    /// Markup from the source (literals only: no escaping).
    public mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Text that is already markup or already escaped.
    public mutating func markup(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    /// Text escaped for XML content and attribute values (`SVG.escape`'s rules).
    public mutating func escaped(_ text: String) {
        SVG.appendEscaped(text, to: &bytes)
    }

    public mutating func integer(_ value: Int) {
        JSONText.appendInteger(Int64(value), to: &bytes)
    }

    /// A number with a fixed count of decimals (`SVG.fixed`).
    public mutating func fixed(_ value: Double, _ places: Int) {
        SVG.appendFixed(value, places, to: &bytes)
    }

    /// The JSON API's spelling of a number (nothing for nil).
    public mutating func number(_ value: Double?) {
        if let value { JSONText.appendNumber(value, to: &bytes) }
    }

    public var string: String { String(decoding: bytes, as: UTF8.self) }
}
