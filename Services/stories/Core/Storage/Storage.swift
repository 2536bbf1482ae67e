import Features
import Foundation
import Models
import Postgres

/// A group or journal row, with the reader's role when read for a member.
struct GroupRecord: PostgresRecord {
    let id: UUID
    let kind: GroupKind
    var name: String
    var imageMediaId: UUID?
    var inviteCode: String?
    let createdBy: UUID
    var schedule: Schedule
    let createdAt: Date
    var updatedAt: Date
    /// The reader's membership: their role, and how they take the newsletter (`off`, `app`, `email`).
    var role: String?
    var newsletterDelivery: String?
    /// The image's size and placeholder, read with it (`ImageView`).
    var imageMeta: [UUID: ImageMeta] = [:]

    init(_ row: Row) throws {
        id = try row["id"]; kind = try row["kind"]; name = try row["name"]; imageMediaId = try row.decode("image_media_id")
        inviteCode = try row.decode("invite_code"); createdBy = try row["created_by"]
        schedule = Schedule(frequency: try row["newsletter_frequency"], weekday: try row["newsletter_weekday"],
                            hour: try row["newsletter_hour"], timeZone: try row["newsletter_time_zone"],
                            count: try row.decode("newsletter_count"), startDate: try row.decode("newsletter_start_date"),
                            dayOfMonth: try row.decode("newsletter_day_of_month"))
        createdAt = try row["created_at"]; updatedAt = try row["updated_at"]; role = try row.decode("role")
        newsletterDelivery = try row.decode("newsletter")
        imageMeta = ImageMeta.parse(try row.decode("image_meta"))
    }

    /// The columns `init` reads, for queries aliasing the groups table as `g` and the reader's membership as `m`.
    static let columns: SQL = "\(groupColumns), m.role, m.newsletter"
    /// The same read for no one (the newsletter scans): no role, no delivery.
    static let columnsForNoReader: SQL = "\(groupColumns), NULL AS role, NULL AS newsletter"

    private static let groupColumns: SQL = """
        g.id, g.kind, g.name, g.image_media_id, g.invite_code, g.created_by, g.newsletter_frequency, g.newsletter_weekday,
        g.newsletter_hour, g.newsletter_time_zone, g.newsletter_count, g.newsletter_start_date::text AS newsletter_start_date,
        g.newsletter_day_of_month, g.created_at, g.updated_at,
        \(ImageMeta.sql(ids: "ARRAY[g.image_media_id]", schema: "stories")) AS image_meta
        """
}

/// A group's newsletter schedule: when each period closes, in the group's time zone.
struct Schedule: Equatable {
    /// One of `NewsletterSchedule.frequencies`.
    var frequency: String
    /// ISO weekday the weekly period closes on (1 Monday … 7 Sunday).
    var weekday: Int
    /// Local hour the period closes at.
    var hour: Int
    /// IANA time zone.
    var timeZone: String
    /// Every `count` days or weeks from `startDate` (`YYYY-MM-DD`); kept when the frequency changes to another.
    var count: Int?
    var startDate: String?
    /// The day of the month a monthly period closes on.
    var dayOfMonth: Int?
}

struct MemberRecord: PostgresRecord {
    let userId: UUID
    let fullName: String?
    let avatarMediaId: UUID?
    let pictureUrl: String?
    let role: String
    let joinedAt: Date

    init(_ row: Row) throws {
        userId = try row["user_id"]; fullName = try row.decode("full_name"); avatarMediaId = try row.decode("avatar_media_id")
        pictureUrl = try row.decode("picture_url")
        role = try row["role"]; joinedAt = try row["joined_at"]
    }

    /// The columns `init` reads, for queries aliasing the memberships table as `m` and the member's profile as `p`.
    static let columns: SQL = "m.user_id, m.role, m.joined_at, p.full_name, p.avatar_media_id, p.picture_url"
}

struct StoryRecord: PostgresRecord {
    let id: UUID
    let authorId: UUID
    var text: String
    var backgroundColor: String?
    let createdAt: Date
    var updatedAt: Date
    /// `created_at` in Unix microseconds, exact, for keyset cursors.
    let createdMicros: Int64
    var groupIds: [UUID] = []
    var mediaIds: [UUID] = []
    /// The size and placeholder of each of `mediaIds` that has them (`ImageView`).
    var images: [UUID: ImageMeta] = [:]
    var commentCount = 0
    /// The place its author chose to give it, rounded as they chose.
    var place: StoryPlace?
    /// The prompt (`Prompt.catalogue`) the story answers; nil when it answers none.
    let promptId: String?

