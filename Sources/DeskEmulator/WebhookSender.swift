import Crypto
import Domain
import Foundation
import CurlHTTP
public import JSON
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

    init(type: DeskEventType, ticket: JSONValue, message: JSONValue? = nil) {
        self.id = UUID().uuidString.lowercased()
        self.type = type.rawValue
        self.ticket = ticket
        self.message = message
        self.occurredAt = WallClock.seconds()
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

/// What the webhook sender has done: events waiting now, delivered, given up after the retries, dropped because
/// the queue was full, and how long the latest and the slowest delivered event waited since it happened.
public struct WebhookStats: Sendable, Equatable {
    public var queued = 0
    public var delivered = 0
    public var failed = 0
    public var dropped = 0
    public var lastLagSeconds = 0.0
    /// The slowest since the stats were last taken (`take`).
    public var maxLagSeconds = 0.0

    public var json: JSONValue {
        .object([("queued", .integer(queued)), ("delivered", .integer(delivered)), ("failed", .integer(failed)),
                 ("dropped", .integer(dropped)), ("lastLagMs", .integer(Int(lastLagSeconds * 1000))),
                 ("maxLagMs", .integer(Int(maxLagSeconds * 1000)))])
    }
}

/// Delivers events like Desk: several at once (`concurrency` lanes; Desk sends concurrently), each POST with
/// `x-hub-signature: sha1=<hex HMAC-SHA1(secret, body)>`, 1 s to answer, up to 3 retries when the receiver does not
/// answer 2xx in time. One ticket's events share a lane, so they leave in the order they happened (tests rely on
/// it; the gateway does not). At most `capacity` events wait: a full queue drops the newest and counts it, as a
/// Desk that cannot reach the receiver loses webhooks (the gateway's sync is what recovers them), instead of
/// holding memory without bound.
final class WebhookSender: Sendable {
    private final class Settings: Sendable {
        let value: Mutex<(urls: [String], secret: String)>
        let shape = Mutex(WebhookShape.primary)
        init(urls: [String], secret: String) { value = Mutex((urls, secret)) }
    }

    private final class Counters: Sendable {
        let value = Mutex(WebhookStats())
    }

    private let settings: Settings
    private let counters = Counters()
    private let lanes: [AsyncStream<WebhookEvent>.Continuation]
    private let workers: [Task<Void, Never>]
    let capacity: Int
    static let timeout: TimeInterval = 1
    static let retries = 3

    init(urls: [String], secret: String, concurrency: Int = 8, capacity: Int = 10_000) {
        let settings = Settings(urls: urls, secret: secret)
        self.settings = settings
        self.capacity = max(1, capacity)
        let client = CurlClient(maxConnections: max(1, concurrency), name: "desk-webhooks")
        var lanes: [AsyncStream<WebhookEvent>.Continuation] = []
        var workers: [Task<Void, Never>] = []
        let counters = counters
        for _ in 0..<max(1, concurrency) {
            let (stream, continuation) = AsyncStream<WebhookEvent>.makeStream()
            lanes.append(continuation)
            workers.append(Task {
                for await event in stream {
                    let (urls, secret) = settings.value.withLock { ($0.urls, $0.secret) }
                    let body = event.body(settings.shape.withLock { $0 })
                    var delivered = true
                    for url in urls where !(await Self.deliver(body, to: url, secret: secret, client: client)) { delivered = false }
                    let lag = WallClock.seconds() - event.occurredAt
                    counters.value.withLock {
                        $0.queued -= 1
                        if delivered { $0.delivered += 1 } else { $0.failed += 1 }
                        $0.lastLagSeconds = lag
                        $0.maxLagSeconds = max($0.maxLagSeconds, lag)
                    }
                }
            })
        }
        self.lanes = lanes
        self.workers = workers
    }

    func configure(urls: [String], secret: String) { settings.value.withLock { $0 = (urls, secret) } }

    var shape: WebhookShape {
        get { settings.shape.withLock { $0 } }
        set { settings.shape.withLock { $0 = newValue } }
    }

    func send(_ event: WebhookEvent) {
        guard !settings.value.withLock({ $0.urls.isEmpty }) else { return }
        let admitted = counters.value.withLock { stats -> Bool in
            guard stats.queued < capacity else { stats.dropped += 1; return false }
            stats.queued += 1
            return true
        }
        guard admitted else { return }
        let ticket = event.ticket["id"]?.intValue ?? 0
        lanes[abs(ticket % lanes.count)].yield(event)
    }

    /// The counts so far; the slowest lag starts over.
    func take() -> WebhookStats {
        counters.value.withLock { stats in
            defer { stats.maxLagSeconds = 0 }
            return stats
        }
    }

    func stop() {
        for lane in lanes { lane.finish() }
        for worker in workers { worker.cancel() }
    }

    static func signature(_ body: [UInt8], secret: String) -> String {
        let mac = HMAC<Insecure.SHA1>.authenticationCode(for: body, using: SymmetricKey(data: Array(secret.utf8)))
        return "sha1=" + Codec.hex(mac)
    }

    /// Returns whether the receiver took the event (2xx) within the retries.
    private static func deliver(_ body: [UInt8], to url: String, secret: String, client: CurlClient) async -> Bool {
        guard URL(string: url) != nil else { return false }
        let request = CurlRequest(method: "POST", url: url,
                                  headers: [("Content-Type", "application/json"), ("x-hub-signature", signature(body, secret: secret))],
                                  body: body, timeout: .seconds(timeout))
        for attempt in 0...retries {
            if case .answer(let status, _, _) = await client.perform(request), (200..<300).contains(status) {
                return true
            }
            if Task.isCancelled { return false }
            try? await Task.sleep(for: .milliseconds(200 * (attempt + 1)))
        }
        return false
    }
}
