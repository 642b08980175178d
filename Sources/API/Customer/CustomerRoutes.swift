public import Domain
public import HTTPServer
import JSON
public import Services
public import Telemetry
public import Logging

/// Freshness and size settings of the customer API.
public struct CustomerAPISettings: Sendable {
    /// How fresh tickets and lists must be, and how long Desk may take before a cached copy is served instead.
    public var freshness: TicketFreshness
    public var sessionLifetimeSeconds: Int
    public var sessionCacheSeconds: Double
    /// Failed sign-ins per Sendbird user id and client address (beside the limit on all sign-ins per address): a
    /// stranger's failures never lock the user out from their own address, and correct sign-ins cost nothing here.
    public var signInPerUserPerMinute: Int
    public var signInPerUserBurst: Int
    /// Proxies whose forwarding headers name the client (the same list the rate limits use).
    public var trustedProxies: [CIDR]

    public init(freshness: TicketFreshness, sessionLifetimeSeconds: Int, sessionCacheSeconds: Double,
                signInPerUserPerMinute: Int, signInPerUserBurst: Int, trustedProxies: [CIDR]) {
        self.freshness = freshness
        self.sessionLifetimeSeconds = sessionLifetimeSeconds
        self.sessionCacheSeconds = sessionCacheSeconds
        self.signInPerUserPerMinute = signInPerUserPerMinute
        self.signInPerUserBurst = signInPerUserBurst
        self.trustedProxies = trustedProxies
    }
}

/// The customer API (`/v1/…`) for web and mobile clients.
public struct CustomerRoutes: Sendable {
    let sessions: any SessionDirectory
    let authenticator: Authenticator
    let tickets: CustomerTickets
    let ratings: any FeedbackRatings
    let desk: any DeskCustomerAPI
    let feedbackRules: CSATFeedback
    let previews: LinkPreviewFetcher
    let settings: CustomerAPISettings
    let operations: CustomerWrites
    let outbox: any OutboxQueue
    let signInFailures: RateLimiter
    let clients: ClientAddressResolver

    /// `platform`: Desk's Platform API when a token is configured (a decline is then checked with Desk, and a queued
    /// close, cancel or priority whose customer never signs in again goes through it).
    public init(desk: any DeskCustomerAPI, platform: (any DeskPlatformReader & DeskPlatformWriter)?, sessions: any SessionDirectory, ticketStore: any TicketRepository, ratings: any FeedbackRatings,
                previews: LinkPreviewFetcher, settings: CustomerAPISettings, outbox: any OutboxQueue, outboxSettings: OutboxSettings,
                metrics: MetricsRegistry, logger: Logger, verified: VerifiedCallers = VerifiedCallers()) {
        self.desk = desk
        feedbackRules = CSATFeedback(ratings: ratings, platform: platform)
        self.sessions = sessions
        self.ratings = ratings
        self.previews = previews
        self.settings = settings
        self.outbox = outbox
        authenticator = Authenticator(store: sessions, cacheSeconds: settings.sessionCacheSeconds, verified: verified)
        signInFailures = RateLimiter(perMinute: settings.signInPerUserPerMinute, burst: settings.signInPerUserBurst)
        clients = ClientAddressResolver(trustedProxies: settings.trustedProxies)
        tickets = CustomerTickets(desk: desk, store: ticketStore, settings: settings.freshness, logger: logger, etag: ETag.of)
        operations = CustomerWrites(desk: desk, outbox: outbox, sessions: sessions, tickets: tickets, ratings: ratings, metrics: metrics,
                                logger: logger, settings: outboxSettings, platform: platform)
        let (authenticator, memory, failures) = (authenticator, tickets.memory, signInFailures)
        metrics.gauge("customer_memory_entries", help: "Entries of the customer API's in-memory structures (each bounded by size and age).") {
            [([("structure", "sessions")], Double(authenticator.cachedSessions)), ([("structure", "tickets")], Double(memory.count)),
             ([("structure", "sign_in_failures")], Double(failures.count))]
        }
    }

