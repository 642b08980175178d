public import API
public import DeskClient
public import HTTPServer
public import Services
import Store
public import Telemetry
import Foundation

/// Each component's settings, built from the table's values: the components have no defaults of their own for
/// anything an environment variable sets.
extension GatewayConfig {
    public var apiPolicy: APIPolicy {
        APIPolicy(corsOrigins: self.corsOrigins, rateLimitPerMinute: self.rateLimitPerMinute, rateLimitBurst: self.rateLimitBurst,
                  signInPerMinute: self.signInPerMinute, signInBurst: self.signInBurst, authFailuresPerMinute: self.authFailuresPerMinute,
                  authFailureBurst: self.authFailureBurst, trustedProxies: proxies)
    }

    public var customerAPISettings: CustomerAPISettings {
        CustomerAPISettings(freshness: TicketFreshness(cacheTTLSeconds: Double(self.cacheTTLSeconds),
                                                       staleReadBudgetSeconds: Double(self.deskStaleReadBudgetMilliseconds) / 1000),
                            sessionLifetimeSeconds: self.sessionTTLSeconds, sessionCacheSeconds: Double(self.sessionCacheSeconds),
                            signInPerUserPerMinute: self.signInPerUserPerMinute, signInPerUserBurst: self.signInPerUserBurst, trustedProxies: proxies)
    }

    /// nil unless an OTLP endpoint is configured.
    public var otlpExporterSettings: OTLPExporter.Settings? {
        guard let url = OTLPExporter.tracesURL(endpoint: self.otelEndpoint, tracesEndpoint: self.otelTracesEndpoint) else { return nil }
        // Fixed, not settings: a second's batches of at most 512 spans, 8 batches' worth waiting at most.
        return OTLPExporter.Settings(tracesURL: url, headers: OTLPExporter.parseHeaders(self.otelHeaders),
                                     resource: [("service.name", self.otelServiceName), ("service.version", gatewayVersion),
                                                ("vcs.revision", ProcessMetrics.revision),
                                                ("service.instance.id", ProcessInfo.processInfo.hostName)],
                                     queueCapacity: 4096, batchSize: 512, interval: .seconds(1), timeout: .seconds(5))
    }

    public var linkPreviewSettings: LinkPreviewSettings {
        LinkPreviewSettings(allowPrivateAddresses: self.linkPreviewAllowPrivate, maxBytes: self.linkPreviewMaxBytes,
                            timeout: .milliseconds(self.linkPreviewTimeoutMilliseconds), concurrency: self.linkPreviewConcurrency)
    }

    public var outboxSettings: OutboxSettings {
        let policy = OutboxPolicy(maxBackoffSeconds: Double(self.outboxMaxBackoffSeconds), relayConcurrency: self.outboxRelayConcurrency,
                                  signInWaitSeconds: Double(self.outboxSignInWaitSeconds))
        return OutboxSettings(policy: policy, warnAgeSeconds: Double(self.outboxWarnAgeSeconds))
    }

    /// Reports (from rollups, from raw ratings) each hold at most half the pool's connections: a burst of dashboards
    /// leaves the customers the other half.
    private func atMostHalfThePool(_ asked: Int) -> Int { min(asked, max(1, self.dbPoolSize / 2)) }

    /// Connections reports from rollups may hold at once; more wait their turn.
    public var reportConnections: Int { atMostHalfThePool(self.reportConcurrency) }

    public var reportSettings: ReportSettings {
        ReportSettings(zones: self.reportTimeZones, maxDays: self.reportMaxDays, cacheSeconds: self.reportCacheSeconds,
                       cacheMaxBytes: self.reportCacheMaxMegabytes << 20, maxCells: self.reportMaxCells,
                       rawConcurrency: atMostHalfThePool(self.reportRawConcurrency), rawConcurrencyPerKey: self.reportRawConcurrencyPerKey)
    }

    public var reportPageSettings: ReportPageSettings {
        ReportPageSettings(sessionHours: self.reportPageSessionHours, frameAncestors: self.reportPageFrameAncestors, smallSample: self.reportPageSmallSample,
                           secureCookie: self.reportPageSecureCookie, trustedProxies: proxies, zones: self.reportTimeZones,
                           deskDashboardURL: self.reportPageDeskDashboardURL, csatTarget: self.reportCSATTarget,
                           teamTargets: self.reportCSATTeamTargets)
    }

    public var syncSettings: SyncSettings {
        SyncSettings(requestsPerSecond: Double(self.syncRequestsPerSecond), lateRatingDays: self.syncLateRatingDays, firstRunDays: self.syncFirstRunDays)
    }

    public func deskClientConfiguration(baseURL: String, apiToken: String?) -> DeskClientConfiguration {
        DeskClientConfiguration(baseURL: baseURL, appId: self.deskAppId, apiToken: apiToken, requestTimeout: .milliseconds(self.deskTimeoutMilliseconds),
                                maxAnswerBytes: self.deskMaxAnswerMegabytes << 20, breakerFailureThreshold: self.deskBreakerThreshold,
                                breakerCooldown: .seconds(self.deskBreakerCooldownSeconds))
    }

    public var httpServerConfiguration: HTTPServerConfiguration {
        var server = HTTPServerConfiguration(host: self.host, port: self.port, threads: self.httpThreads, connectionTimeoutSeconds: self.httpConnectionTimeoutSeconds,
                                             connectionLimit: self.httpConnectionLimit, bodyLimitBytes: self.httpBodyLimitBytes)
        server.perAddressConnectionLimit = self.httpPerAddressConnectionLimit
        server.requestTimeoutSeconds = self.httpRequestTimeoutSeconds
        return server
    }

    private var proxies: [CIDR] { self.trustedProxies.compactMap(CIDR.init) }
}
