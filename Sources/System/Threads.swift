#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Threads of the gateway's own, named where operators look (`top -H`, `perf`, `/proc/<pid>/task/*/comm`).
public enum Threads {
    /// Starts `body` on a new thread called `name` (the kernel keeps its first 15 bytes). Foundation's `Thread.name`
    /// alone does not reach the kernel on Linux: a thread kept the name of the one that started it, so the database
    /// pool's threads showed as the cooperative pool's `com.apple.root.default-qos`.
    public static func start(_ name: String, _ body: @escaping @Sendable () -> Void) {
        let thread = Thread {
            nameThisThread(name)
            body()
        }
        thread.name = name
        thread.start()
    }

    /// Through `/proc/thread-self/comm`: Glibc's `pthread_setname_np` and `prctl` are not visible to Swift.
    static func nameThisThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    }
}
