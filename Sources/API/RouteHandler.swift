public import Domain
public import HTTPServer

/// Facts about the request that handlers and logs share.
public struct RequestInfo: Sendable {
    public let id: String
    /// The route template (`/v1/tickets/{id}`), never the concrete path: safe as a metric label.
    public let route: String
    /// The W3C trace the request belongs to (the caller's `traceparent`, or one started here).
    public let trace: TraceContext?

    public init(id: String, route: String, trace: TraceContext? = nil) {
        self.id = id
        self.route = route
        self.trace = trace
    }
}

public enum RouteHandler: Sendable {
    /// CPU-only work answered on the libmicrohttpd thread (no I/O, no waiting).
    case sync(@Sendable (HTTPRequest, RequestInfo) throws -> HTTPResponse)
    /// Anything that awaits: the connection is suspended while it runs.
    case async(@Sendable (HTTPRequest, RequestInfo) async throws -> HTTPResponse)
    /// Tries `fast` on the polling thread (memory only); when it returns nil, runs `slow` as async work.
    case hybrid(fast: @Sendable (HTTPRequest, RequestInfo) -> HTTPResponse?,
                slow: @Sendable (HTTPRequest, RequestInfo) async throws -> HTTPResponse)
}

/// A route's handler, in an object of its own so requests can borrow it: copying the enum out of the router retained
/// its closure's context, one object shared by every request of the route, from both request threads.
final class RouteEntry: Sendable {
    let handler: RouteHandler

    init(_ handler: RouteHandler) { self.handler = handler }
}

/// A route's handler, lent (copying this retains nothing: the route table owns the entry), and the number of its
/// template in the router's `templates`, by which the access log finds the route's series without hashing the
/// template on every answer. Unchecked: `Unmanaged` is not `Sendable`, though what it refers to is, and immutable.
struct Routed: @unchecked Sendable {
    let entry: Unmanaged<RouteEntry>
    let number: Int

    /// The handler, borrowed for the length of `body`.
    @inline(__always)
    func withHandler<Result>(_ body: (RouteHandler) -> Result) -> Result {
        entry._withUnsafeGuaranteedRef { body($0.handler) }
    }
}

/// The routes of one gateway, built at start-up and then read-only.
public struct RouteTable: Sendable {
    var router = Router<Routed>()
    /// The entries the router lends; they live as long as the table.
    private(set) var entries: [RouteEntry] = []

    public init() {}

    public mutating func add(_ method: String, _ path: String, _ handler: RouteHandler) {
        // The router lists each template once, in the order first added: a new one takes the next place.
        let number = router.templates.firstIndex(of: path) ?? router.templates.count
        let entry = RouteEntry(handler)
        entries.append(entry)
        router.add(method, path, Routed(entry: Unmanaged.passUnretained(entry), number: number))
    }
}
