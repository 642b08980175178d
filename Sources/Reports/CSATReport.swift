/// The figures of one group (and bucket), summed from rollups or raw ratings.
/// Counts of scores 1…5, held inline: a weekly report carries thousands of figures, and an array each cost an
/// allocation, its release and reference counting on every copy (a fifth of such a report's gateway time).
public struct ScoreCounts: Sendable, Equatable, MutableCollection, RandomAccessCollection, ExpressibleByArrayLiteral {
    private var counts: (Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0)

    public init() {}

    /// The first five values (missing ones are 0).
    public init(_ values: some Sequence<Int>) {
        for (index, value) in zip(0..<5, values) { self[index] = value }
    }

    public init(arrayLiteral elements: Int...) { self.init(elements) }

    /// The counts of scores 1 to 5. Rows read from the rollups make one each (3,000 for a weekly agents' report): an
    /// array literal made and released an array per row.
    public init(_ ones: Int, _ twos: Int, _ threes: Int, _ fours: Int, _ fives: Int) {
        counts = (ones, twos, threes, fours, fives)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { 5 }

    public subscript(index: Int) -> Int {
        get {
            switch index {
            case 0: return counts.0
            case 1: return counts.1
            case 2: return counts.2
            case 3: return counts.3
            case 4: return counts.4
            default: preconditionFailure("score index \(index) out of 0..<5")
            }
        }
        set {
            switch index {
            case 0: counts.0 = newValue
            case 1: counts.1 = newValue
            case 2: counts.2 = newValue
            case 3: counts.3 = newValue
            case 4: counts.4 = newValue
            default: preconditionFailure("score index \(index) out of 0..<5")
            }
        }
    }

    public static func == (a: ScoreCounts, b: ScoreCounts) -> Bool { a.counts == b.counts }
}

public struct CSATFigures: Sendable, Equatable {
    public var requests = 0
    public var responses = 0
    public var scored = 0
    public var scoreSum = 0
    /// Counts of scores 1…5.
    public var distribution = ScoreCounts()

    public init() {}

    public init(requests: Int, responses: Int, scored: Int, scoreSum: Int, distribution: ScoreCounts) {
        self.requests = requests
        self.responses = responses
        self.scored = scored
        self.scoreSum = scoreSum
        self.distribution = distribution
    }

    /// From the counts of each score (the scored count and the score sum follow from them).
    public init(requests: Int, responses: Int, distribution: ScoreCounts) {
        var scored = 0, scoreSum = 0
        for (index, count) in distribution.enumerated() {
            scored += count
            scoreSum += (index + 1) * count
        }
        self.init(requests: requests, responses: responses, scored: scored, scoreSum: scoreSum, distribution: distribution)
    }

    public mutating func add(_ other: CSATFigures) {
        requests += other.requests
        responses += other.responses
        scored += other.scored
        scoreSum += other.scoreSum
        for index in 0..<5 { distribution[index] += other.distribution[index] }
    }

    /// Keeps only the given scores (responses without a score drop out too); requests are unaffected.
    public func restricted(to scores: [Int]) -> CSATFigures {
        guard !scores.isEmpty else { return self }
        var result = CSATFigures()
        result.requests = requests
        for score in Set(scores) {
            let count = distribution[score - 1]
            result.distribution[score - 1] = count
            result.responses += count
            result.scored += count
            result.scoreSum += count * score
        }
        return result
    }

    /// Mean score, two decimals; nil without scored responses.
    public var averageScore: Double? { roundedAverage?.value }

    /// Share of 4s and 5s among scored responses, in percent with two decimals.
    public var csatPercent: Double? { roundedCSAT?.value }

    /// Responses per request sent, four decimals; nil when no request was recorded.
    public var responseRate: Double? { roundedRate?.value }

    var roundedAverage: RoundedRatio? { scored == 0 ? nil : RoundedRatio(Double(scoreSum) / Double(scored), places: 2) }
    var roundedCSAT: RoundedRatio? {
        scored == 0 ? nil : RoundedRatio(Double(distribution[3] + distribution[4]) * 100 / Double(scored), places: 2)
    }
    var roundedRate: RoundedRatio? { requests == 0 ? nil : RoundedRatio(Double(responses) / Double(requests), places: 4) }
}

/// A ratio rounded half away from zero to a few decimals, as `Double.rounded()` rounds, kept as the whole number
/// `ratio × 10^places` too: the report's JSON prints that number's digits instead of working them out again from the
/// Double (three ratios on each of a weekly report's 2,800 rows).
struct RoundedRatio {
    /// `ratio × 10^places`, rounded: a whole number.
    let scaled: Double
    let places: Int
    let scale: Double

