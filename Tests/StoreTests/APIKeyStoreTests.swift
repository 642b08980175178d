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
            let wait = 1_500
            let small = Database(connectionString: url, poolSize: 1, connectTimeoutSeconds: TestLimits.connectTimeoutSeconds,
                                 statementTimeoutMilliseconds: 20_000, acquireTimeoutMilliseconds: wait, transactionPooling: false)
            defer { small.shutdown() }
            #expect(try await APIKeyStore(database: small).live(key)?.scopes == ["reports"])
            let busy = Task { try await small.query("SELECT pg_sleep(6)") }
            try await Task.sleep(for: .milliseconds(300))
            let started = ContinuousClock.now
            await #expect(throws: DomainError.self) { try await APIKeyStore(database: small).live(key) }
            let waited = ContinuousClock.now - started
            // One wait is 1.5 s; a second one would make it at least 3 s.
            #expect(waited >= .milliseconds(wait) && waited < .milliseconds(2 * wait), "waited \(waited)")
            _ = try? await busy.value
        }
    }
}
