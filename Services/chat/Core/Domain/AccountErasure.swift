import Events
import Features
import Foundation
import Models
import Postgres
import Web

/// What chat does when an account is erased (`user.deleted`): the person's messages keep their place, deleted, with
/// no text, photos or author (the nil UUID, `Erasure.nobody`); the rooms' stored changes that a stream replays say
/// the same; a room they owned passes to its longest member, one nobody is left in goes; their todos' authorship
/// goes to nobody; what chat learned of them (groups, parcels, name, face) and their images are forgotten.
struct AccountErasure: Sendable {
    let storage: ChatStorage
    let media: MediaStore

    func userDeleted(_ event: ReceivedEvent, _ c: Connection) throws {
        let user = try event.decode(UserDeleted.self).userId
        let messages = try storage.forget(user, on: c)
        // The stored changes a stream replays: a message of theirs as it is now, anything else without them.
        for change in try storage.changes(c, naming: user, messages: messages) {
            let body: String
            if let message = change.message, messages.contains(message), let record = try storage.message(c, message) {
                body = String(decoding: JSON.encode(MessageView(record, media: media)), as: UTF8.self)
            } else {
                body = Self.scrub(change.body, user)
            }
            try storage.replaceChange(c, room: change.room, seq: change.seq, body: body)
        }
        try media.forget(owner: user, on: c)
        try Profiles(schema: "chat").forget(user, on: c)
        try Blocks(schema: "chat").forget(user, on: c)
        try Reports(schema: "chat").forget(user, on: c)
        try Erasure.forget(user, schema: "chat", on: c)
    }

    /// A stored change's JSON without `user`: a person object of theirs loses name and face, and their id is nobody's.
    static func scrub(_ body: String, _ user: UUID) -> String {
        guard let json = try? JSONSerialization.jsonObject(with: Data(body.utf8)) else { return "{}" }
        func walk(_ value: Any) -> Any {
            if let text = value as? String { return UUID(uuidString: text) == user ? Erasure.nobody.lowercased : text }
            if let list = value as? [Any] { return list.map(walk) }
            guard var object = value as? [String: Any] else { return value }
            if let id = object["id"] as? String, UUID(uuidString: id) == user {
                for key in ["name", "avatarMediaId", "avatarUrl", "avatarUrls"] where object[key] != nil { object[key] = NSNull() }
            }
            return object.mapValues(walk)
        }
        let scrubbed = walk(json)
        guard let data = try? JSONSerialization.data(withJSONObject: scrubbed, options: [.sortedKeys, .withoutEscapingSlashes]) else { return "{}" }
        return String(decoding: data, as: UTF8.self)
    }
}

extension ChatStorage {
    /// Erases what names `user` in chat's own tables; the ids of their messages, now anonymised.
    func forget(_ user: UUID, on c: Connection) throws -> Set<UUID> {
        let nobody = Erasure.nobody
        let messages: [UUID] = try c.rows("""
            UPDATE chat.messages SET author_id = \(nobody), text = NULL, client_id = NULL, media_ids = '{}', deleted_at = COALESCE(deleted_at, now())
            WHERE author_id = \(user) RETURNING id
            """).map { try $0["id"] }
        let rooms: [UUID] = try c.rows("SELECT room_id FROM chat.members WHERE user_id = \(user)").map { try $0["room_id"] }
        // A room they owned with nobody else owning it: its longest member owns it now.
        try Succession.promoteHeirs(c, table: "chat.members", container: "room_id", role: "owner", leaving: user)
        try c.execute("DELETE FROM chat.members WHERE user_id = \(user)")
        try c.execute("""
            DELETE FROM chat.rooms r WHERE r.id = ANY(\(PostgresArray(rooms))::uuid[]) AND NOT EXISTS (SELECT 1 FROM chat.members m WHERE m.room_id = r.id)
            """)
        try c.execute("UPDATE chat.rooms SET created_by = NULL WHERE created_by = \(user)")
        try c.execute("UPDATE chat.rooms SET direct_key = 'erased:' || id WHERE kind = 'direct' AND strpos(direct_key, \(user.lowercased)) > 0")
        try c.execute("UPDATE chat.todos SET created_by = \(nobody) WHERE created_by = \(user)")
        try c.execute("UPDATE chat.todos SET done_by = \(nobody) WHERE done_by = \(user)")
        try c.execute("UPDATE chat.todos SET assignee_id = NULL WHERE assignee_id = \(user)")
        for table in ["group_members", "parcel_parties", "join_failures"] {
            try c.execute("DELETE FROM chat.\(unescaped: table) WHERE user_id = \(user)")
        }
        return Set(messages)
    }

    /// The stored changes that name `user` or are of one of `messages`.
    func changes(_ c: Connection, naming user: UUID, messages: Set<UUID>) throws -> [(room: UUID, seq: Int64, message: UUID?, body: String)] {
        try c.rows("""
            SELECT room_id, seq, message_id, body FROM chat.changes
            WHERE strpos(body, \(user.lowercased)) > 0 OR message_id = ANY(\(PostgresArray(Array(messages)))::uuid[])
            """).map { try $0.decode(UUID.self, Int64.self, UUID?.self, String.self) }
    }

    func replaceChange(_ c: Connection, room: UUID, seq: Int64, body: String) throws {
        try c.execute("UPDATE chat.changes SET body = \(body) WHERE room_id = \(room) AND seq = \(seq)")
    }
}
