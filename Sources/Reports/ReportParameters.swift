import Synchronization
import JSON

/// A calendar date without a time zone (`YYYY-MM-DD`), as reports take and return them.
public struct LocalDate: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Days since 1970-01-01.
    public let dayNumber: Int

    public init(dayNumber: Int) { self.dayNumber = dayNumber }

    public init?(_ text: String) {
        guard let (year, month, day) = Self.fields(text), (1...12).contains(month), day >= 1,
              day <= Self.daysIn(month: month, year: year), year >= 1970, year <= 9999 else { return nil }
        dayNumber = Self.days(year: year, month: month, day: day)
    }

    /// The numbers of a text shaped `YYYY-MM-DD`, not yet checked against the calendar.
    private static func fields(_ text: String) -> (year: Int, month: Int, day: Int)? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]) else { return nil }
        return (year, month, day)
    }

    public init(year: Int, month: Int, day: Int) {
        dayNumber = Self.days(year: year, month: month, day: day)
    }

    /// What is wrong with `text` as a report's date, nil when nothing is. A date written right that the calendar does
    /// not have (2026-02-29) says so: the general rule would read as if the caller had broken it.
    public static func problem(with text: String) -> String? {
        guard LocalDate(text) == nil else { return nil }
        if let (year, month, day) = fields(text), (1970...9999).contains(year), (1...12).contains(month), (29...31).contains(day) {
            return "is not a day of the calendar: \(text.prefix(7)) has \(daysIn(month: month, year: year)) days"
        }
        return "must be a date YYYY-MM-DD from 1970-01-01 to 9999-12-31"
    }

    public static func < (lhs: LocalDate, rhs: LocalDate) -> Bool { lhs.dayNumber < rhs.dayNumber }

    public func adding(days: Int) -> LocalDate { LocalDate(dayNumber: dayNumber + days) }

    public var components: (year: Int, month: Int, day: Int) { CivilCalendar.date(fromDays: dayNumber) }

    /// ISO weekday, Monday = 1.
    public var weekday: Int { ((dayNumber % 7 + 7 + 3) % 7) + 1 }

    /// YYYY-MM-DD, written digit by digit: bucketed reports print thousands of these.
    public var description: String {
        let (y, m, d) = components
        guard (0...9999).contains(y) else { return String(y) + "-" + String(m + 100).dropFirst() + "-" + String(d + 100).dropFirst() }
        return JSONText.date(year: y, month: m, day: d)
    }

    static func days(year: Int, month: Int, day: Int) -> Int { CivilCalendar.days(year: year, month: month, day: day) }

    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}

/// What a report's rows are grouped by. A new dimension is a case here and its column in `Store`'s extension (plus a
/// migration when the rollup blocks do not carry the column yet); everything between keeps rows by `ReportKey`.
public enum ReportDimension: String, Sendable, CaseIterable {
    case agent, team, channelType, priority

    /// Desk ids with display names (agents, teams), or values shown as they are (channel types, priorities).
    public var hasIds: Bool {
        switch self {
        case .agent, .team: return true
        case .channelType, .priority: return false
        }
    }
}

/// A report row's group: a Desk id, a text dimension's value, or none (ratings without an agent or a team). Kept as
/// one integer — an id as it is, none as 0, a text value as its negative number in `ReportTexts` — so the thousands
/// of keys of a weekly report are copied and hashed as integers (an enum with a `String` case cost a weekly agent
/// report 10 % more CPU).
public struct ReportKey: Hashable, Sendable {
    let raw: Int

    public enum Value: Sendable, Equatable {
        case none
        case id(Int)
        case text(String)
    }

    public static let none = ReportKey(raw: 0)

    /// A Desk id (agents and teams have positive ids; 0 is none).
    public static func id(_ id: Int) -> ReportKey { ReportKey(raw: max(id, 0)) }

    public static func text(_ value: String) -> ReportKey { ReportKey(raw: -1 - ReportTexts.shared.number(of: value)) }

