import Domain
import JSON
import Synchronization

/// Desk objects from the JSON the Platform API sends.
enum Make {
    static func ticket(_ id: Int, agent: Int? = 501, team: Int? = 11, channelType: String? = "SENDBIRD_IOS", priority: String = "HIGH",
                       updatedAt: String = "2026-11-20T10:00:00Z", closedAt: String? = "2026-11-20T09:00:00Z",
                       score: Int? = nil, comment: String? = nil, status: TicketStatus? = nil) -> DeskTicket {
        let status = status ?? (closedAt == nil ? .active : .closed)
        var fields: [(String, JSONValue)] = [("id", .integer(id)), ("status2", .string(status.rawValue)),
                                             ("priority", .string(priority)), ("updatedAt", .string(updatedAt)),
                                             ("customer", .object([("sendbirdId", .string("customer-\(id)"))]))]
        if let agent { fields.append(("recentAssignment", .object([("agent", .object([("id", .integer(agent))]))]))) }
        if let team { fields.append(("group", .integer(team))) }
        if let channelType { fields.append(("channelType", .string(channelType))) }
        if let closedAt { fields.append(("closedAt", .string(closedAt))) }
        if let score { fields.append(("customerSatisfactionScore", .integer(score))) }
        if let comment { fields.append(("customerSatisfactionComment", .string(comment))) }
        return try! DeskTicket(json: .object(fields))
    }

    static func csat(_ id: Int, state: String, score: Int? = nil, createdAt: String = "2026-11-20T09:01:00Z",
                     updatedAt: String? = "2026-11-20T09:05:00Z") -> DeskMessage {
        var body: [(String, JSONValue)] = [("state", .string(state))]
        if let score { body.append(("customerSatisfactionScore", .integer(score))) }
        let data: JSONValue = .object([("type", .string(RichMessageType.customerSatisfaction.rawValue)), ("body", .object(body))])
        var fields: [(String, JSONValue)] = [("messageId", .integer(id)), ("customType", .string(RichMessageType.customType)),
                                             ("data", .string(data.serialized())), ("createdAt", .string(createdAt))]
        if let updatedAt { fields.append(("updatedAt", .string(updatedAt))) }
        return try! DeskMessage(json: .object(fields))
    }

    static func text(_ id: Int) -> DeskMessage {
        try! DeskMessage(json: .object([("messageId", .integer(id)), ("customType", .string(""))]))
    }
}

/// Desk's Platform API in memory: closed tickets with their messages, and failures to order.
final class FakeDesk: DeskPlatformReader {
    struct State {
        var tickets: [DeskTicket] = []
        var messages: [Int: [DeskMessage]] = [:]
        var failingMessages: Set<Int> = []
        var rateLimitNextPage = false
        var pageQueries: [(startDate: String?, endDate: String?)] = []
        var ticketReads: [Int] = []
        var calls = 0
    }
    let state = Mutex(State())

