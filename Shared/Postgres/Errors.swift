import CLibPQ
import Foundation
import Models

// MARK: - Errors

/// A PostgreSQL failure. `description` never contains SQL text or parameter values.
public struct PostgresError: Error, CustomStringConvertible, Sendable {
    /// What kind of failure, for mapping to an HTTP status.
    public enum Kind: Sendable, Equatable {
        /// The server cannot be reached, the connection broke, or the pool is exhausted: retry later.
        case unavailable
        /// A unique constraint was violated (23505).
        case uniqueViolation
        /// A foreign key was violated (23503).
        case foreignKeyViolation
        /// A check or not-null constraint was violated (23514, 23502).
        case checkViolation
        /// The value did not fit the column type (22xxx).
        case invalidValue
        /// A serialization failure or deadlock (40001, 40P01): the transaction may be retried.
        case serializationFailure
        /// Anything else: a programming error.
        case other
        /// A row could not be decoded into the Swift type asked for.
        case decoding
    }

    /// The failure kind.
    public let kind: Kind
    /// The SQLSTATE, when the server sent one.
    public let sqlState: String?
    /// The violated constraint's name, when the server sent one.
    public let constraint: String?
    /// The server's message, for logs only (may quote values; never returned to clients).
    public let serverMessage: String

    /// True when the same work may succeed later without change.
    public var isRetriable: Bool { kind == .unavailable || kind == .serializationFailure }

    public var description: String {
        "PostgresError(\(kind), sqlstate: \(sqlState ?? "-"), constraint: \(constraint ?? "-"))"
    }

    @usableFromInline
    init(kind: Kind, sqlState: String? = nil, constraint: String? = nil, serverMessage: String = "") {
        self.kind = kind; self.sqlState = sqlState; self.constraint = constraint; self.serverMessage = serverMessage
    }

    /// The error for a server reply with this SQLSTATE.
    public static func fromServer(sqlState state: String?, constraint: String?, message: String) -> PostgresError {
        let kind: Kind
        switch state {
        case "23505": kind = .uniqueViolation
        case "23503": kind = .foreignKeyViolation
        case "23514", "23502": kind = .checkViolation
        case "40001", "40P01": kind = .serializationFailure
        // A statement past `statement_timeout` or a lock wait past `lock_timeout`: the database is busy, not wrong.
        case "57014", "55P03": kind = .unavailable
        case let s? where s.hasPrefix("22"): kind = .invalidValue
        case let s? where s.hasPrefix("08") || s.hasPrefix("57P") || s == "53300": kind = .unavailable
        default: kind = .other
        }
        return PostgresError(kind: kind, sqlState: state, constraint: constraint, serverMessage: message)
    }
}

