import DeskEmulator
import Foundation
import JSON
import Testing
import TestSupport

/// The emulator's raw JSON, field by field, against the shapes real Sendbird Desk uses and the official SDKs read
/// (legacy `status`, `info`/`relatedChannels` as JSON strings, `customFields` as lists, DRF-style pages and errors).
@Suite struct EmulatorShapeTests {
    static let legacyStatuses: Set<String> = ["INITIALIZED", "PROACTIVE", "UNASSIGNED", "ASSIGNED", "OPEN", "CLOSED"]
    static let statuses: Set<String> = ["INITIALIZED", "PROACTIVE", "PENDING", "ACTIVE", "IDLE", "WORK_IN_PROGRESS", "CLOSED"]
    static let closeStatuses: Set<String> = ["NOT_CLOSED", "NOT_CONFIRMED", "CONFIRMED", "CLOSED_BUT_NOT_DEFINED", "CLOSED_BY_SYSTEM",
                                             "CLOSED_BY_CUSTOMER", "CLOSED_BY_ADMIN", "CLOSED_BY_AGENT"]
    static let priorities: Set<String> = ["URGENT", "HIGH", "MEDIUM", "LOW"]

    func withEmulator(_ body: (Int) async throws -> Void) async throws {
        let emulator = try startedEmulator()
        do { try await body(emulator.port) } catch { await emulator.stop(); throw error }
        await emulator.stop()
    }

    func json(_ response: TestResponse, sourceLocation: SourceLocation = #_sourceLocation) throws -> JSONValue {
        #expect(response.header("Content-Type")?.hasPrefix("application/json") == true, sourceLocation: sourceLocation)
        return try JSONParser.parse(response.body)
    }

    func isTimestamp(_ value: JSONValue?) -> Bool {
        guard let text = value?.stringValue else { return false }
        return ISOTimestamp.parse(text) != nil
    }

