import Features
import Foundation
import Models
import Postgres

// MARK: - Records

/// A room as a reader sees it: their role (nil when not a member) and read position.
struct RoomRecord {
    let id: UUID
    let kind: String
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
    let role: String?
    let readSeq: Int64

    static let columns = """
        r.id, r.kind, r.name, r.topic, r.invite_code, r.parcel_id, r.read_only, r.created_by, r.change_seq, r.message_seq,
        r.created_at, r.updated_at
        """

    init(_ row: Row) throws {
        id = try row["id"]; kind = try row["kind"]; name = try row["name"]; topic = try row.decode("topic")
        inviteCode = try row.decode("invite_code"); parcelId = try row.decode("parcel_id"); readOnly = try row["read_only"]
        createdBy = try row.decode("created_by"); changeSeq = try row["change_seq"]; messageSeq = try row["message_seq"]
        createdAt = try row["created_at"]; updatedAt = try row["updated_at"]; role = try row.decode("role")
        readSeq = try row.decode("read_seq") ?? 0
    }
}

/// Someone as others see them: a name and an avatar, from auth's events.
struct PersonRecord {
    let id: UUID
    let name: String?
    let avatarMediaId: UUID?
    var pictureUrl: String? = nil
}

struct MemberRecord {
    let person: PersonRecord
    let role: String
    let joinedAt: Date

    /// From a row of `user_id`, `role`, `joined_at` and the profile's `full_name`, `avatar_media_id`, `picture_url`.
    init(_ r: Row) throws {
        person = PersonRecord(id: try r["user_id"], name: try r.decode("full_name"), avatarMediaId: try r.decode("avatar_media_id"),
                              pictureUrl: try r.decode("picture_url"))
        role = try r["role"]
        joinedAt = try r["joined_at"]
    }
}

struct MessageRecord {
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

    static let columns = """
        m.id, m.room_id, m.seq, m.author_id, m.text, m.client_id, m.reply_to, array_to_string(m.media_ids, ',') AS media_text,
        m.created_at, m.edited_at,
        m.deleted_at, p.full_name AS author_name, p.avatar_media_id AS author_avatar,
        p.picture_url AS author_picture, \(ImageMeta.sql(ids: "m.media_ids", schema: "chat")) AS media_meta
        """
    static let from = "chat.messages m LEFT JOIN chat.profiles p ON p.user_id = m.author_id"

    init(_ row: Row) throws {
        id = try row["id"]; roomId = try row["room_id"]; seq = try row["seq"]
        author = PersonRecord(id: try row["author_id"], name: try row.decode("author_name"), avatarMediaId: try row.decode("author_avatar"),
                              pictureUrl: try row.decode("author_picture"))
        text = try row.decode("text"); clientId = try row.decode("client_id"); replyTo = try row.decode("reply_to")
        mediaIds = try row["media_text", as: String.self].split(separator: ",").compactMap { UUID(uuidString: String($0)) }
        images = ImageMeta.parse(try row.decode("media_meta"))
        createdAt = try row["created_at"]; editedAt = try row.decode("edited_at"); deletedAt = try row.decode("deleted_at")
    }
}

struct TodoRecord {
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

    static let columns = """
        t.id, t.room_id, t.title, t.done, t.done_by, t.done_at, t.assignee_id, t.due_at, t.position, t.from_message_id,
        t.created_by, t.created_at, t.updated_at, db.full_name AS done_by_name, db.avatar_media_id AS done_by_avatar,
        db.picture_url AS done_by_picture, a.full_name AS assignee_name, a.avatar_media_id AS assignee_avatar,
        a.picture_url AS assignee_picture
        """
    static let from = """
        chat.todos t LEFT JOIN chat.profiles db ON db.user_id = t.done_by LEFT JOIN chat.profiles a ON a.user_id = t.assignee_id
        """

