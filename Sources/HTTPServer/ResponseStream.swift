internal import CMicroHTTPD
import Synchronization

/// A body produced while it is sent (a large export): `next` returns the next bytes, an empty array when it has
/// none this time, nil at the end. A throw ends the response abruptly (the client sees a cut transfer, never a
/// complete-looking one). The server asks for the next bytes only once the previous ones are handed to the socket,
/// so memory stays one chunk whatever the length.
public final class ResponseStream: Sendable {
    let next: @Sendable () async throws -> [UInt8]?

    public init(_ next: @escaping @Sendable () async throws -> [UInt8]?) {
        self.next = next
    }
}

/// libmicrohttpd's side of a `ResponseStream`: its content reader hands out the current chunk; when the chunk is
/// spent it suspends the connection (so no polling thread spins or waits) and a task fetches the next one, then
/// resumes. The connection is suspended only inside the reader and resumed only by that fetch or by `abort`, both
/// under `state`'s lock, so a resume always matches a suspend.
final class StreamReader: @unchecked Sendable {
    private struct State {
        var chunk: [UInt8] = []
        var offset = 0
        var finished = false
        var failed = false
        var suspended = false
    }
    private let state = Mutex(State())
    private let stream: ResponseStream
    /// Written once before libmicrohttpd can call the reader; only passed back to libmicrohttpd.
    let connection: OpaquePointer
    let registry: StreamRegistry

    init(stream: ResponseStream, connection: OpaquePointer, registry: StreamRegistry) {
        self.stream = stream
        self.connection = connection
        self.registry = registry
        registry.add(self)
    }

    /// Copies up to `max` bytes into `buffer`; -1 at the end, -2 after a failure, 0 while the next chunk is fetched.
    func read(into buffer: UnsafeMutablePointer<CChar>, max: Int) -> Int {
        state.withLock { state in
            if state.offset < state.chunk.count {
                let count = min(max, state.chunk.count - state.offset)
                state.chunk.withUnsafeBytes { bytes in
                    UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + state.offset, byteCount: count)
                }
                state.offset += count
                return count
            }
            if state.failed { return -2 }
            if state.finished { return -1 }
            state.suspended = true
            MHD_suspend_connection(connection)
            Task { await self.fetch() }
            return 0
        }
    }

    private func fetch() async {
        var next: [UInt8]?
        var failed = false
        do { next = try await stream.next() } catch { failed = true }
        state.withLock { state in
            if failed { state.failed = true } else if let next { (state.chunk, state.offset) = (next, 0) } else { state.finished = true }
            resume(&state)
        }
    }

    /// Ends the response with an error (the server is stopping): a suspended connection is resumed to be closed.
    func abort() {
        state.withLock { state in
            state.failed = true
            resume(&state)
        }
    }

    private func resume(_ state: inout State) {
        guard state.suspended else { return }
        state.suspended = false
        MHD_resume_connection(connection)
    }
}

/// libmicrohttpd's content reader and its release, capture-free: `cls` is the retained `StreamReader`.
let streamContentReader: MHD_ContentReaderCallback = { cls, _, buffer, max in
    guard let cls, let buffer else { return -2 }
    return Unmanaged<StreamReader>.fromOpaque(cls).takeUnretainedValue().read(into: buffer, max: max)
}

let streamReaderFree: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    let reader = Unmanaged<StreamReader>.fromOpaque(cls).takeRetainedValue()
    reader.registry.remove(reader)
}

/// The streams being sent, so a stopping server can wait for them and end the ones left.
final class StreamRegistry: Sendable {
    private let readers = Mutex<[ObjectIdentifier: StreamReader]>([:])

    func add(_ reader: StreamReader) { readers.withLock { $0[ObjectIdentifier(reader)] = reader } }

    func remove(_ reader: StreamReader) { _ = readers.withLock { $0.removeValue(forKey: ObjectIdentifier(reader)) } }

    var count: Int { readers.withLock { $0.count } }

    func abortAll() {
        for reader in readers.withLock({ Array($0.values) }) { reader.abort() }
    }
}
