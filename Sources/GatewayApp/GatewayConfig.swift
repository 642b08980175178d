import API
import Domain
public import Store
import Foundation
public import Logging

public struct ConfigError: Error, CustomStringConvertible, Sendable {
    public let variable: String
    public let message: String
    public var description: String { "\(variable): \(message)" }
}

/// Everything the gateway reads from its environment, validated once at start-up.
/// Secrets (the database URL may hold a password) are redacted from `description`.
public struct GatewayConfig: Sendable, CustomStringConvertible {
    public var host = "0.0.0.0"
    public var port = 8080
    public var httpThreads = 2
    public var httpConnectionTimeoutSeconds = 30
    public var httpConnectionLimit = 1024
    public var httpPerAddressConnectionLimit = 64
    public var httpRequestTimeoutSeconds = 10
    public var httpBodyLimitBytes = 1 << 20
    public var shutdownDrainSeconds = 10

    /// nil: start (or reuse) the embedded private PostgreSQL cluster.
    public var databaseURL: String?
    public var dbPoolSize = 4
    /// DATABASE_URL names a transaction-pooling proxy (pgbouncer `pool_mode = transaction`).
    public var dbTransactionPooling = false
    /// A streaming replica for report reads (libpq URL or key=value string; several hosts allowed).
    public var databaseReadURL: String?
    public var dbReadPoolSize = 4
    /// Report reads leave a replica whose replay lags more than this (seconds).
    public var reportReplicaMaxLagSeconds = 30
    public var dbConnectTimeoutSeconds = 5
    public var dbStatementTimeoutMilliseconds = 5000
    public var dbAcquireTimeoutMilliseconds = 5000
    /// How long start-up waits for an external database to accept connections.
    public var dbStartupWaitSeconds = 30

    public var embeddedPostgresDirectory = ".data/postgres"
    /// Below the kernel's ephemeral range (32768 up), where an outgoing connection could be holding it.
    public var embeddedPostgresPort = 25432

    /// nil: run the embedded Desk emulator on `deskEmulatorPort`.
    public var deskBaseURL: String?
    public var deskAppId = "emulated-app"
    public var deskAPIToken: String?
    public var deskWebhookSecret: String?
    public var deskTimeoutMilliseconds = 5000
    public var deskMaxAnswerMegabytes = 4
    public var deskStaleReadBudgetMilliseconds = 2000
    public var deskBreakerThreshold = 5
    public var deskBreakerCooldownSeconds = 10
    /// Port of the embedded emulator (0: any free port).
    public var deskEmulatorPort = 9090
    /// Keep the embedded emulator's state in the gateway's database (`database`) or in memory only (`memory`).
    public var deskEmulatorPersistent = true
    /// Started against another Desk than the database's cache belongs to: reset the cache instead of refusing to start.
    public var cacheResetOnDeskChange = false

    /// 32-byte key (base64url or base64) sealing Desk session tokens; nil generates one kept in the database.
    public var sessionKey: [UInt8]?
    public var sessionTTLSeconds = 86_400
    public var sessionCacheSeconds = 5
    public var cacheTTLSeconds = 15
    public var corsOrigins: [String] = []
    public var rateLimitPerMinute = 600
    public var rateLimitBurst = 120
    public var signInPerMinute = 30
    public var signInBurst = 10
    public var signInPerUserPerMinute = 10
    public var signInPerUserBurst = 5
    public var authFailuresPerMinute = 30
    /// CIDRs of reverse proxies whose X-Forwarded-For / Forwarded headers name the client.
    public var trustedProxies: [String] = []
    public var linkPreviewAllowPrivate = false
    public var linkPreviewTimeoutMilliseconds = 5000
    public var linkPreviewMaxBytes = 512 * 1024
    public var linkPreviewConcurrency = 4
    /// `/livez` fails when async work has made no progress for this long.
    public var livenessStallSeconds = 15

    /// Zones whose daily CSAT rollups are kept (reports in other zones are computed from raw ratings).
    public var reportTimeZones = ["UTC"]
    public var reportMaxDays = 366
    public var reportCacheSeconds = 15
    public var reportCacheMaxMegabytes = 32
    public var reportMaxCells = 10_000
    public var reportRawConcurrency = 2
    public var reportRawConcurrencyPerKey = 1
    /// The report page (`/reports`): session length, who may frame it, the small-sample mark, the Secure cookie.
    public var reportPageSessionHours = 8
    public var reportPageFrameAncestors: String?
    public var reportPageSmallSample = 10
    public var reportPageSecureCookie: Bool?
    /// Seconds between Platform API syncs while running; 0 turns the periodic sync off.
    public var syncIntervalSeconds = 300
    /// Unanswered CSAT requests younger than this are re-read on every sync; the first sync reads this far back.
    public var syncLateRatingDays = 30
    public var syncFirstRunDays = 90
    /// Seconds between housekeeping passes (0: off); what is kept how long is `retention`.
    public var housekeepingIntervalSeconds = 300
    public var retention = RetentionPolicy()
    /// Platform API requests per second the sync allows itself.
    public var syncRequestsPerSecond = 5

