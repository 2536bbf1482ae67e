import Features
import Foundation
import Models
import Postgres

// MARK: - Records

/// A room as a reader sees it: their role (nil when not a member) and read position, from their `chat.members mb` row.
struct RoomRecord: PostgresRecord {
    let id: UUID
    let kind: RoomKind
    var name: String
    var topic: String?
    var inviteCode: String?
    let parcelId: UUID?
    let readOnly: Bool
    let createdBy: UUID?
    let changeSeq: Int64
    let messageSeq: Int64
    let createdAt: Date
    let updatedAt: Date
    let role: RoomRole?
    let readSeq: Int64

    static let columns: SQL = """
        r.id, r.kind, r.name, r.topic, r.invite_code, r.parcel_id, r.read_only, r.created_by, r.change_seq, r.message_seq,
        r.created_at, r.updated_at, mb.role, mb.read_seq
        """

    init(_ row: Row) throws {
        id = try row["id"]; kind = try row["kind"]; name = try row["name"]; topic = try row["topic"]
        inviteCode = try row["invite_code"]; parcelId = try row["parcel_id"]; readOnly = try row["read_only"]
        createdBy = try row["created_by"]; changeSeq = try row["change_seq"]; messageSeq = try row["message_seq"]
        createdAt = try row["created_at"]; updatedAt = try row["updated_at"]; role = try row["role"]
        readSeq = try row["read_seq", as: Int64?.self] ?? 0
    }
}

/// Someone as others see them: a name and an avatar, from auth's events.
struct PersonRecord {
    let id: UUID
    let name: String?
    let avatarMediaId: UUID?
    var pictureUrl: String? = nil
}

/// A member of a room, from `chat.members mb` (or a row set named `mb` with its columns) and their profile `p`.
struct MemberRecord: PostgresRecord {
    let person: PersonRecord
    let role: RoomRole
    let joinedAt: Date

    static let columns: SQL = "mb.user_id, mb.role, mb.joined_at, p.full_name, p.avatar_media_id, p.picture_url"

    init(_ r: Row) throws {
        person = PersonRecord(id: try r["user_id"], name: try r["full_name"], avatarMediaId: try r["avatar_media_id"],
                              pictureUrl: try r["picture_url"])
        role = try r["role"]
        joinedAt = try r["joined_at"]
    }
}

struct MessageRecord: PostgresRecord {
    let id: UUID
    let roomId: UUID
    let seq: Int64
    let author: PersonRecord
    var text: String?
    let clientId: String?
    let replyTo: UUID?
    var mediaIds: [UUID]
    /// The size and placeholder of each of `mediaIds` that has them (`ImageView`).
    var images: [UUID: ImageMeta]
    let createdAt: Date
    var editedAt: Date?
    var deletedAt: Date?

    static let columns: SQL = """
        m.id, m.room_id, m.seq, m.author_id, m.text, m.client_id, m.reply_to, array_to_string(m.media_ids, ',') AS media_text,
        m.created_at, m.edited_at,
        m.deleted_at, p.full_name AS author_name, p.avatar_media_id AS author_avatar,
        p.picture_url AS author_picture, \(ImageMeta.sql(ids: "m.media_ids", schema: "chat")) AS media_meta
        """
    static let from: SQL = "chat.messages m LEFT JOIN chat.profiles p ON p.user_id = m.author_id"

    init(_ row: Row) throws {
        id = try row["id"]; roomId = try row["room_id"]; seq = try row["seq"]
        author = PersonRecord(id: try row["author_id"], name: try row["author_name"], avatarMediaId: try row["author_avatar"],
                              pictureUrl: try row["author_picture"])
        text = try row["text"]; clientId = try row["client_id"]; replyTo = try row["reply_to"]
        mediaIds = try row["media_text", as: String.self].split(separator: ",").compactMap { UUID(uuidString: String($0)) }
        images = ImageMeta.parse(try row["media_meta"])
        createdAt = try row["created_at"]; editedAt = try row["edited_at"]; deletedAt = try row["deleted_at"]
    }
}

struct TodoRecord: PostgresRecord {
    let id: UUID
    let roomId: UUID
    var title: String
    var done: Bool
    var doneBy: PersonRecord?
    var doneAt: Date?
    var assignee: PersonRecord?
    var dueAt: Date?
    var position: Int
    let fromMessageId: UUID?
    let createdBy: UUID
    let createdAt: Date
    var updatedAt: Date

