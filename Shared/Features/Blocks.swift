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
            let (user, blocked) = (b.userId, b.blockedUserId)
            try c.execute("INSERT INTO \(unescaped: schema).blocks (user_id, blocked_id) VALUES (\(user), \(blocked)) ON CONFLICT DO NOTHING")
        case UserUnblocked.type:
            let b = try event.decode(UserUnblocked.self)
            let (user, blocked) = (b.userId, b.blockedUserId)
            try c.execute("DELETE FROM \(unescaped: schema).blocks WHERE user_id = \(user) AND blocked_id = \(blocked)")
        default:
            return false
        }
        return true
    }

    /// Whether either of the two blocked the other.
    public func between(_ a: UUID, _ b: UUID, on c: Connection) throws -> Bool {
        try c.first("""
            SELECT 1 AS one FROM \(unescaped: schema).blocks
            WHERE (user_id = \(a) AND blocked_id = \(b)) OR (user_id = \(b) AND blocked_id = \(a))
            """) != nil
    }

    /// Whether someone who runs what `runners` selects (a query of user ids) blocked `user`: then a code `user`
    /// learned must not let them in.
    public func isBlocked(_ user: UUID, byAnyOf runners: SQL, on c: Connection) throws -> Bool {
        try c.first("SELECT 1 AS one FROM \(unescaped: schema).blocks WHERE blocked_id = \(user) AND user_id IN (\(runners))") != nil
    }

    /// Forgets the blocks of and on an erased account.
    public func forget(_ user: UUID, on c: Connection) throws {
        try c.execute("DELETE FROM \(unescaped: schema).blocks WHERE user_id = \(user) OR blocked_id = \(user)")
    }
}
