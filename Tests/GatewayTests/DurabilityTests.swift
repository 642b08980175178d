import Crypto
import DeskEmulator
import Foundation
import GatewayApp
import JSON
import Logging
import Postgres
import Store
import Testing
import TestSupport

/// A Desk emulator outside the gateway, so it can go down and come back while gateways restart.
func externalDesk() throws -> DeskEmulator {
    try startedEmulator()
}

func gatewayConfig(database: String, desk: DeskEmulator) -> GatewayConfig {
    var config = TestGateway.configuration(databaseURL: database)
    config.deskBaseURL = desk.baseURL
    config.deskAppId = desk.configuration.appId
    config.deskAPIToken = desk.configuration.apiToken
    config.deskWebhookSecret = "hook-secret"
    config.deskTimeoutMilliseconds = 1000
    config.deskBreakerCooldownSeconds = 1
    config.outboxMaxBackoffSeconds = 1
    config.rateLimitBurst = 1_000_000
    config.rateLimitPerMinute = 1_000_000
    config.cacheTTLSeconds = 3600
    return config
}

/// An emulator outside the gateway (`externalDesk`) for `body`, stopped afterwards, also when `body` throws.
func withEmulator<T>(_ body: (DeskEmulator) async throws -> T) async throws -> T {
    let desk = try externalDesk()
    do {
        let result = try await body(desk)
        await desk.stop()
        return result
    } catch {
        await desk.stop()
        throw error
    }
}

/// An emulator outside the gateway (`externalDesk`) and a fresh database's configuration for gateways on both; the
/// emulator is stopped afterwards, also when `body` throws.
func withExternalDesk(_ body: (GatewayConfig, DeskEmulator) async throws -> Void) async throws {
    try await withEmulator { desk in
        try await TestPostgres.withDatabase { url in try await body(gatewayConfig(database: url, desk: desk), desk) }
    }
}

/// A gateway on a fresh database whose Desk is an emulator outside it (`externalDesk`); both are stopped afterwards,
/// also when `body` throws. `app.config` is the configuration it runs with.
func withGatewayOnExternalDesk(configure: (inout GatewayConfig) -> Void = { _ in },
                               _ body: (GatewayApplication, DeskEmulator) async throws -> Void) async throws {
    try await withExternalDesk { config, desk in
        var config = config
        configure(&config)
        try await TestGateway.running(config) { app in try await body(app, desk) }
    }
}

