import API
public import Services
public import Store
public import DeskClient
public import DeskEmulator
import Foundation
import JSON
import Synchronization
import Domain
public import HTTPServer
public import Logging
public import Telemetry

public let gatewayVersion = "0.1.0"

/// A wired gateway: database pool (and the embedded cluster when no DATABASE_URL is set), migrations applied,
/// routes built, background loops running, HTTP server listening. `main` and the tests both get one from
/// `buildApplication`; its parts stop in the reverse of the order they started.
public final class GatewayApplication: Sendable {
    private let wiring: Wiring
    public let server: HTTPServer
    public let sync: DeskSync
    let services: ServiceGroup
    let zoneBackfill: BackgroundLoop

    public var config: GatewayConfig { wiring.config }
    /// The gateway's PostgreSQL: one connection pool the whole process shares.
    public var database: Database { wiring.database }
    public var metrics: MetricsRegistry { wiring.metrics }
    public var logger: Logger { wiring.logger }
    public var desk: DeskClient { wiring.desk }
    /// The in-process Desk emulator when no DESK_BASE_URL is configured.
    public var emulator: DeskEmulator? { wiring.emulator }

    init(wiring: Wiring, server: HTTPServer, sync: DeskSync, services: ServiceGroup, zoneBackfill: BackgroundLoop) {
        self.wiring = wiring
        self.server = server
        self.sync = sync
        self.services = services
        self.zoneBackfill = zoneBackfill
    }

    /// Waits until the rollups of every configured reporting zone are complete (start-up backfill).
    public func waitForReportZones() async {
        await zoneBackfill.finished()
    }

    /// The running parts, in the order they started (they stop in reverse).
    public var serviceNames: [String] { services.names }

    /// The bound port (useful with PORT=0).
    public var port: Int { server.port }

    /// Stops in reverse order: the server drains in-flight requests up to the configured deadline, the background
    /// loops end, then the emulator, the pool and the embedded cluster if this process started them.
    public func stop() async {
        logger.info("stopping", metadata: ["drain_s": "\(config.shutdownDrainSeconds)"])
        await services.stop()
        logger.info("stopped")
    }
}

/// Prepares the database for `config`: the embedded cluster when needed, then a pool.
func openDatabase(_ config: GatewayConfig, logger: Logger) async throws -> (Database, EmbeddedPostgres?) {
    var connectionString = config.databaseURL
    var embedded: EmbeddedPostgres?
    if connectionString == nil {
        let cluster = try EmbeddedPostgres(directory: config.embeddedPostgresDirectory, port: config.embeddedPostgresPort,
                                           binDirectory: config.postgresBinDirectory, logger: logger)
        try await cluster.start()
        let admin = Database(connectionString: cluster.connectionString(database: "postgres"), poolSize: 1,
                             connectTimeoutSeconds: config.dbConnectTimeoutSeconds,
                             statementTimeoutMilliseconds: config.dbStatementTimeoutMilliseconds,
                             acquireTimeoutMilliseconds: config.dbAcquireTimeoutMilliseconds, transactionPooling: false)
        defer { admin.shutdown() }
        try await admin.createDatabaseIfMissing("desk_gateway")
        connectionString = cluster.connectionString(database: "desk_gateway")
        embedded = cluster
        logger.notice("using the embedded PostgreSQL cluster (DATABASE_URL is not set)",
                      metadata: ["data": "\(cluster.dataDirectory)", "port": "\(cluster.port)"])
    }
    let database = Database(connectionString: connectionString!, poolSize: config.dbPoolSize,
                            connectTimeoutSeconds: config.dbConnectTimeoutSeconds,
                            statementTimeoutMilliseconds: config.dbStatementTimeoutMilliseconds,
                            acquireTimeoutMilliseconds: config.dbAcquireTimeoutMilliseconds,
                            transactionPooling: config.dbTransactionPooling, cappedConnections: config.reportConnections)
    return (database, embedded)
}