    init(_ row: Row) throws {
        id = try row["id"]; roomId = try row["room_id"]; title = try row["title"]; done = try row["done"]
        doneBy = try row.decode("done_by", as: UUID.self).map {
            PersonRecord(id: $0, name: try row.decode("done_by_name"), avatarMediaId: try row.decode("done_by_avatar"),
                         pictureUrl: try row.decode("done_by_picture"))
        }
        doneAt = try row.decode("done_at")
        assignee = try row.decode("assignee_id", as: UUID.self).map {
            PersonRecord(id: $0, name: try row.decode("assignee_name"), avatarMediaId: try row.decode("assignee_avatar"),
                         pictureUrl: try row.decode("assignee_picture"))
        }
        dueAt = try row.decode("due_at"); position = try row["position"]; fromMessageId = try row.decode("from_message_id")
        createdBy = try row["created_by"]; createdAt = try row["created_at"]; updatedAt = try row["updated_at"]
    }
}

/// One stored change of a room: its sequence, its SSE event name and the JSON a stream sends.
struct ChangeRecord {
    let seq: Int64
    let event: String
    let body: String
}

/// The chat schema's SQL, and nothing else.
struct ChatStorage: Sendable {
    // MARK: Rooms

    func room(_ c: Connection, _ id: UUID, reader: UUID, lock: Bool = false) throws -> RoomRecord? {
        try c.first("""
            SELECT \(RoomRecord.columns), mb.role, mb.read_seq FROM chat.rooms r
            LEFT JOIN chat.members mb ON mb.room_id = r.id AND mb.user_id = $2 WHERE r.id = $1 \(lock ? "FOR UPDATE OF r" : "")
            """, [id, reader]).map(RoomRecord.init)
    }

    func roomId(_ c: Connection, inviteCode: String) throws -> UUID? {
        try c.first("SELECT id FROM chat.rooms WHERE invite_code = $1", [inviteCode])?["id"]
    }

    func roomId(_ c: Connection, directKey: String) throws -> UUID? {
        try c.first("SELECT id FROM chat.rooms WHERE direct_key = $1", [directKey])?["id"]
    }

    func roomId(_ c: Connection, parcel: UUID) throws -> UUID? {
        try c.first("SELECT id FROM chat.rooms WHERE parcel_id = $1", [parcel])?["id"]
    }

    /// Inserts a room unless one with the same invite code, pair or parcel exists; true when inserted.
    func insertRoom(_ c: Connection, id: UUID, kind: String, name: String, topic: String?, inviteCode: String?,
                    directKey: String?, parcel: UUID?, createdBy: UUID?) throws -> Bool {
        try c.execute("""
            INSERT INTO chat.rooms (id, kind, name, topic, invite_code, direct_key, parcel_id, created_by)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING
            """, [id, kind, name, topic, inviteCode, directKey, parcel, createdBy]) == 1
    }

    func updateRoom(_ c: Connection, _ r: RoomRecord) throws {
        try c.execute("UPDATE chat.rooms SET name = $2, topic = $3, invite_code = $4, updated_at = now() WHERE id = $1",
                      [r.id, r.name, r.topic, r.inviteCode])
    }

    func setReadOnly(_ c: Connection, _ room: UUID) throws -> Bool {
        try c.execute("UPDATE chat.rooms SET read_only = true, updated_at = now() WHERE id = $1 AND NOT read_only", [room]) == 1
    }

    /// The next change sequence of a room, and with `message` the next message sequence too. The row stays locked
    /// until the transaction ends, so changes of one room commit in the order of their sequence, without gaps.
    func nextSeq(_ c: Connection, _ room: UUID, message: Bool = false) throws -> (change: Int64, message: Int64) {
        let row = try c.first("""
            UPDATE chat.rooms SET change_seq = change_seq + 1, message_seq = message_seq + $2::int, updated_at = now()
            WHERE id = $1 RETURNING change_seq, message_seq
            """, [room, message ? 1 : 0])!
        return (try row["change_seq"], try row["message_seq"])
    }

    /// The members of `room` whose usernames are among `names` (lower-case).
    func members(_ c: Connection, room: UUID, named names: [String]) throws -> [UUID] {
        guard !names.isEmpty else { return [] }
        return try c.rows("""
            SELECT mb.user_id FROM chat.members mb JOIN chat.profiles p ON p.user_id = mb.user_id
            WHERE mb.room_id = $1 AND lower(p.username) = ANY($2::text[]) ORDER BY mb.user_id
            """, [room, PostgresArray(names)]).map { try $0["user_id"] }
    }

