public import Domain
import Foundation
public import Logging
import Synchronization
import JSON

/// What a sync run did.
public struct SyncSummary: Sendable, CustomStringConvertible {
    public var agents = 0
    public var teams = 0
    public var pages = 0
    public var tickets = 0
    public var requests = 0
    public var newRequests = 0
    public var ratings = 0
    public var newRatings = 0
    public var seconds = 0.0
    public var skipped = false
    /// Tickets whose messages could not be read this run (retried next run).
    public var failedTickets = 0
    /// 429 answers Desk gave during the run: those the client retried by itself and those the sync waited on.
    public var rateLimited = 0
    /// Chat messages that could not be read and were skipped (each logged with its ticket).
    public var skippedMessages = 0
    /// Tickets read again one by one because a CSAT request of theirs is still unanswered (late ratings).
    public var lateChecked = 0
    /// A backfill: the offset it resumed from (0 when it started afresh).
    public var resumedAt = 0
    /// Passes over the ticket list, and whether the last one proved that no ticket was left unread (see `readList`).
    public var passes = 0
    public var complete = true

    /// Nothing was left unread: the list was read completely and every ticket's messages were read.
    public var isComplete: Bool { complete && failedTickets == 0 }

    public var description: String {
        if skipped { return "sync skipped: another instance holds the sync lease" }
        return "agents \(agents), teams \(teams), pages \(pages), closed tickets \(tickets), CSAT requests \(requests) (\(newRequests) new), "
            + "ratings \(ratings) (\(newRatings) new), tickets to retry \(failedTickets), 429 answers \(rateLimited), "
            + "unreadable messages skipped \(skippedMessages), awaiting answers re-read \(lateChecked), list passes \(passes)"
            + (complete ? "" : " (INCOMPLETE: the list kept changing while it was read)")
            + " in \(String(format: "%.1f", seconds)) s"
    }
}

/// Pulls agents, teams and closed tickets with their CSAT from Desk's Platform API, incrementally: the documented
/// `start_date` / `end_date` from the day before the last run to today (tickets seen twice are read once). A ticket
/// whose messages cannot be read (any status, any shape) never stops the run: it is counted, logged and read again
/// next run. Requests are paced (`SYNC_REQUESTS_PER_SECOND`) and a 429 waits for `Retry-After` and tries again.
/// Several instances may run it: a lease lets one work at a time. It sees Desk and the database only through the
/// ports it is given (`DeskPlatformReader`, `SyncState`, `RatingStore`).
/// Ratings found here get the agent and team the ticket has at sync time; the gateway's own feedback and webhooks
/// record them when they happen, and the same rating is stored once whichever path sees it first.
public struct SyncSettings: Sendable {
    /// Platform API requests per second a run allows itself.
    public var requestsPerSecond: Double
    /// Unanswered CSAT requests younger than this have their tickets read again on every run (late ratings).
    public var lateRatingDays: Int
    /// At most this many such tickets per run (the oldest requests first).
    public var lateRatingLimit = 500
    /// The first run (nothing synced yet) reads tickets closed this many days back.
    public var firstRunDays: Int
    /// Tickets per Platform API page of a backfill.
    public var pageSize = 100
    /// Passes over a ticket list that keeps changing before a run gives up and says it is incomplete.
    public var maxPasses = 3

    public init(requestsPerSecond: Double, lateRatingDays: Int, firstRunDays: Int) {
        self.requestsPerSecond = requestsPerSecond
        self.lateRatingDays = lateRatingDays
        self.firstRunDays = firstRunDays
    }
}

public struct DeskSync: Sendable {
    let desk: any DeskPlatformReader
    let state: any SyncState
    let ratings: any RatingStore
    let logger: Logger
    let instance = UUID().uuidString
    let pacer: Pacer
    /// Today, as `YYYY-MM-DD` (a test may fix it).
    let today: @Sendable () -> String
    let settings: SyncSettings
    /// Where the next run's late-rating checks go on (`RatingStore.ticketsAwaitingAnswers`' cursor).
    static let lateRatingsKey = "csat.late_ratings.after"

    public init(desk: any DeskPlatformReader, state: any SyncState, ratings: any RatingStore, logger: Logger,
                settings: SyncSettings, today: (@Sendable () -> String)? = nil) {
        self.settings = settings
        self.desk = desk
        self.state = state
        self.ratings = ratings
        self.logger = logger
        self.today = today ?? { DeskSync.day(Date()) }
        pacer = Pacer(perSecond: settings.requestsPerSecond)
    }

