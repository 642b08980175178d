import Foundation
import JSON
import Synchronization
import System

/// One saved piece of the emulated world: a team, agent, customer, ticket, session, or the `meta` record
/// (counters, settings, the instance id). `value` nil deletes the record.
public struct EmulatorRecord: Sendable, Equatable {
    public let kind: String
    public let key: String
    public let value: [UInt8]?

    public init(kind: String, key: String, value: [UInt8]?) {
        self.kind = kind
        self.key = key
        self.value = value
    }
}

/// Where an emulator keeps its state across restarts. `save` must be atomic and durable when it returns: the
/// emulator answers a request only after the change it made is saved.
public protocol EmulatorStateStore: Sendable {
    func load() throws -> [EmulatorRecord]
    func save(_ changes: [EmulatorRecord]) throws
}

/// Counters and settings: everything of the world that is not a keyed object.
struct EmulatorMeta: Codable, Equatable {
    var instanceId: String
    var project: Int
    var ticketFieldKeys: [String]
    var customerFieldKeys: [String]
    var autoCloseOnConfirm: Bool
    var nextTeamId: Int
    var nextAgentId: Int
    var nextCustomerId: Int
    var nextTicketId: Int
    var nextMessageId: Int

    init(_ world: EmulatorWorld) {
        instanceId = world.instanceId
        project = world.project
        ticketFieldKeys = world.ticketFieldKeys.sorted()
        customerFieldKeys = world.customerFieldKeys.sorted()
        autoCloseOnConfirm = world.autoCloseOnConfirm
        nextTeamId = world.nextTeamId
        nextAgentId = world.nextAgentId
        nextCustomerId = world.nextCustomerId
        nextTicketId = world.nextTicketId
        nextMessageId = world.nextMessageId
    }

    func apply(to world: inout EmulatorWorld) {
        world.instanceId = instanceId
        world.project = project
        world.ticketFieldKeys = Set(ticketFieldKeys)
        world.customerFieldKeys = Set(customerFieldKeys)
        world.autoCloseOnConfirm = autoCloseOnConfirm
        world.nextTeamId = nextTeamId
        world.nextAgentId = nextAgentId
        world.nextCustomerId = nextCustomerId
        world.nextTicketId = nextTicketId
        world.nextMessageId = nextMessageId
    }
}

extension EmulatorWorld {
    /// The records of what was written since the last commit (the maps track their keys), and the meta record when
    /// it differs from `meta`: a save costs the size of the change, whatever the size of the world.
    func changes(sinceMeta meta: EmulatorMeta) -> [EmulatorRecord] {
        var records: [EmulatorRecord] = []
        Self.records("team", teams.changed, into: &records)
        Self.records("agent", agents.changed, into: &records)
        Self.records("customer", customers.changed, into: &records)
        Self.records("ticket", tickets.changed, into: &records)
        Self.records("session", sessions.changed, into: &records)
        let now = EmulatorMeta(self)
        if now != meta { records.append(EmulatorRecord(kind: "meta", key: "", value: Self.encode(now))) }
        return records
    }

    /// Every record of the world (its first save).
    func allRecords() -> [EmulatorRecord] {
        var records: [EmulatorRecord] = []
        Self.records("team", teams.map { ($0.key, Optional($0.value)) }, into: &records)
        Self.records("agent", agents.map { ($0.key, Optional($0.value)) }, into: &records)
        Self.records("customer", customers.map { ($0.key, Optional($0.value)) }, into: &records)
        Self.records("ticket", tickets.map { ($0.key, Optional($0.value)) }, into: &records)
        Self.records("session", sessions.map { ($0.key, Optional($0.value)) }, into: &records)
        records.append(EmulatorRecord(kind: "meta", key: "", value: Self.encode(EmulatorMeta(self))))
        return records
    }

    mutating func commit() {
        teams.commit(); agents.commit(); customers.commit(); tickets.commit(); sessions.commit()
    }

    mutating func rollback(to meta: EmulatorMeta) {
        teams.rollback(); agents.rollback(); customers.rollback(); tickets.rollback(); sessions.rollback()
        meta.apply(to: &self)
    }

    private static func records<K: CustomStringConvertible, V: Encodable>(
        _ kind: String, _ changed: [(key: K, value: V?)], into records: inout [EmulatorRecord]
    ) {
        for (key, value) in changed {
            records.append(EmulatorRecord(kind: kind, key: key.description, value: value.map { encode($0) }))
        }
    }

    static func encode<V: Encodable>(_ value: V) -> [UInt8] {
        // Only the emulator's own plain structs are encoded: this cannot fail.
        (try? [UInt8](JSONEncoder().encode(value))) ?? Array("null".utf8)
    }

    /// Rebuilds a world from saved records; a record that cannot be read is an error (never silently dropped).
    mutating func restore(_ records: [EmulatorRecord]) throws {
        let decoder = JSONDecoder()
        for record in records {
            guard let value = record.value else { continue }
            let data = Data(value)
            do {
                switch record.kind {
                case "team": let team = try decoder.decode(EmulatedTeam.self, from: data); teams[team.id] = team
                case "agent": let agent = try decoder.decode(EmulatedAgent.self, from: data); agents[agent.id] = agent
                case "customer": let customer = try decoder.decode(EmulatedCustomer.self, from: data); customers[customer.id] = customer
                case "ticket": let ticket = try decoder.decode(EmulatedTicket.self, from: data); tickets[ticket.id] = ticket
                case "session": sessions[record.key] = try decoder.decode(Int.self, from: data)
                case "meta": try decoder.decode(EmulatorMeta.self, from: data).apply(to: &self)
                default: throw EmulatorSeedError(description: "unknown record kind '\(record.kind)'")
                }
            } catch let error as EmulatorSeedError {
                throw error
            } catch {
                throw EmulatorSeedError(description: "saved \(record.kind) \(record.key) cannot be read: \(error)")
            }
        }
    }
}

