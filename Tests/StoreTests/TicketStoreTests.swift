import Domain
import Store
import Testing
import TestSupport

/// Which ticket state wins, as the ticket cache's upsert keeps it in SQL: an older state never overwrites a newer one,
/// whatever order the writes come in; Desk's customer and channel win whatever the timestamps say.
@Suite struct TicketStoreTests {
    static func row(_ id: Int, customer: Int, channel: String = "channel-1", status: String, updatedAt: Double) -> TicketRow {
        TicketRow(id: id, customerId: customer, channelUrl: channel, status: status, priority: "MEDIUM", title: "t", teamId: nil,
                  agentId: 7, agentName: "Agent \(Int(updatedAt))", agentSendbirdId: nil, customFields: "{}", createdAt: 1_000,
                  updatedAt: updatedAt, closedAt: nil, document: #"{"status":"\#(status)"}"#, desk: "{}")
    }

    @Test func anOlderStateNeverOverwritesANewerOneInEitherOrder() async throws {
        try await withStore { db in
            let (customer, _) = try await customerWithSession(db)
            let store = TicketStore(database: db)
            let newer = Self.row(1, customer: customer, status: "CLOSED", updatedAt: 2_000)
            let older = Self.row(1, customer: customer, status: "ACTIVE", updatedAt: 1_500)
            for order in [[newer, older], [older, newer]] {
                try await db.query("DELETE FROM tickets")
                for row in order { try await store.upsert([row]) }
                #expect(try await store.find(id: 1)?.status == "CLOSED")
            }
            // The same time again is written (a refresh of the same state), a later one too.
            try await store.upsert([Self.row(1, customer: customer, status: "CLOSED", updatedAt: 2_000)])
            try await store.upsert([Self.row(1, customer: customer, status: "ACTIVE", updatedAt: 2_500)])
            #expect(try await store.find(id: 1)?.status == "ACTIVE")
        }
    }

    @Test func desksCustomerAndChannelWinWhateverTheTimestamps() async throws {
        try await withStore { db in
            let (first, _) = try await customerWithSession(db, sendbirdId: "first")
            let (second, _) = try await customerWithSession(db, sendbirdId: "second")
            let store = TicketStore(database: db)
            try await store.upsert([Self.row(1, customer: first, status: "ACTIVE", updatedAt: 2_000)])
            // An older state naming another customer: ownership moves, and the change is reported.
            let changes = try await store.upsert([Self.row(1, customer: second, status: "ACTIVE", updatedAt: 1_000)])
            #expect(changes.count == 1 && changes.first?.previousCustomerId == first && changes.first?.customerId == second)
            #expect(try await store.find(id: 1)?.customerId == second)
            // Another ticket taking the same channel drops the row that held it.
            try await store.upsert([Self.row(2, customer: second, channel: "channel-1", status: "PENDING", updatedAt: 3_000)])
            #expect(try await store.find(id: 1) == nil)
            #expect(try await store.find(channelUrl: "channel-1")?.id == 2)
        }
    }
}
