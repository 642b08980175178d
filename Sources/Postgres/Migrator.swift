import Foundation

/// One forward-only schema change, read from `sql/NNNN_verb_object.sql`.
public struct Migration: Sendable {
    public let version: Int
    public let name: String
    public let sql: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// Reads every `NNNN_name.sql` in `directory`, ordered by version; duplicate versions are an error.
    public static func load(directory: String) throws -> [Migration] {
        let files: [String]
        do {
            files = try FileManager.default.contentsOfDirectory(atPath: directory)
        } catch {
            throw PostgresError(code: .migrationFailed, detail: "cannot read migrations folder \(directory)")
        }
        var migrations: [Migration] = []
        for file in files where file.hasSuffix(".sql") {
            let stem = file.dropLast(4)
            guard let underscore = stem.firstIndex(of: "_"), let version = Int(stem[..<underscore]) else {
                throw PostgresError(code: .migrationFailed, detail: "migration file \(file) is not named NNNN_name.sql")
            }
            let sql = try String(contentsOfFile: directory + "/" + file, encoding: .utf8)
            migrations.append(Migration(version: version, name: String(stem[stem.index(after: underscore)...]), sql: sql))
        }
        migrations.sort { $0.version < $1.version }
        for (a, b) in zip(migrations, migrations.dropFirst()) where a.version == b.version {
            throw PostgresError(code: .migrationFailed, detail: "two migrations share version \(a.version)")
        }
        return migrations
    }
}

/// Applies pending migrations in one transaction under a transaction-level advisory lock: instances starting together
/// apply each once (the first to get the lock applies them all; the others then find nothing pending), also through a
/// transaction-pooling proxy, where a session lock could be taken on one server connection and released on another.
/// A failing migration rolls back the whole upgrade, so the schema is either the old one or the new one.
public struct Migrator: Sendable {
    /// Arbitrary constant shared by every instance of the gateway.
    public static let lockKey: Int64 = 0x4445_534B_4757 // "DESKGW"

    public let pool: PostgresPool

    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Returns the versions applied by this call (empty when the schema was already current).
    @discardableResult
    public func migrate(_ migrations: [Migration]) async throws -> [Int] {
        try await pool.withConnection { connection in
            try connection.transaction { tx -> [Int] in
                // A migration that converts data may run longer than any request is allowed to, and an instance that
                // starts meanwhile waits for the lock as long.
                try tx.withoutStatementTimeout()
                try tx.query("SELECT pg_advisory_xact_lock($1)", [Self.lockKey])
                try tx.execute(script: """
                    CREATE TABLE IF NOT EXISTS schema_migrations (
                        version integer PRIMARY KEY,
                        name text NOT NULL,
                        checksum text NOT NULL,
                        applied_at timestamptz NOT NULL DEFAULT now())
                    """)
                var known: [Int: String] = [:]
                for row in try tx.query("SELECT version, checksum FROM schema_migrations") {
                    known[try row.decode(0)] = try row.decode(1)
                }
                var applied: [Int] = []
                for migration in migrations {
                    let checksum = try tx.query("SELECT md5($1)", [migration.sql])[0].decode(0, as: String.self)
                    if let existing = known[migration.version] {
                        guard existing == checksum else {
                            throw PostgresError(code: .migrationFailed,
                                                detail: "migration \(migration.version)_\(migration.name) changed after it was applied")
                        }
                        continue
                    }
                    do {
                        try tx.execute(script: migration.sql)
                        try tx.query("INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
                                     [migration.version, migration.name, checksum])
                    } catch let error as PostgresError {
                        throw PostgresError(code: .migrationFailed, sqlState: error.sqlState,
                                            detail: "migration \(migration.version)_\(migration.name) failed: \(error.detail)")
                    }
                    applied.append(migration.version)
                }
                return applied
            }
        }
    }
}
