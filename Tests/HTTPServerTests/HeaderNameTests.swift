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
}