/// Applies migrations, retrying while the database is still coming up (at most `dbStartupWaitSeconds`).
func migrate(database: Database, assets: String, config: GatewayConfig, logger: Logger) async throws {
    let deadline = ContinuousClock.now.advanced(by: .seconds(config.dbStartupWaitSeconds))
    while true {
        do {
            let (applied, known) = try await database.migrate(directory: assets + "/sql")
            logger.info("schema is current", metadata: ["applied": "\(applied)", "known": "\(known)"])
            return
        } catch let error as DomainError where error.code == .storeUnavailable && ContinuousClock.now < deadline {
            logger.warning("database not available yet (unreachable, or taking no writes); retrying", metadata: ["error": "\(error.internalDetail ?? "")"])
            try await Task.sleep(for: .seconds(1))
        }
    }
}

/// What the section builders share while the gateway is put together.
struct Wiring: Sendable {
    let config: GatewayConfig
    let logger: Logger
    let database: Database
    /// Credentials verified lately, shared by the authenticators and the rate limiter.
    let verified = VerifiedCallers()
    let metrics: MetricsRegistry
    /// The OTLP exporter when traces are exported.
    let spans: (any SpanRecorder)?
    let desk: DeskClient
    let emulator: DeskEmulator?
    let sessionKey: [UInt8]
    var routes = RouteTable()
    /// `/livez`, `/readyz`, `/metrics` when they have a port of their own (`ADMIN_PORT`).
    var adminRoutes = RouteTable()
    /// Whose `Idempotency-Key`s a request's are (the customer API's sessions decide).
    var idempotencyPrincipal: @Sendable (HTTPRequest) async -> String? = { _ in nil }
}

