import API
import Foundation
public import Store

public struct ConfigError: Error, CustomStringConvertible, Sendable {
    public let variable: String
    public let message: String
    public var description: String { "\(variable): \(message)" }
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

    public static func fromEnvironment(_ env: [String: String]) throws -> GatewayConfig {
        var config = GatewayConfig()
        for setting in GatewaySettings.all { try setting.read(env[setting.name], into: &config.values) }
        try config.checkTogether()
        return config
    }

    /// Environment variables that are no setting but one or two letters away from one (`CORS_ALLOWED_ORIGIN`), each
    /// with the setting it most likely means: such a variable is otherwise ignored without a word.
    public static func misspeltSettings(_ env: [String: String]) -> [(given: String, meant: String)] {
        let names = GatewaySettings.all.map(\.name)
        let known = Set(names)
        // Only names with an underscore, and one letter off when short: HOME is not a misspelt HOST.
        return env.keys.filter { !known.contains($0) && $0.contains("_") }.sorted().compactMap { given in
            let limit = given.utf8.count >= 12 ? 2 : 1
            let scored = names.map { (name: $0, distance: Self.editDistance(Array(given.utf8), Array($0.utf8), limit: limit)) }
            guard let best = scored.filter({ $0.distance <= limit }).min(by: { $0.distance < $1.distance }) else { return nil }
            return (given, best.name)
        }
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

    /// Rules between settings, which one row of the table cannot state.
    private func checkTogether() throws {
        guard self.httpRequestTimeoutSeconds <= self.httpConnectionTimeoutSeconds else {
            throw ConfigError(variable: "HTTP_REQUEST_TIMEOUT_S", message: "must not exceed HTTP_CONNECTION_TIMEOUT_S (\(self.httpConnectionTimeoutSeconds))")
        }
        if self.deskBaseURL != nil && values[GatewaySettings.shared.deskAppId.name] == nil {
            throw ConfigError(variable: "DESK_APP_ID", message: "required when DESK_BASE_URL is set")
        }
        if self.reportTimeZones.isEmpty {
            throw ConfigError(variable: "REPORT_TIME_ZONES", message: "expected a comma-separated list of IANA zones such as UTC,Asia/Kolkata")
        }
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
