import Foundation
import API
import Reports

/// Where a setting belongs in the reference (`docs/configuration.md`), in the order shown there.
public enum SettingSection: String, CaseIterable, Sendable {
    case desk = "Sendbird Desk"
    case database = "PostgreSQL"
    case http = "HTTP server"
    case sessions = "Sessions and caching"
    case limits = "Rate limits and client addresses"
    case previews = "Link previews"
    case reports = "Reports"
    case reportPage = "Report page"
    case sync = "Desk sync"
    case outbox = "Outbox (queued writes)"
    case retention = "Housekeeping and retention"
    case tracing = "Tracing (OpenTelemetry)"
    case process = "Process"
}

/// Why a value was refused; the reader adds the variable's name.
struct SettingProblem: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// One environment variable: its name, its default, how its text becomes a value, and what the reference says of it.
/// Declared once, in `GatewaySettings`; parsing, the error message, the reference and the example file come from it.
public struct Setting<Value: Sendable>: Sendable {
    public let name: String
    public let defaultValue: Value
    public let section: SettingSection
    public let summary: String
    /// What text is accepted, as the reference says it.
    public let accepts: String
    /// The default as the reference writes it (empty: unset).
    public let defaultText: String
    /// When the setting must be given (nil: never).
    public let required: String?
    /// Its value never appears in logs or in `description`.
    public let secret: Bool
    let parse: @Sendable (String) throws(SettingProblem) -> Value
    /// A value as the setting's own syntax writes it (what `settings --check` and the start-up log print).
    let format: @Sendable (Value) -> String

    init(_ name: String, _ defaultValue: Value, _ section: SettingSection, _ summary: String, accepts: String, defaultText: String,
         required: String? = nil, secret: Bool = false, format: @escaping @Sendable (Value) -> String = { plainText($0) },
         parse: @escaping @Sendable (String) throws(SettingProblem) -> Value) {
        self.name = name
        self.defaultValue = defaultValue
        self.section = section
        self.summary = summary
        self.accepts = accepts
        self.defaultText = defaultText
        self.required = required
        self.secret = secret
        self.parse = parse
        self.format = format
    }
}

/// Lists joined by commas, an optional's value or `unset`, anything else as Swift prints it.
func plainText(_ value: Any) -> String {
    if let list = value as? [String] { return list.joined(separator: ",") }
    let mirror = Mirror(reflecting: value)
    if mirror.displayStyle == .optional { return mirror.children.first.map { plainText($0.value) } ?? "unset" }
    return "\(value)"
}

/// What the reference and the reader need of a setting, whatever its type.
public protocol AnySetting: Sendable {
    var name: String { get }
    var section: SettingSection { get }
    var summary: String { get }
    var accepts: String { get }
    var defaultText: String { get }
    var required: String? { get }
    var secret: Bool { get }
    /// Parses `text` (nil or blank: unset, the default applies) into `values`.
    func read(_ text: String?, into values: inout [String: any Sendable]) throws(ConfigError)
    /// A value `read` stored, in the setting's own syntax.
    func text(of value: any Sendable) -> String
}

extension Setting: AnySetting {
    public func text(of value: any Sendable) -> String {
        guard let value = value as? Value else { return plainText(value) }
        return format(value)
    }

    public func read(_ text: String?, into values: inout [String: any Sendable]) throws(ConfigError) {
        guard let trimmed = text?.trimmingCharacters(in: .whitespaces), !trimmed.isEmpty else { return }
        do {
            values[name] = try parse(trimmed)
        } catch {
            throw ConfigError(variable: name, message: "\(error.message), got '\(secret ? "<redacted>" : trimmed)'")
        }
    }
}