/// Builds and starts the whole gateway, one section at a time; a failure stops what had started.
public func buildApplication(_ config: GatewayConfig, logger: Logger) async throws -> GatewayApplication {
    let services = ServiceGroup(logger: logger)
    do {
        let assets = try Assets.locate(configured: config.assetsDirectory)
        let database = try await startDatabase(config, assets: assets, logger: logger, services: services)
        let metrics = MetricsRegistry()
        let spans = try await startTraceExport(config, metrics: metrics, logger: logger, services: services)
        let emulatorStore = config.deskEmulatorPersistent ? EmulatorDatabaseStore(database: database) : nil
        let (desk, emulator) = try startDesk(config, metrics: metrics, logger: logger, emulatorStore: emulatorStore, spans: spans)
        if let emulator { try await services.start(StopAction(name: "Desk emulator") { await emulator.stop() }) }
        try await DeskIdentity.verify(DeskIdentity.describe(baseURL: config.deskBaseURL, appId: config.deskAppId,
                                                            emulatorInstance: emulator?.instanceId),
                                      database: database, allowReset: config.cacheResetOnDeskChange, logger: logger)
        var wiring = Wiring(config: config, logger: logger, database: database, metrics: metrics, spans: spans, desk: desk, emulator: emulator,
                            sessionKey: try await sessionKey(config, database: database, logger: logger))
        let watchdog = Watchdog(stallLimit: .seconds(config.livenessStallSeconds))
        registerOps(&wiring, assets: assets, watchdog: watchdog)
        let customer = await registerCustomer(&wiring)
        let webhookSecret = config.deskWebhookSecret ?? emulator?.configuration.webhookSecret
        let keys = [("secret", webhookSecret), ("previous", config.deskWebhookPreviousSecret), ("api_token", config.deskAPIToken)]
        let webhooks = WebhookRoutes(keys: keys.compactMap { name, secret in secret.map { (name, $0) } }, appId: config.deskAppId,
                                     inbox: WebhookInbox(database: database), customer: customer, metrics: metrics, logger: logger)
        webhooks.register(in: &wiring.routes)
        let (reads, reports) = try await registerReports(&wiring)
        // A key revoked on any instance stops working on every one at once, not when the caches expire.
        let verified = wiring.verified
        let revocations = RevocationListener(database: database) { reports.forgetCredentials(); verified.removeAll() }
        revocations.start()
        try await services.start(StopAction(name: "revocation listener") { revocations.stop() })
        if reads.hasReplica {
            try await services.start(StopAction(name: "read replica pool") { reads.shutdown() })
            await reads.check()
            try await services.start(BackgroundLoop("read replica check", repeating(every: .seconds(1)) { await reads.check() }))
        }
        let sync = deskSync(wiring)
        let zoneBackfill = backfillZones(wiring)
        for loop in [zoneBackfill, BackgroundLoop("watchdog") { await watchdog.run() },
                     // One pass per four pool connections (at most three): a pass holds a connection, and customers
                     // must keep the rest.
                     BackgroundLoop("webhook processor") { await webhooks.runProcessor(workers: max(1, min(3, config.dbPoolSize / 4))) }] {
            try await services.start(loop)
        }
        if config.outboxRelay { try await services.start(BackgroundLoop("outbox relay") { await customer.runRelay() }) }
        if config.syncIntervalSeconds > 0 { try await services.start(syncLoop(sync, wiring)) }
        if config.housekeepingIntervalSeconds > 0 {
            let housekeeper = Housekeeper(store: HousekeepingStore(database: database), state: SyncStateStore(database: database), policy: config.retention, metrics: metrics, logger: logger)
            try await services.start(BackgroundLoop("housekeeping", repeating(every: .seconds(config.housekeepingIntervalSeconds)) {
                await housekeeper.runOnce()
            }))
        }
        let server = try await startServer(wiring, services: services)
        // The embedded emulator sends its webhooks here, so agent-side changes reach the cache as with real Desk.
        emulator?.setWebhooks(urls: ["http://127.0.0.1:\(server.port)/v1/webhooks/desk"], secret: webhookSecret ?? "")
        var listening: Logger.Metadata = ["host": "\(config.host)", "port": "\(server.port)", "version": "\(gatewayVersion)"]
        if config.adminPort > 0 { listening["admin_port"] = "\(config.adminPort)" }
        logger.notice("listening", metadata: listening)
        return GatewayApplication(wiring: wiring, server: server, sync: sync, services: services, zoneBackfill: zoneBackfill)
    } catch {
        await services.stop()
        throw error
    }
}

/// The OTLP exporter when an endpoint is configured; started early, so it stops late and sends the drain's spans.
func startTraceExport(_ config: GatewayConfig, metrics: MetricsRegistry, logger: Logger,
                      services: ServiceGroup) async throws -> (any SpanRecorder)? {
    guard let settings = config.otlpExporterSettings else { return nil }
    let exporter = OTLPExporter(settings: settings, logger: logger)
    exporter.register(in: metrics)
    try await services.start(BackgroundLoop("trace export") { await exporter.run() })
    logger.info("exporting traces over OTLP/HTTP", metadata: ["url": "\(settings.tracesURL)"])
    return exporter
}

/// The Platform API sync, on the client and the stores.
func deskSync(_ wiring: Wiring) -> DeskSync {
    deskSync(desk: wiring.desk, database: wiring.database, config: wiring.config, logger: wiring.logger)
}

func deskSync(desk: DeskClient, database: Database, config: GatewayConfig, logger: Logger) -> DeskSync {
    DeskSync(desk: desk, state: SyncStateStore(database: database), ratings: CSATStore(database: database), logger: logger, settings: config.syncSettings)
}

/// The embedded cluster when needed, the pool, the schema.
func startDatabase(_ config: GatewayConfig, assets: String, logger: Logger, services: ServiceGroup) async throws -> Database {
    let (database, embedded) = try await openDatabase(config, logger: logger)
    if let embedded { try await services.start(StopAction(name: "embedded PostgreSQL") { await embedded.stop() }) }
    try await services.start(StopAction(name: "database pool") { database.shutdown() })
    try await migrate(database: database, assets: assets, config: config, logger: logger)
    return database
}

