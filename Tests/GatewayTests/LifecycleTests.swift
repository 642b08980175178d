import GatewayApp
import Logging
import Synchronization
import Testing
import TestSupport

final class Journal: Sendable {
    private let entries = Mutex<[String]>([])
    func add(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
}

/// A part that records when it starts and stops, and can refuse to start.
final class RecordingService: LifecycleService {
    let name: String
    let journal: Journal
    let fails: Bool

    init(_ name: String, journal: Journal, fails: Bool = false) {
        self.name = name
        self.journal = journal
        self.fails = fails
    }

    struct Refused: Error {}

    func start() async throws {
        journal.add("start \(name)")
        if fails { throw Refused() }
    }

    func stop() async { journal.add("stop \(name)") }
}

@Suite struct LifecycleTests {
    @Test func partsStopInTheReverseOfTheirStart() async throws {
        let journal = Journal()
        let group = ServiceGroup(logger: Logger(label: "test"))
        for name in ["database", "loop", "server"] { try await group.start(RecordingService(name, journal: journal)) }
        #expect(group.names == ["database", "loop", "server"])
        await group.stop()
        await group.stop()   // a second stop has nothing left to stop
        #expect(journal.all == ["start database", "start loop", "start server", "stop server", "stop loop", "stop database"])
    }

    @Test func aPartThatCannotStartStopsTheOnesBeforeIt() async throws {
        let journal = Journal()
        let group = ServiceGroup(logger: Logger(label: "test"))
        try await group.start(RecordingService("database", journal: journal))
        try await group.start(RecordingService("loop", journal: journal))
        await #expect(throws: RecordingService.Refused.self) { try await group.start(RecordingService("server", journal: journal, fails: true)) }
        #expect(journal.all == ["start database", "start loop", "start server", "stop loop", "stop database"])
        #expect(group.names.isEmpty)
    }

    @Test func theGatewayStartsItsPartsInDependencyOrder() async throws {
        try await withGateway { app in
            let names = app.serviceNames
            #expect(!names.contains("Desk sync"))   // SYNC_INTERVAL_S=0 in tests
            #expect(names.first == "database pool")
            #expect(names.last == "HTTP server")
            for part in ["Desk emulator", "zone backfill", "watchdog", "webhook processor"] {
                #expect(names.contains(part), "\(names)")
            }
            #expect(names.firstIndex(of: "Desk emulator")! < names.firstIndex(of: "webhook processor")!)
        }
    }
}
