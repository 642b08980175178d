public import HTTPServer
import Domain

/// Strong validators from the body bytes (FNV-style, 64 bit, in four independent lanes of eight bytes so a large report
/// body is hashed at the memory's pace, not one multiplication after another): identical bodies give identical tags
/// on every instance.
public enum ETag {
    public static func of(_ body: [UInt8]) -> String {
        let prime: UInt64 = 0x0000_0100_0000_01b3
        let seed: UInt64 = 0xcbf2_9ce4_8422_2325 ^ UInt64(body.count)
        var lanes = (seed, seed ^ 0x9e37_79b9_7f4a_7c15, seed ^ 0xc2b2_ae3d_27d4_eb4f, seed ^ 0x1656_67b1_9e37_79f9)
        var hash: UInt64 = 0
        body.withUnsafeBytes { raw in
            @inline(__always) func step(_ lane: UInt64, _ offset: Int) -> UInt64 {
                let mixed = (lane ^ UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))) &* prime
                return mixed ^ (mixed >> 29)
            }
            var offset = 0
            while offset + 32 <= raw.count {
                lanes = (step(lanes.0, offset), step(lanes.1, offset + 8), step(lanes.2, offset + 16), step(lanes.3, offset + 24))
                offset += 32
            }
            while offset + 8 <= raw.count {
                lanes.0 = step(lanes.0, offset)
                offset += 8
            }
            hash = lanes.0 ^ ((lanes.1 << 17) | (lanes.1 >> 47)) ^ ((lanes.2 << 31) | (lanes.2 >> 33)) ^ ((lanes.3 << 47) | (lanes.3 >> 17))
            while offset < raw.count {
                hash = (hash ^ UInt64(raw[offset])) &* prime
                offset += 1
            }
        }
        hash = (hash ^ (hash >> 31)) &* prime
        return Codec.hex(hash ^ (hash >> 29), width: 16, prefix: "\"", suffix: "\"")
    }

    /// Whether `If-None-Match` names this tag (weak comparison, as RFC 9110 asks for this header).
    public static func matches(_ ifNoneMatch: String?, _ etag: String) -> Bool {
        guard let ifNoneMatch else { return false }
        if ifNoneMatch.trimmingOWS() == "*" { return true }
        let bare = etag.hasPrefix("W/") ? etag.dropFirst(2) : etag[...]
        for candidate in ifNoneMatch.split(separator: ",") {
            var tag = candidate.trimmingOWS()
            if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
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
