internal import CLibPQ
#if canImport(Glibc)
import Glibc
#endif

/// One libpq connection. Used by one thread at a time: the pool hands it to a job on the pool's own thread,
/// so it is deliberately not `Sendable`. Statements are prepared once per connection and then executed by name
/// (or sent unnamed behind a transaction pooler).
public final class PostgresConnection {
    private var raw: OpaquePointer?
    private let keywords: [String]
    private let values: [String]
    private var prepared: [String: String] = [:]
    /// Statements sent during the current job; a dead connection is retried only for the first one.
    var statementsInJob = 0
    /// Whether the current statement's execution was handed to the server: a connection lost after that, with no
    /// answer, may have run it (and committed it), so it is not sent again.
    private var executionSent = false
    var inTransaction = false
    /// How long a statement may go without its answer before the connection is given up: the server's
    /// `statement_timeout` and a margin. The server ends the statements it runs; this ends the wait for one it can no
    /// longer answer (a stopped backend, storage that stalled, a proxy that queues it), which keepalives and
    /// `tcp_user_timeout` cannot see, since the server's kernel still acknowledges every byte.
    private let answerWithin: Duration
    /// Set by `withoutStatementTimeout` for the rest of the transaction (migrations, a zone's backfill).
    var unbounded = false

    /// Unnamed statements only (see `PostgresConfiguration.transactionPooling`).
    private let unnamed: Bool

    /// Before `dbname`, so the connection string's own values win: a server that stops answering (its host gone, the
    /// network cut, a failover that moved its address) is noticed in about half a minute instead of the kernel's two
    /// hours, and the statement waiting on it fails as a dropped connection would.
    static let deadServerDetection: [(String, String)] = [
        ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3"),
        ("tcp_user_timeout", "20000"),
    ]

    init(configuration: PostgresConfiguration) {
        unnamed = configuration.transactionPooling
        answerWithin = .milliseconds(configuration.statementTimeoutMilliseconds) + Self.answerMargin
        var keywords = Self.deadServerDetection.map(\.0) + ["dbname", "connect_timeout", "application_name"]
        var values = Self.deadServerDetection.map(\.1)
            + [configuration.connectionString, String(configuration.connectTimeoutSeconds), configuration.applicationName]
        // pgbouncer refuses an `options` startup parameter.
        if !configuration.transactionPooling {
            keywords.append("options")
            values.append("-c statement_timeout=\(configuration.statementTimeoutMilliseconds) -c client_min_messages=warning")
        }
        self.keywords = keywords
        self.values = values
    }

    /// The value in effect of a libpq connection option (`keepalives_idle`, …), nil when unset or not connected; for
    /// tests.
    package func option(_ keyword: String) -> String? {
        guard let raw, let options = PQconninfo(raw) else { return nil }
        defer { PQconninfoFree(options) }
        var index = 0
        while let name = options[index].keyword {
            if String(cString: name) == keyword { return options[index].val.map { String(cString: $0) } }
            index += 1
        }
        return nil
    }

    /// A connection outside any pool, for work that must stay synchronous; it connects on first use and again
    /// after it broke (see `connectIfNeeded`).
    public static func standalone(_ configuration: PostgresConfiguration) -> PostgresConnection {
        PostgresConnection(configuration: configuration)
    }

    deinit { close() }

    public func connectIfNeeded() throws { try ensureConnected() }

    var isConnected: Bool {
        guard let raw else { return false }
        return PQstatus(raw) == CONNECTION_OK
    }

