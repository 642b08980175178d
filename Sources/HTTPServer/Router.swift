/// Method + path-template routing with `{name}` parameters, e.g. `/v1/tickets/{id}`.
/// Empty segments are ignored, so `/a/b/` and `/a/b` match the same route; HEAD falls back to GET.
public struct Router<Handler: Sendable>: Sendable {
    public enum Match: Sendable {
        case found(Handler, template: String, parameters: [String: String])
        case methodNotAllowed(allowed: [String], template: String)
        case notFound
    }

    struct Endpoint: Sendable {
        let handler: Handler
        let template: String
    }

    struct Node: Sendable {
        var literals: [String: Node] = [:]
        var parameterName: String?
        var parameterChild: [Node] = []
        var endpoints: [String: Endpoint] = [:]
    }

    private var root = Node()

    public init() {}

    public mutating func add(_ method: String, _ template: String, _ handler: Handler) {
        let segments = Self.segments(of: template)
        Self.insert(into: &root, segments: segments[...], method: method.uppercased(),
                    endpoint: Endpoint(handler: handler, template: template))
    }

    private static func insert(into node: inout Node, segments: ArraySlice<Substring>, method: String, endpoint: Endpoint) {
        guard let first = segments.first else {
            precondition(node.endpoints[method] == nil, "duplicate route \(method) \(endpoint.template)")
            node.endpoints[method] = endpoint
            return
        }
        let rest = segments.dropFirst()
        if first.hasPrefix("{"), first.hasSuffix("}") {
            let name = String(first.dropFirst().dropLast())
            precondition(node.parameterName == nil || node.parameterName == name,
                         "conflicting parameter names at \(endpoint.template)")
            node.parameterName = name
            if node.parameterChild.isEmpty { node.parameterChild.append(Node()) }
            insert(into: &node.parameterChild[0], segments: rest, method: method, endpoint: endpoint)
        } else {
            insert(into: &node.literals[String(first), default: Node()], segments: rest, method: method, endpoint: endpoint)
        }
    }

    public func match(method: String, path: String) -> Match {
        var parameters: [String: String] = [:]
        guard let node = Self.find(root, Self.segments(of: path)[...], &parameters) else { return .notFound }
        let method = method.uppercased()
        if let endpoint = node.endpoints[method] ?? (method == "HEAD" ? node.endpoints["GET"] : nil) {
            return .found(endpoint.handler, template: endpoint.template, parameters: parameters)
        }
        guard let any = node.endpoints.values.first else { return .notFound }
        var allowed = Set(node.endpoints.keys)
        if allowed.contains("GET") { allowed.insert("HEAD") }
        return .methodNotAllowed(allowed: allowed.sorted(), template: any.template)
    }

    /// Literal segments win over parameters; backtracks when a literal branch dead-ends.
    private static func find(_ node: Node, _ segments: ArraySlice<Substring>, _ parameters: inout [String: String]) -> Node? {
        guard let first = segments.first else { return node.endpoints.isEmpty ? nil : node }
        let rest = segments.dropFirst()
        if let literal = node.literals[String(first)], let found = find(literal, rest, &parameters) {
            return found
        }
        if let name = node.parameterName, let child = node.parameterChild.first {
            let saved = parameters
            parameters[name] = String(first)
            if let found = find(child, rest, &parameters) { return found }
            parameters = saved
        }
        return nil
    }

    private static func segments(of path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }
}
