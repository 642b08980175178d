import HTTPServer
import Domain
import Foundation
import Synchronization

/// Bearer-token authentication with a short in-memory cache in front of PostgreSQL, so the hot read path costs no
/// database round trip. A revocation is immediate on the instance that revokes and takes at most `cacheSeconds`
/// elsewhere.
final class Authenticator: Sendable {
    private let store: any SessionDirectory
    private let cache: TTLCache<String, SessionRecord>
    private let verified: VerifiedCallers

    init(store: any SessionDirectory, cacheSeconds: Double, verified: VerifiedCallers) {
        self.store = store
        cache = TTLCache(ttl: cacheSeconds, capacity: 20_000)
        self.verified = verified
    }

    var cachedSessions: Int { cache.count }

    /// The token of `Authorization: Bearer <token>` (scheme case-insensitive), without allocating on the hot path.
    static func bearer(_ request: HTTPRequest) -> String? {
        guard let header = request.header("authorization") else { return nil }
        let utf8 = header.utf8
        guard utf8.count > 7, utf8.count <= 210 else { return nil }
        // Bytes, not characters: this runs twice for every authenticated request.
        var start = utf8.startIndex
        for want in "bearer ".utf8 {
            let byte = utf8[start]
            if (byte >= 65 && byte <= 90 ? byte + 32 : byte) != want { return nil }
            start = utf8.index(after: start)
        }
        var end = utf8.endIndex
        while start < end, utf8[start] == UInt8(ascii: " ") { start = utf8.index(after: start) }
        while start < end, utf8[utf8.index(before: end)] == UInt8(ascii: " ") { end = utf8.index(before: end) }
        return start == end ? nil : String(Substring(utf8[start..<end]))
    }

    static func unauthorized(_ detail: String) -> APIError {
        APIError(.unauthorized, detail: detail,
                 headers: [("WWW-Authenticate", #"Bearer realm="desk-gateway""#)])
    }

    /// The cached session, without any I/O (nil on a miss).
    func cached(_ request: HTTPRequest) -> SessionRecord? {
        guard let token = Self.bearer(request) else { return nil }
        guard let entry = cache.lookup(token) else { return nil }
        let now = TTLCache<String, SessionRecord>.now
        guard now - entry.at < cache.ttl, entry.value.expiresAt > now else { return nil }
        return entry.value
    }

    func authenticate(_ request: HTTPRequest) async throws -> SessionRecord {
        if let record = cached(request) { return record }
        guard let token = Self.bearer(request) else {
            throw Self.unauthorized("Send the session token as 'Authorization: Bearer <token>' (POST /v1/sessions issues one).")
        }
        guard let record = try await store.find(token: token) else {
            throw Self.unauthorized("The session token is unknown, expired or revoked; sign in again.")
        }
        cache.put(token, record)
        verified.add(token)
        return record
    }

    func remember(token: String, _ record: SessionRecord) {
        cache.put(token, record)
        verified.add(token)
    }

    func forget(_ request: HTTPRequest) {
        guard let token = Self.bearer(request) else { return }
        cache.remove(token)
        verified.remove(token)
    }
}