    public var outboxMaxBackoffSeconds = 300
    public var outboxWarnAgeSeconds = 300
    public var outboxRelay = true

    public var logLevel: Logger.Level = .info
    /// Folder holding `sql/` and `openapi.yaml`; nil searches the usual places.
    public var assetsDirectory: String?

    public init() {}

    public static func fromEnvironment(_ env: [String: String]) throws -> GatewayConfig {
        var config = GatewayConfig()
        let reader = EnvironmentReader(env: env)
        try config.readHTTP(reader)
        try config.readDatabase(reader)
        try config.readDesk(reader)
        try config.readClients(reader)
        try config.readJobs(reader)
        return config
    }

    /// The HTTP server and its limits.
    private mutating func readHTTP(_ reader: EnvironmentReader) throws {
        host = try reader.ipv4("HOST", default: host)
        port = try reader.int("PORT", default: port, range: 0...65535)
        httpThreads = try reader.int("HTTP_THREADS", default: httpThreads, range: 1...256)
        httpConnectionTimeoutSeconds = try reader.int("HTTP_CONNECTION_TIMEOUT_S", default: httpConnectionTimeoutSeconds, range: 1...3600)
        httpConnectionLimit = try reader.int("HTTP_CONNECTION_LIMIT", default: httpConnectionLimit, range: 1...65536)
        httpPerAddressConnectionLimit = try reader.int("HTTP_PER_ADDRESS_CONNECTION_LIMIT", default: httpPerAddressConnectionLimit, range: 0...65536)
        httpRequestTimeoutSeconds = try reader.int("HTTP_REQUEST_TIMEOUT_S", default: httpRequestTimeoutSeconds, range: 1...3600)
        guard httpRequestTimeoutSeconds <= httpConnectionTimeoutSeconds else {
            throw ConfigError(variable: "HTTP_REQUEST_TIMEOUT_S", message: "must not exceed HTTP_CONNECTION_TIMEOUT_S (\(httpConnectionTimeoutSeconds))")
        }
        httpBodyLimitBytes = try reader.int("HTTP_BODY_LIMIT_BYTES", default: httpBodyLimitBytes, range: 1024...(64 << 20))
        shutdownDrainSeconds = try reader.int("SHUTDOWN_DRAIN_S", default: shutdownDrainSeconds, range: 0...600)
    }

    /// PostgreSQL, external or embedded.
    private mutating func readDatabase(_ reader: EnvironmentReader) throws {
        databaseURL = try reader.optionalString("DATABASE_URL")
        dbPoolSize = try reader.int("DB_POOL_SIZE", default: dbPoolSize, range: 1...256)
        dbTransactionPooling = try reader.bool("DB_TRANSACTION_POOLING", default: false)
        databaseReadURL = try reader.optionalString("DATABASE_READ_URL")
        dbReadPoolSize = try reader.int("DB_READ_POOL_SIZE", default: dbReadPoolSize, range: 1...256)
        reportReplicaMaxLagSeconds = try reader.int("REPORT_REPLICA_MAX_LAG_S", default: reportReplicaMaxLagSeconds, range: 0...86_400)
        dbConnectTimeoutSeconds = try reader.int("DB_CONNECT_TIMEOUT_S", default: dbConnectTimeoutSeconds, range: 1...300)
        dbStatementTimeoutMilliseconds = try reader.int("DB_STATEMENT_TIMEOUT_MS", default: dbStatementTimeoutMilliseconds, range: 10...3_600_000)
        dbAcquireTimeoutMilliseconds = try reader.int("DB_ACQUIRE_TIMEOUT_MS", default: dbAcquireTimeoutMilliseconds, range: 1...600_000)
        dbStartupWaitSeconds = try reader.int("DB_STARTUP_WAIT_S", default: dbStartupWaitSeconds, range: 0...3600)
        embeddedPostgresDirectory = try reader.optionalString("EMBEDDED_PG_DIR") ?? embeddedPostgresDirectory
        embeddedPostgresPort = try reader.int("EMBEDDED_PG_PORT", default: embeddedPostgresPort, range: 1024...65535)
    }

