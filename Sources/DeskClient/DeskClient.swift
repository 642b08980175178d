public import Domain
import Foundation
import Synchronization
import CurlHTTP
public import JSON

/// A customer's Desk session (from `POST /sapi/customers/auth/`). Never returned to clients or logged.
public struct DeskSession: Sendable, CustomStringConvertible {
    public let token: String
    public init(token: String) { self.token = token }
    public var description: String { "DeskSession(<redacted>)" }
}

/// Outcome of one upstream call, for metrics.
public struct DeskCallRecord: Sendable {
    public let operation: String
    /// `ok`, `client_error`, `rate_limited` (429), `server_error`, `timeout`, `unreachable`, `breaker_open`, `abandoned`
    /// (the caller stopped waiting), `too_large` (the answer passed `maxAnswerBytes`), `unreadable` (a 2xx that is
    /// not JSON, such as a proxy's page).
    public let outcome: String
    public let seconds: Double
}

/// The Desk wire protocol: the customer API (`/sapi`, what the Desk SDKs call, with a per-customer session token)
/// and the Platform API (`/platform/v1`, server-to-server). Every attempt has a deadline; idempotent calls retry
/// with full-jitter backoff and honour `Retry-After`; a circuit breaker fails fast while Desk is down.
///
/// HTTP goes through libcurl (`CurlClient`: keep-alive and TLS from a mature library, on threads of its own), not
/// FoundationNetworking's URLSession, which leaks memory on every request on Linux.
public final class DeskClient: Sendable {
    public let configuration: DeskClientConfiguration
    public let breaker: CircuitBreaker
    let http: CurlClient
    let observe: @Sendable (DeskCallRecord) -> Void
    /// Where each call's client span goes when tracing is exported.
    let spans: (any SpanRecorder)?
    private let rateLimited = Atomic<Int>(0)

    /// 429 answers Desk gave this client so far, retried ones included.
    public var rateLimitedAnswers: Int { rateLimited.load(ordering: .relaxed) }

    func countRateLimited() { rateLimited.add(1, ordering: .relaxed) }

    public init(configuration: DeskClientConfiguration, spans: (any SpanRecorder)? = nil,
                observe: @escaping @Sendable (DeskCallRecord) -> Void = { _ in }) {
        self.configuration = configuration
        self.observe = observe
        self.spans = spans
        breaker = CircuitBreaker(threshold: configuration.breakerFailureThreshold, cooldown: configuration.breakerCooldown)
        // No cache and no cookies: nothing from Desk is kept between calls (the gateway has its own caches).
        http = CurlClient(maxConnections: 32, name: "desk-client")
    }

    enum Credential {
        case customerAuth(accessToken: String)
        case customer(DeskSession)
        case platform
    }

    // MARK: customer API

    public func authenticate(userId: String, accessToken: String) async throws(DomainError) -> DeskSession {
        let body: JSONValue = .object([("sendbirdAppId", .string(configuration.appId)), ("sendbirdId", .string(userId))])
        let answer = try await call("auth", "POST", "/sapi/customers/auth/", .customerAuth(accessToken: accessToken),
                                    body: body, idempotent: true)
        guard let token = answer["token"]?.stringValue, !token.isEmpty else { throw DeskDecoding.failure("auth answer without token") }
        return DeskSession(token: token)
    }

    public typealias NewTicket = NewDeskTicket