func sessionKey(_ config: GatewayConfig, database: Database, logger: Logger) async throws -> [UInt8] {
    let (key, generated) = try await SessionStore.sessionKey(configured: config.sessionKey, database: database)
    if generated {
        logger.warning("SESSION_KEY is not set: Desk session tokens are sealed with a key kept in the database; set SESSION_KEY in production")
    }
    return key
}

/// `/livez`, `/readyz`, `/metrics`, `/openapi.yaml`.
func registerOps(_ wiring: inout Wiring, assets: String, watchdog: Watchdog) {
    let (config, database) = (wiring.config, wiring.database)
    let openAPI = try? String(contentsOfFile: assets + "/openapi.yaml", encoding: .utf8)
    let ops = OpsRoutes(checks: [DatabaseReadinessCheck(database: database), DeskReadinessCheck(client: wiring.desk),
                                 OutboxReadinessCheck(outbox: OutboxStore(database: database), warnAgeSeconds: Double(config.outboxWarnAgeSeconds))],
                        metrics: wiring.metrics, database: database, openAPIDocument: openAPI, version: gatewayVersion, watchdog: watchdog)
    ops.registerDocument(in: &wiring.routes)
    if config.adminPort > 0 { ops.registerHealth(in: &wiring.adminRoutes) } else { ops.registerHealth(in: &wiring.routes) }
    ProcessMetrics.register(in: wiring.metrics, version: gatewayVersion)
}

/// The customer API: sessions, tickets, messages, feedback, link previews, the outbox.
func registerCustomer(_ wiring: inout Wiring) async -> CustomerRoutes {
    let (config, database, desk) = (wiring.config, wiring.database, wiring.desk)
    let ticketStore = TicketStore(database: database)
    // Team names for ticket documents (the sync job keeps them current later). Start-up waits two seconds for Desk;
    // a slower answer is still stored when it comes (the ticket service reloads teams it is missing).
    let teamLoad = Task {
        if let page = try? await desk.teams(limit: 500) {
            try? await ticketStore.upsertTeams(page.results.map { (id: $0.id, key: $0.key, name: $0.name) })
        }
    }
    _ = await withDeadline(.seconds(2)) { await teamLoad.value }
    let customer = CustomerRoutes(desk: desk, platform: desk.configuration.apiToken == nil ? nil : desk, sessions: SessionStore(database: database, vault: TokenVault(key: wiring.sessionKey)),
                                  ticketStore: ticketStore, ratings: CSATStore(database: database), previews: LinkPreviewFetcher(settings: config.linkPreviewSettings),
                                  settings: config.customerAPISettings, outbox: OutboxStore(database: database), outboxSettings: config.outboxSettings,
                                  metrics: wiring.metrics, logger: wiring.logger, verified: wiring.verified)
    customer.register(in: &wiring.routes)
    wiring.idempotencyPrincipal = { [customer] in await customer.idempotencyPrincipal($0) }
    return customer
}

