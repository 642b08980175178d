public import HTTPServer
import Domain
import Synchronization

/// Request ids: the client's `X-Request-ID` when it is short visible ASCII (it is echoed and logged), otherwise this
/// process's random prefix and a counter, so ids from several instances do not collide.
public final class RequestIDs: Sendable {
    private let prefix: String
    private let counter = Atomic<UInt64>(0)

    public init() {
        var generator = SystemRandomNumberGenerator()
        prefix = Codec.hex(UInt64(generator.next() as UInt32), width: 8, suffix: "-")
    }

    public func id(for request: HTTPRequest) -> String {
        if let given = request.header("x-request-id"), Self.isAcceptable(given) { return given }
        return Codec.hex(counter.add(1, ordering: .relaxed).newValue, prefix: prefix)
    }

    static func isAcceptable(_ id: String) -> Bool {
        !id.isEmpty && id.utf8.count <= 128 && id.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }
}