    /// What notify needs to tell `user` of `room`: its title for them, and how many messages they have not read.
    func unread(_ c: Connection, room: UUID, user: UUID) throws -> (title: String?, unread: Int)? {
        guard let row = try c.first("""
            SELECT r.name, (SELECT count(*)::int FROM chat.messages um WHERE um.room_id = r.id AND um.seq > mb.read_seq
                              AND um.author_id <> $2 AND um.deleted_at IS NULL) AS unread
            FROM chat.members mb JOIN chat.rooms r ON r.id = mb.room_id WHERE mb.room_id = $1 AND mb.user_id = $2
            """, [room, user]) else { return nil }
        return (try row.decode("name"), try row["unread"])
    }

    /// The rooms `user` is in, newest activity first, with the unread count and the last message of each.
    func rooms(_ c: Connection, of user: UUID, parcel: UUID?, after: (Int64, UUID)?, limit: Int)
        throws -> [(room: RoomRecord, unread: Int, last: MessageRecord?, activityMicros: Int64)] {
        let rows = try c.rows("""
            SELECT \(RoomRecord.columns), mb.role, mb.read_seq, \(micros("r.updated_at")) AS activity_us,
                   (SELECT count(*) FROM chat.messages um WHERE um.room_id = r.id AND um.seq > mb.read_seq
                      AND um.author_id <> $1 AND um.deleted_at IS NULL) AS unread
            FROM chat.members mb JOIN chat.rooms r ON r.id = mb.room_id
            WHERE mb.user_id = $1 AND ($2::uuid IS NULL OR r.parcel_id = $2)
              AND ($3::int8 IS NULL OR (\(micros("r.updated_at")), r.id) < ($3::int8, $4::uuid))
            ORDER BY r.updated_at DESC, r.id DESC LIMIT $5
            """, [user, parcel, after?.0, after?.1, limit])
        let rooms = try rows.map { (try RoomRecord($0), try $0["unread", as: Int.self], try $0["activity_us", as: Int64.self]) }
        let lastIds = rooms.filter { $0.0.messageSeq > 0 }.map { ($0.0.id, $0.0.messageSeq) }
        var last: [UUID: MessageRecord] = [:]
        if !lastIds.isEmpty {
            for m in try c.rows("""
                SELECT \(MessageRecord.columns) FROM \(MessageRecord.from)
                JOIN unnest($1::uuid[], $2::int8[]) AS l (room_id, seq) ON l.room_id = m.room_id AND l.seq = m.seq
                """, [PostgresArray(lastIds.map(\.0)), PostgresArray(lastIds.map(\.1))]).map(MessageRecord.init) {
                last[m.roomId] = m
            }
        }
        return rooms.map { ($0.0, $0.1, last[$0.0.id], $0.2) }
    }

    // MARK: Members

    /// Adds `user` to `room` as `role`: the new member, with their profile; nil when they were one already.
    func addMember(_ c: Connection, room: UUID, user: UUID, role: String) throws -> MemberRecord? {
        try c.first("""
            WITH m AS (INSERT INTO chat.members (room_id, user_id, role) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING
                       RETURNING user_id, role, joined_at)
            SELECT m.*, p.full_name, p.avatar_media_id, p.picture_url FROM m LEFT JOIN chat.profiles p ON p.user_id = m.user_id
            """, [room, user, role]).map(MemberRecord.init)
    }

