import Reports
import Testing

/// The report page's charts without a browser: well-formed XML, scales, gaps, edge sizes, escaping.
@Suite struct SVGChartTests {
    /// Elements balance (a small checker: tags, self-closing tags, no stray `<` or `&` in text).
    func isWellFormed(_ svg: String) -> Bool {
        var stack: [String] = []
        var index = svg.startIndex
        while index < svg.endIndex {
            let ch = svg[index]
            if ch == "<" {
                guard let close = svg[index...].firstIndex(of: ">") else { return false }
                let tag = svg[svg.index(after: index)..<close]
                if tag.hasPrefix("/") {
                    guard stack.popLast() == String(tag.dropFirst()) else { return false }
                } else if !tag.hasSuffix("/") {
                    stack.append(String(tag.prefix { $0 != " " }))
                }
                // Attribute values hold no raw quote, `<` or `&` that is not an entity.
                if tag.contains("<") { return false }
                index = svg.index(after: close)
            } else {
                if ch == "&" {
                    let entity = svg[index...].prefix { $0 != ";" }
                    guard ["&amp", "&lt", "&gt", "&quot", "&#39"].contains(String(entity)) else { return false }
                }
                index = svg.index(after: index)
            }
        }
        return stack.isEmpty
    }

    /// The numeric values of `attribute` on every `element`, in order.
    func values(_ svg: String, _ element: String, _ attribute: String, withClass: String? = nil) -> [Double] {
        svg.components(separatedBy: "<\(element) ").dropFirst().compactMap { tag -> Double? in
            let head = tag.prefix { $0 != ">" }
            if let withClass, !head.contains("class=\"\(withClass)\"") && !head.contains("class=\"dot \(withClass)\"") { return nil }
            guard let range = head.range(of: " \(attribute)=\"") ?? (head.hasPrefix("\(attribute)=\"") ? head.range(of: "\(attribute)=\"") : nil) else { return nil }
            return Double(head[range.upperBound...].prefix { $0 != "\"" })
        }
    }

    @Test func scalesMapOneToFiveAndZeroToHundredOntoThePlot() {
        let points = [TrendPoint(label: "a", average: 5, csatPercent: 100, responses: 10),
                      TrendPoint(label: "b", average: 1, csatPercent: 0, responses: 5),
                      TrendPoint(label: "c", average: 3, csatPercent: 50, responses: 0)]
        let svg = TrendChart.render(points, width: 760, height: 240)
        #expect(isWellFormed(svg))
        // Plot: top 14, height 240 - 14 - 34 = 192; left 44, width 760 - 44 - 48 = 668.
        #expect(values(svg, "circle", "cy", withClass: "average") == [14, 206, 110])
        #expect(values(svg, "circle", "cy", withClass: "csat") == [14, 206, 110])
        #expect(values(svg, "circle", "cx", withClass: "average") == [44, 378, 712])
        // Volume bars: the busiest bucket a quarter of the plot high; a bucket without responses has none.
        #expect(values(svg, "rect", "height", withClass: "volume") == [48, 24])
        #expect(svg.components(separatedBy: "<polyline").count - 1 == 2)
    }

    @Test func emptyBucketsAreGapsNotZeros() {
        let points = [TrendPoint(label: "d1", average: 4, csatPercent: 80, responses: 5),
                      TrendPoint(label: "d2", average: nil, csatPercent: nil, responses: 0),
                      TrendPoint(label: "d3", average: 3, csatPercent: 60, responses: 5),
                      TrendPoint(label: "d4", average: 5, csatPercent: 100, responses: 5)]
        let svg = TrendChart.render(points)
        #expect(isWellFormed(svg))
        // d1 stands alone (a marker, no line); d3–d4 are one segment per series; nothing is drawn at d2.
        let lines = svg.components(separatedBy: "<polyline").dropFirst().map { $0.prefix { $0 != "/" } }
        #expect(lines.count == 2)
        #expect(lines.allSatisfy { $0.components(separatedBy: ",").count - 1 == 2 })
        #expect(values(svg, "circle", "cy", withClass: "average").count == 3)
        #expect(!values(svg, "circle", "cy", withClass: "average").contains(206))
        #expect(!svg.contains("d2: average"))
    }

