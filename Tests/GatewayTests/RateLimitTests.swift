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
            $0.authFailuresPerMinute = 5
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
            // Sign-ins: two per user id, then that user is refused while another user can still sign in.
            func signIn(_ user: String, _ token: String) async throws -> Int {
                try await httpRequest(port: app.port, "POST", "/v1/sessions", json: #"{"userId":"\#(user)","accessToken":"\#(token)"}"#).status
            }
            #expect(try await signIn("demo-customer", "demo-token") == 201)
            #expect(try await signIn("demo-customer", "demo-token") == 201)
            #expect(try await signIn("demo-customer", "demo-token") == 429)
            #expect(try await signIn("demo-customer-2", "demo-token-2") == 201)
            // The address budget (4 attempts, the refused one included) is now spent as well.
            #expect(try await signIn("demo-customer-2", "demo-token-2") == 429)
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
        #expect(CIDR("10.0.0.0/33") == nil)
        #expect(CIDR("garbage") == nil)
    }
}
