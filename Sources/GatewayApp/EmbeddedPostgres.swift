import Dispatch
import Foundation
import Synchronization
public import Logging
import System

public struct EmbeddedPostgresError: Error, CustomStringConvertible, Sendable {
    public let description: String
}

/// A private PostgreSQL cluster in a local folder, for `make run`, tests and demos: `initdb` on first use, then
/// `pg_ctl start` (reusing a cluster that is already running), unix socket plus 127.0.0.1. When the process runs as
/// root the server runs as the unprivileged `postgres` user, since PostgreSQL refuses to run as root.
public final class EmbeddedPostgres: Sendable {
    public let dataDirectory: String
    public let socketDirectory: String
    let logDirectory: String
    public let port: Int
    private let binDirectory: String
    private let runAsUser: String?
    private let durable: Bool
    private let logger: Logger
    private let startedByUs = Mutex<Bool>(false)

    /// - Parameter durable: false turns off fsync (fast, for throwaway test clusters).
    /// - Parameter binDirectory: where `initdb` and `pg_ctl` are (`PG_BIN_DIR`); nil takes the newest installed.
    public init(directory: String, port: Int, durable: Bool = true, binDirectory: String? = nil, logger: Logger) throws {
        self.port = port
        self.durable = durable
        self.logger = logger
        self.runAsUser = Machine.isRoot ? "postgres" : nil
        guard let bin = binDirectory ?? Self.findBinDirectory() else {
            throw EmbeddedPostgresError(description: "no PostgreSQL server found (install the 'postgresql' package or set PG_BIN_DIR)")
        }
        self.binDirectory = bin
        var base = URL(fileURLWithPath: directory).standardizedFileURL.path
        if let user = runAsUser, !Self.usable(base, by: user) {
            // The project folder is not reachable by the server's user (e.g. under a private home): fall back to /var/tmp.
            let fallback = "/var/tmp/desk-gateway-pg/" + base.replacingOccurrences(of: "/", with: "_")
            logger.notice("embedded PostgreSQL folder not reachable by user \(user); using \(fallback)")
            base = fallback
            guard Self.usable(base, by: user) else {
                throw EmbeddedPostgresError(description: "cannot prepare a folder for the embedded PostgreSQL at \(base)")
            }
        }
        dataDirectory = base + "/data"
        logDirectory = base + "/log"
        // Unix socket paths are limited to 107 bytes.
        let socket = base + "/sock"
        socketDirectory = socket.utf8.count < 80 ? socket : "/tmp/desk-gateway-pg-\(port)"
    }

    /// A libpq connection string for `database` on this cluster.
    public func connectionString(database: String) -> String {
        "host=\(socketDirectory) port=\(port) user=postgres dbname=\(database)"
    }

    /// Starts the cluster (creating it first if needed); returns whether this call started it.
    @discardableResult
    public func start() async throws -> Bool {
        // initdb and pg_ctl block for up to seconds: keep them off the cooperative pool.
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try self.startBlocking() }) }
        }
    }

    private func startBlocking() throws -> Bool {
        try makeDirectory(socketDirectory)
        try makeDirectory(logDirectory)
        if !FileManager.default.fileExists(atPath: dataDirectory + "/PG_VERSION") {
            logger.info("creating embedded PostgreSQL cluster", metadata: ["data": "\(dataDirectory)"])
            try makeDirectory(dataDirectory)
            try run(binDirectory + "/initdb", ["-D", dataDirectory, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                                               "--locale=C.UTF-8", "--no-sync"], timeout: 120)
        }
        if (try? run(binDirectory + "/pg_ctl", ["-D", dataDirectory, "status"], timeout: 10)) != nil {
            logger.info("reusing running embedded PostgreSQL", metadata: ["port": "\(port)"])
            return false
        }
        var options = "-p \(port) -k \(socketDirectory) -c listen_addresses=127.0.0.1"
        // Throwaway clusters serve a whole test suite's gateways at once (each holds its pool and an emulator connection):
        // the unit suite alone peaks near a thousand connections.
        options += durable ? " -c max_connections=200" : " -c max_connections=2000 -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        try run(binDirectory + "/pg_ctl", ["-D", dataDirectory, "-l", logDirectory + "/server.log", "-w", "-t", "60",
                                           "-o", options, "start"], timeout: 90)
        startedByUs.withLock { $0 = true }
        logger.info("started embedded PostgreSQL", metadata: ["port": "\(port)", "socket": "\(socketDirectory)"])
        return true
    }

    /// Stops the cluster if this object started it (a cluster someone else started is left running).
    public func stop(force: Bool = false) async {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                self.stopBlocking(force: force)
                continuation.resume()
            }
        }
    }

    func stopBlocking(force: Bool) {
        guard force || startedByUs.withLock({ $0 }) else { return }
        _ = try? run(binDirectory + "/pg_ctl", ["-D", dataDirectory, "-m", "fast", "-w", "stop"], timeout: 60)
        startedByUs.withLock { $0 = false }
        logger.info("stopped embedded PostgreSQL", metadata: ["port": "\(port)"])
    }

    /// Removes the cluster's folder (tests only).
    public func destroy() async {
        await stop(force: true)
        try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: dataDirectory).deletingLastPathComponent().path)
        try? FileManager.default.removeItem(atPath: socketDirectory)
    }

    private func makeDirectory(_ path: String) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        if let user = runAsUser {
            try run("/bin/chown", [user + ":" + user, path], timeout: 10, asServerUser: false)
            try run("/bin/chmod", ["0700", path], timeout: 10, asServerUser: false)
        }
    }

    @discardableResult
    private func run(_ executable: String, _ arguments: [String], timeout: Double, asServerUser: Bool = true) throws -> String {
        var argv = [executable] + arguments
        if asServerUser, let user = runAsUser { argv = ["/sbin/runuser", "-u", user, "--"] + argv }
        // Output goes to a file, not a pipe: `pg_ctl start` leaves the server holding its descriptors open.
        let outputPath = NSTemporaryDirectory() + "dg-pg-\(UUID().uuidString).out"
        defer { try? FileManager.default.removeItem(atPath: outputPath) }
        let status: Int32
        do {
            status = try ChildProcess.run(argv, outputPath: outputPath, timeout: timeout)
        } catch {
            throw EmbeddedPostgresError(description: "\(argv[0]): \(error)")
        }
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        guard status == 0 else {
            throw EmbeddedPostgresError(description: "\(URL(fileURLWithPath: executable).lastPathComponent) failed: \(text.suffix(600))")
        }
        return text
    }

    private static func usable(_ base: String, by user: String) -> Bool {
        do {
            try FileManager.default.createDirectory(atPath: base, withIntermediateDirectories: true)
        } catch { return false }
        return (try? ChildProcess.run(["/sbin/runuser", "-u", user, "--", "test", "-x", base], outputPath: "/dev/null", timeout: 10)) == 0
    }

    private static func findBinDirectory() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap(Int.init).sorted(by: >)
        for version in versions where FileManager.default.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return "\(root)/\(version)/bin"
        }
        return nil
    }
}
