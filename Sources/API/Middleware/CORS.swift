public import HTTPServer

/// Browser access: preflights answered here, and the allowed origin echoed on every answer to it.
public struct CORS: Sendable {
    /// Origins allowed to call from browsers; `*` allows any.
    let origins: [String]

    public init(origins: [String]) {
        self.origins = origins
    }

    public func isPreflight(_ request: HTTPRequest) -> Bool {
        request.method == "OPTIONS" && request.header("access-control-request-method") != nil
    }

    func allowedOrigin(_ request: HTTPRequest) -> String? {
        guard let origin = request.header("origin"), !origins.isEmpty else { return nil }
        if origins.contains("*") || origins.contains(origin) { return origin }
        return nil
    }

    public func preflight(_ request: HTTPRequest) -> HTTPResponse {
        guard let origin = allowedOrigin(request) else { return HTTPResponse(status: 204, headers: [("Vary", "Origin")]) }
        return HTTPResponse(status: 204, headers: [
            ("Access-Control-Allow-Origin", origin), ("Vary", "Origin"),
            ("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE, OPTIONS"),
            ("Access-Control-Allow-Headers", "Authorization, Content-Type, Idempotency-Key, If-None-Match, X-Request-ID"),
            ("Access-Control-Max-Age", "600"),
        ])
    }

    public func decorate(_ response: inout HTTPResponse, for request: HTTPRequest) {
        guard let origin = allowedOrigin(request) else { return }
        response.headers.append(("Access-Control-Allow-Origin", origin))
        response.headers.append(("Vary", "Origin"))
        response.headers.append(("Access-Control-Expose-Headers",
                                 "ETag, X-Request-ID, X-Cache, Retry-After, Location, RateLimit, RateLimit-Limit, RateLimit-Remaining, RateLimit-Reset, Idempotent-Replayed"))
    }
}
