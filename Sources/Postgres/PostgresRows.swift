/// A result copied out of libpq, so it can cross threads and outlive the `PGresult`.
public struct PostgresRows: Sendable, RandomAccessCollection {
    public let columns: [String]
    public let rows: [PostgresRow]
    /// Rows affected by INSERT/UPDATE/DELETE (0 for other commands).
    public let affectedRows: Int

    public var startIndex: Int { rows.startIndex }
    public var endIndex: Int { rows.endIndex }
    public subscript(position: Int) -> PostgresRow { rows[position] }
}

public struct PostgresRow: Sendable {
    public let columns: [String]
    public let values: [String?]

    /// The raw text value (nil for NULL).
    public subscript(index: Int) -> String? { values[index] }

    public subscript(name: String) -> String? {
        guard let index = columns.firstIndex(of: name) else { return nil }
        return values[index]
    }

    /// Inlinable so callers get it specialized for the concrete type (hot in report and list reads).
    @inlinable
    public func decode<T: PostgresDecodable>(_ index: Int, as type: T.Type = T.self) throws -> T {
        guard index < values.count, let text = values[index] else {
            throw PostgresError(code: .decodingFailed, detail: "column \(index) is NULL or missing")
        }
        guard let value = T(postgresText: text) else {
            throw PostgresError(code: .decodingFailed, detail: "column \(index) is not \(T.self)")
        }
        return value
    }

    public func decode<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T {
        guard let index = columns.firstIndex(of: name) else {
            throw PostgresError(code: .decodingFailed, detail: "no column \(name)")
        }
        return try decode(index, as: type)
    }

    /// nil for SQL NULL; throws only when a present value does not decode.
    public func decodeIfPresent<T: PostgresDecodable>(_ index: Int, as type: T.Type = T.self) throws -> T? {
        guard index < values.count, values[index] != nil else { return nil }
        return try decode(index, as: type)
    }

    public func decodeIfPresent<T: PostgresDecodable>(_ name: String, as type: T.Type = T.self) throws -> T? {
        guard let index = columns.firstIndex(of: name) else { return nil }
        return try decodeIfPresent(index, as: type)
    }
}

/// A type read from PostgreSQL's text format.
public protocol PostgresDecodable {
    init?(postgresText: String)
}

extension String: PostgresDecodable { public init?(postgresText: String) { self = postgresText } }
extension Int: PostgresDecodable { public init?(postgresText: String) { self.init(postgresText) } }
extension Int64: PostgresDecodable { public init?(postgresText: String) { self.init(postgresText) } }
extension Int32: PostgresDecodable { public init?(postgresText: String) { self.init(postgresText) } }
extension Double: PostgresDecodable { public init?(postgresText: String) { self.init(postgresText) } }
extension Bool: PostgresDecodable {
    public init?(postgresText: String) {
        switch postgresText {
        case "t", "true": self = true
        case "f", "false": self = false
        default: return nil
        }
    }
}
