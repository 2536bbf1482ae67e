import Foundation
import Models
import Postgres

// MARK: - Newsletters

/// A stored newsletter as its list shows it: when, how many stories, and its end for the list's cursor.
struct NewsletterSummaryRecord: PostgresRecord {
    let id: UUID
    let periodStart: Date
    let periodEnd: Date
    let storyCount: Int
    let compiledAt: Date
    /// `period_end` in Unix microseconds, exact, for keyset cursors.
    let endMicros: Int64

    init(_ row: Row) throws {
        id = try row["id"]; periodStart = try row["period_start"]; periodEnd = try row["period_end"]
        storyCount = try row["story_count"]; compiledAt = try row["compiled_at"]; endMicros = try row["end_us"]
    }

    static let columns: SQL = "id, period_start, period_end, story_count, compiled_at, \(micros("period_end")) AS end_us"
}

extension StoriesStorage {
    /// The stories posted to `group` in [from, to), oldest first (at most 10,000), with their media in order.
    func storiesInPeriod(_ c: Connection, group: UUID, from: Date, to: Date) throws -> (stories: [StoryRecord], media: [UUID: [UUID]]) {
        let stories = try c.all(StoryRecord.self, """
            SELECT \(StoryRecord.columns)
            FROM stories.story_groups sg JOIN stories.stories s ON s.id = sg.story_id
            WHERE sg.group_id = \(group) AND sg.created_at >= \(from) AND sg.created_at < \(to)
            ORDER BY sg.created_at, sg.story_id LIMIT 10000
            """)
        return (stories, try media(c, of: stories.map(\.id)))
    }

    /// The group's content version: the sum of its counters, which migration 10's triggers raise with every change its
    /// newsletter shows. What `NewsletterCache` checks.
    func contentVersion(_ c: Connection, group: UUID) throws -> Int64 {
        try c.first("SELECT coalesce(sum(version), 0)::int8 AS v FROM stories.group_versions WHERE group_id = \(group)")!["v"]
    }

    /// The names and avatars of `users` as stories last heard them.
    func profiles(_ c: Connection, _ users: [UUID]) throws -> [UUID: (fullName: String?, avatar: UUID?)] {
        var profiles: [UUID: (fullName: String?, avatar: UUID?)] = [:]
        for row in try c.rows("""
            SELECT user_id, full_name, avatar_media_id FROM stories.profiles WHERE user_id = ANY(\(PostgresArray(users))::uuid[])
            """) {
            profiles[try row["user_id"]] = (try row.decode("full_name"), try row.decode("avatar_media_id"))
        }
        return profiles
    }

    /// Groups whose period has closed by `now` (or that have no close time yet), locked for this instance alone.
    func dueGroups(_ c: Connection, at now: Date, limit: Int) throws -> [(GroupRecord, Date?)] {
        try c.rows("""
            SELECT \(GroupRecord.columnsForNoReader), g.newsletter_due_at FROM stories.groups g
            WHERE g.kind = 'group' AND (g.newsletter_due_at IS NULL OR g.newsletter_due_at <= \(now))
            ORDER BY g.newsletter_due_at NULLS FIRST LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """).map { (try GroupRecord($0), try $0.decode("newsletter_due_at")) }
    }

    /// Up to `limit` groups whose reminder is due by `now` (or was never planned), locked for this instance, with that time.
    func dueReminders(_ c: Connection, at now: Date, limit: Int) throws -> [(GroupRecord, Date?)] {
        try c.rows("""
            SELECT \(GroupRecord.columnsForNoReader), g.reminder_due_at FROM stories.groups g
            WHERE g.kind = 'group' AND (g.reminder_due_at IS NULL OR g.reminder_due_at <= \(now))
            ORDER BY g.reminder_due_at NULLS FIRST LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """).map { (try GroupRecord($0), try $0.decode("reminder_due_at")) }
    }

    /// nil: planned again at the next scan.
    func setReminderDue(_ c: Connection, group: UUID, at: Date?) throws {
        try c.execute("UPDATE stories.groups SET reminder_due_at = \(at) WHERE id = \(group)")
    }

    func setNewsletterDue(_ c: Connection, group: UUID, at: Date) throws {
        try c.execute("UPDATE stories.groups SET newsletter_due_at = \(at) WHERE id = \(group)")
    }

    /// Stores a compiled newsletter; nil when that period was compiled already.
    func storeNewsletter(_ c: Connection, group: UUID, from: Date, to: Date, storyCount: Int, content: String) throws -> (UUID, Date)? {
        guard let row = try c.first("""
            INSERT INTO stories.newsletters (id, group_id, period_start, period_end, story_count, content)
            VALUES (\(UUID.v7()), \(group), \(from), \(to), \(storyCount), \(content))
            ON CONFLICT (group_id, period_end) DO NOTHING RETURNING id, compiled_at
            """) else { return nil }
        return (try row["id"], try row["compiled_at"])
    }

    /// The group's newsletters, the latest first, ending before `before` (Unix microseconds).
    func newsletters(_ c: Connection, group: UUID, before: Int64?, limit: Int) throws -> [NewsletterSummaryRecord] {
        try c.all(NewsletterSummaryRecord.self, """
            SELECT \(NewsletterSummaryRecord.columns)
            FROM stories.newsletters WHERE group_id = \(group) AND (\(before)::int8 IS NULL OR period_end < \(fromMicros(before)))
            ORDER BY period_end DESC LIMIT \(limit)
            """)
    }

    /// A stored newsletter by its id alone: its group and content.
    func storedNewsletter(_ c: Connection, id: UUID) throws -> (group: UUID, content: String)? {
        guard let row = try c.first("SELECT group_id, content FROM stories.newsletters WHERE id = \(id)") else { return nil }
        return (try row["group_id"], try row["content"])
    }

    func storedNewsletter(_ c: Connection, group: UUID, id: UUID) throws -> String? {
        try c.first("SELECT content FROM stories.newsletters WHERE group_id = \(group) AND id = \(id)")?["content"]
    }

    /// Every local day on which `user` posted, in `zone`.
    func postingDays(_ c: Connection, user: UUID, zone: String) throws -> [String] {
        try c.rows("""
            SELECT DISTINCT to_char(created_at AT TIME ZONE \(zone), 'YYYY-MM-DD') AS day FROM stories.stories
            WHERE author_id = \(user) ORDER BY day
            """).map { try $0["day"] }
    }
}

