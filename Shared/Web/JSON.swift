import Foundation
import HTTP

/// The JSON coders of the API: camelCase as declared, no escaped slashes.
public enum JSON {
    /// Encodes a response or event value.
    public static func encode<T: Encodable>(_ value: T) throws -> [UInt8] {
        try JSONWriter.encode(value)
    }

    private static func pathText(_ path: [CodingKey]) -> String {
        var out = ""
        for key in path {
            if let i = key.intValue { out += "[\(i)]" } else { out += out.isEmpty ? key.stringValue : ".\(key.stringValue)" }
        }
        return out
    }

    static func describe(_ error: DecodingError) -> HTTPError {
        switch error {
        case .keyNotFound(let key, let context):
            let field = pathText(context.codingPath + [key])
            return .validation("\(field) is required.", field: field)
        case .valueNotFound(_, let context):
            let field = pathText(context.codingPath)
            return .validation("\(field) must not be null.", field: field)
        case .typeMismatch(let type, let context):
            let field = pathText(context.codingPath)
            return .validation("\(field) must be \(typeName(type)).", field: field)
        case .dataCorrupted(let context):
            // The body parsed as JSON already, so this is a value that does not fit (say 1.5 for a whole number).
            let field = pathText(context.codingPath)
            if field.isEmpty { return .validation("A value does not have the expected type.") }
            return .validation("\(field) is not valid.", field: field)
        @unknown default:
            return .invalidJSON()
        }
    }

    private static func typeName(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        case is Int.Type, is Int64.Type, is Int32.Type: return "a whole number"
        case is Double.Type, is Float.Type: return "a number"
        case is [Any].Type: return "an array"
        default: return type is any Collection.Type ? "an array" : "an object"
        }
    }
}

extension Response {
    /// A JSON response.
    public static func json<T: Encodable>(_ value: T, status: Int = 200) throws -> Response {
        Response(status: status, headers: [("Content-Type", "application/json")], body: try JSON.encode(value))
    }
}
