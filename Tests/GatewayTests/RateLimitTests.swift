import API
import Crypto
import Foundation
import GatewayApp
import HTTPServer
import Testing
import TestSupport

/// Rate limits count the right caller: verified credentials by themselves, everything else by client address.
@Suite struct RateLimitTests {
    @Test func randomTokensShareTheAddressBudgetAndRepeatedFailuresAreRefusedEarly() async throws {
        try await withGateway(configure: {
            $0.rateLimitBurst = 1000
            $0.rateLimitPerMinute = 1000
            // One failure back a minute: twenty requests on a loaded machine once took 48 s, long enough at five a
            // minute for a sixteenth lookup.
            $0.authFailuresPerMinute = 1
            $0.authFailureBurst = 5
        }) { app in
            var statuses: [Int] = []
            for index in 0..<20 {
                let response = try await httpRequest(port: app.port, "GET", "/v1/tickets", headers: [("Authorization", "Bearer random-\(index)")])
                statuses.append(response.status)
            }
            // Five failures are looked up (401); every later made-up token is refused before any lookup (429).
            #expect(statuses.prefix(5).allSatisfy { $0 == 401 }, "\(statuses)")
            #expect(statuses.dropFirst(5).allSatisfy { $0 == 429 }, "\(statuses)")
            let lookups = app.metrics.render().split(separator: "\n").filter { $0.hasPrefix("http_requests_total") && $0.contains("status=\"401\"") }
            #expect(lookups.count == 1 && lookups[0].hasSuffix(" 5"), "\(lookups)")
        }
    }

