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

/// One dependency that `/readyz` reports on.
public protocol ReadinessCheck: Sendable {
    /// Key in the `checks` map.
    var name: String { get }
    var componentType: String { get }
    func check() async -> CheckResult
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
    let timeout: Duration

    public init(database: any DatabaseProbe, timeout: Duration = .seconds(2)) {
        self.database = database
        self.timeout = timeout
    }

    public func check() async -> CheckResult {
        let started = ContinuousClock.now
        let outcome = await withDeadline(timeout) { [database] () -> Result<Bool, CheckFailure> in
            do {
                return .success(try await database.acceptsWrites())
            } catch let error as DomainError {
                return .failure(CheckFailure(message: error.internalDetail ?? error.message))
            } catch {
                return .failure(CheckFailure(message: "unexpected error"))
            }
        }
        switch outcome {
        case .some(.success(true)):
            return CheckResult(status: .pass, observedValue: milliseconds(since: started), observedUnit: "ms")
        case .some(.success(false)):
            // Reads (cached tickets, reports) still work, so the instance keeps its traffic; writes answer 503.
            return CheckResult(status: .warn, observedValue: milliseconds(since: started), observedUnit: "ms",
                               output: "the database takes no writes (a standby, or default_transaction_read_only): writes answer 503")
        case .some(.failure(let failure)):
            return CheckResult(status: .fail, output: failure.message)
        case .none:
            return CheckResult(status: .fail, output: "no answer within \(timeout)")
        }
    }
}

struct CheckFailure: Error {
    let message: String
}

/// Outbox depth: `warn` while the oldest operation waiting for Desk is older than the configured age.
public struct OutboxReadinessCheck: ReadinessCheck {
    public let name = "outbox"
    public let componentType = "component"
    let outbox: any OutboxQueue
    let warnAgeSeconds: Double
    let timeout: Duration

    public init(outbox: any OutboxQueue, warnAgeSeconds: Double, timeout: Duration = .seconds(2)) {
        self.outbox = outbox
        self.warnAgeSeconds = warnAgeSeconds
        self.timeout = timeout
    }

    public func check() async -> CheckResult {
        // Bounded like the database's check: with every connection stuck, the answer must still come within a probe's
        // timeout (the database's check says what is wrong).
        guard let depth = await withDeadline(timeout, { [outbox] in try? await outbox.depth() }) ?? nil else {
            return CheckResult(status: .warn, output: "outbox depth unknown")
        }
        if depth.pending > 0, depth.oldestSeconds > warnAgeSeconds {
            return CheckResult(status: .warn, observedValue: Double(depth.pending), observedUnit: "operations",
                               output: "oldest pending operation is \(Int(depth.oldestSeconds)) s old")
        }
        return CheckResult(status: .pass, observedValue: Double(depth.pending), observedUnit: "operations")
    }
}
