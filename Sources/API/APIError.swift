public import JSON
/// A client-facing failure, rendered as RFC 9457 problem+json. `code` values are stable and listed in openapi.yaml.
public struct APIError: Error, Sendable {
    public let status: Int
    public let code: String
    public let title: String
    public let detail: String
    public var headers: [(name: String, value: String)]
    /// Extra members of the problem object (e.g. `errors` for field-level validation failures).
    public var extensions: [String: JSONValue]

    public init(_ problem: Problem, detail: String, headers: [(name: String, value: String)] = [], extensions: [String: JSONValue] = [:]) {
        status = problem.status
        code = problem.rawValue
        title = problem.title
        self.detail = detail
        self.headers = headers
        self.extensions = extensions
    }

    public static func notFound(_ detail: String = "No resource exists at this path.") -> APIError {
        APIError(.notFound, detail: detail)
    }

    public static func methodNotAllowed(_ allowed: [String]) -> APIError {
        APIError(.methodNotAllowed, detail: "This path accepts \(allowed.joined(separator: ", ")).",
                 headers: [("Allow", allowed.joined(separator: ", "))])
    }

    public static func payloadTooLarge(limit: Int) -> APIError {
        APIError(.payloadTooLarge, detail: "The request body exceeds the limit of \(limit) bytes.")
    }

    public static func serviceUnavailable(_ detail: String, retryAfter: Int = 5) -> APIError {
        APIError(.serviceUnavailable, detail: detail,
                 headers: [("Retry-After", String(retryAfter))])
    }

    public static func internalError() -> APIError {
        APIError(.internalError, detail: "The gateway failed to handle this request; quote the request id when reporting it.")
    }

    public static func shuttingDown() -> APIError {
        APIError(.shuttingDown, detail: "This instance is stopping; retry the request.", headers: [("Retry-After", "1")])
    }
}
