import Foundation
import HTTPServer
import Synchronization
import Testing
import TestSupport

/// A gate the test opens by hand, so ordering is shown by events rather than by sleeping.
final class Gate: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    var waiting: Int { state.withLock { $0.waiters.count } }
}

/// Bytes for large bodies, made once (test builds are unoptimized: a body made byte by byte per request would keep
/// the shared executor busy for other suites' servers).
let largeBodyPattern: [UInt8] = (0..<600_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }

/// A different slice of the pattern for each size.
func largeBody(size: Int) -> [UInt8] { Array(largeBodyPattern[size % 251 ..< size % 251 + size]) }

/// A small application for exercising the server alone.
struct TestResponder: HTTPResponder {
    let router: Router<@Sendable (HTTPRequest) async -> HTTPResponse>
    let gate: Gate

    init(gate: Gate = Gate()) {
        self.gate = gate
        var router = Router<@Sendable (HTTPRequest) async -> HTTPResponse>()
        router.add("GET", "/hello", { _ in HTTPResponse(status: 200, contentType: "text/plain", body: "hello") })
        router.add("GET", "/items/{id}", { request in
            HTTPResponse(status: 200, contentType: "text/plain", body: "item \(request.pathParameters["id"] ?? "?")")
        })
        router.add("GET", "/items/special", { _ in HTTPResponse(status: 200, contentType: "text/plain", body: "special") })
        router.add("GET", "/peer", { request in
            HTTPResponse(status: 200, contentType: "text/plain", body: request.remoteAddress ?? "unknown")
        })
        router.add("POST", "/echo", { request in
            HTTPResponse(status: 200, headers: [("Content-Type", request.header("content-type") ?? "")], body: request.body)
        })
        router.add("GET", "/headers", { request in
            let lines = request.headers.map { "\($0.name)=\($0.value)" }
            let asked = request.headers.values("x-twice").joined(separator: "|")
            return HTTPResponse(status: 200, contentType: "text/plain",
                                body: (lines + ["first=" + (request.header("X-Twice") ?? "none"), "all=" + asked,
                                                "token=" + (request.bearerToken ?? "none")]).joined(separator: "\n"))
        })
        router.add("GET", "/query", { request in
            HTTPResponse(status: 200, contentType: "text/plain", body: request.queryValues("tag").joined(separator: "|"))
        })
        router.add("GET", "/slow", { [gate] _ in
            await gate.wait()
            return HTTPResponse(status: 200, contentType: "text/plain", body: "slow done")
        })
        // Streamed bodies: N chunks of 10,000 bytes; two then a failure; one, then a wait on the gate.
        router.add("GET", "/stream", { request in
            let chunks = Int(request.queryValues("chunks").first ?? "") ?? 3
            let sent = Atomic<Int>(0)
            return HTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], stream: ResponseStream {
                let index = sent.add(1, ordering: .relaxed).oldValue
                guard index < chunks else { return nil }
                await Task.yield()
                return [UInt8](repeating: UInt8(65 + index % 26), count: 10_000)
            })
        })
        // A body large enough to be lent to libmicrohttpd rather than copied (a different pattern per size).
        router.add("GET", "/large", { request in
            let size = min(Int(request.queryValues("size").first ?? "") ?? 0, largeBodyPattern.count - 256)
            return HTTPResponse(status: 200, headers: [("Content-Type", "application/octet-stream")], body: largeBody(size: size))
        })
        router.add("GET", "/stream-fail", { _ in
            let sent = Atomic<Int>(0)
            return HTTPResponse(status: 200, stream: ResponseStream {
                if sent.add(1, ordering: .relaxed).oldValue >= 2 { throw CancellationError() }
                return [UInt8](repeating: 66, count: 1000)
            })
        })
        router.add("GET", "/stream-gated", { [gate] _ in
            let sent = Atomic<Int>(0)
            return HTTPResponse(status: 200, stream: ResponseStream {
                switch sent.add(1, ordering: .relaxed).oldValue {
                case 0: return Array("first".utf8)
                case 1: await gate.wait(); return Array("second".utf8)
                default: return nil
                }
            })
        })
        self.router = router
    }

    func respond(to request: HTTPRequest) -> HTTPReply {
        switch router.match(method: request.method, path: request.path) {
        case .found(let handler, _, let parameters):
            var routed = request
            routed.pathParameters = parameters
            if request.path == "/hello" {
                return .now(HTTPResponse(status: 200, contentType: "text/plain", body: "hello"))
            }
            return .later { [routed] in await handler(routed) }
        case .methodNotAllowed(let allowed, _):
            return .now(HTTPResponse(status: 405, headers: [("Allow", allowed.joined(separator: ", "))]))
        case .notFound:
            return .now(HTTPResponse(status: 404))
        }
    }

    func bodyTooLarge(_ request: HTTPRequest, limit: Int) -> HTTPResponse {
        HTTPResponse(status: 413, contentType: "application/problem+json", body: #"{"code":"payload_too_large"}"#)
    }

    func shuttingDown(_ request: HTTPRequest) -> HTTPResponse {
        // The request it answers: the one that waited (the server keeps it while the work runs).
        HTTPResponse(status: 503, contentType: "text/plain", body: "shutting down \(request.method) \(request.path)")
    }
}

