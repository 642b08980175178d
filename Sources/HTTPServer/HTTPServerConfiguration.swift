public struct HTTPServerConfiguration: Sendable {
    /// IPv4 address to bind, e.g. "0.0.0.0" or "127.0.0.1".
    public var host: String
    /// 0 asks the kernel for an ephemeral port (see `HTTPServer.port`).
    public var port: Int
    public var threads: Int
    public var connectionTimeoutSeconds: Int
    public var connectionLimit: Int
    public var bodyLimitBytes: Int
    /// Per-connection memory; bounds header size and upload chunk size. libmicrohttpd zeroes all of it before each
    /// request on a kept-alive connection, so it is paid per request: 32 KiB (libmicrohttpd's default) holds a header block of
    /// about 16,000 bytes; 64 KiB cost the cheapest answers 6 % of their CPU.
    public var connectionMemoryLimitBytes: Int
    public var listenBacklog: Int
    /// Connections one client address may hold at once (0: no limit); more are closed as they are accepted.
    public var perAddressConnectionLimit = 0
    /// A new connection's first request (headers and body) must be complete this many seconds after it was accepted,
    /// and silence is allowed only this long until then (0: only the idle timeout applies).
    public var requestTimeoutSeconds = 0

    /// The limits a deployment sets have no default here (the gateway's come from its settings table); the two
    /// that are not settings keep theirs.
    public init(host: String, port: Int, threads: Int, connectionTimeoutSeconds: Int,
                connectionLimit: Int, bodyLimitBytes: Int,
                connectionMemoryLimitBytes: Int = 32 << 10, listenBacklog: Int = 1024) {
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
