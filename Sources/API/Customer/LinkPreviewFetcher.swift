import Dispatch
import Domain
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import JSON
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

public struct LinkPreviewSettings: Sendable {
    /// Private, loopback, link-local and other non-public targets are refused unless this is set.
    public var allowPrivateAddresses = false
    public var maxBytes = 512 * 1024
    public var timeout: Duration = .seconds(5)
    public var maxRedirects = 3

    public init() {}
}

/// An OpenGraph preview, and the message data a client sends as a `SENDBIRD_DESK_URL_PREVIEW` rich message.
struct LinkPreview: Sendable {
    let url: String
    let title: String?
    let description: String?
    let image: String?
    let siteName: String?

    var json: JSONValue {
        let body: JSONValue = .object([
            ("url", .string(url)), ("site_name", .string(siteName ?? "")), ("title", .string(title ?? "")),
            ("description", .string(description ?? "")), ("image", .string(image ?? "")),
        ])
        let data: JSONValue = .object([("type", .string(RichMessageType.urlPreview.rawValue)), ("body", body)])
        return .object([
            ("url", .string(url)), ("title", title.map(JSONValue.string) ?? .null),
            ("description", description.map(JSONValue.string) ?? .null), ("image", image.map(JSONValue.string) ?? .null),
            ("siteName", siteName.map(JSONValue.string) ?? .null),
            ("message", .object([("customType", .string(RichMessageType.customType)), ("data", .string(data.serialized()))])),
        ])
    }
}

/// Fetches pages for previews without becoming a proxy into the network it runs in: http(s) only, every target
/// address (after each redirect) checked against private, loopback, link-local, multicast and reserved ranges,
/// redirects followed by hand, the body capped in size and the whole fetch in time.
public final class LinkPreviewFetcher: Sendable {
    let settings: LinkPreviewSettings
    private let session: URLSession
    private let delegate: NoRedirects

    public init(settings: LinkPreviewSettings) {
        self.settings = settings
        delegate = NoRedirects()
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = Double(settings.timeout.components.seconds) + 1
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    static func refused(_ detail: String) -> APIError {
        APIError(status: 422, code: "url_not_allowed", title: "URL not allowed", detail: detail)
    }

    func preview(_ text: String) async throws -> LinkPreview {
        var current = try check(text)
        let deadline = ContinuousClock.now + settings.timeout
        for _ in 0...settings.maxRedirects {
            try await checkAddresses(current)
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw Self.unreachable("The page did not answer in time.") }
            let (status, location, body) = try await fetch(current, timeout: remaining)
            if (300..<400).contains(status), let location {
                guard let next = URL(string: location, relativeTo: current)?.absoluteURL else { throw Self.unreachable("The page redirects to an invalid URL.") }
                current = try check(next.absoluteString)
                continue
            }
            guard (200..<300).contains(status) else { throw Self.unreachable("The page answered HTTP \(status).") }
            return OpenGraph.parse(body, url: current)
        }
        throw Self.unreachable("The page redirects more than \(settings.maxRedirects) times.")
    }

    static func unreachable(_ detail: String) -> APIError {
        APIError(status: 422, code: "preview_unavailable", title: "No preview", detail: detail)
    }

