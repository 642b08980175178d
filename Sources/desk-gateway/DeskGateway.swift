import ArgumentParser
import Dispatch
import Foundation
import Synchronization
import GatewayApp
import Services
import Logging
import Telemetry
import Domain
import JSON
import Postgres
import System
import Store

@main
struct DeskGateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "desk-gateway",
        abstract: "REST backend-for-frontend in front of Sendbird Desk.",
        version: "\(gatewayVersion) (\(ProcessMetrics.revision))",
        subcommands: [Serve.self, Migrate.self, Sync.self, Csat.self, ApiKey.self, Cache.self, Outbox.self, Webhooks.self, Settings.self],
        defaultSubcommand: Serve.self)
}

/// Reads the environment once; invalid values end the process with a message naming each variable, and any
/// variable that looks like a misspelt setting (it may be why a value is missing).
func loadConfiguration(logs sink: LogSink = .standardOutput) -> (GatewayConfig, Logger) {
    let environment = ProcessInfo.processInfo.environment
    let config: GatewayConfig
    do {
        config = try GatewayConfig.fromEnvironment(environment)
    } catch {
        FileHandle.standardError.write(Data("desk-gateway: \(error)\n".utf8))
        tellMisspelt(GatewayConfig.misspeltSettings(environment))
        exit(2)
    }
    let level = config.logLevel
    LoggingSystem.bootstrap { JSONLogHandler(label: $0, level: level, sink: sink) }
    return (config, Logger(label: "desk-gateway"))
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the gateway (the default).")

    func run() async throws {
        Signals.ignoreBrokenPipes()
        Machine.tuneAllocator(environment: ProcessInfo.processInfo.environment)
        let (config, logger) = loadConfiguration()
        logger.info("starting", metadata: ["config": "\(config)"])
        for (given, meant) in GatewayConfig.misspeltSettings(ProcessInfo.processInfo.environment) {
            logger.warning("an environment variable is no setting and is ignored; a misspelling?", metadata: ["variable": "\(given)", "setting": "\(meant)"])
        }
        let app: GatewayApplication
        do {
            app = try await buildApplication(config, logger: logger)
        } catch let error as DeskIdentityMismatch {
            logger.critical("start-up refused: the database belongs to another Desk", metadata: ["recorded": "\(error.recorded)", "configured": "\(error.configured)"])
            LogSink.standardOutput.flush()
            FileHandle.standardError.write(Data("desk-gateway: \(error)\n".utf8))
            throw ExitCode(2)
        } catch {
            logger.critical("start-up failed", metadata: ["error": "\(error)", "detail": "\((error as? DomainError)?.internalDetail ?? "")"])
            LogSink.standardOutput.flush()
            throw ExitCode(1)
        }
        let received = await waitForStopSignal(forceAfter: .seconds(config.shutdownDrainSeconds + 10))
        logger.notice("signal received", metadata: ["signal": "\(received == .interrupt ? "SIGINT" : "SIGTERM")"])
        await app.stop()
        LogSink.standardOutput.flush()
    }

    /// SIGINT or SIGTERM, whichever comes first. The default actions are turned off so no thread dies of them.
    /// If the graceful stop has not ended the process `forceAfter` the signal (Swift's task pool stuck), it exits
    /// from the signal queue, which needs no task to run.
    private func waitForStopSignal(forceAfter: Duration) async -> Signals.Stop {
        let waiter = SignalWaiter()
        let sources = Signals.onStop { stop in
            waiter.deliver(stop)
            DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Int(forceAfter.components.seconds))) {
                FileHandle.standardError.write(Data("desk-gateway: graceful stop did not finish in time; exiting\n".utf8))
                Signals.exitNow(1)
            }
        }
        let stop = await waiter.wait()
        withExtendedLifetime(sources) {}
        return stop
    }
}

/// Hands the first stop signal to the one waiter, whichever comes first.
final class SignalWaiter: Sendable {
    private let state = Mutex<(received: Signals.Stop?, waiting: CheckedContinuation<Signals.Stop, Never>?)>((nil, nil))