/// The reporting API; refuses a reporting zone PostgreSQL does not know.
func registerReports(_ wiring: inout Wiring) async throws -> (ReportReads, ReportRoutes) {
    let (config, database) = (wiring.config, wiring.database)
    let replica = config.databaseReadURL.map {
        Database(connectionString: $0, poolSize: config.dbReadPoolSize, connectTimeoutSeconds: min(config.dbConnectTimeoutSeconds, 2),
                 statementTimeoutMilliseconds: config.dbStatementTimeoutMilliseconds,
                 acquireTimeoutMilliseconds: config.dbAcquireTimeoutMilliseconds, transactionPooling: config.dbTransactionPooling)
    }
    let reads = ReportReads(primary: database, replica: replica, maxLagSeconds: Double(config.reportReplicaMaxLagSeconds))
    if replica != nil {
        wiring.metrics.gauge("report_replica_usable", help: "1 while report reads go to the read replica (DATABASE_READ_URL), 0 while they fall back to the primary.") {
            [([], reads.replicaState.usable ? 1 : 0)]
        }
        wiring.metrics.gauge("report_replica_lag_seconds", help: "The read replica's replay lag at its last check (absent while it is down).") {
            reads.replicaState.lag.map { [([], $0)] } ?? []
        }
    }
    wiring.metrics.gauge("report_reads_total", help: "Report reads by the database that served them (replica or primary).", kind: .counter) {
        let counts = reads.readCounts
        return [([("database", "replica")], Double(counts.replica)), ([("database", "primary")], Double(counts.primary))]
    }
    let reportStore = ReportStore(database: database, reads: reads)
    let knownZones = try await reportStore.knownZones()
    for zone in config.reportTimeZones where !knownZones.contains(zone) {
        throw ConfigError(variable: "REPORT_TIME_ZONES", message: "PostgreSQL does not know the time zone '\(zone)'")
    }
    let customerSessions = SessionStore(database: database, vault: TokenVault(key: wiring.sessionKey))
    let reports = ReportRoutes(keys: APIKeyStore(database: database), reports: reportStore, sessions: customerSessions,
                               settings: config.reportSettings, knownZones: knownZones, verified: wiring.verified)
    reports.register(in: &wiring.routes)
    wiring.metrics.gauge("report_computations_total", help: "Reports computed (not served from the report cache), by source: the rollups of a zone in REPORT_TIME_ZONES, or the raw ratings of any other zone (counted as they start, so one past the statement timeout counts too).", kind: .counter) {
        let counts = reports.reports.computedCounts
        return [([("source", "rollup")], Double(counts.rollup)), ([("source", "raw")], Double(counts.raw))]
    }
    wiring.metrics.gauge("report_rollup_blocks_total", help: "Rollup blocks the reports from rollups read, both periods' (a range is the fewest aligned blocks whose signed sum it is; how many depends on how its dates fall).", kind: .counter) {
        [([], Double(reports.reports.rollupBlocksRead))]
    }
    wiring.metrics.gauge("report_cache_bytes", help: "Bytes of computed reports held in memory (REPORT_CACHE_MAX_MB bounds them).") {
        [([], Double(reports.cachedReports.bytes))]
    }
    wiring.metrics.gauge("report_cache_entries", help: "Computed reports held in memory, each for REPORT_CACHE_S.") {
        [([], Double(reports.cachedReports.entries))]
    }
    ReportPageRoutes(api: reports, sessions: ReportSessionStore(database: database), customers: customerSessions, settings: config.reportPageSettings)
        .register(in: &wiring.routes)
    return (reads, reports)
}

/// New reporting zones are built in the background; until then their reports are computed from raw ratings. A build
/// that fails (the database restarted, a connection cut) is taken up again where it stopped, after 1 s, then twice as
/// long each time up to a minute, until it completes or the instance stops: a blip must not leave a zone on the slow
/// path until the next restart.
func backfillZones(_ wiring: Wiring) -> BackgroundLoop {
    let (zones, database, logger) = (wiring.config.reportTimeZones, wiring.database, wiring.logger)
    let building = Mutex<Int?>(nil)
    wiring.metrics.gauge("report_zones_building", help: "Zones of REPORT_TIME_ZONES whose rollups this instance is building or will take up again after a failed step (their reports are computed from raw ratings meanwhile); absent until the database was first asked.") {
        building.withLock { $0 }.map { [([], Double($0))] } ?? []
    }
    return BackgroundLoop("zone backfill") {
        let store = CSATStore(database: database)
        var announced = false
        var wait = Duration.seconds(1)
        while !Task.isCancelled {
            do {
                if !announced {
                    let missing = try await announceZoneChanges(zones, store: store, logger: logger)
                    building.withLock { $0 = missing }
                    announced = true
                }
                try await buildZones(zones, store: store, logger: logger) { building.withLock { $0 = max(0, ($0 ?? 1) - 1) } }
                building.withLock { $0 = 0 }
                return
            } catch {
                guard !Task.isCancelled else { return }
                logger.error("CSAT rollup build failed; it goes on where it stopped after the wait, and reports in the new zones stay exact but slower until then",
                             metadata: ["error": "\(error)", "retry_s": "\(wait.components.seconds)"])
                try? await Task.sleep(for: wait)
                wait = min(wait * 2, .seconds(60))
            }
        }
    }
}

