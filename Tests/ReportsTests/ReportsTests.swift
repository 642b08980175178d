import JSON
import Reports
import Testing

@Suite struct LocalDateTests {
    @Test func roundTripsAndCountsDays() {
        for text in ["1970-01-01", "2024-02-29", "2026-03-08", "2026-12-31", "2100-03-01"] {
            #expect(LocalDate(text)?.description == text)
        }
        #expect(LocalDate("2026-01-01")!.adding(days: 365).description == "2027-01-01")
        #expect(LocalDate("2025-02-29") == nil)
        #expect(LocalDate("2026-13-01") == nil)
        #expect(LocalDate("2026-1-01") == nil)
        #expect(LocalDate("2026-11-23")!.weekday == 1) // a Monday
        #expect(LocalDate("2026-11-22")!.weekday == 7)
    }

    @Test func bucketsAreClippedToTheRange() {
        let from = LocalDate("2026-03-04")!, to = LocalDate("2026-04-10")!
        let week = CSATReportShaper.bucket(of: LocalDate("2026-03-05")!, .week, from: from, to: to)
        #expect(week.map { "\($0.0)…\($0.1)" } == "2026-03-04…2026-03-08")
        let month = CSATReportShaper.bucket(of: LocalDate("2026-04-02")!, .month, from: from, to: to)
        #expect(month.map { "\($0.0)…\($0.1)" } == "2026-04-01…2026-04-10")
    }
}

@Suite struct ReportParameterTests {
    func parse(_ query: [(String, String)], accept: String? = nil) throws -> ReportParameters {
        try ReportParameters.parse(query.map { (name: $0.0, value: $0.1) }, accept: accept, today: { _ in LocalDate("2026-06-30") },
                                   isKnownZone: { ["UTC", "Asia/Kolkata"].contains($0) }, maxDays: 100, listing: false)
    }

    @Test func channelTypesOf64CodePointsAreAccepted() throws {
        let type = "a" + String(repeating: "\u{301}", count: 63)
        #expect(try parse([("channelType", type)]).channelTypes == [type])
    }

    @Test func defaultsToTheLast30DaysInUTC() throws {
        let p = try parse([])
        #expect(p.from.description == "2026-06-01")
        #expect(p.to.description == "2026-06-30")
        #expect(p.timeZone == "UTC")
        #expect(p.previous.from.description == "2026-05-02")
        #expect(p.previous.to.description == "2026-05-31")
        #expect(try parse([], accept: "text/csv").format == .csv)
    }

    @Test func refusesBadInputWithOneMessagePerField() {
        for query in [[("from", "2026-02-30")], [("tz", "Mars/Olympus")], [("from", "2026-06-10"), ("to", "2026-06-01")],
                      [("from", "2026-01-01"), ("to", "2026-06-01")], [("groupBy", "customer")], [("bucket", "year")],
                      [("score", "6")], [("priority", "SOON")], [("agentId", "x")], [("unknown", "1")], [("tz", "UTC"), ("tz", "UTC")],
                      // One Character of 65 code points is 65 long, as the schema counts.
                      [("channelType", "a" + String(repeating: "\u{301}", count: 64))]] {
            #expect(throws: ReportParameterError.self, "\(query)") { try parse(query) }
        }
    }

    /// `Accept` weighed as RFC 9110 §12.5.1 weighs it, not searched for "text/csv".
    @Test func theFormatFollowsTheAcceptFieldsWeights() {
        let cases: [(String?, ReportFormat)] = [
            (nil, .json), ("", .json), ("*/*", .json), ("application/json", .json), ("text/csv", .csv), ("TEXT/CSV", .csv),
            ("text/csv;q=0", .json), ("text/csv; q=0.0", .json), ("application/json, text/csv", .json),
            ("text/csv, application/json;q=0.5", .csv), ("application/json;q=0.2, text/csv;q=0.8", .csv),
            ("text/*", .csv), ("text/*, application/*", .json), ("text/html, */*;q=0.8", .json),
            ("text/csv;q=0.5, */*", .json), ("*/*;q=0.1, text/csv", .csv), ("text/*;q=0, text/csv", .csv),
            ("text/csv;q=0, text/*", .json), ("application/xml", .json), ("text/csv;charset=utf-8", .csv),
        ]
        for (accept, format) in cases {
            #expect(ReportFormat.preferred(accept: accept) == format, "\(accept ?? "nil")")
        }
    }

