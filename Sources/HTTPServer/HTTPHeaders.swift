internal import CMicroHTTPD
#if canImport(Glibc)
import Glibc
#endif

/// A request's header fields in arrival order, names lowercased, kept as the bytes they arrived as in one
/// allocation. A value becomes a `String` only when it is asked for: a browser sends a dozen fields and a request
/// reads two or three, and a field per string pair cost an allocation for every value over 15 bytes and a release of
/// both strings when the request ended.
// @unchecked: the block is never changed once filled (ManagedBuffer is not Sendable itself).
public struct HTTPHeaders: @unchecked Sendable, RandomAccessCollection, ExpressibleByArrayLiteral {
    // The block's header is the field count; its elements are, per field, where its name starts, where its value
    // starts and where it ends (four bytes each, offsets into the elements), then the names' and values' bytes.
    // A class of its own rather than an array: an array of bytes made per request looked up its generic storage
    // type's metadata each time. Never nil (the shared empty block stands for no fields): unwrapping an optional
    // retained the block on every lookup.
    private let block: Block
    /// The field count, kept here as well: reading a class's stored property (the block's header) is checked for
    /// exclusive access at run time, on every lookup.
    private let fields: Int

    final class Block: ManagedBuffer<Int, UInt8> {}

    nonisolated(unsafe) private static let empty = unsafeDowncast(Block.create(minimumCapacity: 0) { _ in 0 }, to: Block.self)

    public init() { (block, fields) = (Self.empty, 0) }

    public init(arrayLiteral elements: (name: String, value: String)...) { self.init(elements) }

    /// Names are lowercased (ASCII) on the way in, as the server's are.
    public init(_ fields: some Collection<(name: String, value: String)>) {
        (block, self.fields) = (Self.pack(count: fields.count, bytes: fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count }) { write in
            for field in fields {
                var name = field.name, value = field.value
                name.withUTF8 { nameBytes in value.withUTF8 { write(nameBytes, $0) } }
            }
        }, fields.count)
    }

    /// The server's: copied straight out of libmicrohttpd's pairs at the sizes it measured.
    init(pairs: UnsafeBufferPointer<dg_mhd_pair>) {
        (block, fields) = (Self.pack(count: pairs.count, bytes: pairs.reduce(0) { $0 + $1.name_size + $1.value_size }) { write in
            for pair in pairs {
                write(Self.bytes(pair.name, pair.name_size), Self.bytes(pair.value, pair.value_size))
            }
        }, pairs.count)
    }

    private static func bytes(_ text: UnsafePointer<CChar>?, _ size: Int) -> UnsafeBufferPointer<UInt8> {
        guard let text, size > 0 else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: size)
    }

    /// The table and the bytes written into one block of the exact size.
    private static func pack(count: Int, bytes: Int,
                             _ fields: ((UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Void) -> Void) -> Block {
        guard count > 0 else { return empty }
        let size = 12 * count + bytes
        precondition(size <= Int(UInt32.max), "header block too large")
        let block = unsafeDowncast(Block.create(minimumCapacity: size) { _ in count }, to: Block.self)
        block.withUnsafeMutablePointerToElements { start in
            let raw = UnsafeMutableRawPointer(start)
            var (entry, at) = (0, 12 * count)
            fields { name, value in
                raw.storeBytes(of: UInt32(at), toByteOffset: entry, as: UInt32.self)
                for byte in name {
                    start[at] = byte &- UInt8(ascii: "A") < 26 ? byte + 32 : byte
                    at += 1
                }
                raw.storeBytes(of: UInt32(at), toByteOffset: entry + 4, as: UInt32.self)
                if !value.isEmpty { (start + at).update(from: value.baseAddress!, count: value.count) }
                at += value.count
                raw.storeBytes(of: UInt32(at), toByteOffset: entry + 8, as: UInt32.self)
                entry += 12
            }
            precondition(at == size, "header block miscounted")
        }
        return block
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { fields }

    public subscript(position: Int) -> (name: String, value: String) {
        precondition(position >= 0 && position < endIndex, "header index out of range")
        return block.withUnsafeMutablePointerToElements { start in
            let (nameStart, valueStart, valueEnd) = Self.bounds(UnsafeRawPointer(start), position)
            return (String(decoding: UnsafeBufferPointer(start: start + nameStart, count: valueStart - nameStart), as: UTF8.self),
                    String(decoding: UnsafeBufferPointer(start: start + valueStart, count: valueEnd - valueStart), as: UTF8.self))
        }
    }

    /// The first value of the field named `lowercasedName` (compared byte for byte), or nil.
    public func value(_ lowercasedName: String) -> String? {
        withValue(lowercasedName) { String(decoding: $0, as: UTF8.self) }
    }

    /// Every value of the field named `lowercasedName`, in arrival order.
    public func values(_ lowercasedName: String) -> [String] {
        var found: [String] = []
        forEachValue(lowercasedName) { found.append(String(decoding: $0, as: UTF8.self)); return true }
        return found
    }

    /// The first value's bytes lent to `body`, no string made; nil without such a field.
    public func withValue<R>(_ lowercasedName: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R? {
        var result: R?
        forEachValue(lowercasedName) { result = body($0); return false }
        return result
    }

    /// Calls `body` with each value of the field until it returns false.
    private func forEachValue(_ lowercasedName: String, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        guard fields > 0 else { return }
        // The name's own bytes, lent: a copy of the string made contiguous would retain it on every lookup.
        if lowercasedName.utf8.withContiguousStorageIfAvailable({ Self.scan(block, fields, for: $0, body) }) == nil {
            Array(lowercasedName.utf8).withUnsafeBufferPointer { Self.scan(block, fields, for: $0, body) }
        }
    }

    private static func scan(_ block: Block, _ count: Int, for wanted: UnsafeBufferPointer<UInt8>,
                             _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        block.withUnsafeMutablePointerToElements { start in
            for index in 0..<count {
                let (nameStart, valueStart, valueEnd) = bounds(UnsafeRawPointer(start), index)
                guard valueStart - nameStart == wanted.count,
                      wanted.isEmpty || memcmp(start + nameStart, wanted.baseAddress!, wanted.count) == 0
                else { continue }
                if !body(UnsafeBufferPointer(start: start + valueStart, count: valueEnd - valueStart)) { return }
            }
        }
    }

    @inline(__always)
    private static func bounds(_ table: UnsafeRawPointer, _ index: Int) -> (Int, Int, Int) {
        let entry = 12 * index
        return (Int(table.loadUnaligned(fromByteOffset: entry, as: UInt32.self)),
                Int(table.loadUnaligned(fromByteOffset: entry + 4, as: UInt32.self)),
                Int(table.loadUnaligned(fromByteOffset: entry + 8, as: UInt32.self)))
    }
}
