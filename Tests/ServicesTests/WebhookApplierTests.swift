import Domain
import JSON
import Services
import Testing

/// The inbox transaction in memory: it stores what it is given. Which state wins is the store's rule (in its upsert
/// statement), tested against PostgreSQL in StoreTests.
final class FakeInboxWriter: InboxWriter {
    var cached: [Int: (ticket: DeskTicket, customer: String)] = [:]
    var writes: [RatingWrite] = []

    func cacheTicket(_ ticket: DeskTicket, customerSendbirdId: String) throws -> OwnershipChange? {
        cached[ticket.id] = (ticket, customerSendbirdId)
        return nil
    }

    func apply(_ write: RatingWrite) throws -> Bool {
        writes.append(write)
        return true
    }
}

@Suite struct WebhookApplierTests {
    static func event(_ id: Int, status: String, updatedAt: String, customer: String? = "c-1", message: JSONValue? = nil) -> JSONValue {
        var ticket: [(String, JSONValue)] = [("id", .integer(id)), ("status2", .string(status)), ("updatedAt", .string(updatedAt)),
                                             ("channelUrl", .string("channel-\(id)"))]
        if let customer { ticket.append(("customer", .object([("sendbirdId", .string(customer))]))) }
        var data: [(String, JSONValue)] = [("ticket", .object(ticket))]
        if let message { data.append(("message", message)) }
        return .object([("eventType", .string("TICKET.UPDATED")), ("data", .object(data))])
    }

    @Test func eachEventsTicketIsHandedToTheCacheWithItsCustomer() throws {
        let writer = FakeInboxWriter()
        #expect(try WebhookApplier.apply(Self.event(1, status: "CLOSED", updatedAt: "2026-11-20T10:00:00Z"), appId: "emulated-app", to: writer)
                == .applied(ticketId: 1, moved: nil))
        #expect(writer.cached[1]?.ticket.status == .closed && writer.cached[1]?.customer == "c-1")
        #expect(writer.cached[1]?.ticket.updatedAt == ISOTimestamp.parse("2026-11-20T10:00:00Z"))
    }

    @Test func csatFromTheEventsMessageIsRecordedThroughTheRecorder() throws {
        let data: JSONValue = .object([("type", .string(RichMessageType.customerSatisfaction.rawValue)),
                                       ("body", .object([("state", .string("CONFIRMED")), ("customerSatisfactionScore", .integer(5))]))])
        let message: JSONValue = .object([("messageId", .integer(31)), ("data", .string(data.serialized()))])
        let writer = FakeInboxWriter()
        _ = try WebhookApplier.apply(Self.event(2, status: "CLOSED", updatedAt: "2026-11-20T10:00:00Z", message: message), appId: "emulated-app", to: writer)
        #expect(writer.writes.count == 2)
        guard case .rating(let rating) = writer.writes.last else { Issue.record("\(writer.writes)"); return }
        #expect(rating.score == 5 && rating.messageId == 31 && rating.source == .webhook && rating.customerSendbirdId == "c-1")
    }

    @Test func eventsWithoutATicketOrACustomerChangeNothing() throws {
        let writer = FakeInboxWriter()
        guard case .unrecognized(let keys) = try WebhookApplier.apply(.object([("hello", .string("world"))]), appId: "emulated-app", to: writer) else {
            Issue.record("an event without a ticket was applied")
            return
        }
        #expect(keys == ["hello"])
        #expect(try WebhookApplier.apply(Self.event(3, status: "ACTIVE", updatedAt: "2026-11-20T10:00:00Z", customer: nil), appId: "emulated-app", to: writer)
                == .noCustomer(ticketId: 3))
        #expect(writer.cached.isEmpty && writer.writes.isEmpty)
    }

    static func ticket(_ id: Int, channel: String, extra: [(String, JSONValue)] = []) -> JSONValue {
        .object([("eventType", .string("TICKET.STATUS.UPDATED")), ("data", .object([
            ("id", .integer(id)), ("status2", .string("ACTIVE")), ("updatedAt", .string("2026-11-20T10:00:00Z")),
            ("channelUrl", .string(channel)), ("customer", .object([("sendbirdId", .string("intruder"))])),
        ] + extra))])
    }

    @Test func ticketsOfAnotherSendbirdApplicationAreForeignAndNeverCached() throws {
        let writer = FakeInboxWriter()
        let planted = Self.ticket(1003, channel: "sendbird_desk_otherapp_1003_ab12cd34")
        #expect(try WebhookApplier.apply(planted, appId: "emulated-app", to: writer) == .foreign(ticketId: 1003, appId: "otherapp"))
        let named = Self.ticket(1004, channel: "anything", extra: [("appId", .string("OTHER-APP"))])
        #expect(try WebhookApplier.apply(named, appId: "emulated-app", to: writer) == .foreign(ticketId: 1004, appId: "OTHER-APP"))
        #expect(writer.cached.isEmpty && writer.writes.isEmpty)
        // This application's channels (any case), and channels of a shape that names no application, are applied.
        for (id, channel) in [(1005, "sendbird_desk_Emulated-App_1005_ab12cd34"), (1006, "custom_channel_1006"),
                              (1007, "sendbird_desk_emulated-app_999_x")] {
            #expect(try WebhookApplier.apply(Self.ticket(id, channel: channel), appId: "emulated-app", to: writer)
                    == .applied(ticketId: id, moved: nil), "\(channel)")
        }
    }
}