    public var value: Value {
        if raw > 0 { return .id(raw) }
        return raw == 0 ? .none : .text(ReportTexts.shared.value(numbered: -1 - raw))
    }

    /// The id, or 0 for a text value or none (the page's agent and team links).
    public var id: Int { max(raw, 0) }
}

/// The values of text dimensions that report keys have named, numbered in order of first use. They are Desk's channel
/// types and the four priorities: a handful for the life of the process.
final class ReportTexts: Sendable {
    static let shared = ReportTexts()
    private let state = Mutex<(numbers: [String: Int], values: [String])>(([:], []))

    func number(of value: String) -> Int {
        state.withLock { state in
            if let number = state.numbers[value] { return number }
            state.values.append(value)
            state.numbers[value] = state.values.count - 1
            return state.values.count - 1
        }
    }

    func value(numbered number: Int) -> String { state.withLock { $0.values[number] } }
}

public enum ReportBucket: String, Sendable, CaseIterable { case none, day, week, month }

/// Everything a CSAT report or response listing is asked for, validated.
public struct ReportParameters: Sendable {
    public var groupBy: ReportDimension = .agent
    public var from: LocalDate
    public var to: LocalDate
    public var timeZone = "UTC"
    public var bucket: ReportBucket = .none
    public var agentIds: [Int] = []
    public var teamIds: [Int] = []
    public var channelTypes: [String] = []
    public var priorities: [String] = []
    public var scores: [Int] = []
    /// Responses listing only: with a comment (true), without one (false), or either (nil).
    public var hasComment: Bool?
    public var format: ReportFormat = .json
    public var limit = 50
    public var cursor: String?

    public var days: Int { to.dayNumber - from.dayNumber + 1 }
    /// The period of equal length just before this one.
    public var previous: (from: LocalDate, to: LocalDate) { (from.adding(days: -days), from.adding(days: -1)) }
    /// Whether each row shows its group's previous period: only unbucketed reports do; a bucketed one shows the
    /// previous period's totals alone, so its readers may sum that period without grouping it.
    public var previousPerGroup: Bool { bucket == .none }
    /// Whether channel type or priority narrow the report (only the full-dimension rollup can answer then).
    public var filtersDimensions: Bool { !channelTypes.isEmpty || !priorities.isEmpty }
}

public enum ReportFormat: String, Sendable {
    case json, csv

    /// What an `Accept` field asks for (RFC 9110 §12.5.1): CSV when `text/csv` weighs more than `application/json`,
    /// each weighed by its most specific range (`text/csv`, then `text/*`, then `*/*`). A tie, no field, or CSV
    /// weighed 0 is JSON: `text/csv;q=0` refuses CSV, `application/json, text/csv` is JSON, `text/csv` alone is CSV.
    public static func preferred(accept: String?) -> ReportFormat {
        guard let accept, accept.utf8.count <= 1024 else { return .json }
        // Weight by specificity (2 exact, 1 type/*, 0 */*): the most specific range that names a type decides.
        var csv: (specificity: Int, q: Double) = (-1, 0), json: (specificity: Int, q: Double) = (-1, 0)
        for range in accept.lowercased().split(separator: ",") {
            let parts = range.split(separator: ";").map { part -> Substring in
                var part = part
                while part.first == " " || part.first == "\t" { part.removeFirst() }
                while part.last == " " || part.last == "\t" { part.removeLast() }
                return part
            }
            guard let type = parts.first, !type.isEmpty else { continue }
            var q = 1.0
            for parameter in parts.dropFirst() where parameter.hasPrefix("q=") {
                q = Double(parameter.dropFirst(2)).map { min(1, max(0, $0)) } ?? 1
            }
            func weigh(_ current: inout (specificity: Int, q: Double), exact: String, family: String) {
                let specificity = type == exact ? 2 : type == family ? 1 : type == "*/*" ? 0 : -1
                if specificity > current.specificity { current = (specificity, q) }
            }
            weigh(&csv, exact: "text/csv", family: "text/*")
            weigh(&json, exact: "application/json", family: "application/*")
        }
        return csv.q > 0 && csv.q > json.q ? .csv : .json
    }
}

