import Events
import Foundation
import HTTP
import Models
import Postgres
import ServiceKit
import Synchronization

/// Live rooms: every instance reads chat's topics from their ends (a kit `LiveFeed`, keyed by room id) and hands each
/// change to the streams watching its room here, so a message posted on one instance reaches streams held by
/// another. Events carry no text: the change's JSON is read from the database once per event per instance, and only
/// when someone here watches the room.
final class RoomFeed: Sendable {
    /// Chat's topics, with the SSE event name of each.
    static let events: [String: String] = [
        ChatRoomCreated.type: "room_created", ChatRoomUpdated.type: "room_updated", ChatMemberJoined.type: "member_joined",
        ChatMemberLeft.type: "member_left", ChatMessageCreated.type: "message_created", ChatMessageEdited.type: "message_edited",
        ChatMessageDeleted.type: "message_deleted", TodoCreated.type: "todo_created", TodoUpdated.type: "todo_updated",
        TodoDeleted.type: "todo_deleted", ChatTyping.type: "typing",
    ]

    let feed: LiveFeed
    private let pool: Pool
    private let storage: ChatStorage
    private let typing = Mutex<[String: Date]>([:])

    init(_ app: ServiceApp, storage: ChatStorage) {
        let pool = app.pool
        self.pool = pool
        self.storage = storage
        feed = LiveFeed(name: "chat-rooms", topics: Array(Self.events.keys).sorted(), start: .end, kafka: app.kafka,
                        topicsReady: app.topicsReady, logger: app.logger) { event in
            struct Ref: Decodable { let roomId: String; let seq: Int64? }
            guard let name = Self.events[event.type], let ref = try? event.decode(Ref.self), let room = UUID(uuidString: ref.roomId) else {
                return nil
            }
            guard let seq = ref.seq else { return .init(keys: [ref.roomId], event: name, id: "") }  // typing: not stored
            return .init(keys: [ref.roomId], event: name, id: String(seq)) {
                try? pool.withConnection { try storage.changes($0, room: room, after: seq - 1, through: seq).first?.body }
            }
        }
    }

    /// Streams room `room` to `stream` for `user`: first every change after `after` from the database, then the
    /// live ones, each once and in order (a change the feed skipped is read from the database before the next);
    /// the stream ends when `user` leaves the room or is removed.
    func stream(room: UUID, for user: UUID, after: Int64, to stream: EventStream) throws {
        let watcher = RoomWatcher(room: room, user: user, last: after, stream: stream, pool: pool, storage: storage)
        feed.watch(room.lowercased, until: stream, deliver: watcher.deliver)
        try watcher.catchUp()
    }

    /// Whether `user` may announce typing in `room` now (at most once a second each).
    func mayType(_ user: UUID, in room: UUID) -> Bool {
        let key = room.lowercased + user.lowercased
        let now = Date()
        return typing.withLock { seen in
            if seen.count > 100_000 { seen = seen.filter { now.timeIntervalSince($0.value) < 1 } }
            guard now.timeIntervalSince(seen[key] ?? .distantPast) >= 1 else { return false }
            seen[key] = now
            return true
        }
    }
}

/// One stream of one room: its position in the room's change sequence, and the live changes that arrive while it
/// still reads what it missed.
final class RoomWatcher: Sendable {
    private struct State {
        var last: Int64
        /// Live changes held until the catch-up from the database is done; nil once live.
        var held: [LiveFeed.Item]? = []
    }

    private let room: UUID
    private let user: UUID
    private let stream: EventStream
    private let pool: Pool
    private let storage: ChatStorage
    private let state: Mutex<State>

    init(room: UUID, user: UUID, last: Int64, stream: EventStream, pool: Pool, storage: ChatStorage) {
        self.room = room; self.user = user; self.stream = stream; self.pool = pool; self.storage = storage
        state = Mutex(State(last: last))
    }

    /// Sends what was missed, then what arrived meanwhile, and goes live.
    func catchUp() throws {
        try state.withLock { s in
            try fill(&s, through: nil)
            for item in (s.held ?? []).sorted(by: { (Int64($0.id) ?? 0) < (Int64($1.id) ?? 0) }) { try send(&s, item) }
            s.held = nil
        }
    }

    /// A live change (on the feed's thread).
    @Sendable func deliver(_ item: LiveFeed.Item) {
        guard !item.id.isEmpty else {
            stream.send(frame: item.frame)  // typing: ephemeral, no place in the sequence
            return
        }
        state.withLock { s in
            if s.held != nil { s.held!.append(item); return }
            do { try send(&s, item) } catch { stream.close() }  // the database is gone: the client reconnects from its last id
        }
    }

    private func send(_ s: inout State, _ item: LiveFeed.Item) throws {
        guard let seq = Int64(item.id), seq > s.last else { return }
        if seq > s.last + 1 { try fill(&s, through: seq - 1) }
        emit(&s, seq: seq, event: item.event, body: item.data, frame: item.frame)
    }

    /// Sends the stored changes after the last one sent, up to `through` (all when nil).
    private func fill(_ s: inout State, through: Int64?) throws {
        while true {
            let changes = try pool.withConnection { try storage.changes($0, room: room, after: s.last, through: through, limit: 500) }
            for change in changes { emit(&s, seq: change.seq, event: change.event, body: change.body) }
            if changes.count < 500 { return }
        }
    }

    private func emit(_ s: inout State, seq: Int64, event: String, body: String, frame: [UInt8]? = nil) {
        stream.send(frame: frame ?? EventStream.frame(event: event, id: String(seq), data: body))
        s.last = seq
        if event == "member_left", Self.userId(in: body) == user.lowercased { stream.close() }
    }

    private static func userId(in body: String) -> String? {
        struct Membership: Decodable { struct User: Decodable { let id: String }; let user: User }
        return (try? JSONDecoder().decode(Membership.self, from: Data(body.utf8)))?.user.id
    }
}
