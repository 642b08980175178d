import Synchronization

/// Prometheus text-format metrics: counters, histograms and gauges read at scrape time.
/// Labels must stay low-cardinality (route templates, never ids).
public final class MetricsRegistry: Sendable {
    public enum Kind: String, Sendable { case counter, gauge, histogram }

    struct Family: Sendable {
        let name: String
        let help: String
        let kind: Kind
        let buckets: [Double]
        var samples: [String: Sample] = [:]
        /// Series resolved once by hot paths, counted without the lock.
        var counters: [String: CounterHandle] = [:]
        var histograms: [String: HistogramHandle] = [:]
        /// Series kept elsewhere (a `KeyedCounters` table), read when rendered.
        var sources: [SeriesSource] = []

        /// Every series: those counted here, the handles' and the sources', added up where they share labels.
        var merged: [String: Sample] {
            var all = samples
            // A handle resolved ahead and never used is no series yet, as a sample never counted is none.
            for (key, counter) in counters where counter.value != 0 { all[key, default: Sample()].value += Double(counter.value) }
            for (key, histogram) in histograms {
                let sample = histogram.sample
                if sample.count > 0 { all[key] = Self.add(all[key], sample) }
            }
            for source in sources {
                for (labels, value) in source() { all[MetricsRegistry.render(labels), default: Sample()].value += value }
            }
            return all
        }

        private static func add(_ base: Sample?, _ more: Sample) -> Sample {
            guard let base else { return more }
            return Sample(value: base.value + more.value, bucketCounts: zip(base.bucketCounts, more.bucketCounts).map(+),
                          count: base.count + more.count)
        }
    }

    public typealias SeriesSource = @Sendable () -> [(labels: [(String, String)], value: Double)]

    struct Sample: Sendable {
        var value: Double = 0
        var bucketCounts: [Int] = []
        var count: Int = 0
    }

    public typealias GaugeReader = @Sendable () -> [(labels: [(String, String)], value: Double)]

    private let families = Mutex<[String: Family]>([:])
    private let order = Mutex<[String]>([])
    private let gauges = Mutex<[(name: String, help: String, kind: Kind, read: GaugeReader)]>([])

    public static let defaultLatencyBuckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    public init() {}

    public func describe(_ name: String, _ kind: Kind, help: String, buckets: [Double] = MetricsRegistry.defaultLatencyBuckets) {
        families.withLock { families in
            guard families[name] == nil else { return }
            families[name] = Family(name: name, help: help, kind: kind, buckets: kind == .histogram ? buckets : [])
            order.withLock { $0.append(name) }
        }
    }

    public func increment(_ name: String, _ labels: [(String, String)] = [], by amount: Double = 1) {
        let key = Self.render(labels)
        families.withLock { families in
            families[name]?.samples[key, default: Sample()].value += amount
        }
    }

    public func set(_ name: String, _ labels: [(String, String)] = [], to value: Double) {
        let key = Self.render(labels)
        families.withLock { families in
            families[name]?.samples[key, default: Sample()].value = value
        }
    }

    public func observe(_ name: String, _ labels: [(String, String)] = [], _ value: Double) {
        let key = Self.render(labels)
        families.withLock { families in
            guard let buckets = families[name]?.buckets else { return }
            var sample = families[name]!.samples[key] ?? Sample(bucketCounts: Array(repeating: 0, count: buckets.count))
            for (index, bound) in buckets.enumerated() where value <= bound { sample.bucketCounts[index] += 1 }
            sample.count += 1
            sample.value += value
            families[name]!.samples[key] = sample
        }
    }

    /// The series of a described counter, to be counted without naming it again.
    public func counter(_ name: String, _ labels: [(String, String)] = []) -> CounterHandle {
        let key = Self.render(labels)
        return families.withLock { families in
            if let existing = families[name]?.counters[key] { return existing }
            let handle = CounterHandle()
            families[name]?.counters[key] = handle
            return handle
        }
    }

