import API
public import Store
public import DeskClient
public import DeskEmulator
import Foundation
import Domain
public import HTTPServer
public import Logging
public import Telemetry

public let gatewayVersion = "0.1.0"

/// A wired gateway: database pool (and the embedded cluster when no DATABASE_URL is set), migrations applied,
/// routes built, HTTP server listening. `main` and the tests both get one from `buildApplication`.
public final class GatewayApplication: Sendable {
    public let config: GatewayConfig
    /// The gateway's PostgreSQL (named `pool` as it is the connection pool the whole process shares).
    public let pool: Database
    public let server: HTTPServer
    public let metrics: MetricsRegistry
    public let logger: Logger
    public let desk: DeskClient
    /// The in-process Desk emulator when no DESK_BASE_URL is configured.
    public let emulator: DeskEmulator?
    public let sync: DeskSync
    let embedded: EmbeddedPostgres?
    let background: [Task<Void, Never>]

    init(config: GatewayConfig, pool: Database, server: HTTPServer, metrics: MetricsRegistry, logger: Logger,
         desk: DeskClient, emulator: DeskEmulator?, sync: DeskSync, embedded: EmbeddedPostgres?, background: [Task<Void, Never>]) {
        self.config = config
        self.pool = pool
        self.server = server
        self.metrics = metrics
        self.logger = logger
        self.desk = desk
        self.emulator = emulator
        self.sync = sync
        self.embedded = embedded
        self.background = background
    }

    /// Waits until the rollups of every configured reporting zone are complete (start-up backfill).
    public func waitForReportZones() async {
        await background.first?.value
    }

    /// The bound port (useful with PORT=0).
    public var port: Int { server.port }

    /// Stops accepting, drains in-flight requests up to the configured deadline, closes the pool, and stops the
    /// embedded cluster if this process started it.
    public func stop() async {
        logger.info("stopping", metadata: ["drain_s": "\(config.shutdownDrainSeconds)"])
        await server.stop(drainDeadline: .seconds(config.shutdownDrainSeconds))
        for task in background { task.cancel() }
        await emulator?.stop()
        pool.shutdown()
        await embedded?.stop()
        logger.info("stopped")
    }
}

/// Prepares the database for `config`: the embedded cluster when needed, then a pool.
func openDatabase(_ config: GatewayConfig, logger: Logger) async throws -> (Database, EmbeddedPostgres?) {
    var connectionString = config.databaseURL
    var embedded: EmbeddedPostgres?
    if connectionString == nil {
        let cluster = try EmbeddedPostgres(directory: config.embeddedPostgresDirectory, port: config.embeddedPostgresPort,
                                           logger: logger)
        try await cluster.start()
        let admin = Database(connectionString: cluster.connectionString(database: "postgres"), poolSize: 1)
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
                            acquireTimeoutMilliseconds: config.dbAcquireTimeoutMilliseconds)
    return (database, embedded)
}

/// Applies migrations, retrying while the database is still coming up (at most `dbStartupWaitSeconds`).
func migrate(pool: Database, assets: String, config: GatewayConfig, logger: Logger) async throws {
    let deadline = ContinuousClock.now.advanced(by: .seconds(config.dbStartupWaitSeconds))
    while true {
        do {
            let applied = try await pool.migrate(directory: assets + "/sql")
            logger.info("schema is current", metadata: ["applied": "\(applied)"])
            return
        } catch let error as DomainError where error.code == .storeUnavailable && ContinuousClock.now < deadline {
            logger.warning("database not reachable yet; retrying", metadata: ["error": "\(error.internalDetail ?? "")"])
            try await Task.sleep(for: .seconds(1))
        }
    }
}

