import API
import Foundation
public import Logging
import Store
import Domain

/// Every environment variable the gateway reads, each declared once: name, default, accepted values, section and a
/// one-line description. `GatewayConfig` reads them (exit 2 naming the variable), the components' settings are built
/// from its values, and `docs/configuration.md` and `deploy/desk-gateway.env.example` are generated from this table
/// (`desk-gateway settings`; a test fails when they differ). The properties' order is the reference's order.
public struct GatewaySettings: Sendable {
    // Sendbird Desk
    public let deskBaseURL = Setting<String?>(
        "DESK_BASE_URL", nil, .desk, "Desk API base, `https://desk-api-{appId}.sendbird.com`; unset runs the embedded Desk emulator",
        accepts: "http(s) URL", defaultText: "", required: "for a real Desk") { (text: String) throws(SettingProblem) -> String? in
        if let problem = SettingChecks.httpURL(text) { throw SettingProblem(problem) }
        return text.hasSuffix("/") ? String(text.dropLast()) : text
    }
    public let deskAppId = Setting.text(
        "DESK_APP_ID", "emulated-app", .desk, "Sendbird application id (Dashboard › Settings › Application › General)",
        required: "with DESK_BASE_URL")
    public let deskAPIToken = Setting.optional(
        "DESK_API_TOKEN", .desk, "Desk API token (Dashboard › Settings › Desk › Credentials): Platform API reads, the sync, the audit, queued closes, cancels and priorities past the sign-in wait",
        required: "for a real Desk", secret: true)
    public let deskWebhookSecret = Setting.optional(
        "DESK_WEBHOOK_SECRET", .desk, "secret Desk signs webhooks with (`x-hub-signature`; Dashboard › Settings › Desk › Webhooks)",
        required: "for Desk's webhooks, unless they are signed with DESK_API_TOKEN", secret: true)
    public let deskWebhookPreviousSecret = Setting.optional(
        "DESK_WEBHOOK_SECRET_PREVIOUS", .desk,
        "the secret before DESK_WEBHOOK_SECRET, still taken while a rotation goes on (until `webhook_signatures_total{key=\"previous\"}` stays flat)",
        secret: true)
    public let deskTimeoutMilliseconds = Setting.integer("DESK_TIMEOUT_MS", 5000, 50...120_000, .desk, "deadline of one Desk call attempt")
    public let deskStaleReadBudgetMilliseconds = Setting.integer(
        "DESK_STALE_READ_BUDGET_MS", 2000, 50...120_000, .desk,
        "a read that has a cached copy waits this long for Desk in all, then serves the copy with `X-Cache: STALE`")
    public let deskMaxAnswerMegabytes = Setting.integer(
        "DESK_MAX_ANSWER_MB", 4, 1...1024, .desk, "most bytes of one Desk answer; the transfer stops there and the call is 502")
    public let deskBreakerThreshold = Setting.integer(
        "DESK_BREAKER_THRESHOLD", 5, 1...1000, .desk, "consecutive Desk failures that open the circuit breaker")
    public let deskBreakerCooldownSeconds = Setting.integer(
        "DESK_BREAKER_COOLDOWN_S", 10, 1...3600, .desk, "how long the open breaker fails fast before one trial call")
    public let deskEmulatorPort = Setting.integer(
        "DESK_EMULATOR_PORT", 9090, 0...65535, .desk, "loopback port of the embedded emulator (without DESK_BASE_URL; 0: any)")
    public let deskEmulatorPersistent = Setting<Bool>(
        "DESK_EMULATOR_STATE", true, .desk,
        "where the embedded emulator keeps its state: `database` (survives restarts) or `memory`",
        accepts: "database or memory", defaultText: "database", format: { $0 ? "database" : "memory" }) { (text: String) throws(SettingProblem) -> Bool in
        switch text.lowercased() {
        case "database": return true
        case "memory": return false
        default: throw SettingProblem("expected database or memory")
        }
    }
    public let cacheResetOnDeskChange = Setting.flag(
        "CACHE_RESET_ON_DESK_CHANGE", false, .desk,
        "started against another Desk than the database's cache belongs to: reset the cache instead of refusing to start")