    func check(_ text: String) throws -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = url.host, !host.isEmpty else {
            throw Self.refused("Only absolute http and https URLs can be previewed.")
        }
        if url.user != nil || url.password != nil { throw Self.refused("URLs with credentials cannot be previewed.") }
        return url
    }

    /// Resolves the host and refuses it when any address is not a public one (unless configured otherwise).
    func checkAddresses(_ url: URL) async throws {
        guard !settings.allowPrivateAddresses else { return }
        let host = url.host ?? ""
        let port = url.port ?? (url.scheme == "https" ? 443 : 80)
        let addresses = try await Self.resolve(host, port: port)
        guard !addresses.isEmpty else { throw Self.unreachable("The host \(host) does not resolve.") }
        for address in addresses where !Self.isPublic(address) {
            throw Self.refused("The host \(host) resolves to a private or reserved address.")
        }
    }

    static func resolve(_ host: String, port: Int) async throws -> [[UInt8]] {
        let trimmed = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                var hints = addrinfo()
                hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
                var result: UnsafeMutablePointer<addrinfo>?
                guard getaddrinfo(trimmed, String(port), &hints, &result) == 0 else {
                    continuation.resume(returning: [])
                    return
                }
                defer { freeaddrinfo(result) }
                var addresses: [[UInt8]] = []
                var cursor = result
                while let info = cursor {
                    if info.pointee.ai_family == AF_INET, let raw = info.pointee.ai_addr {
                        raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                            let value = v4.pointee.sin_addr.s_addr
                            addresses.append(withUnsafeBytes(of: value) { Array($0) })
                        }
                    } else if info.pointee.ai_family == AF_INET6, let raw = info.pointee.ai_addr {
                        raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                            addresses.append(withUnsafeBytes(of: v6.pointee.sin6_addr) { Array($0) })
                        }
                    }
                    cursor = info.pointee.ai_next
                }
                continuation.resume(returning: addresses)
            }
        }
    }

    /// Public unicast only: 4 bytes IPv4 or 16 bytes IPv6 in network order.
    static func isPublic(_ address: [UInt8]) -> Bool {
        if address.count == 4 {
            let (a, b) = (address[0], address[1])
            switch a {
            case 0, 10, 127: return false
            case 100 where (64...127).contains(b): return false
            case 169 where b == 254: return false
            case 172 where (16...31).contains(b): return false
            case 192 where b == 168: return false
            case 192 where b == 0 && address[2] == 0: return false
            case 198 where b == 18 || b == 19: return false
            case 224...255: return false
            default: return true
            }
        }
        guard address.count == 16 else { return false }
        if address.allSatisfy({ $0 == 0 }) { return false }                                   // ::
        if address[0..<15].allSatisfy({ $0 == 0 }) && address[15] == 1 { return false }       // ::1
        if address[0..<10].allSatisfy({ $0 == 0 }) && address[10] == 0xFF && address[11] == 0xFF {
            return isPublic(Array(address[12..<16]))                                            // IPv4-mapped
        }
        if address[0] & 0xFE == 0xFC { return false }                                         // fc00::/7
        if address[0] == 0xFE && address[1] & 0xC0 == 0x80 { return false }                  // fe80::/10
        if address[0] == 0xFF { return false }                                                // multicast
        return true
    }

    private func fetch(_ url: URL, timeout: Duration) async throws -> (Int, String?, [UInt8]) {
        var request = URLRequest(url: url, timeoutInterval: Double(timeout.components.seconds) + 1)
        request.setValue("desk-gateway link preview", forHTTPHeaderField: "User-Agent")
        request.setValue("text/html, application/xhtml+xml;q=0.9", forHTTPHeaderField: "Accept")
        request.setValue("bytes=0-\(settings.maxBytes - 1)", forHTTPHeaderField: "Range")
        let maxBytes = settings.maxBytes
        let prepared = request
        let result: (Data, URLResponse)? = try await withThrowingTaskGroup(of: (Data, URLResponse)?.self) { group in
            group.addTask { [session] in try await session.data(for: prepared) }
            group.addTask {
                try await Task.sleep(for: timeout)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
        guard let (data, response) = result, let http = response as? HTTPURLResponse else {
            throw Self.unreachable("The page did not answer in time.")
        }
        let location = http.value(forHTTPHeaderField: "Location")
        return (http.statusCode, location, Array(data.prefix(maxBytes)))
    }
}

/// Keeps URLSession from following redirects: each hop is checked by the fetcher first.
final class NoRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    func urlSession(_ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse,
                    newRequest request: URLRequest, completionHandler: @escaping @Sendable (URLRequest?) -> Void) {
        completionHandler(nil)
    }
}

/// Reads `<meta property="og:…" content="…">` and `<title>` from the head of an HTML page.
enum OpenGraph {
    static func parse(_ bytes: [UInt8], url: URL) -> LinkPreview {
        let html = String(decoding: bytes, as: UTF8.self)
        var meta: [String: String] = [:]
        var searchStart = html.startIndex
        while let open = html.range(of: "<meta", options: .caseInsensitive, range: searchStart..<html.endIndex) {
            guard let close = html[open.upperBound...].firstIndex(of: ">") else { break }
            let tag = String(html[open.upperBound..<close])
            let attributes = attributesOf(tag)
            if let key = (attributes["property"] ?? attributes["name"])?.lowercased(), let content = attributes["content"], meta[key] == nil {
                meta[key] = decodeEntities(content)
            }
            searchStart = close
        }
        var title = meta["og:title"] ?? meta["twitter:title"]
        if title == nil, let start = html.range(of: "<title", options: .caseInsensitive),
           let startClose = html[start.upperBound...].firstIndex(of: ">"),
           let end = html.range(of: "</title>", options: .caseInsensitive, range: startClose..<html.endIndex) {
            title = decodeEntities(String(html[html.index(after: startClose)..<end.lowerBound]).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        var image = meta["og:image"] ?? meta["twitter:image"]
        if let relative = image, let absolute = URL(string: relative, relativeTo: url)?.absoluteString { image = absolute }
        return LinkPreview(url: meta["og:url"] ?? url.absoluteString, title: title,
                           description: meta["og:description"] ?? meta["description"], image: image,
                           siteName: meta["og:site_name"] ?? url.host)
    }

    static func attributesOf(_ tag: String) -> [String: String] {
        var result: [String: String] = [:]
        let scalars = Array(tag.unicodeScalars)
        var index = 0
        while index < scalars.count {
            while index < scalars.count, scalars[index] == " " || scalars[index] == "\n" || scalars[index] == "\t" || scalars[index] == "/" { index += 1 }
            var name = ""
            while index < scalars.count, scalars[index] != "=", scalars[index] != " ", scalars[index] != "/" {
                name.unicodeScalars.append(scalars[index]); index += 1
            }
            guard index < scalars.count, scalars[index] == "=" else { index += 1; continue }
            index += 1
            var value = ""
            if index < scalars.count, scalars[index] == "\"" || scalars[index] == "'" {
                let quote = scalars[index]
                index += 1
                while index < scalars.count, scalars[index] != quote { value.unicodeScalars.append(scalars[index]); index += 1 }
                index += 1
            } else {
                while index < scalars.count, scalars[index] != " " { value.unicodeScalars.append(scalars[index]); index += 1 }
            }
            if !name.isEmpty { result[name.lowercased()] = value }
        }
        return result
    }

    static func decodeEntities(_ text: String) -> String {
        text.replacingOccurrences(of: "&quot;", with: "\"").replacingOccurrences(of: "&#39;", with: "'")
            .replacingOccurrences(of: "&lt;", with: "<").replacingOccurrences(of: "&gt;", with: ">")
            .replacingOccurrences(of: "&amp;", with: "&")
    }
}
