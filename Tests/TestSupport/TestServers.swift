import DeskEmulator
import HTTPServer

extension TestPorts {
    /// Runs `attempt` (numbered from 1) again when it failed to bind a port from `free()`: anything on the machine may
    /// bind a port of the range between the check and the bind. At most five attempts; other errors end at once.
    public static func retryingBind<T>(_ attempt: (Int) throws -> T) throws -> T {
        var number = 1
        while true {
            do {
                return try attempt(number)
            } catch let error as HTTPServerError where error.code == .startFailed && number < 5 {
                number += 1
            }
        }
    }

    /// The same for a step that awaits (a whole gateway).
    public static func retryingBind<T>(_ attempt: (Int) async throws -> T) async throws -> T {
        var number = 1
        while true {
            do {
                return try await attempt(number)
            } catch let error as HTTPServerError where error.code == .startFailed && number < 5 {
                number += 1
            }
        }
    }

    /// A server made by `make` for a port from `free()` and started.
    public static func started(_ make: (Int) -> HTTPServer) throws -> HTTPServer {
        try retryingBind { _ in
            let server = make(free())
            try server.start()
            return server
        }
    }
}

/// An emulator made by `make` for a port from `TestPorts.free()`, seeded with the demo data unless told otherwise,
/// and started on it.
public func startedEmulator(_ configuration: DeskEmulatorConfiguration = DeskEmulatorConfiguration(), seeded: Bool = true,
                            make: (DeskEmulatorConfiguration) throws -> DeskEmulator = { DeskEmulator(configuration: $0) })
    throws -> DeskEmulator {
    var configuration = configuration
    return try TestPorts.retryingBind { _ in
        configuration.port = TestPorts.free()
        let emulator = try make(configuration)
        if seeded { try emulator.seed(json: Array(DeskEmulator.demoSeed.utf8)) }
        try emulator.start()
        return emulator
    }
}
