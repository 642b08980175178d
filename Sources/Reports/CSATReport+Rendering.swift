import JSON

extension CSATFigures {
    /// The figures' members of a report's JSON (`Report` in openapi.yaml), without the braces.
    func write(to out: inout JSONWriter) {
        out.raw("\"responses\":")
        out.integer(responses)
        out.raw(",\"averageScore\":")
        if let rounded = roundedAverage { rounded.write(to: &out) } else { out.raw("null") }
        out.raw(",\"csatPercent\":")
        if let rounded = roundedCSAT { rounded.write(to: &out) } else { out.raw("null") }
        out.raw(",\"distribution\":{\"1\":")
        out.integer(distribution[0])
        out.raw(",\"2\":")
        out.integer(distribution[1])
        out.raw(",\"3\":")
        out.integer(distribution[2])
        out.raw(",\"4\":")
        out.integer(distribution[3])
        out.raw(",\"5\":")
        out.integer(distribution[4])
        out.raw("},\"requests\":")
        out.integer(requests)
        out.raw(",\"responseRate\":")
        if let rounded = roundedRate { rounded.write(to: &out) } else { out.raw("null") }
    }
}

extension RoundedRatio {
    func write(to out: inout JSONWriter) {
        if abs(scaled) < 1e15 { out.decimal(Int64(scaled), places: places) } else { out.number(value) }
    }
}

/// Text a report repeats row after row, written once and then copied from where it was first written: each row of
/// a group starts with the group's id and name (a weekly agents' report writes 14 rows a group), and every row of a
/// bucket carries its bucket's two dates (2,800 rows, 14 buckets). Formatting the dates and escaping the names for
/// each row was a twentieth of a weekly report's time.
struct RepeatedText {
    /// Where the last row's `{"id":…,"name":…` was written, and its group.
    private var group: (key: ReportKey, at: Int, length: Int)?
    /// Bucket objects by start day modulo 128; one whose slot holds another bucket is written anew (and takes the
    /// slot), so a shared slot costs time, never a wrong date. Made at the first bucket: a report without buckets
    /// allocates nothing here.
    private var buckets: [(start: Int, end: Int, at: Int, length: Int)] = []

    mutating func writeGroup(_ row: UnsafePointer<CSATRow>, to out: inout JSONWriter) {
        let key = row.pointee.key
        if let group, group.key == key { return out.rewrite(from: group.at, count: group.length) }
        let at = out.position
        out.raw("{\"id\":")
        switch key.value {
        case .none: out.raw("null")
        case .id(let id): out.integer(id)
        case .text(let text): out.string(text)
        }
        out.raw(",\"name\":")
        out.string(row.pointee.name)
        group = (key, at, out.position - at)
    }

    /// `,"bucket":{"start":…,"end":…}`.
    mutating func writeBucket(_ start: LocalDate, _ end: LocalDate, to out: inout JSONWriter) {
        if buckets.isEmpty { buckets = Array(repeating: (.min, .min, 0, 0), count: 128) }
        let index = start.dayNumber & 127
        let slot = buckets[index]
        if slot.start == start.dayNumber, slot.end == end.dayNumber { return out.rewrite(from: slot.at, count: slot.length) }
        let at = out.position
        out.raw(",\"bucket\":{\"start\":")
        Self.write(start, to: &out)
        out.raw(",\"end\":")
        Self.write(end, to: &out)
        out.raw("}")
        buckets[index] = (start.dayNumber, end.dayNumber, at, out.position - at)
    }

    private static func write(_ date: LocalDate, to out: inout JSONWriter) {
        let (y, m, d) = date.components
        guard (0...9999).contains(y) else { return out.string(date.description) }
        out.date(year: y, month: m, day: d)
    }
}

extension CSATReport {
    /// The report as JSON (`Report` in openapi.yaml), written straight into bytes (a weekly agents' report has
    /// thousands of rows; a tree of values was a third of its cost).
    public func jsonBytes() -> [UInt8] {
        JSONWriter.bytes(capacity: estimatedJSONBytes) { write(to: &$0) }
    }

    /// A little over the JSON's usual length, so it is written into its final array without a copy: a row's figures
    /// about 150 bytes with their numbers and its id, keys and braces 35, a bucket 52, previous figures 170. Under
    /// the length the writer grows and the body is copied (the 90-day agents' and teams' reports were, estimated at
    /// 0.99 and 0.98 of it); over it by more than a quarter the body is copied too (`JSONWriter.bytes`): these reports'
    /// shapes come out 1.05 to 1.15 times their length.
    var estimatedJSONBytes: Int {
        var total = 700
        // By index: `for row in rows` copies each row (two hundred bytes) out of the array.
        for index in rows.indices {
            total += 185 + rows[index].name.utf8.count + (rows[index].bucketStart == nil ? 0 : 52) + (rows[index].previous == nil ? 0 : 170)
        }
        return total
    }

