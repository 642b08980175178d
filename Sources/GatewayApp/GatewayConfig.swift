import API
import Foundation
public import Store

public struct ConfigError: Error, CustomStringConvertible, Sendable {
    public let variable: String
    public let message: String
    public var description: String { "\(variable): \(message)" }
}

/// Every setting the environment gives a value the gateway does not accept, in the settings table's order: an operator
/// mends them all in one go instead of learning of one per start.
public struct InvalidConfiguration: Error, CustomStringConvertible, Sendable {
    public let errors: [ConfigError]
    /// One line for one setting, else a line per setting: what the process prints before it exits with code 2.
    public var description: String {
        errors.count == 1 ? "invalid configuration: \(errors[0])"
            : "invalid configuration, \(errors.count) settings:" + errors.map { "\n  \($0)" }.joined()
    }
}

/// The gateway's settings, read once at start-up from the environment through `GatewaySettings` (the one table of
/// names, defaults and bounds): `config.port` is the value of `GatewaySettings.port`, its default until set.
/// Secrets (the database URL may hold a password) are redacted from `description`.
@dynamicMemberLookup
public struct GatewayConfig: Sendable, CustomStringConvertible {
    /// Values that differ from the table's defaults, by variable name.
    private var values: [String: any Sendable] = [:]

    public init() {}

    public subscript<Value>(dynamicMember key: KeyPath<GatewaySettings, Setting<Value>>) -> Value {
        get {
            let setting = GatewaySettings.shared[keyPath: key]
            return values[setting.name].flatMap { $0 as? Value } ?? setting.defaultValue
        }
        set { values[GatewaySettings.shared[keyPath: key].name] = newValue }
    }

    public static func fromEnvironment(_ env: [String: String]) throws(InvalidConfiguration) -> GatewayConfig {
        var config = GatewayConfig()
        var errors: [ConfigError] = []
        for setting in GatewaySettings.all {
            do { try setting.read(env[setting.name], into: &config.values) } catch { errors.append(error) }
        }
        // A rule between settings is checked only when each of them was read: with one refused, the rule would judge
        // its default instead of the value given.
        let refused = Set(errors.map(\.variable))
        errors += config.rulesBroken().filter { rule in refused.isDisjoint(with: rule.settings) }.map(\.error)
        guard errors.isEmpty else { throw InvalidConfiguration(errors: errors) }
        return config
    }

    /// Environment variables that are no setting but one or two letters away from one (`CORS_ALLOWED_ORIGIN`), or a
    /// word (`CORS_ORIGINS`, `DATABASE_POOL_SIZE`, `REPORT_CACHE_SECONDS`), each with the setting it most likely means:
    /// such a variable is otherwise ignored without a word.
    public static func misspeltSettings(_ env: [String: String]) -> [(given: String, meant: String)] {
        let names = GatewaySettings.all.map(\.name)
        let known = Set(names)
        // Only names with an underscore, and one letter off when short: HOME is not a misspelt HOST. Kubernetes'
        // service links (`DESK_PORT=tcp://…`, `DESK_SERVICE_HOST`) name Services, not settings.
        let candidates = env.filter { name, value in
            !known.contains(name) && name.contains("_") && !name.hasSuffix("_SERVICE_HOST") && !name.contains("_SERVICE_PORT")
                && !["tcp://", "udp://", "sctp://"].contains { value.hasPrefix($0) }
        }
        return candidates.keys.sorted().compactMap { given in
            let limit = given.utf8.count >= 12 ? 2 : 1
            let scored = names.map { (name: $0, distance: Self.editDistance(Array(given.utf8), Array($0.utf8), limit: limit)) }
            let best = scored.filter { $0.distance <= limit }.min { $0.distance < $1.distance }
            // A letter off beats a word off, which beats two letters (`REPORT_CACHE_MB` is `REPORT_CACHE_MAX_MB`).
            if let best, best.distance <= 1 { return (given, best.name) }
            return names.first { Self.oneWordApart(given, $0) }.map { (given, $0) } ?? best.map { (given, $0.name) }
        }
    }

