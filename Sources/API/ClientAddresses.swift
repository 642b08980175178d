import Domain
public import HTTPServer
import Synchronization
import System

/// Credentials (session tokens, API keys) this instance has verified recently. The rate limiter counts a request
/// against its token only when the token is in here; any other request counts against its client address, so
/// made-up tokens cannot each get a fresh bucket.
public final class VerifiedCallers: Sendable {
    /// In shards, each under its own lock: every request asks, and both request threads waited on one lock.
    private let shards: Unretained<TTLCache<String, Bool>>
    static let shardCount = 8

    public init(seconds: Double = 300) {
        shards = Unretained((0..<Self.shardCount).map { _ in TTLCache(ttl: seconds, capacity: 50_000 / Self.shardCount) })
    }

    public var count: Int {
        var total = 0
        shards.forEach { total += $0.count }
        return total
    }

    public func add(_ credential: String) { shards.with(key: credential) { $0.put(credential, true) } }

    func remove(_ credential: String) { shards.with(key: credential) { $0.remove(credential) } }

    /// Forgets every credential (one was revoked somewhere; the rest are verified again on their next use).
    public func removeAll() { shards.forEach { $0.removeAll() } }

    public func contains(_ credential: String, now: Double) -> Bool {
        shards.with(key: credential) { $0.get(credential, now: now) != nil }
    }
}

/// An IPv4 or IPv6 network (`10.0.0.0/8`, `fd00::/8`, or a single address).
public struct CIDR: Sendable, Equatable {
    let address: [UInt8]
    let prefix: Int

    public init?(_ text: String) {
        let parts = text.split(separator: "/", maxSplits: 1).map(String.init)
        guard let address = CIDR.parse(parts[0]) else { return nil }
        let bits = address.count * 8
        if parts.count == 2 {
            guard let prefix = Int(parts[1]), (0...bits).contains(prefix) else { return nil }
            self.prefix = prefix
        } else {
            prefix = bits
        }
        self.address = address
    }

    static func parse(_ text: String) -> [UInt8]? { IPAddress.bytes(text) }

    func contains(_ other: [UInt8]) -> Bool {
        guard other.count == address.count else { return false }
        var remaining = prefix
        for (a, b) in zip(address, other) where remaining > 0 {
            let mask: UInt8 = remaining >= 8 ? 0xFF : ~(0xFF >> UInt8(remaining))
            if a & mask != b & mask { return false }
            remaining -= 8
        }
        return true
    }
}

/// Who a request comes from: the direct peer, or behind a trusted proxy the client it names. `X-Forwarded-For` is
/// read from the right, skipping trusted proxies, so a client cannot choose its own address by sending the header;
/// `Forwarded: for=` is read the same way when there is no `X-Forwarded-For`.
public struct ClientAddressResolver: Sendable {
    public let trustedProxies: [CIDR]

    public init(trustedProxies: [CIDR] = []) {
        self.trustedProxies = trustedProxies
    }

    func isTrusted(_ text: String) -> Bool {
        guard let bytes = CIDR.parse(text) else { return false }
        return trustedProxies.contains { $0.contains(bytes) }
    }

    /// The scheme the client used: what a trusted proxy says (`X-Forwarded-Proto`, else `Forwarded: proto=`), `http`
    /// otherwise (the gateway itself speaks plain HTTP). A client that is no trusted proxy cannot claim TLS.
    public func scheme(_ request: HTTPRequest) -> String {
        guard !trustedProxies.isEmpty, isTrusted(request.remoteAddress ?? "") else { return "http" }
        if let proto = request.header("x-forwarded-proto")?.split(separator: ",").first {
            return proto.trimmingOWS().lowercased()
        }
        if let forwarded = request.header("forwarded")?.split(separator: ",").first {
            for pair in forwarded.split(separator: ";") {
                let kv = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingOWS() }
                if kv.count == 2, kv[0].lowercased() == "proto" { return kv[1].trimming { $0 == "\"" }.lowercased() }
            }
        }
        return "http"
    }

    public func client(_ request: HTTPRequest) -> String {
        let peer = request.remoteAddress ?? "unknown"
        guard !trustedProxies.isEmpty, isTrusted(peer) else { return peer }
        var hops: [String] = []
        // Every field line, in order, as one list (RFC 9110 §5.3): a proxy that adds a line of its own (HAProxy's
        // `option forwardfor`) puts the real hop on the last line, after whatever the client sent on the first.
        let forwardedFor = request.headers.values("x-forwarded-for")
        let forwarded = request.headers.values("forwarded")
        if !forwardedFor.isEmpty {
            hops = forwardedFor.flatMap { $0.split(separator: ",") }.map { String($0.trimmingOWS()) }
        } else if !forwarded.isEmpty {
            for element in forwarded.flatMap({ $0.split(separator: ",") }) {
                for pair in element.split(separator: ";") {
                    let kv = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingOWS() }
                    guard kv.count == 2, kv[0].lowercased() == "for" else { continue }
                    var value = String(kv[1].trimming { $0 == "\"" })
                    if value.hasPrefix("["), let close = value.firstIndex(of: "]") { value = String(value[value.index(after: value.startIndex)..<close]) }
                    else if value.filter({ $0 == ":" }).count == 1, let colon = value.firstIndex(of: ":") { value = String(value[..<colon]) }
                    hops.append(value)
                }
            }
        }
        for hop in hops.reversed() where !isTrusted(hop) {
            return CIDR.parse(hop) != nil ? hop : peer
        }
        return hops.first.flatMap { CIDR.parse($0) != nil ? $0 : nil } ?? peer
    }
}
