import Domain
import Foundation
import JSON
import Logging
import Services
import Testing

@Suite struct RatingRecorderTests {
    @Test func aConfirmedCSATMessageIsARequestAndAnAnswerForTheTicketsAgentTeamAndChannel() throws {
        let ticket = Make.ticket(1)
        let writes = RatingRecorder.writes(ticket: ticket, messages: [Make.text(1), Make.csat(2, state: "CONFIRMED", score: 4)], source: .sync)
        #expect(writes.count == 2)
        guard case .request(let request) = writes[0], case .rating(let rating) = writes[1] else {
            Issue.record("unexpected writes \(writes)")
            return
        }
        #expect(request == CSATRequestRecord(ticketId: 1, messageId: 2, agentId: 501, teamId: 11, channelType: "SENDBIRD_IOS",
                                             priority: .high, requestedAt: ISOTimestamp.parse("2026-11-20T09:01:00Z")!))
        #expect(rating.score == 4 && rating.messageId == 2 && rating.agentId == 501 && rating.teamId == 11)
        #expect(rating.ratedAt == ISOTimestamp.parse("2026-11-20T09:05:00Z")!)
        #expect(rating.source == .sync && rating.customerSendbirdId == "customer-1")
    }

    @Test func waitingAndDeclinedMessagesAreRequestsOnlyWhenTheTicketHasNoScore() {
        for state in ["WAITING", "DECLINED"] {
            let writes = RatingRecorder.writes(ticket: Make.ticket(1), messages: [Make.csat(2, state: state)], source: .webhook)
            #expect(writes.count == 1, "\(state)")
            guard case .request = writes.first else { Issue.record("\(state): \(writes)"); continue }
        }
    }

    /// Where a rating comes from, one rule for the sync and webhooks: a message answer wins; else the ticket's own
    /// score is an inferred answer that only the store can place (it alone knows what is recorded already), never a
    /// rating of the request that arrived with it.
    @Test func theTicketsOwnScoreIsAlwaysLeftToTheStoreUnlessAMessageAnswered() {
        let scored = Make.ticket(1, score: 4, comment: "fine")
        // The message still says WAITING (Desk may keep it as first sent; a reopened ticket's next request arrives
        // with the old score) while the ticket carries a score.
        for messages in [[Make.csat(2, state: "WAITING")], [Make.csat(2, state: "WAITING"), Make.csat(7, state: "WAITING")], []] {
            let writes = RatingRecorder.writes(ticket: scored, messages: messages, source: .sync)
            #expect(writes.count == messages.count + 1, "\(writes)")
            #expect(!writes.contains { if case .rating = $0 { true } else { false } }, "\(writes)")
            guard case .ticketLevel(let level, let closedAt) = writes.last else { Issue.record("\(writes)"); continue }
            #expect(level.messageId == 0 && level.score == 4 && level.comment == "fine" && level.inferred && !level.attributionInferred)
            #expect(level.ratedAt == ISOTimestamp.parse("2026-11-20T10:00:00Z")!)
            #expect(closedAt == scored.closedAt ?? 0)
        }
        // A confirmed message answer wins over the ticket's fields, and is no inference.
        let confirmed = RatingRecorder.writes(ticket: scored, messages: [Make.csat(2, state: "CONFIRMED", score: 2)], source: .sync)
        #expect(confirmed.compactMap { if case .rating(let r) = $0 { r.score } else { nil } } == [2])
        #expect(!confirmed.contains { if case .ticketLevel = $0 { true } else { false } })
        #expect(confirmed.allSatisfy { if case .rating(let r) = $0 { !r.inferred } else { true } })
    }

    /// A message answer is dated by the message's `updatedAt` when Desk sends it; without it (Desk's documents do not
    /// list the field) by the ticket's last change, which puts an answer given at 09:05 and a ticket edited at 23:30 on
    /// the edit's day.
    @Test func anAnswersDateIsTheMessagesElseTheTicketsLastChange() {
        let edited = Make.ticket(1, updatedAt: "2026-11-20T23:30:00Z", closedAt: "2026-11-20T09:00:00Z")
        let dated = RatingRecorder.writes(ticket: edited, messages: [Make.csat(2, state: "CONFIRMED", score: 4)], source: .sync)
        let undated = RatingRecorder.writes(ticket: edited, messages: [Make.csat(2, state: "CONFIRMED", score: 4, updatedAt: nil)], source: .sync)
        func ratedAt(_ writes: [RatingWrite]) -> Double? { writes.compactMap { if case .rating(let r) = $0 { r.ratedAt } else { nil } }.first }
        #expect(ratedAt(dated) == ISOTimestamp.parse("2026-11-20T09:05:00Z"))
        #expect(ratedAt(undated) == ISOTimestamp.parse("2026-11-20T23:30:00Z"))
        // The request is dated by its message's creation either way.
        #expect(undated.compactMap { if case .request(let r) = $0 { r.requestedAt } else { nil } } == [ISOTimestamp.parse("2026-11-20T09:01:00Z")!])
    }

    /// Which answer to one CSAT request stands, for every kind of pair.
    @Test func whichAnswerReplacesWhich() {
        func answer(_ score: Int?, _ comment: String? = nil, at time: Double, inferred: Bool = false) -> RatingRecord {
            RatingRecord(ticketId: 1, messageId: 2, score: score, comment: comment, agentId: 501, teamId: 11, channelType: "SENDBIRD",
                         priority: .medium, customerSendbirdId: nil, ratedAt: time, source: .webhook, inferred: inferred)
        }
        // Message answers: a different one that is not older replaces; an older one or the same one does not.
        #expect(answer(3, at: 20).replaces(score: 5, comment: nil, ratedAt: 10))
        #expect(!answer(3, at: 5).replaces(score: 5, comment: nil, ratedAt: 10))
        #expect(!answer(5, at: 20).replaces(score: 5, comment: nil, ratedAt: 10))
        #expect(answer(5, "better", at: 20).replaces(score: 5, comment: nil, ratedAt: 10))
        // '' and no comment are one value.
        #expect(answer(5, "", at: 20).comment == nil)
        #expect(!answer(5, "", at: 20).replaces(score: 5, comment: nil, ratedAt: 10))
        // A message answer replaces an inferred one, even dated earlier; never the other way round.
        #expect(answer(5, at: 5).replaces(score: 5, comment: nil, ratedAt: 10, inferred: true))
        #expect(answer(4, at: 5).replaces(score: 5, comment: nil, ratedAt: 10, inferred: true))
        #expect(!answer(4, at: 20, inferred: true).replaces(score: 5, comment: nil, ratedAt: 10))
        // An inferred answer replaces an older inferred one, and a decline (Desk never heard of it).
        #expect(answer(4, at: 20, inferred: true).replaces(score: 5, comment: nil, ratedAt: 10, inferred: true))
        #expect(answer(4, at: 20, inferred: true).replaces(score: nil, comment: nil, ratedAt: 10))
        // A decline replaces no score, but a score replaces a decline.
        #expect(!answer(nil, at: 20).replaces(score: 5, comment: nil, ratedAt: 10))
        #expect(!answer(nil, at: 20).replaces(score: 5, comment: nil, ratedAt: 10, inferred: true))
        #expect(answer(5, at: 20).replaces(score: nil, comment: nil, ratedAt: 10))
        // Even when the score was given first and reached Desk after the decline: Desk holds the score.
        #expect(answer(5, at: 5).replaces(score: nil, comment: nil, ratedAt: 10))
    }

    /// Sendbird's documented chat-message shape (`id`, `ticket`, `userSendbirdId`, `userType`, `message`, `data`),
    /// `data` as an object, and a CSAT message whatever its customType; a message without any id cannot be read.
    @Test func chatMessagesInTheDocumentedShapesAreRead() throws {
        let csatData: JSONValue = .object([("type", .string("SENDBIRD_DESK_CUSTOMER_SATISFACTION")),
                                           ("body", .object([("state", .string("confirmed")), ("customerSatisfactionScore", .string("4"))]))])
        let documented = try DeskMessage(json: .object([
            ("id", .integer(881)), ("ticket", .integer(12)), ("userSendbirdId", .string("c-1")), ("userType", .string("CUSTOMER")),
            ("message", .string("")), ("createdAt", .string("2026-11-20T09:01:00Z")), ("data", .string(csatData.serialized())),
        ]))
        #expect(documented.messageId == 881 && documented.isCSATRequest && documented.state == .confirmed && documented.score == 4)
        let object = try DeskMessage(json: try JSONParser.parse(#"""
            {"messageId": 882, "customType": "SOMETHING_ELSE", "data": {"body": {"customerSatisfactionScore": 2, "state": "CONFIRMED"}}}
            """#))
        #expect(object.isCSATRequest && object.score == 2)
        #expect(throws: DomainError.self) { try DeskMessage(json: try JSONParser.parse(#"{"message": "no id"}"#)) }
    }

    @Test func theStorePlacesATicketLevelAnswerOnTheLatestRequestAndAMessageAnswerReplacesIt() async throws {
        let store = FakeRatings()
        let ticket = Make.ticket(1, score: 3)
        // The request came by webhook earlier; the ticket's score arrives alone.
        _ = try await RatingRecorder.apply(RatingRecorder.writes(ticket: Make.ticket(1), messages: [Make.csat(5, state: "WAITING")], source: .webhook), to: store)
        _ = try await RatingRecorder.apply(RatingRecorder.writes(ticket: ticket, messages: [], source: .webhook), to: store)
        #expect(store.state.withLock { $0.ratings.map { ($0.messageId, $0.score) } }.elementsEqual([(5, 3)], by: ==))
        // Seen again: nothing changes. Then the message answer itself, later and different: it replaces the score.
        #expect(try await RatingRecorder.apply(RatingRecorder.writes(ticket: ticket, messages: [], source: .sync), to: store).ratings == 0)
        let later = Make.csat(5, state: "CONFIRMED", score: 5, updatedAt: "2026-11-21T00:00:00Z")
        _ = try await RatingRecorder.apply(RatingRecorder.writes(ticket: Make.ticket(1), messages: [later], source: .sync), to: store)
        #expect(store.state.withLock { $0.ratings.map { ($0.messageId, $0.score) } }.elementsEqual([(5, 5)], by: ==))
    }

    @Test func withoutACSATMessageTheTicketsOwnScoreIsRecordedAtTicketLevel() {
        let ticket = Make.ticket(3, channelType: nil, score: 2, comment: "slow")
        let writes = RatingRecorder.writes(ticket: ticket, messages: [Make.text(9)], source: .sync)
        guard writes.count == 1, case .ticketLevel(let rating, let closedAt) = writes[0] else {
            Issue.record("unexpected writes \(writes)")
            return
        }
        #expect(rating.messageId == 0 && rating.score == 2 && rating.comment == "slow")
        #expect(rating.channelType == "UNKNOWN")
        #expect(rating.ratedAt == ISOTimestamp.parse("2026-11-20T10:00:00Z")!)
        #expect(closedAt == ISOTimestamp.parse("2026-11-20T09:00:00Z")!)
        // A webhook's own reading of the ticket's rating wins over the ticket's fields.
        let fromEvent = RatingRecorder.writes(ticket: ticket, messages: [], ticketRating: (5, "great"), source: .webhook)
        guard case .ticketLevel(let eventRating, _) = fromEvent.first else { Issue.record("\(fromEvent)"); return }
        #expect(eventRating.score == 5 && eventRating.comment == "great")
        // No CSAT message and no score: nothing to record.
        #expect(RatingRecorder.writes(ticket: Make.ticket(4), messages: [], source: .sync).isEmpty)
    }

    @Test func aLaterDifferentAnswerReplacesAnEarlierOneAndNothingElseDoes() async throws {
        func rating(_ score: Int?, at time: Double, comment: String? = nil) -> RatingRecord {
            RatingRecord(ticketId: 1, messageId: 2, score: score, comment: comment, agentId: 501, teamId: 11, channelType: "SENDBIRD",
                         priority: .high, customerSendbirdId: "c", ratedAt: time, source: .webhook)
        }
        #expect(rating(5, at: 60).replaces(score: 3, comment: nil, ratedAt: 0))          // rate, then change
        #expect(rating(4, at: 60).replaces(score: nil, comment: nil, ratedAt: 0))        // decline, then rate
        #expect(rating(3, at: 60, comment: "ok").replaces(score: 3, comment: nil, ratedAt: 0))
        #expect(!rating(2, at: 30).replaces(score: 5, comment: nil, ratedAt: 60))        // an older answer arriving late
        #expect(!rating(5, at: 90).replaces(score: 5, comment: nil, ratedAt: 60))        // the same answer again
        // Through the recorder: the store ends at the customer's last word and counts one rating.
        let store = FakeRatings()
        let writes = [RatingWrite.rating(rating(3, at: 0)), .rating(rating(5, at: 60)), .rating(rating(2, at: 30))]
        let changed = try await RatingRecorder.apply(writes, to: store)
        #expect(changed.ratings == 2)
        #expect(store.state.withLock { $0.ratings.map(\.score) } == [5])
    }
}

@Suite struct DeskSyncTests {
    static let logger = Logger(label: "test")

    static func sync(_ desk: FakeDesk, _ state: FakeSyncState, _ ratings: FakeRatings, today: String) -> DeskSync {
        DeskSync(desk: desk, state: state, ratings: ratings, logger: logger,
                 settings: SyncSettings(requestsPerSecond: 1000, lateRatingDays: 30, firstRunDays: 90), today: { today })
    }

    @Test func aRunResumesWhereTheLastOneStoppedAndRereadsWhatItCouldNotRead() async throws {
        let desk = FakeDesk()
        desk.state.withLock { state in
            state.tickets = [Make.ticket(1), Make.ticket(2)]
            state.messages = [1: [Make.csat(11, state: "CONFIRMED", score: 5)], 2: [Make.csat(21, state: "CONFIRMED", score: 2)]]
            state.failingMessages = [2]
        }
        let state = FakeSyncState()
        let ratings = FakeRatings()
        let first = try await Self.sync(desk, state, ratings, today: "2026-11-20").run()
        #expect(first.tickets == 2 && first.failedTickets == 1 && first.newRatings == 1)
        #expect(state.state.withLock { ($0.syncedThrough, $0.retry) } == ("2026-11-20", [2]))
        // The first run reads SYNC_FIRST_RUN_DAYS (90) back.
        #expect(desk.state.withLock { $0.pageQueries.map(\.startDate) } == ["2026-08-22"])

        // Next day Desk answers for ticket 2: it is read by id first; the window reaches SYNC_LATE_RATING_DAYS (30)
        // back, whichever date Desk filters on, and the list is asked newest change first (a pass stops at tickets
        // unchanged since a day before the last run).
        desk.state.withLock { $0.failingMessages = [] }
        let second = try await Self.sync(desk, state, ratings, today: "2026-11-21").run()
        #expect(desk.state.withLock { $0.ticketReads } == [2])
        #expect(desk.state.withLock { $0.pageQueries.last.map { [$0.startDate, $0.endDate] } } == ["2026-10-22", "2026-11-21"])
        #expect(second.failedTickets == 0 && second.newRatings == 1 && second.tickets == 2)
        #expect(state.state.withLock { ($0.syncedThrough, $0.retry) } == ("2026-11-21", []))
        #expect(ratings.state.withLock { $0.ratings.map(\.messageId).sorted() } == [11, 21])
        // A third run finds nothing new: every rating is stored once.
        let third = try await Self.sync(desk, state, ratings, today: "2026-11-21").run()
        #expect(third.newRatings == 0 && third.newRequests == 0 && third.ratings == 2)
    }

    /// Tickets with unanswered CSAT requests are read again a slice a run, each run going on where the last stopped
    /// and round from the oldest again after the newest.
    @Test func lateRatingChecksGoRoundEveryUnansweredRequestASliceARun() async throws {
        let desk = FakeDesk()
        desk.state.withLock { $0.tickets = (1...5).map { Make.ticket($0) } }
        let ratings = FakeRatings()
        for id in 1...5 {
            _ = try await ratings.recordRequest(CSATRequestRecord(ticketId: id, messageId: 1, agentId: 501, teamId: 11, channelType: "SENDBIRD",
                                                                  priority: .high, requestedAt: Double(id)))
        }
        let state = FakeSyncState()
        var settings = SyncSettings(requestsPerSecond: 1000, lateRatingDays: 30, firstRunDays: 90)
        settings.lateRatingLimit = 2
        var reads: [[Int]] = []
        for _ in 0..<4 {
            desk.state.withLock { $0.ticketReads = [] }
            _ = try await DeskSync(desk: desk, state: state, ratings: ratings, logger: Self.logger, settings: settings, today: { "2026-11-20" }).run()
            reads.append(desk.state.withLock { $0.ticketReads })
        }
        #expect(reads == [[1, 2], [3, 4], [5], [1, 2]])
    }

    @Test func anotherInstancesLeaseSkipsTheRunWithoutTouchingDesk() async throws {
        let desk = FakeDesk()
        let state = FakeSyncState()
        state.state.withLock { $0.lease = "another-instance" }
        let summary = try await Self.sync(desk, state, FakeRatings(), today: "2026-11-20").run()
        #expect(summary.skipped)
        #expect(desk.state.withLock { $0.calls } == 0)
        #expect(state.state.withLock { $0.saves } == 0)
    }

    @Test func rateLimitingSlowsTheRunDownAndLosesNothing() async throws {
        let desk = FakeDesk()
        desk.state.withLock { state in
            state.tickets = [Make.ticket(1)]
            state.messages = [1: [Make.csat(11, state: "CONFIRMED", score: 3)]]
            state.rateLimitNextPage = true
        }
        let ratings = FakeRatings()
        let summary = try await Self.sync(desk, FakeSyncState(), ratings, today: "2026-11-20").run()
        #expect(summary.rateLimited == 1)
        #expect(summary.newRatings == 1)
        #expect(ratings.state.withLock { $0.ratings.count } == 1)
    }
}
