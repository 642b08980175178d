import Domain
import Foundation
import HTTPServer
import JSON
import Synchronization

/// Simulated trouble on the Desk surfaces (the control API is never affected).
public struct EmulatorFaults: Sendable {
    /// Share of requests answered 500, 0...1.
    public var failRate: Double = 0
    /// Added to every answer.
    public var latencyMs: Int = 0
    /// Every request is answered 503 as if Desk were down.
    public var down = false
    /// The next this many Platform API requests (customer API ones too with `rateLimitCustomers`) are answered 429
    /// with `Retry-After: <retryAfter>`.
    public var rateLimitNext = 0
    public var rateLimitCustomers = false
    /// The hint the 429s carry, as sent (a test may make it absurd).
    public var retryAfter = "1"
    /// The next this many customer or Platform API requests are answered 500: a failure a test can count on.
    public var failNext = 0
    /// The next this many customer or Platform API requests wait, before they are carried out, until
    /// `POST /emulator/release`: a Desk slower than any deadline, whose late work a test lets happen when it says.
    public var holdNext = 0
    /// The next this many customer or Platform API requests are carried out as usual and answered 200 with a page
    /// that is not Desk's JSON (a proxy's or a maintenance page's): the caller cannot tell what Desk did.
    public var garbleNext = 0
    /// Each request is carried out (and its webhooks sent) at once, and its answer held this long: what the caller
    /// learns arrives after the webhooks that tell the same, as when a webhook overtakes a slow answer.
    public var answerDelayMs = 0

    public init(failRate: Double = 0, latencyMs: Int = 0, down: Bool = false, rateLimitNext: Int = 0, failNext: Int = 0) {
        self.failRate = failRate
        self.latencyMs = latencyMs
        self.down = down
        self.rateLimitNext = rateLimitNext
        self.failNext = failNext
    }
}

public struct DeskEmulatorConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 9090
    public var appId = "emulated-app"
    /// The Platform API token the emulator accepts in `SENDBIRDDESKAPITOKEN`.
    public var apiToken = "emulator-api-token"
    public var webhookURLs: [String] = []
    public var webhookSecret = "emulator-webhook-secret"
    /// Webhooks in flight at once, and events waiting at most (more are dropped and counted).
    public var webhookConcurrency = 8
    public var webhookQueueCapacity = 10_000
    public var threads = 2
    /// The emulator's own server limits (a test Desk, not the gateway's settings).
    public var connectionTimeoutSeconds = 30
    public var connectionLimit = 1024
    public var bodyLimitBytes = 1 << 20

    public init() {}
}

/// Ways a real Desk may behave that the emulator can take on for tests.
struct EmulatorVariants: Sendable {
    /// A CSAT message stays `WAITING` as first sent while the answer goes to the ticket's own fields.
    var csatMessageStaysWaiting = false
    /// Which time Platform ticket lists filter `start_date` / `end_date` on: `updated` (default) or `created`.
    var ticketListDateField = "updated"
}

/// A local Sendbird Desk: the customer API (`/sapi`), the Platform API (`/platform/v1`) and an `/emulator` control
/// API that plays the agent's and the system's side, in Sendbird's wire format, on the project's own HTTP server.
public final class DeskEmulator: Sendable {
    public let configuration: DeskEmulatorConfiguration
    let world: WorldCell
    let faults = Mutex(EmulatorFaults())
    /// Requests held by `holdNext`, until released.
    let held = Mutex<[CheckedContinuation<Void, Never>]>([])
    /// Tickets whose `chat_messages` answer breaks on purpose: "500", "html", "no-results" or "broken-message".
    let messageFaults = Mutex<[Int: String]>([:])
    /// Variants of Desk's behaviour the gateway must cope with (`POST /emulator/settings`), kept in memory.
    let variants = Mutex(EmulatorVariants())
    /// Platform API requests answered 429 so far (for tests).
    let rateLimited = Mutex(0)
    /// The last W3C `traceparent` headers received on Desk's surfaces, newest last (`GET /emulator/traces`).
    let traces = Mutex<[(traceparent: String, method: String, path: String)]>([])
    /// The Platform API's ticket and customer lists as ordered ids, for the pages after a list's first.
    let listings = Mutex(ListingCache())
    let webhooks: WebhookSender
    private let server = Mutex<HTTPServer?>(nil)
    private let boundPort = Mutex(0)
    private let responder = ResponderBox()
    let routes: Router<EmulatorHandler>

