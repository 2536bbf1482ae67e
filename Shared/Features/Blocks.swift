import Events
import Foundation
import Models
import Postgres

/// Who blocked whom, as auth's `user.blocked` and `user.unblocked` events tell a service, in its schema's `blocks`
/// table (`Blocks.tableSQL` in its migrations). A service applies what a block means where it shows people: no
/// direct room, their messages and comments hidden from the one who blocked them, no joining what that one runs.
public struct Blocks: Sendable {
    public let schema: String

    public init(schema: String) { self.schema = schema }

    public static let tableSQL = """
        CREATE TABLE blocks (
            user_id uuid NOT NULL,
            blocked_id uuid NOT NULL,
            PRIMARY KEY (user_id, blocked_id)
        );
        CREATE INDEX blocks_by_blocked ON blocks (blocked_id);
        """

    /// The topics it reads.
    public static let topics = [UserBlocked.type, UserUnblocked.type]

    /// Records a `user.blocked` or `user.unblocked`; false for any other event.
    @discardableResult
    public func apply(_ event: ReceivedEvent, on c: Connection) throws -> Bool {
        switch event.type {
        case UserBlocked.type:
            let b = try event.decode(UserBlocked.self)
            guard let user = UUID(uuidString: b.userId), let blocked = UUID(uuidString: b.blockedUserId) else { return true }
            try c.execute("INSERT INTO \(schema).blocks (user_id, blocked_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [user, blocked])
        case UserUnblocked.type:
            let b = try event.decode(UserUnblocked.self)
            guard let user = UUID(uuidString: b.userId), let blocked = UUID(uuidString: b.blockedUserId) else { return true }
            try c.execute("DELETE FROM \(schema).blocks WHERE user_id = $1 AND blocked_id = $2", [user, blocked])
        default:
            return false
        }
        return true
    }

    /// Whether either of the two blocked the other.
    public func between(_ a: UUID, _ b: UUID, on c: Connection) throws -> Bool {
        try c.first("""
            SELECT 1 AS one FROM \(schema).blocks WHERE (user_id = $1 AND blocked_id = $2) OR (user_id = $2 AND blocked_id = $1)
            """, [a, b]) != nil
    }

    /// Whether someone who runs what `runners` selects (a SQL query of user ids, its parameter `$1`) blocked `user`:
    /// then a code `user` learned must not let them in.
    public func isBlocked(_ user: UUID, byAnyOf runners: String, _ value: UUID, on c: Connection) throws -> Bool {
        try c.first("SELECT 1 AS one FROM \(schema).blocks WHERE blocked_id = $2 AND user_id IN (\(runners))", [value, user]) != nil
    }

    /// A SQL condition: the author in `column` is not someone the reader (parameter `$n`) blocked.
    public func notBlockedBy(reader parameter: Int, author column: String) -> String {
        "NOT EXISTS (SELECT 1 FROM \(schema).blocks bl WHERE bl.user_id = $\(parameter) AND bl.blocked_id = \(column))"
    }

    /// Forgets the blocks of and on an erased account.
    public func forget(_ user: UUID, on c: Connection) throws {
        try c.execute("DELETE FROM \(schema).blocks WHERE user_id = $1 OR blocked_id = $1", [user])
    }
}