    func connect() throws {
        close()
        let connection = withCStringArray(keywords) { keys in
            withCStringArray(values) { vals in PQconnectdbParams(keys, vals, 1) }
        }
        guard let connection else { throw PostgresError(code: .connectionFailed, detail: "out of memory") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(connection))
            PQfinish(connection)
            throw PostgresError(code: .connectionFailed, detail: message)
        }
        // Server notices (e.g. "terminating connection") would otherwise go straight to stderr.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        // Every wait is then a `poll` with the answer's deadline (`exchange`), sending included.
        guard PQsetnonblocking(connection, 1) == 0 else {
            PQfinish(connection)
            throw PostgresError(code: .connectionFailed, detail: "could not make the connection non-blocking")
        }
        raw = connection
    }

    func close() {
        if let raw { PQfinish(raw) }
        raw = nil
        prepared.removeAll()
    }

    func ensureConnected() throws {
        if !isConnected { try connect() }
    }

    /// A connection closed inside a transaction (it broke, or refused a write) is not opened again there: the
    /// statements after it would run outside the transaction, each committed on its own.
    private func connectedForStatement() throws {
        if inTransaction && !isConnected {
            throw PostgresError(code: .connectionFailed, detail: "the connection closed inside a transaction")
        }
        if statementsInJob == 0 && !inTransaction { closeIfServerHungUp() }
        executionSent = false
        try ensureConnected()
    }

    /// A connection the server closed while it sat idle (a restart, a failover, a terminated backend) has the
    /// server's goodbye waiting on its socket: seen before anything is sent, it is opened again, so nothing is sent
    /// twice. Notifications read on the way stay queued for `notifications`.
    private func closeIfServerHungUp() {
        guard let raw else { return }
        var descriptor = pollfd(fd: PQsocket(raw), events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 0) > 0 else { return }
        if PQconsumeInput(raw) == 0 || PQstatus(raw) != CONNECTION_OK { close() }
    }

    /// Waits up to `timeoutMilliseconds` for notifications on the channels this connection LISTENs to and returns
    /// their payloads (empty when none came). Throws when the connection broke: the caller reconnects and listens
    /// again, knowing it may have missed some.
    public func notifications(timeoutMilliseconds: Int32) throws -> [String] {
        guard let raw, PQstatus(raw) == CONNECTION_OK else { throw PostgresError(code: .connectionFailed, detail: "not connected") }
        var payloads = Self.drain(raw)
        guard payloads.isEmpty else { return payloads }
        var descriptor = pollfd(fd: PQsocket(raw), events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, timeoutMilliseconds)
        if ready < 0, errno != EINTR { throw PostgresError(code: .connectionFailed, detail: "poll failed") }
        if ready > 0 {
            guard PQconsumeInput(raw) == 1 else {
                throw PostgresError(code: .connectionFailed, detail: String(cString: PQerrorMessage(raw)))
            }
            payloads = Self.drain(raw)
        }
        return payloads
    }

    private static func drain(_ raw: OpaquePointer) -> [String] {
        var payloads: [String] = []
        while let notice = PQnotifies(raw) {
            payloads.append(notice.pointee.extra.map { String(cString: $0) } ?? "")
            PQfreemem(notice)
        }
        return payloads
    }

    /// Runs one statement with bound parameters (prepared on first use on this connection).
    @discardableResult
    public func query(_ sql: String, _ binds: [any PostgresEncodable] = []) throws -> PostgresRows {
        let texts = try binds.map { value -> String? in
            let text = value.postgresText
            if let text, text.utf8.contains(0) {
                throw PostgresError(code: .invalidParameter, detail: "a parameter contains a NUL byte")
            }
            return text
        }
        do {
            return try run(sql, texts)
        } catch let error as PostgresError where error.code == .connectionFailed && statementsInJob <= 1 && !inTransaction
                    && (!executionSent || error.sqlState == PostgresError.readOnlyTransaction || sql == "BEGIN") {
            // The job's first statement met a dead connection before it was sent, or a standby refused it as a write:
            // it did not run, so it is tried once more on a new connection (which follows a failover). One sent whose
            // answer never came (the connection reset or closed, a shutdown's or a pooler's error instead of the
            // answer) may have committed: sent again, a counter would count twice; it fails instead (503). BEGIN
            // alone changes nothing.
            statementsInJob = 0
            try connect()
            return try run(sql, texts)
        }
    }

    /// Whether the server refuses writes on this connection (a standby, or `default_transaction_read_only`). Such a
    /// connection is closed, as after a write it refused, so the next use connects again and follows a failover.
    public func refusesWrites() throws -> Bool {
        let readOnly = try query("SELECT current_setting('transaction_read_only') = 'on'")[0].decode(0, as: Bool.self)
        if readOnly { close() }
        return readOnly
    }

    /// Runs SQL text with no parameters through the simple protocol; several statements are allowed (migrations).
    public func execute(script sql: String) throws {
        try connectedForStatement()
        statementsInJob += 1
        let result = try exchange { PQsendQuery($0, sql) }
        defer { PQclear(result) }
        _ = try check(result)
    }

    /// Lifts the statement timeout for the rest of the current transaction, the server's and the wait for an answer
    /// (work that may take longer than any request: migrations, a zone's backfill).
    public func withoutStatementTimeout() throws {
        precondition(inTransaction, "only inside a transaction")
        try query("SET LOCAL statement_timeout = 0")
        unbounded = true
    }

    private func run(_ sql: String, _ texts: [String?]) throws -> PostgresRows {
        try connectedForStatement()
        statementsInJob += 1
        if unnamed {
            // Parse, bind and execute in one round trip; nothing stays on the server connection.
            let result = try withCStringArray(texts) { params in
                try exchange { PQsendQueryParams($0, sql, Int32(texts.count), nil, params, nil, nil, 0) }
            }
            defer { PQclear(result) }
            return try check(result)
        }
        let name: String
        if let existing = prepared[sql] {
            name = existing
        } else {
            name = "s\(prepared.count)"
            let result = try exchange(executes: false) { PQsendPrepare($0, name, sql, 0, nil) }
            defer { PQclear(result) }
            _ = try check(result)
            prepared[sql] = name
        }
        let result = try withCStringArray(texts) { params in
            try exchange { PQsendQueryPrepared($0, name, Int32(texts.count), params, nil, nil, 0) }
        }
        defer { PQclear(result) }
        return try check(result)
    }

    static let answerMargin = Duration.seconds(2)

    /// Sends a command with `send` and collects its results as `PQexec` would (the first error, else the last
    /// result; nil when the connection failed), each wait bounded by the answer's deadline. Past it the connection is
    /// closed, since it can no longer be told where it stands, and `noAnswer` thrown: the statement is never sent again.
    private func exchange(executes: Bool = true, _ send: (OpaquePointer) -> Int32) throws -> OpaquePointer? {
        guard let raw else { return nil }
        let deadline = unbounded ? nil : ContinuousClock.now + answerWithin
        guard send(raw) == 1 else { return nil }
        if executes { executionSent = true }
        while true {
            let unsent = PQflush(raw)
            if unsent == 0 { break }
            if unsent < 0 { return PQgetResult(raw) }
            try waitForSocket(raw, Int16(POLLIN | POLLOUT), until: deadline)
            if PQconsumeInput(raw) == 0 { return PQgetResult(raw) }
        }
        var kept: OpaquePointer?
        while true {
            while PQisBusy(raw) == 1 {
                try waitForSocket(raw, Int16(POLLIN), until: deadline)
                if PQconsumeInput(raw) == 0 { break }
            }
            guard let result = PQgetResult(raw) else { break }
            if let earlier = kept, PQresultStatus(earlier) == PGRES_FATAL_ERROR {
                PQclear(result)
            } else {
                PQclear(kept)
                kept = result
            }
            if PQstatus(raw) != CONNECTION_OK { break }
        }
        return kept
    }

    private func waitForSocket(_ raw: OpaquePointer, _ events: Int16, until deadline: ContinuousClock.Instant?) throws {
        var descriptor = pollfd(fd: PQsocket(raw), events: events, revents: 0)
        while true {
            var timeout: Int32 = -1
            if let deadline {
                let left = max(.zero, deadline - .now)
                let (seconds, attoseconds) = left.components
                timeout = left == .zero ? 0 : Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            }
            let ready = poll(&descriptor, 1, timeout)
            if ready > 0 || (ready < 0 && errno != EINTR) { return }
            // Past the deadline only after a look at the socket: a thread kept off the CPU that long finds its answer waiting.
            if timeout == 0 {
                close()
                throw PostgresError(code: .noAnswer, detail: "no answer within \(answerWithin); the connection was closed")
            }
        }
    }

    private func check(_ result: OpaquePointer?) throws -> PostgresRows {
        guard let result else { throw failure(nil) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return PostgresRows(cells: .empty, affectedRows: affected(result))
        case PGRES_TUPLES_OK:
            return copyRows(result)
        default:
            throw failure(result)
        }
    }

    private func failure(_ result: OpaquePointer?) -> PostgresError {
        let broken = raw.map { PQstatus($0) != CONNECTION_OK } ?? true
        var state: String?
        var message = raw.map { String(cString: PQerrorMessage($0)) } ?? "no connection"
        if let result {
            if let field = PQresultErrorField(result, Int32(UInt8(ascii: "C"))) { state = String(cString: field) }
            if let text = PQresultErrorMessage(result), text.pointee != 0 { message = String(cString: text) }
        }
        // A server that refuses writes is a standby (a failover moved the primary): the next statement connects
        // again, to wherever the connection string leads now (DNS, or `target_session_attrs=read-write`).
        if broken || state == PostgresError.readOnlyTransaction {
            close()
            return PostgresError(code: .connectionFailed, sqlState: state, detail: message)
        }
        return PostgresError(code: .queryFailed, sqlState: state, detail: message)
    }

    private func affected(_ result: OpaquePointer) -> Int {
        guard let text = PQcmdTuples(result) else { return 0 }
        return Int(String(cString: text)) ?? 0
    }

    private func copyRows(_ result: OpaquePointer) -> PostgresRows {
        let rowCount = Int(PQntuples(result))
        let columnCount = Int(PQnfields(result))
        var columns: [String] = []
        columns.reserveCapacity(columnCount)
        for c in 0..<columnCount { columns.append(String(cString: PQfname(result, Int32(c)))) }
        // First where each value goes, then the copies: libpq is asked each value's length once, and whether it is
        // NULL only when the length is 0 (a weekly report's 25,000 values made 100,000 calls into libpq).
        var starts = [Int](repeating: -1, count: rowCount * columnCount)
        var ends = starts
        var total = 0
        starts.withUnsafeMutableBufferPointer { starts in
            ends.withUnsafeMutableBufferPointer { ends in
                var cell = 0
                for r in 0..<Int32(rowCount) {
                    for c in 0..<Int32(columnCount) {
                        defer { cell += 1 }
                        let length = Int(PQgetlength(result, r, c))
                        if length == 0, PQgetisnull(result, r, c) != 0 { continue }
                        starts[cell] = total
                        total += length
                        ends[cell] = total
                    }
                }
            }
        }
        // Written in place, each cell once: an `append` per cell (a report's thousands of numbers) was most of the copy.
        let text = [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
            var cell = 0
            for r in 0..<Int32(rowCount) {
                for c in 0..<Int32(columnCount) {
                    defer { cell += 1 }
                    let (at, length) = (starts[cell], ends[cell] - starts[cell])
                    guard length > 0, let target = buffer.baseAddress, let value = PQgetvalue(result, r, c) else { continue }
                    value.withMemoryRebound(to: UInt8.self, capacity: length) { source in
                        // Most cells are a few digits: a loop beats a call to memmove for them.
                        if length <= 16 {
                            for offset in 0..<length { target[at + offset] = source[offset] }
                        } else {
                            (target + at).update(from: source, count: length)
                        }
                    }
                }
            }
            initialized = total
        }
        return PostgresRows(cells: ResultCells(columns: columns, rowCount: rowCount, text: text, starts: starts, ends: ends), affectedRows: 0)
    }
}

