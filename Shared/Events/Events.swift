import Foundation
import Kafka
import Models
import Postgres
import Runtime
import Web

/// The CloudEvents 1.0 structured-mode envelope every event travels in.
public struct CloudEvent<Payload: Codable & Sendable>: Codable, Sendable {
    public var specversion = "1.0"
    /// Unique per event; consumers de-duplicate by it.
    public var id: String
    /// `/auth`, `/stories`, ...
    public var source: String
    /// The topic name.
    public var type: String
    /// RFC 3339 UTC with milliseconds.
    public var time: String
    /// The aggregate id (also the Kafka key).
    public var subject: String
    public var datacontenttype = "application/json"
    /// Names the JSON Schema in `schemas/events/` that `data` follows.
    public var dataschema: String
    /// The W3C trace the event belongs to (the CloudEvents distributed-tracing extension): the request's, or the
    /// event's that caused it. Absent when it has none (a scheduled job's).
    public var traceparent: String?
    public var data: Payload

    public init(id: String, source: String, type: String, time: String, subject: String, dataschema: String,
                traceparent: String? = nil, data: Payload) {
        self.id = id; self.source = source; self.type = type; self.time = time; self.subject = subject
        self.dataschema = dataschema; self.traceparent = traceparent; self.data = data
    }
}

/// Where each event type's schema is published.
public func dataSchemaURI(for type: String) -> String { "urn:backend:schema:events:\(type)" }

/// A consumed event: the envelope's metadata and its `data` still undecoded.
public struct ReceivedEvent: Sendable {
    public let id: String
    public let type: String
    public let source: String
    public let subject: String
    public let time: Date?
    /// The trace it belongs to, when it names a valid one.
    public let trace: TraceContext?
    /// The whole message value.
    public let raw: [UInt8]

    private struct Meta: Decodable {
        var id: String; var type: String; var source: String; var subject: String; var time: String; var traceparent: String?
    }

    /// Parses the envelope; nil when the value is not a CloudEvent.
    public init?(_ value: [UInt8]) {
        guard let meta = try? JSONDecoder().decode(Meta.self, from: Data(value)) else { return nil }
        id = meta.id; type = meta.type; source = meta.source; subject = meta.subject
        time = Timestamp.parse(meta.time); trace = meta.traceparent.flatMap { TraceContext(traceparent: $0) }; raw = value
    }

    /// Decodes `data` as `P`.
    /// The payload (`data`); the envelope's other members were read by `init`.
    public func decode<P: Decodable>(_ type: P.Type = P.self) throws -> P {
        try JSONDecoder().decode(Envelope<P>.self, from: Data(raw)).data
    }

    private struct Envelope<P: Decodable>: Decodable { var data: P }

    /// The `data` member as compact JSON text (what live streams send), or nil when there is none.
    public var dataText: String? {
        guard let object = try? JSONSerialization.jsonObject(with: Data(raw)) as? [String: Any], let data = object["data"],
              let bytes = try? JSONSerialization.data(withJSONObject: data, options: [.sortedKeys, .fragmentsAllowed]) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }
}

// MARK: - Outbox

/// The tables every service has: the outbox, the consumer's processed-event ids and stored idempotent responses.
/// Put `Platform.migration` first in a service's migrations.
public enum Platform {
    public static let migration = Migration(1, "platform: outbox, processed events, idempotency keys", """
        CREATE TABLE outbox (
            id bigserial PRIMARY KEY,
            event_id uuid NOT NULL UNIQUE,
            topic text NOT NULL,
            key text NOT NULL,
            payload text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            sent_at timestamptz,
            attempts int NOT NULL DEFAULT 0,
            last_error text
        );
        CREATE INDEX outbox_unsent ON outbox (id) WHERE sent_at IS NULL;
        CREATE INDEX outbox_created ON outbox (created_at);
        CREATE TABLE processed_events (
            event_id uuid PRIMARY KEY,
            topic text NOT NULL,
            processed_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE TABLE idempotency_keys (
            caller text NOT NULL,
            key text NOT NULL,
            request_hash text NOT NULL,
            status int NOT NULL,
            body bytea NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (caller, key)
        );
        """)
}

