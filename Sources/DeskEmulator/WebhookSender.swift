import Crypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import JSON
import Synchronization

/// One Desk webhook: `{eventType, eventId, occurredAt, data: <ticket>[, message]}`. `eventId` stays the same across
/// redeliveries of one event, so receivers can deduplicate.
struct WebhookEvent: Sendable {
    let id: String
    let type: String
    let ticket: JSONValue
    let message: JSONValue?
    let occurredAt: Double

    init(type: String, ticket: JSONValue, message: JSONValue? = nil) {
        self.id = UUID().uuidString.lowercased()
        self.type = type
        self.ticket = ticket
        self.message = message
        self.occurredAt = Date().timeIntervalSince1970
    }

    var body: [UInt8] {
        var fields: [(String, JSONValue)] = [("eventType", .string(type)), ("eventId", .string(id)),
                                             ("occurredAt", .string(ISOTimestamp.format(occurredAt))), ("data", ticket)]
        if let message { fields.append(("message", message)) }
        return JSONValue.object(fields).bytes()
    }
}

/// Delivers events in order, one at a time, like Desk: POST with `x-hub-signature: sha1=<hex HMAC-SHA1(secret, body)>`,
/// 1 s to answer, up to 3 retries when the receiver does not answer 2xx in time.
final class WebhookSender: Sendable {
    private final class Settings: Sendable {
        let value: Mutex<(urls: [String], secret: String)>
        init(urls: [String], secret: String) { value = Mutex((urls, secret)) }
    }

    private let settings: Settings
    private let continuation: AsyncStream<WebhookEvent>.Continuation
    private let worker: Task<Void, Never>
    static let timeout: TimeInterval = 1
    static let retries = 3

    init(urls: [String], secret: String) {
        let settings = Settings(urls: urls, secret: secret)
        self.settings = settings
        let (stream, continuation) = AsyncStream<WebhookEvent>.makeStream()
        self.continuation = continuation
        worker = Task {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = Self.timeout
            let session = URLSession(configuration: configuration)
            for await event in stream {
                let (urls, secret) = settings.value.withLock { ($0.urls, $0.secret) }
                for url in urls { await Self.deliver(event, to: url, secret: secret, session: session) }
            }
        }
    }

    func configure(urls: [String], secret: String) { settings.value.withLock { $0 = (urls, secret) } }

    func send(_ event: WebhookEvent) {
        guard !settings.value.withLock({ $0.urls.isEmpty }) else { return }
        continuation.yield(event)
    }

    func stop() {
        continuation.finish()
        worker.cancel()
    }

    static func signature(_ body: [UInt8], secret: String) -> String {
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: body, using: SymmetricKey(data: Array(secret.utf8)))
        return "sha1=" + mac.map { String(format: "%02x", $0) }.joined()
    }

    private static func deliver(_ event: WebhookEvent, to url: String, secret: String, session: URLSession) async {
        guard let target = URL(string: url) else { return }
        let body = event.body
        var request = URLRequest(url: target, timeoutInterval: timeout)
        request.httpMethod = "POST"
        request.httpBody = Data(body)
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue(signature(body, secret: secret), forHTTPHeaderField: "x-hub-signature")
        for attempt in 0...retries {
            if let (_, response) = try? await session.data(for: request),
               let status = (response as? HTTPURLResponse)?.statusCode, (200..<300).contains(status) {
                return
            }
            if Task.isCancelled { return }
            try? await Task.sleep(for: .milliseconds(200 * (attempt + 1)))
        }
    }
}
