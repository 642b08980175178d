public import JSON

extension CSATFigures {
    public var json: [(String, JSONValue)] {
        [
            ("responses", .integer(responses)),
            ("averageScore", averageScore.map(JSONValue.number) ?? .null),
            ("csatPercent", csatPercent.map(JSONValue.number) ?? .null),
            ("distribution", .object((1...5).map { (String($0), .integer(distribution[$0 - 1])) })),
            ("requests", .integer(requests)),
            ("responseRate", responseRate.map(JSONValue.number) ?? .null),
        ]
    }
}

extension CSATReport {
    public var json: JSONValue {
        let rowsJSON: [JSONValue] = rows.map { row in
            var fields: [(String, JSONValue)] = [("id", row.groupId == 0 ? .null : .integer(row.groupId)), ("name", .string(row.name))]
            if let start = row.bucketStart, let end = row.bucketEnd {
                fields.append(("bucket", .object([("start", .string(start.description)), ("end", .string(end.description))])))
            }
            fields += row.figures.json
            if let previous = row.previous { fields.append(("previous", .object(previous.json))) }
            return .object(fields)
        }
        let previous = parameters.previous
        return .object([
            ("groupBy", .string(parameters.groupBy.rawValue)),
            ("from", .string(parameters.from.description)),
            ("to", .string(parameters.to.description)),
            ("timeZone", .string(parameters.timeZone)),
            ("bucket", .string(parameters.bucket.rawValue)),
            ("source", .string(source)),
            ("rows", .array(rowsJSON)),
            ("totals", .object(totals.json)),
            ("previousPeriod", .object([("from", .string(previous.from.description)), ("to", .string(previous.to.description)),
                                        ("totals", .object(previousTotals.json))])),
        ])
    }

    /// One line per row, then a TOTAL line; numbers as in the JSON, empty cells for nulls.
    public var csv: String {
        var lines = ["\(parameters.groupBy.rawValue)Id,name,bucketStart,bucketEnd,responses,averageScore,csatPercent,score1,score2,score3,score4,score5,requests,responseRate"]
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
            lines.append([row.groupId == 0 ? "" : String(row.groupId), CSV.field(row.name), row.bucketStart?.description ?? "",
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
        // By scalar: "\r\n" is one Character, equal to neither "\r" nor "\n".
        guard value.unicodeScalars.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return value }
        var quoted = "\""
        for ch in value {
            if ch == "\"" { quoted += "\"\"" } else { quoted.append(ch) }
        }
        return quoted + "\""
    }

    public static func number(_ value: Double) -> String {
        JSONValue.number(value).serialized()
    }
}
