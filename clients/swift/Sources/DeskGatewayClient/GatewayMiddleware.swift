import Foundation
import HTTPTypes
import OpenAPIRuntime

/// A problem+json answer of the gateway (or a client-side failure: `network_error`, `operation_failed`,
/// `operation_pending`), typed by its stable code.
public struct DeskGatewayError: Error, Sendable, CustomStringConvertible {
    /// HTTP status; 0 when no answer came.
    public let status: Int
    /// The problem's `code` as sent.
    public let code: String
    public let title: String
    public let detail: String
    /// Seconds, from `Retry-After`.
    public let retryAfter: Int?
    /// `X-Request-ID`: quote it when reporting a problem.
    public let requestId: String?
    /// The ticket's status on a 409 `ticket_state_conflict`, when the gateway knows it.
    public let ticketStatus: String?
    /// Field problems of a 422 `validation_failed`.
    public let fieldErrors: [FieldError]

    public struct FieldError: Sendable, Decodable, Equatable {
        public let field: String
        public let message: String
    }

    /// The code as the OpenAPI document's enum (nil for client-side codes).
    public var problem: ProblemCode? { ProblemCode(rawValue: code) }

    public var description: String { "\(status) \(code): \(detail.isEmpty ? title : detail)" }

    init(client code: String, detail: String, status: Int = 0) {
        (self.status, self.code, title, self.detail, retryAfter, requestId, ticketStatus, fieldErrors) = (status, code, code, detail, nil, nil, nil, [])
    }

    init(response: HTTPResponse, body: Data) {
        struct Document: Decodable {
            var code: String?
            var title: String?
            var detail: String?
            var ticketStatus: String?
            var errors: [FieldError]?
        }
        let document = (try? JSONDecoder().decode(Document.self, from: body)) ?? Document()
        status = response.status.code
        code = document.code ?? "http_\(response.status.code)"
        title = document.title ?? response.status.reasonPhrase
        detail = document.detail ?? ""
        retryAfter = response.headerFields[.retryAfter].flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        requestId = response.headerFields[.requestID]
        ticketStatus = document.ticketStatus
        fieldErrors = document.errors ?? []
    }
}

extension HTTPField.Name {
    static let requestID = Self("X-Request-ID")!
    static let idempotencyKey = Self("Idempotency-Key")!
}

/// The session token and the ETags of the tickets read, shared by the middleware and the façade.
final class GatewayState: @unchecked Sendable {
    private let lock = NSLock()
    private var currentToken: String?
    private var copies: [String: (etag: String?, ticket: Ticket?)] = [:]

    init(token: String?) { currentToken = token }

    var token: String? {
        get { lock.withLock { currentToken } }
        set { lock.withLock { currentToken = newValue } }
    }

    func signedOut() { lock.withLock { currentToken = nil; copies = [:] } }
    func etag(at path: String) -> String? { lock.withLock { copies[path]?.ticket == nil ? nil : copies[path]?.etag } }
    func setETag(_ etag: String, at path: String) { lock.withLock { copies[path, default: (nil, nil)].etag = etag } }
    func remember(_ ticket: Ticket, at path: String) { lock.withLock { copies[path, default: (nil, nil)].ticket = ticket } }
    func ticket(at path: String) -> Ticket? { lock.withLock { copies[path]?.ticket } }
    func forget(_ path: String) { _ = lock.withLock { copies.removeValue(forKey: path) } }
}

/// Bearer token, If-None-Match, problem+json as `DeskGatewayError`, `Retry-After` waits and the re-authentication
/// hook, for every generated call.
struct GatewayMiddleware: ClientMiddleware {
    let state: GatewayState
    let maxRetries: Int
    let maxRetryDelay: Duration
    let onSessionExpired: (@Sendable (DeskGatewayError) async -> String?)?

    static let cachedReads: Set<String> = ["getTicket", "getTicketByChannel"]

    /// Request fields the document marks required and nullable: the generated types leave a nil one out of the body
    /// (swift-openapi-generator encodes optionals only when present), where the gateway needs an explicit null — a
    /// decline is `"score": null`.
    static let requiredNullable: [String: [String]] = ["submitFeedback": ["score", "comment"]]

    /// The body with `fields` set to null where they are missing; nil when none is (the body goes as it is).
    static func withNulls(_ body: Data, for fields: [String]) -> Data? {
        guard var object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else { return nil }
        let missing = fields.filter { object[$0] == nil }
        guard !missing.isEmpty else { return nil }
        for field in missing { object[field] = NSNull() }
        return try? JSONSerialization.data(withJSONObject: object)
    }

    func intercept(_ request: HTTPRequest, body: HTTPBody?, baseURL: URL, operationID: String,
                   next: @Sendable (HTTPRequest, HTTPBody?, URL) async throws -> (HTTPResponse, HTTPBody?)) async throws -> (HTTPResponse, HTTPBody?) {
        var request = request
        // Buffered once, so that every attempt sends the same bytes (and the same Idempotency-Key).
        var bytes: Data? = if let body { try await Data(collecting: body, upTo: 4 << 20) } else { nil }
        if let fields = Self.requiredNullable[operationID], let sent = bytes, let filled = Self.withNulls(sent, for: fields) {
            bytes = filled
            request.headerFields[.contentLength] = "\(filled.count)"
        }
        let path = request.path ?? ""
        let idempotent = request.method == .get || request.headerFields[.idempotencyKey] != nil
        var renewed = false
        var attempt = 0
        while true {
            try Task.checkCancellation()
            if let token = state.token { request.headerFields[.authorization] = "Bearer \(token)" }
            if Self.cachedReads.contains(operationID), let etag = state.etag(at: path) { request.headerFields[.ifNoneMatch] = etag }
            let (response, responseBody) = try await next(request, bytes.map { HTTPBody($0) }, baseURL)
            if response.status.code < 400 {
                if Self.cachedReads.contains(operationID), response.status.code == 200, let etag = response.headerFields[.eTag] {
                    state.setETag(etag, at: path)
                }
                return (response, responseBody)
            }
            let data = if let responseBody { try await Data(collecting: responseBody, upTo: 1 << 20) } else { Data() }
            let error = DeskGatewayError(response: response, body: data)
            if error.status == 401, error.problem == .unauthorized || error.problem == .deskSessionExpired,
               // Not for signing in or out: a sign-out renewed first would end the new session instead.
               !["createSession", "deleteCurrentSession"].contains(operationID), !renewed, request.headerFields[.authorization] != nil,
               let onSessionExpired {
                renewed = true
                if let token = await onSessionExpired(error) {
                    state.token = token
                    continue
                }
            }
            if error.status == 429 || (error.status == 503 && idempotent), attempt < maxRetries, let seconds = error.retryAfter {
                attempt += 1
                // Never sooner than a second, never longer than the limit, whatever the hint says.
                try await Task.sleep(for: min(maxRetryDelay, .seconds(max(1, seconds))))
                continue
            }
            throw error
        }
    }
}
