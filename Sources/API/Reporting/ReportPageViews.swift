import Foundation
import Reports
import Services

/// What every page view shares: the filters, who is looking (a team lead's key sees its teams only), the names to
/// pick from, the channel types with ratings, and the page's settings.
struct PageContext {
    let filters: PageFilters
    let caller: ReportCaller
    let agentNames: [Int: String]
    let teamNames: [Int: String]
    let channelTypes: [String]
    let settings: ReportPageSettings

    func esc(_ text: String) -> String { ReportPageHTML.escape(text) }

    func name(_ id: String, _ names: [Int: String]) -> String {
        if id == "0" { return "(none)" }
        return Int(id).flatMap { names[$0] } ?? "#\(id)"
    }

    /// Which teams a team lead's key sees, said on every page.
    func scopeNotice() -> String {
        guard let teams = caller.teamIds else { return "" }
        let names = teams.map { teamNames[$0] ?? "#\($0)" }.sorted()
        return "<p class=\"scope\" id=\"scope\" data-teams=\"\(teams.map(String.init).joined(separator: ","))\">This key sees "
            + (names.count == 1 ? "the team " : "the teams ") + esc(names.joined(separator: ", ")) + " only.</p>"
    }

    /// "yyyy-MM-dd HH:mm" in the report's zone (a `DateFormatter` costs more to make than a page's whole table).
    func timeFormatter(_ zone: String) -> LocalTimeFormatter {
        LocalTimeFormatter(zone: TimeZone(identifier: zone) ?? TimeZone(secondsFromGMT: 0) ?? .current)
    }

    /// A ticket id, linked to Desk's dashboard when `DESK_DASHBOARD_URL` is set.
    func ticket(_ id: Int) -> String {
        guard let href = settings.ticketLink(id) else { return String(id) }
        return "<a class=\"ticket\" href=\"\(esc(href))\" rel=\"noopener noreferrer\" target=\"_blank\">\(id)</a>"
    }
}

/// Instants as local "yyyy-MM-dd HH:mm" in one zone: its offset at that instant, then civil-day arithmetic.
struct LocalTimeFormatter {
    let zone: TimeZone

    func string(from date: Date) -> String {
        let local = Int(date.timeIntervalSince1970.rounded(.down)) + zone.secondsFromGMT(for: date)
        let days = local >= 0 ? local / 86_400 : (local - 86_399) / 86_400
        let minutes = (local - days * 86_400) / 60
        func two(_ value: Int) -> String { value < 10 ? "0" + String(value) : String(value) }
        return LocalDate(dayNumber: days).description + " " + two(minutes / 60) + ":" + two(minutes % 60)
    }
}

/// The filter form, the period presets and the active filters as removable chips; shared by every page.
struct FilterPanel {
    let context: PageContext
    let path: String
    var filters: PageFilters { context.filters }

    func esc(_ text: String) -> String { ReportPageHTML.escape(text) }

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
        let zones = context.settings.zones
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
        html += picker("Agents", "agentId", context.agentNames, filters.agentIds)
        html += picker("Teams", "teamId", context.teamNames, filters.teamIds)
        let channels = (context.channelTypes + filters.channelTypes.filter { !context.channelTypes.contains($0) }).map { ($0, $0) }
        html += checkboxes("Channel", "channelType", channels, filters.channelTypes)
        html += checkboxes("Priority", "priority", ReportParameters.priorities.map { ($0, $0) }, filters.priorities)
        html += checkboxes("Score", "score", (1...5).map { (String($0), String($0)) }, filters.scores)
        if path == "/reports/responses" {
            html += "<fieldset><legend>Comment</legend><div><label><input type=\"checkbox\" name=\"hasComment\" value=\"true\""
                + "\(filters.hasComment ? " checked" : "")>With a comment</label></div></fieldset>"
        } else if filters.hasComment {
            html += "<input type=\"hidden\" name=\"hasComment\" value=\"true\">"
        }
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

