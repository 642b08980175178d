import DeskClient
import DeskEmulator
import Domain
import Foundation
import GatewayApp
import JSON
import Logging
import Postgres
import Services
import Store
import Testing
import TestSupport

/// Every rating the real Desk holds reaches the reports, with webhooks off (only the Platform API tells): broken
/// messages, ratings kept only on the ticket, late ratings of old tickets, audits, interrupted backfills. Desk is the
/// emulator over real HTTP, the store a real PostgreSQL.
@Suite struct CSATIngestTests {
    static func responses(_ app: GatewayApplication) async throws -> Int {
        let reporter = try await reporter(app)
        let report = try JSONParser.parse(try await reporter.get("?groupBy=team").body)
        return report["totals"]?["responses"]?.intValue ?? -1
    }

    static func quiet(_ app: GatewayApplication) throws -> DeskEmulator {
        let emulator = try #require(app.emulator)
        emulator.setWebhooks(urls: [], secret: "")
        return emulator
    }

    static func settings(_ app: GatewayApplication, _ json: String) async throws {
        let response = try await httpRequest(port: app.emulator!.port, "POST", "/emulator/settings", json: json)
        #expect(response.status == 200, "\(response.text)")
    }

    @Test func aTicketWithABrokenMessageStillYieldsItsRating() async throws {
        try await withGateway(configure: { $0.syncRequestsPerSecond = 100 }) { app in
            let emulator = try Self.quiet(app)
            let customer = try await Customer.signIn(app)
            let ticket = try await SyncRobustnessTests.ratedTicket(app, customer, index: 1, score: 4)
            emulator.setMessageFault(ticketId: ticket, "broken-message")
            let summary = try await app.sync.run()
            #expect(summary.failedTickets == 0 && summary.skippedMessages == 1, "\(summary)")
            let rows = try await app.database.query("SELECT message_id, score FROM csat_ratings WHERE ticket_id = $1", [ticket])
            #expect(rows.count == 1)
            #expect(try rows.first?.decode(0, as: Int.self) != 0 && rows.first?.decode(1, as: Int.self) == 4)
            #expect(try await Self.responses(app) == 1)
        }
    }