    @Test func aDateOutsideTheRangeSaysWhichRange() throws {
        let error = #expect(throws: ReportParameterError.self) { try parse([("from", "1969-12-31"), ("to", "1970-01-30")]) }
        #expect(error?.problems.map(\.field) == ["from"])
        #expect(error?.problems.first?.message == "must be a date YYYY-MM-DD from 1970-01-01 to 9999-12-31")
        #expect(try parse([("from", "1970-01-01"), ("to", "1970-01-30")]).from.description == "1970-01-01")
        #expect(try parse([("from", "9999-12-01"), ("to", "9999-12-31")]).to.description == "9999-12-31")
    }

    /// A date written right that the calendar does not have says so, and both dates' problems come in the order the
    /// range is written, from first.
    @Test func aDayTheCalendarDoesNotHaveIsNamed() throws {
        let error = #expect(throws: ReportParameterError.self) { try parse([("from", "2026-02-29"), ("to", "2026-04-31")]) }
        #expect(error?.problems.map(\.field) == ["from", "to"])
        #expect(error?.problems.map(\.message) == ["is not a day of the calendar: 2026-02 has 28 days",
                                                    "is not a day of the calendar: 2026-04 has 30 days"])
        #expect(try parse([("from", "2024-02-29"), ("to", "2024-03-31")]).from.description == "2024-02-29")
        let malformed = #expect(throws: ReportParameterError.self) { try parse([("from", "2026-02-32"), ("to", "2026-13-01")]) }
        #expect(malformed?.problems.map(\.message) == ["must be a date YYYY-MM-DD from 1970-01-01 to 9999-12-31",
                                                        "must be a date YYYY-MM-DD from 1970-01-01 to 9999-12-31"])
    }

    @Test func aZoneInTheWrongCaseIsNamedAsItIsSpelled() throws {
        for (asked, spelled) in [("asia/kolkata", "Asia/Kolkata"), ("utc", "UTC"), ("ASIA/KOLKATA", "Asia/Kolkata")] {
            let error = #expect(throws: ReportParameterError.self) { try parse([("tz", asked)]) }
            #expect(error?.problems.first?.message == "must be an IANA time zone name, and names are case-sensitive: \(spelled)")
        }
        let unknown = #expect(throws: ReportParameterError.self) { try parse([("tz", "Mars/Base")]) }
        #expect(unknown?.problems.first?.message.hasPrefix("must be an IANA time zone name such as UTC") == true)
        #expect(ReportParameters.zoneSpelling("america/new_york", isKnown: { $0 == "America/New_York" }) == "America/New_York")
    }
}

@Suite struct CSATFiguresTests {
    @Test func averagesPercentagesAndScoreFilters() {
        let figures = CSATFigures(requests: 10, responses: 7, scored: 6, scoreSum: 23, distribution: [0, 1, 1, 2, 2])
        #expect(figures.averageScore == 3.83)
        #expect(figures.csatPercent == 66.67)
        #expect(figures.responseRate == 0.7)
        let high = figures.restricted(to: [4, 5])
        #expect(high.responses == 4)
        #expect(high.averageScore == 4.5)
        #expect(high.requests == 10)
        #expect(CSATFigures().averageScore == nil)
        #expect(CSATFigures().responseRate == nil)
    }

    /// Rounded half away from zero, as `Double.rounded()` does, for every ratio of small counts (ties such as
    /// 1/32 = 3.125 % among them) and large ones.
    @Test func figuresRoundAsDoubleRoundsThem() {
        func rounded(_ value: Double, _ scale: Double) -> Double { (value * scale).rounded() / scale }
        var generator = SystemRandomNumberGenerator()
        var cases = (1...64).flatMap { scored in (0...scored).map { (scored, $0) } }
        cases += (0..<5_000).map { _ in let scored = Int.random(in: 1...5_000_000, using: &generator); return (scored, Int.random(in: 0...scored, using: &generator)) }
        for (scored, part) in cases {
            let fives = part
            let figures = CSATFigures(requests: scored + part, responses: scored, distribution: [scored - fives, 0, 0, 0, fives])
            #expect(figures.averageScore == rounded(Double(scored + 4 * fives) / Double(scored), 100))
            #expect(figures.csatPercent == rounded(Double(fives) * 100 / Double(scored), 100))
            #expect(figures.responseRate == rounded(Double(scored) / Double(scored + part), 10_000))
        }
        #expect(CSATFigures(requests: 32, responses: 8, distribution: [7, 1, 0, 0, 0]).averageScore == 1.13)
        #expect(CSATFigures(requests: 32, responses: 1, distribution: [31, 0, 0, 0, 1]).csatPercent == 3.13)
        #expect(CSATFigures(requests: 32, responses: 1, distribution: [1, 0, 0, 0, 0]).responseRate == 0.0313)
    }

