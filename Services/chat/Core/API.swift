import Foundation
import Models
import ServiceKit

// MARK: - Request bodies

struct CreateRoomBody: RequestBody {
    static let schema = Schema.object(["name": .required(.text(max: 100)), "topic": .optional(.text(min: 0, max: 500, multiline: true))])
    let name: String
    let topic: String?
}

struct UpdateRoomBody: RequestBody {
    static let schema = Schema.object(["name": .absentOrValue(.text(max: 100)), "topic": .optional(.text(min: 0, max: 500, multiline: true))])
    let name: String?
    let topic: Patch<String>

    enum CodingKeys: String, CodingKey { case name, topic }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        topic = try c.decode(Patch<String>.self, forKey: .topic)
    }
}

struct JoinRoomBody: RequestBody {
    /// Any string: a code that cannot be one counts as a failed attempt, like a wrong one.
    static let schema = Schema.object(["inviteCode": .required(.string())])
    let inviteCode: String
}

struct DirectRoomBody: RequestBody {
    static let schema = Schema.object(["userId": .required(.uuid)])
    let userId: UUID
}

struct PostMessageBody: RequestBody {
    /// `clientId` is the client's own id for the message: a retry with the same one returns the first message.
    static let schema = Schema.object([
        "text": .required(.text(max: 4000, multiline: true)),
        "clientId": .optional(.string(min: 1, max: 64, pattern: "^[!-~]+$", rule: "clientId must be 1 to 64 visible ASCII characters.")),
        "mediaIds": .optional(.array(.uuid, count: 0...10)), "replyTo": .optional(.uuid),
    ])
    let text: String
    let clientId: String?
    let mediaIds: [UUID]?
    let replyTo: UUID?
}

struct EditMessageBody: RequestBody {
    static let schema = Schema.object(["text": .required(.text(max: 4000, multiline: true))])
    let text: String
}

struct ReadBody: RequestBody {
    /// The sequence of the last message read.
    static let schema = Schema.object(["seq": .required(.integer(0...(1 << 52)))])
    let seq: Int64
}

struct CreateTodoBody: RequestBody {
    static let schema = Schema.object([
        "title": .required(.text(max: 500)), "assigneeId": .optional(.uuid), "dueAt": .optional(.dateTime),
        "fromMessageId": .optional(.uuid),
    ])
    let title: String
    let assigneeId: UUID?
    let dueAt: String?
    let fromMessageId: UUID?
}

struct UpdateTodoBody: RequestBody {
    /// `position` is the item's place among the open items, from 1.
    static let schema = Schema.object([
        "title": .absentOrValue(.text(max: 500)), "done": .absentOrValue(.boolean), "assigneeId": .optional(.uuid),
        "dueAt": .optional(.dateTime), "position": .absentOrValue(.integer(1...1000)),
    ])
    let title: String?
    let done: Bool?
    let assigneeId: Patch<UUID>
    let dueAt: Patch<String>
    let position: Int?

    enum CodingKeys: String, CodingKey { case title, done, assigneeId, dueAt, position }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        title = try c.decodeIfPresent(String.self, forKey: .title)
        done = try c.decodeIfPresent(Bool.self, forKey: .done)
        assigneeId = try c.decode(Patch<UUID>.self, forKey: .assigneeId)
        dueAt = try c.decode(Patch<String>.self, forKey: .dueAt)
        position = try c.decodeIfPresent(Int.self, forKey: .position)
    }
}

// MARK: - Views

/// Someone as the apps show them.
struct PersonView: Encodable {
    let id: String
    let name: String?
    let avatarMediaId: String?
    init(_ p: PersonRecord) { id = p.id.lowercased; name = p.name; avatarMediaId = p.avatarMediaId?.lowercased }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id); try c.encode(name, forKey: .name); try c.encode(avatarMediaId, forKey: .avatarMediaId)
    }
    enum CodingKeys: String, CodingKey { case id, name, avatarMediaId }
}

struct MemberView: Encodable {
    let user: PersonView
    let role: String
    let joinedAt: String
    init(_ m: MemberRecord) { user = PersonView(m.person); role = m.role; joinedAt = Timestamp.format(m.joinedAt) }
}

struct MediaRefView: Encodable {
    let id: String
    let url: String
    init(_ id: UUID) { self.id = id.lowercased; url = "/v1/chat/media/\(id.lowercased)" }
}

