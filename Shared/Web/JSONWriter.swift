import Foundation
import HTTP
import Models

/// An `Encoder` that writes JSON bytes as it goes, keys in the order the type encodes them (declaration order for
/// synthesized conformances), instead of building a tree of boxed values and sorting every object's keys as
/// Foundation's `JSONEncoder` does (a quarter of a newsletter read's CPU). Output as Foundation's with
/// `.withoutEscapingSlashes`: nil optionals left out by `encodeIfPresent`, `Data` as base64, `URL` as its string,
/// whole doubles without `.0`; non-finite numbers throw. Unlike Foundation, a `UUID` is written in lower case and a
/// `Date` as RFC 3339 (`Timestamp`), as the API and the events carry them (`Timestamp.decoder` reads them back).
///
/// Containers do not say when they end, so the writer keeps a stack of the open ones and closes those deeper than
/// the level being written to (and all of them at the end).
struct JSONWriter {
    static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        let state = JSONWriterState()
        try state.write(value, depth: 0)
        state.close(deeperThan: 0)
        return state.bytes
    }
}

@usableFromInline final class JSONWriterState {
    var bytes: [UInt8] = []
    /// The open containers, outermost first: whether each is an object, and how many entries it has.
    var open: [(object: Bool, count: Int)] = []

    init() { bytes.reserveCapacity(1024) }

    func close(deeperThan depth: Int) {
        while open.count > depth { bytes.append(open.removeLast().object ? UInt8(ascii: "}") : UInt8(ascii: "]")) }
    }

    /// Opens a container as the value at `depth`, or continues the one already open there.
    func openContainer(object: Bool, depth: Int) {
        close(deeperThan: depth + 1)
        if open.count == depth + 1 { return }
        open.append((object, 0))
        bytes.append(object ? UInt8(ascii: "{") : UInt8(ascii: "["))
    }

    /// Starts the next entry of the container at `depth` (its key first, for an object).
    func entry(depth: Int, key: String?) {
        if open.count > depth { close(deeperThan: depth) }
        let first = open[depth - 1].count == 0
        open[depth - 1].count += 1
        Self.append(entry: key, first: first, to: &bytes)
    }

    private static func append(entry key: String?, first: Bool, to bytes: inout [UInt8]) {
        if !first { bytes.append(UInt8(ascii: ",")) }
        if let key {
            append(escaping: key, to: &bytes)
            bytes.append(UInt8(ascii: ":"))
        }
    }

    func write<T: Encodable>(_ value: T, depth: Int) throws {
        // Types compared by metatype (a pointer comparison) before any cast: a failed dynamic cast per value was a
        // twentieth of a newsletter read, and most values written here are structs and arrays.
        let type = ObjectIdentifier(T.self)
        if type == ObjectIdentifier(String.self) { string(value as! String) }
        else if type == ObjectIdentifier(Int.self) { raw(String(value as! Int)) }
        else if type == ObjectIdentifier(Bool.self) { raw(value as! Bool ? "true" : "false") }
        else if type == ObjectIdentifier(Double.self) { try double(value as! Double) }
        else if type == ObjectIdentifier(Float.self) { try double(Double(value as! Float)) }
        else if Self.integers.contains(type), let v = value as? any FixedWidthInteger { raw(String(describing: v)) }
        else if type == ObjectIdentifier(Data.self) { string((value as! Data).base64EncodedString()) }
        else if type == ObjectIdentifier(URL.self) { string((value as! URL).absoluteString) }
        else if type == ObjectIdentifier(UUID.self) { string((value as! UUID).lowercased) }
        else if type == ObjectIdentifier(Date.self) { string(Timestamp.format(value as! Date)) }
        else {
            let before = bytes.count
            try value.encode(to: JSONValueEncoder(state: self, depth: depth))
            if bytes.count == before { raw("{}") }  // encoded nothing at all, as Foundation writes it
        }
    }

    private static let integers: Set<ObjectIdentifier> = [
        ObjectIdentifier(Int8.self), ObjectIdentifier(Int16.self), ObjectIdentifier(Int32.self), ObjectIdentifier(Int64.self),
        ObjectIdentifier(UInt.self), ObjectIdentifier(UInt8.self), ObjectIdentifier(UInt16.self), ObjectIdentifier(UInt32.self),
        ObjectIdentifier(UInt64.self),
    ]

    func raw(_ text: String) { bytes.append(contentsOf: text.utf8) }

    func double(_ v: Double) throws {
        guard let text = Self.number(v) else {
            throw EncodingError.invalidValue(v, .init(codingPath: [], debugDescription: "\(v) is not valid JSON"))
        }
        raw(text)
    }

    /// A finite number as JSON writes it (whole numbers without `.0`); nil for one JSON cannot hold.
    static func number(_ v: Double) -> String? {
        guard v.isFinite else { return nil }
        var text = v.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        return text
    }

    func string(_ s: String) { Self.append(escaping: s, to: &bytes) }