    init(_ row: Row) throws {
        id = try row["id"]; authorId = try row["author_id"]; text = try row["text"]; createdMicros = try row["created_us"]
        backgroundColor = try row.decode("background_color"); createdAt = try row["created_at"]; updatedAt = try row["updated_at"]
        commentCount = try row.decode("comment_count") ?? 0
        place = try StoryPlace.stored(row)
        promptId = try row.decode("prompt_id")
    }

    /// The columns `init` reads, for queries aliasing the stories table as `s`.
    static let columns: SQL = """
        s.id, s.author_id, s.text, s.background_color, s.created_at, s.updated_at, \(micros("s.created_at")) AS created_us,
        \(StoryPlace.columns), s.prompt_id,
        (SELECT count(*) FROM stories.comments WHERE story_id = s.id) AS comment_count
        """
}

struct CommentRecord: PostgresRecord {
    let id: UUID
    let storyId: UUID
    let authorId: UUID
    let text: String
    let createdAt: Date
    /// `created_at` in Unix microseconds, exact, for keyset cursors.
    let createdMicros: Int64

    init(_ row: Row) throws {
        id = try row["id"]; storyId = try row["story_id"]; authorId = try row["author_id"]; text = try row["text"]
        createdMicros = try row["created_us"]
        createdAt = try row["created_at"]
    }

    static let columns: SQL = "id, story_id, author_id, text, created_at, \(micros("created_at")) AS created_us"
}

/// The stories schema's SQL. Every method takes the connection of the caller's transaction.
struct StoriesStorage {
    // MARK: Profiles (from auth's events)

    // MARK: Groups

    /// Creates a group or journal with its creator as administrator.
    func createGroup(_ c: Connection, kind: GroupKind, name: String, image: UUID?, inviteCode: String?, creator: UUID,
                     defaultJournal: Bool = false) throws -> GroupRecord? {
        let id = UUID.v7()
        let inserted = try c.execute("""
            INSERT INTO stories.groups (id, kind, name, image_media_id, invite_code, created_by, default_journal)
            VALUES (\(id), \(kind), \(name), \(image), \(inviteCode), \(creator), \(defaultJournal)) ON CONFLICT DO NOTHING
            """)
        guard inserted == 1 else { return nil }
        try c.execute("INSERT INTO stories.memberships (group_id, user_id, role) VALUES (\(id), \(creator), 'admin')")
        return try group(c, id, reader: creator)
    }

    /// The group with `reader`'s role (nil role when not a member).
    func group(_ c: Connection, _ id: UUID, reader: UUID, lock: Bool = false) throws -> GroupRecord? {
        try c.one(GroupRecord.self, """
            SELECT \(GroupRecord.columns) FROM stories.groups g
            LEFT JOIN stories.memberships m ON m.group_id = g.id AND m.user_id = \(reader)
            WHERE g.id = \(id)\(unescaped: lock ? " FOR UPDATE OF g" : "")
            """)
    }

    func groupByInviteCode(_ c: Connection, _ code: String, reader: UUID) throws -> GroupRecord? {
        try c.one(GroupRecord.self, """
            SELECT \(GroupRecord.columns) FROM stories.groups g
            LEFT JOIN stories.memberships m ON m.group_id = g.id AND m.user_id = \(reader)
            WHERE g.invite_code = \(code)
            """)
    }

    /// The reader's groups and journals, newest first, after the keyset position `after` (a group id).
    func groups(_ c: Connection, of user: UUID, after: UUID?, limit: Int) throws -> [GroupRecord] {
        try c.all(GroupRecord.self, """
            SELECT \(GroupRecord.columns) FROM stories.memberships m JOIN stories.groups g ON g.id = m.group_id
            WHERE m.user_id = \(user) AND (\(after)::uuid IS NULL OR g.id < \(after)::uuid)
            ORDER BY g.id DESC LIMIT \(limit)
            """)
    }

    func members(_ c: Connection, of group: UUID) throws -> [MemberRecord] {
        try c.all(MemberRecord.self, """
            SELECT \(MemberRecord.columns)
            FROM stories.memberships m LEFT JOIN stories.profiles p ON p.user_id = m.user_id
            WHERE m.group_id = \(group) ORDER BY m.joined_at, m.user_id
            """)
    }