func withServer<T>(gate: Gate = Gate(), bodyLimit: Int = 1024,
                   _ body: (HTTPServer) async throws -> T) async throws -> T {
    let server = try TestPorts.started { port in
        HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: port, threads: 2, connectionTimeoutSeconds: 30,
                                                          connectionLimit: 1024, bodyLimitBytes: bodyLimit),
                   responder: TestResponder(gate: gate))
    }
    do {
        let result = try await body(server)
        await server.stop(drainDeadline: .seconds(2))
        return result
    } catch {
        gate.open()
        await server.stop(drainDeadline: .seconds(2))
        throw error
    }
}

@Suite struct HTTPServerTests {
    @Test func routesLiteralAndParameterPathsAndKeepsConnectionsAlive() async throws {
        try await withServer { server in
            let port = server.port
            #expect(port > 0)
            let bodies = try await onBlockingThread { () -> [String] in
                let connection = try RawHTTPConnection(port: port)
                var bodies: [String] = []
                for path in ["/hello", "/items/42", "/items/special", "/items/42/"] {
                    try connection.send(RawHTTPConnection.requestBytes("GET", path))
                    guard let response = try connection.readResponse() else { throw TestHTTPError(description: "closed") }
                    #expect(response.status == 200)
                    #expect(response.header("connection")?.lowercased() != "close")
                    bodies.append(response.text)
                }
                return bodies
            }
            #expect(bodies == ["hello", "item 42", "special", "item 42"])
        }
    }

    /// The client's address is made once per connection: every request on a kept-alive connection, and one on a
    /// connection of its own, still carries it whole.
    @Test func everyRequestOfAConnectionCarriesTheClientAddress() async throws {
        try await withServer { server in
            let port = server.port
            let peers = try await onBlockingThread { () -> [String] in
                var peers: [String] = []
                for requests in [3, 1] {
                    let connection = try RawHTTPConnection(port: port)
                    for _ in 0..<requests {
                        try connection.send(RawHTTPConnection.requestBytes("GET", "/peer"))
                        guard let response = try connection.readResponse() else { throw TestHTTPError(description: "closed") }
                        peers.append(response.text)
                    }
                }
                return peers
            }
            #expect(peers == Array(repeating: "127.0.0.1", count: 4))
        }
    }

    /// A streamed body arrives whole and in order, chunked, far larger than one chunk, and the connection is kept
    /// for the next request.
    @Test func aStreamedBodyArrivesWholeAndTheConnectionIsKept() async throws {
        try await withServer { server in
            let port = server.port
            let (first, second) = try await onBlockingThread { () -> (TestResponse, TestResponse) in
                let connection = try RawHTTPConnection(port: port)
                try connection.send(RawHTTPConnection.requestBytes("GET", "/stream?chunks=40"))
                guard let streamed = try connection.readResponse() else { throw TestHTTPError(description: "closed") }
                try connection.send(RawHTTPConnection.requestBytes("GET", "/hello"))
                guard let next = try connection.readResponse() else { throw TestHTTPError(description: "closed") }
                return (streamed, next)
            }
            #expect(first.status == 200)
            #expect(first.header("transfer-encoding")?.lowercased() == "chunked")
            let expected = (0..<40).flatMap { [UInt8](repeating: UInt8(65 + $0 % 26), count: 10_000) }
            #expect(first.body.count == expected.count && first.body == expected)
            #expect(second.text == "hello")
        }
    }

