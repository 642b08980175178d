public import Domain
import JSON

/// The gateway's ticket representation (see `Ticket` in openapi.yaml): Desk's quirks unwrapped — custom fields as
/// an object, related channels as a list, the team and agent as small objects, the rating as `satisfaction`.
public enum TicketDocument {
    public static func render(_ ticket: DeskTicket, teams: [Int: (key: String?, name: String)]) -> String {
        var team: JSONValue = .null
        if let id = ticket.groupId {
            let known = teams[id]
            team = .object([("id", .integer(id)),
                            ("key", (ticket.groupKey ?? known?.key).map(JSONValue.string) ?? .null),
                            ("name", (ticket.groupName ?? known?.name).map(JSONValue.string) ?? .null)])
        }
        let agent: JSONValue = ticket.agent.map { .object([("id", .integer($0.id)), ("name", .string($0.displayName))]) } ?? .null
        let satisfaction: JSONValue = ticket.satisfactionScore.map {
            .object([("score", .integer($0)), ("comment", ticket.satisfactionComment.map(JSONValue.string) ?? .null)])
        } ?? .null
        func time(_ value: Double?) -> JSONValue { value.map { .string(ISOTimestamp.format($0)) } ?? .null }
        let document: JSONValue = .object([
            ("id", .integer(ticket.id)),
            ("channelUrl", .string(ticket.channelUrl)),
            ("title", .string(ticket.title)),
            ("status", .string(ticket.status.rawValue)),
            ("closeStatus", .string(ticket.closeStatus)),
            ("priority", .string(ticket.priority.rawValue)),
            ("team", team),
            ("agent", agent),
            ("customFields", .object(ticket.customFields.map { ($0.key, .string($0.value)) })),
            ("relatedChannelUrls", .array(ticket.relatedChannelUrls.map(JSONValue.string))),
            ("createdAt", time(ticket.createdAt)),
            ("updatedAt", time(ticket.updatedAt ?? ticket.createdAt)),
            ("closedAt", time(ticket.closedAt)),
            ("closeComment", ticket.closeComment.map(JSONValue.string) ?? .null),
            ("satisfaction", satisfaction),
        ])
        return document.serialized()
    }

    public static func row(_ ticket: DeskTicket, customerId: Int, teams: [Int: (key: String?, name: String)]) -> TicketRow {
        let created = ticket.createdAt ?? ticket.updatedAt ?? 0
        return TicketRow(
            id: ticket.id, customerId: customerId, channelUrl: ticket.channelUrl, status: ticket.status.rawValue,
            priority: ticket.priority.rawValue, title: ticket.title, teamId: ticket.groupId, agentId: ticket.agent?.id,
            agentName: ticket.agent?.displayName, agentSendbirdId: ticket.agent?.sendbirdId,
            customFields: JSONValue.object(ticket.customFields.map { ($0.key, .string($0.value)) }).serialized(),
            createdAt: created, updatedAt: ticket.updatedAt ?? created, closedAt: ticket.closedAt,
            document: render(ticket, teams: teams), desk: ticket.raw.serialized())
    }

    /// The stored document with `pendingOperations` (operations queued for Desk) and `stale` appended.
    public static func serve(_ document: String, stale: Bool, pending: String = "[]") -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(document.utf8.count + pending.utf8.count + 40)
        serve(document, stale: stale, pending: pending, into: &bytes)
        return bytes
    }

    /// The same, written at the end of `bytes` (a list writes its tickets into one body; it grows as an array does,
    /// since reserving each ticket's exact room would copy the whole body once per ticket).
    public static func serve(_ document: String, stale: Bool, pending: String = "[]", into bytes: inout [UInt8]) {
        bytes.append(contentsOf: document.utf8)
        guard bytes.last == UInt8(ascii: "}") else { return }
        bytes.removeLast()
        bytes.append(contentsOf: #","pendingOperations":"#.utf8)
        bytes.append(contentsOf: pending.utf8)
        bytes.append(contentsOf: (stale ? #","stale":true}"# : #","stale":false}"#).utf8)
    }
}
