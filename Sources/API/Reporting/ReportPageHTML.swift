import Crypto
import Foundation
import Reports

/// The report page's markup: one layout, one style sheet (inline, allowed by its hash in the CSP), no script.
enum ReportPageHTML {
    static func escape(_ text: String) -> String { SVG.escape(text) }

    static let css = """
        :root{--fg:#1d2733;--muted:#525c69;--line:#dde3ea;--bg:#f6f8fa;--accent:#0b57d0;--good:#1e6b26;--bad:#b3261e}
        *{box-sizing:border-box}
        body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:var(--bg)}
        header.top{display:flex;align-items:center;gap:16px;padding:10px 24px;background:#fff;border-bottom:1px solid var(--line)}
        header.top h1{font-size:17px;margin:0;flex:1}
        header.top form{margin:0}
        main{max-width:1180px;margin:0 auto;padding:16px 24px 48px}
        a{color:var(--accent);text-decoration:none}
        a:hover,a:focus{text-decoration:underline}
        h2{font-size:15px;margin:24px 0 8px}
        .panel{background:#fff;border:1px solid var(--line);border-radius:6px;padding:12px 16px;margin-bottom:12px}
        form.filters{display:flex;flex-wrap:wrap;gap:10px 16px;align-items:flex-end}
        form.filters label,form.filters fieldset{display:flex;flex-direction:column;font-size:12px;color:var(--muted);border:0;padding:0;margin:0}
        form.filters fieldset label{flex-direction:row;gap:4px;align-items:center;color:var(--fg);font-size:13px}
        form.filters fieldset div{display:flex;flex-wrap:wrap;gap:2px 10px;max-width:420px}
        select,input,button{font:inherit;max-width:100%}
        button{background:var(--accent);color:#fff;border:0;border-radius:4px;padding:6px 14px;cursor:pointer}
        button.plain{background:none;color:var(--accent);padding:0}
        .presets{margin:6px 0 0;display:flex;gap:12px;flex-wrap:wrap}
        .presets .on{font-weight:600;color:var(--fg)}
        .chips{display:flex;gap:6px;flex-wrap:wrap;margin-top:8px}
        .chip{background:#e8f0fe;border-radius:12px;padding:2px 10px;font-size:12px}
        .chip a{margin-left:6px;font-weight:700}
        .cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(200px,1fr));gap:12px}
        .card{background:#fff;border:1px solid var(--line);border-radius:6px;padding:12px 16px}
        .card .label{color:var(--muted);font-size:12px}
        .card .value{font-size:26px;font-weight:600}
        .up{color:var(--good)} .down{color:var(--bad)} .flat,.muted{color:var(--muted)}
        .legend{display:flex;gap:16px;flex-wrap:wrap;font-size:12px;margin-top:6px}
        .legend i{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:4px}
        .s1{background:#b2182b}.s2{background:#f4a582}.s3{background:#595959}.s4{background:#92c5de}.s5{background:#2166ac}
        svg.chart{width:100%;height:auto;display:block}
        svg.distribution{height:28px}
        svg.mini{width:100px;height:12px}
        svg .grid{stroke:#e5e9ef;stroke-width:1}
        svg .axis{fill:#525c69;font-size:11px}
        svg .volume{fill:#d0d7de}
        svg .line{fill:none;stroke-width:2}
        svg .line.average{stroke:#0b57d0}
        svg .line.csat{stroke:#8250df;stroke-dasharray:5 4}
        svg .dot.average{fill:#0b57d0} svg .dot.csat{fill:#8250df}
        svg .outline{fill:none;stroke:#d0d7de}
        svg .empty{fill:#525c69;font-size:13px}
        table{border-collapse:collapse;width:100%;background:#fff}
        th,td{padding:6px 8px;border-bottom:1px solid var(--line);text-align:right;white-space:nowrap}
        th:first-child,td:first-child{text-align:left}
        td.text{text-align:left;white-space:normal;max-width:420px;overflow-wrap:anywhere}
        th a{color:var(--fg)}
        .few{background:#fff3cd;color:#6b4f00;border-radius:3px;padding:0 5px;font-size:11px;margin-left:6px}
        .scroll{overflow-x:auto;max-width:100%}
        .scope{background:#e8f0fe;border-radius:6px;padding:6px 12px}
        .target{font-size:12px;margin-top:4px}
        fieldset.pick details{font-size:13px;color:var(--fg)}
        fieldset.pick details div{flex-direction:column;max-height:180px;overflow:auto;flex-wrap:nowrap}
        ul.comments{list-style:none;margin:0;padding:0}
        ul.comments li{display:flex;gap:10px;padding:6px 0;border-bottom:1px solid var(--line)}
        ul.comments .score{flex:none;width:24px;height:24px;border-radius:12px;text-align:center;line-height:24px;font-weight:600}
        .score.s1,.score.s3,.score.s5{color:#fff}.score.s2,.score.s4{color:#1d2733}
        td.dist small{display:block;font-size:11px;color:var(--muted)}
        caption{text-align:left;font-size:12px;color:var(--muted)}
        svg .target{stroke:#1d2733;stroke-width:1.5;stroke-dasharray:2 3}
        @media (max-width:640px){main{padding:12px 10px 32px}header.top{padding:8px 10px}
        form.filters fieldset div{max-width:100%}.cards{grid-template-columns:1fr 1fr}.card .value{font-size:22px}}
        .empty-state{padding:32px;text-align:center;color:var(--muted)}
        .errors{background:#fdecea;border:1px solid #f5c2c0;border-radius:6px;padding:8px 16px;color:#8a1c14}
        .actions{display:flex;gap:16px;margin:6px 0;font-size:13px}
        details summary{cursor:pointer;color:var(--muted);font-size:12px;margin-top:6px}
        .signin{max-width:420px;margin:64px auto}
        .signin input{width:100%;padding:6px;margin:6px 0 12px}
        """