    /// Whose `Idempotency-Key`s a request's are: its customer's, whichever of their sessions sends it (a client that
    /// signs in again mid-retry must still meet its first answer); nil without a valid session, so a made-up token
    /// claims nothing.
    public func idempotencyPrincipal(_ request: HTTPRequest) async -> String? {
        guard let session = try? await authenticator.authenticate(request) else { return nil }
        return "c:\(session.customerId)"
    }

    /// Delivers queued operations until the task is cancelled (every instance runs one).
    public func runRelay() async {
        await operations.runRelay()
    }

    /// Drops a ticket from this instance's memory cache (a webhook changed it).
    public func forget(ticketId: Int) {
        tickets.memory.remove(ticketId)
    }

    /// Team names for rendering tickets outside a request (webhooks).
    public func teams() async -> [Int: (key: String?, name: String)] {
        await tickets.teams.current()
    }

    public func register(in routes: inout RouteTable) {
        registerSessionsAndReads(in: &routes)
        registerQueuedFieldWrites(in: &routes)
        registerQueuedWrites(in: &routes)
        registerCustomerTools(in: &routes)
    }

    /// Sign-in and sign-out; ticket creation and reads (cache first, Desk when stale).
    private func registerSessionsAndReads(in routes: inout RouteTable) {
        routes.add("POST", "/v1/sessions", .async { request, _ in try await createSession(request) })
        routes.add("DELETE", "/v1/sessions/current", .async { request, _ in
            let session = try await authenticator.authenticate(request)
            try await sessions.revoke(sessionId: session.sessionId)
            authenticator.forget(request)
            return HTTPResponse(status: 204)
        })
        routes.add("POST", "/v1/tickets", .async { request, _ in try await createTicket(request) })
        routes.add("GET", "/v1/tickets", .async { request, _ in try await listTickets(request) })
        routes.add("GET", "/v1/tickets/open-count", .async { request, _ in
            let session = try await authenticator.authenticate(request)
            let stale = try await tickets.refreshList(session)
            let count = try await tickets.openCount(session)
            return .json(.object([("count", .integer(count)), ("stale", .bool(stale))]),
                         headers: [("X-Cache", stale ? "STALE" : "HIT")])
        })
        routes.add("GET", "/v1/tickets/{id}", .hybrid(fast: { request, _ in fastTicket(request) }, slow: { request, _ in
            let session = try await authenticator.authenticate(request)
            return Self.respond(try await tickets.get(try request.idParameter(), session: session))
        }))
        routes.add("GET", "/v1/tickets/by-channel/{channelUrl}", .async { request, _ in
            let session = try await authenticator.authenticate(request)
            let channel = request.pathParameters["channelUrl"] ?? ""
            return Self.respond(try await tickets.get(channelUrl: channel, session: session))
        })
    }

    /// The ticket's fields, through the outbox like every customer write.
    private func registerQueuedFieldWrites(in routes: inout RouteTable) {
        routes.add("PATCH", "/v1/tickets/{id}/custom-fields", .async { request, _ in
            try await queue(request, kind: .customFields) { body in
                let fields = body.fieldMap("customFields", required: true, maxCount: DeskLimits.maxCustomFields,
                                           keyLength: DeskLimits.customFieldKeyLength, valueLength: DeskLimits.customFieldValueLength)
                try body.finish()
                return .object([("customFields", .object((fields ?? []).map { ($0.key, .string($0.value)) }))])
            }
        })
        routes.add("PUT", "/v1/tickets/{id}/related-channels", .async { request, _ in
            try await queue(request, kind: .relatedChannels) { body in
                let urls = body.stringArray("channelUrls", required: true, maxCount: DeskLimits.maxRelatedChannels)
                try body.finish()
                return .object([("channelUrls", .array((urls ?? []).map(JSONValue.string)))])
            }
        })
        routes.add("PUT", "/v1/tickets/{id}/priority", .async { request, _ in
            try await queue(request, kind: .priority) { body in
                let priority = body.enumeration("priority", TicketPriority.self, required: true)
                try body.finish()
                return .object([("priority", .string((priority ?? .medium).rawValue))])
            }
        })
    }