    /// Names to tick in a fold-out list (no script: checkboxes in `<details>`, open while some are ticked).
    func picker(_ label: String, _ field: String, _ names: [Int: String], _ chosen: [String]) -> String {
        var options = names.sorted { ($0.value, $0.key) < ($1.value, $1.key) }.map { (String($0.key), $0.value) }
        for id in chosen where !options.contains(where: { $0.0 == id }) { options.append((id, context.name(id, names))) }
        let summary = chosen.isEmpty ? "All \(label.lowercased())" : "\(chosen.count) chosen"
        // Written as bytes: one per agent and team, the options were a fifth of a page view's string appends.
        var html = HTMLWriter(capacity: 256 + options.count * 96)
        html.markup("<fieldset class=\"pick\" id=\"pick-\(field)\"><legend>\(label)</legend><details\(chosen.isEmpty ? "" : " open")>")
        html.markup("<summary>\(summary)</summary><div>")
        for (id, text) in options {
            html.raw("<label><input type=\"checkbox\" name=\"")
            html.markup(field)
            html.raw("\" value=\"")
            html.escaped(id)
            html.raw(chosen.contains(id) ? "\" checked>" : "\">")
            html.escaped(text)
            html.raw("</label>")
        }
        html.raw("</div></details></fieldset>")
        return html.string
    }

    func checkboxes(_ label: String, _ field: String, _ values: [(value: String, text: String)], _ chosen: [String]) -> String {
        var html = "<fieldset><legend>\(label)</legend><div>"
        for (value, text) in values {
            html += "<label><input type=\"checkbox\" name=\"\(field)\" value=\"\(esc(value))\"\(chosen.contains(value) ? " checked" : "")>\(esc(text))</label>"
        }
        return html + "</div></fieldset>"
    }

