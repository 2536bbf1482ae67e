/// Parses request bodies straight into `JSONValue` (RFC 8259: any value at the top, no trailing commas, no comments,
/// strings of valid UTF-8 without raw control characters, at most 512 levels of nesting), instead of
/// `JSONSerialization` and a cast of every value out of Foundation's bridged objects (a third of a batch of
/// location fixes). A name given twice in one object is refused (RFC 7493, I-JSON): which of the two a reader takes
/// differs between readers, so a body that means one thing here could mean another to a proxy or a log. Throws
/// `JSONParser.Invalid` on anything else.
struct JSONParser {
    struct Invalid: Error {
        var message = "The body is not valid JSON."
    }

    static func parse(_ bytes: [UInt8]) throws -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer in
            var parser = JSONParser(s: buffer)
            parser.skipSpace()
            let value = try parser.value(depth: 0)
            parser.skipSpace()
            guard parser.i == buffer.count else { throw Invalid() }
            return value
        }
    }

    fileprivate let s: UnsafeBufferPointer<UInt8>
    fileprivate var i = 0

    fileprivate init(s: UnsafeBufferPointer<UInt8>) { self.s = s }

    fileprivate mutating func skipSpace() {
        while i < s.count, s[i] == 0x20 || s[i] == 0x0A || s[i] == 0x0D || s[i] == 0x09 { i += 1 }
    }

    fileprivate mutating func expect(_ word: StaticString) throws {
        let w = UnsafeBufferPointer(start: word.utf8Start, count: word.utf8CodeUnitCount)
        guard s.count - i >= w.count, zip(s[i..<(i + w.count)], w).allSatisfy({ $0 == $1 }) else { throw Invalid() }
        i += w.count
    }

    private mutating func value(depth: Int) throws -> JSONValue {
        guard i < s.count, depth < 512 else { throw Invalid() }
        switch s[i] {
        case UInt8(ascii: "{"):
            i += 1
            var members: [String: JSONValue] = [:]
            skipSpace()
            if i < s.count, s[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            repeat {
                skipSpace()
                guard i < s.count, s[i] == UInt8(ascii: "\"") else { throw Invalid() }
                let key = try string()
                skipSpace()
                guard i < s.count, s[i] == UInt8(ascii: ":") else { throw Invalid() }
                i += 1
                skipSpace()
                guard members.updateValue(try value(depth: depth + 1), forKey: key) == nil else {
                    throw Invalid(message: "The body gives a name twice in one object.")
                }
            } while try more(before: UInt8(ascii: "}"))
            return .object(members)
        case UInt8(ascii: "["):
            i += 1
            var items: [JSONValue] = []
            skipSpace()
            if i < s.count, s[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
            repeat {
                skipSpace()
                items.append(try value(depth: depth + 1))
            } while try more(before: UInt8(ascii: "]"))
            return .array(items)
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try expect("true"); return .bool(true)
        case UInt8(ascii: "f"): try expect("false"); return .bool(false)
        case UInt8(ascii: "n"): try expect("null"); return .null
        default: return .number(try number())
        }
    }

    /// After a member or an element: true past a comma (another follows), false past `closer` (the container ends).
    fileprivate mutating func more(before closer: UInt8) throws -> Bool {
        skipSpace()
        guard i < s.count else { throw Invalid() }
        if s[i] == UInt8(ascii: ",") { i += 1; return true }
        guard s[i] == closer else { throw Invalid() }
        i += 1
        return false
    }

    fileprivate mutating func number() throws -> Double {
        let start = i
        func digits() -> Int {
            let from = i
            while i < s.count, s[i] >= 48 && s[i] <= 57 { i += 1 }
            return i - from
        }
        if i < s.count, s[i] == UInt8(ascii: "-") { i += 1 }
        guard i < s.count else { throw Invalid() }
        if s[i] == 48 { i += 1 } else { guard digits() > 0 else { throw Invalid() } }
        if i < s.count, s[i] == UInt8(ascii: ".") { i += 1; guard digits() > 0 else { throw Invalid() } }
        if i < s.count, s[i] == UInt8(ascii: "e") || s[i] == UInt8(ascii: "E") {
            i += 1
            if i < s.count, s[i] == UInt8(ascii: "+") || s[i] == UInt8(ascii: "-") { i += 1 }
            guard digits() > 0 else { throw Invalid() }
        }
        guard let value = Double(String(decoding: UnsafeBufferPointer(rebasing: s[start..<i]), as: UTF8.self)),
              value.isFinite else { throw Invalid() }
        return value
    }

    /// A string from its opening quote; its bytes must be valid UTF-8.
    fileprivate mutating func string() throws -> String {
        i += 1
        let start = i
        // The common case: no escapes, so the bytes are the string.
        var high: UInt8 = 0
        while i < s.count, s[i] != UInt8(ascii: "\""), s[i] != UInt8(ascii: "\\") {
            guard s[i] >= 0x20 else { throw Invalid() }
            high |= s[i]
            i += 1
        }
        guard i < s.count else { throw Invalid() }
        if s[i] == UInt8(ascii: "\"") {
            let run = UnsafeBufferPointer(rebasing: s[start..<i])
            i += 1
            // ASCII is valid UTF-8 as it stands: `String(validating:)` is generic, and looking up its metadata on
            // every call was a twentieth of dispatch's work on batches of location fixes (perf).
            return high < 0x80 ? String(decoding: run, as: UTF8.self) : try validated(run)
        }
        var bytes = Array(s[start..<i])
        while true {
            guard i < s.count else { throw Invalid() }
            let c = s[i]
            i += 1
            switch c {
            case UInt8(ascii: "\""):
                return try bytes.withUnsafeBufferPointer { try validated($0) }
            case UInt8(ascii: "\\"):
                guard i < s.count else { throw Invalid() }
                let e = s[i]
                i += 1
                switch e {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(e)
                case UInt8(ascii: "b"): bytes.append(0x08)
                case UInt8(ascii: "f"): bytes.append(0x0C)
                case UInt8(ascii: "n"): bytes.append(0x0A)
                case UInt8(ascii: "r"): bytes.append(0x0D)
                case UInt8(ascii: "t"): bytes.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try hex4()
                    if (0xD800...0xDBFF).contains(scalar) {
                        guard s.count - i >= 2, s[i] == UInt8(ascii: "\\"), s[i + 1] == UInt8(ascii: "u") else { throw Invalid() }
                        i += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw Invalid() }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let u = Unicode.Scalar(scalar) else { throw Invalid() }  // a lone low surrogate
                    bytes.append(contentsOf: String(Character(u)).utf8)
                default: throw Invalid()
                }
            default:
                guard c >= 0x20 else { throw Invalid() }
                bytes.append(c)
            }
        }
    }

    private mutating func hex4() throws -> UInt32 {
        guard s.count - i >= 4 else { throw Invalid() }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let c = s[i]
            i += 1
            switch c {
            case 48...57: v = v << 4 | UInt32(c - 48)
            case 97...102: v = v << 4 | UInt32(c - 87)
            case 65...70: v = v << 4 | UInt32(c - 55)
            default: throw Invalid()
            }
        }
        return v
    }

    private func validated(_ bytes: UnsafeBufferPointer<UInt8>) throws -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else { throw Invalid() }
        return text
    }
}

