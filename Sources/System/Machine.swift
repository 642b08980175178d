#if canImport(Glibc)
import Glibc
#endif

/// Constants of the running system that /proc figures are counted in.
public enum Machine {
    /// Clock ticks per second (`/proc/*/stat` CPU times).
    public static let clockTicksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
    /// Bytes per memory page (`/proc/*/stat` resident size).
    public static let pageSize = Double(sysconf(Int32(_SC_PAGESIZE)))
    /// Whether the process runs as root (PostgreSQL refuses to; the embedded cluster then runs as `postgres`).
    public static var isRoot: Bool { geteuid() == 0 }
}