    private func write(to out: inout JSONWriter) {
        out.raw("{\"groupBy\":")
        out.string(parameters.groupBy.rawValue)
        out.raw(",\"from\":")
        out.string(parameters.from.description)
        out.raw(",\"to\":")
        out.string(parameters.to.description)
        out.raw(",\"timeZone\":")
        out.string(parameters.timeZone)
        out.raw(",\"bucket\":")
        out.string(parameters.bucket.rawValue)
        out.raw(",\"source\":")
        out.string(source)
        out.raw(",\"rows\":[")
        var repeated = RepeatedText()
        // Each row read field by field where it lies: `rows[index]` copied the row (its name retained and released)
        // even for a borrowing parameter, 2,800 times a weekly report.
        rows.withUnsafeBufferPointer { rows in
            for index in rows.indices {
                if index > 0 { out.raw(",") }
                Self.write(rows.baseAddress! + index, repeated: &repeated, to: &out)
            }
        }
        out.raw("],\"totals\":{")
        totals.write(to: &out)
        let previous = parameters.previous
        out.raw("},\"previousPeriod\":{\"from\":")
        out.string(previous.from.description)
        out.raw(",\"to\":")
        out.string(previous.to.description)
        out.raw(",\"totals\":{")
        previousTotals.write(to: &out)
        out.raw("}}}")
    }

    private static func write(_ row: UnsafePointer<CSATRow>, repeated: inout RepeatedText, to out: inout JSONWriter) {
        repeated.writeGroup(row, to: &out)
        if let start = row.pointee.bucketStart, let end = row.pointee.bucketEnd { repeated.writeBucket(start, end, to: &out) }
        out.raw(",")
        row.pointee.figures.write(to: &out)
        if let previous = row.pointee.previous {
            out.raw(",\"previous\":{")
            previous.write(to: &out)
            out.raw("}")
        }
        out.raw("}")
    }

    /// One line per row, then a TOTAL line; numbers as in the JSON, empty cells for nulls.
    public var csv: String {
        let dimension = parameters.groupBy
        var lines = ["\(dimension.rawValue)\(dimension.hasIds ? "Id" : ""),name,bucketStart,bucketEnd,responses,averageScore,csatPercent,score1,score2,score3,score4,score5,requests,responseRate"]
        func cells(_ figures: CSATFigures) -> String {
            var numbers: [String] = [String(figures.responses)]
            numbers.append(figures.averageScore.map(CSV.number) ?? "")
            numbers.append(figures.csatPercent.map(CSV.number) ?? "")
            numbers.append(contentsOf: figures.distribution.map { String($0) })
            numbers.append(String(figures.requests))
            numbers.append(figures.responseRate.map(CSV.number) ?? "")
            return numbers.joined(separator: ",")
        }
        for row in rows {
            let key: String
            switch row.key.value {
            case .none: key = ""
            case .id(let id): key = String(id)
            case .text(let text): key = CSV.field(text)
            }
            lines.append([key, CSV.field(row.name), row.bucketStart?.description ?? "",
                          row.bucketEnd?.description ?? "", cells(row.figures)].joined(separator: ","))
        }
        lines.append(["TOTAL", "", parameters.from.description, parameters.to.description, cells(totals)].joined(separator: ","))
        return lines.joined(separator: "\r\n") + "\r\n"
    }
}

public enum CSV {
    /// RFC 4180 quoting; cells starting with =, +, -, @, a tab or a carriage return (OWASP's list) are prefixed with '
    /// so spreadsheets do not run them.
    public static func field(_ text: String) -> String {
        var value = text
        if let first = value.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) { value = "'" + value }
        // By scalar: "\r\n" is one Character, equal to neither "\r" nor "\n", and so is a quote followed by a
        // combining mark or an emoji modifier.
        guard value.unicodeScalars.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return value }
        var quoted = String.UnicodeScalarView()
        quoted.append("\"")
        for scalar in value.unicodeScalars {
            if scalar == "\"" { quoted.append("\"") }
            quoted.append(scalar)
        }
        quoted.append("\"")
        return String(quoted)
    }

    public static func number(_ value: Double) -> String {
        JSONValue.number(value).serialized()
    }
}
