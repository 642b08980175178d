import Foundation
import Reports
import Store

/// The filter form, the period presets and the active filters as removable chips; shared by every page.
struct FilterPanel {
    let filters: PageFilters
    let path: String
    let agentNames: [Int: String]
    let teamNames: [Int: String]
    let zones: [String]

    func esc(_ text: String) -> String { ReportPageHTML.escape(text) }

    func name(_ id: String, _ names: [Int: String]) -> String {
        if id == "0" { return "(none)" }
        return Int(id).flatMap { names[$0] } ?? "#\(id)"
    }

    func render() -> String {
        var html = "<section class=\"panel\" aria-label=\"Filters\"><form class=\"filters\" method=\"get\" action=\"\(path)\">"
        html += "<label>Period<select name=\"range\">"
        for preset in PageFilters.presets + [("custom", "Custom range")] {
            html += "<option value=\"\(preset.0)\"\(filters.range == preset.0 ? " selected" : "")>\(preset.1)</option>"
        }
        html += "</select></label>"
        html += "<label>From<input type=\"date\" name=\"from\" value=\"\(filters.from)\"></label>"
        html += "<label>To<input type=\"date\" name=\"to\" value=\"\(filters.to)\"></label>"
        html += "<input type=\"hidden\" name=\"shownFrom\" value=\"\(filters.from)\"><input type=\"hidden\" name=\"shownTo\" value=\"\(filters.to)\">"
        html += "<label>Time zone<select name=\"tz\">"
        for zone in (zones.contains(filters.zone) ? zones : zones + [filters.zone]) {
            html += "<option\(zone == filters.zone ? " selected" : "")>\(esc(zone))</option>"
        }
        html += "</select></label>"
        html += "<label>Trend by<select name=\"bucket\">"
        for choice in ["auto", "day", "week", "month"] {
            html += "<option\(filters.bucketChoice == choice ? " selected" : "")>\(choice)</option>"
        }
        html += "</select></label>"
        html += select("Agents", "agentId", agentNames, filters.agentIds)
        html += select("Teams", "teamId", teamNames, filters.teamIds)
        html += checkboxes("Channel", "channelType", Array(Set(PageFilters.channelTypes + filters.channelTypes)).sorted(), filters.channelTypes)
        html += checkboxes("Priority", "priority", ReportParameters.priorities, filters.priorities)
        html += checkboxes("Score", "score", ["1", "2", "3", "4", "5"], filters.scores)
        if filters.sort != "responses" || !filters.descending {
            html += "<input type=\"hidden\" name=\"sort\" value=\"\(esc(filters.sort))\"><input type=\"hidden\" name=\"dir\" value=\"\(filters.descending ? "desc" : "asc")\">"
        }
        html += "<button type=\"submit\">Apply</button></form>"
        html += "<nav class=\"presets\" aria-label=\"Periods\">"
        let today = ReportRoutes.today(in: filters.zone) ?? filters.to
        for preset in PageFilters.presets {
            var copy = filters
            copy.range = preset.id
            copy.cursor = nil
            if let dates = PageFilters.dates(of: preset.id, today: today) { (copy.from, copy.to) = dates }
            let on = filters.range == preset.id
            html += "<a href=\"\(esc(copy.url(path, copy.items)))\"\(on ? " class=\"on\" aria-current=\"true\"" : "")>\(preset.label)</a>"
        }
        html += "</nav>" + chips() + "</section>"
        return html
    }

    func select(_ label: String, _ field: String, _ names: [Int: String], _ chosen: [String]) -> String {
        var html = "<label>\(label)<select name=\"\(field)\" multiple size=\"4\">"
        var options = names.sorted { ($0.value, $0.key) < ($1.value, $1.key) }.map { (String($0.key), $0.value) }
        for id in chosen where !options.contains(where: { $0.0 == id }) { options.append((id, name(id, names))) }
        for (id, text) in options {
            html += "<option value=\"\(esc(id))\"\(chosen.contains(id) ? " selected" : "")>\(esc(text))</option>"
        }
        return html + "</select></label>"
    }

    func checkboxes(_ label: String, _ field: String, _ values: [String], _ chosen: [String]) -> String {
        var html = "<fieldset><legend>\(label)</legend><div>"
        for value in values {
            html += "<label><input type=\"checkbox\" name=\"\(field)\" value=\"\(esc(value))\"\(chosen.contains(value) ? " checked" : "")>\(esc(value))</label>"
        }
        return html + "</div></fieldset>"
    }

    func chips() -> String {
        var chips: [(String, String, String)] = []   // label, field, value
        if filters.range == "custom" { chips.append(("Period: \(filters.from) – \(filters.to)", "range", "")) }
        chips += filters.agentIds.map { ("Agent: " + name($0, agentNames), "agentId", $0) }
        chips += filters.teamIds.map { ("Team: " + name($0, teamNames), "teamId", $0) }
        chips += filters.channelTypes.map { ("Channel: " + $0, "channelType", $0) }
        chips += filters.priorities.map { ("Priority: " + $0, "priority", $0) }
        chips += filters.scores.map { ("Score: " + $0, "score", $0) }
        guard !chips.isEmpty else { return "" }
        var html = "<div class=\"chips\" aria-label=\"Active filters\">"
        for (label, field, value) in chips {
            let without = filters.removing(field, value)
            html += "<span class=\"chip\">\(esc(label))<a href=\"\(esc(without.url(path, without.items)))\" title=\"Remove this filter\" "
                + "aria-label=\"Remove \(esc(label))\">×</a></span>"
        }
        return html + "</div>"
    }
}