    // PostgreSQL
    public let databaseURL = Setting.optional(
        "DATABASE_URL", .database, "libpq connection string or `postgresql://` URL; unset starts a private cluster",
        accepts: "libpq URL or key=value string", required: "in production", secret: true)
    public let dbPoolSize = Setting.integer("DB_POOL_SIZE", 4, 1...256, .database, "PostgreSQL connections, each on its own thread")
    public let dbTransactionPooling = Setting.flag(
        "DB_TRANSACTION_POOLING", false, .database, "DATABASE_URL names a transaction-pooling proxy such as pgbouncer")
    public let databaseReadURL = Setting.optional(
        "DATABASE_READ_URL", .database, "a streaming replica for report reads", accepts: "libpq URL or key=value string", secret: true)
    public let dbReadPoolSize = Setting.integer("DB_READ_POOL_SIZE", 4, 1...256, .database, "connections to the read replica")
    public let reportReplicaMaxLagSeconds = Setting.integer(
        "REPORT_REPLICA_MAX_LAG_S", 30, 0...86_400, .database, "report reads leave a replica lagging more than this, for the primary")
    public let dbConnectTimeoutSeconds = Setting.integer("DB_CONNECT_TIMEOUT_S", 5, 1...300, .database, "connection attempt timeout")
    public let dbStatementTimeoutMilliseconds = Setting.integer(
        "DB_STATEMENT_TIMEOUT_MS", 5000, 10...3_600_000, .database, "`statement_timeout` of every statement; an answer not come 2 s after it closes its connection")
    public let dbAcquireTimeoutMilliseconds = Setting.integer(
        "DB_ACQUIRE_TIMEOUT_MS", 5000, 1...600_000, .database, "how long a request waits for a free connection before 503")
    public let dbStartupWaitSeconds = Setting.integer(
        "DB_STARTUP_WAIT_S", 30, 0...3600, .database, "at start-up, how long to wait for the database to accept connections")
    public let embeddedPostgresDirectory = Setting.text(
        "EMBEDDED_PG_DIR", ".data/postgres", .database, "folder of the private cluster (without DATABASE_URL)", accepts: "path")
    public let embeddedPostgresPort = Setting.integer(
        "EMBEDDED_PG_PORT", 25432, 1024...65535, .database, "loopback port of the private cluster (below the ephemeral range)")
    public let postgresBinDirectory = Setting.optional(
        "PG_BIN_DIR", .database, "where `initdb` and `pg_ctl` of the private cluster are", accepts: "path",
        defaultText: "newest /usr/lib/postgresql/*/bin")

    // HTTP server
    public let host = Setting.text("HOST", "0.0.0.0", .http, "IPv4 address to listen on", accepts: "IPv4 address", check: SettingChecks.ipv4)
    public let port = Setting.integer("PORT", 8080, 0...65535, .http, "port of the API, the report page and the ops endpoints (0: any)")
    public let httpThreads = Setting.integer("HTTP_THREADS", 2, 1...256, .http, "libmicrohttpd polling threads (one per core)")
    public let httpConnectionTimeoutSeconds = Setting.integer(
        "HTTP_CONNECTION_TIMEOUT_S", 30, 1...3600, .http, "idle connections (keep-alive included) are closed after this")
    public let httpConnectionLimit = Setting.integer(
        "HTTP_CONNECTION_LIMIT", 1024, 1...65536, .http, "concurrent connections; past it new requests get 503")
    public let httpPerAddressConnectionLimit = Setting.integer(
        "HTTP_PER_ADDRESS_CONNECTION_LIMIT", 64, 0...65536, .http,
        "concurrent connections from one client address (0: no limit); raise it behind a reverse proxy")
    public let httpRequestTimeoutSeconds = Setting.integer(
        "HTTP_REQUEST_TIMEOUT_S", 10, 1...3600, .http,
        "a request's headers and body must be complete this long after it began (at most HTTP_CONNECTION_TIMEOUT_S)")
    public let httpBodyLimitBytes = Setting.integer(
        "HTTP_BODY_LIMIT_BYTES", 1 << 20, 1024...(64 << 20), .http, "larger request bodies get 413")
    public let shutdownDrainSeconds = Setting.integer(
        "SHUTDOWN_DRAIN_S", 10, 0...600, .http, "on SIGTERM, how long in-flight requests may take before they are answered 503")
    public let adminPort = Setting.integer(
        "ADMIN_PORT", 0, 0...65535, .http,
        "a second port serving only /livez, /readyz and /metrics, which then leave the public port (0: off)")
    public let livenessStallSeconds = Setting.integer(
        "LIVENESS_STALL_S", 15, 2...3600, .http, "`/livez` fails when async work has made no progress for this long")

