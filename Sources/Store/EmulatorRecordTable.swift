import Postgres
import Synchronization

/// `desk_emulator.records`, where the embedded Desk emulator keeps its world, on a connection of its own and used
/// synchronously: the emulator saves while it holds its lock, one statement per change, so a change is either saved
/// whole or not at all.
public final class EmulatorRecordTable: Sendable {
    public typealias Record = (kind: String, key: String, value: String)
    private let connection: Mutex<PostgresConnection>

    public init(database: Database) {
        var own = database.pool.configuration
        own.applicationName = "desk-gateway-emulator"
        connection = Mutex(PostgresConnection.standalone(own))
    }

    public func load() throws -> [Record] {
        try translating {
            try connection.withLock { connection in
                try connection.connectIfNeeded()
                return try connection.query("SELECT kind, key, value FROM desk_emulator.records ORDER BY kind, key").map { row in
                    (kind: try row.decode(0), key: try row.decode(1), value: try row.decode(2))
                }
            }
        }
    }

    public func save(upserts: [Record], deletions: [(kind: String, key: String)]) throws {
        try translating {
            try connection.withLock { connection in
                try connection.connectIfNeeded()
                try connection.query("""
                WITH removed AS (
                    DELETE FROM desk_emulator.records r USING unnest($4::text[], $5::text[]) AS d (kind, key)
                    WHERE r.kind = d.kind AND r.key = d.key)
                INSERT INTO desk_emulator.records (kind, key, value)
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
                ON CONFLICT (kind, key) DO UPDATE SET value = EXCLUDED.value
                """, [upserts.map(\.kind), upserts.map(\.key), upserts.map(\.value), deletions.map(\.kind), deletions.map(\.key)])
            }
        }
    }

    private func translating<T>(_ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as PostgresError {
            throw Database.translate(error)
        }
    }
}