/// `/reports`: summary cards, distribution, trend, agents and teams.
struct SummaryView {
    let filters: PageFilters
    let parameters: ReportParameters
    let agents: CSATReport
    let teams: CSATReport
    let trend: CSATReport
    let agentNames: [Int: String]
    let teamNames: [Int: String]
    let settings: ReportPageSettings

    func esc(_ text: String) -> String { ReportPageHTML.escape(text) }

    func render() -> String {
        var html = "<p class=\"muted\">\(parameters.from) – \(parameters.to) (\(esc(parameters.timeZone))), compared with "
            + "\(parameters.previous.from) – \(parameters.previous.to). Source: \(agents.source == "rollup" ? "daily rollups" : "raw ratings").</p>"
        html += FilterPanel(filters: filters, path: "/reports", agentNames: agentNames, teamNames: teamNames, zones: settings.zones).render()
        let totals = agents.totals, before = agents.previousTotals
        if totals.responses == 0 && totals.requests == 0 {
            html += "<div class=\"panel empty-state\" id=\"empty\">No CSAT requests or responses match these filters in this period."
            if before.responses > 0 { html += " The previous period had \(before.responses) responses." }
            html += "</div>"
        }
        html += cards(totals, before)
        html += distribution(totals)
        html += trendChart()
        html += table(title: "Agents", id: "agents", report: agents, field: "agentId", export: "agents.csv")
        html += table(title: "Teams", id: "teams", report: teams, field: "teamId", export: "teams.csv")
        return html
    }

    func card(_ id: String, _ label: String, _ shown: String, _ value: String, _ change: String) -> String {
        "<div class=\"card\" id=\"card-\(id)\" data-value=\"\(value)\"><div class=\"label\">\(label)</div>"
            + "<div class=\"value\">\(shown)</div><div class=\"change\">\(change) <span class=\"muted\">vs previous period</span></div></div>"
    }

    func cards(_ now: CSATFigures, _ before: CSATFigures) -> String {
        let responsesChange = before.responses == 0 ? "<span class=\"muted\">no previous data</span>"
            : ReportPageHTML.change(Double(now.responses), Double(before.responses), places: 0, suffix: "")
        var html = "<section class=\"cards\" aria-label=\"Summary\">"
        html += card("responses", "Responses", String(now.responses), String(now.responses), responsesChange)
        html += card("average", "Average score (1–5)", ReportPageHTML.average(now.averageScore), ReportPageHTML.number(now.averageScore),
                     ReportPageHTML.change(now.averageScore, before.averageScore, places: 2, suffix: ""))
        html += card("csat", "CSAT (4 and 5)", ReportPageHTML.percent(now.csatPercent), ReportPageHTML.number(now.csatPercent),
                     ReportPageHTML.change(now.csatPercent, before.csatPercent, places: 1, suffix: " pts"))
        html += card("rate", "Response rate", ReportPageHTML.percent(now.responseRate.map { $0 * 100 }), ReportPageHTML.number(now.responseRate),
                     ReportPageHTML.change(now.responseRate.map { $0 * 100 }, before.responseRate.map { $0 * 100 }, places: 1, suffix: " pts"))
        return html + "</section>"
    }

    func distribution(_ totals: CSATFigures) -> String {
        let hrefs: [String?] = (1...5).map { score in
            let drill = filters.adding("score", String(score))
            return drill.url("/reports/responses", drill.items)
        }
        var html = "<section class=\"panel\" aria-label=\"Distribution\"><h2>Scores</h2>"
        html += DistributionBar.render(totals.distribution, hrefs: hrefs)
        html += "<div class=\"legend\" id=\"distribution\">"
        for score in 1...5 {
            let count = totals.distribution[score - 1]
            let share = totals.scored == 0 ? "–" : SVG.fixed(Double(count) * 100 / Double(totals.scored), 1) + "%"
            html += "<a href=\"\(esc(hrefs[score - 1] ?? ""))\" data-score=\"\(score)\" data-count=\"\(count)\"><i class=\"s\(score)\"></i>"
                + "\(score): \(count) (\(share))</a>"
        }
        return html + "</div></section>"
    }

