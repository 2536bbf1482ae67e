import Foundation

/// What an event payload's Swift type cannot say in its JSON Schema, kept beside the type (`static let schema`):
/// the values a string takes, its limits, a field's description. The rest comes from the type itself
/// (`EventSchema.document`): which fields there are, their JSON types, and which are required (non-optional).
///
/// An id is a `UUID` and a time a `Date` in the type, which gives their formats; a `String` whose name says it holds
/// an id (`id`, `…Id`, `…Ids`, `…By`) or a time (`at`, `…At`) fails the generation, unless its format is given here
/// (`.plain` for a name that means something else, as a plan's `planId`).
public struct EventSchema: Sendable {
    /// A description of the whole `data` object.
    public var description: String?
    /// The fields that need more than their type, by name (top-level fields of `data`).
    public var fields: [String: Field]

    public init(description: String? = nil, _ fields: [String: Field] = [:]) {
        self.description = description; self.fields = fields
    }

    /// A string's format, when its name does not say it.
    public enum Format: String, Sendable {
        case uuid, dateTime = "date-time", plain
    }

    /// What one field needs beyond its Swift type; every part optional.
    public struct Field: Sendable {
        public var values: [String]?
        public var format: Format?
        public var pattern: String?
        public var minLength: Int?
        public var maxLength: Int?
        public var minimum: Int?
        public var maximum: Int?
        public var maxItems: Int?
        /// May be sent as `null` (besides being absent).
        public var nullable: Bool
        public var description: String?

        public init(values: [String]? = nil, format: Format? = nil, pattern: String? = nil, minLength: Int? = nil, maxLength: Int? = nil,
                    minimum: Int? = nil, maximum: Int? = nil, maxItems: Int? = nil, nullable: Bool = false, description: String? = nil) {
            self.values = values; self.format = format; self.pattern = pattern; self.minLength = minLength; self.maxLength = maxLength
            self.minimum = minimum; self.maximum = maximum; self.maxItems = maxItems; self.nullable = nullable; self.description = description
        }

        /// A string that is one of `values`.
        public static func oneOf(_ values: [String], description: String? = nil) -> Field { Field(values: values, description: description) }
        public static func described(_ text: String) -> Field { Field(description: text) }
        /// Sent as `null` at times, besides absent.
        public static let nullable = Field(nullable: true)
        public static let dateTime = Field(format: .dateTime)
    }
}

// MARK: - The generated document

extension EventSchema {
    /// The URI that names an event type's schema: its `$id`, and the CloudEvents `dataschema` of its events.
    public static func uri(of type: String) -> String { "urn:backend:schema:events:\(type)" }

    /// The JSON Schema (2020-12) of `payload`'s CloudEvents envelope, published by `producer`, with a key (what the
    /// subject is) and a summary: the envelope is the same for every type, its `data` is what the Swift type decodes,
    /// with what `payload.schema` adds.
    public static func document(of payload: any EventPayload.Type, producer: String, key: String, summary: String) throws -> OrderedJSON {
        let type = payload.type, hints = payload.schema
        guard case .object(let fields) = try Shape.of(payload) else { throw SchemaError("\(type): its payload is no JSON object") }
        if let unknown = Set(hints.fields.keys).subtracting(fields.map(\.name)).sorted().first {
            throw SchemaError("\(type): its schema describes `\(unknown)`, which the payload does not have")
        }
        var data: [(String, OrderedJSON)]
        do { data = try objectSchema(fields, hints: hints.fields) } catch let error as SchemaError { throw SchemaError("\(type): \(error)") }
        if let description = hints.description { data.insert(("description", .string(description)), at: 1) }
        let envelope = ["specversion", "id", "source", "type", "time", "subject", "datacontenttype", "dataschema", "data"]
        let uuid: OrderedJSON = .object([("type", "string"), ("format", "uuid")])
        return .object([
            ("$schema", "https://json-schema.org/draft/2020-12/schema"),
            ("$id", .string(uri(of: type))),
            ("title", .string(type)),
            ("description", .string("CloudEvents 1.0 envelope of a \(type) event (structured mode). Kafka key: the subject, the \(key). \(summary)")),
            ("type", "object"),
            ("required", .array(envelope.map(OrderedJSON.string))),
            ("additionalProperties", false),
            ("properties", .object([
                ("specversion", .object([("const", "1.0")])),
                ("id", uuid),
                ("source", .object([("const", .string("/\(producer)"))])),
                ("type", .object([("const", .string(type))])),
                ("time", .object([("type", "string"), ("format", "date-time")])),
                ("subject", uuid),
                ("datacontenttype", .object([("const", "application/json")])),
                ("dataschema", .object([("const", .string(uri(of: type)))])),
                ("traceparent", .object([
                    ("type", "string"), ("pattern", "^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"),
                    ("description", "W3C trace context of the request or event that caused this one (CloudEvents distributed-tracing extension); absent when there was none"),
                ])),
                ("data", .object(data)),
            ])),
        ])
    }

