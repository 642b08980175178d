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
    /// False while the writer writes into the array `bytes(capacity:_:)` is making, which it must not free.
    @usableFromInline var owned = true

    public init(capacity: Int = 256) {
        self.capacity = max(capacity, 64)
        base = .allocate(capacity: self.capacity)
    }

    init(lent buffer: UnsafeMutableBufferPointer<UInt8>) {
        (base, capacity, owned) = (buffer.baseAddress!, buffer.count, false)
    }

    deinit { if owned { base.deallocate() } }

    /// What has been written so far (a copy).
    public var bytes: [UInt8] { Array(UnsafeBufferPointer(start: base, count: count)) }

    /// The bytes `write` writes, written straight into the array returned: a weekly report's body is over half a
    /// megabyte, and copying it out of the writer's buffer was a twentieth of the report's time. Copied once only
    /// when `capacity` was too small, or so large that more than a fifth of the array would stay unused.
    public static func bytes(capacity: Int, _ write: (inout JSONWriter) -> Void) -> [UInt8] {
        var copied: [UInt8]?
        let written = [UInt8](unsafeUninitializedCapacity: max(capacity, 64)) { buffer, initialized in
            var writer = JSONWriter(lent: buffer)
            write(&writer)
            if writer.owned || writer.count < writer.capacity - writer.capacity / 5 {
                copied = writer.bytes
                initialized = 0
            } else {
                initialized = writer.count
            }
        }
        return copied ?? written
    }

    /// What has been written so far, as text (decoded from the buffer, no array in between).
    public var string: String { String(decoding: UnsafeBufferPointer(start: base, count: count), as: UTF8.self) }

    /// Punctuation and keys, copied as they are (no escaping: literals only). Always inlined, so the copy is of a
    /// constant length.
    @inlinable @inline(__always)
    public mutating func raw(_ text: StaticString) {
        put(text)
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

    /// `scaled / 10^places` (places 0…4, |scaled| < 10^15): what `number` writes for the Double
    /// `Double(scaled) / 10^places`, without that Double. Both read back as the same Double, and a decimal of at most
    /// four places is the shortest that does.
    @inlinable
    public mutating func decimal(_ scaled: Int64, places: Int) {
        var divisor: Int64 = 1
        for _ in 0..<places { divisor *= 10 }
        if scaled % divisor == 0 { integer(Int(scaled / divisor)) } else { JSONText.fixed(scaled, decimals: places, into: &self) }
    }

    /// A civil date as a JSON string, YYYY-MM-DD (years 0–9999), digit by digit: a weekly report writes thousands.
    @inlinable
    public mutating func date(year: Int, month: Int, day: Int) {
        // Room checked once for the twelve bytes, not per byte.
        reserve(12)
        let start = base + count
        start[0] = UInt8(ascii: "\"")
        JSONText.date(year: year, month: month, day: day, at: start + 1)
        start[11] = UInt8(ascii: "\"")
        count += 12
    }

    /// How many bytes have been written: where the next write starts, for `rewrite(from:count:)`.
    public var position: Int { count }

    /// The `length` bytes written at `start` written again: text a report repeats row after row (a group's id and
    /// name, a bucket's dates) is made once and then copied.
    @inlinable
    public mutating func rewrite(from start: Int, count length: Int) {
        precondition(start >= 0 && length >= 0 && start + length <= count, "rewrite outside what was written")
        reserve(length)
        // After `reserve`: growing moves the buffer. The source ends where the copy begins, so they never overlap.
        (base + count).update(from: base + start, count: length)
        count += length
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
        if owned { base.deallocate() }
        (base, capacity, owned) = (bigger, grown, true)
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
        // Most numbers of a report (its score counts) have one digit.
        if value < 10 { return put(UInt8(ascii: "0") + UInt8(truncatingIfNeeded: value)) }
        let digits = DecimalDigits.count(value)
        reserve(digits)
        DecimalDigits.write(value, digits: digits, at: base + count)
        count += digits
    }
}
