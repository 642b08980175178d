/// What services and handlers see of any failure below them; API maps these to problem+json in one table.
public struct DomainError: Error, Sendable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        public let raw: String
        public var description: String { raw }
        public init(_ raw: String) { self.raw = raw }

        public static let notFound = Code("not_found")
        /// The resource's state does not allow the operation (closing a pending ticket…).
        public static let conflict = Code("conflict")
        /// A value the upstream refused as invalid.
        public static let invalid = Code("invalid")
        public static let unauthorized = Code("unauthorized")
        public static let forbidden = Code("forbidden")
        /// Desk did not answer in time, answered 5xx, or the breaker is open.
        public static let upstreamUnavailable = Code("upstream_unavailable")
        /// Desk may still be carrying out an earlier attempt of this write: repeating it now could make it twice.
        public static let upstreamPending = Code("upstream_pending")
        public static let rateLimited = Code("rate_limited")
        /// Desk answered something the client could not understand.
        public static let upstreamProtocol = Code("upstream_protocol")
        /// The gateway's own database cannot be reached right now (a retry later may work).
        public static let storeUnavailable = Code("store_unavailable")
        /// The database refused a statement: a defect, never the client's fault (`internalDetail` says what).
        public static let storeFailure = Code("store_failure")
        /// A statement ran past `statement_timeout` (SQLSTATE 57014): load, not a defect; a retry later may work.
        public static let storeTimeout = Code("store_timeout")
        /// A queued write whose stored payload lacks what its kind needs: a defect or a hand edit, never tried on Desk.
        public static let unreadablePayload = Code("unreadable_payload")
    }

    public let code: Code
    /// Safe to show to clients: never carries upstream bodies or secrets.
    public let message: String
    public let retryAfterSeconds: Int?
    /// What the upstream said (its `detail`/`code`), for logs only; never sent to clients.
    public let internalDetail: String?
    /// A write Desk may have carried out although the call failed (its answer never came, or was an error of Desk's
    /// own): a retry may repeat it.
    public private(set) var mayHaveTakenEffect = false
    /// Of those, a write Desk had not finished with when the gateway stopped waiting (no answer in time, a transfer cut
    /// or abandoned): Desk may carry it out later still.
    public private(set) var mayStillTakeEffect = false

    /// Of a conflict: the ticket's status on Desk when it refused (for the problem's `ticketStatus`), when known.
    public private(set) var ticketStatus: TicketStatus?

    public init(_ code: Code, _ message: String, retryAfterSeconds: Int? = nil, internalDetail: String? = nil) {
        self.code = code
        self.message = message
        self.retryAfterSeconds = retryAfterSeconds
        self.internalDetail = internalDetail
    }

    /// The same failure, of a write that may have taken effect (`stillUnderWay`: or may take effect later).
    public func effectUnknown(stillUnderWay: Bool = false) -> DomainError {
        var error = self
        error.mayHaveTakenEffect = true
        error.mayStillTakeEffect = mayStillTakeEffect || stillUnderWay
        return error
    }

    /// The same failure, naming the ticket's status as Desk has it.
    public func with(ticketStatus status: TicketStatus?) -> DomainError {
        var error = self
        error.ticketStatus = status
        return error
    }

    /// Desk gave no usable answer (down, rate limited, or an answer the gateway cannot read, such as a proxy's page):
    /// a read that has a cached copy serves it, marked stale, as it does while Desk is away.
    public var deskGaveNoUsableAnswer: Bool {
        code == .upstreamUnavailable || code == .rateLimited || code == .upstreamProtocol
    }

    public var description: String { "\(code): \(message)" }

    /// What a log line says of any error: a `DomainError` in a client's words and what lies behind it (the database's
    /// or Desk's own words), another as it describes itself.
    public static func logged(_ error: any Error) -> String {
        guard let error = error as? DomainError else { return "\(error)" }
        return error.internalDetail.map { "\(error.description) (\($0))" } ?? error.description
    }
}
