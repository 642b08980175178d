import API
import Foundation
import JSON
import GatewayApp
import Domain
import Store
import Testing
import TestSupport

/// Small, precise answers to hostile input: no 5xx, nothing larger than the request, nothing cut short.
@Suite struct BadInputTests {
    func raw(_ port: Int, _ request: String) async throws -> TestResponse? {
        try await onBlockingThread {
            let connection = try RawHTTPConnection(port: port)
            try connection.send(Array(request.utf8))
            return try connection.readResponse()
        }
    }

    @Test func aHugeBodyOfUnknownKeysGetsASmallAnswer() async throws {
        try await withGateway { app in
            var members: [String] = []
            var size = 2
            var index = 0
            while size < 979_000 {
                let member = "\"unknown_key_\(index)\":\(index)"
                members.append(member)
                size += member.utf8.count + 1
                index += 1
            }
            let body = "{" + members.joined(separator: ",") + "}"
            let response = try await httpRequest(port: app.port, "POST", "/v1/sessions", json: body)
            #expect(response.status == 422)
            let json = try #require(response.json)
            #expect((json["errors"] as? [Any])?.count == 20)
            #expect(json["errorCount"] as? Int == members.count + 2)   // + the two missing required fields
            #expect(response.body.count < 8_192, "\(response.body.count) bytes")
        }
    }