    /// Not retried: a repeated create would open a second ticket.
    public func createTicket(_ session: DeskSession, _ ticket: NewTicket) async throws(DomainError) -> DeskTicket {
        // `info` is the SDK's legacy requester payload, itself a JSON string.
        let info: JSONValue = .object([("ticket", .object([
            ("subject", .string(ticket.title)),
            ("requester", .object([("name", .string(ticket.userName)), ("email", .string(ticket.userId))])),
        ]))])
        var fields: [(String, JSONValue)] = [
            ("sendbirdAppId", .string(configuration.appId)), ("channelName", .string(ticket.title)),
            ("channelType", .string(ticket.channelType)),
        ]
        if let customFields = ticket.customFields { fields.append(("customFields", .string(Self.encodeFields(customFields)))) }
        if let related = ticket.relatedChannelUrls { fields.append(("relatedChannelUrls", .string(related.joined(separator: ",")))) }
        fields.append(("info", .string(info.serialized())))
        if let groupKey = ticket.groupKey, !groupKey.isEmpty { fields.append(("groupKey", .string(groupKey))) }
        if let priority = ticket.priority { fields.append(("priority", .string(priority.rawValue))) }
        return try Self.writtenTicket(try await call("createTicket", "POST", "/sapi/tickets/", .customer(session),
                                                     body: .object(fields), idempotent: false))
    }

    public enum ListStatus: Sendable { case open, closed, all }

    /// Newest first. The custom-field filter uses the SDK's encoding: `k:v,k2:v2` with each value percent-encoded.
    public func listTickets(_ session: DeskSession, status: ListStatus, limit: Int, offset: Int, channelUrl: String? = nil,
                            customFields: [(key: String, value: String)] = [], groupKey: String? = nil) async throws(DomainError) -> DeskPage<DeskTicket> {
        var query: [(String, String)] = [("sendbirdAppId", configuration.appId), ("limit", String(limit)), ("offset", String(offset))]
        // status2 (as the mobile SDKs send it) also covers INITIALIZED tickets, which the legacy filter leaves out.
        switch status {
        case .open: query += TicketStatus.allCases.filter(\.isOpen).map { ("status2", $0.rawValue) }
        case .closed: query.append(("status2", TicketStatus.closed.rawValue))
        case .all: break
        }
        // The SDKs' order: most recently updated first.
        query.append(("order", "-updated_at"))
        if let channelUrl { query.append(("channelUrl", channelUrl)) }
        if let groupKey { query.append(("group", groupKey)) }
        if !customFields.isEmpty {
            query.append(("customFields", customFields.map { "\($0.key):\(Self.percentEncode($0.value))" }.joined(separator: ",")))
        }
        let answer = try await call("listTickets", "GET", "/sapi/tickets/", .customer(session), query: query, idempotent: true)
        return try Self.page(answer, DeskTicket.init(json:))
    }

    public func ticketCount(_ session: DeskSession) async throws(DomainError) -> DeskTicketCounts {
        let answer = try await call("ticketCount", "GET", "/sapi/tickets/count/", .customer(session),
                                    query: [("sendbirdAppId", configuration.appId)], idempotent: true)
        guard let members = answer.objectValue else { throw DeskDecoding.failure("count answer is not an object") }
        var counts: [String: Int] = [:]
        for (key, value) in members { if let count = value.intValue { counts[key] = count } }
        return DeskTicketCounts(counts: counts)
    }

    public func ticket(_ session: DeskSession, id: Int) async throws(DomainError) -> DeskTicket {
        try DeskTicket(json: try await call("getTicket", "GET", "/sapi/tickets/\(id)/", .customer(session),
                                            query: [("sendbirdAppId", configuration.appId)], idempotent: true))
    }

    /// `getByChannelUrl`: the first result of a list filtered by channel.
    public func ticket(_ session: DeskSession, channelUrl: String) async throws(DomainError) -> DeskTicket {
        let page = try await listTickets(session, status: .all, limit: 10, offset: 0, channelUrl: channelUrl)
        guard let ticket = page.results.first(where: { $0.channelUrl == channelUrl }) else {
            throw DomainError(.notFound, "No ticket has this channel URL.")
        }
        return ticket
    }

    public func setPriority(_ session: DeskSession, ticketId: Int, _ priority: TicketPriority) async throws(DomainError) -> DeskTicket {
        try await patchTicket("setPriority", session, ticketId, [("priority", .string(priority.rawValue))])
    }

