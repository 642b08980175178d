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
    @usableFromInline var tree = RouteTree(routes: [])
    @usableFromInline var handlers: [Handler] = []

    public init() {}

    public mutating func add(_ method: String, _ template: String, _ handler: Handler) {
        // The tree is immutable (read by every request thread without a lock): a route added builds a new one.
        tree = RouteTree(routes: tree.routes + [(method.uppercased(), template, handlers.count)])
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

/// The routes' tree, built once and immutable after: its nodes are classes, so a lookup walks references instead of
/// copying dictionaries, and they are lent without retaining them (`nodes` owns them all), since every request's
/// walk retaining and releasing the same few nodes from both request threads made their counts a shared hot spot.
@usableFromInline
final class RouteTree: @unchecked Sendable {
    @usableFromInline
    enum Match {
        case found(Int, template: String, parameters: PathParameters)
        case methodNotAllowed(allowed: [String], template: String)
        case notFound
    }

    final class Node {
        let literals: [String: Unmanaged<Node>]
        let parameterName: String?
        let parameterChild: Unmanaged<Node>?
        let endpoints: [String: (index: Int, template: String)]

        init(literals: [String: Unmanaged<Node>], parameterName: String?, parameterChild: Unmanaged<Node>?,
             endpoints: [String: (index: Int, template: String)]) {
            (self.literals, self.parameterName, self.parameterChild, self.endpoints) = (literals, parameterName, parameterChild, endpoints)
        }
    }

    /// A node while the tree is built.
    private final class Draft {
        var literals: [String: Draft] = [:]
        var parameterName: String?
        var parameterChild: Draft?
        var endpoints: [String: (index: Int, template: String)] = [:]
    }

    /// What the tree was built from (methods uppercase), so a route added makes a new tree.
    let routes: [(method: String, template: String, endpoint: Int)]
    let templates: [String]
    private let nodes: [Node]
    private let root: Unmanaged<Node>
    /// Templates without parameters by their canonical path: such a request is one lookup, no walk.
    private let exact: [String: Unmanaged<Node>]

    init(routes: [(method: String, template: String, endpoint: Int)]) {
        let top = Draft()
        var templates: [String] = []
        for (method, template, endpoint) in routes {
            Self.add(method, template, endpoint: endpoint, to: top)
            if !templates.contains(template) { templates.append(template) }
        }
        var nodes: [Node] = []
        var exact: [String: Unmanaged<Node>] = [:]
        root = Self.compile(top, path: "", literal: true, into: &nodes, exact: &exact)
        (self.routes, self.templates, self.nodes, self.exact) = (routes, templates, nodes, exact)
    }

    private static func add(_ method: String, _ template: String, endpoint: Int, to root: Draft) {
        var node = root
        for segment in segments(of: template) {
            if segment.hasPrefix("{"), segment.hasSuffix("}") {
                let name = String(segment.dropFirst().dropLast())
                precondition(node.parameterName == nil || node.parameterName == name, "conflicting parameter names at \(template)")
                node.parameterName = name
                if node.parameterChild == nil { node.parameterChild = Draft() }
                node = node.parameterChild!
            } else {
                if node.literals[String(segment)] == nil { node.literals[String(segment)] = Draft() }
                node = node.literals[String(segment)]!
            }
        }
        precondition(node.endpoints[method] == nil, "duplicate route \(method) \(template)")
        node.endpoints[method] = (endpoint, template)
    }

    /// The draft's node, its children first; a node reached by literal segments alone is indexed by its path.
    private static func compile(_ draft: Draft, path: String, literal: Bool, into nodes: inout [Node],
                                exact: inout [String: Unmanaged<Node>]) -> Unmanaged<Node> {
        var literals: [String: Unmanaged<Node>] = [:]
        for (segment, child) in draft.literals {
            literals[segment] = compile(child, path: path + "/" + segment, literal: literal, into: &nodes, exact: &exact)
        }
        let parameterChild = draft.parameterChild.map { compile($0, path: path, literal: false, into: &nodes, exact: &exact) }
        let node = Node(literals: literals, parameterName: draft.parameterName, parameterChild: parameterChild, endpoints: draft.endpoints)
        nodes.append(node)
        let reference = Unmanaged.passUnretained(node)
        if literal, !draft.endpoints.isEmpty { exact[path.isEmpty ? "/" : path] = reference }
        return reference
    }

    @usableFromInline
    func match(method: String, path: String) -> Match {
        var parameters = PathParameters()
        // A literal path wins over any parameter, so its exact entry is the walk's answer.
        guard let found = exact[path] ?? Self.walk(root, path, &parameters) else { return .notFound }
        return found._withUnsafeGuaranteedRef { node in
            // Methods arrive uppercase almost always: no new string for them.
            let method = method.hasASCIILowercase ? method.uppercased() : method
            if let endpoint = node.endpoints[method] ?? (method == "HEAD" ? node.endpoints["GET"] : nil) {
                return .found(endpoint.index, template: endpoint.template, parameters: parameters)
            }
            guard let any = node.endpoints.values.first else { return .notFound }
            var allowed = Set(node.endpoints.keys)
            if allowed.contains("GET") { allowed.insert("HEAD") }
            return .methodNotAllowed(allowed: allowed.sorted(), template: any.template)
        }
    }

    /// The path's bytes walked in place (no substrings of it, no array of segments).
    private static func walk(_ root: Unmanaged<Node>, _ path: String, _ parameters: inout PathParameters) -> Unmanaged<Node>? {
        if let found = path.utf8.withContiguousStorageIfAvailable({ find(root, $0, from: 0, &parameters) }) { return found }
        var contiguous = path
        contiguous.makeContiguousUTF8()
        return contiguous.utf8.withContiguousStorageIfAvailable { find(root, $0, from: 0, &parameters) } ?? nil
    }

    /// Literal segments win over parameters; backtracks when a literal branch dead-ends.
    private static func find(_ reference: Unmanaged<Node>, _ path: UnsafeBufferPointer<UInt8>, from: Int,
                             _ parameters: inout PathParameters) -> Unmanaged<Node>? {
        let slash = UInt8(ascii: "/")
        var start = from
        while start < path.count, path[start] == slash { start += 1 }
        return reference._withUnsafeGuaranteedRef { node in
            guard start < path.count else { return node.endpoints.isEmpty ? nil : reference }
            var end = start
            while end < path.count, path[end] != slash { end += 1 }
            let segment = String(decoding: UnsafeBufferPointer(rebasing: path[start..<end]), as: UTF8.self)
            if let literal = node.literals[segment], let found = find(literal, path, from: end, &parameters) {
                return found
            }
            if let name = node.parameterName, let child = node.parameterChild {
                let saved = parameters
                parameters[name] = segment
                if let found = find(child, path, from: end, &parameters) { return found }
                parameters = saved
            }
            return nil
        }
    }

    private static func segments(of path: String) -> [Substring] {
        path.split(separator: "/", omittingEmptySubsequences: true)
    }
}
