import JSON

/// Markup written straight into UTF-8 bytes. The report page writes hundreds of rows of small pieces: appended to a
/// `String`, each piece paid the string's capacity, uniqueness and ASCII checks (a third of the page's CPU); appended
/// to an array, each still paid its uniqueness and capacity checks and numbers went through a scratch buffer. The
/// bytes are the JSON writer's own buffer (not copyable, writes inlined).
public struct HTMLWriter: ~Copyable {
    var out: JSONWriter

    public init(capacity: Int) {
        out = JSONWriter(capacity: capacity)
    }

    public var bytes: [UInt8] { out.bytes }

    public mutating func reserve(_ extra: Int) {
        out.reserve(extra)
    }

    /// Markup from the source (literals only: no escaping).
    @inline(__always)
    public mutating func raw(_ text: StaticString) {
        out.raw(text)
    }

    /// Text that is already markup or already escaped.
    public mutating func markup(_ text: String) {
        out.text(text)
    }

    /// Text escaped for XML content and attribute values (`SVG.escape`'s rules).
    public mutating func escaped(_ text: String) {
        SVG.appendEscaped(text, to: &out)
    }

    public mutating func integer(_ value: Int) {
        out.integer(value)
    }

    /// A number with a fixed count of decimals (`SVG.fixed`).
    public mutating func fixed(_ value: Double, _ places: Int) {
        SVG.appendFixed(value, places, to: &out)
    }

    /// A figure with a fixed count of decimals and its suffix, or a dash when there is none (no responses).
    public mutating func figure(_ value: Double?, places: Int, suffix: StaticString) {
        guard let value else { return raw("–") }
        fixed(value, places)
        raw(suffix)
    }

    /// The JSON API's spelling of a number (nothing for nil).
    public mutating func number(_ value: Double?) {
        if let value { out.number(value) }
    }

    public var string: String { out.string }
}