    /// The trend's points: every bucket of the period in order, the empty ones included as gaps.
    func points() -> [TrendPoint] {
        var sums: [Int: CSATFigures] = [:]
        for row in trend.rows { if let start = row.bucketStart { sums[start.dayNumber, default: CSATFigures()].add(row.figures) } }
        var points: [TrendPoint] = []
        var day = parameters.from
        while day <= parameters.to {
            guard let (start, end) = CSATReportShaper.bucket(of: day, trend.parameters.bucket, from: parameters.from, to: parameters.to) else { break }
            let figures = sums[start.dayNumber] ?? CSATFigures()
            let label = trend.parameters.bucket == .month ? String(start.description.prefix(7)) : start.description
            let drill = filters.period(start, end)
            points.append(TrendPoint(label: label, average: figures.averageScore, csatPercent: figures.csatPercent, responses: figures.responses,
                                     href: drill.url("/reports/responses", drill.items)))
            day = end.adding(days: 1)
        }
        return points
    }

    func trendChart() -> String {
        let points = points()
        var html = "<section class=\"panel\" aria-label=\"Trend\"><h2>Trend by \(trend.parameters.bucket.rawValue)</h2>"
        html += "<div class=\"legend\"><span><i class=\"avg\"></i>Average score (left axis, solid)</span>"
            + "<span>CSAT % (right axis, dashed)</span><span>Grey bars: responses</span></div>"
        html += TrendChart.render(points)
        html += "<details><summary>Trend data</summary><table id=\"trend\"><thead><tr><th>\(trend.parameters.bucket.rawValue.capitalized)</th>"
            + "<th>Responses</th><th>Average</th><th>CSAT</th></tr></thead><tbody>"
        for point in points {
            html += "<tr data-label=\"\(esc(point.label))\" data-responses=\"\(point.responses)\" data-average=\"\(ReportPageHTML.number(point.average))\" "
                + "data-csat=\"\(ReportPageHTML.number(point.csatPercent))\"><td><a href=\"\(esc(point.href ?? ""))\">\(esc(point.label))</a></td>"
                + "<td>\(point.responses)</td><td>\(ReportPageHTML.average(point.average))</td><td>\(ReportPageHTML.percent(point.csatPercent))</td></tr>"
        }
        return html + "</tbody></table></details></section>"
    }

    func sortLink(_ label: String, _ key: String, id: String) -> String {
        var copy = filters
        let active = filters.sort == key
        copy.sort = key
        copy.descending = active ? !filters.descending : key != "name"
        let arrow = active ? (filters.descending ? " ▼" : " ▲") : ""
        return "<a href=\"\(esc(copy.url("/reports", copy.items)))#\(id)\"\(active ? " aria-sort=\"\(filters.descending ? "descending" : "ascending")\"" : "")>\(label)\(arrow)</a>"
    }

    func table(title: String, id: String, report: CSATReport, field: String, export: String) -> String {
        var html = "<section aria-label=\"\(title)\"><h2 id=\"\(id)\">\(title)</h2>"
        html += "<div class=\"actions\"><a href=\"\(esc(filters.url("/reports/export/" + export, filters.items)))\" download>Download CSV</a>"
        if settings.smallSample > 0 {
            html += "<span class=\"muted\"><span class=\"few\">few</span> fewer than \(settings.smallSample) responses: read with care</span>"
        }
        html += "</div>"
        let rows = filters.sorted(report.rows)
        guard !rows.isEmpty else { return html + "<div class=\"panel empty-state\">No \(title.lowercased()) with requests or responses in this period.</div></section>" }
        html += "<table id=\"table-\(id)\"><thead><tr><th>\(sortLink(title == "Agents" ? "Agent" : "Team", "name", id: id))</th>"
            + "<th>\(sortLink("Responses", "responses", id: id))</th><th>\(sortLink("Average", "average", id: id))</th>"
            + "<th>\(sortLink("CSAT", "csat", id: id))</th><th>Scores 1–5</th><th>\(sortLink("Previous avg", "previous", id: id))</th>"
            + "<th>Previous CSAT</th><th>Change</th></tr></thead><tbody>"
        // One drill-down link per row: this view's link plus the row's id (built once, not per row).
        var drillBase = filters
        drillBase.cursor = nil
        let base = esc(drillBase.url("/reports/responses", drillBase.items))
        let chosen = Set(field == "agentId" ? filters.agentIds : filters.teamIds)
        let separator = base.contains("?") ? "&amp;" : "?"
        for row in rows {
            let figures = row.figures
            let previous = row.previous ?? CSATFigures()
            let id = String(row.groupId)
            let href = chosen.contains(id) ? base : base + separator + field + "=" + id
            let few = settings.smallSample > 0 && figures.responses < settings.smallSample
            html += "<tr data-id=\"\(row.groupId)\" data-responses=\"\(figures.responses)\" data-average=\"\(ReportPageHTML.number(figures.averageScore))\" "
                + "data-csat=\"\(ReportPageHTML.number(figures.csatPercent))\" data-distribution=\"\(figures.distribution.map(String.init).joined(separator: ","))\""
                + "\(few ? " data-few=\"true\"" : "")>"
            html += "<td><a href=\"\(href)\" title=\"\(esc(row.name))\">\(esc(SVG.truncate(row.name, to: 48)))</a>"
                + (few ? "<span class=\"few\" title=\"Fewer than \(settings.smallSample) responses\">few</span>" : "") + "</td>"
            html += "<td>\(figures.responses)</td><td>\(ReportPageHTML.average(figures.averageScore))</td><td>\(ReportPageHTML.percent(figures.csatPercent))</td>"
            html += "<td>" + DistributionBar.render(figures.distribution, width: 100, height: 12, cssClass: "mini") + "</td>"
            html += "<td>\(ReportPageHTML.average(previous.averageScore))</td><td>\(ReportPageHTML.percent(previous.csatPercent))</td>"
            html += "<td>\(ReportPageHTML.change(figures.averageScore, previous.averageScore, places: 2, suffix: ""))</td></tr>"
        }
        return html + "</tbody></table></section>"
    }
}

