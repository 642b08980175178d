import DeskEmulator
import Postgres
import Synchronization

/// The embedded emulator's state in the `desk_emulator` schema of the gateway's own database. Saves run on a
/// connection of their own, synchronously, while the emulator holds its lock: one statement per change, so a change
/// is either saved whole or not at all (and then not acknowledged).
final class EmulatorDatabaseStore: EmulatorStateStore {
    private let connection: Mutex<PostgresConnection>

    init(configuration: PostgresConfiguration) {
        var own = configuration
        own.applicationName = "desk-gateway-emulator"
        connection = Mutex(PostgresConnection.standalone(own))
    }

    func load() throws -> [EmulatorRecord] {
        try connection.withLock { connection in
            try connection.connectIfNeeded()
            return try connection.query("SELECT kind, key, value FROM desk_emulator.records ORDER BY kind, key").map { row in
                EmulatorRecord(kind: try row.decode(0), key: try row.decode(1), value: Array((try row.decode(2) as String).utf8))
            }
        }
    }

    func save(_ changes: [EmulatorRecord]) throws {
        let upserts = changes.filter { $0.value != nil }
        let deletions = changes.filter { $0.value == nil }
        try connection.withLock { connection in
            try connection.connectIfNeeded()
            try connection.query("""
                WITH removed AS (
                    DELETE FROM desk_emulator.records r USING unnest($4::text[], $5::text[]) AS d (kind, key)
                    WHERE r.kind = d.kind AND r.key = d.key)
                INSERT INTO desk_emulator.records (kind, key, value)
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
                ON CONFLICT (kind, key) DO UPDATE SET value = EXCLUDED.value
                """, [upserts.map(\.kind), upserts.map(\.key), upserts.map { String(decoding: $0.value!, as: UTF8.self) },
                      deletions.map(\.kind), deletions.map(\.key)])
        }
    }
}
