internal import CMicroHTTPD
#if canImport(Glibc)
import Glibc
#endif

/// A request's header fields in arrival order, names lowercased, kept as the bytes they arrived as in one
/// allocation. A value becomes a `String` only when it is asked for: a browser sends a dozen fields and a request
/// reads two or three, and a field per string pair cost an allocation for every value over 15 bytes and a release of
/// both strings when the request ended.
public struct HTTPHeaders: Sendable, RandomAccessCollection, ExpressibleByArrayLiteral {
    // Layout: the field count, then per field where its name starts, where its value starts and where it ends (four
    // bytes each, offsets from the start), then the names' and values' bytes. Empty: no fields.
    private let storage: [UInt8]

    public init() { storage = [] }

    public init(arrayLiteral elements: (name: String, value: String)...) { self.init(elements) }

    /// Names are lowercased (ASCII) on the way in, as the server's are.
    public init(_ fields: some Collection<(name: String, value: String)>) {
        let packer = Packer(count: fields.count, bytes: fields.reduce(0) { $0 + $1.name.utf8.count + $1.value.utf8.count })
        storage = packer.fill { write in
            for field in fields {
                var name = field.name, value = field.value
                name.withUTF8 { nameBytes in value.withUTF8 { write(nameBytes, $0) } }
            }
        }
    }

    /// The server's: copied straight out of libmicrohttpd's pairs at the sizes it measured.
    init(pairs: UnsafeBufferPointer<dg_mhd_pair>) {
        let packer = Packer(count: pairs.count, bytes: pairs.reduce(0) { $0 + $1.name_size + $1.value_size })
        storage = packer.fill { write in
            for pair in pairs {
                write(Self.bytes(pair.name, pair.name_size), Self.bytes(pair.value, pair.value_size))
            }
        }
    }

    private static func bytes(_ text: UnsafePointer<CChar>?, _ size: Int) -> UnsafeBufferPointer<UInt8> {
        guard let text, size > 0 else { return UnsafeBufferPointer(start: nil, count: 0) }
        return UnsafeBufferPointer(start: UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self), count: size)
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { storage.isEmpty ? 0 : Int(word(0)) }

    public subscript(position: Int) -> (name: String, value: String) {
        precondition(position >= 0 && position < endIndex, "header index out of range")
        return storage.withUnsafeBufferPointer { all in
            let (nameStart, valueStart, valueEnd) = bounds(position)
            return (String(decoding: UnsafeBufferPointer(rebasing: all[nameStart..<valueStart]), as: UTF8.self),
                    String(decoding: UnsafeBufferPointer(rebasing: all[valueStart..<valueEnd]), as: UTF8.self))
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
        guard !storage.isEmpty else { return }
        // The name's own bytes, lent: a copy of the string made contiguous would retain it on every lookup.
        if lowercasedName.utf8.withContiguousStorageIfAvailable({ scan(for: $0, body) }) == nil {
            Array(lowercasedName.utf8).withUnsafeBufferPointer { scan(for: $0, body) }
        }
    }

    private func scan(for wanted: UnsafeBufferPointer<UInt8>, _ body: (UnsafeBufferPointer<UInt8>) -> Bool) {
        storage.withUnsafeBytes { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            for index in 0..<Int(raw.loadUnaligned(as: UInt32.self)) {
                let entry = 4 + 12 * index
                let nameStart = Int(raw.loadUnaligned(fromByteOffset: entry, as: UInt32.self))
                let valueStart = Int(raw.loadUnaligned(fromByteOffset: entry + 4, as: UInt32.self))
                guard valueStart - nameStart == wanted.count,
                      wanted.isEmpty || memcmp(raw.baseAddress! + nameStart, wanted.baseAddress!, wanted.count) == 0
                else { continue }
                let valueEnd = Int(raw.loadUnaligned(fromByteOffset: entry + 8, as: UInt32.self))
                if !body(UnsafeBufferPointer(rebasing: bytes[valueStart..<valueEnd])) { return }
            }
        }
    }

    @inline(__always)
    private func bounds(_ index: Int) -> (Int, Int, Int) {
        let entry = 4 + 12 * index
        return (Int(word(entry)), Int(word(entry + 4)), Int(word(entry + 8)))
    }

    @inline(__always)
    private func word(_ offset: Int) -> UInt32 {
        storage.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self) }
    }

    /// Writes the table and the bytes into one array of the exact size.
    private struct Packer {
        let count: Int, size: Int

        init(count: Int, bytes: Int) {
            self.count = count
            size = 4 + 12 * count + bytes
            precondition(size <= Int(UInt32.max), "header block too large")
        }

        func fill(_ fields: ((UnsafeBufferPointer<UInt8>, UnsafeBufferPointer<UInt8>) -> Void) -> Void) -> [UInt8] {
            guard count > 0 else { return [] }
            let (count, size) = (count, size)
            return [UInt8](unsafeUninitializedCapacity: size) { buffer, initialized in
                let raw = UnsafeMutableRawBufferPointer(buffer)
                raw.storeBytes(of: UInt32(count), toByteOffset: 0, as: UInt32.self)
                var (entry, at) = (4, 4 + 12 * count)
                fields { name, value in
                    raw.storeBytes(of: UInt32(at), toByteOffset: entry, as: UInt32.self)
                    for byte in name {
                        buffer[at] = byte &- UInt8(ascii: "A") < 26 ? byte + 32 : byte
                        at += 1
                    }
                    raw.storeBytes(of: UInt32(at), toByteOffset: entry + 4, as: UInt32.self)
                    if !value.isEmpty { (buffer.baseAddress! + at).update(from: value.baseAddress!, count: value.count) }
                    at += value.count
                    raw.storeBytes(of: UInt32(at), toByteOffset: entry + 8, as: UInt32.self)
                    entry += 12
                }
                precondition(at == size, "header block miscounted")
                initialized = size
            }
        }
    }
}
