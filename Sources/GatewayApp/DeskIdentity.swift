import Foundation
public import Store
import Logging

/// The gateway started against a Desk other than the one its database caches.
public struct DeskIdentityMismatch: Error, CustomStringConvertible, Sendable {
    public let recorded: String
    public let configured: String

    public var description: String {
        """
        this database caches tickets of Desk '\(recorded)', but the gateway is configured for Desk '\(configured)'. \
        Ticket ids of one Desk mean other tickets (and customers) in another, so starting would serve wrong tickets. \
        To start over against '\(configured)' (CSAT ratings, reports and API keys are kept): run `desk-gateway cache reset` \
        with the same configuration, or set CACHE_RESET_ON_DESK_CHANGE=true once.
        """
    }
}

/// Which Desk a database's cache belongs to: recorded on the first start, checked on every later one.
enum DeskIdentity {
    static let settingKey = "desk_identity"

    /// Base URL (scheme and host lowercased, no trailing slash) and application id; for the embedded emulator its
    /// instance id, made when its state was first created (a new emulator is a new Desk).
    static func describe(baseURL: String?, appId: String, emulatorInstance: String?) -> String {
        if let emulatorInstance { return "embedded emulator \(emulatorInstance) (app \(appId))" }
        var url = baseURL ?? ""
        while url.hasSuffix("/") { url.removeLast() }
        if var components = URLComponents(string: url) {
            components.scheme = components.scheme?.lowercased()
            components.host = components.host?.lowercased()
            url = components.string ?? url
        }
        return "\(url) (app \(appId))"
    }

    static func recorded(_ database: Database) async throws -> String? {
        try await SettingsStore(database: database).value(settingKey)
    }

    /// Records `identity` if none is, otherwise compares. A different one is refused unless `allowReset`, which clears
    /// the cache first (`resetCache`) and then records the new identity.
    static func verify(_ identity: String, database: Database, allowReset: Bool, logger: Logger) async throws {
        let settings = SettingsStore(database: database)
        guard let recorded = try await settings.valueSettingIfMissing(settingKey, to: identity), recorded != identity else { return }
        guard allowReset else { throw DeskIdentityMismatch(recorded: recorded, configured: identity) }
        // The setting is the operator's consent: writes queued for the old Desk could never reach the new one.
        let removed = try await resetCache(database, discardingPending: true)
        try await settings.set(settingKey, to: identity)
        logger.warning("Desk changed: the ticket cache was reset (CACHE_RESET_ON_DESK_CHANGE=true)",
                       metadata: ["previous": "\(recorded)", "current": "\(identity)", "removed": "\(removed)"])
    }
}

/// Forgets everything that belongs to one Desk, its recorded identity included (see `SettingsStore.resetDeskCache`).
public func resetCache(_ database: Database, discardingPending: Bool) async throws -> CacheResetSummary {
    try await SettingsStore(database: database).resetDeskCache(identityKey: DeskIdentity.settingKey, discardingPending: discardingPending)
}
