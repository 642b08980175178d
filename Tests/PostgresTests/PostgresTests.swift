import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Postgres
import Testing
import TestSupport

func withPool<T: Sendable>(size: Int = 4, _ body: (PostgresPool) async throws -> T) async throws -> T {
    try await TestPostgres.withDatabase { url in
        let pool = PostgresPool(configuration: PostgresConfiguration.forTests(url, poolSize: size))
        defer { pool.shutdown() }
        return try await body(pool)
    }
}

@Suite struct PostgresTests {
    /// A command that exits right after `shutdown` must find no pool thread inside libpq (exit's handlers tore OpenSSL
    /// down under one still connecting, a crash the Compose test met). A server that takes connections and never
    /// answers keeps both threads connecting; `shutdown` waits for them.
    @Test func shutdownWaitsForThreadsStillConnecting() throws {
        let (listener, port) = try #require(loopbackListener())
        defer { close(listener) }
        let pool = PostgresPool(configuration: PostgresConfiguration.forTests(
            "host=127.0.0.1 port=\(port) user=nobody dbname=nothing sslmode=disable", poolSize: 2,
            connectTimeoutSeconds: 2))
        #expect(pool.threadsRunning == 2)
        let started = ContinuousClock.now
        pool.shutdown()
        let waited = ContinuousClock.now - started
        #expect(pool.threadsRunning == 0)
        #expect(waited > .milliseconds(500), "shutdown returned after \(waited), before the connects could end")
        #expect(waited < .seconds(7), "\(waited)")
    }

