/// A result copied out of libpq, so it can cross threads and outlive the `PGresult`.
public struct PostgresRows: Sendable, RandomAccessCollection {
    @usableFromInline let cells: ResultCells
    /// Rows affected by INSERT/UPDATE/DELETE (0 for other commands).
    public let affectedRows: Int

    init(cells: ResultCells, affectedRows: Int) {
        self.cells = cells
        self.affectedRows = affectedRows
    }

    public var columns: [String] { cells.columns }
    public var rows: [PostgresRow] { Array(self) }
    public var startIndex: Int { 0 }
    public var endIndex: Int { cells.rowCount }
    public subscript(position: Int) -> PostgresRow {
        precondition(position >= 0 && position < cells.rowCount, "row \(position) out of range")
        return PostgresRow(cells: cells, first: position * cells.columns.count)
    }
}

/// Every value of a result in one buffer, so reading thousands of rows (a weekly report) allocates per result,
/// not per row and value; values become strings or numbers only when a caller decodes them.
@usableFromInline final class ResultCells: Sendable {
    let columns: [String]
    @usableFromInline let columnCount: Int
    @usableFromInline let rowCount: Int
    /// The values' text, one after another.
    @usableFromInline let text: [UInt8]
    /// Where each value (row by row) starts and ends in `text`, -1 for NULL.
    @usableFromInline let starts: [Int]
    @usableFromInline let ends: [Int]

    init(columns: [String], rowCount: Int, text: [UInt8], starts: [Int], ends: [Int]) {
        self.columns = columns
        columnCount = columns.count
        self.rowCount = rowCount
        self.text = text
        self.starts = starts
        self.ends = ends
    }

    static let empty = ResultCells(columns: [], rowCount: 0, text: [], starts: [], ends: [])

    /// Lends the three buffers at once; `PostgresRowView` is the one reader of their layout.
    @inlinable
    func withBuffers<R>(_ body: (UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<Int>, UnsafeBufferPointer<Int>) throws -> R) rethrows -> R {
        try text.withUnsafeBufferPointer { text in
            try starts.withUnsafeBufferPointer { starts in
                try ends.withUnsafeBufferPointer { ends in try body(text, starts, ends) }
            }
        }
    }
}

public struct PostgresRow: Sendable {
    @usableFromInline let cells: ResultCells
    @usableFromInline let first: Int

    init(cells: ResultCells, first: Int) {
        self.cells = cells
        self.first = first
    }

    public var columns: [String] { cells.columns }
    public var values: [String?] { (0..<cells.columns.count).map { self[$0] } }

    /// The raw text value (nil for NULL).
    public subscript(index: Int) -> String? {
        withValue(index) { $0.map { String(decoding: $0, as: UTF8.self) } }
    }

    public subscript(name: String) -> String? {
        guard let index = cells.columns.firstIndex(of: name) else { return nil }
        return self[index]
    }

    /// Lends this row as a view, which reads its values.
    @inlinable
    func withView<R>(_ body: (borrowing PostgresRowView) throws -> R) rethrows -> R {
        try cells.withBuffers { text, starts, ends in
            try body(PostgresRowView(text: text, starts: starts, ends: ends, first: first, columnCount: cells.columnCount))
        }
    }

    /// Lends the value's bytes (nil for NULL or a column past the end).
    @inlinable
    func withValue<R>(_ index: Int, _ body: (UnsafeBufferPointer<UInt8>?) throws -> R) rethrows -> R {
        try withView { try body($0.value(index)) }
    }

    /// Inlinable so callers get it specialized for the concrete type (hot in report and list reads).
    @inlinable
    public func decode<T: PostgresDecodable>(_ index: Int, as type: T.Type = T.self) throws -> T {
        try withView { try $0.decode(index, as: type) }
    }

    public func decode<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        guard let index = cells.columns.firstIndex(of: name) else {
            throw PostgresError(code: .decodingFailed, detail: "no column \(name)")
        }
        return try decode(index, as: type)
    }

    /// nil for SQL NULL; throws only when a present value does not decode.
    @inlinable
    public func decodeIfPresent<T: PostgresDecodable>(_ index: Int, as type: T.Type = T.self) throws -> T? {
        try withView { try $0.decodeIfPresent(index, as: type) }
    }

    public func decodeIfPresent<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T? {
        guard let index = cells.columns.firstIndex(of: name) else { return nil }
        return try decodeIfPresent(index, as: type)
    }
}

extension PostgresRows {
    /// Lends each row in turn, read from the result's buffers in place: no retain of the result per row and no
    /// bounds-checked array read per value (a weekly report reads 3,000 rows of nine values). The row cannot be
    /// kept past its call; `self[i]` gives one that can.
    @inlinable
    public func forEachRow(_ body: (borrowing PostgresRowView) throws -> Void) rethrows {
        let (count, width) = (cells.rowCount, cells.columnCount)
        try cells.withBuffers { text, starts, ends in
            for row in 0..<count {
                try body(PostgresRowView(text: text, starts: starts, ends: ends, first: row * width, columnCount: width))
            }
        }
    }
}

/// One row of a result lent by `PostgresRows.forEachRow`; non-copyable, so it cannot outlive the buffers it points into.
public struct PostgresRowView: ~Copyable {
    @usableFromInline let text: UnsafeBufferPointer<UInt8>
    @usableFromInline let starts: UnsafeBufferPointer<Int>
    @usableFromInline let ends: UnsafeBufferPointer<Int>
    @usableFromInline let first: Int
    @usableFromInline let columnCount: Int