/// Writes events into the outbox inside the caller's transaction, so an event exists exactly when its change does.
public struct Outbox: Sendable {
    /// The service's schema.
    public let schema: String
    /// The CloudEvents `source`, `/<service>`.
    public let source: String
    let wake: @Sendable () -> Void
    public init(schema: String, source: String, wake: @escaping @Sendable () -> Void) {
        self.schema = schema; self.source = source; self.wake = wake
    }

    /// Adds `payload` as an event about `subject` (its aggregate id, also the Kafka key). Returns the event id.
    @discardableResult
    public func add<P: EventPayload>(_ payload: P, subject: String, on connection: Connection, at time: Date = Date()) throws -> String {
        let id = UUID.v7(at: time)
        let event = CloudEvent(id: id.lowercased, source: source, type: P.type, time: Timestamp.format(time), subject: subject,
                               dataschema: dataSchemaURI(for: P.type), traceparent: TraceContext.current?.traceparent, data: payload)
        let value = String(decoding: try JSON.encode(event), as: UTF8.self)
        try connection.execute("INSERT INTO \(schema).outbox (event_id, topic, key, payload) VALUES ($1, $2, $3, $4)",
                               [id, P.type, subject, value])
        // After the commit: a relay woken before it would find nothing and sleep until its next poll.
        connection.afterCommit(wake)
        return id.lowercased
    }
}

/// Publishes outbox rows in order with the idempotent producer and marks them sent on the delivery report.
/// One relay works at a time per schema (a transaction-level advisory lock), which keeps per-key order across
/// instances. A failed batch keeps what was delivered, records the failure on the rows it could not publish and is
/// retried with exponential backoff.
///
/// It recovers without a restart: the producer is replaced after a fatal error or two failed batches in a row (a
/// broker that restarted without its data no longer knows the idempotent producer, whose messages then time out for
/// ever); missing topics are created with the configured partitions; and nothing is produced to a topic whose
/// partition count differs from the configured one (its keys would move partitions): the log names the topic. Readiness
/// says the outbox is `stuck` when the oldest pending event waits longer than `OUTBOX_MAX_DELAY_SECONDS`.
///
/// `@unchecked Sendable`: mutable state is guarded by `condition`; `topics` changes only before the group starts.
public final class OutboxRelay: BackgroundService, @unchecked Sendable {
    public var name: String { "outbox-relay" }
    private let pool: Pool
    private let schema: String
    private let kafka: KafkaConfig
    private let logger: Logger
    private let metrics: Metrics
    private let retention: TimeInterval
    private let maxDelay: TimeInterval
    private let condition = NSCondition()
    private var producer: Producer?
    private var woken = false
    /// Topics with another partition count than configured, and the count found.
    private var refused: [String: Int] = [:]
    private var topics: TopicSettings

    /// The topics a service uses and how to create them.
    public struct TopicSettings: Sendable {
        public var names: [String]
        public var partitions: Int
        public var replicationFactor: Int
        public init(names: [String], partitions: Int, replicationFactor: Int) {
            self.names = names; self.partitions = partitions; self.replicationFactor = replicationFactor
        }
    }

