import DeskClient
package import Postgres
public import Domain
import Foundation
public import Services
public import Logging
public import Store
import Telemetry

// The one-shot commands of the `desk-gateway` executable (everything but `serve`): each opens the database
// (starting the private cluster when needed), applies migrations, does its work and closes everything again.

/// Opens the database (migrated) for a one-shot command, runs `body`, and closes everything.
func withMigratedDatabase<T: Sendable>(_ config: GatewayConfig, logger: Logger, _ body: (Database) async throws -> T) async throws -> T {
    try await withDatabase(config, logger: logger, migrating: true) { database, _ in try await body(database) }
}

/// Opens the database (starting the private cluster when `DATABASE_URL` is unset), migrates it when asked, runs
/// `body` with it and the assets folder, and closes everything, also when `body` throws.
func withDatabase<T: Sendable>(_ config: GatewayConfig, logger: Logger, migrating: Bool,
                               _ body: (Database, String) async throws -> T) async throws -> T {
    let assets = try Assets.locate(configured: config.assetsDirectory)
    let (database, embedded) = try await openDatabase(config, logger: logger)
    do {
        if migrating { try await migrate(database: database, assets: assets, config: config, logger: logger) }
        let result = try await body(database, assets)
        database.shutdown()
        await embedded?.stop()
        return result
    } catch {
        database.shutdown()
        await embedded?.stop()
        throw error
    }
}

/// A command's input named something that does not exist: said on stderr, exit status 1, no stack of logs.
public struct CommandProblem: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

/// `desk-gateway api-key create`: returns the new key (shown once) and its id.
public func createApiKey(_ config: GatewayConfig, logger: Logger, name: String, scopes: [String], teams: [String] = []) async throws
    -> (key: String, id: Int) {
    do {
        return try await withMigratedDatabase(config, logger: logger) { try await APIKeyStore(database: $0).create(name: name, scopes: scopes, teams: teams) }
    } catch let error as APIKeyStore.UnknownTeams {
        throw CommandProblem(message: error.description)
    }
}

public func listApiKeys(_ config: GatewayConfig, logger: Logger) async throws -> [APIKeyRecord] {
    try await withMigratedDatabase(config, logger: logger) { try await APIKeyStore(database: $0).list() }
}

public func revokeApiKey(_ config: GatewayConfig, logger: Logger, id: Int) async throws -> Bool {
    try await withMigratedDatabase(config, logger: logger) { try await APIKeyStore(database: $0).revoke(id: id) }
}

/// `desk-gateway sync`: one Platform API sync against the configured Desk; with `since` (and `until`, default
/// today) a backfill of the tickets closed in that range instead, resumable.
public func runSync(_ config: GatewayConfig, logger: Logger, since: String? = nil, until: String? = nil,
                    progress: @escaping @Sendable (SyncSummary) -> Void) async throws -> SyncSummary {
    try await withPlatformDesk(config, logger: logger) { desk, database in
        try await CSATStore(database: database).ensureZones(config.reportTimeZones)
        let sync = deskSync(desk: desk, database: database, config: config, logger: logger)
        guard let since else { return try await sync.run(progress: progress) }
        return try await sync.backfill(since: since, until: until ?? DeskSyncDay.today(), progress: progress)
    }
}

/// `desk-gateway csat audit`: the stored ratings against Desk's ticket fields for tickets closed in a range.
public func runAudit(_ config: GatewayConfig, logger: Logger, from: String, to: String, repair: Bool,
                     progress: @escaping @Sendable (CSATAuditReport) -> Void) async throws -> CSATAuditReport {
    try await withPlatformDesk(config, logger: logger) { desk, database in
        let store = CSATStore(database: database)
        try await store.ensureZones(config.reportTimeZones)
        let state = SyncStateStore(database: database)
        var report = try await CSATAudit(desk: desk, ratings: store, state: state, logger: logger)
            .run(from: from, to: to, repair: repair, progress: progress)
        // The reports themselves: every zone's rollups against the raw ratings, rebuilt with --repair.
        report.rollupDrift = try await store.rollupDrift()
        report.rollupDriftLeft = report.rollupDrift
        if repair, !report.rollupDrift.isEmpty {
            try await store.rebuildRollups(zones: report.rollupDrift.keys.sorted())
            report.rollupDriftLeft = try await store.rollupDrift()
        }
        try await state.setValue(CSATAudit.differencesKey, String(report.remaining))
        return report
    }
}