    /// State changes that go through the outbox (answered 202 when Desk is away), and their status.
    private func registerQueuedWrites(in routes: inout RouteTable) {
        routes.add("POST", "/v1/tickets/{id}/cancel", .async { request, _ in
            try await queue(request, kind: .cancel, bodyOptional: true) { body in
                let groupKey = body.groupKey("groupKey")
                try body.finish()
                return .object(groupKey.map { [("groupKey", .string($0))] } ?? [])
            }
        })
        routes.add("POST", "/v1/tickets/{id}/close", .async { request, _ in
            try await queue(request, kind: .close, bodyOptional: true) { body in
                let comment = body.string("comment", maxLength: 1000, allowBlank: true)
                try body.finish()
                return .object([("comment", .string(comment ?? ""))])
            }
        })
        routes.add("POST", "/v1/tickets/{id}/reopen", .async { request, _ in
            try await queue(request, kind: .reopen, bodyOptional: true) { body in
                try body.finish()
                return .object([])
            }
        })
        routes.add("POST", "/v1/tickets/{id}/closure-confirmation", .async { request, _ in
            try await queue(request, kind: .closureConfirmation, answering: "a closure inquiry") { body in
                let messageId = body.integer("messageId", required: true, range: 1...Int.max)
                let confirm = body.bool("confirm", required: true)
                try body.finish()
                return .object([("messageId", .integer(messageId ?? 0)), ("confirm", .bool(confirm ?? false))])
            }
        })
        routes.add("POST", "/v1/tickets/{id}/feedback", .async { request, _ in try await feedback(request) })
        routes.add("GET", "/v1/operations/{id}", .async { request, _ in
            let session = try await authenticator.authenticate(request)
            let unknown = "No operation has this id."
            guard let operation = try await outbox.find(id: try request.idParameter(unknown: unknown)),
                  operation.customerId == session.customerId else { throw APIError.notFound(unknown) }
            return .json(CustomerWrites.json(operation), headers: [("Cache-Control", "no-store")])
        })
    }

    /// The customer's own fields, link previews, message classification.
    private func registerCustomerTools(in routes: inout RouteTable) {
        routes.add("PATCH", "/v1/customers/me/custom-fields", .async { request, _ in
            let session = try await authenticator.authenticate(request)
            var body = try JSONBody(request)
            let fields = body.fieldMap("customFields", required: true, maxCount: DeskLimits.maxCustomFields,
                                       keyLength: DeskLimits.customFieldKeyLength, valueLength: DeskLimits.customFieldValueLength)
            try body.finish()
            let customer = try await desk.setCustomerCustomFields(fields ?? [], deskToken: session.deskToken)
            return .json(.object([("userId", .string(session.sendbirdId)),
                                  ("customFields", .object(customer.customFields.map { ($0.key, .string($0.value)) }))]))
        })
        routes.add("POST", "/v1/tickets/{id}/selected-question", .async { request, _ in
            let session = try await authenticator.authenticate(request)
            let id = try request.idParameter()
            var body = try JSONBody(request)
            let faqFileId = body.integer("faqFileId", required: true, range: 1...Int.max)
            let question = body.string("question", required: true, maxLength: 1000)
            try body.finish()
            try await tickets.confirmOwnership(id, session: session)
            try await desk.selectQuestion(ticketId: id, faqFileId: faqFileId!, question: question!, deskToken: session.deskToken)
            return Self.respond(try await tickets.get(id, session: session))
        })
        routes.add("POST", "/v1/link-previews", .async { request, _ in
            _ = try await authenticator.authenticate(request)
            var body = try JSONBody(request)
            let url = body.string("url", required: true, maxLength: 2048)
            try body.finish()
            return .json(try await previews.preview(url!).json)
        })
        routes.add("POST", "/v1/messages/classify", .async { request, _ in
            _ = try await authenticator.authenticate(request)
            return .json(try MessageClassification.classify(request))
        })
    }
    static func respond(_ served: ServedTicket, status: Int = 200, extraHeaders: [(name: String, value: String)] = []) -> HTTPResponse {
        var headers: [(name: String, value: String)] = [("Content-Type", "application/json"), ("X-Cache", served.cache)]
        if let etag = served.etag { headers.append(("ETag", etag)) }
        return HTTPResponse(status: status, headers: headers + extraHeaders, body: served.body)
    }