    func deliver(_ number: Signals.Stop) {
        let continuation = state.withLock { state -> CheckedContinuation<Signals.Stop, Never>? in
            guard state.received == nil else { return nil }
            state.received = number
            defer { state.waiting = nil }
            return state.waiting
        }
        continuation?.resume(returning: number)
    }

    func wait() async -> Signals.Stop {
        await withCheckedContinuation { continuation in
            let already = state.withLock { state -> Signals.Stop? in
                if let received = state.received { return received }
                state.waiting = continuation
                return nil
            }
            if let already { continuation.resume(returning: already) }
        }
    }
}

struct Settings: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Print the settings reference (docs/configuration.md) or an example environment file, from the settings table.")

    @Flag(help: "An example environment file instead of the reference.") var env = false
    @Flag(help: ArgumentHelp("Check this environment's settings and exit: 0 when all are valid and no variable looks like a "
                             + "misspelt setting (e.g. before an upgrade); nothing is connected to.")) var check = false

    func run() throws {
        guard check else {
            print(env ? GatewaySettings.exampleEnvironment() : GatewaySettings.referenceMarkdown(), terminator: "")
            return
        }
        let environment = ProcessInfo.processInfo.environment
        let misspelt = GatewayConfig.misspeltSettings(environment)
        let config: GatewayConfig
        do {
            config = try GatewayConfig.fromEnvironment(environment)
        } catch {
            tellOperator("\(error)")
            tellMisspelt(misspelt)
            throw ExitCode(2)
        }
        tellMisspelt(misspelt)
        let set = config.assignments
        print("settings are valid; \(set.count) differ from their defaults\(set.isEmpty ? "" : ":")")
        for line in set { print("  " + line) }
        if !misspelt.isEmpty { throw ExitCode(1) }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending database migrations and exit.")

    @Flag(help: ArgumentHelp("List each migration as applied, pending, changed (its file differs from what was applied), "
                             + "newer (applied by a later release) or unknown (recorded, in no file of this release) and exit: 0 when nothing is pending or changed, 3 when something is, "
                             + "1 when the database cannot be read; nothing is applied or written.")) var status = false
    @Flag(help: "With --status: one JSON document instead of the text (the same exit codes).") var json = false

    func validate() throws {
        if json, !status { throw ValidationError("--json lists the migrations: use it with --status") }
    }

    func run() async throws {
        if status { return try await listMigrations() }
        let (config, logger) = loadConfiguration(logs: .standardError)
        do {
            try await runMigrations(config, logger: logger)
        } catch {
            logger.critical("migration failed", metadata: ["error": "\(error)", "detail": "\((error as? DomainError)?.internalDetail ?? "")"])
            LogSink.standardError.flush()
            throw ExitCode(1)
        }
        LogSink.standardError.flush()
    }
}

extension Migrate {
    /// Standard output is the list, for a script; the exit code says whether a start would apply or refuse anything.
    func listMigrations() async throws {
        var states: [MigrationState] = []
        try await oneShot { config, logger in states = try await migrationStatus(config, logger: logger) }
        let count = { (status: MigrationState.Status) in states.filter { $0.status == status }.count }
        if json {
            print(try CommandDocument.text(CommandDocument.migrations(states)))
        } else {
            // As the files are named: sql/0007_add_ticket_fields.sql is 0007_add_ticket_fields.
            let names = states.map { String(repeating: "0", count: max(0, 4 - "\($0.version)".count)) + "\($0.version)_\($0.name)" }
            let width = names.map(\.count).max() ?? 0
            for (name, state) in zip(names, states) {
                print(name + String(repeating: " ", count: width - name.count + 2) + state.status.rawValue + (state.appliedAt.map { " " + $0 } ?? ""))
            }
            print("\(count(.applied)) applied, \(count(.pending)) pending, \(count(.changed)) changed, \(count(.newer)) newer, \(count(.unknown)) unknown")
        }
        if count(.pending) + count(.changed) > 0 { throw ExitCode(3) }
    }
}