    /// Sendbird Desk, or the embedded emulator.
    private mutating func readDesk(_ reader: EnvironmentReader) throws {
        deskBaseURL = try reader.httpURL("DESK_BASE_URL")
        if deskBaseURL != nil {
            guard let appId = try reader.optionalString("DESK_APP_ID") else {
                throw ConfigError(variable: "DESK_APP_ID", message: "required when DESK_BASE_URL is set")
            }
            deskAppId = appId
        } else {
            deskAppId = try reader.optionalString("DESK_APP_ID") ?? deskAppId
        }
        deskAPIToken = try reader.optionalString("DESK_API_TOKEN")
        deskWebhookSecret = try reader.optionalString("DESK_WEBHOOK_SECRET")
        deskTimeoutMilliseconds = try reader.int("DESK_TIMEOUT_MS", default: deskTimeoutMilliseconds, range: 50...120_000)
        deskMaxAnswerMegabytes = try reader.int("DESK_MAX_ANSWER_MB", default: deskMaxAnswerMegabytes, range: 1...1024)
        deskStaleReadBudgetMilliseconds = try reader.int("DESK_STALE_READ_BUDGET_MS", default: deskStaleReadBudgetMilliseconds, range: 50...120_000)
        deskBreakerThreshold = try reader.int("DESK_BREAKER_THRESHOLD", default: deskBreakerThreshold, range: 1...1000)
        deskBreakerCooldownSeconds = try reader.int("DESK_BREAKER_COOLDOWN_S", default: deskBreakerCooldownSeconds, range: 1...3600)
        deskEmulatorPort = try reader.int("DESK_EMULATOR_PORT", default: deskEmulatorPort, range: 0...65535)
        switch try reader.optionalString("DESK_EMULATOR_STATE")?.lowercased() {
        case nil, "database": deskEmulatorPersistent = true
        case "memory": deskEmulatorPersistent = false
        case let other?: throw ConfigError(variable: "DESK_EMULATOR_STATE", message: "expected database or memory, got '\(other)'")
        }
        cacheResetOnDeskChange = try reader.bool("CACHE_RESET_ON_DESK_CHANGE", default: false)
    }

    /// What clients get: sessions, caching, CORS, rate limits, link previews, liveness.
    private mutating func readClients(_ reader: EnvironmentReader) throws {
        if let text = try reader.optionalString("SESSION_KEY") {
            guard let key = Codec.decodeBase64(text), key.count == 32 else {
                throw ConfigError(variable: "SESSION_KEY", message: "expected 32 random bytes in base64 (e.g. `openssl rand -base64 32`)")
            }
            sessionKey = [UInt8](key)
        }
        sessionTTLSeconds = try reader.int("SESSION_TTL_S", default: sessionTTLSeconds, range: 60...31_536_000)
        sessionCacheSeconds = try reader.int("SESSION_CACHE_S", default: sessionCacheSeconds, range: 0...300)
        cacheTTLSeconds = try reader.int("CACHE_TTL_S", default: cacheTTLSeconds, range: 0...86_400)
        if let origins = try reader.optionalString("CORS_ALLOWED_ORIGINS") {
            corsOrigins = origins.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            for origin in corsOrigins where origin != "*" {
                guard let url = URL(string: origin), url.scheme != nil, url.host != nil, url.path.isEmpty else {
                    throw ConfigError(variable: "CORS_ALLOWED_ORIGINS", message: "expected origins like https://app.example.com or *, got '\(origin)'")
                }
            }
        }
        rateLimitPerMinute = try reader.int("RATE_LIMIT_PER_MINUTE", default: rateLimitPerMinute, range: 1...10_000_000)
        rateLimitBurst = try reader.int("RATE_LIMIT_BURST", default: rateLimitBurst, range: 1...10_000_000)
        signInPerMinute = try reader.int("SIGNIN_RATE_LIMIT_PER_MINUTE", default: signInPerMinute, range: 1...10_000_000)
        signInBurst = try reader.int("SIGNIN_RATE_LIMIT_BURST", default: signInBurst, range: 1...10_000_000)
        signInPerUserPerMinute = try reader.int("SIGNIN_PER_USER_PER_MINUTE", default: signInPerUserPerMinute, range: 1...10_000_000)
        signInPerUserBurst = try reader.int("SIGNIN_PER_USER_BURST", default: signInPerUserBurst, range: 1...10_000_000)
        authFailuresPerMinute = try reader.int("AUTH_FAILURES_PER_MINUTE", default: authFailuresPerMinute, range: 1...10_000_000)
        if let proxies = try reader.optionalString("TRUSTED_PROXIES") {
            trustedProxies = proxies.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            for proxy in trustedProxies where CIDR(proxy) == nil {
                throw ConfigError(variable: "TRUSTED_PROXIES", message: "expected comma-separated addresses or CIDRs such as 10.0.0.0/8, got '\(proxy)'")
            }
        }
        linkPreviewAllowPrivate = try reader.bool("LINK_PREVIEW_ALLOW_PRIVATE", default: false)
        linkPreviewTimeoutMilliseconds = try reader.int("LINK_PREVIEW_TIMEOUT_MS", default: linkPreviewTimeoutMilliseconds, range: 100...60_000)
        linkPreviewMaxBytes = try reader.int("LINK_PREVIEW_MAX_BYTES", default: linkPreviewMaxBytes, range: 1024...(16 << 20))
        linkPreviewConcurrency = try reader.int("LINK_PREVIEW_CONCURRENCY", default: linkPreviewConcurrency, range: 1...256)
        livenessStallSeconds = try reader.int("LIVENESS_STALL_S", default: livenessStallSeconds, range: 2...3600)
    }

