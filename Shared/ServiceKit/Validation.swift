import Foundation
import HTTP

/// Checks shared by every service's handlers; each failure is a 400 naming the field.
public enum Validate {
    /// Trimmed text of `min...max` characters without control characters (newlines allowed when `multiline`).
    public static func text(_ value: String, field: String, min: Int = 1, max: Int, multiline: Bool = false) throws -> String {
        let trimmed = value.trimmingCharacters(in: .whitespacesAndNewlines)
        guard trimmed.count >= min else {
            throw HTTPError.validation(min <= 1 ? "\(field) must not be empty." : "\(field) must be at least \(min) characters.", field: field)
        }
        guard trimmed.count <= max else { throw HTTPError.validation("\(field) must be at most \(max) characters.", field: field) }
        for scalar in trimmed.unicodeScalars where scalar.properties.generalCategory == .control {
            if multiline && (scalar == "\n" || scalar == "\t" || scalar == "\r") { continue }
            throw HTTPError.validation("\(field) must not contain control characters.", field: field)
        }
        return trimmed
    }

    /// A UUID in canonical text form.
    public static func uuid(_ value: String, field: String) throws -> UUID {
        guard value.count == 36, let id = UUID(uuidString: value) else {
            throw HTTPError.validation("\(field) must be a UUID.", field: field)
        }
        return id
    }

    /// A path parameter that must be a UUID; anything else is a 404 (it cannot name a resource).
    public static func pathID(_ request: Request, _ name: String = "id") throws -> UUID {
        guard let id = UUID(uuidString: request.parameter(name)) else { throw HTTPError.notFound() }
        return id
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

extension KeyedDecodingContainer {
    /// Decodes a PATCH field, telling absent from null.
    public func decode<V>(_ type: Patch<V>.Type, forKey key: Key) throws -> Patch<V> {
        guard contains(key) else { return .absent }
        if try decodeNil(forKey: key) { return .null }
        return .value(try decode(V.self, forKey: key))
    }
}
