import Domain
import API
import Crypto
import DeskClient
import DeskEmulator
import Foundation
import GatewayApp
import JSON
import Postgres
import Store
import Testing
import TestSupport

/// Desk webhooks in every envelope the gateway accepts, from recorded fixtures and from the emulator.
@Suite struct WebhookShapeTests {
    static let fixtures = TestPostgres.repositoryRoot + "/Tests/Fixtures/desk/webhooks/"
    static let shapes = ["primary-ticket-created.json", "primary-csat-ticket-fields.json", "primary-csat-with-message.json", "legacy-csat.json",
                         "snake-case-csat.json", "nested-data-ticket.json", "ticket-key.json", "flat-ticket.json"]

    static func fixture(_ name: String) throws -> [UInt8] {
        [UInt8](try Data(contentsOf: URL(fileURLWithPath: fixtures + name)))
    }

    static func signatures() throws -> JSONValue { try JSONParser.parse(try fixture("signatures.json")) }

    @Test func everyFixtureShapeParsesToTheSameTicketAndRating() throws {
        for name in Self.shapes {
            let event = try #require(DeskWebhookEvent.parse(try JSONParser.parse(try Self.fixture(name))), "\(name)")
            #expect(event.ticket.id == 4101, "\(name)")
            #expect(event.ticket.customerSendbirdId == "fixture-customer", "\(name)")
            #expect(event.ticket.agent?.id == 501, "\(name)")
            #expect(event.ticket.groupId == 11, "\(name)")
            #expect(event.type.hasPrefix("TICKET."), "\(name)")
            if name == "primary-ticket-created.json" {
                #expect(event.ticket.status == .active)
                #expect(event.ticketRating == nil && event.message == nil)
            } else {
                #expect(event.ticket.status == .closed, "\(name)")
                let fromMessage = event.message.flatMap { $0.state == .confirmed ? $0.score : nil }
                #expect(fromMessage == 4 || event.ticketRating?.score == 4, "\(name)")
                #expect(event.ticketRating?.comment == "Quick and kind" || event.message?.comment == "Quick and kind", "\(name)")
            }
        }
        #expect(DeskWebhookEvent.parse(try JSONParser.parse(try Self.fixture("unknown-shape.json"))) == nil)
        #expect(DeskWebhookEvent.parse(try JSONParser.parse(try Self.fixture("legacy-csat.json")))?.eventId == "7f3c2a10-0000-4000-8000-000000004101")
        #expect(DeskWebhookEvent.parse(try JSONParser.parse(try Self.fixture("snake-case-csat.json")))?.eventId == "snake-4101")
    }

    @Test func fixtureSignaturesVerifyWithTheSecretAndWithTheAPIToken() throws {
        let signatures = try Self.signatures()
        for name in Self.shapes + ["unknown-shape.json"] {
            let body = try Self.fixture(name)
            #expect(WebhookRoutes.verify(signatures[name]?["webhookSecret"]?.stringValue, body: body, secret: "fixture-secret"), "\(name)")
            #expect(WebhookRoutes.verify(signatures[name]?["apiToken"]?.stringValue, body: body, secret: "fixture-api-token"), "\(name)")
            #expect(!WebhookRoutes.verify(signatures[name]?["apiToken"]?.stringValue, body: body, secret: "fixture-secret"), "\(name)")
        }
    }

    static func waitForInbox(_ app: GatewayApplication, seconds: Double = 20) async throws {
        let drained = try await eventually(within: seconds, every: .milliseconds(100)) { try await WebhookInbox(database: app.database).pending() == 0 }
        if !drained { Issue.record("webhook events still pending after \(seconds) s") }
    }

