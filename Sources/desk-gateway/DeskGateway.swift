import ArgumentParser
import Dispatch
import Foundation
import Synchronization
import GatewayApp
import Logging
import Postgres
import Telemetry
#if canImport(Glibc)
import Glibc
#endif

@main
struct DeskGateway: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "desk-gateway",
        abstract: "REST backend-for-frontend in front of Sendbird Desk.",
        version: gatewayVersion,
        subcommands: [Serve.self, Migrate.self],
        defaultSubcommand: Serve.self)
}

/// Reads the environment once; an invalid value ends the process with a message naming the variable.
func loadConfiguration() -> (GatewayConfig, Logger) {
    let config: GatewayConfig
    do {
        config = try GatewayConfig.fromEnvironment(ProcessInfo.processInfo.environment)
    } catch {
        FileHandle.standardError.write(Data("desk-gateway: invalid configuration: \(error)\n".utf8))
        exit(2)
    }
    let level = config.logLevel
    LoggingSystem.bootstrap { JSONLogHandler(label: $0, level: level) }
    return (config, Logger(label: "desk-gateway"))
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Run the gateway (the default).")

    func run() async throws {
        signal(SIGPIPE, SIG_IGN)
        let (config, logger) = loadConfiguration()
        logger.info("starting", metadata: ["config": "\(config)"])
        let app: GatewayApplication
        do {
            app = try await buildApplication(config, logger: logger)
        } catch {
            logger.critical("start-up failed", metadata: ["error": "\(error)", "detail": "\((error as? PostgresError)?.detail ?? "")"])
            LogSink.standardOutput.flush()
            throw ExitCode(1)
        }
        let received = await waitForStopSignal()
        logger.notice("signal received", metadata: ["signal": "\(received == SIGINT ? "SIGINT" : "SIGTERM")"])
        await app.stop()
        LogSink.standardOutput.flush()
    }

    /// SIGINT or SIGTERM, whichever comes first. The default actions are turned off so no thread dies of them.
    private func waitForStopSignal() async -> Int32 {
        let waiter = SignalWaiter()
        let queue = DispatchQueue(label: "signals")
        let sources = [SIGINT, SIGTERM].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { waiter.deliver(number) }
            source.resume()
            return source
        }
        let number = await waiter.wait()
        withExtendedLifetime(sources) {}
        return number
    }
}

/// Hands the first stop signal to the one waiter, whichever comes first.
final class SignalWaiter: Sendable {
    private let state = Mutex<(received: Int32?, waiting: CheckedContinuation<Int32, Never>?)>((nil, nil))

    func deliver(_ number: Int32) {
        let continuation = state.withLock { state -> CheckedContinuation<Int32, Never>? in
            guard state.received == nil else { return nil }
            state.received = number
            defer { state.waiting = nil }
            return state.waiting
        }
        continuation?.resume(returning: number)
    }

    func wait() async -> Int32 {
        await withCheckedContinuation { continuation in
            let already = state.withLock { state -> Int32? in
                if let received = state.received { return received }
                state.waiting = continuation
                return nil
            }
            if let already { continuation.resume(returning: already) }
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending database migrations and exit.")

    func run() async throws {
        let (config, logger) = loadConfiguration()
        do {
            try await runMigrations(config, logger: logger)
        } catch {
            logger.critical("migration failed", metadata: ["error": "\(error)", "detail": "\((error as? PostgresError)?.detail ?? "")"])
            LogSink.standardOutput.flush()
            throw ExitCode(1)
        }
        LogSink.standardOutput.flush()
    }
}
