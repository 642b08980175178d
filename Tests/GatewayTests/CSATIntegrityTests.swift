import Domain
import Foundation
import GatewayApp
import Postgres
import Reports
import Store
import Synchronization
import Testing
import TestSupport

/// One customer cannot touch another's CSAT results, and the report follows Desk's final answer.
@Suite struct CSATIntegrityTests {
    static func ratings(_ app: GatewayApplication, ticket: Int) async throws -> [(score: Int?, source: String)] {
        try await app.database.query("SELECT score, source FROM csat_ratings WHERE ticket_id = $1 ORDER BY id", [ticket]).map {
            (try $0.decodeIfPresent(0), try $0.decode(1))
        }
    }

    /// A ticket of `customer`'s, worked on, closed and sent a CSAT request that the gateway has seen.
    static func closedAndAsked(_ app: GatewayApplication, _ customer: Customer, _ title: String) async throws -> (id: Int, csat: Int) {
        let agent = DeskAgent(app)
        let id = try await closed(app, customer, title)
        let csat = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
        try await waitForRequest(app, ticket: id, message: csat)
        return (id, csat)
    }

    /// A ticket of `customer`'s, worked on by an agent and closed.
    static func closed(_ app: GatewayApplication, _ customer: Customer, _ title: String) async throws -> Int {
        let agent = DeskAgent(app)
        let id = try #require(try await customer.createTicket(title)["id"] as? Int)
        try await agent.activate(id)
        try await agent.post("/tickets/\(id)/close")
        return id
    }

