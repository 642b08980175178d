/// JSON written straight into bytes, for answers large enough that building a `JSONValue` tree first costs more
/// than writing them (a weekly report of every agent is thousands of rows). The caller writes the punctuation and
/// keys (`raw`); values are escaped and formatted exactly as `JSONValue` does. The bytes go into one growing buffer of
/// its own: tens of thousands of small appends to an array paid its uniqueness and capacity checks each time.
public struct JSONWriter {
    private let buffer: JSONByteBuffer

    public init(capacity: Int = 256) {
        buffer = JSONByteBuffer(capacity: capacity)
    }

    /// What has been written so far.
    public var bytes: [UInt8] { buffer.array }

    /// Punctuation and keys, copied as they are (no escaping: literals only).
    public mutating func raw(_ text: StaticString) {
        buffer.put(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    public mutating func string(_ text: String) {
        var sink = buffer
        JSONText.escape(text, into: &sink)
    }

    public mutating func integer(_ value: Int) {
        var sink = buffer
        JSONText.integer(Int64(value), into: &sink)
    }

    /// A number, or null for nil.
    public mutating func number(_ value: Double?) {
        var sink = buffer
        if let value { JSONText.number(value, into: &sink) } else { raw("null") }
    }

    /// A civil date as a JSON string, YYYY-MM-DD (years 0–9999), digit by digit: a weekly report writes thousands.
    public mutating func date(year: Int, month: Int, day: Int) {
        var sink = buffer
        sink.put(UInt8(ascii: "\""))
        JSONText.date(year: year, month: month, day: day, into: &sink)
        sink.put(UInt8(ascii: "\""))
    }
}

/// The writer's bytes: a buffer doubled as it fills, freed with the writer.
final class JSONByteBuffer: ByteSink {
    private var base: UnsafeMutablePointer<UInt8>
    private var count = 0
    private var capacity: Int

    init(capacity: Int) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    var array: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// Inlined into every put: a call per appended byte was a twentieth of a large report's time.
    @inline(__always)
    func reserve(_ extra: Int) {
        if count + extra > capacity { grow(extra) }
    }

    @inline(never)
    private func grow(_ extra: Int) {
        let grown = UnsafeMutablePointer<UInt8>.allocate(capacity: max(capacity * 2, count + extra))
        grown.update(from: base, count: count)
        base.deallocate()
        base = grown
        capacity = max(capacity * 2, count + extra)
    }

    func put(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    func put(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let start = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        // Numbers and names are a few bytes: a loop beats a call to memmove for them.
        if bytes.count <= 16 {
            for offset in 0..<bytes.count { base[count + offset] = start[offset] }
        } else {
            (base + count).update(from: start, count: bytes.count)
        }
        count += bytes.count
    }
}