    @Test func csvCellsAreQuotedAndDefused() {
        #expect(CSV.field("plain") == "plain")
        #expect(CSV.field("a,b") == "\"a,b\"")
        #expect(CSV.field("say \"hi\"") == "\"say \"\"hi\"\"\"")
        #expect(CSV.field("=SUM(A1)") == "'=SUM(A1)")
        // OWASP's list: a leading tab or carriage return is neutralised too (and a CR is quoted).
        #expect(CSV.field("\t=1+1") == "'\t=1+1")
        #expect(CSV.field("\r=1+1") == "\"'\r=1+1\"")
        #expect(CSV.field("\r\n@SUM(1)") == "\"'\r\n@SUM(1)\"")
        for lead in ["+", "-", "@"] { #expect(CSV.field(lead + "x") == "'" + lead + "x") }
        // A quote that opens a grapheme cluster is still doubled.
        #expect(CSV.field("a\"\u{1F3FB}b") == "\"a\"\"\u{1F3FB}b\"")
        #expect(CSV.field("\"\u{301}") == "\"\"\"\u{301}\"")
    }
}

extension RollupBlocks {
    /// The fewest aligned blocks that together cover exactly `from…to`, in order, none taken away: what reports read
    /// before `signedCover`, the plain cover that one is tested against (never more blocks).
    static func cover(from: LocalDate, to: LocalDate) -> [Block] {
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

@Suite struct RollupBlockTests {
    @Test func coversEveryRangeExactlyWithAlignedBlocks() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2_000 {
            let from = LocalDate(dayNumber: Int.random(in: -800...30_000, using: &generator))
            let to = from.adding(days: Int.random(in: 0...1_500, using: &generator))
            let blocks = RollupBlocks.cover(from: from, to: to)
            var next = from
            for block in blocks {
                #expect(block.firstDay == next)
                #expect((0...RollupBlocks.maxLevel).contains(block.level))
                #expect(RollupBlocks.block(holding: block.firstDay, level: block.level) == block)
                #expect(RollupBlocks.block(holding: block.lastDay, level: block.level) == block)
                next = block.lastDay.adding(days: 1)
            }
            #expect(next == to.adding(days: 1))
            // At most two blocks per level, plus the top-level blocks of very long ranges.
            let topLevel = 1 << RollupBlocks.maxLevel
            #expect(blocks.count <= 2 * RollupBlocks.maxLevel + (to.dayNumber - from.dayNumber + 1) / topLevel + 2)
        }
    }

    @Test func signedCoversAreExactAndNeverLargerThanPlainOnes() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<3_000 {
            let from = LocalDate(dayNumber: Int.random(in: -800...30_000, using: &generator))
            let to = from.adding(days: Int.random(in: 0...[6, 120, 1_500].randomElement(using: &generator)!, using: &generator))
            let signed = RollupBlocks.signedCover(from: from, to: to)
            let plain = RollupBlocks.cover(from: from, to: to)
            for part in signed {
                #expect((0...RollupBlocks.maxLevel).contains(part.block.level) && [1, -1].contains(part.sign))
                #expect(RollupBlocks.block(holding: part.block.firstDay, level: part.block.level) == part.block)
            }
            // Every day of the range counted once, and no other day, after the blocks taken away.
            let runs = RollupBlocks.coverage(signed.map { ($0.block, $0.sign) })
            #expect(runs.count == 1 && runs.first! == (from.dayNumber, to.dayNumber, 1), "\(from) \(to)")
            #expect(signed.count <= plain.count)
            // Where the plain cover is as small, nothing is taken away.
            if signed.count == plain.count { #expect(signed.allSatisfy { $0.sign == 1 }, "\(from) \(to)") }
        }
        // A single day, answered without the search: its own one-day block.
        for day in [-1, 0, 1, 20_423, 20_424] {
            let signed = RollupBlocks.signedCover(from: LocalDate(dayNumber: day), to: LocalDate(dayNumber: day))
            #expect(signed.count == 1 && signed[0].block.level == 0 && signed[0].block.firstDay.dayNumber == day && signed[0].sign == 1)
        }
        // A 90-day report and its previous period over a year's end dates: at most 14 blocks (17 plainly), 10.5 on
        // average (12.8); on 2026-12-01 12 instead of 17.
        var (total, most) = (0, 0)
        let count = { (to: LocalDate) in
            RollupBlocks.signedCover(from: to.adding(days: -89), to: to).count + RollupBlocks.signedCover(from: to.adding(days: -179), to: to.adding(days: -90)).count
        }
        for offset in 0..<365 {
            let blocks = count(LocalDate("2026-01-01")!.adding(days: offset))
            (total, most) = (total + blocks, max(most, blocks))
        }
        #expect(most <= 14 && total <= 365 * 106 / 10)
        #expect(count(LocalDate("2026-12-01")!) == 12)
        let plain = { (to: LocalDate) in
            RollupBlocks.cover(from: to.adding(days: -89), to: to).count + RollupBlocks.cover(from: to.adding(days: -179), to: to.adding(days: -90)).count
        }
        #expect(plain(LocalDate("2026-12-01")!) == 17)
    }

    @Test func aNinetyDayReportReadsAFewBlocksPerPeriod() throws {
        func parameters(_ bucket: String) throws -> ReportParameters {
            try ReportParameters.parse([(name: "from", value: "2026-08-24"), (name: "to", value: "2026-11-21"), (name: "bucket", value: bucket)],
                                       accept: nil, today: { _ in LocalDate("2026-11-21") }, isKnownZone: { $0 == "UTC" }, maxDays: 366,
                                       listing: false)
        }
        var plan = BlockPlan(try parameters("none"))
        #expect(plan.buckets == [nil])
        #expect(plan.parts.count <= 20)
        #expect(RollupBlocks.coverage(plan.parts.filter { $0.tag == BlockPlan.previousTag }.map { ($0.block, $0.sign) }).map { [$0.first, $0.last, $0.count] }
                == [[LocalDate("2026-05-26")!.dayNumber, LocalDate("2026-08-23")!.dayNumber, 1]])
        plan = BlockPlan(try parameters("week"))
        // 2026-08-24 is a Monday: 13 whole weeks (the last one clipped to the range).
        #expect(plan.buckets.count == 13)
        #expect(plan.buckets.first == LocalDate("2026-08-24"))
        for (index, start) in plan.buckets.enumerated() {
            let parts = plan.parts.filter { $0.tag == index + 1 }
            let days = parts.map { $0.sign * ($0.block.lastDay.dayNumber - $0.block.firstDay.dayNumber + 1) }.reduce(0, +)
            let whole = start! != LocalDate("2026-11-16")!
            #expect(days == (whole ? 7 : 6))
            // A whole week is one week block; the clipped one is made of aligned blocks.
            if whole {
                #expect(parts.map { $0.block.level } == [RollupBlocks.weekLevel])
                #expect(parts.first?.block.firstDay == start)
            } else {
                #expect(parts.allSatisfy { $0.block.level <= RollupBlocks.maxLevel })
            }
        }
    }
}

@Suite struct JSONSerializationTests {
    /// Documents from Desk read `\u0000` and unpaired surrogates as U+FFFD (the database cannot hold NUL, and one
    /// broken emoji must not cost an event); a client's keeps NUL, to refuse it.
    @Test func desksStringsAreRepairedOnlyWhenAsked() throws {
        let text = #"{"k\u0000":["a\u0000b", "\ud83d\ude00"]}"#
        let kept = try JSONParser.parse(text)
        #expect(kept["k\u{0}"]?.arrayValue?.first?.stringValue == "a\u{0}b")
        let replaced = try JSONParser.parse(text, repairingStrings: true)
        #expect(replaced["k\u{FFFD}"]?.arrayValue?.map(\.stringValue) == ["a\u{FFFD}b", "\u{1F600}"])
        #expect(!replaced.serialized().contains("\\u0000"))
        // Unpaired surrogates: refused strictly, U+FFFD when repairing, the escape after a lone one read on its own.
        for (escaped, repaired) in [(#"x\ud800"#, "x\u{FFFD}"), (#"\ud800x"#, "\u{FFFD}x"), (#"\ud800\u0041"#, "\u{FFFD}A"),
                                    (#"\udc00"#, "\u{FFFD}"), (#"\ud800\ud83d\ude00"#, "\u{FFFD}\u{1F600}")] {
            #expect(throws: JSONParseError.self) { try JSONParser.parse("\"\(escaped)\"") }
            #expect(try JSONParser.parse("\"\(escaped)\"", repairingStrings: true).stringValue == repaired, "\(escaped)")
        }
        // Invalid UTF-8 inside a string likewise.
        let bytes: [UInt8] = [0x22, 0x61, 0xFF, 0x62, 0x22]
        #expect(throws: JSONParseError.self) { try JSONParser.parse(bytes) }
        #expect(try JSONParser.parse(bytes, repairingStrings: true).stringValue == "a\u{FFFD}b")
    }

    @Test func numbersWithFewDecimalsReadAsSwiftPrintsThem() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            let places = Int.random(in: 0...4, using: &generator)
            var scale = 1.0
            for _ in 0..<places { scale *= 10 }
            let magnitude = [1.0, 100.0, 1e6, 1e8].randomElement(using: &generator)!
            let value = (Double.random(in: -magnitude...magnitude, using: &generator) * scale).rounded() / scale
            let text = JSONValue.number(value).serialized()
            let expected = value == value.rounded() ? String(Int64(value)) : String(value)
            #expect(text == expected)
            #expect(try JSONParser.parse(text) == .number(value))
        }
        #expect(JSONValue.number(0.1 + 0.2).serialized() == String(0.1 + 0.2))
        #expect(JSONValue.number(1e-7).serialized() == String(1e-7))
        #expect(JSONValue.number(.nan).serialized() == "null")
        #expect(JSONValue.array([.integer(Int.min), .integer(Int.max), .integer(0), .integer(-42)]).serialized()
                == "[\(Int.min),\(Int.max),0,-42]")
    }