    /// One access to `bytes` for the whole string (each access to a class's property is checked for exclusivity).
    @usableFromInline static func append(escaping s: String, to bytes: inout [UInt8]) {
        var s = s
        s.withUTF8 { utf8 in
            bytes.append(UInt8(ascii: "\""))
            // Runs that need no escape are copied whole.
            var start = 0
            for i in 0..<utf8.count {
                let c = utf8[i]
                guard c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") else { continue }
                bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<i]))
                start = i + 1
                switch c {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(contentsOf: [92, c])
                case 0x0A: bytes.append(contentsOf: [92, UInt8(ascii: "n")])
                case 0x0D: bytes.append(contentsOf: [92, UInt8(ascii: "r")])
                case 0x09: bytes.append(contentsOf: [92, UInt8(ascii: "t")])
                case 0x08: bytes.append(contentsOf: [92, UInt8(ascii: "b")])
                case 0x0C: bytes.append(contentsOf: [92, UInt8(ascii: "f")])
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [92, UInt8(ascii: "u"), 48, 48, hex[Int(c >> 4)], hex[Int(c & 15)]])
                }
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[start..<utf8.count]))
            bytes.append(UInt8(ascii: "\""))
        }
    }
}

/// The encoder a value at `depth` is given.
struct JSONValueEncoder: Encoder {
    let state: JSONWriterState
    let depth: Int
    var codingPath: [CodingKey] { [] }
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        state.openContainer(object: true, depth: depth)
        return KeyedEncodingContainer(JSONKeyedWriter<Key>(state: state, depth: depth + 1))
    }

    func unkeyedContainer() -> UnkeyedEncodingContainer {
        state.openContainer(object: false, depth: depth)
        return JSONUnkeyedWriter(state: state, depth: depth + 1)
    }

    func singleValueContainer() -> SingleValueEncodingContainer { JSONSingleWriter(state: state, depth: depth) }
}