    public func setRelatedChannels(_ session: DeskSession, ticketId: Int, _ urls: [String]) async throws(DomainError) -> DeskTicket {
        try await patchTicket("setRelatedChannels", session, ticketId, [("relatedChannelUrls", .string(urls.joined(separator: ",")))])
    }

    private func patchTicket(_ operation: String, _ session: DeskSession, _ ticketId: Int,
                             _ fields: [(String, JSONValue)]) async throws(DomainError) -> DeskTicket {
        let body: JSONValue = .object([("sendbirdAppId", .string(configuration.appId))] + fields)
        return try DeskTicket(json: try await call(operation, "PATCH", "/sapi/tickets/\(ticketId)", .customer(session),
                                                   body: body, idempotent: true))
    }

    public func setTicketCustomFields(_ session: DeskSession, ticketId: Int,
                                      _ fields: [(key: String, value: String)]) async throws(DomainError) -> DeskTicket {
        let body: JSONValue = .object([("sendbirdAppId", .string(configuration.appId)), ("customFields", .string(Self.encodeFields(fields)))])
        return try DeskTicket(json: try await call("setTicketCustomFields", "PATCH", "/sapi/tickets/\(ticketId)/custom_fields/",
                                                   .customer(session), body: body, idempotent: true))
    }

    public func setCustomerCustomFields(_ session: DeskSession, _ fields: [(key: String, value: String)]) async throws(DomainError) -> DeskCustomer {
        let body: JSONValue = .object([("sendbirdAppId", .string(configuration.appId)), ("customFields", .string(Self.encodeFields(fields)))])
        return try DeskCustomer(json: try await call("setCustomerCustomFields", "PATCH", "/sapi/customers/custom_fields/",
                                                     .customer(session), body: body, idempotent: true))
    }

    public func close(_ session: DeskSession, ticketId: Int, comment: String) async throws(DomainError) -> DeskTicket {
        let body: JSONValue = .object([("sendbirdAppId", .string(configuration.appId)), ("closeComment", .string(comment))])
        return try Self.writtenTicket(try await call("closeTicket", "PATCH", "/sapi/tickets/\(ticketId)/close", .customer(session),
                                                     body: body, idempotent: false))
    }

    public func reopen(_ session: DeskSession, ticketId: Int) async throws(DomainError) -> DeskTicket {
        let body: JSONValue = .object([("sendbirdAppId", .string(configuration.appId))])
        return try Self.writtenTicket(try await call("reopenTicket", "PATCH", "/sapi/tickets/\(ticketId)/reopen/", .customer(session),
                                                     body: body, idempotent: false))
    }

    /// `ticket.cancel`: the ticket leaves its agent for the queue (PENDING), into another team when `groupKeyForTransfer`
    /// names one.
    public func cancel(_ session: DeskSession, ticketId: Int, groupKeyForTransfer: String?) async throws(DomainError) -> DeskTicket {
        var fields: [(String, JSONValue)] = [("sendbirdAppId", .string(configuration.appId))]
        if let groupKeyForTransfer, !groupKeyForTransfer.isEmpty { fields.append(("groupKeyForTransfer", .string(groupKeyForTransfer))) }
        return try Self.writtenTicket(try await call("cancelTicket", "PATCH", "/sapi/tickets/\(ticketId)/cancel", .customer(session),
                                                     body: .object(fields), idempotent: false))
    }

    /// Answers a closure inquiry (`confirmEndOfChat`): the message's state becomes CONFIRMED or DECLINED.
    @discardableResult
    public func confirmClosure(_ session: DeskSession, ticketId: Int, messageId: Int, confirm: Bool) async throws(DomainError) -> JSONValue {
        let data: JSONValue = .object([
            ("type", .string(RichMessageType.closureInquiry.rawValue)),
            ("body", .object([("state", .string(confirm ? "CONFIRMED" : "DECLINED")), ("ticketId", .integer(ticketId))])),
        ])
        return try await editMessage("confirmClosure", session, ticketId: ticketId, messageId: messageId, data: data)
    }