    public init(pool: Pool, schema: String, kafka: KafkaConfig, topics: TopicSettings, retentionHours: Int,
                maxDelaySeconds: Int = 60, logger: Logger, metrics: Metrics) {
        self.pool = pool; self.schema = schema; self.kafka = kafka; self.logger = logger; self.metrics = metrics
        self.topics = topics
        self.retention = TimeInterval(retentionHours) * 3600
        self.maxDelay = TimeInterval(maxDelaySeconds)
        // Counted when scraped, not on every batch: the count reads every pending row.
        metrics.addGauges(help: ["outbox_pending_events": "Events written and not yet published.",
                                 "outbox_oldest_pending_age_seconds": "Age of the oldest event not yet published."]) { [pool, schema] in
            guard let row = try? pool.withConnection({ c in
                try c.first("""
                    SELECT count(*) AS n, COALESCE(EXTRACT(EPOCH FROM now() - min(created_at)), 0)::float8 AS age
                    FROM \(schema).outbox WHERE sent_at IS NULL
                    """)
            }), let n = try? row["n", as: Int.self], let age = try? row["age", as: Double.self] else { return [] }
            return [("outbox_pending_events", "", Double(n)), ("outbox_oldest_pending_age_seconds", "", age)]
        }
    }

    /// The producer, created on first use and again after a fatal error or a replacement.
    public func currentProducer() throws -> Producer {
        condition.lock(); defer { condition.unlock() }
        if let p = producer, !p.hasFatalError { return p }
        if producer != nil { logger.warn("replacing the Kafka producer after a fatal error") }
        let p = try Producer(config: kafka)
        producer = p
        return p
    }

    /// Drops the producer and what it still holds; the next use creates a new one.
    private func replaceProducer(reason: String) {
        condition.lock()
        let old = producer
        producer = nil
        condition.unlock()
        old?.purge()
        logger.warn("replacing the Kafka producer", ["reason": .string(reason)])
    }

    /// Adds topics to create (before `start`), such as consumers' dead-letter topics.
    public func addTopics(_ names: [String]) {
        topics.names = Array(Set(topics.names + names)).sorted()
    }

    /// Creates the service's topics where they are missing, then checks every one's partition count: a topic with
    /// another count is refused (nothing is published to it) until it is fixed, and the log says so once. Returns the
    /// refused topics with their counts.
    @discardableResult
    public func createTopics() throws -> [String: Int] {
        let producer = try currentProducer()
        try producer.createTopics(topics.names, partitions: topics.partitions, replicationFactor: topics.replicationFactor)
        let counts = try producer.partitionCounts()
        var wrong: [String: Int] = [:]
        for name in topics.names { if let n = counts[name], n != topics.partitions { wrong[name] = n } }
        condition.lock()
        let before = refused
        refused = wrong
        condition.unlock()
        for (topic, found) in wrong.sorted(by: { $0.key < $1.key }) where before[topic] != found {
            logger.error("not publishing to a topic whose partition count is not KAFKA_TOPIC_PARTITIONS: its keys would move partitions; re-create the topic or change the setting",
                         ["topic": .string(topic), "partitions": .int(found), "expected": .int(topics.partitions)])
        }
        return wrong
    }

    /// Publishes an ephemeral event (a position, a typing notice) without the outbox and without waiting for its
    /// delivery: it may be lost, which is why anything that must not be lost goes through `Outbox.add`.
    public func publishEphemeral<P: EventPayload>(_ payload: P, subject: String, source: String, at time: String) {
        let event = CloudEvent(id: UUID.v7().lowercased, source: source, type: P.type, time: time, subject: subject,
                               dataschema: dataSchemaURI(for: P.type), traceparent: TraceContext.current?.traceparent, data: payload)
        guard let value = try? JSON.encode(event) else { return }
        _ = try? currentProducer().sendWithoutWaiting(OutgoingMessage(topic: P.type, key: subject, value: value,
                                                                      header: ("ce_type", P.type)))
    }

    /// Asks the relay to look for new rows now.
    public func wake() {
        condition.lock(); woken = true; condition.signal(); condition.unlock()
    }

    /// Whether events wait too long: the oldest pending event is older than `OUTBOX_MAX_DELAY_SECONDS` (as the events
    /// of a refused topic soon are). Throws when the database cannot say.
    public func isStuck() throws -> Bool {
        let age = try pool.withConnection { c in
            try c.first("""
                SELECT EXTRACT(EPOCH FROM now() - created_at)::float8 AS age FROM \(schema).outbox
                WHERE sent_at IS NULL ORDER BY id LIMIT 1
                """)?["age", as: Double.self]
        }
        return (age ?? 0) > maxDelay
    }