/// Prepares a ticket with a WAITING CSAT request (closed) or closure inquiry (active); returns (ticket, message).
func waitingMessage(_ customer: Customer, deskPort: Int, csat: Bool, index: Int) async throws -> (Int, Int) {
    let id = try #require(try await customer.createTicket("Ticket \(index)")["id"] as? Int)
    func post(_ path: String, _ body: String = "{}") async throws -> TestResponse {
        let response = try await httpRequest(port: deskPort, "POST", "/emulator" + path, json: body)
        #expect(response.status < 300, "\(path) \(response.text)")
        return response
    }
    _ = try await post("/tickets/\(id)/customer-message")
    _ = try await post("/tickets/\(id)/assign", #"{"agentId":\#(501 + index % 4)}"#)
    if csat {
        _ = try await post("/tickets/\(id)/close")
        return (id, try await post("/tickets/\(id)/csat-request").json?["messageId"] as? Int ?? -1)
    }
    return (id, try await post("/tickets/\(id)/closure-inquiry").json?["messageId"] as? Int ?? -1)
}

/// The customer answers a CSAT request in another app, straight on Desk (the gateway hears of it by webhook or sync).
func rateOnDesk(deskPort: Int, ticket: Int, message: Int, score: Int, comment: String) async throws {
    let deskSession = try await httpRequest(port: deskPort, "POST", "/sapi/customers/auth/", headers: [("sendbirdAccessToken", "demo-token")],
                                            json: #"{"sendbirdAppId":"emulated-app","sendbirdId":"demo-customer"}"#)
    let token = try #require(deskSession.json?["token"] as? String)
    let data: JSONValue = .object([("type", .string("SENDBIRD_DESK_CUSTOMER_SATISFACTION")), ("body", .object([
        ("state", .string("CONFIRMED")), ("customerSatisfactionScore", .integer(score)),
        ("customerSatisfactionComment", .string(comment)), ("ticketId", .integer(ticket))]))])
    let body: JSONValue = .object([("sendbirdAppId", .string("emulated-app")), ("messageId", .integer(message)),
                                   ("messageData", .string(data.serialized()))])
    let rated = try await httpRequest(port: deskPort, "PATCH", "/sapi/tickets/\(ticket)/edit_message/", headers: [("sendbirdDeskToken", token)],
                                      json: body.serialized())
    #expect(rated.status == 200, "\(rated.text)")
}

func waitForEmptyOutbox(_ database: Database, seconds: Double = 90) async throws {
    let empty = try await eventually(within: seconds, every: .milliseconds(200)) {
        try await database.query("SELECT count(*) FROM outbox WHERE status = 'pending'")[0].decode(0, as: Int.self) == 0
    }
    if !empty { Issue.record("outbox still has pending operations after \(seconds) s") }
}

func messageState(_ deskPort: Int, ticket: Int, message: Int) async throws -> (state: String?, score: Int?, comment: String?, attempts: Int) {
    let state = try await httpRequest(port: deskPort, "GET", "/emulator/tickets/\(ticket)")
    let messages = state.json?["messages"] as? [[String: Any]] ?? []
    guard let entry = messages.first(where: { $0["messageId"] as? Int == message }) else { return (nil, nil, nil, -1) }
    let data = try JSONParser.parse(entry["data"] as? String ?? "{}")
    return (data["body"]?["state"]?.stringValue, data["body"]?["customerSatisfactionScore"]?.intValue,
            data["body"]?["customerSatisfactionComment"]?.stringValue, entry["answerAttempts"] as? Int ?? -1)
}

@Suite struct DurabilityTests {
    @Test func answersGivenWhileDeskIsDownAreDeliveredOnceAfterARestart() async throws {
        try await withExternalDesk { config, desk in
            let prepared = try await TestGateway.running(config) { first in
                try await answersGivenWhileDeskIsDown(first, desk)
            }
            // The gateway restarted while everything was pending; then Desk comes back.
            try await TestGateway.running(config) { second in
                try desk.start()
                try await waitForEmptyOutbox(second.database)
                // The relay reads the queue's depth at most once a second while it drains, and after an empty pass.
                #expect(await eventually { second.metrics.value("outbox_pending") == 0 })
                let statuses = try await second.database.query("SELECT status, count(*) FROM outbox GROUP BY status")
                #expect(statuses.map { "\($0[0] ?? ""):\($0[1] ?? "")" } == ["delivered:250"])
                for (index, item) in prepared.enumerated() {
                    let (_, ticket, message, csat) = item
                    let state = try await messageState(desk.port, ticket: ticket, message: message)
                    #expect(state.attempts == 1, "ticket \(ticket) answered \(state.attempts) times")
                    if csat {
                        #expect(state.state == "CONFIRMED")
                        #expect(state.score == index % 5 + 1)
                        #expect(state.comment == "c\(index)")
                    } else {
                        #expect(state.state == (index % 2 == 0 ? "CONFIRMED" : "DECLINED"))
                    }
                }
                let ratings: Int = try await second.database.query("SELECT count(*) FROM csat_ratings")[0].decode(0)
                #expect(ratings == 200)
                let reporter = try await reporter(second)
                let report = try JSONParser.parse(try await reporter.get("?groupBy=team").body)
                #expect(report["totals"]?["responses"]?.intValue == 200)
            }
        }
    }

    /// Five customers, each with 40 tickets awaiting a rating and 10 awaiting a closure answer, answer all 250 while
    /// Desk is down; returns (customer, ticket, message, is a rating) of each, in the order answered.
    func answersGivenWhileDeskIsDown(_ first: GatewayApplication, _ desk: DeskEmulator) async throws -> [(Customer, Int, Int, Bool)] {
        var customers: [Customer] = []
        for index in 0..<5 {
            _ = try await httpRequest(port: desk.port, "POST", "/emulator/customers",
                                      json: #"{"sendbirdId":"outage-\#(index)","accessToken":"t\#(index)","displayName":"C\#(index)"}"#)
            customers.append(try await Customer.signIn(first, user: "outage-\(index)", accessToken: "t\(index)"))
        }
        let prepared = try await withThrowingTaskGroup(of: [(Customer, Int, Int, Bool)].self) { group in
            for (c, customer) in customers.enumerated() {
                group.addTask {
                    var items: [(Customer, Int, Int, Bool)] = []
                    for n in 0..<50 {
                        let csat = n < 40
                        let (ticket, message) = try await waitingMessage(customer, deskPort: desk.port, csat: csat, index: c * 100 + n)
                        items.append((customer, ticket, message, csat))
                    }
                    return items
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(prepared.filter { $0.3 }.count == 200)

        await desk.stop()
        var operations: [Int] = []
        for (index, item) in prepared.enumerated() {
            let (customer, ticket, message, csat) = item
            let response = csat
                ? try await customer.send("POST", "/v1/tickets/\(ticket)/feedback", #"{"messageId":\#(message),"score":\#(index % 5 + 1),"comment":"c\#(index)"}"#)
                : try await customer.send("POST", "/v1/tickets/\(ticket)/closure-confirmation", #"{"messageId":\#(message),"confirm":\#(index % 2 == 0)}"#)
            #expect(response.status == 202, "\(response.text)")
            #expect(response.json?["status"] as? String == "pending")
            operations.append(response.json?["id"] as? Int ?? -1)
        }
        // The cached ticket shows the change as pending, and the operation can be looked up.
        #expect(await eventually { first.metrics.value("outbox_pending") == 250 })
        #expect(first.metrics.value("outbox_oldest_pending_seconds") < 600)
        let sample = try await prepared[0].0.send("GET", "/v1/tickets/\(prepared[0].1)")
        #expect((sample.json?["pendingOperations"] as? [[String: Any]])?.first?["kind"] as? String == "feedback")
        let operation = try await prepared[0].0.send("GET", "/v1/operations/\(operations[0])")
        #expect(operation.json?["status"] as? String == "pending")
        #expect(try await prepared[1].0.send("GET", "/v1/operations/\(operations[0])").status == (prepared[1].0.token == prepared[0].0.token ? 200 : 404))
        return prepared
    }

    @Test func twoGatewaysOnOneDatabaseDeliverEachOperationOnce() async throws {
        try await withGatewayOnExternalDesk { app, desk in
            var other = app.config
            other.port = TestPorts.free()
            try await TestGateway.running(other) { b in
                let customerA = try await Customer.signIn(app)
                let customerB = try await Customer.signIn(b, user: "demo-customer-2", accessToken: "demo-token-2")
                var items: [(Customer, Int, Int)] = []
                for index in 0..<30 {
                    let customer = index % 2 == 0 ? customerA : customerB
                    let (ticket, message) = try await waitingMessage(customer, deskPort: desk.port, csat: true, index: index)
                    items.append((customer, ticket, message))
                }
                await desk.stop()
                for (index, item) in items.enumerated() {
                    let response = try await item.0.send("POST", "/v1/tickets/\(item.1)/feedback", #"{"messageId":\#(item.2),"score":\#(index % 5 + 1),"comment":null}"#)
                    #expect(response.status == 202)
                }
                try desk.start()
                try await waitForEmptyOutbox(app.database)
                for item in items {
                    let state = try await messageState(desk.port, ticket: item.1, message: item.2)
                    #expect(state.state == "CONFIRMED")
                    #expect(state.attempts == 1, "ticket \(item.1) answered \(state.attempts) times")
                }
                let delivered: Int = try await app.database.query("SELECT count(*) FROM outbox WHERE status = 'delivered'")[0].decode(0)
                #expect(delivered == 30)
                let ratings: Int = try await app.database.query("SELECT count(*) FROM csat_ratings")[0].decode(0)
                #expect(ratings == 30)
            }
        }
    }

    @Test func aRefusedOperationFailsWithAReasonAndTheCacheFollowsDesk() async throws {
        try await withGatewayOnExternalDesk { app, desk in
            let customer = try await Customer.signIn(app)
            let id = try #require(try await customer.createTicket("Will be refused")["id"] as? Int)
            await desk.stop()
            // Closing a ticket nobody works on is queued while Desk is away, and refused once it is back.
            let queued = try await customer.send("POST", "/v1/tickets/\(id)/close", #"{"comment":"bye"}"#)
            #expect(queued.status == 202)
            let operation = try #require(queued.json?["id"] as? Int)
            try desk.start()
            try await waitForEmptyOutbox(app.database)
            let finished = try await customer.send("GET", "/v1/operations/\(operation)")
            #expect(finished.json?["status"] as? String == "failed")
            #expect((finished.json?["reason"] as? String)?.hasPrefix("ticket_state_conflict") == true)
            let ticket = try await customer.send("GET", "/v1/tickets/\(id)")
            #expect(ticket.json?["status"] as? String == "INITIALIZED")
            #expect((ticket.json?["pendingOperations"] as? [Any])?.isEmpty == true)
        }
    }

    /// An operator's view of the queue and nudge (`desk-gateway outbox list` and `retry-now`): the waiting write is
    /// listed with its reason and next attempt, and the nudge brings it to Desk without waiting out the backoff.
    @Test func anOperatorListsTheQueueAndSendsItNow() async throws {
        try await withGatewayOnExternalDesk { app, desk in
            let customer = try await Customer.signIn(app)
            let (id, _) = try await waitingMessage(customer, deskPort: desk.port, csat: false, index: 0)
            _ = try await httpRequest(port: desk.port, "POST", "/emulator/faults", json: #"{"down":true}"#)
            let queued = try await customer.send("POST", "/v1/tickets/\(id)/close", "{}")
            #expect(queued.status == 202, "\(queued.text)")
            // A long backoff, as after an outage of an hour: set while no relay holds the write, or its attempt under
            // way would put its own short backoff over it.
            try #require(try await eventually(within: 30, every: .milliseconds(50)) {
                try await !app.database.query("""
                    UPDATE outbox SET next_attempt_at = now() + interval '1 hour'
                     WHERE status = 'pending' AND (claimed_until IS NULL OR claimed_until < now()) RETURNING id
                    """).isEmpty
            })
            _ = try await httpRequest(port: desk.port, "POST", "/emulator/faults", json: #"{"down":false}"#)
            let listed = try await pendingOperations(app.config, logger: Logger(label: "test"), limit: 10)
            #expect(listed.count == 1 && listed.first?.operation.ticketId == id && listed.first?.operation.kind == .close)
            #expect((listed.first?.dueInSeconds ?? 0) > 3_500)
            #expect(listed.first?.operation.lastError?.hasPrefix("desk_unavailable") == true, "\(String(describing: listed.first))")
            // `outbox list --json`, as a script reads it.
            let document = try JSONSerialization.jsonObject(with: Data(try CommandDocument.text(CommandDocument.outbox(listed, now: Date().timeIntervalSince1970)).utf8))
            let row = try #require(((document as? [String: Any])?["operations"] as? [[String: Any]])?.first)
            #expect(Set(row.keys) == ["id", "kind", "ticketId", "createdAt", "ageSeconds", "attempts", "nextAttemptInSeconds", "reason"])
            #expect(row["id"] as? Int == queued.json?["id"] as? Int && row["kind"] as? String == "close" && row["ticketId"] as? Int == id)
            #expect((row["nextAttemptInSeconds"] as? Int ?? 0) > 3_500 && (row["reason"] as? String)?.hasPrefix("desk_unavailable") == true)
            #expect(try await retryOperationsNow(app.config, logger: Logger(label: "test")) == 1)
            try await waitForEmptyOutbox(app.database, seconds: 30)
            let onDesk = try await httpRequest(port: desk.port, "GET", "/emulator/tickets/\(id)")
            #expect(onDesk.json?["status2"] as? String == "CLOSED", "\(onDesk.text)")
            #expect(try await pendingOperations(app.config, logger: Logger(label: "test"), limit: 10).isEmpty)
        }
    }

    /// The first customer's close and the second's closure answer (ticket `lost`), priority and close (ticket
    /// `applied.closed`) and a cancel into the billing team (`applied.moved`), queued while Desk is away; meanwhile Desk
    /// ends both customers' Desk sessions, then comes back.
    static func writesQueuedAcrossSessionsEnd(_ first: Customer, _ second: Customer, _ desk: DeskEmulator) async throws
        -> (kept: Int, lost: Int, inquiry: Int, applied: (closed: Int, moved: Int), operations: (Int, Int), asApplication: [Int]) {
        let (kept, _) = try await waitingMessage(first, deskPort: desk.port, csat: false, index: 0)
        let (lost, inquiry) = try await waitingMessage(second, deskPort: desk.port, csat: false, index: 1)
        let (applied, _) = try await waitingMessage(second, deskPort: desk.port, csat: false, index: 2)
        let (moved, _) = try await waitingMessage(second, deskPort: desk.port, csat: false, index: 3)
        _ = try await httpRequest(port: desk.port, "POST", "/emulator/faults", json: #"{"down":true}"#)
        let queued = (try await first.send("POST", "/v1/tickets/\(kept)/close", "{}"),
                      try await second.send("POST", "/v1/tickets/\(lost)/closure-confirmation", #"{"messageId":\#(inquiry),"confirm":false}"#))
        #expect(queued.0.status == 202 && queued.1.status == 202, "\(queued.0.text) \(queued.1.text)")
        let operations = (try #require(queued.0.json?["id"] as? Int), try #require(queued.1.json?["id"] as? Int))
        var asApplication: [Int] = []
        for (ticket, path, body) in [(applied, "priority", #"{"priority":"HIGH"}"#), (applied, "close", "{}"), (moved, "cancel", #"{"groupKey":"billing"}"#)] {
            let write = try await second.send(path == "priority" ? "PUT" : "POST", "/v1/tickets/\(ticket)/\(path)", body)
            #expect(write.status == 202, "\(write.text)")
            asApplication.append(try #require(write.json?["id"] as? Int))
        }
        for user in ["demo-customer", "demo-customer-2"] {
            let ended = try await httpRequest(port: desk.port, "POST", "/emulator/customers/\(user)/end-sessions", json: "{}")
            #expect(ended.json?["ended"] as? Int ?? 0 >= 1, "\(ended.text)")
        }
        _ = try await httpRequest(port: desk.port, "POST", "/emulator/faults", json: #"{"down":false}"#)
        return (kept, lost, inquiry, (applied, moved), operations, asApplication)
    }

    /// The second customer's writes Desk's Platform API has too (priority and close of `applied.closed`, the transfer of
    /// `applied.moved`) went with the gateway's API token past the sign-in wait, in order, and say so.
    static func expectDeliveredAsApplication(_ second: Customer, _ asApplication: [Int], _ applied: (closed: Int, moved: Int),
                                             _ gatewayPort: Int, _ deskPort: Int) async throws {
        for operation in asApplication {
            let done = try await second.send("GET", "/v1/operations/\(operation)")
            #expect(done.json?["status"] as? String == "delivered" && done.json?["deliveredAs"] as? String == "application", "\(done.text)")
        }
        let asAdmin = try await httpRequest(port: deskPort, "GET", "/emulator/tickets/\(applied.closed)")
        #expect(asAdmin.json?["status2"] as? String == "CLOSED" && asAdmin.json?["closeStatus"] as? String == "CLOSED_BY_ADMIN"
                && asAdmin.json?["priority"] as? String == "HIGH", "\(asAdmin.text)")
        let transferred = try await httpRequest(port: deskPort, "GET", "/emulator/tickets/\(applied.moved)")
        #expect(transferred.json?["status2"] as? String == "PENDING" && (transferred.json?["group"] as? [String: Any])?["key"] as? String == "billing",
                "\(transferred.text)")
        let sent = try await httpRequest(port: gatewayPort, "GET", "/metrics").text
        #expect(sent.contains(#"outbox_deliveries_total{outcome="delivered_as_application"} 3"#),
                "\(sent.split(separator: "\n").filter { $0.hasPrefix("outbox_deliveries") })")
    }

    @Test func aQueuedWriteOutlivesTheCustomersDeskSession() async throws {
        // The sign-in wait: long enough for a loaded machine to see it and sign in.
        try await withGatewayOnExternalDesk(configure: { $0.outboxSignInWaitSeconds = 20 }) { app, desk in
            let (first, second) = (try await Customer.signIn(app), try await Customer.signIn(app, user: "demo-customer-2", accessToken: "demo-token-2"))
            let (kept, lost, inquiry, applied, operations, asApplication) = try await Self.writesQueuedAcrossSessionsEnd(first, second, desk)
            // Back, Desk refuses the session the write was made in: the write waits for the customer instead of failing.
            let waiting = try await eventually(within: 30, every: .milliseconds(200)) {
                let operation = try await first.send("GET", "/v1/operations/\(operations.0)").json
                return operation?["status"] as? String == "pending" && (operation?["reason"] as? String)?.hasPrefix("desk_session_expired") == true
            }
            #expect(waiting, "the write did not wait for a sign-in")
            let metrics = try await httpRequest(port: app.port, "GET", "/metrics").text
            #expect(metrics.contains(#"outbox_deliveries_total{outcome="awaiting_sign_in"} "#),
                    "\(metrics.split(separator: "\n").filter { $0.hasPrefix("outbox_deliveries") })")
            // The customer signs in again (the app's answer to desk_session_expired): the write goes with that session.
            let again = try await Customer.signIn(app)
            try await waitForEmptyOutbox(app.database, seconds: 90)
            let delivered = try await again.send("GET", "/v1/operations/\(operations.0)")
            #expect(delivered.json?["status"] as? String == "delivered" && delivered.json?["deliveredAs"] as? String == "customer",
                    "\(delivered.text)")
            let onDesk = try await httpRequest(port: desk.port, "GET", "/emulator/tickets/\(kept)")
            #expect(onDesk.json?["status2"] as? String == "CLOSED", "\(onDesk.text)")
            // The other customer never came back. After the wait, their closure answer, which Desk takes only from the
            // customer, fails, saying why, and Desk is unchanged.
            let failed = try await second.send("GET", "/v1/operations/\(operations.1)")
            #expect(failed.json?["status"] as? String == "failed", "\(failed.text)")
            #expect((failed.json?["reason"] as? String)?.hasPrefix("desk_session_expired") == true, "\(failed.text)")
            #expect(failed.json?.keys.contains("deliveredAs") == true && failed.json?["deliveredAs"] is NSNull, "\(failed.text)")
            #expect(try await messageState(desk.port, ticket: lost, message: inquiry).state == "WAITING")
            try await Self.expectDeliveredAsApplication(second, asApplication, applied, app.port, desk.port)
            // Counted as a queued write lost (what DeskGatewayQueuedWritesFailed alerts on); the other reasons start at 0.
            let counted = try await httpRequest(port: app.port, "GET", "/metrics").text.split(separator: "\n").filter { $0.hasPrefix("outbox_queued_writes_failed_total") }
            #expect(counted.contains(#"outbox_queued_writes_failed_total{reason="desk_session_expired"} 1"#)
                    && counted.contains(#"outbox_queued_writes_failed_total{reason="ticket_state_conflict"} 0"#), "\(counted)")
            // They sign in later; the operator's `outbox revive` puts the write back and it reaches Desk with the new
            // session. The delivered one is not touched.
            let back = try await Customer.signIn(app, user: "demo-customer-2", accessToken: "demo-token-2")
            let listed = try await failedOperations(app.config, logger: Logger(label: "test"), withinSeconds: 3_600, limit: 10)
            let document = try JSONSerialization.jsonObject(with: Data(try CommandDocument.text(CommandDocument.failedOutbox(listed)).utf8))
            let row = try #require(((document as? [String: Any])?["operations"] as? [[String: Any]])?.first)
            #expect(Set(row.keys) == ["id", "kind", "ticketId", "createdAt", "failedAt", "attempts", "revivable", "reason"])
            #expect(row["id"] as? Int == operations.1 && row["revivable"] as? Bool == true, "\(row)")
            #expect(try await reviveOperations(app.config, logger: Logger(label: "test"), reason: "desk_session_expired", withinSeconds: 3_600)
                    == [operations.1])
            try await waitForEmptyOutbox(app.database, seconds: 90)
            let revived = try await back.send("GET", "/v1/operations/\(operations.1)")
            #expect(revived.json?["status"] as? String == "delivered", "\(revived.text)")
            #expect(try await messageState(desk.port, ticket: lost, message: inquiry).state == "DECLINED")
        }
    }
}

@Suite struct WebhookTests {
    static func sign(_ body: [UInt8], _ secret: String) -> String {
        "sha1=" + HMAC<Insecure.SHA1>.authenticationCode(for: body, using: SymmetricKey(data: Array(secret.utf8)))
            .map { String(format: "%02x", $0) }.joined()
    }

    /// A validly signed event whose ticket belongs to another Sendbird application is stored as foreign, answered
    /// 200 (so Desk stops retrying) and never applied: the owner keeps the stale copy, the intruder gets nothing.
    @Test func webhooksOfAnotherApplicationAreForeignAndNeverApplied() async throws {
        try await withGateway(configure: { $0.deskWebhookSecret = "hook-secret"; $0.cacheTTLSeconds = 1 }) { app in
            let owner = try await Customer.signIn(app)
            let intruder = try await Customer.signIn(app, user: "demo-customer-2", accessToken: "demo-token-2")
            let ticket = try await owner.createTicket("Mine")
            let id = try #require(ticket["id"] as? Int)
            let planted: JSONValue = .object([("eventType", .string("TICKET.STATUS.UPDATED")), ("data", .object([
                ("id", .integer(id)), ("status2", .string("ACTIVE")), ("channelName", .string("Hijacked")),
                ("channelUrl", .string("sendbird_desk_otherapp_\(id)_ab12cd34")), ("updatedAt", .string("2030-01-01T00:00:00Z")),
                ("customer", .object([("sendbirdId", .string("demo-customer-2"))])),
            ]))])
            let body = Array(planted.serialized().utf8)
            let answer = try await httpRequest(port: app.port, "POST", "/v1/webhooks/desk",
                                               headers: [("x-hub-signature", Self.sign(body, "hook-secret"))], body: body)
            #expect(answer.status == 200)
            let deadline = ContinuousClock.now + .seconds(10)
            var status = ""
            while ContinuousClock.now < deadline, status != "foreign" {
                status = try await app.database.query("SELECT status FROM webhook_events WHERE body::text LIKE '%otherapp%'")[0].decode(0)
                if status != "foreign" { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(status == "foreign")
            // Desk away: the stale copy goes to its owner only, unchanged.
            try await DeskAgent(app).post("/faults", #"{"down":true}"#)
            try await Task.sleep(for: .milliseconds(1100))
            let mine = try await owner.send("GET", "/v1/tickets/\(id)")
            #expect(mine.status == 200 && mine.json?["title"] as? String == "Mine" && mine.json?["stale"] as? Bool == true, "\(mine.text)")
            let theirs = try await intruder.send("GET", "/v1/tickets/\(id)")
            // Not theirs in the cache, and Desk cannot be asked: never the owner's copy.
            #expect([404, 503].contains(theirs.status) && !theirs.text.contains("Mine"), "\(theirs.status) \(theirs.text)")
            let list = try await intruder.send("GET", "/v1/tickets")
            #expect((list.json?["items"] as? [Any])?.isEmpty == true, "\(list.text)")
            #expect(try await WebhookInbox(database: app.database).replay(statuses: ["foreign"]) == 1)
        }
    }

    /// A secret rotation: the new secret and the one before are both taken, each counted apart, so operators see when
    /// nothing signs with the old one any more; once it is unset, the old secret is refused.
    @Test func duringARotationBothSecretsAreTakenAndCountedApart() async throws {
        func post(_ app: GatewayApplication, _ event: Int, _ secret: String) async throws -> Int {
            let body = Array(#"{"eventType":"TICKET.NOTE.ADDED","eventId":"rotation-\#(event)"}"#.utf8)
            return try await httpRequest(port: app.port, "POST", "/v1/webhooks/desk", headers: [("x-hub-signature", Self.sign(body, secret))],
                                         body: body).status
        }
        try await withGateway(configure: { $0.deskWebhookSecret = "new-secret"; $0.deskWebhookPreviousSecret = "old-secret" }) { app in
            #expect(try await post(app, 1, "old-secret") == 200)
            #expect(try await post(app, 2, "new-secret") == 200)
            #expect(try await post(app, 3, "new-secret") == 200)
            #expect(try await post(app, 4, "older-secret") == 401)
            let metrics = try await httpRequest(port: app.port, "GET", "/metrics").text
            #expect(metrics.contains(#"webhook_signatures_total{key="previous"} 1"#), "\(metrics.split(separator: "\n").filter { $0.contains("signatures") })")
            #expect(metrics.contains(#"webhook_signatures_total{key="secret"} 2"#))
        }
        try await withGateway(configure: { $0.deskWebhookSecret = "new-secret" }) { app async throws in
            #expect(try await post(app, 5, "old-secret") == 401)
            #expect(try await post(app, 6, "new-secret") == 200)
        }
    }

    @Test func signaturesAreCheckedAndRedeliveriesAppliedOnce() async throws {
        try await withGatewayOnExternalDesk { app, desk in
            let customer = try await Customer.signIn(app)
            let (ticket, message) = try await waitingMessage(customer, deskPort: desk.port, csat: true, index: 1)
            // A CSAT event as Desk would send it after the customer rated in another app.
            let platform = try await httpRequest(port: desk.port, "GET", "/platform/v1/tickets/\(ticket)",
                                                 headers: [("SENDBIRDDESKAPITOKEN", desk.configuration.apiToken)])
            let data = try JSONParser.parse(platform.body)
            let messageJSON: JSONValue = .object([
                ("messageId", .integer(message)), ("customType", .string("SENDBIRD_DESK_RICH_MESSAGE")),
                ("data", .string(#"{"type":"SENDBIRD_DESK_CUSTOMER_SATISFACTION","body":{"state":"CONFIRMED","customerSatisfactionScore":2,"customerSatisfactionComment":"slow","ticketId":\#(ticket)}}"#)),
                ("createdAt", .string("2026-11-20T10:00:00.000Z")), ("updatedAt", .string("2026-11-20T10:05:00.000Z")),
            ])
            let event: JSONValue = .object([("eventType", .string("TICKET.CSAT.UPDATED")), ("eventId", .string("evt-1")),
                                            ("data", data), ("message", messageJSON)])
            let body = Array(event.serialized().utf8)
            let hook = "/v1/webhooks/desk"
            #expect(try await httpRequest(port: app.port, "POST", hook, body: body).status == 401)
            #expect(try await httpRequest(port: app.port, "POST", hook, headers: [("x-hub-signature", Self.sign(body, "wrong"))], body: body).status == 401)
            // A genuine signature of another body does not carry over.
            let other = Array(#"{"eventType":"TICKET.CREATED"}"#.utf8)
            #expect(try await httpRequest(port: app.port, "POST", hook, headers: [("x-hub-signature", Self.sign(other, "hook-secret"))], body: body).status == 401)
            var answers: [String] = []
            for _ in 0..<4 {
                let response = try await httpRequest(port: app.port, "POST", hook, headers: [("x-hub-signature", Self.sign(body, "hook-secret"))], body: body)
                #expect(response.status == 200)
                answers.append(response.json?["status"] as? String ?? "")
            }
            #expect(answers == ["accepted", "duplicate", "duplicate", "duplicate"])
            let deadline = ContinuousClock.now + .seconds(10)
            var ratings: [PostgresRow] = []
            while ContinuousClock.now < deadline {
                ratings = Array(try await app.database.query("SELECT score, comment, source FROM csat_ratings WHERE ticket_id = $1", [ticket]))
                if !ratings.isEmpty { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(ratings.count == 1)
            #expect(ratings.first?[0] == "2")
            #expect(ratings.first?[2] == "webhook")
            let events: Int = try await app.database.query("SELECT count(*) FROM webhook_events")[0].decode(0)
            #expect(events == 1)
        }
    }

    @Test func aRatingSeenByWebhookAndBySyncCountsOnce() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let deskPort = app.emulator!.port
            let (ticket, message) = try await waitingMessage(customer, deskPort: deskPort, csat: true, index: 7)
            // The customer rates in another app, straight on Desk: Desk's webhook tells the gateway.
            try await rateOnDesk(deskPort: deskPort, ticket: ticket, message: message, score: 3, comment: "ok")
            // Desk sends its events one by one (1 s timeout, retries); on a busy machine this one can take a while.
            let deadline = ContinuousClock.now + .seconds(60)
            var sources: [String] = []
            while ContinuousClock.now < deadline {
                sources = try await app.database.query("SELECT source FROM csat_ratings WHERE ticket_id = $1", [ticket]).compactMap { $0[0] }
                if !sources.isEmpty { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(sources == ["webhook"])
            // The sync then reads the same rating from the Platform API: still one.
            let summary = try await app.sync.run()
            #expect(summary.ratings >= 1)
            let after = try await app.database.query("SELECT source FROM csat_ratings WHERE ticket_id = $1", [ticket]).compactMap { $0[0] }
            #expect(after == ["webhook"])
            let reporter = try await reporter(app)
            let report = try JSONParser.parse(try await reporter.get("?groupBy=team").body)
            #expect(report["totals"]?["responses"]?.intValue == 1)
            #expect(report["totals"]?["requests"]?.intValue == 1)
        }
    }

    @Test func anAgentSideCloseReachesTheCacheThroughItsWebhook() async throws {
        try await withGateway(configure: { $0.cacheTTLSeconds = 3600 }) { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let id = try #require(try await customer.createTicket("Closed by the agent")["id"] as? Int)
            try await agent.activate(id)
            #expect(try await customer.send("GET", "/v1/tickets/\(id)").json?["status"] as? String != "CLOSED")
            try await agent.post("/tickets/\(id)/close", #"{"comment":"done on our side"}"#)
            // Generous: the webhook is applied in the background, and the suite runs sixty others on two cores.
            let deadline = ContinuousClock.now + .seconds(40)
            var status: String?
            while ContinuousClock.now < deadline {
                status = try await customer.send("GET", "/v1/tickets/\(id)").json?["status"] as? String
                if status == "CLOSED" { break }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(status == "CLOSED")
        }
    }
}

/// A Desk that hangs (answers only after 15 s, every attempt): a read with a cached copy waits the stale-read budget
/// in all, then serves the copy marked stale, instead of 3 attempts of the whole Desk deadline. The bound (12 s) is
/// the budget's 0.5 s with room for a loaded machine, and still short of Desk's answer.
@Suite struct HangingDeskTests {
    @Test func readsWithACachedCopyServeItOnceTheBudgetIsSpent() async throws {
        try await withGateway(configure: { $0.cacheTTLSeconds = 0; $0.deskStaleReadBudgetMilliseconds = 500 }) { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let id = try #require(try await customer.createTicket("Cached before Desk hangs")["id"] as? Int)
            #expect(try await customer.send("GET", "/v1/tickets/\(id)").status == 200)
            #expect(try await customer.send("GET", "/v1/tickets").status == 200)
            try await agent.post("/faults", #"{"latencyMs":15000}"#)
            for path in ["/v1/tickets/\(id)", "/v1/tickets"] {
                let started = ContinuousClock.now
                let read = try await customer.send("GET", path)
                let took = ContinuousClock.now - started
                #expect(read.status == 200 && read.header("X-Cache") == "STALE", "\(path): \(read.status) \(read.header("X-Cache") ?? "-")")
                #expect(took < .seconds(12), "\(path) took \(took), Desk answers after 15 s")
            }
            try await agent.post("/faults", "{}")
        }
    }
}

/// Desk's absurd rate-limit hints reach the client as a wait of 1 to 300 s, never as "retry at once".
@Suite struct RetryAfterHintTests {
    @Test func absurdHintsAreHeldBetweenOneSecondAndFiveMinutes() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            for hint in ["999999999", "-5", "0"] {
                // An id the gateway has not cached: the read must ask Desk, which rate-limits every attempt.
                try await agent.post("/faults", #"{"rateLimitNext":10,"rateLimitCustomers":true,"retryAfter":"\#(hint)"}"#)
                let read = try await customer.send("GET", "/v1/tickets/987654")
                let seconds = read.header("Retry-After").flatMap(Int.init)
                #expect(read.status == 503 || read.status == 429, "\(hint): \(read.status)")
                #expect(seconds.map { (1...300).contains($0) } == true, "\(hint): Retry-After \(read.header("Retry-After") ?? "none")")
            }
            try await agent.post("/faults", "{}")
        }
    }
}