/// A one-shot command's message on standard error, after the log lines written before it.
func tellOperator(_ message: String) {
    LogSink.standardError.flush()
    FileHandle.standardError.write(Data("desk-gateway: \(message)\n".utf8))
}

func tellMisspelt(_ misspelt: [(given: String, meant: String)]) {
    for (given, meant) in misspelt { tellOperator("\(given) is not a setting; did you mean \(meant)?") }
}

/// Runs a one-shot command body, turning failures into a clear message and exit code 1. Logs go to standard error:
/// standard output is the command's answer, for a script to read.
func oneShot(_ body: (GatewayConfig, Logger) async throws -> Void) async throws {
    let (config, logger) = loadConfiguration(logs: .standardError)
    defer { LogSink.standardError.flush() }
    do {
        try await body(config, logger)
    } catch let exit as ExitCode {
        // The body said why already; an exit code is not a failure to log.
        throw exit
    } catch let error as ConfigError {
        tellOperator("\(error)")
        throw ExitCode(2)
    } catch {
        logger.critical("command failed", metadata: ["error": "\(error)", "detail": "\((error as? DomainError)?.internalDetail ?? "")"])
        throw ExitCode(1)
    }
}

struct Sync: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pull agents, teams and closed tickets with their CSAT from Desk's Platform API (incremental), then exit.")

    @Option(help: "Backfill instead: every ticket closed from this day (YYYY-MM-DD); resumes where an interrupted backfill of the same range stopped.")
    var since: String?
    @Option(help: "Last day of the backfill (YYYY-MM-DD, default today).") var until: String?

    func validate() throws {
        for (name, value) in [("since", since), ("until", until)] {
            if let value, !DeskSyncDay.isValid(value) { throw ValidationError("--\(name) must be a date as YYYY-MM-DD, got '\(value)'") }
        }
        if until != nil, since == nil { throw ValidationError("--until needs --since") }
        if let since, let until, since > until { throw ValidationError("--since must not be after --until") }
    }

    /// Exit codes: 0 complete; 1 something was left unread (tickets to retry, or a list that kept changing: the
    /// summary counts them); 75 skipped, another live run holds the lease (EX_TEMPFAIL: try again later).
    func run() async throws {
        let terminal = Signals.isTerminal(1)
        let outcome = Mutex<SyncSummary?>(nil)
        try await oneShot { config, logger in
            // A lease left by a run that died is free within its expiry: wait that long before calling it held.
            let deadline = ContinuousClock.now + .seconds(SyncLease.seconds + 5)
            var summary: SyncSummary
            repeat {
                summary = try await runSync(config, logger: logger, since: since, until: until) { progress in
                    let line = "pages \(progress.pages)  tickets \(progress.tickets)  requests \(progress.requests)  ratings \(progress.ratings) (\(progress.newRatings) new)"
                    FileHandle.standardError.write(Data((terminal ? "\r\u{1B}[K" + line : line + "\n").utf8))
                }
                if summary.skipped, ContinuousClock.now < deadline { try await Task.sleep(for: .seconds(2)) }
            } while summary.skipped && ContinuousClock.now < deadline
            if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
            print(summary.isComplete || summary.skipped ? "sync done: \(summary)" : "sync left tickets unread: \(summary)")
            outcome.withLock { $0 = summary }
        }
        guard let summary = outcome.withLock({ $0 }) else { return }
        if summary.skipped { throw ExitCode(75) }
        if !summary.isComplete { throw ExitCode(1) }
    }
}