    /// Reports, the sync, the outbox, logging, assets.
    private mutating func readJobs(_ reader: EnvironmentReader) throws {
        if let zones = try reader.optionalString("REPORT_TIME_ZONES") {
            reportTimeZones = zones.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard !reportTimeZones.isEmpty else {
                throw ConfigError(variable: "REPORT_TIME_ZONES", message: "expected a comma-separated list of IANA zones such as UTC,Asia/Kolkata")
            }
            for zone in reportTimeZones where TimeZone(identifier: zone) == nil {
                throw ConfigError(variable: "REPORT_TIME_ZONES", message: "'\(zone)' is not an IANA time zone")
            }
        }
        reportMaxDays = try reader.int("REPORT_MAX_DAYS", default: reportMaxDays, range: 1...3660)
        reportCacheSeconds = try reader.int("REPORT_CACHE_S", default: reportCacheSeconds, range: 0...3600)
        reportCacheMaxMegabytes = try reader.int("REPORT_CACHE_MAX_MB", default: reportCacheMaxMegabytes, range: 0...4096)
        reportMaxCells = try reader.int("REPORT_MAX_CELLS", default: reportMaxCells, range: 10...1_000_000)
        reportRawConcurrency = try reader.int("REPORT_RAW_CONCURRENCY", default: reportRawConcurrency, range: 1...64)
        reportRawConcurrencyPerKey = try reader.int("REPORT_RAW_CONCURRENCY_PER_KEY", default: reportRawConcurrencyPerKey, range: 1...64)
        reportPageSessionHours = try reader.int("REPORT_PAGE_SESSION_HOURS", default: reportPageSessionHours, range: 1...720)
        reportPageSmallSample = try reader.int("REPORT_PAGE_SMALL_SAMPLE", default: reportPageSmallSample, range: 0...1_000_000)
        if let ancestors = try reader.optionalString("REPORT_PAGE_FRAME_ANCESTORS") {
            // CSP source expressions only: no quotes but 'self', no semicolons that would start another directive.
            let sources = ancestors.split(separator: " ").map(String.init)
            guard !sources.isEmpty, sources.allSatisfy({ $0 == "'self'" || ($0.hasPrefix("https://") || $0.hasPrefix("http://"))
                                                       && !$0.contains(";") && !$0.contains("'") && !$0.contains(",") }) else {
                throw ConfigError(variable: "REPORT_PAGE_FRAME_ANCESTORS", message: "expected space-separated origins such as https://tools.example.com, or 'self'")
            }
            reportPageFrameAncestors = sources.joined(separator: " ")
        }
        if let secure = try reader.optionalString("REPORT_PAGE_SECURE_COOKIE"), secure != "auto" {
            guard secure == "true" || secure == "false" else {
                throw ConfigError(variable: "REPORT_PAGE_SECURE_COOKIE", message: "expected auto, true or false")
            }
            reportPageSecureCookie = secure == "true"
        }
        syncIntervalSeconds = try reader.int("SYNC_INTERVAL_S", default: syncIntervalSeconds, range: 0...86_400)
        syncLateRatingDays = try reader.int("SYNC_LATE_RATING_DAYS", default: syncLateRatingDays, range: 0...3650)
        syncFirstRunDays = try reader.int("SYNC_FIRST_RUN_DAYS", default: syncFirstRunDays, range: 1...3650)
        housekeepingIntervalSeconds = try reader.int("HOUSEKEEPING_INTERVAL_S", default: housekeepingIntervalSeconds, range: 0...86_400)
        retention.deadSessionDays = try reader.number("RETENTION_DEAD_SESSION_DAYS", default: retention.deadSessionDays, range: 0...3650)
        retention.idempotencyHours = try reader.number("RETENTION_IDEMPOTENCY_HOURS", default: retention.idempotencyHours, range: 0.01...87_600)
        retention.appliedWebhookDays = try reader.number("RETENTION_WEBHOOK_DAYS", default: retention.appliedWebhookDays, range: 0...3650)
        retention.unappliedWebhookDays = try reader.number("RETENTION_UNAPPLIED_WEBHOOK_DAYS", default: retention.unappliedWebhookDays, range: 0...3650)
        retention.finishedOutboxDays = try reader.number("RETENTION_OUTBOX_DAYS", default: retention.finishedOutboxDays, range: 0...3650)
        retention.closedTicketDays = try reader.number("RETENTION_CLOSED_TICKET_DAYS", default: retention.closedTicketDays, range: 0.001...3650)
        syncRequestsPerSecond = try reader.int("SYNC_REQUESTS_PER_SECOND", default: syncRequestsPerSecond, range: 1...100)
        outboxMaxBackoffSeconds = try reader.int("OUTBOX_MAX_BACKOFF_S", default: outboxMaxBackoffSeconds, range: 1...86_400)
        outboxWarnAgeSeconds = try reader.int("OUTBOX_WARN_AGE_S", default: outboxWarnAgeSeconds, range: 1...604_800)
        outboxRelay = try reader.bool("OUTBOX_RELAY", default: true)
        logLevel = try reader.logLevel("LOG_LEVEL", default: logLevel)
        assetsDirectory = try reader.optionalString("ASSETS_DIR")
    }
    public var description: String {
        "GatewayConfig(host: \(host), port: \(port), httpThreads: \(httpThreads), database: \(databaseURL == nil ? "embedded" : "<redacted>"), readReplica: \(databaseReadURL == nil ? "none" : "<redacted>"), dbPoolSize: \(dbPoolSize), desk: \(deskBaseURL ?? "embedded emulator"), deskApiToken: \(deskAPIToken == nil ? "unset" : "<redacted>"), sessionKey: \(sessionKey == nil ? "generated" : "<redacted>"), logLevel: \(logLevel))"
    }
}

