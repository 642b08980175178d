import Domain
public import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import JSON
import Synchronization

extension DeskClient {
    /// One logical call: breaker check, attempts with deadlines, retries for idempotent calls, error mapping.
    func call(_ operation: String, _ method: String, _ path: String, _ credential: Credential,
              query: [(String, String)] = [], body: JSONValue? = nil, idempotent: Bool) async throws(DomainError) -> JSONValue {
        let request = try makeRequest(method, path, credential, query: query, body: body)
        let attempts = idempotent ? max(1, configuration.maxAttempts) : 1
        var lastError = DomainError(.upstreamUnavailable, "Desk is unavailable.")
        for attempt in 0..<attempts {
            if let wait = breaker.admit() {
                observe(DeskCallRecord(operation: operation, outcome: "breaker_open", seconds: 0))
                throw DomainError(.upstreamUnavailable, "Desk is unavailable; calls are paused while it recovers.",
                                  retryAfterSeconds: max(1, Int(wait.components.seconds) + 1), internalDetail: "circuit breaker open")
            }
            let started = ContinuousClock.now
            let outcome = await perform(request)
            let seconds = Self.seconds(ContinuousClock.now - started)
            switch outcome {
            case .answer(let status, let headers, let data):
                if status >= 500 {
                    breaker.recordFailure()
                    observe(DeskCallRecord(operation: operation, outcome: "server_error", seconds: seconds))
                    lastError = DomainError(.upstreamUnavailable, "Desk is unavailable.", retryAfterSeconds: Self.retryAfter(headers),
                                            internalDetail: "HTTP \(status) \(Self.detail(data))")
                } else {
                    breaker.recordSuccess()
                    if (200..<300).contains(status) {
                        observe(DeskCallRecord(operation: operation, outcome: "ok", seconds: seconds))
                        return try Self.decode(data)
                    }
                    observe(DeskCallRecord(operation: operation, outcome: "client_error", seconds: seconds))
                    let error = Self.mapClientError(status, headers: headers, data: data)
                    guard error.code == .rateLimited else { throw error }
                    lastError = error
                }
            case .timedOut:
                breaker.recordFailure()
                observe(DeskCallRecord(operation: operation, outcome: "timeout", seconds: seconds))
                lastError = DomainError(.upstreamUnavailable, "Desk did not answer in time.", internalDetail: "timeout after \(configuration.requestTimeout)")
            case .unreachable(let reason):
                breaker.recordFailure()
                observe(DeskCallRecord(operation: operation, outcome: "unreachable", seconds: seconds))
                lastError = DomainError(.upstreamUnavailable, "Desk is unreachable.", internalDetail: reason)
            case .abandoned:
                observe(DeskCallRecord(operation: operation, outcome: "abandoned", seconds: seconds))
                throw DomainError(.upstreamUnavailable, "The call to Desk was abandoned.", internalDetail: "cancelled by the caller")
            }
            guard attempt + 1 < attempts else { break }
            try? await Task.sleep(for: backoff(attempt: attempt, retryAfter: lastError.retryAfterSeconds))
        }
        throw lastError
    }

    /// Full jitter: a random delay up to base·2^attempt (capped); a short `Retry-After` wins when Desk sends one.
    func backoff(attempt: Int, retryAfter: Int?) -> Duration {
        if let retryAfter, retryAfter <= 5 { return .seconds(retryAfter) }
        let ceiling = min(Self.seconds(configuration.retryMaxDelay), Self.seconds(configuration.retryBaseDelay) * pow(2, Double(attempt)))
        return .milliseconds(Int(Double.random(in: 0...ceiling) * 1000))
    }

    enum Outcome {
        case answer(status: Int, headers: [AnyHashable: Any], data: Data)
        case timedOut
        case unreachable(String)
        /// The caller stopped waiting (its own deadline, a shutdown): says nothing about Desk's health.
        case abandoned
    }

    func perform(_ request: URLRequest) async -> Outcome {
        do {
            let (data, response) = try await sessionData(for: request)
            guard let http = response as? HTTPURLResponse else { return .unreachable("not an HTTP response") }
            return .answer(status: http.statusCode, headers: http.allHeaderFields, data: data)
        } catch let error as URLError where error.code == .timedOut {
            return .timedOut
        } catch is CancellationError {
            return .abandoned
        } catch {
            return .unreachable(String(describing: type(of: error)) + " " + ((error as? URLError)?.code.rawValue.description ?? ""))
        }
    }

    func makeRequest(_ method: String, _ path: String, _ credential: Credential, query: [(String, String)],
                     body: JSONValue?) throws(DomainError) -> URLRequest {
        var text = configuration.baseURL + path
        if !query.isEmpty {
            text += "?" + query.map { "\(Self.percentEncode($0.0))=\(Self.percentEncode($0.1))" }.joined(separator: "&")
        }
        guard let url = URL(string: text) else {
            throw DomainError(.upstreamProtocol, "The Desk base URL is not valid.", internalDetail: "bad URL for \(path)")
        }
        var request = URLRequest(url: url, timeoutInterval: Self.seconds(configuration.requestTimeout))
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        switch credential {
        case .customerAuth(let accessToken):
            request.setValue(accessToken, forHTTPHeaderField: "sendbirdAccessToken")
        case .customer(let session):
            request.setValue(session.token, forHTTPHeaderField: "sendbirdDeskToken")
        case .platform:
            guard let token = configuration.apiToken else {
                throw DomainError(.upstreamUnavailable, "The Desk Platform API is not configured.", internalDetail: "DESK_API_TOKEN unset")
            }
            request.setValue(token, forHTTPHeaderField: "SENDBIRDDESKAPITOKEN")
        }
        if let body { request.httpBody = Data(body.bytes()) }
        return request
    }

