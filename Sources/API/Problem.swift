/// Every problem the API answers with: its stable `code` (listed in openapi.yaml), HTTP status and title, in one
/// place. Every error response is built from one of these.
public enum Problem: String, CaseIterable, Sendable {
    case malformedJSON = "malformed_json"
    case malformedRequest = "malformed_request"
    case invalidQuery = "invalid_query"
    case invalidIdempotencyKey = "invalid_idempotency_key"
    case unauthorized = "unauthorized"
    case invalidCredentials = "invalid_credentials"
    case deskSessionExpired = "desk_session_expired"
    case invalidSignature = "invalid_signature"
    case forbidden = "forbidden"
    case notFound = "not_found"
    case methodNotAllowed = "method_not_allowed"
    case ticketStateConflict = "ticket_state_conflict"
    case idempotencyInProgress = "idempotency_in_progress"
    case payloadTooLarge = "payload_too_large"
    case unsupportedMediaType = "unsupported_media_type"
    case validationFailed = "validation_failed"
    case deskRejected = "desk_rejected"
    case urlNotAllowed = "url_not_allowed"
    case previewUnavailable = "preview_unavailable"
    case idempotencyKeyReused = "idempotency_key_reused"
    case rateLimited = "rate_limited"
    case internalError = "internal_error"
    case badGateway = "bad_gateway"
    case previewFetchFailed = "preview_fetch_failed"
    case deskUnavailable = "desk_unavailable"
    case serviceUnavailable = "service_unavailable"
    case previewsBusy = "previews_busy"
    case shuttingDown = "shutting_down"
    case webhooksNotConfigured = "webhooks_not_configured"
    case reportTooLarge = "report_too_large"
    case reportsBusy = "reports_busy"
    case reportTimeout = "report_timeout"
    /// Answered below the gateway, by libmicrohttpd through CMicroHTTPDFixes/errors.c (same title there): the
    /// request is never routed.
    case uriTooLong = "uri_too_long"
    case headersTooLarge = "headers_too_large"
    case httpVersionNotSupported = "http_version_not_supported"

    public var status: Int { entry.status }
    public var title: String { entry.title }

    private var entry: (status: Int, title: String) {
        switch self {
        case .malformedJSON: (400, "Malformed JSON")
        case .malformedRequest: (400, "Malformed request")
        case .invalidQuery: (400, "Invalid query")
        case .invalidIdempotencyKey: (400, "Invalid Idempotency-Key")
        case .unauthorized: (401, "Unauthorized")
        case .invalidCredentials: (401, "Invalid credentials")
        case .deskSessionExpired: (401, "Desk session expired")
        case .invalidSignature: (401, "Invalid signature")
        case .forbidden: (403, "Forbidden")
        case .notFound: (404, "Not found")
        case .methodNotAllowed: (405, "Method not allowed")
        case .ticketStateConflict: (409, "Not allowed in the ticket's state")
        case .idempotencyInProgress: (409, "Request in progress")
        case .payloadTooLarge: (413, "Request body too large")
        case .unsupportedMediaType: (415, "Unsupported media type")
        case .validationFailed: (422, "Invalid request")
        case .deskRejected: (422, "Desk refused the request")
        case .urlNotAllowed: (422, "URL not allowed")
        case .previewUnavailable: (422, "No preview")
        case .idempotencyKeyReused: (422, "Idempotency-Key reused")
        case .rateLimited: (429, "Too many requests")
        case .internalError: (500, "Internal server error")
        case .badGateway: (502, "Bad gateway")
        case .previewFetchFailed: (502, "Page could not be fetched")
        case .deskUnavailable: (503, "Desk unavailable")
        case .serviceUnavailable: (503, "Service unavailable")
        case .previewsBusy: (503, "Too many previews")
        case .shuttingDown: (503, "Shutting down")
        case .webhooksNotConfigured: (503, "Webhooks not configured")
        case .reportTooLarge: (400, "Report too large")
        case .reportsBusy: (503, "Too many reports")
        case .reportTimeout: (503, "Report took too long")
        case .uriTooLong: (414, "Request target too long")
        case .headersTooLarge: (431, "Request header fields too large")
        case .httpVersionNotSupported: (505, "HTTP version not supported")
        }
    }
}