struct EnvironmentReader {
    let env: [String: String]

    func optionalString(_ name: String) throws -> String? {
        guard let value = env[name] else { return nil }
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if trimmed.isEmpty { return nil }
        return trimmed
    }

    func int(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws -> Int {
        guard let text = try optionalString(name) else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            throw ConfigError(variable: name, message: "expected a whole number from \(range.lowerBound) to \(range.upperBound), got '\(text)'")
        }
        return value
    }

    /// A decimal number such as 24 or 0.05 (a retention of minutes, for soaks and tests).
    func number(_ name: String, default fallback: Double, range: ClosedRange<Double>) throws -> Double {
        guard let text = try optionalString(name) else { return fallback }
        guard let value = Double(text), value.isFinite, range.contains(value) else {
            throw ConfigError(variable: name, message: "expected a number from \(range.lowerBound) to \(range.upperBound), got '\(text)'")
        }
        return value
    }

    func ipv4(_ name: String, default fallback: String) throws -> String {
        guard let text = try optionalString(name) else { return fallback }
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ Int($0).map { (0...255).contains($0) } ?? false }) else {
            throw ConfigError(variable: name, message: "expected an IPv4 address such as 0.0.0.0 or 127.0.0.1, got '\(text)'")
        }
        return text
    }

    func httpURL(_ name: String) throws -> String? {
        guard let text = try optionalString(name) else { return nil }
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              url.host != nil, url.query == nil else {
            throw ConfigError(variable: name, message: "expected an http(s) base URL such as https://desk-api-APPID.sendbird.com, got '\(text)'")
        }
        return text.hasSuffix("/") ? String(text.dropLast()) : text
    }

    func bool(_ name: String, default fallback: Bool) throws -> Bool {
        guard let text = try optionalString(name)?.lowercased() else { return fallback }
        switch text {
        case "1", "true", "yes", "on": return true
        case "0", "false", "no", "off": return false
        default: throw ConfigError(variable: name, message: "expected true or false, got '\(text)'")
        }
    }

    func logLevel(_ name: String, default fallback: Logger.Level) throws -> Logger.Level {
        guard let text = try optionalString(name) else { return fallback }
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw ConfigError(variable: name, message: "expected one of trace, debug, info, notice, warning, error, critical, got '\(text)'")
        }
        return level
    }
}
