import Domain
import Services
import Testing

/// A declined answer is the gateway's own rule (it never reaches Desk): recorded only for a CSAT request Desk sent on
/// the ticket, attributed as Desk says, and never over a score.
@Suite struct CSATFeedbackTests {
    static let context = RatingContext(ticketId: 7, agentId: 900, teamId: 90, channelType: "SENDBIRD_IOS", priority: .high,
                                       customerSendbirdId: "customer-7")

    @Test func aMessageNeitherTheGatewayNorDeskKnowsAsARequestIsRefusedAndNothingIsRecorded() async throws {
        let ratings = FakeRatings()
        let desk = FakeDesk()
        desk.state.withLock { $0.tickets = [Make.ticket(7)]; $0.messages[7] = [Make.text(41)] }
        for platform in [nil, desk] as [FakeDesk?] {
            let outcome = try await CSATFeedback(ratings: ratings, platform: platform).decline(Self.context, messageId: 41, comment: nil, at: 100)
            #expect(outcome == .notARequest)
        }
        #expect(ratings.state.withLock { $0.requests.isEmpty && $0.ratings.isEmpty })
    }

    @Test func aRequestOnlyDeskKnowsIsRecordedWithDesksAgentAndTheDeclineCounts() async throws {
        let ratings = FakeRatings()
        let desk = FakeDesk()
        // The cache still says agent 900; Desk has assigned agent 501 of team 11.
        desk.state.withLock { $0.tickets = [Make.ticket(7, agent: 501, team: 11)]; $0.messages[7] = [Make.text(40), Make.csat(41, state: "WAITING")] }
        let outcome = try await CSATFeedback(ratings: ratings, platform: desk).decline(Self.context, messageId: 41, comment: "no time", at: 100)
        #expect(outcome == .recorded)
        let (requests, stored) = ratings.state.withLock { ($0.requests, $0.ratings) }
        #expect(requests.map { [$0.ticketId, $0.messageId, $0.agentId ?? 0, $0.teamId ?? 0] } == [[7, 41, 501, 11]])
        #expect(stored.count == 1 && stored[0].score == nil && stored[0].comment == "no time" && stored[0].messageId == 41)
    }

    @Test func aDeclineNeverReplacesAScore() async throws {
        let ratings = FakeRatings()
        _ = try await ratings.recordRequest(CSATRequestRecord(ticketId: 7, messageId: 41, agentId: 900, teamId: 90, channelType: "SENDBIRD_IOS",
                                                              priority: .high, requestedAt: 50))
        _ = try await ratings.record(RatingRecord(ticketId: 7, messageId: 41, score: 4, comment: nil, agentId: 900, teamId: 90,
                                                  channelType: "SENDBIRD_IOS", priority: .high, customerSendbirdId: "customer-7",
                                                  ratedAt: 60, source: .webhook))
        let outcome = try await CSATFeedback(ratings: ratings, platform: nil).decline(Self.context, messageId: 41, comment: nil, at: 100)
        #expect(outcome == .alreadyScored)
        #expect(try await ratings.storedAnswer(ticketId: 7, messageId: 41) == .some(4))
    }
}