    static let columns: SQL = """
        t.id, t.room_id, t.title, t.done, t.done_by, t.done_at, t.assignee_id, t.due_at, t.position, t.from_message_id,
        t.created_by, t.created_at, t.updated_at, db.full_name AS done_by_name, db.avatar_media_id AS done_by_avatar,
        db.picture_url AS done_by_picture, a.full_name AS assignee_name, a.avatar_media_id AS assignee_avatar,
        a.picture_url AS assignee_picture
        """
    static let from: SQL = """
        chat.todos t LEFT JOIN chat.profiles db ON db.user_id = t.done_by LEFT JOIN chat.profiles a ON a.user_id = t.assignee_id
        """

    init(_ row: Row) throws {
        id = try row["id"]; roomId = try row["room_id"]; title = try row["title"]; done = try row["done"]
        doneBy = try row["done_by", as: UUID?.self].map {
            PersonRecord(id: $0, name: try row["done_by_name"], avatarMediaId: try row["done_by_avatar"],
                         pictureUrl: try row["done_by_picture"])
        }
        doneAt = try row["done_at"]
        assignee = try row["assignee_id", as: UUID?.self].map {
            PersonRecord(id: $0, name: try row["assignee_name"], avatarMediaId: try row["assignee_avatar"],
                         pictureUrl: try row["assignee_picture"])
        }
        dueAt = try row["due_at"]; position = try row["position"]; fromMessageId = try row["from_message_id"]
        createdBy = try row["created_by"]; createdAt = try row["created_at"]; updatedAt = try row["updated_at"]
    }
}

/// One stored change of a room: its sequence, its SSE event name and the JSON a stream sends.
struct ChangeRecord: PostgresRecord {
    let seq: Int64
    let event: String
    let body: String

    static let columns: SQL = "seq, event, body"

    init(_ row: Row) throws {
        seq = try row["seq"]; event = try row["event"]; body = try row["body"]
    }
}

/// The chat schema's SQL, and nothing else.
struct ChatStorage: Sendable {
    // MARK: Rooms

    func room(_ c: Connection, _ id: UUID, reader: UUID, lock: Bool = false) throws -> RoomRecord? {
        try c.one(RoomRecord.self, """
            SELECT \(RoomRecord.columns) FROM chat.rooms r
            LEFT JOIN chat.members mb ON mb.room_id = r.id AND mb.user_id = \(reader) WHERE r.id = \(id) \(unescaped: lock ? "FOR UPDATE OF r" : "")
            """)
    }

    func roomId(_ c: Connection, inviteCode: String) throws -> UUID? {
        try c.first("SELECT id FROM chat.rooms WHERE invite_code = \(inviteCode)")?["id"]
    }

    func roomId(_ c: Connection, directKey: String) throws -> UUID? {
        try c.first("SELECT id FROM chat.rooms WHERE direct_key = \(directKey)")?["id"]
    }

    func roomId(_ c: Connection, parcel: UUID) throws -> UUID? {
        try c.first("SELECT id FROM chat.rooms WHERE parcel_id = \(parcel)")?["id"]
    }

    /// Inserts a room unless one with the same invite code, pair or parcel exists; true when inserted.
    func insertRoom(_ c: Connection, id: UUID, kind: RoomKind, name: String, topic: String?, inviteCode: String?,
                    directKey: String?, parcel: UUID?, createdBy: UUID?) throws -> Bool {
        try c.execute("""
            INSERT INTO chat.rooms (id, kind, name, topic, invite_code, direct_key, parcel_id, created_by)
            VALUES (\(id), \(kind), \(name), \(topic), \(inviteCode), \(directKey), \(parcel), \(createdBy)) ON CONFLICT DO NOTHING
            """) == 1
    }

    func updateRoom(_ c: Connection, _ r: RoomRecord) throws {
        try c.execute("""
            UPDATE chat.rooms SET name = \(r.name), topic = \(r.topic), invite_code = \(r.inviteCode), updated_at = now() WHERE id = \(r.id)
            """)
    }

    func setReadOnly(_ c: Connection, _ room: UUID) throws -> Bool {
        try c.execute("UPDATE chat.rooms SET read_only = true, updated_at = now() WHERE id = \(room) AND NOT read_only") == 1
    }