    /// Submits CSAT feedback (`submitFeedback`): score 1…5, optional comment.
    @discardableResult
    public func submitFeedback(_ session: DeskSession, ticketId: Int, messageId: Int, score: Int,
                               comment: String?) async throws(DomainError) -> JSONValue {
        let data: JSONValue = .object([
            ("type", .string(RichMessageType.customerSatisfaction.rawValue)),
            ("body", .object([("state", .string("CONFIRMED")), ("customerSatisfactionScore", .integer(score)),
                              ("customerSatisfactionComment", .string(comment ?? "")), ("ticketId", .integer(ticketId))])),
        ])
        return try await editMessage("submitFeedback", session, ticketId: ticketId, messageId: messageId, data: data)
    }

    private func editMessage(_ operation: String, _ session: DeskSession, ticketId: Int, messageId: Int,
                             data: JSONValue) async throws(DomainError) -> JSONValue {
        let body: JSONValue = .object([("sendbirdAppId", .string(configuration.appId)), ("messageId", .integer(messageId)),
                                       ("messageData", .string(data.serialized()))])
        return try await call(operation, "PATCH", "/sapi/tickets/\(ticketId)/edit_message/", .customer(session), body: body, idempotent: false)
    }

    public func urlPreview(_ session: DeskSession, url: String) async throws(DomainError) -> DeskURLPreview {
        let body: JSONValue = .object([("sendbirdAppId", .string(configuration.appId)), ("url", .string(url))])
        var answer = try await call("urlPreview", "POST", "/sapi/tickets/url_preview/", .customer(session), body: body, idempotent: true)
        if let wrapped = answer["data"], wrapped.objectValue != nil { answer = wrapped }
        return DeskURLPreview(url: answer["url"]?.stringValue ?? url, title: answer["title"]?.stringValue,
                              siteName: answer["siteName"]?.stringValue ?? answer["site_name"]?.stringValue,
                              description: answer["description"]?.stringValue, image: answer["image"]?.stringValue)
    }

    // MARK: Platform API

    /// Platform ticket list with the documented parameters only: `limit` (1–500), `offset`, `status2`, and
    /// `start_date` / `end_date` (YYYY-MM-DD) for incremental sync.
    public func platformTickets(limit: Int, offset: Int, status: [TicketStatus] = [], channelUrl: String? = nil,
                                startDate: String? = nil, endDate: String? = nil, order: String? = nil) async throws(DomainError) -> DeskPage<DeskTicket> {
        var query: [(String, String)] = [("limit", String(min(500, max(1, limit)))), ("offset", String(offset))]
        for value in status { query.append(("status2", value.rawValue)) }
        if let channelUrl { query.append(("channel_url", channelUrl)) }
        if let startDate { query.append(("start_date", startDate)) }
        if let endDate { query.append(("end_date", endDate)) }
        if let order { query.append(("order", order)) }
        let answer = try await call("platformTickets", "GET", "/platform/v1/tickets", .platform, query: query, idempotent: true)
        return try Self.page(answer, DeskTicket.init(json:))
    }

    public func platformTicket(id: Int) async throws(DomainError) -> DeskTicket {
        try DeskTicket(json: try await call("platformTicket", "GET", "/platform/v1/tickets/\(id)", .platform, idempotent: true))
    }

    /// Closes a ticket as the application (Desk's admin message says the Platform API closed it).
    public func platformClose(ticketId: Int, comment: String) async throws(DomainError) -> DeskTicket {
        try Self.writtenTicket(try await call("platformClose", "PATCH", "/platform/v1/tickets/\(ticketId)/close", .platform,
                                              body: .object([("closeComment", .string(comment))]), idempotent: false))
    }

