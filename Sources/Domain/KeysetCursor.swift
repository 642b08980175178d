/// The opaque keyset cursor of paged lists: base64url of "microseconds-since-1970:id". A cursor is accepted only
/// if it could have been issued: a time between 1970 and 9999 and a positive id, so a forged one is a 400, never a
/// database error.
public enum KeysetCursor {
    static let latestMicros: Int64 = 253_402_300_799_000_000   // 9999-12-31T23:59:59Z

    public static func encode(time: Double, id: Int) -> String {
        Codec.base64URL(Array("\(Int64((time * 1_000_000).rounded())):\(id)".utf8))
    }

    public static func decode(_ text: String) -> (time: Double, id: Int)? {
        guard text.utf8.count <= 64, let bytes = Codec.decodeBase64(text) else { return nil }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let micros = Int64(parts[0]), (0...latestMicros).contains(micros),
              let id = Int(parts[1]), id > 0 else { return nil }
        return (Double(micros) / 1_000_000, id)
    }
}
