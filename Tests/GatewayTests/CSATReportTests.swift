import Domain
import Foundation
import GatewayApp
import JSON
import Postgres
import Reports
import Store
import Testing
import TestSupport

/// A generated rating or request, kept so the test can compute reports by brute force.
struct GeneratedEvent {
    let at: Double
    let agent: Int?
    let team: Int?
    let channel: String
    let priority: String
    let score: Int?
    let isRequest: Bool
}

func localDate(_ seconds: Double, _ zone: String) -> LocalDate {
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = TimeZone(identifier: zone)!
    let parts = calendar.dateComponents([.year, .month, .day], from: Date(timeIntervalSince1970: seconds))
    return LocalDate(year: parts.year!, month: parts.month!, day: parts.day!)
}

/// Reports computed the slow, obvious way from the generated events.
func bruteForce(_ events: [GeneratedEvent], zone: String, from: LocalDate, to: LocalDate, groupBy: ReportDimension, bucket: ReportBucket,
                agents: [Int], teams: [Int], channels: [String], priorities: [String], scores: [Int]) -> [String: CSATFigures] {
    var result: [String: CSATFigures] = [:]
    for event in events {
        let day = localDate(event.at, zone)
        guard day >= from, day <= to else { continue }
        if !agents.isEmpty, !agents.contains(event.agent ?? 0) { continue }
        if !teams.isEmpty, !teams.contains(event.team ?? 0) { continue }
        if !channels.isEmpty, !channels.contains(event.channel) { continue }
        if !priorities.isEmpty, !priorities.contains(event.priority) { continue }
        var figures = CSATFigures()
        if event.isRequest {
            figures.requests = 1
        } else {
            if !scores.isEmpty { guard let score = event.score, scores.contains(score) else { continue } }
            figures.responses = 1
            if let score = event.score {
                figures.scored = 1
                figures.scoreSum = score
                figures.distribution[score - 1] = 1
            }
        }
        let group: String
        switch groupBy {
        case .agent: group = String(event.agent ?? 0)
        case .team: group = String(event.team ?? 0)
        case .channelType: group = event.channel
        case .priority: group = event.priority
        }
        let start = CSATReportShaper.bucket(of: day, bucket, from: from, to: to)?.0
        result["\(group)|\(start?.description ?? "-")", default: CSATFigures()].add(figures)
    }
    return result.filter { $0.value != CSATFigures() }
}

/// A row's id as `bruteForce` writes it: an agent's or team's id (0 for none), or a text dimension's value.
func rowKey(_ row: JSONValue) -> String {
    row["id"]?.intValue.map { String($0) } ?? row["id"]?.stringValue ?? "0"
}

/// Report JSON rows keyed like `bruteForce`.
func rowsByKey(_ json: JSONValue) -> [String: CSATFigures] {
    var result: [String: CSATFigures] = [:]
    for row in json["rows"]?.arrayValue ?? [] {
        let group = rowKey(row)
        let start = row["bucket"]?["start"]?.stringValue ?? "-"
        let distribution = (1...5).map { row["distribution"]?[String($0)]?.intValue ?? -1 }
        let scored = distribution.reduce(0, +)
        let sum = distribution.enumerated().reduce(0) { $0 + ($1.offset + 1) * $1.element }
        result["\(group)|\(start)"] = CSATFigures(requests: row["requests"]?.intValue ?? -1, responses: row["responses"]?.intValue ?? -1,
                                                  scored: scored, scoreSum: sum, distribution: ScoreCounts(distribution))
    }
    return result.filter { $0.value != CSATFigures() }
}

struct Reporter {
    let port: Int
    let key: String

    func get(_ query: String, accept: String? = nil) async throws -> TestResponse {
        var headers = [("Authorization", "Bearer \(key)")]
        if let accept { headers.append(("Accept", accept)) }
        return try await httpRequest(port: port, "GET", "/v1/reports/csat" + query, headers: headers)
    }
}

func reporter(_ app: GatewayApplication) async throws -> Reporter {
    let created = try await APIKeyStore(database: app.database).create(name: "test", scopes: ["reports"])
    return Reporter(port: app.port, key: created.key)
}

@Suite struct CSATReportTests {
    static let configuredZones = ["UTC", "Asia/Kolkata", "America/New_York"]