struct Csat: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Check the stored CSAT ratings and manage the reports' rollups.",
                                                    subcommands: [Audit.self, Zones.self, DropZone.self])

    struct Zones: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the zones whose rollups every CSAT write keeps up, and whether this environment's REPORT_TIME_ZONES lists each.")

        @Flag(help: "One JSON document instead of the text.") var json = false

        func run() async throws {
            try await oneShot { config, logger in
                let zones = try await reportZones(config, logger: logger)
                if json { return print(try CommandDocument.text(CommandDocument.zones(zones, listed: config.reportTimeZones))) }
                for zone in zones {
                    let listed = config.reportTimeZones.contains(zone.zone) ? "listed" : "not listed (desk-gateway csat drop-zone \(zone.zone))"
                    print("\(zone.zone)  \(zone.complete ? "complete" : "being built (\(zone.countedUntil.map { "counted up to \(ISOTimestamp.format($0))" } ?? "nothing counted yet"))")  \(zone.rows) rows  \(listed)")
                }
                // Listed here but never registered: no instance with this list has started since it was added.
                var seen = Set(zones.map(\.zone))
                for zone in config.reportTimeZones where seen.insert(zone).inserted {
                    print("\(zone)  not built (an instance starting with this REPORT_TIME_ZONES builds it)  0 rows  listed")
                }
            }
        }
    }

    struct DropZone: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "drop-zone",
            abstract: "Stop keeping a zone's rollups and delete them (take it out of REPORT_TIME_ZONES everywhere first); reports in it are computed from raw ratings.")

        @Argument(help: "The IANA zone, as REPORT_TIME_ZONES named it.") var zone: String

        func run() async throws {
            try await oneShot { config, logger in
                let dropped = try await dropReportZone(config, logger: logger, zone: zone)
                print(dropped ? "dropped the rollups of \(zone)" : "\(zone) had no rollups")
            }
        }
    }

    struct Audit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Compare the ratings stored with Desk's ticket fields for the tickets closed in a range, and the report rollups with the raw ratings; exit 1 when they differ.")

        @Option(help: "First day (YYYY-MM-DD).") var from: String
        @Option(help: "Last day (YYYY-MM-DD).") var to: String
        @Flag(help: "Record what is missing or different through the gateway's one recording path (nothing is deleted), and rebuild rollups that differ from the raw ratings.") var repair = false

        func validate() throws {
            for (name, value) in [("from", from), ("to", to)] where !DeskSyncDay.isValid(value) {
                throw ValidationError("--\(name) must be a date as YYYY-MM-DD, got '\(value)'")
            }
            if from > to { throw ValidationError("--from must not be after --to") }
        }

        func run() async throws {
            var differences = 0
            try await oneShot { config, logger in
                let report = try await runAudit(config, logger: logger, from: from, to: to, repair: repair) { progress in
                    FileHandle.standardError.write(Data("tickets \(progress.tickets)  differences \(progress.differences.count)\n".utf8))
                }
                for difference in report.differences { print(difference) }
                for skip in report.skipped { print(skip) }
                for (zone, rows) in report.rollupDrift.sorted(by: { $0.key < $1.key }) {
                    print("rollups of \(zone): \(rows) one-day rows differ from the raw ratings"
                          + (repair ? ", \(report.rollupDriftLeft[zone] ?? 0) after rebuilding them" : ""))
                }
                print("audit: \(report.tickets) tickets, \(report.differences.count) differences" + (repair ? ", \(report.repaired) repaired" : "")
                      + ", rollup rows differing in \(report.rollupDrift.count) zones")
                differences = report.remaining
            }
            if differences > 0 { throw ExitCode(1) }
        }
    }
}

