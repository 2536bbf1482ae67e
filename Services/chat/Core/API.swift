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
struct PersonView: View {
    let id: UUID
    let name: String?
    let avatarMediaId: UUID?
    init(_ p: PersonRecord) { id = p.id; name = p.name; avatarMediaId = p.avatarMediaId }

    static let fields: [ViewField<Self>] = [.field("id", \.id), .nullable("name", \.name), .nullable("avatarMediaId", \.avatarMediaId)]
}

struct MemberView: View {
    let user: PersonView
    let role: String
    let joinedAt: Date
    init(_ m: MemberRecord) { user = PersonView(m.person); role = m.role; joinedAt = m.joinedAt }

    static let fields: [ViewField<Self>] = [.field("user", \.user), .field("role", \.role, Shapes.role), .field("joinedAt", \.joinedAt)]
}

struct MediaRefView: View {
    let id: UUID
    var url: String { "/v1/chat/media/\(id.lowercased)" }
    init(_ id: UUID) { self.id = id }

    static let fields: [ViewField<Self>] = [.field("id", \.id), .field("url", \.url)]
}

struct MessageView: View {
    let message: MessageRecord
    init(_ m: MessageRecord) { message = m }

    var author: PersonView { PersonView(message.author) }
    var media: [MediaRefView] { message.mediaIds.map(MediaRefView.init) }
    var updatedAt: Date { [message.createdAt, message.editedAt, message.deletedAt].compactMap { $0 }.max()! }

    static let fields: [ViewField<Self>] = [
        .field("id", \.message.id), .field("roomId", \.message.roomId), .field("seq", \.message.seq, .integer(1...Int.max)),
        .field("author", \.author), .nullable("text", \.message.text, .text(max: 4000, multiline: true)),
        .nullable("clientId", \.message.clientId), .nullable("replyTo", \.message.replyTo), .field("media", \.media),
        .field("createdAt", \.message.createdAt), .field("updatedAt", \.updatedAt), .nullable("editedAt", \.message.editedAt),
        .nullable("deletedAt", \.message.deletedAt),
    ]
}

struct RoomView: View {
    let room: RoomRecord
    /// For a list of rooms: the unread count and the last message (null when there is none).
    let unreadCount: Int?
    let lastMessage: MessageView??
    let members: [MemberView]?

    init(_ r: RoomRecord, unread: Int? = nil, last: MessageRecord? = nil, members: [MemberRecord]? = nil) {
        room = r; unreadCount = unread; lastMessage = unread == nil ? nil : .some(last.map(MessageView.init))
        self.members = members?.map(MemberView.init)
    }

    var inviteCode: String? { room.inviteCode.map(InviteCode.display) }
    var role: String { room.role ?? "member" }

    static let fields: [ViewField<Self>] = [
        .field("id", \.room.id), .field("kind", \.room.kind, .oneOf(["team", "direct", "parcel"])), .field("name", \.room.name),
        .nullable("topic", \.room.topic), .nullable("inviteCode", \.inviteCode), .nullable("parcelId", \.room.parcelId),
        .field("readOnly", \.room.readOnly), .field("role", \.role, Shapes.role), .field("lastSeq", \.room.messageSeq),
        .field("readSeq", \.room.readSeq), .omitted("unreadCount", \.unreadCount), .omittedOrNull("lastMessage", \.lastMessage),
        .omitted("members", \.members), .field("createdAt", \.room.createdAt), .field("updatedAt", \.room.updatedAt),
    ]
}

struct TodoView: View {
    let todo: TodoRecord
    init(_ t: TodoRecord) { todo = t }

    var doneBy: PersonView? { todo.doneBy.map(PersonView.init) }
    var assignee: PersonView? { todo.assignee.map(PersonView.init) }
    /// Done items have no place in the order.
    var position: Int? { todo.done ? nil : todo.position }

    static let fields: [ViewField<Self>] = [
        .field("id", \.todo.id), .field("roomId", \.todo.roomId), .field("title", \.todo.title), .field("done", \.todo.done),
        .nullable("doneBy", \.doneBy), .nullable("doneAt", \.todo.doneAt), .nullable("assignee", \.assignee),
        .nullable("dueAt", \.todo.dueAt), .nullable("position", \.position), .nullable("fromMessageId", \.todo.fromMessageId),
        .field("createdBy", \.todo.createdBy), .field("createdAt", \.todo.createdAt), .field("updatedAt", \.todo.updatedAt),
    ]
}

/// A member's arrival or departure, as streams show it.
struct MembershipView: View {
    let roomId: UUID
    let user: PersonView
    let role: String?
    let reason: String?
    let at: Date

    static let fields: [ViewField<Self>] = [
        .field("roomId", \.roomId), .field("user", \.user), .omitted("role", \.role, Shapes.role), .omitted("reason", \.reason),
        .field("at", \.at),
    ]
}

/// A todo item gone, as streams show it.
struct TodoDeletedView: View {
    let id: UUID
    let roomId: UUID

    static let fields: [ViewField<Self>] = [.field("id", \.id), .field("roomId", \.roomId)]
}

enum Shapes {
    static let role = Schema.oneOf(["owner", "member"])
}