    // Sessions and caching
    public let sessionKey = Setting<[UInt8]?>(
        "SESSION_KEY", nil, .sessions, "32 random bytes (`openssl rand -base64 32`) sealing Desk session tokens; unset: one kept in the database",
        accepts: "base64 of 32 bytes", defaultText: "generated", required: "in production", secret: true) { (text: String) throws(SettingProblem) -> [UInt8]? in
        guard let key = Codec.decodeBase64(text), key.count == 32 else {
            throw SettingProblem("expected 32 random bytes in base64 (e.g. `openssl rand -base64 32`)")
        }
        return [UInt8](key)
    }
    public let sessionTTLSeconds = Setting.integer("SESSION_TTL_S", 86_400, 60...31_536_000, .sessions, "lifetime of a customer session")
    public let sessionCacheSeconds = Setting.integer(
        "SESSION_CACHE_S", 5, 0...300, .sessions, "how long an instance trusts a session it has seen (sign-out delay on other instances)")
    public let cacheTTLSeconds = Setting.integer(
        "CACHE_TTL_S", 15, 0...86_400, .sessions, "a cached ticket or list younger than this is served without asking Desk")

    // Rate limits and client addresses
    public let corsOrigins = Setting<[String]>(
        "CORS_ALLOWED_ORIGINS", [], .limits, "origins allowed to call from browsers (scheme and port included), or `*`",
        accepts: "comma-separated origins", defaultText: "", parse: SettingChecks.origins)
    public let trustedProxies = Setting.list(
        "TRUSTED_PROXIES", [], .limits, "reverse proxies whose `X-Forwarded-For` / `Forwarded` / `X-Forwarded-Proto` are believed",
        accepts: "comma-separated addresses or CIDRs", check: SettingChecks.cidr)
    public let rateLimitPerMinute = Setting.integer(
        "RATE_LIMIT_PER_MINUTE", 600, 1...10_000_000, .limits, "sustained requests per minute per token (or client address)")
    public let rateLimitBurst = Setting.integer("RATE_LIMIT_BURST", 120, 1...10_000_000, .limits, "requests allowed at once per token")
    public let signInPerMinute = Setting.integer(
        "SIGNIN_RATE_LIMIT_PER_MINUTE", 30, 1...10_000_000, .limits, "sign-ins per minute per client address")
    public let signInBurst = Setting.integer("SIGNIN_RATE_LIMIT_BURST", 10, 1...10_000_000, .limits, "sign-ins at once per client address")
    public let signInPerUserPerMinute = Setting.integer(
        "SIGNIN_PER_USER_PER_MINUTE", 10, 1...10_000_000, .limits, "failed sign-ins per minute per Sendbird user id and address")
    public let signInPerUserBurst = Setting.integer(
        "SIGNIN_PER_USER_BURST", 5, 1...10_000_000, .limits, "failed sign-ins at once per Sendbird user id and address")
    public let authFailuresPerMinute = Setting.integer(
        "AUTH_FAILURES_PER_MINUTE", 30, 1...10_000_000, .limits,
        "failed authentications per minute per address before unverified credentials are refused without a lookup")
    public let authFailureBurst = Setting.integer(
        "AUTH_FAILURE_BURST", 30, 1...10_000_000, .limits, "failed authentications at once per address")