    @Test func signedWebhooksAreNotLimitedAndSignInsHaveTheirOwnBudgets() async throws {
        try await withGateway(configure: {
            $0.rateLimitBurst = 2
            $0.rateLimitPerMinute = 1
            $0.signInBurst = 4
            $0.signInPerMinute = 1
            $0.signInPerUserBurst = 2
            $0.signInPerUserPerMinute = 1
            $0.deskWebhookSecret = "hook-secret"
        }) { app in
            // Ten signed webhook deliveries from one address with a customer budget of 2: all accepted.
            for index in 0..<10 {
                let body = Array(#"{"eventType":"PING","eventId":"rl-\#(index)"}"#.utf8)
                let mac = HMAC<Insecure.SHA1>.authenticationCode(for: body, using: SymmetricKey(data: Array("hook-secret".utf8)))
                let signature = "sha1=" + mac.map { String(format: "%02x", $0) }.joined()
                let response = try await httpRequest(port: app.port, "POST", "/v1/webhooks/desk", headers: [("x-hub-signature", signature)], body: body)
                #expect(response.status == 200, "\(response.text)")
            }
            // Sign-ins: two failures per user id and address, then that pair is refused, even with the right token...
            func signIn(_ user: String, _ token: String, from source: String = "127.0.0.1") async throws -> Int {
                try await onBlockingThread {
                    let connection = try RawHTTPConnection(port: app.port, source: source)
                    let body = Array(#"{"userId":"\#(user)","accessToken":"\#(token)"}"#.utf8)
                    try connection.send(RawHTTPConnection.requestBytes("POST", "/v1/sessions", headers: [("Content-Type", "application/json")], body: body))
                    return try connection.readResponse()?.status ?? 0
                }
            }
            #expect(try await signIn("demo-customer", "wrong", from: "127.0.0.5") == 401)
            #expect(try await signIn("demo-customer", "wrong", from: "127.0.0.5") == 401)
            #expect(try await signIn("demo-customer", "demo-token", from: "127.0.0.5") == 429)
            // ...while the stranger's failures do not lock the user out from their own address, and correct
            // sign-ins are not counted against the user at all.
            #expect(try await signIn("demo-customer", "demo-token") == 201)
            #expect(try await signIn("demo-customer", "demo-token") == 201)
            #expect(try await signIn("demo-customer", "demo-token") == 201)
            // The address budget (4 sign-ins per address) is now spent.
            #expect(try await signIn("demo-customer-2", "demo-token-2") == 201)
            #expect(try await signIn("demo-customer-2", "demo-token-2") == 429)
        }
    }

    /// Every admitted answer tells the caller where it stands, in the three single fields and the combined one
    /// (written digit by digit: the remaining budget crosses from four digits to three here).
    @Test func admittedAnswersCarryTheirStandingInEveryRateLimitField() async throws {
        try await withGateway(configure: {
            $0.rateLimitBurst = 1000
            $0.rateLimitPerMinute = 60
        }) { app in
            let customer = try await Customer.signIn(app)
            var remainders: [Int] = []
            for _ in 0..<3 {
                let response = try await customer.send("GET", "/v1/tickets/open-count")
                #expect(response.status == 200)
                let limit = response.header("RateLimit-Limit") ?? "", remaining = response.header("RateLimit-Remaining") ?? ""
                let reset = response.header("RateLimit-Reset") ?? ""
                #expect(limit == "1000")
                #expect(Int(reset).map { $0 >= 0 && $0 <= 1000 } == true, "\(reset)")
                #expect(response.header("RateLimit") == "limit=\(limit), remaining=\(remaining), reset=\(reset)")
                remainders.append(Int(remaining) ?? -1)
            }
            // Sign-ins have a bucket of their own: the reads start from the whole budget, a token each (the refill,
            // one a second, may put one back).
            #expect(remainders[0] == 999, "\(remainders)")
            #expect(remainders[2] <= remainders[0] && remainders[2] >= 997, "\(remainders)")
        }
    }

    @Test func theClientAddressComesFromForwardedHeadersOnlyBehindTrustedProxies() {
        func request(peer: String, _ headers: [(String, String)]) -> HTTPRequest {
            var request = HTTPRequest(method: "GET", path: "/v1/tickets", headers: headers)
            request.remoteAddress = peer
            return request
        }
        let resolver = ClientAddressResolver(trustedProxies: [CIDR("10.0.0.0/8")!, CIDR("fd00::/8")!])
        #expect(resolver.client(request(peer: "203.0.113.9", [("X-Forwarded-For", "1.2.3.4")])) == "203.0.113.9")
        #expect(resolver.client(request(peer: "10.1.2.3", [("X-Forwarded-For", "1.2.3.4")])) == "1.2.3.4")
        // A client cannot choose its address: the rightmost untrusted hop wins.
        #expect(resolver.client(request(peer: "10.1.2.3", [("X-Forwarded-For", "9.9.9.9, 5.6.7.8, 10.0.0.7")])) == "5.6.7.8")
        #expect(resolver.client(request(peer: "fd00::1", [("Forwarded", #"for="[2001:db8::7]:443";proto=https"#)])) == "2001:db8::7")
        #expect(resolver.client(request(peer: "10.1.2.3", [("Forwarded", "for=198.51.100.4:5000")])) == "198.51.100.4")
        #expect(resolver.client(request(peer: "10.1.2.3", [("X-Forwarded-For", "not-an-address")])) == "10.1.2.3")
        // List items between spaces and tabs (RFC 9110's OWS), quoted or not.
        #expect(resolver.client(request(peer: "10.1.2.3", [("X-Forwarded-For", "9.9.9.9,\t5.6.7.8 ,\t10.0.0.7")])) == "5.6.7.8")
        #expect(resolver.client(request(peer: "10.1.2.3", [("Forwarded", "for=9.9.9.9,\tfor=\"5.6.7.8\"")])) == "5.6.7.8")
        #expect(resolver.scheme(request(peer: "10.1.2.3", [("X-Forwarded-Proto", "\tHTTPS , http")])) == "https")
        #expect(resolver.scheme(request(peer: "10.1.2.3", [("Forwarded", "for=1.1.1.1;\tproto=\"HTTPS\"")])) == "https")
        #expect(resolver.scheme(request(peer: "203.0.113.9", [("X-Forwarded-Proto", "https")])) == "http")
        // A proxy that adds a line of its own instead of appending: the client's line comes first and is not believed.
        #expect(resolver.client(request(peer: "10.1.2.3", [("X-Forwarded-For", "9.9.9.9"), ("X-Forwarded-For", "5.6.7.8")])) == "5.6.7.8")
        #expect(resolver.client(request(peer: "10.1.2.3", [("Forwarded", "for=9.9.9.9"), ("Forwarded", "for=5.6.7.8")])) == "5.6.7.8")
        #expect(CIDR("10.0.0.0/33") == nil)
        #expect(CIDR("garbage") == nil)
    }
}
