import Foundation
import HTTPServer
import Testing
import TestSupport

/// What a client sees at the server's connection limits.
@Suite struct ConnectionLimitTests {
    @Test func pastTheGlobalLimitNewConnectionsGet503AndAreClosed() async throws {
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0, threads: 2, connectionLimit: 4)
        configuration.perAddressConnectionLimit = 0
        let server = HTTPServer(configuration: configuration, responder: TestResponder())
        try server.start()
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
        var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0, threads: 2)
        configuration.perAddressConnectionLimit = 3
        configuration.requestTimeoutSeconds = 1
        let server = HTTPServer(configuration: configuration, responder: TestResponder())
        try server.start()
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
}
