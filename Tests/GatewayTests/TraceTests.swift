import DeskEmulator
import Foundation
import GatewayApp
import HTTPServer
import Logging
import Synchronization
import Testing
import TestSupport

/// Log lines kept in memory, with their metadata, for a test to read.
final class CapturedLogs: Sendable {
    let entries = Mutex<[(message: String, metadata: [String: String], level: Logger.Level)]>([])

    var logger: Logger { logger(at: .info) }

    func logger(at level: Logger.Level) -> Logger {
        var logger = Logger(label: "captured") { _ in CapturingHandler(logs: self) }
        logger.logLevel = level
        return logger
    }

    struct CapturingHandler: LogHandler {
        let logs: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let flat = (event.metadata ?? [:]).mapValues { "\($0)" }
            logs.entries.withLock { $0.append(("\(event.message)", flat, event.level)) }
        }
    }
}

/// W3C Trace Context through the gateway: the caller's trace names the access log line and every Desk call made for
/// the request, each Desk call a child span of the gateway's.
@Suite struct TraceTests {
    @Test func aCallersTraceparentReachesTheLogAndDesk() async throws {
        let logs = CapturedLogs()
        try await TestPostgres.withDatabase { url in
            var config = TestGateway.configuration(databaseURL: url)
            config.cacheTTLSeconds = 0   // every read asks Desk
            config.rateLimitBurst = 10_000
            try await TestGateway.running(config, logger: logs.logger) { app in
                let customer = try await Customer.signIn(app)
                let id = try #require(try await customer.createTicket("Traced")["id"] as? Int)
                let trace = "4bf92f3577b34da6a3ce929d0e0e4736"
                let read = try await httpRequest(port: app.port, "GET", "/v1/tickets/\(id)",
                                                 headers: [("Authorization", "Bearer \(customer.token)"),
                                                           ("traceparent", "00-\(trace)-00f067aa0ba902b7-01"), ("tracestate", "vendor=1")])
                #expect(read.status == 200)
                let line = try #require(logs.entries.withLock { $0 }.last { $0.message == "request" && $0.metadata["trace_id"] == trace })
                #expect(line.metadata["route"] == "/v1/tickets/{id}")
                let span = try #require(line.metadata["span_id"])
                #expect(span.count == 16 && span != "00f067aa0ba902b7")
                // Desk saw the same trace, as a child of the gateway's span.
                let seen = try await httpRequest(port: app.emulator!.port, "GET", "/emulator/traces")
                let traces = try #require(try JSONSerialization.jsonObject(with: Data(seen.text.utf8)) as? [[String: Any]])
                let calls = traces.compactMap { $0["traceparent"] as? String }.filter { $0.contains(trace) }
                #expect(!calls.isEmpty, "\(traces.suffix(5))")
                for call in calls {
                    let parts = call.split(separator: "-")
                    #expect(parts.count == 4 && parts[0] == "00" && parts[3] == "01" && parts[2] != Substring(span) && parts[2].count == 16)
                }
                // Without a traceparent the gateway starts a trace of its own; a malformed one is ignored the same way.
                for header in [nil, "00-00000000000000000000000000000000-00f067aa0ba902b7-01", "junk"] as [String?] {
                    var headers = [("Authorization", "Bearer \(customer.token)")]
                    if let header { headers.append(("traceparent", header)) }
                    let before = logs.entries.withLock { $0.count }
                    #expect(try await httpRequest(port: app.port, "GET", "/v1/tickets/\(id)", headers: headers).status == 200)
                    let started = try #require(logs.entries.withLock { Array($0.dropFirst(before)) }.last { $0.message == "request" })
                    let id = try #require(started.metadata["trace_id"])
                    #expect(id.count == 32 && id != trace && id != String(repeating: "0", count: 32))
                }
            }
        }
    }
}

