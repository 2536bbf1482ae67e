import Foundation
import HTTP
import Models
import Postgres

// MARK: - The description

/// A request body described once: `schema` validates the parsed JSON (every failure a 400 naming its field), and
/// the validated value decodes into the type, through the same parse; `schema` is also the route's OpenAPI schema.
/// A route that takes the body names its type (`body: CreateGroupBody.self`), and its handler receives it decoded.
public protocol RequestBody: Decodable, Sendable {
    /// The shape of the body: always an `.object`.
    static var schema: Schema { get }
}

/// The shape of a JSON value, a small subset of JSON Schema that every body here needs.
public indirect enum Schema: Sendable {
    /// Text: trimmed of surrounding white space before the checks, `min...max` characters, no control characters
    /// (newlines and tabs allowed when `multiline`). The handler receives the trimmed text.
    case text(min: Int = 1, max: Int, multiline: Bool = false)
    /// A string as sent (not trimmed), at least `min` characters and at most `max` (bytes when `bytes`), matching
    /// `pattern` when given; `rule` is the sentence a client is shown when it does not fit.
    case string(min: Int = 0, max: Int? = nil, pattern: String? = nil, bytes: Bool = false, rule: String? = nil)
    /// One of `values`.
    case oneOf([String])
    /// A UUID in its canonical text form.
    case uuid
    /// An RFC 3339 time.
    case dateTime
    /// A whole number in `range`.
    case integer(ClosedRange<Int>)
    /// A number in `range`.
    case number(ClosedRange<Double>)
    /// `true` or `false`.
    case boolean
    /// An array of `count` items of one shape.
    case array(Schema, count: ClosedRange<Int>)
    /// An object with these members and no others.
    case object(Members)

    /// The members of an object, in order: written as a dictionary literal.
    public struct Members: Sequence, ExpressibleByDictionaryLiteral, Sendable {
        let elements: [(key: String, value: Member)]
        public init(_ elements: [(String, Member)]) { self.elements = elements.map { (key: $0.0, value: $0.1) } }
        public init(dictionaryLiteral elements: (String, Member)...) { self.init(elements) }
        public func makeIterator() -> IndexingIterator<[(key: String, value: Member)]> { elements.makeIterator() }
        var count: Int { elements.count }
    }

    /// A member of an object.
    public struct Member: Sendable {
        let schema: Schema
        let required: Bool
        let nullable: Bool
        /// Must be present, not null.
        public static func required(_ schema: Schema) -> Member { Member(schema: schema, required: true, nullable: false) }
        /// May be absent or null.
        public static func optional(_ schema: Schema) -> Member { Member(schema: schema, required: false, nullable: true) }
        /// Always present, and may be null (an answer's field that is empty).
        public static func nullable(_ schema: Schema) -> Member { Member(schema: schema, required: true, nullable: true) }
        /// May be absent, never null (a PATCH field that cannot be cleared).
        public static func absentOrValue(_ schema: Schema) -> Member { Member(schema: schema, required: false, nullable: false) }
    }
}

// MARK: - Decoding a request

extension JSON {
    /// Decodes a request body as `T`: a JSON content type, a JSON object (parsed once), valid against `T.schema`,
    /// then the Swift value. Every failure is a 400 (`invalid_json`, `validation_failed` with its `field`) or a 415.
    /// Internal: a service gets its body from the route that names its type, so no body goes undocumented.
    static func decodeBody<T: RequestBody>(_ request: Request, as type: T.Type = T.self) throws -> T {
        if let contentType = request.header("content-type") {
            let media = contentType.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() ?? ""
            guard media == "application/json" || media.hasSuffix("+json") else {
                throw HTTPError.unsupportedMediaType("Send the body as application/json.")
            }
        }
        guard !request.body.isEmpty else { throw HTTPError.invalidJSON("A JSON body is required.") }
        if let scanned = T.self as? any ScannedBody.Type, let body = scanned.scanned(request.body) as? T { return body }
        let value: JSONValue
        do { value = try JSONParser.parse(request.body) } catch let error as JSONParser.Invalid { throw HTTPError.invalidJSON(error.message) }
        guard case .object = value else { throw HTTPError.validation("The body must be a JSON object.") }
        let valid = try T.schema.validate(value, path: "")
        do {
            return try T(from: TreeDecoder(valid, path: []))
        } catch let error as DecodingError {
            // The schema and the type disagree: a mistake of ours, but still the client's field is named.
            throw describe(error)
        }
    }
}

