/// What the application answers for a request: a response computed on the spot (cheap, CPU-only work runs on
/// the libmicrohttpd thread), or async work; the server then suspends the connection and resumes it when the work ends.
public enum HTTPReply: Sendable {
    case now(HTTPResponse)
    case later(@Sendable () async -> HTTPResponse)
}

/// The application side of the server. Called on libmicrohttpd threads: `respond` must not block.
public protocol HTTPResponder: Sendable {
    func respond(to request: HTTPRequest) -> HTTPReply
    /// The server's call: the request is lent in place, so a responder that fills in what routing found (its path
    /// parameters) needs no copy of it. By default `respond(to:)`.
    func respond(inPlace request: inout HTTPRequest) -> HTTPReply
    /// The answer when the body exceeds the server's limit (the request is never routed).
    func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse
    /// The answer for a request still suspended when the drain deadline passes during shutdown.
    func shuttingDown(_ request: HTTPRequest) -> HTTPResponse
    /// The answer for a request refused before routing (NUL bytes, ambiguous framing); the connection is closed.
    func badRequest(_ request: HTTPRequest, reason: String) -> HTTPResponse
    /// The answer when the server holds more connections than its limit (the connection is closed after it).
    func overloaded(_ request: HTTPRequest) -> HTTPResponse
}

extension HTTPResponder {
    public func respond(inPlace request: inout HTTPRequest) -> HTTPReply {
        respond(to: request)
    }

    public func overloaded(_ request: HTTPRequest) -> HTTPResponse {
        HTTPResponse(status: 503, headers: [("Content-Type", "text/plain"), ("Retry-After", "1")], body: Array("Too many connections.".utf8))
    }

    public func badRequest(_ request: HTTPRequest, reason: String) -> HTTPResponse {
        HTTPResponse(status: 400, headers: [("Content-Type", "text/plain")], body: Array(reason.utf8))
    }
}
