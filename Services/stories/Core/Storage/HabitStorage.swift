import Foundation
import Models
import Postgres

/// A habit, with every day it was done and the groups it is shared with.
struct HabitRecord: PostgresRecord {
    let id: UUID
    let ownerId: UUID
    var title: String
    var target: HabitTarget
    /// The IANA time zone its days are dated in.
    var timeZone: String
    let createdAt: Date
    var updatedAt: Date
    /// Every day it was done, `YYYY-MM-DD`, oldest first.
    let days: [String]
    /// The groups it is shared with that its owner is in: a share made before they left and came back is not.
    let sharedGroupIds: [UUID]

    init(_ row: Row) throws {
        id = try row["id"]; ownerId = try row["owner_id"]; title = try row["title"]; timeZone = try row["time_zone"]
        target = HabitTarget(count: try row["target_count"], per: try row["target_per"])
        createdAt = try row["created_at"]; updatedAt = try row["updated_at"]
        days = (try row.decode("days", as: String.self)).map { $0.split(separator: ",").map(String.init) } ?? []
        sharedGroupIds = (try row.decode("group_ids", as: String.self)).map { $0.split(separator: ",").compactMap { UUID(uuidString: String($0)) } } ?? []
    }

    /// The columns `init` reads, for queries aliasing the habits table as `h`.
    static let columns: SQL = """
        h.id, h.owner_id, h.title, h.target_count, h.target_per, h.time_zone, h.created_at, h.updated_at,
        (SELECT string_agg(d.day::text, ',' ORDER BY d.day) FROM stories.habit_days d WHERE d.habit_id = h.id) AS days,
        (SELECT string_agg(s.group_id::text, ',' ORDER BY s.shared_at, s.group_id) FROM stories.habit_shares s
         JOIN stories.memberships m ON m.group_id = s.group_id AND m.user_id = h.owner_id AND s.shared_at >= m.joined_at
         WHERE s.habit_id = h.id) AS group_ids
        """
}

/// A day a habit was done, and the story it was done with.
struct HabitDayRecord: PostgresRecord {
    let date: String
    let storyId: UUID?
    init(_ row: Row) throws { date = try row["day"]; storyId = try row.decode("story_id") }
    static let columns: SQL = "day::text AS day, story_id"
}

/// The habits' SQL (migration 16's tables). Every method takes the connection of the caller's transaction.
struct HabitStorage: Sendable {
    func habit(_ c: Connection, _ id: UUID, owner: UUID) throws -> HabitRecord? {
        try c.one(HabitRecord.self, "SELECT \(HabitRecord.columns) FROM stories.habits h WHERE h.id = \(id) AND h.owner_id = \(owner)")
    }

    /// The owner's habits, oldest first (at most `Habits.maxHabits` exist).
    func habits(_ c: Connection, owner: UUID) throws -> [HabitRecord] {
        try c.all(HabitRecord.self, """
            SELECT \(HabitRecord.columns) FROM stories.habits h WHERE h.owner_id = \(owner) ORDER BY h.created_at, h.id LIMIT 100
            """)
    }

    /// Serialises the owner's creations until the transaction ends, so the count they check holds.
    func lockHabits(_ c: Connection, of owner: UUID) throws {
        try c.execute("SELECT pg_advisory_xact_lock(hashtext(\("habits:" + owner.lowercased)))")
    }

    func count(_ c: Connection, owner: UUID) throws -> Int {
        try c.first("SELECT count(*)::int AS n FROM stories.habits WHERE owner_id = \(owner)")?["n"] ?? 0
    }

    func insert(_ c: Connection, owner: UUID, title: String, target: HabitTarget, timeZone: String) throws -> HabitRecord {
        let id = UUID.v7()
        try c.execute("""
            INSERT INTO stories.habits (id, owner_id, title, target_count, target_per, time_zone)
            VALUES (\(id), \(owner), \(title), \(target.count), \(target.per), \(timeZone))
            """)
        return try habit(c, id, owner: owner)!
    }

