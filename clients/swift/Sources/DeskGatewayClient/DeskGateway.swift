import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTypes
import OpenAPIRuntime
import OpenAPIURLSession

public typealias Ticket = Components.Schemas.Ticket
public typealias TicketPage = Components.Schemas.TicketPage
public typealias Session = Components.Schemas.Session
public typealias Operation = Components.Schemas.Operation
public typealias Priority = Components.Schemas.Priority
public typealias LinkPreview = Components.Schemas.LinkPreview
public typealias ProblemCode = Components.Schemas.Problem.CodePayload

/// What a write gave back: the fresh ticket (Desk took it), or the queued operation while Desk cannot be reached
/// (`DeskGateway.waitForOperation`).
public enum WriteResult: Sendable {
    case done(Ticket)
    case queued(Operation)

    public var ticket: Ticket? { if case .done(let ticket) = self { ticket } else { nil } }
    public var operation: Operation? { if case .queued(let operation) = self { operation } else { nil } }
}

/// The gateway for an app, in the Desk SDK's words: `authenticate`, then `tickets.create`, `tickets.openedList()`,
/// `tickets.submitFeedback`, … Every call is cancelled with its Swift task. 429s (and 503s of calls safe to repeat)
/// wait out `Retry-After` and try again; writes carry one idempotency key across their attempts, so a retry after a
/// lost connection is answered with the first result instead of writing twice.
public final class DeskGateway: Sendable {
    let client: Client
    let state: GatewayState
    let onSessionExpired: (@Sendable (DeskGatewayError) async -> String?)?
    public let tickets: Tickets

    /// - Parameters:
    ///   - baseURL: the gateway, e.g. `https://gateway.example.com` (a path such as `/api` is kept).
    ///   - token: a session token from an earlier `authenticate`, kept by the app.
    ///   - maxRetries: retries of a 429, and of a 503 when the call is safe to repeat.
    ///   - onSessionExpired: called when a signed-in call gets 401 (`unauthorized`: the gateway session ended;
    ///     `deskSessionExpired`: Desk's did). Return a new token (e.g. `try await gateway.authenticate(…)` with the
    ///     Sendbird token the app keeps on the device) and the call is made once more; nil lets the error through.
    public init(baseURL: URL, token: String? = nil, maxRetries: Int = 2, maxRetryDelay: Duration = .seconds(30),
                session: URLSession = .shared,
                onSessionExpired: (@Sendable (DeskGatewayError) async -> String?)? = nil) {
        state = GatewayState(token: token)
        self.onSessionExpired = onSessionExpired
        let middleware = GatewayMiddleware(state: state, maxRetries: maxRetries, maxRetryDelay: maxRetryDelay,
                                           onSessionExpired: onSessionExpired)
        client = Client(serverURL: baseURL, configuration: Configuration(dateTranscoder: GatewayDates()),
                        transport: URLSessionTransport(configuration: .init(session: session)), middlewares: [middleware])
        tickets = Tickets(client: client, state: state)
    }

    /// The current session token (keep it to resume without signing in again).
    public var token: String? { state.token }

    /// Signs the customer in with their Sendbird user id and access token (the Desk SDK's `authenticate`).
    @discardableResult
    public func authenticate(userId: String, accessToken: String) async throws -> Session {
        let session = try await call { try await client.createSession(body: .json(.init(userId: userId, accessToken: accessToken))).created.body.json }
        state.token = session.token
        return session
    }

    /// Ends the session on the gateway and forgets it here.
    public func signOut() async throws {
        defer { state.signedOut() }
        _ = try await call { try await client.deleteCurrentSession().noContent }
    }

    /// Merges the customer's own custom fields (the SDK's `setCustomerCustomFields`).
    @discardableResult
    public func setCustomerCustomFields(_ fields: [String: String]) async throws -> [String: String] {
        try await call {
            try await client.updateCustomerCustomFields(body: .json(.init(customFields: .strings(fields)))).ok.body.json.customFields.additionalProperties
        }
    }

