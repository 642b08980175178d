import Foundation
import Reports
import Store
import Testing
import TestSupport

/// A fresh, migrated database for one test, dropped afterwards: each SQL rule is tested where it runs.
func withStore<T: Sendable>(_ body: (Database) async throws -> T) async throws -> T {
    try await withStoreAndControl { database, _ in try await body(database) }
}

/// `withStore` with a second pool of one connection on the same database, which holds the locks a test makes the
/// store wait for.
func withStoreAndControl<T: Sendable>(_ body: (_ database: Database, _ control: Database) async throws -> T) async throws -> T {
    try await TestPostgres.withDatabase { url in
        let database = Database.forTests(url, poolSize: 4)
        let control = Database.forTests(url, poolSize: 1)
        defer { database.shutdown(); control.shutdown() }
        _ = try await database.migrate(directory: TestPostgres.repositoryRoot + "/sql")
        return try await body(database, control)
    }
}

/// A customer and a session for rows that reference them (tickets, the outbox).
func customerWithSession(_ db: Database, sendbirdId: String = "customer-1") async throws -> (customerId: Int, sessionId: Int) {
    let customer: Int = try await db.query("INSERT INTO customers (sendbird_id) VALUES ($1) RETURNING id", [sendbirdId])[0].decode(0)
    let session: Int = try await db.query("""
        INSERT INTO sessions (token_hash, customer_id, desk_token_sealed, expires_at)
        VALUES (decode(md5(random()::text), 'hex'), $1, '\\x00', now() + interval '1 hour') RETURNING id
        """, [customer])[0].decode(0)
    return (customer, session)
}

/// Report parameters as the API parses them (`query` in its own words).
func reportParameters(_ query: [(String, String)], listing: Bool = false) throws -> ReportParameters {
    try ReportParameters.parse(query.map { (name: $0.0, value: $0.1) }, accept: nil, today: { _ in LocalDate("2026-11-25") },
                               isKnownZone: { _ in true }, maxDays: 400, listing: listing)
}