    /// Publishes until stopped; then drains what is pending until the stop's deadline (less a second for the
    /// services stopped after it).
    public func run(until cancellation: Cancellation) {
        cancellation.onCancel { [weak self] in self?.wake() }
        var lastCleanup = Date.distantPast
        var lastTopicCheck = Date()
        var backoff: TimeInterval = 0
        var failedBatches = 0
        while !cancellation.isCancelled {
            do {
                while try publishBatch() > 0 && !cancellation.isCancelled {}
                backoff = 0
                failedBatches = 0
            } catch {
                backoff = min(max(backoff * 2, 0.5), 30)
                logger.warn("outbox relay failed; retrying", ["error": .string(String(describing: error)),
                                                             "retryInSeconds": .double(backoff)])
                if error is KafkaError {
                    failedBatches += 1
                    if failedBatches >= 2 { replaceProducer(reason: "\(failedBatches) failed batches in a row") }
                    // A broker that lost its data would otherwise auto-create topics with its own defaults.
                    _ = try? createTopics()
                    lastTopicCheck = Date()
                }
            }
            let now = Date()
            if now.timeIntervalSince(lastTopicCheck) > 30 {
                // A refused topic may have been fixed; a vanished one is created again.
                lastTopicCheck = now
                _ = try? createTopics()
            }
            if now.timeIntervalSince(lastCleanup) > 600 {
                lastCleanup = now
                cleanup()
            }
            condition.lock()
            if !woken && !cancellation.isCancelled {
                _ = condition.wait(until: Date().addingTimeInterval(backoff > 0 ? backoff : 0.5))
            }
            woken = false
            condition.unlock()
        }
        drain(by: cancellation.deadline.addingTimeInterval(-1))
    }

    /// Publishes every pending event, batch after batch, until none is left or `deadline` passes.
    private func drain(by deadline: Date) {
        var drained = 0
        while Date() < deadline {
            do {
                let n = try publishBatch(timeout: max(0.5, deadline.timeIntervalSinceNow))
                drained += n
                if n == 0 { break }
            } catch {
                logger.warn("outbox drain failed; retrying until the deadline", ["error": .string(String(describing: error))])
                Thread.sleep(forTimeInterval: min(0.5, max(0, deadline.timeIntervalSinceNow)))
            }
        }
        let left = (try? pool.withConnection { c in
            try c.first("SELECT count(*) AS n FROM \(schema).outbox WHERE sent_at IS NULL")?["n", as: Int.self]
        }) ?? nil
        logger.info("outbox drained", ["published": .int(drained), "pending": .int(left ?? -1)])
    }