    @Test func reportsEqualABruteForceComputationForRandomData() async throws {
        try await withGateway(configure: { $0.reportTimeZones = Self.configuredZones }) { app in
            var generator = SystemRandomNumberGenerator()
            let agents = [501, 502, 503, 504, 505]
            let teams = [11, 12, 13]
            let channels = ["SENDBIRD_JAVASCRIPT", "SENDBIRD_IOS", "SENDBIRD_ANDROID"]
            let priorities = ["LOW", "MEDIUM", "HIGH", "URGENT"]
            try await app.database.transaction { tx in
                for agent in agents { try tx.query("INSERT INTO agents (id, display_name) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET display_name = $2", [agent, "Agent \(agent)"]) }
                for team in teams { try tx.query("INSERT INTO teams (id, key, name) VALUES ($1, $2, $3) ON CONFLICT (id) DO UPDATE SET name = $3", [team, "t\(team)", "Team \(team)"]) }
            }
            let start = ISOTimestamp.parse("2026-01-01T00:00:00Z")!
            let end = ISOTimestamp.parse("2026-12-31T23:59:59Z")!
            // Instants near local midnights and DST switches, where a wrong zone shows first.
            let edges = ["2026-03-08T04:59:59Z", "2026-03-08T05:00:01Z", "2026-03-09T03:59:59Z", "2026-03-09T04:00:01Z",
                         "2026-11-01T03:59:59Z", "2026-11-01T04:00:01Z", "2026-11-02T04:59:59Z", "2026-11-02T05:00:01Z",
                         "2026-06-14T18:29:59Z", "2026-06-14T18:30:01Z", "2026-06-14T18:14:59Z", "2026-06-14T18:15:01Z"].map { ISOTimestamp.parse($0)! }
            var events: [GeneratedEvent] = []
            let store = CSATStore(database: app.database)
            for index in 0..<700 {
                let at = index < edges.count * 2 ? edges[index % edges.count] : Double.random(in: start...end, using: &generator)
                let agent = Bool.random(using: &generator) || index % 7 != 0 ? agents.randomElement(using: &generator) : nil
                let team = index % 11 == 0 ? nil : teams.randomElement(using: &generator)
                let channel = channels.randomElement(using: &generator)!
                let priority = priorities.randomElement(using: &generator)!
                if index % 3 == 0 {
                    let event = GeneratedEvent(at: at, agent: agent, team: team, channel: channel, priority: priority, score: nil, isRequest: true)
                    try await store.recordRequest(ticketId: 10_000 + index, messageId: index + 1, agentId: agent, teamId: team,
                                                  channelType: channel, priority: TicketPriority(rawValue: priority)!, requestedAt: at)
                    events.append(event)
                } else {
                    let score: Int? = index % 13 == 0 ? nil : Int.random(in: 1...5, using: &generator)
                    try await store.record(RatingRecord(ticketId: 10_000 + index, messageId: index + 1, score: score, comment: nil,
                                                        agentId: agent, teamId: team, channelType: channel, priority: TicketPriority(rawValue: priority)!,
                                                        customerSendbirdId: "c", ratedAt: at, source: .gateway))
                    events.append(GeneratedEvent(at: at, agent: agent, team: team, channel: channel, priority: priority, score: score, isRequest: false))
                }
            }
            // A zone added after the data exists is backfilled and then reported from rollups.
            #expect(try await store.ensureZones(["Asia/Kathmandu"]) == ["Asia/Kathmandu"])
            let rollupZones = Self.configuredZones + ["Asia/Kathmandu"]
            let reporter = try await reporter(app)
            let zones = rollupZones + ["Australia/Adelaide", "America/Chicago"]
            for round in 0..<48 {
                let zone = zones[round % zones.count]
                let groupBy = ReportDimension.allCases[(round + round / 8) % ReportDimension.allCases.count]
                let bucket = ReportBucket.allCases[(round / 2) % 4]
                // Ranges that start before the data, end after it, and span up to a year, so rollup blocks of every
                // size (one day to 512 days) are read.
                let fromDay = LocalDate("2025-09-01")!.adding(days: Int.random(in: 0...450, using: &generator))
                let toDay = fromDay.adding(days: round % 4 == 3 ? Int.random(in: 200...365, using: &generator) : Int.random(in: 0...110, using: &generator))
                var query = "?groupBy=\(groupBy.rawValue)&bucket=\(bucket.rawValue)&from=\(fromDay)&to=\(toDay)&tz=\(zone)"
                var filterAgents: [Int] = [], filterTeams: [Int] = [], filterChannels: [String] = [], filterPriorities: [String] = [], filterScores: [Int] = []
                switch round % 6 {
                case 1: filterAgents = [agents[round % 5], 0]
                case 2: filterChannels = [channels[round % 3]]
                case 3: filterPriorities = [priorities[round % 4], priorities[(round + 1) % 4]]
                case 4: filterScores = [4, 5]
                case 5: filterTeams = [teams[round % 3]]; filterScores = [1]
                default: break
                }
                query += filterAgents.map { "&agentId=\($0)" }.joined() + filterTeams.map { "&teamId=\($0)" }.joined()
                    + filterChannels.map { "&channelType=\($0)" }.joined() + filterPriorities.map { "&priority=\($0)" }.joined()
                    + filterScores.map { "&score=\($0)" }.joined()
                let response = try await reporter.get(query)
                #expect(response.status == 200, "\(query): \(response.text)")
                let json = try JSONParser.parse(response.body)
                #expect(json["source"]?.stringValue == (rollupZones.contains(zone) ? "rollup" : "raw"), "\(query)")
                #expect(response.header("X-Report-Source") == json["source"]?.stringValue)
                let expected = bruteForce(events, zone: zone, from: fromDay, to: toDay, groupBy: groupBy, bucket: bucket, agents: filterAgents,
                                          teams: filterTeams, channels: filterChannels, priorities: filterPriorities, scores: filterScores)
                let actual = rowsByKey(json)
                #expect(actual == expected, "\(query)")
                // Totals and the previous period of equal length.
                var total = CSATFigures()
                for figures in expected.values { total.add(figures) }
                #expect(json["totals"]?["responses"]?.intValue == total.responses, "\(query)")
                #expect(json["totals"]?["requests"]?.intValue == total.requests, "\(query)")
                #expect(json["totals"]?["averageScore"]?.isNull == (total.averageScore == nil), "\(query)")
                if let average = total.averageScore { #expect(json["totals"]?["averageScore"] == .number(average), "\(query)") }
                let days = toDay.dayNumber - fromDay.dayNumber + 1
                let previous = bruteForce(events, zone: zone, from: fromDay.adding(days: -days), to: fromDay.adding(days: -1), groupBy: groupBy,
                                          bucket: .none, agents: filterAgents, teams: filterTeams, channels: filterChannels,
                                          priorities: filterPriorities, scores: filterScores)
                #expect(json["previousPeriod"]?["totals"]?["responses"]?.intValue == previous.values.reduce(0) { $0 + $1.responses }, "\(query)")
                if bucket == .none {
                    for row in json["rows"]?.arrayValue ?? [] {
                        let expectedPrevious = previous["\(rowKey(row))|-"] ?? CSATFigures()
                        #expect(row["previous"]?["responses"]?.intValue == expectedPrevious.responses, "\(query)")
                        #expect(row["previous"]?["requests"]?.intValue == expectedPrevious.requests, "\(query)")
                    }
                }
            }
        }
    }

    @Test func daysFollowDaylightSavingInTheRequestedZone() async throws {
        try await withGateway(configure: { $0.reportTimeZones = ["UTC", "America/New_York"] }) { app in
            let store = CSATStore(database: app.database)
            // New York switches to EDT on 2026-03-08: local midnight of the 9th is 04:00Z, not 05:00Z.
            for (index, instant) in ["2026-03-09T03:59:00Z", "2026-03-09T04:01:00Z", "2026-03-08T04:59:00Z"].enumerated() {
                try await store.record(RatingRecord(ticketId: 1 + index, messageId: 1, score: 5, comment: nil, agentId: 501, teamId: 11,
                                                    channelType: "SENDBIRD_IOS", priority: .low, customerSendbirdId: nil,
                                                    ratedAt: ISOTimestamp.parse(instant)!, source: .gateway))
            }
            let reporter = try await reporter(app)
            for zone in ["America/New_York", "America/Detroit"] {  // rollup, then raw (same rules)
                let response = try await reporter.get("?bucket=day&from=2026-03-07&to=2026-03-09&tz=\(zone)")
                let rows = try JSONParser.parse(response.body)["rows"]?.arrayValue ?? []
                let byDay = Dictionary(uniqueKeysWithValues: rows.map { ($0["bucket"]?["start"]?.stringValue ?? "", $0["responses"]?.intValue ?? 0) })
                #expect(byDay == ["2026-03-07": 1, "2026-03-08": 1, "2026-03-09": 1], "\(zone)")
            }
            let utc = try await reporter.get("?bucket=day&from=2026-03-07&to=2026-03-09&tz=UTC")
            let utcRows = try JSONParser.parse(utc.body)["rows"]?.arrayValue ?? []
            #expect(utcRows.map { $0["bucket"]?["start"]?.stringValue ?? "" } == ["2026-03-08", "2026-03-09"])
            #expect(utcRows.map { $0["responses"]?.intValue ?? 0 } == [1, 2])
        }
    }

    /// `/metrics` counts the reports computed, by source, and the blocks the ones from rollups read (what their cost
    /// follows).
    @Test func rollupReportsCountTheBlocksTheyRead() async throws {
        try await withGateway(configure: { $0.reportTimeZones = ["UTC"]; $0.reportCacheSeconds = 0 }) { app in
            let reporter = try await reporter(app)
            let counts = { (try await ReportCacheTests.gauge(app, #"report_computations_total{source="rollup"}"#),
                            try await ReportCacheTests.gauge(app, #"report_computations_total{source="raw"}"#),
                            try await ReportCacheTests.gauge(app, "report_rollup_blocks_total")) }
            #expect(try await counts() == (0, 0, 0))
            // Days 20,452–20,455 are one aligned four-day block, and so are the four before them.
            #expect(try await reporter.get("?from=2025-12-30&to=2026-01-02&tz=UTC").header("X-Report-Source") == "rollup")
            #expect(try await counts() == (1, 0, 2))
            // Days 20,454–20,456: a two-day block and a day; the three before: a day and a two-day block.
            #expect(try await reporter.get("?from=2026-01-01&to=2026-01-03&tz=UTC").status == 200)
            #expect(try await counts() == (2, 0, 6))
            // A zone without rollups reads the ratings, and no block.
            #expect(try await reporter.get("?from=2026-01-01&to=2026-01-03&tz=America/Chicago").header("X-Report-Source") == "raw")
            #expect(try await counts() == (2, 1, 6))
        }
    }

    @Test func csvAndJSONAgree() async throws {
        try await withGateway { app in
            let store = CSATStore(database: app.database)
            try await app.database.query("INSERT INTO agents (id, display_name) VALUES (501, 'Ada, \"the\" Agent') ON CONFLICT (id) DO UPDATE SET display_name = EXCLUDED.display_name")
            for index in 0..<40 {
                try await store.record(RatingRecord(ticketId: index, messageId: 1, score: index % 5 + 1, comment: "c\(index)", agentId: index % 2 == 0 ? 501 : 502,
                                                    teamId: 11, channelType: index % 3 == 0 ? "SENDBIRD_IOS" : "=HYPERLINK(1)", priority: .low,
                                                    customerSendbirdId: nil, ratedAt: ISOTimestamp.parse("2026-05-0\(index % 9 + 1)T12:00:00Z")!,
                                                    source: .gateway))
            }
            let reporter = try await reporter(app)
            for (query, header) in [("?bucket=week&from=2026-05-01&to=2026-05-31", "agentId"),
                                    ("?groupBy=channelType&bucket=week&from=2026-05-01&to=2026-05-31", "channelType")] {
                try await Self.compareCSV(reporter, query, header: header)
            }
        }
    }

    /// Every row of the CSV equals the JSON's; cells that a spreadsheet would run as a formula are prefixed with '.
    static func compareCSV(_ reporter: Reporter, _ query: String, header: String) async throws {
        func shown(_ text: String?) -> String? { text.map { "=+-@".contains($0.first ?? " ") ? "'" + $0 : $0 } }
        let json = try JSONParser.parse(try await reporter.get(query).body)
        let csvResponse = try await reporter.get(query, accept: "text/csv")
        #expect(csvResponse.header("Content-Type")?.hasPrefix("text/csv") == true)
        let viaFormat = try await reporter.get(query + "&format=csv")
        #expect(viaFormat.text == csvResponse.text)
        let lines = csvResponse.text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
        let rows = json["rows"]?.arrayValue ?? []
        #expect(lines.count == rows.count + 2)
        #expect(lines.first?.hasPrefix(header + ",name,") == true, "\(query)")
        for (line, row) in zip(lines.dropFirst(), rows) {
            let cells = parseCSVLine(line)
            #expect(cells[0] == (row["id"]?.intValue.map(String.init) ?? shown(row["id"]?.stringValue) ?? ""))
            #expect(cells[1] == shown(row["name"]?.stringValue))
            #expect(cells[2] == row["bucket"]?["start"]?.stringValue)
            #expect(Int(cells[4]) == row["responses"]?.intValue)
            #expect(cells[5] == (row["averageScore"].map { $0.isNull ? "" : $0.serialized() } ?? ""))
            #expect((7...11).map { Int(cells[$0]) } == (1...5).map { row["distribution"]?[String($0)]?.intValue })
        }
        #expect(lines.last?.hasPrefix("TOTAL,") == true)
        #expect(Int(parseCSVLine(lines.last!)[4]) == json["totals"]?["responses"]?.intValue)
    }

    @Test func responsesAreListedNewestFirstPagedAndFiltered() async throws {
        try await withGateway { app in
            let store = CSATStore(database: app.database)
            for index in 0..<25 {
                try await store.record(RatingRecord(ticketId: index, messageId: 1, score: index % 5 + 1, comment: "comment \(index)", agentId: 501,
                                                    teamId: 11, channelType: "SENDBIRD_IOS", priority: .low, customerSendbirdId: nil,
                                                    ratedAt: ISOTimestamp.parse("2026-04-01T00:00:00Z")! + Double(index) * 3600, source: .gateway))
            }
            let reporter = try await reporter(app)
            var seen: [Int] = []
            var cursor: String?
            repeat {
                let path = "/v1/reports/csat/responses?from=2026-04-01&to=2026-04-30&limit=10" + (cursor.map { "&cursor=\($0)" } ?? "")
                let page = try await httpRequest(port: app.port, "GET", path, headers: [("Authorization", "Bearer \(reporter.key)")])
                #expect(page.status == 200, "\(page.text)")
                let json = try JSONParser.parse(page.body)
                seen += json["items"]?.arrayValue?.compactMap { $0["ticketId"]?.intValue } ?? []
                cursor = json["nextCursor"]?.stringValue
            } while cursor != nil
            #expect(seen == Array((0..<25).reversed()))
            let fives = try await httpRequest(port: app.port, "GET", "/v1/reports/csat/responses?from=2026-04-01&to=2026-04-30&score=5",
                                              headers: [("Authorization", "Bearer \(reporter.key)")])
            let items = try JSONParser.parse(fives.body)["items"]?.arrayValue ?? []
            #expect(items.count == 5)
            #expect(items.allSatisfy { $0["score"]?.intValue == 5 && $0["comment"]?.stringValue?.hasPrefix("comment") == true })
            let csv = try await httpRequest(port: app.port, "GET", "/v1/reports/csat/responses?from=2026-04-01&to=2026-04-30&format=csv",
                                            headers: [("Authorization", "Bearer \(reporter.key)")])
            #expect(csv.text.components(separatedBy: "\r\n").filter { !$0.isEmpty }.count == 26)
        }
    }

    @Test func onlyReportingKeysMayRead() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let asCustomer = try await httpRequest(port: app.port, "GET", "/v1/reports/csat", headers: [("Authorization", "Bearer \(customer.token)")])
            #expect(asCustomer.status == 403)
            #expect(try await httpRequest(port: app.port, "GET", "/v1/reports/csat").status == 401)
            #expect(try await httpRequest(port: app.port, "GET", "/v1/reports/csat", headers: [("X-API-Key", "dgk_nope")]).status == 401)
            let reporter = try await reporter(app)
            #expect(try await httpRequest(port: app.port, "GET", "/v1/reports/csat", headers: [("X-API-Key", reporter.key)]).status == 200)
            for bad in ["?from=2026-02-30", "?tz=Mars/Base", "?from=2026-05-02&to=2026-05-01", "?from=2020-01-01&to=2026-01-01", "?bucket=year"] {
                let response = try await reporter.get(bad)
                #expect(response.status == 400, "\(bad)")
                #expect(response.json?["code"] as? String == "invalid_query")
            }
            // Keys are stored hashed.
            let stored = try await app.database.query("SELECT encode(key_hash, 'hex') FROM api_keys")
            #expect(stored.allSatisfy { !($0[0] ?? "").contains(reporter.key) })
        }
    }

    @Test func aRatingStaysWithTheAgentWhoHadTheTicketAndCountsOnce() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            let id = try #require(try await customer.createTicket("Reassigned later")["id"] as? Int)
            try await agent.activate(id, agent: 501)
            try await agent.post("/tickets/\(id)/close")
            let csat = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
            let rated = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":5,"comment":"great"}"#)
            #expect(rated.status == 200)
            // Later the ticket is reopened and handled by another agent on another team.
            #expect(try await customer.send("POST", "/v1/tickets/\(id)/reopen").status == 200)
            try await agent.post("/tickets/\(id)/assign", #"{"agentId":503,"teamKey":"billing"}"#)
            try await agent.post("/tickets/\(id)/close")
            // Sync sees the same rating (and the CSAT request); run it twice.
            for _ in 0..<2 {
                let summary = try await app.sync.run()
                #expect(!summary.skipped)
            }
            let ratings = try await app.database.query("SELECT agent_id, team_id, source FROM csat_ratings WHERE ticket_id = $1", [id])
            #expect(ratings.count == 1)
            #expect(ratings.first?[0] == "501")
            #expect(ratings.first?[1] == "11")
            let reporter = try await reporter(app)
            let report = try JSONParser.parse(try await reporter.get("?groupBy=agent").body)
            let rows = report["rows"]?.arrayValue ?? []
            #expect(rows.first { $0["id"]?.intValue == 501 }?["responses"]?.intValue == 1)
            #expect(rows.first { $0["id"]?.intValue == 503 }?["responses"]?.intValue ?? 0 == 0)
            #expect(report["totals"]?["responses"]?.intValue == 1)
            #expect(report["totals"]?["requests"]?.intValue == 1)
            #expect(rows.first { $0["id"]?.intValue == 501 }?["name"]?.stringValue == "Ada Agent")
        }
    }