    @Test func aRatingPresentOnlyOnTheTicketFieldsReachesTheReport() async throws {
        try await withGateway(configure: { $0.syncRequestsPerSecond = 100 }) { app in
            _ = try Self.quiet(app)
            try await Self.settings(app, #"{"csatMessageStaysWaiting":true}"#)
            let customer = try await Customer.signIn(app)
            let (ticket, message) = try await waitingMessage(customer, deskPort: app.emulator!.port, csat: true, index: 2)
            try await rateOnDesk(deskPort: app.emulator!.port, ticket: ticket, message: message, score: 2, comment: "slow")
            // Desk's message still says WAITING; only the ticket carries the answer.
            let state = try await httpRequest(port: app.emulator!.port, "GET", "/emulator/tickets/\(ticket)")
            #expect(state.text.contains("\\\"state\\\":\\\"WAITING\\\""), "\(state.text.prefix(400))")
            _ = try await app.sync.run()
            let rows = try await app.database.query("SELECT message_id, score, comment FROM csat_ratings WHERE ticket_id = $1", [ticket])
            #expect(rows.count == 1)
            #expect(try rows.first?.decode(0, as: Int.self) == message, "the answer belongs to the request it answers")
            #expect(try rows.first?.decode(1, as: Int.self) == 2 && rows.first?.decode(2, as: String.self) == "slow")
            #expect(try await Self.responses(app) == 1)
        }
    }

    @Test func aLateRatingOfAnOldTicketIsReadWithWebhooksOff() async throws {
        try await withGateway(configure: { $0.syncRequestsPerSecond = 100 }) { app in
            _ = try Self.quiet(app)
            // This Desk filters ticket lists on creation: a ticket opened 10 days ago never shows in the daily window.
            try await Self.settings(app, #"{"ticketListDateField":"created"}"#)
            let customer = try await Customer.signIn(app)
            let (ticket, message) = try await waitingMessage(customer, deskPort: app.emulator!.port, csat: true, index: 3)
            let tenDaysAgo = ISOTimestamp.format(Date().timeIntervalSince1970 - 10 * 86_400)
            _ = try await DeskAgent(app).post("/tickets/\(ticket)/created-at", #"{"createdAt":"\#(tenDaysAgo)"}"#)
            // The first run reads 90 days back: it sees the request, not yet answered.
            let first = try await app.sync.run()
            #expect(first.newRequests == 1 && first.newRatings == 0, "\(first)")
            // Rated today, on Desk. The next run's window (yesterday to today, by creation here) misses the ticket...
            try await rateOnDesk(deskPort: app.emulator!.port, ticket: ticket, message: message, score: 5, comment: "late but good")
            let second = try await app.sync.run()
            // ...but its open request has it read again by itself.
            #expect(second.lateChecked == 1 && second.newRatings == 1, "\(second)")
            #expect(try await Self.responses(app) == 1)
            // Answered: the next run no longer reads it.
            #expect(try await app.sync.run().lateChecked == 0)
        }
    }

    @Test func anAuditFindsADeletedRatingAndRepairRestoresIt() async throws {
        try await withGateway(configure: { $0.syncRequestsPerSecond = 100 }) { app in
            _ = try Self.quiet(app)
            let customer = try await Customer.signIn(app)
            var tickets: [Int] = []
            for index in 0..<3 { tickets.append(try await SyncRobustnessTests.ratedTicket(app, customer, index: 10 + index, score: 3 + index)) }
            _ = try await app.sync.run()
            let audit = CSATAudit(desk: app.desk, ratings: CSATStore(database: app.database), state: SyncStateStore(database: app.database),
                                  logger: Logger(label: "audit"))
            let today = ISOTimestamp.format(Date().timeIntervalSince1970).prefix(10)
            let from = ISOTimestamp.format(Date().timeIntervalSince1970 - 86_400).prefix(10)
            #expect(try await audit.run(from: String(from), to: String(today), repair: false).differences.isEmpty)
            // A rating goes missing from the database (rollups too), and another is wrong.
            let (gone, wrong) = (tickets[0], tickets[1])
            try await app.database.transaction { tx in
                try tx.query("DELETE FROM csat_ratings WHERE ticket_id = $1", [gone])
                try tx.query("UPDATE csat_ratings SET score = 1 WHERE ticket_id = $1", [wrong])
            }
            let found = try await audit.run(from: String(from), to: String(today), repair: false)
            #expect(found.differences.map(\.kind).sorted { $0.rawValue < $1.rawValue } == [.different, .missing], "\(found.differences)")
            #expect(found.differences.first { $0.kind == .missing }?.ticketId == tickets[0])
            let figure: String = try await app.database.query("SELECT value FROM sync_state WHERE name = 'csat.audit.differences'")[0].decode(0)
            #expect(figure == "2")
            let repaired = try await audit.run(from: String(from), to: String(today), repair: true)
            #expect(repaired.repaired == 2, "\(repaired.differences)")
            for (ticket, score) in [(tickets[0], 3), (tickets[1], 4)] {
                let restored = try await app.database.query("SELECT score FROM csat_ratings WHERE ticket_id = $1", [ticket])
                #expect(try restored.first?.decode(0, as: Int.self) == score, "\(ticket)")
            }
            #expect(try await audit.run(from: String(from), to: String(today), repair: false).differences.isEmpty)
        }
    }

    /// The reports themselves: a rating deleted and another restored by hand (the rollups not told) make the rollups
    /// drift from the raw ratings; the audit names the zone and --repair counts its rollups anew.
    @Test func theAuditFindsRollupsThatDriftFromTheRawRatingsAndRepairRebuildsThem() async throws {
        try await withGateway(configure: { $0.reportTimeZones = ["UTC", "Asia/Tokyo"] }) { app in
            let store = CSATStore(database: app.database)
            let base = Date().timeIntervalSince1970 - 86_400 * 2
            try await Self.sixRatings(store, from: base)
            #expect(try await store.rollupDrift().isEmpty)
            try await app.database.transaction { tx in
                try tx.query("DELETE FROM csat_ratings WHERE ticket_id = 2")
                try tx.query("""
                    INSERT INTO csat_ratings (ticket_id, message_id, score, agent_id, team_id, rated_at, source)
                    SELECT 3, 999, score, agent_id, team_id, rated_at, source FROM csat_ratings WHERE ticket_id = 3
                    """)
            }
            let drift = try await store.rollupDrift()
            #expect(drift.keys.sorted() == ["Asia/Tokyo", "UTC"], "\(drift)")
            #expect(drift.values.allSatisfy { $0 > 0 })
            // Through the command, as an operator runs it: `csat audit` names the drift, `--repair` rebuilds.
            var command = app.config
            command.deskBaseURL = try #require(app.emulator).baseURL
            command.deskAPIToken = try #require(app.emulator).configuration.apiToken
            let (from, to) = (Self.utcDay(base - 86_400), Self.utcDay(Date().timeIntervalSince1970))
            let found = try await runAudit(command, logger: Logger(label: "audit"), from: from, to: to, repair: false) { _ in }
            #expect(found.rollupDrift == drift && found.rollupDriftLeft == drift)
            let repaired = try await runAudit(command, logger: Logger(label: "audit"), from: from, to: to, repair: true) { _ in }
            #expect(repaired.rollupDrift == drift && repaired.rollupDriftLeft.isEmpty)
            #expect(try await store.rollupDrift().isEmpty)
            try await CSATIntegrityTests.rollupsMatchRawRatings(app)
            #expect(try await store.zones() == ["UTC", "Asia/Tokyo"])
        }
    }

    /// A zone taken out of REPORT_TIME_ZONES keeps its rollups, which every CSAT write updates, until `csat drop-zone`
    /// deletes them. Reports in it then come from the raw ratings with the same figures, also on an instance that
    /// had seen the zone's rollups: it had trusted them for good and read empty blocks, a report of no ratings.
    @Test func aDroppedZonesReportsComeFromTheRawRatingsWithTheSameFigures() async throws {
        try await withGateway(configure: { $0.reportTimeZones = ["UTC", "Asia/Tokyo"]; $0.reportCacheSeconds = 0 }) { app in
            let store = CSATStore(database: app.database)
            try await store.ensureZones(["UTC", "Asia/Tokyo"])
            let base = Date().timeIntervalSince1970 - 86_400 * 2
            try await Self.sixRatings(store, from: base)
            let key = try await reporter(app)
            let query = "?groupBy=agent&bucket=day&tz=Asia/Tokyo&from=\(Self.utcDay(base - 86_400 * 3))&to=\(Self.utcDay(Date().timeIntervalSince1970))"
            func figures() async throws -> (source: String?, figures: String) {
                let answer = try await key.get(query)
                try #require(answer.status == 200, "\(answer.text)")
                let stripped = BackupRestoreTests.figures(answer.text).replacingOccurrences(of: #""source":"[a-z]*""#, with: "", options: .regularExpression)
                return (answer.json?["source"] as? String, stripped)
            }
            let before = try await figures()
            #expect(before.source == "rollup" && before.figures.contains(#""responses":6"#), "\(before)")
            // Refused while this environment still lists the zone.
            await #expect(throws: ConfigError.self) { try await dropReportZone(app.config, logger: Logger(label: "t"), zone: "Asia/Tokyo") }
            var operatorConfig = app.config
            operatorConfig.reportTimeZones = ["UTC"]
            #expect(try await dropReportZone(operatorConfig, logger: Logger(label: "t"), zone: "Asia/Tokyo"))
            // At once (the instance had just seen the zone's rollups), and after it looked again.
            let after = try await figures()
            #expect(after.source == "raw" && after.figures == before.figures, "\(after)")
            try await Task.sleep(for: .milliseconds(1100))
            #expect(try await figures() == after)
            #expect(try await reportZones(operatorConfig, logger: Logger(label: "t")).map(\.zone) == ["UTC"])
            #expect(try await !dropReportZone(operatorConfig, logger: Logger(label: "t"), zone: "Asia/Tokyo"))
            #expect(try await store.rollupDrift().isEmpty)
            // Writes go on with the zone gone.
            try await store.record(RatingRecord(ticketId: 7, messageId: 107, score: 5, comment: nil, agentId: 501, teamId: 11, channelType: "SENDBIRD",
                                                priority: .medium, customerSendbirdId: "c", ratedAt: base + 90, source: .webhook))
            #expect(try await figures().figures.contains(#""responses":7"#))
        }
    }

    /// Six tickets' CSAT requests and ratings, a second apart from `base`, over three agents of team 11.
    static func sixRatings(_ store: CSATStore, from base: Double) async throws {
        for ticket in 1...6 {
            try await store.recordRequest(ticketId: ticket, messageId: 100 + ticket, agentId: 500 + ticket % 3, teamId: 11,
                                          channelType: "SENDBIRD", priority: .medium, requestedAt: base + Double(ticket))
            try await store.record(RatingRecord(ticketId: ticket, messageId: 100 + ticket, score: 1 + ticket % 5, comment: nil,
                                                agentId: 500 + ticket % 3, teamId: 11, channelType: "SENDBIRD", priority: .medium,
                                                customerSendbirdId: "c", ratedAt: base + 60 + Double(ticket), source: .webhook))
        }
    }

    /// The UTC day of an instant, as YYYY-MM-DD.
    static func utcDay(_ seconds: Double) -> String { String(ISOTimestamp.format(seconds).prefix(10)) }

    /// A Platform API reader that fails on its `failAt`-th ticket page (a backfill interrupted half-way), and runs
    /// `afterPage` once a page is read (the list changing under the reader).
    final class InterruptedDesk: DeskPlatformReader, @unchecked Sendable {
        // Thread safety: one sync at a time uses it.
        let desk: DeskClient
        var failAt: Int?
        var afterPage: (@Sendable (Int) async throws -> Void)?
        var pages = 0
        init(_ desk: DeskClient, failAt: Int?) { (self.desk, self.failAt) = (desk, failAt) }
        func agents(limit: Int, offset: Int) async throws(DomainError) -> DeskPage<Domain.DeskAgent> { try await desk.agents(limit: limit, offset: offset) }
        func teams(limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskTeam> { try await desk.teams(limit: limit, offset: offset) }
        func ticketPage(limit: Int, offset: Int, status: [TicketStatus], startDate: String?, endDate: String?, order: String?) async throws(DomainError)
            -> DeskPage<DeskTicket> {
            pages += 1
            if pages == failAt { throw DomainError(.upstreamProtocol, "interrupted") }
            let page = try await desk.ticketPage(limit: limit, offset: offset, status: status, startDate: startDate, endDate: endDate, order: order)
            do { try await afterPage?(pages) } catch { throw DomainError(.upstreamProtocol, "afterPage: \(error)") }
            return page
        }
        func platformTicket(id: Int) async throws(DomainError) -> DeskTicket { try await desk.platformTicket(id: id) }
        func chatMessages(ticketId: Int, limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskMessage> {
            try await desk.chatMessages(ticketId: ticketId, limit: limit, offset: offset)
        }
        var isPaused: Bool { desk.isPaused }
    }

    @Test func anInterruptedBackfillResumesWithoutCountingTwice() async throws {
        try await withGateway(configure: { $0.syncRequestsPerSecond = 100 }) { app in
            _ = try Self.quiet(app)
            let customer = try await Customer.signIn(app)
            for index in 0..<25 { _ = try await SyncRobustnessTests.ratedTicket(app, customer, index: 20 + index, score: 1 + index % 5) }
            var settings = GatewayConfig().syncSettings
            settings.requestsPerSecond = 1000
            settings.pageSize = 10
            let reader = InterruptedDesk(app.desk, failAt: 2)
            let sync = DeskSync(desk: reader, state: SyncStateStore(database: app.database), ratings: CSATStore(database: app.database),
                                logger: Logger(label: "backfill"), settings: settings)
            let since = String(ISOTimestamp.format(Date().timeIntervalSince1970 - 7 * 86_400).prefix(10))
            let until = String(ISOTimestamp.format(Date().timeIntervalSince1970).prefix(10))
            await #expect(throws: DomainError.self) { _ = try await sync.backfill(since: since, until: until) }
            #expect(try await app.database.query("SELECT count(*) FROM csat_ratings")[0].decode(0, as: Int.self) == 10)
            reader.failAt = nil
            let resumed = try await sync.backfill(since: since, until: until)
            // From where it stopped to the end, then the whole list once more: what changed meanwhile is not missed.
            #expect(resumed.resumedAt == 10 && resumed.tickets == 25 && resumed.passes == 2 && resumed.isComplete, "\(resumed)")
            #expect(try await app.database.query("SELECT count(*) FROM csat_ratings")[0].decode(0, as: Int.self) == 25)
            #expect(try await Self.responses(app) == 25)
            // Done: the position is gone, so the same range read again starts from the beginning (and adds nothing).
            let again = try await sync.backfill(since: since, until: until)
            #expect(again.resumedAt == 0 && again.newRatings == 0, "\(again)")
            try await CSATIntegrityTests.rollupsMatchRawRatings(app)
        }
    }

    /// Reopens a ticket on Desk as its customer would (it leaves the closed list).
    static func reopenOnDesk(deskPort: Int, ticket: Int) async throws {
        let deskSession = try await httpRequest(port: deskPort, "POST", "/sapi/customers/auth/", headers: [("sendbirdAccessToken", "demo-token")],
                                                json: #"{"sendbirdAppId":"emulated-app","sendbirdId":"demo-customer"}"#)
        let token = try #require(deskSession.json?["token"] as? String)
        let reopened = try await httpRequest(port: deskPort, "PATCH", "/sapi/tickets/\(ticket)/reopen", headers: [("sendbirdDeskToken", token)],
                                             json: #"{"sendbirdAppId":"emulated-app"}"#)
        #expect(reopened.status == 200, "\(reopened.text)")
    }

    /// Tickets already read are reopened while a backfill pages on: every later ticket moves up, and a reader that
    /// trusted its offsets would skip three. The count changed, so the list is read again and nothing is missed;
    /// allowed one pass only, the backfill says it is incomplete instead of claiming success.
    @Test func aBackfillWhoseListChangesUnderItEndsCompleteOrSaysSo() async throws {
        for passes in [3, 1] {
            try await withGateway(configure: { $0.syncRequestsPerSecond = 100 }) { app in
                _ = try Self.quiet(app)
                let customer = try await Customer.signIn(app)
                var tickets: [Int] = []
                for index in 0..<30 { tickets.append(try await SyncRobustnessTests.ratedTicket(app, customer, index: index, score: 1 + index % 5)) }
                var settings = GatewayConfig().syncSettings
            settings.requestsPerSecond = 1000
                settings.pageSize = 10
                settings.maxPasses = passes
                let reader = InterruptedDesk(app.desk, failAt: nil)
                let (port, first) = (app.emulator!.port, Array(tickets.prefix(3)))
                reader.afterPage = { page in
                    guard page == 1 else { return }
                    for ticket in first { try await Self.reopenOnDesk(deskPort: port, ticket: ticket) }
                }
                let sync = DeskSync(desk: reader, state: SyncStateStore(database: app.database), ratings: CSATStore(database: app.database),
                                    logger: Logger(label: "backfill"), settings: settings)
                let since = String(ISOTimestamp.format(Date().timeIntervalSince1970 - 7 * 86_400).prefix(10))
                let until = String(ISOTimestamp.format(Date().timeIntervalSince1970).prefix(10))
                let summary = try await sync.backfill(since: since, until: until)
                let stored: Int = try await app.database.query("SELECT count(*) FROM csat_ratings")[0].decode(0)
                if passes > 1 {
                    #expect(summary.isComplete && summary.passes == 2, "\(summary)")
                    #expect(stored == 30)
                } else {
                    #expect(!summary.isComplete && !summary.complete, "\(summary)")
                    #expect(summary.description.contains("INCOMPLETE"))
                    #expect(stored == 27, "three tickets moved past the pages read")
                }
            }
        }
    }

    /// A ticket created 12 days ago, closed and rated today with every webhook lost: the incremental sync finds it
    /// whichever date Desk's list filters on (an emulator setting picks one).
    @Test(arguments: ["created", "updated"]) func aRatingGivenDaysAfterCreationIsFoundWithWebhooksLost(_ field: String) async throws {
        try await withGateway(configure: { $0.syncRequestsPerSecond = 100 }) { app in
            _ = try Self.quiet(app)
            try await Self.settings(app, #"{"ticketListDateField":"\#(field)"}"#)
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let ticket = try #require(try await customer.createTicket("Rated late")["id"] as? Int)
            try await agent.activate(ticket)
            let twelveDaysAgo = ISOTimestamp.format(Date().timeIntervalSince1970 - 12 * 86_400)
            try await agent.post("/tickets/\(ticket)/created-at", #"{"createdAt":"\#(twelveDaysAgo)"}"#)
            let first = try await app.sync.run()
            #expect(first.isComplete && first.newRatings == 0, "\(first)")
            try await agent.post("/tickets/\(ticket)/close")
            let message = agent.messageId(try await agent.post("/tickets/\(ticket)/csat-request"))
            try await rateOnDesk(deskPort: app.emulator!.port, ticket: ticket, message: message, score: 4, comment: "late")
            let second = try await app.sync.run()
            #expect(second.isComplete && second.newRatings == 1, "\(second)")
            let rows = try await app.database.query("SELECT message_id, score FROM csat_ratings WHERE ticket_id = $1", [ticket])
            #expect(rows.count == 1)
            #expect(try rows.first?.decode(0, as: Int.self) == message && rows.first?.decode(1, as: Int.self) == 4)
        }
    }

    /// A run killed without giving its lease back holds it only until the lease expires; a live one keeps it.
    @Test func aLeaseLeftByADeadRunIsTakenOverOnceItExpires() async throws {
        try await withGateway { app in
            let state = SyncStateStore(database: app.database)
            #expect(try await state.takeLease("killed"))
            #expect(!(try await state.takeLease("next")))
            try await app.database.query("UPDATE sync_state SET updated_at = now() - make_interval(secs => $1) WHERE name = 'lease'",
                                     [SyncLease.seconds - 5])
            #expect(!(try await state.takeLease("next")), "renewed within its expiry: still held")
            try await app.database.query("UPDATE sync_state SET updated_at = now() - make_interval(secs => $1) WHERE name = 'lease'",
                                     [SyncLease.seconds + 1])
            #expect(try await state.takeLease("next"))
        }
    }
}
