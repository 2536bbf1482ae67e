import Features
import Foundation
import Models
import Postgres
import Web

/// The message rules: members post (with the author's own images, replying within the room), a retry with the same
/// `clientId` gets the first message back, only the author edits or deletes, and a deleted message keeps its place
/// in the sequence with no text (taken out of the stored changes too).
struct Messages: Sendable {
    let storage: ChatStorage
    let log: RoomLog
    let rooms: Rooms
    let media: MediaStore

    /// The message posted, and whether it is new (false: the retry of one posted before with that `clientId`).
    func post(_ c: Connection, room id: UUID, by author: UUID, text: String, clientId: String?, images: [UUID],
              replyTo: UUID?) throws -> (MessageRecord, created: Bool) {
        _ = try rooms.writable(c, id, author)
        if let clientId, let first = try storage.message(c, room: id, author: author, clientId: clientId) { return (first, false) }
        guard Set(images).count == images.count else { throw ChatError.invalid("mediaIds repeats an image.", field: "mediaIds") }
        try media.requireOwned(images, by: author, field: "mediaIds", on: c)
        if let replyTo, try !storage.isMessage(c, replyTo, in: id) {
            throw ChatError.invalid("replyTo must be a message of this room.", field: "replyTo")
        }
        let seq = try storage.nextSeq(c, id, message: true)
        // The room is locked now: a retry that raced the first attempt finds it here, and the sequence taken is undone.
        if let clientId, let first = try storage.message(c, room: id, author: author, clientId: clientId) {
            throw Replayed(message: first)
        }
        let message = try storage.insertMessage(c, id: UUID.v7(), room: id, seq: seq.message, author: author, text: text,
                                                clientId: clientId, replyTo: replyTo, media: images)
        try log.record(c, room: id, seq: seq.change, event: "message_created", view: MessageView(message, media: media), message: message.id)
        let mentioned = try storage.members(c, room: id, named: Self.mentions(in: text)).filter { $0 != author }
        try log.outbox.add(ChatMessageCreated(roomId: id, messageId: message.id, messageSeq: message.seq,
                                              authorId: author, mediaCount: images.count, replyTo: replyTo,
                                              seq: seq.change, createdAt: message.createdAt,
                                              mentionedIds: mentioned.isEmpty ? nil : mentioned),
                           subject: id.lowercased, on: c)
        return (message, true)
    }

    /// The usernames a text names as `@username` (letters, digits, `.`, `_`, `-`), lower-cased, at most 20.
    static func mentions(in text: String) -> [String] {
        var names: [String] = []
        for match in text.matches(of: /(?:^|[^\w@])@([A-Za-z0-9._-]{1,64})/) where names.count < 20 {
            let name = String(match.1).lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "."))
            if !name.isEmpty, !names.contains(name) { names.append(name) }
        }
        return names
    }

    /// Thrown to undo a transaction that found its `clientId` taken once it held the room: the caller answers with
    /// `message`, the first one.
    struct Replayed: Error {
        let message: MessageRecord
    }

    /// The message if `reader` is in its room; `notFound` otherwise.
    func visible(_ c: Connection, _ id: UUID, to reader: UUID, lock: Bool = false) throws -> MessageRecord {
        guard let message = try storage.message(c, id, lock: lock), try storage.isMember(c, room: message.roomId, user: reader) else {
            throw ChatError.notFound
        }
        return message
    }

    /// New text for a message, by its author.
    func edit(_ c: Connection, _ id: UUID, by user: UUID, text: String) throws -> MessageRecord {
        var message = try authored(c, id, by: user)
        guard message.deletedAt == nil else { throw ChatError.conflict("A deleted message cannot be edited.") }
        let seq = try storage.nextSeq(c, message.roomId).change
        message.text = text
        message.editedAt = Date()
        try storage.saveMessage(c, message)
        try log.record(c, room: message.roomId, seq: seq, event: "message_edited", view: MessageView(message, media: media), message: message.id)
        try log.outbox.add(ChatMessageEdited(roomId: message.roomId, messageId: id, messageSeq: message.seq, seq: seq,
                                             editedAt: message.editedAt!), subject: message.roomId.lowercased, on: c)
        return message
    }

    /// Deletes a message, by its author: it keeps its place with no text or images.
    func delete(_ c: Connection, _ id: UUID, by user: UUID) throws {
        try remove(c, try authored(c, id, by: user), report: nil)
    }

    /// `reporter` reports a message of a room they are in.
    func report(_ c: Connection, _ id: UUID, by reporter: UUID, reason: String, note: String?) throws -> ReportRecord {
        let message = try visible(c, id, to: reporter)
        guard message.deletedAt == nil else { throw ChatError.notFound }
        return try Reports(schema: "chat").file(c, kind: "message", target: id, author: message.author.id, reporter: reporter,
                                                reason: reason, note: note)
    }

    /// A reported message an operator takes down: it goes as its author's deletion would, for every member and every
    /// live stream, and `chat.message_deleted` names the report.
    func takeDown(_ c: Connection, _ report: ReportRecord) throws {
        guard let message = try storage.message(c, report.targetId, lock: true) else { return }
        try remove(c, message, report: report.id)
    }

    private func remove(_ c: Connection, _ found: MessageRecord, report: UUID?) throws {
        var message = found
        let id = message.id
        guard message.deletedAt == nil else { return }
        let seq = try storage.nextSeq(c, message.roomId).change
        message.text = nil
        message.mediaIds = []
        message.deletedAt = Date()
        try storage.saveMessage(c, message)
        try storage.scrubChanges(c, message: id)
        try log.record(c, room: message.roomId, seq: seq, event: "message_deleted", view: MessageView(message, media: media), message: message.id)
        try log.outbox.add(ChatMessageDeleted(roomId: message.roomId, messageId: id, messageSeq: message.seq,
                                              seq: seq, deletedAt: message.deletedAt!, reportId: report),
                           subject: message.roomId.lowercased, on: c)
    }

    private func authored(_ c: Connection, _ id: UUID, by user: UUID) throws -> MessageRecord {
        let message = try visible(c, id, to: user, lock: true)
        _ = try rooms.writable(c, message.roomId, user)
        guard message.author.id == user else { throw ChatError.forbidden("Only its author can change a message.") }
        return message
    }
}