    func updateGroup(_ c: Connection, _ g: GroupRecord) throws {
        let s = g.schedule
        try c.execute("""
            UPDATE stories.groups SET name = \(g.name), image_media_id = \(g.imageMediaId), newsletter_frequency = \(s.frequency),
                newsletter_weekday = \(s.weekday), newsletter_hour = \(s.hour), newsletter_time_zone = \(s.timeZone),
                invite_code = \(g.inviteCode), newsletter_count = \(s.count), newsletter_start_date = \(s.startDate)::date,
                newsletter_day_of_month = \(s.dayOfMonth), updated_at = now()
            WHERE id = \(g.id)
            """)
    }

    /// Adds a member; nil when they already are one.
    func addMember(_ c: Connection, group: UUID, user: UUID) throws -> Date? {
        try c.first("""
            INSERT INTO stories.memberships (group_id, user_id, role) VALUES (\(group), \(user), 'member')
            ON CONFLICT DO NOTHING RETURNING joined_at
            """)?["joined_at"]
    }

    /// Removes a member; when no administrator is left, the longest-standing member becomes one (returned);
    /// when nobody is left, the group is deleted.
    func removeMember(_ c: Connection, group: UUID, user: UUID) throws -> (removed: Bool, newAdmin: UUID?) {
        guard try c.execute("DELETE FROM stories.memberships WHERE group_id = \(group) AND user_id = \(user)") == 1 else {
            return (false, nil)
        }
        let promoted: UUID? = try c.first("""
            UPDATE stories.memberships SET role = 'admin'
            WHERE group_id = \(group) AND NOT EXISTS (SELECT 1 FROM stories.memberships WHERE group_id = \(group) AND role = 'admin')
              AND user_id = (SELECT user_id FROM stories.memberships WHERE group_id = \(group) ORDER BY joined_at, user_id LIMIT 1)
            RETURNING user_id
            """)?["user_id"]
        try c.execute("""
            DELETE FROM stories.groups g WHERE id = \(group) AND NOT EXISTS (SELECT 1 FROM stories.memberships WHERE group_id = \(group))
            """)
        return (true, promoted)
    }

    // MARK: Media

    /// The media if `reader` may see it: its owner, a member of a group it was shared to (in a story or as the
    /// group's image), or someone who shares a group with the user who uploaded it as their avatar.
    func visibleMedia(_ c: Connection, _ id: UUID, reader: UUID) throws -> MediaRecord? {
        try c.one(MediaRecord.self, """
            SELECT \(MediaRecord.columns) FROM stories.media m WHERE m.id = \(id) AND (
                m.owner_id = \(reader)
                OR EXISTS (SELECT 1 FROM stories.story_media sm
                           JOIN stories.story_groups sg ON sg.story_id = sm.story_id
                           JOIN stories.memberships ms ON ms.group_id = sg.group_id AND ms.user_id = \(reader)
                           WHERE sm.media_id = m.id)
                OR EXISTS (SELECT 1 FROM stories.groups g
                           JOIN stories.memberships ms ON ms.group_id = g.id AND ms.user_id = \(reader)
                           WHERE g.image_media_id = m.id)
                OR EXISTS (SELECT 1 FROM stories.profiles p
                           JOIN stories.memberships theirs ON theirs.user_id = p.user_id
                           JOIN stories.memberships mine ON mine.group_id = theirs.group_id AND mine.user_id = \(reader)
                           WHERE p.avatar_media_id = m.id AND m.owner_id = p.user_id AND m.purpose = 'avatar'))
            """)
    }

    // MARK: Stories

    /// The groups among `ids` that `user` belongs to.
    func memberGroups(_ c: Connection, _ ids: [UUID], user: UUID) throws -> Set<UUID> {
        Set(try c.rows("""
            SELECT group_id FROM stories.memberships WHERE group_id = ANY(\(PostgresArray(ids))::uuid[]) AND user_id = \(user)
            """).map { try $0["group_id"] })
    }

    /// Each of `ids` with its name and its members, for `story.created` to say whom to tell.
    func audiences(_ c: Connection, _ ids: [UUID]) throws -> [StoryAudience] {
        var byGroup: [UUID: StoryAudience] = [:]
        for row in try c.rows("""
            SELECT g.id, g.name, m.user_id FROM stories.groups g JOIN stories.memberships m ON m.group_id = g.id
            WHERE g.id = ANY(\(PostgresArray(ids))::uuid[]) ORDER BY m.joined_at, m.user_id
            """) {
            let id: UUID = try row["id"], user: UUID = try row["user_id"], name: String = try row["name"]
            byGroup[id, default: StoryAudience(groupId: id, name: name, memberIds: [])].memberIds.append(user)
        }
        return ids.compactMap { byGroup[$0] }
    }

