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

/// Where one migration stands in a database, as `desk-gateway migrate --status` lists it.
public struct MigrationState: Sendable, Equatable {
    public enum Status: String, Sendable {
        /// Recorded with the checksum of this release's file.
        case applied
        /// In this release's files, not recorded: the next start (or `migrate`) applies it.
        case pending
        /// Recorded, but this release's file differs from what was applied: a start refuses it.
        case changed
        /// Recorded by a later release; this one does not know it and runs beside it (migrations are additive).
        case newer
        /// Recorded, below this release's last version, but no file of this release has it (not from a later release,
        /// so from a build off the line of releases); a start leaves it alone.
        case unknown
    }

    public let version: Int
    public let name: String
    public let status: Status
    /// When it was applied (UTC, `2026-11-29T19:55:34Z`), for recorded ones.
    public let appliedAt: String?

    public init(version: Int, name: String, status: Status, appliedAt: String?) {
        self.version = version
        self.name = name
        self.status = status
        self.appliedAt = appliedAt
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

    /// Every migration of this release and every one recorded in the database, by version, read in a read-only
    /// transaction that takes no lock: it writes nothing, waits for no start-up, and runs on a replica too.
    public func status(_ migrations: [Migration]) async throws -> [MigrationState] {
        try await pool.withConnection { connection in
            try connection.transaction { tx -> [MigrationState] in
                try tx.query("SET TRANSACTION READ ONLY")
                var recorded: [Int: (name: String, checksum: String, appliedAt: String)] = [:]
                if try tx.query("SELECT to_regclass('schema_migrations') IS NOT NULL")[0].decode(0, as: Bool.self) {
                    let rows = try tx.query("""
                        SELECT version, name, checksum, to_char(applied_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                        FROM schema_migrations
                        """)
                    for row in rows { recorded[try row.decode(0)] = (try row.decode(1), try row.decode(2), try row.decode(3)) }
                }
                var states: [MigrationState] = []
                for migration in migrations {
                    guard let entry = recorded.removeValue(forKey: migration.version) else {
                        states.append(MigrationState(version: migration.version, name: migration.name, status: .pending, appliedAt: nil))
                        continue
                    }
                    let checksum = try tx.query("SELECT md5($1)", [migration.sql])[0].decode(0, as: String.self)
                    states.append(MigrationState(version: migration.version, name: migration.name,
                                                 status: checksum == entry.checksum ? .applied : .changed, appliedAt: entry.appliedAt))
                }
                let last = migrations.map(\.version).max() ?? 0
                states += recorded.map {
                    MigrationState(version: $0.key, name: $0.value.name, status: $0.key > last ? .newer : .unknown, appliedAt: $0.value.appliedAt)
                }
                return states.sorted { $0.version < $1.version }
            }
        }
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