struct JSONKeyedWriter<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let state: JSONWriterState
    /// The depth of this container's entries.
    let depth: Int
    var codingPath: [CodingKey] { [] }

    mutating func encodeNil(forKey key: Key) throws { state.entry(depth: depth, key: key.stringValue); state.raw("null") }
    mutating func encode(_ value: String, forKey key: Key) throws { state.entry(depth: depth, key: key.stringValue); state.string(value) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { state.entry(depth: depth, key: key.stringValue); state.raw(value ? "true" : "false") }
    mutating func encode(_ value: Int, forKey key: Key) throws { state.entry(depth: depth, key: key.stringValue); state.raw(String(value)) }
    mutating func encode(_ value: Double, forKey key: Key) throws { state.entry(depth: depth, key: key.stringValue); try state.double(value) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        state.entry(depth: depth, key: key.stringValue)
        try state.write(value, depth: depth)
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        state.entry(depth: depth, key: key.stringValue)
        return JSONValueEncoder(state: state, depth: depth).container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> UnkeyedEncodingContainer {
        state.entry(depth: depth, key: key.stringValue)
        return JSONValueEncoder(state: state, depth: depth).unkeyedContainer()
    }
    mutating func superEncoder() -> Encoder {
        state.entry(depth: depth, key: "super")
        return JSONValueEncoder(state: state, depth: depth)
    }
    mutating func superEncoder(forKey key: Key) -> Encoder {
        state.entry(depth: depth, key: key.stringValue)
        return JSONValueEncoder(state: state, depth: depth)
    }
}

struct JSONUnkeyedWriter: UnkeyedEncodingContainer {
    let state: JSONWriterState
    let depth: Int
    var codingPath: [CodingKey] { [] }
    var count: Int { state.open.count >= depth ? state.open[depth - 1].count : 0 }

    mutating func encodeNil() throws { state.entry(depth: depth, key: nil); state.raw("null") }
    mutating func encode(_ value: String) throws { state.entry(depth: depth, key: nil); state.string(value) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        state.entry(depth: depth, key: nil)
        try state.write(value, depth: depth)
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        state.entry(depth: depth, key: nil)
        return JSONValueEncoder(state: state, depth: depth).container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer() -> UnkeyedEncodingContainer {
        state.entry(depth: depth, key: nil)
        return JSONValueEncoder(state: state, depth: depth).unkeyedContainer()
    }
    mutating func superEncoder() -> Encoder {
        state.entry(depth: depth, key: nil)
        return JSONValueEncoder(state: state, depth: depth)
    }
}

struct JSONSingleWriter: SingleValueEncodingContainer {
    let state: JSONWriterState
    let depth: Int
    var codingPath: [CodingKey] { [] }

    mutating func encodeNil() throws { state.close(deeperThan: depth); state.raw("null") }
    mutating func encode(_ value: String) throws { state.close(deeperThan: depth); state.string(value) }
    mutating func encode(_ value: Bool) throws { state.close(deeperThan: depth); state.raw(value ? "true" : "false") }
    mutating func encode(_ value: Int) throws { state.close(deeperThan: depth); state.raw(String(value)) }
    mutating func encode(_ value: Double) throws { state.close(deeperThan: depth); try state.double(value) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        state.close(deeperThan: depth)
        try state.write(value, depth: depth)
    }
}

/// A value that writes its own JSON, for a response hot enough that `Encodable`'s witness calls and its writer's
/// container stack show in a profile (a fifth of a newsletter read's CPU went there).
public protocol JSONWritable {
    func write(to json: inout JSONOutput)
}

/// JSON written straight into bytes, in the order the calls come: `field` and `key` write the comma a value needs.
/// Inlinable, so a service's calls are specialized for its own types rather than going through generic witnesses.
public struct JSONOutput {
    public var bytes: [UInt8] = []
    @usableFromInline var comma = false

    public init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    @inlinable mutating func separate() {
        if comma { bytes.append(UInt8(ascii: ",")) }
        comma = true
    }

    /// The key of the next value in an object.
    @inlinable public mutating func key(_ name: StaticString) {
        separate()
        bytes.append(UInt8(ascii: "\""))
        bytes.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
        comma = false
    }

    /// The key of the next value, as `keyBytes` made it (for names known only at run time, made once).
    @inlinable public mutating func key(_ quoted: [UInt8]) {
        separate()
        bytes.append(contentsOf: quoted)
        comma = false
    }

    /// `"name":`, escaped, for `key(_:)`.
    public static func keyBytes(_ name: String) -> [UInt8] {
        var out: [UInt8] = []
        JSONWriterState.append(escaping: name, to: &out)
        return out + [UInt8(ascii: ":")]
    }

    @inlinable public mutating func object(_ body: (inout JSONOutput) -> Void) { open(UInt8(ascii: "{"), UInt8(ascii: "}"), body) }
    @inlinable public mutating func array(_ body: (inout JSONOutput) -> Void) { open(UInt8(ascii: "["), UInt8(ascii: "]"), body) }
    /// An array of `elements`, each written by `body`.
    @inlinable public mutating func array<C: Collection>(_ elements: C, _ body: (inout JSONOutput, C.Element) -> Void) {
        array { json in for e in elements { body(&json, e) } }
    }

    @inlinable mutating func open(_ start: UInt8, _ end: UInt8, _ body: (inout JSONOutput) -> Void) {
        separate()
        bytes.append(start)
        comma = false
        body(&self)
        bytes.append(end)
        comma = true
    }

    @inlinable public mutating func string(_ s: String) { separate(); JSONWriterState.append(escaping: s, to: &bytes) }
    /// A UUID in its lower-case form, and a date as RFC 3339 (`Timestamp`): written in place, as neither needs escaping.
    public mutating func string(_ u: UUID) { quoted(36) { u.writeLowercased(to: $0) } }
    public mutating func string(_ d: Date) { quoted(24) { Timestamp.write(d, to: $0) } }

    /// A string of `count` bytes that need no escaping, as `fill` writes them between the quotes.
    mutating func quoted(_ count: Int, _ fill: (UnsafeMutablePointer<UInt8>) -> Void) {
        separate()
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: count + 2) { text in
            text[0] = UInt8(ascii: "\""); text[count + 1] = UInt8(ascii: "\"")
            fill(text.baseAddress! + 1)
            bytes.append(contentsOf: UnsafeBufferPointer(text))
        }
    }
    @inlinable public mutating func int(_ v: Int) { separate(); bytes.append(contentsOf: String(v).utf8) }
    /// A number; a non-finite one (which JSON cannot hold) as `null`, whole numbers without `.0`.
    public mutating func double(_ v: Double) {
        separate()
        bytes.append(contentsOf: (JSONWriterState.number(v) ?? "null").utf8)
    }
    @inlinable public mutating func null() { separate(); bytes.append(contentsOf: "null".utf8) }
    @inlinable public mutating func bool(_ v: Bool) {
        separate()
        if v { bytes.append(contentsOf: "true".utf8) } else { bytes.append(contentsOf: "false".utf8) }
    }

    /// Fields as `Encodable` writes them: a nil optional is left out.
    @inlinable public mutating func field(_ name: StaticString, _ v: String?) { if let v { key(name); string(v) } }
    @inlinable public mutating func field(_ name: StaticString, _ v: Int) { key(name); int(v) }
    @inlinable public mutating func field(_ name: StaticString, _ v: Bool) { key(name); bool(v) }
}

extension JSON {
    public static func encode(_ value: some JSONWritable) -> [UInt8] {
        var json = JSONOutput()
        value.write(to: &json)
        return json.bytes
    }
}

extension Response {
    public static func json(_ value: some JSONWritable, status: Int = 200) -> Response {
        Response(status: status, headers: [("Content-Type", "application/json")], body: JSON.encode(value))
    }
}
