import Domain
import Foundation
import GatewayApp
import Postgres
import Store
import Testing
import TestSupport

/// The cache writes that race in production (a create and its TICKET.CREATED webhook; list refreshes and webhooks
/// naming the same agents in other orders), run concurrently in a loop against a real PostgreSQL.
@Suite struct ConcurrentWriteTests {
    static func row(_ id: Int, customer: Int, agent: Int?, agentName: String = "Ada", updatedAt: Double) -> TicketRow {
        TicketRow(id: id, customerId: customer, channelUrl: "sendbird_desk_emulated-app_\(id)_x", status: "ACTIVE", priority: "LOW",
                  title: "t\(id)", teamId: nil, agentId: agent, agentName: agentName, agentSendbirdId: nil, customFields: "{}",
                  createdAt: 1_700_000_000, updatedAt: updatedAt, closedAt: nil, document: "{\"id\":\(id)}", desk: "{}")
    }

    static func withStores(_ body: (TicketStore, TicketStore, Database) async throws -> Void) async throws {
        try await TestPostgres.withDatabase { url in
            // Generous waits: the whole suite runs in parallel on two cores, and a refused connection is not the point.
            let first = Database(connectionString: url, poolSize: 2, connectTimeoutSeconds: 30, statementTimeoutMilliseconds: TestLimits.statementTimeoutMilliseconds,
                                 acquireTimeoutMilliseconds: 30_000, transactionPooling: false)
            let second = Database(connectionString: url, poolSize: 2, connectTimeoutSeconds: 30, statementTimeoutMilliseconds: TestLimits.statementTimeoutMilliseconds,
                                 acquireTimeoutMilliseconds: 30_000, transactionPooling: false)
            defer { first.shutdown(); second.shutdown() }
            _ = try await first.migrate(directory: TestPostgres.repositoryRoot + "/sql")
            try await first.query("INSERT INTO customers (id, sendbird_id) VALUES (1, 'c-1')")
            try await body(TicketStore(database: first), TicketStore(database: second), first)
        }
    }

    @Test func aTicketWrittenByTwoPathsAtOnceIsOneRowAndNoError() async throws {
        try await Self.withStores { create, webhook, database in
            for id in 1...60 {
                // The create's answer and the webhook of the same creation, a millisecond apart in Desk's clock.
                async let a = create.upsert([Self.row(id, customer: 1, agent: nil, updatedAt: 1_700_000_000)])
                async let b = webhook.upsert([Self.row(id, customer: 1, agent: nil, updatedAt: 1_700_000_000.001)])
                _ = try await (a, b)
            }
            let rows: Int = try await database.query("SELECT count(*) FROM tickets")[0].decode(0)
            #expect(rows == 60)
            let newest: Int = try await database.query("SELECT count(*) FROM tickets WHERE updated_at = to_timestamp(1700000000.001)")[0].decode(0)
            #expect(newest == 60)
        }
    }

    /// The order the soak saw, end to end and made certain: Desk creates the ticket and sends TICKET.CREATED at once
    /// but holds its answer (`answerDelayMs`), so the webhook's row is in the cache before the create's own write. The
    /// customer still gets the 201 with the ticket, and the cache holds one row for it. (The two inserts meeting in
    /// the unique indexes at the same instant is the loop above.)
    @Test func aCreateOvertakenByItsOwnWebhookIsStillCreated() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let held = 5_000
            try await agent.post("/faults", #"{"answerDelayMs":\#(held)}"#)
            let started = ContinuousClock.now
            async let created = customer.send("POST", "/v1/tickets", #"{"title":"Overtaken","userName":"Demo"}"#)
            // Seen before `held` has passed since the request left, the row can only be the webhook's.
            var webhookRow: Int?
            while webhookRow == nil, ContinuousClock.now - started < .milliseconds(held - 1_000) {
                webhookRow = try await app.database.query("SELECT id FROM tickets WHERE title = 'Overtaken'").first?.decode(0)
                if webhookRow == nil { try await Task.sleep(for: .milliseconds(20)) }
            }
            let response = try await created
            try await agent.post("/faults", "{}")
            #expect(webhookRow != nil, "the webhook was not applied while Desk held its answer")
            #expect(response.status == 201, "\(response.text)")
            let id = try #require(response.json?["id"] as? Int)
            #expect(id == webhookRow)
            let rows: Int = try await app.database.query("SELECT count(*) FROM tickets WHERE id = $1", [id])[0].decode(0)
            #expect(rows == 1)
            let read = try await customer.send("GET", "/v1/tickets/\(id)")
            #expect(read.status == 200 && read.json?["title"] as? String == "Overtaken", "\(read.text)")
        }
    }

    @Test func writersNamingTheSameAgentsInOtherOrdersNeitherDeadlockNorFail() async throws {
        try await Self.withStores { first, second, database in
            for round in 0..<40 {
                let at = 1_700_000_000 + Double(round)
                // Each side renames both agents (so their rows really change), in opposite orders of ticket id.
                async let a = first.upsert([Self.row(1, customer: 1, agent: 501, agentName: "Ada \(round)", updatedAt: at),
                                            Self.row(2, customer: 1, agent: 502, agentName: "Bob \(round)", updatedAt: at)])
                async let b = second.upsert([Self.row(3, customer: 1, agent: 502, agentName: "Bob \(round)x", updatedAt: at),
                                             Self.row(4, customer: 1, agent: 501, agentName: "Ada \(round)x", updatedAt: at)])
                _ = try await (a, b)
            }
            let agents: Int = try await database.query("SELECT count(*) FROM agents")[0].decode(0)
            #expect(agents == 2)
            // Not merely retried: PostgreSQL saw no deadlock at all (its statistics arrive within a second).
            try await Task.sleep(for: .milliseconds(1500))
            try await database.query("SELECT pg_stat_clear_snapshot()")
            let deadlocks: Int = try await database.query("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")[0].decode(0)
            #expect(deadlocks == 0)
        }
    }
}