    /// `'sha256-…'` of the style element, for the Content-Security-Policy.
    static let cssHash = "'sha256-" + Data(SHA256.hash(data: Array(css.utf8))).base64EncodedString() + "'"

    static func layout(title: String, signedIn: Bool, body: String) -> [UInt8] {
        layout(title: title, signedIn: signedIn) { $0.markup(body) }
    }

    /// The page around a body written as bytes.
    static func layout(title: String, signedIn: Bool, body: (inout HTMLWriter) -> Void) -> [UInt8] {
        var page = HTMLWriter(capacity: 64 * 1024)
        // Written piece by piece: a head made as one String copied the style sheet twice for every view.
        page.raw("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">")
        page.raw("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><link rel=\"icon\" href=\"data:,\"><title>")
        page.escaped(title)
        page.raw(" · CSAT</title><style>")
        page.markup(css)
        page.raw("</style></head><body><header class=\"top\"><h1><a href=\"/reports\">Customer satisfaction</a></h1>")
        if signedIn {
            page.raw("<form method=\"post\" action=\"/reports/sign-out\"><button class=\"plain\" type=\"submit\">Sign out</button></form>")
        }
        page.raw("</header><main>")
        body(&page)
        page.raw("</main></body></html>")
        return page.bytes
    }

    static func signIn(next: String, message: String?) -> [UInt8] {
        var body = "<div class=\"signin panel\"><h2>Sign in to the CSAT reports</h2>"
        if let message { body += "<p class=\"errors\" role=\"alert\">\(escape(message))</p>" }
        body += """
            <form method="post" action="/reports/sign-in">
            <label for="key">API key with the <b>reports</b> scope</label>
            <input id="key" name="key" type="password" autocomplete="off" required placeholder="dgk_…">
            <input type="hidden" name="next" value="\(escape(next))">
            <button type="submit">Sign in</button>
            </form>
            <p class="muted">Operators create keys with <code>desk-gateway api-key create --scope reports</code>.</p></div>
            """
        return layout(title: "Sign in", signedIn: false, body: body)
    }

    static func errorPage(status: Int, title: String, detail: String, problems: [String], signedIn: Bool) -> [UInt8] {
        var body = "<div class=\"errors\" role=\"alert\"><h2>\(escape(title))</h2><p>\(escape(detail))</p>"
        if !problems.isEmpty { body += "<ul>" + problems.map { "<li>\(escape($0))</li>" }.joined() + "</ul>" }
        body += "<p><a href=\"/reports\">Back to the reports</a></p></div>"
        return layout(title: title, signedIn: signedIn, body: body)
    }

    /// The JSON API's spelling of a number, so the page's data attributes compare equal to it.
    static func number(_ value: Double?) -> String {
        guard let value else { return "" }
        return CSV.number(value)
    }

    static func average(_ value: Double?) -> String { written { $0.average(value) } }
    static func percent(_ value: Double?) -> String { written { $0.percent(value) } }

    /// A change against the previous period: `+0.12` / `+1.3 pts` / `+12 %`, classed up, down or flat.
    static func change(_ now: Double?, _ before: Double?, places: Int, suffix: StaticString, noData: StaticString = "no previous data") -> String {
        written { $0.change(now, before, places: places, suffix: suffix, noData: noData) }
    }

    static func written(_ write: (inout HTMLWriter) -> Void) -> String {
        var out = HTMLWriter(capacity: 64)
        write(&out)
        return out.string
    }
}

/// The page's figures as the rows write them.
extension HTMLWriter {
    mutating func average(_ value: Double?) {
        figure(value, places: 2, suffix: "")
    }

    mutating func percent(_ value: Double?) {
        figure(value, places: 1, suffix: "%")
    }

    /// ` data-responses="…" data-average="…" data-csat="…"`: what the page's sorting reads from a table row.
    mutating func sortData(responses: Int, average: Double?, csatPercent: Double?) {
        raw(" data-responses=\"")
        integer(responses)
        raw("\" data-average=\"")
        number(average)
        raw("\" data-csat=\"")
        number(csatPercent)
        raw("\"")
    }

    mutating func change(_ now: Double?, _ before: Double?, places: Int, suffix: StaticString, noData: StaticString = "no previous data") {
        guard let now, let before else {
            raw("<span class=\"muted\">")
            raw(noData)
            return raw("</span>")
        }
        let delta = now - before
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        // A change that rounds away is flat, and written without a sign (`fixed` never writes a negative zero).
        if (abs(delta) * scale).rounded() == 0 { raw("<span class=\"flat\">") } else if delta > 0 { raw("<span class=\"up\">+") } else {
            raw("<span class=\"down\">")
        }
        fixed(delta, places)
        raw(suffix)
        raw("</span>")
    }
}
