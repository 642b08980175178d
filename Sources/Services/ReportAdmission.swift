import Synchronization

/// Reports computed from raw ratings (a zone without rollups) can cost seconds of database time each. They share a
/// budget of `total` database connections on an instance (at most half the pool, so customers keep the rest), and
/// one API key runs at most `perKey` of them, counted by the key's id whether it asks through the API or the report
/// page. A report alone computes its two periods at once on two connections; the second is lent, not owned: a report
/// of another key arriving meanwhile is admitted on the budget's own slots (one key's report once took both and every
/// other key got 503), so the budget is exceeded by at most the lent connections while they run. Excess is refused
/// at once (waiting would only pile requests up behind a slow query).
final class ReportAdmission: Sendable {
    let total: Int
    let perKey: Int
    private let state = Mutex<(running: Int, lent: Int, byKey: [String: Int])>((0, 0, [:]))

    init(total: Int, perKey: Int) {
        self.total = max(1, total)
        self.perKey = max(1, perKey)
    }

    /// Runs `body` with the number of connections it may use (1 or 2; at most `connections`).
    func run<T: Sendable>(key: String, connections: Int = 2, _ body: (Int) async throws -> T) async throws -> T {
        let granted = try enter(key, most: connections)
        defer { leave(key, granted) }
        return try await body(granted)
    }

    private func enter(_ key: String, most: Int) throws -> Int {
        let decision: Result<Int, ReportRefusal> = state.withLock { state in
            if state.byKey[key, default: 0] >= perKey {
                return .failure(.keyBusy("This API key already runs \(perKey) report(s) computed from raw ratings; retry when one ends."))
            }
            if state.running >= total {
                return .failure(.instanceBusy("Reports computed from raw ratings hold all \(total) connection(s) they may use; retry shortly."))
            }
            // A second connection only for a report running alone, within the budget.
            let granted = most >= 2 && state.byKey.isEmpty && state.running + state.lent + 2 <= total ? 2 : 1
            state.running += 1
            state.lent += granted - 1
            state.byKey[key, default: 0] += 1
            return .success(granted)
        }
        return try decision.get()
    }

    private func leave(_ key: String, _ granted: Int) {
        state.withLock { state in
            state.running -= 1
            state.lent -= granted - 1
            let left = state.byKey[key, default: 1] - 1
            state.byKey[key] = left > 0 ? left : nil
        }
    }
}
