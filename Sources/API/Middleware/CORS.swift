public import HTTPServer

/// Browser access. Preflights are answered here; every answer (preflights included) gets its CORS headers in one
/// place, `decorate`, which replaces any it finds, so no header is ever sent twice (browsers refuse a doubled
/// `Access-Control-Allow-Origin`). No `Access-Control-Allow-Credentials`: the API authenticates with bearer tokens
/// and API keys, never cookies, so a page never needs to send credentials.
public struct CORS: Sendable {
    /// Origins allowed to call from browsers; `*` allows any.
    let origins: Set<String>
    let anyOrigin: Bool

    /// The methods the API's routes answer.
    static let allowMethods = "GET, POST, PUT, PATCH, DELETE"
    /// The request headers the API reads.
    static let allowHeaders = "Authorization, Content-Type, Idempotency-Key, If-None-Match, X-API-Key, X-Request-ID, traceparent, tracestate"
    /// What a frontend needs to read from an answer.
    static let exposeHeaders = "ETag, Location, Retry-After, X-Request-ID, X-Cache, RateLimit, RateLimit-Limit, "
        + "RateLimit-Remaining, RateLimit-Reset, Idempotent-Replayed"
    static let maxAgeSeconds = "600"

    public init(origins: [String]) {
        self.origins = Set(origins.filter { $0 != "*" }.map { Self.canonicalOrigin($0) ?? $0 })
        anyOrigin = origins.contains("*")
    }

    /// An origin as browsers send it in `Origin` (RFC 6454 §6.2): scheme and host in small letters, the port only when
    /// it is not the scheme's default. `Origin` is compared as text, so a configured `https://App.example.com:443`
    /// would otherwise never match. Nil for anything else than `scheme://host[:port]` (a path, even `/`, included).
    public static func canonicalOrigin(_ text: String) -> String? {
        guard let separator = text.firstRange(of: "://") else { return nil }
        let scheme = text[..<separator.lowerBound].lowercased()
        let authority = text[separator.upperBound...].lowercased()
        guard let first = scheme.unicodeScalars.first, ("a"..."z").contains(first),
              scheme.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || "+-.".unicodeScalars.contains($0) }),
              !authority.isEmpty, authority.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 32 && !"/?#@\\".unicodeScalars.contains($0) })
        else { return nil }
        var host = authority[...], port: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return nil }
            host = authority[...close]
            let rest = authority[authority.index(after: close)...]
            if !rest.isEmpty {
                guard rest.hasPrefix(":") else { return nil }
                port = rest.dropFirst()
            }
        } else if let colon = authority.firstIndex(of: ":") {
            host = authority[..<colon]
            port = authority[authority.index(after: colon)...]
        }
        guard !host.isEmpty, host != "[]" else { return nil }
        guard let port else { return "\(scheme)://\(host)" }
        guard !port.isEmpty, port.count <= 5, port.utf8.allSatisfy({ (48...57).contains($0) }), let number = Int(port), (1...65535).contains(number) else { return nil }
        let isDefault = (scheme == "http" || scheme == "ws") && number == 80 || (scheme == "https" || scheme == "wss") && number == 443
        return isDefault ? "\(scheme)://\(host)" : "\(scheme)://\(host):\(number)"
    }

    var enabled: Bool { anyOrigin || !origins.isEmpty }

    public func isPreflight(_ request: HTTPRequest) -> Bool {
        request.method == "OPTIONS" && request.header("access-control-request-method") != nil
    }

    /// The `Access-Control-Allow-Origin` value for this request, if its origin may read the answer.
    func allowedOrigin(_ request: HTTPRequest) -> String? {
        guard enabled, let origin = request.header("origin") else { return nil }
        if anyOrigin { return "*" }
        return origins.contains(origin) ? origin : nil
    }

    /// The preflight's own answer: an empty 204; `decorate` (run on every answer) gives it its CORS headers.
    public func preflight(_ request: HTTPRequest) -> HTTPResponse {
        HTTPResponse(status: 204)
    }

    public func decorate(_ response: inout HTTPResponse, for request: HTTPRequest) {
        guard enabled else { return }
        // Every CORS header is set here alone, replacing any already there.
        response.headers.removeAll { HTTPResponse.hasPrefix($0.name, "access-control-") }
        // With a list of origins the answer depends on Origin, for any request, allowed or not.
        if !anyOrigin { Self.addVaryOrigin(&response) }
        guard let allowed = allowedOrigin(request) else { return }
        response.headers.append(("Access-Control-Allow-Origin", allowed))
        if isPreflight(request) {
            response.headers.append(("Access-Control-Allow-Methods", Self.allowMethods))
            response.headers.append(("Access-Control-Allow-Headers", Self.allowHeaders))
            response.headers.append(("Access-Control-Max-Age", Self.maxAgeSeconds))
        } else {
            response.headers.append(("Access-Control-Expose-Headers", Self.exposeHeaders))
        }
    }

    /// One `Vary` header, with `Origin` in it once.
    static func addVaryOrigin(_ response: inout HTTPResponse) {
        guard let index = response.headers.firstIndex(where: { HTTPResponse.sameName($0.name, "vary") }) else {
            response.headers.append(("Vary", "Origin"))
            return
        }
        let listed = response.headers[index].value.split(separator: ",").contains {
            HTTPResponse.sameName(String($0.filter { $0 != " " && $0 != "\t" }), "origin")
        }
        if !listed { response.headers[index].value += ", Origin" }
    }
}
