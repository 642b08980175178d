import ArgumentParser
import DeskEmulator
import Foundation
import System

@main
struct DeskEmulatorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "desk-emulator",
        abstract: "A local Sendbird Desk: customer API (/sapi), Platform API (/platform/v1) and an /emulator control API.")

    @Option(help: "Port to listen on.") var port = 9090
    @Option(help: "IPv4 address to listen on.") var host = "127.0.0.1"
    @Option(help: "JSON seed file (teams, agents, customers, custom-field keys, settings).") var seed: String?
    @Flag(help: "Start with the built-in demo data (two teams, four agents, demo-customer / demo-token).") var demo = false
    @Option(help: "Application id the emulator accepts.") var appId = "emulated-app"
    @Option(help: "Platform API token accepted in SENDBIRDDESKAPITOKEN.") var apiToken = "emulator-api-token"
    @Option(help: "Webhook target URL (repeatable).") var webhookUrl: [String] = []
    @Option(help: "Secret for x-hub-signature.") var webhookSecret = "emulator-webhook-secret"
    @Option(help: "Webhooks delivered at once (one ticket's events stay in order).") var webhookConcurrency = 8
    @Option(help: "Webhook events waiting at most; more are dropped and counted (GET /emulator/webhooks/stats).")
    var webhookQueue = 10_000
    @Option(help: "State file: loaded at start, every change saved before it is acknowledged (without it: memory only). Seeds apply only when the file is new.")
    var state: String?

    func run() async throws {
        Signals.ignoreBrokenPipes()
        var configuration = DeskEmulatorConfiguration()
        configuration.host = host
        configuration.port = port
        configuration.appId = appId
        configuration.apiToken = apiToken
        configuration.webhookURLs = webhookUrl
        configuration.webhookSecret = webhookSecret
        configuration.webhookConcurrency = webhookConcurrency
        configuration.webhookQueueCapacity = webhookQueue
        let emulator: DeskEmulator
        var restored = false
        if let state {
            (emulator, restored) = try DeskEmulator.persistent(configuration: configuration, store: EmulatorFileStore(path: state))
        } else {
            emulator = DeskEmulator(configuration: configuration)
        }
        if !restored {
            if demo { try emulator.seed(json: Array(DeskEmulator.demoSeed.utf8)) }
            if let seed { try emulator.seed(fromFile: seed) }
        }
        try emulator.start()
        FileHandle.standardOutput.write(Data("desk-emulator listening on \(emulator.baseURL) (app \(appId))\(restored ? ", state restored from " + (state ?? "") : ""); Ctrl-C stops it\n".utf8))
        // Runs until SIGINT or SIGTERM. Handled, not left to the default action: as a container's PID 1 the process
        // would otherwise ignore SIGTERM and wait out the stop timeout. Every change is saved before it is answered,
        // so there is nothing to flush.
        Signals.exitOnStop()
        while true { try await Task.sleep(for: .seconds(3600)) }
    }
}