/// `/reports/responses`: the rated responses behind a figure, newest first, a page at a time.
struct ResponsesView {
    let filters: PageFilters
    let parameters: ReportParameters
    let items: [ReportStore.ResponseItem]
    let next: String?
    let agentNames: [Int: String]
    let teamNames: [Int: String]
    let settings: ReportPageSettings

    func esc(_ text: String) -> String { ReportPageHTML.escape(text) }

    func render() -> String {
        var back = filters
        back.cursor = nil
        var html = "<p><a href=\"\(esc(back.url("/reports", back.items)))\">← Summary</a></p>"
        html += "<h2>Responses, newest first</h2><p class=\"muted\">\(parameters.from) – \(parameters.to) (\(esc(parameters.timeZone)))</p>"
        html += FilterPanel(filters: filters, path: "/reports/responses", agentNames: agentNames, teamNames: teamNames, zones: settings.zones).render()
        var pageQuery = filters.items
        if let cursor = filters.cursor { pageQuery.append(("cursor", cursor)) }
        html += "<div class=\"actions\"><a href=\"\(esc(filters.url("/reports/export/responses.csv", pageQuery)))\" download>Download CSV (this page)</a></div>"
        guard !items.isEmpty else {
            return html + "<div class=\"panel empty-state\" id=\"empty\">No rated responses match these filters.</div>"
        }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: parameters.timeZone) ?? TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm"
        html += "<table id=\"responses\"><thead><tr><th>Rated</th><th>Score</th><th>Comment</th><th>Agent</th><th>Team</th><th>Ticket</th>"
            + "<th>Channel</th></tr></thead><tbody>"
        for item in items {
            html += "<tr data-ticket=\"\(item.ticketId)\" data-message=\"\(item.messageId)\" data-score=\"\(item.score.map(String.init) ?? "")\">"
            html += "<td>\(formatter.string(from: Date(timeIntervalSince1970: item.ratedAt)))</td><td>\(item.score.map(String.init) ?? "–")</td>"
            html += "<td class=\"text\">\(esc(item.comment ?? ""))</td><td class=\"text\">\(esc(item.agentName ?? "–"))</td>"
            html += "<td class=\"text\">\(esc(item.teamName ?? "–"))</td><td>\(item.ticketId)</td><td>\(esc(item.channelType))</td></tr>"
        }
        html += "</tbody></table><div class=\"actions\">"
        if filters.cursor != nil { html += "<a href=\"\(esc(filters.url("/reports/responses", filters.items)))\">First page</a>" }
        if let next {
            html += "<a id=\"next\" rel=\"next\" href=\"\(esc(filters.url("/reports/responses", filters.items + [("cursor", next)])))\">Next page →</a>"
        }
        return html + "</div>"
    }
}