    func login(_ port: Int) async throws -> String {
        let response = try await httpRequest(port: port, "POST", "/sapi/customers/auth/", headers: [("sendbirdAccessToken", "demo-token")],
                                             json: #"{"sendbirdAppId":"emulated-app","sendbirdId":"demo-customer"}"#)
        let body = try json(response)
        #expect(response.status == 200)
        let token = try #require(body["token"]?.stringValue)
        return token
    }

    func checkTicket(_ ticket: JSONValue, platform: Bool, sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(ticket["id"]?.intValue != nil, sourceLocation: sourceLocation)
        #expect(ticket["project"]?.intValue != nil, sourceLocation: sourceLocation)
        #expect(ticket["channelName"]?.stringValue != nil, sourceLocation: sourceLocation)
        #expect(ticket["channelUrl"]?.stringValue?.isEmpty == false, sourceLocation: sourceLocation)
        #expect(Self.legacyStatuses.contains(ticket["status"]?.stringValue ?? ""), sourceLocation: sourceLocation)
        #expect(Self.statuses.contains(ticket["status2"]?.stringValue ?? ""), sourceLocation: sourceLocation)
        #expect(Self.closeStatuses.contains(ticket["closeStatus"]?.stringValue ?? ""), sourceLocation: sourceLocation)
        #expect(Self.priorities.contains(ticket["priority"]?.stringValue ?? ""), sourceLocation: sourceLocation)
        // info and relatedChannels are JSON strings, not nested JSON.
        let info = try JSONParser.parse(try #require(ticket["info"]?.stringValue, sourceLocation: sourceLocation))
        #expect(info.objectValue != nil, sourceLocation: sourceLocation)
        let related = try JSONParser.parse(try #require(ticket["relatedChannels"]?.stringValue, sourceLocation: sourceLocation))
        for channel in related.arrayValue ?? [] {
            #expect(channel["channel_url"]?.stringValue != nil && channel["name"]?.stringValue != nil, sourceLocation: sourceLocation)
        }
        let fields = try #require(ticket["customFields"]?.arrayValue, sourceLocation: sourceLocation)
        for field in fields {
            #expect(field["key"]?.stringValue != nil && field["value"]?.stringValue != nil, sourceLocation: sourceLocation)
        }
        let customer = try #require(ticket["customer"], sourceLocation: sourceLocation)
        #expect(customer["id"]?.intValue != nil && customer["sendbirdId"]?.stringValue != nil, sourceLocation: sourceLocation)
        if let agent = ticket["recentAssignment"]?["agent"] {
            #expect(agent["id"]?.intValue != nil, sourceLocation: sourceLocation)
            #expect(agent["user"]?.intValue != nil, sourceLocation: sourceLocation)
            #expect(agent["displayName"]?.stringValue != nil, sourceLocation: sourceLocation)
            #expect(agent["sendbirdId"]?.stringValue != nil, sourceLocation: sourceLocation)
            #expect(agent["photoThumbnailUrl"]?.stringValue != nil, sourceLocation: sourceLocation)
        } else {
            #expect(ticket["recentAssignment"]?.isNull == true, sourceLocation: sourceLocation)
        }
        if let group = ticket["group"], !group.isNull {
            if platform {
                #expect(group["id"]?.intValue != nil && group["key"]?.stringValue != nil && group["name"]?.stringValue != nil,
                        sourceLocation: sourceLocation)
            } else {
                #expect(group.intValue != nil, "sapi tickets carry the group id", sourceLocation: sourceLocation)
            }
        }
        #expect(ticket["firstResponseTime"]?.intValue != nil, sourceLocation: sourceLocation)
        #expect(isTimestamp(ticket["createdAt"]) && isTimestamp(ticket["updatedAt"]), sourceLocation: sourceLocation)
        for key in ["closedAt", "issuedAt"] {
            let value = ticket[key]
            #expect(value?.isNull == true || isTimestamp(value), "\(key)", sourceLocation: sourceLocation)
        }
        #expect(ticket["customerSatisfactionScore"] != nil, sourceLocation: sourceLocation)
    }

    func checkPage(_ page: JSONValue, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(page["count"]?.intValue != nil, sourceLocation: sourceLocation)
        for key in ["next", "previous"] {
            let value = page[key]
            #expect(value?.isNull == true || value?.stringValue?.hasPrefix("http") == true, "\(key)", sourceLocation: sourceLocation)
        }
        #expect(page["results"]?.arrayValue != nil, sourceLocation: sourceLocation)
    }

    @Test func customerAPIShapes() async throws {
        try await withEmulator { port in
            let token = try await login(port)
            let auth: [(String, String)] = [("sendbirdDeskToken", token)]
            let created = try await httpRequest(port: port, "POST", "/sapi/tickets/", headers: auth, json: """
                {"sendbirdAppId":"emulated-app","channelName":"Shape","channelType":"SENDBIRD_JAVASCRIPT",
                 "customFields":"{\\"product\\":\\"desk\\",\\"seats\\":\\"5\\"}","relatedChannelUrls":"ch_a,ch_b",
                 "info":"{\\"ticket\\":{\\"subject\\":\\"Shape\\"}}","groupKey":"support","priority":"HIGH"}
                """)
            #expect(created.status == 201)
            let ticket = try json(created)
            try checkTicket(ticket, platform: false)
            let id = try #require(ticket["id"]?.intValue)

            // The JS SDK's own query, header case and paths (with and without trailing slash).
            let list = try await httpRequest(port: port, "GET",
                "/sapi/tickets/?sendbirdAppId=emulated-app&limit=10&offset=0&status=ASSIGNED&status=UNASSIGNED&order=-updated_at&customFields=product%3Adesk",
                headers: [("SENDBIRDDESKTOKEN", token)])
            let page = try json(list)
            checkPage(page)
            #expect(page["results"]?.arrayValue?.isEmpty == true, "an INITIALIZED ticket is not in the legacy open filter")
            let all = try json(try await httpRequest(port: port, "GET", "/sapi/tickets?sendbirdAppId=emulated-app&limit=10&offset=0&customFields=product%3Adesk", headers: auth))
            checkPage(all)
            try checkTicket(try #require(all["results"]?.arrayValue?.first), platform: false)

            let count = try json(try await httpRequest(port: port, "GET", "/sapi/tickets/count/?sendbirdAppId=emulated-app", headers: auth))
            for key in ["UNASSIGNED", "ASSIGNED", "CLOSED", "PENDING", "ACTIVE", "IDLE", "WORK_IN_PROGRESS"] {
                #expect(count[key]?.intValue != nil, "\(key)")
            }

            for path in ["/sapi/tickets/\(id)/?sendbirdAppId=emulated-app", "/sapi/tickets/\(id)?sendbirdAppId=emulated-app"] {
                try checkTicket(try json(try await httpRequest(port: port, "GET", path, headers: auth)), platform: false)
            }
            let patched = try await httpRequest(port: port, "PATCH", "/sapi/tickets/\(id)", headers: auth,
                                                json: #"{"sendbirdAppId":"emulated-app","priority":"URGENT"}"#)
            try checkTicket(try json(patched), platform: false)
            let fields = try await httpRequest(port: port, "PATCH", "/sapi/tickets/\(id)/custom_fields/", headers: auth,
                                               json: #"{"sendbirdAppId":"emulated-app","customFields":"{\"seats\":\"6\"}"}"#)
            try checkTicket(try json(fields), platform: false)

            let customer = try json(try await httpRequest(port: port, "PATCH", "/sapi/customers/custom_fields/", headers: auth,
                                                          json: #"{"sendbirdAppId":"emulated-app","customFields":"{\"tier\":\"gold\"}"}"#))
            #expect(customer["customFields"]?.arrayValue?.first?["key"]?.stringValue == "tier")

            let preview = try json(try await httpRequest(port: port, "POST", "/sapi/tickets/url_preview/", headers: auth,
                                                         json: #"{"sendbirdAppId":"emulated-app","url":"https://example.com/a"}"#))
            for key in ["url", "title", "siteName", "description", "image"] { #expect(preview[key]?.stringValue != nil, "\(key)") }

            // Close and reopen answers carry channelUrl (the SDK updates the ticket only then).
            _ = try await httpRequest(port: port, "POST", "/emulator/tickets/\(id)/customer-message", json: "{}")
            _ = try await httpRequest(port: port, "POST", "/emulator/tickets/\(id)/assign", json: #"{"agentId":501}"#)
            let closed = try json(try await httpRequest(port: port, "PATCH", "/sapi/tickets/\(id)/close", headers: auth,
                                                        json: #"{"sendbirdAppId":"emulated-app","closeComment":""}"#))
            try checkTicket(closed, platform: false)
            #expect(closed["status"]?.stringValue == "CLOSED")
            let csat = try json(try await httpRequest(port: port, "POST", "/emulator/tickets/\(id)/csat-request", json: "{}"))
            let messageId = try #require(csat["messageId"]?.intValue)
            let csatData = try JSONParser.parse(try #require(csat["message"]?["data"]?.stringValue))
            #expect(csatData["type"]?.stringValue == "SENDBIRD_DESK_CUSTOMER_SATISFACTION")
            #expect(csatData["body"]?["state"]?.stringValue == "WAITING")
            #expect(csatData["body"]?["status"]?.stringValue == "WAITING", "both keys, for dashboard-style readers")
            #expect(csat["message"]?["customType"]?.stringValue == "SENDBIRD_DESK_RICH_MESSAGE")
            let edited = try await httpRequest(port: port, "PATCH", "/sapi/tickets/\(id)/edit_message/", headers: auth, json: """
                {"sendbirdAppId":"emulated-app","messageId":\(messageId),"messageData":"{\\"type\\":\\"SENDBIRD_DESK_CUSTOMER_SATISFACTION\\",\\"body\\":{\\"state\\":\\"CONFIRMED\\",\\"customerSatisfactionScore\\":5,\\"customerSatisfactionComment\\":\\"ok\\",\\"ticketId\\":\(id)}}"}
                """)
            #expect(edited.status == 200)
            #expect(try json(edited)["messageId"]?.intValue == messageId)
            let reopened = try json(try await httpRequest(port: port, "PATCH", "/sapi/tickets/\(id)/reopen/", headers: auth,
                                                          json: #"{"sendbirdAppId":"emulated-app"}"#))
            #expect(reopened["channelUrl"]?.stringValue != nil)
        }
    }

    @Test func platformAPIShapes() async throws {
        try await withEmulator { port in
            let token = try await login(port)
            _ = try await httpRequest(port: port, "POST", "/sapi/tickets/", headers: [("sendbirdDeskToken", token)],
                                      json: #"{"sendbirdAppId":"emulated-app","channelName":"P","groupKey":"billing"}"#)
            let platform: [(String, String)] = [("SENDBIRDDESKAPITOKEN", "emulator-api-token")]
            let tickets = try json(try await httpRequest(port: port, "GET", "/platform/v1/tickets?limit=1&offset=0&status2=INITIALIZED", headers: platform))
            checkPage(tickets)
            let ticket = try #require(tickets["results"]?.arrayValue?.first)
            try checkTicket(ticket, platform: true)
            #expect(ticket["group"]?["key"]?.stringValue == "billing")

            let agents = try json(try await httpRequest(port: port, "GET", "/platform/v1/agents?limit=2", headers: platform))
            checkPage(agents)
            #expect(agents["count"]?.intValue == 4)
            #expect(agents["next"]?.stringValue?.contains("offset=2") == true)
            for agent in agents["results"]?.arrayValue ?? [] {
                #expect(agent["id"]?.intValue != nil && agent["displayName"]?.stringValue != nil && agent["sendbirdId"]?.stringValue != nil)
                #expect(["ADMIN", "AGENT"].contains(agent["role"]?.stringValue ?? ""))
                #expect(["ACTIVE", "INACTIVE", "PAUSED"].contains(agent["status"]?.stringValue ?? ""))
                #expect(["ONLINE", "OFFLINE", "AWAY"].contains(agent["connection"]?.stringValue ?? ""))
                #expect(isTimestamp(agent["createdAt"]))
            }
            let groups = try json(try await httpRequest(port: port, "GET", "/platform/v1/groups", headers: platform))
            checkPage(groups)
            let group = try #require(groups["results"]?.arrayValue?.first)
            for key in ["name", "key", "description"] { #expect(group[key]?.stringValue != nil, "\(key)") }
            #expect(group["id"]?.intValue != nil && group["project"]?.intValue != nil && isTimestamp(group["createdAt"]))
            let detail = try json(try await httpRequest(port: port, "GET", "/platform/v1/groups/\(group["id"]!.intValue!)", headers: platform))
            #expect(detail["members"]?.arrayValue?.isEmpty == false)
            let customers = try json(try await httpRequest(port: port, "GET", "/platform/v1/customers?sendbird_id=demo-customer", headers: platform))
            checkPage(customers)
            let customer = try #require(customers["results"]?.arrayValue?.first)
            #expect(customer["channelType"]?.stringValue == "SENDBIRD")
            #expect(customer["customFields"]?.arrayValue != nil)
        }
    }

    /// Ticket and customer lists are filtered and ordered once for the pages after the first (the ids kept): a page
    /// read after any change must show the world as changed, and one read before it the same as ever.
    @Test func platformListPagesFollowEveryChange() async throws {
        try await withEmulator { port in
            let token = try await login(port)
            let platform: [(String, String)] = [("SENDBIRDDESKAPITOKEN", "emulator-api-token")]
            func create(_ name: String) async throws -> Int {
                let created = try json(try await httpRequest(port: port, "POST", "/sapi/tickets/", headers: [("sendbirdDeskToken", token)],
                                                             json: #"{"sendbirdAppId":"emulated-app","channelName":"\#(name)"}"#))
                return try #require(created["id"]?.intValue)
            }
            func page(_ query: String) async throws -> (ids: [Int], count: Int?) {
                let body = try json(try await httpRequest(port: port, "GET", "/platform/v1/tickets?" + query, headers: platform))
                return ((body["results"]?.arrayValue ?? []).compactMap { $0["id"]?.intValue }, body["count"]?.intValue)
            }
            let first = try await create("L1"), second = try await create("L2"), third = try await create("L3")
            let initialized = "status2=INITIALIZED&limit=2"
            #expect(try await page(initialized + "&offset=0") == ([third, second], 3))
            #expect(try await page(initialized + "&offset=2") == ([first], 3))
            #expect(try await page(initialized + "&offset=0") == ([third, second], 3), "the same page again")
            #expect(try await page("status2=INITIALIZED&offset=0&limit=2&order=created_at") == ([first, second], 3),
                    "another order is another list")

            let fourth = try await create("L4")
            #expect(try await page(initialized + "&offset=0") == ([fourth, third], 4), "a new ticket")
            let closed = try await httpRequest(port: port, "PATCH", "/platform/v1/tickets/\(third)/close", headers: platform,
                                               json: #"{"closeComment":"done"}"#)
            #expect(closed.status == 200)
            #expect(try await page(initialized + "&offset=0") == ([fourth, second], 3), "a ticket closed leaves the list")
            #expect(try await page(initialized + "&offset=2") == ([first], 3))
            #expect(try await page("status2=CLOSED&limit=2&offset=0") == ([third], 1))

            func customers() async throws -> Int? {
                try json(try await httpRequest(port: port, "GET", "/platform/v1/customers?limit=1", headers: platform))["count"]?.intValue
            }
            let before = try #require(try await customers())
            #expect(try await customers() == before)
            let added = try await httpRequest(port: port, "POST", "/emulator/customers", json: #"{"sendbirdId":"listed-later"}"#)
            #expect(added.status == 201)
            #expect(try await customers() == before + 1, "a new customer")
        }
    }

    @Test func errorsAreJSONWithDetailAndCode() async throws {
        try await withEmulator { port in
            let cases: [(String, String, [(String, String)], Int)] = [
                ("GET", "/sapi/tickets/", [], 401),
                ("GET", "/sapi/tickets/", [("sendbirdDeskToken", "bogus")], 401),
                ("GET", "/platform/v1/agents", [("SENDBIRDDESKAPITOKEN", "bogus")], 401),
                ("GET", "/sapi/unknown/", [], 404),
                ("DELETE", "/sapi/tickets/count/", [], 405),
            ]
            for (method, path, headers, status) in cases {
                let response = try await httpRequest(port: port, method, path, headers: headers)
                #expect(response.status == status, "\(method) \(path)")
                let body = try json(response)
                #expect(body["detail"]?.stringValue?.isEmpty == false)
                #expect(body["code"]?.stringValue?.hasPrefix("desk") == true)
                #expect(body["message"]?.stringValue != nil)
            }
            let token = try await login(port)
            let invalid = try await httpRequest(port: port, "POST", "/sapi/tickets/", headers: [("sendbirdDeskToken", token)],
                                                json: #"{"sendbirdAppId":"emulated-app","channelName":"x","priority":"SOON"}"#)
            #expect(invalid.status == 400)
            #expect(try json(invalid)["code"]?.stringValue == "desk400100")
            let malformed = try await httpRequest(port: port, "POST", "/sapi/tickets/", headers: [("sendbirdDeskToken", token)], json: "{nope")
            #expect(malformed.status == 400)
        }
    }

    @Test func seedIsDeterministic() async throws {
        for _ in 0..<2 {
            try await withEmulator { port in
                let agents = try json(try await httpRequest(port: port, "GET", "/platform/v1/agents",
                                                            headers: [("SENDBIRDDESKAPITOKEN", "emulator-api-token")]))
                #expect(agents["results"]?.arrayValue?.map { $0["id"]?.intValue ?? 0 } == [501, 502, 503, 504])
            }
        }
    }
}