/// Logs the zones kept but no longer configured and the ones about to be built; returns how many are to be built.
private func announceZoneChanges(_ zones: [String], store: CSATStore, logger: Logger) async throws -> Int {
    let kept = try await store.zones()
    for zone in kept.subtracting(zones).sorted() {
        logger.notice("a zone not in REPORT_TIME_ZONES still has rollups, which every CSAT write keeps up; `desk-gateway csat drop-zone` deletes them",
                      metadata: ["zone": "\(zone)"])
    }
    let missing = Set(zones).subtracting(kept)
    if !missing.isEmpty {
        logger.notice("building CSAT rollups for new reporting zones, in steps; CSAT writes and webhook events wait for each step",
                      metadata: ["zones": "\(missing.sorted())"])
    }
    return missing.count
}

private func buildZones(_ zones: [String], store: CSATStore, logger: Logger, zoneBuilt: @Sendable () -> Void) async throws {
    var logged = ContinuousClock.now
    let backfilled = try await store.ensureZones(zones, rowsPerStep: CSATStore.rowsPerStep) { progress in
        // A stopping instance leaves the build between steps; the next start goes on from there.
        try Task.checkCancellation()
        if progress.done { zoneBuilt() }
        guard let until = progress.countedUntil, ContinuousClock.now - logged >= .seconds(10) else { return }
        logged = .now
        logger.info("building CSAT rollups", metadata: ["zone": "\(progress.zone)", "countedUntil": "\(ISOTimestamp.format(until))"])
    }
    if !backfilled.isEmpty { logger.notice("built CSAT rollups for new reporting zones", metadata: ["zones": "\(backfilled)"]) }
}

func syncLoop(_ sync: DeskSync, _ wiring: Wiring) -> BackgroundLoop {
    let logger = wiring.logger
    let lastSuccess = Timestamp()
    wiring.metrics.gauge("sync_last_success_timestamp_seconds", help: "When this instance last finished a Desk sync run (or found another instance running one).") {
        [([], lastSuccess.value)]
    }
    return BackgroundLoop("Desk sync", repeating(every: .seconds(wiring.config.syncIntervalSeconds)) {
        do {
            let summary = try await sync.run()
            lastSuccess.set(WallClock.seconds())
            logger.info("sync finished", metadata: ["summary": "\(summary)"])
        } catch {
            logger.warning("sync failed", metadata: ["error": "\(error)"])
        }
    })
}

/// The HTTP server with the API's policy in front of every route; the last part to start and the first to stop.
func startServer(_ wiring: Wiring, services: ServiceGroup) async throws -> HTTPServer {
    let config = wiring.config
    if config.adminPort > 0 {
        // Started first, so it stops last: probes and scrapes see the drain.
        let admin = APIResponder(routes: wiring.adminRoutes, metrics: wiring.metrics, logger: wiring.logger, policy: config.apiPolicy,
                                 verified: wiring.verified)
        var adminServer = config.httpServerConfiguration
        adminServer.port = config.adminPort
        adminServer.threads = 1
        try await services.start(HTTPService(server: HTTPServer(configuration: adminServer, responder: admin), drain: .seconds(1)))
    }
    let responder = APIResponder(routes: wiring.routes, metrics: wiring.metrics, logger: wiring.logger, policy: config.apiPolicy,
                                 idempotency: IdempotentWrites(keys: idempotencyKeys(wiring), principal: wiring.idempotencyPrincipal), verified: wiring.verified,
                                 spans: wiring.spans)
    let server = HTTPServer(configuration: config.httpServerConfiguration, responder: responder)
    try await services.start(HTTPService(server: server, drain: .seconds(config.shutdownDrainSeconds)))
    return server
}

