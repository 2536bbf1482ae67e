import Foundation
import HTTP

/// Checks of what a path carries (bodies are checked by their `RequestBody.schema`).
public enum Validate {
    /// Whether `text` is an IPv4 or IPv6 address in numeric form.
    public static func isIPAddress(_ text: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }

    /// A path parameter that must be a UUID; anything else is a 404 (it cannot name a resource).
    public static func pathID(_ request: Request, _ name: String = "id") throws -> UUID {
        guard let id = UUID(uuidString: request.parameter(name)) else { throw HTTPError.notFound() }
        return id
    }

    /// An optional query parameter that must be a UUID; anything else is a 400 naming it.
    public static func queryID(_ request: Request, _ name: String) throws -> UUID? {
        try request.query[name].map { text in
            guard let id = UUID(uuidString: text) else { throw HTTPError.validation("\(name) must be a UUID.", field: name) }
            return id
        }
    }

    /// The search words in `?q=`: 1 to 200 characters once trimmed, with no NUL.
    public static func searchText(_ request: Request) throws -> String {
        guard let q = request.query["q"]?.trimmingCharacters(in: .whitespacesAndNewlines), (1...200).contains(q.count),
              !q.contains("\u{0}") else {
            throw HTTPError.validation("q must be 1 to 200 characters.", field: "q")
        }
        return q
    }
}

/// A PATCH field: absent, explicitly null, or a value.
public enum Patch<Value: Decodable>: Decodable {
    case absent
    case null
    case value(Value)

    public init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        self = c.decodeNil() ? .null : .value(try c.decode(Value.self))
    }

    /// The value, when one was given.
    public var value: Value? { if case .value(let v) = self { return v }; return nil }
    /// Whether the field was present at all.
    public var isPresent: Bool { if case .absent = self { return false }; return true }
}

extension Patch: Sendable where Value: Sendable {}

extension KeyedDecodingContainer {
    /// Decodes a PATCH field, telling absent from null.
    public func decode<V>(_ type: Patch<V>.Type, forKey key: Key) throws -> Patch<V> {
        guard contains(key) else { return .absent }
        if try decodeNil(forKey: key) { return .null }
        return .value(try decode(V.self, forKey: key))
    }
}