    @inlinable
    init(text: UnsafeBufferPointer<UInt8>, starts: UnsafeBufferPointer<Int>, ends: UnsafeBufferPointer<Int>, first: Int, columnCount: Int) {
        (self.text, self.starts, self.ends, self.first, self.columnCount) = (text, starts, ends, first, columnCount)
    }

    /// The value's bytes; nil for NULL or a column past the end.
    @inlinable
    func value(_ index: Int) -> UnsafeBufferPointer<UInt8>? {
        guard index >= 0, index < columnCount, case let start = starts[first + index], start >= 0 else { return nil }
        return UnsafeBufferPointer(rebasing: text[start..<ends[first + index]])
    }

    @inlinable
    public func decode<T: PostgresDecodable>(_ index: Int, as type: T.Type = T.self) throws -> T {
        try Self.decoded(value(index), column: index)
    }

    /// nil for SQL NULL; throws only when a present value does not decode.
    @inlinable
    public func decodeIfPresent<T: PostgresDecodable>(_ index: Int, as type: T.Type = T.self) throws -> T? {
        guard let bytes = value(index) else { return nil }
        return try Self.decoded(bytes, column: index)
    }

    @inlinable
    static func decoded<T: PostgresDecodable>(_ bytes: UnsafeBufferPointer<UInt8>?, column index: Int) throws -> T {
        guard let bytes else { throw PostgresError(code: .decodingFailed, detail: "column \(index) is NULL or missing") }
        guard let value = T(postgresUTF8: bytes) else { throw PostgresError(code: .decodingFailed, detail: "column \(index) is not \(T.self)") }
        return value
    }
}

/// A type read from PostgreSQL's text format.
public protocol PostgresDecodable {
    init?(postgresText: String)
    /// From the value's bytes as they are in the result; by default through a `String`.
    init?(postgresUTF8 bytes: UnsafeBufferPointer<UInt8>)
}

extension PostgresDecodable {
    @inlinable
    public init?(postgresUTF8 bytes: UnsafeBufferPointer<UInt8>) { self.init(postgresText: String(decoding: bytes, as: UTF8.self)) }
}

/// Integers are read straight from their digits: reports read thousands of counts per request.
extension FixedWidthInteger where Self: SignedInteger {
    @inlinable
    init?(postgresDigits bytes: UnsafeBufferPointer<UInt8>) {
        var index = 0
        let negative = bytes.first == UInt8(ascii: "-")
        if negative { index = 1 }
        guard index < bytes.count else { return nil }
        var value: Self = 0
        while index < bytes.count {
            let digit = bytes[index] &- UInt8(ascii: "0")
            guard digit < 10 else { return nil }
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = negative ? shifted.subtractingReportingOverflow(Self(digit)) : shifted.addingReportingOverflow(Self(digit))
            guard !overflow1, !overflow2 else { return nil }
            value = next
            index += 1
        }
        self = value
    }
}

extension String: PostgresDecodable { public init?(postgresText: String) { self = postgresText } }
extension Int: PostgresDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
    @inlinable public init?(postgresUTF8 bytes: UnsafeBufferPointer<UInt8>) { self.init(postgresDigits: bytes) }
}
extension Int64: PostgresDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
    @inlinable public init?(postgresUTF8 bytes: UnsafeBufferPointer<UInt8>) { self.init(postgresDigits: bytes) }
}
extension Int32: PostgresDecodable {
    public init?(postgresText: String) { self.init(postgresText) }
    @inlinable public init?(postgresUTF8 bytes: UnsafeBufferPointer<UInt8>) { self.init(postgresDigits: bytes) }
}
extension Double: PostgresDecodable {
    public init?(postgresText: String) { self.init(postgresText) }

    /// A plain decimal (`-1764278912.123456`) whose digits make an integer below 2^53 with at most 22 of them after
    /// the point is that integer divided by a power of ten, both exact, so the one division rounds correctly: no
    /// string is made for it (an epoch time with its fraction is over 15 bytes, a heap string per value). Anything
    /// else (exponents, more digits, `NaN`, `Infinity`) goes through the string parser.
    @inlinable public init?(postgresUTF8 bytes: UnsafeBufferPointer<UInt8>) {
        if let value = Self.plainDecimal(bytes) {
            self = value
        } else {
            self.init(postgresText: String(decoding: bytes, as: UTF8.self))
        }
    }

    @inlinable static func plainDecimal(_ bytes: UnsafeBufferPointer<UInt8>) -> Double? {
        var index = 0
        let negative = bytes.first == UInt8(ascii: "-")
        if negative { index = 1 }
        var mantissa: UInt64 = 0
        var digits = 0
        var fraction = -1   // digits after the point; -1 while there is no point
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "."), fraction < 0, digits > 0 {
                fraction = 0
            } else {
                let digit = byte &- UInt8(ascii: "0")
                guard digit < 10, digits < 19 else { return nil }
                mantissa = mantissa &* 10 &+ UInt64(digit)
                digits += 1
                if fraction >= 0 { fraction += 1 }
            }
            index += 1
        }
        guard digits > 0, fraction != 0, mantissa < 1 << 53, fraction <= 22 else { return nil }
        var scale = 1.0
        for _ in 0..<max(0, fraction) { scale *= 10 }
        let magnitude = Double(mantissa) / scale
        return negative ? -magnitude : magnitude
    }
}
extension Bool: PostgresDecodable {
    public init?(postgresText: String) {
        switch postgresText {
        case "t", "true": self = true
        case "f", "false": self = false
        default: return nil
        }
    }
}
