/// Aligned power-of-two runs of days. A block of level k covers 2^k days and starts on a day number (days since
/// 1970-01-01) that is a multiple of 2^k. The agent × team rollups keep every level from 0 (one day) to `maxLevel`,
/// so any range of n days is the sum of at most about 2·log2(n) blocks: a 90-day report reads a dozen rows per
/// agent and team instead of ninety.
public enum RollupBlocks {
    /// 512 days; longer ranges take several top-level blocks.
    public static let maxLevel = 9
    /// Not a power of two: the ISO week (Monday to Sunday) holding a day, kept beside the aligned levels so that a
    /// report by week reads one block per week instead of the three or four aligned ones it is made of.
    public static let weekLevel = 10

    public struct Block: Hashable, Sendable {
        public let level: Int
        public let firstDay: LocalDate

        public init(level: Int, firstDay: LocalDate) {
            self.level = level
            self.firstDay = firstDay
        }

        public var lastDay: LocalDate { firstDay.adding(days: level == weekLevel ? 6 : (1 << level) - 1) }
    }

    /// The block of `level` that holds `day` (floor division, so days before 1970 work too).
    public static func block(holding day: LocalDate, level: Int) -> Block {
        Block(level: level, firstDay: LocalDate(dayNumber: (day.dayNumber >> level) << level))
    }

    /// The fewest aligned blocks that together cover exactly `from…to`, in order.
    public static func cover(from: LocalDate, to: LocalDate) -> [Block] {
        var blocks: [Block] = []
        var start = from.dayNumber
        let end = to.dayNumber
        while start <= end {
            var level = 0
            while level < maxLevel {
                let next = level + 1
                guard start & ((1 << next) - 1) == 0, start + (1 << next) - 1 <= end else { break }
                level = next
            }
            blocks.append(Block(level: level, firstDay: LocalDate(dayNumber: start)))
            start += 1 << level
        }
        return blocks
    }
}

/// The blocks one report reads, each tagged with what it adds to: the previous period (tag 0) or a bucket of the
/// current period (tag i + 1 for `buckets[i]`; a single nil bucket when the report is not bucketed). Both periods
/// and every bucket come back from one query.
public struct BlockPlan: Sendable {
    public struct Part: Sendable {
        public let block: RollupBlocks.Block
        public let tag: Int
    }

    public static let previousTag = 0
    public private(set) var parts: [Part] = []
    public private(set) var buckets: [LocalDate?] = []

    public init(_ p: ReportParameters) {
        if p.bucket == .none {
            add(from: p.from, to: p.to, bucket: nil)
        } else {
            var day = p.from
            while day <= p.to {
                guard let (start, end) = CSATReportShaper.bucket(of: day, p.bucket, from: p.from, to: p.to) else { break }
                add(from: start, to: end, bucket: start)
                day = end.adding(days: 1)
            }
        }
        let previous = p.previous
        for block in RollupBlocks.cover(from: previous.from, to: previous.to) {
            parts.append(Part(block: block, tag: Self.previousTag))
        }
    }

    private mutating func add(from: LocalDate, to: LocalDate, bucket: LocalDate?) {
        buckets.append(bucket)
        if from.weekday == 1, to.dayNumber - from.dayNumber == 6 {
            parts.append(Part(block: RollupBlocks.Block(level: RollupBlocks.weekLevel, firstDay: from), tag: buckets.count))
            return
        }
        for block in RollupBlocks.cover(from: from, to: to) { parts.append(Part(block: block, tag: buckets.count)) }
    }
}
