import API
import Testing

/// The body's tag: the same bytes give the same tag, any one byte changed gives another, whatever lane or tail of
/// the hash the byte falls in.
@Suite struct ETagTests {
    @Test func everyByteCountsAndEqualBodiesTagAlike() {
        for length in [0, 1, 7, 8, 31, 32, 33, 100, 1_000] {
            let body = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
            let tag = ETag.of(body)
            #expect(tag == ETag.of(Array(body)))
            #expect(tag.utf8.count == 18 && tag.hasPrefix("\"") && tag.hasSuffix("\""))
            #expect(tag.dropFirst().dropLast().allSatisfy { $0.isHexDigit })
            var tags: Set<String> = [tag]
            for index in 0..<length {
                var changed = body
                changed[index] ^= 0x01
                tags.insert(ETag.of(changed))
            }
            #expect(tags.count == length + 1)
            #expect(ETag.of(body + [0]) != tag)
        }
    }

    /// `If-None-Match` read as RFC 9110 lists it: items between optional spaces and tabs, weak or strong alike.
    @Test func ifNoneMatchListsAreReadWithTheirSpaces() {
        let tag = "\"abc\""
        for header in [tag, " \(tag) ", "\"x\", \(tag)", "\"x\",\t W/\(tag)", "*", " * "] { #expect(ETag.matches(header, tag), "\(header)") }
        for header in ["\"x\"", "\"abc", "", "**", "\u{A0}\(tag)"] { #expect(!ETag.matches(header, tag), "\(header)") }
        #expect(ETag.matches(tag, "W/\(tag)"))
        #expect(!ETag.matches(nil, tag))
    }
}
