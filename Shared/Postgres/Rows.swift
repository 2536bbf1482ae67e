import Foundation

// MARK: - Rows

/// One result row; columns are read by name and decoded into Swift types.
///
/// Decoding is `@inlinable` so that it is specialized for each type where it is called: through the generic entry
/// point, looking up the type's metadata cost a tenth of a newsletter read.
public struct Row: Sendable {
    /// The columns' names, shared by the rows of a result. Found by a scan (from the end: of two columns of one name,
    /// the later counts): a row has a few columns, and comparing names (most of them short enough to be held inline)
    /// costs less than hashing one.
    @usableFromInline let names: [String]
    /// The values' text of every row of the result, one after another, and where each value is in it (`count` -1:
    /// NULL), row after row: shared by the rows, so that reading a result makes no allocation per row or value.
    @usableFromInline let bytes: [UInt8]
    @usableFromInline let spans: [(start: Int, count: Int)]
    /// Where this row's values begin in `spans`.
    @usableFromInline let first: Int

    /// The column's value, or nil for SQL NULL. Throws when the column is missing or does not decode.
    @inlinable
    public func decode<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) throws -> T? {
        try self[column, as: T?.self]
    }

    /// The column's value; NULL throws, unless `T` is an optional.
    @inlinable
    public subscript<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) -> T {
        get throws {
            guard let index = names.lastIndex(of: column) else {
                throw PostgresError(kind: .decoding, serverMessage: "no column \(column)")
            }
            return try value(at: index, as: T.self)
        }
    }

    /// The row's columns in order, decoded into a tuple: `let (id, name, seen) = try row.decode(UUID.self, String.self, Date?.self)`.
    @inlinable
    public func decode<each T: PostgresDecodable>(_ types: repeat (each T).Type) throws -> (repeat each T) {
        var index = 0
        func next<V: PostgresDecodable>(_ type: V.Type) throws -> V {
            defer { index += 1 }
            return try value(at: index, as: V.self)
        }
        return (repeat try next((each T).self))
    }

    /// The number of columns.
    public var count: Int { names.count }

    @inlinable
    func value<T: PostgresDecodable>(at index: Int, as type: T.Type) throws -> T {
        guard index < names.count else {
            throw PostgresError(kind: .decoding, serverMessage: "no column \(index + 1)")
        }
        let span = spans[first + index]
        guard span.count >= 0 else {
            guard let null = T.postgresNull else {
                throw PostgresError(kind: .decoding, serverMessage: "column \(names[index]) is NULL")
            }
            return null
        }
        guard let value = bytes.withUnsafeBufferPointer({ T(postgresBytes: UnsafeBufferPointer(rebasing: $0[span.start..<span.start + span.count])) })
        else {
            throw PostgresError(kind: .decoding, serverMessage: "column \(names[index]) is not \(T.self)")
        }
        return value
    }
}

/// The rows of a statement and how many rows it changed.
public struct QueryResult: Sendable {
    /// The returned rows.
    public let rows: [Row]
    /// Rows inserted, updated or deleted (0 for SELECT).
    public let affectedRows: Int
}