/// NUL-terminated copies that live for the duration of `body` (libpq reads parameters synchronously): one buffer for
/// all of them and one for the pointers, on the stack when small (a `strdup` per parameter was an allocation each).
func withCStringArray<R>(_ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>) throws -> R) rethrows -> R {
    var total = 0
    for string in strings { total += (string?.utf8.count ?? 0) + 1 }
    return try withUnsafeTemporaryAllocation(of: UInt8.self, capacity: max(1, total)) { bytes in
        try withUnsafeTemporaryAllocation(of: UnsafePointer<CChar>?.self, capacity: max(1, strings.count)) { pointers in
            var offset = 0
            for index in strings.indices {
                guard let string = strings[index] else {
                    pointers[index] = nil
                    continue
                }
                let start = offset
                offset = UnsafeMutableBufferPointer(rebasing: bytes[offset...]).initialize(from: string.utf8).1 + offset
                bytes[offset] = 0
                offset += 1
                pointers[index] = UnsafeRawPointer(bytes.baseAddress! + start).assumingMemoryBound(to: CChar.self)
            }
            return try body(UnsafePointer(pointers.baseAddress!))
        }
    }
}

func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) throws -> R) rethrows -> R {
    // libpq's keyword/value arrays end with a NULL entry.
    try withCStringArray(strings.map { Optional($0) } + [nil], body)
}
