public import Logging
import Foundation
import JSON
import Synchronization
import System

/// swift-log handler writing one JSON object per line to standard output, through a shared buffer that a
/// background thread flushes (a write(2) per line would cost more than a whole request on the hot path).
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    private let label: String
    private let sink: LogSink

    public init(label: String, level: Logger.Level, sink: LogSink = .standardOutput) {
        self.label = label
        self.logLevel = level
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var line = "{\"ts\":\""
        line += Self.timestamp()
        line += "\",\"level\":\""
        line += event.level.rawValue
        line += "\",\"logger\":"
        JSONText.append(label, to: &line)
        line += ",\"msg\":"
        JSONText.append(event.message.description, to: &line)
        var merged = metadata
        if let extra = event.metadata { merged.merge(extra) { $1 } }
        for key in merged.keys.sorted() {
            line += ","
            JSONText.append(key, to: &line)
            line += ":"
            Self.append(merged[key]!, to: &line)
        }
        line += "}\n"
        sink.write(line)
    }

    private static func append(_ value: Logger.Metadata.Value, to line: inout String) {
        switch value {
        case .string(let text): JSONText.append(text, to: &line)
        case .stringConvertible(let item):
            let text = item.description
            if item is Int || item is Double || item is Bool { line += text } else { JSONText.append(text, to: &line) }
        case .array(let items):
            line += "["
            for (index, item) in items.enumerated() {
                if index > 0 { line += "," }
                append(item, to: &line)
            }
            line += "]"
        case .dictionary(let entries):
            line += "{"
            for (index, key) in entries.keys.sorted().enumerated() {
                if index > 0 { line += "," }
                JSONText.append(key, to: &line)
                line += ":"
                append(entries[key]!, to: &line)
            }
            line += "}"
        }
    }

    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return ISOTimestamp.format(Double(now.tv_sec) + Double(now.tv_nsec) / 1e9)
    }
}

/// A buffered line sink. Thread safety: the buffer is behind a `Mutex`; one detached thread flushes it.
public final class LogSink: Sendable {
    private let buffer = Mutex<[UInt8]>([])
    private let fd: Int32

    public static let standardOutput = LogSink(fd: 1)
    /// One-shot commands log here, so their standard output holds only what they print (a new key, an audit).
    public static let standardError = LogSink(fd: 2)

    init(fd: Int32) {
        self.fd = fd
        Threads.start("log-flush") { [weak self] in
            while let sink = self {
                sink.flush()
                usleep(50_000)
            }
        }
    }

    func write(_ line: String) {
        let large = buffer.withLock { buffer -> Bool in
            buffer.append(contentsOf: line.utf8)
            return buffer.count > 64 << 10
        }
        if large { flush() }
    }

    /// Writes everything buffered; call before the process exits.
    public func flush() {
        let bytes = buffer.withLock { buffer -> [UInt8] in
            let out = buffer
            buffer.removeAll(keepingCapacity: true)
            return out
        }
        guard !bytes.isEmpty else { return }
        Files.writeBestEffort(bytes, to: fd)
    }
}