    /// The next change sequence of a room, and with `message` the next message sequence too. The row stays locked
    /// until the transaction ends, so changes of one room commit in the order of their sequence, without gaps.
    func nextSeq(_ c: Connection, _ room: UUID, message: Bool = false) throws -> (change: Int64, message: Int64) {
        let row = try c.first("""
            UPDATE chat.rooms SET change_seq = change_seq + 1, message_seq = message_seq + \(message ? 1 : 0)::int, updated_at = now()
            WHERE id = \(room) RETURNING change_seq, message_seq
            """)!
        return try row.decode(Int64.self, Int64.self)
    }

    /// The members of `room` whose usernames are among `names` (lower-case).
    func members(_ c: Connection, room: UUID, named names: [String]) throws -> [UUID] {
        guard !names.isEmpty else { return [] }
        return try c.rows("""
            SELECT mb.user_id FROM chat.members mb JOIN chat.profiles p ON p.user_id = mb.user_id
            WHERE mb.room_id = \(room) AND lower(p.username) = ANY(\(PostgresArray(names))::text[]) ORDER BY mb.user_id
            """).map { try $0["user_id"] }
    }

    /// What notify needs to tell `user` of `room`: its title for them, and how many messages they have not read.
    func unread(_ c: Connection, room: UUID, user: UUID) throws -> (title: String?, unread: Int)? {
        try c.first("""
            SELECT r.name, (SELECT count(*)::int FROM chat.messages um WHERE um.room_id = r.id AND um.seq > mb.read_seq
                              AND um.author_id <> \(user) AND um.deleted_at IS NULL) AS unread
            FROM chat.members mb JOIN chat.rooms r ON r.id = mb.room_id WHERE mb.room_id = \(room) AND mb.user_id = \(user)
            """).map { try $0.decode(String?.self, Int.self) }
    }

    /// The rooms `user` is in, newest activity first, with the unread count and the last message of each.
    func rooms(_ c: Connection, of user: UUID, parcel: UUID?, after: (Int64, UUID)?, limit: Int)
        throws -> [(room: RoomRecord, unread: Int, last: MessageRecord?, activityMicros: Int64)] {
        let rows = try c.rows("""
            SELECT \(RoomRecord.columns), \(micros("r.updated_at")) AS activity_us,
                   (SELECT count(*) FROM chat.messages um WHERE um.room_id = r.id AND um.seq > mb.read_seq
                      AND um.author_id <> \(user) AND um.deleted_at IS NULL) AS unread
            FROM chat.members mb JOIN chat.rooms r ON r.id = mb.room_id
            WHERE mb.user_id = \(user) AND (\(parcel)::uuid IS NULL OR r.parcel_id = \(parcel))
              AND (\(after?.0)::int8 IS NULL OR (\(micros("r.updated_at")), r.id) < (\(after?.0)::int8, \(after?.1)::uuid))
            ORDER BY r.updated_at DESC, r.id DESC LIMIT \(limit)
            """)
        let rooms = try rows.map { (try RoomRecord($0), try $0["unread", as: Int.self], try $0["activity_us", as: Int64.self]) }
        let lastIds = rooms.filter { $0.0.messageSeq > 0 }.map { ($0.0.id, $0.0.messageSeq) }
        var last: [UUID: MessageRecord] = [:]
        if !lastIds.isEmpty {
            for m in try c.all(MessageRecord.self, """
                SELECT \(MessageRecord.columns) FROM \(MessageRecord.from)
                JOIN unnest(\(PostgresArray(lastIds.map(\.0)))::uuid[], \(PostgresArray(lastIds.map(\.1)))::int8[]) AS l (room_id, seq)
                  ON l.room_id = m.room_id AND l.seq = m.seq
                """) {
                last[m.roomId] = m
            }
        }
        return rooms.map { ($0.0, $0.1, last[$0.0.id], $0.2) }
    }

    // MARK: Members

    /// Adds `user` to `room` as `role`: the new member, with their profile; nil when they were one already.
    func addMember(_ c: Connection, room: UUID, user: UUID, role: RoomRole) throws -> MemberRecord? {
        try c.one(MemberRecord.self, """
            WITH mb AS (INSERT INTO chat.members (room_id, user_id, role) VALUES (\(room), \(user), \(role)) ON CONFLICT DO NOTHING
                        RETURNING user_id, role, joined_at)
            SELECT \(MemberRecord.columns) FROM mb LEFT JOIN chat.profiles p ON p.user_id = mb.user_id
            """)
    }

