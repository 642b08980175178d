internal import CCurl
import Foundation
import System

/// One page fetch for a link preview, with libcurl's easy API on a thread of its own (never on Swift's task pool).
/// The body is read as a stream and the transfer stops at `maxBytes` whatever the server sends (`Range` or not);
/// curl enforces the deadline itself, so ending a fetch never waits on anything else; redirects are not followed
/// (the caller checks each hop); only http and https are spoken; and with `addresses` given, curl connects to exactly
/// those (the ones the caller checked), not to whatever DNS answers a moment later.
public enum PageFetch {
    public struct Request: Sendable {
        let url: String
        let host: String
        let port: Int
        /// 4- or 16-byte addresses to connect to; empty lets curl resolve the host.
        let addresses: [[UInt8]]
        let maxBytes: Int
        let timeout: Duration
        let headers: [String]

        public init(url: String, host: String, port: Int, addresses: [[UInt8]], maxBytes: Int, timeout: Duration, headers: [String]) {
            (self.url, self.host, self.port, self.addresses) = (url, host, port, addresses)
            (self.maxBytes, self.timeout, self.headers) = (maxBytes, timeout, headers)
        }
    }

    public enum Outcome: Sendable {
        case page(status: Int, location: String?, body: [UInt8])
        case timedOut
        case failed(String)
    }

    /// What the write callback fills; reached only from the fetch's own thread.
    final class Sink {
        var body: [UInt8] = []
        let maxBytes: Int
        var full = false

        init(maxBytes: Int) {
            self.maxBytes = maxBytes
            body.reserveCapacity(min(maxBytes, 64 * 1024))
        }
    }

    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    public static func run(_ request: Request) async -> Outcome {
        _ = globalInit
        return await withCheckedContinuation { continuation in
            Threads.start("link-preview") { continuation.resume(returning: perform(request)) }
        }
    }

    private static func perform(_ request: Request) -> Outcome {
        guard let handle = curl_easy_init() else { return .failed("the fetcher could not start") }
        defer { curl_easy_cleanup(handle) }
        var headerList: UnsafeMutablePointer<curl_slist>?
        var resolveList: UnsafeMutablePointer<curl_slist>?
        defer {
            curl_slist_free_all(headerList)
            curl_slist_free_all(resolveList)
        }
        for header in request.headers { headerList = curl_slist_append(headerList, header) }
        if !request.addresses.isEmpty {
            let pinned = request.addresses.compactMap(format).joined(separator: ",")
            resolveList = curl_slist_append(resolveList, "\(request.host):\(request.port):\(pinned)")
        }
        let sink = Sink(maxBytes: request.maxBytes)
        let context = Unmanaged.passRetained(sink)
        defer { context.release() }
        CurlClient.setBaseOptions(handle, url: request.url, timeout: request.timeout)
        _ = dg_curl_set_long(handle, CURLOPT_BUFFERSIZE, 64 * 1024)
        _ = dg_curl_set_list(handle, CURLOPT_HTTPHEADER, headerList)
        if let resolveList { _ = dg_curl_set_list(handle, CURLOPT_RESOLVE, resolveList) }
        _ = dg_curl_set_writer(handle, { data, size, count, context in
            guard let data, let context else { return 0 }
            let sink = Unmanaged<Sink>.fromOpaque(context).takeUnretainedValue()
            let length = size * count
            let take = min(length, sink.maxBytes - sink.body.count)
            data.withMemoryRebound(to: UInt8.self, capacity: take) { sink.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: take)) }
            if sink.body.count >= sink.maxBytes {
                sink.full = true
                return 0   // anything but `length` makes curl stop the transfer at once
            }
            return length
        }, context.toOpaque())
        let code = curl_easy_perform(handle)
        let status = Int(dg_curl_status(handle))
        let location = dg_curl_redirect(handle).map { String(cString: $0) }
        switch code {
        case CURLE_OK:
            return .page(status: status, location: location, body: sink.body)
        case CURLE_WRITE_ERROR where sink.full:
            return .page(status: status, location: location, body: sink.body)
        case CURLE_OPERATION_TIMEDOUT:
            return .timedOut
        default:
            return .failed(describe(code))
        }
    }

    /// An address as CURLOPT_RESOLVE takes it (IPv6 in brackets).
    private static func format(_ address: [UInt8]) -> String? {
        guard let string = IPAddress.text(address) else { return nil }
        return address.count == 4 ? string : "[\(string)]"
    }

    /// A short, fixed wording for the client (never the library's own text).
    static func describe(_ code: CURLcode) -> String {
        CurlClient.describe(curlCode: code.rawValue)
    }
}
