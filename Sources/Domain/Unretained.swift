/// Long-lived objects that every request uses, read without retaining them. Reading a class reference out of an
/// array retains it and releases it after use; when both request threads do that to the same object, its reference
/// count's cache line moves between the two cores on every request. The objects live as long as this value (it
/// holds them), so a reference lent for one call is safe.
public struct Unretained<Element: AnyObject> {
    @usableFromInline let owners: [Element]
    @usableFromInline let references: [Unmanaged<Element>]

    public init(_ owners: [Element]) {
        self.owners = owners
        references = owners.map { Unmanaged.passUnretained($0) }
    }

    public var count: Int { references.count }

    /// The object at `index`, lent to `body`; it must not be kept past the call.
    @inlinable
    public func with<Result>(_ index: Int, _ body: (Element) throws -> Result) rethrows -> Result {
        try references[index]._withUnsafeGuaranteedRef(body)
    }

    /// Each object in turn, lent to `body`.
    @inlinable
    public func forEach(_ body: (Element) throws -> Void) rethrows {
        for index in references.indices { try with(index, body) }
    }
}

extension Unretained: @unchecked Sendable where Element: Sendable {}