/// The world behind one lock. With a store, a change is saved before the lock is released (so saves happen in
/// the order of the changes); a change that cannot be saved is undone and the request fails with 503.
final class WorldCell: Sendable {
    private let state: Mutex<EmulatorWorld>
    let store: (any EmulatorStateStore)?

    init(_ world: EmulatorWorld, store: (any EmulatorStateStore)?) {
        state = Mutex(world)
        self.store = store
    }

    func read<T: Sendable, E: Error>(_ body: (EmulatorWorld) throws(E) -> T) throws(E) -> T {
        try state.withLock { world throws(E) -> T in try body(world) }
    }

    func withLock<T: Sendable>(_ body: (inout EmulatorWorld) throws(EmulatorFailure) -> T) throws(EmulatorFailure) -> T {
        try state.withLock { world throws(EmulatorFailure) -> T in
            // No copy of the world is kept (a copy would be duplicated in full by the first write): the maps keep
            // the keys written and their old values instead.
            defer { world.commit() }
            world.revision &+= 1
            guard let store else { return try body(&world) }
            let meta = EmulatorMeta(world)
            let outcome: Result<T, EmulatorFailure>
            do throws(EmulatorFailure) { outcome = .success(try body(&world)) } catch { outcome = .failure(error) }
            let changes = world.changes(sinceMeta: meta)
            if !changes.isEmpty {
                do {
                    try store.save(changes)
                } catch {
                    world.rollback(to: meta)
                    // The cause goes with the answer: the emulator has no log, and the gateway logs what Desk said.
                    throw EmulatorFailure(status: 503, detail: "The Desk emulator could not save its state: \(String(describing: error).prefix(200))",
                                          code: "desk503200")
                }
            }
            return try outcome.get()
        }
    }
}

/// A state file for the standalone emulator (`desk-emulator --state PATH`): a snapshot followed by a journal of
/// changes, one JSON line `[kind, key, value]` each, flushed to disk before the change is acknowledged. Opening the
/// file replays the journal and writes a fresh snapshot (temporary file, fsync, rename), so it never grows forever.
public final class EmulatorFileStore: EmulatorStateStore {
    public let path: String
    private let descriptor = Mutex<Int32>(-1)

    public init(path: String) {
        self.path = path
    }

    deinit { descriptor.withLock { if $0 >= 0 { Files.close($0) } } }

    public func load() throws -> [EmulatorRecord] {
        var latest: [String: EmulatorRecord] = [:]
        var order: [String] = []
        if let data = FileManager.default.contents(atPath: path) {
            let lines = data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
            for (index, line) in lines.enumerated() {
                guard let record = Self.parse(Array(line)) else {
                    // Only a last line cut short by a crash may be unreadable; it was never acknowledged.
                    if index == lines.count - 1 { break }
                    throw EmulatorSeedError(description: "\(path): line \(index + 1) is not a state record")
                }
                let id = record.kind + "\u{0}" + record.key
                if latest[id] == nil { order.append(id) }
                latest[id] = record
            }
        }
        let records = order.compactMap { latest[$0] }.filter { $0.value != nil }
        try compact(records)
        return records
    }

    public func save(_ changes: [EmulatorRecord]) throws {
        var bytes: [UInt8] = []
        for change in changes { bytes += Self.line(change) }
        try descriptor.withLock { fd throws in
            guard fd >= 0 else { throw EmulatorSeedError(description: "\(path) is not open (load it first)") }
            try Files.writeAll(bytes, to: fd, name: path)
            try Files.sync(fd, name: path)
        }
    }

    private func compact(_ records: [EmulatorRecord]) throws {
        let directory = (path as NSString).deletingLastPathComponent
        if !directory.isEmpty { try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true) }
        let temporary = path + ".tmp"
        let fd = try Files.create(temporary)
        var bytes: [UInt8] = []
        for record in records { bytes += Self.line(record) }
        do {
            try Files.writeAll(bytes, to: fd, name: temporary)
            try Files.sync(fd, name: temporary)
        } catch {
            Files.close(fd)
            throw error
        }
        Files.close(fd)
        try Files.replace(path, with: temporary)
        let journal = try Files.openForAppend(path)
        descriptor.withLock { fd in
            if fd >= 0 { Files.close(fd) }
            fd = journal
        }
    }

    static func line(_ record: EmulatorRecord) -> [UInt8] {
        var bytes = JSONValue.string(record.kind).bytes()
        bytes.append(UInt8(ascii: ","))
        bytes += JSONValue.string(record.key).bytes()
        bytes.append(UInt8(ascii: ","))
        bytes += record.value ?? Array("null".utf8)
        return [UInt8(ascii: "[")] + bytes + [UInt8(ascii: "]"), UInt8(ascii: "\n")]
    }

    static func parse(_ line: [UInt8]) -> EmulatorRecord? {
        guard let value = try? JSONParser.parse(line), let items = value.arrayValue, items.count == 3,
              let kind = items[0].stringValue, let key = items[1].stringValue else { return nil }
        return EmulatorRecord(kind: kind, key: key, value: items[2].isNull ? nil : items[2].bytes())
    }
}
