import Domain
import DeskEmulator
import Foundation
import GatewayApp
import Postgres
import Store
import Testing
import TestSupport

/// The cache belongs to one Desk, and Desk decides who owns a ticket.
@Suite struct CacheIdentityTests {
    static func row(id: Int, customer: Int, channel: String, updatedAt: Double, title: String = "t") -> TicketRow {
        TicketRow(id: id, customerId: customer, channelUrl: channel, status: "ACTIVE", priority: "MEDIUM", title: title, teamId: nil,
                  agentId: nil, agentName: nil, agentSendbirdId: nil, customFields: "{}", createdAt: updatedAt, updatedAt: updatedAt,
                  closedAt: nil, document: #"{"id":\#(id),"title":"\#(title)"}"#, desk: "{}")
    }

    @Test func anUpsertFromDeskWithAnotherCustomerMovesTheTicket() async throws {
        try await TestPostgres.withDatabase { url in
            let database = Database.forTests(url, poolSize: 1)
            defer { database.shutdown() }
            _ = try await database.migrate(directory: TestPostgres.repositoryRoot + "/sql")
            let first: Int = try await database.query("INSERT INTO customers (sendbird_id) VALUES ('first') RETURNING id")[0].decode(0)
            let second: Int = try await database.query("INSERT INTO customers (sendbird_id) VALUES ('second') RETURNING id")[0].decode(0)
            let store = TicketStore(database: database)
            #expect(try await store.upsert([Self.row(id: 1001, customer: first, channel: "old-channel", updatedAt: 2_000_000_000)]).isEmpty)
            // Another Desk's ticket 1001: older timestamps, another customer and channel. Desk wins anyway.
            let moved = try await store.upsert([Self.row(id: 1001, customer: second, channel: "new-channel", updatedAt: 1_800_000_000, title: "theirs")])
            #expect(moved == [OwnershipChange(ticketId: 1001, previousCustomerId: first, customerId: second,
                                              previousChannelUrl: "old-channel", channelUrl: "new-channel")])
            let cached = try #require(try await store.find(id: 1001))
            #expect(cached.customerId == second)
            #expect(cached.channelUrl == "new-channel")
            #expect(cached.document.contains("theirs"))
            #expect(try await store.openCount(customerId: first) == 0)
            #expect(try await store.openCount(customerId: second) == 1)
            // A second, equal write is no change: nothing is reported again.
            #expect(try await store.upsert([Self.row(id: 1001, customer: second, channel: "new-channel", updatedAt: 1_800_000_001)]).isEmpty)
            // Another id claiming a cached channel: the stale row holding it goes, the new one is written.
            #expect(try await store.upsert([Self.row(id: 1002, customer: first, channel: "new-channel", updatedAt: 1_900_000_000)]).isEmpty)
            #expect(try await store.find(id: 1001) == nil)
            #expect(try await store.find(channelUrl: "new-channel")?.id == 1002)
        }
    }

    @Test func aSecondDeskIsRefusedUntilTheCacheIsReset() async throws {
        try await withTwoDesks { deskA, deskB, url in
            try await TestGateway.running(gatewayConfig(database: url, desk: deskA)) { first in
                let customer = try await Customer.signIn(first)
                _ = try await customer.createTicket("kept until the reset")
                try await first.database.query("""
                    INSERT INTO csat_ratings (ticket_id, message_id, score, agent_id, team_id, channel_type, priority, customer_sendbird_id, rated_at, source)
                    VALUES (1, 1, 5, 501, 11, 'SENDBIRD', 'MEDIUM', 'demo-customer', now(), 'gateway')
                    """)
            }

            let error = await #expect(throws: DeskIdentityMismatch.self) {
                _ = try await TestGateway.start(gatewayConfig(database: url, desk: deskB))
            }
            #expect(error?.recorded == "\(deskA.baseURL) (app emulated-app)")
            #expect(error?.configured == "\(deskB.baseURL) (app emulated-app)")
            #expect(error?.description.contains("desk-gateway cache reset") == true)

            let database = Database.forTests(url, poolSize: 1)
            // A write the gateway acknowledged and a webhook it accepted, both still to be carried out: the reset
            // refuses and changes nothing, unless told to discard them.
            try await database.query("""
                INSERT INTO outbox (ticket_id, customer_id, session_id, kind, payload)
                SELECT 1, customer_id, id, 'close', '{}' FROM sessions LIMIT 1
                """)
            try await database.query("INSERT INTO webhook_events (dedupe_key, event_type, body) VALUES ('pending-1', 'ticket.closed', '{}')")
            let refused = await #expect(throws: PendingDeskWork.self) { _ = try await resetCache(database, discardingPending: false) }
            #expect(refused == PendingDeskWork(writes: 1, events: 1))
            #expect(try await database.query("SELECT count(*) FROM tickets")[0].decode(0, as: Int.self) == 1)
            #expect(try await database.query("SELECT count(*) FROM outbox")[0].decode(0, as: Int.self) == 1)
            let summary = try await resetCache(database, discardingPending: true)
            #expect(summary.discarded == PendingDeskWork(writes: 1, events: 1))
            #expect(summary.counts.first { $0.table == "tickets" }?.rows == 1)
            #expect(try await database.query("SELECT count(*) FROM csat_ratings")[0].decode(0, as: Int.self) == 1)
            database.shutdown()
            try await TestGateway.running(gatewayConfig(database: url, desk: deskB)) { second in
                let recorded: String = try await second.database.query("SELECT value FROM gateway_settings WHERE key = 'desk_identity'")[0].decode(0)
                #expect(recorded == "\(deskB.baseURL) (app emulated-app)")
            }
        }
    }

    @Test func theResetSettingLetsAnotherDeskStart() async throws {
        try await withTwoDesks { deskA, deskB, url in
            try await TestGateway.running(gatewayConfig(database: url, desk: deskA)) { _ in }
            var config = gatewayConfig(database: url, desk: deskB)
            config.cacheResetOnDeskChange = true
            try await TestGateway.running(config) { app in
                let recorded: String = try await app.database.query("SELECT value FROM gateway_settings WHERE key = 'desk_identity'")[0].decode(0)
                #expect(recorded == "\(deskB.baseURL) (app emulated-app)")
            }
        }
    }

    /// The embedded emulator keeps its world in the gateway's database: a second start on the same database goes on
    /// handing out ids where the first stopped.
    @Test func theEmbeddedEmulatorResumesFromTheDatabase() async throws {
        try await TestPostgres.withDatabase { url in
            let config = TestGateway.configuration(databaseURL: url)
            let (id, instance) = try await TestGateway.running(config) { first in
                let customer = try await Customer.signIn(first)
                return (try #require(try await customer.createTicket("before the restart")["id"] as? Int),
                        try #require(first.emulator?.instanceId))
            }

            try await TestGateway.running(config) { second in
                #expect(second.emulator?.instanceId == instance)
                let again = try await Customer.signIn(second)
                let next = try #require(try await again.createTicket("after the restart")["id"] as? Int)
                #expect(next == id + 1)
                let old = try await again.send("GET", "/v1/tickets/\(id)")
                #expect(old.status == 200)
            }
        }
    }
}

/// Two emulators outside the gateway and a fresh database; both emulators are stopped afterwards, also when `body` throws.
private func withTwoDesks(_ body: (DeskEmulator, DeskEmulator, String) async throws -> Void) async throws {
    try await withEmulator { deskA in
        try await withEmulator { deskB in try await TestPostgres.withDatabase { url in try await body(deskA, deskB, url) } }
    }
}
