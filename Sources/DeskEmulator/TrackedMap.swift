/// A dictionary that remembers which keys changed since the last `commit`, and their values before, so the
/// emulator saves (or undoes) a change at the cost of the change, not of the whole world. It can also keep
/// secondary indexes (names a value is found under, such as its customer), so lookups by them cost the same in a
/// world of a hundred tickets or of a hundred thousand.
struct TrackedMap<Key: Hashable & Sendable, Value: Sendable>: Sequence, Sendable {
    private(set) var storage: [Key: Value] = [:]
    /// Keys written since the last commit, with their value before the first of those writes (nil: absent).
    private var undo: [Key: Value?] = [:]
    private var index: [String: Set<Key>] = [:]
    private let indexNames: (@Sendable (Value) -> [String])?

    init(index indexNames: (@Sendable (Value) -> [String])? = nil) {
        self.indexNames = indexNames
    }

    subscript(key: Key) -> Value? {
        get { storage[key] }
        set {
            if undo.index(forKey: key) == nil { undo[key] = .some(storage[key]) }
            store(key, newValue)
        }
    }

    private mutating func store(_ key: Key, _ value: Value?) {
        if let indexNames {
            if let old = storage[key] {
                for name in indexNames(old) {
                    index[name]?.remove(key)
                    if index[name]?.isEmpty == true { index[name] = nil }
                }
            }
            if let value { for name in indexNames(value) { index[name, default: []].insert(key) } }
        }
        storage[key] = value
    }

    /// The keys of the values found under `name`.
    func keys(indexedBy name: String) -> Set<Key> { index[name] ?? [] }

    @discardableResult
    mutating func removeValue(forKey key: Key) -> Value? {
        let old = storage[key]
        self[key] = nil
        return old
    }

    var values: Dictionary<Key, Value>.Values { storage.values }
    var keys: Dictionary<Key, Value>.Keys { storage.keys }
    var count: Int { storage.count }
    var isEmpty: Bool { storage.isEmpty }
    func makeIterator() -> Dictionary<Key, Value>.Iterator { storage.makeIterator() }

    /// The keys written since the last commit, with their value now (nil: removed).
    var changed: [(key: Key, value: Value?)] { undo.keys.map { ($0, storage[$0]) } }

    mutating func commit() { if !undo.isEmpty { undo.removeAll(keepingCapacity: true) } }

    /// Puts back every value written since the last commit.
    mutating func rollback() {
        for (key, old) in undo { store(key, old) }
        undo.removeAll(keepingCapacity: true)
    }
}
