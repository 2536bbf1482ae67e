import Crypto
import Foundation
import HTTP

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