    /// The kernel knows the pool's threads by name (`top -H`, `perf`): they once kept the name of the thread that
    /// started them, the cooperative pool's.
    @Test func poolThreadsAreNamedForTheKernel() async throws {
        try await withPool(size: 2) { pool in
            let name = try await pool.withConnection { _ in
                try String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8).trimmingCharacters(in: .newlines)
            }
            #expect(name == "postgres-0" || name == "postgres-1", "\(name)")
        }
    }

    @Test func hostileValuesRoundTripUnchangedAsBoundParameters() async throws {
        try await withPool { pool in
            try await pool.query("CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL)")
            let hostile = "Robert'); DROP TABLE notes; -- \"quoted\" \\ back ✓ 😀"
            let inserted = try await pool.query("INSERT INTO notes (body) VALUES ($1) RETURNING id", [hostile])
            let id: Int = try inserted[0].decode(0)
            let read = try await pool.query("SELECT body FROM notes WHERE id = $1", [id])
            #expect(try read[0].decode(0, as: String.self) == hostile)
            let tables = try await pool.query("SELECT count(*) FROM pg_tables WHERE tablename = 'notes'")
            #expect(try tables[0].decode(0, as: Int.self) == 1)
        }
    }

    /// A float8 read from its digits is the same Double the string parser makes of them, bit for bit: epoch times
    /// with fractions (the list's keyset cursor is built from them), every magnitude and sign PostgreSQL prints,
    /// and the forms only the parser reads.
    @Test func floatsDecodeBitForBitAsTheirText() async throws {
        try await withPool { pool in
            let rows = try await pool.query("""
                SELECT x, x::text FROM (
                  SELECT extract(epoch FROM timestamptz '2026-11-27 21:15:16.385+00' + n * interval '1.234567 s')::float8 FROM generate_series(1, 500) n
                  UNION ALL SELECT (random() * 10 ^ (n % 25 - 6) * CASE WHEN n % 2 = 0 THEN 1 ELSE -1 END)::float8 FROM generate_series(1, 2000) n
                  UNION ALL SELECT unnest('{0,-0,0.1,1e-7,9007199254740991,9007199254740993,1e300,NaN,Infinity,-Infinity}'::float8[])
                ) AS t(x)
                """)
            #expect(rows.count == 2510)
            for row in rows {
                let text = try #require(row[1])
                let decoded = try row.decode(0, as: Double.self)
                let parsed = try #require(Double(text))
                #expect(decoded.bitPattern == parsed.bitPattern || (decoded.isNaN && parsed.isNaN), "\(text)")
            }
        }
        for text in ["0", "-0", "1.5", "-1764278116.385", "123456789012345678.5", "9007199254740993", "0.1234567890123456789012345",
                     "1e5", "NaN", "Infinity", "-Infinity", "1.", ".5", "", "-", "1.2.3", "12a", "--1"] {
            let bytes = Array(text.utf8)
            let decoded = bytes.withUnsafeBufferPointer { Double(postgresUTF8: $0) }
            let parsed = Double(text)
            #expect(decoded?.bitPattern == parsed?.bitPattern || (decoded?.isNaN == true && parsed?.isNaN == true), "\(text)")
        }
    }

    @Test func arraysAndNullsBindCorrectly() async throws {
        try await withPool { pool in
            let rows = try await pool.query("SELECT x FROM unnest($1::text[]) AS x WHERE x IS NOT NULL ORDER BY x",
                                            [["b", "a,\"c\"", "d\\e"]])
            #expect(rows.map { $0[0] } == ["a,\"c\"", "b", "d\\e"])
            // A quote or backslash that opens a grapheme cluster (an emoji modifier, a combining accent after it).
            let clustered = ["\"\u{1F3FB}x", "\\\u{301}y", "\"\u{301}\\\u{1F3FB}", "\r\n\"", "z\u{3}\u{9C}"]
            let back = try await pool.query("SELECT x FROM unnest($1::text[]) WITH ORDINALITY AS u (x, n) ORDER BY n", [clustered])
            #expect(back.map { $0[0] } == clustered)
            // Numbers go unquoted, optional ones quoted, nil as NULL.
            let numbers = [0, -1, 7, 20_424, -800, Int.max, Int.min]
            let numbersBack = try await pool.query("SELECT x FROM unnest($1::bigint[]) WITH ORDINALITY AS u (x, n) ORDER BY n", [numbers])
            #expect(try numbersBack.map { try $0.decode(0, as: Int.self) } == numbers)
            let optional: [Int?] = [3, nil, -4]
            let optionalBack = try await pool.query("SELECT x FROM unnest($1::bigint[]) WITH ORDINALITY AS u (x, n) ORDER BY n", [optional])
            #expect(try optionalBack.map { try $0.decodeIfPresent(0, as: Int.self) } == optional)
            let null = try await pool.query("SELECT $1::int IS NULL", [PostgresNull()])
            #expect(try null[0].decode(0, as: Bool.self))
        }
    }

    /// NULLs, empty values, short and long ones side by side in every row: each read back as it was sent.
    @Test func nullsAndEmptyValuesKeepTheirPlaces() async throws {
        try await withPool { pool in
            let long = String(repeating: "long value ", count: 10)
            let rows = try await pool.query("""
                SELECT n, CASE WHEN n % 2 = 0 THEN NULL ELSE '' END, CASE WHEN n % 3 = 0 THEN $1 ELSE 'x' || n END, NULL::int, ''
                  FROM generate_series(1, 50) AS n ORDER BY n
                """, [long])
            #expect(rows.count == 50)
            for (index, row) in rows.enumerated() {
                let n = index + 1
                #expect(row[0] == String(n) && row[1] == (n % 2 == 0 ? nil : "") && row[2] == (n % 3 == 0 ? long : "x\(n)"))
                #expect(row[3] == nil && row[4] == "")
            }
        }
    }

    /// Rows lent in place (`forEachRow`, how reports read thousands) read as the result's rows do: every value in its
    /// place, NULL as nil, and a NULL or a value of another type refused when decoded as a number.
    @Test func rowsLentInPlaceReadAsTheRowsDo() async throws {
        try await withPool { pool in
            let rows = try await pool.query("""
                SELECT n, CASE WHEN n % 4 = 0 THEN NULL ELSE n * 1000003 END, CASE WHEN n % 3 = 0 THEN repeat('v', n) ELSE '' END, 'x' || n
                  FROM generate_series(1, 200) AS n ORDER BY n
                """)
            var lent: [String] = []
            var refused = 0
            try rows.forEachRow { row in
                let n: Int = try row.decode(0)
                let big = try row.decodeIfPresent(1, as: Int64.self)
                lent.append("\(n) \(big.map(String.init) ?? "null") \(try row.decode(2, as: String.self)) \(try row.decode(3, as: String.self))")
                if (try? row.decode(3, as: Int.self)) == nil { refused += 1 }
                if n % 4 == 0, (try? row.decode(1, as: Int.self)) == nil { refused += 1 }
                let pastTheEnd = try row.decodeIfPresent(9, as: Int.self)
                #expect(pastTheEnd == nil)
            }
            let indexed = try rows.map { row in
                "\(try row.decode(0, as: Int.self)) \(row[1] ?? "null") \(row[2] ?? "?") \(row[3] ?? "?")"
            }
            #expect(lent == indexed && lent.count == 200)
            #expect(lent[2] == "3 3000009 vvv x3" && lent[3] == "4 null  x4")
            #expect(refused == 250)
        }
    }

    /// Rows are a result's own: they stay whole after their connection ran other statements, read in another task,
    /// and when only one row of them is kept.
    @Test func rowsOutliveTheirConnectionsLaterStatements() async throws {
        try await withPool(size: 1) { pool in
            let first = try await pool.query("SELECT n, 'first ' || n, NULL::text FROM generate_series(1, 300) AS n ORDER BY n")
            let kept = try #require(try await pool.query("SELECT 'kept', 7, NULL::int").first)
            for _ in 0..<20 { _ = try await pool.query("SELECT n, repeat('overwrite', 50) FROM generate_series(1, 500) AS n") }
            let read = try await Task.detached { () throws -> [String] in
                try first.map { "\(try $0.decode(0, as: Int.self)) \($0[1] ?? "?") \(try $0.decodeIfPresent(2, as: String.self) ?? "null")" }
            }.value
            #expect(read == (1...300).map { "\($0) first \($0) null" })
            let seven = try kept.decode(1, as: Int.self)
            #expect(kept[0] == "kept" && seven == 7 && kept[2] == nil && kept[5] == nil)
            #expect(first.columns == ["n", "?column?", "text"])
        }
    }

    @Test func nulBytesAreRejectedBeforeReachingTheServer() async throws {
        _ = try await withPool { pool in
            await #expect(throws: PostgresError.self) {
                try await pool.query("SELECT $1::text", ["a\u{0}b"])
            }
        }
    }

    @Test func failedTransactionRollsBackEverything() async throws {
        try await withPool { pool in
            try await pool.query("CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)")
            try await pool.query("INSERT INTO accounts VALUES (1, 100)")
            await #expect(throws: PostgresError.self) {
                try await pool.transaction { tx in
                    try tx.query("UPDATE accounts SET balance = balance - 40 WHERE id = 1")
                    try tx.query("INSERT INTO accounts VALUES (1, 5)") // duplicate key
                }
            }
            let balance = try await pool.query("SELECT balance FROM accounts WHERE id = 1")
            #expect(try balance[0].decode(0, as: Int.self) == 100)
            // The connection is usable again after the rollback.
            let committed = try await pool.transaction { tx in
                try tx.query("UPDATE accounts SET balance = balance - 40 WHERE id = 1")
                return try tx.query("SELECT balance FROM accounts WHERE id = 1")[0].decode(0, as: Int.self)
            }
            #expect(committed == 60)
        }
    }

    /// A connection that closes inside a transaction (here its backend is ended) is not opened again for the
    /// statements after it: they would run outside the transaction and be committed one by one.
    @Test func aConnectionLostInATransactionIsNotReopenedThere() async throws {
        try await withPool(size: 1) { pool in
            try await pool.query("CREATE TABLE notes (id int PRIMARY KEY)")
            let error = await #expect(throws: PostgresError.self) {
                try await pool.transaction { tx in
                    try tx.query("INSERT INTO notes VALUES (1)")
                    _ = try? tx.query("SELECT pg_terminate_backend(pg_backend_pid())")
                    try tx.query("INSERT INTO notes VALUES (2)")
                }
            }
            #expect(error?.code == .connectionFailed)
            #expect(try await pool.query("SELECT count(*) FROM notes")[0].decode(0, as: Int.self) == 0)
        }
    }

    /// A write refused as read-only (a standby, or `default_transaction_read_only`) closes the connection, so the
    /// next statement connects again and follows a failover; the error counts as the database being unavailable.
    @Test func aWriteRefusedAsReadOnlyClosesItsConnection() async throws {
        try await withPool(size: 1) { pool in
            try await pool.query("CREATE TABLE notes (id int PRIMARY KEY)")
            let before = try await pool.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self)
            do {
                try await pool.transaction { tx in
                    try tx.query("SET TRANSACTION READ ONLY")
                    try tx.query("INSERT INTO notes VALUES (1)")
                }
                Issue.record("a write in a read-only transaction was taken")
            } catch let error as PostgresError {
                #expect(error.sqlState == PostgresError.readOnlyTransaction && error.isUnavailable)
            }
            #expect(try await pool.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self) != before)
            try await pool.query("INSERT INTO notes VALUES (1)")
        }
    }

    @Test func errorsCarrySQLStateButNeverTheStatement() async throws {
        try await withPool { pool in
            try await pool.query("CREATE TABLE uniq (v text UNIQUE)")
            try await pool.query("INSERT INTO uniq VALUES ($1)", ["secret-value"])
            do {
                try await pool.query("INSERT INTO uniq VALUES ($1)", ["secret-value"])
                Issue.record("duplicate insert succeeded")
            } catch let error as PostgresError {
                #expect(error.isUniqueViolation)
                #expect(!error.description.contains("secret-value"))
                #expect(!error.description.contains("INSERT"))
            }
        }
    }

    @Test func poolBoundsConcurrencyAndQueuesTheRest() async throws {
        try await TestPostgres.withDatabase { url in
            let pool = PostgresPool(configuration: PostgresConfiguration.forTests(url, poolSize: 3))
            let blocker = PostgresPool(configuration: PostgresConfiguration.forTests(url, poolSize: 1))
            defer { pool.shutdown(); blocker.shutdown() }
            // Every query waits on a lock the blocker holds, so the counts hold still however slowly this test is scheduled.
            try await blocker.query("SELECT pg_advisory_lock(42)")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<9 { group.addTask { try await pool.query("SELECT pg_advisory_xact_lock_shared(42)") } }
                await eventually(every: .milliseconds(5)) { pool.statistics.inUse >= 3 && pool.statistics.waiting >= 6 }
                let stats = pool.statistics
                #expect(stats.inUse == 3)
                #expect(stats.waiting == 6)
                try await blocker.query("SELECT pg_advisory_unlock(42)")
                try await group.waitForAll()
            }
            #expect(pool.statistics.inUse == 0)
            #expect(pool.statistics.waiting == 0)
        }
    }

    /// A caller waits for a connection at most the acquire timeout, even while every connection stays busy (a long
    /// statement, a server that stopped answering), not until one frees.
    @Test func aWaitForAConnectionEndsAtTheAcquireTimeout() async throws {
        try await withTheOnlyConnectionBusy(acquireTimeoutMilliseconds: 500) { pool in
            let before = pool.statistics.timedOut
            var failedWhileBusy = false
            do {
                try await pool.query("SELECT 1")
                Issue.record("the query ran although the only connection was busy")
            } catch let error as PostgresError {
                #expect(error.code == .poolTimeout)
                failedWhileBusy = pool.statistics.inUse == 1
                #expect(pool.statistics.timedOut - before == 1)
            }
            #expect(failedWhileBusy, "the wait ended only when the connection was free again")
        }
    }

    /// Capped statements hold no more connections than the cap at once, in turn; the others take theirs meanwhile.
    @Test func cappedStatementsWaitForTheirShareAndLeaveTheRest() async throws {
        try await withTheCappedConnectionBusy(poolSize: 3, acquireTimeoutMilliseconds: TestLimits.acquireTimeoutMilliseconds) { pool in
            let waiting = Task { try await PostgresPool.capped { try await pool.query("SELECT 7")[0].decode(0, as: Int.self) } }
            try #require(await eventually(within: 30, every: .milliseconds(5)) { pool.statistics.waiting == 1 })
            // Uncapped statements pass it: two connections are free.
            let (a, b) = (try await pool.query("SELECT 2")[0].decode(0, as: Int.self), try await pool.query("SELECT 3")[0].decode(0, as: Int.self))
            #expect((a, b) == (2, 3))
            try await Task.sleep(for: .milliseconds(200))
            #expect(pool.statistics.waiting == 1, "the capped statement ran while the cap was held")
            #expect(pool.statistics.inUse == 1)
            return waiting
        }
    }

    /// A capped statement waits no longer for its share than any statement waits for a connection.
    @Test func aCappedStatementWaitsNoLongerThanTheAcquireTimeout() async throws {
        try await withTheCappedConnectionBusy(poolSize: 2, acquireTimeoutMilliseconds: 300) { pool in
            let before = pool.statistics.timedOut
            do {
                _ = try await PostgresPool.capped { try await pool.query("SELECT 1") }
                Issue.record("the capped statement ran while the cap was held")
            } catch let error as PostgresError {
                #expect(error.code == .poolTimeout)
                #expect(pool.statistics.timedOut - before == 1)
            }
            #expect(try await pool.query("SELECT 2")[0].decode(0, as: Int.self) == 2)
            return nil
        }
    }

    /// A pool capping its capped statements at one connection, that one held by a capped statement waiting on a lock
    /// another pool holds until `body` ends; then the statement `body` left waiting (if any) must run, answering 7.
    private func withTheCappedConnectionBusy(poolSize: Int, acquireTimeoutMilliseconds: Int,
                                             _ body: (PostgresPool) async throws -> Task<Int, any Error>?) async throws {
        try await TestPostgres.withDatabase { url in
            let pool = PostgresPool(configuration: PostgresConfiguration(
                connectionString: url, poolSize: poolSize, connectTimeoutSeconds: TestLimits.connectTimeoutSeconds,
                statementTimeoutMilliseconds: 60_000, acquireTimeoutMilliseconds: acquireTimeoutMilliseconds, cappedConnections: 1))
            let blocker = PostgresPool(configuration: PostgresConfiguration.forTests(url, poolSize: 1))
            defer { pool.shutdown(); blocker.shutdown() }
            try #require(await eventually(within: 60, every: .milliseconds(50)) { (try? await pool.query("SELECT 1")) != nil })
            try await blocker.query("SELECT pg_advisory_lock(44)")
            let holder = Task { try await PostgresPool.capped { try await pool.query("SELECT pg_advisory_xact_lock_shared(44)") } }
            try #require(await eventually(within: 60, every: .milliseconds(5)) { pool.statistics.inUse == 1 })
            let left = try await body(pool)
            try await blocker.query("SELECT pg_advisory_unlock(44)")
            _ = try await holder.value
            if let left { #expect(try await left.value == 7) }
        }
    }

    /// A pool of one whose connection waits on a lock another pool holds (let go after `body`, or after 20 s in any
    /// case, so a pool that waits for the connection still ends the test); the pool answers again afterwards.
    private func withTheOnlyConnectionBusy(acquireTimeoutMilliseconds: Int, _ body: (PostgresPool) async throws -> Void) async throws {
        try await TestPostgres.withDatabase { url in
            let pool = PostgresPool(configuration: PostgresConfiguration(
                connectionString: url, poolSize: 1, connectTimeoutSeconds: TestLimits.connectTimeoutSeconds,
                statementTimeoutMilliseconds: 60_000, acquireTimeoutMilliseconds: acquireTimeoutMilliseconds))
            let blocker = PostgresPool(configuration: PostgresConfiguration.forTests(url, poolSize: 1))
            defer { pool.shutdown(); blocker.shutdown() }
            // Connected first: on a loaded machine the connection may take longer than the wait allowed.
            try #require(await eventually(within: 60, every: .milliseconds(50)) { (try? await pool.query("SELECT 1")) != nil })
            try await blocker.query("SELECT pg_advisory_lock(43)")
            // The wait allowed is short on purpose, and on a loaded machine the busy query's own wait may run out before
            // the connection reaches it (a clean-clone run met this): it waits again until it holds the connection.
            let busy = Task {
                while true {
                    do { return try await pool.query("SELECT pg_advisory_xact_lock_shared(43)") }
                    catch let error as PostgresError where error.code == .poolTimeout { continue }
                }
            }
            try #require(await eventually(within: 60, every: .milliseconds(5)) { pool.statistics.inUse >= 1 })
            try #require(pool.statistics.inUse == 1)
            let release = Task {
                try await Task.sleep(for: .seconds(20))
                try await blocker.query("SELECT pg_advisory_unlock(43)")
            }
            try await body(pool)
            release.cancel()
            try await blocker.query("SELECT pg_advisory_unlock(43)")
            _ = try await busy.value
            // The wait allowed is short on purpose; on a loaded machine the freed connection may take longer to reach
            // the next caller, which is not what these tests are about.
            #expect(await eventually(within: 10, every: .milliseconds(50)) {
                (try? await pool.query("SELECT 2")[0].decode(0, as: Int.self)) == 2
            })
        }
    }

    /// A server whose kernel still acknowledges every byte but that answers nothing (its backend stopped; storage
    /// that stalled looks the same) is given up after the statement timeout and a margin: the connection is closed, the
    /// statement is not sent again, and the next use connects anew. Work that lifted the timeout waits as long as it
    /// takes, and only until its transaction ends.
    @Test func aServerThatStopsAnsweringIsGivenUpAfterTheStatementTimeout() async throws {
        try await TestPostgres.withDatabase { url in
            // 1 s: at 300 ms a trivial statement of the test's own was cancelled on a loaded host.
            let pool = PostgresPool(configuration: PostgresConfiguration.forTests(url, poolSize: 1, statementTimeoutMilliseconds: 1000))
            defer { pool.shutdown() }
            let pid = try await pool.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self)
            try #require(kill(pid_t(pid), SIGSTOP) == 0)
            let resumed = Task {
                try? await Task.sleep(for: .seconds(30))
                kill(pid_t(pid), SIGCONT)
            }
            let started = ContinuousClock.now
            do {
                try await pool.query("SELECT 1")
                Issue.record("a stopped backend answered")
            } catch let error as PostgresError {
                #expect(error.code == .noAnswer)
                #expect(error.isUnavailable)
            }
            let waited = ContinuousClock.now - started
            kill(pid_t(pid), SIGCONT)
            resumed.cancel()
            #expect(waited >= .milliseconds(3_000) && waited < .seconds(15), "waited \(waited)")
            #expect(try await pool.query("SELECT 2")[0].decode(0, as: Int.self) == 2)
            #expect(try await pool.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self) != pid)

            try await pool.withConnection { connection in
                try connection.transaction { tx in
                    try tx.withoutStatementTimeout()
                    try tx.query("SELECT pg_sleep(3.5)")
                }
            }
            await #expect(throws: PostgresError.self) { try await pool.query("SELECT pg_sleep(2)") }
        }
    }

    /// A statement the server ran whose answer was lost (the connection closed with no word) is not sent again on a
    /// new connection: an autocommit write would be made twice (it was, when the job's first statement was always
    /// tried once more). One that meets a connection the server ended while it sat idle is made, once, on a new one.
    @Test func aStatementWhoseAnswerWasLostIsNotSentAgain() async throws {
        try await TestPostgres.withDatabase { url in
            let relay = try LostAnswerRelay(to: url, marker: "answer lost")
            defer { relay.stop() }
            let pool = PostgresPool(configuration: PostgresConfiguration.forTests(relay.connectionString(url), poolSize: 1))
            defer { pool.shutdown() }
            let notes = { try await pool.query("SELECT count(*) FROM notes")[0].decode(0, as: Int.self) }
            try await pool.query("CREATE TABLE notes (body text NOT NULL)")
            do {
                try await pool.query("INSERT INTO notes (body) VALUES ($1)", ["answer lost"])
                Issue.record("the answer came through")
            } catch let error as PostgresError {
                #expect(error.code == .connectionFailed && error.sqlState == nil, "\(error)")
            }
            #expect(try await notes() == 1)

            let pid = try await pool.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self)
            let admin = PostgresPool(configuration: PostgresConfiguration.forTests(url, poolSize: 1))
            defer { admin.shutdown() }
            try await admin.query("SELECT pg_terminate_backend($1)", [pid])
            try #require(try await eventually {
                try await admin.query("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", [pid])[0].decode(0, as: Int.self) == 0
            })
            try await pool.query("INSERT INTO notes (body) VALUES ($1)", ["after the server hung up"])
            #expect(try await notes() == 2)
            #expect(try await pool.query("SELECT pg_backend_pid()")[0].decode(0, as: Int.self) != pid)
        }
    }

    /// While every connection stays busy, the waits that ran out are let go, not kept until a connection frees.
    @Test func waitsThatRanOutAreNotHeldWhileTheServerStalls() async throws {
        try await withTheOnlyConnectionBusy(acquireTimeoutMilliseconds: 50) { pool in
            let failed = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<3_000 { group.addTask { (try? await pool.query("SELECT 1")) == nil } }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(failed == 3_000)
            #expect(pool.statistics.inUse == 1)
            #expect(pool.queueEntriesHeld < 1_100, "\(pool.queueEntriesHeld) entries held")
        }
    }

    /// A server that stops answering is given up on in about half a minute (TCP keepalives and a user timeout), and a
    /// connection string's own values win over the gateway's.
    @Test func connectionsNoticeADeadServer() async throws {
        try await TestPostgres.withDatabase { url in
            let plain = PostgresConnection.standalone(PostgresConfiguration.forTests(url, poolSize: 1))
            try plain.connectIfNeeded()
            #expect(plain.option("keepalives") == "1" && plain.option("keepalives_idle") == "10")
            #expect(plain.option("keepalives_interval") == "5" && plain.option("keepalives_count") == "3")
            #expect(plain.option("tcp_user_timeout") == "20000")
            let tuned = PostgresConnection.standalone(PostgresConfiguration.forTests(url + " keepalives_idle=30 tcp_user_timeout=0", poolSize: 1))
            try tuned.connectIfNeeded()
            #expect(tuned.option("keepalives_idle") == "30" && tuned.option("tcp_user_timeout") == "0")
            #expect(try tuned.query("SELECT 1")[0].decode(0, as: Int.self) == 1)
        }
    }

    @Test func reconnectsAfterTheServerRestarts() async throws {
        try await TestPostgres.withPrivateCluster { cluster in
            let pool = PostgresPool(configuration: PostgresConfiguration.forTests(
                cluster.connectionString(database: "postgres"), poolSize: 2, connectTimeoutSeconds: 2))
            defer { pool.shutdown() }
            #expect(try await pool.query("SELECT 1")[0].decode(0, as: Int.self) == 1)
            await cluster.stop(force: true)
            await #expect(throws: PostgresError.self) { try await pool.query("SELECT 1") }
            try await cluster.start()
            // Every connection of the pool was cut; each one comes back on its next use.
            for _ in 0..<4 {
                #expect(try await pool.query("SELECT 2")[0].decode(0, as: Int.self) == 2)
            }
        }
    }

    @Test func racingMigratorsApplyEachMigrationOnce() async throws {
        try await withPool(size: 2) { pool in
            let other = PostgresPool(configuration: PostgresConfiguration.forTests(pool.configuration.connectionString, poolSize: 2))
            defer { other.shutdown() }
            // Plain CREATE TABLE fails if run twice, so a double application would surface as an error.
            let migrations = [
                Migration(version: 1, name: "create_a", sql: "CREATE TABLE a (id int); SELECT pg_sleep(0.2);"),
                Migration(version: 2, name: "create_b", sql: "CREATE TABLE b (id int);"),
            ]
            async let first = Migrator(pool: pool).migrate(migrations)
            async let second = Migrator(pool: other).migrate(migrations)
            let applied = try await [first, second]
            #expect(applied.sorted { $0.count < $1.count } == [[], [1, 2]])
            let recorded = try await pool.query("SELECT version FROM schema_migrations ORDER BY version")
            #expect(recorded.map { $0[0] } == ["1", "2"])
            // Running again is a no-op.
            #expect(try await Migrator(pool: pool).migrate(migrations) == [])
        }
    }

    /// An instance that starts while another applies a migration longer than the statement timeout waits for it,
    /// rather than failing its start-up with a statement timeout on the lock.
    @Test func anInstanceWaitsOutAMigrationLongerThanTheStatementTimeout() async throws {
        try await TestPostgres.withDatabase { url in
            let first = PostgresPool(configuration: PostgresConfiguration.forTests(url, poolSize: 1, statementTimeoutMilliseconds: 1_000))
            let second = PostgresPool(configuration: PostgresConfiguration.forTests(url, poolSize: 1, statementTimeoutMilliseconds: 1_000))
            let observer = PostgresPool(configuration: PostgresConfiguration.forTests(url, poolSize: 1))
            defer { first.shutdown(); second.shutdown(); observer.shutdown() }
            let migrations = [Migration(version: 1, name: "convert_a", sql: "CREATE TABLE a (id int); SELECT pg_sleep(3);")]
            let long = Task { try await Migrator(pool: first).migrate(migrations) }
            try await eventually {
                try await !observer.query("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND \(lockInThisDatabase)").isEmpty
            }
            #expect(try await Migrator(pool: second).migrate(migrations) == [])
            #expect(try await long.value == [1])
        }
    }

    @Test func anAppliedMigrationThatChangedIsRefused() async throws {
        try await withPool(size: 1) { pool in
            _ = try await Migrator(pool: pool).migrate([Migration(version: 1, name: "x", sql: "CREATE TABLE x (id int);")])
            await #expect(throws: PostgresError.self) {
                try await Migrator(pool: pool).migrate([Migration(version: 1, name: "x", sql: "CREATE TABLE x (id bigint);")])
            }
        }
    }

    /// `migrate --status`: each migration as applied, pending, changed, recorded by a later release or unknown, read without
    /// writing anything (an empty database keeps no `schema_migrations` table; a read-only session is enough).
    @Test func theStatusListsEachMigrationAndWritesNothing() async throws {
        try await withPool(size: 1) { pool in
            let migrations = [Migration(version: 1, name: "create_a", sql: "CREATE TABLE a (id int);"),
                              Migration(version: 2, name: "create_b", sql: "CREATE TABLE b (id int);"),
                              Migration(version: 3, name: "create_c", sql: "CREATE TABLE c (id int);")]
            let none = try await Migrator(pool: pool).status(migrations)
            #expect(none == migrations.map { MigrationState(version: $0.version, name: $0.name, status: .pending, appliedAt: nil) })
            #expect(try await pool.query("SELECT to_regclass('schema_migrations') IS NULL")[0].decode(0, as: Bool.self))

            try await Migrator(pool: pool).migrate(Array(migrations.prefix(2)))
            try await pool.query("INSERT INTO schema_migrations (version, name, checksum) VALUES (9, 'create_later', 'x'), (0, 'create_elsewhere', 'y')")
            try await pool.query("ALTER DATABASE \"\(try pool.query("SELECT current_database()")[0].decode(0, as: String.self))\" SET default_transaction_read_only = on")
            let readOnly = PostgresPool(configuration: PostgresConfiguration.forTests(pool.configuration.connectionString, poolSize: 1))
            defer { readOnly.shutdown() }
            let changed = [Migration(version: 1, name: "create_a", sql: "CREATE TABLE a (id bigint);")] + migrations.dropFirst()
            let states = try await Migrator(pool: readOnly).status(changed)
            #expect(states.map { "\($0.version) \($0.name) \($0.status)" } == ["0 create_elsewhere unknown", "1 create_a changed", "2 create_b applied",
                                                                          "3 create_c pending", "9 create_later newer"])
            #expect(states.filter { $0.status != .pending }.allSatisfy { $0.appliedAt?.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/) != nil })
            #expect(states.first { $0.status == .pending }?.appliedAt == nil)
            #expect(try await pool.query("SELECT count(*) FROM schema_migrations")[0].decode(0, as: Int.self) == 4)
        }
    }

    @Test func theRepositoryMigrationsApplyToAnEmptyDatabase() async throws {
        try await withPool(size: 1) { pool in
            let migrations = try Migration.load(directory: TestPostgres.repositoryRoot + "/sql")
            #expect(!migrations.isEmpty)
            let applied = try await Migrator(pool: pool).migrate(migrations)
            #expect(applied == migrations.map(\.version))
        }
    }

    /// Migration 6 replaced the daily rollups with blocks of 2^level days; rollups that existed before must arrive
    /// whole at every level, with and without channel type and priority.
    @Test func existingRollupsAreCarriedIntoBlocks() async throws {
        try await withPool(size: 1) { pool in
            let migrations = try Migration.load(directory: TestPostgres.repositoryRoot + "/sql")
            try await Migrator(pool: pool).migrate(migrations.filter { $0.version < 6 })
            try await pool.query("INSERT INTO report_zones (zone, backfilled_at) VALUES ('UTC', now())")
            // Ten days of one agent on two channels (responses = day of month on each) and a request on the last day.
            try await pool.query("""
                INSERT INTO csat_daily (zone, day, agent_id, team_id, channel_type, priority, requests, responses, scored, score_sum, s5)
                SELECT 'UTC', date '2026-01-01' + n - 1, 7, 3, channel, 'HIGH', (n = 10 AND channel = 'IOS')::int, n, n, 5 * n, n
                  FROM generate_series(1, 10) AS n, unnest(ARRAY['IOS', 'WEB']) AS channel
                """)
            #expect(try await Migrator(pool: pool).migrate(migrations.filter { $0.version <= 6 }) == [6])
            for (table, filter, responses) in [("csat_blocks", "", 110), ("csat_detail_blocks", " AND channel_type = 'WEB'", 55)] {
                let levels = try await pool.query("""
                    SELECT level, sum(responses), sum(requests), sum(s5) FROM \(table)
                     WHERE zone_id = (SELECT id FROM report_zones WHERE zone = 'UTC') AND agent_id = 7 AND team_id = 3\(filter)
                     GROUP BY level ORDER BY level
                    """)
                #expect(levels.rows.count == 10)
                for row in levels.rows {
                    #expect(try row.decode(1, as: Int.self) == responses)
                    #expect(try row.decode(2, as: Int.self) == (filter.isEmpty ? 1 : 0))
                    #expect(try row.decode(3, as: Int.self) == responses)
                }
            }
            // 2026-01-01 is day 20454 since 1970-01-01: its 8-day block starts on day 20448, 2025-12-26.
            let block = try await pool.query("SELECT responses FROM csat_blocks WHERE level = 3 AND first_day = '2025-12-26'")
            #expect(try block[0].decode(0, as: Int.self) == 2 * (1 + 2))
            #expect(try await pool.query("SELECT to_regclass('csat_daily') IS NULL AND to_regclass('csat_daily_agent') IS NULL")[0]
                .decode(0, as: Bool.self))
        }
    }
}