    /// An emulator that keeps its state in memory only.
    public convenience init(configuration: DeskEmulatorConfiguration) {
        self.init(configuration: configuration, world: EmulatorWorld(appId: configuration.appId, apiToken: configuration.apiToken), store: nil)
    }

    /// An emulator whose state survives restarts: loaded from `store` if it holds any, otherwise new (and then
    /// seeded by the caller; `restored` tells which). Every later change is saved before it is acknowledged.
    public static func persistent(configuration: DeskEmulatorConfiguration,
                                  store: any EmulatorStateStore) throws -> (emulator: DeskEmulator, restored: Bool) {
        var world = EmulatorWorld(appId: configuration.appId, apiToken: configuration.apiToken)
        let records = try store.load()
        try world.restore(records)
        if records.isEmpty { try store.save(world.allRecords()) }
        world.commit()
        return (DeskEmulator(configuration: configuration, world: world, store: store), !records.isEmpty)
    }

    init(configuration: DeskEmulatorConfiguration, world initial: EmulatorWorld, store: (any EmulatorStateStore)?) {
        self.configuration = configuration
        world = WorldCell(initial, store: store)
        webhooks = WebhookSender(urls: configuration.webhookURLs, secret: configuration.webhookSecret,
                                 concurrency: configuration.webhookConcurrency, capacity: configuration.webhookQueueCapacity)
        var router = Router<EmulatorHandler>()
        Self.addCustomerRoutes(to: &router)
        Self.addPlatformRoutes(to: &router)
        Self.addControlRoutes(to: &router)
        routes = router
        responder.emulator.withLock { $0 = self }
    }

    /// Starts listening; after a `stop`, starts again on the same port with the same state (an outage that ends).
    public func start() throws {
        let previous = boundPort.withLock { $0 }
        let server = HTTPServer(configuration: HTTPServerConfiguration(
                                    host: configuration.host, port: previous > 0 ? previous : configuration.port,
                                    threads: configuration.threads, connectionTimeoutSeconds: configuration.connectionTimeoutSeconds,
                                    connectionLimit: configuration.connectionLimit, bodyLimitBytes: configuration.bodyLimitBytes),
                                responder: responder)
        try server.start()
        boundPort.withLock { $0 = server.port }
        self.server.withLock { $0 = server }
    }

    func waitForRelease() async {
        await withCheckedContinuation { continuation in held.withLock { $0.append(continuation) } }
    }

    /// Lets every held request go on; returns how many there were.
    @discardableResult
    public func releaseHeld() -> Int {
        let waiting = held.withLock { held in
            defer { held = [] }
            return held
        }
        for continuation in waiting { continuation.resume() }
        return waiting.count
    }

    /// Stops listening (connections are refused, as when Desk is unreachable); the state is kept.
    public func stop() async {
        releaseHeld()
        let current = server.withLock { server -> HTTPServer? in
            defer { server = nil }
            return server
        }
        await current?.stop(drainDeadline: .seconds(2))
    }

    public var port: Int { boundPort.withLock { $0 } }
    /// Made when this emulator's world was first created; kept with its saved state.
    public var instanceId: String { world.read { $0.instanceId } }
    public var baseURL: String { "http://\(configuration.host == "0.0.0.0" ? "127.0.0.1" : configuration.host):\(port)" }

    public func setFaults(_ newFaults: EmulatorFaults) { faults.withLock { $0 = newFaults } }

    /// Makes one ticket's `chat_messages` answer break: "500", "html", "no-results", or nil to heal it.
    public func setMessageFault(ticketId: Int, _ mode: String?) { messageFaults.withLock { $0[ticketId] = mode } }

    /// How many Platform API requests were answered 429.
    public var rateLimitedCount: Int { rateLimited.withLock { $0 } }

    /// Keeps a request's trace header (at most the last 1,000) so a test can follow one request end to end.
    func noteTrace(_ request: HTTPRequest) {
        guard let traceparent = request.header("traceparent") else { return }
        traces.withLock { traces in
            if traces.count >= 1000 { traces.removeFirst(traces.count - 999) }
            traces.append((traceparent, request.method, request.path))
        }
    }

