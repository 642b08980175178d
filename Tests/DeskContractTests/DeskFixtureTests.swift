import DeskClient
import Domain
import Foundation
import Testing
import TestSupport

/// Recorded Platform API answers (Tests/Fixtures/desk/platform), good and broken, through the decoders the sync uses.
@Suite struct DeskFixtureTests {
    static func fixture(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: TestPostgres.repositoryRoot + "/Tests/Fixtures/desk/platform/" + name)))
    }

    @Test func ticketPagesAndMessagePagesDecode() throws {
        let tickets = try DeskClient.ticketPage(try Self.fixture("tickets-page.json"))
        #expect(tickets.results.map(\.id) == [4101, 4102])
        #expect(!tickets.hasNext)
        #expect(tickets.results[0].satisfactionScore == 4)
        #expect(tickets.results[0].status == .closed)
        let messages = try DeskClient.messagePage(try Self.fixture("chat-messages.json"))
        let csat = try #require(messages.results.first)
        #expect(csat.isCSATRequest)
        #expect(csat.messageId == 880012)
        #expect(csat.state == .confirmed)
        #expect(csat.score == 4)
        #expect(csat.comment == "Quick and kind")
    }

    /// Sendbird's documented message shape (`id`, `ticket`, `userSendbirdId`, `userType`), with one message no reader
    /// can place: that one is skipped and counted, the rest read.
    @Test func documentedMessagesDecodeAndAnUnreadableOneIsSkipped() throws {
        let page = try DeskClient.messagePage(try Self.fixture("chat-messages-documented.json"))
        #expect(page.results.map(\.messageId) == [990001, 990003, 990004])
        #expect(page.skipped == 1)
        #expect(page.results[1].isCSATRequest && page.results[1].state == .waiting)
        #expect(page.results[2].isCSATRequest && page.results[2].score == 5 && page.results[2].comment == "Thanks")
        #expect(!page.results[0].isCSATRequest)
    }

    @Test func brokenAnswersAreErrorsNotCrashes() throws {
        for name in ["chat-messages-html.html", "chat-messages-no-results.json"] {
            #expect(throws: DomainError.self, "\(name)") { try DeskClient.messagePage(try Self.fixture(name)) }
        }
    }
}