/// A small OTLP/HTTP receiver: keeps every export's headers and JSON body.
final class OTLPReceiver: HTTPResponder {
    let exports = Mutex<[(headers: [(name: String, value: String)], body: [UInt8])]>([])

    func respond(to request: HTTPRequest) -> HTTPReply {
        guard request.method == "POST", request.path == "/v1/traces",
              (try? JSONSerialization.jsonObject(with: Data(request.body))) is [String: Any] else {
            return .now(HTTPResponse(status: 400))
        }
        exports.withLock { $0.append((Array(request.headers), request.body)) }
        return .now(HTTPResponse(status: 200, headers: [("Content-Type", "application/json")], body: Array("{}".utf8)))
    }
    func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse { HTTPResponse(status: 413) }
    func shuttingDown(_ request: HTTPRequest) -> HTTPResponse { HTTPResponse(status: 503) }

    /// Every span received so far, with its resource's attributes.
    var spans: [(span: [String: Any], resource: [String: String])] {
        exports.withLock { $0.map(\.body) }.flatMap { bytes -> [(span: [String: Any], resource: [String: String])] in
            let body = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] ?? [:]
            return (body["resourceSpans"] as? [[String: Any]] ?? []).flatMap { resourceSpans -> [(span: [String: Any], resource: [String: String])] in
                let attributes = ((resourceSpans["resource"] as? [String: Any])?["attributes"] as? [[String: Any]]) ?? []
                var resource: [String: String] = [:]
                for attribute in attributes {
                    if let key = attribute["key"] as? String, let value = (attribute["value"] as? [String: Any])?["stringValue"] as? String {
                        resource[key] = value
                    }
                }
                let scopes = resourceSpans["scopeSpans"] as? [[String: Any]] ?? []
                return scopes.flatMap { ($0["spans"] as? [[String: Any]]) ?? [] }.map { ($0, resource) }
            }
        }
    }
}

/// Spans exported over OTLP/HTTP (JSON) to a receiver on a real socket: the request's server span continues the
/// caller's trace, each Desk call is its child with the span id the emulator received, and a receiver that goes away
/// costs spans, never requests.
@Suite struct OTLPExportTests {
    static func attributes(_ span: [String: Any]) -> [String: String] {
        var out: [String: String] = [:]
        for attribute in span["attributes"] as? [[String: Any]] ?? [] {
            guard let key = attribute["key"] as? String, let value = attribute["value"] as? [String: Any] else { continue }
            out[key] = (value["stringValue"] as? String) ?? (value["intValue"] as? String)
        }
        return out
    }

