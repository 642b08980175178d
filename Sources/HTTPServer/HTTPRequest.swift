/// One request as the server collected it: method, decoded path, query arguments and headers in arrival order,
/// and the whole body (bounded by the server's body limit).
public struct HTTPRequest: Sendable {
    public var method: String
    public var path: String
    /// Query arguments already percent-decoded, repeated keys kept in order.
    public var query: [(name: String, value: String)]
    /// Header names are lower-cased so lookups are case-insensitive; values are read when asked for.
    public var headers: HTTPHeaders {
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

    private static func bearerToken(in headers: HTTPHeaders) -> (String?, Int) {
        headers.withValue("authorization") { value -> (String?, Int) in
            guard value.count > 7 else { return (nil, 0) }
            // Bytes, not characters: this runs for every authenticated request.
            var start = 0
            for want in "bearer ".utf8 {
                let byte = value[start]
                if (byte >= 65 && byte <= 90 ? byte + 32 : byte) != want { return (nil, 0) }
                start += 1
            }
            var end = value.count
            while start < end, value[start] == UInt8(ascii: " ") { start += 1 }
            while start < end, value[end - 1] == UInt8(ascii: " ") { end -= 1 }
            guard start < end else { return (nil, 0) }
            return (String(decoding: UnsafeBufferPointer(rebasing: value[start..<end]), as: UTF8.self), value.count)
        } ?? (nil, 0)
    }

    /// The first value of a header, matched case-insensitively.
    public func header(_ name: String) -> String? {
        // Names are stored lowercased and callers mostly ask in lowercase: such a name is passed on as it is (a new
        // value of it would be retained and released, and every request looks up several headers).
        if name.hasASCIIUppercase { return headers.value(name.lowercased()) }
        return headers.value(name)
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
        let lowered = HTTPHeaders(headers)
        let (token, bytes) = Self.bearerToken(in: lowered)
        self.init(method: method, path: path, query: query, headers: lowered, bearerToken: token, authorizationBytes: bytes,
                  body: body, pathParameters: pathParameters, remoteAddress: remoteAddress)
    }

    /// The server's: its header block is lowercased as it is copied.
    init(method: String, path: String, query: [(name: String, value: String)], lowercasedHeaders headers: HTTPHeaders,
         remoteAddress: String?) {
        let (token, bytes) = Self.bearerToken(in: headers)
        self.init(method: method, path: path, query: query, headers: headers, bearerToken: token, authorizationBytes: bytes,
                  body: [], pathParameters: [:], remoteAddress: remoteAddress)
    }
}

extension String {
    /// Whether any byte is an ASCII capital, read from the string's contiguous bytes: walking `utf8` an index at a
    /// time cost more than the lookups it guards, and every request asks it of several header names.
    var hasASCIIUppercase: Bool {
        let first = UInt8(ascii: "A")
        return utf8.withContiguousStorageIfAvailable { $0.contains { $0 &- first < 26 } } ?? utf8.contains { $0 &- first < 26 }
    }
}
