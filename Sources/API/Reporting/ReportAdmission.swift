import Synchronization

/// Reports computed from raw ratings (a zone without rollups) can cost seconds of database time each: at most
/// `total` run at once on an instance and `perKey` for one API key, so one key cannot take the pool from customers.
/// Excess is refused at once (waiting would only pile requests up behind a slow query).
final class ReportAdmission: Sendable {
    let total: Int
    let perKey: Int
    private let state = Mutex<(running: Int, byKey: [String: Int])>((0, [:]))

    init(total: Int, perKey: Int) {
        self.total = max(1, total)
        self.perKey = max(1, perKey)
    }

    var running: Int { state.withLock { $0.running } }

    func run<T: Sendable>(key: String, _ body: () async throws -> T) async throws -> T {
        try enter(key)
        defer { leave(key) }
        return try await body()
    }

    private func enter(_ key: String) throws {
        let refusal: APIError? = state.withLock { state in
            if state.byKey[key, default: 0] >= perKey {
                return APIError(.rateLimited, detail: "This API key already runs \(perKey) report(s) computed from raw ratings; retry when one ends.",
                                headers: [("Retry-After", "2")])
            }
            if state.running >= total {
                return APIError(.reportsBusy, detail: "\(total) report(s) computed from raw ratings are running; retry shortly.",
                                headers: [("Retry-After", "2")])
            }
            state.running += 1
            state.byKey[key, default: 0] += 1
            return nil
        }
        if let refusal { throw refusal }
    }

    private func leave(_ key: String) {
        state.withLock { state in
            state.running -= 1
            let left = state.byKey[key, default: 1] - 1
            state.byKey[key] = left > 0 ? left : nil
        }
    }
}