    static func decode(_ data: Data) throws(DomainError) -> JSONValue {
        if data.isEmpty { return .object([]) }
        do { return try JSONParser.parse([UInt8](data)) } catch { throw DeskDecoding.failure("answer is not JSON: \(error)") }
    }

    /// Desk's 4xx → domain errors. Desk reports state conflicts as 400 with a state code (`desk400200` in the
    /// emulator), or 409; other 400s are invalid values.
    static func mapClientError(_ status: Int, headers: [AnyHashable: Any], data: Data) -> DomainError {
        let detail = detail(data)
        let code = (try? JSONParser.parse([UInt8](data)))?["code"]?.stringValue ?? ""
        switch status {
        case 401, 403:
            return DomainError(.unauthorized, "Desk refused the credentials.", internalDetail: detail)
        case 404:
            return DomainError(.notFound, "Desk has no such resource.", internalDetail: detail)
        case 409:
            return DomainError(.conflict, "The ticket's state does not allow this.", internalDetail: detail)
        case 429:
            return DomainError(.rateLimited, "Desk is rate limiting requests.", retryAfterSeconds: retryAfter(headers) ?? 1, internalDetail: detail)
        case 400 where code == "desk400200":
            return DomainError(.conflict, "The ticket's state does not allow this.", internalDetail: detail)
        default:
            return DomainError(.invalid, "Desk refused a value of the request.", internalDetail: detail)
        }
    }

    static func detail(_ data: Data) -> String {
        guard let json = try? JSONParser.parse([UInt8](data)) else { return "(\(data.count) bytes, not JSON)" }
        let detail = json["detail"]?.stringValue ?? json["message"]?.stringValue ?? ""
        let code = json["code"]?.stringValue ?? ""
        return code.isEmpty ? detail : "\(code): \(detail)"
    }

    /// Longest wait a rate-limit hint may ask for.
    public static let maxRetryAfterSeconds = 300

    /// Desk's hint of when to try again: `Retry-After` (seconds or an HTTP date), Sendbird's `X-RateLimit-RetryAfter`
    /// (seconds, or a Unix timestamp in seconds or milliseconds) or `X-RateLimit-Reset` (a Unix timestamp, or
    /// seconds when small); capped at `maxRetryAfterSeconds`.
    public static func retryAfter(_ headers: [AnyHashable: Any], now: Double = Date().timeIntervalSince1970) -> Int? {
        var values: [String: String] = [:]
        for (key, value) in headers {
            if let key = key as? String, let value = value as? String { values[key.lowercased()] = value.trimmingCharacters(in: .whitespaces) }
        }
        for name in ["retry-after", "x-ratelimit-retryafter", "x-ratelimit-reset"] {
            guard let text = values[name], !text.isEmpty else { continue }
            var seconds: Double?
            if let number = Double(text) {
                // A small number is a delay; a large one a timestamp (milliseconds past 1e11).
                let stamp = number > 1e11 ? number / 1000 : number
                seconds = number < 1e8 ? number : stamp - now
            } else if name == "retry-after", let date = httpDate().date(from: text) {
                seconds = date.timeIntervalSince1970 - now
            }
            if let seconds { return min(maxRetryAfterSeconds, max(0, Int(seconds.rounded(.up)))) }
        }
        return nil
    }

    /// A fresh formatter each time (only rate-limit answers with a date need one).
    static func httpDate() -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        return formatter
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// URLSession's own timeout is not reliable below a second on Linux: the deadline is enforced here (one shared
    /// race, `withDeadline`): whichever comes first resumes the caller; a late transfer is cancelled, not awaited.
    private func sessionData(for request: URLRequest) async throws -> (Data, URLResponse) {
        let session = sessionForRequests
        guard let answer = try await withDeadline(configuration.requestTimeout, { try await Self.transfer(request, on: session) }) else {
            throw URLError(.timedOut)
        }
        return answer
    }

    /// One transfer; cancelling the calling task cancels it.
    private static func transfer(_ request: URLRequest, on session: URLSession) async throws -> (Data, URLResponse) {
        let holder = TransferHolder()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                let task = session.dataTask(with: request) { data, response, error in
                    if let error { continuation.resume(throwing: error); return }
                    guard let response else { continuation.resume(throwing: URLError(.badServerResponse)); return }
                    continuation.resume(returning: (data ?? Data(), response))
                }
                holder.set(task)
                task.resume()
            }
        } onCancel: {
            holder.cancel()
        }
    }
}

/// The transfer a cancellation must reach, even when the cancellation comes before the transfer exists.
final class TransferHolder: Sendable {
    private let state = Mutex<(task: URLSessionDataTask?, cancelled: Bool)>((nil, false))

    func set(_ task: URLSessionDataTask) {
        if state.withLock({ state -> Bool in state.task = task; return state.cancelled }) { task.cancel() }
    }

    func cancel() {
        state.withLock { state -> URLSessionDataTask? in
            state.cancelled = true
            return state.task
        }?.cancel()
    }
}
