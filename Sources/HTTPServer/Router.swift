/// Method + path-template routing with `{name}` parameters, e.g. `/v1/tickets/{id}`.
/// Empty segments are ignored, so `/a/b/` and `/a/b` match the same route; HEAD falls back to GET.
public struct Router<Handler: Sendable>: Sendable {
    public enum Match: Sendable {
        case found(Handler, template: String, parameters: PathParameters)
        case methodNotAllowed(allowed: [String], template: String)
        case notFound
    }

    // The tree is not generic (it holds indexes into `handlers`); `match` is inlinable so the caller's module
    // specializes it for its handler type (unspecialized, each call looked up the generic metadata of `Match`).
    @usableFromInline var tree = RouteTree()
    @usableFromInline var handlers: [Handler] = []

    public init() {}

    public mutating func add(_ method: String, _ template: String, _ handler: Handler) {
        if !isKnownUniquelyReferenced(&tree) { tree = tree.copy() }
        tree.add(method.uppercased(), template, endpoint: handlers.count)
        handlers.append(handler)
    }

    /// Every template routed, once each.
    public var templates: [String] { tree.templates }

    @inlinable
    public func match(method: String, path: String) -> Match {
        switch tree.match(method: method, path: path) {
        case .found(let index, let template, let parameters): return .found(handlers[index], template: template, parameters: parameters)
        case .methodNotAllowed(let allowed, let template): return .methodNotAllowed(allowed: allowed, template: template)
        case .notFound: return .notFound
        }
    }
}

/// The routes' tree; nodes are classes so a lookup walks references instead of copying dictionaries.
/// Thread safety: built before it is shared and read-only after (`Router.add` copies a shared tree first).
@usableFromInline
final class RouteTree: @unchecked Sendable {
    @usableFromInline
    enum Match {
        case found(Int, template: String, parameters: PathParameters)
        case methodNotAllowed(allowed: [String], template: String)
        case notFound
    }

    final class Node {
        var literals: [String: Node] = [:]
        var parameterName: String?
        var parameterChild: Node?
        var endpoints: [String: (index: Int, template: String)] = [:]

        func copy() -> Node {
            let node = Node()
            node.literals = literals.mapValues { $0.copy() }
            node.parameterName = parameterName
            node.parameterChild = parameterChild?.copy()
            node.endpoints = endpoints
            return node
        }
    }

    private var root = Node()
    private(set) var templates: [String] = []
    /// Templates without parameters by their canonical path: such a request is one lookup, no walk.
    private var exact: [String: Node] = [:]

    func copy() -> RouteTree {
        let tree = RouteTree()
        tree.root = root.copy()
        tree.templates = templates
        tree.exact = [:]
        tree.indexExact(tree.root, path: "")
        return tree
    }

    private func indexExact(_ node: Node, path: String) {
        if !node.endpoints.isEmpty { exact[path.isEmpty ? "/" : path] = node }
        for (segment, child) in node.literals { indexExact(child, path: path + "/" + segment) }
    }

    func add(_ method: String, _ template: String, endpoint: Int) {
        var node = root
        for segment in Self.segments(of: template) {
            if segment.hasPrefix("{"), segment.hasSuffix("}") {
                let name = String(segment.dropFirst().dropLast())
                precondition(node.parameterName == nil || node.parameterName == name, "conflicting parameter names at \(template)")
                node.parameterName = name
                if node.parameterChild == nil { node.parameterChild = Node() }
                node = node.parameterChild!
            } else {
                if node.literals[String(segment)] == nil { node.literals[String(segment)] = Node() }
                node = node.literals[String(segment)]!
            }
        }
        precondition(node.endpoints[method] == nil, "duplicate route \(method) \(template)")
        node.endpoints[method] = (endpoint, template)
        if !template.contains("{") {
            let segments = Self.segments(of: template)
            exact[segments.isEmpty ? "/" : "/" + segments.joined(separator: "/")] = node
        }
        if !templates.contains(template) { templates.append(template) }
    }

    @usableFromInline
    func match(method: String, path: String) -> Match {
        var parameters = PathParameters()
        // A literal path wins over any parameter, so its exact entry is the walk's answer.
        guard let node = exact[path] ?? Self.find(root, path[...], &parameters) else { return .notFound }
        // Methods arrive uppercase almost always: no new string for them.
        let method = method.utf8.contains(where: { $0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "z") }) ? method.uppercased() : method
        if let endpoint = node.endpoints[method] ?? (method == "HEAD" ? node.endpoints["GET"] : nil) {
            return .found(endpoint.index, template: endpoint.template, parameters: parameters)
        }
        guard let any = node.endpoints.values.first else { return .notFound }
        var allowed = Set(node.endpoints.keys)
        if allowed.contains("GET") { allowed.insert("HEAD") }
        return .methodNotAllowed(allowed: allowed.sorted(), template: any.template)
    }

    /// Literal segments win over parameters; backtracks when a literal branch dead-ends. Walks the path's bytes
    /// (no array of segments is made).
    private static func find(_ node: Node, _ path: Substring, _ parameters: inout PathParameters) -> Node? {
        let utf8 = path.utf8
        guard let start = utf8.firstIndex(where: { $0 != UInt8(ascii: "/") }) else { return node.endpoints.isEmpty ? nil : node }
        let end = utf8[start...].firstIndex(of: UInt8(ascii: "/")) ?? utf8.endIndex
        let first = path[start..<end]
        let rest = path[end...]
        if let literal = node.literals[String(first)], let found = find(literal, rest, &parameters) {
            return found
        }
        if let name = node.parameterName, let child = node.parameterChild {
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
