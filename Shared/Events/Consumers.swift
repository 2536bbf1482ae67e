import Foundation
import HTTP
import Kafka
import Models
import Postgres
import Runtime
import Synchronization

/// Consumes topics in a consumer group and hands each event to a handler, inside a database transaction that
/// also records the event id, so a replayed event is skipped; the events already waiting share one transaction.
/// Offsets are committed only after processing, a batch at a time: at most `commitInterval` after processing while
/// events keep coming, at once when none is waiting, and before leaving the group. (A commit per event waited for
/// the broker each time, and a consumer of busy topics fell behind.) A crash repeats at most that interval's events,
/// which the recorded ids skip.
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
    private let commitInterval: TimeInterval = 0.5
    /// At most this many waiting messages are handled in one transaction.
    private let batchLimit = 64
    private let assigned = Atomic<Int>(0)
    /// The consumer polling now, for its lag (read from librdkafka's state on any thread).
    private let current = Mutex<Consumer?>(nil)

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

    /// Events in those partitions not processed yet: the ones waiting behind those in hand, counted with them
    /// (0 while joining or rebalancing).
    public var lag: Int {
        guard let consumer = current.withLock({ $0 }) else { return 0 }
        return consumer.lag + (assignedPartitions > 0 ? inHand.load(ordering: .relaxed) : 0)
    }
    /// Polled and not processed yet.
    private let inHand = Atomic<Int>(0)

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
        current.withLock { $0 = consumer }
        var partitions = 0
        var processed: [IncomingMessage] = []  // since the last commit
        var lastCommit = Date()
        func commit(_ consumer: Consumer, wait: Bool) {
            guard !processed.isEmpty else { return }
            do { try consumer.commit(processed, wait: wait) } catch {
                logger.warn("offset commit failed (the messages may be processed again)",
                            ["consumer": .string(consumerName), "error": .string("\(error)")])
            }
            processed.removeAll(keepingCapacity: true)
            lastCommit = Date()
        }
        while !cancellation.isCancelled, let active = consumer {
            let message = active.poll(timeout: processed.isEmpty ? 0.2 : 0)
            let now = active.assignedPartitions
            if now != partitions {
                partitions = now
                logger.info("consumer assignment changed", ["consumer": .string(consumerName), "partitions": .int(now)])
                assigned.store(now, ordering: .relaxed)
            }
            guard let message else { commit(active, wait: false); continue }  // none waiting
            // The messages already waiting behind it go with it, in order, without waiting for more.
            var batch = [message]
            while batch.count < batchLimit, let next = active.poll(timeout: 0) { batch.append(next) }
            var rest = batch[...]
            inHand.store(rest.count, ordering: .relaxed)
            defer { inHand.store(0, ordering: .relaxed) }
            while !rest.isEmpty {
                let together = handleTogether(rest)
                processed += rest.prefix(together)
                rest = rest.dropFirst(together)
                inHand.store(rest.count, ordering: .relaxed)
                // The one that failed among them, or came alone: by itself, with its retries and dead letter.
                guard let next = rest.first else { break }
                guard process(next, cancellation) else { break }  // stopping mid-retry: not committed, so it comes again
                processed.append(next)
                rest = rest.dropFirst()
                inHand.store(rest.count, ordering: .relaxed)
            }
            guard rest.isEmpty else { break }
            if Date().timeIntervalSince(lastCommit) >= commitInterval { commit(active, wait: false) }
        }
        if let consumer { commit(consumer, wait: true) }  // what was processed, before leaving
        current.withLock { $0 = nil }
        consumer = nil  // closes the consumer: leaves the group now
    }

    /// Handles waiting messages in one transaction: one commit (and WAL flush, and round trips) for all instead of
    /// one each, which is most of what an event costs a consumer when events come faster than it commits. Returns
    /// how many of the first `messages` it handled: all, or those before the first that failed (handled together
    /// again without it), which then goes through `process` alone. Fewer than two are left to `process`.
    private func handleTogether(_ messages: ArraySlice<IncomingMessage>) -> Int {
        guard messages.count > 1 else { return 0 }
        var events: [ReceivedEvent] = []
        for message in messages {
            guard let event = ReceivedEvent(message.value) else { return handleTogether(messages.prefix(events.count)) }
            events.append(event)
        }
        // Each event's trace continues in its handler and in its log line, as when it comes alone.
        let traces = events.map { $0.trace?.child() }
        var reached = 0
        do {
            try pool.withTransaction { connection in
                for (i, (event, message)) in zip(events, messages).enumerated() {
                    reached = i
                    try TraceContext.with(traces[i]) { try handleOnce(event, message, connection) }
                }
            }
        } catch {
            return handleTogether(messages.prefix(reached))
        }
        for (i, (event, message)) in zip(events, messages).enumerated() { TraceContext.with(traces[i]) { handled(event, message) } }
        return messages.count
    }

    /// Records the event as processed and, the first time only, hands it to the handler, in `connection`'s transaction.
    private func handleOnce(_ event: ReceivedEvent, _ message: IncomingMessage, _ connection: Connection) throws {
        let fresh = try connection.execute("""
            INSERT INTO \(unescaped: schema).processed_events (event_id, topic) VALUES (\(event.id)::uuid, \(message.topic)) ON CONFLICT DO NOTHING
            """)
        if fresh == 1 { try handler(event, connection) }
    }

    /// Logs and counts an event whose transaction committed.
    private func handled(_ event: ReceivedEvent, _ message: IncomingMessage) {
        logger.debug("event handled", ["consumer": .string(consumerName), "type": .string(event.type), "eventId": .string(event.id)])
        metrics.increment("events_consumed_total", labels: "topic=\"\(Metrics.escape(message.topic))\"", help: "Events processed.")
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
                try pool.withTransaction { try handleOnce(event, message, $0) }
                handled(event, message)
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
                metrics.increment("events_dead_lettered_total", labels: "topic=\"\(Metrics.escape(message.topic))\"",
                                  help: "Events sent to a dead-letter topic.")
                return true
            }
            cancellation.sleep(1)
        }
        return false
    }
}
