import Foundation
import GatewayApp
public import DeskClient
import Logging
import HTTPServer

/// A real gateway on a free port (`TestPorts`) against a test database.
public enum TestGateway {
    public static func configuration(databaseURL: String) -> GatewayConfig {
        var config = GatewayConfig()
        config.host = "127.0.0.1"
        config.port = TestPorts.free()
        config.databaseURL = databaseURL
        config.assetsDirectory = TestPostgres.repositoryRoot
        config.shutdownDrainSeconds = 5
        config.dbStartupWaitSeconds = 30
        config.logLevel = .warning
        config.deskEmulatorPort = TestPorts.free()
        config.syncIntervalSeconds = 0
        // Tests that need housekeeping run it themselves; back-dated rows elsewhere stay put.
        config.housekeepingIntervalSeconds = 0
        // The suite runs many gateways and emulators at once on two cores: a slow answer is not an outage here.
        config.deskTimeoutMilliseconds = 20_000
        // Likewise the database: dozens of gateways connect while their databases are being created.
        config.dbConnectTimeoutSeconds = TestLimits.connectTimeoutSeconds
        config.dbAcquireTimeoutMilliseconds = TestLimits.acquireTimeoutMilliseconds
        config.dbStatementTimeoutMilliseconds = TestLimits.statementTimeoutMilliseconds
        config.reportCacheSeconds = 0
        return config
    }

    /// Started again on other free ports when the gateway's, the admin or the emulator's port was taken between
    /// `TestPorts.free()` and the bind (`TestPorts.retryingBind`); `app.config` tells the ports it got. Returns once
    /// the reporting zones are built unless `waitForZones` is false.
    public static func start(_ config: GatewayConfig, logger given: Logger? = nil, waitForZones: Bool = true) async throws -> GatewayApplication {
        var logger = given ?? Logger(label: "gateway-test")
        if given == nil { logger.logLevel = config.logLevel }
        var config = config
        return try await TestPorts.retryingBind { attempt in
            if attempt > 1 {
                config.port = TestPorts.free()
                if config.adminPort != 0 { config.adminPort = TestPorts.free() }
                if config.deskEmulatorPort != 0 { config.deskEmulatorPort = TestPorts.free() }
            }
            let app = try await buildApplication(config, logger: logger)
            if waitForZones { await app.waitForReportZones() }
            return app
        }
    }

    /// Runs `body` with a started gateway on a fresh database and stops it afterwards.
    public static func with<T: Sendable>(configure: (inout GatewayConfig) -> Void = { _ in },
                                         _ body: (GatewayApplication) async throws -> T) async throws -> T {
        try await TestPostgres.withDatabase { url in
            var config = configuration(databaseURL: url)
            configure(&config)
            return try await running(config, body)
        }
    }

    /// Runs `body` with a gateway started on `config` and stops it afterwards, also when `body` throws.
    public static func running<T: Sendable>(_ config: GatewayConfig, logger: Logger? = nil, waitForZones: Bool = true,
                                            _ body: (GatewayApplication) async throws -> T) async throws -> T {
        let app = try await start(config, logger: logger, waitForZones: waitForZones)
        do {
            let result = try await body(app)
            await app.stop()
            return result
        } catch {
            await app.stop()
            throw error
        }
    }
}

/// A Desk client's configuration with the gateway's defaults (the settings table's), for tests that talk to the emulator.
public func deskClientConfiguration(baseURL: String, appId: String, apiToken: String? = nil) -> DeskClientConfiguration {
    var config = GatewayConfig()
    config.deskAppId = appId
    return config.deskClientConfiguration(baseURL: baseURL, apiToken: apiToken)
}
