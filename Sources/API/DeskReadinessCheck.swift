public import Domain

/// Desk is reported `warn` (never `fail`): the cache keeps reads working while Desk is away.
public struct DeskReadinessCheck: ReadinessCheck {
    public let name = "desk"
    public let componentType = "component"
    let client: any DeskHealthProbe

    public init(client: any DeskHealthProbe) {
        self.client = client
    }

    public func check() async -> CheckResult {
        if client.isPaused {
            return CheckResult(status: .warn, output: "circuit breaker open: Desk calls are failing fast")
        }
        let started = ContinuousClock.now
        if let problem = await client.probe() { return CheckResult(status: .warn, output: problem) }
        return CheckResult(status: .pass, observedValue: milliseconds(since: started), observedUnit: "ms")
    }

    public func unanswered(within deadline: Duration) -> CheckResult {
        CheckResult(status: .warn, output: "no answer within \(deadline)")
    }
}
