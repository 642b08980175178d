public import Domain
package import Postgres


/// The gateway's PostgreSQL as the rest of the program sees it. Every failure leaves `Store` as a `DomainError`
/// (connection trouble → `storeUnavailable`, a statement timeout → `storeTimeout`, a unique violation → `conflict`,
/// anything else → `storeFailure` with
/// the server's words in `internalDetail`), so no module above `Store` needs to know PostgreSQL.
public final class Database: DatabaseProbe {
    package let pool: PostgresPool

    package init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Every limit is the caller's: the gateway passes its settings, tests their own.
    public convenience init(connectionString: String, poolSize: Int, connectTimeoutSeconds: Int,
                            statementTimeoutMilliseconds: Int, acquireTimeoutMilliseconds: Int,
                            transactionPooling: Bool, cappedConnections: Int = 0) {
        self.init(pool: PostgresPool(configuration: PostgresConfiguration(
            connectionString: connectionString, poolSize: poolSize, connectTimeoutSeconds: connectTimeoutSeconds,
            statementTimeoutMilliseconds: statementTimeoutMilliseconds, acquireTimeoutMilliseconds: acquireTimeoutMilliseconds,
            transactionPooling: transactionPooling, cappedConnections: cappedConnections)))
    }

    public var connectionString: String { pool.configuration.connectionString }

    public var statistics: DatabaseStatistics {
        let stats = pool.statistics
        return DatabaseStatistics(size: stats.size, inUse: stats.inUse, idle: stats.idle, waiting: stats.waiting, timedOut: stats.timedOut)
    }

    /// Fails waiting and future work and closes the connections.
    public func shutdown() { pool.shutdown() }

    /// `SELECT 1`: a connection can be had and the server answers.
    public func ping() async throws {
        try await query("SELECT 1")
    }

    public func acceptsWrites() async throws -> Bool {
        try await withConnection { try !$0.refusesWrites() }
    }

    /// Applies the migrations in `directory` that are not applied yet; returns the versions it applied and how many
    /// migrations the directory holds.
    public func migrate(directory: String) async throws -> (applied: [Int], known: Int) {
        let migrations = try Migration.load(directory: directory)
        let migrator = Migrator(pool: pool)
        let applied = try await translating { () async throws -> [Int] in try await migrator.migrate(migrations) }
        return (applied, migrations.count)
    }

    /// Where each migration in `directory`, and each recorded by a later release, stands in this database; changes nothing.
    package func migrationStatus(directory: String) async throws -> [MigrationState] {
        let migrations = try Migration.load(directory: directory)
        let migrator = Migrator(pool: pool)
        return try await translating { () async throws -> [MigrationState] in try await migrator.status(migrations) }
    }

    /// Creates database `name` when the server (reached through this handle) has none of that name.
    public func createDatabaseIfMissing(_ name: String) async throws {
        let exists = try await query("SELECT 1 FROM pg_database WHERE datname = $1", [name])
        // By scalar, not Character: a quote followed by a combining mark is still a quote to PostgreSQL.
        var quoted = "\""
        for scalar in name.unicodeScalars { quoted.unicodeScalars.append(contentsOf: scalar == "\"" ? ["\"", "\""] : [scalar]) }
        quoted += "\""
        if exists.isEmpty { try await query("CREATE DATABASE " + quoted) }
    }

    /// One statement; a deadlock or serialization failure (the statement was rolled back whole) is retried once.
    @discardableResult
    package func query(_ sql: String, _ binds: [any PostgresEncodable] = []) async throws -> PostgresRows {
        try await translating {
            do {
                return try await pool.query(sql, binds)
            } catch let error as PostgresError where error.isSerializationFailure {
                return try await pool.query(sql, binds)
            }
        }
    }

    package func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await translating { try await pool.transaction(body) }
    }

    package func withConnection<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) throws -> T) async throws -> T {
        try await translating { try await pool.withConnection(body) }
    }

    private func translating<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PostgresError {
            throw Self.translate(error)
        }
    }

    static func translate(_ error: PostgresError) -> DomainError {
        let detail = "\(error) \(error.detail)"
        if error.isUnavailable {
            return DomainError(.storeUnavailable, "The database is unavailable; retry shortly.", retryAfterSeconds: 1, internalDetail: detail)
        }
        if error.isSerializationFailure || error.sqlState == "55P03" {
            // Retried already (transactions three times, statements once): contention, not a defect.
            return DomainError(.storeTimeout, "The database was busy; retry shortly.", retryAfterSeconds: 1, internalDetail: detail)
        }
        if error.sqlState == "57014" {
            return DomainError(.storeTimeout, "The database took too long; retry shortly.", retryAfterSeconds: 2, internalDetail: detail)
        }
        if error.isUniqueViolation {
            return DomainError(.conflict, "The record already exists.", internalDetail: detail)
        }
        return DomainError(.storeFailure, "The database refused a statement.", internalDetail: detail)
    }
}
