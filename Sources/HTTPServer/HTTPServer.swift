internal import CMicroHTTPD
import Foundation
import Synchronization
import System
#if canImport(Glibc)
import Glibc
#endif

/// An HTTP/1.1 server on libmicrohttpd: internal poll() loops in a thread pool, suspend/resume for async
/// handlers (no libmicrohttpd thread ever waits on Swift work), bounded bodies, and a graceful stop.
///
/// Thread safety: `daemon` is written only by `start` and `stop`, which callers must not race with each other;
/// every other mutable field is a `Mutex` or an `Atomic`. libmicrohttpd threads reach this object through an
/// unretained pointer, valid because the object outlives the daemon (`stop` runs `MHD_stop_daemon` before returning).
public final class HTTPServer: @unchecked Sendable {
    public let configuration: HTTPServerConfiguration
    let responder: any HTTPResponder
    private var daemon: OpaquePointer?
    private var boundPort = 0
    let draining = Atomic<Bool>(false)
    /// Requests whose connection is suspended while their async work runs.
    let suspended = Mutex<[ObjectIdentifier: RequestContext]>([:])
    /// Streamed bodies being sent.
    let streams = StreamRegistry()
    /// Contexts created and not yet completed (counts requests being received, worked on or sent).
    let liveContexts = Atomic<Int>(0)
    /// Shared with libmicrohttpd's connection callbacks (live connections, header timeout); freed with the server.
    let connectionState: UnsafeMutablePointer<dg_mhd_state>

    public init(configuration: HTTPServerConfiguration, responder: any HTTPResponder) {
        self.configuration = configuration
        self.responder = responder
        connectionState = .allocate(capacity: 1)
        dg_mhd_state_init(connectionState, UInt32(max(0, configuration.requestTimeoutSeconds)))
    }

    deinit {
        if let daemon { MHD_stop_daemon(daemon) }
        sweeper?.stop()
        dg_mhd_state_destroy(connectionState)
        connectionState.deallocate()
    }

    private var sweeper: HeaderDeadlineSweeper?

    /// Open connections right now.
    public var openConnections: Int { Int(dg_mhd_live(connectionState)) }

    /// libmicrohttpd accepts a few connections past `connectionLimit`, so the server can answer those 503 (and close
    /// them) instead of leaving new clients waiting in the listen backlog.
    var acceptLimit: Int { max(1, configuration.connectionLimit) + max(16, configuration.connectionLimit / 16) }

    /// The bound port; with `port: 0` the kernel's choice.
    public var port: Int { boundPort }

    /// Requests currently suspended on async work.
    public var suspendedCount: Int { suspended.withLock { $0.count } }

    public func start() throws {
        guard daemon == nil else { throw HTTPServerError(code: .alreadyStarted, description: "server already started") }
        // poll(), not epoll: libmicrohttpd 0.9.75's MHD_quiesce_daemon races its own epoll loop over removing the
        // listen socket from the epoll set and aborts the process when it loses (seen in a test run). With poll()
        // quiescing is signalled to each thread through its inter-thread channel instead.
        let flags = MHD_USE_INTERNAL_POLLING_THREAD.rawValue | MHD_USE_POLL.rawValue
            | MHD_ALLOW_SUSPEND_RESUME.rawValue | MHD_USE_ERROR_LOG.rawValue
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard configuration.port >= 0, configuration.port <= 65535 else {
            throw HTTPServerError(code: .startFailed, description: "port \(configuration.port) is out of range")
        }
        let started = dg_mhd_start(
            UInt32(flags), configuration.host, UInt16(configuration.port),
            httpAccessHandler, context, httpRequestCompleted, context,
            UInt32(max(1, configuration.threads)), UInt32(max(0, configuration.connectionTimeoutSeconds)),
            UInt32(acceptLimit), max(4096, configuration.connectionMemoryLimitBytes),
            UInt32(max(1, configuration.listenBacklog)), UInt32(max(0, configuration.perAddressConnectionLimit)),
            connectionState)
        guard let started else {
            throw HTTPServerError(code: .startFailed,
                                  description: "libmicrohttpd could not listen on \(configuration.host):\(configuration.port) (address in use or invalid host)")
        }
        daemon = started
        boundPort = Int(dg_mhd_bound_port(started))
        if configuration.requestTimeoutSeconds > 0 { sweeper = HeaderDeadlineSweeper(state: connectionState) }
    }

    /// Stops accepting connections, lets in-flight requests finish until `drainDeadline`, answers whatever is still
    /// suspended with the responder's shutdown response, then stops the daemon.
    public func stop(drainDeadline: Duration = .seconds(10)) async {
        guard let daemon else { return }
        draining.store(true, ordering: .sequentiallyConsistent)
        let listenSocket = MHD_quiesce_daemon(daemon)
        if listenSocket >= 0 { close(listenSocket) }

        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: drainDeadline)
        while suspendedCount > 0 || streams.count > 0, clock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
        let leftovers = suspended.withLock { Array($0.values) }
        for context in leftovers {
            finish(context, with: responder.shuttingDown(context.request))
        }
        // A stream still sending is cut (a suspended one resumed to be closed): libmicrohttpd cannot stop with
        // suspended connections.
        streams.abortAll()
        // Give the pool threads a moment to write the last responses before the sockets close.
        let flushDeadline = clock.now.advanced(by: .seconds(1))
        while liveContexts.load(ordering: .relaxed) > 0, clock.now < flushDeadline {
            try? await Task.sleep(for: .milliseconds(5))
        }
        MHD_stop_daemon(daemon)
        self.daemon = nil
        sweeper?.stop()
        sweeper = nil
    }

    /// Hands the async result back to libmicrohttpd; only the first caller for a context wins.
    func finish(_ context: RequestContext, with response: HTTPResponse) {
        guard context.claimed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged,
              let connection = context.connection else { return }
        context.response = response
        _ = suspended.withLock { $0.removeValue(forKey: ObjectIdentifier(context)) }
        MHD_resume_connection(connection)
    }
}

/// A thread that, four times a second, ends connections whose first request headers are overdue
/// (`HTTPServerConfiguration.requestTimeoutSeconds`), however slowly their bytes trickle in.
/// Thread safety: the state pointer is only passed to `dg_mhd_sweep`, which locks it; it outlives the sweeper.
final class HeaderDeadlineSweeper: @unchecked Sendable {
    private let state: UnsafeMutablePointer<dg_mhd_state>
    private let running = Atomic<Bool>(true)
    private let finished = DispatchSemaphore(value: 0)

    init(state: UnsafeMutablePointer<dg_mhd_state>) {
        self.state = state
        Threads.start("http-deadlines") { [self] in
            while running.load(ordering: .acquiring) {
                _ = dg_mhd_sweep(self.state)
                Thread.sleep(forTimeInterval: 0.25)
            }
            finished.signal()
        }
    }

    /// Returns once the thread has stopped touching the state.
    func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        finished.wait()
    }
}
