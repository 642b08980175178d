import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A page server on loopback that misbehaves the way real sites can, on raw sockets (one thread per connection):
/// - `/huge`: announces 2 GB and streams it as fast as the reader takes it, ignoring `Range`;
/// - `/endless`: no length, never ends;
/// - `/stall`: headers and the page's head, then silence for a minute;
/// - `/empty`: closes the connection without a byte (as it does at once for a TLS handshake);
/// - `/scripted`: OpenGraph fields with `javascript:` and `data:` URLs and a title and description far too long.
/// Every page starts with `<title>NAME</title>` so a preview of its head can succeed.
public final class HostilePageServer: @unchecked Sendable {
    public let port: Int
    private let listener: Int32
    /// Bytes written to all clients so far (to show the server really streamed). Guarded by `lock`.
    private var sent = 0
    private let lock = NSLock()

    public init() throws {
        guard let (listener, port) = loopbackListener(backlog: 128) else {
            throw TestHTTPError(description: "hostile server: bind/listen failed")
        }
        self.listener = listener
        self.port = port
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    public var bytesSent: Int { lock.withLock { sent } }

    /// Wakes the accept loop, which closes the listener itself: closed here, its number could be handed to another
    /// thread's new socket before the loop's next accept, which would then take that socket's connections.
    public func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { close(listener); return }
            Thread { [self] in serve(client) }.start()
        }
    }

    private func serve(_ client: Int32) {
        defer { close(client) }
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !request.containsHeaderEnd {
            let count = recv(client, &buffer, buffer.count, 0)
            guard count > 0 else { return }
            request += buffer[0..<count]
            if request.first == 0x16 { return }   // a TLS ClientHello: this server speaks plain HTTP only, so hang up
            if request.count > 65_536 { return }
        }
        let line = String(decoding: request.prefix { $0 != 13 }, as: UTF8.self)
        // The query is ignored, so a client whose base URL ends in `/huge?` reaches `/huge` whatever path it adds.
        let path = String((line.split(separator: " ").dropFirst().first.map(String.init) ?? "/").prefix { $0 != "?" })
        let head = Array("<html><head><title>\(path.dropFirst())</title></head><body>".utf8)
        let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: 65_536)
        switch path {
        case "/huge":
            guard write(client, Array("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 2147483648\r\n\r\n".utf8) + head) else { return }
            var remaining = 2_147_483_648 - head.count
            while remaining > 0, write(client, Array(chunk.prefix(remaining))) { remaining -= chunk.count }
        case "/endless":
            guard write(client, Array("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n".utf8) + head) else { return }
            while write(client, chunk) {}
        case "/scripted":
            let page = """
                <html><head><meta property="og:title" content="\(String(repeating: "T", count: 5000))">
                <meta property="og:description" content="\(String(repeating: "D", count: 20000))">
                <meta property="og:image" content="javascript:alert(document.cookie)">
                <meta property="og:url" content="data:text/html,<script>alert(1)</script>">
                <meta property="og:site_name" content="\(String(repeating: "S\u{301}", count: 1000))"></head></html>
                """
            _ = write(client, Array("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: \(page.utf8.count)\r\n\r\n\(page)".utf8))
        case "/stall":
            _ = write(client, Array("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: 100000\r\n\r\n".utf8) + head)
            Thread.sleep(forTimeInterval: 60)
        default:
            return
        }
    }

    private func write(_ client: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { return false }
            offset += written
            lock.withLock { sent += written }
        }
        return true
    }
}

private extension Array where Element == UInt8 {
    var containsHeaderEnd: Bool {
        guard count >= 4 else { return false }
        for index in 0...(count - 4) where self[index] == 13 && self[index + 1] == 10 && self[index + 2] == 13 && self[index + 3] == 10 {
            return true
        }
        return false
    }
}

/// Resident memory of this process in bytes (Linux).
public func residentBytes() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return 0 }
    return (Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) * 1024
}

/// A TCP socket listening on a free loopback port below the ephemeral range; nil when none could be bound.
public func loopbackListener(backlog: Int32 = 16) -> (fd: Int32, port: Int)? {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var yes: Int32 = 1
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    // A port free when it was handed out may be taken by another process before this bind: try a few.
    for _ in 0..<5 {
        let port = TestPorts.free()
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        if bound == 0, listen(listener, backlog) == 0 { return (listener, port) }
    }
    close(listener)
    return nil
}
