import Foundation

// Every stored change to a room carries the room's change sequence `seq` (gap-free per room, in commit order): a
// live reader that sees seq n+2 after n knows it missed one and reads it from the API. Key: the room id. Message
// and todo texts stay out of the events, as story texts do: consumers that need them read them through the API.

extension EventSchema.Field {
    /// A room's change sequence, or a message's place in it: from 1.
    fileprivate static let seq = EventSchema.Field(minimum: 1)
}

/// What a room is: a team's, a pair's, or a parcel's conversation.
public enum RoomKind: String, Codable, CaseIterable, Sendable { case team, direct, parcel }

/// A member's place in a room: its owner manages it.
public enum RoomRole: String, Codable, CaseIterable, Sendable { case owner, member }

/// `chat.room_created`: a team room, the direct room of a pair, or the conversation of a parcel exists.
public struct ChatRoomCreated: EventPayload, Equatable {
    public static let type = "chat.room_created"
    public static let schema = EventSchema(["createdBy": .nullable, "parcelId": .nullable, "seq": .seq])
    public var roomId: UUID
    public var kind: RoomKind
    /// Who created it; nil for a parcel's conversation, which chat opens itself.
    public var createdBy: UUID?
    /// The parcel of a parcel conversation.
    public var parcelId: UUID?
    public var seq: Int64
    public var createdAt: Date

    public init(roomId: UUID, kind: RoomKind, createdBy: UUID?, parcelId: UUID?, seq: Int64, createdAt: Date) {
        self.roomId = roomId; self.kind = kind; self.createdBy = createdBy; self.parcelId = parcelId; self.seq = seq
        self.createdAt = createdAt
    }
}

/// `chat.member_joined`: someone is in a room now (its creator, by invite code, or as a party to a parcel).
public struct ChatMemberJoined: EventPayload, Equatable {
    public static let type = "chat.member_joined"
    public static let schema = EventSchema(["seq": .seq])
    public var roomId: UUID
    public var userId: UUID
    public var role: RoomRole
    public var seq: Int64
    public var joinedAt: Date

    public init(roomId: UUID, userId: UUID, role: RoomRole, seq: Int64, joinedAt: Date) {
        self.roomId = roomId; self.userId = userId; self.role = role; self.seq = seq; self.joinedAt = joinedAt
    }
}

/// `chat.member_left`: someone left a room or was removed; their open streams of it end.
public struct ChatMemberLeft: EventPayload, Equatable {
    public static let type = "chat.member_left"
    public static let schema = EventSchema([
        "seq": .seq,
        "removedBy": .described("Who removed them: themselves when they left; the nil UUID when the service did (a courier taken off a parcel before pickup)"),
    ])
    public var roomId: UUID
    public var userId: UUID
    public var reason: LeaveReason
    public var removedBy: UUID
    public var seq: Int64
    public var leftAt: Date

    public init(roomId: UUID, userId: UUID, reason: LeaveReason, removedBy: UUID, seq: Int64, leftAt: Date) {
        self.roomId = roomId; self.userId = userId; self.reason = reason; self.removedBy = removedBy; self.seq = seq
        self.leftAt = leftAt
    }
}

/// `chat.message_created`: a message was posted; `messageSeq` is its place in the room (gap-free per room).
public struct ChatMessageCreated: EventPayload, Equatable {
    public static let type = "chat.message_created"
    public static let schema = EventSchema([
        "messageSeq": .seq, "mediaCount": .init(minimum: 0, maximum: 10), "replyTo": .nullable, "seq": .seq,
        "mentionedIds": .init(maxItems: 20, description: "The room's members the text names as @username (absent: none)"),
    ])
    public var roomId: UUID
    public var messageId: UUID
    public var messageSeq: Int64
    public var authorId: UUID
    public var mediaCount: Int
    public var replyTo: UUID?
    public var seq: Int64
    public var createdAt: Date
    /// The room's members the text names as `@username` (absent: none); the text itself stays out of the event.
    public var mentionedIds: [UUID]?

    public init(roomId: UUID, messageId: UUID, messageSeq: Int64, authorId: UUID, mediaCount: Int, replyTo: UUID?,
                seq: Int64, createdAt: Date, mentionedIds: [UUID]? = nil) {
        self.roomId = roomId; self.messageId = messageId; self.messageSeq = messageSeq; self.authorId = authorId
        self.mediaCount = mediaCount; self.replyTo = replyTo; self.seq = seq; self.createdAt = createdAt; self.mentionedIds = mentionedIds
    }
}

/// `chat.message_edited`: a message's author changed its text.
public struct ChatMessageEdited: EventPayload, Equatable {
    public static let type = "chat.message_edited"
    public static let schema = EventSchema(["messageSeq": .seq, "seq": .seq])
    public var roomId: UUID
    public var messageId: UUID
    public var messageSeq: Int64
    public var seq: Int64
    public var editedAt: Date