    static func objectSchema(_ fields: [Shape.Field], hints: [String: Field] = [:]) throws -> [(String, OrderedJSON)] {
        [("type", "object"), ("additionalProperties", false),
         ("required", .array(fields.filter(\.required).map { .string($0.name) })),
         ("properties", .object(try fields.map { ($0.name, try fieldSchema($0, hint: hints[$0.name] ?? Field())) }))]
    }

    static func fieldSchema(_ field: Shape.Field, hint: Field) throws -> OrderedJSON {
        var out: [(String, OrderedJSON)] = []
        func add(_ key: String, _ value: Int?) { if let value { out.append((key, .int(value))) } }
        // A hint narrows a shared enum to the values this field takes (`parcel.status`'s `to` is never its first state).
        let values: [String]? = if case .enumeration(let values) = field.shape { hint.values ?? values } else { hint.values }
        if let values {
            out.append(("enum", .array(values.map(OrderedJSON.string))))
        } else {
            out = try typeSchema(field.shape, name: field.name, format: hint.format, nullable: hint.nullable)
        }
        if let pattern = hint.pattern { out.append(("pattern", .string(pattern))) }
        add("minLength", hint.minLength); add("maxLength", hint.maxLength)
        add("minimum", hint.minimum); add("maximum", hint.maximum); add("maxItems", hint.maxItems)
        if let description = hint.description { out.append(("description", .string(description))) }
        return .object(out)
    }

    static func typeSchema(_ shape: Shape, name: String, format: Format? = nil, nullable: Bool = false) throws -> [(String, OrderedJSON)] {
        func type(_ name: String) -> (String, OrderedJSON) { ("type", nullable ? .array([.string(name), "null"]) : .string(name)) }
        switch shape {
        case .string(let known):
            if known == nil, format == nil, let implied = formatByName(name) {
                let (what, swiftType) = implied == .uuid ? ("an id", "UUID") : ("a time", "Date")
                throw SchemaError("`\(name)` is a String but its name says it holds \(what): make it a \(swiftType)")
            }
            guard let format = format ?? known, format != .plain else { return [type("string")] }
            return [type("string"), ("format", .string(format.rawValue))]
        case .integer: return [type("integer")]
        case .number: return [type("number")]
        case .boolean: return [type("boolean")]
        case .enumeration(let values): return [("enum", .array(values.map(OrderedJSON.string)))]
        case .array(let element):
            // The elements of `memberIds` are ids as `memberId` would be.
            let elementName = name.hasSuffix("s") ? String(name.dropLast()) : name
            return [type("array"), ("items", .object(try typeSchema(element, name: elementName)))]
        case .object(let fields): return try objectSchema(fields)
        }
    }

    /// The format a field's name implies: what a String so named is refused for.
    static func formatByName(_ name: String) -> Format? {
        if name == "id" || name.hasSuffix("Id") || name.hasSuffix("By") { return .uuid }
        if name == "at" || name.hasSuffix("At") { return .dateTime }
        return nil
    }
}

public struct SchemaError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - The shape of a Decodable type

/// The JSON shape a Decodable type reads, found by decoding it once from a decoder that answers every question
/// with a stand-in value and records it: `decode` is a required field, `decodeIfPresent` an optional one.
indirect enum Shape {
    struct Field { let name: String; let required: Bool; let shape: Shape }
    case string(EventSchema.Format?), integer, number, boolean, enumeration([String]), array(Shape), object([Field])

    static func of(_ type: any Decodable.Type) throws -> Shape { try Probe.shape(of: type).shape }
}

/// A value that can stand in for `T` in a probe, with its shape, when `T` is not read through a container.
private func standIn<T: Decodable>(_ type: T.Type) -> (T, Shape)? {
    if T.self == UUID.self { return (UUID() as! T, .string(.uuid)) }
    if T.self == Date.self { return (Date() as! T, .string(.dateTime)) }
    if let cases = T.self as? any (CaseIterable & RawRepresentable).Type {
        func open<E: CaseIterable & RawRepresentable>(_ e: E.Type) -> (Any, [String]) {
            (E.allCases.first as Any, E.allCases.map { "\($0.rawValue)" })
        }
        let (first, values) = open(cases)
        if let first = first as? T { return (first, .enumeration(values)) }
    }
    return nil
}