    /// The writer's own buffer (grown from a tiny start) holds exactly what `JSONValue` writes for the same values.
    @Test func theWriterWritesWhatTheTreeWrites() {
        var generator = SystemRandomNumberGenerator()
        let strings = ["plain", "quote \" and \\ backslash", "line\nbreak\r\ttab", "\u{0}\u{1}\u{1F}", "héllo ☃ 𝄞",
                       "separators \u{2028}\u{2029}", "", String(repeating: "long ", count: 40)]
        var writer = JSONWriter(capacity: 1)
        var tree: [JSONValue] = []
        for index in 0..<3_000 {
            if index > 0 { writer.raw(",") }
            switch index % 4 {
            case 0:
                let text = strings.randomElement(using: &generator)!
                writer.string(text)
                tree.append(.string(text))
            case 1:
                let value = Int.random(in: Int.min...Int.max, using: &generator) >> Int.random(in: 0...63, using: &generator)
                writer.integer(value)
                tree.append(.integer(value))
            case 2:
                let value = (Double.random(in: -1e6...1e6, using: &generator) * 10_000).rounded() / [1, 10, 100, 10_000].randomElement(using: &generator)!
                writer.number(value)
                tree.append(.number(value))
            default:
                let value = [Double.nan, 0.1 + 0.2, 1e-7, -0.5, 1e20].randomElement(using: &generator)!
                writer.number(value)
                tree.append(value.isNaN ? .null : .number(value))
            }
        }
        writer.raw(",")
        writer.date(year: 2026, month: 3, day: 9)
        tree.append(.string("2026-03-09"))
        #expect(writer.bytes == Array(JSONValue.array(tree).serialized().utf8.dropFirst().dropLast()))
    }