    // Link previews
    public let linkPreviewAllowPrivate = Setting.flag(
        "LINK_PREVIEW_ALLOW_PRIVATE", false, .previews, "let previews fetch private, loopback and link-local addresses")
    public let linkPreviewTimeoutMilliseconds = Setting.integer(
        "LINK_PREVIEW_TIMEOUT_MS", 5000, 100...60_000, .previews, "whole-fetch deadline of a preview")
    public let linkPreviewMaxBytes = Setting.integer(
        "LINK_PREVIEW_MAX_BYTES", 512 * 1024, 1024...(16 << 20), .previews, "most of a page read for a preview")
    public let linkPreviewConcurrency = Setting.integer(
        "LINK_PREVIEW_CONCURRENCY", 4, 1...256, .previews, "previews fetched at once per instance; more get 503")

    // Reports
    public let reportTimeZones = Setting.list(
        "REPORT_TIME_ZONES", ["UTC"], .reports, "zones whose daily CSAT rollups are kept; reports in other zones read raw ratings",
        accepts: "comma-separated IANA zones", check: SettingChecks.zone)
    public let reportMaxDays = Setting.integer("REPORT_MAX_DAYS", 366, 1...3660, .reports, "longest report range")
    public let reportCacheSeconds = Setting.integer(
        "REPORT_CACHE_S", 15, 0...3600, .reports, "identical report queries are answered from memory this long (0: off)")
    public let reportCacheMaxMegabytes = Setting.integer(
        "REPORT_CACHE_MAX_MB", 32, 0...4096, .reports, "memory the cached reports may hold (`report_cache_bytes`)")
    public let reportMaxCells = Setting.integer(
        "REPORT_MAX_CELLS", 10_000, 10...1_000_000, .reports, "most rows (groups × buckets) in one report; more is 400")
    public let reportConcurrency = Setting.integer(
        "REPORT_CONCURRENCY", 2, 1...64, .reports,
        "connections reports from rollups may hold at once per instance on the primary (at most half of DB_POOL_SIZE); more wait their turn")
    public let reportRawConcurrency = Setting.integer(
        "REPORT_RAW_CONCURRENCY", 2, 1...64, .reports,
        "connections raw reports and responses listings may hold at once per instance (at most half of DB_POOL_SIZE)")
    public let reportRawConcurrencyPerKey = Setting.integer(
        "REPORT_RAW_CONCURRENCY_PER_KEY", 1, 1...64, .reports, "raw reports and listings at once per API key, API and page together")

