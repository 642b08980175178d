import Foundation
import HTTPServer
import Testing
import TestSupport

/// What a client sees at the server's connection limits.
@Suite struct ConnectionLimitTests {
    @Test func pastTheGlobalLimitNewConnectionsGet503AndAreClosed() async throws {
        let server = try TestPorts.started { port in
            var configuration = HTTPServerConfiguration.forTests(port: port, connectionLimit: 4)
            configuration.perAddressConnectionLimit = 0
            return HTTPServer(configuration: configuration, responder: TestResponder())
        }
        // Four idle connections fill the limit.
        let idle = try (0..<4).map { _ in try RawHTTPConnection(port: server.port) }
        for _ in 0..<50 where server.openConnections < 4 { try await Task.sleep(for: .milliseconds(20)) }
        #expect(server.openConnections == 4)
        let response = try await onBlockingThread { () -> TestResponse? in
            let extra = try RawHTTPConnection(port: server.port)
            try extra.send(Array("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            return try extra.readResponse()
        }
        #expect(response?.status == 503)
        #expect(response?.header("Retry-After") == "1")
        #expect(response?.header("Connection")?.lowercased() == "close")
        withExtendedLifetime(idle) {}
        await server.stop(drainDeadline: .seconds(1))
    }

    @Test func oneAddressIsHeldToItsLimitWhileAnotherIsServed() async throws {
        let server = try TestPorts.started { port in
            var configuration = HTTPServerConfiguration.forTests(port: port)
            configuration.perAddressConnectionLimit = 3
            configuration.requestTimeoutSeconds = 1
            return HTTPServer(configuration: configuration, responder: TestResponder())
        }
        let held = try (0..<10).map { _ in try RawHTTPConnection(port: server.port) }
        try await Task.sleep(for: .milliseconds(200))
        #expect(server.openConnections <= 3)
        let other = try await onBlockingThread { () -> TestResponse? in
            let connection = try RawHTTPConnection(port: server.port, source: "127.0.0.2")
            try connection.send(Array("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            return try connection.readResponse()
        }
        #expect(other?.status == 200)
        // Connections that never send a request are dropped after the request timeout, not the idle timeout.
        try await Task.sleep(for: .milliseconds(2500))
        #expect(server.openConnections == 0)
        withExtendedLifetime(held) {}
        await server.stop(drainDeadline: .seconds(1))
    }

    /// A header line every 200 ms for 8 s: "closed" once the server has ended the connection.
    static func drip(_ connection: RawHTTPConnection) -> String {
        for index in 0..<40 {
            Thread.sleep(forTimeInterval: 0.2)
            do { try connection.send(Array("X-Drip-\(index): 1\r\n".utf8)) } catch { return "closed" }
        }
        return "still open"
    }

    @Test func headersTrickledInPastTheRequestDeadlineEndTheConnection() async throws {
        let server = try TestPorts.started { port in
            var configuration = HTTPServerConfiguration.forTests(port: port)
            configuration.requestTimeoutSeconds = 1
            return HTTPServer(configuration: configuration, responder: TestResponder())
        }
        let started = ContinuousClock.now
        // A header line every 200 ms: never silent long enough for an inactivity timeout, yet cut at the deadline.
        let outcome = try await onBlockingThread { () -> String in
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send(Array("GET /hello HTTP/1.1\r\nHost: x\r\n".utf8))
            return Self.drip(connection)
        }
        #expect(outcome == "closed")
        // Cut near the 1 s deadline, well before the drip's 8 s end; the margin is for a loaded machine (4 s was
        // once exceeded while release builds ran beside the suite).
        #expect(ContinuousClock.now - started < .seconds(6))
        // A prompt client is served as usual, on the same server, and keeps its connection for a second request.
        let answers = try await onBlockingThread { () -> [Int] in
            let connection = try RawHTTPConnection(port: server.port)
            var statuses: [Int] = []
            for _ in 0..<2 {
                try connection.send(Array("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
                statuses.append(try connection.readResponse()?.status ?? 0)
                Thread.sleep(forTimeInterval: 1.5)
            }
            return statuses
        }
        #expect(answers == [200, 200])
        // A later request on a kept-alive connection has its own deadline, from its request line.
        let later = try await onBlockingThread { () -> String in
            let connection = try RawHTTPConnection(port: server.port)
            try connection.send(Array("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            guard try connection.readResponse()?.status == 200 else { return "first request failed" }
            try connection.send(Array("GET /hello HTTP/1.1\r\nHost: x\r\n".utf8))
            return Self.drip(connection)
        }
        #expect(later == "closed")
        await server.stop(drainDeadline: .seconds(1))
    }
}
