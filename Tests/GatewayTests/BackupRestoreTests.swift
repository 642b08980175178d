import DeskEmulator
import Foundation
import GatewayApp
import Testing
import TestSupport

/// The restore drill of docs/backup.md, with PostgreSQL's own tools: `pg_dump` of a gateway's database, `pg_restore`
/// into a new one, a second gateway started on it. Reports, reporting keys and customers' sessions must come back as
/// they were; the ticket cache is rebuilt from Desk as it is read.
@Suite struct BackupRestoreTests {
    static func tool(_ name: String) throws -> String {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted(by: >)
        return try #require(versions.map { "\(root)/\($0)/bin/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) })
    }

    static func run(_ arguments: [String]) throws -> (status: Int32, seconds: Double) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: arguments[0])
        process.arguments = Array(arguments.dropFirst())
        let started = Date()
        try process.run()
        process.waitUntilExit()
        return (process.terminationStatus, Date().timeIntervalSince(started))
    }

    @Test func aDumpRestoredIntoANewDatabaseServesTheSameReportsKeysAndSessions() async throws {
        try await withEmulator { desk in try await TestPostgres.withDatabase { source in
            try await TestPostgres.withDatabase { target in
                let (customer, key, before, tickets) = try await TestGateway.running(gatewayConfig(database: source, desk: desk)) { first in
                    let customer = try await Customer.signIn(first)
                    for index in 0..<6 {
                        let (ticket, message) = try await waitingMessage(customer, deskPort: desk.port, csat: true, index: index)
                        let answer = try await customer.send("POST", "/v1/tickets/\(ticket)/feedback",
                                                             #"{"messageId":\#(message),"score":\#(index % 5 + 1),"comment":"restore \#(index)"}"#)
                        #expect(answer.status == 200, "\(answer.text)")
                    }
                    let key = try await reporter(first)
                    let before = try await key.get(Self.query)
                    #expect(before.status == 200 && before.text.contains("\"responses\":6"), "\(before.text)")
                    return (customer, key, before, try await customer.send("GET", "/v1/tickets?status=all&limit=50"))
                }

                let dump = FileManager.default.temporaryDirectory.appendingPathComponent("restore-drill-\(UUID().uuidString).dump").path
                defer { try? FileManager.default.removeItem(atPath: dump) }
                let dumped = try Self.run([try Self.tool("pg_dump"), "--format=custom", "--file=\(dump)", "--dbname=\(source)"])
                #expect(dumped.status == 0)
                let restored = try Self.run([try Self.tool("pg_restore"), "--no-owner", "--exit-on-error", "--dbname=\(target)", dump])
                #expect(restored.status == 0)
                let bytes = (try FileManager.default.attributesOfItem(atPath: dump)[.size] as? Int) ?? 0
                print("restore drill: dump \(bytes) bytes in \(String(format: "%.2f", dumped.seconds)) s, restore \(String(format: "%.2f", restored.seconds)) s")

                try await TestGateway.running(gatewayConfig(database: target, desk: desk)) { second in
                    let after = try await Reporter(port: second.port, key: key.key).get(Self.query)
                    #expect(after.status == 200)
                    #expect((after.json?["rows"] as? [[String: Any]])?.isEmpty == false)
                    #expect(Self.figures(after.text) == Self.figures(before.text))
                    // The customer's session (its Desk token sealed with the key kept in the database) still works.
                    let again = try await Customer(port: second.port, token: customer.token).send("GET", "/v1/tickets?status=all&limit=50")
                    #expect(again.status == 200)
                    #expect(again.json?["items"] as? [[String: Any]] != nil)
                    #expect((again.json?["items"] as? [[String: Any]])?.compactMap { $0["id"] as? Int }
                            == (tickets.json?["items"] as? [[String: Any]])?.compactMap { $0["id"] as? Int })
                }
            }
        } }
    }

    static let query = "?groupBy=agent"

    /// The report without its generation time.
    static func figures(_ text: String) -> String {
        text.replacingOccurrences(of: #""generatedAt":"[^"]*""#, with: "", options: .regularExpression)
    }
}