    init(_ ratio: Double, places: Int) {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        let product = ratio * scale
        // Without `rounded()`'s call into libm: the fraction `product - whole` is exact.
        if product >= 0, product < 1e15 {
            let whole = Double(Int64(product))
            scaled = product - whole >= 0.5 ? whole + 1 : whole
        } else {
            scaled = product.rounded()
        }
        (self.places, self.scale) = (places, scale)
    }

    var value: Double { scaled / scale }
}

/// One report row: a group and, when bucketed, the bucket it covers.
public struct CSATRow: Sendable {
    public let key: ReportKey
    /// The agent's or team's id; 0 for none or a text dimension.
    public var groupId: Int { key.id }
    public var name: String
    public let bucketStart: LocalDate?
    public let bucketEnd: LocalDate?
    public var figures: CSATFigures
    public var previous: CSATFigures?
}

public struct CSATReport: Sendable {
    public let parameters: ReportParameters
    /// `rollup` or `raw`.
    public let source: String
    public let rows: [CSATRow]
    public let totals: CSATFigures
    public let previousTotals: CSATFigures

    /// The same report with its rows in another order (the report page's sort), for a CSV of the rows on screen.
    public func reordered(_ rows: [CSATRow]) -> CSATReport {
        CSATReport(parameters: parameters, source: source, rows: rows, totals: totals, previousTotals: previousTotals)
    }
}

/// Each group's rank by its key, in an open-addressed table of the keys' integers: a weekly agents' report looks up
/// 3,000 entries, and hashing each key through `Hasher` was a fiftieth of its time.
struct GroupRanks {
    /// `Int.min` marks a free slot (no key is: ids are positive, none is 0, text values negative and small).
    private var keys: [Int]
    private var ranks: [Int]
    private var shift: Int
    private var used = 0

    init(expected: Int) {
        var bits = 4
        while 1 << bits < expected * 2 { bits += 1 }
        keys = Array(repeating: .min, count: 1 << bits)
        ranks = Array(repeating: 0, count: 1 << bits)
        shift = 64 - bits
    }

    private func slot(of raw: Int) -> Int {
        // Fibonacci hashing: the key times 2^64/φ, its top bits the slot.
        var index = Int(truncatingIfNeeded: (UInt64(bitPattern: Int64(raw)) &* 0x9E37_79B9_7F4A_7C15) >> UInt64(shift))
        while keys[index] != .min, keys[index] != raw { index = (index + 1) & (keys.count - 1) }
        return index
    }

    func rank(of key: ReportKey) -> Int? {
        let index = slot(of: key.raw)
        return keys[index] == key.raw ? ranks[index] : nil
    }

    mutating func add(_ key: ReportKey, rank: Int) {
        if (used + 1) * 2 > keys.count { grow() }
        let index = slot(of: key.raw)
        if keys[index] == .min { used += 1 }
        (keys[index], ranks[index]) = (key.raw, rank)
    }

    private mutating func grow() {
        let (oldKeys, oldRanks) = (keys, ranks)
        keys = Array(repeating: .min, count: oldKeys.count * 2)
        ranks = Array(repeating: 0, count: oldKeys.count * 2)
        shift -= 1
        for index in oldKeys.indices where oldKeys[index] != .min {
            let target = slot(of: oldKeys[index])
            (keys[target], ranks[target]) = (oldKeys[index], oldRanks[index])
        }
    }
}

/// Turns summed figures keyed by group and bucket into report rows.
public enum CSATReportShaper {
    /// The natural bucket a day falls in (clipped to the report range).
    public static func bucket(of day: LocalDate, _ bucket: ReportBucket, from: LocalDate, to: LocalDate) -> (LocalDate, LocalDate)? {
        switch bucket {
        case .none: return nil
        case .day: return (day, day)
        case .week:
            let start = day.adding(days: -(day.weekday - 1))
            return (max(start, from), min(start.adding(days: 6), to))
        case .month:
            let (y, m, _) = day.components
            let start = LocalDate(year: y, month: m, day: 1)
            let end = LocalDate(year: y, month: m, day: LocalDate.daysIn(month: m, year: y))
            return (max(start, from), min(end, to))
        }
    }

