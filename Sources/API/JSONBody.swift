public import HTTPServer
import Domain
import JSON

/// A request body read strictly: JSON object only, valid UTF-8, known members only, each checked for type and size.
/// Problems are collected per field and reported together as one 422 `validation_failed`.
public struct JSONBody {
    private let members: [(String, JSONValue)]
    private var errors: [(field: String, message: String)] = []
    private var seen = Set<String>()

    /// 415 for another content type, 400 for malformed JSON or anything but an object.
    public init(_ request: HTTPRequest) throws(APIError) {
        if let type = request.header("content-type")?.lowercased() {
            let media = type.split(separator: ";").first.map { $0.trimmingOWS() } ?? ""
            guard media == "application/json" || media.hasSuffix("+json") else {
                throw APIError(.unsupportedMediaType, detail: "Send the body as application/json.")
            }
        }
        guard !request.body.isEmpty else {
            throw APIError(.malformedJSON, detail: "The request needs a JSON object body.")
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(request.body)
        } catch {
            throw APIError(.malformedJSON, detail: "The body is not valid JSON: \(error.description).")
        }
        guard let members = value.objectValue else {
            throw APIError(.malformedJSON, detail: "The body must be a JSON object.")
        }
        self.members = members
    }

    private mutating func value(_ name: String) -> JSONValue? {
        seen.insert(name)
        guard let value = members.first(where: { $0.0 == name })?.1, !value.isNull else { return nil }
        return value
    }

    public func has(_ name: String) -> Bool { members.contains { $0.0 == name } }

    public mutating func fail(_ field: String, _ message: String) {
        errors.append((field, message))
    }

    public mutating func string(_ name: String, required: Bool = false, maxLength: Int = 255, allowBlank: Bool = false) -> String? {
        guard let value = value(name) else {
            if required { fail(name, "is required") }
            return nil
        }
        guard let text = value.stringValue else { fail(name, "must be a string"); return nil }
        if !allowBlank, text.isBlank { fail(name, "must not be blank"); return nil }
        // Counted in Unicode scalars, as JSON Schema's maxLength counts: a Character may hold any number of them, so
        // counting Characters would let one "character" carry kilobytes.
        if text.unicodeScalars.count > maxLength { fail(name, "must be at most \(maxLength) characters"); return nil }
        if text.unicodeScalars.contains(where: { $0.value == 0 }) { fail(name, "must not contain NUL characters"); return nil }
        return text
    }

    public mutating func integer(_ name: String, required: Bool = false, range: ClosedRange<Int>) -> Int? {
        guard let value = value(name) else {
            if required { fail(name, "is required") }
            return nil
        }
        guard case .integer(let number) = value else {
            // A whole number past 64 bits is read as a float; it is an integer, out of range.
            if case .number(let float) = value, float.isFinite, float == float.rounded(), abs(float) >= 9.2e18 {
                fail(name, "must be from \(range.lowerBound) to \(range.upperBound)")
            } else {
                fail(name, "must be an integer")
            }
            return nil
        }
        guard range.contains(number) else { fail(name, "must be from \(range.lowerBound) to \(range.upperBound)"); return nil }
        return number
    }

    public mutating func bool(_ name: String, required: Bool = false) -> Bool? {
        guard let value = value(name) else {
            if required { fail(name, "is required") }
            return nil
        }
        guard let flag = value.boolValue else { fail(name, "must be true or false"); return nil }
        return flag
    }

    public mutating func enumeration<T: RawRepresentable & CaseIterable>(_ name: String, _ type: T.Type, required: Bool = false) -> T?
        where T.RawValue == String {
        guard let text = string(name, required: required, maxLength: 64) else { return nil }
        guard let parsed = T(rawValue: text) else {
            fail(name, "must be one of \(T.allCases.map(\.rawValue).joined(separator: ", "))")
            return nil
        }
        return parsed
    }

