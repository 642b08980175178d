import DeskEmulator
import Foundation
import GatewayApp
import HTTPServer
import JSON
import Postgres
import Store
import Synchronization
import Testing
import TestSupport

/// A customer of the gateway: real HTTP against the running gateway.
struct Customer {
    let port: Int
    let token: String

    static func signIn(_ app: GatewayApplication, user: String = "demo-customer", accessToken: String = "demo-token") async throws -> Customer {
        let response = try await httpRequest(port: app.port, "POST", "/v1/sessions",
                                             json: #"{"userId":"\#(user)","accessToken":"\#(accessToken)"}"#)
        #expect(response.status == 201, "\(response.text)")
        let token = try #require(response.json?["token"] as? String)
        return Customer(port: app.port, token: token)
    }

    func send(_ method: String, _ path: String, _ json: String? = nil, headers: [(String, String)] = []) async throws -> TestResponse {
        let all = [("Authorization", "Bearer \(token)")] + headers
        if let json { return try await httpRequest(port: port, method, path, headers: all, json: json) }
        return try await httpRequest(port: port, method, path, headers: all)
    }

    func createTicket(_ title: String, extra: String = "") async throws -> [String: Any] {
        let response = try await send("POST", "/v1/tickets", #"{"title":"\#(title)","userName":"Demo"\#(extra)}"#)
        #expect(response.status == 201, "\(response.text)")
        return response.json ?? [:]
    }
}

/// The agent's side through the emulator's control API.
struct DeskAgent {
    let port: Int

    init(_ app: GatewayApplication) { port = app.emulator!.port }

    @discardableResult
    func post(_ path: String, _ json: String = "{}") async throws -> TestResponse {
        let response = try await httpRequest(port: port, "POST", "/emulator" + path, json: json)
        #expect(response.status < 300, "\(path): \(response.text)")
        return response
    }

    func activate(_ ticket: Int, agent: Int = 501) async throws {
        try await post("/tickets/\(ticket)/customer-message")
        try await post("/tickets/\(ticket)/assign", #"{"agentId":\#(agent)}"#)
    }

    func messageId(_ response: TestResponse) -> Int { response.json?["messageId"] as? Int ?? -1 }
}

func withGateway<T: Sendable>(configure: (inout GatewayConfig) -> Void = { _ in }, _ body: (GatewayApplication) async throws -> T) async throws -> T {
    try await TestGateway.with(configure: { config in
        config.rateLimitBurst = 10_000
        config.rateLimitPerMinute = 100_000
        configure(&config)
    }, body)
}

@Suite struct CustomerAPITests {
    @Test func oneTicketThroughItsWholeLife() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let created = try await customer.createTicket("Printer on fire", extra: #","groupKey":"support","priority":"HIGH","customFields":{"product":"desk"},"relatedChannelUrls":["ch_a"]"#)
            let id = try #require(created["id"] as? Int)
            #expect(created["status"] as? String == "INITIALIZED")
            #expect((created["team"] as? [String: Any])?["key"] as? String == "support")
            #expect((created["customFields"] as? [String: String]) == ["product": "desk"])
            #expect(created["relatedChannelUrls"] as? [String] == ["ch_a"])
            let channel = try #require(created["channelUrl"] as? String)

            // Refusals while nobody works on the ticket.
            let earlyClose = try await customer.send("POST", "/v1/tickets/\(id)/close", #"{"comment":"nevermind"}"#)
            #expect(earlyClose.status == 409)
            #expect(earlyClose.json?["code"] as? String == "ticket_state_conflict")
            #expect(earlyClose.json?["ticketStatus"] as? String == "INITIALIZED", "\(earlyClose.text)")
            let earlyReopen = try await customer.send("POST", "/v1/tickets/\(id)/reopen")
            #expect(earlyReopen.status == 409 && earlyReopen.json?["ticketStatus"] as? String == "INITIALIZED", "\(earlyReopen.text)")

            try await agent.activate(id)
            let byChannel = try await customer.send("GET", "/v1/tickets/by-channel/\(channel)")
            #expect(byChannel.status == 200)
            #expect(byChannel.json?["id"] as? Int == id)

            let fields = try await customer.send("PATCH", "/v1/tickets/\(id)/custom-fields", #"{"customFields":{"seats":"5"}}"#)
            #expect(fields.status == 200)
            #expect((fields.json?["customFields"] as? [String: String]) == ["product": "desk", "seats": "5"])
            let related = try await customer.send("PUT", "/v1/tickets/\(id)/related-channels", #"{"channelUrls":["c1","c2","c3"]}"#)
            #expect(related.json?["relatedChannelUrls"] as? [String] == ["c1", "c2", "c3"])
            let tooMany = try await customer.send("PUT", "/v1/tickets/\(id)/related-channels", #"{"channelUrls":["c1","c2","c3","c4"]}"#)
            #expect(tooMany.status == 422)
            let withNul = try await customer.send("PUT", "/v1/tickets/\(id)/related-channels", #"{"channelUrls":["c\u0000"]}"#)
            #expect(withNul.status == 422)
            let nulField = try await customer.send("PATCH", "/v1/tickets/\(id)/custom-fields", #"{"customFields":{"k":"v\u0000"}}"#)
            #expect(nulField.status == 422)

            // The agent is visible once Desk says so.
            let active = try await customer.send("GET", "/v1/tickets/\(id)")
            #expect(active.json?["status"] as? String == "ACTIVE")
            #expect((active.json?["agent"] as? [String: Any])?["name"] as? String == "Ada Agent")

            // Closure inquiry: declined keeps it open, answering twice is refused, a new confirmed one closes it.
            let first = agent.messageId(try await agent.post("/tickets/\(id)/closure-inquiry"))
            let declined = try await customer.send("POST", "/v1/tickets/\(id)/closure-confirmation", #"{"messageId":\#(first),"confirm":false}"#)
            #expect(declined.status == 200)
            #expect(declined.json?["status"] as? String == "ACTIVE")
            let again = try await customer.send("POST", "/v1/tickets/\(id)/closure-confirmation", #"{"messageId":\#(first),"confirm":true}"#)
            #expect(again.status == 409)
            let second = agent.messageId(try await agent.post("/tickets/\(id)/closure-inquiry"))
            let confirmed = try await customer.send("POST", "/v1/tickets/\(id)/closure-confirmation", #"{"messageId":\#(second),"confirm":true}"#)
            #expect(confirmed.json?["status"] as? String == "CLOSED")
            #expect(confirmed.json?["closeStatus"] as? String == "CONFIRMED")

            // CSAT: out-of-range scores are refused before Desk; a valid answer is recorded with agent and team.
            let csat = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
            for bad in ["0", "6", "\"5\"", "4.5"] {
                let refused = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":\#(bad),"comment":null}"#)
                #expect(refused.status == 422, "score \(bad)")
            }
            let rated = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":4,"comment":"Quick"}"#)
            #expect(rated.status == 200, "\(rated.text)")
            #expect((rated.json?["satisfaction"] as? [String: Any])?["score"] as? Int == 4)
            let twice = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":5,"comment":null}"#)
            #expect(twice.status == 409)
            let rows = try await app.database.query("SELECT score, comment, agent_id, team_id, source FROM csat_ratings WHERE ticket_id = $1", [id])
            #expect(rows.count == 1)
            #expect(rows.first?[0] == "4")
            #expect(rows.first?[1] == "Quick")
            #expect(rows.first?[2] == "501")
            #expect(rows.first?[3] == "11")
            // Whichever path saw the rating first records it (the gateway after Desk's answer, or Desk's webhook
            // arriving in between on a loaded machine); it is recorded once either way.
            #expect(["gateway", "webhook"].contains(rows.first?[4] ?? ""))

            let reopened = try await customer.send("POST", "/v1/tickets/\(id)/reopen")
            #expect(reopened.status == 200)
            #expect(reopened.json?["status"] as? String == "ACTIVE")
        }
    }

    /// A quote or backslash followed by an emoji modifier or a combining accent is one Swift Character: every value
    /// that holds one reaches Desk, the database and the answers whole (the emulator once could not save it).
    @Test func quotesThatOpenAGraphemeClusterTravelWhole() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let odd = #"\"\ud83c\udffb\u00e4\\\u0301\u0003"#
            let created = try await customer.createTicket(odd, extra: #","customFields":{"product":"\#(odd)"},"relatedChannelUrls":["\#(odd)"]"#)
            let expected = "\"\u{1F3FB}\u{E4}\\\u{301}\u{3}"
            let id = try #require(created["id"] as? Int)
            #expect(created["title"] as? String == expected)
            let read = try await customer.send("GET", "/v1/tickets/\(id)")
            #expect(read.status == 200, "\(read.text)")
            #expect(read.json?["relatedChannelUrls"] as? [String] == [expected])
            #expect((read.json?["customFields"] as? [String: String]) == ["product": expected])
            let list = try await customer.send("GET", "/v1/tickets")
            #expect(((list.json?["items"] as? [[String: Any]]) ?? []).compactMap { $0["title"] as? String } == [expected], "\(list.text)")
            // A value that opens with a combining accent still splits at the colon before it.
            let accented = try await customer.send("GET", "/v1/tickets?customField=product:%CC%81x")
            #expect(accented.status == 200, "\(accented.text)")
            // A DEL in a path is data (looked for, not found), not the mark of a %00.
            let withDel = try await customer.send("GET", "/v1/tickets/by-channel/a%7Fb")
            #expect(withDel.status == 404, "\(withDel.text)")
        }
    }

    /// Lengths count Unicode scalars as JSON Schema's maxLength does: one Character of a letter and 300 accents is
    /// 301 long, so it cannot carry kilobytes under a 255 limit.
    @Test func lengthsAreCountedInUnicodeScalars() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let accents = String(repeating: #"\u0301"#, count: 300)
            let long = try await customer.send("POST", "/v1/tickets", #"{"title":"a\#(accents)","userName":"Demo"}"#)
            #expect(long.status == 422, "\(long.text)")
            #expect(long.text.contains("must be at most 255 characters"), "\(long.text)")
            let field = try await customer.send("POST", "/v1/tickets",
                                                #"{"title":"t","userName":"Demo","customFields":{"product":"a\#(accents)"}}"#)
            #expect(field.status == 422, "\(field.text)")
            let list = try await customer.send("GET", "/v1/tickets")
            #expect((list.json?["items"] as? [Any])?.isEmpty == true, "\(list.text)")
            // At the limit exactly: 255 scalars, one Character, accepted and kept whole.
            let atLimit = try await customer.createTicket("a" + String(repeating: #"\u0301"#, count: 254))
            #expect((atLimit["title"] as? String)?.unicodeScalars.count == 255)
        }
    }

    /// Ids run up to 2^63 - 1, the schema's maximum: at it a request is looked for (no such CSAT request: 422 naming
    /// the message; no such ticket: 404), beyond it the body is invalid (422 naming the range).
    @Test func idsUpToTheSchemasMaximumAreChecked() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let id = try #require(try await customer.createTicket("Ids")["id"] as? Int)
            let atMax = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":9223372036854775807,"score":5,"comment":null}"#)
            #expect(atMax.status == 422 && atMax.text.contains("is not a CSAT request of this ticket"), "\(atMax.text)")
            let over = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":9223372036854775808,"score":5,"comment":null}"#)
            #expect(over.status == 422, "\(over.text)")
            #expect(over.text.contains("messageId") && !over.text.contains("is not a CSAT request"), "\(over.text)")
            let ticketAtMax = try await customer.send("GET", "/v1/tickets/9223372036854775807")
            #expect(ticketAtMax.status == 404, "\(ticketAtMax.text)")
        }
    }

    @Test func anIdHasOneSpelling() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let id = try #require(try await customer.createTicket("One URL")["id"] as? Int)
            #expect(try await customer.send("GET", "/v1/tickets/\(id)").status == 200)
            for alias in ["+\(id)", "%2B\(id)", "0\(id)", "00\(id)", "0"] {
                let answer = try await customer.send("GET", "/v1/tickets/\(alias)")
                #expect(answer.status == 404 && answer.text.contains("No ticket has this id."), "\(alias): \(answer.text)")
                let closing = try await customer.send("POST", "/v1/tickets/\(alias)/close", #"{"comment":null}"#)
                #expect(closing.status == 404, "\(alias): \(closing.text)")
            }
            for alias in ["+1", "01", "abc"] {
                let answer = try await customer.send("GET", "/v1/operations/\(alias)")
                #expect(answer.status == 404 && answer.text.contains("No operation has this id."), "\(alias): \(answer.text)")
            }
        }
    }

    @Test func customerClosesAnIdleTicketWithAComment() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let id = try #require(try await customer.createTicket("Idle one")["id"] as? Int)
            try await agent.activate(id)
            try await agent.post("/tickets/\(id)/idle")
            let closed = try await customer.send("POST", "/v1/tickets/\(id)/close", #"{"comment":"Solved"}"#)
            #expect(closed.status == 200)
            #expect(closed.json?["status"] as? String == "CLOSED")
            #expect(closed.json?["closeComment"] as? String == "Solved")
            let state = try await httpRequest(port: agent.port, "GET", "/emulator/tickets/\(id)")
            #expect(state.json?["closeStatus"] as? String == "CLOSED_BY_CUSTOMER")
        }
    }

    /// The SDK's `ticket.setPriority` and `ticket.cancel`: the customer raises a ticket's priority and gives the
    /// assigned ticket back to the queue in another team; Desk's refusals come back as problems naming the ticket's
    /// status, and bad input changes nothing.
    @Test func priorityAndGivingATicketBackToTheQueue() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let id = try #require(try await customer.createTicket("Wrong team")["id"] as? Int)
            let early = try await customer.send("POST", "/v1/tickets/\(id)/cancel")
            #expect(early.status == 409 && early.json?["ticketStatus"] as? String == "INITIALIZED", "\(early.text)")
            let raised = try await customer.send("PUT", "/v1/tickets/\(id)/priority", #"{"priority":"URGENT"}"#)
            #expect(raised.status == 200 && raised.json?["priority"] as? String == "URGENT", "\(raised.text)")
            let lower = try await customer.send("PUT", "/v1/tickets/\(id)/priority", #"{"priority":"urgent"}"#)
            #expect(lower.status == 422 && (lower.json?["errors"] as? [[String: Any]])?.first?["field"] as? String == "priority")
            try await agent.activate(id)
            let badKey = try await customer.send("POST", "/v1/tickets/\(id)/cancel", #"{"groupKey":"Billing Team"}"#)
            #expect(badKey.status == 422 && badKey.json?["code"] as? String == "validation_failed", "\(badKey.text)")
            let unknown = try await customer.send("POST", "/v1/tickets/\(id)/cancel", #"{"groupKey":"no-such-team"}"#)
            #expect(unknown.status == 422 && unknown.json?["code"] as? String == "desk_rejected"
                        && unknown.json?["detail"] as? String == "Desk has no team with this groupKey.", "\(unknown.text)")
            var onDesk = try await httpRequest(port: agent.port, "GET", "/emulator/tickets/\(id)")
            #expect(onDesk.json?["status2"] as? String == "ACTIVE" && onDesk.json?["priority"] as? String == "URGENT", "\(onDesk.text)")

            let given = try await customer.send("POST", "/v1/tickets/\(id)/cancel", #"{"groupKey":"billing"}"#)
            #expect(given.status == 200, "\(given.text)")
            #expect(given.json?["status"] as? String == "PENDING" && given.json?["agent"] is NSNull)
            #expect((given.json?["team"] as? [String: Any])?["key"] as? String == "billing")
            onDesk = try await httpRequest(port: agent.port, "GET", "/emulator/tickets/\(id)")
            #expect(onDesk.json?["status2"] as? String == "PENDING" && onDesk.json?["recentAssignment"] is NSNull, "\(onDesk.text)")

            try await agent.post("/tickets/\(id)/assign", #"{"agentId":501}"#)
            try await agent.post("/tickets/\(id)/close")
            for (method, path) in [("POST", "/cancel"), ("POST", "/close")] {
                let late = try await customer.send(method, "/v1/tickets/\(id)" + path, "{}")
                #expect(late.status == 409 && late.json?["ticketStatus"] as? String == "CLOSED", "\(path): \(late.text)")
            }

            // Queued while Desk is away, delivered when it is back.
            let next = try #require(try await customer.createTicket("Later")["id"] as? Int)
            try await agent.post("/faults", #"{"down":true}"#)
            let queued = try await customer.send("PUT", "/v1/tickets/\(next)/priority", #"{"priority":"LOW"}"#)
            #expect(queued.status == 202 && queued.json?["kind"] as? String == "priority", "\(queued.text)")
            try await agent.post("/faults", #"{"down":false}"#)
            try await waitForEmptyOutbox(app.database, seconds: 30)
            onDesk = try await httpRequest(port: agent.port, "GET", "/emulator/tickets/\(next)")
            #expect(onDesk.json?["priority"] as? String == "LOW", "\(onDesk.text)")
        }
    }

    /// The SDK's `ticket.selectQuestion`: the question reaches Desk (the emulator shows it in the chat); a question
    /// missing, a ticket of another customer's, a closed ticket and Desk away are each answered, and change nothing.
    @Test func aQuestionPickedFromAnFAQBotReachesDesk() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let id = try #require(try await customer.createTicket("Password")["id"] as? Int)
            let picked = try await customer.send("POST", "/v1/tickets/\(id)/selected-question",
                                                 #"{"faqFileId":7,"question":"How do I reset my password?"}"#)
            #expect(picked.status == 200 && picked.json?["id"] as? Int == id, "\(picked.text)")
            func questions() async throws -> [String] {
                let state = try await httpRequest(port: agent.port, "GET", "/emulator/tickets/\(id)")
                return ((state.json?["messages"] as? [[String: Any]]) ?? []).filter { $0["userType"] as? String == "CUSTOMER" }
                    .compactMap { $0["message"] as? String }
            }
            #expect(try await questions() == ["How do I reset my password?"])

            let blank = try await customer.send("POST", "/v1/tickets/\(id)/selected-question", #"{"faqFileId":"7","question":" "}"#)
            #expect(blank.status == 422 && Set(((blank.json?["errors"] as? [[String: Any]]) ?? []).compactMap { $0["field"] as? String })
                        == ["faqFileId", "question"], "\(blank.text)")
            let other = try await Customer.signIn(app, user: "demo-customer-2", accessToken: "demo-token-2")
            let foreign = try await other.send("POST", "/v1/tickets/\(id)/selected-question", #"{"faqFileId":7,"question":"Mine?"}"#)
            #expect(foreign.status == 404, "\(foreign.text)")
            try await agent.activate(id)
            try await agent.post("/tickets/\(id)/close")
            let closed = try await customer.send("POST", "/v1/tickets/\(id)/selected-question", #"{"faqFileId":7,"question":"Still there?"}"#)
            #expect(closed.status == 409 && closed.json?["code"] as? String == "ticket_state_conflict", "\(closed.text)")
            try await agent.post("/faults", #"{"down":true}"#)
            let away = try await customer.send("POST", "/v1/tickets/\(id)/selected-question", #"{"faqFileId":7,"question":"Hello?"}"#)
            #expect(away.status == 503 && away.header("Retry-After") != nil, "\(away.text)")
            try await agent.post("/faults", #"{"down":false}"#)
            #expect(try await questions() == ["How do I reset my password?", "Hello"])
        }
    }

    @Test func listsPageNewestFirstFilterAndCount() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            var ids: [Int] = []
            for index in 0..<13 {
                let product = index % 4 == 0 ? "desk pro" : "chat"
                ids.append(try #require(try await customer.createTicket("T\(index)", extra: #","customFields":{"product":"\#(product)"}"#)["id"] as? Int))
            }
            let agent = DeskAgent(app)
            try await agent.activate(ids[0])
            try await agent.post("/tickets/\(ids[0])/close")

            var seen: [Int] = []
            var cursor: String?
            var pages = 0
            repeat {
                let query = "/v1/tickets?status=all&limit=5" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await customer.send("GET", query)
                #expect(page.status == 200)
                let items = page.json?["items"] as? [[String: Any]] ?? []
                seen += items.compactMap { $0["id"] as? Int }
                cursor = page.json?["nextCursor"] as? String
                #expect((page.json?["hasNext"] as? Bool) == (cursor != nil))
                pages += 1
            } while cursor != nil && pages < 10
            #expect(seen == ids.reversed())
            #expect(pages == 3)

            let defaultPage = try await customer.send("GET", "/v1/tickets?status=open")
            #expect((defaultPage.json?["items"] as? [Any])?.count == 10)
            #expect(defaultPage.json?["hasNext"] as? Bool == true)

            let closed = try await customer.send("GET", "/v1/tickets?status=closed")
            #expect((closed.json?["items"] as? [[String: Any]])?.compactMap { $0["id"] as? Int } == [ids[0]])

            let filtered = try await customer.send("GET", "/v1/tickets?status=all&limit=50&customField=product:desk%20pro")
            let expected = ids.enumerated().filter { $0.offset % 4 == 0 }.map(\.element).reversed()
            #expect((filtered.json?["items"] as? [[String: Any]])?.compactMap { $0["id"] as? Int } == Array(expected))

            let count = try await customer.send("GET", "/v1/tickets/open-count")
            #expect(count.json?["count"] as? Int == 12)

            for bad in ["/v1/tickets?status=pending", "/v1/tickets?limit=0", "/v1/tickets?limit=101", "/v1/tickets?cursor=garbage!",
                        "/v1/tickets?customField=novalue", "/v1/tickets?sort=asc", "/v1/tickets?status=open&status=closed",
                        "/v1/tickets?limit=5&limit=6", "/v1/tickets?customField=\(String(repeating: "k", count: 21)):v",
                        "/v1/tickets?customField=k:\(String(repeating: "v", count: 191))", "/v1/tickets?customField=k:a&customField=k:b",
                        "/v1/tickets?" + (1...21).map { "customField=k\($0):v" }.joined(separator: "&")] {
                let response = try await customer.send("GET", bad)
                #expect(response.status == 400, "\(bad)")
                #expect(response.json?["code"] as? String == "invalid_query")
            }
        }
    }

    /// A list read again within `CACHE_TTL_S` of its sync does not ask PostgreSQL when it was synced: with
    /// `customer_syncs` locked against every reader, it still answers, with the ticket, before the lock is let go.
    /// (An hour's TTL: at the default 15 s a loaded machine took longer than that between the two lists.)
    @Test func aListWithinItsTTLDoesNotAskWhenItWasSynced() async throws {
        try await withGateway(configure: { $0.cacheTTLSeconds = 3_600 }) { app in
            let customer = try await Customer.signIn(app)
            let id = try #require(try await customer.createTicket("kept")["id"] as? Int)
            #expect(try await customer.send("GET", "/v1/tickets?status=open").status == 200)
            let locked = Atomic<Bool>(false), release = Atomic<Bool>(false), gaveUp = Atomic<Bool>(false)
            let holder = Task.detached {
                try await app.database.transaction { tx in
                    try tx.query("LOCK TABLE customer_syncs IN ACCESS EXCLUSIVE MODE")
                    locked.store(true, ordering: .releasing)
                    // Let go after 5 s at the latest: a list that waited on the lock answers only then.
                    for _ in 0..<500 where !release.load(ordering: .acquiring) { usleep(10_000) }
                    gaveUp.store(!release.load(ordering: .acquiring), ordering: .releasing)
                }
            }
            while !locked.load(ordering: .acquiring) { try await Task.sleep(for: .milliseconds(10)) }
            let page = try await customer.send("GET", "/v1/tickets?status=open")
            let answeredUnderTheLock = !gaveUp.load(ordering: .acquiring)
            release.store(true, ordering: .releasing)
            try await holder.value
            #expect(answeredUnderTheLock)
            #expect(page.status == 200 && (page.json?["items"] as? [[String: Any]])?.compactMap { $0["id"] as? Int } == [id])
        }
    }

    @Test func customersSeeOnlyTheirOwnTickets() async throws {
        try await withGateway { app in
            let alice = try await Customer.signIn(app)
            let bob = try await Customer.signIn(app, user: "demo-customer-2", accessToken: "demo-token-2")
            let ticket = try await alice.createTicket("Alice's")
            let id = try #require(ticket["id"] as? Int)
            let channel = try #require(ticket["channelUrl"] as? String)
            for (method, path, body) in [("GET", "/v1/tickets/\(id)", nil), ("GET", "/v1/tickets/by-channel/\(channel)", nil),
                                         ("POST", "/v1/tickets/\(id)/close", "{}"), ("PATCH", "/v1/tickets/\(id)/custom-fields", #"{"customFields":{"a":"b"}}"#),
                                         ("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":1,"score":5,"comment":null}"#)] as [(String, String, String?)] {
                let response = try await bob.send(method, path, body)
                #expect(response.status == 404, "\(method) \(path)")
            }
            let bobsList = try await bob.send("GET", "/v1/tickets")
            #expect((bobsList.json?["items"] as? [Any])?.isEmpty == true)
            #expect(try await alice.send("GET", "/v1/tickets/\(id)").status == 200)
        }
    }

    @Test func tokensAreCheckedRevokedAndExpire() async throws {
        try await withGateway(configure: { $0.sessionCacheSeconds = 0 }) { app in
            let wrong = try await httpRequest(port: app.port, "POST", "/v1/sessions", json: #"{"userId":"demo-customer","accessToken":"nope"}"#)
            #expect(wrong.status == 401)
            #expect(wrong.json?["code"] as? String == "invalid_credentials")
            let anonymous = try await httpRequest(port: app.port, "GET", "/v1/tickets")
            #expect(anonymous.status == 401)
            #expect(anonymous.header("WWW-Authenticate")?.hasPrefix("Bearer") == true)
            let forged = try await Customer(port: app.port, token: "forged-token").send("GET", "/v1/tickets")
            #expect(forged.status == 401)

            let customer = try await Customer.signIn(app)
            #expect(try await customer.send("GET", "/v1/tickets").status == 200)
            // Only the hash is stored; the Desk token is sealed.
            let stored = try await app.database.query("SELECT encode(token_hash, 'hex'), encode(desk_token_sealed, 'escape') FROM sessions")
            #expect(stored.allSatisfy { !($0[0] ?? "").contains(customer.token) && !($0[1] ?? "").contains("desk-") })

            #expect(try await customer.send("DELETE", "/v1/sessions/current").status == 204)
            #expect(try await customer.send("GET", "/v1/tickets").status == 401)

            let other = try await Customer.signIn(app)
            try await app.database.query("UPDATE sessions SET expires_at = now() - interval '1 second' WHERE revoked_at IS NULL")
            let expired = try await other.send("GET", "/v1/tickets")
            #expect(expired.status == 401)
        }
    }

    @Test func idempotencyKeysReplayTheFirstAnswer() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let body = #"{"title":"Once","userName":"Demo"}"#
            let first = try await customer.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", "key-1")])
            let second = try await customer.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", "key-1")])
            #expect(first.status == 201)
            #expect(second.status == 201)
            #expect(second.header("Idempotent-Replayed") == "true")
            #expect(first.json?["id"] as? Int == second.json?["id"] as? Int)
            let different = try await customer.send("POST", "/v1/tickets", #"{"title":"Other","userName":"Demo"}"#, headers: [("Idempotency-Key", "key-1")])
            #expect(different.status == 422)
            #expect(different.json?["code"] as? String == "idempotency_key_reused")
            let list = try await customer.send("GET", "/v1/tickets?status=all")
            #expect((list.json?["items"] as? [Any])?.count == 1)
            // A key is the customer's, not the session's: signed in again (a token expired mid-retry), the retry
            // meets the first answer; another customer's key of the same name is their own.
            let again = try await Customer.signIn(app)
            let renewed = try await again.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", "key-1")])
            #expect(renewed.status == 201 && renewed.header("Idempotent-Replayed") == "true", "\(renewed.text)")
            #expect(renewed.json?["id"] as? Int == first.json?["id"] as? Int)
            _ = try await httpRequest(port: DeskAgent(app).port, "POST", "/emulator/customers",
                                      json: #"{"sendbirdId":"other-customer","accessToken":"other-token","displayName":"Other"}"#)
            let other = try await Customer.signIn(app, user: "other-customer", accessToken: "other-token")
            let theirs = try await other.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", "key-1")])
            #expect(theirs.status == 201 && theirs.header("Idempotent-Replayed") == nil, "\(theirs.text)")
            #expect(theirs.json?["id"] as? Int != first.json?["id"] as? Int)
            // Refused credentials leave nothing behind: no row per made-up token and key.
            let kept = try await app.database.query("SELECT count(*) FROM idempotency_keys")[0].decode(0, as: Int.self)
            for (index, path) in ["/v1/tickets", "/v1/webhooks/desk"].enumerated() {
                let refused = try await httpRequest(port: app.port, "POST", path, headers: [("Authorization", "Bearer made-up-\(index)"),
                                                    ("Idempotency-Key", "made-up-\(index)")], json: body)
                #expect(refused.status == 401, "\(path): \(refused.text)")
            }
            #expect(try await app.database.query("SELECT count(*) FROM idempotency_keys")[0].decode(0, as: Int.self) == kept)
        }
    }

    /// A ticket Desk created is the client's even when the database cannot keep its copy just then (here a trigger
    /// answers as a statement timeout would): the answer was a 503, the key was let go, and the client's retry with
    /// the same key made a second ticket in Desk. Now the answer is Desk's ticket, kept for the key; the cache reads
    /// it from Desk when it is next asked for.
    @Test func aTicketDeskCreatedIsNotCreatedAgainWhenItsCopyCannotBeStored() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            _ = try await customer.send("GET", "/v1/tickets?status=all")
            try await app.database.query("""
                CREATE FUNCTION refuse_tickets() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN RAISE EXCEPTION 'canceling statement due to statement timeout' USING ERRCODE = 'query_canceled'; END $$
                """)
            try await app.database.query("""
                CREATE TRIGGER refuse_tickets BEFORE INSERT OR UPDATE ON tickets FOR EACH ROW EXECUTE FUNCTION refuse_tickets()
                """)
            let body = #"{"title":"Kept by Desk","userName":"Demo"}"#
            let first = try await customer.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", "created-once")])
            #expect(first.status == 201, "\(first.text)")
            let id = try #require(first.json?["id"] as? Int)
            #expect(first.json?["title"] as? String == "Kept by Desk")
            #expect(first.header("Location") == "/v1/tickets/\(id)")
            try await app.database.query("DROP TRIGGER refuse_tickets ON tickets")
            let retried = try await customer.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", "created-once")])
            #expect(retried.status == 201 && retried.header("Idempotent-Replayed") == "true", "\(retried.text)")
            #expect(retried.json?["id"] as? Int == id)
            let read = try await customer.send("GET", "/v1/tickets/\(id)")
            #expect(read.status == 200 && read.json?["title"] as? String == "Kept by Desk", "\(read.text)")
            let list = try await customer.send("GET", "/v1/tickets?status=all")
            let ids = (list.json?["items"] as? [[String: Any]])?.compactMap { $0["id"] as? Int }
            #expect(ids == [id], "\(list.text)")
        }
    }

    /// A creation Desk carried out but did not answer in time (503): the retry with the same key finds the ticket it
    /// made instead of making a second; a creation Desk refused with its own error before doing anything (its 500) is
    /// made by the retry, once.
    @Test func aRetryAfterAnUnansweredCreationFindsTheTicketDeskMade() async throws {
        try await withGateway(configure: { $0.deskTimeoutMilliseconds = 1_500 }) { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let titles = {
                let list = try await customer.send("GET", "/v1/tickets?status=all&limit=100")
                return ((list.json?["items"] as? [[String: Any]]) ?? []).map { ($0["title"] as? String ?? "", $0["id"] as? Int ?? 0) }
            }
            try await agent.post("/faults", #"{"answerDelayMs":5000}"#)
            let body = #"{"title":"Answer lost","userName":"Demo"}"#
            let lost = try await customer.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", "lost-1")])
            try await agent.post("/faults", "{}")
            #expect(lost.status == 503, "\(lost.text)")
            #expect((lost.json?["detail"] as? String)?.contains("may have made; retry later with the same Idempotency-Key") == true, "\(lost.text)")
            let retried = try await customer.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", "lost-1")])
            #expect(retried.status == 201 && retried.header("Idempotent-Replayed") == nil, "\(retried.text)")
            let id = try #require(retried.json?["id"] as? Int)
            let replayed = try await customer.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", "lost-1")])
            #expect(replayed.status == 201 && replayed.header("Idempotent-Replayed") == "true" && replayed.json?["id"] as? Int == id)
            #expect(try await titles().filter { $0.0 == "Answer lost" }.map(\.1) == [id])

            try await agent.post("/faults", #"{"failNext":1}"#)
            let other = #"{"title":"Refused by Desk","userName":"Demo"}"#
            let refused = try await customer.send("POST", "/v1/tickets", other, headers: [("Idempotency-Key", "refused-1")])
            #expect(refused.status == 503, "\(refused.text)")
            let made = try await customer.send("POST", "/v1/tickets", other, headers: [("Idempotency-Key", "refused-1")])
            #expect(made.status == 201, "\(made.text)")
            #expect(try await titles().filter { $0.0 == "Refused by Desk" }.count == 1)
        }
    }

    /// Desk slow, not lost: the ticket appears only after the gateway stopped waiting (the emulator holds the
    /// creation until the test lets it go). A retry before then finds nothing and waits (503 with the time left in
    /// `Retry-After`) instead of creating a second ticket; once Desk has made it, the retry answers with it. When
    /// Desk never made it, the retry after that time creates it, once.
    @Test func aRetryWhileDeskMayStillCreateTheTicketWaitsForIt() async throws {
        try await withGateway(configure: { $0.deskTimeoutMilliseconds = 1_500; $0.cacheTTLSeconds = 0 }) { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let ids = { (title: String) async throws -> [Int] in
                let list = try await customer.send("GET", "/v1/tickets?status=all&limit=100")
                return ((list.json?["items"] as? [[String: Any]]) ?? []).filter { $0["title"] as? String == title }.compactMap { $0["id"] as? Int }
            }
            let send = { (body: String, key: String) in
                try await customer.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", key)])
            }
            let releaseHeldCreation = {
                let arrived = try await eventually(within: 30, every: .milliseconds(50)) {
                    try await httpRequest(port: agent.port, "GET", "/emulator/held").json?["held"] as? Int == 1
                }
                #expect(arrived, "the creation never reached Desk")
                try await agent.post("/release")
            }
            let slow = #"{"title":"Slow Desk","userName":"Demo"}"#
            try await agent.post("/faults", #"{"holdNext":1}"#)
            let first = try await send(slow, "slow-1")
            #expect(first.status == 503, "\(first.text)")
            let early = try await send(slow, "slow-1")
            #expect(early.status == 503 && (50...60).contains(Int(early.header("Retry-After") ?? "") ?? 0), "\(early.text)")
            #expect((early.json?["detail"] as? String)?.contains("may still be making the change") == true, "\(early.text)")
            try await releaseHeldCreation()
            var made: [Int] = []
            for _ in 0..<100 where made.isEmpty {
                try await Task.sleep(for: .milliseconds(100))
                made = try await ids("Slow Desk")
            }
            #expect(made.count == 1, "\(made)")
            let found = try await send(slow, "slow-1")
            #expect(found.status == 201 && found.json?["id"] as? Int == made.first, "\(found.text)")
            #expect(try await ids("Slow Desk") == made)

            let never = #"{"title":"Never made","userName":"Demo"}"#
            try await agent.post("/faults", #"{"holdNext":1,"failNext":1}"#)
            let lost = try await send(never, "never-1")
            #expect(lost.status == 503, "\(lost.text)")
            try await releaseHeldCreation()
            #expect(try await send(never, "never-1").status == 503)
            try await app.database.query("UPDATE idempotency_keys SET settles_at = now() WHERE key = 'never-1'")
            let created = try await send(never, "never-1")
            #expect(created.status == 201, "\(created.text)")
            #expect(try await ids("Never made") == [created.json?["id"] as? Int ?? -1])
        }
    }

    /// Desk carries a write out but answers with a page that is not its JSON (a proxy's): the creation is answered 502
    /// saying Desk may have made it, and the retry with its key answers with that ticket instead of making a second;
    /// custom fields and a close are queued (202) instead of failed, and delivered by their next attempt (the close's
    /// refused as done already). While answers stay unreadable an operation stays pending, saying why.
    @Test func aWriteWhoseAnswerCannotBeReadIsNotTakenForRefused() async throws {
        try await withGateway(configure: { $0.cacheTTLSeconds = 0; $0.outboxMaxBackoffSeconds = 1 }) { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let body = #"{"title":"Garbled answer","userName":"Demo"}"#
            try await agent.post("/faults", #"{"garbleNext":1}"#)
            let garbled = try await customer.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", "garbled-1")])
            #expect(garbled.status == 502, "\(garbled.text)")
            #expect((garbled.json?["detail"] as? String)?.contains("after a change it may have made") == true, "\(garbled.text)")
            let metrics = try await httpRequest(port: app.port, "GET", "/metrics").text
            #expect(metrics.contains(#"desk_requests_total{operation="createTicket",outcome="unreadable"} 1"#), "\(metrics)")
            let retried = try await customer.send("POST", "/v1/tickets", body, headers: [("Idempotency-Key", "garbled-1")])
            #expect(retried.status == 201, "\(retried.text)")
            let id = try #require(retried.json?["id"] as? Int)
            let list = try await customer.send("GET", "/v1/tickets?status=all&limit=100")
            let made = ((list.json?["items"] as? [[String: Any]]) ?? []).filter { $0["title"] as? String == "Garbled answer" }
            #expect(made.compactMap { $0["id"] as? Int } == [id])

            let delivered = { (response: TestResponse) async throws -> [String: Any]? in
                #expect(response.status == 202, "\(response.text)")
                let operation = try #require(response.json?["id"] as? Int)
                try await waitForEmptyOutbox(app.database)
                return try await customer.send("GET", "/v1/operations/\(operation)").json
            }
            try await agent.post("/faults", #"{"garbleNext":1}"#)
            let fields = try await delivered(try await customer.send("PATCH", "/v1/tickets/\(id)/custom-fields", #"{"customFields":{"seats":"5"}}"#))
            #expect(fields?["status"] as? String == "delivered", "\(String(describing: fields))")
            let read = try await customer.send("GET", "/v1/tickets/\(id)")
            #expect((read.json?["customFields"] as? [String: String])?["seats"] == "5", "\(read.text)")
            try await agent.post("/faults", #"{"garbleNext":1000}"#)
            let queued = try await customer.send("PATCH", "/v1/tickets/\(id)/custom-fields", #"{"customFields":{"seats":"6"}}"#)
            #expect(queued.status == 202, "\(queued.text)")
            let pending = try #require(queued.json?["id"] as? Int)
            let triedAgain = try await eventually(within: 30, every: .milliseconds(200)) {
                (try await customer.send("GET", "/v1/operations/\(pending)").json?["attempts"] as? Int ?? 0) >= 3
            }
            let stuck = try await customer.send("GET", "/v1/operations/\(pending)").json
            #expect(triedAgain && stuck?["status"] as? String == "pending", "\(String(describing: stuck))")
            #expect((stuck?["reason"] as? String)?.hasPrefix("desk_unreadable") == true, "\(String(describing: stuck))")
            try await agent.post("/faults", "{}")
            try await waitForEmptyOutbox(app.database)
            #expect(try await customer.send("GET", "/v1/operations/\(pending)").json?["status"] as? String == "delivered")

            try await agent.activate(id)
            try await agent.post("/faults", #"{"garbleNext":1}"#)
            let close = try await customer.send("POST", "/v1/tickets/\(id)/close", #"{"comment":"done"}"#)
            #expect(close.status == 202, "\(close.text)")
            let operation = try #require(close.json?["id"] as? Int)
            try await waitForEmptyOutbox(app.database)
            let finished = try await customer.send("GET", "/v1/operations/\(operation)")
            #expect(finished.json?["status"] as? String == "delivered", "\(finished.text)")
            #expect(try await customer.send("GET", "/v1/tickets/\(id)").json?["status"] as? String == "CLOSED")
        }
    }

    @Test func conditionalGetsAnswer304() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let id = try #require(try await customer.createTicket("Etag")["id"] as? Int)
            let first = try await customer.send("GET", "/v1/tickets/\(id)")
            let etag = try #require(first.header("ETag"))
            let again = try await customer.send("GET", "/v1/tickets/\(id)", headers: [("If-None-Match", etag)])
            #expect(again.status == 304)
            #expect(again.body.isEmpty)
            #expect(again.header("ETag") == etag)
            let changed = try await customer.send("GET", "/v1/tickets/\(id)", headers: [("If-None-Match", "\"other\"")])
            #expect(changed.status == 200)
        }
    }

    @Test func staleReadsWhileDeskIsDownAndWritesAre503() async throws {
        try await withGateway(configure: { $0.cacheTTLSeconds = 0 }) { app in
            let customer = try await Customer.signIn(app)
            let id = try #require(try await customer.createTicket("Cached")["id"] as? Int)
            #expect(try await customer.send("GET", "/v1/tickets?status=all").status == 200)
            await app.emulator!.stop()

            let read = try await customer.send("GET", "/v1/tickets/\(id)")
            #expect(read.status == 200)
            #expect(read.json?["stale"] as? Bool == true)
            #expect(read.header("X-Cache") == "STALE")
            let list = try await customer.send("GET", "/v1/tickets?status=all")
            #expect(list.status == 200)
            #expect(list.json?["stale"] as? Bool == true)
            #expect((list.json?["items"] as? [Any])?.count == 1)

            let write = try await customer.send("POST", "/v1/tickets", #"{"title":"New","userName":"Demo"}"#)
            #expect(write.status == 503)
            #expect(write.json?["code"] as? String == "desk_unavailable")
            #expect(write.header("Retry-After") != nil)
        }
    }

    /// Desk answering every request with a page that is not its JSON (a maintenance page sent as 200) is Desk away
    /// for a read: the cached ticket, list and open count are served marked stale instead of 502.
    @Test func staleReadsWhileDeskAnswersWhatCannotBeRead() async throws {
        try await withGateway(configure: { $0.cacheTTLSeconds = 0 }) { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let id = try #require(try await customer.createTicket("Cached")["id"] as? Int)
            #expect(try await customer.send("GET", "/v1/tickets?status=all").status == 200)
            try await agent.post("/faults", #"{"garbleNext":1000}"#)
            let read = try await customer.send("GET", "/v1/tickets/\(id)")
            #expect(read.status == 200 && read.json?["stale"] as? Bool == true && read.header("X-Cache") == "STALE", "\(read.text)")
            let list = try await customer.send("GET", "/v1/tickets?status=all")
            #expect(list.status == 200 && list.json?["stale"] as? Bool == true && (list.json?["items"] as? [Any])?.count == 1, "\(list.text)")
            let count = try await customer.send("GET", "/v1/tickets/open-count")
            #expect(count.status == 200 && count.json?["stale"] as? Bool == true, "\(count.text)")
            try await agent.post("/faults", "{}")
            // Fresh again once Desk answers: at once, or on a loaded host (where Desk's answer can take longer than the
            // 2 s stale-read budget, and the copy is served stale) on a later read.
            #expect(try await eventually(within: 30, every: .milliseconds(200)) {
                try await customer.send("GET", "/v1/tickets/\(id)").json?["stale"] as? Bool == false
            })
        }
    }

    @Test func badInputIsRefusedPreciselyAndChangesNothing() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let cases: [(body: [UInt8], contentType: String, status: Int, code: String)] = [
                (Array("{not json".utf8), "application/json", 400, "malformed_json"),
                ([0x7B, 0x22, 0x74, 0x69, 0x74, 0x6C, 0x65, 0x22, 0x3A, 0x22, 0xC3, 0x28, 0x22, 0x7D], "application/json", 400, "malformed_json"),
                (Array("[1,2]".utf8), "application/json", 400, "malformed_json"),
                (Array("title=x".utf8), "application/x-www-form-urlencoded", 415, "unsupported_media_type"),
                (Array(#"{"title":5,"userName":"D"}"#.utf8), "application/json", 422, "validation_failed"),
                (Array(#"{"title":"x","userName":"D","priority":"SOON"}"#.utf8), "application/json", 422, "validation_failed"),
                (Array(#"{"title":"\#(String(repeating: "x", count: 256))","userName":"D"}"#.utf8), "application/json", 422, "validation_failed"),
                (Array(#"{"title":"x","userName":"D","customFields":{"k":{"nested":1}}}"#.utf8), "application/json", 422, "validation_failed"),
                (Array(#"{"title":"x","userName":"D","unknown":true}"#.utf8), "application/json", 422, "validation_failed"),
                (Array(#"{"title":"x","userName":"D","title":"y"}"#.utf8), "application/json", 400, "malformed_json"),
            ]
            for item in cases {
                let response = try await httpRequest(port: app.port, "POST", "/v1/tickets",
                                                     headers: [("Authorization", "Bearer \(customer.token)"), ("Content-Type", item.contentType)],
                                                     body: item.body)
                #expect(response.status == item.status, "\(String(decoding: item.body, as: UTF8.self)): \(response.text)")
                #expect(response.json?["code"] as? String == item.code)
                #expect(response.header("Content-Type") == "application/problem+json")
            }
            let list = try await customer.send("GET", "/v1/tickets?status=all")
            #expect((list.json?["items"] as? [Any])?.isEmpty == true)
            let desk = try await httpRequest(port: app.emulator!.port, "GET", "/platform/v1/tickets",
                                             headers: [("SENDBIRDDESKAPITOKEN", "emulator-api-token")])
            #expect(desk.json?["count"] as? Int == 0)
        }
    }

    @Test func customerCustomFieldsUpdate() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let response = try await customer.send("PATCH", "/v1/customers/me/custom-fields", #"{"customFields":{"tier":"gold","age":42}}"#)
            #expect(response.status == 200)
            #expect((response.json?["customFields"] as? [String: String]) == ["tier": "gold", "age": "42"])
            let bad = try await customer.send("PATCH", "/v1/customers/me/custom-fields", #"{"customFields":{"a_key_much_longer_than_twenty":"x"}}"#)
            #expect(bad.status == 422)
        }
    }

    /// A customer's requests are counted on their token's bucket whatever else they carry: a made-up `X-API-Key` (a
    /// report route's credential) beside the token, from addresses that change, must not move them to fresh
    /// per-address buckets.
    @Test func aCustomersBudgetIsTheirTokensWhateverHeadersComeWithIt() async throws {
        try await withGateway(configure: {
            $0.rateLimitBurst = 4
            $0.rateLimitPerMinute = 1
            $0.trustedProxies = ["127.0.0.1/32"]
        }) { app in
            let customer = try await Customer.signIn(app)
            #expect(try await customer.send("GET", "/v1/tickets/open-count").status == 200)
            var statuses: [Int] = []
            for index in 0..<6 {
                let response = try await customer.send("GET", "/v1/tickets/open-count",
                                                        headers: [("X-API-Key", "made-up-\(index)"), ("X-Forwarded-For", "203.0.113.\(index + 1)")])
                statuses.append(response.status)
            }
            #expect(statuses.filter { $0 == 200 }.count == 3 && statuses.suffix(3).allSatisfy { $0 == 429 }, "\(statuses)")
        }
    }

    @Test func corsAndRateLimits() async throws {
        try await withGateway(configure: {
            $0.corsOrigins = ["https://app.example.com"]
            $0.rateLimitBurst = 3
            $0.rateLimitPerMinute = 1
        }) { app in
            let preflight = try await httpRequest(port: app.port, "OPTIONS", "/v1/tickets",
                                                  headers: [("Origin", "https://app.example.com"), ("Access-Control-Request-Method", "POST")])
            #expect(preflight.status == 204)
            #expect(preflight.header("Access-Control-Allow-Origin") == "https://app.example.com")
            #expect(preflight.header("Access-Control-Allow-Headers")?.contains("Idempotency-Key") == true)
            let foreign = try await httpRequest(port: app.port, "OPTIONS", "/v1/tickets",
                                                headers: [("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST")])
            #expect(foreign.header("Access-Control-Allow-Origin") == nil)

            let headers = [("Authorization", "Bearer some-token"), ("Origin", "https://app.example.com")]
            var statuses: [Int] = []
            var last: TestResponse?
            for _ in 0..<4 {
                let response = try await httpRequest(port: app.port, "GET", "/v1/tickets", headers: headers)
                statuses.append(response.status)
                last = response
            }
            #expect(statuses == [401, 401, 401, 429])
            #expect(last?.header("Retry-After") != nil)
            #expect(last?.header("RateLimit-Remaining") == "0")
            #expect(last?.json?["code"] as? String == "rate_limited")
            #expect(last?.header("Access-Control-Allow-Origin") == "https://app.example.com")
            // An unverified token is counted against the address, so another made-up token gets no fresh budget...
            #expect(try await httpRequest(port: app.port, "GET", "/v1/tickets", headers: [("Authorization", "Bearer other")]).status == 429)
            // ...while a signed-in customer (sign-ins have their own bucket) has a budget of their own.
            let customer = try await Customer.signIn(app)
            #expect(try await customer.send("GET", "/v1/tickets/open-count").status == 200)
        }
    }

    @Test func messagesAreClassified() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            func classify(_ customType: String, _ data: String) async throws -> [String: Any] {
                let body = JSONValue.object([("customType", .string(customType)), ("data", .string(data))]).serialized()
                let response = try await customer.send("POST", "/v1/messages/classify", body)
                #expect(response.status == 200, "\(response.text)")
                return response.json ?? [:]
            }
            let inquiry = try await classify("SENDBIRD_DESK_RICH_MESSAGE", #"{"type":"SENDBIRD_DESK_INQUIRE_TICKET_CLOSURE","body":{"state":"WAITING","ticketId":7}}"#)
            #expect(inquiry["kind"] as? String == "closure_inquiry")
            #expect(inquiry["state"] as? String == "WAITING")
            #expect(inquiry["ticketId"] as? Int == 7)
            let csat = try await classify("SENDBIRD_DESK_RICH_MESSAGE", #"{"type":"SENDBIRD_DESK_CUSTOMER_SATISFACTION","body":{"status":"CONFIRMED","customerSatisfactionScore":5}}"#)
            #expect(csat["kind"] as? String == "csat")
            #expect(csat["state"] as? String == "CONFIRMED")
            #expect(csat["score"] as? Int == 5)
            let preview = try await classify("SENDBIRD_DESK_RICH_MESSAGE", #"{"type":"SENDBIRD_DESK_URL_PREVIEW","body":{"url":"https://x"}}"#)
            #expect(preview["kind"] as? String == "url_preview")
            let system = try await classify("SENDBIRD_DESK_ADMIN_MESSAGE_CUSTOM_TYPE", #"{"type":"SYSTEM_MESSAGE_TICKET_ASSIGNED_BY_SYSTEM","ticket":{"id":3}}"#)
            #expect(system["kind"] as? String == "system")
            #expect(system["visibleToCustomer"] as? Bool == false)
            let notification = try await classify("SENDBIRD_DESK_ADMIN_MESSAGE_CUSTOM_TYPE", #"{"type":"NOTIFICATION_WELCOME"}"#)
            #expect(notification["kind"] as? String == "notification")
            #expect(notification["visibleToCustomer"] as? Bool == true)
            let plain = try await classify("", "")
            #expect(plain["kind"] as? String == "plain")
            let bad = try await customer.send("POST", "/v1/messages/classify", #"{"customType":"SENDBIRD_DESK_RICH_MESSAGE","data":"{oops"}"#)
            #expect(bad.status == 422)
        }
    }
}

/// Serves one HTML page (and a redirect to it) for preview tests.
struct PageResponder: HTTPResponder {
    func respond(to request: HTTPRequest) -> HTTPReply {
        switch request.path {
        case "/page":
            return .now(HTTPResponse(status: 200, contentType: "text/html", body: """
                <html><head><title>Fallback</title>
                <meta property="og:title" content="Desk &amp; Chat">
                <meta property="og:description" content="All about it">
                <meta property="og:image" content="/img.png">
                <meta property="og:site_name" content="Example">
                </head><body>hi</body></html>
                """))
        case "/hop":
            return .now(HTTPResponse(status: 302, headers: [("Location", "/page")]))
        case "/to-metadata":
            return .now(HTTPResponse(status: 302, headers: [("Location", "http://169.254.169.254/latest/meta-data")]))
        default:
            return .now(HTTPResponse(status: 404))
        }
    }
    func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse { HTTPResponse(status: 413) }
    func shuttingDown(_ request: HTTPRequest) -> HTTPResponse { HTTPResponse(status: 503) }
}

@Suite struct LinkPreviewTests {
    @Test func previewsAPageWithItsOpenGraphData() async throws {
        let site = try TestPorts.started { HTTPServer(configuration: HTTPServerConfiguration.forTests(port: $0), responder: PageResponder()) }
        // A generous deadline: the suite runs many servers at once on two cores.
        try await withGateway(configure: { $0.linkPreviewAllowPrivate = true; $0.linkPreviewTimeoutMilliseconds = 20_000 }) { app in
            let customer = try await Customer.signIn(app)
            let response = try await customer.send("POST", "/v1/link-previews", #"{"url":"http://127.0.0.1:\#(site.port)/hop"}"#)
            #expect(response.status == 200, "\(response.text)")
            let json = response.json ?? [:]
            #expect(json["title"] as? String == "Desk & Chat")
            #expect(json["description"] as? String == "All about it")
            #expect(json["siteName"] as? String == "Example")
            #expect(json["image"] as? String == "http://127.0.0.1:\(site.port)/img.png")
            let message = json["message"] as? [String: Any]
            #expect(message?["customType"] as? String == "SENDBIRD_DESK_RICH_MESSAGE")
            let data = try JSONParser.parse(message?["data"] as? String ?? "")
            #expect(data["type"]?.stringValue == "SENDBIRD_DESK_URL_PREVIEW")
            #expect(data["body"]?["title"]?.stringValue == "Desk & Chat")
        }
        await site.stop()
    }

    @Test func privateTargetsAndOtherSchemesAreRefused() async throws {
        let site = try TestPorts.started { HTTPServer(configuration: HTTPServerConfiguration.forTests(port: $0), responder: PageResponder()) }
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            for url in ["http://127.0.0.1:\(site.port)/page", "http://localhost:\(site.port)/page", "http://10.1.2.3/", "http://169.254.169.254/",
                        "http://[::1]/", "http://192.168.0.1/", "ftp://example.com/", "file:///etc/passwd", "http://user:pw@example.com/"] {
                let response = try await customer.send("POST", "/v1/link-previews", JSONValue.object([("url", .string(url))]).serialized())
                #expect(response.status == 422, "\(url)")
                #expect(response.json?["code"] as? String == "url_not_allowed", "\(url)")
            }
        }
        // With private targets allowed (as here for the local page), a redirect is still re-checked hop by hop.
        try await withGateway(configure: { $0.linkPreviewAllowPrivate = true }) { app in
            let customer = try await Customer.signIn(app)
            let response = try await customer.send("POST", "/v1/link-previews", #"{"url":"http://127.0.0.1:\#(site.port)/nowhere"}"#)
            #expect(response.status == 422)
            #expect(response.json?["code"] as? String == "preview_unavailable")
        }
        await site.stop()
    }
}