    // Report page
    public let reportPageSessionHours = Setting.integer(
        "REPORT_PAGE_SESSION_HOURS", 8, 1...720, .reportPage, "how long a report page sign-in lasts")
    public let reportPageFrameAncestors = Setting.optional(
        "REPORT_PAGE_FRAME_ANCESTORS", .reportPage, "origins allowed to frame the page (CSP `frame-ancestors`); unset: nobody",
        accepts: "space-separated origins or 'self'", check: SettingChecks.frameAncestors)
    public let reportPageSmallSample = Setting.integer(
        "REPORT_PAGE_SMALL_SAMPLE", 10, 0...1_000_000, .reportPage, "agents and teams with fewer responses are flagged \"few\" (0: never)")
    public let reportCSATTarget = Setting<Double?>(
        "REPORT_CSAT_TARGET", nil, .reportPage, "CSAT % to reach: a goal line on the trend, \"vs target\" on agents and teams",
        accepts: "number, 0–100", defaultText: "", format: { $0.map(Setting<Double>.text) ?? "unset" }) { (text: String) throws(SettingProblem) -> Double? in
        guard let value = Double(text), value.isFinite, (0...100).contains(value) else { throw SettingProblem("expected a number from 0 to 100") }
        return value
    }
    public let reportCSATTeamTargets = Setting<[Int: Double]>(
        "REPORT_CSAT_TEAM_TARGETS", [:], .reportPage, "CSAT % targets of single teams, by team id (others use REPORT_CSAT_TARGET)",
        accepts: "comma-separated TEAM_ID=PERCENT", defaultText: "",
        format: { $0.sorted { $0.key < $1.key }.map { "\($0.key)=\(Setting<Double>.text($0.value))" }.joined(separator: ",") }) {
        (text: String) throws(SettingProblem) -> [Int: Double] in
        var targets: [Int: Double] = [:]
        for item in text.split(separator: ",") {
            let parts = item.split(separator: "=").map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let team = Int(parts[0]), team > 0, let value = Double(parts[1]), value.isFinite, (0...100).contains(value) else {
                throw SettingProblem("expected TEAM_ID=PERCENT pairs such as 12=90,15=85")
            }
            guard targets.updateValue(value, forKey: team) == nil else { throw SettingProblem("team \(team) is given twice") }
        }
        return targets
    }
    public let reportPageDeskDashboardURL = Setting.optional(
        "DESK_DASHBOARD_URL", .reportPage,
        "Desk dashboard address: ticket ids on the page link to `<url>/tickets/<id>` (or the URL with `{ticketId}` replaced); unset: no links",
        accepts: "http(s) URL", check: SettingChecks.dashboardURL)
    public let reportPageSecureCookie = Setting<Bool?>(
        "REPORT_PAGE_SECURE_COOKIE", nil, .reportPage, "`Secure` on the page's cookie: `auto` follows the request's scheme",
        accepts: "auto, true or false", defaultText: "auto", format: { $0.map { "\($0)" } ?? "auto" }) { (text: String) throws(SettingProblem) -> Bool? in
        switch text.lowercased() {
        case "auto": return nil
        case "true": return true
        case "false": return false
        default: throw SettingProblem("expected auto, true or false")
        }
    }

    // Desk sync
    public let syncIntervalSeconds = Setting.integer(
        "SYNC_INTERVAL_S", 300, 0...86_400, .sync, "seconds between Platform API syncs while running (0: off; needs DESK_API_TOKEN)")
    public let syncRequestsPerSecond = Setting.integer(
        "SYNC_REQUESTS_PER_SECOND", 5, 1...100, .sync, "Platform API requests per second a sync allows itself")
    public let syncLateRatingDays = Setting.integer(
        "SYNC_LATE_RATING_DAYS", 30, 0...3650, .sync, "CSAT requests this recent and unanswered have their tickets read again, 500 a sync in turn (late ratings)")
    public let syncFirstRunDays = Setting.integer("SYNC_FIRST_RUN_DAYS", 90, 1...3650, .sync, "how far back the first sync reads")

    // Outbox
    public let outboxMaxBackoffSeconds = Setting.integer(
        "OUTBOX_MAX_BACKOFF_S", 300, 1...86_400, .outbox, "longest wait between two delivery attempts of a queued write")
    public let outboxWarnAgeSeconds = Setting.integer(
        "OUTBOX_WARN_AGE_S", 300, 1...604_800, .outbox, "`/readyz` warns when the oldest queued write is older")
    public let outboxSignInWaitSeconds = Setting.integer(
        "OUTBOX_SIGN_IN_WAIT_S", 600, 0...86_400, .outbox,
        "how long a queued write Desk refuses for the customer's ended Desk session waits for them to sign in again (then a close, cancel or priority goes with DESK_API_TOKEN, the rest fail)")
    public let outboxRelay = Setting.flag("OUTBOX_RELAY", true, .outbox, "run the outbox relay in this instance")
    public let outboxRelayConcurrency = Setting.integer(
        "OUTBOX_RELAY_CONCURRENCY", 4, 1...64, .outbox, "queued writes of different tickets the relay sends to Desk at once")