    /// Waits until the CSAT request Desk sent reaches the gateway (webhook).
    static func waitForRequest(_ app: GatewayApplication, ticket: Int, message: Int) async throws {
        for _ in 0..<100 {
            let seen = try await app.database.query("SELECT 1 FROM csat_requests WHERE ticket_id = $1 AND message_id = $2", [ticket, message])
            if !seen.isEmpty { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("the CSAT request \(message) of ticket \(ticket) never arrived")
    }

    /// Responses and each score's count from the UTC one-day blocks, against the same counted from the raw ratings.
    static func rollupsMatchRawRatings(_ app: GatewayApplication) async throws {
        let rollups = try await app.database.query("""
            SELECT coalesce(sum(responses), 0)::bigint, coalesce(sum(s1), 0)::bigint, coalesce(sum(s2), 0)::bigint, coalesce(sum(s3), 0)::bigint,
                   coalesce(sum(s4), 0)::bigint, coalesce(sum(s5), 0)::bigint
              FROM csat_blocks WHERE level = 0 AND zone_id = (SELECT id FROM report_zones WHERE zone = 'UTC')
            """)[0]
        let raw = try await app.database.query("""
            SELECT count(*), count(*) FILTER (WHERE score = 1), count(*) FILTER (WHERE score = 2), count(*) FILTER (WHERE score = 3),
                   count(*) FILTER (WHERE score = 4), count(*) FILTER (WHERE score = 5) FROM csat_ratings
            """)[0]
        for column in 0..<6 {
            #expect(try rollups.decode(column, as: Int.self) == raw.decode(column, as: Int.self), "column \(column)")
        }
    }

    /// Waits until every stored webhook event has been applied.
    static func waitForInbox(_ app: GatewayApplication) async throws {
        for _ in 0..<100 {
            let pending: Int = try await app.database.query("SELECT count(*) FROM webhook_events WHERE status = 'pending'")[0].decode(0)
            if pending == 0 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("the webhook inbox never drained")
    }

    /// Responses per agent and team from the UTC one-day blocks, against the same counted from the raw ratings.
    static func rollupsMatchRawRatingsByAgent(_ app: GatewayApplication) async throws {
        let difference: Int = try await app.database.query("""
            WITH rollup AS (SELECT agent_id, team_id, sum(responses)::bigint AS n, sum(s5)::bigint AS s5 FROM csat_blocks
                             WHERE level = 0 AND zone_id = (SELECT id FROM report_zones WHERE zone = 'UTC') GROUP BY 1, 2
                            HAVING sum(responses) <> 0),
                 raw AS (SELECT coalesce(agent_id, 0) AS agent_id, coalesce(team_id, 0) AS team_id, count(*) AS n,
                                count(*) FILTER (WHERE score = 5) AS s5 FROM csat_ratings GROUP BY 1, 2)
            SELECT count(*) FROM (SELECT * FROM rollup EXCEPT SELECT * FROM raw UNION ALL (SELECT * FROM raw EXCEPT SELECT * FROM rollup)) x
            """)[0].decode(0)
        #expect(difference == 0)
    }

    /// A rating Desk took while the database could not store it (the CSAT writers held, as a zone backfill holds
    /// them, past the statement timeout) is tried again until it is stored, on the agent Desk names; it had been left
    /// to Desk's webhook or the sync, and was missing from the reports where neither came.
    @Test func aDeliveredRatingTheDatabaseCouldNotStoreIsStoredLater() async throws {
        try await withGateway(configure: { $0.dbStatementTimeoutMilliseconds = 2000; $0.outboxMaxBackoffSeconds = 1 }) { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let (id, csat) = try await Self.closedAndAsked(app, customer, "Rated while the writers wait")
            // Desk's webhooks held back: the rating has only the gateway's own path.
            try await agent.post("/webhooks", #"{"urls":[],"secret":"held"}"#)
            let control = Database.forTests(app.config.databaseURL ?? "", poolSize: 1)
            defer { control.shutdown() }
            try await control.query("SELECT pg_advisory_lock($1)", [CSATStore.zoneLock])
            let answer = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":2,"comment":"slow"}"#)
            #expect(answer.status == 202, "\(answer.status) \(answer.text)")
            #expect((answer.json?["reason"] as? String)?.hasPrefix("database_unavailable") == true, "\(answer.text)")
            #expect(try await Self.ratings(app, ticket: id).isEmpty)
            try await control.query("SELECT pg_advisory_unlock($1)", [CSATStore.zoneLock])
            var recorded: [(score: Int?, source: String)] = []
            for _ in 0..<100 where recorded.isEmpty {
                try await Task.sleep(for: .milliseconds(100))
                recorded = try await Self.ratings(app, ticket: id)
            }
            #expect(recorded.map(\.score) == [2], "\(recorded)")
            // The relay books the operation after it has stored the rating, in a transaction of its own: polled too.
            var operation = try await customer.send("GET", "/v1/operations/\(answer.json?["id"] as? Int ?? 0)")
            for _ in 0..<50 where operation.json?["status"] as? String != "delivered" {
                try await Task.sleep(for: .milliseconds(100))
                operation = try await customer.send("GET", "/v1/operations/\(answer.json?["id"] as? Int ?? 0)")
            }
            #expect(operation.json?["status"] as? String == "delivered", "\(operation.text)")
            // On the agent and team of Desk's CSAT request, as an answer delivered at once is.
            let attributed = try await app.database.query("""
                SELECT r.agent_id IS NOT NULL AND r.agent_id = q.agent_id AND r.team_id IS NOT DISTINCT FROM q.team_id
                  FROM csat_ratings r JOIN csat_requests q USING (ticket_id, message_id) WHERE r.ticket_id = $1
                """, [id])
            #expect(try attributed.first?.decode(0, as: Bool.self) == true)
            try await Self.rollupsMatchRawRatings(app)
        }
    }

    /// Desk's CSAT events that arrive while a zone backfill holds the CSAT writers wait for it in the inbox: each pass
    /// had waited for the zone lock until the statement timeout and spent one of the event's ten tries, so a backfill
    /// longer than ten timeouts left the event `failed` and its request or rating out of the reports. The wait here is
    /// two timeouts long: tries spent at all are the defect.
    @Test func webhookEventsWaitOutAZoneBackfillWithoutSpendingTries() async throws {
        try await withGateway(configure: { $0.dbStatementTimeoutMilliseconds = 2000 }) { app in
            let agent = DeskAgent(app)
            let id = try await Self.closed(app, try await Customer.signIn(app), "Asked during a backfill")
            let control = Database.forTests(app.config.databaseURL ?? "", poolSize: 1)
            defer { control.shutdown() }
            try await control.query("SELECT pg_advisory_lock($1)", [CSATStore.zoneLock])
            let csat = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
            // The emulator delivers its webhook when it gets to it (seconds on a loaded host); from then on, two statement
            // timeouts' worth of waiting: the old inbox had spent one of the event's tries on each.
            let arrived = try await eventually(every: .milliseconds(50)) {
                try await !app.database.query("SELECT 1 FROM webhook_events WHERE event_type = 'TICKET.CSAT.REQUESTED'").isEmpty
            }
            try #require(arrived, "the CSAT request's webhook never reached the gateway")
            try await Task.sleep(for: .seconds(4))
            let held = try await app.database.query("""
                SELECT count(*) FILTER (WHERE status = 'pending'), count(*) FILTER (WHERE status <> 'applied' AND attempts > 0) FROM webhook_events
                """)[0]
            #expect(try held.decode(0, as: Int.self) >= 1)
            #expect(try held.decode(1, as: Int.self) == 0)
            try await control.query("SELECT pg_advisory_unlock($1)", [CSATStore.zoneLock])
            try await Self.waitForRequest(app, ticket: id, message: csat)
            let failed = try await app.database.query("SELECT count(*) FROM webhook_events WHERE status = 'failed'")[0].decode(0, as: Int.self)
            #expect(failed == 0)
        }
    }

    /// The steps of a zone's build hold the zone lock for a fraction of a second each, one after another at once: the
    /// inbox waits behind a step and applies Desk's events between two. Only trying the lock, a pass found it taken
    /// at almost every try, and the events waited for the whole build.
    @Test func webhookEventsAreAppliedBetweenTheStepsOfAZoneBuild() async throws {
        try await withGateway { app in
            let agent = DeskAgent(app)
            let id = try await Self.closed(app, try await Customer.signIn(app), "Asked during a build")
            let control = Database.forTests(app.config.databaseURL ?? "", poolSize: 1)
            defer { control.shutdown() }
            let building = Atomic<Bool>(true)
            let locked = Atomic<Int>(0)
            let steps = Task {
                var taken = 0
                while building.load(ordering: .relaxed) {
                    try await control.transaction { tx in
                        try tx.query("SELECT pg_advisory_xact_lock($1)", [CSATStore.zoneLock])
                        locked.wrappingAdd(1, ordering: .relaxed)
                        try tx.query("SELECT pg_sleep(0.4)")
                    }
                    taken += 1
                }
                return taken
            }
            // The build is under way before Desk is asked: on a loaded host the task can start after the event is applied.
            let started = await eventually { locked.load(ordering: .relaxed) >= 1 }
            try #require(started, "the build's first step never took the zone lock")
            let csat = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
            try await Self.waitForRequest(app, ticket: id, message: csat)
            building.store(false, ordering: .relaxed)
            #expect(try await steps.value >= 2)
        }
    }

    @Test func declinesAndFeedbackForTicketsThatAreNotTheCallersRecordNothing() async throws {
        try await withGateway { app in
            let owner = try await Customer.signIn(app)
            let other = try await Customer.signIn(app, user: "demo-customer-2", accessToken: "demo-token-2")
            let (id, csat) = try await Self.closedAndAsked(app, owner, "Rated by its owner only")

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
            // The owner with made-up message ids: a decline is refused outright, a rating and a closure answer by Desk;
            // all three are the same client error on messageId (Desk's 404 read as a 404 of the ticket before).
            let madeUpDecline = try await owner.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":123456,"score":null,"comment":null}"#)
            let madeUpRating = try await owner.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":123457,"score":5,"comment":null}"#)
            let madeUpClosure = try await owner.send("POST", "/v1/tickets/\(id)/closure-confirmation", #"{"messageId":123458,"confirm":true}"#)
            for (answer, what) in [(madeUpDecline, "a CSAT request"), (madeUpRating, "a CSAT request"), (madeUpClosure, "a closure inquiry")] {
                #expect(answer.status == 422, "\(answer.text)")
                #expect(answer.json?["detail"] as? String == "messageId is not \(what) of this ticket.", "\(answer.text)")
                let field = ((answer.json?["errors"] as? [[String: Any]])?.first)?["field"] as? String
                #expect(field == "messageId", "\(answer.text)")
            }
            #expect(try await Self.ratings(app, ticket: id).isEmpty)
            #expect(try await app.database.query("SELECT count(*) FROM csat_ratings")[0].decode(0, as: Int.self) == 0)

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
            let known = try await app.database.query("SELECT 1 FROM csat_requests WHERE ticket_id = $1", [id])
            #expect(known.isEmpty)
            let declined = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":null,"comment":"no thanks"}"#)
            #expect(declined.status == 200, "\(declined.text)")
            #expect(try await Self.ratings(app, ticket: id).map(\.score) == [nil])
            let requests: Int = try await app.database.query("SELECT count(*) FROM csat_requests WHERE ticket_id = $1 AND message_id = $2", [id, csat])[0].decode(0)
            #expect(requests == 1)
            // A message id Desk does not hold as this ticket's CSAT request is still refused.
            let madeUp = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat + 1000),"score":null,"comment":null}"#)
            #expect(madeUp.status == 422, "\(madeUp.text)")
        }
    }

    @Test func aDeclineFollowedByARatingEndsAtDesksScore() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let (id, csat) = try await Self.closedAndAsked(app, customer, "Declined, then rated")
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

    /// A zone build cut off by the database (here its connection terminated while it waits for the zone lock) is
    /// taken up again by the running instance; it had waited for the next restart, its zone's reports on raw ratings.
    @Test func aZoneBuildTheDatabaseCutOffIsTakenUpAgain() async throws {
        try await TestPostgres.withDatabase { url in
            var config = TestGateway.configuration(databaseURL: url)
            config.reportTimeZones = ["UTC", "Asia/Kolkata"]
            let control = Database.forTests(url, poolSize: 1)
            defer { control.shutdown() }
            try await control.query("SELECT pg_advisory_lock($1)", [CSATStore.zoneLock])
            try await TestGateway.running(config, waitForZones: false) { app in
                // The build's registration, waiting for the zone lock exclusively (the inbox would wait shared).
                let waiting = "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND mode = 'ExclusiveLock' AND NOT granted AND \(lockInThisDatabase)"
                try #require(try await eventually(within: 30, every: .milliseconds(20)) { try await !control.query(waiting).isEmpty })
                #expect(try await Self.zonesBuilding(app) == "2")
                // The build gives way every second (CSATStore.buildGiveWay): terminated when it is found waiting.
                #expect(try await eventually(within: 30, every: .milliseconds(20)) {
                    try await control.query("SELECT pg_terminate_backend(pid) FROM (\(waiting)) w").count == 1
                })
                try await control.query("SELECT pg_advisory_unlock($1)", [CSATStore.zoneLock])
                let built = await withDeadline(.seconds(60)) { await app.waitForReportZones() } != nil
                #expect(built)
                #expect(try await CSATStore(database: app.database).zones() == ["UTC", "Asia/Kolkata"])
                #expect(try await Self.zonesBuilding(app) == "0")
            }
        }
    }

    /// `report_zones_building` as `/metrics` shows it.
    static func zonesBuilding(_ app: GatewayApplication) async throws -> String? {
        let metrics = try await httpRequest(port: app.port, "GET", "/metrics").text
        return metrics.split(separator: "\n").first { $0.hasPrefix("report_zones_building ") }.map { String($0.split(separator: " ")[1]) }
    }

    @Test func laterAnswersReplaceEarlierOnesInEveryRollup() async throws {
        try await withGateway(configure: { $0.reportTimeZones = ["UTC", "Asia/Kolkata"] }) { app in
            let store = CSATStore(database: app.database)
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
            // Every level (the aligned ones and the week) and both zones hold exactly one response per ticket, with the
            // final scores.
            let levels = try await app.database.query("""
                SELECT z.zone, b.level, sum(b.responses)::bigint, sum(b.s5)::bigint, sum(b.s1)::bigint, sum(b.s3)::bigint
                  FROM csat_blocks b JOIN report_zones z ON z.id = b.zone_id GROUP BY 1, 2 ORDER BY 1, 2
                """)
            #expect(levels.count == 2 * (RollupBlocks.weekLevel + 1))
            for row in levels.rows {
                #expect(try row.decode(2, as: Int.self) == 2 && row.decode(3, as: Int.self) == 1 && row.decode(4, as: Int.self) == 1
                        && row.decode(5, as: Int.self) == 0, "\(row)")
            }
            let detail: Int = try await app.database.query("SELECT sum(responses)::bigint FROM csat_detail_blocks WHERE level = 9")[0].decode(0)
            #expect(detail == 4)   // two zones × two responses
        }
    }

