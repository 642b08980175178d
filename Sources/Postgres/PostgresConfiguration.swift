public struct PostgresConfiguration: Sendable, CustomStringConvertible {
    /// A libpq connection string: `postgresql://…` URL or `key=value` pairs.
    public var connectionString: String
    public var poolSize: Int
    public var connectTimeoutSeconds: Int
    public var statementTimeoutMilliseconds: Int
    /// How long a caller may wait for a free connection before failing with `poolTimeout`.
    public var acquireTimeoutMilliseconds: Int
    public var applicationName: String
    /// Behind a transaction-pooling proxy (pgbouncer `pool_mode = transaction`): no session state may outlive a
    /// transaction, so statements go unnamed (no prepared statements) and no `options` startup parameter is sent
    /// (the statement timeout then comes from the role, the database or the proxy).
    public var transactionPooling: Bool
    /// Connections that statements run inside `PostgresPool.capped` may hold at once (0: no cap); the others wait their
    /// turn in the queue, and the rest of the pool stays for everything else.
    public var cappedConnections: Int

    /// No limit has a default here: the gateway's come from its settings table, tests and tools pass their own.
    public init(connectionString: String, poolSize: Int, connectTimeoutSeconds: Int,
                statementTimeoutMilliseconds: Int, acquireTimeoutMilliseconds: Int,
                applicationName: String = "desk-gateway", transactionPooling: Bool = false, cappedConnections: Int = 0) {
        self.connectionString = connectionString
        self.poolSize = poolSize
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.statementTimeoutMilliseconds = statementTimeoutMilliseconds
        self.acquireTimeoutMilliseconds = acquireTimeoutMilliseconds
        self.applicationName = applicationName
        self.transactionPooling = transactionPooling
        self.cappedConnections = cappedConnections
    }

    /// Never prints the connection string: it may hold a password.
    public var description: String {
        "PostgresConfiguration(poolSize: \(poolSize), connectTimeout: \(connectTimeoutSeconds)s, statementTimeout: \(statementTimeoutMilliseconds)ms, transactionPooling: \(transactionPooling))"
    }
}