    // Housekeeping and retention
    public let housekeepingIntervalSeconds = Setting.integer(
        "HOUSEKEEPING_INTERVAL_S", 300, 0...86_400, .retention, "seconds between housekeeping passes (0: off)")
    public let retentionDeadSessionDays = Setting.decimal(
        "RETENTION_DEAD_SESSION_DAYS", 1, 0...3650, .retention, "expired or revoked sessions are kept this long")
    public let retentionIdempotencyHours = Setting.decimal(
        "RETENTION_IDEMPOTENCY_HOURS", 24, 0.01...87_600, .retention, "idempotency keys: the replay window and how long the row is kept")
    public let retentionWebhookDays = Setting.decimal(
        "RETENTION_WEBHOOK_DAYS", 0.25, 0...3650, .retention, "applied Desk webhook events (6 hours: enough for a replay after an upgrade)")
    public let retentionUnappliedWebhookDays = Setting.decimal(
        "RETENTION_UNAPPLIED_WEBHOOK_DAYS", 90, 0...3650, .retention, "unrecognized, failed and foreign webhook events")
    public let retentionOutboxDays = Setting.decimal(
        "RETENTION_OUTBOX_DAYS", 14, 0...3650, .retention, "delivered or failed outbox operations")
    public let retentionClosedTicketDays = Setting.decimal(
        "RETENTION_CLOSED_TICKET_DAYS", 30, 0.001...3650, .retention,
        "cached tickets closed longer ago, of customers who have not listed theirs for as long")

    // Tracing (OpenTelemetry's own variable names, so a platform's injected settings apply)
    public let otelEndpoint = Setting.optional(
        "OTEL_EXPORTER_OTLP_ENDPOINT", .tracing,
        "OTLP/HTTP receiver, e.g. an OpenTelemetry Collector at `http://collector:4318`: spans go to its `/v1/traces`; unset: none exported",
        accepts: "http(s) URL", check: SettingChecks.httpURL)
    public let otelTracesEndpoint = Setting.optional(
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", .tracing, "the traces URL itself, used as given (wins over OTEL_EXPORTER_OTLP_ENDPOINT)",
        accepts: "http(s) URL", check: SettingChecks.httpURL)
    public let otelHeaders = Setting.optional(
        "OTEL_EXPORTER_OTLP_HEADERS", .tracing, "headers sent with every export, `key=value,…` (a tracing back end's API key)",
        accepts: "key=value list", secret: true)
    public let otelProtocol = Setting.text(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json", .tracing, "OTLP over HTTP with the JSON encoding, which Collectors accept; no other is spoken",
        accepts: "http/json") { $0 == "http/json" ? nil : "only http/json is spoken (point it at a Collector's OTLP/HTTP receiver)" }
    public let otelServiceName = Setting.text(
        "OTEL_SERVICE_NAME", "desk-gateway", .tracing, "`service.name` of the exported spans (tell instances apart by `service.instance.id`, the host name)")

    // Process
    public let logLevel = Setting<Logger.Level>(
        "LOG_LEVEL", .info, .process, "`info` logs one access line per request (a 2xx of /livez, /readyz or /metrics at `debug` only)",
        accepts: "trace, debug, info, notice, warning, error or critical", defaultText: "info") { (text: String) throws(SettingProblem) -> Logger.Level in
        guard let level = Logger.Level(rawValue: text.lowercased()) else {
            throw SettingProblem("expected one of trace, debug, info, notice, warning, error, critical")
        }
        return level
    }
    public let assetsDirectory = Setting.optional(
        "ASSETS_DIR", .process, "folder holding `sql/` and `openapi.yaml`", accepts: "path",
        defaultText: "working directory, the repository of a .build binary, or /usr/share/desk-gateway")

    public static let shared = GatewaySettings()

    /// The table, in declaration order.
    public static let all: [any AnySetting] = Mirror(reflecting: shared).children.compactMap { $0.value as? any AnySetting }
}
