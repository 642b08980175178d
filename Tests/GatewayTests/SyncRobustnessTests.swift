import DeskEmulator
import Foundation
import GatewayApp
import JSON
import Postgres
import Testing
import TestSupport

/// A sync against a Desk that answers badly: broken message lists, HTML, missing `results`, rate limits.
@Suite struct SyncRobustnessTests {
    /// A closed ticket with an answered CSAT request, rated straight on Desk (no webhook: the sync must find it).
    static func ratedTicket(_ app: GatewayApplication, _ customer: Customer, index: Int, score: Int) async throws -> Int {
        let deskPort = app.emulator!.port
        let (ticket, message) = try await waitingMessage(customer, deskPort: deskPort, csat: true, index: index)
        try await rateOnDesk(deskPort: deskPort, ticket: ticket, message: message, score: score, comment: "")
        return ticket
    }

    static func ratings(_ app: GatewayApplication) async throws -> [Int: [Int]] {
        var result: [Int: [Int]] = [:]
        for row in try await app.database.query("SELECT ticket_id, message_id FROM csat_ratings ORDER BY ticket_id, message_id") {
            result[try row.decode(0), default: []].append(try row.decode(1))
        }
        return result
    }

    @Test func badMessageListsAndRateLimitsNeitherStopNorLose() async throws {
        try await withGateway(configure: { $0.syncRequestsPerSecond = 50; $0.deskBreakerCooldownSeconds = 1 }) { app in
            let emulator = try #require(app.emulator)
            // Webhooks off: only the sync can tell the gateway about these ratings.
            emulator.setWebhooks(urls: [], secret: "")
            let customer = try await Customer.signIn(app)
            var tickets: [Int] = []
            for index in 0..<5 { tickets.append(try await Self.ratedTicket(app, customer, index: index, score: 1 + index)) }
            emulator.setMessageFault(ticketId: tickets[0], "500")
            emulator.setMessageFault(ticketId: tickets[1], "html")
            emulator.setMessageFault(ticketId: tickets[2], "no-results")
            // And the Platform API rate-limits the first requests.
            emulator.setFaults(EmulatorFaults(rateLimitNext: 4))

            let first = try await app.sync.run()
            #expect(!first.skipped)
            #expect(first.tickets == 5, "\(first)")
            #expect(first.failedTickets == 3, "\(first)")
            // Every 429 counts, those the client retried by itself included.
            #expect(first.rateLimited == 4, "\(first)")
            #expect(emulator.rateLimitedCount == 4)
            var recorded = try await Self.ratings(app)
            // Every ticket's rating is counted: by message where Desk gave the messages, from the ticket's own
            // fields where it did not (the ticket-level rating, message 0).
            #expect(recorded.keys.sorted() == tickets.sorted(), "\(recorded)")
            for ticket in tickets[3...] { #expect(recorded[ticket]?.count == 1 && recorded[ticket]?[0] != 0, "\(ticket): \(recorded)") }
            for ticket in tickets[..<3] { #expect(recorded[ticket] == [0], "\(ticket): \(recorded)") }

            // Desk heals; the next run reads the three again and the message-level ratings replace the ticket-level ones.
            for ticket in tickets[..<3] { emulator.setMessageFault(ticketId: ticket, nil) }
            let second = try await app.sync.run()
            #expect(second.failedTickets == 0, "\(second)")
            recorded = try await Self.ratings(app)
            #expect(recorded.keys.sorted() == tickets.sorted())
            for ticket in tickets { #expect(recorded[ticket]?.count == 1 && recorded[ticket]?[0] != 0, "\(ticket): \(recorded)") }
            try await CSATIntegrityTests.rollupsMatchRawRatings(app)
            let reporter = try await reporter(app)
            let report = try JSONParser.parse(try await reporter.get("?groupBy=team").body)
            #expect(report["totals"]?["responses"]?.intValue == 5, "\(report)")
            // The incremental window uses the documented dates: synced through today.
            let through: String = try await app.database.query("SELECT value FROM sync_state WHERE name = 'tickets.synced_through'")[0].decode(0)
            #expect(through.count == 10 && through.hasPrefix("20"))
        }
    }
}
