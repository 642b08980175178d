public struct HTTPServerError: Error, CustomStringConvertible, Sendable {
    public enum Code: Sendable { case startFailed, alreadyStarted }
    public let code: Code
    public let description: String
}