struct ApiKey: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "api-key", abstract: "Manage API keys for reporting clients.",
                                                    subcommands: [Create.self, List.self, Revoke.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create a key and print it once (only its hash is stored).")
        @Option(help: "Scope granted to the key (repeatable). Known scope: reports.") var scope: [String] = []
        @Option(help: "A name to recognise the key by.") var name = "reporting client"
        @Option(help: ArgumentHelp("Limit the key to a team, by Desk team key or id (repeatable): a team lead's key sees only its "
                                   + "teams and their agents' ratings in them.", valueName: "team"))
        var team: [String] = []

        func validate() throws {
            guard !scope.isEmpty else { throw ValidationError("give at least one --scope (e.g. --scope reports)") }
            guard !name.allSatisfy(\.isWhitespace) else { throw ValidationError("--name must not be blank: it is how api-key list shows the key") }
            // A column of api-key list's tab-separated lines, which scripts read and terminals show.
            guard name.count <= 100, !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw ValidationError("--name must be one line of at most 100 characters, without tabs or other control characters")
            }
            for value in scope where value != "reports" { throw ValidationError("unknown scope '\(value)'; known: reports") }
        }

        func run() async throws {
            try await oneShot { config, logger in
                let created: (key: String, id: Int)
                do {
                    created = try await createApiKey(config, logger: logger, name: name, scopes: scope, teams: team)
                } catch let error as CommandProblem {
                    tellOperator("\(error)")
                    throw ExitCode(1)
                }
                print("id \(created.id)\nkey \(created.key)\n(store it now: it is not shown again)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys (never the keys themselves).")

        @Flag(help: "One JSON document instead of the text.") var json = false

        func run() async throws {
            try await oneShot { config, logger in
                let keys = try await listApiKeys(config, logger: logger)
                if json { return print(try CommandDocument.text(CommandDocument.apiKeys(keys))) }
                if keys.isEmpty { tellOperator("no API keys yet (api-key create makes one)") }
                for key in keys {
                    let state = key.revokedAt == nil ? "active" : "revoked"
                    let used = key.lastUsedAt.map { Date(timeIntervalSince1970: $0).description } ?? "never"
                    let teams = key.teamIds.map { "teams " + $0.map(String.init).joined(separator: ",") } ?? "all teams"
                    print("\(key.id)\t\(state)\t\(key.scopes.joined(separator: ","))\t\(teams)\t\(key.name)\tlast used \(used)")
                }
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Revoke a key by id.")
        @Argument(help: "The key's id (from api-key list).") var id: Int

        func run() async throws {
            try await oneShot { config, logger in
                guard try await revokeApiKey(config, logger: logger, id: id) else {
                    tellOperator("no active key with id \(id)")
                    throw ExitCode(1)
                }
                print("revoked key \(id)")
            }
        }
    }
}

struct Cache: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Manage the ticket cache.", subcommands: [Reset.self])

    struct Reset: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Forget cached tickets, sessions, queued customer writes, idempotency records, the webhook inbox, the sync position and the recorded Desk identity; CSAT ratings, reports and API keys are kept.")

        @Flag(help: "Also discard customer writes not yet delivered to Desk and webhook events not yet applied (without it, the reset refuses while there are any).")
        var discardPending = false

        func run() async throws {
            try await oneShot { config, logger in
                do {
                    let summary = try await runCacheReset(config, logger: logger, discardingPending: discardPending)
                    print("cache reset: removed \(summary); the next start records the Desk it is configured for")
                } catch let pending as PendingDeskWork {
                    tellOperator("nothing reset: \(pending) are waiting, which the gateway acknowledged. Let a gateway "
                                 + "configured for the Desk they belong to carry them out (GET /metrics: outbox_pending, "
                                 + "webhook_inbox_pending), or give --discard-pending to drop them.")
                    throw ExitCode(1)
                }
            }
        }
    }
}