    /// Makes every known party of `parcel` a member of its conversation, if it has one, in one statement: the room
    /// and the new members, with their profiles, in the parties' order (courier, recipient, sender); nil while the
    /// parcel has no conversation or nobody was new.
    func admitParties(_ c: Connection, parcel: UUID) throws -> (room: UUID, joined: [MemberRecord])? {
        let rows = try c.rows("""
            WITH parties AS (SELECT r.id AS room_id, pp.user_id, min(pp.role) AS party
                             FROM chat.rooms r JOIN chat.parcel_parties pp ON pp.parcel_id = r.parcel_id
                             WHERE r.parcel_id = $1 GROUP BY r.id, pp.user_id),
            m AS (INSERT INTO chat.members (room_id, user_id, role) SELECT room_id, user_id, 'member' FROM parties
                  ON CONFLICT DO NOTHING RETURNING room_id, user_id, role, joined_at)
            SELECT m.*, p.full_name, p.avatar_media_id, p.picture_url
            FROM m JOIN parties USING (room_id, user_id) LEFT JOIN chat.profiles p ON p.user_id = m.user_id ORDER BY parties.party
            """, [parcel])
        guard let first = rows.first else { return nil }
        return (try first["room_id"], try rows.map(MemberRecord.init))
    }

    func removeMember(_ c: Connection, room: UUID, user: UUID) throws -> Bool {
        try c.execute("DELETE FROM chat.members WHERE room_id = $1 AND user_id = $2", [room, user]) == 1
    }

    func isMember(_ c: Connection, room: UUID, user: UUID) throws -> Bool {
        try c.first("SELECT 1 AS one FROM chat.members WHERE room_id = $1 AND user_id = $2", [room, user]) != nil
    }

    func members(_ c: Connection, of room: UUID) throws -> [MemberRecord] {
        try c.rows("""
            SELECT mb.user_id, mb.role, mb.joined_at, p.full_name, p.avatar_media_id, p.picture_url FROM chat.members mb
            LEFT JOIN chat.profiles p ON p.user_id = mb.user_id WHERE mb.room_id = $1 ORDER BY mb.joined_at, mb.user_id
            """, [room]).map(MemberRecord.init)
    }

    func markRead(_ c: Connection, room: UUID, user: UUID, seq: Int64) throws {
        try c.execute("""
            UPDATE chat.members mb SET read_seq = LEAST($3, r.message_seq) FROM chat.rooms r
            WHERE mb.room_id = $1 AND mb.user_id = $2 AND r.id = mb.room_id AND mb.read_seq < $3
            """, [room, user, seq])
    }

    // MARK: The change log

    func addChange(_ c: Connection, room: UUID, seq: Int64, event: String, body: String, message: UUID? = nil) throws {
        try c.enqueue("INSERT INTO chat.changes (room_id, seq, event, body, message_id) VALUES ($1, $2, $3, $4, $5)",
                      [room, seq, event, body, message])
    }

    /// The changes of a room after `after` (and up to `through`), in order, at most `limit`.
    func changes(_ c: Connection, room: UUID, after: Int64, through: Int64? = nil, limit: Int = 1000) throws -> [ChangeRecord] {
        try c.rows("""
            SELECT seq, event, body FROM chat.changes WHERE room_id = $1 AND seq > $2 AND ($3::int8 IS NULL OR seq <= $3)
            ORDER BY seq LIMIT $4
            """, [room, after, through, limit]).map { ChangeRecord(seq: try $0["seq"], event: try $0["event"], body: try $0["body"]) }
    }

    /// Takes a deleted message's text out of the changes that carried it.
    func scrubChanges(_ c: Connection, message: UUID) throws {
        try c.execute("""
            UPDATE chat.changes SET body = jsonb_set(body::jsonb, '{text}', 'null')::text
            WHERE message_id = $1 AND body::jsonb ? 'text'
            """, [message])
    }

    // MARK: Messages

    func insertMessage(_ c: Connection, id: UUID, room: UUID, seq: Int64, author: UUID, text: String, clientId: String?,
                       replyTo: UUID?, media: [UUID]) throws -> MessageRecord {
        try c.execute("""
            INSERT INTO chat.messages (id, room_id, seq, author_id, text, client_id, reply_to, media_ids)
            VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
            """, [id, room, seq, author, text, clientId, replyTo, PostgresArray(media)])
        return try message(c, id)!
    }

    func message(_ c: Connection, _ id: UUID, lock: Bool = false) throws -> MessageRecord? {
        try c.first("SELECT \(MessageRecord.columns) FROM \(MessageRecord.from) WHERE m.id = $1 \(lock ? "FOR UPDATE OF m" : "")", [id])
            .map(MessageRecord.init)
    }

