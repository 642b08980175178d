public import JSON
public import HTTPServer

extension HTTPResponse {
    public static func json(_ value: JSONValue, status: Int = 200, headers: [(name: String, value: String)] = [],
                            contentType: String = "application/json") -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", contentType)] + headers, body: value.bytes())
    }

    public static func text(_ text: String, status: Int = 200, contentType: String = "text/plain; charset=utf-8") -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", contentType)], body: Array(text.utf8))
    }
}

extension APIError {
    /// The problem+json document for this error; `instance` is the request path, `requestId` ties it to the logs.
    public func response(instance: String, requestID: String) -> HTTPResponse {
        var members: [(String, JSONValue)] = [
            ("type", .string("urn:desk-gateway:problem:\(code)")),
            ("title", .string(title)),
            ("status", .integer(status)),
            ("detail", .string(detail)),
            ("code", .string(code)),
            ("instance", .string(instance)),
            ("requestId", .string(requestID)),
        ]
        for key in extensions.keys.sorted() { members.append((key, extensions[key]!)) }
        return .json(.object(members), status: status, headers: headers, contentType: "application/problem+json")
    }
}
