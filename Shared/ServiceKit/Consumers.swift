import Foundation
import Kafka
import Postgres
import Models

/// Consumes topics in a consumer group and hands each event to a handler, inside a database transaction that
/// also records the event id, so a replayed event is skipped. Offsets are committed only after processing.
/// A handler that keeps failing (not for an outage) sends the message to `<topic>.dlq` instead of blocking forever.
///
/// `@unchecked Sendable`: `running` is guarded by `lock`; the Kafka consumer is used by its own thread only.
public final class EventConsumer: @unchecked Sendable {
    /// Processes one event in the given transaction.
    public typealias Handler = @Sendable (ReceivedEvent, Connection) throws -> Void

    private let name: String
    private let kafka: KafkaConfig
    private let groupId: String
    private let topics: [String]
    private let pool: Pool
    private let schema: String
    private let relay: OutboxRelay
    private let logger: Logger
    private let metrics: Metrics
    private let handler: Handler
    private let lock = NSLock()
    private var running = false
    private var stopped = false
    private var assigned = 0

    /// A consumer of `topics` in `groupId`; `schema` holds its `processed_events` table; dead letters go out
    /// through the relay's producer.
    public init(name: String, kafka: KafkaConfig, groupId: String, topics: [String], pool: Pool, schema: String,
                relay: OutboxRelay, logger: Logger, metrics: Metrics, handler: @escaping Handler) {
        self.name = name; self.kafka = kafka; self.groupId = groupId; self.topics = topics; self.pool = pool
        self.schema = schema; self.relay = relay; self.logger = logger; self.metrics = metrics; self.handler = handler
    }

    /// How many partitions the group gave this consumer (0 while joining or rebalancing).
    public var assignedPartitions: Int { lock.lock(); defer { lock.unlock() }; return assigned }

    /// Starts the polling thread.
    public func start() {
        lock.lock(); running = true; lock.unlock()
        let thread = Thread { [self] in run() }
        thread.name = "consumer-\(name)"
        thread.start()
    }

