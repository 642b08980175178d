public import Domain

/// Desk is reported `warn` (never `fail`): the cache keeps reads working while Desk is away.
public struct DeskReadinessCheck: ReadinessCheck {
    public let name = "desk"
    public let componentType = "component"
    let client: any DeskHealthProbe
    let timeout: Duration

    public init(client: any DeskHealthProbe, timeout: Duration = .seconds(2)) {
        self.client = client
        self.timeout = timeout
    }

    public func check() async -> CheckResult {
        if client.isPaused {
            return CheckResult(status: .warn, output: "circuit breaker open: Desk calls are failing fast")
        }
        let started = ContinuousClock.now
        let outcome = await withDeadline(timeout) { [client] in await client.probe() }
        switch outcome {
        case .some(nil):
            return CheckResult(status: .pass, observedValue: milliseconds(since: started), observedUnit: "ms")
        case .some(.some(let problem)):
            return CheckResult(status: .warn, output: problem)
        case .none:
            return CheckResult(status: .warn, output: "no answer within \(timeout)")
        }
    }
}
