/// A calendar date without a time zone (`YYYY-MM-DD`), as reports take and return them.
public struct LocalDate: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// Days since 1970-01-01.
    public let dayNumber: Int

    public init(dayNumber: Int) { self.dayNumber = dayNumber }

    public init?(_ text: String) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              let year = Int(parts[0]), let month = Int(parts[1]), let day = Int(parts[2]),
              (1...12).contains(month), day >= 1, day <= Self.daysIn(month: month, year: year), year >= 1970, year <= 9999 else { return nil }
        dayNumber = Self.days(year: year, month: month, day: day)
    }

    public init(year: Int, month: Int, day: Int) {
        dayNumber = Self.days(year: year, month: month, day: day)
    }

    public static func < (lhs: LocalDate, rhs: LocalDate) -> Bool { lhs.dayNumber < rhs.dayNumber }

    public func adding(days: Int) -> LocalDate { LocalDate(dayNumber: dayNumber + days) }

    public var components: (year: Int, month: Int, day: Int) {
        // Civil-from-days (Howard Hinnant's algorithm).
        let z = dayNumber + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// ISO weekday, Monday = 1.
    public var weekday: Int { ((dayNumber % 7 + 7 + 3) % 7) + 1 }

    /// YYYY-MM-DD, written digit by digit: bucketed reports print thousands of these.
    public var description: String {
        let (y, m, d) = components
        guard (0...9999).contains(y) else { return String(y) + "-" + String(m + 100).dropFirst() + "-" + String(d + 100).dropFirst() }
        let zero = UInt8(ascii: "0")
        let bytes: [UInt8] = [zero + UInt8(y / 1000), zero + UInt8(y / 100 % 10), zero + UInt8(y / 10 % 10), zero + UInt8(y % 10),
                              UInt8(ascii: "-"), zero + UInt8(m / 10), zero + UInt8(m % 10),
                              UInt8(ascii: "-"), zero + UInt8(d / 10), zero + UInt8(d % 10)]
        return String(decoding: bytes, as: UTF8.self)
    }

    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = month > 2 ? month - 3 : month + 9
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    public static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }
}

public enum ReportGroup: String, Sendable, CaseIterable { case agent, team }
public enum ReportBucket: String, Sendable, CaseIterable { case none, day, week, month }

/// Everything a CSAT report or response listing is asked for, validated.
public struct ReportParameters: Sendable {
    public var groupBy: ReportGroup = .agent
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
    /// Whether channel type or priority narrow the report (only the full-dimension rollup can answer then).
    public var filtersDimensions: Bool { !channelTypes.isEmpty || !priorities.isEmpty }
}

public enum ReportFormat: String, Sendable { case json, csv }

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
        var problems: [(String, String)] = []
        for name in Self.filters where query.count(where: { $0.name == name }) > Self.maxFilterValues {
            problems.append((name, "may be given at most \(Self.maxFilterValues) times"))
        }
        guard problems.isEmpty else { throw ReportParameterError(problems: problems) }
        func values(_ name: String) -> [String] { query.filter { $0.name == name }.map(\.value) }
        func single(_ name: String) -> String? {
            let all = values(name)
            if all.count > 1 { problems.append((name, "must be given once")) }
            return all.first
        }
        let known: Set<String> = ["groupBy", "from", "to", "tz", "bucket", "agentId", "teamId", "channelType", "priority", "score",
                                  "format", "limit", "cursor", "hasComment"]
        for item in query where !known.contains(item.name) { problems.append((item.name, "is not a known query parameter")) }

        let zone = single("tz") ?? "UTC"
        var zoneOK = true
        if zone.isEmpty || zone.count > 64 || !isKnownZone(zone) {
            problems.append(("tz", "must be an IANA time zone name such as UTC, Europe/Paris or Asia/Kolkata "
                             + "(not posixrules, localtime, Factory or a posix/ or right/ file)"))
            zoneOK = false
        }
        var groupBy = ReportGroup.agent
        if let text = single("groupBy") {
            if let parsed = ReportGroup(rawValue: text) { groupBy = parsed } else { problems.append(("groupBy", "must be agent or team")) }
        }
        var bucket = ReportBucket.none
        if let text = single("bucket") {
            if let parsed = ReportBucket(rawValue: text) { bucket = parsed } else { problems.append(("bucket", "must be none, day, week or month")) }
        }
        let todayHere = zoneOK ? today(zone) : nil
        var from: LocalDate?
        var to: LocalDate?
        if let text = single("to") {
            to = LocalDate(text)
            if to == nil { problems.append(("to", "must be a date YYYY-MM-DD")) }
        } else {
            to = todayHere
        }
        if let text = single("from") {
            from = LocalDate(text)
            if from == nil { problems.append(("from", "must be a date YYYY-MM-DD")) }
        } else {
            from = to?.adding(days: -29)
        }
        if let from, let to {
            if from > to { problems.append(("from", "must not be after to")) }
            else if to.dayNumber - from.dayNumber + 1 > maxDays { problems.append(("to", "the range may span at most \(maxDays) days")) }
        }
        func ids(_ name: String) -> [Int] {
            values(name).compactMap { text in
                guard let id = Int(text), id >= 0 else { problems.append((name, "must be a whole number")); return nil }
                return id
            }
        }
        let agentIds = ids("agentId")
        let teamIds = ids("teamId")
        let channels = values("channelType")
        for channel in channels where channel.isEmpty || channel.count > 64 { problems.append(("channelType", "must be 1 to 64 characters")) }
        let priorities = values("priority")
        for priority in priorities where !Self.priorities.contains(priority) {
            problems.append(("priority", "must be one of \(Self.priorities.joined(separator: ", "))"))
        }
        var scores: [Int] = []
        for text in values("score") {
            if let score = Int(text), (1...5).contains(score) { scores.append(score) } else { problems.append(("score", "must be 1 to 5")) }
        }
        var format = ReportFormat.json
        if let text = single("format") {
            if let parsed = ReportFormat(rawValue: text) { format = parsed } else { problems.append(("format", "must be json or csv")) }
        } else if let accept, accept.lowercased().contains("text/csv") {
            format = .csv
        }
        var limit = 50
        if let text = single("limit") {
            if listing, let value = Int(text), (1...500).contains(value) { limit = value } else { problems.append(("limit", "must be from 1 to 500")) }
        }
        var hasComment: Bool?
        if let text = single("hasComment") {
            if !listing { problems.append(("hasComment", "is only for the responses listing")) }
            else if text == "true" || text == "false" { hasComment = text == "true" }
            else { problems.append(("hasComment", "must be true or false")) }
        }
        let cursor = single("cursor")
        if cursor != nil && !listing { problems.append(("cursor", "is only for the responses listing")) }
        if listing && (values("groupBy").count > 0 || values("bucket").count > 0) {
            problems.append(("groupBy", "groupBy and bucket apply to reports, not to the responses listing"))
        }
        guard problems.isEmpty, let from, let to else { throw ReportParameterError(problems: problems) }
        return ReportParameters(groupBy: groupBy, from: from, to: to, timeZone: zone, bucket: bucket, agentIds: agentIds,
                                teamIds: teamIds, channelTypes: channels, priorities: priorities, scores: scores, hasComment: hasComment, format: format,
                                limit: limit, cursor: cursor)
    }
}
