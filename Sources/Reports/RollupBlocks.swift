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

    /// A block added to a range's sum, or (sign -1) taken from it.
    public struct SignedBlock: Hashable, Sendable {
        public let block: Block
        public let sign: Int
    }

    /// The fewest aligned blocks whose signed sum is exactly `from…to`: a larger block less its part outside the range
    /// where that takes fewer than a cover of added blocks only (a 90-day range and the 90 days before it: 10.5 blocks
    /// on average over a year's end dates instead of 12.8, at most 14 instead of 17). Of covers as small, one that takes
    /// fewest away, so a range a plain cover serves as well is read without any.
    public static func signedCover(from: LocalDate, to: LocalDate) -> [SignedBlock] {
        // A day is its own block: a daily report's buckets need no search (their plan was 4 % of a 90-day daily report's
        // gateway CPU).
        if from == to { return [SignedBlock(block: Block(level: 0, firstDay: from), sign: 1)] }
        let plan = SignedCoverSearch(from: from.dayNumber, to: to.dayNumber + 1).best
        var (x, y) = (from.dayNumber, to.dayNumber + 1)
        var left: [SignedBlock] = [], right: [SignedBlock] = []
        for level in 0..<maxLevel {
            let size = 1 << level
            let step = plan.moves >> (4 * UInt64(level))
            switch step & 3 {
            case 1: left.append(SignedBlock(block: Block(level: level, firstDay: LocalDate(dayNumber: x)), sign: 1)); x += size
            case 2: x -= size; left.append(SignedBlock(block: Block(level: level, firstDay: LocalDate(dayNumber: x)), sign: -1))
            default: break
            }
            switch (step >> 2) & 3 {
            case 1: y -= size; right.append(SignedBlock(block: Block(level: level, firstDay: LocalDate(dayNumber: y)), sign: 1))
            case 2: right.append(SignedBlock(block: Block(level: level, firstDay: LocalDate(dayNumber: y)), sign: -1)); y += size
            default: break
            }
        }
        for start in stride(from: min(x, y), to: max(x, y), by: 1 << maxLevel) {
            left.append(SignedBlock(block: Block(level: maxLevel, firstDay: LocalDate(dayNumber: start)), sign: x < y ? 1 : -1))
        }
        return left + right.reversed()
    }

    /// How many times signed blocks count each day, as runs (first and last day number, count) of the days they count
    /// other than 0: what a cover or a plan is checked against (the tests, the fuzz target).
    public static func coverage(_ parts: [(block: Block, sign: Int)]) -> [(first: Int, last: Int, count: Int)] {
        var changes: [Int: Int] = [:]
        for part in parts {
            changes[part.block.firstDay.dayNumber, default: 0] += part.sign
            changes[part.block.lastDay.dayNumber + 1, default: 0] -= part.sign
        }
        var runs: [(first: Int, last: Int, count: Int)] = []
        var count = 0
        let days = changes.keys.sorted()
        for (index, day) in days.enumerated() {
            count += changes[day]!
            guard count != 0, index + 1 < days.count else { continue }
            if let last = runs.last, last.last == day - 1, last.count == count {
                runs[runs.count - 1].last = days[index + 1] - 1
            } else {
                runs.append((day, days[index + 1] - 1, count))
            }
        }
        return runs
    }
}

/// The search behind `RollupBlocks.signedCover`. The range's ends [x, y) move level by level: at level k an end whose
/// bit k is set takes a block of 2^k days toward the other end (added) or away from it (taken away), so that both are
/// multiples of 2^(k+1) after; once they meet nothing is left, else the top level's blocks fill the space between
/// them. The ends' positions after a level are at most two each, so four states a level.
struct SignedCoverSearch {
    /// Per level four bits: the start's move (1 added, 2 taken away) and, two bits up, the end's.
    struct State {
        var x: Int, y: Int, blocks: Int, taken: Int, moves: UInt64

        var total: (blocks: Int, taken: Int) {
            let top = abs(y - x) >> RollupBlocks.maxLevel
            return (blocks + top, taken + (x > y ? top : 0))
        }
    }

    let best: State

    init(from: Int, to: Int) {
        var states = [State(x: from, y: to, blocks: 0, taken: 0, moves: 0)]
        var next: [State] = []
        for level in 0..<RollupBlocks.maxLevel {
            next.removeAll(keepingCapacity: true)
            for state in states {
                guard state.x != state.y else {
                    Self.keep(state, in: &next)
                    continue
                }
                let startMoves: UInt64 = (state.x >> level) & 1 == 0 ? 0 : 2
                let endMoves: UInt64 = (state.y >> level) & 1 == 0 ? 0 : 2
                for startMove in (startMoves == 0 ? 0...0 : 1...2) as ClosedRange<UInt64> {
                    for endMove in (endMoves == 0 ? 0...0 : 1...2) as ClosedRange<UInt64> {
                        Self.keep(Self.moved(state, level: level, start: startMove, end: endMove), in: &next)
                    }
                }
            }
            swap(&states, &next)
        }
        var best = states[0]
        for state in states.dropFirst() where state.total < best.total { best = state }
        self.best = best
    }

    static func moved(_ state: State, level: Int, start: UInt64, end: UInt64) -> State {
        let size = 1 << level
        var result = state
        result.x += start == 1 ? size : start == 2 ? -size : 0
        result.y += end == 1 ? -size : end == 2 ? size : 0
        result.blocks += (start == 0 ? 0 : 1) + (end == 0 ? 0 : 1)
        result.taken += (start == 2 ? 1 : 0) + (end == 2 ? 1 : 0)
        result.moves |= (start | end << 2) << (4 * UInt64(level))
        return result
    }

    /// One state per pair of positions: the one with fewest blocks, then fewest taken away, the first of equals.
    static func keep(_ state: State, in states: inout [State]) {
        guard let index = states.firstIndex(where: { $0.x == state.x && $0.y == state.y }) else {
            states.append(state)
            return
        }
        if (state.blocks, state.taken) < (states[index].blocks, states[index].taken) { states[index] = state }
    }
}

/// The blocks one report reads, each tagged with what it adds to: the previous period (tag 0) or a bucket of the
/// current period (tag i + 1 for `buckets[i]`; a single nil bucket when the report is not bucketed). Both periods
/// and every bucket come back from one query.
public struct BlockPlan: Sendable {
    public struct Part: Sendable {
        public let block: RollupBlocks.Block
        public let tag: Int
        /// 1, or -1 for a block taken from its tag's sum (`RollupBlocks.signedCover`).
        public var sign = 1
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
        for part in RollupBlocks.signedCover(from: previous.from, to: previous.to) {
            parts.append(Part(block: part.block, tag: Self.previousTag, sign: part.sign))
        }
    }

    private mutating func add(from: LocalDate, to: LocalDate, bucket: LocalDate?) {
        buckets.append(bucket)
        if from.weekday == 1, to.dayNumber - from.dayNumber == 6 {
            parts.append(Part(block: RollupBlocks.Block(level: RollupBlocks.weekLevel, firstDay: from), tag: buckets.count))
            return
        }
        for part in RollupBlocks.signedCover(from: from, to: to) { parts.append(Part(block: part.block, tag: buckets.count, sign: part.sign)) }
    }
}
