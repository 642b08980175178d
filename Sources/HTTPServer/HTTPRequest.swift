/// One request as the server collected it: method, decoded path, query arguments and headers in arrival order,
/// and the whole body (bounded by the server's body limit).
public struct HTTPRequest: Sendable {
    public var method: String
    public var path: String
    /// Query arguments already percent-decoded, repeated keys kept in order.
    public var query: [(name: String, value: String)]
    /// Header names are lower-cased so lookups are case-insensitive.
    public var headers: [(name: String, value: String)] {
        didSet { (bearerToken, authorizationBytes) = Self.bearerToken(in: headers) }
    }
    /// The token of `Authorization: Bearer <token>` (scheme case-insensitive, spaces around the token dropped), cut
    /// once here: the admission step and the authentication of the same request both need it.
    public private(set) var bearerToken: String?
    /// The length in bytes of the whole `Authorization` value the token was cut from (0 without a token), so a
    /// limit on it needs no second look-up.
    public private(set) var authorizationBytes: Int
    public var body: [UInt8]
    /// Filled by the router with the values of `{name}` segments.
    public var pathParameters: PathParameters
    /// The peer's IP address (the proxy's, behind one).
    public var remoteAddress: String?

    private static func bearerToken(in headers: [(name: String, value: String)]) -> (String?, Int) {
        guard let header = headers.first(where: { $0.name == "authorization" })?.value else { return (nil, 0) }
        let utf8 = header.utf8
        guard utf8.count > 7 else { return (nil, 0) }
        // Bytes, not characters: this runs for every authenticated request.
        var start = utf8.startIndex
        for want in "bearer ".utf8 {
            let byte = utf8[start]
            if (byte >= 65 && byte <= 90 ? byte + 32 : byte) != want { return (nil, 0) }
            start = utf8.index(after: start)
        }
        var end = utf8.endIndex
        while start < end, utf8[start] == UInt8(ascii: " ") { start = utf8.index(after: start) }
        while start < end, utf8[utf8.index(before: end)] == UInt8(ascii: " ") { end = utf8.index(before: end) }
        return start == end ? (nil, 0) : (String(Substring(utf8[start..<end])), utf8.count)
    }

    /// The first value of a header, matched case-insensitively.
    public func header(_ name: String) -> String? {
        // Names are stored lowercased and callers mostly ask in lowercase: lowercasing is the exception (every
        // request looks up several headers).
        let key = name.hasASCIIUppercase ? name.lowercased() : name
        for header in headers where header.name == key { return header.value }
        return nil
    }

    public func queryValue(_ name: String) -> String? {
        for item in query where item.name == name { return item.value }
        return nil
    }

    public func queryValues(_ name: String) -> [String] {
        query.compactMap { $0.name == name ? $0.value : nil }
    }
}

extension HTTPRequest {
    // Declared here, not in the type, so that the memberwise initializer exists: this one ends in it. Setting the
    // properties one by one left the request (over a hundred bytes) in memory, and the optimizer then copied it out
    // and released the original, every string and array of it once more on every request.
    public init(method: String, path: String, query: [(name: String, value: String)] = [],
                headers: [(name: String, value: String)] = [], body: [UInt8] = [],
                pathParameters: PathParameters = [:], remoteAddress: String? = nil) {
        // The server hands names over lowercased already: then the array is kept as it is, not mapped anew.
        let lowered = headers.indices.contains(where: { headers[$0].name.hasASCIIUppercase })
            ? headers.map { $0.name.hasASCIIUppercase ? ($0.name.lowercased(), $0.value) : $0 } : headers
        let (token, bytes) = Self.bearerToken(in: lowered)
        self.init(method: method, path: path, query: query, headers: lowered, bearerToken: token, authorizationBytes: bytes,
                  body: body, pathParameters: pathParameters, remoteAddress: remoteAddress)
    }

    /// The server's: its collector lowercases header names as it copies them, so they are not scanned again.
    init(method: String, path: String, query: [(name: String, value: String)], lowercasedHeaders headers: [(name: String, value: String)],
         remoteAddress: String?) {
        let (token, bytes) = Self.bearerToken(in: headers)
        self.init(method: method, path: path, query: query, headers: headers, bearerToken: token, authorizationBytes: bytes,
                  body: [], pathParameters: [:], remoteAddress: remoteAddress)
    }
}

extension String {
    /// Whether any byte is an ASCII capital (`hasASCIILowercase`: a small letter), read from the string's contiguous
    /// bytes: walking `utf8` an index at a time cost more than the lookups it guards, and every request asks it of
    /// several header names and of its method.
    var hasASCIIUppercase: Bool { hasASCIILetter(from: UInt8(ascii: "A")) }
    var hasASCIILowercase: Bool { hasASCIILetter(from: UInt8(ascii: "a")) }

    private func hasASCIILetter(from first: UInt8) -> Bool {
        utf8.withContiguousStorageIfAvailable { $0.contains { $0 &- first < 26 } } ?? utf8.contains { $0 &- first < 26 }
    }
}