    func message(_ c: Connection, room: UUID, author: UUID, clientId: String) throws -> MessageRecord? {
        try c.first("""
            SELECT \(MessageRecord.columns) FROM \(MessageRecord.from) WHERE m.room_id = $1 AND m.author_id = $2 AND m.client_id = $3
            """, [room, author, clientId]).map(MessageRecord.init)
    }

    func isMessage(_ c: Connection, _ id: UUID, in room: UUID) throws -> Bool {
        try c.first("SELECT 1 AS one FROM chat.messages WHERE id = $1 AND room_id = $2", [id, room]) != nil
    }

    func saveMessage(_ c: Connection, _ m: MessageRecord) throws {
        try c.execute("UPDATE chat.messages SET text = $2, media_ids = $3, edited_at = $4, deleted_at = $5 WHERE id = $1",
                      [m.id, m.text, PostgresArray(m.mediaIds), m.editedAt, m.deletedAt])
    }

    /// A page of a room's messages as `reader` sees them (none of people they blocked), in sequence order: the
    /// `limit` before `before`, or after `after`, or the latest.
    func messages(_ c: Connection, room: UUID, reader: UUID, before: Int64?, after: Int64?, limit: Int) throws -> [MessageRecord] {
        let visible = Blocks(schema: "chat").notBlockedBy(reader: 4, author: "m.author_id")
        if let after {
            return try c.rows("""
                SELECT \(MessageRecord.columns) FROM \(MessageRecord.from) WHERE m.room_id = $1 AND m.seq > $2 AND \(visible)
                ORDER BY m.seq LIMIT $3
                """, [room, after, limit, reader]).map(MessageRecord.init)
        }
        return try c.rows("""
            SELECT \(MessageRecord.columns) FROM \(MessageRecord.from)
            WHERE m.room_id = $1 AND ($2::int8 IS NULL OR m.seq < $2) AND \(visible) ORDER BY m.seq DESC LIMIT $3
            """, [room, before, limit, reader]).map(MessageRecord.init).reversed()
    }

    /// Messages of a room matching `query` (PostgreSQL full-text, words in any order) as `reader` sees them, newest first.
    func search(_ c: Connection, room: UUID, reader: UUID, query: String, before: Int64?, limit: Int) throws -> [MessageRecord] {
        try c.rows("""
            SELECT \(MessageRecord.columns) FROM \(MessageRecord.from)
            WHERE m.room_id = $1 AND m.deleted_at IS NULL AND m.search @@ plainto_tsquery('simple', $2)
              AND ($3::int8 IS NULL OR m.seq < $3) AND \(Blocks(schema: "chat").notBlockedBy(reader: 5, author: "m.author_id"))
            ORDER BY m.seq DESC LIMIT $4
            """, [room, query, before, limit, reader]).map(MessageRecord.init)
    }

    // MARK: Todos

    func todos(_ c: Connection, room: UUID) throws -> [TodoRecord] {
        try c.rows("""
            SELECT \(TodoRecord.columns) FROM \(TodoRecord.from) WHERE t.room_id = $1
            ORDER BY t.done, CASE WHEN t.done THEN NULL ELSE t.position END, t.done_at DESC, t.id LIMIT 1000
            """, [room]).map(TodoRecord.init)
    }

    func todo(_ c: Connection, _ id: UUID, lock: Bool = false) throws -> TodoRecord? {
        try c.first("SELECT \(TodoRecord.columns) FROM \(TodoRecord.from) WHERE t.id = $1 \(lock ? "FOR UPDATE OF t" : "")", [id])
            .map(TodoRecord.init)
    }

    /// The open items of a room in their order (their ids).
    func openTodos(_ c: Connection, room: UUID) throws -> [UUID] {
        try c.rows("SELECT id FROM chat.todos WHERE room_id = $1 AND NOT done ORDER BY position, created_at, id", [room])
            .map { try $0["id"] }
    }

