/// How to reach Desk. Secrets are redacted from `description`.
public struct DeskClientConfiguration: Sendable, CustomStringConvertible {
    /// `https://desk-api-{appId}.sendbird.com` for real Sendbird; any URL for the emulator. No trailing slash.
    public var baseURL: String
    public var appId: String
    /// Platform API token (`SENDBIRDDESKAPITOKEN`); nil disables Platform API calls.
    public var apiToken: String?
    /// Deadline of one attempt.
    public var requestTimeout: Duration
    /// Bytes of one answer taken at most (a proxy's error page or a wrong base URL can be anything): more is 502.
    public var maxAnswerBytes: Int
    /// Consecutive failures (timeouts, connection errors, 5xx) that open the breaker.
    public var breakerFailureThreshold: Int
    /// How long an open breaker fails fast before one trial call is let through.
    public var breakerCooldown: Duration
    /// Attempts for idempotent calls (1 = no retry).
    public var maxAttempts = 3
    public var retryBaseDelay: Duration = .milliseconds(100)
    public var retryMaxDelay: Duration = .seconds(2)

    public init(baseURL: String, appId: String, apiToken: String?, requestTimeout: Duration, maxAnswerBytes: Int,
                breakerFailureThreshold: Int, breakerCooldown: Duration) {
        self.baseURL = baseURL.hasSuffix("/") ? String(baseURL.dropLast()) : baseURL
        self.appId = appId
        self.apiToken = apiToken
        self.requestTimeout = requestTimeout
        self.maxAnswerBytes = maxAnswerBytes
        self.breakerFailureThreshold = breakerFailureThreshold
        self.breakerCooldown = breakerCooldown
    }

    public var description: String {
        "DeskClientConfiguration(baseURL: \(baseURL), appId: \(appId), apiToken: \(apiToken == nil ? "none" : "<redacted>"), timeout: \(requestTimeout))"
    }
}
