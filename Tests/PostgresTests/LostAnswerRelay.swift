import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import TestSupport

/// A TCP relay between libpq and the test cluster that loses one answer: the first statement whose bytes carry
/// `marker` goes through to the server, and when the server's answer to it is complete (its ReadyForQuery) the relay
/// hangs up on the client without passing it on. The statement ran and committed; the client never hears so.
/// Every other byte, and every later connection, is passed on as it comes (one thread per direction).
final class LostAnswerRelay: Sendable {
    let port: Int
    private let listener: Int32
    private let server: String
    private let marker: [UInt8]
    private let armed = Atomic<Bool>(true)
    private let stopped = Atomic<Bool>(false)

    /// `connectionString` is the test cluster's (`host=… port=…` form): its socket directory or TCP address is where
    /// the relay connects.
    init(to connectionString: String, marker: String) throws {
        var settings: [String: String] = [:]
        for part in connectionString.split(separator: " ") {
            let pair = part.split(separator: "=", maxSplits: 1).map(String.init)
            if pair.count == 2 { settings[pair[0]] = pair[1] }
        }
        guard let host = settings["host"], let serverPort = settings["port"] else { throw RelayError.unknownServer }
        server = host.hasPrefix("/") ? "\(host)/.s.PGSQL.\(serverPort)" : "\(host):\(serverPort)"
        self.marker = Array(marker.utf8)
        guard let (listener, port) = loopbackListener() else { throw RelayError.cannotListen }
        self.listener = listener
        self.port = port
        let relay = self
        Thread { relay.acceptLoop() }.start()
    }

    /// `connectionString` (the test cluster's) through the relay.
    func connectionString(_ connectionString: String) -> String {
        let kept = connectionString.split(separator: " ").filter { !$0.hasPrefix("host=") && !$0.hasPrefix("port=") }
        return (kept + ["host=127.0.0.1", "port=\(port)", "sslmode=disable"]).joined(separator: " ")
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        while !stopped.load(ordering: .relaxed) {
            let client = accept(listener, nil, nil)
            if client < 0 { if errno == EINTR { continue } else { break } }
            guard let upstream = connectToServer() else { close(client); continue }
            let link = Link(client: client, server: upstream)
            let relay = self
            Thread { relay.pump(from: client, to: upstream, link: link, fromClient: true) }.start()
            Thread { relay.pump(from: upstream, to: client, link: link, fromClient: false) }.start()
        }
        close(listener)
    }

    /// One client's connection: whether its answer is being lost, and its sockets, closed by the second pump to end
    /// (closed sooner, a number could be reused by another test's socket while the other pump still used it).
    private final class Link: Sendable {
        let client: Int32, server: Int32
        let lost = Atomic<Bool>(false)
        private let pumpsEnded = Atomic<Int>(0)
        init(client: Int32, server: Int32) { self.client = client; self.server = server }
        func pumpEnded() {
            shutdown(client, Int32(SHUT_RDWR))
            shutdown(server, Int32(SHUT_RDWR))
            if pumpsEnded.add(1, ordering: .acquiringAndReleasing).newValue == 2 {
                close(client)
                close(server)
            }
        }
    }

    private func pump(from source: Int32, to destination: Int32, link: Link, fromClient: Bool) {
        defer { link.pumpEnded() }
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = recv(source, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            let chunk = buffer[..<count]
            if fromClient, chunk.contains(marker), armed.exchange(false, ordering: .relaxed) {
                link.lost.store(true, ordering: .relaxed)
            }
            // ReadyForQuery ends the answer: the statement has run; hang up on the client instead of answering.
            if !fromClient, link.lost.load(ordering: .relaxed) {
                if chunk.contains([UInt8(ascii: "Z"), 0, 0, 0, 5]) { break }
                continue
            }
            guard send(destination, buffer, count, Int32(MSG_NOSIGNAL)) == count else { break }
        }
    }

    private func connectToServer() -> Int32? {
        if server.hasPrefix("/") {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            withUnsafeMutableBytes(of: &address.sun_path) { path in
                for (i, byte) in server.utf8.prefix(path.count - 1).enumerated() { path[i] = byte }
            }
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            if connected == 0 { return fd }
            close(fd)
            return nil
        }
        let parts = server.split(separator: ":")
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if withIPv4Address(String(parts[0]), port: Int(parts[1]) ?? 0, { connect(fd, $0, $1) }) == 0 { return fd }
        close(fd)
        return nil
    }

    enum RelayError: Error { case unknownServer, cannotListen }
}