    /// One Desk call at the sync's pace; a 429 (after the client's own short retries) waits for Desk's
    /// `Retry-After` (at most a minute) and tries again, up to 8 times, so rate limiting slows the sync down and
    /// loses nothing.
    func paced<T: Sendable>(_ summary: inout SyncSummary, _ body: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            await pacer.wait()
            do {
                return try await body()
            } catch let error as DomainError where error.code == .rateLimited && attempt < 8 {
                attempt += 1
                summary.rateLimited += 1
                let seconds = min(60, max(1, error.retryAfterSeconds ?? (1 << attempt)))
                logger.notice("Desk rate-limits the sync; waiting", metadata: ["seconds": "\(seconds)"])
                try await Task.sleep(for: .seconds(seconds))
            } catch let error as DomainError where error.code == .upstreamUnavailable && desk.isPaused && attempt < 8 {
                // Failures on a few tickets can open the circuit breaker; the run waits for its trial call instead of ending.
                attempt += 1
                try await Task.sleep(for: .seconds(min(30, max(1, error.retryAfterSeconds ?? 1))))
            }
        }
    }

    /// One run under the lease.
    public func run(progress: @Sendable (SyncSummary) -> Void = { _ in }) async throws -> SyncSummary {
        try await underLease { summary in try await run(&summary, progress: progress) }
    }

    /// `body` under the lease, which is given back when it ends, however it ends (skipped when another holds it).
    /// The summary counts every 429 Desk gave meanwhile (the client's count, which includes its own retries).
    /// The lease is renewed every few seconds while the run lives, so a run that died (killed, its machine gone)
    /// loses it within `SyncLease.seconds` and the next run takes over.
    private func underLease(_ body: (inout SyncSummary) async throws -> Void) async throws -> SyncSummary {
        var summary = SyncSummary()
        guard try await state.takeLease(instance) else {
            summary.skipped = true
            return summary
        }
        let heartbeat = Task { [state, instance] in
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(5))
                try? await state.renewLease(instance)
            }
        }
        defer { heartbeat.cancel() }
        let limitedBefore = desk.rateLimitedAnswers
        do {
            try await body(&summary)
        } catch {
            try? await state.releaseLease(instance)
            throw error
        }
        try? await state.releaseLease(instance)
        summary.rateLimited = max(summary.rateLimited, desk.rateLimitedAnswers - limitedBefore)
        return summary
    }

    /// Reads a Desk ticket list and proves that no ticket of it was left unread. Desk pages by offset, and offsets
    /// shift when tickets join or leave the list while it is read: a reopened ticket leaves the closed list and
    /// every later ticket moves up one place, so one would be skipped. A pass is complete when it started at the
    /// first page and the list's count stayed the same from its first page to its last; otherwise the list is read
    /// again from the start (tickets read already in this run are not collected again), `maxPasses` times at most.
    /// With `cutoff`, a pass ends at the first ticket last changed before it, when the list comes sorted newest
    /// change first as asked (Desk may ignore `order`, so the order is checked, never assumed); tickets older than
    /// the cutoff are not collected. Returns whether a complete pass was made.
    func readList(_ summary: inout SyncSummary, seen: inout Set<Int>, failed: inout Set<Int>, startingAt start: Int = 0,
                  cutoff: Double? = nil, fetch: (Int) async throws -> DeskPage<DeskTicket>,
                  before: (Int) async throws -> Void = { _ in }, progress: @Sendable (SyncSummary) -> Void) async throws -> Bool {
        var first = start
        for pass in 1...max(1, settings.maxPasses) {
            summary.passes = pass
            var counts = Set<Int>()
            var offset = first
            var newestFirst = cutoff != nil
            var previous = Double.infinity
            while true {
                try await before(offset)
                let page = try await paced(&summary) { try await fetch(offset) }
                summary.pages += 1
                counts.insert(page.count)
                var reachedCutoff = false
                for ticket in page.results {
                    let changed = ticket.updatedAt ?? .infinity
                    if changed > previous { newestFirst = false }
                    previous = changed
                    if let cutoff, changed < cutoff {
                        reachedCutoff = true
                        continue
                    }
                    guard seen.insert(ticket.id).inserted else { continue }
                    summary.tickets += 1
                    if try await !collect(ticket, into: &summary) { failed.insert(ticket.id) }
                }
                progress(summary)
                let consumed = page.results.count + page.skipped
                offset += consumed
                if (reachedCutoff && newestFirst) || !page.hasNext || consumed == 0 { break }
            }
            if first == 0 && counts.count == 1 { return true }
            first = 0
            logger.notice("the ticket list changed while it was read; reading it again", metadata: ["pass": "\(pass)"])
        }
        logger.warning("the ticket list kept changing while it was read; some tickets may be unread until the next run",
                       metadata: ["passes": "\(settings.maxPasses)"])
        return false
    }

    private func run(_ summary: inout SyncSummary, progress: @Sendable (SyncSummary) -> Void) async throws {
        let started = Date()
        try await forEachDeskPage { offset in
            try await paced(&summary) { try await desk.agents(limit: 100, offset: offset) }
        } each: { agents in
            try await state.upsertAgents(agents)
            summary.agents += agents.count
        }
        try await forEachDeskPage { offset in
            try await paced(&summary) { try await desk.teams(limit: 100, offset: offset) }
        } each: { teams in
            try await state.upsertTeams(teams)
            summary.teams += teams.count
        }
        progress(summary)

        let position = try await state.ticketPosition()
        let today = today()
        // Which date Desk's list filters on is not public (creation or last change). The window reaches back
        // `lateRatingDays` (`firstRunDays` on the first run), so a ticket created that long ago and rated since is in
        // it either way, and the list is asked newest change first: a pass ends at the first ticket unchanged since a
        // day before the last run (read then), so the wide window costs only the pages that changed.
        let cutoff = position.syncedThrough.flatMap(Self.date).map { $0.timeIntervalSince1970 - 86_400 }
        let days = position.syncedThrough == nil ? settings.firstRunDays : settings.lateRatingDays
        let startDate = Self.date(today).map { Self.day($0.addingTimeInterval(-86_400 * Double(days))) }
        var seen = Set<Int>()
        var failed = Set<Int>()
        for id in position.retry {
            guard let ticket = try? await paced(&summary, { try await desk.platformTicket(id: id) }) else {
                failed.insert(id)
                continue
            }
            seen.insert(id)
            summary.tickets += 1
            if try await !collect(ticket, into: &summary) { failed.insert(id) }
        }
        // Late ratings: whatever date the list filters on (creation, maybe), a ticket whose CSAT request is still
        // unanswered is read again by itself until it is answered or the request is older than `lateRatingDays`:
        // `lateRatingLimit` of them a run, each run going on where the last stopped and round from the oldest again.
        let late = try await ratings.ticketsAwaitingAnswers(maxAgeDays: settings.lateRatingDays, after: try await state.value(Self.lateRatingsKey),
                                                            limit: settings.lateRatingLimit)
        for id in late.tickets where seen.insert(id).inserted {
            guard let ticket = try? await paced(&summary, { try await desk.platformTicket(id: id) }) else { continue }
            summary.lateChecked += 1
            if try await !collect(ticket, into: &summary) { failed.insert(id) }
        }
        try await state.setValue(Self.lateRatingsKey, late.next)
        summary.complete = try await readList(&summary, seen: &seen, failed: &failed, cutoff: cutoff, fetch: { offset in
            try await desk.ticketPage(limit: 100, offset: offset, status: [.closed], startDate: startDate, endDate: today, order: "-updated_at")
        }, progress: progress)
        summary.failedTickets = failed.count
        // An incomplete run keeps its place: the next one reads the same window again.
        if let through = summary.complete ? today : position.syncedThrough {
            try await state.saveTicketPosition(syncedThrough: through, retry: Array(failed))
        } else {
            try await state.addRetry(Array(failed))
        }
        summary.seconds = Date().timeIntervalSince(started)
    }

    /// Reads every ticket closed from `since` to `until` (YYYY-MM-DD, Desk's `start_date` / `end_date`), with its
    /// CSAT, under the lease, oldest created first (an order tickets keep when they change). The offset reached is
    /// saved before each page: a backfill that is interrupted and started again with the same dates continues where
    /// it stopped (recording is idempotent, so nothing counts twice), then reads the list once more from the start to
    /// prove nothing was missed meanwhile (`readList`). Tickets whose messages could not be read join the next run's
    /// retry list.
    public func backfill(since: String, until: String, progress: @Sendable (SyncSummary) -> Void = { _ in }) async throws -> SyncSummary {
        try await underLease { summary in try await backfill(since: since, until: until, &summary, progress: progress) }
    }

    private func backfill(since: String, until: String, _ summary: inout SyncSummary, progress: @Sendable (SyncSummary) -> Void) async throws {
        let started = Date()
        let key = "backfill.\(since).\(until)"
        let start = Int(try await state.value(key) ?? "") ?? 0
        summary.resumedAt = start
        var failed = Set<Int>()
        var seen = Set<Int>()
        summary.complete = try await readList(&summary, seen: &seen, failed: &failed, startingAt: start, fetch: { offset in
            try await desk.ticketPage(limit: settings.pageSize, offset: offset, status: [.closed], startDate: since, endDate: until,
                                      order: "created_at")
        }, before: { offset in
            // The page about to be read is where an interruption resumes (reading it twice records nothing twice).
            try await state.setValue(key, String(offset))
        }, progress: progress)
        try await state.addRetry(Array(failed))
        try await state.setValue(key, nil)
        summary.failedTickets = failed.count
        summary.seconds = Date().timeIntervalSince(started)
    }

    static func day(_ date: Date) -> String {
        String(ISOTimestamp.format(date.timeIntervalSince1970).prefix(10))
    }

    static func date(_ day: String) -> Date? {
        ISOTimestamp.parse(day + "T00:00:00Z").map { Date(timeIntervalSince1970: $0) }
    }

    /// Records one closed ticket's CSAT requests and answers (through `RatingRecorder`); false when its messages
    /// could not be read (the ticket's own rating, if it has one, is recorded meanwhile and absorbed once the message
    /// is read).
    private func collect(_ ticket: DeskTicket, into summary: inout SyncSummary) async throws -> Bool {
        var messages: [DeskMessage] = []
        var complete = true
        switch await allMessages(ticket.id, &summary) {
        case .success(let all):
            messages = all
        case .failure(let error):
            // A ticket Desk no longer has messages for is final; anything else is tried again next run.
            if error.code != .notFound {
                complete = false
                logger.warning("could not read a ticket's messages; it is read again next sync",
                               metadata: ["ticket": "\(ticket.id)", "error": "\(error.code)"])
            }
        }
        let writes = RatingRecorder.writes(ticket: ticket, messages: messages, source: .sync)
        for write in writes {
            switch write {
            case .request: summary.requests += 1
            case .rating, .ticketLevel: summary.ratings += 1
            }
        }
        let changed = try await RatingRecorder.apply(writes, to: ratings)
        summary.newRequests += changed.requests
        summary.newRatings += changed.ratings
        return complete
    }

    private func allMessages(_ ticketId: Int, _ summary: inout SyncSummary) async -> Result<[DeskMessage], DomainError> {
        var messages: [DeskMessage] = []
        var skipped = 0
        defer {
            if skipped > 0 {
                summary.skippedMessages += skipped
                logger.warning("skipped chat messages that could not be read", metadata: ["ticket": "\(ticketId)", "count": "\(skipped)"])
            }
        }
        do {
            try await forEachDeskPage { offset in
                let page = try await paced(&summary) { try await desk.chatMessages(ticketId: ticketId, limit: 100, offset: offset) }
                skipped += page.skipped
                return page
            } each: { page in
                messages += page
            }
        } catch let error as DomainError {
            return .failure(error)
        } catch {
            return .failure(DomainError(.upstreamUnavailable, "The sync was interrupted."))
        }
        return .success(messages)
    }
}

/// Today as Desk's date parameters write it (UTC).
public enum DeskSyncDay {
    public static func today() -> String { DeskSync.day(Date()) }

    /// Whether `text` is a real date as `YYYY-MM-DD`.
    public static func isValid(_ text: String) -> Bool {
        text.count == 10 && DeskSync.date(text).map { DeskSync.day($0) == text } == true
    }
}

/// Spaces calls out to at most `perSecond`, across the tasks that share it.
final class Pacer: Sendable {
    private let interval: Duration
    private let next = Mutex(ContinuousClock.now)

    init(perSecond: Double) {
        interval = .milliseconds(Int(1000 / max(0.01, perSecond)))
    }

    func wait() async {
        let slot = next.withLock { next -> ContinuousClock.Instant in
            let slot = max(next, .now)
            next = slot + interval
            return slot
        }
        if slot > .now { try? await Task.sleep(until: slot, clock: .continuous) }
    }
}
