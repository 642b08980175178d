import DeskEmulator
import Foundation
import GatewayApp
import Logging
import Synchronization
import Testing
import TestSupport

/// Log lines kept in memory, with their metadata, for a test to read.
final class CapturedLogs: Sendable {
    let entries = Mutex<[(message: String, metadata: [String: String])]>([])

    var logger: Logger {
        var logger = Logger(label: "captured") { _ in CapturingHandler(logs: self) }
        logger.logLevel = .info
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
            logs.entries.withLock { $0.append(("\(event.message)", flat)) }
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
            let app = try await TestGateway.start(config, logger: logs.logger)
            do {
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
                await app.stop()
            } catch {
                await app.stop()
                throw error
            }
        }
    }
}
