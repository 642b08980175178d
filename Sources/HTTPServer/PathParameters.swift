/// The values of a matched route's `{name}` segments. Routes have one or two, so they are kept inline and found by
/// comparing names: no dictionary is made, and nothing hashed, for every routed request.
public struct PathParameters: Sendable, ExpressibleByDictionaryLiteral {
    // Filled in order: `second` only when `first` is, `more` only when both are.
    private var first: (name: String, value: String)?
    private var second: (name: String, value: String)?
    private var more: [(name: String, value: String)] = []

    public init() {}

    public init(dictionaryLiteral elements: (String, String)...) {
        for (name, value) in elements { self[name] = value }
    }

    public var isEmpty: Bool { first == nil }

    /// Every name and value, in the order they were first set.
    public var pairs: [(name: String, value: String)] { [first, second].compactMap { $0 } + more }

    public subscript(name: String) -> String? {
        get {
            if let first, first.name == name { return first.value }
            if let second, second.name == name { return second.value }
            return more.first(where: { $0.name == name })?.value
        }
        set {
            if first?.name == name {
                if let newValue { first!.value = newValue } else { (first, second) = (second, more.isEmpty ? nil : more.removeFirst()) }
            } else if second?.name == name {
                if let newValue { second!.value = newValue } else { second = more.isEmpty ? nil : more.removeFirst() }
            } else if let index = more.firstIndex(where: { $0.name == name }) {
                if let newValue { more[index].value = newValue } else { more.remove(at: index) }
            } else if let newValue {
                if first == nil { first = (name, newValue) } else if second == nil { second = (name, newValue) } else { more.append((name, newValue)) }
            }
        }
    }
}
