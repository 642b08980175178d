#if canImport(Glibc)
import Glibc
#endif

/// IP addresses as bytes (4 for IPv4, 16 for IPv6), parsed, printed and resolved by the C library.
public enum IPAddress {
    /// The bytes of an IPv4 or IPv6 address in text, or nil.
    public static func bytes(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: v6) { Array($0) } }
        return nil
    }

    /// The usual text of 4 or 16 address bytes, or nil for any other length.
    public static func text(_ address: [UInt8]) -> String? {
        guard address.count == 4 || address.count == 16 else { return nil }
        let family = address.count == 4 ? AF_INET : AF_INET6
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let converted = address.withUnsafeBytes { inet_ntop(family, $0.baseAddress, &text, socklen_t(text.count)) }
        guard converted != nil else { return nil }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Every address `host` resolves to for a TCP connection on `port` (blocking: call it off the cooperative pool);
    /// empty when it does not resolve.
    public static func resolve(_ host: String, port: Int) -> [[UInt8]] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &result) == 0 else { return [] }
        defer { freeaddrinfo(result) }
        var addresses: [[UInt8]] = []
        var cursor = result
        while let info = cursor {
            if info.pointee.ai_family == AF_INET, let raw = info.pointee.ai_addr {
                raw.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                    addresses.append(withUnsafeBytes(of: v4.pointee.sin_addr.s_addr) { Array($0) })
                }
            } else if info.pointee.ai_family == AF_INET6, let raw = info.pointee.ai_addr {
                raw.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                    addresses.append(withUnsafeBytes(of: v6.pointee.sin6_addr) { Array($0) })
                }
            }
            cursor = info.pointee.ai_next
        }
        return addresses
    }
}