    func createStory(_ c: Connection, author: UUID, text: String, color: String?, place: StoryPlace?, promptId: String? = nil,
                     groups: [UUID], media: [UUID]) throws -> StoryRecord {
        var story = try c.one(StoryRecord.self, """
            INSERT INTO stories.stories AS s (id, author_id, text, background_color, place_name, place_latitude, place_longitude, place_precision,
                                              prompt_id)
            VALUES (\(UUID.v7()), \(author), \(text), \(color), \(place?.name), \(place?.latitude), \(place?.longitude),
                    \(place?.precision), \(promptId))
            RETURNING \(StoryRecord.columns)
            """)!
        try c.execute("""
            INSERT INTO stories.story_groups (story_id, group_id, created_at)
            SELECT \(story.id), g, \(story.createdAt) FROM unnest(\(PostgresArray(groups))::uuid[]) AS g
            """)
        try setStoryMedia(c, story.id, media)
        story.groupIds = groups
        story.mediaIds = media
        story.images = try ImageMeta.load(media, schema: "stories", on: c)
        return story
    }

    func setStoryMedia(_ c: Connection, _ story: UUID, _ media: [UUID]) throws {
        try c.execute("DELETE FROM stories.story_media WHERE story_id = \(story)")
        try c.execute("""
            INSERT INTO stories.story_media (story_id, position, media_id)
            SELECT \(story), ordinality, m FROM unnest(\(PostgresArray(media))::uuid[]) WITH ORDINALITY AS t(m, ordinality)
            """)
    }

    /// The story as `reader` may see it: its author sees all its groups, a member only the groups they share.
    /// Nil when the reader may not see it at all.
    func story(_ c: Connection, _ id: UUID, reader: UUID, lock: Bool = false) throws -> StoryRecord? {
        guard var story = try c.one(StoryRecord.self, """
            SELECT \(StoryRecord.columns)
            FROM stories.stories s WHERE s.id = \(id)\(unescaped: lock ? " FOR UPDATE" : "")
            """) else { return nil }
        story.groupIds = try c.rows("""
            SELECT sg.group_id FROM stories.story_groups sg
            WHERE sg.story_id = \(id) AND (\(reader)::uuid = \(story.authorId)::uuid OR EXISTS (
                SELECT 1 FROM stories.memberships m WHERE m.group_id = sg.group_id AND m.user_id = \(reader)))
            ORDER BY sg.group_id
            """).map { try $0["group_id"] }
        guard story.authorId == reader || !story.groupIds.isEmpty else { return nil }
        story.mediaIds = try c.rows("SELECT media_id FROM stories.story_media WHERE story_id = \(id) ORDER BY position")
            .map { try $0["media_id"] }
        story.images = try ImageMeta.load(story.mediaIds, schema: "stories", on: c)
        return story
    }

    func updateStory(_ c: Connection, _ s: StoryRecord) throws -> Date {
        try c.first("""
            UPDATE stories.stories SET text = \(s.text), background_color = \(s.backgroundColor), place_name = \(s.place?.name),
                place_latitude = \(s.place?.latitude), place_longitude = \(s.place?.longitude),
                place_precision = \(s.place?.precision), updated_at = now()
            WHERE id = \(s.id) RETURNING updated_at
            """)!["updated_at"]
    }

    func deleteStory(_ c: Connection, _ id: UUID) throws {
        try c.execute("DELETE FROM stories.stories WHERE id = \(id)")
    }

    /// Deletes the photos `ids` (a taken-down story's) with their objects (`MediaStore.sweepRemoved`), but those
    /// another story still shows; a group pictured by one is left without a picture.
    func deletePhotos(_ c: Connection, _ ids: [UUID]) throws {
        guard !ids.isEmpty else { return }
        try c.execute("""
            WITH gone AS (
                DELETE FROM stories.media m WHERE m.id = ANY(\(PostgresArray(ids))::uuid[])
                    AND NOT EXISTS (SELECT 1 FROM stories.story_media sm WHERE sm.media_id = m.id)
                RETURNING m.id)
            UPDATE stories.groups SET image_media_id = NULL WHERE image_media_id IN (SELECT id FROM gone)
            """)
    }