    /// Integers are written as their decimal text, at every change in the number of digits, through the writer and
    /// through any other byte sink.
    @Test func integersAreWrittenAsTheirDecimalText() {
        var values: [Int64] = [0, 1, 9, Int64.max, Int64.min, Int64.min + 1]
        var power: Int64 = 1
        for _ in 0..<18 {
            power *= 10
            values += [power - 1, power, power + 1, -power, -(power - 1), power * 7 / 3]
        }
        var generator = SystemRandomNumberGenerator()
        values += (0..<2_000).map { _ in Int64.random(in: 0...99_999, using: &generator) }
        for value in values {
            var writer = JSONWriter(capacity: 1)
            writer.putInteger(value)
            #expect(writer.bytes == Array(String(value).utf8), "\(value)")
            let text = String(unsafeUninitializedCapacity: 24) { buffer in
                var sink = MemorySink(buffer)
                sink.putInteger(value)
                return sink.count
            }
            #expect(text == String(value))
        }
    }

    /// A decimal written from its whole number of hundredths or ten-thousandths is what `number` writes for the
    /// Double it stands for.
    @Test func decimalsFromWholeNumbersAreWrittenAsTheirDoubles() {
        var generator = SystemRandomNumberGenerator()
        for index in 0..<20_000 {
            let places = index % 5
            var scale = 1.0
            for _ in 0..<places { scale *= 10 }
            let bound = [Int64(1_000), 1_000_000, 999_999_999_999_999].randomElement(using: &generator)!
            let scaled = Int64.random(in: 0...bound, using: &generator)
            var fromWhole = JSONWriter()
            fromWhole.decimal(scaled, places: places)
            var fromDouble = JSONWriter()
            fromDouble.number(Double(scaled) / scale)
            #expect(fromWhole.bytes == fromDouble.bytes, "\(scaled) / 10^\(places)")
        }
    }