    /// A ticket the customer gave back to the queue into another team before it was rated counts for the team and
    /// agent that had it then; one whose priority the customer changed after the rating keeps the priority it had.
    @Test func aRatingCountsWhereTheTicketWasWhenRatedAfterCancelsAndPriorityChanges() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let agent = DeskAgent(app)
            func rate(_ id: Int, _ score: Int) async throws {
                try await agent.post("/tickets/\(id)/close")
                let csat = agent.messageId(try await agent.post("/tickets/\(id)/csat-request"))
                let rated = try await customer.send("POST", "/v1/tickets/\(id)/feedback", #"{"messageId":\#(csat),"score":\#(score),"comment":null}"#)
                #expect(rated.status == 200, "\(rated.text)")
            }
            let moved = try #require(try await customer.createTicket("Billing, really", extra: #","priority":"HIGH""#)["id"] as? Int)
            try await agent.activate(moved, agent: 501)
            let given = try await customer.send("POST", "/v1/tickets/\(moved)/cancel", #"{"groupKey":"billing"}"#)
            #expect(given.status == 200, "\(given.text)")
            try await agent.post("/tickets/\(moved)/assign", #"{"agentId":503}"#)
            try await rate(moved, 2)
            let kept = try #require(try await customer.createTicket("Urgent once", extra: #","priority":"URGENT""#)["id"] as? Int)
            try await agent.activate(kept, agent: 501)
            try await rate(kept, 5)
            #expect(try await customer.send("PUT", "/v1/tickets/\(kept)/priority", #"{"priority":"LOW"}"#).status == 200)
            for _ in 0..<2 { _ = try await app.sync.run() }

            let reporter = try await reporter(app)
            func responses(_ groupBy: String) async throws -> [String: Int] {
                let report = try JSONParser.parse(try await reporter.get("?groupBy=\(groupBy)").body)
                var byId: [String: Int] = [:]
                for row in report["rows"]?.arrayValue ?? [] {
                    let id = row["id"]?.intValue.map(String.init) ?? row["id"]?.stringValue ?? "?"
                    byId[id] = row["responses"]?.intValue
                }
                return byId
            }
            #expect(try await responses("agent") == ["503": 1, "501": 1])
            #expect(try await responses("team") == ["12": 1, "11": 1])
            #expect(try await responses("priority") == ["HIGH": 1, "URGENT": 1])
        }
    }
}

func parseCSVLine(_ line: String) -> [String] {
    var cells: [String] = []
    var current = ""
    var quoted = false
    var iterator = Array(line).makeIterator()
    var pending: Character? = nil
    while let ch = pending ?? iterator.next() {
        pending = nil
        if quoted {
            if ch == "\"" {
                if let next = iterator.next() {
                    if next == "\"" { current.append("\"") } else { quoted = false; pending = next }
                } else { quoted = false }
            } else { current.append(ch) }
        } else if ch == "\"" { quoted = true }
        else if ch == "," { cells.append(current); current = "" }
        else { current.append(ch) }
    }
    cells.append(current)
    return cells
}

/// A team lead's key (`api-key create --team`) sees its teams only: its reports and listings hold their ratings,
/// another team by id is 403, and the report cache never hands it an answer computed for a wider key.
@Suite struct TeamScopedKeyTests {
    @Test func aTeamKeySeesItsTeamsOnlyEvenFromTheCache() async throws {
        try await withGateway(configure: { $0.reportCacheSeconds = 30 }) { app in
            _ = try await app.database.transaction { tx in
                try tx.query("INSERT INTO teams (id, key, name) VALUES (31, 'front', 'Front'), (32, 'back', 'Back') ON CONFLICT (id) DO NOTHING")
            }
            let store = CSATStore(database: app.database)
            let now = Date().timeIntervalSince1970
            for ticket in 1...30 {
                try await store.record(RatingRecord(ticketId: 9100 + ticket, messageId: 1, score: 1 + ticket % 5, comment: ticket % 3 == 0 ? "c\(ticket)" : nil,
                                                    agentId: 600 + ticket % 2, teamId: ticket % 3 == 0 ? 32 : 31, channelType: "SENDBIRD",
                                                    priority: .medium, customerSendbirdId: "c", ratedAt: now - Double(ticket) * 60, source: .webhook))
            }
            let keys = APIKeyStore(database: app.database)
            let everyone = Reporter(port: app.port, key: try await keys.create(name: "all", scopes: ["reports"]).key)
            let lead = Reporter(port: app.port, key: try await keys.create(name: "front lead", scopes: ["reports"], teams: ["front"]).key)
            await #expect(throws: APIKeyStore.UnknownTeams.self) { _ = try await keys.create(name: "x", scopes: ["reports"], teams: ["nowhere"]) }
            // The wide key first, so its answer is in the cache when the lead asks the very same query.
            let all = try #require(try await everyone.get("").json)
            let front = try #require(try await everyone.get("?teamId=31").json)
            let led = try #require(try await lead.get("").json)
            let totals = { (json: [String: Any]) in (json["totals"] as? [String: Any])?["responses"] as? Int }
            #expect(totals(all) == 30 && totals(front) == 20)
            #expect(totals(led) == 20)
            #expect((led["rows"] as? [[String: Any]])?.count == 2)
            let byTeam = try #require(try await lead.get("?groupBy=team").json)
            #expect((byTeam["rows"] as? [[String: Any]] ?? []).map { $0["id"] as? Int } == [31])
            // Another team, alone or among its own: 403.
            #expect(try await lead.get("?teamId=32").status == 403)
            #expect(try await lead.get("?teamId=31&teamId=32").status == 403)
            // The listing and its has-comment filter keep to the team as well.
            let listing = try await httpRequest(port: app.port, "GET", "/v1/reports/csat/responses?limit=500&hasComment=false",
                                                headers: [("Authorization", "Bearer \(lead.key)")])
            let items = try #require(listing.json?["items"] as? [[String: Any]])
            #expect(items.count == 20 && items.allSatisfy { ($0["team"] as? [String: Any])?["id"] as? Int == 31 && $0["comment"] is NSNull })
            let wrong = try await httpRequest(port: app.port, "GET", "/v1/reports/csat?hasComment=true", headers: [("Authorization", "Bearer \(lead.key)")])
            #expect(wrong.status == 400)
        }
    }
}
