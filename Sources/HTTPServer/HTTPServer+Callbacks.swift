internal import CMicroHTTPD
import Synchronization

/// libmicrohttpd's access handler: capture-free, finds the server through `cls`. The server outlives its daemon, so
/// it is used without a retain: both worker threads taking one on the same object made its count's cache line bounce
/// between the cores on every call.
let httpAccessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, version, uploadData, uploadDataSize, conCls in
    guard let cls, let connection, let uploadDataSize, let conCls else { return .NO }
    return Unmanaged<HTTPServer>.fromOpaque(cls)._withUnsafeGuaranteedRef { server in
        server.handle(connection: connection, url: url, method: method, version: version, uploadData: uploadData,
                      uploadDataSize: uploadDataSize, conCls: conCls)
    }
}

/// Releases the per-request context once libmicrohttpd is done with the request.
let httpRequestCompleted: MHD_RequestCompletedCallback = { cls, _, conCls, _ in
    guard let cls, let conCls, let raw = conCls.pointee else { return }
    let context = Unmanaged<RequestContext>.fromOpaque(raw).takeRetainedValue()
    conCls.pointee = nil
    Unmanaged<HTTPServer>.fromOpaque(cls)._withUnsafeGuaranteedRef { server in
        if context.dispatched, context.claimed.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged {
            // The client went away while the work was running; nobody will resume this connection.
            _ = server.suspended.withLock { $0.removeValue(forKey: ObjectIdentifier(context)) }
        }
        server.liveContexts.subtract(1, ordering: .relaxed)
    }
}

/// A query argument's name or value copied out of libmicrohttpd's memory at the size it measured (no `strlen`).
private func text(_ bytes: UnsafePointer<CChar>?, _ size: Int) -> String {
    guard let bytes, size > 0 else { return "" }
    return bytes.withMemoryRebound(to: UInt8.self, capacity: size) {
        String(decoding: UnsafeBufferPointer(start: $0, count: size), as: UTF8.self)
    }
}

/// What the checks of a request's header block found, before any routing (see `dg_mhd_check_headers`).
struct HeaderChecks {
    var raw: Int32 = 0
    var framing = dg_mhd_framing()
    /// RFC 9110: the method is a token (`dg_mhd_is_token`, the same test as the header names'), and not a long one.
    var methodIsToken = true
}

extension HTTPServer {
    /// The longest method accepted; longer ones are refused before any bookkeeping (they would only be label noise).
    static let maxMethodLength = 32

    /// Why `dg_mhd_check_headers` refused the request line or header block, in words.
    static func rawProblem(_ code: Int32) -> String? {
        switch code {
        case 0: return nil
        case 1: return "The request target holds a NUL byte."
        case 2: return "A header line holds a NUL byte, is folded onto the next line (obs-fold), or leaves bytes behind its end."
        case 4: return "The query has more than \(DG_MHD_MAX_ARGUMENTS) arguments."
        // Bytes left after a CR LF block: a bare LF ended it, or libmicrohttpd skipped a line without a name.
        default: return "A header line has no name, or the header lines end in two ways (CR LF and a bare LF): send Name: value lines, each ended by CR LF."
        }
    }

    /// RFC 9112 §2.3: HTTP/1.0 and 1.x above it are spoken (1.1 rules for 1.1 and up); another major version is not.
    enum Version {
        case http10
        case http11OrLater
        case unsupported
    }

    static func version(_ text: UnsafePointer<CChar>?) -> Version {
        guard let text else { return .http10 }
        if strcmp(text, "HTTP/1.1") == 0 { return .http11OrLater }
        if strcmp(text, "HTTP/1.0") == 0 { return .http10 }
        let value = String(cString: text)
        guard value.hasPrefix("HTTP/1."), let minor = Int(value.dropFirst(7)), minor >= 0 else { return .unsupported }
        return minor == 0 ? .http10 : .http11OrLater
    }