    /// Written into the array returned when the estimate fits; copied out (and still whole) when it was too small,
    /// or so large that the array would keep much unused room.
    @Test func bytesAreWrittenInPlaceOnlyWhenTheEstimateFits() {
        func write(_ count: Int) -> (inout JSONWriter) -> Void {
            { writer in for index in 0..<count { writer.put(UInt8(ascii: "a") + UInt8(index % 26)) } }
        }
        let expected = { (count: Int) in (0..<count).map { UInt8(ascii: "a") + UInt8($0 % 26) } }
        let fitting = JSONWriter.bytes(capacity: 1_000, write(900))
        #expect(fitting == expected(900) && fitting.capacity >= 1_000)
        let spilled = JSONWriter.bytes(capacity: 1_000, write(5_000))
        #expect(spilled == expected(5_000))
        let loose = JSONWriter.bytes(capacity: 100_000, write(10))
        #expect(loose == expected(10) && loose.capacity < 1_000)
    }

    /// Bytes written earlier are written again as they were, also after the buffer grew and moved.
    @Test func rewritingCopiesEarlierBytesAcrossGrowth() {
        var writer = JSONWriter(capacity: 1)
        writer.string("name \"quoted\"")
        let first = (at: 0, length: writer.position)
        writer.raw(",")
        let second = writer.position
        writer.date(year: 2026, month: 11, day: 27)
        let secondLength = writer.position - second
        for _ in 0..<200 {
            writer.raw(",")
            writer.rewrite(from: first.at, count: first.length)
            writer.raw(",")
            writer.rewrite(from: second, count: secondLength)
        }
        let expected = "\"name \\\"quoted\\\"\"" + ",\"2026-11-27\"" + String(repeating: ",\"name \\\"quoted\\\"\",\"2026-11-27\"", count: 200)
        #expect(writer.string == expected)
    }

    @Test func stringsAreEscapedAndRoundTrip() throws {
        let samples = ["plain", "quote \" and \\ backslash", "line\nbreak\r\ttab", "\u{0}\u{1}\u{1F}", "héllo ☃ 𝄞",
                       "separators \u{2028}\u{2029}", "", "\u{E2}\u{80}"]
        for sample in samples {
            let text = JSONValue.object([(sample, .string(sample))]).serialized()
            #expect(!text.unicodeScalars.contains { $0.value < 0x20 || $0 == "\u{2028}" || $0 == "\u{2029}" })
            #expect(try JSONParser.parse(text) == .object([(sample, .string(sample))]))
        }
        #expect(JSONValue.string("a\u{1}b\u{2028}").serialized() == #""a\u0001b\u2028""#)
    }
}

@Suite struct ReportJSONTests {
    /// The figures as the JSON writes them: every member present, numbers equal to the figures' own.
    func matches(_ json: JSONValue?, _ figures: CSATFigures) -> Bool {
        func number(_ value: JSONValue?) -> Double? {
            switch value {
            case .number(let d)?: return d
            case .integer(let i)?: return Double(i)
            default: return nil
            }
        }
        guard let json else { return false }
        return json["responses"]?.intValue == figures.responses && json["requests"]?.intValue == figures.requests
            && number(json["averageScore"]) == figures.averageScore && number(json["csatPercent"]) == figures.csatPercent
            && number(json["responseRate"]) == figures.responseRate
            && (1...5).allSatisfy { json["distribution"]?[String($0)]?.intValue == figures.distribution[$0 - 1] }
    }