private final class Probe: Decoder {
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] = [:]
    var shape: Shape?
    var fields: [Shape.Field] = []
    var optional: Set<String> = []

    static func shape<T: Decodable>(of type: T.Type) throws -> (value: T, shape: Shape) {
        if let standIn = standIn(type) { return standIn }
        let probe = Probe()
        let value = try T(from: probe)
        guard let shape = probe.shape else { throw SchemaError("\(T.self) reads nothing") }
        return (value, shape)
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        shape = .object([])
        return KeyedDecodingContainer(Keyed<Key>(probe: self))
    }
    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { Unkeyed(probe: self) }
    func singleValueContainer() throws -> any SingleValueDecodingContainer { Single(probe: self) }

    func record(_ key: String, _ shape: Shape) {
        fields.append(Shape.Field(name: key, required: !optional.contains(key), shape: shape))
        self.shape = .object(fields)
    }

    static func primitive<T>(_ type: T.Type) -> (T, Shape)? {
        switch type {
        case is String.Type: return ("" as! T, .string(nil))
        case is Bool.Type: return (false as! T, .boolean)
        case is Double.Type: return (0.0 as! T, .number)
        case is Float.Type: return (Float(0) as! T, .number)
        case is Int.Type: return (0 as! T, .integer)
        case is Int64.Type: return (Int64(0) as! T, .integer)
        case is Int32.Type: return (Int32(0) as! T, .integer)
        default: return nil
        }
    }

    static func value<T: Decodable>(_ type: T.Type) throws -> (T, Shape) {
        if let primitive = primitive(type) { return primitive }
        return try shape(of: type)
    }

    struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let probe: Probe
        var codingPath: [any CodingKey] { [] }
        var allKeys: [Key] { [] }
        // The synthesized `decodeIfPresent` asks `contains` first: that is how an optional field shows.
        func contains(_ key: Key) -> Bool { probe.optional.insert(key.stringValue); return true }
        func decodeNil(forKey key: Key) throws -> Bool { false }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            let (value, shape) = try Probe.value(type)
            probe.record(key.stringValue, shape)
            return value
        }
        func nestedContainer<N: CodingKey>(keyedBy type: N.Type, forKey key: Key) throws -> KeyedDecodingContainer<N> {
            throw SchemaError("nested containers are not described")
        }
        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { throw SchemaError("nested containers are not described") }
        func superDecoder() throws -> any Decoder { throw SchemaError("super decoders are not described") }
        func superDecoder(forKey key: Key) throws -> any Decoder { throw SchemaError("super decoders are not described") }
    }

    /// An array: one element is read, and its shape is every element's.
    struct Unkeyed: UnkeyedDecodingContainer {
        let probe: Probe
        var codingPath: [any CodingKey] { [] }
        var count: Int? { 1 }
        var currentIndex = 0
        var isAtEnd: Bool { currentIndex > 0 }
        init(probe: Probe) { self.probe = probe }
        mutating func decodeNil() throws -> Bool { false }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let (value, shape) = try Probe.value(type)
            probe.shape = .array(shape)
            currentIndex += 1
            return value
        }
        mutating func nestedContainer<N: CodingKey>(keyedBy type: N.Type) throws -> KeyedDecodingContainer<N> {
            throw SchemaError("nested containers are not described")
        }
        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { throw SchemaError("nested containers are not described") }
        mutating func superDecoder() throws -> any Decoder { throw SchemaError("super decoders are not described") }
    }

    struct Single: SingleValueDecodingContainer {
        let probe: Probe
        var codingPath: [any CodingKey] { [] }
        func decodeNil() -> Bool { false }
        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            let (value, shape) = try Probe.value(type)
            probe.shape = shape
            return value
        }
    }
}

// MARK: - JSON that keeps its keys' order

/// A JSON value whose objects keep their keys in the order given, so a generated schema reads in the order of the
/// type it describes.
public indirect enum OrderedJSON: Sendable, ExpressibleByStringLiteral, ExpressibleByBooleanLiteral {
    case string(String), int(Int), bool(Bool), array([OrderedJSON]), object([(String, OrderedJSON)])

    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }

    /// Indented by two spaces, one member a line, ending with a newline.
    public var text: String { rendered(indent: "") + "\n" }

    func rendered(indent: String) -> String {
        let inner = indent + "  "
        switch self {
        case .string(let s): return JSONString.quoted(s)
        case .int(let n): return String(n)
        case .bool(let b): return b ? "true" : "false"
        case .array(let items):
            if items.isEmpty { return "[]" }
            return "[\n" + items.map { inner + $0.rendered(indent: inner) }.joined(separator: ",\n") + "\n\(indent)]"
        case .object(let members):
            if members.isEmpty { return "{}" }
            return "{\n" + members.map { inner + JSONString.quoted($0.0) + ": " + $0.1.rendered(indent: inner) }.joined(separator: ",\n") + "\n\(indent)}"
        }
    }

}
