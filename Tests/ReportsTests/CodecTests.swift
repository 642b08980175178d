import Domain
import Foundation
import Testing

/// The one codec for hex and base64 against Foundation's, on random bytes of every small length.
@Suite struct CodecTests {
    @Test func roundTripsAndAgreesWithFoundation() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<70 {
            for _ in 0..<20 {
                let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
                let url = Codec.base64URL(bytes)
                let standard = Data(bytes).base64EncodedString()
                #expect(url == standard.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
                    .replacingOccurrences(of: "=", with: ""))
                #expect(Codec.decodeBase64(url) == bytes)
                #expect(Codec.decodeBase64(standard) == bytes)
                #expect(Codec.hex(bytes) == bytes.map { String(format: "%02x", $0) }.joined())
                #expect(Codec.decodeHex(Codec.hex(bytes)) == bytes)
                #expect(Codec.decodeHex(Codec.hex(bytes).uppercased()) == bytes)
            }
        }
        for bad in ["a", "ab=c", "a$bc", "abc==="] { #expect(Codec.decodeBase64(bad) == nil, "\(bad)") }
        for bad in ["abc", "zz", "0g"] { #expect(Codec.decodeHex(bad) == nil, "\(bad)") }
        // Trailing bits that no byte string encodes to are refused, so each text names one value.
        #expect(Codec.decodeBase64("AB") == nil)
        #expect(Codec.decodeBase64("AA") == [0])
    }

    /// The trimming and blank checks that replaced Foundation's, against Foundation's.
    @Test func trimmingAndBlanksAgreeWithFoundation() {
        for text in ["", " ", "\t", " a ", "\ta b\t", "  \"x\"  ", "a", " \t ", "\u{A0}a\u{A0}"] {
            #expect(String(text.trimmingOWS()) == text.trimmingCharacters(in: CharacterSet(charactersIn: " \t")), "\(text)")
        }
        #expect(String("\"\"for\"".trimming { $0 == "\"" }) == "for")
        #expect("\"\"".trimming { $0 == "\"" }.isEmpty)
        for scalar in (Array(0...0x3000) + [0xFEFF, 0x1D159, 0xE0020]).compactMap(Unicode.Scalar.init) {
            let text = "\(scalar)\(scalar)"
            #expect(text.isBlank == text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "U+\(String(scalar.value, radix: 16))")
        }
        #expect("".isBlank && !" a ".isBlank)
    }

    @Test func integersInHexArePaddedAndFramed() {
        var generator = SystemRandomNumberGenerator()
        let values: [UInt64] = [0, 1, 15, 16, 255, 0xFFFF_FFFF, .max] + (0..<200).map { _ in generator.next() >> (generator.next() % 64) }
        for value in values {
            for width in [1, 8, 16, 20] {
                let plain = String(value, radix: 16)
                let padded = String(repeating: "0", count: max(0, width - plain.count)) + plain
                #expect(Codec.hex(value, width: width) == padded)
                #expect(Codec.hex(value, width: width, prefix: "\"", suffix: "\"") == "\"" + padded + "\"")
            }
        }
    }
}
