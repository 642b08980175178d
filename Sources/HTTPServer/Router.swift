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

    /// Every method some route takes, HEAD with GET, sorted: what `OPTIONS *` names.
    public var methods: [String] { RouteTree.allowed(tree.routes.map(\.method)) }

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
        /// The literal children: their segments back to back, where each ends, and the child. A request's segment
        /// is compared as bytes with each in turn (a node has a few), where a dictionary hashed a string made of it.
        let literalBytes: [UInt8]
        let literalEnds: [Int]
        let literalChildren: [Unmanaged<Node>]
        let parameterName: String?
        let parameterChild: Unmanaged<Node>?
        /// Methods (uppercase) with their endpoints, compared in turn: a template has one to three.
        let endpoints: [(method: String, index: Int, template: String)]

        init(literals: [(segment: String, child: Unmanaged<Node>)], parameterName: String?, parameterChild: Unmanaged<Node>?,
             endpoints: [(method: String, index: Int, template: String)]) {
            literalBytes = literals.flatMap { Array($0.segment.utf8) }
            var end = 0
            literalEnds = literals.map { literal in
                end += literal.segment.utf8.count
                return end
            }
            literalChildren = literals.map(\.child)
            (self.parameterName, self.parameterChild, self.endpoints) = (parameterName, parameterChild, endpoints)
        }

        func literal(_ segment: UnsafeBufferPointer<UInt8>) -> Unmanaged<Node>? {
            literalBytes.withUnsafeBufferPointer { bytes in
                var start = 0
                for index in literalEnds.indices {
                    let end = literalEnds[index]
                    if end - start == segment.count, (0..<segment.count).allSatisfy({ bytes[start + $0] == segment[$0] }) {
                        return literalChildren[index]
                    }
                    start = end
                }
                return nil
            }
        }

        func endpoint(_ method: String) -> (index: Int, template: String)? {
            for endpoint in endpoints where endpoint.method == method { return (endpoint.index, endpoint.template) }
            return nil
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

    init(routes: [(method: String, template: String, endpoint: Int)]) {
        let top = Draft()
        var templates: [String] = []
        for (method, template, endpoint) in routes {
            Self.add(method, template, endpoint: endpoint, to: top)
            if !templates.contains(template) { templates.append(template) }
        }
        var nodes: [Node] = []
        root = Self.compile(top, into: &nodes)
        (self.routes, self.templates, self.nodes) = (routes, templates, nodes)
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

    /// The draft's node, its children first.
    private static func compile(_ draft: Draft, into nodes: inout [Node]) -> Unmanaged<Node> {
        let literals = draft.literals.sorted { $0.key < $1.key }.map { (segment: $0.key, child: compile($0.value, into: &nodes)) }
        let parameterChild = draft.parameterChild.map { compile($0, into: &nodes) }
        let endpoints = draft.endpoints.sorted { $0.key < $1.key }.map { (method: $0.key, index: $0.value.index, template: $0.value.template) }
        let node = Node(literals: literals, parameterName: draft.parameterName, parameterChild: parameterChild, endpoints: endpoints)
        nodes.append(node)
        return Unmanaged.passUnretained(node)
    }

    @usableFromInline
    func match(method: String, path: String) -> Match {
        var parameters = PathParameters()
        guard let found = Self.walk(root, path, &parameters) else { return .notFound }
        return found._withUnsafeGuaranteedRef { node in
            // Methods are case-sensitive (RFC 9110 §9.1): `post` is not POST. Taken as POST, it passed the limits
            // that are keyed on the method (sign-ins, failed authentications) and idempotency keys.
            if let endpoint = node.endpoint(method) ?? (method == "HEAD" ? node.endpoint("GET") : nil) {
                return .found(endpoint.index, template: endpoint.template, parameters: parameters)
            }
            guard let any = node.endpoints.first else { return .notFound }
            return .methodNotAllowed(allowed: Self.allowed(node.endpoints.map(\.method)), template: any.template)
        }
    }

    /// Methods as `Allow` names them: each once, HEAD wherever GET is (HEAD falls back to it), sorted.
    static func allowed(_ methods: [String]) -> [String] {
        var allowed = Set(methods)
        if allowed.contains("GET") { allowed.insert("HEAD") }
        return allowed.sorted()
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
            let segment = UnsafeBufferPointer(rebasing: path[start..<end])
            if let literal = node.literal(segment), let found = find(literal, path, from: end, &parameters) {
                return found
            }
            if let name = node.parameterName, let child = node.parameterChild {
                let saved = parameters
                parameters[name] = String(decoding: segment, as: UTF8.self)
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