    public static func shape(parameters: ReportParameters, source: String, current: [ReportEntry],
                             previous: [(group: ReportKey, figures: CSATFigures)], names: GroupNames) -> CSATReport {
        // Groups are ranked once by name and id; entries then sort by (rank, bucket) as integers, and equal neighbours
        // merge. A weekly agents' report is thousands of entries: hashing each (group, bucket) and sorting the rows
        // afterwards was a fifth of its gateway time.
        var rank = GroupRanks(expected: min(current.count, 4_096))
        // Sized once (grown by doubling they were reallocated eight times for 200 groups).
        var groups: [(name: String, raw: Int)] = []
        groups.reserveCapacity(min(current.count, 4_096))
        // Each group's place among the names, while every group has one.
        var places: [Int]? = []
        places?.reserveCapacity(min(current.count, 4_096))
        var groupOf = [Int](repeating: 0, count: current.count)
        for (position, entry) in current.enumerated() {
            if let known = rank.rank(of: entry.group) {
                groupOf[position] = known
            } else {
                groupOf[position] = groups.count
                rank.add(entry.group, rank: groups.count)
                groups.append((name(entry.group, names.byId), entry.group.raw))
                if places != nil { if let place = names.place(of: entry.group) { places?.append(place) } else { places = nil } }
            }
        }
        var order = [Int](repeating: 0, count: groups.count)
        for (place, group) in rankedByName(groups, places: places).enumerated() { order[group] = place }
        // Each entry's place and bucket in one integer (a group's place above, a bucket's first day counted from the
        // range's below, 0 for none), sorted with the entry's position: 16-byte pairs compared as integers, where the
        // sort moved 40-byte tuples with their bucket ranges and looked the groups' places up in every comparison.
        let firstDay = parameters.from.dayNumber - 1
        var keyed: [(key: UInt64, entry: Int)] = []
        keyed.reserveCapacity(current.count)
        for (position, entry) in current.enumerated() {
            let start = entry.bucketStart.flatMap { bucket(of: $0, parameters.bucket, from: parameters.from, to: parameters.to)?.0 }
            let day = UInt64(truncatingIfNeeded: start.map { $0.dayNumber - firstDay } ?? 0) & 0xFFFF_FFFF
            keyed.append((UInt64(order[groupOf[position]]) << 32 | day, position))
        }
        keyed.sort { ($0.key, $0.entry) < ($1.key, $1.entry) }
        // The previous period per group, found through the groups' ranks (a group absent from the current period has
        // no row, and counts only in the previous totals).
        var previousTotals = CSATFigures()
        var previousByGroup = [CSATFigures](repeating: CSATFigures(), count: parameters.previousPerGroup ? groups.count : 0)
        for entry in previous {
            let figures = entry.figures.restricted(to: parameters.scores)
            previousTotals.add(figures)
            if !previousByGroup.isEmpty, let group = rank.rank(of: entry.group) { previousByGroup[group].add(figures) }
        }
        var rows: [CSATRow] = []
        rows.reserveCapacity(keyed.count)
        var totals = CSATFigures()
        var last: UInt64?
        for key in keyed {
            let entry = current[key.entry]
            let figures = entry.figures.restricted(to: parameters.scores)
            totals.add(figures)
            if last == key.key {
                rows[rows.count - 1].figures.add(figures)
                continue
            }
            last = key.key
            let group = groupOf[key.entry]
            let range = entry.bucketStart.flatMap { bucket(of: $0, parameters.bucket, from: parameters.from, to: parameters.to) }
            rows.append(CSATRow(key: entry.group, name: groups[group].name, bucketStart: range?.0, bucketEnd: range?.1,
                                figures: figures, previous: previousByGroup.isEmpty ? nil : previousByGroup[group]))
        }
        return CSATReport(parameters: parameters, source: source, rows: rows, totals: totals, previousTotals: previousTotals)
    }

    /// The groups' indices in the order of their names, then ids: by the names' places when every group has one
    /// (comparing the names was a twentieth of an agents' report's samples), else by the names themselves.
    static func rankedByName(_ groups: [(name: String, raw: Int)], places: [Int]?) -> [Int] {
        guard let places else { return groups.indices.sorted { groups[$0] < groups[$1] } }
        return groups.indices.sorted { (places[$0], groups[$0].raw) < (places[$1], groups[$1].raw) }
    }

    static func name(_ key: ReportKey, _ names: [Int: String]) -> String {
        switch key.value {
        case .none: return "(none)"
        case .id(let id): return names[id] ?? "#\(id)"
        case .text(let text): return text
        }
    }
}

/// Agents' or teams' display names by id, each id with its name's place in name order (equal names share a place).
/// Made when the names are read (a cache keeps them for half a minute), so a report orders its groups by integers.
public struct GroupNames: Sendable {
    public let byId: [Int: String]
    let places: [Int: Int]

    public init(_ byId: [Int: String]) {
        self.byId = byId
        var places = [Int: Int](minimumCapacity: byId.count)
        var (place, last) = (-1, nil as String?)
        for (id, name) in byId.sorted(by: { $0.value < $1.value }) {
            if name != last { (place, last) = (place + 1, name) }
            places[id] = place
        }
        self.places = places
    }

    /// The place of the group's name; nil for a group shown by something else (no id, an unknown id, a text value).
    func place(of key: ReportKey) -> Int? {
        // By the raw key: `value` looks a text group's text up under a lock, which an id's place does not need.
        key.raw > 0 ? places[key.raw] : nil
    }
}