    /// The series of a described histogram, to be observed without naming it again.
    public func histogram(_ name: String, _ labels: [(String, String)] = []) -> HistogramHandle {
        let key = Self.render(labels)
        return families.withLock { families in
            if let existing = families[name]?.histograms[key] { return existing }
            let handle = HistogramHandle(bounds: families[name]?.buckets ?? Self.defaultLatencyBuckets)
            families[name]?.histograms[key] = handle
            return handle
        }
    }

    /// Counter series of a described family kept by the caller (e.g. in `KeyedCounters`), read at render time.
    public func addSource(_ name: String, _ source: @escaping SeriesSource) {
        families.withLock { $0[name]?.sources.append(source) }
    }

    /// A gauge whose values are read when /metrics is scraped (pool sizes, queue depths); `kind: .counter` for a
    /// total kept elsewhere (the process's CPU seconds).
    public func gauge(_ name: String, help: String, kind: Kind = .gauge, read: @escaping GaugeReader) {
        gauges.withLock { $0.append((name, help, kind, read)) }
    }

    /// The current value of a counter or gauge sample (for tests and health checks).
    public func value(_ name: String, _ labels: [(String, String)] = []) -> Double {
        let key = Self.render(labels)
        return families.withLock { $0[name] }?.merged[key]?.value ?? 0
    }

    public func render() -> String {
        let snapshot = families.withLock { $0 }
        var out = ""
        for name in order.withLock({ $0 }) {
            guard let family = snapshot[name] else { continue }
            out += "# HELP \(name) \(family.help)\n# TYPE \(name) \(family.kind.rawValue)\n"
            let samples = family.merged
            for key in samples.keys.sorted() {
                let sample = samples[key]!
                switch family.kind {
                case .counter, .gauge:
                    out += "\(name)\(key.isEmpty ? "" : "{\(key)}") \(Self.format(sample.value))\n"
                case .histogram:
                    let prefix = key.isEmpty ? "" : key + ","
                    for (index, bound) in family.buckets.enumerated() {
                        out += "\(name)_bucket{\(prefix)le=\"\(Self.format(bound))\"} \(sample.bucketCounts[index])\n"
                    }
                    out += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(sample.count)\n"
                    out += "\(name)_sum\(key.isEmpty ? "" : "{\(key)}") \(Self.format(sample.value))\n"
                    out += "\(name)_count\(key.isEmpty ? "" : "{\(key)}") \(sample.count)\n"
                }
            }
        }
        for gauge in gauges.withLock({ $0 }) {
            out += "# HELP \(gauge.name) \(gauge.help)\n# TYPE \(gauge.name) \(gauge.kind.rawValue)\n"
            for sample in gauge.read() {
                let key = Self.render(sample.labels)
                out += "\(gauge.name)\(key.isEmpty ? "" : "{\(key)}") \(Self.format(sample.value))\n"
            }
        }
        return out
    }

    static func render(_ labels: [(String, String)]) -> String {
        // Fast path: nothing to escape (route templates, methods, statuses).
        if labels.allSatisfy({ !$0.1.utf8.contains { $0 == 0x5C || $0 == 0x22 || $0 == 0x0A } }) {
            var out = ""
            for (index, label) in labels.enumerated() {
                if index > 0 { out += "," }
                out += label.0 + "=\"" + label.1 + "\""
            }
            return out
        }
        var out = ""
        for (index, label) in labels.enumerated() {
            if index > 0 { out += "," }
            out += label.0
            out += "=\""
            // By scalar, as for every escaper: "\r\n", or a quote and a combining mark, is one Character.
            for scalar in label.1.unicodeScalars {
                switch scalar {
                case "\\": out += "\\\\"
                case "\"": out += "\\\""
                case "\n": out += "\\n"
                default: out.unicodeScalars.append(scalar)
                }
            }
            out += "\""
        }
        return out
    }

    static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }
}