    /// Gives a ticket back to its team's queue (PENDING, routed again) as the application.
    public func platformCancel(ticketId: Int) async throws(DomainError) -> DeskTicket {
        try Self.writtenTicket(try await call("platformCancel", "PATCH", "/platform/v1/tickets/\(ticketId)/cancel", .platform,
                                              body: .object([]), idempotent: false))
    }

    /// Gives a ticket back to the queue of another team as the application (`transfer_to_group`, status PENDING).
    /// Desk's answer lists the tickets it moved in a shape no source shows, so the ticket is read back: one Desk left
    /// in another team was not moved, a state conflict.
    public func platformTransfer(ticketId: Int, toTeam groupKey: String) async throws(DomainError) -> DeskTicket {
        _ = try await call("platformTransfer", "POST", "/platform/v1/tickets/transfer_to_group", .platform,
                           body: .object([("tickets", .array([.integer(ticketId)])), ("status", .string(TicketStatus.pending.rawValue)),
                                          ("groupKey", .string(groupKey))]), idempotent: false)
        let ticket = try await platformTicket(id: ticketId)
        guard ticket.groupKey == groupKey else {
            throw DomainError(.conflict, "Desk did not move the ticket to the team.",
                              internalDetail: "transfer_to_group answered, ticket \(ticketId) still in \(ticket.groupKey ?? "no team")")
        }
        return ticket
    }

    /// Sets a ticket's priority as the application.
    public func platformSetPriority(ticketId: Int, _ priority: TicketPriority) async throws(DomainError) -> DeskTicket {
        try Self.writtenTicket(try await call("platformSetPriority", "PATCH", "/platform/v1/tickets/\(ticketId)", .platform,
                                              body: .object([("priority", .string(priority.rawValue))]), idempotent: true))
    }

    /// The chat messages of a ticket's channel (rich messages carry their `data` as a JSON string).
    public func chatMessages(ticketId: Int, limit: Int = 100, offset: Int = 0) async throws(DomainError) -> DeskPage<DeskMessage> {
        let answer = try await call("chatMessages", "GET", "/platform/v1/tickets/\(ticketId)/chat_messages", .platform,
                                    query: [("limit", String(limit)), ("offset", String(offset))], idempotent: true)
        // Message by message: one that cannot be read is left out and counted, never fails the page.
        return try Self.page(answer, tolerant: true, DeskMessage.init(json:))
    }

    public func agents(limit: Int = 100, offset: Int = 0) async throws(DomainError) -> DeskPage<DeskAgent> {
        let answer = try await call("agents", "GET", "/platform/v1/agents", .platform,
                                    query: [("limit", String(limit)), ("offset", String(offset))], idempotent: true)
        return try Self.page(answer, DeskAgent.init(json:))
    }

    public func teams(limit: Int = 100, offset: Int = 0) async throws(DomainError) -> DeskPage<DeskTeam> {
        let answer = try await call("groups", "GET", "/platform/v1/groups", .platform,
                                    query: [("limit", String(limit)), ("offset", String(offset))], idempotent: true)
        return try Self.page(answer, DeskTeam.init(json:))
    }

    public func team(id: Int) async throws(DomainError) -> DeskTeam {
        try DeskTeam(json: try await call("group", "GET", "/platform/v1/groups/\(id)", .platform, idempotent: true))
    }

    public func customers(limit: Int = 100, offset: Int = 0, sendbirdId: String? = nil) async throws(DomainError) -> DeskPage<DeskCustomer> {
        var query = [("limit", String(limit)), ("offset", String(offset))]
        if let sendbirdId { query.append(("sendbird_id", sendbirdId)) }
        let answer = try await call("customers", "GET", "/platform/v1/customers", .platform, query: query, idempotent: true)
        return try Self.page(answer, DeskCustomer.init(json:))
    }

    // MARK: encoding helpers

    /// `customFields` travel as a JSON string of `{key: value}`.
    static func encodeFields(_ fields: [(key: String, value: String)]) -> String {
        JSONValue.object(fields.map { ($0.key, .string($0.value)) }).serialized()
    }