/// Builds and starts the whole gateway.
public func buildApplication(_ config: GatewayConfig, logger: Logger) async throws -> GatewayApplication {
    let assets = try Assets.locate(configured: config.assetsDirectory)
    let (pool, embedded) = try await openDatabase(config, logger: logger)
    do {
        try await migrate(pool: pool, assets: assets, config: config, logger: logger)
        let metrics = MetricsRegistry()
        let emulatorStore = config.deskEmulatorPersistent ? EmulatorDatabaseStore(database: pool) : nil
        let (desk, emulator) = try startDesk(config, metrics: metrics, logger: logger, emulatorStore: emulatorStore)
        do {
            try await DeskIdentity.verify(DeskIdentity.describe(baseURL: config.deskBaseURL, appId: config.deskAppId,
                                                                emulatorInstance: emulator?.instanceId),
                                          pool: pool, allowReset: config.cacheResetOnDeskChange, logger: logger)
        } catch {
            await emulator?.stop()
            throw error
        }
        let openAPI = try? String(contentsOfFile: assets + "/openapi.yaml", encoding: .utf8)
        var routes = RouteTable()
        let watchdog = Watchdog(stallLimit: .seconds(config.livenessStallSeconds))
        OpsRoutes(checks: [DatabaseReadinessCheck(database: pool), DeskReadinessCheck(client: desk),
                           OutboxReadinessCheck(outbox: OutboxStore(pool: pool), warnAgeSeconds: Double(config.outboxWarnAgeSeconds))],
                  metrics: metrics, database: pool,
                  openAPIDocument: openAPI, version: gatewayVersion, watchdog: watchdog).register(in: &routes)
        let (sessionKey, generated) = try await SessionStore.sessionKey(configured: config.sessionKey, pool: pool)
        if generated {
            logger.warning("SESSION_KEY is not set: Desk session tokens are sealed with a key kept in the database; set SESSION_KEY in production")
        }
        var settings = CustomerAPISettings()
        settings.cacheTTLSeconds = Double(config.cacheTTLSeconds)
        settings.listTTLSeconds = Double(config.cacheTTLSeconds)
        settings.sessionLifetimeSeconds = config.sessionTTLSeconds
        settings.sessionCacheSeconds = Double(config.sessionCacheSeconds)
        settings.signInPerUserPerMinute = config.signInPerUserPerMinute
        settings.signInPerUserBurst = config.signInPerUserBurst
        let verified = VerifiedCallers()
        var previewSettings = LinkPreviewSettings()
        previewSettings.allowPrivateAddresses = config.linkPreviewAllowPrivate
        previewSettings.timeout = .milliseconds(config.linkPreviewTimeoutMilliseconds)
        previewSettings.maxBytes = config.linkPreviewMaxBytes
        previewSettings.concurrency = config.linkPreviewConcurrency
        let ticketStore = TicketStore(pool: pool)
        // Team names for ticket documents (the sync job keeps them current later); Desk gets two seconds at start-up.
        _ = await withDeadline(.seconds(2)) {
            if let page = try? await desk.teams(limit: 500) {
                try? await ticketStore.upsertTeams(page.results.map { (id: $0.id, key: $0.key, name: $0.name) })
            }
        }
        var outboxSettings = OutboxSettings()
        outboxSettings.maxBackoffSeconds = Double(config.outboxMaxBackoffSeconds)
        outboxSettings.warnAgeSeconds = Double(config.outboxWarnAgeSeconds)
        let customer = CustomerRoutes(desk: desk, sessions: SessionStore(pool: pool, vault: TokenVault(key: sessionKey)), ticketStore: ticketStore,
                                      ratings: CSATStore(pool: pool), previews: LinkPreviewFetcher(settings: previewSettings),
                                      settings: settings, outbox: OutboxStore(pool: pool), outboxSettings: outboxSettings,
                                      metrics: metrics, logger: logger, verified: verified)
        customer.register(in: &routes)
        let webhookSecret = config.deskWebhookSecret ?? (emulator != nil ? emulator!.configuration.webhookSecret : nil)
        let webhooks = WebhookRoutes(secrets: [webhookSecret, config.deskAPIToken].compactMap { $0 }, inbox: WebhookInbox(pool: pool),
                                     customer: customer, metrics: metrics, logger: logger)
        webhooks.register(in: &routes)
        let reportStore = ReportStore(pool: pool)
        let knownZones = try await reportStore.knownZones()
        for zone in config.reportTimeZones where !knownZones.contains(zone) {
            throw ConfigError(variable: "REPORT_TIME_ZONES", message: "PostgreSQL does not know the time zone '\(zone)'")
        }
        // New zones are backfilled in the background; until then their reports are computed from raw ratings.
        let zoneBackfill = Task {
            do {
                let backfilled = try await CSATStore(pool: pool).ensureZones(config.reportTimeZones)
                if !backfilled.isEmpty { logger.notice("built CSAT rollups for new reporting zones", metadata: ["zones": "\(backfilled)"]) }
            } catch {
                logger.error("CSAT rollup backfill failed; reports in the new zones stay exact but slower", metadata: ["error": "\(error)"])
            }
        }
        var reportSettings = ReportSettings()
        reportSettings.zones = config.reportTimeZones
        reportSettings.maxDays = config.reportMaxDays
        reportSettings.cacheSeconds = config.reportCacheSeconds
        ReportRoutes(keys: ApiKeyStore(pool: pool), reports: reportStore, sessions: SessionStore(pool: pool, vault: TokenVault(key: sessionKey)),
                     settings: reportSettings, knownZones: knownZones, zones: CSATStore(pool: pool), verified: verified).register(in: &routes)
        let sync = DeskSync(desk: desk, pool: pool, logger: logger, requestsPerSecond: Double(config.syncRequestsPerSecond))
        var background: [Task<Void, Never>] = [zoneBackfill, Task { await watchdog.run() }]
        background.append(Task { await webhooks.runProcessor() })
        if config.outboxRelay { background.append(Task { await customer.runRelay() }) }
        if config.syncIntervalSeconds > 0 {
            background.append(Task {
                while !Task.isCancelled {
                    do {
                        let summary = try await sync.run()
                        logger.info("sync finished", metadata: ["summary": "\(summary)"])
                    } catch {
                        logger.warning("sync failed", metadata: ["error": "\(error)"])
                    }
                    try? await Task.sleep(for: .seconds(config.syncIntervalSeconds))
                }
            })
        }
        var policy = APIPolicy()
        policy.corsOrigins = config.corsOrigins
        policy.rateLimitPerMinute = config.rateLimitPerMinute
        policy.rateLimitBurst = config.rateLimitBurst
        policy.signInPerMinute = config.signInPerMinute
        policy.signInBurst = config.signInBurst
        policy.authFailuresPerMinute = config.authFailuresPerMinute
        policy.authFailureBurst = config.authFailuresPerMinute
        policy.trustedProxies = config.trustedProxies.compactMap(CIDR.init)
        let responder = APIResponder(routes: routes, metrics: metrics, logger: logger, policy: policy,
                                     idempotency: IdempotencyStore(pool: pool), verified: verified)
        var serverConfig = HTTPServerConfiguration(
            host: config.host, port: config.port, threads: config.httpThreads,
            connectionTimeoutSeconds: config.httpConnectionTimeoutSeconds, connectionLimit: config.httpConnectionLimit,
            bodyLimitBytes: config.httpBodyLimitBytes)
        serverConfig.perAddressConnectionLimit = config.httpPerAddressConnectionLimit
        serverConfig.requestTimeoutSeconds = config.httpRequestTimeoutSeconds
        let server = HTTPServer(configuration: serverConfig, responder: responder)
        try server.start()
        // The embedded emulator sends its webhooks here, so agent-side changes reach the cache as with real Desk.
        emulator?.setWebhooks(urls: ["http://127.0.0.1:\(server.port)/v1/webhooks/desk"], secret: webhookSecret ?? "")
        logger.notice("listening", metadata: ["host": "\(config.host)", "port": "\(server.port)", "version": "\(gatewayVersion)"])
        return GatewayApplication(config: config, pool: pool, server: server, metrics: metrics, logger: logger,
                                  desk: desk, emulator: emulator, sync: sync, embedded: embedded, background: background)
    } catch {
        pool.shutdown()
        await embedded?.stop()
        throw error
    }
}