    /// Thousands of groups (the ranks' table grows many times), ids and text values in a random order, each in
    /// several entries: every group's rows hold the sums of its entries, in name order, once a bucket.
    @Test func manyGroupsAreRankedAndSummedOnce() throws {
        var generator = SystemRandomNumberGenerator()
        for dimension in [ReportDimension.agent, .channelType] {
            let p = try ReportParameters.parse([("from", "2026-03-01"), ("to", "2026-03-28"), ("groupBy", dimension.rawValue), ("bucket", "week")],
                                               accept: nil, today: { _ in LocalDate("2026-06-30") }, isKnownZone: { $0 == "UTC" },
                                               maxDays: 100, listing: false)
            let keys: [ReportKey] = dimension.hasIds ? [.none] + (1...3_000).map { .id($0 * 7_919) } : (0..<300).map { .text("channel \($0)") }
            var expected: [ReportKey: [Int: Int]] = [:]   // group → week start → responses
            var entries: [ReportEntry] = []
            for key in keys {
                for _ in 0..<Int.random(in: 1...3, using: &generator) {
                    let day = LocalDate("2026-03-01")!.adding(days: Int.random(in: 0...27, using: &generator))
                    let start = try #require(CSATReportShaper.bucket(of: day, .week, from: p.from, to: p.to)).0
                    let responses = Int.random(in: 1...9, using: &generator)
                    expected[key, default: [:]][start.dayNumber, default: 0] += responses
                    entries.append((group: key, bucketStart: day, figures: CSATFigures(requests: responses, responses: responses,
                                                                                        distribution: [0, 0, 0, 0, responses])))
                }
            }
            entries.shuffle(using: &generator)
            let report = CSATReportShaper.shape(parameters: p, source: "rollup", current: entries, previous: [], names: GroupNames([:]))
            var seen: [ReportKey: [Int: Int]] = [:]
            for row in report.rows {
                let start = try #require(row.bucketStart).dayNumber
                #expect(seen[row.key]?[start] == nil, "one row per group and bucket")
                seen[row.key, default: [:]][start] = row.figures.responses
            }
            #expect(seen == expected)
            let names = report.rows.map(\.name)
            #expect(zip(names, names.dropFirst()).allSatisfy { $0 <= $1 })
            // A group's rows in the order of their weeks, and the totals every entry once.
            let ordered = zip(report.rows, report.rows.dropFirst()).allSatisfy { row, next in
                row.key != next.key || row.bucketStart! < next.bucketStart!
            }
            #expect(ordered)
            #expect(report.totals.responses == entries.reduce(0) { $0 + $1.figures.responses })
            #expect(report.totals == report.rows.reduce(into: CSATFigures()) { $0.add($1.figures) })
        }
    }

    /// Groups are in the order of their names, then ids, whether every group's name has a place among the names
    /// (ordered by those) or some are unnamed (ordered by the names themselves): equal names, names equal only once
    /// normalized, letters of any case and accents, unknown ids and none.
    @Test func groupsAreInNameOrderByPlacesOrByNames() throws {
        var generator = SystemRandomNumberGenerator()
        let pool = ["Ann", "ann", "Bob", "Zoë", "Zoe\u{308}", "Émile", "E\u{301}mile", "Zed", "#5", "(none)", "ß", "ss", ""]
        let p = try ReportParameters.parse([("from", "2026-03-01"), ("to", "2026-03-28"), ("groupBy", "agent")], accept: nil,
                                           today: { _ in LocalDate("2026-06-30") }, isKnownZone: { $0 == "UTC" }, maxDays: 100, listing: false)
        for round in 0..<200 {
            var byId: [Int: String] = [:]
            for id in 1...40 { byId[id] = pool.randomElement(using: &generator)! }
            // Every other round some ids have no name (shown as #id) and one group is none.
            let keys: [ReportKey] = round % 2 == 0 ? (1...40).map { .id($0) } : [.none] + (1...50).map { .id($0) }
            let entries = keys.shuffled(using: &generator).map {
                (group: $0, bucketStart: LocalDate?.none, figures: CSATFigures(requests: 1, responses: 1, distribution: [0, 0, 0, 0, 1]))
            }
            let report = CSATReportShaper.shape(parameters: p, source: "rollup", current: entries, previous: [], names: GroupNames(byId))
            #expect(report.rows.count == keys.count)
            let order = report.rows.map { ($0.name, $0.key.id) }
            #expect(zip(order, order.dropFirst()).allSatisfy { $0 < $1 }, "\(order)")
        }
    }

