import API
import CurlHTTP
import Foundation
import GatewayApp
import Testing
import TestSupport

/// Link previews of pages that never end, are huge, stall or fail: bounded memory and time, clear problems, and the
/// rest of the gateway answering meanwhile.
@Suite struct HostilePreviewTests {
    func preview(_ customer: Customer, _ url: String) async throws -> TestResponse {
        try await customer.send("POST", "/v1/link-previews", #"{"url":"\#(url)"}"#)
    }

    @Test func hugeEndlessAndStalledPagesNeitherHangNorBloat() async throws {
        let pages = try HostilePageServer()
        defer { pages.stop() }
        // Under a sanitizer (make sanitize) everything is slower and freed memory is held in quarantine: twice the bounds.
        let factor = ProcessInfo.processInfo.environment["DG_SANITIZER"] == nil ? 1 : 2
        // The stalled page holds its fetch for the whole timeout: long enough that /readyz answering before it ends
        // shows it was not queued behind the previews, even when the rest of the suite competes for the two cores.
        let stallTimeout = Duration.seconds(6 * factor)
        try await withGateway(configure: {
            $0.linkPreviewAllowPrivate = true
            $0.linkPreviewTimeoutMilliseconds = 6000 * factor
            $0.linkPreviewConcurrency = 8
        }) { app in
            let customer = try await Customer.signIn(app)
            let base = "http://127.0.0.1:\(pages.port)"
            let before = residentBytes()
            let clock = ContinuousClock()
            let started = clock.now
            // Four 2 GB pages at once, one that never ends, one that stalls; /readyz must keep answering meanwhile.
            async let huge = withThrowingTaskGroup(of: TestResponse.self) { group in
                for _ in 0..<4 { group.addTask { try await preview(customer, base + "/huge") } }
                return try await group.reduce(into: [TestResponse]()) { $0.append($1) }
            }
            async let endless = preview(customer, base + "/endless")
            async let stalled = { () async throws -> (TestResponse, ContinuousClock.Instant) in
                let response = try await preview(customer, base + "/stall")
                return (response, clock.now)
            }()
            var readyLatencies: [Duration] = []
            var readyAnswered: [ContinuousClock.Instant] = []
            for _ in 0..<10 {
                let start = clock.now
                let ready = try await httpRequest(port: app.port, "GET", "/readyz")
                readyAnswered.append(clock.now)
                readyLatencies.append(clock.now - start)
                #expect(ready.status == 200)
                try await Task.sleep(for: .milliseconds(100))
            }
            for response in try await huge {
                #expect(response.status == 200, "\(response.text)")
                #expect(response.json?["title"] as? String == "huge")
            }
            let endlessResponse = try await endless
            #expect(endlessResponse.status == 200, "\(endlessResponse.text)")
            #expect(endlessResponse.json?["title"] as? String == "endless")
            let (stalledResponse, stalledAt) = try await stalled
            #expect(stalledResponse.status == 422, "\(stalledResponse.text)")
            #expect(stalledResponse.json?["code"] as? String == "preview_unavailable")
            #expect(stalledAt - started >= stallTimeout)
            #expect(clock.now - started < .seconds(20 * factor))
            // Readiness kept answering while the previews ran: none waited for the stalled fetch's timeout (a
            // fixed bound in milliseconds would measure the machine's load, not the gateway), and several answers
            // came before that fetch gave up.
            #expect(readyLatencies.max()! < stallTimeout - .seconds(1), "\(readyLatencies)")
            #expect(readyAnswered.filter { $0 < stalledAt }.count >= 3, "\(readyLatencies)")
            // Each fetch keeps at most LINK_PREVIEW_MAX_BYTES (512 KiB here) of a page; the bound in the README is 64 MB.
            let grown = residentBytes() - before
            #expect(grown < (64 << 20) * factor, "RSS grew by \(grown) bytes")
            #expect(pages.bytesSent > 4 * 512 * 1024)
            #expect(try await httpRequest(port: app.port, "GET", "/livez").status == 200)
        }
    }

    @Test func failedFetchesAreProblemsNotServerErrors() async throws {
        let pages = try HostilePageServer()
        defer { pages.stop() }
        try await withGateway(configure: { $0.linkPreviewAllowPrivate = true; $0.linkPreviewTimeoutMilliseconds = 5000 }) { app in
            let customer = try await Customer.signIn(app)
            let empty = try await preview(customer, "http://127.0.0.1:\(pages.port)/empty")
            #expect(empty.status == 502, "\(empty.text)")
            #expect(empty.json?["code"] as? String == "preview_fetch_failed")
            // Nothing listens on port 1.
            let refused = try await preview(customer, "http://127.0.0.1:1/")
            #expect(refused.status == 502, "\(refused.text)")
            #expect(refused.json?["code"] as? String == "preview_fetch_failed")
            let tls = try await preview(customer, "https://127.0.0.1:\(pages.port)/huge")
            #expect(tls.status == 502, "\(tls.text)")
            let literal = try await preview(customer, "http://[::1]:\(pages.port)/huge")
            #expect(literal.status == 502 || literal.status == 422, "\(literal.text)")
        }
    }

    @Test func previewsBeyondTheConcurrencyLimitAreTurnedAway() async throws {
        let pages = try HostilePageServer()
        defer { pages.stop() }
        try await withGateway(configure: {
            $0.linkPreviewAllowPrivate = true
            $0.linkPreviewTimeoutMilliseconds = 3000
            $0.linkPreviewConcurrency = 1
        }) { app in
            let customer = try await Customer.signIn(app)
            async let first = preview(customer, "http://127.0.0.1:\(pages.port)/stall")
            try await Task.sleep(for: .milliseconds(500))
            let second = try await preview(customer, "http://127.0.0.1:\(pages.port)/stall")
            #expect(second.status == 503, "\(second.text)")
            #expect(second.json?["code"] as? String == "previews_busy")
            #expect(second.header("Retry-After") == "1")
            #expect(try await first.status == 422)
        }
    }

    @Test func addressesCarryingPrivateIPv4InIPv6AreRefused() {
        func v6(_ text: String) -> [UInt8] {
            var address = in6_addr()
            #expect(inet_pton(AF_INET6, text, &address) == 1, "\(text)")
            return withUnsafeBytes(of: address) { Array($0) }
        }
        for refused in ["::127.0.0.1", "::10.0.0.1", "::ffff:127.0.0.1", "::ffff:192.168.1.1", "64:ff9b::10.0.0.1", "64:ff9b::7f00:1",
                        "64:ff9b:1::1", "2002:7f00:1::", "2002:a00:1::1", "2001:db8::1", "2001::1", "fec0::1", "fe80::1", "fc00::1",
                        "::", "::1", "100::1", "2001:2::1"] {
            #expect(!PublicAddress.isPublic(v6(refused)), "\(refused)")
        }
        for refused in [[192, 0, 2, 1], [198, 51, 100, 7], [203, 0, 113, 9], [198, 18, 0, 1], [192, 88, 99, 1], [100, 64, 0, 1], [240, 0, 0, 1]] as [[UInt8]] {
            #expect(!PublicAddress.isPublic(refused), "\(refused)")
        }
        for allowed in ["2606:4700::1111", "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"] {
            #expect(PublicAddress.isPublic(v6(allowed)), "\(allowed)")
        }
        #expect(PublicAddress.isPublic([93, 184, 216, 34]))
    }

    @Test func theWatchdogStallsWhenItsTaskStopsTicking() async throws {
        // Generous limits: the suite keeps both cores busy, and a loaded pool is slow, not stuck.
        let watchdog = Watchdog(stallLimit: .seconds(3))
        let ticking = Task { await watchdog.run(interval: .milliseconds(50)) }
        try await Task.sleep(for: .milliseconds(500))
        #expect(!watchdog.isStalled)
        ticking.cancel()
        _ = await ticking.value
        try await Task.sleep(for: .milliseconds(3500))
        #expect(watchdog.isStalled)
    }

    /// Only http(s) URLs leave the gateway in a preview, and text fields are capped.
    @Test func scriptURLsAreDroppedAndLongFieldsCapped() async throws {
        let pages = try HostilePageServer()
        defer { pages.stop() }
        try await withGateway(configure: { $0.linkPreviewAllowPrivate = true }) { app in
            let customer = try await Customer.signIn(app)
            let url = "http://127.0.0.1:\(pages.port)/scripted"
            let response = try await preview(customer, url)
            #expect(response.status == 200, "\(response.text)")
            let json = try #require(response.json)
            #expect(json["image"] is NSNull)
            #expect(json["url"] as? String == url)
            #expect((json["title"] as? String)?.count == 300)
            #expect((json["description"] as? String)?.count == 1000)
            // Cut by code points and between Characters: 99 accented letters of two code points each, and the ellipsis.
            let siteName = (json["siteName"] as? String).map { Array($0.unicodeScalars) }
            #expect(siteName == Array((String(repeating: "S\u{301}", count: 99) + "…").unicodeScalars))
            #expect(!response.text.contains("javascript:") && !response.text.contains("data:text"))
        }
    }
}