    /// An absolute-form target (`GET http://host/path`, RFC 9112 §3.2.2) is routed by its path.
    static func originForm(_ target: String) -> String {
        // The common case, a path, costs one byte's look (this runs for every request).
        if target.utf8.first == UInt8(ascii: "/") { return target }
        for scheme in ["http://", "https://"] where target.count > scheme.count && target.lowercased().hasPrefix(scheme) {
            let rest = target.dropFirst(scheme.count)
            guard let slash = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) else { return "/" }
            return rest[slash] == "/" ? String(rest[slash...]) : "/" + rest[slash...]
        }
        return target
    }

    /// The path without empty segments (`//v1//sessions/` is `/v1/sessions`), as the router matches it. Every step
    /// that reads the path — the rate limits, the sign-in and failed-authentication limits, idempotency keys — then
    /// sees the route that answers: `/v1/sessions/` had been a sign-in the sign-in limit did not count, and
    /// `//v1/tickets` a read no rate limit applied to.
    static func routedPath(_ path: String) -> String {
        // The common case, nothing to drop, costs one walk over the bytes and no new string.
        let folds = path.utf8.withContiguousStorageIfAvailable(hasEmptySegment) ?? Array(path.utf8).withUnsafeBufferPointer(hasEmptySegment)
        guard folds else { return path }
        let segments = path.split(separator: "/", omittingEmptySubsequences: true)
        return segments.isEmpty ? "/" : "/" + segments.joined(separator: "/")
    }

    /// A path beginning with '/' that holds `//` or ends with '/'. A target not beginning with '/' is left as it came,
    /// for the framing checks to refuse.
    private static func hasEmptySegment(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let slash = UInt8(ascii: "/")
        guard bytes.count > 1, bytes[0] == slash else { return false }
        if bytes[bytes.count - 1] == slash { return true }
        for index in 1..<bytes.count where bytes[index] == slash && bytes[index - 1] == slash { return true }
        return false
    }

    /// Requests refused before routing, with the connection closed: NUL bytes (a C string would cut the value short
    /// into another valid one) and message framing that two parties could read two ways (request smuggling).
    static func framingProblem(_ request: HTTPRequest, http11: Bool, checks: HeaderChecks) -> String? {
        if let raw = rawProblem(checks.raw) { return raw }
        // `dg_mhd_unescape` turns a value holding %00 into the single byte 0x7F; a DEL among other bytes is data.
        if request.path == "\u{7F}" || request.query.contains(where: { $0.value == "\u{7F}" || $0.name == "\u{7F}" }) {
            return "The request target holds a NUL byte."
        }
        if !checks.methodIsToken {
            return "The method must be a token of at most \(maxMethodLength) characters."
        }
        // RFC 9112 §3.2: a path begins with '/' (or the target is absolute, or '*' for OPTIONS alone); `v1/tickets` had
        // been routed as `/v1/tickets` by a router that skips empty segments, past every step that reads the path's prefix.
        if request.path.utf8.first != UInt8(ascii: "/"), request.path != "*" || request.method != "OPTIONS" {
            return "The request target must be a path beginning with '/' (or an absolute URL; '*' only with OPTIONS)."
        }
        // The fields were checked in C as they came out of libmicrohttpd, in one pass over their bytes.
        let framing = checks.framing
        switch framing.problem {
        case 1:
            // RFC 9112 §5.1: no whitespace between a field name and its colon ("Transfer-Encoding : chunked").
            return "A header name holds a space or a character that is not allowed."
        case 2:
            let index = Int(framing.index)
            let name = index < request.headers.count ? request.headers[index].name : "a"
            return "The \(name) header holds a control character (a bare CR, LF, DEL or another): refused, never read two ways."
        case 3:
            // Digits only, as libmicrohttpd frames the body by it (CMicroHTTPDFixes hides any other value from it, so
            // the request must be refused here).
            return "Content-Length must be a decimal number of bytes."
        case 4:
            return "Content-Length is given more than once with different values."
        default:
            break
        }
        // RFC 9112 §3.2: exactly one Host in HTTP/1.1 (and any 1.x above 1.0).
        if http11, framing.hosts != 1 { return framing.hosts == 0 ? "Host is required." : "Host is given more than once." }
        guard framing.codings > 0 else { return nil }
        if framing.lengths > 0 { return "Content-Length and Transfer-Encoding must not both be sent." }
        // Compared in ASCII case only and with spaces after it kept, as libmicrohttpd compares it.
        if framing.codings > 1 || framing.chunked == 0 { return "The only transfer coding accepted is chunked." }
        return nil
    }

    func handle(connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?,
                uploadData: UnsafePointer<CChar>?, uploadDataSize: UnsafeMutablePointer<Int>,
                conCls: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> MHD_Result {
        guard let raw = conCls.pointee else {
            return accept(connection: connection, url: url, method: method, version: version, conCls: conCls)
        }
        let context = Unmanaged<RequestContext>.fromOpaque(raw).takeUnretainedValue()
        if uploadDataSize.pointee > 0 {
            receive(uploadData, size: uploadDataSize.pointee, into: context)
            uploadDataSize.pointee = 0
            return .YES
        }
        if let response = context.response {
            context.response = nil
            return queue(response, on: connection)
        }
        if context.dispatched { return .YES }
        return dispatch(context, on: connection)
    }

    /// The first call: headers only. Answering here would cost keep-alive, so only early rejects happen here.
    private func accept(connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?, version: UnsafePointer<CChar>?,
                        conCls: UnsafeMutablePointer<UnsafeMutableRawPointer?>) -> MHD_Result {
        var checks = HeaderChecks()
        checks.methodIsToken = method.map { dg_mhd_is_token($0, Self.maxMethodLength) != 0 } ?? true
        let request = HTTPRequest(method: method.map { String(cString: $0) } ?? "GET",
                                  path: url.map { Self.routedPath(Self.originForm(String(cString: $0))) } ?? "/",
                                  query: values(of: connection, kind: .GET_ARGUMENT_KIND),
                                  lowercasedHeaders: headers(of: connection, version: version, checks: &checks),
                                  remoteAddress: clientAddress(of: connection))
        // Read once: the refusal and the reading of an oversized body both go by it.
        let declared = Self.declaredLength(request, checks: checks)
        let refusal = refusal(of: request, version: version, checks: checks, declared: declared)
        let oversized = (declared ?? 0) > configuration.bodyLimitBytes
        // The request's last use: moved into the context, not copied.
        let context = RequestContext(request: consume request)
        context.connection = connection
        conCls.pointee = Unmanaged.passRetained(context).toOpaque()
        liveContexts.add(1, ordering: .relaxed)
        guard let refusal else {
            // Over the limit, but read and dropped (`drainsOversizedBody`): 413 once it is in, the connection kept.
            context.tooLarge = oversized
            return .YES
        }
        context.tooLarge = true
        return queue(refusal, on: connection, close: true)
    }

    /// The Content-Length a request declares (`Int.max` for more than 18 digits), or nil without one.
    private static func declaredLength(_ request: HTTPRequest, checks: HeaderChecks) -> Int? {
        guard checks.framing.lengths > 0, let length = request.header("content-length") else { return nil }
        return length.utf8.count > 18 ? .max : Int(length) ?? .max
    }

    /// Whether a body declared over the limit is read and dropped before the 413 rather than refused at once. A
    /// client that sends its body without waiting for an answer (no `Expect: 100-continue`: proxies, most HTTP
    /// libraries) loses an answer sent while it is still writing: the connection closed under it resets, and the
    /// reset drops the unread 413 (a proxy is left with no answer to pass on). Up to four times the limit the body
    /// is read (as a chunked one always is); beyond that, or for a client waiting to be told, the 413 comes at once.
    private func drainsOversizedBody(_ request: HTTPRequest, declared: Int) -> Bool {
        request.header("expect") == nil && declared <= configuration.bodyLimitBytes * 4
    }

    /// The answer for a request refused before its body is read (the connection is closed after it), or nil.
    private func refusal(of request: HTTPRequest, version: UnsafePointer<CChar>?, checks: HeaderChecks,
                         declared: Int?) -> HTTPResponse? {
        if openConnections > configuration.connectionLimit {
            return responder.overloaded(request)
        }
        // Compared as a C string: no String made per request for the common versions.
        let spoken = Self.version(version)
        if spoken == .unsupported {
            var refused = responder.badRequest(request, reason: "Only HTTP/1.x is spoken here: send HTTP/1.1.")
            refused.status = 505
            return refused
        }
        if let problem = Self.framingProblem(request, http11: spoken == .http11OrLater, checks: checks) {
            return responder.badRequest(request, reason: problem)
        }
        // More than 18 digits is refused as too large too (libmicrohttpd is never shown such a length).
        if let declared, declared > configuration.bodyLimitBytes, !drainsOversizedBody(request, declared: declared) {
            return responder.bodyTooLarge(request, limit: configuration.bodyLimitBytes)
        }
        return nil
    }

    /// A piece of the body, kept up to the limit; past it the rest is read and dropped.
    private func receive(_ uploadData: UnsafePointer<CChar>?, size: Int, into context: RequestContext) {
        guard !context.tooLarge else { return }
        if context.request.body.count + size > configuration.bodyLimitBytes {
            // Chunked bodies have no Content-Length: keep reading, drop the bytes, answer 413 at the end.
            context.tooLarge = true
            context.request.body = []
        } else if let uploadData {
            uploadData.withMemoryRebound(to: UInt8.self, capacity: size) {
                context.request.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: size))
            }
        }
    }

    /// The whole request is in: answer now, or suspend the connection while the responder's async work runs.
    private func dispatch(_ context: RequestContext, on connection: OpaquePointer) -> MHD_Result {
        // The request is complete (headers and body): from here the idle timeout applies, not the request deadline.
        if configuration.requestTimeoutSeconds > 0 {
            dg_mhd_headers_done(connection, UInt32(max(0, configuration.connectionTimeoutSeconds)))
        }
        if context.tooLarge {
            return queue(responder.bodyTooLarge(context.request, limit: configuration.bodyLimitBytes), on: connection)
        }

        switch context.withRequest({ responder.respond(inPlace: &$0) }) {
        case .now(let response):
            return queue(response, on: connection)
        case .later(let work):
            context.dispatched = true
            suspended.withLock { $0[ObjectIdentifier(context)] = context }
            MHD_suspend_connection(connection)
            Task { [self] in
                let response = await work()
                finish(context, with: response)
            }
            return .YES
        }
    }

    private func values(of connection: OpaquePointer, kind: MHD_ValueKind) -> [(name: String, value: String)] {
        // Counted first: most requests have no query, and those need no copy.
        let count = Int(MHD_get_connection_values(connection, kind, nil, nil))
        guard count > 0 else { return [] }
        return withUnsafeTemporaryAllocation(of: dg_mhd_pair.self, capacity: count) { buffer in
            let filled = dg_mhd_pairs(connection, kind, buffer.baseAddress, count)
            var strings: [(name: String, value: String)] = []
            strings.reserveCapacity(filled)
            for pair in UnsafeBufferPointer(rebasing: buffer[..<filled]) {
                strings.append((text(pair.name, pair.name_size), text(pair.value, pair.value_size)))
            }
            return strings
        }
    }

    /// The request's headers, names lowercased, with the checks of the header block run over the same pairs (the
    /// line structure libmicrohttpd left in its buffer and the framing rules): `checks` says what they found.
    private func headers(of connection: OpaquePointer, version: UnsafePointer<CChar>?, checks: inout HeaderChecks)
        -> HTTPHeaders {
        let count = Int(MHD_get_connection_values(connection, .HEADER_KIND, nil, nil))
        return withUnsafeTemporaryAllocation(of: dg_mhd_pair.self, capacity: max(count, 1)) { buffer in
            let filled = dg_mhd_pairs(connection, .HEADER_KIND, buffer.baseAddress, count)
            checks.raw = dg_mhd_check_headers(connection, version, buffer.baseAddress, filled, &checks.framing)
            return HTTPHeaders(pairs: UnsafeBufferPointer(rebasing: buffer[..<filled]))
        }
    }

    private func clientAddress(of connection: OpaquePointer) -> String? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
            let length = dg_mhd_client_ip(connection, buffer.baseAddress, 64)
            guard length > 0 else { return nil }
            return String(decoding: UnsafeRawBufferPointer(start: buffer.baseAddress, count: length), as: UTF8.self)
        }
    }

    private func queue(_ response: HTTPResponse, on connection: OpaquePointer, close: Bool = false) -> MHD_Result {
        let handle: OpaquePointer?
        if let stream = response.stream {
            let reader = StreamReader(stream: stream, connection: connection, registry: streams)
            handle = MHD_create_response_from_callback(UInt64.max, 32 * 1024, streamContentReader,
                                                       Unmanaged.passRetained(reader).toOpaque(), streamReaderFree)
        } else if response.body.count >= HeldBody.threshold {
            handle = HeldBody.response(response.body)
        } else {
            handle = response.body.withUnsafeBytes { bytes in
                MHD_create_response_from_buffer(bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress),
                                                .RESPMEM_MUST_COPY)
            }
        }
        guard let handle else { return .NO }
        defer { MHD_destroy_response(handle) }
        // By index: a `for header in` loop copies each pair out (both strings retained, then released). withCString
        // lends a native string's own bytes; passing the String makes a C copy of each.
        let headers = response.headers
        for index in headers.indices {
            _ = headers[index].name.withCString { name in headers[index].value.withCString { MHD_add_response_header(handle, name, $0) } }
        }
        if close || draining.load(ordering: .relaxed) {
            _ = MHD_add_response_header(handle, "Connection", "close")
        }
        return MHD_queue_response(connection, UInt32(response.status), handle)
    }
}
