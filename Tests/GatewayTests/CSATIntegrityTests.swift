import Domain
import Foundation
import GatewayApp
import Postgres
import Store
import Testing
import TestSupport

/// One customer cannot touch another's CSAT results, and the report follows Desk's final answer.
@Suite struct CSATIntegrityTests {
    static func ratings(_ app: GatewayApplication, ticket: Int) async throws -> [(score: Int?, source: String)] {
        try await app.pool.query("SELECT score, source FROM csat_ratings WHERE ticket_id = $1 ORDER BY id", [ticket]).map {
            (try $0.decodeIfPresent(0), try $0.decode(1))
        }
    }

    /// Waits until the CSAT request Desk sent reaches the gateway (webhook).
    static func waitForRequest(_ app: GatewayApplication, ticket: Int, message: Int) async throws {
        for _ in 0..<100 {
            let seen = try await app.pool.query("SELECT 1 FROM csat_requests WHERE ticket_id = $1 AND message_id = $2", [ticket, message])
            if !seen.isEmpty { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("the CSAT request \(message) of ticket \(ticket) never arrived")
    }

    /// Responses and each score's count from the UTC one-day blocks, against the same counted from the raw ratings.
    static func rollupsMatchRawRatings(_ app: GatewayApplication) async throws {
        let rollups = try await app.pool.query("""
            SELECT coalesce(sum(responses), 0)::bigint, coalesce(sum(s1), 0)::bigint, coalesce(sum(s2), 0)::bigint, coalesce(sum(s3), 0)::bigint,
                   coalesce(sum(s4), 0)::bigint, coalesce(sum(s5), 0)::bigint
              FROM csat_blocks WHERE level = 0 AND zone_id = (SELECT id FROM report_zones WHERE zone = 'UTC')
            """)[0]
        let raw = try await app.pool.query("""
            SELECT count(*), count(*) FILTER (WHERE score = 1), count(*) FILTER (WHERE score = 2), count(*) FILTER (WHERE score = 3),
                   count(*) FILTER (WHERE score = 4), count(*) FILTER (WHERE score = 5) FROM csat_ratings
            """)[0]
        for column in 0..<6 {
            #expect(try rollups.decode(column, as: Int.self) == raw.decode(column, as: Int.self), "column \(column)")
        }
    }

    @Test func declinesAndFeedbackForTicketsThatAreNotTheCallersRecordNothing() async throws {
        try await withGateway { app in
            let owner = try await Customer.signIn(app)
            let other = try await Customer.signIn(app, user: "demo-customer-2", accessToken: "demo-token-2")
            let agent = DeskAgent(app)
            let id = try #require(try await owner.createTicket("Rated by its owner only")["id"] as? Int)
            try await agent.activate(id)
            try await agent.post("/tickets/\(id)/close")
            let csat = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
            try await Self.waitForRequest(app, ticket: id, message: csat)

            // Another customer: the ticket's id, with the real CSAT message, declined or rated.
            for body in [#"{"messageId":\#(csat),"score":null,"comment":null}"#, #"{"messageId":\#(csat),"score":1,"comment":"x"}"#] {
                let response = try await other.send("POST", "/v1/tickets/\(id)/feedback", body)
                #expect(response.status == 404, "\(response.text)")
            }
            // Ids the gateway has never cached (Desk does not know them either).
            for unknown in [999_999, id + 1000] {
                let response = try await other.send("POST", "/v1/tickets/\(unknown)/feedback", #"{"messageId":\#(csat),"score":null,"comment":null}"#)
                #expect(response.status == 404, "\(response.text)")
            }
            // The owner with made-up message ids: a decline is refused outright, a rating by Desk.
            let madeUpDecline = try await owner.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":123456,"score":null,"comment":null}"#)
            #expect(madeUpDecline.status == 422, "\(madeUpDecline.text)")
            let madeUpRating = try await owner.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":123457,"score":5,"comment":null}"#)
            #expect(madeUpRating.status >= 400 && madeUpRating.status < 500, "\(madeUpRating.text)")
            #expect(try await Self.ratings(app, ticket: id).isEmpty)
            #expect(try await app.pool.query("SELECT count(*) FROM csat_ratings")[0].decode(0, as: Int.self) == 0)

            // The real answer still counts afterwards.
            let rated = try await owner.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":4,"comment":"ok"}"#)
            #expect(rated.status == 200, "\(rated.text)")
            let recorded = try await Self.ratings(app, ticket: id)
            #expect(recorded.count == 1 && recorded.first?.score == 4, "\(recorded)")
        }
    }

    /// The customer declines right after Desk sent the CSAT request, before its webhook has reached the gateway
    /// (webhooks held back here): the gateway asks Desk for the ticket's messages instead of refusing.
    @Test func aDeclineBeforeTheRequestsWebhookIsConfirmedWithDesk() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let id = try #require(try await customer.createTicket("Quick decline")["id"] as? Int)
            try await agent.activate(id)
            try await agent.post("/tickets/\(id)/close")
            try await agent.post("/webhooks", #"{"urls":[],"secret":"held"}"#)
            let csat = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
            let known = try await app.pool.query("SELECT 1 FROM csat_requests WHERE ticket_id = $1", [id])
            #expect(known.isEmpty)
            let declined = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":null,"comment":"no thanks"}"#)
            #expect(declined.status == 200, "\(declined.text)")
            #expect(try await Self.ratings(app, ticket: id).map(\.score) == [nil])
            let requests: Int = try await app.pool.query("SELECT count(*) FROM csat_requests WHERE ticket_id = $1 AND message_id = $2", [id, csat])[0].decode(0)
            #expect(requests == 1)
            // A message id Desk does not hold as this ticket's CSAT request is still refused.
            let madeUp = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat + 1000),"score":null,"comment":null}"#)
            #expect(madeUp.status == 422, "\(madeUp.text)")
        }
    }