    /// The hot path: a fresh ticket for a cached session, answered on the polling thread with no I/O.
    func fastTicket(_ request: HTTPRequest) -> HTTPResponse? {
        // One clock reading for both caches.
        let now = WallClock.seconds()
        guard let customerId = authenticator.cachedCustomerId(request, now: now), let text = request.pathParameters["id"],
              let id = HTTPRequest.canonicalId(text), let entry = tickets.fastGet(id, customerId: customerId, now: now) else { return nil }
        var headers = AnswerHeaders.withRoom(for: 3)
        headers.append(("Content-Type", "application/json"))
        headers.append(("X-Cache", "HIT"))
        headers.append(("ETag", entry.etag))
        return HTTPResponse(status: 200, headers: headers, body: entry.body)
    }

    func createSession(_ request: HTTPRequest) async throws -> HTTPResponse {
        var body = try JSONBody(request)
        let userId = body.string("userId", required: true, maxLength: 100)
        let accessToken = body.string("accessToken", required: true, maxLength: 1024, allowBlank: true)
        try body.finish()
        let failures = "u:" + userId! + "@" + clients.client(request)
        if signInFailures.isExhausted(failures) {
            let retry = signInFailures.take(failures).retryAfter
            throw APIError(.rateLimited, detail: "Too many failed sign-ins for this user from this address; retry after \(retry) s.",
                           headers: [("Retry-After", String(retry))])
        }
        let deskToken: String
        do throws(DomainError) {
            deskToken = try await desk.signIn(userId: userId!, accessToken: accessToken!)
        } catch {
            guard error.code == .unauthorized else { throw error }
            _ = signInFailures.take(failures)
            throw APIError(.invalidCredentials, detail: "Sendbird did not accept this user id and access token.")
        }
        let opened = try await sessions.open(sendbirdId: userId!, displayName: nil, deskCustomerId: nil, deskToken: deskToken,
                                             lifetimeSeconds: settings.sessionLifetimeSeconds)
        authenticator.remember(token: opened.token, opened.record)
        return .json(.object([
            ("token", .string(opened.token)), ("tokenType", .string("Bearer")),
            ("expiresAt", .string(ISOTimestamp.format(opened.record.expiresAt))), ("userId", .string(userId!)),
        ]), status: 201, headers: [("Cache-Control", "no-store")])
    }

    /// The body of `POST /v1/tickets`, validated (pure: also driven by the fuzzer).
    public static func newTicket(_ request: HTTPRequest) throws(APIError)
        -> (title: String, userName: String, groupKey: String?, customFields: [(key: String, value: String)]?,
            priority: TicketPriority?, related: [String]?) {
        var body = try JSONBody(request)
        let title = body.string("title", required: true, maxLength: 255)
        let userName = body.string("userName", required: true, maxLength: 100)
        let groupKey = body.groupKey("groupKey")
        let fields = body.fieldMap("customFields", maxCount: DeskLimits.maxCustomFields, keyLength: DeskLimits.customFieldKeyLength,
                                   valueLength: DeskLimits.customFieldValueLength)
        let priority = body.enumeration("priority", TicketPriority.self)
        let related = body.stringArray("relatedChannelUrls", maxCount: DeskLimits.maxRelatedChannels)
        try body.finish()
        return (title!, userName!, groupKey, fields, priority, related)
    }