struct Outbox: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Look at and nudge customer writes queued for Desk.",
                                                    subcommands: [List.self, RetryNow.self, Revive.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The oldest pending writes: id, kind, ticket, age, attempts, seconds to the next attempt, reason.",
            discussion: "With --failed: the writes that failed lately, the latest first, and whether `outbox revive` could put each back.")
        @Option(help: "At most this many (1-1000).") var limit = 50
        @Flag(help: "One JSON document instead of the text.") var json = false
        @Flag(help: "Failed writes instead of pending ones.") var failed = false
        @OptionGroup var window: FailureWindow

        func validate() throws {
            guard (1...1000).contains(limit) else { throw ValidationError("--limit must be from 1 to 1000") }
            guard failed || window.withinHours == nil else { throw ValidationError("--within-hours applies only with --failed") }
        }

        func run() async throws {
            if failed { return try await listFailed() }
            try await oneShot { config, logger in
                let pending = try await pendingOperations(config, logger: logger, limit: limit)
                let now = Date().timeIntervalSince1970
                if json { return print(try CommandDocument.text(CommandDocument.outbox(pending, now: now))) }
                print(["id", "kind", "ticket", "age_s", "attempts", "next_s", "reason"].joined(separator: "\t"))
                for (operation, due) in pending {
                    print(["\(operation.id)", operation.kind.rawValue, "\(operation.ticketId)", "\(Int(now - operation.createdAt))",
                           "\(operation.attempts)", "\(Int(due.rounded(.up)))", operation.lastError ?? "-"].joined(separator: "\t"))
                }
            }
        }

        private func listFailed() async throws {
            try await oneShot { config, logger in
                let failed = try await failedOperations(config, logger: logger, withinSeconds: window.seconds, limit: limit)
                if json { return print(try CommandDocument.text(CommandDocument.failedOutbox(failed))) }
                let now = Date().timeIntervalSince1970
                print(["id", "kind", "ticket", "failed_s", "attempts", "revivable", "reason"].joined(separator: "\t"))
                for (operation, revivable) in failed {
                    print(["\(operation.id)", operation.kind.rawValue, "\(operation.ticketId)", "\(Int(now - (operation.finishedAt ?? now)))",
                           "\(operation.attempts)", revivable ? "yes" : "no", operation.lastError ?? "-"].joined(separator: "\t"))
                }
            }
        }
    }

    /// How far back `list --failed` and `revive` look (failed writes are kept `RETENTION_OUTBOX_DAYS` in any case).
    struct FailureWindow: ParsableArguments {
        @Option(help: "Writes that failed within this many hours (1-720; default 24).") var withinHours: Int?

        var seconds: Double { Double(withinHours ?? 24) * 3600 }

        func validate() throws {
            guard (1...720).contains(withinHours ?? 24) else { throw ValidationError("--within-hours must be from 1 to 720") }
        }
    }

    struct RetryNow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "retry-now",
            abstract: "Make every pending write due now (once Desk is back, instead of waiting out the backoff); running gateways' relays take them.")

        func run() async throws {
            try await oneShot { config, logger in
                let count = try await retryOperationsNow(config, logger: logger)
                print("outbox retry-now: \(count) pending writes due now")
            }
        }
    }

    struct Revive: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Put failed writes back in the queue once their cause is gone (by default: customers whose Desk sessions ended have signed in again).",
            discussion: "Only a write answered 202 and still its ticket's latest is revived: one refused while its own request waited, one the customer sent again, or one followed by another write of its ticket stays failed.")
        @Option(help: "Writes whose reason starts with this.") var reason = "desk_session_expired"
        @OptionGroup var window: FailureWindow
        @Flag(help: "Print which writes would be revived, and change nothing.") var dryRun = false

        func validate() throws {
            guard !reason.isEmpty else { throw ValidationError("--reason must not be empty") }
        }

        func run() async throws {
            try await oneShot { config, logger in
                let ids = try await reviveOperations(config, logger: logger, reason: reason, withinSeconds: window.seconds, dryRun: dryRun)
                let listed = ids.isEmpty ? "" : ": " + ids.map(String.init).joined(separator: " ")
                print(dryRun ? "outbox revive --dry-run: \(ids.count) failed writes would be pending again\(listed)"
                             : "outbox revive: \(ids.count) failed writes pending again\(listed)")
            }
        }
    }
}

struct Webhooks: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Manage stored Desk webhook events.", subcommands: [Replay.self])

    struct Replay: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply stored events again (after an upgrade taught the gateway a new shape); running gateways pick them up.")
        @Option(help: "Which events: unrecognized (default), failed, applied or foreign (repeatable).") var status: [String] = []

        func validate() throws {
            for value in status where !["unrecognized", "failed", "applied", "foreign"].contains(value) {
                throw ValidationError("unknown status '\(value)'; known: unrecognized, failed, applied, foreign")
            }
        }

        func run() async throws {
            try await oneShot { config, logger in
                let statuses = status.isEmpty ? ["unrecognized"] : status
                let count = try await replayWebhooks(config, logger: logger, statuses: statuses)
                print("webhooks replay: \(count) events (\(statuses.joined(separator: ", "))) queued to be applied again")
            }
        }
    }
}
