import Domain
public import Logging
import Synchronization

/// One part of the running gateway (the HTTP server, the database, a background loop…): started once, stopped
/// gracefully once.
public protocol LifecycleService: Sendable {
    var name: String { get }
    func start() async throws
    func stop() async
}

/// The gateway's parts, started in order and stopped in reverse: what depends on a part stops before it. A part that
/// fails to start stops the ones already started.
public final class ServiceGroup: Sendable {
    private let logger: Logger
    private let started = Mutex<[any LifecycleService]>([])

    public init(logger: Logger) {
        self.logger = logger
    }

    public func start(_ service: any LifecycleService) async throws {
        do {
            try await service.start()
        } catch {
            logger.error("could not start", metadata: ["service": "\(service.name)", "error": "\(error)"])
            await stop()
            throw error
        }
        started.withLock { $0.append(service) }
        logger.debug("started", metadata: ["service": "\(service.name)"])
    }

    public func stop() async {
        let services = started.withLock { services in
            defer { services = [] }
            return services
        }
        for service in services.reversed() {
            await service.stop()
            logger.debug("stopped", metadata: ["service": "\(service.name)"])
        }
    }

    /// What runs now, in the order it started.
    public var names: [String] { started.withLock { $0.map(\.name) } }
}

/// A part that is only stopped (it was ready once built): the database pool, the embedded emulator or cluster.
struct StopAction: LifecycleService {
    let name: String
    let action: @Sendable () async -> Void

    func start() async throws {}
    func stop() async { await action() }
}

/// A loop in a task of its own (the outbox relay, the webhook processor, the sync, the zone backfill). Stopping
/// cancels it and waits for it up to `stopWait`; a loop still busy after that (a Desk call under way) is left to end
/// on its own.
final class BackgroundLoop: LifecycleService {
    let name: String
    private let body: @Sendable () async -> Void
    private let stopWait: Duration
    private let task = Mutex<Task<Void, Never>?>(nil)

    init(_ name: String, stopWait: Duration = .seconds(5), _ body: @escaping @Sendable () async -> Void) {
        self.name = name
        self.stopWait = stopWait
        self.body = body
    }

    func start() async throws {
        let body = body
        task.withLock { $0 = Task { await body() } }
    }

    /// Waits for the loop to end by itself (a one-shot job such as the zone backfill).
    func finished() async {
        await task.withLock { $0 }?.value
    }

    func stop() async {
        guard let running = task.withLock({ $0 }) else { return }
        running.cancel()
        _ = await withDeadline(stopWait) { await running.value }
    }
}

/// Repeats `body` every `interval` until stopped.
func repeating(every interval: Duration, _ body: @escaping @Sendable () async -> Void) -> @Sendable () async -> Void {
    {
        while !Task.isCancelled {
            await body()
            try? await Task.sleep(for: interval)
        }
    }
}
