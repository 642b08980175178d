import CurlHTTP
import DeskClient
import DeskEmulator
import Domain
import Foundation
import Synchronization
import Testing
import TestSupport

/// The HTTP client under Desk calls and the emulator's webhooks, against the emulator over loopback.
@Suite struct CurlClientTests {
    static func withEmulator(_ body: (DeskEmulator, DeskEmulatorConfiguration) async throws -> Void) async throws {
        let emulator = try startedEmulator()
        let configuration = emulator.configuration
        do {
            try await body(emulator, configuration)
        } catch {
            await emulator.stop()
            throw error
        }
        await emulator.stop()
    }

    static func agents(_ emulator: DeskEmulator, _ configuration: DeskEmulatorConfiguration, timeout: Duration = .seconds(10)) -> CurlRequest {
        CurlRequest(method: "GET", url: emulator.baseURL + "/platform/v1/agents", headers: [("SENDBIRDDESKAPITOKEN", configuration.apiToken)],
                    timeout: timeout)
    }

    /// More callers than connections: every one is answered, in turn, with its status, headers and body.
    @Test func moreCallersThanConnectionsAreAllAnswered() async throws {
        try await Self.withEmulator { emulator, configuration in
            let client = CurlClient(maxConnections: 3)
            let request = Self.agents(emulator, configuration)
            let statuses = await withTaskGroup(of: (Int, Bool, Bool).self) { group in
                for _ in 0..<60 {
                    group.addTask {
                        guard case .answer(let status, let headers, let body) = await client.perform(request) else { return (0, false, false) }
                        let json = headers.contains { $0.name.lowercased() == "content-type" && $0.value.contains("json") }
                        return (status, json, body.first == UInt8(ascii: "{") || body.first == UInt8(ascii: "["))
                    }
                }
                var all: [(Int, Bool, Bool)] = []
                for await result in group { all.append(result) }
                return all
            }
            #expect(statuses.count == 60)
            #expect(statuses.allSatisfy { $0 == (200, true, true) }, "\(statuses.filter { $0 != (200, true, true) })")
        }
    }

    /// A body goes out with its method, and the answer's status comes back as it is (a 4xx is an answer).
    @Test func bodiesGoOutWithTheirMethod() async throws {
        try await Self.withEmulator { emulator, configuration in
            let client = CurlClient(maxConnections: 1)
            let body = Array(#"{"sendbirdAppId":"\#(configuration.appId)","sendbirdId":"demo-customer"}"#.utf8)
            let auth = CurlRequest(method: "POST", url: emulator.baseURL + "/sapi/customers/auth/",
                                   headers: [("Content-Type", "application/json"), ("sendbirdAccessToken", "demo-token")], body: body,
                                   timeout: .seconds(10))
            guard case .answer(let status, _, let answer) = await client.perform(auth) else { Issue.record("no answer"); return }
            #expect(status == 200, "\(String(decoding: answer, as: UTF8.self))")
            #expect(String(decoding: answer, as: UTF8.self).contains("token"))
            var wrong = auth
            wrong.headers = [("Content-Type", "application/json"), ("sendbirdAccessToken", "not-the-token")]
            guard case .answer(let refused, _, _) = await client.perform(wrong) else { Issue.record("no answer"); return }
            #expect(refused == 401 || refused == 403, "\(refused)")
        }
    }

    /// A stalled server: the transfer ends at its deadline; a caller that stops waiting is answered at once, and the
    /// connection's thread is free again soon after (the next request on a one-connection client gets through).
    @Test func deadlinesAndCancellationFreeTheConnection() async throws {
        try await Self.withEmulator { emulator, configuration in
            let client = CurlClient(maxConnections: 1)
            emulator.setFaults(EmulatorFaults(latencyMs: 10_000))
            var started = ContinuousClock.now
            let timed = await client.perform(Self.agents(emulator, configuration, timeout: .milliseconds(300)))
            guard case .timedOut = timed else { Issue.record("expected a timeout, got \(timed)"); return }
            #expect(ContinuousClock.now - started < .seconds(5))

            let waiting = Task { await client.perform(Self.agents(emulator, configuration, timeout: .seconds(30))) }
            try await Task.sleep(for: .milliseconds(200))
            started = ContinuousClock.now
            waiting.cancel()
            guard case .abandoned = await waiting.value else { Issue.record("expected abandoned"); return }
            // At once, against the 10 s the server would take: the margin is for a loaded machine, not the client.
            #expect(ContinuousClock.now - started < .seconds(3))

            emulator.setFaults(EmulatorFaults())
            started = ContinuousClock.now
            guard case .answer(200, _, _) = await client.perform(Self.agents(emulator, configuration)) else {
                Issue.record("the connection was not freed"); return
            }
            // The aborted transfer notices within about a second (curl's progress callback), well inside the wait.
            #expect(ContinuousClock.now - started < .seconds(5))
        }
    }

    /// Nothing listening: the request never left (a write cannot have been made), with a short fixed reason, never
    /// curl's own text.
    @Test func aRefusedConnectionIsAFailure() async {
        let outcome = await CurlClient(maxConnections: 1).perform(CurlRequest(method: "GET", url: "http://127.0.0.1:1/", timeout: .seconds(5)))
        guard case .notSent(let reason) = outcome else { Issue.record("expected a failure, got \(outcome)"); return }
        #expect(reason == "the connection was refused")
    }
}

/// A "Desk" whose answers have no end (a proxy's error page, a wrong base URL, a middlebox): the transfer stops at
/// the cap, with or without an announced length, and the Desk call is a 502-class failure counted as `too_large`.
@Suite struct AnswerCapTests {
    @Test func answersPastTheCapAreStoppedThere() async throws {
        let server = try HostilePageServer()
        defer { server.stop() }
        let client = CurlClient(maxConnections: 2, name: "cap-test")
        for path in ["/huge", "/endless"] {
            let before = server.bytesSent
            let outcome = await client.perform(CurlRequest(method: "GET", url: "http://127.0.0.1:\(server.port)\(path)",
                                                           timeout: .seconds(10), maxResponseBytes: 1 << 20))
            guard case .tooLarge = outcome else { Issue.record("\(path): \(outcome)"); continue }
            // Stopped near the cap, not after the gigabytes the server would send.
            #expect(server.bytesSent - before < 64 << 20, "\(path): \(server.bytesSent - before) bytes sent")
        }
        // Under the cap, the answer is whole.
        let fine = await client.perform(CurlRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/scripted", timeout: .seconds(10),
                                                    maxResponseBytes: 1 << 20))
        guard case .answer(let status, _, let body) = fine else { Issue.record("\(fine)"); return }
        #expect(status == 200 && !body.isEmpty)
    }

    @Test func aDeskCallWhoseAnswerIsTooLargeFailsAndIsCounted() async throws {
        let server = try HostilePageServer()
        defer { server.stop() }
        let outcomes = Mutex<[String]>([])
        var configuration = deskClientConfiguration(baseURL: "http://127.0.0.1:\(server.port)/huge?", appId: "app", apiToken: "token")
        configuration.maxAnswerBytes = 1 << 20
        let desk = DeskClient(configuration: configuration) { record in outcomes.withLock { $0.append(record.outcome) } }
        do {
            _ = try await desk.platformTicket(id: 1)
            Issue.record("a 2 GB answer was taken")
        } catch {
            #expect(error.code == .upstreamProtocol, "\(error)")
        }
        // Not retried (the same answer would come back) and not an outage for the breaker.
        #expect(outcomes.withLock { $0 } == ["too_large"])
        #expect(!desk.isPaused)
    }
}