/// The todo rules: members add items, check them off (who and when is kept), assign them to members, give them due
/// times and move them among the open items; every change is a room change, so two members reordering at once are
/// serialized by the room and never lose an item.
struct Todos: Sendable {
    let storage: ChatStorage
    let log: RoomLog
    let rooms: Rooms

    func add(_ c: Connection, room id: UUID, by user: UUID, title: String, assignee: UUID?, dueAt: Date?, from message: UUID?) throws -> TodoRecord {
        _ = try rooms.writable(c, id, user)
        let seq = try storage.nextSeq(c, id).change
        try check(c, room: id, assignee: assignee, message: message)
        let todo = try storage.insertTodo(c, id: UUID.v7(), room: id, title: title, assignee: assignee, dueAt: dueAt,
                                          fromMessage: message, createdBy: user)
        try log.record(c, room: id, seq: seq, event: "todo_created", view: TodoView(todo, urls: log.urls))
        try log.outbox.add(TodoCreated(roomId: id, todoId: todo.id, createdBy: user,
                                       assigneeId: assignee, seq: seq, createdAt: todo.createdAt),
                           subject: id.lowercased, on: c)
        return todo
    }

    /// The item if `reader` is in its room; `notFound` otherwise.
    func visible(_ c: Connection, _ id: UUID, to reader: UUID) throws -> TodoRecord {
        guard let todo = try storage.todo(c, id), try storage.isMember(c, room: todo.roomId, user: reader) else { throw ChatError.notFound }
        return todo
    }

    /// Changes what is given of an item. `position` is its place among the open items, from 1.
    func update(_ c: Connection, _ id: UUID, by user: UUID, title: String?, done: Bool?, assignee: Patch<UUID>, dueAt: Patch<Date>,
                position: Int?) throws -> TodoRecord {
        let found = try visible(c, id, to: user)
        _ = try rooms.writable(c, found.roomId, user)
        let seq = try storage.nextSeq(c, found.roomId).change  // locks the room: changes to its list are one at a time
        guard var todo = try storage.todo(c, id, lock: true) else { throw ChatError.notFound }
        if let title { todo.title = title }
        if assignee.isPresent {
            try check(c, room: todo.roomId, assignee: assignee.value, message: nil)
            todo.assignee = assignee.value.map { PersonRecord(id: $0, name: nil, avatarMediaId: nil) }
        }
        if dueAt.isPresent { todo.dueAt = dueAt.value }
        if let done, done != todo.done {
            todo.done = done
            todo.doneBy = done ? PersonRecord(id: user, name: nil, avatarMediaId: nil) : nil
            todo.doneAt = done ? Date() : nil
        }
        try storage.saveTodo(c, todo)
        if !todo.done && (position != nil || done == false) {
            var open = try storage.openTodos(c, room: todo.roomId).filter { $0 != id }
            open.insert(id, at: min(max((position ?? open.count + 1) - 1, 0), open.count))
            try storage.order(c, room: todo.roomId, open)
        }
        let updated = try storage.todo(c, id)!
        try log.record(c, room: todo.roomId, seq: seq, event: "todo_updated", view: TodoView(updated, urls: log.urls))
        try log.outbox.add(TodoUpdated(roomId: todo.roomId, todoId: id, updatedBy: user, done: updated.done,
                                       doneBy: updated.doneBy?.id, assigneeId: updated.assignee?.id, seq: seq,
                                       updatedAt: updated.updatedAt), subject: todo.roomId.lowercased, on: c)
        return updated
    }

    func delete(_ c: Connection, _ id: UUID, by user: UUID) throws {
        let todo = try visible(c, id, to: user)
        _ = try rooms.writable(c, todo.roomId, user)
        let seq = try storage.nextSeq(c, todo.roomId).change
        try storage.deleteTodo(c, id)
        try storage.order(c, room: todo.roomId, try storage.openTodos(c, room: todo.roomId))
        try log.record(c, room: todo.roomId, seq: seq, event: "todo_deleted", view: TodoDeletedView(id: id, roomId: todo.roomId))
        try log.outbox.add(TodoDeleted(roomId: todo.roomId, todoId: id, deletedBy: user, seq: seq,
                                       deletedAt: Date()), subject: todo.roomId.lowercased, on: c)
    }

    /// An assignee must be a member, and the message an item comes from a message of the room.
    private func check(_ c: Connection, room: UUID, assignee: UUID?, message: UUID?) throws {
        if let assignee, try !storage.isMember(c, room: room, user: assignee) {
            throw ChatError.invalid("assigneeId must be a member of the room.", field: "assigneeId")
        }
        if let message, try !storage.isMessage(c, message, in: room) {
            throw ChatError.invalid("fromMessageId must be a message of this room.", field: "fromMessageId")
        }
    }
}
