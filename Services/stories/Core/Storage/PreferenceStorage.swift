import Foundation
import Postgres

/// A person someone would rather not see the stories of.
struct HiddenAuthorRecord: PostgresRecord {
    let userId: UUID
    let fullName: String?
    let avatarMediaId: UUID?
    let pictureUrl: String?
    let hiddenAt: Date
    let hiddenMicros: Int64

    init(_ row: Row) throws {
        userId = try row["author_id"]; fullName = try row.decode("full_name"); avatarMediaId = try row.decode("avatar_media_id")
        pictureUrl = try row.decode("picture_url"); hiddenAt = try row["hidden_at"]; hiddenMicros = try row["hidden_us"]
    }

    /// The columns `init` reads, for queries aliasing the hidden authors as `h` and the author's profile as `p`.
    static let columns: SQL = """
        h.author_id, h.hidden_at, \(micros("h.hidden_at")) AS hidden_us, p.full_name, p.avatar_media_id, p.picture_url
        """
}

extension StoriesStorage {
    /// How `user` takes `group`'s newsletter (`off`, `app`, `email`); false when they are not in it.
    func setNewsletterDelivery(_ c: Connection, group: UUID, user: UUID, _ delivery: String) throws -> Bool {
        try c.execute("UPDATE stories.memberships SET newsletter = \(delivery) WHERE group_id = \(group) AND user_id = \(user)") == 1
    }

    /// How each member of `group` takes its newsletter.
    func newsletterDeliveries(_ c: Connection, group: UUID) throws -> [UUID: String] {
        var deliveries: [UUID: String] = [:]
        for row in try c.rows("SELECT user_id, newsletter FROM stories.memberships WHERE group_id = \(group)") {
            deliveries[try row["user_id"]] = try row["newsletter"]
        }
        return deliveries
    }

    /// The authors `user` hides.
    func hiddenAuthors(_ c: Connection, of user: UUID) throws -> Set<UUID> {
        Set(try c.rows("SELECT author_id FROM stories.hidden_authors WHERE user_id = \(user)").map { try $0["author_id"] })
    }

    /// How many authors `user` hides.
    func hiddenCount(_ c: Connection, of user: UUID) throws -> Int {
        try c.first("SELECT count(*)::int AS n FROM stories.hidden_authors WHERE user_id = \(user)")?["n"] ?? 0
    }

    /// Whether `user` and `other` are in a group together.
    func shareAGroup(_ c: Connection, _ user: UUID, _ other: UUID) throws -> Bool {
        try c.first("""
            SELECT 1 AS shared FROM stories.memberships a JOIN stories.memberships b ON b.group_id = a.group_id
            WHERE a.user_id = \(user) AND b.user_id = \(other) LIMIT 1
            """) != nil
    }

    func hide(_ c: Connection, _ author: UUID, from user: UUID) throws {
        try c.execute("INSERT INTO stories.hidden_authors (user_id, author_id) VALUES (\(user), \(author)) ON CONFLICT DO NOTHING")
    }

    /// False when `user` did not hide `author`.
    func unhide(_ c: Connection, _ author: UUID, from user: UUID) throws -> Bool {
        try c.execute("DELETE FROM stories.hidden_authors WHERE user_id = \(user) AND author_id = \(author)") == 1
    }

    /// The authors `user` hides, the latest hidden first, after the keyset position (hiddenAt, id).
    func hiddenAuthorList(_ c: Connection, of user: UUID, after: (Int64, UUID)?, limit: Int) throws -> [HiddenAuthorRecord] {
        try c.all(HiddenAuthorRecord.self, """
            SELECT \(HiddenAuthorRecord.columns)
            FROM stories.hidden_authors h LEFT JOIN stories.profiles p ON p.user_id = h.author_id
            WHERE h.user_id = \(user)
              AND (\(after?.0)::int8 IS NULL OR (h.hidden_at, h.author_id) < (\(fromMicros(after?.0)), \(after?.1)::uuid))
            ORDER BY h.hidden_at DESC, h.author_id DESC LIMIT \(limit)
            """)
    }
}