    /// Makes every known party of `parcel` a member of its conversation, if it has one, in one statement: the room
    /// and the new members, with their profiles, in the parties' order (courier, recipient, sender); nil while the
    /// parcel has no conversation or nobody was new.
    func admitParties(_ c: Connection, parcel: UUID) throws -> (room: UUID, joined: [MemberRecord])? {
        let rows = try c.rows("""
            WITH parties AS (SELECT r.id AS room_id, pp.user_id, min(pp.role) AS party
                             FROM chat.rooms r JOIN chat.parcel_parties pp ON pp.parcel_id = r.parcel_id
                             WHERE r.parcel_id = \(parcel) GROUP BY r.id, pp.user_id),
            mb AS (INSERT INTO chat.members (room_id, user_id, role) SELECT room_id, user_id, 'member' FROM parties
                   ON CONFLICT DO NOTHING RETURNING room_id, user_id, role, joined_at)
            SELECT mb.room_id, \(MemberRecord.columns)
            FROM mb JOIN parties USING (room_id, user_id) LEFT JOIN chat.profiles p ON p.user_id = mb.user_id ORDER BY parties.party
            """)
        guard let first = rows.first else { return nil }
        return (try first["room_id"], try rows.map(MemberRecord.init))
    }

    func removeMember(_ c: Connection, room: UUID, user: UUID) throws -> Bool {
        try c.execute("DELETE FROM chat.members WHERE room_id = \(room) AND user_id = \(user)") == 1
    }

    func isMember(_ c: Connection, room: UUID, user: UUID) throws -> Bool {
        try c.first("SELECT 1 AS one FROM chat.members WHERE room_id = \(room) AND user_id = \(user)") != nil
    }

    func members(_ c: Connection, of room: UUID) throws -> [MemberRecord] {
        try c.all(MemberRecord.self, """
            SELECT \(MemberRecord.columns) FROM chat.members mb
            LEFT JOIN chat.profiles p ON p.user_id = mb.user_id WHERE mb.room_id = \(room) ORDER BY mb.joined_at, mb.user_id
            """)
    }

    func markRead(_ c: Connection, room: UUID, user: UUID, seq: Int64) throws {
        try c.execute("""
            UPDATE chat.members mb SET read_seq = LEAST(\(seq)::int8, r.message_seq) FROM chat.rooms r
            WHERE mb.room_id = \(room) AND mb.user_id = \(user) AND r.id = mb.room_id AND mb.read_seq < \(seq)
            """)
    }

    // MARK: The change log

    func addChange(_ c: Connection, room: UUID, seq: Int64, event: String, body: String, message: UUID? = nil) throws {
        try c.enqueue("INSERT INTO chat.changes (room_id, seq, event, body, message_id) VALUES (\(room), \(seq), \(event), \(body), \(message))")
    }

    /// The changes of a room after `after` (and up to `through`), in order, at most `limit`.
    func changes(_ c: Connection, room: UUID, after: Int64, through: Int64? = nil, limit: Int = 1000) throws -> [ChangeRecord] {
        try c.all(ChangeRecord.self, """
            SELECT \(ChangeRecord.columns) FROM chat.changes
            WHERE room_id = \(room) AND seq > \(after) AND (\(through)::int8 IS NULL OR seq <= \(through))
            ORDER BY seq LIMIT \(limit)
            """)
    }

    /// Takes a deleted message's text out of the changes that carried it.
    func scrubChanges(_ c: Connection, message: UUID) throws {
        try c.execute("""
            UPDATE chat.changes SET body = jsonb_set(body::jsonb, '{text}', 'null')::text
            WHERE message_id = \(message) AND body::jsonb ? 'text'
            """)
    }

    // MARK: Messages

    func insertMessage(_ c: Connection, id: UUID, room: UUID, seq: Int64, author: UUID, text: String, clientId: String?,
                       replyTo: UUID?, media: [UUID]) throws -> MessageRecord {
        try c.execute("""
            INSERT INTO chat.messages (id, room_id, seq, author_id, text, client_id, reply_to, media_ids)
            VALUES (\(id), \(room), \(seq), \(author), \(text), \(clientId), \(replyTo), \(PostgresArray(media)))
            """)
        return try message(c, id)!
    }

    func message(_ c: Connection, _ id: UUID, lock: Bool = false) throws -> MessageRecord? {
        try c.one(MessageRecord.self, """
            SELECT \(MessageRecord.columns) FROM \(MessageRecord.from) WHERE m.id = \(id) \(unescaped: lock ? "FOR UPDATE OF m" : "")
            """)
    }

