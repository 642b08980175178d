import HTTPServer
import Domain
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

    /// The request's bearer token (`HTTPRequest.bearerToken`), refused past 210 bytes of header: a longer one is
    /// no token this gateway issued, and is not hashed into its caches.
    static func bearer(_ request: HTTPRequest) -> String? {
        guard let token = request.bearerToken, request.authorizationBytes <= 210 else { return nil }
        return token
    }

    /// A report route's credential: `X-API-Key`, else the bearer token. The report routes check it and admission
    /// counts requests on it, so both read it here.
    static func reportKey(_ request: HTTPRequest) -> String? {
        request.header("x-api-key") ?? bearer(request)
    }

    static func unauthorized(_ detail: String) -> APIError {
        APIError(.unauthorized, detail: detail,
                 headers: [("WWW-Authenticate", #"Bearer realm="desk-gateway""#)])
    }

    /// The cached session, without any I/O (nil on a miss).
    func cached(_ request: HTTPRequest) -> SessionRecord? {
        fresh(request, now: WallClock.seconds()) { $0 }
    }

    /// The cached session's customer (the cached ticket read needs nothing else, and `cached` retains every string
    /// of the record it copies out).
    func cachedCustomerId(_ request: HTTPRequest, now: Double) -> Int? {
        fresh(request, now: now) { $0.customerId }
    }

    /// What `take` reads of the request's cached session if it is fresh at `now` (younger than the cache's TTL, not
    /// expired), read in place under the cache's lock.
    private func fresh<Result>(_ request: HTTPRequest, now: Double, _ take: (SessionRecord) -> Result) -> Result? {
        guard let token = Self.bearer(request) else { return nil }
        let ttl = cache.ttl
        return cache.read(token) { entry in now - entry.at < ttl && entry.value.expiresAt > now ? take(entry.value) : nil }
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