    /// A Desk team's key: lowercase letters, digits, '-' or '_'.
    public mutating func groupKey(_ name: String) -> String? {
        guard let key = string(name, maxLength: 100) else { return nil }
        guard key.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "-" || $0 == "_" }) else {
            fail(name, "must be lowercase letters, digits, '-' or '_'")
            return nil
        }
        return key
    }

    public mutating func stringArray(_ name: String, required: Bool = false, maxCount: Int, maxLength: Int = 255) -> [String]? {
        guard let value = value(name) else {
            if required { fail(name, "is required") }
            return nil
        }
        guard let items = value.arrayValue else { fail(name, "must be an array of strings"); return nil }
        guard items.count <= maxCount else { fail(name, "must have at most \(maxCount) items"); return nil }
        var result: [String] = []
        for (index, item) in items.enumerated() {
            guard let text = item.stringValue, !text.isBlank, text.unicodeScalars.count <= maxLength,
                  !text.contains(","), !text.unicodeScalars.contains(where: { $0.value == 0 }) else {
                fail("\(name)[\(index)]", "must be a non-blank string of at most \(maxLength) characters without commas or NUL")
                return nil
            }
            result.append(text)
        }
        return result
    }

    /// Custom fields: an object of string keys to string (or number/boolean, kept as text) values, in Desk's limits.
    public mutating func fieldMap(_ name: String, required: Bool = false, maxCount: Int, keyLength: Int,
                                  valueLength: Int) -> [(key: String, value: String)]? {
        guard let value = value(name) else {
            if required { fail(name, "is required") }
            return nil
        }
        guard let object = value.objectValue else { fail(name, "must be an object of strings"); return nil }
        guard object.count <= maxCount else { fail(name, "must have at most \(maxCount) entries"); return nil }
        var result: [(key: String, value: String)] = []
        for (key, item) in object {
            guard !key.isEmpty, key.utf8.count <= keyLength, key.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0 != ":" && $0 != "," }) else {
                fail("\(name).\(key)", "keys must be 1 to \(keyLength) visible ASCII characters without ':' or ','")
                continue
            }
            let text: String
            switch item {
            case .string(let s): text = s
            case .integer(let i): text = String(i)
            case .number(let d): text = String(d)
            case .bool(let b): text = b ? "true" : "false"
            default:
                fail("\(name).\(key)", "must be a string, number or boolean")
                continue
            }
            guard text.unicodeScalars.count <= valueLength else { fail("\(name).\(key)", "must be at most \(valueLength) characters"); continue }
            guard !text.unicodeScalars.contains(where: { $0.value == 0 }) else { fail("\(name).\(key)", "must not contain NUL characters"); continue }
            result.append((key, text))
        }
        return result
    }

    /// At most this many problems are listed (`errorCount` gives them all), so no answer outgrows its request.
    public static let listedProblems = 20

    /// Throws 422 with the collected problems, including members the endpoint does not know.
    public func finish() throws(APIError) {
        var problems = errors
        for (name, _) in members where !seen.contains(name) {
            problems.append((name, "is not a known field"))
        }
        guard !problems.isEmpty else { return }
        let listed = problems.prefix(Self.listedProblems).map { (field: String($0.field.prefix(100)), message: $0.message) }
        let more = problems.count - listed.count
        throw APIError(.validationFailed, detail: listed.map { "\($0.field) \($0.message)" }.joined(separator: "; ") + (more > 0 ? "; and \(more) more." : "."),
                       extensions: ["errors": .array(listed.map { .object([("field", .string($0.field)), ("message", .string($0.message))]) }),
                                    "errorCount": .integer(problems.count)])
    }
}

extension HTTPRequest {
    /// A path parameter that must be a positive integer id written as Desk writes it (404 otherwise: such a resource
    /// cannot exist). `+12` and `012` are not aliases of ticket 12: one resource, one URL, for caches and logs alike.
    public func idParameter(_ name: String = "id", unknown: String = "No ticket has this id.") throws(APIError) -> Int {
        guard let text = pathParameters[name], let id = Self.canonicalId(text) else { throw APIError.notFound(unknown) }
        return id
    }

    /// Digits without a leading zero or sign, within Int's range.
    static func canonicalId(_ text: String) -> Int? {
        guard let first = text.utf8.first, first != UInt8(ascii: "0"),
              text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else { return nil }
        return Int(text)
    }
}
