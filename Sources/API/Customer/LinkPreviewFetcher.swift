import CurlHTTP
import Domain
import Foundation
import JSON
import Synchronization

public struct LinkPreviewSettings: Sendable {
    /// Private, loopback, link-local and other non-public targets are refused unless this is set.
    public var allowPrivateAddresses: Bool
    public var maxBytes: Int
    public var timeout: Duration
    /// Previews fetched at once by this instance; more are answered 503 with `Retry-After`.
    public var concurrency: Int
    public var maxRedirects = 3

    public init(allowPrivateAddresses: Bool, maxBytes: Int, timeout: Duration, concurrency: Int) {
        self.allowPrivateAddresses = allowPrivateAddresses
        self.maxBytes = maxBytes
        self.timeout = timeout
        self.concurrency = concurrency
    }
}

/// An OpenGraph preview, and the message data a client sends as a `SENDBIRD_DESK_URL_PREVIEW` rich message.
struct LinkPreview: Sendable {
    /// Longest title, description and site name kept from a page (characters).
    static let maxTitle = 300
    static let maxDescription = 1000
    static let maxSiteName = 200

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
    private let running = Mutex(0)

    public init(settings: LinkPreviewSettings) {
        self.settings = settings
    }

    static func refused(_ detail: String) -> APIError {
        APIError(.urlNotAllowed, detail: detail)
    }

    func preview(_ text: String) async throws -> LinkPreview {
        var current = try check(text)
        let admitted = running.withLock { count in
            guard count < settings.concurrency else { return false }
            count += 1
            return true
        }
        guard admitted else {
            throw APIError(.previewsBusy, detail: "This instance is fetching as many previews as it allows (LINK_PREVIEW_CONCURRENCY); retry shortly.",
                           headers: [("Retry-After", "1")])
        }
        defer { running.withLock { $0 -= 1 } }
        let deadline = ContinuousClock.now + settings.timeout
        for _ in 0...settings.maxRedirects {
            let addresses = try await checkAddresses(current)
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw Self.unreachable("The page did not answer in time.") }
            let (status, location, body) = try await fetch(current, pinned: addresses, timeout: remaining)
            if (300..<400).contains(status) {
                guard let location, let next = URL(string: location, relativeTo: current)?.absoluteURL else {
                    throw Self.unreachable("The page redirects to an invalid URL.")
                }
                current = try check(next.absoluteString)
                continue
            }
            guard (200..<300).contains(status) else { throw Self.unreachable("The page answered HTTP \(status).") }
            return OpenGraph.parse(body, url: current)
        }
        throw Self.unreachable("The page redirects more than \(settings.maxRedirects) times.")
    }

    static func unreachable(_ detail: String) -> APIError {
        APIError(.previewUnavailable, detail: detail)
    }

    /// The page could not be fetched at all (refused connection, TLS failure, empty or broken reply).
    static func fetchFailed(_ detail: String) -> APIError {
        APIError(.previewFetchFailed, detail: detail)
    }

    func check(_ text: String) throws -> URL {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = url.host, !host.isEmpty else {
            throw Self.refused("Only absolute http and https URLs can be previewed.")
        }
        if url.user != nil || url.password != nil { throw Self.refused("URLs with credentials cannot be previewed.") }
        return url
    }

    /// Resolves the host and refuses it when any address is not a public one (unless configured otherwise). The fetch
    /// then connects to exactly these addresses, so a DNS answer that changes in between is not followed. With private
    /// targets allowed nothing is checked or pinned (empty result).
    func checkAddresses(_ url: URL) async throws -> [[UInt8]] {
        guard !settings.allowPrivateAddresses else { return [] }
        let host = url.host ?? ""
        let port = url.port ?? (url.scheme == "https" ? 443 : 80)
        let addresses = await PublicAddress.resolve(host, port: port)
        guard !addresses.isEmpty else { throw Self.unreachable("The host \(host) does not resolve.") }
        for address in addresses where !PublicAddress.isPublic(address) {
            throw Self.refused("The host \(host) resolves to a private or reserved address.")
        }
        return addresses
    }

    private func fetch(_ url: URL, pinned addresses: [[UInt8]], timeout: Duration) async throws -> (Int, String?, [UInt8]) {
        let request = PageFetch.Request(url: url.absoluteString, host: url.host ?? "", port: url.port ?? (url.scheme == "https" ? 443 : 80),
                                        addresses: addresses, maxBytes: settings.maxBytes, timeout: timeout,
                                        headers: ["User-Agent: desk-gateway link preview", "Accept: text/html, application/xhtml+xml;q=0.9",
                                                  "Range: bytes=0-\(settings.maxBytes - 1)"])
        switch await PageFetch.run(request) {
        case .page(let status, let location, let body): return (status, location, body)
        case .timedOut: throw Self.unreachable("The page did not answer in time.")
        case .failed(let reason): throw Self.fetchFailed("The page could not be fetched: \(reason).")
        }
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
        let image = (meta["og:image"] ?? meta["twitter:image"]).flatMap { webURL($0, relativeTo: url) }
        return LinkPreview(url: meta["og:url"].flatMap { webURL($0, relativeTo: url) } ?? url.absoluteString,
                           title: capped(title, LinkPreview.maxTitle),
                           description: capped(meta["og:description"] ?? meta["description"], LinkPreview.maxDescription),
                           image: image, siteName: capped(meta["og:site_name"] ?? url.host, LinkPreview.maxSiteName))
    }

    /// An absolute http(s) URL of at most 2048 bytes, or nil: `javascript:`, `data:` and the like never reach a client.
    static func webURL(_ text: String, relativeTo base: URL) -> String? {
        guard let absolute = URL(string: text.trimmingCharacters(in: .whitespacesAndNewlines), relativeTo: base)?.absoluteURL,
              let scheme = absolute.scheme?.lowercased(), scheme == "http" || scheme == "https", absolute.host != nil else { return nil }
        let value = absolute.absoluteString
        return value.utf8.count <= 2048 ? value : nil
    }

    /// At most `limit` code points, with an ellipsis when cut; cut between Characters, so no accent or emoji
    /// sequence is split (a single Character may hold any number of code points).
    static func capped(_ text: String?, _ limit: Int) -> String? {
        guard let text, text.unicodeScalars.count > limit else { return text }
        var kept = ""
        var length = 0
        for character in text {
            let size = character.unicodeScalars.count
            if length + size > limit - 1 { break }
            kept.append(character)
            length += size
        }
        return kept + "…"
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
