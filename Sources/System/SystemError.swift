#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: which call, on what, and its errno, told by the C library's own words.
public struct SystemError: Error, CustomStringConvertible, Sendable {
    public let call: String
    public let subject: String
    public let code: Int32

    /// `code` defaults to the calling thread's errno, read right after the failed call.
    public init(_ call: String, _ subject: String, code: Int32? = nil) {
        self.call = call
        self.subject = subject
        self.code = code ?? errno
    }

    public var description: String {
        "\(call) \(subject): \(String(cString: strerror(code))) (errno \(code))"
    }
}
