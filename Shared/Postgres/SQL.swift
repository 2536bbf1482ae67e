import Foundation

/// A statement and the values it binds. Each interpolated value is sent as a parameter, never as text inside the
/// statement, and the `$1`, `$2`, ... are numbered for you:
///
///     try c.first("SELECT \(ParcelRecord.columns) FROM dispatch.parcels WHERE id = \(id) AND sender_id = \(caller)")
///
/// An interpolated `SQL` (a record's `columns`, a clause built elsewhere) joins the statement with its own values;
/// raw text goes in only through `\(unescaped:)`, for the rare fragment that cannot be a parameter (an identifier
/// from a closed set, `FOR UPDATE`).
public struct SQL: Sendable, ExpressibleByStringInterpolation {
    /// The statement's text with U+0000 where each value goes: NUL cannot be in a statement libpq sends, and fragments
    /// join by concatenation, their values staying in the order their places appear.
    @usableFromInline var text: String
    /// The values, in the order of their places in `text`.
    public private(set) var bindings: [(any PostgresEncodable)?]

    public init(stringLiteral value: String) {
        text = value
        bindings = []
    }

    public init(stringInterpolation: StringInterpolation) {
        text = stringInterpolation.text
        bindings = stringInterpolation.bindings
    }

    /// Raw SQL, taken as it is: for text the code holds (a statement from a file, a migration), never for input.
    public init(unescaped text: String) {
        self.text = text
        bindings = []
    }

    /// The statement as sent: `$1`, `$2`, ... in place of the values. Built from the UTF-8 bytes (no character
    /// breaking): it is made on every call of a statement.
    public var statement: String {
        guard !bindings.isEmpty else { return text }
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count + bindings.count * 3)
        var n = 0
        for byte in text.utf8 {
            guard byte == 0 else { out.append(byte); continue }
            n += 1
            out.append(UInt8(ascii: "$"))
            if n >= 10 { out.append(contentsOf: String(n).utf8) } else { out.append(UInt8(ascii: "0") + UInt8(n)) }
        }
        return String(decoding: out, as: UTF8.self)
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        var text = ""
        var bindings: [(any PostgresEncodable)?] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            text.reserveCapacity(literalCapacity + interpolationCount)
            bindings.reserveCapacity(interpolationCount)
        }

        public mutating func appendLiteral(_ literal: String) { text += literal }

        /// Binds `value` as the statement's next parameter.
        public mutating func appendInterpolation<T: PostgresEncodable>(_ value: T) {
            text += "\0"
            bindings.append(value)
        }

        /// Binds `value`, NULL when nil.
        public mutating func appendInterpolation<T: PostgresEncodable>(_ value: T?) {
            text += "\0"
            bindings.append(value)
        }

        /// Joins another statement's text and values (a record's columns, a clause).
        public mutating func appendInterpolation(_ fragment: SQL) {
            text += fragment.text
            bindings += fragment.bindings
        }

        /// Raw text: only what the code itself holds, never input.
        public mutating func appendInterpolation(unescaped raw: String) { text += raw }
    }

    public static func + (lhs: SQL, rhs: SQL) -> SQL {
        var sum = lhs
        sum.text += rhs.text
        sum.bindings += rhs.bindings
        return sum
    }

    public static func += (lhs: inout SQL, rhs: SQL) { lhs = lhs + rhs }
}

extension Array where Element == SQL {
    /// The fragments one after another, `separator` between them (`", "` for a list of values).
    public func joined(separator: SQL) -> SQL {
        var out: SQL = ""
        for (i, fragment) in enumerated() {
            if i > 0 { out += separator }
            out += fragment
        }
        return out
    }
}

/// A stored record: the columns it is read from, named once, and how it reads them from a row.
/// `SELECT \(Record.columns) FROM ...` and `RETURNING \(Record.columns)` keep every statement and the decoder in step.
public protocol PostgresRecord {
    /// The columns `init(_:)` reads, as a select list.
    static var columns: SQL { get }
    init(_ row: Row) throws
}