    /// A page's preview and the message that shows it in Desk (the SDK's URL previews).
    public func linkPreview(url: String) async throws -> LinkPreview {
        try await call {
            try await client.createLinkPreview(headers: .init(idempotencyKey: Self.newIdempotencyKey()), body: .json(.init(url: url))).ok.body.json
        }
    }

    public func operation(_ id: Int) async throws -> Operation {
        try await call { try await client.getOperation(path: .init(id: id)).ok.body.json }
    }

    /// Polls a queued write until Desk took it (`delivered`) or refused it (throws `operationFailed`). A write that
    /// waits for the customer to sign in again (Desk ended their session meanwhile) calls `onSessionExpired` once.
    public func waitForOperation(_ operation: Operation, every interval: Duration = .seconds(1),
                                 timeout: Duration = .seconds(60)) async throws -> Operation {
        let deadline = ContinuousClock.now + timeout
        var renewed = false
        while true {
            let current = try await self.operation(operation.id)
            switch current.status {
            case .delivered: return current
            case .failed: throw DeskGatewayError(client: "operation_failed", detail: current.reason ?? "Desk refused the change.")
            case .pending:
                if !renewed, let reason = current.reason, reason.hasPrefix("desk_session_expired"), let onSessionExpired {
                    renewed = true
                    if let token = await onSessionExpired(DeskGatewayError(client: "desk_session_expired", detail: reason, status: 401)) {
                        state.token = token
                    }
                }
                guard ContinuousClock.now + interval < deadline else {
                    throw DeskGatewayError(client: "operation_pending", detail: "operation \(operation.id) is still queued")
                }
                try await Task.sleep(for: interval)
            }
        }
    }

    /// A fresh `Idempotency-Key`.
    public static func newIdempotencyKey() -> String { UUID().uuidString.lowercased() }
}

/// The customer's tickets.
public struct Tickets: Sendable {
    let client: Client
    let state: GatewayState

    /// Opens a ticket. Keep `idempotencyKey` to retry the same creation later without opening a second one.
    public func create(title: String, userName: String, groupKey: String? = nil, priority: Priority? = nil,
                       customFields: [String: String]? = nil, relatedChannelURLs: [String]? = nil,
                       idempotencyKey: String = DeskGateway.newIdempotencyKey()) async throws -> Ticket {
        let body = Components.Schemas.TicketCreate(title: title, userName: userName, groupKey: groupKey,
                                                   customFields: customFields.map(Components.Schemas.CustomFields.strings),
                                                   priority: priority, relatedChannelUrls: relatedChannelURLs)
        return try await call { try await client.createTicket(headers: .init(idempotencyKey: idempotencyKey), body: .json(body)).created.body.json }
    }