    /// A rated ticket is reopened, closed again and sent a second CSAT request that the customer never answers. The
    /// second request's webhook carries the ticket's old score: that is the first answer, not a second one.
    @Test func aReopenedTicketsNextRequestIsNotAnsweredWithTheOldScore() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let id = try #require(try await customer.createTicket("Rated, reopened, asked again")["id"] as? Int)
            try await agent.activate(id)
            try await agent.post("/tickets/\(id)/close")
            let first = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
            try await Self.waitForRequest(app, ticket: id, message: first)
            let rated = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(first),"score":5,"comment":"great"}"#)
            #expect(rated.status == 200, "\(rated.text)")
            let reopened = try await customer.send("POST", "/v1/tickets/\(id)/reopen")
            #expect(reopened.status == 200, "\(reopened.text)")
            try await agent.post("/tickets/\(id)/close")
            let second = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
            try await Self.waitForRequest(app, ticket: id, message: second)
            try await Self.waitForInbox(app)
            let rows = try await app.database.query("SELECT message_id, score FROM csat_ratings WHERE ticket_id = $1 ORDER BY id", [id])
            #expect(rows.count == 1)
            #expect(try rows.first?.decode(0, as: Int.self) == first && rows.first?.decode(1, as: Int.self) == 5)
            let report = try await reporter(app).get("")
            let totals = report.json?["totals"] as? [String: Any]
            #expect(totals?["requests"] as? Int == 2, "\(report.text)")
            #expect(totals?["responses"] as? Int == 1, "\(report.text)")
            try await Self.rollupsMatchRawRatings(app)
        }
    }

    /// The customer declines the moment the CSAT request arrives, before the gateway has seen the assignment (every
    /// webhook lost): the decline counts for the agent and team Desk names, not the cache's none.
    @Test func aDeclineBeforeTheAssignmentIsSeenCountsForDesksAgent() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let created = try await customer.createTicket("Declined at once", extra: #","groupKey":"support""#)
            let id = try #require(created["id"] as? Int)
            let team = try #require((created["team"] as? [String: Any])?["id"] as? Int)
            try await Self.waitForInbox(app)
            try await agent.post("/webhooks", #"{"urls":[],"secret":"held"}"#)
            try await agent.activate(id, agent: 502)
            try await agent.post("/tickets/\(id)/close")
            let csat = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
            let declined = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":null,"comment":""}"#)
            #expect(declined.status == 200, "\(declined.text)")
            let row = try #require(try await app.database.query(
                "SELECT agent_id, team_id, score, comment, attribution_inferred FROM csat_ratings WHERE ticket_id = $1", [id]).first)
            #expect(try row.decodeIfPresent(0, as: Int.self) == 502)
            #expect(try row.decodeIfPresent(1, as: Int.self) == team)
            #expect(try row.decodeIfPresent(2, as: Int.self) == nil && row.decodeIfPresent(3, as: String.self) == nil)
            #expect(try row.decode(4, as: Bool.self) == false)
            try await Self.rollupsMatchRawRatingsByAgent(app)
        }
    }

    /// The rule for a ticket's own score, through PostgreSQL: never the same answer twice, only a request without a
    /// message answer, replaced by the message answer when it comes; a decline recorded with the cache's attribution
    /// moves to the request's when Desk's request arrives.
    @Test func theTicketsOwnScoreAnswersOnlyARequestWithoutAnAnswer() async throws {
        try await withGateway { app in
            let store = CSATStore(database: app.database)
            let base = Date().timeIntervalSince1970 - 3_600
            func request(_ ticket: Int, _ message: Int, at offset: Double, agent: Int? = 501) async throws -> Bool {
                try await store.recordRequest(ticketId: ticket, messageId: message, agentId: agent, teamId: 11, channelType: "SENDBIRD",
                                              priority: .medium, requestedAt: base + offset)
            }
            func rating(_ ticket: Int, _ message: Int, _ score: Int?, _ comment: String?, at offset: Double, inferred: Bool = false,
                        agent: Int? = 501, attributionInferred: Bool = false) -> RatingRecord {
                RatingRecord(ticketId: ticket, messageId: message, score: score, comment: comment, agentId: agent, teamId: 11,
                             channelType: "SENDBIRD", priority: .medium, customerSendbirdId: "c", ratedAt: base + offset, source: .webhook,
                             inferred: inferred, attributionInferred: attributionInferred)
            }
            func answers(_ ticket: Int) async throws -> [String] {
                try await app.database.query("""
                    SELECT message_id, score, coalesce(comment, '-'), inferred, agent_id FROM csat_ratings WHERE ticket_id = $1 ORDER BY message_id
                    """, [ticket]).map {
                    "\(try $0.decode(0, as: Int.self)):\(try $0.decodeIfPresent(1, as: Int.self).map(String.init) ?? "nil"):\(try $0.decode(2, as: String.self))"
                        + (try $0.decode(3, as: Bool.self) ? ":inferred" : "") + ":\(try $0.decodeIfPresent(4, as: Int.self).map(String.init) ?? "none")"
                }
            }
            // Ticket 1: request 10 answered 5 by its message; request 20 sent after a reopen.
            #expect(try await request(1, 10, at: 0))
            #expect(try await store.record(rating(1, 10, 5, "great", at: 10)))
            #expect(try await request(1, 20, at: 100))
            #expect(!(try await store.recordTicketLevel(rating(1, 0, 5, "great", at: 100, inferred: true), closedAt: base + 90)))
            #expect(try await answers(1) == ["10:5:great:501"])
            // A different score answers the open request (inferred); its message answer replaces it, even if dated earlier.
            #expect(try await store.recordTicketLevel(rating(1, 0, 3, nil, at: 200, inferred: true), closedAt: base + 90))
            #expect(try await answers(1) == ["10:5:great:501", "20:3:-:inferred:501"])
            #expect(try await store.record(rating(1, 20, 3, "meh", at: 150)))
            #expect(try await answers(1) == ["10:5:great:501", "20:3:meh:501"])
            // Every known request answered by a message: a new score answers one not seen yet, so nothing now.
            #expect(!(try await store.recordTicketLevel(rating(1, 0, 1, nil, at: 300, inferred: true), closedAt: base + 90)))
            // An inferred score never replaces a message's.
            #expect(!(try await store.record(rating(1, 20, 2, nil, at: 400, inferred: true))))
            #expect(try await answers(1) == ["10:5:great:501", "20:3:meh:501"])

            // Ticket 2: no request known: the ticket-level rating, absorbed by the message answer.
            #expect(try await store.recordTicketLevel(rating(2, 0, 4, nil, at: 50, inferred: true), closedAt: base + 40))
            #expect(try await answers(2) == ["0:4:-:inferred:501"])
            #expect(try await request(2, 30, at: 45))
            #expect(try await store.record(rating(2, 30, 4, "", at: 48)))
            #expect(try await answers(2) == ["30:4:-:501"])

            // Ticket 3: a decline with the cache's attribution (none) before the request; the request brings Desk's.
            #expect(try await store.record(rating(3, 40, nil, nil, at: 60, agent: nil, attributionInferred: true)))
            #expect(try await answers(3) == ["40:nil:-:none"])
            #expect(try await request(3, 40, at: 55, agent: 503))
            #expect(try await answers(3) == ["40:nil:-:503"])
            // A later one with the cache's attribution takes the request's at once.
            #expect(try await request(3, 41, at: 70, agent: 504))
            #expect(try await store.record(rating(3, 41, nil, nil, at: 80, agent: nil, attributionInferred: true)))
            #expect(try await answers(3) == ["40:nil:-:503", "41:nil:-:504"])
            try await Self.rollupsMatchRawRatings(app)
            try await Self.rollupsMatchRawRatingsByAgent(app)
        }
    }
}