    func insertTodo(_ c: Connection, id: UUID, room: UUID, title: String, assignee: UUID?, dueAt: Date?, fromMessage: UUID?,
                    createdBy: UUID) throws -> TodoRecord {
        try c.execute("""
            INSERT INTO chat.todos (id, room_id, title, assignee_id, due_at, from_message_id, created_by, position)
            VALUES ($1, $2, $3, $4, $5, $6, $7,
                    (SELECT COALESCE(max(position), 0) + 1 FROM chat.todos WHERE room_id = $2 AND NOT done))
            """, [id, room, title, assignee, dueAt, fromMessage, createdBy])
        return try todo(c, id)!
    }

    func saveTodo(_ c: Connection, _ t: TodoRecord) throws {
        try c.execute("""
            UPDATE chat.todos SET title = $2, done = $3, done_by = $4, done_at = $5, assignee_id = $6, due_at = $7, updated_at = now()
            WHERE id = $1
            """, [t.id, t.title, t.done, t.doneBy?.id, t.doneAt, t.assignee?.id, t.dueAt])
    }

    /// Gives the open items of a room the positions 1, 2, ... in the order of `ids`.
    func order(_ c: Connection, room: UUID, _ ids: [UUID]) throws {
        try c.execute("""
            UPDATE chat.todos t SET position = o.position FROM unnest($2::uuid[]) WITH ORDINALITY AS o (id, position)
            WHERE t.room_id = $1 AND t.id = o.id
            """, [room, PostgresArray(ids)])
    }

    func deleteTodo(_ c: Connection, _ id: UUID) throws {
        try c.execute("DELETE FROM chat.todos WHERE id = $1", [id])
    }

    // MARK: What chat learns from other services

    func addGroupMember(_ c: Connection, group: UUID, user: UUID) throws {
        try c.enqueue("INSERT INTO chat.group_members (group_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", [group, user])
    }

    func removeGroupMember(_ c: Connection, group: UUID, user: UUID) throws {
        try c.execute("DELETE FROM chat.group_members WHERE group_id = $1 AND user_id = $2", [group, user])
    }

    func addParcelParty(_ c: Connection, parcel: UUID, user: UUID, role: String) throws {
        try c.enqueue("INSERT INTO chat.parcel_parties (parcel_id, user_id, role) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING",
                      [parcel, user, role])
    }

    /// The parcel's courier is no longer one of its parties: their part in it is over.
    func removeCourierParty(_ c: Connection, parcel: UUID) throws {
        _ = try c.execute("DELETE FROM chat.parcel_parties WHERE parcel_id = $1 AND role = 'courier'", [parcel])
    }

    /// Whether two people share a stories group or a parcel (a courier: one they still carry).
    func know(_ c: Connection, _ a: UUID, _ b: UUID) throws -> Bool {
        try c.first("""
            SELECT EXISTS (SELECT 1 FROM chat.group_members x JOIN chat.group_members y ON y.group_id = x.group_id
                           WHERE x.user_id = $1 AND y.user_id = $2)
                OR EXISTS (SELECT 1 FROM chat.parcel_parties x JOIN chat.parcel_parties y ON y.parcel_id = x.parcel_id
                           WHERE x.user_id = $1 AND y.user_id = $2) AS known
            """, [a, b])!["known"]
    }

    // MARK: Media

    /// An image `reader` may see: their own, or one on a message of a room they are in.
    func visibleMedia(_ c: Connection, _ id: UUID, reader: UUID) throws -> MediaRecord? {
        try c.first("""
            SELECT \(MediaRecord.columns) FROM chat.media m WHERE m.id = $1 AND (m.owner_id = $2 OR EXISTS (
                SELECT 1 FROM chat.messages msg JOIN chat.members mb ON mb.room_id = msg.room_id AND mb.user_id = $2
                WHERE msg.media_ids @> ARRAY[m.id] AND msg.deleted_at IS NULL))
            """, [id, reader]).map(MediaRecord.init)
    }
}

/// Microseconds since the epoch of a timestamp column, for keyset cursors.
func micros(_ column: String) -> String { "(EXTRACT(EPOCH FROM \(column)) * 1000000)::int8" }