    /// One page, newest first; `cursor` is the previous page's `nextCursor`.
    public func page(status: Operations.ListTickets.Input.Query.StatusPayload = .all, limit: Int = 10,
                     cursor: String? = nil, customFields: [String: String] = [:]) async throws -> TicketPage {
        let filters = customFields.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }
        return try await call {
            try await client.listTickets(query: .init(status: status, limit: limit, cursor: cursor, customField: filters.isEmpty ? nil : filters)).ok.body.json
        }
    }

    /// The open tickets, page after page as they are iterated (the SDK's `getOpenedList`, with cursors for offsets).
    public func openedList(pageSize: Int = 20) -> TicketSequence { TicketSequence(tickets: self, status: .open, pageSize: pageSize) }
    /// The closed tickets (the SDK's `getClosedList`).
    public func closedList(pageSize: Int = 20) -> TicketSequence { TicketSequence(tickets: self, status: .closed, pageSize: pageSize) }

    /// Reads a ticket; an unchanged one costs a 304 (the client keeps the last copy and its ETag).
    public func get(_ id: Int) async throws -> Ticket {
        try await cachedRead("/v1/tickets/\(id)") { try await client.getTicket(path: .init(id: id)) }
    }

    /// The ticket of a chat channel (the SDK's `getByChannelUrl`).
    public func byChannelURL(_ channelURL: String) async throws -> Ticket {
        let encoded = channelURL.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(.init(charactersIn: "/"))) ?? channelURL
        return try await cachedRead("/v1/tickets/by-channel/\(encoded)") { try await client.getTicketByChannel(path: .init(channelUrl: channelURL)) }
    }

    /// The SDK's `getOpenCount`.
    public func openCount() async throws -> Int {
        try await call { try await client.getOpenTicketCount().ok.body.json.count }
    }

    public func setCustomFields(_ id: Int, _ fields: [String: String]) async throws -> WriteResult {
        try await write { try await client.updateTicketCustomFields(path: .init(id: id), body: .json(.init(customFields: .strings(fields)))) }
    }

    public func setRelatedChannels(_ id: Int, _ channelURLs: [String]) async throws -> WriteResult {
        try await write { try await client.replaceRelatedChannels(path: .init(id: id), body: .json(.init(channelUrls: channelURLs))) }
    }

    /// The question the customer picked from an FAQ bot's suggestions (the SDK's `selectQuestion`): `faqFileId` and
    /// the question come from the bot's message. Sent to Desk at once, never queued.
    public func selectQuestion(_ id: Int, faqFileId: Int, question: String,
                               idempotencyKey: String = DeskGateway.newIdempotencyKey()) async throws -> Ticket {
        try await call {
            try await client.selectQuestion(path: .init(id: id), headers: .init(idempotencyKey: idempotencyKey),
                                            body: .json(.init(faqFileId: faqFileId, question: question))).ok.body.json
        }
    }

    /// The SDK's `ticket.setPriority`.
    public func setPriority(_ id: Int, _ priority: Priority) async throws -> WriteResult {
        try await write { try await client.setTicketPriority(path: .init(id: id), body: .json(.init(priority: priority))) }
    }

    /// The SDK's `ticket.cancel`: Desk takes the ticket from its agent and routes it again, into the team `groupKey`
    /// names when given.
    public func cancelAssignment(_ id: Int, transferTo groupKey: String? = nil,
                                 idempotencyKey: String = DeskGateway.newIdempotencyKey()) async throws -> WriteResult {
        try await write {
            try await client.cancelTicketAssignment(path: .init(id: id), headers: .init(idempotencyKey: idempotencyKey),
                                                    body: .json(.init(groupKey: groupKey)))
        }
    }

    public func close(_ id: Int, comment: String? = nil, idempotencyKey: String = DeskGateway.newIdempotencyKey()) async throws -> WriteResult {
        try await write {
            try await client.closeTicket(path: .init(id: id), headers: .init(idempotencyKey: idempotencyKey), body: .json(.init(comment: comment)))
        }
    }

    public func reopen(_ id: Int, idempotencyKey: String = DeskGateway.newIdempotencyKey()) async throws -> WriteResult {
        try await write { try await client.reopenTicket(path: .init(id: id), headers: .init(idempotencyKey: idempotencyKey)) }
    }

    /// Answers the agent's closure inquiry `messageId` (the SDK's `confirmEndOfChat`).
    public func confirmEndOfChat(_ id: Int, messageId: Int, confirm: Bool,
                                 idempotencyKey: String = DeskGateway.newIdempotencyKey()) async throws -> WriteResult {
        try await write {
            try await client.answerClosureInquiry(path: .init(id: id), headers: .init(idempotencyKey: idempotencyKey),
                                                  body: .json(.init(messageId: messageId, confirm: confirm)))
        }
    }

    /// Answers the CSAT request `messageId`: a score of 1–5, or nil to decline (the SDK's `submitFeedback`).
    public func submitFeedback(_ id: Int, messageId: Int, score: Int?, comment: String? = nil,
                               idempotencyKey: String = DeskGateway.newIdempotencyKey()) async throws -> WriteResult {
        try await write {
            try await client.submitFeedback(path: .init(id: id), headers: .init(idempotencyKey: idempotencyKey),
                                            body: .json(.init(messageId: messageId, score: score, comment: comment)))
        }
    }

    private func cachedRead<Output: TicketReadOutput>(_ path: String, _ read: () async throws -> Output) async throws -> Ticket {
        let output = try await call(read)
        if let ticket = try output.ticket {
            state.remember(ticket, at: path)
            return ticket
        }
        if let ticket = state.ticket(at: path) { return ticket }
        // A 304 without a copy (another client instance's ETag): ask again without one.
        state.forget(path)
        guard let ticket = try await call(read).ticket else { throw DeskGatewayError(client: "not_modified_without_copy", detail: path) }
        state.remember(ticket, at: path)
        return ticket
    }

    private func write<Output: TicketWriteOutput>(_ body: () async throws -> Output) async throws -> WriteResult {
        try await call(body).result
    }
}

