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

    /// Keeps glibc from handing the large short-lived buffers of big answers (a weekly report: a 600 kB body, its
    /// rows, PostgreSQL's result) back to the kernel after every request: by default each such buffer was a fresh
    /// mapping, page-faulted in and cleared on every answer (a seventh of a weekly report's gateway time). Buffers up
    /// to 4 MiB come from the heap and an arena keeps up to 8 MiB free before trimming. An operator's own
    /// `GLIBC_TUNABLES` or `MALLOC_*` settings are left as they are.
    public static func tuneAllocator(environment: [String: String]) {
        #if canImport(Glibc)
        guard !environment.keys.contains(where: { $0 == "GLIBC_TUNABLES" || $0.hasPrefix("MALLOC_") }) else { return }
        // malloc.h is not part of the Glibc module; mallopt and its parameter numbers are glibc's stable ABI.
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }
        let mallopt = unsafeBitCast(symbol, to: Mallopt.self)
        let (trimThreshold, mmapThreshold): (Int32, Int32) = (-1, -3)   // M_TRIM_THRESHOLD, M_MMAP_THRESHOLD
        _ = mallopt(mmapThreshold, 4 << 20)
        _ = mallopt(trimThreshold, 8 << 20)
        #endif
    }
}
