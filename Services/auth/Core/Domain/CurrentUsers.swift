import Foundation
import Postgres
import Runtime
import Synchronization

/// The users of active sessions read lately, so that `GET /v1/users/me` (an app's most frequent call) skips the
/// database, with a logged-out token still refused at once.
///
/// - PostgreSQL tells every instance what changed: triggers on `users` and `sessions` (migration 14) notify
///   `auth_user_changed` with the user's id at commit, whoever wrote, and `listen` forgets that user's entries.
/// - The instance that makes a change does not wait for that: its storage `hold`s the user before the change
///   (nothing of theirs is served or kept until a while after it committed).
/// - While not listening (at start, or after the listening connection broke), nothing is served or kept.
/// - A read that was under way when anything changed is not kept (`generation`).
///
/// Another instance learns of a change when the notification reaches it, a few milliseconds after the commit: until
/// then it may still answer from its copy.
final class CurrentUsers: Sendable {
    static let channel = "auth_user_changed"
    private struct Entry: Sendable { let user: UserRecord; let until: Date }
    private struct State: Sendable {
        var listening = false
        var generation: UInt64 = 0
        var entries: [UUID: Entry] = [:]         // by session
        var sessions: [UUID: Set<UUID>] = [:]    // a user's sessions in `entries`
        var held: [UUID: Date] = [:]             // users changing, until
    }
    private let state = Mutex(State())
    /// How long an entry is kept, and a change's user held.
    let lifetime: TimeInterval, hold: TimeInterval
    let capacity: Int

    init(lifetime: TimeInterval = 30, hold: TimeInterval = 5, capacity: Int = 20_000) {
        self.lifetime = lifetime; self.hold = hold; self.capacity = capacity
    }

    /// The user of `session`, when it is known, active and theirs (a held user's entries are gone, and none is kept).
    func user(_ user: UUID, session: UUID) -> UserRecord? {
        let now = Date()
        return state.withLock { s in
            guard s.listening, let entry = s.entries[session], entry.until > now, entry.user.id == user else { return nil }
            return entry.user
        }
    }

    /// What to give `keep` after reading `user` from the database; nil when nothing may be kept now.
    func ticket(for user: UUID) -> UInt64? {
        let now = Date()
        return state.withLock { s in
            guard s.listening else { return nil }
            if let until = s.held[user] {
                guard until <= now else { return nil }
                s.held[user] = nil
            }
            return s.generation
        }
    }

    /// Keeps `user` as the user of `session`, unless anything changed since `ticket`.
    func keep(_ user: UserRecord, session: UUID, ticket: UInt64) {
        state.withLock { s in
            guard s.listening, s.generation == ticket else { return }
            if s.entries.count >= capacity { forgetEveryone(&s) }
            s.entries[session] = Entry(user: user, until: Date().addingTimeInterval(lifetime))
            s.sessions[user.id, default: []].insert(session)
        }
    }

    /// `user` or one of their sessions is about to change, in a transaction not yet committed.
    func hold(_ user: UUID) {
        let until = Date().addingTimeInterval(hold)
        state.withLock { s in
            forget(user, &s)
            s.held[user] = until
            if s.held.count > capacity { let now = Date(); s.held = s.held.filter { $0.value > now } }
        }
    }

    private func forget(_ user: UUID, _ s: inout State) {
        s.generation &+= 1
        for session in s.sessions.removeValue(forKey: user) ?? [] { s.entries[session] = nil }
    }

    private func forgetEveryone(_ s: inout State) {
        s.generation &+= 1
        s.entries = [:]; s.sessions = [:]
    }

    private func listening(_ on: Bool) {
        state.withLock { s in
            forgetEveryone(&s)
            s.listening = on
        }
    }

    /// Listens to the changes committed, reconnecting when the connection breaks (serving nothing meanwhile).
    func listen(_ pool: Pool, logger: Logger) -> Job {
        Job("current-users") { [self] cancellation in
            var listener: Connection?
            defer { listening(false) }
            while !cancellation.isCancelled {
                do {
                    if listener == nil {
                        let connection = try pool.unpooledConnection()
                        try connection.execute("LISTEN \(unescaped: Self.channel)")
                        listener = connection
                        listening(true)
                    }
                    let changed = try listener?.notifications(timeout: 0.25) ?? []
                    if !changed.isEmpty {
                        state.withLock { s in
                            for n in changed {
                                if let user = UUID(uuidString: n.payload) { forget(user, &s) } else { forgetEveryone(&s) }
                            }
                        }
                    }
                } catch {
                    listening(false)
                    listener = nil
                    logger.warn("listening to user changes failed; GET /v1/users/me reads the database meanwhile",
                                ["error": .string("\(error)")])
                    _ = cancellation.sleep(1)
                }
            }
        }
    }
}