    /// The words operators write two ways, each brought to the setting's spelling.
    static let wordSpellings: [Substring: Substring] = ["SECONDS": "S", "SECS": "S", "SEC": "S", "MILLISECONDS": "MS", "MILLIS": "MS",
                                                        "DATABASE": "DB", "MEGABYTES": "MB", "TIMEZONES": "ZONES", "ORIGIN": "ORIGINS"]

    /// The same words but for spelling (`DATABASE_POOL_SIZE`), or but one added or left out (`CORS_ORIGINS`), with at
    /// least two words in common: `HTTP_PROXY` is no `HTTP_THREADS`.
    static func oneWordApart(_ given: String, _ setting: String) -> Bool {
        func words(_ name: String) -> [Substring] { name.split(separator: "_").map { wordSpellings[$0] ?? $0 } }
        let a = words(given), b = words(setting)
        if a == b { return true }
        let (short, long) = a.count < b.count ? (a, b) : (b, a)
        guard long.count == short.count + 1, short.count >= 2 else { return false }
        // A word put in front of a setting's name names another variable (`TEST_DATABASE_URL`, `OLD_DESK_API_TOKEN`).
        let first = a.count > b.count ? 1 : 0
        return long.indices.dropFirst(first).contains { index in Array(long[..<index] + long[(index + 1)...]) == short }
    }

    /// Levenshtein distance, or `limit + 1` as soon as it is known to exceed `limit`.
    static func editDistance(_ a: [UInt8], _ b: [UInt8], limit: Int) -> Int {
        guard abs(a.count - b.count) <= limit else { return limit + 1 }
        var previous = Array(0...b.count)
        for (i, x) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, y) in b.enumerated() {
                current[j + 1] = Swift.min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
            }
            if current.min()! > limit { return limit + 1 }
            previous = current
        }
        return previous[b.count]
    }

    /// Rules between settings, which one row of the table cannot state: each broken one with the settings it reads.
    private func rulesBroken() -> [(settings: [String], error: ConfigError)] {
        var broken: [(settings: [String], error: ConfigError)] = []
        if self.httpRequestTimeoutSeconds > self.httpConnectionTimeoutSeconds {
            broken.append((["HTTP_REQUEST_TIMEOUT_S", "HTTP_CONNECTION_TIMEOUT_S"],
                           ConfigError(variable: "HTTP_REQUEST_TIMEOUT_S", message: "must not exceed HTTP_CONNECTION_TIMEOUT_S (\(self.httpConnectionTimeoutSeconds))")))
        }
        if self.deskBaseURL != nil && values[GatewaySettings.shared.deskAppId.name] == nil {
            broken.append((["DESK_BASE_URL", "DESK_APP_ID"], ConfigError(variable: "DESK_APP_ID", message: "required when DESK_BASE_URL is set")))
        }
        if self.reportTimeZones.isEmpty {
            broken.append((["REPORT_TIME_ZONES"],
                           ConfigError(variable: "REPORT_TIME_ZONES", message: "expected a comma-separated list of IANA zones such as UTC,Asia/Kolkata")))
        }
        return broken
    }

    /// What housekeeping keeps how long.
    public var retention: RetentionPolicy {
        RetentionPolicy(deadSessionDays: self.retentionDeadSessionDays, idempotencyHours: self.retentionIdempotencyHours,
                        appliedWebhookDays: self.retentionWebhookDays, unappliedWebhookDays: self.retentionUnappliedWebhookDays,
                        finishedOutboxDays: self.retentionOutboxDays, closedTicketDays: self.retentionClosedTicketDays)
    }

    /// The settings that differ from their defaults, secrets redacted.
    public var description: String { "GatewayConfig(\(assignments.joined(separator: ", ")))" }

    /// `NAME=value` of each setting that differs from its default, in the table's order and its own syntax, secrets
    /// redacted.
    public var assignments: [String] {
        GatewaySettings.all.compactMap { setting in
            guard let value = values[setting.name] else { return nil }
            return "\(setting.name)=\(setting.secret ? "<redacted>" : setting.text(of: value))"
        }
    }
}
