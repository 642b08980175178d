public import Domain
public import HTTPServer
public import Logging
public import Services
import JSON

/// The single place where errors become responses. Anything unknown is a 500 whose detail goes only to the log.
public struct ProblemMapper: Sendable {
    let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    public func response(for error: any Error, request: HTTPRequest, info: RequestInfo) -> HTTPResponse {
        apiError(for: error, info: info).response(instance: request.path, requestID: info.id)
    }

    func apiError(for error: any Error, info: RequestInfo) -> APIError {
        switch error {
        case let error as APIError:
            return error
        case let error as DomainError:
            if error.code == .storeUnavailable || error.code == .storeTimeout {
                logger.warning("database unavailable", metadata: ["request_id": "\(info.id)", "trace_id": "\(info.trace?.traceID ?? "")", "error": "\(error.internalDetail ?? "")"])
            } else if error.code == .storeFailure {
                logger.error("database error", metadata: ["request_id": "\(info.id)", "trace_id": "\(info.trace?.traceID ?? "")", "route": "\(info.route)",
                                                          "error": "\(error.internalDetail ?? "")"])
            } else if let detail = error.internalDetail {
                logger.notice("upstream refused", metadata: ["request_id": "\(info.id)", "trace_id": "\(info.trace?.traceID ?? "")", "code": "\(error.code)", "detail": "\(detail)"])
            }
            return Self.map(error)
        case let refusal as ReportRefusal:
            return Self.map(refusal)
        default:
            logger.error("unhandled error", metadata: ["request_id": "\(info.id)", "trace_id": "\(info.trace?.traceID ?? "")", "route": "\(info.route)", "error": "\(error)"])
            return .internalError()
        }
    }

    /// What a failure below the API means to a client.
    public static func map(_ error: DomainError) -> APIError {
        switch error.code {
        case .notFound:
            return APIError(.notFound, detail: error.message)
        case .conflict:
            return APIError(.ticketStateConflict, detail: error.message,
                            extensions: error.ticketStatus.map { ["ticketStatus": .string($0.rawValue)] } ?? [:])
        case .invalid:
            return APIError(.deskRejected, detail: error.message)
        case .unauthorized:
            return APIError(.deskSessionExpired, detail: "Desk no longer accepts this session; sign in again.",
                            headers: [("WWW-Authenticate", #"Bearer realm="desk-gateway""#)])
        case .forbidden:
            return APIError(.forbidden, detail: error.message)
        case .rateLimited, .upstreamUnavailable:
            // The client decides whether to retry: it is told when Desk may have made the change all the same.
            let detail = error.mayHaveTakenEffect
                ? "Sendbird Desk did not confirm the change, which it may have made; retry later with the same Idempotency-Key."
                : "Sendbird Desk is not answering right now; retry later."
            return APIError(.deskUnavailable, detail: detail, headers: [("Retry-After", String(error.retryAfterSeconds ?? 5))])
        case .upstreamPending:
            return APIError(.deskUnavailable,
                            detail: "Sendbird Desk may still be making the change an earlier attempt asked for; retry after Retry-After with the same Idempotency-Key.",
                            headers: [("Retry-After", String(error.retryAfterSeconds ?? 5))])
        case .storeUnavailable:
            return .serviceUnavailable("The database is unavailable; retry shortly.")
        case .storeTimeout:
            return .serviceUnavailable("The database took too long; retry shortly.", retryAfter: error.retryAfterSeconds ?? 2)
        case .storeFailure, .unreadablePayload:
            return .internalError()
        default:
            return APIError(.badGateway, detail: error.mayHaveTakenEffect
                ? "Sendbird Desk answered in a way the gateway did not understand, after a change it may have made; retry later with the same Idempotency-Key."
                : "Sendbird Desk answered in a way the gateway did not understand.")
        }
    }

    /// A report the service would not compute.
    public static func map(_ refusal: ReportRefusal) -> APIError {
        switch refusal {
        case .tooLarge(let detail): return APIError(.reportTooLarge, detail: detail)
        case .timeout(let detail): return APIError(.reportTimeout, detail: detail, headers: [("Retry-After", "5")])
        case .keyBusy(let detail): return APIError(.rateLimited, detail: detail, headers: [("Retry-After", "2")])
        case .instanceBusy(let detail): return APIError(.reportsBusy, detail: detail, headers: [("Retry-After", "2")])
        case .otherTeam(let detail): return APIError(.forbidden, detail: detail)
        case .badCursor(let detail): return APIError(.invalidQuery, detail: detail)
        }
    }
}
