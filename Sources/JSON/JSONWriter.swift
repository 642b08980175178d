/// JSON written straight into bytes, for answers large enough that building a `JSONValue` tree first costs more
/// than writing them (a weekly report of every agent is thousands of rows). The caller writes the punctuation and
/// keys (`raw`); values are escaped and formatted exactly as `JSONValue` does.
///
/// The buffer lives in the writer itself (not copyable, freed with it) and the small writes are inlinable: a weekly
/// agents' report makes about a hundred thousand of them, and as calls into another module through a shared buffer
/// object each paid a call and a retain, two fifths of the report's time.
public struct JSONWriter: ~Copyable {
    @usableFromInline var base: UnsafeMutablePointer<UInt8>
    @usableFromInline var count = 0
    @usableFromInline var capacity: Int

    public init(capacity: Int = 256) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    deinit { base.deallocate() }

    /// What has been written so far.
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// What has been written so far, as text (decoded from the buffer, no array in between).
    public var string: String { String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self) }

    /// Punctuation and keys, copied as they are (no escaping: literals only). Always inlined, so the copy is of a
    /// constant length.
    @inlinable @inline(__always)
    public mutating func raw(_ text: StaticString) {
        put(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    public mutating func string(_ text: String) {
        JSONText.escape(text, into: &self)
    }

    /// Text that needs no escaping here (markup already escaped), copied as it is.
    @inlinable
    public mutating func text(_ text: String) {
        var text = text
        text.withUTF8 { put($0) }
    }

    @inlinable
    public mutating func integer(_ value: Int) {
        JSONText.integer(Int64(value), into: &self)
    }

    /// A number, or null for nil.
    @inlinable
    public mutating func number(_ value: Double?) {
        if let value { JSONText.number(value, into: &self) } else { raw("null") }
    }

    /// A civil date as a JSON string, YYYY-MM-DD (years 0–9999), digit by digit: a weekly report writes thousands.
    @inlinable
    public mutating func date(year: Int, month: Int, day: Int) {
        put(UInt8(ascii: "\""))
        JSONText.date(year: year, month: month, day: day, into: &self)
        put(UInt8(ascii: "\""))
    }

    /// Room for `extra` more bytes, grown once (a caller that knows its size saves the doublings).
    @inlinable @inline(__always)
    public mutating func reserve(_ extra: Int) {
        if count + extra > capacity { grow(extra) }
    }

    @usableFromInline @inline(never)
    mutating func grow(_ extra: Int) {
        let grown = max(capacity * 2, count + extra)
        let bigger = UnsafeMutablePointer<UInt8>.allocate(capacity: grown)
        bigger.update(from: base, count: count)
        base.deallocate()
        base = bigger
        capacity = grown
    }
}

extension JSONWriter: ByteSink {
    @inlinable @inline(__always)
    public mutating func put(_ byte: UInt8) {
        reserve(1)
        base[count] = byte
        count += 1
    }

    /// Always inlined: for a key the length is a constant there, and the copy becomes a few moves.
    @inlinable @inline(__always)
    public mutating func put(_ bytes: UnsafeBufferPointer<UInt8>) {
        guard let start = bytes.baseAddress, bytes.count > 0 else { return }
        reserve(bytes.count)
        (base + count).update(from: start, count: bytes.count)
        count += bytes.count
    }

    /// The digits written in place (no scratch buffer, no copy).
    @inlinable
    public mutating func putDecimal(_ value: UInt64) {
        let digits = DecimalDigits.count(value)
        reserve(digits)
        DecimalDigits.write(value, digits: digits, at: base + count)
        count += digits
    }
}