/// A parsed JSON value.
enum JSONValue: Sendable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// What a client would call its type, for messages.
    var kind: String {
        switch self {
        case .null: return "null"
        case .bool: return "true or false"
        case .number: return "a number"
        case .string: return "a string"
        case .array: return "an array"
        case .object: return "an object"
        }
    }

    /// The value written one way only: names in order, no white space, numbers and strings as the API writes them.
    /// Two texts of the same value (another order of names, `1.0` for `1`, `\u00e9` for `é`) write alike.
    func canonical(into bytes: inout [UInt8]) {
        switch self {
        case .null: bytes += "null".utf8
        case .bool(let b): bytes += (b ? "true" : "false").utf8
        case .number(let n): bytes += (JSONWriterState.number(n) ?? "null").utf8
        case .string(let s): JSONWriterState.append(escaping: s, to: &bytes)
        case .array(let items):
            bytes.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                item.canonical(into: &bytes)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (i, name) in members.keys.sorted().enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                JSONWriterState.append(escaping: name, to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                members[name]!.canonical(into: &bytes)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }
}

// MARK: - Validation

extension Schema {
    /// Checks `value` and returns it with text trimmed; throws a 400 naming the first field that does not fit.
    func validate(_ value: JSONValue, path: String) throws -> JSONValue {
        let name = path.isEmpty ? "body" : path
        func fail(_ message: String) -> HTTPError { .validation(message, field: path.isEmpty ? nil : path) }
        switch (self, value) {
        case (.text(let min, let max, let multiline), .string(let raw)):
            try Self.noNUL(raw, path)
            // Checked as sent, before trimming: a leading "\u{0B}" or newline is refused as the schema says, not trimmed away.
            for scalar in raw.unicodeScalars where scalar.properties.generalCategory == .control {
                if multiline && (scalar == "\n" || scalar == "\t" || scalar == "\r") { continue }
                throw fail("\(name) must not contain control characters.")
            }
            let trimmed = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard trimmed.count >= min else {
                throw fail(min <= 1 ? "\(name) must not be empty." : "\(name) must be at least \(min) characters.")
            }
            // As JSON Schema's maxLength counts (Unicode scalars, as sent): combining marks count, and so does white space
            // that is trimmed afterwards, so the document's limit and this one are the same.
            guard raw.unicodeScalars.count <= max else { throw fail("\(name) must be at most \(max) characters.") }
            return .string(trimmed)
        case (.string(let min, let max, let pattern, let bytes, let rule), .string(let s)):
            try Self.noNUL(s, path)
            guard s.count >= min else { throw fail(rule ?? "\(name) must be at least \(min) characters.") }
            if let max, (bytes ? s.utf8.count : s.unicodeScalars.count) > max {
                throw fail(rule ?? "\(name) must be at most \(max) \(bytes ? "bytes" : "characters").")
            }
            // The match must span the whole string: ICU's `$` also matches before a final newline ("bob\n").
            if let pattern, s.range(of: pattern, options: .regularExpression) != s.startIndex..<s.endIndex {
                throw fail(rule ?? "\(name) does not have the expected form.")
            }
            return value
        case (.oneOf(let values), .string(let s)):
            guard values.contains(s) else { throw fail("\(name) must be \(Self.list(values)).") }
            return value
        case (.uuid, .string(let s)):
            guard UUID(postgresText: s) != nil else { throw fail("\(name) must be a UUID.") }
            return value
        case (.dateTime, .string(let s)):
            guard s.utf8.count <= 64, Timestamp.parse(s) != nil else { throw fail("\(name) must be an RFC 3339 time.") }
            return value
        case (.integer(let range), .number(let n)):
            guard n == n.rounded(), n.magnitude < 1e15 else { throw fail("\(name) must be a whole number.") }
            guard range.contains(Int(n)) else { throw fail("\(name) must be \(range.lowerBound) to \(range.upperBound).") }
            return value
        case (.number(let range), .number(let n)):
            guard range.contains(n) else { throw fail("\(name) must be \(Self.number(range.lowerBound)) to \(Self.number(range.upperBound)).") }
            return value
        case (.boolean, .bool):
            return value
        case (.array(let item, let count), .array(let items)):
            guard items.count >= count.lowerBound else {
                throw fail("\(name) needs at least \(count.lowerBound) \(count.lowerBound == 1 ? "entry" : "entries").")
            }
            guard items.count <= count.upperBound else { throw fail("\(name) takes at most \(count.upperBound) entries.") }
            return .array(try items.enumerated().map { try item.validate($1, path: "\(path)[\($0)]") })
        case (.object(let members), .object(let object)):
            let prefix = path.isEmpty ? "" : path + "."
            func unknown(_ key: String) -> Bool { !members.contains(where: { $0.key == key }) }
            if object.keys.contains(where: unknown) {
                // The first in sorted order, so the same field is named each time (sorted only on this path).
                let key = object.keys.sorted().first(where: unknown)!
                let shown = String(key.prefix(64))
                if key.contains("\u{0}") { throw HTTPError.validation("Text must not contain NUL characters.", field: path.isEmpty ? "body" : path) }
                throw HTTPError.validation("Unknown field \"\(shown)\".", field: prefix + shown)
            }
            var out = [String: JSONValue](minimumCapacity: members.count)
            for (key, member) in members {
                let field = prefix + key
                switch object[key] {
                case nil:
                    if member.required { throw HTTPError.validation("\(field) is required.", field: field) }
                case .null?:
                    if !member.nullable { throw HTTPError.validation("\(field) must not be null.", field: field) }
                    out[key] = .null
                case let v?:
                    out[key] = try member.schema.validate(v, path: field)
                }
            }
            return .object(out)
        default:
            throw fail("\(name) must be \(typeName).")
        }
    }

    private static func noNUL(_ s: String, _ path: String) throws {
        if s.contains("\u{0}") { throw HTTPError.validation("Text must not contain NUL characters.", field: path.isEmpty ? "body" : path) }
    }

    private static func list(_ values: [String]) -> String {
        values.count <= 1 ? values.joined() : values.dropLast().joined(separator: ", ") + " or " + values.last!
    }

    private static func number(_ n: Double) -> String { n == n.rounded() ? String(Int(n)) : String(n) }

    /// The type a client must send, for messages.
    var typeName: String {
        switch self {
        case .text, .string, .oneOf, .uuid, .dateTime: return "a string"
        case .integer: return "a whole number"
        case .number: return "a number"
        case .boolean: return "true or false"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

// MARK: - OpenAPI

extension Schema {
    /// The JSON Schema of this shape as text.
    public var jsonText: String { Self.text(jsonSchema) }

    /// A JSON Schema as the route table keeps it: compact, keys sorted.
    static func text(_ schema: [String: Any]) -> String {
        let data = try? JSONSerialization.data(withJSONObject: schema, options: [.sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data ?? Data(), as: UTF8.self)
    }

    /// The JSON Schema of this shape, for the OpenAPI document.
    public var jsonSchema: [String: Any] {
        switch self {
        case .text(let min, let max, let multiline):
            // No control characters (but line breaks and tabs in multi-line text), and for a required text at least
            // one that is not white space: the rules `validate` applies, as a pattern.
            let allowed = multiline ? #"[^\u0000-\u0008\u000B\u000C\u000E-\u001F\u007F-\u009F]"# : #"[^\u0000-\u001F\u007F-\u009F]"#
            let visible = #"[^\s\u0000-\u001F\u007F-\u009F]"#
            return ["type": "string", "minLength": min, "maxLength": max,
                    "pattern": min > 0 ? "^\(allowed)*\(visible)\(allowed)*$" : "^\(allowed)*$",
                    "description": "Trimmed of surrounding white space before the length is checked; no control characters"]
        case .string(let min, let max, let pattern, _, let rule):
            var s: [String: Any] = ["type": "string", "minLength": min]
            if let max { s["maxLength"] = max }
            if let pattern { s["pattern"] = pattern }
            if let rule { s["description"] = rule }
            return s
        case .oneOf(let values): return ["type": "string", "enum": values]
        case .uuid: return ["type": "string", "format": "uuid"]
        case .dateTime: return ["type": "string", "format": "date-time"]
        // Bounds a type has anyway (a view's `Int`, an array of any length) are left out.
        case .integer(let r):
            var s: [String: Any] = ["type": "integer"]
            if r.lowerBound != Int.min { s["minimum"] = r.lowerBound }
            if r.upperBound != Int.max { s["maximum"] = r.upperBound }
            return s
        case .number(let r):
            var s: [String: Any] = ["type": "number"]
            if r.lowerBound.isFinite && r.lowerBound > -Double.greatestFiniteMagnitude { s["minimum"] = r.lowerBound }
            if r.upperBound.isFinite && r.upperBound < Double.greatestFiniteMagnitude { s["maximum"] = r.upperBound }
            return s
        case .boolean: return ["type": "boolean"]
        case .array(let item, let count):
            var s: [String: Any] = ["type": "array", "items": item.jsonSchema, "minItems": count.lowerBound]
            if count.upperBound != Int.max { s["maxItems"] = count.upperBound }
            return s
        case .object(let members):
            var properties: [String: Any] = [:]
            for (key, member) in members {
                var s = member.schema.jsonSchema
                if member.nullable, let type = s["type"] as? String { s["type"] = [type, "null"] }
                if member.nullable, s["enum"] != nil { s["enum"] = (s["enum"] as? [String] ?? []) as [Any] + [NSNull()] }
                properties[key] = s
            }
            return ["type": "object", "additionalProperties": false, "properties": properties,
                    "required": members.filter(\.value.required).map(\.key)]
        }
    }
}

// MARK: - Decoding from the validated value

/// A `Decoder` over a `JSONValue`, so a validated body becomes its Swift type without being parsed again.
struct TreeDecoder: Decoder {
    let value: JSONValue
    let codingPath: [CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    init(_ value: JSONValue, path: [CodingKey]) { self.value = value; codingPath = path }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = value else { throw mismatch([String: Any].self) }
        return KeyedDecodingContainer(Keyed(object: object, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> UnkeyedDecodingContainer {
        guard case .array(let items) = value else { throw mismatch([Any].self) }
        return Unkeyed(items: items, codingPath: codingPath)
    }

    func singleValueContainer() throws -> SingleValueDecodingContainer { Single(value: value, codingPath: codingPath) }

    private func mismatch(_ type: Any.Type) -> DecodingError {
        .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "found \(value.kind)"))
    }

    /// Decodes `value` as `T`: the JSON primitives and UUIDs directly, anything else through its own `init(from:)`.
    /// Types are compared by metatype before any cast, and a UUID is read by hand: a batch of a thousand location
    /// fixes spent a third of its decoding in failed casts and in `sscanf` under Foundation's UUID parser.
    static func decode<T: Decodable>(_ type: T.Type, _ value: JSONValue, _ path: [CodingKey]) throws -> T {
        func mismatch() -> DecodingError { .typeMismatch(T.self, .init(codingPath: path, debugDescription: "found \(value.kind)")) }
        switch value {
        case .string(let s):
            if T.self == String.self { return s as! T }
            if T.self == UUID.self {
                guard let id = UUID(postgresText: s) else {
                    throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "not a UUID"))
                }
                return id as! T
            }
        case .bool(let b):
            if T.self == Bool.self { return b as! T }
        case .number(let n):
            if T.self == Double.self { return n as! T }
            if T.self == Float.self { return Float(n) as! T }
            if T.self == Int.self || T.self == Int64.self || T.self == Int32.self {
                guard n == n.rounded(), n.magnitude < 9e15 else { throw DecodingError.dataCorrupted(.init(codingPath: path, debugDescription: "not whole")) }
                if T.self == Int.self { return Int(n) as! T }
                if T.self == Int64.self { return Int64(n) as! T }
                guard let i = Int32(exactly: n) else { throw mismatch() }
                return i as! T
            }
        case .null:
            throw DecodingError.valueNotFound(T.self, .init(codingPath: path, debugDescription: "null"))
        default: break
        }
        if T.self == String.self || T.self == Bool.self || T.self == Double.self || T.self == Float.self || T.self == Int.self
            || T.self == Int64.self || T.self == Int32.self {
            throw mismatch()
        }
        return try T(from: TreeDecoder(value, path: path))
    }

    private struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let object: [String: JSONValue]
        let codingPath: [CodingKey]
        var allKeys: [Key] { object.keys.compactMap(Key.init(stringValue:)) }
        func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }
        func decodeNil(forKey key: Key) throws -> Bool {
            guard let v = object[key.stringValue] else { throw missing(key) }
            if case .null = v { return true }
            return false
        }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            guard let v = object[key.stringValue] else { throw missing(key) }
            return try TreeDecoder.decode(T.self, v, codingPath + [key])
        }
        func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
            guard let v = object[key.stringValue] else { return nil }
            if case .null = v { return nil }
            return try TreeDecoder.decode(T.self, v, codingPath + [key])
        }
        func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: Key) throws -> KeyedDecodingContainer<N> {
            guard let v = object[key.stringValue] else { throw missing(key) }
            return try TreeDecoder(v, path: codingPath + [key]).container(keyedBy: N.self)
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> UnkeyedDecodingContainer {
            guard let v = object[key.stringValue] else { throw missing(key) }
            return try TreeDecoder(v, path: codingPath + [key]).unkeyedContainer()
        }
        func superDecoder() throws -> Decoder { TreeDecoder(.object(object), path: codingPath) }
        func superDecoder(forKey key: Key) throws -> Decoder { TreeDecoder(object[key.stringValue] ?? .null, path: codingPath + [key]) }
        private func missing(_ key: Key) -> DecodingError {
            .keyNotFound(key, .init(codingPath: codingPath, debugDescription: "missing"))
        }
    }

    private struct Unkeyed: UnkeyedDecodingContainer {
        let items: [JSONValue]
        let codingPath: [CodingKey]
        var currentIndex = 0
        var count: Int? { items.count }
        var isAtEnd: Bool { currentIndex >= items.count }
        private struct Index: CodingKey {
            let intValue: Int?
            var stringValue: String { "\(intValue ?? 0)" }
            init(_ i: Int) { intValue = i }
            init?(stringValue: String) { nil }
            init?(intValue: Int) { self.intValue = intValue }
        }
        private mutating func next() throws -> (JSONValue, [CodingKey]) {
            guard !isAtEnd else { throw DecodingError.valueNotFound(Any.self, .init(codingPath: codingPath, debugDescription: "end")) }
            defer { currentIndex += 1 }
            return (items[currentIndex], codingPath + [Index(currentIndex)])
        }
        mutating func decodeNil() throws -> Bool {
            guard !isAtEnd, case .null = items[currentIndex] else { return false }
            currentIndex += 1
            return true
        }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let (v, path) = try next()
            return try TreeDecoder.decode(T.self, v, path)
        }
        mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type) throws -> KeyedDecodingContainer<N> {
            let (v, path) = try next()
            return try TreeDecoder(v, path: path).container(keyedBy: N.self)
        }
        mutating func nestedUnkeyedContainer() throws -> UnkeyedDecodingContainer {
            let (v, path) = try next()
            return try TreeDecoder(v, path: path).unkeyedContainer()
        }
        mutating func superDecoder() throws -> Decoder {
            let (v, path) = try next()
            return TreeDecoder(v, path: path)
        }
    }

    private struct Single: SingleValueDecodingContainer {
        let value: JSONValue
        let codingPath: [CodingKey]
        func decodeNil() -> Bool { if case .null = value { return true }; return false }
        func decode<T: Decodable>(_ type: T.Type) throws -> T { try TreeDecoder.decode(T.self, value, codingPath) }
    }
}