    public func setWebhooks(urls: [String], secret: String) { webhooks.configure(urls: urls, secret: secret) }

    /// What the webhook sender has done so far (`GET /emulator/webhooks/stats`); the slowest lag starts over.
    public func takeWebhookStats() -> WebhookStats { webhooks.take() }

    /// The envelope of the webhooks this emulator sends (`POST /emulator/settings {webhookShape}` too).
    public var webhookShape: WebhookShape {
        get { webhooks.shape }
        set { webhooks.shape = newValue }
    }

    /// Runs a change to the world and sends the webhook events it produced, in order.
    func mutate<T: Sendable>(_ body: (inout EmulatorWorld, inout [WebhookEvent]) throws(EmulatorFailure) -> T) throws(EmulatorFailure) -> T {
        var events: [WebhookEvent] = []
        let result = try world.withLock { world throws(EmulatorFailure) -> T in try body(&world, &events) }
        for event in events { webhooks.send(event) }
        return result
    }
}

/// Breaks the init cycle (the server needs a responder before the emulator exists).
final class ResponderBox: HTTPResponder {
    let emulator = Mutex<DeskEmulator?>(nil)

    func respond(to request: HTTPRequest) -> HTTPReply {
        guard let emulator = emulator.withLock({ $0 }) else { return .now(HTTPResponse(status: 503)) }
        return emulator.respond(to: request)
    }

    func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse {
        EmulatorResponse.error(413, "Request body too large.", code: "desk413100")
    }

    func shuttingDown(_ request: HTTPRequest) -> HTTPResponse {
        EmulatorResponse.error(503, "Desk emulator is stopping.", code: "desk503100")
    }
}

/// Where a route belongs: Desk surfaces are subject to faults, the control API is not.
enum EmulatorSurface: Sendable { case customer, platform, control }

struct EmulatorHandler: Sendable {
    let surface: EmulatorSurface
    let run: @Sendable (DeskEmulator, HTTPRequest) throws(EmulatorFailure) -> HTTPResponse
}

/// A Desk error answer: `{detail, code, message}` (DRF style; some callers read `message`).
struct EmulatorFailure: Error {
    let status: Int
    let detail: String
    let code: String

    static func invalid(_ detail: String) -> EmulatorFailure { EmulatorFailure(status: 400, detail: detail, code: "desk400100") }
    /// State conflicts (closing a pending ticket, answering an inquiry twice) are 400s on Desk, told apart by code.
    static func state(_ detail: String) -> EmulatorFailure { EmulatorFailure(status: 400, detail: detail, code: "desk400200") }
    static func notFound(_ detail: String = "Not found.") -> EmulatorFailure { EmulatorFailure(status: 404, detail: detail, code: "desk404100") }
    static func unauthorized(_ detail: String = "Authentication credentials were not provided or are invalid.") -> EmulatorFailure {
        EmulatorFailure(status: 401, detail: detail, code: "desk401100")
    }
}

enum EmulatorResponse {
    static func json(_ value: JSONValue, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")], body: value.bytes())
    }

    /// A page that is not Desk's JSON, as a proxy or a maintenance page in front of Desk sends.
    static func page(_ status: Int, _ text: String) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/html")], body: Array("<html><body>\(text)</body></html>".utf8))
    }

    static func error(_ status: Int, _ detail: String, code: String) -> HTTPResponse {
        json(.object([("detail", .string(detail)), ("code", .string(code)), ("message", .string(detail))]), status: status)
    }
}

