import Testing
import HTTPServer

/// Header names compare in ASCII case only: letters match across case, nothing else does.
@Suite struct HeaderNameTests {
    @Test func namesMatchAcrossASCIICaseOnly() {
        for (a, b) in [("ETag", "etag"), ("X-Cache", "x-CACHE"), ("RateLimit-Remaining", "ratelimit-remaining"), ("", "")] {
            #expect(HTTPResponse.sameName(a, b), "\(a) \(b)")
        }
        // Same length, differing in a byte that is not a letter's case: `[` and `{` differ only in 0x20, as do
        // é and É in their second UTF-8 byte.
        for (a, b) in [("ETag", "ETah"), ("a[", "a{"), ("é", "É"), ("x-cache", "x-cach"), ("@", "`")] {
            #expect(!HTTPResponse.sameName(a, b), "\(a) \(b)")
        }
        let response = HTTPResponse(status: 200, headers: [("Content-Type", "text/plain"), ("ETag", "\"1\""), ("X-Cache", "hit")])
        #expect(response.header("etag") == "\"1\"")
        #expect(response.header("X-CACHE") == "hit")
        #expect(response.header("x-cached") == nil)
    }

    @Test func aHeaderBlockKeepsItsFieldsInOrderAndReadsThemByLowercasedName() {
        let block = HTTPHeaders([("Content-Type", "text/plain"), ("X-Twice", "a"), ("X-EMPTY", ""), ("x-twice", "b"),
                                 ("X-Long", String(repeating: "é", count: 40))])
        #expect(block.count == 5)
        #expect(block.map(\.name) == ["content-type", "x-twice", "x-empty", "x-twice", "x-long"])
        #expect(block[1].value == "a" && block[2].value == "" && block[4].value == String(repeating: "é", count: 40))
        #expect(block.value("x-twice") == "a")
        #expect(block.values("x-twice") == ["a", "b"])
        #expect(block.value("x-empty") == "")
        #expect(block.value("x-missing") == nil && block.values("x-missing").isEmpty)
        #expect(block.value("x-twic") == nil && block.value("x-twice-") == nil)
        #expect(block.withValue("content-type") { $0.count } == 10)
        let empty: HTTPHeaders = []
        #expect(empty.isEmpty && empty.value("x") == nil)
        var request = HTTPRequest(method: "GET", path: "/", headers: [("AUTHORIZATION", "Bearer abc"), ("Host", "h")])
        #expect(request.bearerToken == "abc" && request.authorizationBytes == 10 && request.header("HOST") == "h")
        request.headers = [("authorization", "Basic abc")]
        #expect(request.bearerToken == nil && request.authorizationBytes == 0)
    }
}