    /// The database keeps which state wins: a late webhook with an older state leaves the newer one cached.
    @Test func aLateOlderEventLeavesTheNewerStateCached() async throws {
        try await withGateway(configure: { $0.deskWebhookSecret = "order-secret" }) { app in
            func event(_ status: String, _ updatedAt: String) -> [UInt8] {
                Array(#"{"eventType":"TICKET.UPDATED","data":{"ticket":{"id":4201,"status2":"\#(status)","channelUrl":"order-channel","updatedAt":"\#(updatedAt)","customer":{"sendbirdId":"order-customer"}}}}"#.utf8)
            }
            for body in [event("CLOSED", "2026-11-20T10:00:00Z"), event("ACTIVE", "2026-11-20T09:00:00Z")] {
                let mac = HMAC<Insecure.SHA1>.authenticationCode(for: body, using: SymmetricKey(data: Array("order-secret".utf8)))
                let response = try await httpRequest(port: app.port, "POST", "/v1/webhooks/desk",
                                                     headers: [("x-hub-signature", "sha1=" + Codec.hex(Array(mac)))], body: body)
                #expect(response.status == 200, "\(response.text)")
                try await Self.waitForInbox(app)
            }
            #expect(try await TicketStore(database: app.database).find(id: 4201)?.status == "CLOSED")
        }
    }

    /// PostgreSQL cannot hold NUL: a Desk event with `\u0000` in its strings (or a body that is not JSON with a NUL
    /// byte) was answered 500 and never stored, so Desk retried it in vain; one with a broken emoji (an unpaired
    /// surrogate) was kept but never applied. Both are applied with U+FFFD.
    @Test func eventsWithNULAreKeptAndAppliedWithAReplacementCharacter() async throws {
        try await withGateway(configure: { $0.deskWebhookSecret = "nul-secret" }) { app in
            func post(_ body: [UInt8]) async throws -> TestResponse {
                let mac = HMAC<Insecure.SHA1>.authenticationCode(for: body, using: SymmetricKey(data: Array("nul-secret".utf8)))
                return try await httpRequest(port: app.port, "POST", "/v1/webhooks/desk",
                                             headers: [("x-hub-signature", "sha1=" + Codec.hex(Array(mac)))], body: body)
            }
            let event = Array(#"{"eventType":"TICKET.UPDATED","data":{"ticket":{"id":4301,"channelName":"a\u0000b","closeComment":"broken \ud83d","status2":"ACTIVE","channelUrl":"nul-channel","updatedAt":"2026-11-20T10:00:00Z","customFields":[{"key":"k\u0000","value":"v\u0000w"}],"relatedChannels":"[{\"channel_url\":\"c\\u0000d\",\"name\":\"n\"}]","customer":{"sendbirdId":"nul-customer"}}}}"#.utf8)
            let accepted = try await post(event)
            #expect(accepted.status == 200, "\(accepted.text)")
            let garbage = try await post(Array("not json \u{0} at all".utf8))
            #expect(garbage.status == 200, "\(garbage.text)")
            try await Self.waitForInbox(app)
            let statuses = try await WebhookInbox(database: app.database).counts()
            #expect(statuses["applied"] == 1 && statuses["unrecognized"] == 1, "\(statuses)")
            let cached = try #require(try await TicketStore(database: app.database).find(id: 4301))
            let document = try JSONParser.parse(cached.document)
            #expect(document["title"]?.stringValue == "a\u{FFFD}b", "\(cached.document)")
            #expect(document["customFields"]?["k\u{FFFD}"]?.stringValue == "v\u{FFFD}w", "\(cached.document)")
            #expect(document["closeComment"]?.stringValue == "broken \u{FFFD}", "\(cached.document)")
            // A NUL escaped inside the JSON string Desk nests (relatedChannels) too.
            #expect(document["relatedChannelUrls"]?.arrayValue?.first?.stringValue == "c\u{FFFD}d", "\(cached.document)")
        }
    }

    @Test func everyShapeIsStoredAndAppliedAndTheRatingCountsOnce() async throws {
        try await withGateway(configure: {
            $0.deskWebhookSecret = "fixture-secret"
            $0.deskAPIToken = "fixture-api-token"
        }) { app in
            let signatures = try Self.signatures()
            for (index, name) in (Self.shapes + ["unknown-shape.json"]).enumerated() {
                let key = index % 2 == 0 ? "webhookSecret" : "apiToken"
                let signature = try #require(signatures[name]?[key]?.stringValue)
                let response = try await httpRequest(port: app.port, "POST", "/v1/webhooks/desk", headers: [("x-hub-signature", signature)],
                                                     body: try Self.fixture(name))
                #expect(response.status == 200, "\(name): \(response.text)")
                #expect(response.json?["status"] as? String == "accepted", "\(name)")
                try await Self.waitForInbox(app)
            }
            let cached = try #require(try await TicketStore(database: app.database).find(id: 4101))
            #expect(cached.status == "CLOSED")
            let ratings = try await app.database.query("SELECT message_id, score, comment, agent_id, team_id FROM csat_ratings WHERE ticket_id = 4101")
            #expect(ratings.count == 1, "\(ratings.rows)")
            #expect(try ratings.first?.decode(0, as: Int.self) == 880012)
            #expect(try ratings.first?.decode(1, as: Int.self) == 4)
            try await CSATIntegrityTests.rollupsMatchRawRatings(app)
            let statuses = try await WebhookInbox(database: app.database).counts()
            #expect(statuses["unrecognized"] == 1, "\(statuses)")
            #expect(statuses["applied"] == Self.shapes.count, "\(statuses)")
            #expect(app.metrics.render().contains(#"webhook_events_total{outcome="unrecognized"} 1"#))
            // A body that is not JSON at all, correctly signed, is kept too.
            let garbage = Array("not json at all".utf8)
            let signature = "sha1=" + WebhookSignature.hex(garbage, secret: "fixture-secret")
            let stored = try await httpRequest(port: app.port, "POST", "/v1/webhooks/desk", headers: [("x-hub-signature", signature)], body: garbage)
            #expect(stored.status == 200, "\(stored.text)")
            try await Self.waitForInbox(app)
            #expect(try await WebhookInbox(database: app.database).counts()["unrecognized"] == 2)
        }
    }

    @Test func unrecognizedEventsAreReplayedOnceTheParserKnowsThem() async throws {
        try await withGateway { app in
            // As an older gateway would have left it: a ticket event it could not read, kept as unrecognized.
            let body = try JSONParser.parse(try Self.fixture("nested-data-ticket.json")).serialized()
            try await app.database.query("""
                INSERT INTO webhook_events (dedupe_key, event_type, body, status, attempts) VALUES ('old-1', 'TICKET.CSAT.UPDATED', $1::jsonb, 'unrecognized', 1)
                """, [body])
            try await Task.sleep(for: .milliseconds(500))
            #expect(try await TicketStore(database: app.database).find(id: 4101) == nil)
            #expect(try await WebhookInbox(database: app.database).replay(statuses: ["unrecognized"]) == 1)
            try await Self.waitForInbox(app)
            #expect(try await TicketStore(database: app.database).find(id: 4101)?.status == "CLOSED")
            #expect(try await WebhookInbox(database: app.database).counts()["applied"] == 1)
            #expect(try await app.database.query("SELECT count(*) FROM csat_ratings WHERE ticket_id = 4101")[0].decode(0, as: Int.self) == 1)
        }
    }

    @Test(arguments: WebhookShape.allCases)
    func theEmulatorsWebhooksReachTheCacheInEveryShape(_ shape: WebhookShape) async throws {
        try await withGateway { app in
            let emulator = try #require(app.emulator)
            emulator.webhookShape = shape
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let id = try #require(try await customer.createTicket("Shape \(shape.rawValue)")["id"] as? Int)
            try await agent.activate(id)
            // An agent-side change only a webhook tells the gateway about.
            try await agent.post("/tickets/\(id)/idle")
            var status = ""
            for _ in 0..<100 {
                status = try await TicketStore(database: app.database).find(id: id)?.status ?? ""
                if status == "IDLE" { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(status == "IDLE", "\(shape)")
            try await agent.post("/tickets/\(id)/close")
            let csat = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
            let rated = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":5,"comment":"fine"}"#)
            #expect(rated.status == 200, "\(shape): \(rated.text)")
            try await Task.sleep(for: .milliseconds(600))
            try await Self.waitForInbox(app)
            let ratings = try await app.database.query("SELECT message_id, score FROM csat_ratings WHERE ticket_id = $1", [id])
            #expect(ratings.count == 1, "\(shape): \(ratings.rows)")
            #expect(try ratings.first?.decode(1, as: Int.self) == 5, "\(shape)")
            try await CSATIntegrityTests.rollupsMatchRawRatings(app)
            #expect(try await WebhookInbox(database: app.database).counts()["unrecognized"] == nil, "\(shape)")
        }
    }
}

/// Test helper: the hex HMAC-SHA1 Desk puts after `sha1=`.
enum WebhookSignature {
    static func hex(_ body: [UInt8], secret: String) -> String {
        HMAC<Insecure.SHA1>.authenticationCode(for: body, using: SymmetricKey(data: Array(secret.utf8))).map { String(format: "%02x", $0) }.joined()
    }
}
