import Events
import Features
import Foundation
import HTTP
import Models
import Postgres
import Web

/// The chat service's handlers: they take the request's context and decoded body, run the domain (`Rooms`, `Messages`,
/// `Todos`) in a transaction and map the result to its view. Anyone outside a room gets 404 for it and everything in
/// it; a member who may not act gets 403: the domain says which.
struct ChatHandlers: Sendable {
    let pool: Pool
    let outbox: Outbox
    let relay: OutboxRelay
    let idempotency: Idempotency
    let live: RoomFeed
    let storage = ChatStorage()
    let media: MediaStore
    /// A room's members as its answers show them.
    func members(_ c: Connection, of room: UUID) throws -> [MemberView] {
        try storage.members(c, of: room).map { MemberView($0, urls: media.urls) }
    }

    var log: RoomLog { RoomLog(storage: storage, outbox: outbox, urls: media.urls) }
    var rooms: Rooms { Rooms(storage: storage, log: log) }
    var messages: Messages { Messages(storage: storage, log: log, rooms: rooms, media: media) }
    var todos: Todos { Todos(storage: storage, log: log, rooms: rooms) }
    let invites = InviteJoins(schema: "chat")

    // MARK: Rooms

    func createRoom(_ context: Context<Caller>, _ body: CreateRoomBody, _ c: Connection) throws -> Response {
        let room = try rooms.createTeam(c, name: body.name, topic: body.topic.flatMap { $0.isEmpty ? nil : $0 }, by: context.caller.userId)
        return .json(RoomView(room, members: try members(c, of: room.id)), status: 201)
    }

    func listRooms(_ context: Context<Caller>) throws -> Response {
        let page = try Page(context.request)
        let parcel = try Validate.queryID(context.request, "parcelId")
        let after = try page.after.map { values -> (Int64, UUID) in
            guard values.count == 2, let at = Int64(values[0]), let id = UUID(uuidString: values[1]) else {
                throw HTTPError.validation("cursor is not valid.", field: "cursor")
            }
            return (at, id)
        }
        let list = try pool.withConnection {
            try storage.rooms($0, of: context.caller.userId, parcel: parcel, after: after, limit: page.limit + 1)
        }
        return .json(PageResponse(list, page, item: { RoomView($0.room, unread: $0.unread, last: $0.last.map { MessageView($0, media: media) }) },
                                      cursor: { [String($0.activityMicros), $0.room.id.lowercased] }))
    }

    func getRoom(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withConnection { c in
            let room = try rooms.member(c, id, context.caller.userId)
            return .json(RoomView(room, members: try members(c, of: id)))
        }
    }