    public init(roomId: UUID, messageId: UUID, messageSeq: Int64, seq: Int64, editedAt: Date) {
        self.roomId = roomId; self.messageId = messageId; self.messageSeq = messageSeq; self.seq = seq; self.editedAt = editedAt
    }
}

/// `chat.message_deleted`: a message's author deleted it; it keeps its place with no text.
public struct ChatMessageDeleted: EventPayload, Equatable {
    public static let type = "chat.message_deleted"
    public static let schema = EventSchema([
        "messageSeq": .seq, "seq": .seq,
        "reportId": .described("Present when an operator took the message down after this report, rather than its author deleting it"),
    ])
    public var roomId: UUID
    public var messageId: UUID
    public var messageSeq: Int64
    public var seq: Int64
    public var deletedAt: Date
    public var reportId: UUID?

    public init(roomId: UUID, messageId: UUID, messageSeq: Int64, seq: Int64, deletedAt: Date, reportId: UUID? = nil) {
        self.roomId = roomId; self.messageId = messageId; self.messageSeq = messageSeq; self.seq = seq; self.deletedAt = deletedAt
        self.reportId = reportId
    }
}

/// `todo.created`: an item was added to a room's todo list.
public struct TodoCreated: EventPayload, Equatable {
    public static let type = "todo.created"
    public static let schema = EventSchema(["assigneeId": .nullable, "seq": .seq])
    public var roomId: UUID
    public var todoId: UUID
    public var createdBy: UUID
    public var assigneeId: UUID?
    public var seq: Int64
    public var createdAt: Date

    public init(roomId: UUID, todoId: UUID, createdBy: UUID, assigneeId: UUID?, seq: Int64, createdAt: Date) {
        self.roomId = roomId; self.todoId = todoId; self.createdBy = createdBy; self.assigneeId = assigneeId; self.seq = seq
        self.createdAt = createdAt
    }
}

/// `todo.updated`: an item was changed: renamed, checked off or on, assigned, given a due time or moved.
public struct TodoUpdated: EventPayload, Equatable {
    public static let type = "todo.updated"
    public static let schema = EventSchema(["doneBy": .nullable, "assigneeId": .nullable, "seq": .seq])
    public var roomId: UUID
    public var todoId: UUID
    public var updatedBy: UUID
    public var done: Bool
    /// Who checked it off, while it is done.
    public var doneBy: UUID?
    public var assigneeId: UUID?
    public var seq: Int64
    public var updatedAt: Date

    public init(roomId: UUID, todoId: UUID, updatedBy: UUID, done: Bool, doneBy: UUID?, assigneeId: UUID?, seq: Int64,
                updatedAt: Date) {
        self.roomId = roomId; self.todoId = todoId; self.updatedBy = updatedBy; self.done = done; self.doneBy = doneBy
        self.assigneeId = assigneeId; self.seq = seq; self.updatedAt = updatedAt
    }
}

/// `todo.deleted`: an item was removed from a room's list.
public struct TodoDeleted: EventPayload, Equatable {
    public static let type = "todo.deleted"
    public static let schema = EventSchema(["seq": .seq])
    public var roomId: UUID
    public var todoId: UUID
    public var deletedBy: UUID
    public var seq: Int64
    public var deletedAt: Date

    public init(roomId: UUID, todoId: UUID, deletedBy: UUID, seq: Int64, deletedAt: Date) {
        self.roomId = roomId; self.todoId = todoId; self.deletedBy = deletedBy; self.seq = seq; self.deletedAt = deletedAt
    }
}

/// `chat.typing`: someone is typing in a room. Ephemeral: published without the outbox, not stored, may be lost.
public struct ChatTyping: EventPayload, Equatable {
    public static let type = "chat.typing"
    public var roomId: UUID
    public var userId: UUID
    public var at: Date

    public init(roomId: UUID, userId: UUID, at: Date) { self.roomId = roomId; self.userId = userId; self.at = at }
}

/// `chat.room_updated`: a room's name or topic changed, or a parcel's conversation closed (read-only).
public struct ChatRoomUpdated: EventPayload, Equatable {
    public static let type = "chat.room_updated"
    public static let schema = EventSchema(["updatedBy": .nullable, "seq": .seq])
    public var roomId: UUID
    public var updatedBy: UUID?
    public var readOnly: Bool
    public var seq: Int64
    public var updatedAt: Date

    public init(roomId: UUID, updatedBy: UUID?, readOnly: Bool, seq: Int64, updatedAt: Date) {
        self.roomId = roomId; self.updatedBy = updatedBy; self.readOnly = readOnly; self.seq = seq; self.updatedAt = updatedAt
    }
}
