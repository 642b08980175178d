/// A complete response (the body is copied into libmicrohttpd when queued), or one whose body is streamed.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// A body sent as it is produced (chunked); `body` is then empty.
    public var stream: ResponseStream?

    public init(status: Int, headers: [(name: String, value: String)] = [], stream: ResponseStream) {
        self.status = status
        self.headers = headers
        self.body = []
        self.stream = stream
    }

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public init(status: Int, contentType: String, body: String) {
        self.init(status: status, headers: [("Content-Type", contentType)], body: Array(body.utf8))
    }

    public func header(_ name: String) -> String? {
        for index in headers.indices where HTTPResponse.sameName(headers[index].name, name) { return headers[index].value }
        return nil
    }

    /// ASCII case-insensitive comparison without allocating (header names are ASCII tokens).
    public static func sameName(_ a: String, _ b: String) -> Bool {
        // Most names compared differ in length (a native string knows its UTF-8 length without a scan).
        guard a.utf8.count == b.utf8.count else { return false }
        // Compared as contiguous bytes (native and small strings, so nearly always): the UTF-8 views' iterators
        // were most of this function's cost, and every answer asks for two of its headers by name.
        let contiguous = a.utf8.withContiguousStorageIfAvailable { left in
            b.utf8.withContiguousStorageIfAvailable { right in
                for index in 0..<left.count where left[index] != right[index] {
                    let x = left[index] | 0x20
                    if x != right[index] | 0x20 || x &- UInt8(ascii: "a") >= 26 { return false }
                }
                return true
            }
        }
        if let contiguous, let same = contiguous { return same }
        var left = a.utf8.makeIterator()
        var right = b.utf8.makeIterator()
        while true {
            switch (left.next(), right.next()) {
            case (nil, nil): return true
            case let (x?, y?):
                if x == y { continue }
                let lx = x >= 65 && x <= 90 ? x + 32 : x
                let ly = y >= 65 && y <= 90 ? y + 32 : y
                if lx != ly { return false }
            default: return false
            }
        }
    }

    /// ASCII case-insensitive prefix test; `prefix` must be lowercase.
    public static func hasPrefix(_ name: String, _ prefix: String) -> Bool {
        var left = name.utf8.makeIterator()
        for expected in prefix.utf8 {
            guard let x = left.next() else { return false }
            if (x >= 65 && x <= 90 ? x + 32 : x) != expected { return false }
        }
        return true
    }
}
