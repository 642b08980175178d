import API
import Domain
import Foundation
import HTTPServer
import JSON
import Reports

/// The parsers that take untrusted input, each with the property it must keep on any input: never crash, and
/// whatever it accepts survives a round trip. `make fuzz` drives them with libFuzzer; without the fuzzer this
/// executable replays files (`dg-fuzz TARGET FILE...`), which is how a crash becomes a regression test.
enum FuzzTargets {
    static let names = ["json", "body", "cursor", "report"]

    static func run(_ target: String, _ bytes: [UInt8]) {
        switch target {
        case "json": json(bytes)
        case "body": body(bytes)
        case "cursor": cursor(bytes)
        case "report": report(bytes)
        default: fatalError("unknown fuzz target \(target); known: \(names.joined(separator: ", "))")
        }
    }

    /// Accepted JSON serializes to JSON that parses back to the same value; read as Desk's documents are (strings
    /// repaired), it holds no NUL and parses back strictly.
    static func json(_ bytes: [UInt8]) {
        if let value = try? JSONParser.parse(bytes) {
            guard let again = try? JSONParser.parse(value.bytes()) else { fatalError("serialized JSON does not parse back") }
            guard again.bytes() == value.bytes() else { fatalError("JSON round trip changed the value") }
        }
        guard let repaired = try? JSONParser.parse(bytes, repairingStrings: true) else { return }
        let text = repaired.bytes()
        guard !holdsNUL(repaired) else { fatalError("a repaired document holds NUL") }
        guard let strict = try? JSONParser.parse(text) else { fatalError("a repaired document does not parse strictly") }
        guard strict.bytes() == text else { fatalError("a repaired document's round trip changed it") }
    }

    static func holdsNUL(_ value: JSONValue) -> Bool {
        switch value {
        case .string(let text): return text.utf8.contains(0)
        case .array(let items): return items.contains(where: holdsNUL)
        case .object(let members): return members.contains { $0.0.utf8.contains(0) || holdsNUL($0.1) }
        default: return false
        }
    }

    /// The ticket body validator: a refusal lists at most 20 problems and is never larger than it needs to be.
    static func body(_ bytes: [UInt8]) {
        let request = HTTPRequest(method: "POST", path: "/v1/tickets", headers: [("content-type", "application/json")], body: bytes)
        do {
            let ticket = try CustomerRoutes.newTicket(request)
            guard !ticket.title.isEmpty, ticket.title.count <= 255 else { fatalError("accepted an invalid title") }
        } catch {
            if case .array(let problems)? = error.extensions["errors"], problems.count > 20 { fatalError("more than 20 problems listed") }
        }
    }

    /// A cursor the decoder accepts encodes back to itself.
    static func cursor(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        guard let decoded = KeysetCursor.decode(text) else { return }
        guard let again = KeysetCursor.decode(KeysetCursor.encode(time: decoded.time, id: decoded.id)),
              again.id == decoded.id, again.time == decoded.time else { fatalError("cursor round trip changed it") }
    }

    /// Report query parameters: `name=value` pairs separated by `&`, any bytes.
    static func report(_ bytes: [UInt8]) {
        let text = String(decoding: bytes, as: UTF8.self)
        let query = text.split(separator: "&", omittingEmptySubsequences: false).map { pair -> (name: String, value: String) in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
        }
        for listing in [false, true] {
            guard let parameters = try? ReportParameters.parse(query, accept: nil, today: { _ in LocalDate(year: 2026, month: 6, day: 15) },
                                                               isKnownZone: { TimeZone(identifier: $0) != nil }, maxDays: 366,
                                                               listing: listing) else { continue }
            guard parameters.from <= parameters.to else { fatalError("accepted a range that ends before it starts") }
            checkPlan(BlockPlan(parameters), parameters)
        }
    }

    /// The blocks of each bucket, one after another, and of the previous period count each of its days once (blocks
    /// taken away included) and no other day.
    static func checkPlan(_ plan: BlockPlan, _ p: ReportParameters) {
        var next = p.from.dayNumber
        for tag in 1...plan.buckets.count {
            guard let (first, last) = coverage(plan.parts.filter { $0.tag == tag }), first == next else { fatalError("bucket \(tag) not read once") }
            next = last + 1
        }
        guard next == p.to.dayNumber + 1 else { fatalError("the buckets do not end with the range") }
        guard let previous = coverage(plan.parts.filter { $0.tag == BlockPlan.previousTag }),
              previous == (p.previous.from.dayNumber, p.previous.to.dayNumber) else { fatalError("the previous period not read once") }
    }

    /// The one run of days that `parts` count once each; nil when they count a day any other number of times.
    static func coverage(_ parts: [BlockPlan.Part]) -> (Int, Int)? {
        let runs = RollupBlocks.coverage(parts.map { ($0.block, $0.sign) })
        guard runs.count == 1, runs[0].count == 1 else { return nil }
        return (runs[0].first, runs[0].last)
    }
}

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FuzzTargets.run(selectedTarget, data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
    return 0
}

let selectedTarget = ProcessInfo.processInfo.environment["DG_FUZZ_TARGET"] ?? "json"

@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(_ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                     _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

/// SwiftPM links an executable's entry point under this name; here it hands control to libFuzzer's driver.
@_cdecl("dg_fuzz_main")
func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments) { data, size in fuzzOneInput(data, size) }
}
#else
@main
struct Replay {
    static func main() throws {
        let arguments = CommandLine.arguments.dropFirst()
        guard let target = arguments.first, FuzzTargets.names.contains(target) else {
            print("usage: dg-fuzz TARGET FILE...  (targets: \(FuzzTargets.names.joined(separator: ", ")))")
            return
        }
        for path in arguments.dropFirst() {
            FuzzTargets.run(target, [UInt8](try Data(contentsOf: URL(fileURLWithPath: path))))
        }
        print("dg-fuzz: \(arguments.count - 1) inputs replayed through \(target)")
    }
}
#endif
