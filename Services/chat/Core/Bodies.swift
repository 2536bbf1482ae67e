import Foundation
import Models
import Web

// What the routes take: each request body described once (`RequestBody`).

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
        "text": .required(Shapes.messageText),
        "clientId": .optional(.string(min: 1, max: 64, pattern: "^[!-~]+$", rule: "clientId must be 1 to 64 visible ASCII characters.")),
        "mediaIds": .optional(.array(.uuid, count: 0...10)), "replyTo": .optional(.uuid),
    ])
    let text: String
    let clientId: String?
    let mediaIds: [UUID]?
    let replyTo: UUID?
}

struct EditMessageBody: RequestBody {
    static let schema = Schema.object(["text": .required(Shapes.messageText)])
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
