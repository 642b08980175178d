import Foundation
import GatewayApp
import Logging
import Store
import Testing
import TestSupport

/// The `--json` forms of the listing commands (`api-key list`, `csat zones`, `migrate --status`; `outbox list` in
/// `DurabilityTests`), read back as a script would: every field present, null where there is no value, never a key.
@Suite struct CommandDocumentTests {
    static func parsed(_ document: [String: Any]) throws -> [String: Any] {
        let text = try CommandDocument.text(document)
        #expect(!text.contains("\n"))
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    @Test func theListingsReadBackWithEveryField() async throws {
        try await withGateway { app in
            let logger = Logger(label: "test")
            let keys = APIKeyStore(database: app.database)
            let used = try await keys.create(name: "used \"lead\"", scopes: ["reports"])
            let revoked = try await keys.create(name: "gone", scopes: ["reports"])
            #expect(try await Reporter(port: app.port, key: used.key).get("").status == 200)
            #expect(try await keys.revoke(id: revoked.id))

            let listed = try Self.parsed(CommandDocument.apiKeys(try await listApiKeys(app.config, logger: logger)))
            let rows = try #require(listed["keys"] as? [[String: Any]])
            #expect(rows.map { $0["id"] as? Int } == [used.id, revoked.id])
            let fields: Set = ["id", "name", "scopes", "teamIds", "state", "createdAt", "lastUsedAt", "revokedAt"]
            #expect(rows.allSatisfy { Set($0.keys) == fields }, "\(rows)")
            #expect(rows[0]["name"] as? String == "used \"lead\"" && rows[0]["scopes"] as? [String] == ["reports"])
            #expect(rows[0]["state"] as? String == "active" && rows[0]["revokedAt"] is NSNull && rows[0]["teamIds"] is NSNull)
            #expect((rows[0]["lastUsedAt"] as? String)?.hasSuffix("Z") == true && (rows[0]["createdAt"] as? String)?.hasSuffix("Z") == true)
            #expect(rows[1]["state"] as? String == "revoked" && rows[1]["lastUsedAt"] is NSNull && rows[1]["revokedAt"] is String)
            let text = try CommandDocument.text(CommandDocument.apiKeys(try await listApiKeys(app.config, logger: logger)))
            #expect(!text.contains(used.key) && !text.contains(revoked.key))

            // Another environment's list: UTC built here, a zone listed there and never built.
            var operatorConfig = app.config
            operatorConfig.reportTimeZones = ["UTC", "Europe/Paris"]
            let zones = try #require(try Self.parsed(CommandDocument.zones(try await reportZones(operatorConfig, logger: logger),
                                                                          listed: operatorConfig.reportTimeZones))["zones"] as? [[String: Any]])
            #expect(zones.map { $0["zone"] as? String } == ["UTC", "Europe/Paris"])
            #expect(zones.map { $0["state"] as? String } == ["complete", "not_built"])
            #expect(zones.allSatisfy { Set($0.keys) == ["zone", "state", "rows", "countedUntil", "listed"] && $0["listed"] as? Bool == true })
            #expect(zones[1]["countedUntil"] is NSNull && zones[1]["rows"] as? Int == 0)

            let migrations = try Self.parsed(CommandDocument.migrations(try await migrationStatus(app.config, logger: logger)))
            let each = try #require(migrations["migrations"] as? [[String: Any]])
            #expect(!each.isEmpty && each.allSatisfy { $0["status"] as? String == "applied" && $0["appliedAt"] is String })
            #expect(each.map { $0["version"] as? Int ?? 0 } == Array(1...each.count))
            #expect(migrations["counts"] as? [String: Int] == ["applied": each.count, "pending": 0, "changed": 0, "newer": 0, "unknown": 0])
        }
    }
}
