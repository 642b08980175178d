import Domain
import Foundation
import Store
import Testing
import TestSupport

@Suite struct APIKeyStoreTests {
    /// A key is read again without recording its use only when the database refuses the write; with no free
    /// connection the lookup fails after one wait for one, not two (which doubled every reporting call's wait under
    /// load).
    @Test func aKeyLookupWaitsForAConnectionOnce() async throws {
        try await TestPostgres.withDatabase { url in
            let setup = Database.forTests(url, poolSize: 1)
            defer { setup.shutdown() }
            _ = try await setup.migrate(directory: TestPostgres.repositoryRoot + "/sql")
            let key = try await APIKeyStore(database: setup).create(name: "dashboard", scopes: ["reports"]).key
            let small = Database(connectionString: url, poolSize: 1, connectTimeoutSeconds: TestLimits.connectTimeoutSeconds,
                                 statementTimeoutMilliseconds: 20_000, acquireTimeoutMilliseconds: 1_000, transactionPooling: false)
            defer { small.shutdown() }
            // Connected first: on a loaded machine the pool's connection may take longer than the wait allowed.
            var found: [String]?
            for _ in 0..<30 where found == nil { found = try? await APIKeyStore(database: small).live(key)?.scopes }
            #expect(found == ["reports"])
            let busy = Task { try await small.query("SELECT pg_sleep(8)") }
            await eventually(every: .milliseconds(5)) { small.statistics.inUse >= 1 }
            let before = small.statistics.timedOut
            await #expect(throws: DomainError.self) { try await APIKeyStore(database: small).live(key) }
            #expect(small.statistics.timedOut - before == 1, "waits that ran out: \(small.statistics.timedOut - before)")
            #expect(small.statistics.inUse == 1, "the lookup ended only when the connection was free again")
            _ = try? await busy.value
        }
    }
}