// The kinds of values, each with its reference wording.
extension Setting where Value == Int {
    static func integer(_ name: String, _ value: Int, _ range: ClosedRange<Int>, _ section: SettingSection, _ summary: String) -> Setting {
        Setting(name, value, section, summary, accepts: "whole number, \(range.lowerBound)–\(range.upperBound)", defaultText: "\(value)") {
            (text: String) throws(SettingProblem) -> Int in
            guard let number = Int(text), range.contains(number) else {
                throw SettingProblem("expected a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
    }
}

extension Setting where Value == Double {
    /// A decimal number such as 24 or 0.05 (retention in minutes, for soaks and tests).
    static func decimal(_ name: String, _ value: Double, _ range: ClosedRange<Double>, _ section: SettingSection, _ summary: String) -> Setting {
        Setting(name, value, section, summary, accepts: "number, \(Self.text(range.lowerBound))–\(Self.text(range.upperBound))",
                defaultText: Self.text(value), format: Self.text) { (text: String) throws(SettingProblem) -> Double in
            guard let number = Double(text), number.isFinite, range.contains(number) else {
                throw SettingProblem("expected a number from \(Self.text(range.lowerBound)) to \(Self.text(range.upperBound))")
            }
            return number
        }
    }

    static func text(_ number: Double) -> String {
        number == number.rounded() && abs(number) < 1e15 ? String(Int(number)) : String(number)
    }
}

extension Setting where Value == Bool {
    static func flag(_ name: String, _ value: Bool, _ section: SettingSection, _ summary: String) -> Setting {
        Setting(name, value, section, summary, accepts: "true or false", defaultText: "\(value)") { (text: String) throws(SettingProblem) -> Bool in
            switch text.lowercased() {
            case "1", "true", "yes", "on": return true
            case "0", "false", "no", "off": return false
            default: throw SettingProblem("expected true or false")
            }
        }
    }
}

extension Setting where Value == String {
    static func text(_ name: String, _ value: String, _ section: SettingSection, _ summary: String, accepts: String = "text",
                     required: String? = nil, check: @escaping @Sendable (String) -> String? = { _ in nil }) -> Setting {
        Setting(name, value, section, summary, accepts: accepts, defaultText: value, required: required) { (text: String) throws(SettingProblem) -> String in
            if let problem = check(text) { throw SettingProblem(problem) }
            return text
        }
    }
}

extension Setting where Value == String? {
    /// Unset by default; `check` names what is wrong with a value, or returns nil.
    static func optional(_ name: String, _ section: SettingSection, _ summary: String, accepts: String = "text", defaultText: String = "",
                         required: String? = nil, secret: Bool = false,
                         check: @escaping @Sendable (String) -> String? = { _ in nil }) -> Setting {
        Setting(name, nil, section, summary, accepts: accepts, defaultText: defaultText, required: required, secret: secret) {
            (text: String) throws(SettingProblem) -> String? in
            if let problem = check(text) { throw SettingProblem(problem) }
            return text
        }
    }
}

extension Setting where Value == [String] {
    /// Comma-separated; `check` names what is wrong with one item, or returns nil.
    static func list(_ name: String, _ value: [String], _ section: SettingSection, _ summary: String, accepts: String,
                     check: @escaping @Sendable (String) -> String?) -> Setting {
        Setting(name, value, section, summary, accepts: accepts, defaultText: value.joined(separator: ",")) {
            (text: String) throws(SettingProblem) -> [String] in
            let items = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            for item in items { if let problem = check(item) { throw SettingProblem(problem) } }
            return items
        }
    }
}

/// Checks shared by several settings: each returns what is wrong, or nil.
enum SettingChecks {
    static func ipv4(_ text: String) -> String? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy({ Int($0).map { (0...255).contains($0) } ?? false })
            ? nil : "expected an IPv4 address such as 0.0.0.0 or 127.0.0.1"
    }

    static func httpURL(_ text: String) -> String? {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              url.host != nil, url.query == nil else {
            return "expected an http(s) base URL such as https://desk-api-APPID.sendbird.com"
        }
        return nil
    }

    /// A dashboard address for links: http(s), a host, no quotes or spaces (it lands in an attribute), `{ticketId}` allowed.
    static func dashboardURL(_ text: String) -> String? {
        let probe = text.replacingOccurrences(of: "{ticketId}", with: "1")
        guard let url = URL(string: probe), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https", url.host != nil,
              !text.contains(where: { $0 == "\"" || $0 == "'" || $0 == "<" || $0 == ">" || $0 == " " }) else {
            return "expected an http(s) URL such as https://dashboard.sendbird.com/APP_ID/desk"
        }
        return nil
    }

    /// `*` alone, or origins, each as browsers send it (so that a configured one matches `Origin` as text).
    static func origins(_ text: String) throws(SettingProblem) -> [String] {
        let items = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        if items.contains("*") {
            guard items.count == 1 else { throw SettingProblem("* lets every origin call and stands alone: give * or a list of origins") }
            return items
        }
        var origins: [String] = []
        for item in items {
            guard let origin = CORS.canonicalOrigin(item) else {
                throw SettingProblem("'\(item)' is not an origin: expected scheme, host and port only, like https://app.example.com "
                                     + "or http://localhost:5173 (no path, not even a trailing /), or *")
            }
            if !origins.contains(origin) { origins.append(origin) }
        }
        return origins
    }

    static func cidr(_ text: String) -> String? {
        CIDR(text) != nil ? nil : "expected comma-separated addresses or CIDRs such as 10.0.0.0/8"
    }

    static func zone(_ text: String) -> String? {
        guard TimeZone(identifier: text) == nil else { return nil }
        // Zone names are case-sensitive, in PostgreSQL's rollups as in the reports' `tz`.
        if let spelled = ReportParameters.zoneSpelling(text, isKnown: { TimeZone(identifier: $0) != nil }) {
            return "'\(text)' is not an IANA time zone: names are case-sensitive, as in \(spelled)"
        }
        return "'\(text)' is not an IANA time zone (such as UTC or Asia/Kolkata)"
    }

    /// CSP source expressions only: no quotes but 'self', no semicolons that would start another directive.
    static func frameAncestors(_ text: String) -> String? {
        let sources = text.split(separator: " ")
        return !sources.isEmpty && sources.allSatisfy({ $0 == "'self'" || ($0.hasPrefix("https://") || $0.hasPrefix("http://"))
                                                       && !$0.contains(";") && !$0.contains("'") && !$0.contains(",") })
            ? nil : "expected space-separated origins such as https://tools.example.com, or 'self'"
    }
}
