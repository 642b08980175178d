import DeskEmulator
import HTTPServer
import TestSupport

/// An emulator made by `make` for a port from `TestPorts.free()`, seeded with the demo data unless told otherwise,
/// and started; made again for another port (up to five times) when that one was taken between the check and the
/// bind, as `TestPorts.started` does for plain servers.
func startedEmulator(_ configuration: DeskEmulatorConfiguration = DeskEmulatorConfiguration(), seeded: Bool = true,
                     make: (DeskEmulatorConfiguration) throws -> DeskEmulator = { DeskEmulator(configuration: $0) }) throws -> DeskEmulator {
    var configuration = configuration
    var attempt = 1
    while true {
        configuration.port = TestPorts.free()
        let emulator = try make(configuration)
        if seeded { try emulator.seed(json: Array(DeskEmulator.demoSeed.utf8)) }
        do {
            try emulator.start()
            return emulator
        } catch let error as HTTPServerError where error.code == .startFailed && attempt < 5 {
            attempt += 1
        }
    }
}