    @Test func zeroAndOnePointAndManyPoints() {
        let none = TrendChart.render([])
        #expect(isWellFormed(none) && none.contains("No buckets"))
        let one = TrendChart.render([TrendPoint(label: "only", average: 4.5, csatPercent: 90, responses: 3, href: "/reports/responses?a=1&b=2")])
        #expect(isWellFormed(one))
        #expect(values(one, "circle", "cx", withClass: "average") == [378])
        #expect(one.contains("href=\"/reports/responses?a=1&amp;b=2\""))
        let many = TrendChart.render((0..<366).map { TrendPoint(label: "p\($0)", average: Double($0 % 5 + 1), csatPercent: 50, responses: $0) })
        #expect(isWellFormed(many))
        // A readable axis: a handful of labels, the first and the last among them.
        let labels = many.components(separatedBy: "text-anchor=\"middle\">").dropFirst().map { String($0.prefix { $0 != "<" }) }
        #expect(labels.count <= 8 && labels.first == "p0" && labels.last == "p365", "\(labels)")
    }

    @Test func textIsEscapedAndLongLabelsCut() {
        let hostile = "<script>alert('x')</script> & \"quotes\"\u{1}"
        let svg = TrendChart.render([TrendPoint(label: hostile, average: 2, csatPercent: 20, responses: 1, href: "/x?\"><script>")])
        #expect(isWellFormed(svg))
        #expect(!svg.contains("<script>") && !svg.contains("\u{1}"))
        #expect(svg.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;quotes&quot;"))
        #expect(SVG.truncate("A very long agent name indeed", to: 12) == "A very long…")
        #expect(SVG.truncate("Short", to: 12) == "Short")
        #expect(svg.contains(">&lt;script&gt;ale…</text>"))
    }

    @Test func distributionSegmentsAddUpAndLink() {
        let svg = DistributionBar.render([1, 0, 2, 3, 4], hrefs: (1...5).map { "/r?score=\($0)" }, width: 1000, height: 20)
        #expect(isWellFormed(svg))
        let widths = values(svg, "rect", "width")
        #expect(widths == [100, 200, 300, 400])
        #expect(svg.contains("Score 4: 3 (30.0%)"))
        #expect(svg.contains("<a href=\"/r?score=5\">") && !svg.contains("score=2\""))
        let empty = DistributionBar.render([0, 0, 0, 0, 0])
        #expect(isWellFormed(empty) && empty.contains("class=\"outline\"") && !empty.contains("<title>"))
    }

    @Test func fixedDecimals() {
        #expect(SVG.fixed(3.14159, 2) == "3.14")
        #expect(SVG.fixed(2.5, 0) == "3")
        #expect(SVG.fixed(-1.25, 1) == "-1.3")
        #expect(SVG.fixed(-0.004, 2) == "0.00")
        #expect(SVG.fixed(61.7, 1) == "61.7")
        #expect(SVG.fixed(0.05, 2) == "0.05")
        #expect(SVG.fixed(100, 1) == "100.0")
        #expect(SVG.fixed(-3.04, 1) == "-3.0" && SVG.fixed(7.0009, 3) == "7.001" && SVG.fixed(12.5, 4) == "12.5000")
    }

    /// The page's rows are written as bytes; the escaping is the same as the string's, character for character.
    @Test func escapingIntoBytes() {
        let text = "Zoë & \"Ana\" <o'k>\u{1}\t\u{1F600}"
        #expect(SVG.escape(text) == "Zoë &amp; &quot;Ana&quot; &lt;o&#39;k&gt;\u{FFFD}\t\u{1F600}")
        var writer = HTMLWriter(capacity: 0)
        writer.escaped(text)
        writer.raw("|")
        writer.escaped("plain")
        writer.fixed(-0.5, 0)
        writer.number(2.25)
        writer.number(nil)
        writer.integer(-42)
        #expect(writer.string == SVG.escape(text) + "|plain-12.25-42")
    }
}