    func message(_ c: Connection, room: UUID, author: UUID, clientId: String) throws -> MessageRecord? {
        try c.one(MessageRecord.self, """
            SELECT \(MessageRecord.columns) FROM \(MessageRecord.from)
            WHERE m.room_id = \(room) AND m.author_id = \(author) AND m.client_id = \(clientId)
            """)
    }

    func isMessage(_ c: Connection, _ id: UUID, in room: UUID) throws -> Bool {
        try c.first("SELECT 1 AS one FROM chat.messages WHERE id = \(id) AND room_id = \(room)") != nil
    }

    func saveMessage(_ c: Connection, _ m: MessageRecord) throws {
        try c.execute("""
            UPDATE chat.messages SET text = \(m.text), media_ids = \(PostgresArray(m.mediaIds)), edited_at = \(m.editedAt),
                deleted_at = \(m.deletedAt) WHERE id = \(m.id)
            """)
    }

    /// A page of a room's messages as `reader` sees them (none of people they blocked), in sequence order: the
    /// `limit` before `before`, or after `after`, or the latest.
    func messages(_ c: Connection, room: UUID, reader: UUID, before: Int64?, after: Int64?, limit: Int) throws -> [MessageRecord] {
        if let after {
            return try c.all(MessageRecord.self, """
                SELECT \(MessageRecord.columns) FROM \(MessageRecord.from)
                WHERE m.room_id = \(room) AND m.seq > \(after) AND \(notBlocked(by: reader)) ORDER BY m.seq LIMIT \(limit)
                """)
        }
        return try c.all(MessageRecord.self, """
            SELECT \(MessageRecord.columns) FROM \(MessageRecord.from)
            WHERE m.room_id = \(room) AND (\(before)::int8 IS NULL OR m.seq < \(before)) AND \(notBlocked(by: reader))
            ORDER BY m.seq DESC LIMIT \(limit)
            """).reversed()
    }

    /// Messages of a room matching `query` (PostgreSQL full-text, words in any order) as `reader` sees them, newest first.
    func search(_ c: Connection, room: UUID, reader: UUID, query: String, before: Int64?, limit: Int) throws -> [MessageRecord] {
        try c.all(MessageRecord.self, """
            SELECT \(MessageRecord.columns) FROM \(MessageRecord.from)
            WHERE m.room_id = \(room) AND m.deleted_at IS NULL AND m.search @@ plainto_tsquery('simple', \(query))
              AND (\(before)::int8 IS NULL OR m.seq < \(before)) AND \(notBlocked(by: reader))
            ORDER BY m.seq DESC LIMIT \(limit)
            """)
    }

    /// The message `m`'s author is not someone `reader` blocked.
    private func notBlocked(by reader: UUID) -> SQL {
        "NOT EXISTS (SELECT 1 FROM chat.blocks bl WHERE bl.user_id = \(reader) AND bl.blocked_id = m.author_id)"
    }

    // MARK: Todos

    func todos(_ c: Connection, room: UUID) throws -> [TodoRecord] {
        try c.all(TodoRecord.self, """
            SELECT \(TodoRecord.columns) FROM \(TodoRecord.from) WHERE t.room_id = \(room)
            ORDER BY t.done, CASE WHEN t.done THEN NULL ELSE t.position END, t.done_at DESC, t.id LIMIT 1000
            """)
    }

    func todo(_ c: Connection, _ id: UUID, lock: Bool = false) throws -> TodoRecord? {
        try c.one(TodoRecord.self, """
            SELECT \(TodoRecord.columns) FROM \(TodoRecord.from) WHERE t.id = \(id) \(unescaped: lock ? "FOR UPDATE OF t" : "")
            """)
    }

    /// The open items of a room in their order (their ids).
    func openTodos(_ c: Connection, room: UUID) throws -> [UUID] {
        try c.rows("SELECT id FROM chat.todos WHERE room_id = \(room) AND NOT done ORDER BY position, created_at, id").map { try $0["id"] }
    }

    func insertTodo(_ c: Connection, id: UUID, room: UUID, title: String, assignee: UUID?, dueAt: Date?, fromMessage: UUID?,
                    createdBy: UUID) throws -> TodoRecord {
        try c.execute("""
            INSERT INTO chat.todos (id, room_id, title, assignee_id, due_at, from_message_id, created_by, position)
            VALUES (\(id), \(room), \(title), \(assignee), \(dueAt), \(fromMessage), \(createdBy),
                    (SELECT COALESCE(max(position), 0) + 1 FROM chat.todos WHERE room_id = \(room) AND NOT done))
            """)
        return try todo(c, id)!
    }

