public import Domain
import Foundation
import CurlHTTP
import JSON
import Synchronization

extension DeskClient {
    /// One logical call: breaker check, attempts with deadlines, retries for idempotent calls, error mapping.
    func call(_ operation: String, _ method: String, _ path: String, _ credential: Credential,
              query: [(String, String)] = [], body: JSONValue? = nil, idempotent: Bool) async throws(DomainError) -> JSONValue {
        // One client span per logical call (its attempts share it), child of the request's span.
        let span = TraceContext.current?.child()
        let request = try makeRequest(method, path, credential, query: query, body: body, span: span)
        let startedAt = spans == nil ? 0 : Span.now()
        var last = "unknown"
        defer {
            if let span, let spans {
                spans.record(Span(context: span, name: "desk \(operation)", kind: .client, startNanos: startedAt, endNanos: Span.now(),
                                  attributes: [("http.request.method", .string(method)), ("url.path", .string(path)),
                                               ("desk.operation", .string(operation)), ("desk.outcome", .string(last))],
                                  failed: last != "ok"))
            }
        }
        let observe: (DeskCallRecord) -> Void = { record in
            last = record.outcome
            self.observe(record)
        }
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
            let seconds = (ContinuousClock.now - started).inSeconds
            let judged: Result<JSONValue, DomainError>
            do throws(DomainError) {
                judged = try judge(outcome, operation: operation, seconds: seconds, observe: observe)
            } catch {
                throw idempotent ? error : Self.marked(error, after: outcome)
            }
            switch judged {
            case .success(let answer): return answer
            case .failure(let error): lastError = idempotent ? error : Self.marked(error, after: outcome)
            }
            guard attempt + 1 < attempts else { break }
            try? await Task.sleep(for: backoff(attempt: attempt, retryAfter: lastError.retryAfterSeconds))
        }
        throw lastError
    }

    /// What one attempt's outcome means: Desk's answer, an error worth another attempt, or (thrown) one that is not.
    private func judge(_ outcome: Outcome, operation: String, seconds: Double,
                       observe: (DeskCallRecord) -> Void) throws(DomainError) -> Result<JSONValue, DomainError> {
        switch outcome {
        case .answer(let status, let headers, let data):
            if status >= 500 {
                breaker.recordFailure()
                observe(DeskCallRecord(operation: operation, outcome: "server_error", seconds: seconds))
                return .failure(DomainError(.upstreamUnavailable, "Desk is unavailable.", retryAfterSeconds: Self.retryAfter(headers),
                                            internalDetail: "HTTP \(status) \(Self.detail(data))"))
            } else {
                breaker.recordSuccess()
                if (200..<300).contains(status) {
                    let answer: JSONValue
                    do throws(DomainError) {
                        answer = try Self.decode(data)
                    } catch {
                        observe(DeskCallRecord(operation: operation, outcome: "unreadable", seconds: seconds))
                        throw error
                    }
                    observe(DeskCallRecord(operation: operation, outcome: "ok", seconds: seconds))
                    return .success(answer)
                }
                let error = Self.mapClientError(status, headers: headers, data: data)
                observe(DeskCallRecord(operation: operation, outcome: error.code == .rateLimited ? "rate_limited" : "client_error",
                                       seconds: seconds))
                guard error.code == .rateLimited else { throw error }
                countRateLimited()
                return .failure(error)
            }
        case .timedOut:
            breaker.recordFailure()
            observe(DeskCallRecord(operation: operation, outcome: "timeout", seconds: seconds))
            return .failure(DomainError(.upstreamUnavailable, "Desk did not answer in time.", internalDetail: "timeout after \(configuration.requestTimeout)"))
        case .unreachable(let reason, _):
            breaker.recordFailure()
            observe(DeskCallRecord(operation: operation, outcome: "unreachable", seconds: seconds))
            return .failure(DomainError(.upstreamUnavailable, "Desk is unreachable.", internalDetail: reason))
        case .abandoned:
            observe(DeskCallRecord(operation: operation, outcome: "abandoned", seconds: seconds))
            throw DomainError(.upstreamUnavailable, "The call to Desk was abandoned.", internalDetail: "cancelled by the caller")
        case .tooLarge:
            // Not an outage (the breaker stays as it is) and not worth repeating: the same answer would come back.
            observe(DeskCallRecord(operation: operation, outcome: "too_large", seconds: seconds))
            throw DomainError(.upstreamProtocol, "Desk's answer was too large.",
                              internalDetail: "answer over \(configuration.maxAnswerBytes) bytes (DESK_MAX_ANSWER_MB)")
        }
    }

    /// Full jitter: a random delay up to base·2^attempt (capped); a short `Retry-After` wins when Desk sends one.
    func backoff(attempt: Int, retryAfter: Int?) -> Duration {
        if let retryAfter, retryAfter <= 5 { return .seconds(retryAfter) }
        let ceiling = min(configuration.retryMaxDelay.inSeconds, configuration.retryBaseDelay.inSeconds * pow(2, Double(attempt)))
        return .milliseconds(Int(Double.random(in: 0...ceiling) * 1000))
    }

    enum Outcome {
        case answer(status: Int, headers: [AnyHashable: Any], data: Data)
        case timedOut
        /// No answer; `sent`: the request may have reached Desk (false: refused, unresolvable, no TLS handshake).
        case unreachable(String, sent: Bool)
        /// The caller stopped waiting (its own deadline, a shutdown): says nothing about Desk's health.
        case abandoned
        /// The answer passed `maxAnswerBytes` and was cut off.
        case tooLarge
    }

    /// A failed write that reached Desk, or may have (no answer in time, a 5xx, a 2xx that could not be read, a
    /// transfer cut or abandoned, an answer too large to read), may have been carried out: the caller must not take
    /// it for "nothing happened". Without an answer, Desk may also still be carrying it out.
    static func marked(_ error: DomainError, after outcome: Outcome) -> DomainError {
        switch outcome {
        case .answer(let status, _, _): return status >= 500 || (200..<300).contains(status) ? error.effectUnknown() : error
        case .tooLarge: return error.effectUnknown()
        case .unreachable(_, sent: false): return error
        case .timedOut, .unreachable, .abandoned: return error.effectUnknown(stillUnderWay: true)
        }
    }

    /// A written ticket read from Desk's answer: an answer that is not a ticket still came after Desk carried the
    /// write out, so the failure says it may have taken effect.
    static func writtenTicket(_ answer: JSONValue) throws(DomainError) -> DeskTicket {
        do { return try DeskTicket(json: answer) } catch { throw error.effectUnknown() }
    }

    /// One attempt. The deadline covers the wait for a free connection too (curl's own timeout starts with the
    /// transfer): whichever comes first ends the caller's wait; a late transfer is cancelled, not awaited.
    func perform(_ request: CurlRequest) async -> Outcome {
        let http = http
        let finished: CurlOutcome?
        do {
            finished = try await withDeadline(configuration.requestTimeout) { () async throws -> CurlOutcome in await http.perform(request) }
        } catch {
            return .abandoned   // the caller was cancelled
        }
        guard let outcome = finished else { return .timedOut }
        switch outcome {
        case .answer(let status, let headers, let body):
            var fields: [AnyHashable: Any] = [:]
            for (name, value) in headers { fields[name] = value }
            return .answer(status: status, headers: fields, data: Data(body))
        case .timedOut: return .timedOut
        case .failed(let reason): return .unreachable(reason, sent: true)
        case .notSent(let reason): return .unreachable(reason, sent: false)
        case .abandoned: return .abandoned
        case .tooLarge: return .tooLarge
        }
    }

    func makeRequest(_ method: String, _ path: String, _ credential: Credential, query: [(String, String)],
                     body: JSONValue?, span: TraceContext? = nil) throws(DomainError) -> CurlRequest {
        var text = configuration.baseURL + path
        if !query.isEmpty {
            text += "?" + query.map { "\(Self.percentEncode($0.0))=\(Self.percentEncode($0.1))" }.joined(separator: "&")
        }
        guard URL(string: text) != nil else {
            throw DomainError(.upstreamProtocol, "The Desk base URL is not valid.", internalDetail: "bad URL for \(path)")
        }
        var request = CurlRequest(method: method, url: text, headers: [("Content-Type", "application/json"), ("Accept", "application/json")],
                                  body: body?.bytes(), timeout: configuration.requestTimeout, maxResponseBytes: configuration.maxAnswerBytes)
        switch credential {
        case .customerAuth(let accessToken):
            request.headers.append(("sendbirdAccessToken", Self.headerValue(accessToken)))
        case .customer(let session):
            request.headers.append(("sendbirdDeskToken", Self.headerValue(session.token)))
        case .platform:
            guard let token = configuration.apiToken else {
                throw DomainError(.upstreamUnavailable, "The Desk Platform API is not configured.", internalDetail: "DESK_API_TOKEN unset")
            }
            request.headers.append(("SENDBIRDDESKAPITOKEN", Self.headerValue(token)))
        }
        // The request's trace, one child span per Desk call (W3C Trace Context).
        if let trace = span ?? TraceContext.current?.child() {
            request.headers.append(("traceparent", trace.traceparent))
            if let state = trace.state { request.headers.append(("tracestate", Self.headerValue(state))) }
        }
        return request
    }

    /// A credential as a header value: line breaks and other control characters dropped, so a value can never
    /// start a header of its own (curl sends header lines as given).
    static func headerValue(_ value: String) -> String {
        String(String.UnicodeScalarView(value.unicodeScalars.filter { $0.value >= 0x20 && $0.value != 0x7F }))
    }

    static func decode(_ data: Data) throws(DomainError) -> JSONValue {
        if data.isEmpty { return .object([]) }
        do { return try JSONParser.parse([UInt8](data), repairingStrings: true) } catch { throw DeskDecoding.failure("answer is not JSON: \(error)") }
    }

    /// Desk's 4xx → domain errors. Desk reports state conflicts as 400 with a state code (`desk400200` in the
    /// emulator), or 409; other 400s are invalid values.
    static func mapClientError(_ status: Int, headers: [AnyHashable: Any], data: Data) -> DomainError {
        let json = errorDocument(data)
        let detail = detail(json, bytes: data.count)
        let code = json?["code"]?.stringValue ?? ""
        switch status {
        case 401, 403:
            return DomainError(.unauthorized, "Desk refused the credentials.", internalDetail: detail)
        case 404:
            return DomainError(.notFound, "Desk has no such resource.", internalDetail: detail)
        case 409:
            return DomainError(.conflict, "The ticket's state does not allow this.", internalDetail: detail)
        case 429:
            // No hint: no made-up one either, so each waiting caller applies its own back-off.
            return DomainError(.rateLimited, "Desk is rate limiting requests.", retryAfterSeconds: retryAfter(headers), internalDetail: detail)
        case 400 where code == "desk400200":
            return DomainError(.conflict, "The ticket's state does not allow this.", internalDetail: detail)
        default:
            return DomainError(.invalid, "Desk refused a value of the request.", internalDetail: detail)
        }
    }

    /// Desk's error answer, read as its other documents are (strings repaired), once per answer.
    static func errorDocument(_ data: Data) -> JSONValue? { try? JSONParser.parse([UInt8](data), repairingStrings: true) }

    static func detail(_ data: Data) -> String { detail(errorDocument(data), bytes: data.count) }

    static func detail(_ json: JSONValue?, bytes: Int) -> String {
        guard let json else { return "(\(bytes) bytes, not JSON)" }
        let detail = json["detail"]?.stringValue ?? json["message"]?.stringValue ?? ""
        let code = json["code"]?.stringValue ?? ""
        return code.isEmpty ? detail : "\(code): \(detail)"
    }

    /// Longest wait a rate-limit hint may ask for.
    public static let maxRetryAfterSeconds = 300

    /// Desk's hint of when to try again: `Retry-After` (seconds or an HTTP date), Sendbird's `X-RateLimit-RetryAfter`
    /// (seconds, or a Unix timestamp in seconds or milliseconds) or `X-RateLimit-Reset` (a Unix timestamp, or
    /// seconds when small); held to 1...`maxRetryAfterSeconds`: an absurd hint (`999999999`, `-5`, a time past) is
    /// never a "retry at once" to clients.
    public static func retryAfter(_ headers: [AnyHashable: Any], now: Double = WallClock.seconds()) -> Int? {
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
            // Clamped as a Double first: a hint like -1e300 must not reach Int's conversion (it traps).
            if let seconds, seconds.isFinite { return Int(min(Double(maxRetryAfterSeconds), max(1, seconds.rounded(.up)))) }
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
}