    /// Large bodies (lent to libmicrohttpd, not copied) arrive whole on kept-alive connections, side by side, and
    /// each one's bytes stay its own until sent.
    @Test func largeBodiesArriveWholeOnSeveralConnections() async throws {
        try await withServer { server in
            let port = server.port
            try await withThrowingTaskGroup(of: Void.self) { group in
                for client in 0..<3 {
                    group.addTask {
                        try await onBlockingThread {
                            let connection = try RawHTTPConnection(port: port)
                            for round in 0..<3 {
                                let size = 65_536 + client * 150_001 + round * 7_919
                                try connection.send(RawHTTPConnection.requestBytes("GET", "/large?size=\(size)"))
                                guard let response = try connection.readResponse() else { throw TestHTTPError(description: "closed") }
                                #expect(response.status == 200)
                                #expect(response.body == largeBody(size: size), "size \(size)")
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
    }

    /// A stream that fails part-way cuts the transfer: the client never sees a complete-looking body.
    @Test func aFailingStreamCutsTheTransfer() async throws {
        try await withServer { server in
            await #expect(throws: TestHTTPError.self) { _ = try await httpRequest(port: server.port, "GET", "/stream-fail") }
            // The server carries on.
            let after = try await httpRequest(port: server.port, "GET", "/hello")
            #expect(after.text == "hello")
        }
    }

    /// A stream waiting for its next chunk when the server stops is cut once the drain deadline passes; the stop
    /// completes (libmicrohttpd cannot stop with suspended connections).
    @Test func stopCutsAStreamWaitingPastTheDrainDeadline() async throws {
        let gate = Gate()
        let server = try TestPorts.started { port in
            HTTPServer(configuration: HTTPServerConfiguration(host: "127.0.0.1", port: port, threads: 2, connectionTimeoutSeconds: 30,
                                                              connectionLimit: 64, bodyLimitBytes: 1024),
                       responder: TestResponder(gate: gate))
        }
        let port = server.port
        let client = Task { try await httpRequest(port: port, "GET", "/stream-gated") }
        await eventually(within: 20) { gate.waiting > 0 }
        #expect(gate.waiting == 1)
        await server.stop(drainDeadline: .milliseconds(300))
        await #expect(throws: TestHTTPError.self) { _ = try await client.value }
        gate.open()
    }

    @Test func unknownPathIs404AndWrongMethodIs405WithAllow() async throws {
        try await withServer { server in
            let missing = try await httpRequest(port: server.port, "GET", "/nothing-here")
            #expect(missing.status == 404)
            let wrong = try await httpRequest(port: server.port, "DELETE", "/hello")
            #expect(wrong.status == 405)
            #expect(wrong.header("Allow") == "GET, HEAD")
        }
    }

    @Test func queryArgumentsArriveDecodedAndRepeated() async throws {
        try await withServer { server in
            let response = try await httpRequest(port: server.port, "GET", "/query?tag=a%20b&tag=c&other=1")
            #expect(response.text == "a b|c")
        }
    }

    @Test func headersArriveInOrderWithNamesLowercasedAndValuesAsSent() async throws {
        try await withServer { server in
            let long = String(repeating: "v", count: 300)
            let response = try await httpRequest(port: server.port, "GET", "/headers", headers: [
                ("X-Twice", "one"), ("Authorization", "bEaReR  tok-123  "), ("X-Empty", ""), ("X-Long", long),
                ("x-twice", "two"), ("X-Utf8", "café"),
            ])
            let lines = response.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
            #expect(lines.contains("x-twice=one"))
            #expect(lines.contains("authorization=bEaReR  tok-123  "))
            #expect(lines.contains("x-empty="))
            #expect(lines.contains("x-long=" + long))
            #expect(lines.contains("x-utf8=café"))
            let ours = lines.filter { $0.hasPrefix("x-") || $0.hasPrefix("authorization=") }
            #expect(ours == ["x-twice=one", "authorization=bEaReR  tok-123  ", "x-empty=", "x-long=" + long, "x-twice=two", "x-utf8=café"])
            #expect(lines.suffix(3) == ["first=one", "all=one|two", "token=tok-123"])
        }
    }

    @Test func bodyIsDeliveredWholeUpToTheLimit() async throws {
        try await withServer(bodyLimit: 100_000) { server in
            let payload = [UInt8]((0..<90_000).map { UInt8(truncatingIfNeeded: $0 % 251) })
            let response = try await httpRequest(port: server.port, "POST", "/echo",
                                                 headers: [("Content-Type", "application/octet-stream")], body: payload)
            #expect(response.status == 200)
            #expect(response.body == payload)
        }
    }

    @Test func oversizedBodyWithContentLengthIs413() async throws {
        try await withServer(bodyLimit: 1024) { server in
            let response = try await httpRequest(port: server.port, "POST", "/echo", body: [UInt8](repeating: 65, count: 5000))
            #expect(response.status == 413)
            #expect(response.text.contains("payload_too_large"))
        }
    }

    /// A client that sends its whole body without waiting (a proxy, most libraries) gets the 413 after it: closing
    /// under its writes would reset the connection and drop the answer unread. The connection is kept.
    @Test func aBodyUpToFourTimesTheLimitIsReadAndAnswered413OnAKeptConnection() async throws {
        try await withServer(bodyLimit: 1024) { server in
            let port = server.port
            let (refused, next) = try await onBlockingThread { () -> (TestResponse?, TestResponse?) in
                let connection = try RawHTTPConnection(port: port)
                try connection.send(RawHTTPConnection.requestBytes("POST", "/echo", body: [UInt8](repeating: 65, count: 4096)))
                let refused = try connection.readResponse()
                // The same connection answers the next request.
                try connection.send(RawHTTPConnection.requestBytes("GET", "/hello"))
                return (refused, try connection.readResponse())
            }
            #expect(refused?.status == 413)
            #expect(refused?.text.contains("payload_too_large") == true)
            #expect(refused?.header("connection")?.lowercased() != "close")
            #expect(next?.text == "hello")
        }
    }

    /// Beyond four times the limit, or when the client waits for `100 Continue`, the 413 comes before the body and
    /// the connection is closed: no body is asked for or read.
    @Test func aFarLargerBodyOrOneAwaitingContinueIsRefusedAtOnce() async throws {
        try await withServer(bodyLimit: 1024) { server in
            let port = server.port
            for (length, expect) in [(4097, false), (2000, true)] {
                let (response, closed) = try await onBlockingThread { () -> (TestResponse?, Bool) in
                    let connection = try RawHTTPConnection(port: port)
                    let head = "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(length)\r\n"
                        + (expect ? "Expect: 100-continue\r\n" : "") + "\r\n"
                    try connection.send(Array(head.utf8))
                    return (try connection.readResponse(), connection.isClosedByPeer())
                }
                #expect(response?.status == 413, "\(length)")
                #expect(response?.header("connection")?.lowercased() == "close", "\(length)")
                #expect(closed, "\(length)")
            }
        }
    }

    @Test func oversizedChunkedBodyIs413() async throws {
        try await withServer(bodyLimit: 1024) { server in
            let port = server.port
            let response = try await onBlockingThread { () -> TestResponse? in
                let connection = try RawHTTPConnection(port: port)
                var bytes = Array("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".utf8)
                for _ in 0..<8 {
                    bytes += Array("400\r\n".utf8) + [UInt8](repeating: 66, count: 1024) + Array("\r\n".utf8)
                }
                bytes += Array("0\r\n\r\n".utf8)
                try connection.send(bytes)
                return try connection.readResponse()
            }
            #expect(response?.status == 413)
        }
    }

    @Test func slowHandlerDoesNotStallOtherRequests() async throws {
        let gate = Gate()
        try await withServer(gate: gate) { server in
            let port = server.port
            let slow = Task { try await httpRequest(port: port, "GET", "/slow") }
            // Wait until the slow request is parked inside its handler.
            while gate.waiting == 0 { try await Task.sleep(for: .milliseconds(2)) }
            // With both pool threads free, many fast requests complete while the slow one is still parked.
            for index in 0..<20 {
                let fast = try await httpRequest(port: port, "GET", "/items/\(index)")
                #expect(fast.status == 200)
            }
            #expect(gate.waiting == 1)
            #expect(server.suspendedCount == 1)
            gate.open()
            let slowResponse = try await slow.value
            #expect(slowResponse.text == "slow done")
        }
    }

    @Test func gracefulStopDrainsAnInFlightRequest() async throws {
        let gate = Gate()
        let server = try TestPorts.started { port in
            HTTPServer(configuration: HTTPServerConfiguration.forTests(port: port), responder: TestResponder(gate: gate))
        }
        let port = server.port
        let inFlight = Task { try await httpRequest(port: port, "GET", "/slow") }
        while gate.waiting == 0 { try await Task.sleep(for: .milliseconds(2)) }
        let stopping = Task { await server.stop(drainDeadline: .seconds(10)) }
        // Once stopping, the listener is closed: new connections are refused.
        var refused = false
        for _ in 0..<200 where !refused {
            do {
                _ = try RawHTTPConnection(port: port)
                try await Task.sleep(for: .milliseconds(5))
            } catch {
                refused = true
            }
        }
        #expect(refused)
        gate.open()
        let response = try await inFlight.value
        #expect(response.status == 200)
        #expect(response.text == "slow done")
        await stopping.value
    }

    @Test func stopPastTheDrainDeadlineAnswersWithTheShutdownResponse() async throws {
        let gate = Gate()
        let server = try TestPorts.started { port in
            HTTPServer(configuration: HTTPServerConfiguration.forTests(port: port), responder: TestResponder(gate: gate))
        }
        let port = server.port
        let stuck = Task { try await httpRequest(port: port, "GET", "/slow") }
        while gate.waiting == 0 { try await Task.sleep(for: .milliseconds(2)) }
        await server.stop(drainDeadline: .milliseconds(200))
        let response = try await stuck.value
        #expect(response.status == 503)
        #expect(response.text == "shutting down GET /slow")
        gate.open()
    }
}