    @Test func aDeclineFollowedByARatingEndsAtDesksScore() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let id = try #require(try await customer.createTicket("Declined, then rated")["id"] as? Int)
            try await agent.activate(id)
            try await agent.post("/tickets/\(id)/close")
            let csat = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
            try await Self.waitForRequest(app, ticket: id, message: csat)
            let declined = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":null,"comment":null}"#)
            #expect(declined.status == 200, "\(declined.text)")
            #expect(try await Self.ratings(app, ticket: id).map(\.score) == [nil])
            let rated = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":5,"comment":"changed my mind"}"#)
            #expect(rated.status == 200, "\(rated.text)")
            // One response, now Desk's 5 (the webhook of the same answer changes nothing more).
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await Self.ratings(app, ticket: id).map(\.score) == [5])
            let reporter = try await reporter(app)
            let report = try await reporter.get("")
            let totals = report.json?["totals"] as? [String: Any]
            #expect(totals?["responses"] as? Int == 1, "\(report.text)")
            #expect(totals?["averageScore"] as? Double == 5, "\(report.text)")
            try await Self.rollupsMatchRawRatings(app)
        }
    }

    @Test func laterAnswersReplaceEarlierOnesInEveryRollup() async throws {
        try await withGateway(configure: { $0.reportTimeZones = ["UTC", "Asia/Kolkata"] }) { app in
            let store = CSATStore(pool: app.pool)
            let base = Date().timeIntervalSince1970 - 86_400 * 3
            func answer(_ ticket: Int, _ score: Int?, at offset: Double, source: RatingSource = .webhook) async throws -> Bool {
                try await store.record(RatingRecord(ticketId: ticket, messageId: 7, score: score, comment: score.map { "s\($0)" }, agentId: 501,
                                                    teamId: 11, channelType: "SENDBIRD", priority: .high, customerSendbirdId: "c",
                                                    ratedAt: base + offset, source: source))
            }
            #expect(try await answer(1, 3, at: 0))
            #expect(try await answer(1, 5, at: 60))            // rate, then change: Desk ends at 5
            #expect(!(try await answer(1, 2, at: 30)))          // an older answer arriving late changes nothing
            #expect(!(try await answer(1, 5, at: 90, source: .sync)))   // the same answer seen again changes nothing
            #expect(try await answer(2, nil, at: 0))
            #expect(try await answer(2, 1, at: 86_400 * 2))     // a decline, then a rating two days later: the response moves day
            #expect(try await Self.ratings(app, ticket: 1).map(\.score) == [5])
            #expect(try await Self.ratings(app, ticket: 2).map(\.score) == [1])
            try await Self.rollupsMatchRawRatings(app)
            // Every level and both zones hold exactly one response per ticket, with the final scores.
            let levels = try await app.pool.query("""
                SELECT z.zone, b.level, sum(b.responses)::bigint, sum(b.s5)::bigint, sum(b.s1)::bigint, sum(b.s3)::bigint
                  FROM csat_blocks b JOIN report_zones z ON z.id = b.zone_id GROUP BY 1, 2 ORDER BY 1, 2
                """)
            #expect(levels.count == 20)
            for row in levels.rows {
                #expect(try row.decode(2, as: Int.self) == 2 && row.decode(3, as: Int.self) == 1 && row.decode(4, as: Int.self) == 1
                        && row.decode(5, as: Int.self) == 0, "\(row)")
            }
            let detail: Int = try await app.pool.query("SELECT sum(responses)::bigint FROM csat_detail_blocks WHERE level = 9")[0].decode(0)
            #expect(detail == 4)   // two zones × two responses
        }
    }
}
