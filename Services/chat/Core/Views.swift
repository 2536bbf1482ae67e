import Features
import Foundation
import Models
import Web

// What the routes answer: each view described once (`View`).

/// Someone as the apps show them: a name, and a face by its signed URL (in a stream's event as recorded).
struct PersonView: View {
    let id: UUID
    let name: String?
    let avatarMediaId: UUID?
    let avatarUrls: ImageSizes?
    var avatarUrl: String? { avatarUrls?.full }
    init(_ p: PersonRecord, urls: MediaURLs) {
        id = p.id; name = p.name; avatarMediaId = p.avatarMediaId; avatarUrls = urls.avatarSizes(p.avatarMediaId, owner: p.id, picture: p.pictureUrl)
    }

    static let fields: [ViewField<Self>] = [
        .field("id", \.id), .nullable("name", \.name), .nullable("avatarMediaId", \.avatarMediaId), .nullable("avatarUrl", \.avatarUrl),
        .nullable("avatarUrls", \.avatarUrls),
    ]
}

struct MemberView: View {
    let user: PersonView
    let role: String
    let joinedAt: Date
    init(_ m: MemberRecord, urls: MediaURLs) { user = PersonView(m.person, urls: urls); role = m.role.rawValue; joinedAt = m.joinedAt }

    static let fields: [ViewField<Self>] = [.field("user", \.user), .field("role", \.role, Shapes.role), .field("joinedAt", \.joinedAt)]
}

struct MessageView: View {
    let message: MessageRecord
    /// Each image with its signed URLs by size, its size and placeholder (in a stream's event as recorded: a message
    /// read again has fresh URLs).
    let media: [ImageView]
    let author: PersonView
    init(_ m: MessageRecord, media: MediaStore) {
        message = m; self.media = m.mediaIds.map { media.view($0, meta: m.images) }; author = PersonView(m.author, urls: media.urls)
    }

    var updatedAt: Date { [message.createdAt, message.editedAt, message.deletedAt].compactMap { $0 }.max()! }

    static let fields: [ViewField<Self>] = [
        .field("id", \.message.id), .field("roomId", \.message.roomId), .field("seq", \.message.seq, .integer(1...Int.max)),
        .field("author", \.author), .nullable("text", \.message.text, Shapes.messageText),
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

    init(_ r: RoomRecord, unread: Int? = nil, last: MessageView? = nil, members: [MemberView]? = nil) {
        room = r; unreadCount = unread; lastMessage = unread == nil ? nil : .some(last); self.members = members
    }

    var inviteCode: String? { room.inviteCode.map(InviteCode.display) }
    var role: String { (room.role ?? .member).rawValue }

    static let fields: [ViewField<Self>] = [
        .field("id", \.room.id), .field("kind", \.room.kind.rawValue, .oneOf(RoomKind.allCases.map(\.rawValue))), .field("name", \.room.name),
        .nullable("topic", \.room.topic), .nullable("inviteCode", \.inviteCode), .nullable("parcelId", \.room.parcelId),
        .field("readOnly", \.room.readOnly), .field("role", \.role, Shapes.role), .field("lastSeq", \.room.messageSeq),
        .field("readSeq", \.room.readSeq), .omitted("unreadCount", \.unreadCount), .omittedOrNull("lastMessage", \.lastMessage),
        .omitted("members", \.members), .field("createdAt", \.room.createdAt), .field("updatedAt", \.room.updatedAt),
    ]
}

struct TodoView: View {
    let todo: TodoRecord
    let doneBy: PersonView?
    let assignee: PersonView?
    init(_ t: TodoRecord, urls: MediaURLs) {
        todo = t; doneBy = t.doneBy.map { PersonView($0, urls: urls) }; assignee = t.assignee.map { PersonView($0, urls: urls) }
    }

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
    static let role = Schema.oneOf(RoomRole.allCases.map(\.rawValue))
    /// A message's text: up to 4,000 characters, lines allowed.
    static let messageText = Schema.text(max: 4000, multiline: true)
}

/// A room as notify tells a member of it: its title, and how many messages they have not read.
struct UnreadView: View {
    let title: String
    let unread: Int
    static let fields: [ViewField<Self>] = [.field("title", \.title), .field("unread", \.unread, .integer(0...Int.max))]
}