/// `Idempotency-Key` records. A claim left unanswered past its lease is a request that died: ten Desk calls at their
/// full deadline, five minutes at the least, is longer than any request runs.
func idempotencyKeys(_ wiring: Wiring) -> IdempotencyStore {
    let config = wiring.config
    return IdempotencyStore(database: wiring.database, windowHours: config.retentionIdempotencyHours,
                            leaseSeconds: max(300, 10 * Double(config.deskTimeoutMilliseconds) / 1000))
}

/// The HTTP server as a part of the gateway: stopping drains in-flight requests up to `drain`.
struct HTTPService: LifecycleService {
    let server: HTTPServer
    let drain: Duration
    var name: String { "HTTP server" }

    func start() async throws { try server.start() }
    func stop() async { await server.stop(drainDeadline: drain) }
}

/// The Desk client; without DESK_BASE_URL an emulator is started in-process: restored from `emulatorStore` when it
/// holds a saved state, otherwise new and seeded with the demo data.
func startDesk(_ config: GatewayConfig, metrics: MetricsRegistry, logger: Logger,
               emulatorStore: (any EmulatorStateStore)? = nil, spans: (any SpanRecorder)? = nil) throws -> (DeskClient, DeskEmulator?) {
    var baseURL = config.deskBaseURL
    var apiToken = config.deskAPIToken
    var emulator: DeskEmulator?
    if baseURL == nil {
        var emulatorConfig = DeskEmulatorConfiguration()
        emulatorConfig.host = "127.0.0.1"
        emulatorConfig.port = config.deskEmulatorPort
        emulatorConfig.appId = config.deskAppId
        if let apiToken { emulatorConfig.apiToken = apiToken }
        if let secret = config.deskWebhookSecret { emulatorConfig.webhookSecret = secret }
        var started = DeskEmulator(configuration: emulatorConfig)
        var restored = false
        if let emulatorStore { (started, restored) = try DeskEmulator.persistent(configuration: emulatorConfig, store: emulatorStore) }
        if !restored { try started.seed(json: Array(DeskEmulator.demoSeed.utf8)) }
        try started.start()
        baseURL = started.baseURL
        apiToken = emulatorConfig.apiToken
        emulator = started
        logger.notice("no DESK_BASE_URL: running against the embedded Desk emulator (demo data: customer demo-customer / demo-token)",
                      metadata: ["desk": "\(started.baseURL)", "state": "\(emulatorStore == nil ? "memory" : restored ? "restored from the database" : "new, kept in the database")"])
    }
    guard let baseURL else { throw ConfigError(variable: "DESK_BASE_URL", message: "no Desk to talk to") }
    let deskConfig = config.deskClientConfiguration(baseURL: baseURL, apiToken: apiToken)
    metrics.describe("desk_requests_total", .counter, help: "Desk API calls by operation and outcome.")
    metrics.describe("desk_request_duration_seconds", .histogram, help: "Desk API call latency by operation.")
    let client = DeskClient(configuration: deskConfig, spans: spans) { record in
        metrics.increment("desk_requests_total", [("operation", record.operation), ("outcome", record.outcome)])
        if record.outcome != "breaker_open" {
            metrics.observe("desk_request_duration_seconds", [("operation", record.operation)], record.seconds)
        }
    }
    metrics.gauge("desk_circuit_breaker_open", help: "1 while the Desk circuit breaker is open.") {
        [([], client.breaker.state == .open ? 1 : 0)]
    }
    return (client, emulator)
}
