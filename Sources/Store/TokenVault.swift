import Crypto
import Domain

/// Bearer tokens and sealed Desk tokens. Tokens are 256 random bits, base64url; only their SHA-256 is stored.
/// Desk session tokens are sealed with AES-256-GCM under the gateway's session key, bound to the session's token hash.
public struct TokenVault: Sendable {
    private let keyBytes: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    public init(key: [UInt8]) {
        keyBytes = key
    }

    public static func generateKey() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    public static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Codec.base64URL(bytes)
    }

    public static func hash(_ token: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(token.utf8)))
    }

    public func seal(_ secret: String, boundTo context: [UInt8]) throws -> [UInt8] {
        let box = try AES.GCM.seal(Array(secret.utf8), using: key, authenticating: context)
        guard let combined = box.combined else { throw StoreError.sealing }
        return Array(combined)
    }

    public func open(_ sealed: [UInt8], boundTo context: [UInt8]) throws -> String {
        let box = try AES.GCM.SealedBox(combined: sealed)
        let plain = try AES.GCM.open(box, using: key, authenticating: context)
        return String(decoding: plain, as: UTF8.self)
    }

}

public enum StoreError: Error, Sendable {
    case sealing
}
