import Foundation
#if canImport(Glibc)
import Glibc
#endif
import GatewayApp
import Logging
import Postgres
import Synchronization

/// Where the tests find PostgreSQL. `make test` starts one private cluster for the whole run and passes its admin
/// connection string in `TEST_DATABASE_URL`; without it (a bare `swift test`) a shared cluster is started under
/// `.build/test-postgres` on first use and left running for the next run.
public enum TestPostgres {
    public static let repositoryRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    public static let logger: Logger = {
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        return logger
    }()

    private static let shared = Task<String, any Error> {
        if let url = ProcessInfo.processInfo.environment["TEST_DATABASE_URL"], !url.isEmpty { return url }
        let cluster = try EmbeddedPostgres(directory: repositoryRoot + "/.build/test-postgres", port: 25439,
                                           durable: false, logger: logger)
        try await cluster.start()
        return cluster.connectionString(database: "postgres")
    }

    /// The admin connection string of the shared test cluster.
    public static func adminConnectionString() async throws -> String {
        try await shared.value
    }

    /// Creates a fresh database, hands its connection string to `body`, and drops it afterwards, so suites run in
    /// parallel and leave nothing behind.
    public static func withDatabase<T: Sendable>(_ body: (String) async throws -> T) async throws -> T {
        let admin = try await adminConnectionString()
        let name = "t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased().prefix(20)
        // Creating a database waits for a checkpoint, which takes seconds while many suites write at once. The admin
        // connection is not held while the test runs: a hundred and more tests at once would each keep one open.
        func administer(_ statement: String) async throws {
            let pool = PostgresPool(configuration: PostgresConfiguration.forTests(admin, poolSize: 1, statementTimeoutMilliseconds: 120_000))
            defer { pool.shutdown() }
            try await pool.query(statement)
        }
        try await administer("CREATE DATABASE \(name)")
        let connectionString = replacingDatabase(in: admin, with: String(name))
        do {
            let result = try await body(connectionString)
            try? await administer("DROP DATABASE \(name) WITH (FORCE)")
            return result
        } catch {
            try? await administer("DROP DATABASE \(name) WITH (FORCE)")
            throw error
        }
    }

    /// Works for both `key=value` strings and `postgresql://…/db` URLs.
    public static func replacingDatabase(in connectionString: String, with database: String) -> String {
        if connectionString.hasPrefix("postgres") {
            guard var components = URLComponents(string: connectionString) else { return connectionString }
            components.path = "/" + database
            return components.string ?? connectionString
        }
        var parts = connectionString.split(separator: " ").filter { !$0.hasPrefix("dbname=") }.map(String.init)
        parts.append("dbname=\(database)")
        return parts.joined(separator: " ")
    }

    /// A private cluster for tests that stop and start the server; destroyed by the caller. Its port is below the
    /// kernel's ephemeral range (so no client connection can be holding it) and free when chosen.
    public static func privateCluster() throws -> EmbeddedPostgres {
        let port = TestPorts.free()
        let directory = NSTemporaryDirectory() + "dg-pg-\(UUID().uuidString.prefix(8))"
        return try EmbeddedPostgres(directory: directory, port: port, durable: false, logger: logger)
    }

    /// `body` with a started private cluster (`privateCluster`), destroyed afterwards, also when `body` throws.
    public static func withPrivateCluster(_ body: (EmbeddedPostgres) async throws -> Void) async throws {
        let cluster = try privateCluster()
        do {
            try await cluster.start()
            try await body(cluster)
        } catch {
            await cluster.destroy()
            throw error
        }
        await cluster.destroy()
    }
}

/// Ports for what the tests listen on: below the kernel's ephemeral range (32768 up), where an outgoing connection
/// could be holding a port, as every listener of the project's tests and benchmarks is. Free when handed out, and never
/// handed out twice in one run, so servers started at once in parallel tests never meet.
public enum TestPorts {
    private static let given = Mutex<Set<Int>>([])

    public static func free() -> Int {
        while true {
            let port = Int.random(in: 20000...29999)
            if given.withLock({ $0.insert(port).inserted }), portIsFree(port) { return port }
        }
    }
}

func portIsFree(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}
