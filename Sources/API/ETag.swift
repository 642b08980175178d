public import HTTPServer
import Domain

/// Strong validators from the body bytes (FNV-style, 64 bit, eight bytes per step so large report bodies stay
/// cheap): identical bodies give identical tags on every instance.
public enum ETag {
    public static func of(_ body: [UInt8]) -> String {
        let prime: UInt64 = 0x0000_0100_0000_01b3
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325 ^ UInt64(body.count)
        body.withUnsafeBytes { raw in
            var offset = 0
            while offset + 8 <= raw.count {
                hash = (hash ^ UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))) &* prime
                hash ^= hash >> 29
                offset += 8
            }
            while offset < raw.count {
                hash = (hash ^ UInt64(raw[offset])) &* prime
                offset += 1
            }
        }
        return Codec.hex(hash, width: 16, prefix: "\"", suffix: "\"")
    }

    /// Whether `If-None-Match` names this tag (weak comparison, as RFC 9110 asks for this header).
    public static func matches(_ ifNoneMatch: String?, _ etag: String) -> Bool {
        guard let ifNoneMatch else { return false }
        if ifNoneMatch.trimmingCharacters(in: .whitespaces) == "*" { return true }
        let bare = etag.hasPrefix("W/") ? String(etag.dropFirst(2)) : etag
        for candidate in ifNoneMatch.split(separator: ",") {
            var tag = candidate.trimmingCharacters(in: .whitespaces)
            if tag.hasPrefix("W/") { tag = String(tag.dropFirst(2)) }
            if tag == bare { return true }
        }
        return false
    }

    /// Adds `ETag` to a 200 GET answer with a whole body, or turns it into 304 when the client already has it.
    public static func apply(to response: inout HTTPResponse, request: HTTPRequest) {
        // A streamed body is not known yet: it has no tag (and is never a 304).
        guard request.method == "GET" || request.method == "HEAD", response.status == 200, response.stream == nil else { return }
        let etag: String
        if let given = response.header("etag") {
            etag = given
        } else {
            etag = of(response.body)
            response.headers.append(("ETag", etag))
        }
        if matches(request.header("if-none-match"), etag) {
            response = HTTPResponse(status: 304, headers: response.headers.filter {
                let name = $0.name.lowercased()
                return name != "content-type" && name != "content-length"
            })
        }
    }
}
