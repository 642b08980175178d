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

/// Arrays become PostgreSQL array literals (for `= ANY($1)` and friends), every element quoted but whole numbers.
extension Array: PostgresEncodable where Element: PostgresEncodable {
    public var postgresText: String? {
        // Reached through `any PostgresEncodable`, this runs as unspecialized generic code: a report's block arrays,
        // hundreds of numbers, spent a thirtieth of the report's CPU in the runtime's generic iteration. Numbers need
        // no quotes.
        if Element.self == Int.self { return Self.literal(unsafeBitCast(self, to: [Int].self)) }
        // By byte: a quote or backslash followed by a combining mark or an emoji modifier is one Character,
        // equal to neither, and would go out unescaped.
        var out: [UInt8] = [UInt8(ascii: "{")]
        for (index, element) in enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            guard let text = element.postgresText else { out += "NULL".utf8; continue }
            out.append(UInt8(ascii: "\""))
            for byte in text.utf8 {
                if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { out.append(UInt8(ascii: "\\")) }
                out.append(byte)
            }
            out.append(UInt8(ascii: "\""))
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    private static func literal(_ numbers: [Int]) -> String {
        var out: [UInt8] = [UInt8(ascii: "{")]
        out.reserveCapacity(2 + numbers.count * 8)
        for index in numbers.indices {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out += String(numbers[index]).utf8
        }
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }
}

/// SQL NULL of no particular type.
public struct PostgresNull: PostgresEncodable {
    public init() {}
    public var postgresText: String? { nil }
}

/// `bytea` in PostgreSQL's hex text form.
public struct PostgresBytes: PostgresEncodable, PostgresDecodable, Equatable {
    public let bytes: [UInt8]

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public var postgresText: String? {
        let digits: [UInt8] = Array("0123456789abcdef".utf8)
        var out: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        out.reserveCapacity(2 + bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    public init?(postgresText: String) {
        let utf8 = Array(postgresText.utf8)
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48...57: return c - 48
            case 97...102: return c - 87
            case 65...70: return c - 55
            default: return nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            bytes.append(high << 4 | low)
            index += 2
        }
        self.bytes = bytes
    }
}
