import Dispatch
import System

/// The link-preview fetch's guard against server-side request forgery: which addresses a host resolves to, and
/// whether each is a public one the gateway may connect to.
public enum PublicAddress {
    /// The host's addresses (a bracketed IPv6 literal taken as is), resolved off the cooperative pool.
    public static func resolve(_ host: String, port: Int) async -> [[UInt8]] {
        let trimmed = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        return await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: IPAddress.resolve(trimmed, port: port)) }
        }
    }

    /// Public unicast only: 4 bytes IPv4 or 16 bytes IPv6 in network order. IPv6 forms that carry an IPv4 address
    /// (compatible, mapped, NAT64, 6to4) are judged by that address; documentation and benchmark ranges are refused.
    public static func isPublic(_ address: [UInt8]) -> Bool {
        if address.count == 4 {
            let (a, b, c) = (address[0], address[1], address[2])
            switch a {
            case 0, 10, 127: return false
            case 100 where (64...127).contains(b): return false                             // shared (CGN)
            case 169 where b == 254: return false
            case 172 where (16...31).contains(b): return false
            case 192 where b == 168: return false
            case 192 where b == 0 && (c == 0 || c == 2): return false                        // IETF, TEST-NET-1
            case 192 where b == 88 && c == 99: return false                                   // 6to4 relay anycast
            case 198 where b == 18 || b == 19: return false                                   // benchmarking
            case 198 where b == 51 && c == 100: return false                                  // TEST-NET-2
            case 203 where b == 0 && c == 113: return false                                   // TEST-NET-3
            case 224...255: return false                                                      // multicast, reserved
            default: return true
            }
        }
        guard address.count == 16 else { return false }
        let zeroPrefix = address[0..<10].allSatisfy { $0 == 0 }
        if zeroPrefix && address[10] == 0 && address[11] == 0 { return false }                // ::/96 (::, ::1, ::a.b.c.d)
        if zeroPrefix && address[10] == 0xFF && address[11] == 0xFF {
            return isPublic(Array(address[12..<16]))                                            // ::ffff:a.b.c.d
        }
        if address[0..<4] == [0x00, 0x64, 0xFF, 0x9B] {                                       // 64:ff9b::/96 and 64:ff9b:1::/48
            return address[4..<12].allSatisfy { $0 == 0 } && isPublic(Array(address[12..<16]))
        }
        if address[0] == 0x20 && address[1] == 0x02 { return isPublic(Array(address[2..<6])) } // 2002::/16 (6to4)
        if address[0..<4] == [0x20, 0x01, 0x00, 0x00] { return false }                        // 2001::/32 (Teredo)
        if address[0..<4] == [0x20, 0x01, 0x0D, 0xB8] { return false }                        // 2001:db8::/32 (documentation)
        if address[0..<6] == [0x20, 0x01, 0x00, 0x02, 0x00, 0x00] { return false }           // 2001:2::/48 (benchmarking)
        if address[0..<8] == [0x01, 0x00, 0, 0, 0, 0, 0, 0] { return false }                  // 100::/64 (discard)
        if address[0] & 0xFE == 0xFC { return false }                                         // fc00::/7
        if address[0] == 0xFE && address[1] & 0x80 == 0x80 { return false }                  // fe80::/10, fec0::/10
        if address[0] == 0xFF { return false }                                                // multicast
        return true
    }
}