    /// Stops after the message in hand and leaves the group.
    public func stop() {
        lock.lock()
        let started = running
        running = false
        lock.unlock()
        guard started else { return }  // never started (its topics were never created): nothing to wait for
        for _ in 0..<100 {
            lock.lock(); let done = stopped; lock.unlock()
            if done { return }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    private var isRunning: Bool { lock.lock(); defer { lock.unlock() }; return running }

    private func run() {
        var consumer: Consumer?
        defer {
            consumer = nil  // leaves the group now, so the next instance is not kept waiting for our session to expire
            lock.lock(); stopped = true; lock.unlock()
        }
        while isRunning && consumer == nil {
            do {
                let c = try Consumer(config: kafka, groupId: groupId)
                try c.subscribe(topics)
                consumer = c
            } catch {
                logger.warn("consumer cannot subscribe; retrying", ["consumer": .string(name), "error": .string("\(error)")])
                Thread.sleep(forTimeInterval: 2)
            }
        }
        var partitions = 0
        while isRunning, let active = consumer {
            let message = active.poll(timeout: 0.2)
            let now = active.assignedPartitions
            if now != partitions {
                partitions = now
                logger.info("consumer assignment changed", ["consumer": .string(name), "partitions": .int(now)])
                lock.lock(); assigned = now; lock.unlock()
            }
            guard let message else { continue }
            guard process(message) else { return }  // stopping mid-retry: not committed, so it comes again
            do { try active.commit(message) } catch {
                logger.warn("offset commit failed (the message may be processed again)",
                            ["consumer": .string(name), "error": .string("\(error)")])
            }
        }
    }

    /// Handles one message until it is done or dead-lettered; false when asked to stop first.
    private func process(_ message: IncomingMessage) -> Bool {
        guard let event = ReceivedEvent(message.value) else {
            logger.warn("not a CloudEvent; dead-lettering", ["topic": .string(message.topic), "offset": .int(Int(message.offset))])
            return deadLetter(message, reason: "not a CloudEvent")
        }
        var failures = 0
        var delay: TimeInterval = 0.2
        while isRunning {
            do {
                try pool.withTransaction { connection in
                    let fresh = try connection.execute("""
                        INSERT INTO \(schema).processed_events (event_id, topic) VALUES ($1::uuid, $2) ON CONFLICT DO NOTHING
                        """, [event.id, message.topic])
                    if fresh == 1 { try handler(event, connection) }
                }
                metrics.increment("events_consumed_total", labels: "topic=\"\(message.topic)\"", help: "Events processed.")
                return true
            } catch let error as PostgresError where error.kind == .unavailable {
                // An outage: wait and retry; dead-lettering would lose good events.
                logger.warn("database unavailable while consuming; retrying", ["consumer": .string(name)])
            } catch {
                failures += 1
                logger.warn("event handler failed", ["consumer": .string(name), "eventId": .string(event.id),
                                                     "attempt": .int(failures), "error": .string("\(error)")])
                if failures >= 5 { return deadLetter(message, reason: "\(error)") }
            }
            Thread.sleep(forTimeInterval: delay)
            delay = min(delay * 2, 10)
        }
        return false
    }

    private func deadLetter(_ message: IncomingMessage, reason: String) -> Bool {
        while isRunning {
            let out = OutgoingMessage(topic: message.topic + ".dlq", key: String(decoding: message.key, as: UTF8.self),
                                      value: message.value, header: ("dlq_reason", String(reason.prefix(200))))
            if let producer = try? relay.currentProducer(), producer.send([out]).first! == nil {
                metrics.increment("events_dead_lettered_total", labels: "topic=\"\(message.topic)\"",
                                  help: "Events sent to a dead-letter topic.")
                return true
            }
            Thread.sleep(forTimeInterval: 1)
        }
        return false
    }
}

/// Every instance reads all of `session.revoked` (no consumer group, so no join delay) and remembers the
/// sessions revoked within the access-token lifetime; `TokenVerifier` refuses their tokens.
///
/// `@unchecked Sendable`: the set is guarded by `lock`.
public final class SessionRevocations: @unchecked Sendable {
    private let lock = NSLock()
    private var revoked: [UUID: Date] = [:]
    private var running = false
    private var ready = false
    private let kafka: KafkaConfig
    private let logger: Logger

    public init(kafka: KafkaConfig, logger: Logger) {
        self.kafka = kafka; self.logger = logger
    }

    /// True once the listener reads the topic.
    public var isReady: Bool { lock.lock(); defer { lock.unlock() }; return ready }

    /// Whether `session` was revoked.
    public func isRevoked(_ session: UUID) -> Bool {
        lock.lock(); defer { lock.unlock() }; return revoked[session] != nil
    }

    /// Records a revocation (also used by the owner of sessions itself).
    public func revoke(_ session: UUID, at time: Date = Date()) {
        lock.lock(); revoked[session] = time; lock.unlock()
    }

    /// Starts the listening thread.
    public func start() {
        lock.lock(); running = true; lock.unlock()
        let thread = Thread { [self] in run() }
        thread.name = "session-revocations"
        thread.start()
    }

    /// Stops listening.
    public func stop() { lock.lock(); running = false; lock.unlock() }

    private var isRunning: Bool { lock.lock(); defer { lock.unlock() }; return running }

    private func run() {
        var consumer: Consumer?
        while isRunning && consumer == nil {
            do {
                let c = try Consumer(config: kafka, groupId: "revocations-\(UUID().uuidString.lowercased())")
                try c.assignFromBeginning([SessionRevoked.type])
                consumer = c
            } catch {
                logger.warn("cannot read session.revoked yet; retrying", ["error": .string("\(error)")])
                Thread.sleep(forTimeInterval: 1)
            }
        }
        lock.lock(); ready = consumer != nil; lock.unlock()
        var lastPrune = Date()
        while isRunning, let consumer {
            if let message = consumer.poll(timeout: 0.2),
               let event = ReceivedEvent(message.value),
               let payload = try? event.decode(SessionRevoked.self),
               let session = UUID(uuidString: payload.sessionId) {
                revoke(session, at: event.time ?? Date())
            }
            if Date().timeIntervalSince(lastPrune) > 60 {
                lastPrune = Date()
                let horizon = Date().addingTimeInterval(-Double(JWT.maxLifetime + 120))
                lock.lock(); revoked = revoked.filter { $0.value > horizon }; lock.unlock()
            }
        }
    }
}
