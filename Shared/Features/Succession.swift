import Foundation
import Postgres

/// Who runs a group or a room once the person who ran it is gone for good: its longest-standing member.
public enum Succession {
    /// In `table` (a schema's members: `container`, `user_id`, `role`, `joined_at`), every container where `user` was
    /// the only `role` holder gets its longest other member (then the lowest id) as `role` holder; call it before
    /// `user`'s rows go.
    public static func promoteHeirs(_ c: Connection, table: String, container: String, role: String, leaving user: UUID) throws {
        let (table, container) = (SQL(unescaped: table), SQL(unescaped: container))
        try c.execute("""
            UPDATE \(table) m SET role = \(role) FROM (
                SELECT DISTINCT ON (\(container)) \(container), user_id FROM \(table)
                WHERE user_id <> \(user) AND \(container) IN (SELECT \(container) FROM \(table) WHERE user_id = \(user) AND role = \(role))
                  AND \(container) NOT IN (SELECT \(container) FROM \(table) WHERE user_id <> \(user) AND role = \(role))
                ORDER BY \(container), joined_at, user_id) heir
            WHERE m.\(container) = heir.\(container) AND m.user_id = heir.user_id
            """)
    }
}
