#if canImport(Glibc)
import Glibc
#endif
public import Dispatch

/// The process's signals: broken pipes ignored (a closed socket is an error, not a death), and the stop signals.
public enum Signals {
    public enum Stop: Sendable { case interrupt, terminate }

    public static func ignoreBrokenPipes() {
        signal(SIGPIPE, SIG_IGN)
    }

    /// SIGINT and SIGTERM end the process at once with status 0 (nothing to flush: a container's PID 1 would
    /// otherwise ignore SIGTERM and wait out the stop timeout).
    public static func exitOnStop() {
        signal(SIGINT) { _ in _exit(0) }
        signal(SIGTERM) { _ in _exit(0) }
    }

    /// Calls `handler` on a queue of its own for each SIGINT or SIGTERM (their default actions turned off, so no
    /// thread dies of them). Keep the returned sources alive as long as the handler should run.
    public static func onStop(_ handler: @escaping @Sendable (Stop) -> Void) -> [any DispatchSourceSignal] {
        let queue = DispatchQueue(label: "signals")
        return [(SIGINT, Stop.interrupt), (SIGTERM, Stop.terminate)].map { number, stop in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { handler(stop) }
            source.resume()
            return source
        }
    }

    /// Ends the process now, with no clean-up (for a graceful stop that did not finish).
    public static func exitNow(_ status: Int32) -> Never {
        _exit(status)
    }

    /// Whether the file descriptor is a terminal (progress lines are redrawn there, printed one per line elsewhere).
    public static func isTerminal(_ fd: Int32) -> Bool {
        isatty(fd) == 1
    }
}