    func updateRoom(_ context: Context<Caller>, _ body: UpdateRoomBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            let room = try rooms.update(c, id, by: context.caller.userId, name: body.name, topic: body.topic)
            return .json(RoomView(room, members: try members(c, of: id)))
        }
    }

    func join(_ context: Context<Caller>, _ body: JoinRoomBody) throws -> Response {
        try invites.join(pool, typed: body.inviteCode, user: context.caller.userId, unknown: ChatError.unknownInviteCode) { c, code in
            try rooms.join(c, code: code, user: context.caller.userId).map { .json(RoomView($0, members: try members(c, of: $0.id))) }
        }
    }

    func rotateInviteCode(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            let room = try rooms.rotateInviteCode(c, id, by: context.caller.userId)
            return .json(RoomView(room, members: try members(c, of: id)))
        }
    }

    func removeMember(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self), target = try context.parameters.require("userId", as: UUID.self)
        try pool.withTransaction { try rooms.remove($0, id, member: target, by: context.caller.userId) }
        return .noContent
    }

    func direct(_ context: Context<Caller>, _ body: DirectRoomBody) throws -> Response {
        try pool.withTransaction { c in
            let room = try rooms.direct(c, context.caller.userId, with: body.userId)
            return .json(RoomView(room, members: try members(c, of: room.id)))
        }
    }

    func markRead(_ context: Context<Caller>, _ body: ReadBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            _ = try rooms.member(c, id, context.caller.userId)
            try storage.markRead(c, room: id, user: context.caller.userId, seq: body.seq)
            return .json(RoomView(try rooms.member(c, id, context.caller.userId)))
        }
    }

    // MARK: Messages

    func postMessage(_ context: Context<Caller>, _ body: PostMessageBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        do {
            return try idempotency.run(context.request, caller: context.caller.userId.lowercased) { c in
                let (message, created) = try messages.post(c, room: id, by: context.caller.userId, text: body.text,
                                                           clientId: body.clientId, images: body.mediaIds ?? [], replyTo: body.replyTo)
                return .json(MessageView(message, media: media), status: created ? 201 : 200)
            }
        } catch let replay as Messages.Replayed {
            return .json(MessageView(replay.message, media: media), status: 200)
        }
    }

    func listMessages(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let limit = try Page(context.request).limit
        let before = try Self.sequence(context.request, "before"), after = try Self.sequence(context.request, "after")
        guard before == nil || after == nil else { throw HTTPError.validation("Give before or after, not both.", field: "after") }
        return try pool.withConnection { c in
            _ = try rooms.member(c, id, context.caller.userId)
            let page = try storage.messages(c, room: id, reader: context.caller.userId, before: before, after: after, limit: limit + 1)
            // One more than asked tells whether there is more in the direction read.
            let items = after != nil ? Array(page.prefix(limit)) : Array(page.suffix(limit))
            let more = page.count > limit
            let next = more ? (after != nil ? items.last.map { Cursor.encode(["after", String($0.seq)]) }
                                            : items.first.map { Cursor.encode(["before", String($0.seq)]) }) : nil
            return .json(PageResponse(items: items.map { MessageView($0, media: media) }, nextCursor: next))
        }
    }

    func editMessage(_ context: Context<Caller>, _ body: EditMessageBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let message = try pool.withTransaction { try messages.edit($0, id, by: context.caller.userId, text: body.text) }
        return .json(MessageView(message, media: media))
    }

    func deleteMessage(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        try pool.withTransaction { try messages.delete($0, id, by: context.caller.userId) }
        return .noContent
    }

    /// `POST /v1/messages/{id}/reports`: I report a message of my room to the moderators.
    func reportMessage(_ context: Context<Caller>, _ body: ReportBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            .json(ReportView(try messages.report(c, id, by: context.caller.userId, reason: body.reason, note: body.note)), status: 201)
        }
    }

    func search(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let page = try Page(context.request)
        let q = try Validate.searchText(context.request)
        let before = try page.after.map { values -> Int64 in
            guard values.count == 1, let seq = Int64(values[0]) else { throw HTTPError.validation("cursor is not valid.", field: "cursor") }
            return seq
        }
        return try pool.withConnection { c in
            _ = try rooms.member(c, id, context.caller.userId)
            let found = try storage.search(c, room: id, reader: context.caller.userId, query: q, before: before, limit: page.limit + 1)
            return .json(PageResponse(found, page, item: { MessageView($0, media: media) }, cursor: { [String($0.seq)] }))
        }
    }

    // MARK: Live

    /// `GET /v1/rooms/{id}/events`: Server-Sent Events of the room's changes, each with its sequence as the SSE id.
    /// With `Last-Event-ID` (or `?lastEventId=`), first everything after it from the database. An empty header is as
    /// none: it names no event (the HTML standard sends none then).
    func events(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self), request = context.request, caller = context.caller
        let given = request.nonEmptyHeader("last-event-id") ?? request.query["lastEventId"]
        let lastEventId = try given.map { text -> Int64 in
            guard let seq = Int64(text.trimmingCharacters(in: .whitespaces)), seq >= 0 else {
                throw HTTPError.validation("Last-Event-ID must be a sequence this stream sent.", field: "Last-Event-ID")
            }
            return seq
        }
        let room = try pool.withConnection { try rooms.member($0, id, caller.userId) }
        let stream = EventStream()
        try live.stream(room: id, for: caller.userId, after: lastEventId ?? room.changeSeq, to: stream)
        return .eventStream(stream)
    }

    /// `POST /v1/rooms/{id}/typing`: tells the room's streams the caller is typing (not stored; at most once a second).
    func typing(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        _ = try pool.withConnection { try rooms.writable($0, id, context.caller.userId) }
        if live.mayType(context.caller.userId, in: id) {
            relay.publishEphemeral(ChatTyping(roomId: id, userId: context.caller.userId, at: Date()),
                                   subject: id.lowercased, source: "/chat", at: Timestamp.format(Date()))
        }
        return .noContent
    }

    // MARK: Todos

    func listTodos(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withConnection { c in
            _ = try rooms.member(c, id, context.caller.userId)
            return .json(PageResponse(items: try storage.todos(c, room: id).map { TodoView($0, urls: media.urls) }, nextCursor: nil))
        }
    }

    func createTodo(_ context: Context<Caller>, _ body: CreateTodoBody, _ c: Connection) throws -> Response {
        let todo = try todos.add(c, room: try context.parameters.require("id", as: UUID.self), by: context.caller.userId,
                                 title: body.title, assignee: body.assigneeId, dueAt: body.dueAt.flatMap(Timestamp.parse),
                                 from: body.fromMessageId)
        return .json(TodoView(todo, urls: media.urls), status: 201)
    }

    func updateTodo(_ context: Context<Caller>, _ body: UpdateTodoBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let dueAt: Patch<Date> = switch body.dueAt {
        case .absent: .absent
        case .null: .null
        case .value(let text): Timestamp.parse(text).map { .value($0) } ?? .absent
        }
        return .json(TodoView(try pool.withTransaction {
            try todos.update($0, id, by: context.caller.userId, title: body.title, done: body.done, assignee: body.assigneeId, dueAt: dueAt,
                             position: body.position)
        }, urls: media.urls))
    }

    func deleteTodo(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        try pool.withTransaction { try todos.delete($0, id, by: context.caller.userId) }
        return .noContent
    }

    // MARK: Media

    func uploadMedia(_ context: Context<Caller>) throws -> Response {
        try media.upload(context.request, owner: context.caller.userId, idempotency: idempotency)
    }

    func getMedia(_ request: Request, _ caller: Caller?) throws -> Response {
        let id = try Validate.pathID(request)
        return try pool.withConnection { c in
            try media.serve(request, id, caller: caller, on: c) { try storage.visibleMedia(c, id, reader: $0) }
        }
    }

    // MARK: Query parameters

    /// A message sequence given as `?name=`, or in the page's cursor.
    static func sequence(_ request: Request, _ name: String) throws -> Int64? {
        if let text = request.query[name] {
            guard let seq = Int64(text), seq >= 0 else { throw HTTPError.validation("\(name) must be a message sequence.", field: name) }
            return seq
        }
        guard let values = try Page(request).after else { return nil }
        guard values.count == 2, ["before", "after"].contains(values[0]), let seq = Int64(values[1]) else {
            throw HTTPError.validation("cursor is not valid.", field: "cursor")
        }
        return values[0] == name ? seq : nil
    }
}

extension ChatHandlers {
    /// `GET /v1/internal/rooms/{id}/members/{userId}/unread` (services): for notify, which tells members who are away
    /// that someone wrote, and nobody who has read it already.
    func unread(_ context: Context<Void>) throws -> Response {
        let room = try context.parameters.require("id", as: UUID.self), user = try context.parameters.require("userId", as: UUID.self)
        guard let found = try pool.withConnection({ try storage.unread($0, room: room, user: user) }) else { throw ChatError.notFound }
        return .json(UnreadView(title: found.title ?? "", unread: found.unread))
    }
}
