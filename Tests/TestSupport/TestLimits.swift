import GatewayApp
import HTTPServer
import Postgres
import Store

/// Limits for servers and pools the tests start themselves. Generous where the gateway's settings are tight: dozens of
/// test databases are created at once on a 2-core machine.
public enum TestLimits {
    public static let connectTimeoutSeconds = 20
    public static let statementTimeoutMilliseconds = 10_000
    public static let acquireTimeoutMilliseconds = 20_000
}

extension PostgresConfiguration {
    public static func forTests(_ connectionString: String, poolSize: Int,
                                connectTimeoutSeconds: Int = TestLimits.connectTimeoutSeconds,
                                statementTimeoutMilliseconds: Int = TestLimits.statementTimeoutMilliseconds) -> PostgresConfiguration {
        PostgresConfiguration(connectionString: connectionString, poolSize: poolSize, connectTimeoutSeconds: connectTimeoutSeconds,
                              statementTimeoutMilliseconds: statementTimeoutMilliseconds,
                              acquireTimeoutMilliseconds: TestLimits.acquireTimeoutMilliseconds)
    }
}

extension Database {
    public static func forTests(_ connectionString: String, poolSize: Int) -> Database {
        Database(connectionString: connectionString, poolSize: poolSize, connectTimeoutSeconds: TestLimits.connectTimeoutSeconds,
                 statementTimeoutMilliseconds: TestLimits.statementTimeoutMilliseconds,
                 acquireTimeoutMilliseconds: TestLimits.acquireTimeoutMilliseconds, transactionPooling: false)
    }
}

extension HTTPServerConfiguration {
    /// A loopback server for a test.
    public static func forTests(port: Int, threads: Int = 2, connectionLimit: Int = 1024) -> HTTPServerConfiguration {
        HTTPServerConfiguration(host: "127.0.0.1", port: port, threads: threads, connectionTimeoutSeconds: 30,
                                connectionLimit: connectionLimit, bodyLimitBytes: 1 << 20)
    }
}

extension RetentionPolicy {
    /// The retention settings' defaults, as the gateway starts with them.
    public static var defaults: RetentionPolicy { GatewayConfig().retention }
}
