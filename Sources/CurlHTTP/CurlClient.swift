internal import CCurl
import Foundation
import Synchronization
import System

/// One HTTP request for `CurlClient`.
public struct CurlRequest: Sendable {
    public var method: String
    public var url: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]?
    /// The whole transfer, connection included; curl enforces it.
    public var timeout: Duration
    /// Bytes of answer body (as decoded) taken at most: a longer answer is stopped there and is `tooLarge`.
    public var maxResponseBytes: Int

    public init(method: String, url: String, headers: [(name: String, value: String)] = [], body: [UInt8]? = nil,
                timeout: Duration, maxResponseBytes: Int = .max) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
    }
}

public enum CurlOutcome: Sendable {
    /// Header names as sent (the caller compares them case-insensitively).
    case answer(status: Int, headers: [(name: String, value: String)], body: [UInt8])
    case timedOut
    /// No answer: reset, a broken reply (a short fixed wording). The request may have reached the server.
    case failed(String)
    /// No answer, and the request never left: refused, unresolvable, the TLS handshake failed.
    case notSent(String)
    /// The caller stopped waiting (task cancelled).
    case abandoned
    /// The answer's body passed `maxResponseBytes`; the transfer was stopped there.
    case tooLarge
}

/// HTTP/1.1 and HTTP/2 over TLS through libcurl's easy API, on a small pool of threads of their own, never on Swift's
/// task pool (a transfer blocks its thread). Each thread keeps one easy handle for its whole life, so connections
/// and DNS answers are reused from one request to the next (keep-alive).
///
/// Why not FoundationNetworking's URLSession, which is libcurl underneath: on this toolchain every request it makes
/// leaks the URL it parses (about 90 bytes per request in five allocations under `_EasyHandle.set(url:)`, seen
/// with heaptrack in the soak), so the gateway's memory grew with every call to Desk for as long as it ran.
public final class CurlClient: Sendable {
    /// A request waiting for, or on, a thread; finished exactly once (by the thread or by a cancellation).
    final class Job: Sendable {
        let request: CurlRequest
        let cancelled = Atomic<Bool>(false)
        private let continuation = Mutex<CheckedContinuation<CurlOutcome, Never>?>(nil)

        init(_ request: CurlRequest) {
            self.request = request
        }

        func attach(_ continuation: CheckedContinuation<CurlOutcome, Never>) {
            // A cancellation may have come first: then finish at once.
            let finishNow = self.continuation.withLock { slot -> Bool in
                if cancelled.load(ordering: .acquiring) { return true }
                slot = continuation
                return false
            }
            if finishNow { continuation.resume(returning: .abandoned) }
        }

        func finish(_ outcome: CurlOutcome) {
            continuation.withLock { slot -> CheckedContinuation<CurlOutcome, Never>? in
                defer { slot = nil }
                return slot
            }?.resume(returning: outcome)
        }

        func cancel() {
            cancelled.store(true, ordering: .releasing)
            finish(.abandoned)
        }
    }

    private struct Pool {
        var queue: [Job] = []
        var head = 0
        var threads = 0
        var idle = 0
    }

    private let maxThreads: Int
    private let name: String
    private let pool = Mutex(Pool())
    private let ready = DispatchSemaphore(value: 0)

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    /// At most `maxConnections` transfers at once (one thread and one easy handle each, started as needed);
    /// more requests wait their turn, inside their caller's deadline.
    public init(maxConnections: Int = 32, name: String = "http-client") {
        _ = Self.globalInit
        maxThreads = max(1, maxConnections)
        self.name = name
    }