    func chips() -> String {
        var chips: [(String, String, String)] = []   // label, field, value
        if filters.range == "custom" { chips.append(("Period: \(filters.from) – \(filters.to)", "range", "")) }
        chips += filters.agentIds.map { ("Agent: " + context.name($0, context.agentNames), "agentId", $0) }
        chips += filters.teamIds.map { ("Team: " + context.name($0, context.teamNames), "teamId", $0) }
        chips += filters.channelTypes.map { ("Channel: " + $0, "channelType", $0) }
        chips += filters.priorities.map { ("Priority: " + $0, "priority", $0) }
        chips += filters.scores.map { ("Score: " + $0, "score", $0) }
        if filters.hasComment { chips.append(("With a comment", "hasComment", "true")) }
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

/// `/reports`: summary cards, distribution, trend, the lowest-scored comments, agents and teams.
struct SummaryView {
    let context: PageContext
    let parameters: ReportParameters
    let agents: CSATReport
    let teams: CSATReport
    let trend: CSATReport
    let comments: [ResponseItem]
    /// Comments shown on the summary.
    static let commentCount = 8
    var filters: PageFilters { context.filters }
    var settings: ReportPageSettings { context.settings }

    func esc(_ text: String) -> String { ReportPageHTML.escape(text) }

    /// The target that applies to the whole view: one team's own when the view is that team, else the overall one.
    var viewTarget: Double? {
        let teams = filters.teamIds.isEmpty ? (context.caller.teamIds ?? []) : filters.teamIds.compactMap { Int($0) }
        return teams.count == 1 ? settings.target(team: teams[0]) : settings.csatTarget
    }

    /// The page's body as bytes: the tables, most of it, are written as bytes and never pass through a `String`
    /// (decoding a table's bytes back into one, and copying it twice more, was a tenth of a view).
    func render(into out: inout HTMLWriter) {
        out.markup(head())
        table(title: "Agents", id: "agents", report: agents, field: "agentId", export: "agents.csv", into: &out)
        table(title: "Teams", id: "teams", report: teams, field: "teamId", export: "teams.csv", into: &out)
    }

    /// Everything above the tables.
    func head() -> String {
        var html = context.scopeNotice()
        html += "<p class=\"muted\">\(parameters.from) – \(parameters.to) (\(esc(parameters.timeZone))), compared with "
            + "\(parameters.previous.from) – \(parameters.previous.to). Source: \(agents.source == "rollup" ? "daily rollups" : "raw ratings").</p>"
        html += FilterPanel(context: context, path: "/reports").render()
        let totals = agents.totals, before = agents.previousTotals
        if totals.responses == 0 && totals.requests == 0 {
            html += "<div class=\"panel empty-state\" id=\"empty\">No CSAT requests or responses match these filters in this period."
            if before.responses > 0 { html += " The previous period had \(before.responses) responses." }
            html += "</div>"
        }
        html += cards(totals, before)
        html += distribution(totals)
        html += trendChart()
        html += commentsPanel()
        return html
    }

    func card(_ id: String, _ label: String, _ shown: String, _ value: String, _ change: String, extra: String = "") -> String {
        "<div class=\"card\" id=\"card-\(id)\" data-value=\"\(value)\"><div class=\"label\">\(label)</div>"
            + "<div class=\"value\">\(shown)</div><div class=\"change\">\(change) <span class=\"muted\">vs previous period</span></div>\(extra)</div>"
    }

    /// "few" after a previous-period figure resting on fewer responses than `REPORT_PAGE_SMALL_SAMPLE`.
    func fewMark(_ figures: CSATFigures) -> String {
        guard settings.smallSample > 0, figures.responses > 0, figures.responses < settings.smallSample else { return "" }
        return "<span class=\"few\" title=\"Only \(figures.responses) responses in the previous period\">few</span>"
    }

    func cards(_ now: CSATFigures, _ before: CSATFigures) -> String {
        let responsesChange = before.responses == 0 ? "<span class=\"muted\">no previous data</span>"
            : ReportPageHTML.change(Double(now.responses), Double(before.responses), places: 0, suffix: "")
        var targetLine = ""
        if let target = viewTarget {
            targetLine = "<div class=\"target\" id=\"card-target\" data-target=\"\(ReportPageHTML.number(target))\">Target \(SVG.fixed(target, 1))%: "
                + ReportPageHTML.change(now.csatPercent, target, places: 1, suffix: " pts", noData: "no responses") + "</div>"
        }
        var html = "<section class=\"cards\" aria-label=\"Summary\">"
        html += card("responses", "Responses", String(now.responses), String(now.responses), responsesChange)
        html += card("average", "Average score (1–5)", ReportPageHTML.average(now.averageScore), ReportPageHTML.number(now.averageScore),
                     ReportPageHTML.change(now.averageScore, before.averageScore, places: 2, suffix: "") + fewMark(before))
        html += card("csat", "CSAT (4 and 5)", ReportPageHTML.percent(now.csatPercent), ReportPageHTML.number(now.csatPercent),
                     ReportPageHTML.change(now.csatPercent, before.csatPercent, places: 1, suffix: " pts") + fewMark(before), extra: targetLine)
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
        html += DistributionBar.render(totals.distribution, hrefs: hrefs, label: "Scores of all responses")
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
        let bucket = trend.parameters.bucket.rawValue
        var html = "<section class=\"panel\" aria-label=\"Trend\"><h2>Trend by \(bucket)</h2>"
        html += "<div class=\"legend\"><span><i class=\"avg\"></i>Average score (left axis, solid)</span>"
            + "<span>CSAT % (right axis, dashed)</span><span>Grey bars: responses</span>"
        if let target = viewTarget { html += "<span>Dotted line: CSAT target \(SVG.fixed(target, 1))%</span>" }
        html += "</div>"
        html += TrendChart.render(points, target: viewTarget, label: "Trend by \(bucket) from \(parameters.from) to \(parameters.to): "
                                  + "average score and CSAT %; the data is in the table below")
        html += "<details><summary>Trend data</summary><div class=\"scroll\"><table id=\"trend\"><caption>Trend by \(bucket)</caption>"
            + "<thead><tr><th scope=\"col\">\(bucket.capitalized)</th><th scope=\"col\">Responses</th><th scope=\"col\">Average</th>"
            + "<th scope=\"col\">CSAT</th></tr></thead><tbody>"
        // The rows written as bytes (a row of interpolated strings per bucket was a fifth of a view's allocations).
        var rows = HTMLWriter(capacity: 64 + points.count * 320)
        for point in points {
            rows.raw("<tr data-label=\"")
            rows.escaped(point.label)
            rows.raw("\"")
            rows.sortData(responses: point.responses, average: point.average, csatPercent: point.csatPercent)
            rows.raw("><td><a href=\"")
            rows.escaped(point.href ?? "")
            rows.raw("\">")
            rows.escaped(point.label)
            rows.raw("</a></td><td>")
            rows.integer(point.responses)
            rows.raw("</td><td>")
            rows.average(point.average)
            rows.raw("</td><td>")
            rows.percent(point.csatPercent)
            rows.raw("</td></tr>")
        }
        rows.raw("</tbody></table></div></details></section>")
        return html + rows.string
    }

    /// The period's comments, lowest score first, each with its score, agent, team, date and ticket.
    func commentsPanel() -> String {
        var all = filters
        all.cursor = nil
        all.hasComment = true
        var html = "<section class=\"panel\" aria-label=\"Comments\"><h2>Comments, lowest scores first</h2>"
        guard !comments.isEmpty else {
            return html + "<p class=\"muted\" id=\"no-comments\">No comments match these filters in this period.</p></section>"
        }
        let formatter = context.timeFormatter(parameters.timeZone)
        html += "<ul class=\"comments\" id=\"comments\">"
        for item in comments {
            let score = item.score.map(String.init) ?? "–"
            html += "<li data-score=\"\(score)\" data-ticket=\"\(item.ticketId)\"><span class=\"score s\(score)\" aria-label=\"Score \(score)\">\(score)</span>"
                + "<div><q>\(esc(item.comment ?? ""))</q><div class=\"muted\">\(esc(item.agentName ?? "No agent")) · \(esc(item.teamName ?? "No team")) · "
                + "\(formatter.string(from: Date(timeIntervalSince1970: item.ratedAt))) · ticket \(context.ticket(item.ticketId))</div></div></li>"
        }
        return html + "</ul><p><a id=\"all-comments\" href=\"\(esc(all.url("/reports/responses", all.items)))\">All responses with a comment →</a></p></section>"
    }

    /// A column header that sorts the table by `key` (a link; no script), with `aria-sort` on the header cell.
    func sortHeader(_ label: String, _ key: String, id: String) -> String {
        var copy = filters
        let active = filters.sort == key
        copy.sort = key
        copy.descending = active ? !filters.descending : key != "name"
        let arrow = active ? (filters.descending ? " ▼" : " ▲") : ""
        let sort = active ? " aria-sort=\"\(filters.descending ? "descending" : "ascending")\"" : ""
        return "<th scope=\"col\"\(sort)><a href=\"\(esc(copy.url("/reports", copy.items)))#\(id)\">\(label)\(arrow)</a></th>"
    }

    func table(title: String, id: String, report: CSATReport, field: String, export: String, into out: inout HTMLWriter) {
        var html = "<section aria-label=\"\(title)\"><h2 id=\"\(id)\">\(title)</h2>"
        html += "<div class=\"actions\"><a href=\"\(esc(filters.url("/reports/export/" + export, filters.items)))\" download>Download CSV</a>"
        if settings.smallSample > 0 {
            html += "<span class=\"muted\"><span class=\"few\">few</span> fewer than \(settings.smallSample) responses: read with care</span>"
        }
        html += "</div>"
        let rows = filters.sorted(report.rows)
        guard !rows.isEmpty else {
            return out.markup(html + "<div class=\"panel empty-state\">No \(title.lowercased()) with requests or responses in this period.</div></section>")
        }
        let showTargets = settings.hasTargets
        html += "<div class=\"scroll\" role=\"region\" aria-label=\"\(title) table\" tabindex=\"0\"><table id=\"table-\(id)\"><thead><tr>"
            + sortHeader(title == "Agents" ? "Agent" : "Team", "name", id: id) + sortHeader("Responses", "responses", id: id)
            + sortHeader("Average", "average", id: id) + "<th scope=\"col\" title=\"Average minus the average of everyone in this view\">vs all</th>"
            + sortHeader("CSAT", "csat", id: id) + (showTargets ? "<th scope=\"col\">vs target</th>" : "")
            + "<th scope=\"col\">Scores 1–5</th>" + sortHeader("Previous avg", "previous", id: id)
            + "<th scope=\"col\">Previous CSAT</th><th scope=\"col\">Avg change</th><th scope=\"col\">CSAT change</th></tr></thead><tbody>"
        // One drill-down link per row: this view's link plus the row's id (the view's part built once, not per row).
        var drillBase = filters
        drillBase.cursor = nil
        let base = esc(drillBase.url("/reports/responses", drillBase.items))
        let drill = DrillLink(base: base, separator: base.contains("?") ? "&amp;" : "?", field: field,
                              chosen: Set(field == "agentId" ? filters.agentIds : filters.teamIds))
        let overall = report.totals.averageScore
        out.markup(html)
        // A row is about 1.5 kB: the buffer grown once for all of them.
        out.reserve(rows.count * 1_800)
        for row in rows {
            let target = field == "teamId" ? settings.target(team: row.groupId) : viewTarget
            appendRow(row, drill: drill, target: target, overall: overall, showTargets: showTargets, to: &out)
        }
        out.raw("</tbody></table></div></section>")
    }

    /// One agent's or team's row: its figures, the change against the view and its target, its score bar.
    func appendRow(_ row: CSATRow, drill: DrillLink, target: Double?, overall: Double?, showTargets: Bool, to html: inout HTMLWriter) {
        let figures = row.figures
        let previous = row.previous ?? CSATFigures()
        let few = settings.smallSample > 0 && figures.responses < settings.smallSample
        appendRowHead(row, drill: drill, target: target, few: few, to: &html)
        html.raw("</td><td>")
        html.integer(figures.responses)
        html.raw("</td><td>")
        html.average(figures.averageScore)
        html.raw("</td><td>")
        html.change(figures.averageScore, overall, places: 2, suffix: "", noData: "–")
        html.raw("</td><td>")
        html.percent(figures.csatPercent)
        html.raw("</td>")
        if showTargets {
            html.raw("<td>")
            if let target { html.change(figures.csatPercent, target, places: 1, suffix: " pts", noData: "–") } else { html.raw("–") }
            html.raw("</td>")
        }
        appendScores(of: row.name, figures, to: &html)
        html.raw("<td>")
        html.average(previous.averageScore)
        html.markup(fewMark(previous))
        html.raw("</td><td>")
        html.percent(previous.csatPercent)
        html.raw("</td><td>")
        html.change(figures.averageScore, previous.averageScore, places: 2, suffix: "")
        html.raw("</td><td>")
        html.change(figures.csatPercent, previous.csatPercent, places: 1, suffix: " pts")
        html.raw("</td></tr>")
    }

    /// The row's opening tag with the data the page's sorting reads, and the name cell.
    func appendRowHead(_ row: CSATRow, drill: DrillLink, target: Double?, few: Bool, to html: inout HTMLWriter) {
        let figures = row.figures
        html.raw("<tr data-id=\"")
        html.integer(row.groupId)
        html.raw("\"")
        html.sortData(responses: figures.responses, average: figures.averageScore, csatPercent: figures.csatPercent)
        html.raw(" data-distribution=\"")
        for (index, count) in figures.distribution.enumerated() {
            if index > 0 { html.raw(",") }
            html.integer(count)
        }
        html.raw("\"")
        if few { html.raw(" data-few=\"true\"") }
        if let target {
            html.raw(" data-target=\"")
            html.number(target)
            html.raw("\"")
        }
        html.raw("><td><a href=\"")
        drill.write(row.groupId, to: &html)
        html.raw("\" title=\"")
        html.escaped(row.name)
        html.raw("\">")
        html.escaped(SVG.truncate(row.name, to: 48))
        html.raw("</a>")
        if few {
            html.raw("<span class=\"few\" title=\"Fewer than ")
            html.integer(settings.smallSample)
            html.raw(" responses\">few</span>")
        }
    }

    /// The score bar, named with its counts, and the counts written beside it.
    func appendScores(of name: String, _ figures: CSATFigures, to html: inout HTMLWriter) {
        html.raw("<td class=\"dist\">")
        // "Scores of NAME: 1: n, 2: n, …"
        DistributionBar.write(figures.distribution, width: 100, height: 12, cssClass: "mini", label: { out in
            out.raw("Scores of ")
            out.escaped(name)
            out.raw(": ")
            for score in 1...5 {
                if score > 1 { out.raw(", ") }
                out.integer(score)
                out.raw(": ")
                out.integer(figures.distribution[score - 1])
            }
        }, to: &html)
        html.raw("<small class=\"counts\">")
        for (index, count) in figures.distribution.enumerated() {
            if index > 0 { html.raw(" · ") }
            html.integer(count)
        }
        html.raw("</small></td>")
    }
}

/// A table row's drill-down link: the view's responses link (escaped), plus the row's id unless the view picks it
/// already. Written into the page per row (it was a string concatenated per row).
struct DrillLink {
    let base: String
    let separator: StaticString
    let field: String
    let chosen: Set<String>

    func write(_ id: Int, to html: inout HTMLWriter) {
        html.markup(base)
        guard !chosen.contains(String(id)) else { return }
        html.raw(separator)
        html.markup(field)
        html.raw("=")
        html.integer(id)
    }
}

/// `/reports/responses`: the rated responses behind a figure, newest first, a page at a time.
struct ResponsesView {
    let context: PageContext
    let parameters: ReportParameters
    let items: [ResponseItem]
    let next: String?
    var filters: PageFilters { context.filters }

    func esc(_ text: String) -> String { ReportPageHTML.escape(text) }

    func render() -> String {
        var back = filters
        back.cursor = nil
        var html = context.scopeNotice() + "<p><a href=\"\(esc(back.url("/reports", back.items)))\">← Summary</a></p>"
        html += "<h2>Responses, newest first</h2><p class=\"muted\">\(parameters.from) – \(parameters.to) (\(esc(parameters.timeZone)))</p>"
        html += FilterPanel(context: context, path: "/reports/responses").render()
        html += "<div class=\"actions\"><a id=\"export\" href=\"\(esc(back.url("/reports/export/responses.csv", back.items)))\" download>"
            + "Download CSV (every matching response)</a></div>"
        guard !items.isEmpty else {
            return html + "<div class=\"panel empty-state\" id=\"empty\">No rated responses match these filters.</div>"
        }
        let formatter = context.timeFormatter(parameters.timeZone)
        html += "<div class=\"scroll\" role=\"region\" aria-label=\"Responses table\" tabindex=\"0\"><table id=\"responses\"><thead><tr>"
            + "<th scope=\"col\">Rated</th><th scope=\"col\">Score</th><th scope=\"col\">Comment</th><th scope=\"col\">Agent</th>"
            + "<th scope=\"col\">Team</th><th scope=\"col\">Ticket</th><th scope=\"col\">Channel</th></tr></thead><tbody>"
        for item in items {
            html += "<tr data-ticket=\"\(item.ticketId)\" data-message=\"\(item.messageId)\" data-score=\"\(item.score.map(String.init) ?? "")\">"
            html += "<td>\(formatter.string(from: Date(timeIntervalSince1970: item.ratedAt)))</td><td>\(item.score.map(String.init) ?? "–")</td>"
            html += "<td class=\"text\">\(esc(item.comment ?? ""))</td><td class=\"text\">\(esc(item.agentName ?? "–"))</td>"
            html += "<td class=\"text\">\(esc(item.teamName ?? "–"))</td><td>\(context.ticket(item.ticketId))</td><td>\(esc(item.channelType))</td></tr>"
        }
        html += "</tbody></table></div><div class=\"actions\">"
        if filters.cursor != nil { html += "<a href=\"\(esc(filters.url("/reports/responses", filters.items)))\">First page</a>" }
        if let next {
            html += "<a id=\"next\" rel=\"next\" href=\"\(esc(filters.url("/reports/responses", filters.items + [("cursor", next)])))\">Next page →</a>"
        }
        return html + "</div>"
    }
}