    func createTicket(_ request: HTTPRequest) async throws -> HTTPResponse {
        let session = try await authenticator.authenticate(request)
        let new = try Self.newTicket(request)
        let ticket = try await tickets.create(NewDeskTicket(
            title: new.title, userName: new.userName, userId: session.sendbirdId, groupKey: new.groupKey, customFields: new.customFields,
            priority: new.priority, relatedChannelUrls: new.related), session: session, unanswered: IdempotentWrites.unanswered, in: desk)
        return Self.respond(CustomerTickets.served(ticket), status: 201, extraHeaders: [("Location", "/v1/tickets/\(ticket.id)")])
    }

    /// The list's query: status, page size, cursor and custom field filters, each refused with its reason.
    static func listQuery(_ request: HTTPRequest) throws(APIError) -> (closed: Bool?, limit: Int, cursor: (createdAt: Double, id: Int)?,
                                                                       filter: [(String, JSONValue)]) {
        var problems: [(String, String)] = []
        // One value each: `status=open&status=closed` has no one meaning.
        for name in ["status", "limit", "cursor"] where request.queryValues(name).count > 1 {
            problems.append((name, "must be given once"))
        }
        var closed: Bool?
        switch request.queryValue("status") {
        case nil, "all": closed = nil
        case "open": closed = false
        case "closed": closed = true
        default: problems.append(("status", "must be open, closed or all"))
        }
        var limit = 10
        if let text = request.queryValue("limit") {
            if let value = Int(text), (1...100).contains(value) { limit = value } else { problems.append(("limit", "must be from 1 to 100")) }
        }
        var cursor: (createdAt: Double, id: Int)?
        if let text = request.queryValue("cursor") {
            if let decoded = Self.decodeCursor(text) { cursor = decoded } else { problems.append(("cursor", "is not a cursor this API issued")) }
        }
        var filter: [(String, JSONValue)] = []
        for item in request.queryValues("customField") {
            // By scalar: a colon followed by a combining mark is no Character ":".
            let scalars = item.unicodeScalars
            guard let colon = scalars.firstIndex(of: ":"), colon != scalars.startIndex else {
                problems.append(("customField", "must be key:value"))
                continue
            }
            let key = String(scalars[..<colon]), value = String(scalars[scalars.index(after: colon)...])
            // What a ticket's custom field can hold (as its writes check); no key twice, as no field has two values.
            if key.utf8.count > DeskLimits.customFieldKeyLength || !key.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0 != "," })
                || value.unicodeScalars.count > DeskLimits.customFieldValueLength {
                problems.append(("customField", "must be key:value with a key of 1 to \(DeskLimits.customFieldKeyLength) visible ASCII "
                                 + "characters and a value of at most \(DeskLimits.customFieldValueLength)"))
            } else if filter.contains(where: { $0.0 == key }) {
                problems.append(("customField", "names the key \(key) twice"))
            }
            filter.append((key, .string(value)))
        }
        if filter.count > DeskLimits.maxCustomFields { problems.append(("customField", "may be given at most \(DeskLimits.maxCustomFields) times")) }
        for (name, _) in request.query where !["status", "limit", "cursor", "customField"].contains(name) {
            problems.append((name, "is not a known query parameter"))
        }
        guard problems.isEmpty else {
            throw APIError(.invalidQuery, detail: problems.map { "\($0.0) \($0.1)" }.joined(separator: "; ") + ".",
                           extensions: ["errors": .array(problems.map { .object([("field", .string($0.0)), ("message", .string($0.1))]) })])
        }
        return (closed, limit, cursor, filter)
    }

    func listTickets(_ request: HTTPRequest) async throws -> HTTPResponse {
        let session = try await authenticator.authenticate(request)
        let (closed, limit, cursor, filter) = try Self.listQuery(request)
        let stale = try await tickets.refreshList(session)
        let rows = try await tickets.list(session, closed: closed, customFields: filter.isEmpty ? nil : JSONValue.object(filter).serialized(),
                                          after: cursor, limit: limit + 1)
        let page = rows.prefix(limit)
        // The tickets written straight into the body (each was a string of its own, then appended to another).
        var body = Array(#"{"items":["#.utf8)
        for (index, row) in page.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            TicketDocument.serve(row.document, stale: stale, pending: row.pendingOperations, into: &body)
        }
        let next = rows.count > limit ? page.last.map { Self.encodeCursor(createdAt: $0.createdAt, id: $0.id) } : nil
        body.append(contentsOf: #"],"nextCursor":"#.utf8)
        body.append(contentsOf: (next.map { JSONValue.string($0).serialized() } ?? "null").utf8)
        body.append(contentsOf: (next != nil ? #","hasNext":true,"stale":"# : #","hasNext":false,"stale":"#).utf8)
        body.append(contentsOf: (stale ? "true}" : "false}").utf8)
        return HTTPResponse(status: 200, headers: [("Content-Type", "application/json"), ("X-Cache", stale ? "STALE" : "HIT")], body: body)
    }

    static func encodeCursor(createdAt: Double, id: Int) -> String { KeysetCursor.encode(time: createdAt, id: id) }

    static func decodeCursor(_ text: String) -> (createdAt: Double, id: Int)? {
        KeysetCursor.decode(text).map { ($0.time, $0.id) }
    }

    /// A customer change to one of their tickets: validated here, ownership checked against the cache, then queued
    /// for Desk through the outbox (delivered at once when Desk answers).
    /// `answering`: what the body's `messageId` must name (a write answering one of the ticket's messages).
    func queue(_ request: HTTPRequest, kind: OperationKind, bodyOptional: Bool = false, answering message: String? = nil,
               _ validate: (inout JSONBody) throws -> JSONValue) async throws -> HTTPResponse {
        let session = try await authenticator.authenticate(request)
        let id = try request.idParameter()
        var body: JSONBody
        if bodyOptional, request.body.isEmpty {
            body = try JSONBody(HTTPRequest(method: "POST", path: request.path, headers: [("content-type", "application/json")], body: Array("{}".utf8)))
        } else {
            body = try JSONBody(request)
        }
        let payload = try validate(&body)
        try await tickets.confirmOwnership(id, session: session)
        guard let message else { return try await operations.submit(session: session, ticketId: id, kind: kind, payload: payload) }
        return try await Self.namingAMessage(message) {
            try await operations.submit(session: session, ticketId: id, kind: kind, payload: payload)
        }
    }

    /// CSAT feedback on the caller's own ticket: queued for Desk like the other writes and recorded, with the agent and
    /// team the ticket has at this moment, once Desk has accepted it (Desk checks the message is the ticket's CSAT
    /// request). A null score is a declined rating: recorded at once (it counts as a response) for a CSAT request the
    /// gateway knows, and not sent, as Desk's CSAT message cannot hold an empty score.
    func feedback(_ request: HTTPRequest) async throws -> HTTPResponse {
        let session = try await authenticator.authenticate(request)
        let id = try request.idParameter()
        var body = try JSONBody(request)
        let messageId = body.integer("messageId", required: true, range: 1...Int.max)
        if !body.has("score") { body.fail("score", "is required (an integer from 1 to 5, or null to decline)") }
        let score = body.integer("score", range: DeskLimits.csatScores)
        if !body.has("comment") { body.fail("comment", "is required (a string, or null)") }
        let comment = body.string("comment", maxLength: 1000, allowBlank: true)
        try body.finish()
        // The ticket must be the caller's by Desk's word (a ticket the cache does not hold is read from Desk first).
        try await tickets.confirmOwnership(id, session: session, requireCached: true)
        guard let snapshot = try await tickets.snapshot(id, session: session) else { throw APIError.notFound("No ticket has this id.") }
        let now = WallClock.seconds()
        let context = RatingContext(ticketId: id, agentId: snapshot.agentId, teamId: snapshot.teamId, channelType: snapshot.channelType,
                                    priority: snapshot.priority, customerSendbirdId: session.sendbirdId)
        guard let score else {
            switch try await feedbackRules.decline(context, messageId: messageId!, comment: comment, at: now) {
            case .recorded:
                return Self.respond(try await tickets.get(id, session: session))
            case .notARequest:
                throw Self.notAMessageOfTheTicket("a CSAT request")
            case .alreadyScored:
                throw DomainError(.conflict, OperationKind.feedback.stateConflict)
            }
        }
        let payload = RatingRecorder.feedbackPayload(context, messageId: messageId!, score: score, comment: comment, at: now)
        return try await Self.namingAMessage("a CSAT request") {
            try await operations.submit(session: session, ticketId: id, kind: .feedback, payload: payload)
        }
    }

    /// A write answering one of the ticket's messages: Desk's 404 there, for a ticket the caller was just confirmed to
    /// own, means the message is not the ticket's `what`, which is the client's error as a decline's is (422 on
    /// `messageId`, not a 404 that reads as if the ticket were gone).
    static func namingAMessage(_ what: String, _ write: () async throws -> HTTPResponse) async throws -> HTTPResponse {
        do {
            return try await write()
        } catch let error as DomainError where error.code == .notFound {
            throw notAMessageOfTheTicket(what)
        }
    }

    static func notAMessageOfTheTicket(_ what: String) -> APIError {
        APIError(.validationFailed, detail: "messageId is not \(what) of this ticket.",
                 extensions: ["errors": .array([.object([("field", .string("messageId")), ("message", .string("is not \(what) of this ticket"))])]),
                              "errorCount": .integer(1)])
    }
}

extension MessageClassification {
    /// `POST /v1/messages/classify {customType, data}`: `data` is the message's data string as the Chat SDK gives it.
    static func classify(_ request: HTTPRequest) throws -> JSONValue {
        var body = try JSONBody(request)
        let customType = body.string("customType", maxLength: 128, allowBlank: true)
        let data = body.string("data", maxLength: 65_536, allowBlank: true)
        try body.finish()
        var payload: MessagePayload?
        if let data, !data.isEmpty {
            guard let parsed = try? JSONParser.parse(data) else {
                throw APIError(.validationFailed, detail: "data must be a JSON-encoded string.",
                               extensions: ["errors": .array([.object([("field", .string("data")), ("message", .string("is not valid JSON"))])])])
            }
            let inner = parsed["body"]
            payload = MessagePayload(type: parsed["type"]?.stringValue,
                                     state: inner?["state"]?.stringValue ?? inner?["status"]?.stringValue,
                                     ticketId: inner?["ticketId"]?.intValue ?? parsed["ticket"]?["id"]?.intValue,
                                     score: inner?["customerSatisfactionScore"]?.intValue,
                                     comment: inner?["customerSatisfactionComment"]?.stringValue)
        }
        let result = MessageClassifier.classify(customType: customType, payload: payload)
        return .object([
            ("kind", .string(result.kind.rawValue)),
            ("type", result.type.map(JSONValue.string) ?? .null),
            ("state", result.state.map { .string($0.rawValue) } ?? .null),
            ("visibleToCustomer", .bool(result.visibleToCustomer)),
            ("ticketId", result.ticketId.map(JSONValue.integer) ?? .null),
            ("score", result.score.map(JSONValue.integer) ?? .null),
            ("comment", result.comment.map(JSONValue.string) ?? .null),
        ])
    }
}