public struct ReportParameterError: Error, Sendable {
    public let problems: [(field: String, message: String)]
}

extension ReportParameters {
    public static let priorities = ["LOW", "MEDIUM", "HIGH", "URGENT"]
    /// Values one filter may be given (`agentId`, `teamId`, `channelType`, `priority`, `score`): a report of more
    /// agents than this is the report without the filter. More is 400, so a long URL costs nothing to refuse.
    public static let maxFilterValues = 100
    public static let filters = ["agentId", "teamId", "channelType", "priority", "score"]

    /// Parses query items. `today` is the current date in the requested zone (defaults need it);
    /// `isKnownZone` checks time-zone names; `maxDays` bounds the range.
    public static func parse(_ query: [(name: String, value: String)], accept: String?, today: (String) -> LocalDate?,
                             isKnownZone: (String) -> Bool, maxDays: Int, listing: Bool) throws(ReportParameterError) -> ReportParameters {
        var reader = QueryReader(query: query)
        for name in Self.filters where query.count(where: { $0.name == name }) > Self.maxFilterValues {
            reader.problems.append((name, "may be given at most \(Self.maxFilterValues) times"))
        }
        guard reader.problems.isEmpty else { throw ReportParameterError(problems: reader.problems) }
        let known: Set<String> = ["groupBy", "from", "to", "tz", "bucket", "agentId", "teamId", "channelType", "priority", "score",
                                  "format", "limit", "cursor", "hasComment"]
        for item in query where !known.contains(item.name) { reader.problems.append((item.name, "is not a known query parameter")) }
        var groupBy = ReportDimension.agent
        if let text = reader.single("groupBy") {
            if let parsed = ReportDimension(rawValue: text) { groupBy = parsed } else { reader.problems.append(("groupBy", "must be agent, team, channelType or priority")) }
        }
        var bucket = ReportBucket.none
        if let text = reader.single("bucket") {
            if let parsed = ReportBucket(rawValue: text) { bucket = parsed } else { reader.problems.append(("bucket", "must be none, day, week or month")) }
        }
        let (zone, from, to) = reader.period(today: today, isKnownZone: isKnownZone, maxDays: maxDays)
        var p = ReportParameters(groupBy: groupBy, from: from ?? LocalDate(dayNumber: 0), to: to ?? LocalDate(dayNumber: 0), timeZone: zone,
                                 bucket: bucket)
        reader.filters(into: &p)
        reader.listingOptions(into: &p, accept: accept, listing: listing)
        guard reader.problems.isEmpty, from != nil, to != nil else { throw ReportParameterError(problems: reader.problems) }
        return p
    }
}

/// The query as `ReportParameters.parse` reads it, collecting every problem (one message per field) rather than
/// stopping at the first.
struct QueryReader {
    let query: [(name: String, value: String)]
    var problems: [(String, String)] = []

    func values(_ name: String) -> [String] { query.filter { $0.name == name }.map(\.value) }

    mutating func single(_ name: String) -> String? {
        let all = values(name)
        if all.count > 1 { problems.append((name, "must be given once")) }
        return all.first
    }

    mutating func ids(_ name: String) -> [Int] {
        values(name).compactMap { text in
            guard let id = Int(text), id >= 0 else { problems.append((name, "must be an id: a whole number, 0 or more")); return nil }
            return id
        }
    }

