public import JSON

/// Charts of the report page, drawn on the server as inline SVG (no script, no chart library): a trend of average
/// score and CSAT % per bucket, and stacked bars of the 1–5 distribution. Every text is XML-escaped.
public enum SVG {
    /// Escapes text for XML content and attribute values.
    public static func escape(_ text: String) -> String {
        // Most names need nothing: hand them back as they are.
        if !text.utf8.contains(where: needsEscape) { return text }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + 16)
        var text = text
        text.withUTF8 { replaceEach($0, into: &out) }
        return String(decoding: out, as: UTF8.self)
    }

    static func needsEscape(_ byte: UInt8) -> Bool {
        byte < 0x20 || byte == 0x26 || byte == 0x3C || byte == 0x3E || byte == 0x22 || byte == 0x27
    }

    /// `escape`, appended as UTF-8. Bytes of multi-byte characters are never below 0x80, so a byte walk is a
    /// character walk for everything that is replaced.
    public static func appendEscaped<Sink: ByteSink & ~Copyable>(_ text: String, to out: inout Sink) {
        var text = text
        text.withUTF8 { utf8 in
            guard utf8.contains(where: needsEscape) else { return out.put(utf8) }
            replaceEach(utf8, into: &out)
        }
    }

    /// The replacing walk, for text known to need it (the callers have looked once already).
    private static func replaceEach<Sink: ByteSink & ~Copyable>(_ utf8: UnsafeBufferPointer<UInt8>, into out: inout Sink) {
        for byte in utf8 {
            switch byte {
            case UInt8(ascii: "&"): out.put("&amp;")
            case UInt8(ascii: "<"): out.put("&lt;")
            case UInt8(ascii: ">"): out.put("&gt;")
            case UInt8(ascii: "\""): out.put("&quot;")
            case UInt8(ascii: "'"): out.put("&#39;")
            // XML 1.0 has no place for most control characters, even escaped.
            case 0..<0x20 where byte != 0x09 && byte != 0x0A && byte != 0x0D: out.put("\u{FFFD}")
            default: out.put(byte)
            }
        }
    }

    /// At most `limit` characters, the last one an ellipsis when cut.
    public static func truncate(_ text: String, to limit: Int) -> String {
        guard text.count > limit, limit > 1 else { return text }
        return String(text.prefix(limit - 1)) + "…"
    }

    /// A number with a fixed count of decimals (no Foundation formatter: the Reports module has none).
    public static func fixed(_ value: Double, _ places: Int) -> String {
        var out: [UInt8] = []
        appendFixed(value, places, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `fixed`, appended to a string (the trend chart's coordinates).
    public static func appendFixed(_ value: Double, _ places: Int, to text: inout String) {
        text += fixed(value, places)
    }

    /// `fixed`, appended as UTF-8 (the page's rows write hundreds of them).
    public static func appendFixed<Sink: ByteSink & ~Copyable>(_ value: Double, _ places: Int, to out: inout Sink) {
        var scale = 1.0
        for _ in 0..<places { scale *= 10 }
        let scaled = (abs(value) * scale).rounded()
        let whole = Int(scaled / scale)
        if value < 0 && scaled > 0 { out.put(UInt8(ascii: "-")) }
        out.putInteger(Int64(whole))
        if places > 0 {
            let fraction = Int(scaled) - whole * Int(scale)
            out.put(UInt8(ascii: "."))
            var width = fraction < 0 ? 2 : 1
            var rest = fraction.magnitude
            while rest >= 10 { rest /= 10; width += 1 }
            for _ in width..<max(width, places) { out.put(UInt8(ascii: "0")) }
            out.putInteger(Int64(fraction))
        }
    }

    /// The colour of a score's segment: a colour-blind-safe diverging scale, red (1) through grey to blue (5), dark
    /// and light in turn so neighbours stand at least 3:1 apart.
    static let scoreColors: [StaticString] = ["#b2182b", "#f4a582", "#595959", "#92c5de", "#2166ac"]
}

/// One point of the trend: a bucket and the figures behind it (nil figures: no scored responses, drawn as a gap).
public struct TrendPoint: Sendable, Equatable {
    public let label: String
    public let average: Double?
    public let csatPercent: Double?
    public let responses: Int
    public let href: String?

    public init(label: String, average: Double?, csatPercent: Double?, responses: Int, href: String? = nil) {
        self.label = label
        self.average = average
        self.csatPercent = csatPercent
        self.responses = responses
        self.href = href
    }
}

public enum TrendChart {
    /// Average score (left axis, 1–5, solid) and CSAT % (right axis, 0–100, dashed) per bucket, with the responses
    /// behind each bucket as grey bars along the bottom. Lines break where a bucket has no scored response.
    /// A `target` CSAT % is drawn as a dotted line on the right axis; `label` is the chart's accessible name.
    public static func render(_ points: [TrendPoint], width: Int = 760, height: Int = 240, target: Double? = nil,
                              label: String = "Average score and CSAT per bucket") -> String {
        // Written as bytes, not interpolated strings: the report page draws one per view.
        var svg = HTMLWriter(capacity: 2048 + points.count * 400)
        svg.raw("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart trend\" viewBox=\"0 0 ")
        svg.integer(width)
        svg.raw(" ")
        svg.integer(height)
        svg.raw("\" role=\"img\" aria-label=\"")
        svg.escaped(label)
        svg.raw("\">")
        guard !points.isEmpty else {
            svg.raw("<text x=\"")
            svg.integer(width / 2)
            svg.raw("\" y=\"")
            svg.integer(height / 2)
            svg.raw("\" text-anchor=\"middle\" class=\"empty\">No buckets in this period</text></svg>")
            return svg.string
        }
        let plot = Plot(count: points.count, width: Double(width), height: Double(height))
        plot.axes(to: &svg)
        if let target {
            let y = plot.yPercent(target)
            svg.raw("<line class=\"target\"")
            plot.horizontal(at: y, to: &svg)
            svg.raw("><title>CSAT target ")
            svg.fixed(target, 1)
            svg.raw("%</title></line>")
        }
        plot.volume(points, to: &svg)
        plot.line("average", points.map { $0.average.map(plot.yAverage) }, to: &svg)
        plot.line("csat", points.map { $0.csatPercent.map(plot.yPercent) }, to: &svg)
        plot.markers(points, to: &svg)
        plot.xLabels(points, to: &svg)
        svg.raw("</svg>")
        return svg.string
    }

    /// Where things go on the chart: the plot area inside the axes, and the x of each bucket.
    struct Plot {
        let count: Int
        let left = 44.0, right = 48.0, top = 14.0, bottom = 34.0
        let width: Double, height: Double

        init(count: Int, width: Double, height: Double) {
            self.count = count
            self.width = width - left - right
            self.height = height - top - bottom
        }

        func x(_ index: Int) -> Double { count == 1 ? left + width / 2 : left + width * Double(index) / Double(count - 1) }
        func yAverage(_ value: Double) -> Double { top + height * (5 - min(5, max(1, value))) / 4 }
        func yPercent(_ value: Double) -> Double { top + height * (100 - min(100, max(0, value))) / 100 }

        /// ` x1="…" x2="…" y1="y" y2="y"`: a line across the plot area.
        func horizontal(at y: Double, to svg: inout HTMLWriter) {
            svg.raw(" x1=\"")
            svg.fixed(left, 1)
            svg.raw("\" x2=\"")
            svg.fixed(left + width, 1)
            svg.raw("\" y1=\"")
            svg.fixed(y, 1)
            svg.raw("\" y2=\"")
            svg.fixed(y, 1)
            svg.raw("\"")
        }

        /// Grid lines at each score, the score axis on the left and the percent axis on the right.
        func axes(to svg: inout HTMLWriter) {
            for score in 1...5 {
                let y = yAverage(Double(score))
                svg.raw("<line class=\"grid\"")
                horizontal(at: y, to: &svg)
                svg.raw("/><text class=\"axis\" x=\"")
                svg.fixed(left - 6, 1)
                svg.raw("\" y=\"")
                svg.fixed(y, 1)
                svg.raw("\" text-anchor=\"end\" dominant-baseline=\"middle\">")
                svg.integer(score)
                svg.raw("</text>")
            }
            for percent in [0, 50, 100] {
                svg.raw("<text class=\"axis pct\" x=\"")
                svg.fixed(left + width + 6, 1)
                svg.raw("\" y=\"")
                svg.fixed(yPercent(Double(percent)), 1)
                svg.raw("\" dominant-baseline=\"middle\">")
                svg.integer(percent)
                svg.raw("%</text>")
            }
        }

        /// Responses per bucket as bars along the bottom quarter, scaled to the busiest one.
        func volume(_ points: [TrendPoint], to svg: inout HTMLWriter) {
            let most = max(1, points.map(\.responses).max() ?? 1)
            let slot = count == 1 ? width / 3 : width / Double(count - 1)
            let barWidth = max(1, min(24, slot * 0.6))
            for (index, point) in points.enumerated() where point.responses > 0 {
                let barHeight = max(1, (height * 0.25) * Double(point.responses) / Double(most))
                svg.raw("<rect class=\"volume\" x=\"")
                svg.fixed(x(index) - barWidth / 2, 1)
                svg.raw("\" y=\"")
                svg.fixed(top + height - barHeight, 1)
                svg.raw("\" width=\"")
                svg.fixed(barWidth, 1)
                svg.raw("\" height=\"")
                svg.fixed(barHeight, 1)
                svg.raw("\"/>")
            }
        }

        /// One series as polylines, broken where a bucket has no value.
        func line(_ series: StaticString, _ ys: [Double?], to svg: inout HTMLWriter) {
            var start = 0
            while start < ys.count {
                guard ys[start] != nil else { start += 1; continue }
                var end = start
                while end < ys.count, ys[end] != nil { end += 1 }
                if end - start > 1 {
                    svg.raw("<polyline class=\"line ")
                    svg.raw(series)
                    svg.raw("\" points=\"")
                    for index in start..<end {
                        if index > start { svg.raw(" ") }
                        svg.fixed(x(index), 1)
                        svg.raw(",")
                        svg.fixed(ys[index]!, 1)
                    }
                    svg.raw("\"/>")
                }
                start = end
            }
        }

        /// One marker per bucket with data, titled with its figures and linked when the point has a target.
        func markers(_ points: [TrendPoint], to svg: inout HTMLWriter) {
            for (index, point) in points.enumerated() {
                guard point.average != nil || point.csatPercent != nil else { continue }
                if let href = point.href {
                    svg.raw("<a href=\"")
                    svg.escaped(href)
                    svg.raw("\" class=\"point\">")
                } else {
                    svg.raw("<g class=\"point\">")
                }
                svg.raw("<title>")
                svg.escaped(point.label)
                svg.raw(": average ")
                svg.figure(point.average, places: 2, suffix: "")
                svg.raw(", CSAT ")
                svg.figure(point.csatPercent, places: 1, suffix: "%")
                svg.raw(", ")
                svg.integer(point.responses)
                svg.raw(" responses</title>")
                if let average = point.average { dot("dot average", x: x(index), y: yAverage(average), radius: "4", to: &svg) }
                if let csat = point.csatPercent { dot("dot csat", x: x(index), y: yPercent(csat), radius: "3", to: &svg) }
                svg.raw(point.href == nil ? "</g>" : "</a>")
            }
        }

        func dot(_ cssClass: StaticString, x: Double, y: Double, radius: StaticString, to svg: inout HTMLWriter) {
            svg.raw("<circle class=\"")
            svg.raw(cssClass)
            svg.raw("\" cx=\"")
            svg.fixed(x, 1)
            svg.raw("\" cy=\"")
            svg.fixed(y, 1)
            svg.raw("\" r=\"")
            svg.raw(radius)
            svg.raw("\"/>")
        }

        /// At most about seven labels along the bottom, the first and the last always, never closer than a label's
        /// width (about 72 units for a date at this size): the stride label nearest the end gives way to the last.
        func xLabels(_ points: [TrendPoint], to svg: inout HTMLWriter) {
            let slotWidth = count > 1 ? width / Double(count - 1) : width
            let every = max(1, Int((Double(count) / 7).rounded(.up)), Int((72 / slotWidth).rounded(.up)))
            var labelled = Array(stride(from: 0, to: count, by: every))
            if let last = labelled.last, last != count - 1 {
                if count - 1 - last < every, labelled.count > 1 { labelled.removeLast() }
                labelled.append(count - 1)
            }
            for index in labelled {
                svg.raw("<text class=\"axis\" x=\"")
                svg.fixed(x(index), 1)
                svg.raw("\" y=\"")
                svg.fixed(top + height + 18, 1)
                svg.raw("\" text-anchor=\"middle\">")
                svg.escaped(SVG.truncate(points[index].label, to: 12))
                svg.raw("</text>")
            }
        }
    }
}

public enum DistributionBar {
    /// The 1–5 counts as one stacked bar; each segment titled with its count and share, and linked when `hrefs`
    /// names a target. An all-zero distribution draws an empty outline.
    /// `label` is the chart's accessible name (distinct per chart, with its numbers).
    public static func render(_ counts: ScoreCounts, hrefs: [String?] = [], width: Int = 760, height: Int = 28,
                              cssClass: StaticString = "chart distribution", label: String = "Scores 1 to 5") -> String {
        var out = HTMLWriter(capacity: 700 + label.utf8.count)
        write(counts, hrefs: hrefs, width: width, height: height, cssClass: cssClass, label: { $0.escaped(label) }, to: &out)
        return out.string
    }

    /// `render`, written into the page (one per agent and team). `label` writes the accessible name, escaped, into
    /// the page itself (a row's label was a string built by a dozen appends first).
    public static func write(_ counts: ScoreCounts, hrefs: [String?] = [], width: Int, height: Int, cssClass: StaticString,
                             label: (inout HTMLWriter) -> Void, to out: inout HTMLWriter) {
        out.raw("<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"")
        out.raw(cssClass)
        out.raw("\" viewBox=\"0 0 ")
        out.integer(width)
        out.raw(" ")
        out.integer(height)
        out.raw("\" role=\"img\" aria-label=\"")
        label(&out)
        out.raw("\" preserveAspectRatio=\"none\">")
        let total = counts.reduce(0, +)
        guard total > 0 else {
            out.raw("<rect class=\"outline\" x=\"0.5\" y=\"0.5\" width=\"")
            out.integer(width - 1)
            out.raw("\" height=\"")
            out.integer(height - 1)
            return out.raw("\"/></svg>")
        }
        var at = 0.0
        for (index, count) in counts.prefix(5).enumerated() where count > 0 {
            let share = Double(count) / Double(total)
            let segment = Double(width) * share
            let href = index < hrefs.count ? hrefs[index] : nil
            if let href {
                out.raw("<a href=\"")
                out.escaped(href)
                out.raw("\">")
            }
            out.raw("<rect class=\"score")
            out.integer(index + 1)
            out.raw("\" fill=\"")
            out.raw(SVG.scoreColors[index])
            out.raw("\" x=\"")
            out.fixed(at, 2)
            out.raw("\" y=\"0\" width=\"")
            out.fixed(segment, 2)
            out.raw("\" height=\"")
            out.integer(height)
            out.raw("\"><title>Score ")
            out.integer(index + 1)
            out.raw(": ")
            out.integer(count)
            out.raw(" (")
            out.fixed(share * 100, 1)
            out.raw("%)</title></rect>")
            if href != nil { out.raw("</a>") }
            at += segment
        }
        out.raw("</svg>")
    }
}