    static func percentEncode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    /// A Platform API ticket list answer as bytes (what the sync reads; pure, for tests of recorded answers).
    public static func ticketPage(_ bytes: [UInt8]) throws(DomainError) -> DeskPage<DeskTicket> {
        try page(try json(bytes), DeskTicket.init(json:))
    }

    /// A `chat_messages` answer as bytes.
    public static func messagePage(_ bytes: [UInt8]) throws(DomainError) -> DeskPage<DeskMessage> {
        try page(try json(bytes), tolerant: true, DeskMessage.init(json:))
    }

    static func json(_ bytes: [UInt8]) throws(DomainError) -> JSONValue {
        do { return try JSONParser.parse(bytes, repairingStrings: true) } catch { throw DeskDecoding.failure("answer is not JSON") }
    }

    static func page<Item>(_ answer: JSONValue, tolerant: Bool = false,
                           _ decode: (JSONValue) throws(DomainError) -> Item) throws(DomainError) -> DeskPage<Item> {
        guard let results = answer["results"]?.arrayValue else { throw DeskDecoding.failure("list answer without results") }
        var items: [Item] = []
        var skipped = 0
        for item in results {
            do throws(DomainError) {
                items.append(try decode(item))
            } catch {
                guard tolerant else { throw error }
                skipped += 1
            }
        }
        let next = answer["next"]
        return DeskPage(count: answer["count"]?.intValue ?? items.count, hasNext: next != nil && !(next!.isNull), results: items,
                        skipped: skipped)
    }
}

extension DeskClient {
    /// Reachability: nil when Desk answers (an authenticated Platform API call when a token is configured, otherwise
    /// any non-5xx answer from the customer API), else what is wrong. Bypasses retries and the breaker.
    public func probe() async -> String? {
        let credential: Credential = configuration.apiToken == nil ? .customer(DeskSession(token: "")) : .platform
        let path = configuration.apiToken == nil ? "/sapi/tickets/count/" : "/platform/v1/agents"
        guard let request = try? makeRequest("GET", path, credential, query: [("limit", "1")], body: nil) else {
            return "the Desk base URL is not valid"
        }
        let started = ContinuousClock.now
        let outcome = await perform(request)
        let (label, problem) = Self.probeOutcome(outcome, platform: configuration.apiToken != nil)
        // Counted with the other calls (as `probe`), so what readiness costs Desk shows; never fed to the breaker.
        observe(DeskCallRecord(operation: "probe", outcome: label, seconds: (ContinuousClock.now - started).inSeconds))
        return problem
    }

    /// The metrics' outcome label of a probe, and the problem it shows (nil: Desk answered).
    static func probeOutcome(_ outcome: Outcome, platform: Bool) -> (label: String, problem: String?) {
        switch outcome {
        case .answer(let status, _, _):
            if status >= 500 { return ("server_error", "Desk answered HTTP \(status)") }
            if platform, status == 401 || status == 403 { return ("client_error", "Desk refused the Platform API token") }
            return ("ok", nil)
        case .timedOut: return ("timeout", "Desk did not answer in time")
        case .unreachable: return ("unreachable", "Desk is unreachable")
        case .abandoned: return ("abandoned", "the check was abandoned")
        case .tooLarge: return ("too_large", "Desk's answer was too large")
        }
    }
}

extension DeskClient: DeskPlatformReader {
    public func ticketPage(limit: Int, offset: Int, status: [TicketStatus], startDate: String?, endDate: String?,
                           order: String?) async throws(DomainError) -> DeskPage<DeskTicket> {
        try await platformTickets(limit: limit, offset: offset, status: status, startDate: startDate, endDate: endDate, order: order)
    }

    public var isPaused: Bool { breaker.state == .open }
}

extension DeskClient: DeskPlatformWriter {}