extension DeskEmulator {
    func respond(to request: HTTPRequest) -> HTTPReply {
        switch routes.match(method: request.method, path: request.path) {
        case .notFound:
            return .now(EmulatorResponse.error(404, "Not found.", code: "desk404000"))
        case .methodNotAllowed:
            return .now(EmulatorResponse.error(405, "Method \"\(request.method)\" not allowed.", code: "desk405000"))
        case .found(let handler, _, let parameters):
            var routed = request
            routed.pathParameters = parameters
            if handler.surface != .control { noteTrace(request) }
            let currentFaults = handler.surface == .control ? EmulatorFaults() : faults.withLock { faults in
                let current = faults
                if faults.failNext > 0 { faults.failNext -= 1 } else if faults.garbleNext > 0 { faults.garbleNext -= 1 }
                if faults.holdNext > 0 { faults.holdNext -= 1 }
                return current
            }
            if handler.surface != .control, let hint = faults.withLock({ faults -> String? in
                guard faults.rateLimitNext > 0, handler.surface == .platform || faults.rateLimitCustomers else { return nil }
                faults.rateLimitNext -= 1
                return faults.retryAfter
            }) {
                rateLimited.withLock { $0 += 1 }
                var limited = EmulatorResponse.error(429, "Request was throttled.", code: "desk429000")
                limited.headers.append(("Retry-After", hint))
                return .now(limited)
            }
            let work: @Sendable () -> HTTPResponse = { [routed] in
                if currentFaults.down { return EmulatorResponse.error(503, "Service unavailable.", code: "desk503000") }
                if currentFaults.failNext > 0 || (currentFaults.failRate > 0 && Double.random(in: 0..<1) < currentFaults.failRate) {
                    return EmulatorResponse.error(500, "Internal server error.", code: "desk500000")
                }
                do throws(EmulatorFailure) {
                    let answer = try handler.run(self, routed)
                    guard currentFaults.garbleNext > 0, (200..<300).contains(answer.status) else { return answer }
                    return EmulatorResponse.page(200, "OK")
                } catch {
                    return EmulatorResponse.error(error.status, error.detail, code: error.code)
                }
            }
            guard currentFaults.latencyMs > 0 || currentFaults.answerDelayMs > 0 || currentFaults.holdNext > 0 else { return .now(work()) }
            return .later {
                if currentFaults.holdNext > 0 { await self.waitForRelease() }
                if currentFaults.latencyMs > 0 { try? await Task.sleep(for: .milliseconds(currentFaults.latencyMs)) }
                let response = work()
                if currentFaults.answerDelayMs > 0 { try? await Task.sleep(for: .milliseconds(currentFaults.answerDelayMs)) }
                return response
            }
        }
    }
}

/// Request helpers shared by the three surfaces.
extension HTTPRequest {
    func jsonBody() throws(EmulatorFailure) -> JSONValue {
        guard !body.isEmpty else { return .object([]) }
        do {
            let value = try JSONParser.parse(body)
            guard case .object = value else { throw EmulatorFailure.invalid("Request body must be a JSON object.") }
            return value
        } catch let failure as EmulatorFailure {
            throw failure
        } catch {
            throw EmulatorFailure.invalid("JSON parse error - \(error)")
        }
    }

    func intParameter(_ name: String) throws(EmulatorFailure) -> Int {
        guard let text = pathParameters[name], let value = Int(text) else { throw EmulatorFailure.notFound() }
        return value
    }

    func intQuery(_ name: String, default fallback: Int, range: ClosedRange<Int>) throws(EmulatorFailure) -> Int {
        guard let text = queryValue(name) else { return fallback }
        guard let value = Int(text), range.contains(value) else {
            throw EmulatorFailure.invalid("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound).")
        }
        return value
    }
}

extension Date {
    static var nowRounded: Date {
        // Millisecond precision, as rendered.
        Date(timeIntervalSince1970: (WallClock.seconds() * 1000).rounded(.down) / 1000)
    }
}

/// The last few Platform lists' ordered ids, by their query (offset and limit aside) and the world's revision: a client
/// paging through a large world gets each page at the cost of the page, where every page filtered and sorted the
/// whole world again (a sync of 20,000 tickets took 34 ms a page).
struct ListingCache: Sendable {
    private var entries: [(key: String, revision: Int, ids: [Int])] = []
    static let capacity = 8

    /// The ids listed under `key` at `revision`, made by `make` unless kept. Called under the world's lock, so the
    /// revision cannot move while they are made.
    mutating func ids(_ key: String, revision: Int, _ make: () -> [Int]) -> [Int] {
        if let index = entries.firstIndex(where: { $0.key == key }) {
            let entry = entries.remove(at: index)
            if entry.revision == revision {
                entries.append(entry)
                return entry.ids
            }
        }
        let ids = make()
        if entries.count >= Self.capacity { entries.removeFirst() }
        entries.append((key, revision, ids))
        return ids
    }
}
