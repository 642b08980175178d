public struct HTTPServerConfiguration: Sendable {
    /// IPv4 address to bind, e.g. "0.0.0.0" or "127.0.0.1".
    public var host: String
    /// 0 asks the kernel for an ephemeral port (see `HTTPServer.port`).
    public var port: Int
    public var threads: Int
    public var connectionTimeoutSeconds: Int
    public var connectionLimit: Int
    public var bodyLimitBytes: Int
    /// Per-connection memory; bounds header size and upload chunk size.
    public var connectionMemoryLimitBytes: Int
    public var listenBacklog: Int
    /// Connections one client address may hold at once (0: no limit); more are closed as they are accepted.
    public var perAddressConnectionLimit = 0
    /// Silence allowed on a new connection before its first request's headers are complete (0: the idle timeout).
    public var requestTimeoutSeconds = 0

    public init(host: String = "0.0.0.0", port: Int = 8080, threads: Int = 2, connectionTimeoutSeconds: Int = 30,
                connectionLimit: Int = 1024, bodyLimitBytes: Int = 1 << 20,
                connectionMemoryLimitBytes: Int = 64 << 10, listenBacklog: Int = 1024) {
        self.host = host
        self.port = port
        self.threads = threads
        self.connectionTimeoutSeconds = connectionTimeoutSeconds
        self.connectionLimit = connectionLimit
        self.bodyLimitBytes = bodyLimitBytes
        self.connectionMemoryLimitBytes = connectionMemoryLimitBytes
        self.listenBacklog = listenBacklog
    }
}