    @Test func spansReachTheReceiverAsOneTraceWithDesksCalls() async throws {
        let receiver = OTLPReceiver()
        let collector = try TestPorts.started { HTTPServer(configuration: .forTests(port: $0), responder: receiver) }
        try await TestPostgres.withDatabase { url in
            var config = TestGateway.configuration(databaseURL: url)
            config.cacheTTLSeconds = 0   // every read asks Desk
            config.rateLimitBurst = 10_000
            config.otelEndpoint = "http://127.0.0.1:\(collector.port)"
            config.otelHeaders = "x-api-key=secret%20one"
            let app = try await TestGateway.start(config)
            do {
                let customer = try await Customer.signIn(app)
                let id = try #require(try await customer.createTicket("Exported")["id"] as? Int)
                let trace = "0af7651916cd43dd8448eb211c80319c"
                let read = try await httpRequest(port: app.port, "GET", "/v1/tickets/\(id)",
                                                 headers: [("Authorization", "Bearer \(customer.token)"),
                                                           ("traceparent", "00-\(trace)-b7ad6b7169203331-01")])
                #expect(read.status == 200)
                let deadline = ContinuousClock.now + .seconds(15)
                var inTrace: [[String: Any]] = []
                while ContinuousClock.now < deadline {
                    inTrace = receiver.spans.map(\.span).filter { $0["traceId"] as? String == trace }
                    if inTrace.contains(where: { $0["kind"] as? Int == 2 }), inTrace.contains(where: { $0["kind"] as? Int == 3 }) { break }
                    try await Task.sleep(for: .milliseconds(100))
                }
                let server = try #require(inTrace.first { $0["kind"] as? Int == 2 }, "\(receiver.spans.count) spans, none of the trace's server span")
                #expect(server["name"] as? String == "GET /v1/tickets/{id}")
                #expect(server["parentSpanId"] as? String == "b7ad6b7169203331")
                #expect(Self.attributes(server)["http.response.status_code"] == "200")
                #expect(Self.attributes(server)["http.route"] == "/v1/tickets/{id}")
                let serverSpan = try #require(server["spanId"] as? String)
                let start = UInt64(server["startTimeUnixNano"] as? String ?? "") ?? 0
                let end = UInt64(server["endTimeUnixNano"] as? String ?? "") ?? 0
                #expect(start > 1_700_000_000_000_000_000 && end >= start)
                let calls = inTrace.filter { $0["kind"] as? Int == 3 }
                #expect(!calls.isEmpty && calls.allSatisfy { $0["parentSpanId"] as? String == serverSpan })
                #expect(calls.allSatisfy { Self.attributes($0)["desk.outcome"] == "ok" })
                // The emulator received each call's traceparent naming that client span.
                let seen = try await httpRequest(port: app.emulator!.port, "GET", "/emulator/traces")
                let received = try #require(try JSONSerialization.jsonObject(with: Data(seen.text.utf8)) as? [[String: Any]])
                    .compactMap { $0["traceparent"] as? String }
                for call in calls {
                    let span = try #require(call["spanId"] as? String)
                    #expect(received.contains("00-\(trace)-\(span)-01"), "\(span) not in \(received.suffix(5))")
                }
                // The resource names the service; the configured header went with every export.
                let resource = try #require(receiver.spans.first?.resource)
                #expect(resource["service.name"] == "desk-gateway" && resource["service.version"] != nil)
                let headers = receiver.exports.withLock { $0.map(\.headers) }
                #expect(headers.allSatisfy { $0.contains { $0.name == "x-api-key" && $0.value == "secret one" } })
                // Without a traceparent a trace is started (and exported) all the same.
                let before = Set(receiver.spans.compactMap { $0.span["traceId"] as? String })
                #expect(try await httpRequest(port: app.port, "GET", "/v1/tickets/\(id)",
                                              headers: [("Authorization", "Bearer \(customer.token)")]).status == 200)
                var fresh: Set<String> = []
                while ContinuousClock.now < deadline + .seconds(10), fresh.isEmpty {
                    try await Task.sleep(for: .milliseconds(100))
                    fresh = Set(receiver.spans.compactMap { $0.span["traceId"] as? String }).subtracting(before)
                }
                #expect(fresh.allSatisfy { $0.count == 32 } && !fresh.isEmpty)
                // The receiver goes away: requests are still answered, the lost spans are counted.
                await collector.stop()
                #expect(try await httpRequest(port: app.port, "GET", "/v1/tickets/\(id)",
                                              headers: [("Authorization", "Bearer \(customer.token)")]).status == 200)
                var failures = 0.0
                while ContinuousClock.now < deadline + .seconds(25), failures < 1 {
                    try await Task.sleep(for: .milliseconds(200))
                    let metrics = try await httpRequest(port: app.port, "GET", "/metrics").text
                    failures = metrics.split(separator: "\n").first { $0.hasPrefix("otlp_export_failures_total ") }
                        .flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
                }
                #expect(failures >= 1)
                let metrics = try await httpRequest(port: app.port, "GET", "/metrics").text
                #expect(metrics.contains("otlp_spans_total{outcome=\"exported\"}"))
                await app.stop()
            } catch {
                await app.stop()
                await collector.stop()
                throw error
            }
        }
    }
}