/// The tickets of a list as an `AsyncSequence`: the next page is read when the last one is used up.
public struct TicketSequence: AsyncSequence, Sendable {
    public typealias Element = Ticket
    let tickets: Tickets
    let status: Operations.ListTickets.Input.Query.StatusPayload
    let pageSize: Int

    public struct AsyncIterator: AsyncIteratorProtocol {
        let sequence: TicketSequence
        var buffered: [Ticket] = []
        var cursor: String?
        var finished = false

        public mutating func next() async throws -> Ticket? {
            while buffered.isEmpty {
                guard !finished else { return nil }
                let page = try await sequence.tickets.page(status: sequence.status, limit: sequence.pageSize, cursor: cursor)
                buffered = page.items
                cursor = page.nextCursor
                finished = !page.hasNext || page.nextCursor == nil
            }
            return buffered.removeFirst()
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(sequence: self) }
}

/// The gateway's timestamps are RFC 3339 with milliseconds; plain seconds are read too.
struct GatewayDates: DateTranscoder {
    func encode(_ date: Date) throws -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }

    func decode(_ text: String) throws -> Date {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        if let date = formatter.date(from: text) { return date }
        throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not an RFC 3339 timestamp: \(text)"))
    }
}

extension Components.Schemas.CustomFields {
    static func strings(_ fields: [String: String]) -> Self {
        Self(additionalProperties: fields.mapValues { .init(value1: $0) })
    }
}

/// Runs a generated call, with the middleware's typed error in place of the runtime's wrapper.
func call<T>(_ body: () async throws -> T) async throws -> T {
    do {
        return try await body()
    } catch let error as ClientError {
        if let typed = error.underlyingError as? DeskGatewayError { throw typed }
        if error.underlyingError is CancellationError { throw CancellationError() }
        if let url = error.underlyingError as? URLError, url.code == .cancelled { throw CancellationError() }
        throw DeskGatewayError(client: "network_error", detail: "\(error.underlyingError)")
    }
}

protocol TicketReadOutput {
    /// The ticket of a 200; nil for a 304.
    var ticket: Ticket? { get throws }
}

extension Operations.GetTicket.Output: TicketReadOutput {
    var ticket: Ticket? {
        get throws { if case .notModified = self { return nil }; return try ok.body.json }
    }
}

extension Operations.GetTicketByChannel.Output: TicketReadOutput {
    var ticket: Ticket? {
        get throws { if case .notModified = self { return nil }; return try ok.body.json }
    }
}

protocol TicketWriteOutput {
    var result: WriteResult { get throws }
}

/// Each write's 200 (`Ticket`) or 202 (`Queued`), as one `WriteResult`.
protocol TicketOrQueued: TicketWriteOutput {
    var ok: Components.Responses.Ticket { get throws }
    var accepted: Components.Responses.Queued { get throws }
}

extension TicketOrQueued {
    var result: WriteResult {
        get throws {
            if let queued = try? accepted { return .queued(try queued.body.json) }
            return .done(try ok.body.json)
        }
    }
}

extension Operations.UpdateTicketCustomFields.Output: TicketOrQueued {}
extension Operations.ReplaceRelatedChannels.Output: TicketOrQueued {}
extension Operations.CloseTicket.Output: TicketOrQueued {}
extension Operations.ReopenTicket.Output: TicketOrQueued {}
extension Operations.SetTicketPriority.Output: TicketOrQueued {}
extension Operations.CancelTicketAssignment.Output: TicketOrQueued {}
extension Operations.AnswerClosureInquiry.Output: TicketOrQueued {}
extension Operations.SubmitFeedback.Output: TicketOrQueued {}
