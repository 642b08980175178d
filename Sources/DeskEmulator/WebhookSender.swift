import Crypto
import Domain
import Foundation
import CurlHTTP
import JSON
import Synchronization

/// How the emulator wraps a webhook event. `primary` is the shape Sendbird documents (`{eventType, data: <ticket>}`),
/// plus the CSAT `message` on CSAT events (an assumption the gateway does not depend on); the others are the variants
/// the gateway also accepts, so tests can cover each.
public enum WebhookShape: String, Sendable, CaseIterable {
    /// `{eventType, data: <ticket>[, message]}`
    case primary
    /// `{eventType, eventId, occurredAt, data: <ticket>[, message]}` (the emulator's first shape)
    case legacy
    /// `primary` with every key in snake_case (`event_type`, `channel_url`, …)
    case snake
    /// `{eventType, data: {ticket, message}}`
    case nested
    /// `{eventType, ticket[, message]}`
    case ticket
    /// the ticket's own fields at the top level with `eventType`; no message (CSAT only from the ticket's fields)
    case flat
}

/// One Desk webhook event; `id` stays the same across redeliveries, as the body does.
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

    func body(_ shape: WebhookShape) -> [UInt8] {
        let type: (String, JSONValue) = ("eventType", .string(self.type))
        let message = self.message.map { [("message", $0)] } ?? []
        let value: JSONValue
        switch shape {
        case .primary:
            value = .object([type, ("data", ticket)] + message)
        case .legacy:
            value = .object([type, ("eventId", .string(id)), ("occurredAt", .string(ISOTimestamp.format(occurredAt))), ("data", ticket)] + message)
        case .snake:
            value = Self.snakeCased(.object([type, ("data", ticket)] + message))
        case .nested:
            value = .object([type, ("data", .object([("ticket", ticket)] + message))])
        case .ticket:
            value = .object([type, ("ticket", ticket)] + message)
        case .flat:
            value = .object([type] + (ticket.objectValue ?? []))
        }
        return value.bytes()
    }

    static func snakeCased(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let members):
            return .object(members.map { key, member in
                var snake = ""
                for character in key {
                    if character.isUppercase { snake += "_" + character.lowercased() } else { snake.append(character) }
                }
                return (snake, snakeCased(member))
            })
        case .array(let items):
            return .array(items.map(snakeCased))
        default:
            return value
        }
    }
}

/// Delivers events in order, one at a time, like Desk: POST with `x-hub-signature: sha1=<hex HMAC-SHA1(secret, body)>`,
/// 1 s to answer, up to 3 retries when the receiver does not answer 2xx in time.
final class WebhookSender: Sendable {
    private final class Settings: Sendable {
        let value: Mutex<(urls: [String], secret: String)>
        let shape = Mutex(WebhookShape.primary)
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
            // One at a time, in order: one connection is enough.
            let client = CurlClient(maxConnections: 1, name: "desk-webhooks")
            for await event in stream {
                let (urls, secret) = settings.value.withLock { ($0.urls, $0.secret) }
                let body = event.body(settings.shape.withLock { $0 })
                for url in urls { await Self.deliver(body, to: url, secret: secret, client: client) }
            }
        }
    }

    func configure(urls: [String], secret: String) { settings.value.withLock { $0 = (urls, secret) } }

    var shape: WebhookShape {
        get { settings.shape.withLock { $0 } }
        set { settings.shape.withLock { $0 = newValue } }
    }

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
        return "sha1=" + Codec.hex(mac)
    }

    private static func deliver(_ body: [UInt8], to url: String, secret: String, client: CurlClient) async {
        guard URL(string: url) != nil else { return }
        let request = CurlRequest(method: "POST", url: url,
                                  headers: [("Content-Type", "application/json"), ("x-hub-signature", signature(body, secret: secret))],
                                  body: body, timeout: .seconds(timeout))
        for attempt in 0...retries {
            if case .answer(let status, _, _) = await client.perform(request), (200..<300).contains(status) {
                return
            }
            if Task.isCancelled { return }
            try? await Task.sleep(for: .milliseconds(200 * (attempt + 1)))
        }
    }
}
