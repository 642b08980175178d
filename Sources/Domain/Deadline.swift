import Synchronization

/// Runs `body` in a task of its own and returns its result, or nil once `timeout` has passed, whichever comes first.
/// The caller never waits for the loser: on timeout `body`'s task is cancelled and left to end on its own, so a
/// body that ignores cancellation (a blocking database call, a stuck transfer) cannot hold the caller past the
/// deadline. Cancelling the caller cancels `body` too and throws `CancellationError`.
public func withDeadline<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T? {
    let race = DeadlineRace<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            race.arm(continuation)
            race.start(
                work: Task {
                    do { race.finish(.success(try await body())) } catch { race.finish(.failure(error)) }
                },
                timer: Task {
                    try? await Task.sleep(for: timeout)
                    if !Task.isCancelled { race.finish(.success(nil)) }
                })
        }
    } onCancel: {
        race.finish(.failure(CancellationError()))
    }
}

/// The non-throwing form: nil on timeout or when `body` fails.
public func withDeadline<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
    (try? await withDeadline(timeout) { () async throws -> T in await body() }) ?? nil
}

/// Resumes the caller exactly once, with the work's result, the deadline's nil or a cancellation, and then cancels
/// whatever is still running.
final class DeadlineRace<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T?, any Error>?
        var outcome: Result<T?, any Error>?
        var tasks: [Task<Void, Never>] = []
    }
    private let state = Mutex(State())

    func arm(_ continuation: CheckedContinuation<T?, any Error>) {
        let early = state.withLock { state -> Result<T?, any Error>? in
            if let outcome = state.outcome { return outcome }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    func start(work: Task<Void, Never>, timer: Task<Void, Never>) {
        let finished = state.withLock { state -> Bool in
            state.tasks = [work, timer]
            return state.outcome != nil
        }
        if finished { work.cancel(); timer.cancel() }
    }

    func finish(_ outcome: Result<T?, any Error>) {
        let (continuation, tasks) = state.withLock { state -> (CheckedContinuation<T?, any Error>?, [Task<Void, Never>]) in
            guard state.outcome == nil else { return (nil, []) }
            state.outcome = outcome
            defer { state.continuation = nil; state.tasks = [] }
            return (state.continuation, state.tasks)
        }
        for task in tasks { task.cancel() }
        continuation?.resume(with: outcome)
    }
}

extension Duration {
    /// The duration in seconds, fractions included.
    public var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