    /// The zone and the range: `to` defaults to today in the zone, `from` to 29 days before `to`.
    mutating func period(today: (String) -> LocalDate?, isKnownZone: (String) -> Bool,
                         maxDays: Int) -> (zone: String, from: LocalDate?, to: LocalDate?) {
        let zone = single("tz") ?? "UTC"
        var zoneOK = true
        if zone.isEmpty || zone.unicodeScalars.count > 64 || !isKnownZone(zone) {
            if let spelled = ReportParameters.zoneSpelling(zone, isKnown: isKnownZone) {
                problems.append(("tz", "must be an IANA time zone name, and names are case-sensitive: \(spelled)"))
            } else {
                problems.append(("tz", "must be an IANA time zone name such as UTC, Europe/Paris or Asia/Kolkata "
                                 + "(not posixrules, localtime, Factory or a posix/ or right/ file)"))
            }
            zoneOK = false
        }
        let (fromText, toText) = (single("from"), single("to"))
        for (field, text) in [("from", fromText), ("to", toText)] {
            if let text, let problem = LocalDate.problem(with: text) { problems.append((field, problem)) }
        }
        let to = toText.map { LocalDate($0) } ?? (zoneOK ? today(zone) : nil)
        let from = fromText.map { LocalDate($0) } ?? to?.adding(days: -29)
        if let from, let to {
            if from > to { problems.append(("from", "must not be after to")) }
            else if to.dayNumber - from.dayNumber + 1 > maxDays { problems.append(("to", "must be at most \(maxDays - 1) days after from (a range spans at most \(maxDays) days)")) }
        }
        return (zone, from, to)
    }

    /// Agents, teams, channel types, priorities and scores.
    mutating func filters(into p: inout ReportParameters) {
        p.agentIds = ids("agentId")
        p.teamIds = ids("teamId")
        p.channelTypes = values("channelType")
        for channel in p.channelTypes where channel.isEmpty || channel.unicodeScalars.count > 64 { problems.append(("channelType", "must be 1 to 64 characters")) }
        p.priorities = values("priority")
        for priority in p.priorities where !ReportParameters.priorities.contains(priority) {
            problems.append(("priority", "must be one of \(ReportParameters.priorities.joined(separator: ", "))"))
        }
        for text in values("score") {
            if let score = Int(text), (1...5).contains(score) { p.scores.append(score) } else { problems.append(("score", "must be 1 to 5")) }
        }
    }

    /// The answer's format, and the listing's page size, cursor and comment filter.
    mutating func listingOptions(into p: inout ReportParameters, accept: String?, listing: Bool) {
        if let text = single("format") {
            if let parsed = ReportFormat(rawValue: text) { p.format = parsed } else { problems.append(("format", "must be json or csv")) }
        } else {
            p.format = ReportFormat.preferred(accept: accept)
        }
        if let text = single("limit") {
            if listing, let value = Int(text), (1...500).contains(value) { p.limit = value } else { problems.append(("limit", "must be from 1 to 500")) }
        }
        if let text = single("hasComment") {
            if !listing { problems.append(("hasComment", "is only for the responses listing")) }
            else if text == "true" || text == "false" { p.hasComment = text == "true" }
            else { problems.append(("hasComment", "must be true or false")) }
        }
        p.cursor = single("cursor")
        if p.cursor != nil && !listing { problems.append(("cursor", "is only for the responses listing")) }
        for name in ["groupBy", "bucket"] where listing && !values(name).isEmpty {
            problems.append((name, "is for reports, not for the responses listing"))
        }
    }
}

extension ReportParameters {
    /// The zone a name differing only in letter case most likely means (`asia/kolkata`, `utc`, `america/new_york`).
    public static func zoneSpelling(_ text: String, isKnown: (String) -> Bool) -> String? {
        guard text.unicodeScalars.count <= 64 else { return nil }
        let words = text.lowercased().split(separator: "/", omittingEmptySubsequences: false).map { part in
            part.split(separator: "_", omittingEmptySubsequences: false).map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(separator: "_")
        }.joined(separator: "/")
        return [words, text.uppercased()].first { $0 != text && isKnown($0) }
    }
}