    func saveTodo(_ c: Connection, _ t: TodoRecord) throws {
        try c.execute("""
            UPDATE chat.todos SET title = \(t.title), done = \(t.done), done_by = \(t.doneBy?.id), done_at = \(t.doneAt),
                assignee_id = \(t.assignee?.id), due_at = \(t.dueAt), updated_at = now()
            WHERE id = \(t.id)
            """)
    }

    /// Gives the open items of a room the positions 1, 2, ... in the order of `ids`.
    func order(_ c: Connection, room: UUID, _ ids: [UUID]) throws {
        try c.execute("""
            UPDATE chat.todos t SET position = o.position FROM unnest(\(PostgresArray(ids))::uuid[]) WITH ORDINALITY AS o (id, position)
            WHERE t.room_id = \(room) AND t.id = o.id
            """)
    }

    func deleteTodo(_ c: Connection, _ id: UUID) throws {
        try c.execute("DELETE FROM chat.todos WHERE id = \(id)")
    }

    // MARK: What chat learns from other services

    func addGroupMember(_ c: Connection, group: UUID, user: UUID) throws {
        try c.enqueue("INSERT INTO chat.group_members (group_id, user_id) VALUES (\(group), \(user)) ON CONFLICT DO NOTHING")
    }

    func removeGroupMember(_ c: Connection, group: UUID, user: UUID) throws {
        try c.execute("DELETE FROM chat.group_members WHERE group_id = \(group) AND user_id = \(user)")
    }

    func addParcelParty(_ c: Connection, parcel: UUID, user: UUID, role: String) throws {
        try c.enqueue("INSERT INTO chat.parcel_parties (parcel_id, user_id, role) VALUES (\(parcel), \(user), \(role)) ON CONFLICT DO NOTHING")
    }

    /// The parcel's courier is no longer one of its parties: their part in it is over. Returns the courier (nil when
    /// none was a party) and the parties they leave.
    @discardableResult
    func removeCourierParty(_ c: Connection, parcel: UUID) throws -> (courier: UUID, others: [UUID])? {
        guard let courier: UUID = try c.first("""
            DELETE FROM chat.parcel_parties WHERE parcel_id = \(parcel) AND role = 'courier' RETURNING user_id
            """)?["user_id"] else { return nil }
        let others: [UUID] = try c.rows("""
            SELECT DISTINCT user_id FROM chat.parcel_parties WHERE parcel_id = \(parcel) AND user_id <> \(courier)
            """).map { try $0["user_id"] }
        return (courier, others)
    }

    /// Opens a room closed before (a direct room whose two people know each other again); whether it was closed.
    func reopen(_ c: Connection, _ room: UUID) throws -> Bool {
        try c.execute("UPDATE chat.rooms SET read_only = false, updated_at = now() WHERE id = \(room) AND read_only") == 1
    }

    /// Whether two people share a stories group or a parcel (a courier: one they still carry).
    func know(_ c: Connection, _ a: UUID, _ b: UUID) throws -> Bool {
        try c.first("""
            SELECT EXISTS (SELECT 1 FROM chat.group_members x JOIN chat.group_members y ON y.group_id = x.group_id
                           WHERE x.user_id = \(a) AND y.user_id = \(b))
                OR EXISTS (SELECT 1 FROM chat.parcel_parties x JOIN chat.parcel_parties y ON y.parcel_id = x.parcel_id
                           WHERE x.user_id = \(a) AND y.user_id = \(b)) AS known
            """)!["known"]
    }

    // MARK: Media

    /// An image `reader` may see: their own, or one on a message of a room they are in.
    func visibleMedia(_ c: Connection, _ id: UUID, reader: UUID) throws -> MediaRecord? {
        try c.one(MediaRecord.self, """
            SELECT \(MediaRecord.columns) FROM chat.media m WHERE m.id = \(id) AND (m.owner_id = \(reader) OR EXISTS (
                SELECT 1 FROM chat.messages msg JOIN chat.members mb ON mb.room_id = msg.room_id AND mb.user_id = \(reader)
                WHERE msg.media_ids @> ARRAY[m.id] AND msg.deleted_at IS NULL))
            """)
    }
}

/// Microseconds since the epoch of a timestamp column, for keyset cursors.
func micros(_ column: String) -> SQL { "(EXTRACT(EPOCH FROM \(unescaped: column)) * 1000000)::int8" }