    /// The report's JSON is written straight into bytes; parsed back it holds every row, figure and name of the
    /// report, for any rows (names that need escaping, empty reports, every bucket).
    @Test func writtenBytesParseBackToTheReportForRandomReports() throws {
        var generator = SystemRandomNumberGenerator()
        let names = GroupNames([1: "Ann \"the\" Agent", 2: "Zoë\n\\tab", 3: "Bob", 4: "\u{1}ctl"])
        for bucket in ["", "day", "week", "month"] {
            for round in 0..<20 {
                // Ids (with none) and text values, such as channel types, through the same shaper and writer.
                let dimension: ReportDimension = round % 3 == 2 ? .channelType : .agent
                func key() -> ReportKey {
                    guard dimension.hasIds else { return .text(["SENDBIRD_IOS", "=SUM(A1)", "a \"quoted\", value"].randomElement(using: &generator)!) }
                    let id = Int.random(in: 0...5, using: &generator)
                    return id == 0 ? .none : .id(id)
                }
                var query: [(name: String, value: String)] = [("from", "2026-03-01"), ("to", "2026-04-20"), ("groupBy", dimension.rawValue)]
                if !bucket.isEmpty { query.append(("bucket", bucket)) }
                if Bool.random(using: &generator) { query.append(("score", "4")); query.append(("score", "5")) }
                let p = try ReportParameters.parse(query, accept: nil, today: { _ in LocalDate("2026-06-30") }, isKnownZone: { $0 == "UTC" },
                                                   maxDays: 100, listing: false)
                let entries = (0..<Int.random(in: 0...40, using: &generator)).map { _ in
                    (group: key(),
                     bucketStart: bucket.isEmpty ? nil : LocalDate("2026-03-01")!.adding(days: Int.random(in: 0...50, using: &generator)),
                     figures: CSATFigures(requests: Int.random(in: 0...30, using: &generator), responses: Int.random(in: 0...9, using: &generator),
                                          distribution: ScoreCounts((0..<5).map { _ in Int.random(in: 0...3, using: &generator) })))
                }
                let previous = (0..<Int.random(in: 0...4, using: &generator)).map { _ in
                    (group: key(), figures: CSATFigures(requests: 3, responses: 1, distribution: [0, 0, 1, 0, 0]))
                }
                let report = CSATReportShaper.shape(parameters: p, source: "rollup", current: entries, previous: previous, names: names)
                let json = try JSONParser.parse(report.jsonBytes())
                #expect(json["groupBy"]?.stringValue == dimension.rawValue && json["bucket"]?.stringValue == (bucket.isEmpty ? "none" : bucket))
                #expect(json["from"]?.stringValue == "2026-03-01" && json["to"]?.stringValue == "2026-04-20" && json["source"]?.stringValue == "rollup")
                let rows = try #require(json["rows"]?.arrayValue)
                #expect(rows.count == report.rows.count, "\(bucket) \(entries.count) rows")
                for (row, written) in zip(report.rows, rows) {
                    switch row.key.value {
                    case .none: #expect(written["id"]?.isNull == true && row.name == "(none)")
                    case .id(let id): #expect(written["id"]?.intValue == id)
                    case .text(let text): #expect(written["id"]?.stringValue == text && row.name == text)
                    }
                    #expect(written["name"]?.stringValue == row.name)
                    #expect(written["bucket"]?["start"]?.stringValue == row.bucketStart?.description)
                    #expect(written["bucket"]?["end"]?.stringValue == row.bucketEnd?.description)
                    #expect(matches(written, row.figures))
                    #expect(row.previous.map { matches(written["previous"], $0) } ?? (written["previous"] == nil))
                }
                #expect(matches(json["totals"], report.totals) && matches(json["previousPeriod"]?["totals"], report.previousTotals))
                #expect(json["previousPeriod"]?["from"]?.stringValue == p.previous.from.description)
            }
        }
    }
}
