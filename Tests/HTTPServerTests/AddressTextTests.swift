import System
import Testing

/// The text of an address as the link-preview guard logs and compares it.
@Suite struct AddressTextTests {
    @Test func addressesReadAsTheirUsualText() {
        #expect(IPAddress.text([127, 0, 0, 1]) == "127.0.0.1")
        #expect(IPAddress.text([255, 255, 255, 255]) == "255.255.255.255")
        #expect(IPAddress.text([UInt8](repeating: 0, count: 15) + [1]) == "::1")
        #expect(IPAddress.text([0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 11) + [0x2a]) == "2001:db8::2a")
        #expect(IPAddress.text([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 0, 0, 1]) == "::ffff:10.0.0.1")
        #expect(IPAddress.text([1, 2, 3]) == nil)
        #expect(IPAddress.text([]) == nil)
    }
}