    public func perform(_ request: CurlRequest) async -> CurlOutcome {
        let job = Job(request)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                job.attach(continuation)
                enqueue(job)
            }
        } onCancel: {
            job.cancel()
        }
    }

    private func enqueue(_ job: Job) {
        let spawn = pool.withLock { pool -> Bool in
            pool.queue.append(job)
            // A new thread when more requests wait than threads do.
            guard pool.queue.count - pool.head > pool.idle, pool.threads < maxThreads else { return false }
            pool.threads += 1
            return true
        }
        ready.signal()
        if spawn {
            Threads.start(name) { [self] in work() }
        }
    }

    private func next() -> Job {
        pool.withLock { $0.idle += 1 }
        ready.wait()
        return pool.withLock { pool in
            pool.idle -= 1
            let job = pool.queue[pool.head]
            pool.head += 1
            // Taken jobs leave the array (and their bodies memory) once it is drained, or half of it is taken.
            if pool.head == pool.queue.count {
                pool.queue.removeAll(keepingCapacity: pool.queue.count <= 64)
                pool.head = 0
            } else if pool.head > 64, pool.head * 2 > pool.queue.count {
                pool.queue.removeFirst(pool.head)
                pool.head = 0
            }
            return job
        }
    }

    /// A thread's life: one easy handle, one transfer after another.
    private func work() {
        let handle = curl_easy_init()
        while true {
            let job = next()
            if job.cancelled.load(ordering: .acquiring) { continue }
            guard let handle else { job.finish(.notSent("the HTTP client could not start")); continue }
            job.finish(Self.transfer(job, on: handle))
        }
    }

    /// What the callbacks fill; reached only from the transfer's own thread.
    final class Sink {
        var body: [UInt8] = []
        var headers: [(name: String, value: String)] = []
        var tooLarge = false
        let job: Job

        init(job: Job) {
            self.job = job
        }
    }

    private static func transfer(_ job: Job, on handle: UnsafeMutableRawPointer) -> CurlOutcome {
        let request = job.request
        // Options go, connections and DNS answers stay.
        curl_easy_reset(handle)
        var headerList: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headerList) }
        for header in request.headers { headerList = curl_slist_append(headerList, "\(header.name): \(header.value)") }
        // No `Expect: 100-continue` round trip before a body.
        headerList = curl_slist_append(headerList, "Expect:")
        let sink = Sink(job: job)
        let context = Unmanaged.passRetained(sink)
        defer { context.release() }
        setBaseOptions(handle, url: request.url, timeout: request.timeout)
        _ = dg_curl_set_long(handle, CURLOPT_MAXCONNECTS, 2)
        if request.maxResponseBytes < Int.max {
            // Refused before the first byte when the answer announces its length.
            _ = dg_curl_set_size(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(request.maxResponseBytes))
        }
        _ = dg_curl_set_list(handle, CURLOPT_HTTPHEADER, headerList)
        switch request.method {
        case "GET": _ = dg_curl_set_long(handle, CURLOPT_HTTPGET, 1)
        case "HEAD": _ = dg_curl_set_long(handle, CURLOPT_NOBODY, 1)
        case "POST": _ = dg_curl_set_long(handle, CURLOPT_POST, 1)
        default: _ = dg_curl_set_string(handle, CURLOPT_CUSTOMREQUEST, request.method)
        }
        installCallbacks(on: handle, context: context.toOpaque())
        let body = request.body ?? (request.method == "POST" ? [] : nil)
        let code: CURLcode
        if let body {
            code = body.withUnsafeBufferPointer { buffer in
                _ = dg_curl_set_size(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(buffer.count))
                // curl reads the bytes during the transfer, inside this closure; an empty body still needs a pointer.
                _ = dg_curl_set_pointer(handle, CURLOPT_POSTFIELDS, buffer.baseAddress ?? UnsafePointer<UInt8>(bitPattern: 1))
                return curl_easy_perform(handle)
            }
        } else {
            code = curl_easy_perform(handle)
        }
        switch code {
        case CURLE_OK: return .answer(status: Int(dg_curl_status(handle)), headers: sink.headers, body: sink.body)
        case CURLE_FILESIZE_EXCEEDED: return .tooLarge
        case CURLE_WRITE_ERROR where sink.tooLarge: return .tooLarge
        case CURLE_OPERATION_TIMEDOUT: return .timedOut
        case CURLE_ABORTED_BY_CALLBACK: return .abandoned
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION,
             CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER, CURLE_SSL_CACERT_BADFILE, CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            return .notSent(describe(code))
        default: return .failed(describe(code))
        }
    }

    /// The body and header writers (bounded by the request's limit) and the progress check that ends a cancelled job;
    /// `context` is the transfer's retained `Sink`.
    private static func installCallbacks(on handle: UnsafeMutableRawPointer, context: UnsafeMutableRawPointer) {
        _ = dg_curl_set_writer(handle, { data, size, count, context in
            guard let data, let context else { return 0 }
            let sink = Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            guard sink.body.count + length <= sink.job.request.maxResponseBytes else {
                sink.tooLarge = true
                return 0   // curl stops the transfer (a write error)
            }
            data.withMemoryRebound(to: UInt8.self, capacity: length) { sink.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: length)) }
            return length
        }, context)
        _ = dg_curl_set_header_writer(handle, { data, size, count, context in
            guard let data, let context else { return 0 }
            let sink = Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            let line = data.withMemoryRebound(to: UInt8.self, capacity: length) { String(decoding: UnsafeBufferPointer(start: $0, count: length), as: UTF8.self) }
            if line.hasPrefix("HTTP/") {
                sink.headers.removeAll()   // a new response (after a 1xx): its own headers only
            } else if let colon = line.firstIndex(of: ":") {
                let name = line[..<colon].trimmingCharacters(in: .whitespaces)
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespacesAndNewlines)
                if !name.isEmpty { sink.headers.append((name, value)) }
            }
            return length
        }, context)
        _ = dg_curl_set_progress(handle, { context, _, _, _, _ in
            guard let context else { return 1 }
            return Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue().job.cancelled.load(ordering: .relaxed) ? 1 : 0
        }, context)
    }

    /// What every transfer of the gateway's sets: http(s) only, no signals (threads), no redirects followed (a
    /// caller that follows them checks each hop), the deadline for connecting and for the whole, any encoding.
    package static func setBaseOptions(_ handle: UnsafeMutableRawPointer, url: String, timeout: Duration) {
        let milliseconds = max(1, Int(timeout.components.seconds) * 1000 + Int(timeout.components.attoseconds / 1_000_000_000_000_000))
        _ = dg_curl_set_string(handle, CURLOPT_URL, url)
        _ = dg_curl_set_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        _ = dg_curl_set_long(handle, CURLOPT_NOSIGNAL, 1)
        _ = dg_curl_set_long(handle, CURLOPT_FOLLOWLOCATION, 0)
        _ = dg_curl_set_long(handle, CURLOPT_TIMEOUT_MS, milliseconds)
        _ = dg_curl_set_long(handle, CURLOPT_CONNECTTIMEOUT_MS, milliseconds)
        _ = dg_curl_set_string(handle, CURLOPT_ACCEPT_ENCODING, "")
    }

    /// `describe` for a caller that does not import curl (a `CURLcode`'s raw value).
    public static func describe(curlCode: UInt32) -> String {
        describe(CURLcode(rawValue: curlCode))
    }

    /// A short, fixed wording (never the library's own text, which may name addresses).
    static func describe(_ code: CURLcode) -> String {
        switch code {
        case CURLE_COULDNT_CONNECT: return "the connection was refused"
        case CURLE_COULDNT_RESOLVE_HOST: return "the host does not resolve"
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
             CURLE_SSL_CACERT_BADFILE: return "the TLS handshake failed"
        case CURLE_GOT_NOTHING: return "the server closed the connection without a reply"
        case CURLE_WEIRD_SERVER_REPLY, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE, CURLE_BAD_CONTENT_ENCODING:
            return "the server's reply was broken"
        case CURLE_UNSUPPORTED_PROTOCOL: return "only http and https are spoken"
        case CURLE_URL_MALFORMAT: return "the URL is malformed"
        default: return "the transfer failed"
        }
    }
}
