import Foundation
import HTTP
import Postgres
import Crypto

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

// MARK: - Error mapping

extension HTTPError {
    /// The response for any error a handler throws: HTTP errors as they are, a domain's refusals by their kind,
    /// database and broker outages and a full password-hashing queue as 503,
    /// constraint violations as 409/400; anything else is a bare 500 with nothing internal in it.
    public static func from(_ error: Error) -> HTTPError {
        switch error {
        case let e as HTTPError: return e
        case let e as any DomainError: return HTTPError(e)
        case is PasswordHasher.Busy: return .unavailable(retryAfter: 1)
        case let e as PostgresError:
            switch e.kind {
            case .unavailable: return .unavailable(retryAfter: 2)
            case .uniqueViolation: return .conflict("That already exists.")
            case .foreignKeyViolation: return .conflict("A referenced resource does not exist or is still in use.")
            case .checkViolation, .invalidValue: return .validation("A value is not valid.")
            case .serializationFailure: return .unavailable(retryAfter: 1)
            case .other, .decoding: return .internalError
            }
        default: return .internalError
        }
    }
}

// MARK: - Pagination

/// `?limit=` and `?cursor=` of a list request; cursors are opaque base64url JSON arrays of keyset values.
extension QueryParameter {
    /// `limit` of a page.
    public static func limit(max: Int = 100, default value: Int = 20) -> QueryParameter {
        QueryParameter("limit", .integer(1...max), "Items per page", default: String(value))
    }
    /// `cursor`: the `nextCursor` of the previous page.
    public static let cursor = QueryParameter("cursor", .string(), "The previous page's nextCursor")
    /// Both.
    public static let page = [limit(), cursor]
}

public struct Page: Sendable {
    /// 1...100, default 20 (unless the route sets other bounds).
    public let limit: Int
    /// The decoded keyset position, or nil for the first page.
    public let after: [String]?

    /// Reads and validates `limit` (1...`maxLimit`, default `defaultLimit`) and `cursor`.
    public init(_ request: Request, maxLimit: Int = 100, defaultLimit: Int = 20) throws {
        if let text = request.query["limit"] {
            guard let n = Int(text), (1...maxLimit).contains(n) else {
                throw HTTPError.validation("limit must be a whole number from 1 to \(maxLimit).", field: "limit")
            }
            limit = n
        } else {
            limit = defaultLimit
        }
        if let cursor = request.query["cursor"], !cursor.isEmpty {
            guard let values = Cursor.decode(cursor) else {
                throw HTTPError.validation("cursor is not valid.", field: "cursor")
            }
            after = values
        } else {
            after = nil
        }
    }
}

/// A page of results: `{"items": [...], "nextCursor": "..." | null}`.
public struct PageResponse<Item> {
    public let items: [Item]
    public let nextCursor: String?
    public init(items: [Item], nextCursor: String?) { self.items = items; self.nextCursor = nextCursor }

    /// A page from up to `page.limit + 1` fetched rows: the first `limit` become items, and when there were more,
    /// the cursor points after the last item shown.
    public init<Row>(_ rows: [Row], _ page: Page, item: (Row) throws -> Item, cursor: (Row) throws -> [String]) rethrows {
        let shown = rows.prefix(page.limit)
        items = try shown.map(item)
        nextCursor = try rows.count > page.limit ? shown.last.map { Cursor.encode(try cursor($0)) } : nil
    }
}

extension PageResponse: Encodable where Item: Encodable {
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: Keys.self)
        try c.encode(items, forKey: .items)
        try c.encode(nextCursor, forKey: .nextCursor)  // null, not omitted
    }
    enum Keys: String, CodingKey { case items, nextCursor }
}

/// Opaque keyset cursors.
public enum Cursor {
    /// Encodes keyset values.
    public static func encode(_ values: [String]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: values)) ?? Data()
        return Crypto.Base64URL.encode(Array(data))
    }

    /// Decodes a cursor; nil when it is not one of ours.
    public static func decode(_ text: String) -> [String]? {
        guard text.count <= 1024, let bytes = Crypto.Base64URL.decode(text),
              let values = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String] else { return nil }
        return values
    }
}
