import CBuildInfo
import Domain
import Foundation
import Synchronization
import System

/// The standard `process_*` families (as Prometheus's client libraries name them), read from `/proc/self` when
/// /metrics is scraped, and `desk_gateway_build_info`.
public enum ProcessMetrics {
    /// The commit this binary was built from (`DESK_GATEWAY_REVISION` at build time), or `unknown`.
    public static let revision = String(cString: dg_build_revision())

    public static func register(in metrics: MetricsRegistry, version: String) {
        let ticks = Machine.clockTicksPerSecond
        let pageSize = Machine.pageSize
        let started = startTime(ticks: ticks)
        metrics.gauge("process_cpu_seconds_total", help: "User and system CPU time spent, in seconds.", kind: .counter) {
            guard let fields = stat() else { return [] }
            return [([], (Double(fields[10]) + Double(fields[11])) / ticks)]
        }
        metrics.gauge("process_resident_memory_bytes", help: "Resident memory size in bytes.") {
            guard let fields = stat() else { return [] }
            return [([], Double(fields[20]) * pageSize)]
        }
        metrics.gauge("process_virtual_memory_bytes", help: "Virtual memory size in bytes.") {
            guard let fields = stat() else { return [] }
            return [([], Double(fields[19]))]
        }
        metrics.gauge("process_threads", help: "Threads of the process.") {
            guard let fields = stat() else { return [] }
            return [([], Double(fields[16]))]
        }
        metrics.gauge("process_open_fds", help: "Open file descriptors.") {
            let count = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
            return [([], Double(max(0, count - 1)))]   // less the descriptor of the listing itself
        }
        metrics.gauge("process_max_fds", help: "The limit of open file descriptors.") {
            var limit = rlimit()
            guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return [] }
            return [([], Double(limit.rlim_cur))]
        }
        metrics.gauge("process_start_time_seconds", help: "Start time of the process since the Unix epoch, in seconds.") {
            [([], started)]
        }
        metrics.gauge("desk_gateway_build_info", help: "1, labelled with the gateway's version and the commit it was built from.") {
            [([("version", version), ("revision", revision)], 1)]
        }
    }

    /// The numeric fields of `/proc/self/stat` after the command name and the state: index i is field i + 4 of
    /// proc(5) (utime 10, stime 11, num_threads 16, starttime 18, vsize 19, rss 20).
    static func stat() -> [Int]? {
        // The four families read it in one scrape: one read serves them all.
        let now = ContinuousClock.now
        if let cached = lastStat.withLock({ $0 }), now - cached.at < .milliseconds(100) { return cached.fields }
        let fields = readStat()
        lastStat.withLock { $0 = fields.map { (now, $0) } }
        return fields
    }

    private static let lastStat = Mutex<(at: ContinuousClock.Instant, fields: [Int])?>(nil)

    static func readStat() -> [Int]? {
        guard let text = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ").dropFirst().map { Int($0) ?? 0 }
        return fields.count > 20 ? fields : nil
    }

    static func startTime(ticks: Double) -> Double {
        guard let fields = stat(), let boot = try? String(contentsOfFile: "/proc/stat", encoding: .utf8)
            .split(separator: "\n").first(where: { $0.hasPrefix("btime ") })
            .flatMap({ Double($0.dropFirst(6).trimmingCharacters(in: .whitespaces)) }) else {
            return WallClock.seconds()
        }
        return boot + Double(fields[18]) / ticks
    }
}