struct MessageView: Encodable {
    let id: String
    let roomId: String
    let seq: Int64
    let author: PersonView
    let text: String?
    let clientId: String?
    let replyTo: String?
    let media: [MediaRefView]
    let createdAt: String
    let updatedAt: String
    let editedAt: String?
    let deletedAt: String?

    init(_ m: MessageRecord) {
        id = m.id.lowercased; roomId = m.roomId.lowercased; seq = m.seq; author = PersonView(m.author); text = m.text
        clientId = m.clientId; replyTo = m.replyTo?.lowercased; media = m.mediaIds.map(MediaRefView.init)
        createdAt = Timestamp.format(m.createdAt)
        updatedAt = Timestamp.format([m.createdAt, m.editedAt, m.deletedAt].compactMap { $0 }.max()!)
        editedAt = m.editedAt.map(Timestamp.format); deletedAt = m.deletedAt.map(Timestamp.format)
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id); try c.encode(roomId, forKey: .roomId); try c.encode(seq, forKey: .seq)
        try c.encode(author, forKey: .author); try c.encode(text, forKey: .text); try c.encode(clientId, forKey: .clientId)
        try c.encode(replyTo, forKey: .replyTo); try c.encode(media, forKey: .media); try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt); try c.encode(editedAt, forKey: .editedAt); try c.encode(deletedAt, forKey: .deletedAt)
    }
    enum CodingKeys: String, CodingKey { case id, roomId, seq, author, text, clientId, replyTo, media, createdAt, updatedAt, editedAt, deletedAt }
}

struct RoomView: Encodable {
    let id: String
    let kind: String
    let name: String
    let topic: String?
    let inviteCode: String?
    let parcelId: String?
    let readOnly: Bool
    let role: String
    let lastSeq: Int64
    let readSeq: Int64
    let unreadCount: Int?
    let lastMessage: MessageView?
    let members: [MemberView]?
    let createdAt: String
    let updatedAt: String

    init(_ r: RoomRecord, unread: Int? = nil, last: MessageRecord? = nil, members: [MemberRecord]? = nil) {
        id = r.id.lowercased; kind = r.kind; name = r.name; topic = r.topic; inviteCode = r.inviteCode.map(InviteCode.display)
        parcelId = r.parcelId?.lowercased; readOnly = r.readOnly; role = r.role ?? "member"; lastSeq = r.messageSeq
        readSeq = r.readSeq; unreadCount = unread; lastMessage = last.map(MessageView.init)
        self.members = members?.map(MemberView.init)
        createdAt = Timestamp.format(r.createdAt); updatedAt = Timestamp.format(r.updatedAt)
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id); try c.encode(kind, forKey: .kind); try c.encode(name, forKey: .name)
        try c.encode(topic, forKey: .topic); try c.encode(inviteCode, forKey: .inviteCode); try c.encode(parcelId, forKey: .parcelId)
        try c.encode(readOnly, forKey: .readOnly); try c.encode(role, forKey: .role); try c.encode(lastSeq, forKey: .lastSeq)
        try c.encode(readSeq, forKey: .readSeq); try c.encodeIfPresent(unreadCount, forKey: .unreadCount)
        if unreadCount != nil { try c.encode(lastMessage, forKey: .lastMessage) }
        try c.encodeIfPresent(members, forKey: .members)
        try c.encode(createdAt, forKey: .createdAt); try c.encode(updatedAt, forKey: .updatedAt)
    }
    enum CodingKeys: String, CodingKey {
        case id, kind, name, topic, inviteCode, parcelId, readOnly, role, lastSeq, readSeq, unreadCount, lastMessage, members, createdAt, updatedAt
    }
}

struct TodoView: Encodable {
    let id: String
    let roomId: String
    let title: String
    let done: Bool
    let doneBy: PersonView?
    let doneAt: String?
    let assignee: PersonView?
    let dueAt: String?
    let position: Int?
    let fromMessageId: String?
    let createdBy: String
    let createdAt: String
    let updatedAt: String

