import Dispatch
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A response as it came off the wire.
public struct TestResponse: Sendable {
    public let status: Int
    public let headers: [(name: String, value: String)]
    public let body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as a JSON object (fails the caller's expectations with nil otherwise).
    public var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
    }
}

public struct TestHTTPError: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// A deliberately small HTTP/1.1 client over a blocking socket, run on a GCD thread so tests see exactly what the
/// server sends (status, headers, keep-alive) and can send what ordinary clients will not (chunked bodies).
public final class RawHTTPConnection: @unchecked Sendable {
    // Thread safety: used by one test at a time; every call runs to completion on one GCD thread.
    private let fd: Int32
    private var buffer: [UInt8] = []

    /// - Parameter source: a local address to connect from (e.g. 127.0.0.2, to be another client on loopback).
    public init(port: Int, host: String = "127.0.0.1", source: String? = nil) throws {
        // The descriptor is stored only once connected: a throwing initializer of a class whose properties are all
        // set still runs deinit, and a second close of the number could close another thread's new socket
        // (libmicrohttpd aborts when closing a connection fails).
        fd = try Self.connected(port: port, host: host, source: source)
    }

    private static func connected(port: Int, host: String, source: String?) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestHTTPError(description: "socket() failed") }
        if let source {
            guard withIPv4Address(source, port: 0, { bind(fd, $0, $1) }) == 0 else {
                let error = errno
                close(fd)
                throw TestHTTPError(description: "bind to \(source) failed (errno \(error))")
            }
        }
        var timeout = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard withIPv4Address(host, port: port, { connect(fd, $0, $1) }) == 0 else {
            let error = errno
            close(fd)
            throw TestHTTPError(description: "connect to port \(port) failed (errno \(error))")
        }
        return fd
    }

    deinit { close(fd) }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestHTTPError(description: "send failed (errno \(errno))") }
            offset += n
        }
    }

    /// Reads one response; nil when the server closed the connection before sending anything.
    public func readResponse(method: String = "GET") throws -> TestResponse? {
        guard let headEnd = try fill(until: { $0.firstRange(of: [13, 10, 13, 10]) }) else { return nil }
        let head = String(decoding: buffer[..<headEnd.lowerBound], as: UTF8.self)
        buffer.removeFirst(headEnd.upperBound)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw TestHTTPError(description: "bad status line in \(head)")
        }
        let headers = lines.compactMap { line -> (String, String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        let length = headers.first { $0.0.lowercased() == "content-length" }.flatMap { Int($0.1) } ?? 0
        var body: [UInt8] = []
        let chunked = headers.contains { $0.0.lowercased() == "transfer-encoding" && $0.1.lowercased().contains("chunked") }
        if method != "HEAD", chunked {
            body = try readChunks()
        } else if method != "HEAD", length > 0 {
            _ = try fill { $0.count >= length ? $0.startIndex..<length : nil }
            guard buffer.count >= length else { throw TestHTTPError(description: "connection closed mid-body") }
            body = Array(buffer[..<length])
            buffer.removeFirst(length)
        }
        return TestResponse(status: status, headers: headers, body: body)
    }

    /// A chunked body (RFC 9112 §7.1), trailers skipped; a connection cut before the last chunk is an error.
    private func readChunks() throws -> [UInt8] {
        var body: [UInt8] = []
        while true {
            guard let lineEnd = try fill(until: { $0.firstRange(of: [13, 10]) }) else { throw TestHTTPError(description: "connection closed mid-body") }
            let sizeText = String(decoding: buffer[..<lineEnd.lowerBound], as: UTF8.self).split(separator: ";")[0]
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                throw TestHTTPError(description: "bad chunk size '\(sizeText)'")
            }
            buffer.removeFirst(lineEnd.upperBound)
            if size == 0 {
                // Trailers end with an empty line.
                while let end = try fill(until: { $0.firstRange(of: [13, 10]) }) {
                    let empty = end.lowerBound == 0
                    buffer.removeFirst(end.upperBound)
                    if empty { break }
                }
                return body
            }
            _ = try fill { $0.count >= size + 2 ? $0.startIndex..<(size + 2) : nil }
            guard buffer.count >= size + 2 else { throw TestHTTPError(description: "connection closed mid-chunk") }
            body += buffer[..<size]
            buffer.removeFirst(size + 2)
        }
    }

    /// True when the server has closed its side (read returns 0).
    public func isClosedByPeer() -> Bool {
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, 0) == 0
    }

    private func fill(until found: ([UInt8]) -> Range<Int>?) throws -> Range<Int>? {
        while true {
            if let range = found(buffer) { return range }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { return buffer.isEmpty ? nil : found(buffer) }
            guard n > 0 else { throw TestHTTPError(description: "recv failed (errno \(errno))") }
            buffer.append(contentsOf: chunk[..<n])
        }
    }

    public static func requestBytes(_ method: String, _ path: String, headers: [(String, String)] = [],
                                    body: [UInt8]? = nil) -> [UInt8] {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        return Array(head.utf8) + (body ?? [])
    }
}

/// One request on a fresh connection, run off the cooperative pool.
public func httpRequest(port: Int, _ method: String, _ path: String, headers: [(String, String)] = [],
                        body: [UInt8]? = nil) async throws -> TestResponse {
    try await onBlockingThread {
        let connection = try RawHTTPConnection(port: port)
        var allHeaders = headers
        if body != nil, !headers.contains(where: { $0.0.lowercased() == "content-type" }) {
            allHeaders.append(("Content-Type", "application/json"))
        }
        try connection.send(RawHTTPConnection.requestBytes(method, path, headers: allHeaders, body: body))
        guard let response = try connection.readResponse(method: method) else {
            throw TestHTTPError(description: "\(method) \(path): connection closed without a response")
        }
        return response
    }
}

public func httpRequest(port: Int, _ method: String, _ path: String, headers: [(String, String)] = [],
                        json: String) async throws -> TestResponse {
    try await httpRequest(port: port, method, path, headers: headers, body: Array(json.utf8))
}

/// Runs blocking work on a thread of its own so it never occupies one of the cooperative pool's threads (GCD's
/// global queue runs only about one blocking job per core here, which would serialise concurrent test requests).
public func onBlockingThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result { try body() }) }.start()
    }
}

extension Array where Element == UInt8 {
    func firstRange(of pattern: [UInt8]) -> Range<Int>? {
        guard count >= pattern.count else { return nil }
        for start in 0...(count - pattern.count) where self[start..<start + pattern.count].elementsEqual(pattern) {
            return start..<start + pattern.count
        }
        return nil
    }
}

/// Runs `body` (bind or connect) with an IPv4 socket address.
public func withIPv4Address(_ host: String, port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    inet_pton(AF_INET, host, &address.sin_addr)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}
