import Foundation
import HTTP
import Kafka
import Models
import Postgres
import Synchronization

/// Consumes topics in a consumer group and hands each event to a handler, inside a database transaction that
/// also records the event id, so a replayed event is skipped. Offsets are committed only after processing.
/// A handler that keeps failing (not for an outage) sends the message to `<topic>.dlq` instead of blocking forever.
public final class EventConsumer: BackgroundService {
    /// Processes one event in the given transaction.
    public typealias Handler = @Sendable (ReceivedEvent, Connection) throws -> Void

    public var name: String { "consumer-\(consumerName)" }
    private let consumerName: String
    private let kafka: KafkaConfig
    private let groupId: String
    private let topics: [String]
    private let pool: Pool
    private let schema: String
    private let relay: OutboxRelay
    private let topicsReady: Gate
    private let logger: Logger
    private let metrics: Metrics
    private let handler: Handler
    private let assigned = Atomic<Int>(0)

    /// A consumer of `topics` in `groupId`, once `topicsReady` opens; `schema` holds its `processed_events` table;
    /// dead letters go out through the relay's producer.
    public init(name: String, kafka: KafkaConfig, groupId: String, topics: [String], pool: Pool, schema: String,
                relay: OutboxRelay, topicsReady: Gate, logger: Logger, metrics: Metrics, handler: @escaping Handler) {
        self.consumerName = name; self.kafka = kafka; self.groupId = groupId; self.topics = topics; self.pool = pool
        self.schema = schema; self.relay = relay; self.topicsReady = topicsReady; self.logger = logger
        self.metrics = metrics; self.handler = handler
    }

    /// How many partitions the group gave this consumer (0 while joining or rebalancing).
    public var assignedPartitions: Int { assigned.load(ordering: .relaxed) }

    /// Polls until stopped, then leaves the group (so the next instance is not kept waiting for our session to
    /// expire). The message in hand when the stop comes is finished, or left uncommitted to come again.
    public func run(until cancellation: Cancellation) {
        // A subscription to a missing topic would wait for a metadata refresh.
        guard topicsReady.wait(cancellation) else { return }
        var consumer: Consumer?
        while !cancellation.isCancelled && consumer == nil {
            do {
                let c = try Consumer(config: kafka, groupId: groupId)
                try c.subscribe(topics)
                consumer = c
            } catch {
                logger.warn("consumer cannot subscribe; retrying", ["consumer": .string(consumerName), "error": .string("\(error)")])
                cancellation.sleep(2)
            }
        }
        var partitions = 0
        while !cancellation.isCancelled, let active = consumer {
            let message = active.poll(timeout: 0.2)
            let now = active.assignedPartitions
            if now != partitions {
                partitions = now
                logger.info("consumer assignment changed", ["consumer": .string(consumerName), "partitions": .int(now)])
                assigned.store(now, ordering: .relaxed)
            }
            guard let message else { continue }
            guard process(message, cancellation) else { break }  // stopping mid-retry: not committed, so it comes again
            do { try active.commit(message) } catch {
                logger.warn("offset commit failed (the message may be processed again)",
                            ["consumer": .string(consumerName), "error": .string("\(error)")])
            }
        }
        consumer = nil  // closes the consumer: leaves the group now
    }

    /// Handles one message until it is done or dead-lettered; false when asked to stop first.
    private func process(_ message: IncomingMessage, _ cancellation: Cancellation) -> Bool {
        guard let event = ReceivedEvent(message.value) else {
            logger.warn("not a CloudEvent; dead-lettering", ["topic": .string(message.topic), "offset": .int(Int(message.offset))])
            return deadLetter(message, reason: "not a CloudEvent", cancellation)
        }
        // The event's trace continues here: the handler's log lines and the events it causes carry it.
        return TraceContext.with(event.trace?.child()) { handle(event, message, cancellation) }
    }

    private func handle(_ event: ReceivedEvent, _ message: IncomingMessage, _ cancellation: Cancellation) -> Bool {
        var failures = 0
        var delay: TimeInterval = 0.2
        while !cancellation.isCancelled {
            do {
                try pool.withTransaction { connection in
                    let fresh = try connection.execute("""
                        INSERT INTO \(schema).processed_events (event_id, topic) VALUES ($1::uuid, $2) ON CONFLICT DO NOTHING
                        """, [event.id, message.topic])
                    if fresh == 1 { try handler(event, connection) }
                }
                logger.debug("event handled", ["consumer": .string(consumerName), "type": .string(event.type), "eventId": .string(event.id)])
                metrics.increment("events_consumed_total", labels: "topic=\"\(message.topic)\"", help: "Events processed.")
                return true
            } catch let error as PostgresError where error.kind == .unavailable {
                // An outage: wait and retry; dead-lettering would lose good events.
                logger.warn("database unavailable while consuming; retrying", ["consumer": .string(consumerName)])
            } catch {
                failures += 1
                logger.warn("event handler failed", ["consumer": .string(consumerName), "eventId": .string(event.id),
                                                     "attempt": .int(failures), "error": .string("\(error)")])
                if failures >= 5 { return deadLetter(message, reason: "\(error)", cancellation) }
            }
            cancellation.sleep(delay)
            delay = min(delay * 2, 10)
        }
        return false
    }

    private func deadLetter(_ message: IncomingMessage, reason: String, _ cancellation: Cancellation) -> Bool {
        while !cancellation.isCancelled {
            let out = OutgoingMessage(topic: message.topic + ".dlq", key: String(decoding: message.key, as: UTF8.self),
                                      value: message.value, header: ("dlq_reason", String(reason.prefix(200))))
            if let producer = try? relay.currentProducer(), producer.send([out]).first! == nil {
                metrics.increment("events_dead_lettered_total", labels: "topic=\"\(message.topic)\"",
                                  help: "Events sent to a dead-letter topic.")
                return true
            }
            cancellation.sleep(1)
        }
        return false
    }
}

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
        feed = LiveFeed(name: "revocations", topics: [SessionRevoked.type], start: .beginning, kafka: kafka,
                        topicsReady: topicsReady, logger: logger, onAttach: { if fetchList != nil { state.listWanted.store(true, ordering: .releasing) } }) { event in
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
