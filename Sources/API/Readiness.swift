public import Domain

public enum HealthStatus: String, Sendable, Comparable {
    case pass, warn, fail

    public static func < (lhs: HealthStatus, rhs: HealthStatus) -> Bool {
        let order: [HealthStatus] = [.pass, .warn, .fail]
        return order.firstIndex(of: lhs)! < order.firstIndex(of: rhs)!
    }
}

public struct CheckResult: Sendable {
    public var status: HealthStatus
    public var observedValue: Double?
    public var observedUnit: String?
    public var output: String?

    public init(status: HealthStatus, observedValue: Double? = nil, observedUnit: String? = nil, output: String? = nil) {
        self.status = status
        self.observedValue = observedValue
        self.observedUnit = observedUnit
        self.output = output
    }
}

/// One dependency that `/readyz` reports on. `/readyz` gives each check a deadline, enforced without waiting for the
/// check itself, so no stuck call holds the probe open.
public protocol ReadinessCheck: Sendable {
    /// Key in the `checks` map.
    var name: String { get }
    var componentType: String { get }
    func check() async -> CheckResult
    /// What the check's silence past `deadline` means for this dependency.
    func unanswered(within deadline: Duration) -> CheckResult
}

/// Milliseconds since `start`, two decimals.
func milliseconds(since start: ContinuousClock.Instant) -> Double {
    let elapsed = ContinuousClock.now - start
    let millis = Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15
    return (millis * 100).rounded() / 100
}

/// `SELECT 1` through the pool: proves a connection can be had and the server answers.
public struct DatabaseReadinessCheck: ReadinessCheck {
    public let name = "database"
    public let componentType = "datastore"
    let database: any DatabaseProbe

    public init(database: any DatabaseProbe) {
        self.database = database
    }

    public func check() async -> CheckResult {
        let started = ContinuousClock.now
        do {
            guard try await database.acceptsWrites() else {
                // Reads (cached tickets, reports) still work, so the instance keeps its traffic; writes answer 503.
                return CheckResult(status: .warn, observedValue: milliseconds(since: started), observedUnit: "ms",
                                   output: "the database takes no writes (a standby, or default_transaction_read_only): writes answer 503")
            }
            return CheckResult(status: .pass, observedValue: milliseconds(since: started), observedUnit: "ms")
        } catch let error as DomainError {
            return CheckResult(status: .fail, output: error.internalDetail ?? error.message)
        } catch {
            return CheckResult(status: .fail, output: "unexpected error")
        }
    }

    public func unanswered(within deadline: Duration) -> CheckResult {
        CheckResult(status: .fail, output: "no answer within \(deadline)")
    }
}

/// Outbox depth: `warn` while the oldest operation waiting for Desk is older than the configured age.
public struct OutboxReadinessCheck: ReadinessCheck {
    public let name = "outbox"
    public let componentType = "component"
    let outbox: any OutboxQueue
    let warnAgeSeconds: Double

    public init(outbox: any OutboxQueue, warnAgeSeconds: Double) {
        self.outbox = outbox
        self.warnAgeSeconds = warnAgeSeconds
    }

    public func check() async -> CheckResult {
        guard let depth = try? await outbox.depth() else { return Self.unknown }
        if depth.pending > 0, depth.oldestSeconds > warnAgeSeconds {
            return CheckResult(status: .warn, observedValue: Double(depth.pending), observedUnit: "operations",
                               output: "oldest pending operation is \(Int(depth.oldestSeconds)) s old")
        }
        return CheckResult(status: .pass, observedValue: Double(depth.pending), observedUnit: "operations")
    }

    /// The database's own check says what is wrong with it.
    public func unanswered(within deadline: Duration) -> CheckResult { Self.unknown }

    static let unknown = CheckResult(status: .warn, output: "outbox depth unknown")
}
