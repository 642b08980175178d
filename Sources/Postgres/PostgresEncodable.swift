/// A value sent as a bound parameter in PostgreSQL's text format. Values never become part of the SQL text.
public protocol PostgresEncodable: Sendable {
    /// nil is SQL NULL.
    var postgresText: String? { get }
}

extension String: PostgresEncodable { public var postgresText: String? { self } }
extension Substring: PostgresEncodable { public var postgresText: String? { String(self) } }
extension Int: PostgresEncodable { public var postgresText: String? { String(self) } }
extension Int64: PostgresEncodable { public var postgresText: String? { String(self) } }
extension Int32: PostgresEncodable { public var postgresText: String? { String(self) } }
extension Double: PostgresEncodable { public var postgresText: String? { String(self) } }
extension Bool: PostgresEncodable { public var postgresText: String? { self ? "true" : "false" } }

extension Optional: PostgresEncodable where Wrapped: PostgresEncodable {
    public var postgresText: String? { self?.postgresText }
}

/// Arrays become PostgreSQL array literals (for `= ANY($1)` and friends), every element quoted.
extension Array: PostgresEncodable where Element: PostgresEncodable {
    public var postgresText: String? {
        var out = "{"
        for (index, element) in enumerated() {
            if index > 0 { out += "," }
            guard let text = element.postgresText else { out += "NULL"; continue }
            out += "\""
            for ch in text {
                if ch == "\"" || ch == "\\" { out.append("\\") }
                out.append(ch)
            }
            out += "\""
        }
        return out + "}"
    }
}

/// SQL NULL of no particular type.
public struct PostgresNull: PostgresEncodable {
    public init() {}
    public var postgresText: String? { nil }
}