/// The commands that read Desk's Platform API need its address and token.
func withPlatformDesk<T: Sendable>(_ config: GatewayConfig, logger: Logger,
                                   _ body: @escaping @Sendable (DeskClient, Database) async throws -> T) async throws -> T {
    guard config.deskBaseURL != nil, config.deskAPIToken != nil else {
        throw ConfigError(variable: "DESK_API_TOKEN", message: "this command reads Desk's Platform API: set DESK_BASE_URL, DESK_APP_ID and DESK_API_TOKEN")
    }
    return try await withMigratedDatabase(config, logger: logger) { database in
        let (desk, _) = try startDesk(config, metrics: MetricsRegistry(), logger: logger)
        return try await body(desk, database)
    }
}

/// `desk-gateway migrate`: applies migrations and exits.
public func runMigrations(_ config: GatewayConfig, logger: Logger) async throws {
    try await withMigratedDatabase(config, logger: logger) { _ in }
}

/// `desk-gateway migrate --status`: one attempt to reach the database, nothing applied or written.
package func migrationStatus(_ config: GatewayConfig, logger: Logger) async throws -> [MigrationState] {
    try await withDatabase(config, logger: logger, migrating: false) { database, assets in
        try await database.migrationStatus(directory: assets + "/sql")
    }
}

/// `desk-gateway cache reset`.
public func runCacheReset(_ config: GatewayConfig, logger: Logger, discardingPending: Bool) async throws -> CacheResetSummary {
    try await withMigratedDatabase(config, logger: logger) { try await resetCache($0, discardingPending: discardingPending) }
}

/// `desk-gateway csat drop-zone`: refused for a zone this environment lists (an instance started with it builds it
/// again); true when the zone had rollups.
public func dropReportZone(_ config: GatewayConfig, logger: Logger, zone: String) async throws -> Bool {
    guard !config.reportTimeZones.contains(zone) else {
        throw ConfigError(variable: "REPORT_TIME_ZONES", message: "lists \(zone): take it out of the list everywhere first, or every instance started with it builds its rollups again")
    }
    return try await withMigratedDatabase(config, logger: logger) { try await CSATStore(database: $0).dropZone(zone) }
}

/// `desk-gateway csat zones`: every zone with rollups, complete or not (with the time its build has counted up to), and its rows.
public func reportZones(_ config: GatewayConfig, logger: Logger) async throws -> [(zone: String, complete: Bool, countedUntil: Double?, rows: Int)] {
    try await withMigratedDatabase(config, logger: logger) { try await CSATStore(database: $0).registeredZones() }
}

/// `desk-gateway webhooks replay`: marks stored events with these statuses pending again, so the running gateway
/// applies them with the parser it has now. Returns how many.
public func replayWebhooks(_ config: GatewayConfig, logger: Logger, statuses: [String]) async throws -> Int {
    try await withMigratedDatabase(config, logger: logger) { try await WebhookInbox(database: $0).replay(statuses: statuses) }
}

/// `desk-gateway outbox list`: the oldest pending customer writes, with when each is tried next.
public func pendingOperations(_ config: GatewayConfig, logger: Logger, limit: Int) async throws -> [(operation: OutboxOperation, dueInSeconds: Double)] {
    try await withMigratedDatabase(config, logger: logger) { try await OutboxStore(database: $0).pending(limit: limit) }
}

/// `desk-gateway outbox retry-now`: every pending write due at once (running gateways' relays take them).
public func retryOperationsNow(_ config: GatewayConfig, logger: Logger) async throws -> Int {
    try await withMigratedDatabase(config, logger: logger) { try await OutboxStore(database: $0).retryNow() }
}

/// `desk-gateway outbox revive`: failed writes pending again (`OutboxStore.revive`); the ids revived (`dryRun`: the ids
/// it would revive).
public func reviveOperations(_ config: GatewayConfig, logger: Logger, reason: String, withinSeconds: Double, dryRun: Bool = false) async throws -> [Int] {
    try await withMigratedDatabase(config, logger: logger) {
        try await OutboxStore(database: $0).revive(reason: reason, withinSeconds: withinSeconds, dryRun: dryRun)
    }
}

/// `desk-gateway outbox list --failed`: writes that failed lately, each with whether `revive` could put it back.
public func failedOperations(_ config: GatewayConfig, logger: Logger, withinSeconds: Double, limit: Int) async throws
    -> [(operation: OutboxOperation, revivable: Bool)] {
    try await withMigratedDatabase(config, logger: logger) { try await OutboxStore(database: $0).failed(withinSeconds: withinSeconds, limit: limit) }
}