    /// A body's byte order mark and an integer past 64 bits are refused with what is wrong, not a generic message;
    /// a Desk document with a byte order mark is read.
    @Test func aByteOrderMarkAndAHugeIntegerAreNamed() async throws {
        try await withGateway { app in
            let marked = try await httpRequest(port: app.port, "POST", "/v1/sessions",
                                               json: "\u{FEFF}" + #"{"userId":"demo-customer","accessToken":"demo-token"}"#)
            #expect(marked.status == 400)
            #expect((marked.json?["detail"] as? String)?.contains("byte order mark") == true, "\(marked.text)")
            let customer = try await Customer.signIn(app)
            let huge = try await customer.send("POST", "/v1/tickets/1/feedback", #"{"messageId":99999999999999999999999,"score":5,"comment":null}"#)
            #expect(huge.status == 422)
            #expect(huge.json?["detail"] as? String == "messageId must be from 1 to 9223372036854775807.", "\(huge.text)")
        }
        #expect(try JSONParser.parse(Array("\u{FEFF}{\"id\":1}".utf8), repairingStrings: true) == .object([("id", .integer(1))]))
    }

    /// RFC 9110 §9.3.7: OPTIONS names what a path takes, and `OPTIONS *` what the server does; every `Allow` names
    /// OPTIONS with the rest. `*` is a target for OPTIONS alone (RFC 9112 §3.2.4).
    @Test func optionsNamesTheMethodsAPathTakes() async throws {
        try await withGateway { app in
            let tickets = try await httpRequest(port: app.port, "OPTIONS", "/v1/tickets")
            #expect(tickets.status == 204 && tickets.header("Allow") == "GET, HEAD, POST, OPTIONS", "\(tickets.status) \(tickets.text)")
            #expect(tickets.body.isEmpty)
            let refused = try await httpRequest(port: app.port, "DELETE", "/livez")
            #expect(refused.status == 405 && refused.header("Allow") == "GET, HEAD, OPTIONS", "\(refused.status)")
            #expect(refused.json?["detail"] as? String == "This path accepts GET, HEAD, OPTIONS.")
            let unknown = try await httpRequest(port: app.port, "OPTIONS", "/v1/nothing-here")
            #expect(unknown.status == 404)
            let server = try #require(try await raw(app.port, "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"))
            #expect(server.status == 204 && server.header("Allow") == "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT", "\(server.status) \(server.text)")
            let asteriskGet = try #require(try await raw(app.port, "GET * HTTP/1.1\r\nHost: a\r\n\r\n"))
            #expect(asteriskGet.status == 400 && asteriskGet.json?["code"] as? String == "malformed_request", "\(asteriskGet.text)")
            let metrics = try await httpRequest(port: app.port, "GET", "/metrics").text
            #expect(metrics.contains(#"http_requests_total{route="*",method="OPTIONS",status="204"} 1"#))
            #expect(metrics.contains(#"http_requests_total{route="/v1/tickets",method="OPTIONS",status="204"} 1"#))
        }
    }

    @Test func forgedCursorsAreInvalidQueriesNotServerErrors() async throws {
        try await withGateway { app in
            let customer = try await Customer.signIn(app)
            let key = try await APIKeyStore(database: app.database).create(name: "t", scopes: ["reports"]).key
            for payload in ["99999999999999999999:1", "-5:1", "9223372036854775807:1", "1000:0", "1000:-3", "1000", "a:b", "1000:1:2"] {
                let cursor = Codec.base64URL(Array(payload.utf8))
                let tickets = try await customer.send("GET", "/v1/tickets?cursor=\(cursor)")
                #expect(tickets.status == 400, "\(payload): \(tickets.text)")
                #expect(tickets.json?["code"] as? String == "invalid_query")
                let responses = try await httpRequest(port: app.port, "GET", "/v1/reports/csat/responses?cursor=\(cursor)",
                                                      headers: [("Authorization", "Bearer \(key)")])
                #expect(responses.status == 400, "\(payload): \(responses.text)")
                #expect(responses.json?["code"] as? String == "invalid_query")
            }
        }
    }

    @Test func nulBytesAndAmbiguousFramingAreRefused() async throws {
        try await withGateway { app in
            let cases = [
                "GET /livez%00x HTTP/1.1\r\nHost: a\r\n\r\n",
                "GET /livez?a=b%00c HTTP/1.1\r\nHost: a\r\n\r\n",
                "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n{}",
                "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n{}",
                // The Kelvin sign lowercases to "k" in Unicode; transfer codings compare in ASCII case only.
                "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chun\u{212A}ed\r\n\r\n0\r\n\r\n",
                // libmicrohttpd keeps spaces after a value and would wait for a body it cannot frame.
                "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked \r\n\r\n0\r\n\r\n",
                "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t\r\n\r\n0\r\n\r\n",
                // Raw NUL bytes, which libmicrohttpd's C strings would cut short into another valid value.
                "GET /livez\u{0}/x HTTP/1.1\r\nHost: a\r\n\r\n",
                "GET /livez\u{0}HTTP/1.1 HTTP/1.1\r\nHost: a\r\n\r\n",
                "GET /livez HTTP/1.1\r\nAuthorization: Bearer x\u{0}tail\r\nHost: a\r\n\r\n",
                "GET /livez HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer x\u{0}tail\r\n\r\n",
                "GET /livez HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer x\u{0}\u{0}t\r\n\r\n",
                "GET /livez HTTP/1.1\nHost: a\u{0}b\nX: y\n\n",
                "GET /livez HTTP/1.1\r\nCookie: session=abc\u{0}tail\r\nHost: a\r\n\r\n",
                // An obsolete folded line (libmicrohttpd would glue it onto the header name).
                "GET /livez HTTP/1.1\r\nHost: a\r\nX-A: b\r\n  folded\r\nX-B: c\r\n\r\n",
                // RFC 9112 §5.1: whitespace before the colon; a front proxy would frame these bodies, libmicrohttpd not.
                "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding : chunked\r\n\r\n5\r\nGET /\r\n0\r\n\r\n",
                "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\nGET /",
                "GET /livez HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n",
                // RFC 9112 §3.2: HTTP/1.1 needs exactly one Host.
                "GET /livez HTTP/1.1\r\nX-A: b\r\n\r\n",
                "GET /livez HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
                // A method that is not a token, or one long enough to be only noise.
                "GE(T /livez HTTP/1.1\r\nHost: a\r\n\r\n",
                "\(String(repeating: "M", count: 33)) /livez HTTP/1.1\r\nHost: a\r\n\r\n",
            ]
            for request in cases {
                let response = try await raw(app.port, request)
                #expect(response?.status == 400, "\(request.debugDescription): \(response?.text ?? "no answer")")
                #expect(response?.json?["code"] as? String == "malformed_request", "\(request.debugDescription)")
                #expect(response?.header("Connection")?.lowercased() == "close", "\(request.debugDescription)")
            }
            // The same requests without the trouble are fine, including bare LF line ends, empty and padded values, a body.
            for request in ["GET /livez HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
                            "GET /livez?a=b HTTP/1.1\nHost: a\nX-Empty:\nConnection: close\n\n",
                            "GET /livez HTTP/1.0\r\n\r\n",
                            "GET /livez HTTP/1.1\r\nHost: a\r\nX-Pad:   b  \r\nX-Empty:\r\nConnection: close\r\n\r\n",
                            "GET /livez HTTP/1.1\r\nHost: a\r\nX-Tabs: abcdefg\thijklmnop\tqrstuvwxyz \u{E9}\u{7E}\r\nConnection: close\r\n\r\n",
                            "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
                            "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\ncontent-LENGTH: 2\r\nConnection: close\r\n\r\n{}",
                            "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:  ChUnKeD\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n"] {
                let response = try await raw(app.port, request)
                #expect(response?.status != nil && response?.status != 400, "\(request.debugDescription): \(response?.text ?? "no answer")")
            }
        }
    }

    /// The header block a request may carry (docs/limits.md): 15,000 bytes are served, far more is 431, never routed.
    @Test func headerBlocksOf15000BytesAreServedAndFarLargerOnesAre431() async throws {
        try await withGateway { app in
            let cookie = "GET /livez HTTP/1.1\r\nHost: a\r\nConnection: close\r\nCookie: "
            let served = try await raw(app.port, cookie + String(repeating: "c", count: 15_000) + "\r\n\r\n")
            #expect(served?.status == 200, "\(served?.text ?? "no answer")")
            let refused = try await raw(app.port, cookie + String(repeating: "c", count: 20_000) + "\r\n\r\n")
            #expect(refused?.status == 431, "\(refused?.text ?? "no answer")")
        }
    }

    /// What libmicrohttpd answers before routing (a head over its memory, a chunked body it cannot read) is the
    /// gateway's problem+json too, not its HTML page; a query it could not hold is refused before it tries.
    @Test func answersMadeBeforeRoutingAreProblems() async throws {
        try await withGateway { app in
            let chunked = "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            let manyHeaders = (0..<3_000).map { (index: Int) -> String in "X\(index): y\r\n" }.joined()
            let cases: [(String, Int, Problem)] = [
                ("GET /livez HTTP/1.1\r\nHost: a\r\nCookie: " + String(repeating: "c", count: 40_000) + "\r\n\r\n", 431, .headersTooLarge),
                ("GET /livez HTTP/1.1\r\nHost: a\r\n" + manyHeaders + "\r\n", 431, .headersTooLarge),
                ("GET /livez?" + String(repeating: "a", count: 40_000) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414, .uriTooLong),
                (chunked + "zz\r\n{}\r\n0\r\n\r\n", 400, .malformedRequest),
                (chunked + "2\r\n{}\r\n0\r\nNoColon\r\n\r\n", 400, .malformedRequest),
                ("GET /livez HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", 400, .malformedRequest),
                (chunked + "fffffffffffffffffff\r\n{}\r\n0\r\n\r\n", 413, .payloadTooLarge),
                ("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505, .httpVersionNotSupported),
                ("GET /livez HTTP/3.0\r\nHost: a\r\n\r\n", 505, .httpVersionNotSupported),
            ]
            for (request, status, problem) in cases {
                let answer = try #require(try await raw(app.port, request))
                #expect(answer.status == status, "\(answer.text)")
                #expect(answer.header("content-type") == "application/problem+json", "\(answer.text)")
                #expect(answer.json?["code"] as? String == problem.rawValue, "\(answer.text)")
                #expect(answer.json?["title"] as? String == problem.title, "\(answer.text)")
                #expect(answer.json?["status"] as? Int == status)
                #expect((answer.json?["detail"] as? String)?.isEmpty == false)
            }
            // Up to 128 query arguments are read; more are refused before libmicrohttpd keeps a record of each (past
            // about 250 it ran out of memory and closed the connection without an answer).
            func query(_ count: Int) -> String { (0..<count).map { (index: Int) -> String in "a=\(index)" }.joined(separator: "&") }
            #expect(try await raw(app.port, "GET /livez?\(query(128)) HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")?.status == 200)
            for count in [129, 440, 1_500] {
                let answer = try #require(try await raw(app.port, "GET /livez?\(query(count)) HTTP/1.1\r\nHost: a\r\n\r\n"))
                #expect(answer.status == 400 && answer.json?["code"] as? String == "malformed_request", "\(count): \(answer.text)")
                #expect((answer.json?["detail"] as? String)?.contains("more than 128 arguments") == true, "\(answer.text)")
            }
            // The connection's next request, and a new one, are served as usual.
            #expect(try await raw(app.port, "GET /livez HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")?.status == 200)
        }
    }

    /// RFC 9112 §2.2 and §2.3: a bare CR, DEL or another control character in a header value is refused; the Host
    /// rule holds for every 1.x above 1.0; another major version is 505; each refusal names its real reason; an
    /// absolute-form target is routed by its path.
    @Test func controlCharactersVersionsAndTargetsFollowRFC9112() async throws {
        try await withGateway { app in
            let refused: [(String, String)] = [
                ("GET /livez HTTP/1.1\r\nHost: a\r\nX-A: b\rGET /v1/tickets HTTP/1.1\r\n\r\n", "control character"),
                ("GET /livez HTTP/1.1\r\nHost: a\u{7F}b\r\n\r\n", "control character"),
                ("GET /livez HTTP/1.1\r\nHost: a\rb\r\n\r\n", "control character"),
                ("GET /livez HTTP/1.1\r\nHost: a\r\nX-A: b\u{1B}c\r\n\r\n", "control character"),
                // Long values are scanned eight bytes at a time: a control character in the words and in the tail.
                ("GET /livez HTTP/1.1\r\nHost: a\r\nX-Long: abcdefghijklmnop\u{7F}qrstuvwxyz0123456789\r\n\r\n", "control character"),
                ("GET /livez HTTP/1.1\r\nHost: a\r\nX-Long: abcdefgh\u{01}ijklmnopqrstuvwxyz\r\n\r\n", "control character"),
                ("GET /livez HTTP/1.1\r\nHost: a\r\nX-Long: abcdefghijklmnopqrstuvwx\u{1F}yz\r\n\r\n", "control character"),
                ("GET /livez HTTP/1.2\r\nHost: a\r\nHost: b\r\n\r\n", "more than once"),
                ("GET /livez HTTP/1.2\r\nX-A: b\r\n\r\n", "Host is required"),
                ("GET /livez HTTP/1.1\r\nHost: a\r\nX-A: b\r\n  folded\r\nX-B: c\r\n\r\n", "folded"),
                ("GET /livez HTTP/1.1\r\nAuthorization: Bearer x\u{0}tail\r\nHost: a\r\n\r\n", "NUL byte"),
                ("GET /livez\u{0}/x HTTP/1.1\r\nHost: a\r\n\r\n", "target holds a NUL byte"),
                ("GET /livez HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n", "has no name"),
                ("GET v1/tickets HTTP/1.1\r\nHost: a\r\n\r\n", "beginning with '/'"),
                ("GET livez/ HTTP/1.1\r\nHost: a\r\n\r\n", "beginning with '/'"),
            ]
            for (request, reason) in refused {
                let response = try await raw(app.port, request)
                #expect(response?.status == 400, "\(request.debugDescription): \(response?.text ?? "no answer")")
                #expect(response?.json?["detail"] as? String ?? "" != "" && (response?.text.contains(reason) ?? false),
                        "\(request.debugDescription): \(response?.text ?? "no answer")")
            }
            for version in ["HTTP/2.0", "HTTP/3.0"] {
                let response = try await raw(app.port, "GET /livez \(version)\r\nHost: a\r\n\r\n")
                #expect(response == nil || response?.status == 505, "\(version): \(response?.status ?? 0)")
            }
            for request in ["GET http://gateway.example/livez HTTP/1.1\r\nHost: gateway.example\r\nConnection: close\r\n\r\n",
                            "GET /livez HTTP/1.2\r\nHost: a\r\nConnection: close\r\n\r\n"] {
                let response = try await raw(app.port, request)
                #expect(response?.status == 200, "\(request.debugDescription): \(response?.text ?? "no answer")")
            }
        }
    }

    /// libmicrohttpd 0.9.75 would answer these lengths itself, with its status line and headers written twice: the
    /// gateway answers them instead, once, as a problem, and nothing after the headers is read as a request.
    @Test func unparsableContentLengthsGetOneWellFormedAnswer() async throws {
        try await withGateway { app in
            let port = app.port
            for (length, status) in [("-1", 400), ("abc", 400), ("5, 5", 400), ("+5", 400), ("0x10", 400), ("", 400),
                                     ("99999999999999999999999", 413), ("1000000000000000000", 413)] {
                let request = "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nContent-Length: \(length)\r\n\r\nGET /livez HTTP/1.1\r\nHost: a\r\n\r\n"
                let (response, rest) = try await onBlockingThread { () -> (TestResponse?, Bool) in
                    let connection = try RawHTTPConnection(port: port)
                    try connection.send(Array(request.utf8))
                    let response = try connection.readResponse()
                    return (response, connection.isClosedByPeer())
                }
                #expect(response?.status == status, "\(length): \(response?.text ?? "no answer")")
                #expect(response?.header("Content-Type") == "application/problem+json", "\(length)")
                #expect(response?.json?["code"] as? String == (status == 400 ? "malformed_request" : "payload_too_large"), "\(length)")
                #expect(response?.headers.filter { $0.name.lowercased() == "date" }.count == 1, "\(length)")
                #expect(response?.header("Connection")?.lowercased() == "close", "\(length)")
                // Nothing follows the one answer: no second head, no answer to the smuggled GET.
                #expect(rest, "\(length): more bytes after the answer")
            }
            // A plain length still frames the body.
            let fine = try await raw(port, "POST /v1/sessions HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            #expect(fine?.status == 422, "\(fine?.text ?? "no answer")")
        }
    }

    /// Every label value comes from a closed set: thousands of made-up methods add no series and little memory.
    /// Methods are case-sensitive: `post` is not POST. Taken as POST it once reached the sign-in route past the
    /// limits keyed on the method, so credentials could be guessed without the sign-in and failed-authentication
    /// limits ever answering 429.
    @Test func aMethodInSmallLettersIsAnotherMethod() async throws {
        try await withGateway(configure: { $0.signInPerMinute = 3; $0.signInBurst = 3 }) { app in
            var statuses: [Int] = []
            for index in 0..<6 {
                let body = #"{"userId":"guess-\#(index)","accessToken":"wrong"}"#
                let answer = try #require(try await raw(app.port, "post /v1/sessions HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                                                      + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body))
                statuses.append(answer.status)
                #expect(answer.header("allow") == "POST, OPTIONS", "\(answer.text)")
            }
            #expect(statuses == Array(repeating: 405, count: 6), "\(statuses)")
            let get = try #require(try await raw(app.port, "get /livez HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"))
            #expect(get.status == 405 && get.header("allow") == "GET, HEAD, OPTIONS" && get.json?["code"] as? String == "method_not_allowed", "\(get.text)")
        }
    }

    /// Empty segments are dropped before any step reads the path: `/v1/sessions/` is a sign-in the sign-in limit
    /// counts, `//v1/tickets` a read the rate limit counts, as the router serves both.
    @Test func aPathWithEmptySegmentsMeetsTheLimitsOfItsRoute() async throws {
        try await withGateway(configure: { $0.signInPerMinute = 1; $0.signInBurst = 3; $0.rateLimitPerMinute = 1; $0.rateLimitBurst = 5 }) { app in
            var signIns: [Int] = []
            for (index, path) in ["/v1/sessions/", "//v1/sessions", "/v1//sessions", "/v1/sessions//", "/v1/sessions/", "//v1/sessions"].enumerated() {
                let answer = try await httpRequest(port: app.port, "POST", path, json: #"{"userId":"guess-\#(index)","accessToken":"wrong"}"#)
                signIns.append(answer.status)
            }
            #expect(signIns.prefix(3).allSatisfy { $0 == 401 } && signIns.dropFirst(3).allSatisfy { $0 == 429 }, "\(signIns)")
            var reads: [Int] = []
            for path in ["//v1/tickets", "/v1//tickets/", "//v1//tickets//", "//v1/tickets", "/v1/tickets/", "//v1/tickets", "//v1/tickets"] {
                let answer = try await httpRequest(port: app.port, "GET", path)
                reads.append(answer.status)
                #expect(answer.json?["instance"] as? String ?? "/v1/tickets" == "/v1/tickets", "\(answer.text)")
            }
            #expect(reads.contains(429), "\(reads)")
        }
    }

    @Test func madeUpMethodsAddNoMetricSeries() async throws {
        try await withGateway { app in
            let port = app.port
            let before = try await httpRequest(port: port, "GET", "/metrics").text
            let rssBefore = residentBytes()
            let statuses = try await onBlockingThread { () -> [Int: Int] in
                var statuses: [Int: Int] = [:]
                let connection = try RawHTTPConnection(port: port)
                for index in 0..<3000 {
                    // Valid tokens, each new: 405 on one kept-alive connection.
                    let method = "M\(index)" + String(repeating: "x", count: index % 20)
                    try connection.send(Array("\(method) /livez HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
                    let response = try connection.readResponse()
                    statuses[response?.status ?? 0, default: 0] += 1
                }
                for index in 0..<200 {
                    // Over-long methods: 400 and the connection closed.
                    let refused = try RawHTTPConnection(port: port)
                    try refused.send(Array("M\(index)\(String(repeating: "a", count: 3000)) /livez HTTP/1.1\r\nHost: a\r\n\r\n".utf8))
                    statuses[try refused.readResponse()?.status ?? 0, default: 0] += 1
                }
                return statuses
            }
            #expect(statuses == [405: 3000, 400: 200], "\(statuses)")
            let after = try await httpRequest(port: port, "GET", "/metrics").text
            func series(_ text: String) -> Int { text.split(separator: "\n").filter { $0.hasPrefix("http_requests_total{") }.count }
            // At most the two new series: OTHER 405 and the malformed 400.
            #expect(series(after) - series(before) <= 3, "\(series(before)) → \(series(after))")
            #expect(!after.contains("M1x"))
            #expect(after.contains(#"method="OTHER""#))
            #expect(after.utf8.count < 64 * 1024, "\(after.utf8.count) bytes")
            // The whole test process (other suites run alongside): a loose bound; the series count above is the check.
            #expect(residentBytes() - rssBefore < 128 << 20, "RSS grew \((residentBytes() - rssBefore) >> 20) MB")
            let unknown = try await httpRequest(port: port, "FOO", "/v1/tickets")
            #expect(unknown.status == 405 && unknown.header("Allow")?.contains("GET") == true)
        }
    }
}