    /// A group's stories in [from, to), newest first, after the keyset position (createdAt, id), but those of authors
    /// `reader` hides.
    func groupStories(_ c: Connection, group: UUID, reader: UUID, from: Date?, to: Date?, after: (Int64, UUID)?, limit: Int) throws -> [StoryRecord] {
        var stories = try c.all(StoryRecord.self, """
            SELECT \(StoryRecord.columns)
            FROM stories.story_groups sg JOIN stories.stories s ON s.id = sg.story_id
            WHERE sg.group_id = \(group) AND (\(from)::timestamptz IS NULL OR sg.created_at >= \(from))
              AND (\(to)::timestamptz IS NULL OR sg.created_at < \(to))
              AND (\(after?.0)::int8 IS NULL OR (sg.created_at, sg.story_id) < (\(fromMicros(after?.0)), \(after?.1)::uuid))
              AND NOT EXISTS (SELECT 1 FROM stories.hidden_authors h WHERE h.user_id = \(reader) AND h.author_id = s.author_id)
            ORDER BY sg.created_at DESC, sg.story_id DESC LIMIT \(limit)
            """)
        for i in stories.indices { stories[i].groupIds = [group] }
        try attachMedia(c, &stories)
        return stories
    }

    /// `author`'s stories, newest first, each with every group it went to.
    func authorStories(_ c: Connection, author: UUID, after: (Int64, UUID)?, limit: Int) throws -> [StoryRecord] {
        var stories = try c.all(StoryRecord.self, """
            SELECT \(StoryRecord.columns)
            FROM stories.stories s
            WHERE s.author_id = \(author) AND (\(after?.0)::int8 IS NULL OR (s.created_at, s.id) < (\(fromMicros(after?.0)), \(after?.1)::uuid))
            ORDER BY s.created_at DESC, s.id DESC LIMIT \(limit)
            """)
        var groups: [UUID: [UUID]] = [:]
        for row in try c.rows("""
            SELECT story_id, group_id FROM stories.story_groups WHERE story_id = ANY(\(PostgresArray(stories.map(\.id)))::uuid[])
            ORDER BY story_id, group_id
            """) {
            groups[try row["story_id"], default: []].append(try row["group_id"])
        }
        for i in stories.indices { stories[i].groupIds = groups[stories[i].id] ?? [] }
        try attachMedia(c, &stories)
        return stories
    }

    /// Fills each story's images, in their order.
    private func attachMedia(_ c: Connection, _ stories: inout [StoryRecord]) throws {
        let byStory = try media(c, of: stories.map(\.id))
        let images = try ImageMeta.load(byStory.values.flatMap { $0 }, schema: "stories", on: c)
        for i in stories.indices {
            stories[i].mediaIds = byStory[stories[i].id] ?? []
            stories[i].images = images.filter { stories[i].mediaIds.contains($0.key) }
        }
    }

    /// The images of each of `stories`, in their order.
    func media(_ c: Connection, of stories: [UUID]) throws -> [UUID: [UUID]] {
        var byStory: [UUID: [UUID]] = [:]
        for row in try c.rows("""
            SELECT story_id, media_id FROM stories.story_media WHERE story_id = ANY(\(PostgresArray(stories))::uuid[])
            ORDER BY story_id, position
            """) {
            byStory[try row["story_id"], default: []].append(try row["media_id"])
        }
        return byStory
    }

    // MARK: Comments

    func addComment(_ c: Connection, story: UUID, author: UUID, text: String) throws -> CommentRecord {
        try c.one(CommentRecord.self, """
            INSERT INTO stories.comments (id, story_id, author_id, text) VALUES (\(UUID.v7()), \(story), \(author), \(text))
            RETURNING \(CommentRecord.columns)
            """)!
    }

    /// A story's comments, oldest first, after the keyset position (createdAt, id).
    func comments(_ c: Connection, story: UUID, after: (Int64, UUID)?, limit: Int) throws -> [CommentRecord] {
        try c.all(CommentRecord.self, """
            SELECT \(CommentRecord.columns) FROM stories.comments
            WHERE story_id = \(story) AND (\(after?.0)::int8 IS NULL OR (created_at, id) > (\(fromMicros(after?.0)), \(after?.1)::uuid))
            ORDER BY created_at, id LIMIT \(limit)
            """)
    }
}

/// SQL for a timestamp column as exact Unix microseconds (keyset cursors must not round).
func micros(_ column: SQL) -> SQL { "(EXTRACT(EPOCH FROM \(column)) * 1000000)::int8" }
/// SQL for the timestamp `micros` Unix microseconds after the epoch, bound.
func fromMicros(_ micros: Int64?) -> SQL { "('epoch'::timestamptz + \(micros)::int8 * interval '1 microsecond')" }
