import Events
import Foundation
import HTTP
import Kafka
import Models
import Postgres
import Runtime
import Synchronization
import Web

/// The sessions auth revoked within the access-token lifetime: what `GET /v1/internal/revoked-sessions` answers,
/// so that revocations do not depend on the broker keeping its history.
public struct RevokedSessionList: Decodable, View, Sendable {
    public struct Entry: Decodable, View, Sendable {
        public var sessionId: String
        public var revokedAt: String
        public init(sessionId: String, revokedAt: String) { self.sessionId = sessionId; self.revokedAt = revokedAt }
        public static let fields: [ViewField<Self>] = [.field("sessionId", \.sessionId, .uuid), .field("revokedAt", \.revokedAt, .dateTime)]
    }
    public var sessions: [Entry]
    public init(sessions: [Entry]) { self.sessions = sessions }
    public static let fields: [ViewField<Self>] = [.field("sessions", \.sessions)]

    /// How far back the list goes: any token signed before then has expired.
    public static var horizon: TimeInterval { Double(JWT.maxLifetime + 120) }
}

/// Every instance reads all of `session.revoked` (a `LiveFeed` from the beginning) and remembers the sessions
/// revoked within the access-token lifetime; `TokenVerifier` refuses their tokens. Each time the feed attaches (at
/// start, and again after the broker lost the topic) the list is also read from auth (`fetchList`, with
/// `SERVICE_TOKEN`), and the instance is not ready until it was: a broker that lost its history forgets nothing here.
/// The app runs `feed` and `sync`.
public final class SessionRevocations: Sendable {
    private final class State: Sendable {
        let revoked = Mutex<(sessions: [UUID: Date], streams: [UUID: [ObjectIdentifier: EventStream]])>(([:], [:]))
        let listWanted = Atomic<Bool>(false)
        let wasComplete = Atomic<Bool>(false)

        /// Records revocations and ends the streams opened with those sessions.
        func revoke(_ sessions: [(UUID, Date)]) {
            let ended = revoked.withLock { r in
                sessions.flatMap { session, at in
                    r.sessions[session] = at
                    return r.streams.removeValue(forKey: session).map { Array($0.values) } ?? []
                }
            }
            ended.forEach { $0.end(reason: "session_revoked") }
        }
    }

    private let state: State
    /// Reads the topic.
    public let feed: LiveFeed
    /// Reads the list from auth whenever the feed (re)attached, until it succeeds, and forgets, every minute, the
    /// revocations older than any token still alive.
    public let sync: Job

    /// `fetchList` nil: the topic alone (auth itself, or no `SERVICE_TOKEN`).
    public init(kafka: KafkaConfig, topicsReady: Gate, logger: Logger, fetchList: (@Sendable () throws -> RevokedSessionList)?) {
        let state = State()
        self.state = state
        // Nobody watches this feed: a revocation taking effect within about 0.2 s (Tansu; Kafka at once) is worth
        // the broker CPU a short hold in every service's copy of it would cost (see `Consumer`).
        feed = LiveFeed(name: "revocations", topics: [SessionRevoked.type], start: .beginning, kafka: kafka,
                        topicsReady: topicsReady, logger: logger, fetchWaitMs: 500, onAttach: { if fetchList != nil { state.listWanted.store(true, ordering: .releasing) } }) { event in
            if let payload = try? event.decode(SessionRevoked.self), let session = UUID(uuidString: payload.sessionId) {
                state.revoke([(session, event.time ?? Date())])
            }
            return nil
        }
        sync = Job("revocations-sync") { cancellation in
            var lastPrune = Date()
            var warned = false
            repeat {
                if let fetchList, state.listWanted.load(ordering: .acquiring) {
                    do {
                        let list = try fetchList()
                        state.revoke(list.sessions.compactMap { entry in
                            UUID(uuidString: entry.sessionId).map { ($0, Timestamp.parse(entry.revokedAt) ?? Date()) }
                        })
                        state.listWanted.store(false, ordering: .releasing)
                        logger.info("read the revoked sessions from auth", ["sessions": .int(list.sessions.count)])
                        warned = false
                    } catch {
                        if !warned { logger.warn("cannot read the revoked sessions from auth yet; retrying", ["error": .string("\(error)")]) }
                        warned = true
                    }
                }
                if Date().timeIntervalSince(lastPrune) > 60 {
                    lastPrune = Date()
                    let horizon = Date().addingTimeInterval(-RevokedSessionList.horizon)
                    state.revoked.withLock { $0.sessions = $0.sessions.filter { $0.value > horizon } }
                }
            } while cancellation.sleep(1)
        }
    }

    /// True once the listener reads the topic and, since it last attached, the list was read from auth.
    public var isReady: Bool { feed.isReading && !state.listWanted.load(ordering: .acquiring) }

    /// True once the revocations were complete at least once (`isReady`): before that a token cannot be trusted (a
    /// service just restarted does not know yet what was revoked); after, a broker outage leaves what is known in place.
    public var wereComplete: Bool {
        if state.wasComplete.load(ordering: .acquiring) { return true }
        guard isReady else { return false }
        state.wasComplete.store(true, ordering: .releasing)
        return true
    }

    /// Whether `session` was revoked.
    public func isRevoked(_ session: UUID) -> Bool { state.revoked.withLock { $0.sessions[session] != nil } }

    /// Records a revocation (also used by the owner of sessions itself).
    public func revoke(_ session: UUID, at time: Date = Date()) { state.revoke([(session, time)]) }

    /// Closes `stream` when `session` is revoked, at once when it already is.
    public func end(_ stream: EventStream, whenRevoked session: UUID) {
        let id = ObjectIdentifier(stream)
        let revoked = state.revoked.withLock { r in
            if r.sessions[session] != nil { return true }
            r.streams[session, default: [:]][id] = stream
            return false
        }
        if revoked { stream.end(reason: "session_revoked"); return }
        stream.onClose { [state] in
            state.revoked.withLock { r in
                r.streams[session]?[id] = nil
                if r.streams[session]?.isEmpty == true { r.streams[session] = nil }
            }
        }
    }
}
