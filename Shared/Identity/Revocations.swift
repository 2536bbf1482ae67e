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
/// revoked within the access-token lifetime; `TokenVerifier` refuses their tokens. With `fetchList` (`SERVICE_TOKEN`)
/// auth's list is read too: in full each time the feed attaches (at start, and again after the broker lost the
/// topic), so a broker that lost its history forgets nothing here; and, only while the feed is not current (not
/// reading, or its broker has not answered for `feedAnswerLimit`: stopped, frozen, unreachable), every
/// `pollInterval` what is new since the last read (`?since=`), so a logout takes effect within a second whatever
/// the broker does. With the broker up nothing is polled. The app runs `feed` and `sync`.
public final class SessionRevocations: Sendable {
    /// How long the feed may go without an answer from its broker before auth's list is read instead: the broker
    /// answers an empty fetch after holding it `fetchWaitMs` (500 ms; Tansu a little later), and the statistics that
    /// date its answers come every 100 ms.
    public static let feedAnswerLimit: TimeInterval = 0.75
    /// How often auth's list is read while the feed is not current.
    public static let pollInterval: TimeInterval = 0.5
    /// How long tokens are still taken when neither the feed nor auth's list confirmed the revocations (both
    /// unreachable): a few failed reads in a row are tolerated; then tokens are refused (503) and the instance is not
    /// ready, rather than let a token logged out meanwhile through (see docs/operations.md).
    public static let failClosedAfter: TimeInterval = 3
    /// How far before the latest revocation auth named a `since` read starts: a revocation is dated when its
    /// transaction began and becomes visible when it commits.
    static let sinceMargin: TimeInterval = 10

    private final class State: Sendable {
        let revoked = Mutex<(sessions: [UUID: Date], streams: [UUID: [ObjectIdentifier: EventStream]])>(([:], [:]))
        /// Times the feed attached, and the attach the last full read of auth's list began after: a full read is owed
        /// while they differ.
        let attaches = Atomic<Int>(0)
        let listCovers = Atomic<Int>(0)
        /// When (`DispatchTime` nanoseconds) the last successful read of auth's list began; 0 before one.
        let listReadAt = Atomic<UInt64>(0)
        let wasComplete = Atomic<Bool>(false)

        var listOwed: Bool { attaches.load(ordering: .acquiring) != listCovers.load(ordering: .acquiring) }

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
    private let readsList: Bool
    /// Reads the topic.
    public let feed: LiveFeed
    /// Reads the list from auth when owed or while the feed is not current, and forgets, every minute, the
    /// revocations older than any token still alive.
    public let sync: Job

    /// `fetchList` nil: the topic alone (auth itself, or no `SERVICE_TOKEN`). It is given the time the read starts
    /// from (nil: the whole list).
    public init(kafka: KafkaConfig, topicsReady: Gate, logger: Logger, fetchList: (@Sendable (_ since: Date?) throws -> RevokedSessionList)?) {
        let state = State()
        self.state = state
        readsList = fetchList != nil
        // Nobody watches this feed: a revocation taking effect within about 0.2 s (Tansu; Kafka at once) is worth
        // the broker CPU a short hold in every service's copy of it would cost (see `Consumer`).
        let feed = LiveFeed(name: "revocations", topics: [SessionRevoked.type], start: .beginning, kafka: kafka,
                            topicsReady: topicsReady, logger: logger, fetchWaitMs: 500, watchesAnswers: fetchList != nil,
                            onAttach: { if fetchList != nil { state.attaches.add(1, ordering: .acquiringAndReleasing) } }) { event in
            // Only the session: a reason added later must not make an older reader skip a revocation.
            if let payload = try? event.decode(RevokedSession.self) {
                state.revoke([(payload.sessionId, event.time ?? Date())])
            }
            return nil
        }
        self.feed = feed
        sync = Job("revocations-sync") { cancellation in
            var lastPrune = Date()
            var lastTry: UInt64 = 0
            var latest: Date?  // the latest revocation auth's list named: where the next `since` read starts
            var warned = false, announced = false
            repeat {
                if let fetchList {
                    let behind = feed.secondsSinceBrokerAnswered > Self.feedAnswerLimit
                    // Said once an outage begins (not while the feed first attaches) and once it ends.
                    if behind != announced, !behind || state.attaches.load(ordering: .acquiring) > 0 {
                        announced = behind
                        logger.info(behind ? "the revocation feed's broker does not answer; reading auth's list every \(Self.pollInterval) s"
                                           : "the revocation feed is current again; no more reading of auth's list")
                    }
                    let now = DispatchTime.now().uptimeNanoseconds
                    let attach = state.attaches.load(ordering: .acquiring)
                    let owed = attach != state.listCovers.load(ordering: .acquiring)
                    if owed || behind, Double(now - min(lastTry, now)) / 1e9 >= Self.pollInterval {
                        lastTry = now
                        do {
                            let list = try fetchList(owed ? nil : latest?.addingTimeInterval(-Self.sinceMargin))
                            let entries = list.sessions.compactMap { entry in
                                UUID(uuidString: entry.sessionId).map { ($0, Timestamp.parse(entry.revokedAt) ?? Date()) }
                            }
                            state.revoke(entries)
                            latest = ([latest].compactMap { $0 } + entries.map(\.1)).max()
                            state.listReadAt.store(now, ordering: .releasing)
                            if owed {
                                state.listCovers.store(attach, ordering: .releasing)
                                logger.info("read the revoked sessions from auth", ["sessions": .int(list.sessions.count)])
                            }
                            warned = false
                        } catch {
                            if !warned { logger.warn("cannot read the revoked sessions from auth yet; retrying", ["error": .string("\(error)")]) }
                            warned = true
                        }
                    }
                }
                if Date().timeIntervalSince(lastPrune) > 60 {
                    lastPrune = Date()
                    let horizon = Date().addingTimeInterval(-RevokedSessionList.horizon)
                    state.revoked.withLock { $0.sessions = $0.sessions.filter { $0.value > horizon } }
                }
            } while cancellation.sleep(fetchList == nil ? 1 : 0.1)
        }
    }

    /// Seconds since the revocations were last known complete: the feed's broker answered (unless a full read of
    /// auth's list is owed), or auth's list was read.
    private var secondsSinceConfirmed: TimeInterval {
        let at = state.listReadAt.load(ordering: .acquiring), now = DispatchTime.now().uptimeNanoseconds
        let list = at == 0 ? .infinity : Double(now - min(at, now)) / 1e9
        return state.listOwed ? list : min(list, feed.secondsSinceBrokerAnswered)
    }

    /// What readiness says (`revocations`). With auth's list: the revocations were confirmed within
    /// `failClosedAfter`, by the feed or the list (so also while the broker is down but auth answers). Without: the
    /// feed reads the topic.
    public var isReady: Bool {
        readsList ? secondsSinceConfirmed <= Self.failClosedAfter : feed.isReading
    }

    /// Whether a token may be taken now; when not, `TokenVerifier` answers 503. With auth's list: `isReady` (fail
    /// closed when neither the broker nor auth can tell what was revoked). Without: once the feed read the topic
    /// (before that a service just started does not know yet what was revoked); after, a broker outage leaves what
    /// is known in place, as the topic alone can do no better.
    public var canCheckTokens: Bool {
        if readsList { return isReady }
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

/// The part of `session.revoked` a reader needs to end the session.
private struct RevokedSession: Decodable { let sessionId: UUID }