/// A body type with a fast path for its usual shape (a fleet's batch of fixes): `scan` reads the bytes without
/// building a tree and answers nil on anything it does not expect, or anything the schema would refuse; the body
/// then goes the general way (parse, schema, decode), which names the problem. Whatever `scan` accepts, the
/// general way must decode to the same value (a test compares them on mutated bodies).
public protocol ScannedBody: RequestBody {
    static func scan(_ scanner: inout JSONScanner) -> Self?
}

extension ScannedBody {
    /// The body through `scan`, which must take all of it.
    static func scanned(_ bytes: [UInt8]) -> Self? {
        bytes.withUnsafeBufferPointer { buffer in
            var scanner = JSONScanner(buffer)
            guard let value = scan(&scanner), scanner.atEnd() else { return nil }
            return value
        }
    }
}

/// A cursor over a JSON text for `ScannedBody`: each step takes what it expects, with the white space around it,
/// and answers nil (or false) on anything else.
public struct JSONScanner {
    private var parser: JSONParser

    init(_ bytes: UnsafeBufferPointer<UInt8>) { parser = JSONParser(s: bytes) }

    /// Takes `byte` (`{`, `[`, `:`).
    public mutating func take(_ byte: UInt8) -> Bool {
        parser.skipSpace()
        guard parser.i < parser.s.count, parser.s[parser.i] == byte else { return false }
        parser.i += 1
        return true
    }

    /// After a member or an element: true past a comma, false past `closer`, nil on anything else.
    public mutating func more(before closer: UInt8) -> Bool? { try? parser.more(before: closer) }

    /// A member's name and its colon.
    public mutating func key() -> String? {
        guard let key = string(), take(UInt8(ascii: ":")) else { return nil }
        return key
    }

    /// A string.
    public mutating func string() -> String? {
        parser.skipSpace()
        guard parser.i < parser.s.count, parser.s[parser.i] == UInt8(ascii: "\"") else { return nil }
        return try? parser.string()
    }

    /// Takes `null`.
    public mutating func null() -> Bool {
        parser.skipSpace()
        guard parser.s.count - parser.i >= 4, parser.s[parser.i] == UInt8(ascii: "n") else { return false }
        return (try? parser.expect("null")) != nil
    }

    /// A string as `schema` (`.dateTime`, `.text`, ...) takes it, by the schema's own check.
    public mutating func string(_ schema: Schema) -> String? {
        guard let s = string(), case .string(let valid)? = try? schema.validate(.string(s), path: "") else { return nil }
        return valid
    }

    /// A number that `schema` takes, by the schema's own check.
    public mutating func number(_ schema: Schema) -> Double? {
        parser.skipSpace()
        guard let n = try? parser.number(), (try? schema.validate(.number(n), path: "")) != nil else { return nil }
        return n
    }

    /// Whether nothing but white space is left.
    public mutating func atEnd() -> Bool { parser.skipSpace(); return parser.i == parser.s.count }
}
