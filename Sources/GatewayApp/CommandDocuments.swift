public import Domain
import Foundation
import JSON
package import Postgres
public import Store

/// The `--json` forms of the listing commands, for scripts: one document each, keys sorted, times ISO 8601 in UTC,
/// an absent value null (never left out), names as the API spells them.
public enum CommandDocument {
    /// `migrate --status --json`: each migration in version order and the count of each status.
    package static func migrations(_ states: [MigrationState]) -> [String: Any] {
        let statuses: [MigrationState.Status] = [.applied, .pending, .changed, .newer, .unknown]
        return ["migrations": states.map { state -> [String: Any] in
                    ["version": state.version, "name": state.name, "status": state.status.rawValue, "appliedAt": state.appliedAt ?? NSNull()]
                },
                "counts": Dictionary(uniqueKeysWithValues: statuses.map { status in (status.rawValue, states.filter { $0.status == status }.count) })]
    }

    /// `csat zones --json`: every zone with rollups, then the zones `listed` names that none has been built for.
    public static func zones(_ zones: [(zone: String, complete: Bool, countedUntil: Double?, rows: Int)], listed: [String]) -> [String: Any] {
        var seen = Set(zones.map(\.zone))
        let built = zones.map { zone -> [String: Any] in
            ["zone": zone.zone, "state": zone.complete ? "complete" : "building", "rows": zone.rows,
             "countedUntil": zone.countedUntil.map(ISOTimestamp.format) ?? NSNull(), "listed": listed.contains(zone.zone)]
        }
        let unbuilt = listed.filter { seen.insert($0).inserted }.map { zone -> [String: Any] in
            ["zone": zone, "state": "not_built", "rows": 0, "countedUntil": NSNull(), "listed": true]
        }
        return ["zones": built + unbuilt]
    }

    /// `api-key list --json`: never the key itself (only its hash is stored).
    public static func apiKeys(_ keys: [APIKeyRecord]) -> [String: Any] {
        ["keys": keys.map { key -> [String: Any] in
            ["id": key.id, "name": key.name, "scopes": key.scopes, "teamIds": key.teamIds ?? NSNull(),
             "state": key.revokedAt == nil ? "active" : "revoked", "createdAt": ISOTimestamp.format(key.createdAt),
             "lastUsedAt": key.lastUsedAt.map(ISOTimestamp.format) ?? NSNull(), "revokedAt": key.revokedAt.map(ISOTimestamp.format) ?? NSNull()]
        }]
    }

    /// `outbox list --json`: the reason is the one `GET /v1/operations/{id}` gives the customer.
    public static func outbox(_ pending: [(operation: OutboxOperation, dueInSeconds: Double)], now: Double) -> [String: Any] {
        ["operations": pending.map { operation, due -> [String: Any] in
            ["id": operation.id, "kind": operation.kind.rawValue, "ticketId": operation.ticketId,
             "createdAt": ISOTimestamp.format(operation.createdAt), "ageSeconds": Int(now - operation.createdAt),
             "attempts": operation.attempts, "nextAttemptInSeconds": Int(due.rounded(.up)), "reason": operation.lastError ?? NSNull()]
        }]
    }

    /// `outbox list --failed --json`.
    public static func failedOutbox(_ failed: [(operation: OutboxOperation, revivable: Bool)]) -> [String: Any] {
        ["operations": failed.map { operation, revivable -> [String: Any] in
            ["id": operation.id, "kind": operation.kind.rawValue, "ticketId": operation.ticketId,
             "createdAt": ISOTimestamp.format(operation.createdAt), "failedAt": operation.finishedAt.map(ISOTimestamp.format) ?? NSNull(),
             "attempts": operation.attempts, "revivable": revivable, "reason": operation.lastError ?? NSNull()]
        }]
    }

    /// The document as one line of JSON.
    public static func text(_ document: [String: Any]) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
    }
}