    /// Publishes unsent rows (none of a refused topic) in id order, up to eight batches of 1,000 in one transaction:
    /// each batch is read and queued while the previous one's delivery reports come back. Waits up to `timeout` in
    /// all; returns how many were published. When some failed, the ones delivered before them are marked sent, the
    /// failed ones and every one after them carry the error and an attempt more (so nothing overtakes an earlier
    /// event), and the error is thrown. Only the holder of the schema's advisory lock publishes, so the rows need no
    /// row locks.
    @discardableResult
    public func publishBatch(timeout: TimeInterval = 15) throws -> Int {
        condition.lock()
        let skipped = "{" + refused.keys.sorted().joined(separator: ",") + "}"
        condition.unlock()
        let deadline = Date().addingTimeInterval(timeout)
        var failure: KafkaError?
        let published = try pool.withTransaction { connection -> Int in
            let locked: Bool = try connection.first("SELECT pg_try_advisory_xact_lock(hashtext($1)) AS locked",
                                                    ["outbox-relay:" + schema])?["locked"] ?? false
            guard locked else { return 0 }
            let producer = try currentProducer()
            var published = 0
            func settle(_ ids: [Int64], _ queued: Producer.Queued) throws {
                let results = producer.wait(for: queued, timeout: max(0, deadline.timeIntervalSinceNow))
                var sent: [Int64] = []
                var failed: [Int64] = []
                for (id, result) in zip(ids, results) {
                    if result == nil && failure == nil { sent.append(id) } else {
                        failed.append(id)
                        if failure == nil { failure = result ?? KafkaError(message: "not sent: an earlier event failed") }
                    }
                }
                if !sent.isEmpty {
                    try connection.execute("""
                        UPDATE \(schema).outbox SET sent_at = now(), attempts = attempts + 1, last_error = NULL
                        WHERE id = ANY($1::bigint[])
                        """, ["{" + sent.map(String.init).joined(separator: ",") + "}"])
                }
                if !failed.isEmpty {
                    try connection.execute("""
                        UPDATE \(schema).outbox SET attempts = attempts + 1, last_error = $2 WHERE id = ANY($1::bigint[])
                        """, ["{" + failed.map(String.init).joined(separator: ",") + "}", String((failure?.message ?? "not sent").prefix(500))])
                    metrics.increment("outbox_publish_failures_total", by: Double(failed.count),
                                      help: "Outbox events whose publication failed (they are retried).")
                }
                published += sent.count
            }
            var inFlight: (ids: [Int64], queued: Producer.Queued)?
            var after: Int64 = 0
            for _ in 0..<8 where failure == nil {
                let rows = try connection.rows("""
                    SELECT id, topic, key, payload FROM \(schema).outbox
                    WHERE sent_at IS NULL AND id > $2 AND topic <> ALL($1::text[]) ORDER BY id LIMIT 1000
                    """, [skipped, after])
                guard let last = rows.last else { break }
                after = try last["id"]
                let ids: [Int64] = try rows.map { try $0["id"] }
                let queued = producer.enqueue(try rows.map { row in
                    let topic: String = try row["topic"]
                    return OutgoingMessage(topic: topic, key: try row["key"], value: Array(try row["payload", as: String.self].utf8),
                                           header: ("ce_type", topic))
                })
                if let previous = inFlight { try settle(previous.ids, previous.queued) }
                inFlight = (ids, queued)
            }
            if let last = inFlight { try settle(last.ids, last.queued) }
            return published
        }
        if published > 0 {
            metrics.increment("outbox_published_events_total", by: Double(published), help: "Events published from the outbox.")
        }
        if let failure { throw failure }
        return published
    }

    private func cleanup() {
        do {
            // Background upkeep, not a request: a week of sent events may take longer than DB_STATEMENT_TIMEOUT_MS.
            let removed = try pool.withTransaction { c in
                try c.execute("SET LOCAL statement_timeout = 0")
                return try c.execute("DELETE FROM \(schema).outbox WHERE sent_at < now() - make_interval(secs => $1)", [retention])
                    + c.execute("DELETE FROM \(schema).idempotency_keys WHERE created_at < now() - interval '24 hours'")
                    + c.execute("DELETE FROM \(schema).processed_events WHERE processed_at < now() - interval '30 days'")
                // 30 days: at least OUTBOX_RETENTION_HOURS (at most 720), so a republished event is still recognised.
            }
            if removed > 0 { logger.info("removed expired outbox, idempotency and dedup rows", ["rows": .int(removed)]) }
        } catch {
            logger.warn("outbox cleanup failed", ["error": .string(String(describing: error))])
        }
    }

    /// Marks events created since `since` unsent again, so the relay publishes them once more
    /// (consumers de-duplicate by event id). Returns how many.
    public static func republish(pool: Pool, schema: String, since: Date) throws -> Int {
        try pool.withConnection { c in
            try c.execute("UPDATE \(schema).outbox SET sent_at = NULL WHERE created_at >= $1 AND sent_at IS NOT NULL", [since])
        }
    }
}
