internal import CMicroHTTPD

/// A large body lent to libmicrohttpd instead of copied: a weekly report is over half a megabyte, and a copy of it
/// was a fresh allocation (page faults included) and a memcpy per answer. The array is kept alive, unmutated, until
/// libmicrohttpd frees the response.
final class HeldBody {
    static let threshold = 64 * 1024
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    static func response(_ bytes: [UInt8]) -> OpaquePointer? {
        let held = Unmanaged.passRetained(HeldBody(bytes))
        // A native array's storage does not move while it is held and not mutated.
        let start = held.takeUnretainedValue().bytes.withUnsafeBytes { UnsafeMutableRawPointer(mutating: $0.baseAddress) }
        guard let handle = MHD_create_response_from_buffer_with_free_callback_cls(bytes.count, start, heldBodyFree, held.toOpaque())
        else {
            held.release()
            return nil
        }
        return handle
    }
}

let heldBodyFree: MHD_ContentReaderFreeCallback = { cls in
    guard let cls else { return }
    Unmanaged<HeldBody>.fromOpaque(cls).release()
}
