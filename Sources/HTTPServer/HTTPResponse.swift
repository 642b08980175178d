/// A complete response; the body is copied into libmicrohttpd when queued.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public init(status: Int, contentType: String, body: String) {
        self.init(status: status, headers: [("Content-Type", contentType)], body: Array(body.utf8))
    }

    public func header(_ name: String) -> String? {
        let key = name.lowercased()
        for header in headers where header.name.lowercased() == key { return header.value }
        return nil
    }

    public mutating func setHeader(_ name: String, _ value: String) {
        let key = name.lowercased()
        headers.removeAll { $0.name.lowercased() == key }
        headers.append((name, value))
    }
}