/// The Desk client; without DESK_BASE_URL an emulator is started in-process: restored from `emulatorStore` when it
/// holds a saved state, otherwise new and seeded with the demo data.
func startDesk(_ config: GatewayConfig, metrics: MetricsRegistry, logger: Logger,
               emulatorStore: (any EmulatorStateStore)? = nil) throws -> (DeskClient, DeskEmulator?) {
    var baseURL = config.deskBaseURL
    var apiToken = config.deskAPIToken
    var emulator: DeskEmulator?
    if baseURL == nil {
        var emulatorConfig = DeskEmulatorConfiguration()
        emulatorConfig.host = "127.0.0.1"
        emulatorConfig.port = config.deskEmulatorPort
        emulatorConfig.appId = config.deskAppId
        emulatorConfig.apiToken = apiToken ?? "emulator-api-token"
        emulatorConfig.webhookSecret = config.deskWebhookSecret ?? "emulator-webhook-secret"
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
    var deskConfig = DeskClientConfiguration(baseURL: baseURL!, appId: config.deskAppId, apiToken: apiToken)
    deskConfig.requestTimeout = .milliseconds(config.deskTimeoutMilliseconds)
    deskConfig.breakerFailureThreshold = config.deskBreakerThreshold
    deskConfig.breakerCooldown = .seconds(config.deskBreakerCooldownSeconds)
    metrics.describe("desk_requests_total", .counter, help: "Desk API calls by operation and outcome.")
    metrics.describe("desk_request_duration_seconds", .histogram, help: "Desk API call latency by operation.")
    let client = DeskClient(configuration: deskConfig) { record in
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
