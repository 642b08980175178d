public import Domain
import CurlHTTP
import Foundation
import JSON
public import Logging
import Synchronization

/// Exports spans over OTLP/HTTP with the JSON encoding (`POST {endpoint}/v1/traces`, `application/json`), which
/// every OpenTelemetry Collector and most tracing back ends accept. Spans wait in a bounded queue and leave in
/// batches; when the queue is full or the receiver fails, spans are dropped and counted, never waited for: tracing
/// must not slow or stop a request.
public final class OTLPExporter: SpanRecorder {
    public struct Settings: Sendable {
        /// Where spans are posted: the full traces URL (`…/v1/traces`).
        public var tracesURL: String
        /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`: an API key of the back end).
        public var headers: [(name: String, value: String)]
        /// Resource attributes: `service.name`, `service.version`, …
        public var resource: [(key: String, value: String)]
        public var queueCapacity: Int
        public var batchSize: Int
        public var interval: Duration
        public var timeout: Duration

        public init(tracesURL: String, headers: [(name: String, value: String)], resource: [(key: String, value: String)],
                    queueCapacity: Int, batchSize: Int, interval: Duration, timeout: Duration) {
            self.tracesURL = tracesURL
            self.headers = headers
            self.resource = resource
            self.queueCapacity = queueCapacity
            self.batchSize = batchSize
            self.interval = interval
            self.timeout = timeout
        }
    }

    private let settings: Settings
    private let logger: Logger
    private let client = CurlClient(maxConnections: 2, name: "otlp-exporter")
    private let queue = Mutex<[Span]>([])
    private let exported = Atomic<Int>(0)
    private let dropped = Atomic<Int>(0)
    private let failures = Atomic<Int>(0)
    private let failing = Atomic<Bool>(false)

    public init(settings: Settings, logger: Logger) {
        self.settings = settings
        self.logger = logger
    }

    /// The endpoint as `OTEL_EXPORTER_OTLP_ENDPOINT` gives it (the signal path is appended) or as
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` gives it (used as is).
    public static func tracesURL(endpoint: String?, tracesEndpoint: String?) -> String? {
        if let tracesEndpoint, !tracesEndpoint.isEmpty { return tracesEndpoint }
        guard let endpoint, !endpoint.isEmpty else { return nil }
        return (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/traces"
    }

    /// `key1=value1,key2=value2`, values percent-decoded (the OpenTelemetry environment format).
    public static func parseHeaders(_ text: String?) -> [(name: String, value: String)] {
        guard let text else { return [] }
        return text.split(separator: ",").compactMap { pair in
            guard let equals = pair.firstIndex(of: "=") else { return nil }
            let name = pair[..<equals].trimmingCharacters(in: .whitespaces)
            let raw = pair[pair.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty else { return nil }
            // Control characters could start a header line of their own.
            let value = (raw.removingPercentEncoding ?? raw).filter { !$0.isASCII || ($0.asciiValue! >= 0x20 && $0.asciiValue! != 0x7F) }
            return (name, value)
        }
    }

    public func record(_ span: Span) {
        guard span.context.sampled else { return }
        let kept = queue.withLock { queue -> Bool in
            guard queue.count < settings.queueCapacity else { return false }
            queue.append(span)
            return true
        }
        if !kept { dropped.add(1, ordering: .relaxed) }
    }

    public func register(in metrics: MetricsRegistry) {
        metrics.gauge("otlp_spans_total", help: "Spans handed to the OTLP exporter, by outcome: exported, dropped (queue full or the receiver failed).",
                      kind: .counter) { [weak self] in
            guard let self else { return [] }
            return [([("outcome", "exported")], Double(exported.load(ordering: .relaxed))),
                    ([("outcome", "dropped")], Double(dropped.load(ordering: .relaxed)))]
        }
        metrics.gauge("otlp_export_failures_total", help: "Batches the OTLP receiver did not accept (unreachable, timed out or not 2xx).",
                      kind: .counter) { [weak self] in
            [([], Double(self?.failures.load(ordering: .relaxed) ?? 0))]
        }
    }

    /// Sends a batch every `interval` until cancelled, then what is left.
    public func run() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: settings.interval)
            while await flushBatch() {}
        }
        // The loop's task is cancelled at shutdown; the last spans leave from a task that is not.
        await Task.detached { [self] in while await flushBatch() {} }.value
    }

    /// Posts up to one batch; whether a full batch went (more may wait).
    func flushBatch() async -> Bool {
        let batch = queue.withLock { queue -> [Span] in
            let taken = Array(queue.prefix(settings.batchSize))
            queue.removeFirst(taken.count)
            return taken
        }
        guard !batch.isEmpty else { return false }
        var headers: [(name: String, value: String)] = [("Content-Type", "application/json")]
        headers.append(contentsOf: settings.headers)
        let request = CurlRequest(method: "POST", url: settings.tracesURL, headers: headers, body: Self.document(batch, resource: settings.resource).bytes(),
                                  timeout: settings.timeout, maxResponseBytes: 64 << 10)
        switch await client.perform(request) {
        case .answer(let status, _, _) where (200..<300).contains(status):
            exported.add(batch.count, ordering: .relaxed)
            if failing.exchange(false, ordering: .relaxed) { logger.notice("exporting spans again") }
            return batch.count == settings.batchSize
        case let outcome:
            failures.add(1, ordering: .relaxed)
            dropped.add(batch.count, ordering: .relaxed)
            // Once per outage, not once a second: otlp_export_failures_total counts the rest.
            if !failing.exchange(true, ordering: .relaxed) {
                logger.warning("could not export spans; dropping them until the receiver answers",
                               metadata: ["spans": "\(batch.count)", "outcome": "\(outcome)", "url": "\(settings.tracesURL)"])
            }
            return false
        }
    }

    /// An `ExportTraceServiceRequest` in OTLP's JSON encoding (ids as hex, 64-bit numbers as strings).
    static func document(_ spans: [Span], resource: [(key: String, value: String)]) -> JSONValue {
        func attribute(_ key: String, _ value: SpanValue) -> JSONValue {
            switch value {
            case .string(let text): return .object([("key", .string(key)), ("value", .object([("stringValue", .string(text))]))])
            case .int(let number): return .object([("key", .string(key)), ("value", .object([("intValue", .string(String(number)))]))])
            }
        }
        let encoded: [JSONValue] = spans.map { span in
            var members: [(String, JSONValue)] = [
                ("traceId", .string(span.context.traceID)), ("spanId", .string(span.context.spanID)),
            ]
            if let parent = span.context.parentSpanID { members.append(("parentSpanId", .string(parent))) }
            if let state = span.context.state { members.append(("traceState", .string(state))) }
            members += [
                ("name", .string(span.name)), ("kind", .integer(span.kind.rawValue)),
                ("startTimeUnixNano", .string(String(span.startNanos))), ("endTimeUnixNano", .string(String(span.endNanos))),
                ("attributes", .array(span.attributes.map { attribute($0.key, $0.value) })),
                ("status", .object([("code", .integer(span.failed ? 2 : 0))])),
            ]
            return .object(members)
        }
        let scope: JSONValue = .object([("scope", .object([("name", .string("desk-gateway"))])), ("spans", .array(encoded))])
        let resourceValue: JSONValue = .object([("attributes", .array(resource.map { attribute($0.key, .string($0.value)) }))])
        return .object([("resourceSpans", .array([.object([("resource", resourceValue), ("scopeSpans", .array([scope]))])]))])
    }
}