    func agents(limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskAgent> {
        state.withLock { $0.calls += 1 }
        return DeskPage(count: 0, hasNext: false, results: [])
    }

    func teams(limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskTeam> {
        state.withLock { $0.calls += 1 }
        return DeskPage(count: 0, hasNext: false, results: [])
    }

    func ticketPage(limit: Int, offset: Int, status: [TicketStatus], startDate: String?, endDate: String?,
                    order: String?) async throws(DomainError) -> DeskPage<DeskTicket> {
        let (limited, tickets) = state.withLock { state -> (Bool, [DeskTicket]) in
            state.calls += 1
            if state.rateLimitNextPage {
                state.rateLimitNextPage = false
                return (true, [])
            }
            state.pageQueries.append((startDate, endDate))
            return (false, state.tickets)
        }
        if limited { throw DomainError(.rateLimited, "Slow down.", retryAfterSeconds: 1) }
        let slice = Array(tickets.dropFirst(offset).prefix(limit))
        return DeskPage(count: tickets.count, hasNext: offset + slice.count < tickets.count, results: slice)
    }

    func platformTicket(id: Int) async throws(DomainError) -> DeskTicket {
        let ticket = state.withLock { state in
            state.calls += 1
            state.ticketReads.append(id)
            return state.tickets.first { $0.id == id }
        }
        guard let ticket else { throw DomainError(.notFound, "No such ticket.") }
        return ticket
    }

    func chatMessages(ticketId: Int, limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskMessage> {
        let (failing, messages) = state.withLock { state in
            state.calls += 1
            return (state.failingMessages.contains(ticketId), state.messages[ticketId] ?? [])
        }
        if failing { throw DomainError(.upstreamProtocol, "Odd answer.") }
        let slice = Array(messages.dropFirst(offset).prefix(limit))
        return DeskPage(count: messages.count, hasNext: offset + slice.count < messages.count, results: slice)
    }

    var isPaused: Bool { false }
}

/// The sync's lease and position in memory.
final class FakeSyncState: SyncState {
    struct State {
        var lease: String?
        var syncedThrough: String?
        var retry: [Int] = []
        var saves = 0
        var values: [String: String] = [:]
    }
    let state = Mutex(State())

    func takeLease(_ instance: String) async throws -> Bool {
        state.withLock { state in
            guard state.lease == nil || state.lease == instance else { return false }
            state.lease = instance
            return true
        }
    }

    func renewLease(_ instance: String) async throws {}

    func releaseLease(_ instance: String) async throws {
        state.withLock { if $0.lease == instance { $0.lease = nil } }
    }

    func ticketPosition() async throws -> (syncedThrough: String?, retry: [Int]) {
        state.withLock { ($0.syncedThrough, $0.retry) }
    }

    func saveTicketPosition(syncedThrough day: String, retry: [Int]) async throws {
        state.withLock { state in
            state.syncedThrough = day
            state.retry = retry.sorted()
            state.saves += 1
        }
    }

    func addRetry(_ ticketIds: [Int]) async throws {
        state.withLock { $0.retry = Array(Set($0.retry).union(ticketIds)).sorted() }
    }

    func value(_ name: String) async throws -> String? { state.withLock { $0.values[name] } }

    func setValue(_ name: String, _ value: String?) async throws { state.withLock { $0.values[name] = value } }

    func upsertAgents(_ agents: [DeskAgent]) async throws {}
    func upsertTeams(_ teams: [DeskTeam]) async throws {}
}

/// Ratings in memory with the store's rule (`RatingRecord.replaces`): one answer per (ticket, message).
final class FakeRatings: RatingStore {
    struct State {
        var requests: [CSATRequestRecord] = []
        var ratings: [RatingRecord] = []
    }
    let state = Mutex(State())

    func recordRequest(_ request: CSATRequestRecord) async throws -> Bool {
        state.withLock { state in
            guard !state.requests.contains(where: { $0.ticketId == request.ticketId && $0.messageId == request.messageId }) else { return false }
            state.requests.append(request)
            return true
        }
    }

    func record(_ rating: RatingRecord) async throws -> Bool {
        state.withLock { state in
            if let index = state.ratings.firstIndex(where: { $0.ticketId == rating.ticketId && $0.messageId == rating.messageId }) {
                let old = state.ratings[index]
                guard rating.replaces(score: old.score, comment: old.comment, ratedAt: old.ratedAt) else { return false }
                state.ratings[index] = rating
                return true
            }
            state.ratings.append(rating)
            return true
        }
    }

    func ticketsAwaitingAnswers(maxAgeDays: Int, after cursor: String?, limit: Int) async throws -> (tickets: [Int], next: String?) {
        state.withLock { state in
            // Requests in the order they were made, the cursor the number already passed.
            let open = state.requests.filter { request in
                !state.ratings.contains { $0.ticketId == request.ticketId && ($0.messageId == request.messageId || $0.messageId == 0) }
            }.sorted { ($0.requestedAt, $0.ticketId, $0.messageId) < ($1.requestedAt, $1.ticketId, $1.messageId) }
            let start = cursor.flatMap { Int($0) } ?? 0
            let slice = open.dropFirst(start).prefix(limit)
            var tickets: [Int] = []
            for request in slice where !tickets.contains(request.ticketId) { tickets.append(request.ticketId) }
            return (tickets, slice.count < limit ? nil : String(start + slice.count))
        }
    }

    func storedAnswers(ticketIds: [Int]) async throws -> [Int: Int?] {
        state.withLock { state in
            var answers: [Int: Int?] = [:]
            for rating in state.ratings.sorted(by: { $0.ratedAt < $1.ratedAt }) where ticketIds.contains(rating.ticketId) {
                answers[rating.ticketId] = .some(rating.score)
            }
            return answers
        }
    }

    /// The store's rule: the same answer already recorded is left alone; else the latest known request gets it.
    func recordTicketLevel(_ rating: RatingRecord, closedAt: Double) async throws -> Bool {
        let (same, latest) = state.withLock { state in
            (state.ratings.contains { $0.ticketId == rating.ticketId && $0.messageId != 0 && $0.score == rating.score && $0.comment == rating.comment },
             state.requests.filter { $0.ticketId == rating.ticketId }.max { ($0.requestedAt, $0.messageId) < ($1.requestedAt, $1.messageId) })
        }
        if same { return false }
        return try await record(latest.map { rating.answering(messageId: $0.messageId) } ?? rating)
    }
}

extension FakeRatings: FeedbackRatings {
    func isRequest(ticketId: Int, messageId: Int) async throws -> Bool {
        state.withLock { $0.requests.contains { $0.ticketId == ticketId && $0.messageId == messageId } }
    }

    func storedAnswer(ticketId: Int, messageId: Int) async throws -> Int?? {
        state.withLock { state in state.ratings.first { $0.ticketId == ticketId && $0.messageId == messageId }.map(\.score) }
    }
}