    func update(_ c: Connection, _ habit: HabitRecord) throws {
        try c.execute("""
            UPDATE stories.habits SET title = \(habit.title), target_count = \(habit.target.count), target_per = \(habit.target.per),
                time_zone = \(habit.timeZone) WHERE id = \(habit.id)
            """)
    }

    func touch(_ c: Connection, _ id: UUID) throws {
        try c.execute("UPDATE stories.habits SET updated_at = clock_timestamp() WHERE id = \(id)")
    }

    func delete(_ c: Connection, _ id: UUID) throws {
        try c.execute("DELETE FROM stories.habits WHERE id = \(id)")
    }

    /// Marks `day` done, with `story` when given (a repeat without one keeps the story it had). True when the day is
    /// new or its story changed.
    func mark(_ c: Connection, _ habit: UUID, day: String, story: UUID?) throws -> Bool {
        try c.first("""
            INSERT INTO stories.habit_days (habit_id, day, story_id) VALUES (\(habit), \(day)::date, \(story))
            ON CONFLICT (habit_id, day) DO UPDATE SET story_id = EXCLUDED.story_id
            WHERE EXCLUDED.story_id IS NOT NULL AND stories.habit_days.story_id IS DISTINCT FROM EXCLUDED.story_id
            RETURNING day
            """) != nil
    }

    /// True when the day had been done.
    func unmark(_ c: Connection, _ habit: UUID, day: String) throws -> Bool {
        try c.execute("DELETE FROM stories.habit_days WHERE habit_id = \(habit) AND day = \(day)::date") > 0
    }

    /// The days done in [first, last] (`YYYY-MM-DD`), oldest first.
    func days(_ c: Connection, _ habit: UUID, from first: String, to last: String) throws -> [HabitDayRecord] {
        try c.all(HabitDayRecord.self, """
            SELECT \(HabitDayRecord.columns) FROM stories.habit_days
            WHERE habit_id = \(habit) AND day BETWEEN \(first)::date AND \(last)::date ORDER BY day
            """)
    }

    func isAuthor(_ c: Connection, _ user: UUID, of story: UUID) throws -> Bool {
        try c.first("SELECT 1 AS one FROM stories.stories WHERE id = \(story) AND author_id = \(user)") != nil
    }

    /// Shared from now on (a share from an earlier membership is renewed).
    func share(_ c: Connection, _ habit: UUID, with group: UUID) throws {
        try c.execute("""
            INSERT INTO stories.habit_shares (habit_id, group_id) VALUES (\(habit), \(group))
            ON CONFLICT (habit_id, group_id) DO UPDATE SET shared_at = clock_timestamp()
            """)
    }

    func unshare(_ c: Connection, _ habit: UUID, from group: UUID) throws {
        try c.execute("DELETE FROM stories.habit_shares WHERE habit_id = \(habit) AND group_id = \(group)")
    }

    /// The habits shared with `group` by those in it (since they last joined): by member in joining order, then
    /// oldest first.
    func shared(_ c: Connection, in group: UUID) throws -> [HabitRecord] {
        try c.all(HabitRecord.self, """
            SELECT \(HabitRecord.columns) FROM stories.habit_shares hs
            JOIN stories.habits h ON h.id = hs.habit_id
            JOIN stories.memberships m ON m.group_id = hs.group_id AND m.user_id = h.owner_id AND hs.shared_at >= m.joined_at
            WHERE hs.group_id = \(group) ORDER BY m.joined_at, m.user_id, h.created_at, h.id LIMIT 1000
            """)
    }

    /// Everything naming `user`: their habits, with their days and shares.
    func forget(_ user: UUID, on c: Connection) throws {
        try c.execute("DELETE FROM stories.habits WHERE owner_id = \(user)")
    }
}
