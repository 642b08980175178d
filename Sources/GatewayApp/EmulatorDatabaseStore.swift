import DeskEmulator
import Store

/// The embedded emulator's state in the `desk_emulator` schema of the gateway's own database (see
/// `EmulatorRecordTable`): a change is saved, in one statement, before the emulator answers.
final class EmulatorDatabaseStore: EmulatorStateStore {
    private let table: EmulatorRecordTable

    init(database: Database) {
        table = EmulatorRecordTable(database: database)
    }

    func load() throws -> [EmulatorRecord] {
        try table.load().map { EmulatorRecord(kind: $0.kind, key: $0.key, value: Array($0.value.utf8)) }
    }

    func save(_ changes: [EmulatorRecord]) throws {
        try table.save(upserts: changes.compactMap { change in change.value.map { (change.kind, change.key, String(decoding: $0, as: UTF8.self)) } },
                       deletions: changes.filter { $0.value == nil }.map { ($0.kind, $0.key) })
    }
}
