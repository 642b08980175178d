import API
import Foundation
public import HTTPServer
public import Logging
public import Postgres
public import Telemetry

public let gatewayVersion = "0.1.0"

/// A wired gateway: database pool (and the embedded cluster when no DATABASE_URL is set), migrations applied,
/// routes built, HTTP server listening. `main` and the tests both get one from `buildApplication`.
public final class GatewayApplication: Sendable {
    public let config: GatewayConfig
    public let pool: PostgresPool
    public let server: HTTPServer
    public let metrics: MetricsRegistry
    public let logger: Logger
    let embedded: EmbeddedPostgres?

    init(config: GatewayConfig, pool: PostgresPool, server: HTTPServer, metrics: MetricsRegistry, logger: Logger,
         embedded: EmbeddedPostgres?) {
        self.config = config
        self.pool = pool
        self.server = server
        self.metrics = metrics
        self.logger = logger
        self.embedded = embedded
    }

    /// The bound port (useful with PORT=0).
    public var port: Int { server.port }

    /// Stops accepting, drains in-flight requests up to the configured deadline, closes the pool, and stops the
    /// embedded cluster if this process started it.
    public func stop() async {
        logger.info("stopping", metadata: ["drain_s": "\(config.shutdownDrainSeconds)"])
        await server.stop(drainDeadline: .seconds(config.shutdownDrainSeconds))
        pool.shutdown()
        embedded?.stop()
        logger.info("stopped")
    }
}

/// Prepares the database for `config`: the embedded cluster when needed, then a pool.
func openDatabase(_ config: GatewayConfig, logger: Logger) async throws -> (PostgresPool, EmbeddedPostgres?) {
    var connectionString = config.databaseURL
    var embedded: EmbeddedPostgres?
    if connectionString == nil {
        let cluster = try EmbeddedPostgres(directory: config.embeddedPostgresDirectory, port: config.embeddedPostgresPort,
                                           logger: logger)
        try await cluster.start()
        let admin = PostgresPool(configuration: PostgresConfiguration(connectionString: cluster.connectionString(database: "postgres"), poolSize: 1))
        defer { admin.shutdown() }
        let exists = try await admin.query("SELECT 1 FROM pg_database WHERE datname = 'desk_gateway'")
        if exists.isEmpty { try await admin.query("CREATE DATABASE desk_gateway") }
        connectionString = cluster.connectionString(database: "desk_gateway")
        embedded = cluster
        logger.notice("using the embedded PostgreSQL cluster (DATABASE_URL is not set)",
                      metadata: ["data": "\(cluster.dataDirectory)", "port": "\(cluster.port)"])
    }
    let pool = PostgresPool(configuration: PostgresConfiguration(
        connectionString: connectionString!, poolSize: config.dbPoolSize, connectTimeoutSeconds: config.dbConnectTimeoutSeconds,
        statementTimeoutMilliseconds: config.dbStatementTimeoutMilliseconds,
        acquireTimeoutMilliseconds: config.dbAcquireTimeoutMilliseconds))
    return (pool, embedded)
}

/// Applies migrations, retrying while the database is still coming up (at most `dbStartupWaitSeconds`).
func migrate(pool: PostgresPool, assets: String, config: GatewayConfig, logger: Logger) async throws {
    let migrations = try Migration.load(directory: assets + "/sql")
    let deadline = ContinuousClock.now.advanced(by: .seconds(config.dbStartupWaitSeconds))
    while true {
        do {
            let applied = try await Migrator(pool: pool).migrate(migrations)
            logger.info("schema is current", metadata: ["applied": "\(applied)", "known": "\(migrations.count)"])
            return
        } catch let error as PostgresError where error.isUnavailable && ContinuousClock.now < deadline {
            logger.warning("database not reachable yet; retrying", metadata: ["error": "\(error.detail)"])
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
        let openAPI = try? String(contentsOfFile: assets + "/openapi.yaml", encoding: .utf8)
        var routes = RouteTable()
        OpsRoutes(checks: [DatabaseReadinessCheck(pool: pool)], metrics: metrics, pool: pool,
                  openAPIDocument: openAPI, version: gatewayVersion).register(in: &routes)
        let responder = APIResponder(routes: routes, metrics: metrics, logger: logger)
        let server = HTTPServer(configuration: HTTPServerConfiguration(
            host: config.host, port: config.port, threads: config.httpThreads,
            connectionTimeoutSeconds: config.httpConnectionTimeoutSeconds, connectionLimit: config.httpConnectionLimit,
            bodyLimitBytes: config.httpBodyLimitBytes), responder: responder)
        try server.start()
        logger.notice("listening", metadata: ["host": "\(config.host)", "port": "\(server.port)", "version": "\(gatewayVersion)"])
        return GatewayApplication(config: config, pool: pool, server: server, metrics: metrics, logger: logger, embedded: embedded)
    } catch {
        pool.shutdown()
        embedded?.stop()
        throw error
    }
}

/// `desk-gateway migrate`: applies migrations and exits.
public func runMigrations(_ config: GatewayConfig, logger: Logger) async throws {
    let assets = try Assets.locate(configured: config.assetsDirectory)
    let (pool, embedded) = try await openDatabase(config, logger: logger)
    defer {
        pool.shutdown()
        embedded?.stop()
    }
    try await migrate(pool: pool, assets: assets, config: config, logger: logger)
}
