/// A database failure. `description` is safe to show anywhere: it never carries SQL text, values or server detail;
/// `detail` holds the server's message for logs only.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        let raw: String
        public var description: String { raw }
        public static let connectionFailed = Code(raw: "connectionFailed")
        public static let queryFailed = Code(raw: "queryFailed")
        public static let poolTimeout = Code(raw: "poolTimeout")
        /// A statement's answer did not come within its timeout and a margin; the connection was closed.
        public static let noAnswer = Code(raw: "noAnswer")
        public static let poolClosed = Code(raw: "poolClosed")
        public static let invalidParameter = Code(raw: "invalidParameter")
        public static let decodingFailed = Code(raw: "decodingFailed")
        public static let migrationFailed = Code(raw: "migrationFailed")
    }

    public let code: Code
    /// Five-character SQLSTATE when the server reported one.
    public let sqlState: String?
    /// The server's or libpq's message, for logs; may contain SQL and values.
    public let detail: String

    public init(code: Code, sqlState: String? = nil, detail: String = "") {
        self.code = code
        self.sqlState = sqlState
        self.detail = detail
    }

    public var description: String {
        if let sqlState { return "PostgreSQL error \(code) (SQLSTATE \(sqlState))" }
        return "PostgreSQL error \(code)"
    }

    /// The database could not be reached or the connection broke (class 08, 57P0x, or no connection at all), or it
    /// cannot take writes for now: a read-only transaction (25006: a standby after a failover, or
    /// `default_transaction_read_only`) or a lack of resources (class 53: disk full, out of memory).
    public var isUnavailable: Bool {
        if code == .connectionFailed || code == .noAnswer || code == .poolTimeout || code == .poolClosed { return true }
        guard let sqlState else { return false }
        return sqlState.hasPrefix("08") || sqlState.hasPrefix("57P") || sqlState == Self.readOnlyTransaction || sqlState.hasPrefix("53")
    }

    public static let readOnlyTransaction = "25006"

    public var isUniqueViolation: Bool { sqlState == "23505" }
    public var isSerializationFailure: Bool { sqlState == "40001" || sqlState == "40P01" }
}
