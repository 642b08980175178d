/// W3C Trace Context (`traceparent`, https://www.w3.org/TR/trace-context/): the trace a request belongs to, taken
/// from the caller's header or started here, and the span of this hop. The task handling a request carries it
/// (`TraceContext.current`), so the Desk client sends it on every call made for that request and the logs name it.
public struct TraceContext: Sendable, Equatable {
    /// 32 lowercase hex digits, not all zero.
    public let traceID: String
    /// 16 lowercase hex digits, not all zero: this hop's span.
    public let spanID: String
    /// The caller's span, when the trace came with the request.
    public let parentSpanID: String?
    public let sampled: Bool
    /// The caller's `tracestate`, passed on unchanged.
    public let state: String?

    @TaskLocal public static var current: TraceContext?

    /// The caller's trace with a new span of ours, or a new trace when the header is absent or invalid.
    public static func incoming(traceparent: String?, tracestate: String? = nil) -> TraceContext {
        if let traceparent, let parsed = parse(traceparent) {
            return TraceContext(traceID: parsed.trace, spanID: randomHex(8), parentSpanID: parsed.span, sampled: parsed.sampled,
                                state: tracestate.flatMap { $0.utf8.count <= 512 ? $0 : nil })
        }
        return TraceContext(traceID: randomHex(16), spanID: randomHex(8), parentSpanID: nil, sampled: true, state: nil)
    }

    /// A span for a call made within this one (a Desk request), in the same trace.
    public func child() -> TraceContext {
        TraceContext(traceID: traceID, spanID: Self.randomHex(8), parentSpanID: spanID, sampled: sampled, state: state)
    }

    /// The header value naming this span as the parent of the next hop.
    public var traceparent: String { "00-\(traceID)-\(spanID)-\(sampled ? "01" : "00")" }

    /// `version-traceid-parentid-flags`; version ff and all-zero ids are invalid, a higher version may carry more fields.
    static func parse(_ header: String) -> (trace: String, span: String, sampled: Bool)? {
        let parts = header.trimmingOWS().split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count >= 4, parts[0].count == 2, isHex(parts[0]), parts[0] != "ff", parts[0] == "00" ? parts.count == 4 : true,
              parts[1].count == 32, isHex(parts[1]), parts[1] != String(repeating: "0", count: 32),
              parts[2].count == 16, isHex(parts[2]), parts[2] != String(repeating: "0", count: 16),
              parts[3].count == 2, isHex(parts[3]), let flags = UInt8(parts[3], radix: 16) else { return nil }
        return (String(parts[1]), String(parts[2]), flags & 1 == 1)
    }

    static func isHex(_ text: Substring) -> Bool { text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) } }

    /// `bytes` (a multiple of 8) random bytes in lowercase hex.
    static func randomHex(_ bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        var out = ""
        for _ in 0..<(bytes + 7) / 8 { out = Codec.hex(generator.next() as UInt64, width: 16, prefix: out) }
        return out
    }
}
