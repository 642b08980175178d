import DeskEmulator
import Foundation
import JSON
import Testing
import TestSupport

/// `desk-emulator --state PATH`: a restarted emulator is the same Desk, with the same tickets, sessions and counters.
@Suite struct EmulatorStateTests {
    static func temporaryPath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("emulator-state-\(UUID().uuidString)/state.jsonl").path
    }

    /// `body` with an emulator keeping its world in `path` (and whether it found one there), stopped afterwards, also
    /// when `body` throws.
    static func running<T>(_ path: String, _ body: (DeskEmulator, Bool) async throws -> T) async throws -> T {
        var restored = false
        let emulator = try startedEmulator(seeded: false) { configuration in
            let (made, fromFile) = try DeskEmulator.persistent(configuration: configuration, store: EmulatorFileStore(path: path))
            if !fromFile { try made.seed(json: Array(DeskEmulator.demoSeed.utf8)) }
            restored = fromFile
            return made
        }
        do {
            let result = try await body(emulator, restored)
            await emulator.stop()
            return result
        } catch {
            await emulator.stop()
            throw error
        }
    }

    static func deskToken(_ port: Int) async throws -> String {
        let auth = try await httpRequest(port: port, "POST", "/sapi/customers/auth/", headers: [("sendbirdAccessToken", "demo-token")],
                                         json: #"{"sendbirdAppId":"emulated-app","sendbirdId":"demo-customer"}"#)
        return try #require(auth.json?["token"] as? String)
    }

    @Test func aRestartedEmulatorKeepsItsWorld() async throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let (id, token, instance) = try await Self.running(path) { first, restored in
            #expect(!restored)
            let token = try await Self.deskToken(first.port)
            let created = try await httpRequest(port: first.port, "POST", "/sapi/tickets/", headers: [("sendbirdDeskToken", token)],
                                                json: #"{"sendbirdAppId":"emulated-app","channelName":"Kept","groupKey":"support"}"#)
            let id = try #require(created.json?["id"] as? Int)
            #expect(try await httpRequest(port: first.port, "POST", "/emulator/tickets/\(id)/customer-message", json: "{}").status == 200)
            #expect(try await httpRequest(port: first.port, "POST", "/emulator/customers",
                                          json: #"{"sendbirdId":"later","accessToken":"t"}"#).status == 201)
            return (id, token, first.instanceId)
        }

        try await Self.running(path) { second, again in
            #expect(again)
            #expect(second.instanceId == instance)
            // The Desk session from before the restart still works, the ticket kept its state, and ids go on.
            let ticket = try await httpRequest(port: second.port, "GET", "/sapi/tickets/\(id)", headers: [("sendbirdDeskToken", token)])
            #expect(ticket.status == 200)
            #expect(ticket.json?["status2"] as? String == "PENDING")
            #expect(ticket.json?["channelName"] as? String == "Kept")
            let next = try await httpRequest(port: second.port, "POST", "/sapi/tickets/", headers: [("sendbirdDeskToken", token)],
                                             json: #"{"sendbirdAppId":"emulated-app","channelName":"Next"}"#)
            #expect(next.json?["id"] as? Int == id + 1)
            let later = try await httpRequest(port: second.port, "POST", "/sapi/customers/auth/", headers: [("sendbirdAccessToken", "t")],
                                              json: #"{"sendbirdAppId":"emulated-app","sendbirdId":"later"}"#)
            #expect(later.status == 200)
            // The demo seed was not applied twice.
            let teams = try await httpRequest(port: second.port, "GET", "/platform/v1/groups", headers: [("SENDBIRDDESKAPITOKEN", "emulator-api-token")])
            #expect(teams.json?["count"] as? Int == 2)
        }
    }

    @Test func aJournalLineCutShortByACrashIsIgnored() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        let store = EmulatorFileStore(path: path)
        #expect(try store.load().isEmpty)
        try store.save([EmulatorRecord(kind: "session", key: "a", value: Array("2001".utf8)),
                        EmulatorRecord(kind: "session", key: "b", value: Array("2002".utf8))])
        try store.save([EmulatorRecord(kind: "session", key: "a", value: nil)])
        let handle = try #require(FileHandle(forWritingAtPath: path))
        handle.seekToEndOfFile()
        handle.write(Data(#"["session","c",20"#.utf8))
        handle.closeFile()
        let records = try EmulatorFileStore(path: path).load()
        #expect(records == [EmulatorRecord(kind: "session", key: "b", value: Array("2002".utf8))])
        // Loading compacted the file: the deleted and the torn records are gone from it.
        let text = try String(contentsOfFile: path, encoding: .utf8)
        #expect(text == "[\"session\",\"b\",2002]\n")
    }

    @Test func aDamagedLineBeforeTheLastIsAnError() throws {
        let path = Self.temporaryPath()
        defer { try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent) }
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try "garbage\n[\"session\",\"b\",2002]\n".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: (any Error).self) { try EmulatorFileStore(path: path).load() }
    }
}