extension DeskClient: DeskTicketSource {
    public func ticket(_ key: TicketKey, deskToken: String) async throws(DomainError) -> DeskTicket {
        switch key {
        case .id(let id): return try await ticket(DeskSession(token: deskToken), id: id)
        case .channel(let url): return try await ticket(DeskSession(token: deskToken), channelUrl: url)
        }
    }
}

extension DeskClient: DeskCustomerReader {
    public func ticketPage(deskToken: String, limit: Int, offset: Int) async throws(DomainError) -> DeskPage<DeskTicket> {
        try await listTickets(DeskSession(token: deskToken), status: .all, limit: limit, offset: offset)
    }
}

extension DeskClient: DeskTicketWriter {
    public func submitFeedback(ticketId: Int, messageId: Int, score: Int, comment: String?, deskToken: String) async throws(DomainError) {
        try await submitFeedback(DeskSession(token: deskToken), ticketId: ticketId, messageId: messageId, score: score, comment: comment)
    }

    public func confirmClosure(ticketId: Int, messageId: Int, confirm: Bool, deskToken: String) async throws(DomainError) {
        _ = try await confirmClosure(DeskSession(token: deskToken), ticketId: ticketId, messageId: messageId, confirm: confirm)
    }

    public func close(ticketId: Int, comment: String, deskToken: String) async throws(DomainError) -> DeskTicket {
        try await close(DeskSession(token: deskToken), ticketId: ticketId, comment: comment)
    }

    public func reopen(ticketId: Int, deskToken: String) async throws(DomainError) -> DeskTicket {
        try await reopen(DeskSession(token: deskToken), ticketId: ticketId)
    }

    public func setCustomFields(ticketId: Int, _ fields: [(key: String, value: String)], deskToken: String) async throws(DomainError) -> DeskTicket {
        try await setTicketCustomFields(DeskSession(token: deskToken), ticketId: ticketId, fields)
    }

    public func setRelatedChannels(ticketId: Int, _ urls: [String], deskToken: String) async throws(DomainError) -> DeskTicket {
        try await setRelatedChannels(DeskSession(token: deskToken), ticketId: ticketId, urls)
    }

    public func setPriority(ticketId: Int, _ priority: TicketPriority, deskToken: String) async throws(DomainError) -> DeskTicket {
        try await setPriority(DeskSession(token: deskToken), ticketId: ticketId, priority)
    }

    public func cancelAssignment(ticketId: Int, transferTo groupKey: String?, deskToken: String) async throws(DomainError) -> DeskTicket {
        try await cancel(DeskSession(token: deskToken), ticketId: ticketId, groupKeyForTransfer: groupKey)
    }
}

extension DeskClient: DeskCustomerAPI {
    public func signIn(userId: String, accessToken: String) async throws(DomainError) -> String {
        try await authenticate(userId: userId, accessToken: accessToken).token
    }

    public func createTicket(_ ticket: NewDeskTicket, deskToken: String) async throws(DomainError) -> DeskTicket {
        try await createTicket(DeskSession(token: deskToken), ticket)
    }

    public func setCustomerCustomFields(_ fields: [(key: String, value: String)], deskToken: String) async throws(DomainError) -> DeskCustomer {
        try await setCustomerCustomFields(DeskSession(token: deskToken), fields)
    }

    public func selectQuestion(ticketId: Int, faqFileId: Int, question: String, deskToken: String) async throws(DomainError) {
        let body: JSONValue = .object([("sendbirdAppId", .string(configuration.appId)), ("faqFileId", .integer(faqFileId)),
                                       ("question", .string(question))])
        // Desk's answer carries nothing the gateway uses (the SDK ignores it too); only its status counts.
        _ = try await call("selectQuestion", "POST", "/sapi/tickets/\(ticketId)/select_question", .customer(DeskSession(token: deskToken)),
                           body: body, idempotent: false)
    }
}

extension DeskClient: DeskHealthProbe {}
