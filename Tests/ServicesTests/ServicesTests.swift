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

    @Test func waitingAndDeclinedMessagesAreRequestsOnly() {
        for state in ["WAITING", "DECLINED"] {
            let writes = RatingRecorder.writes(ticket: Make.ticket(1, score: 5), messages: [Make.csat(2, state: state)], source: .webhook)
            #expect(writes.count == 1, "\(state)")
            guard case .request = writes.first else { Issue.record("\(state): \(writes)"); continue }
        }
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
        DeskSync(desk: desk, state: state, ratings: ratings, logger: logger, requestsPerSecond: 1000, today: { today })
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
        #expect(desk.state.withLock { $0.pageQueries.map(\.startDate) } == [nil])

        // Next day Desk answers for ticket 2: it is read by id first, the window starts a day before the last run.
        desk.state.withLock { $0.failingMessages = [] }
        let second = try await Self.sync(desk, state, ratings, today: "2026-11-21").run()
        #expect(desk.state.withLock { $0.ticketReads } == [2])
        #expect(desk.state.withLock { $0.pageQueries.last.map { [$0.startDate, $0.endDate] } } == ["2026-11-19", "2026-11-21"])
        #expect(second.failedTickets == 0 && second.newRatings == 1 && second.tickets == 2)
        #expect(state.state.withLock { ($0.syncedThrough, $0.retry) } == ("2026-11-21", []))
        #expect(ratings.state.withLock { $0.ratings.map(\.messageId).sorted() } == [11, 21])
        // A third run finds nothing new: every rating is stored once.
        let third = try await Self.sync(desk, state, ratings, today: "2026-11-21").run()
        #expect(third.newRatings == 0 && third.newRequests == 0 && third.ratings == 2)
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
