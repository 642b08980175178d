import Foundation
import GatewayApp
import Testing
import TestSupport

/// The housekeeping loop in a running gateway (the retention rules themselves: StoreTests' HousekeepingStoreTests).
@Suite struct HousekeepingTests {
    @Test func theGatewayLoopRemovesExpiredSessionsAndShowsItsMetrics() async throws {
        try await withGateway(configure: { $0.housekeepingIntervalSeconds = 1 }) { app in
            _ = try await RetentionSeed.seed(app.database, scale: 10)
            let deadline = ContinuousClock.now + .seconds(20)
            var metrics = ""
            while ContinuousClock.now < deadline {
                metrics = try await httpRequest(port: app.port, "GET", "/metrics").text
                if metrics.contains(#"housekeeping_rows_removed_total{table="sessions"} 20"#) { break }
                try await Task.sleep(for: .milliseconds(200))
            }
            #expect(metrics.contains(#"housekeeping_rows_removed_total{table="sessions"} 20"#), "\(metrics.split(separator: "\n").filter { $0.contains("housekeeping") })")
            #expect(metrics.contains(#"housekeeping_oldest_row_age_seconds{table="webhook_events_unapplied"}"#))
            #expect(metrics.contains(#"housekeeping_retention_seconds{table="outbox"} 1209600"#))
            #expect(metrics.contains(#"housekeeping_retention_seconds{table="idempotency_keys"} 86400"#))
            #expect(metrics.contains("housekeeping_last_run_timestamp_seconds"))
            let expired: Int = try await app.database.query("SELECT count(*) FROM sessions WHERE expires_at < now() - interval '1 day' AND id NOT IN (SELECT session_id FROM outbox)")[0].decode(0)
            #expect(expired == 0)
        }
    }
}

/// Memory that follows callers: many customers come once, and what the gateway keeps for them drains away.
@Suite struct BoundedMemoryTests {
    static func gauge(_ metrics: String, _ name: String, _ structure: String) -> Double? {
        let prefix = "\(name){structure=\"\(structure)\"} "
        return metrics.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { Double($0.dropFirst(prefix.count)) }
    }

    @Test func manyOneTimeCustomersLeaveBoundedState() async throws {
        try await withGateway(configure: {
            $0.sessionCacheSeconds = 1
            $0.signInBurst = 10_000
            $0.signInPerMinute = 100_000
        }) { app in
            let desk = DeskAgent(app)
            var customers: [Customer] = []
            for index in 0..<200 {
                try await desk.post("/customers", #"{"sendbirdId":"once-\#(index)","accessToken":"t-\#(index)","displayName":"C\#(index)"}"#)
                let customer = try await Customer.signIn(app, user: "once-\(index)", accessToken: "t-\(index)")
                #expect(try await customer.send("GET", "/v1/tickets/open-count").status == 200)
                customers.append(customer)
            }
            let busy = try await httpRequest(port: app.port, "GET", "/metrics").text
            let sessions = try #require(Self.gauge(busy, "customer_memory_entries", "sessions"))
            #expect(sessions > 0 && sessions <= 200, "\(sessions)")
            #expect(try #require(Self.gauge(busy, "memory_entries", "rate_limit_buckets")) <= 400)
            // Past SESSION_CACHE_S the next session stored sweeps the expired ones out.
            try await Task.sleep(for: .milliseconds(2100))
            _ = try await Customer.signIn(app)
            let quiet = try await httpRequest(port: app.port, "GET", "/metrics").text
            #expect(try #require(Self.gauge(quiet, "customer_memory_entries", "sessions")) <= 2)
        }
    }
}