    init(_ t: TodoRecord) {
        id = t.id.lowercased; roomId = t.roomId.lowercased; title = t.title; done = t.done; doneBy = t.doneBy.map(PersonView.init)
        doneAt = t.doneAt.map(Timestamp.format); assignee = t.assignee.map(PersonView.init); dueAt = t.dueAt.map(Timestamp.format)
        position = t.done ? nil : t.position; fromMessageId = t.fromMessageId?.lowercased; createdBy = t.createdBy.lowercased
        createdAt = Timestamp.format(t.createdAt); updatedAt = Timestamp.format(t.updatedAt)
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id); try c.encode(roomId, forKey: .roomId); try c.encode(title, forKey: .title)
        try c.encode(done, forKey: .done); try c.encode(doneBy, forKey: .doneBy); try c.encode(doneAt, forKey: .doneAt)
        try c.encode(assignee, forKey: .assignee); try c.encode(dueAt, forKey: .dueAt); try c.encode(position, forKey: .position)
        try c.encode(fromMessageId, forKey: .fromMessageId); try c.encode(createdBy, forKey: .createdBy)
        try c.encode(createdAt, forKey: .createdAt); try c.encode(updatedAt, forKey: .updatedAt)
    }
    enum CodingKeys: String, CodingKey {
        case id, roomId, title, done, doneBy, doneAt, assignee, dueAt, position, fromMessageId, createdBy, createdAt, updatedAt
    }
}

/// A member's arrival or departure, as streams show it.
struct MembershipView: Encodable {
    let roomId: String
    let user: PersonView
    let role: String?
    let reason: String?
    let at: String
}

// MARK: - Response schemas

enum Schemas {
    static let uuid = #"{"type":"string","format":"uuid"}"#
    static let time = #"{"type":"string","format":"date-time"}"#
    static let person = #"{"type":"object","required":["id","name","avatarMediaId"],"properties":{"id":"# + uuid + #","name":{"type":["string","null"]},"avatarMediaId":{"type":["string","null"],"format":"uuid"}}}"#
    static let message = #"{"type":"object","required":["id","roomId","seq","author","text","media","createdAt","updatedAt","editedAt","deletedAt"],"properties":{"id":"# + uuid + #","roomId":"# + uuid + #","seq":{"type":"integer","minimum":1},"author":"# + person + #","text":{"type":["string","null"],"maxLength":4000},"clientId":{"type":["string","null"]},"replyTo":{"type":["string","null"],"format":"uuid"},"media":{"type":"array","items":{"type":"object","required":["id","url"]}},"createdAt":"# + time + #","updatedAt":"# + time + #","editedAt":{"type":["string","null"],"format":"date-time"},"deletedAt":{"type":["string","null"],"format":"date-time"}}}"#
    static let room = #"{"type":"object","required":["id","kind","name","readOnly","role","lastSeq","readSeq","createdAt","updatedAt"],"properties":{"id":"# + uuid + #","kind":{"enum":["team","direct","parcel"]},"name":{"type":"string"},"topic":{"type":["string","null"]},"inviteCode":{"type":["string","null"]},"parcelId":{"type":["string","null"],"format":"uuid"},"readOnly":{"type":"boolean"},"role":{"enum":["owner","member"]},"lastSeq":{"type":"integer"},"readSeq":{"type":"integer"},"unreadCount":{"type":"integer"},"lastMessage":{"oneOf":[{"type":"null"},"# + message + #"]},"members":{"type":"array","items":{"type":"object","required":["user","role","joinedAt"],"properties":{"user":"# + person + #","role":{"enum":["owner","member"]},"joinedAt":"# + time + #"}}},"createdAt":"# + time + #","updatedAt":"# + time + #"}}"#
    static let todo = #"{"type":"object","required":["id","roomId","title","done","doneBy","doneAt","assignee","dueAt","position","createdBy","createdAt","updatedAt"],"properties":{"id":"# + uuid + #","roomId":"# + uuid + #","title":{"type":"string"},"done":{"type":"boolean"},"doneBy":{"oneOf":[{"type":"null"},"# + person + #"]},"doneAt":{"type":["string","null"],"format":"date-time"},"assignee":{"oneOf":[{"type":"null"},"# + person + #"]},"dueAt":{"type":["string","null"],"format":"date-time"},"position":{"type":["integer","null"]},"fromMessageId":{"type":["string","null"],"format":"uuid"},"createdBy":"# + uuid + #","createdAt":"# + time + #","updatedAt":"# + time + #"}}"#
    static func page(_ item: String) -> String {
        #"{"type":"object","required":["items","nextCursor"],"properties":{"items":{"type":"array","items":"# + item + #"},"nextCursor":{"type":["string","null"]}}}"#
    }
    static let media = #"{"type":"object","required":["id","url","contentType","size"]}"#
}
