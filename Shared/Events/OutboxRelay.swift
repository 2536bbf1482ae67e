import Foundation
import Kafka
import Models
import Postgres
import Runtime
import Web

/// Publishes the outbox's events in commit order with the idempotent producer, reading them from PostgreSQL's
/// write-ahead log through logical decoding: an outbox row is written once and never updated.
///
/// Each service has a publication of its outbox's inserts (`<schema>_outbox`) and a replication slot
/// (`<database>_<schema>_outbox`). The relay streams the slot with `pgoutput` and confirms a transaction's position
/// only once the broker acknowledged every event of it and of every transaction before it, so a restart, a failover to
/// another instance or a broker outage streams again from the first unacknowledged transaction: nothing is lost and
/// each key's events arrive in commit order (a replay may repeat some; consumers de-duplicate by event id). Only one
/// connection can stream a slot: the other instances wait and take over when it goes.
///
/// While no relay reads the slot, PostgreSQL keeps the WAL from its position on (`postgres_replication_slot_*` and the
/// ReplicationSlotWALHeld alert). When the slot is missing (the first start, or a database restored or failed over
/// without it), the relay creates it and publishes every row the outbox holds at that point first: consumers skip
/// the ones they had.
///
/// It recovers without a restart: the producer is replaced after a fatal error or two failed batches in a row (a
/// broker that restarted without its data no longer knows the idempotent producer, whose messages then time out for
/// ever); missing topics are created with the configured partitions; and nothing is produced to a topic whose
/// partition count differs from the configured one (its keys would move partitions): the stream holds there and the
/// log names the topic. Readiness says the outbox is `stuck` when an event waits longer than
/// `OUTBOX_MAX_DELAY_SECONDS`, or no instance has read the slot for that long.
///
/// `@unchecked Sendable`: mutable state is guarded by `condition`; `topics` changes only before the group starts.
public final class OutboxRelay: BackgroundService, @unchecked Sendable {
    public var name: String { "outbox-relay" }
    private let pool: Pool
    private let databaseURL: String
    private let schema: String
    private let kafka: KafkaConfig
    private let logger: Logger
    private let metrics: Metrics
    private let retention: TimeInterval
    private let maxDelay: TimeInterval
    private let condition = NSCondition()
    private var producer: Producer?
    /// Topics with another partition count than configured, and the count found; nil until the counts were read once,
    /// and nothing is published before then.
    private var refused: [String: Int]?
    private var topics: TopicSettings
    /// When the oldest event this instance received and the broker has not acknowledged was committed.
    private var oldestPending: Date?
    /// Since when this instance has seen no relay read the slot.
    private var unreadSince: Date?
    private var slotName: String?

    /// Events published in one batch, and batches waiting for their delivery reports at once.
    static let batchSize = 1000, batchesInFlight = 32
    /// Seconds a batch may wait for its delivery reports before it is waited for once more and then counts as failed:
    /// well after librdkafka's own timeouts (10 s to deliver, 10 s a request), which report a failure themselves.
    static let reportPatience: TimeInterval = 30

    /// The topics a service uses and how to create them.
    public struct TopicSettings: Sendable {
        public var names: [String]
        public var partitions: Int
        public var replicationFactor: Int
        public init(names: [String], partitions: Int, replicationFactor: Int) {
            self.names = names; self.partitions = partitions; self.replicationFactor = replicationFactor
        }
    }

    public init(pool: Pool, databaseURL: String, schema: String, kafka: KafkaConfig, topics: TopicSettings, retentionHours: Int,
                maxDelaySeconds: Int = 60, logger: Logger, metrics: Metrics) {
        self.pool = pool; self.databaseURL = databaseURL; self.schema = schema; self.kafka = kafka; self.logger = logger
        self.metrics = metrics
        self.topics = topics
        self.retention = TimeInterval(retentionHours) * 3600
        self.maxDelay = TimeInterval(maxDelaySeconds)
        metrics.addGauges(help: ["outbox_oldest_pending_age_seconds": "Age of the oldest event this instance's relay holds unacknowledged (0: none).",
                                 "outbox_unconfirmed_wal_bytes": "Write-ahead log past the outbox slot's confirmed position."]) { [weak self] in
            guard let self else { return [] }
            var samples = [("outbox_oldest_pending_age_seconds", "", self.pendingAge)]
            if let slot = try? self.slot(), let row = try? self.pool.withConnection({ c in
                try c.first("""
                    SELECT COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::float8 AS behind
                    FROM pg_replication_slots WHERE slot_name = \(slot)
                    """)
            }), let behind = try? row["behind", as: Double.self] {
                samples.append(("outbox_unconfirmed_wal_bytes", "", behind))
            }
            return samples
        }
    }

    /// The publication of the outbox's inserts, made by `Platform.streamedOutbox`.
    var publication: String { schema + "_outbox" }

    /// The slot's name: unique in the cluster, so it names the database too.
    func slot() throws -> String {
        condition.lock()
        if let slotName { condition.unlock(); return slotName }
        condition.unlock()
        let database: String = try pool.withConnection { try $0.first("SELECT current_database() AS d")!["d"] }
        let name = String(String((database + "_" + schema + "_outbox").lowercased().map { $0.isLetter || $0.isNumber ? $0 : "_" })
            .suffix(63))
        condition.lock(); slotName = name; condition.unlock()
        return name
    }

    var pendingAge: Double {
        condition.lock(); defer { condition.unlock() }
        return oldestPending.map { max(0, Date().timeIntervalSince($0)) } ?? 0
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
        for (topic, found) in wrong.sorted(by: { $0.key < $1.key }) where before?[topic] != found {
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

    /// Whether events wait too long: this instance holds one unacknowledged for longer than
    /// `OUTBOX_MAX_DELAY_SECONDS` (as the events of a refused topic soon are), or no instance has read the slot for that
    /// long. Throws when the database cannot say.
    public func isStuck() throws -> Bool {
        let slot = try slot()
        let active = try pool.withConnection { c in
            try c.first("SELECT active FROM pg_replication_slots WHERE slot_name = \(slot)")?["active", as: Bool.self]
        } ?? false
        let now = Date()
        condition.lock(); defer { condition.unlock() }
        if active { unreadSince = nil } else if unreadSince == nil { unreadSince = now }
        let waited = max(oldestPending.map { now.timeIntervalSince($0) } ?? 0, unreadSince.map { now.timeIntervalSince($0) } ?? 0)
        return waited > maxDelay
    }

    /// A stream that cannot go on: the connection to PostgreSQL or the broker failed, or an event is for a refused topic.
    struct Interrupted: Error, CustomStringConvertible {
        let description: String
        let kafka: Bool
    }

    /// Streams until stopped, then until what was committed before the stop is published or the stop's deadline
    /// (less a second for the services stopped after it) passes.
    public func run(until cancellation: Cancellation) {
        var backoff: TimeInterval = 0
        var failedBatches = 0
        var busyLogged = false
        while !cancellation.isCancelled {
            do {
                try stream(until: cancellation) { failedBatches = 0; backoff = 0 }
                break  // stopped and drained
            } catch let error as PostgresError where error.sqlState == "55006" {
                // Another instance streams the slot: wait to take over when it goes.
                if !busyLogged { logger.info("another instance relays the outbox; standing by") }
                busyLogged = true
                condition.lock(); oldestPending = nil; condition.unlock()
                backoff = 0
                if cancellation.isCancelled { break }
            } catch {
                busyLogged = false
                backoff = min(max(backoff * 2, 0.5), 30)
                logger.warn("outbox relay failed; retrying", ["error": .string(String(describing: error)),
                                                             "retryInSeconds": .double(backoff)])
                if (error as? Interrupted)?.kafka == true || error is KafkaError {
                    failedBatches += 1
                    if failedBatches >= 2 { replaceProducer(reason: "\(failedBatches) failed batches in a row") }
                    // A broker that lost its data would otherwise auto-create topics with its own defaults.
                    _ = try? createTopics()
                    condition.lock(); lastTopicCheck = Date(); condition.unlock()
                }
                if cancellation.isCancelled { break }
            }
            upkeep()
            cancellation.sleep(backoff > 0 ? backoff : 1)
        }
    }

    private var lastTopicCheck = Date(), lastCleanup = Date.distantPast

    /// What the relay does now and then, streaming or not: every 30 s the topics are created where missing (a broker
    /// that lost its data) and checked (a refused topic may have been fixed); every 10 minutes expired rows go.
    private func upkeep() {
        let now = Date()
        condition.lock()
        let (checkTopics, clean) = (now.timeIntervalSince(lastTopicCheck) > 30, now.timeIntervalSince(lastCleanup) > 600)
        if checkTopics { lastTopicCheck = now }
        if clean { lastCleanup = now }
        condition.unlock()
        if checkTopics { _ = try? createTopics() }
        if clean { cleanup() }
    }

    /// Streams the slot (creating it when missing) and publishes what it decodes, until stopped and drained.
    /// `healthy` runs after each acknowledged batch.
    private func stream(until cancellation: Cancellation, healthy: () -> Void) throws {
        // The service's start checks the topics beside this; an event published before then could go to a topic
        // whose partitions would move its key.
        condition.lock(); let checked = refused != nil; condition.unlock()
        if !checked { try createTopics() }
        let slot = try slot()
        let connection = try ReplicationConnection(url: databaseURL, applicationName: "\(schema)-outbox-relay")
        try prepareSlot(slot, on: connection)
        try connection.startStreaming(slot: slot, publication: publication)
        // Nothing of an earlier stream is in flight now: what it left unacknowledged comes again from the slot, and its
        // BEGIN sets the time again. Kept, a time whose events were then acknowledged would say an idle outbox is stuck.
        condition.lock(); oldestPending = nil; condition.unlock()
        logger.info("relaying the outbox from the write-ahead log", ["slot": .string(slot)])
        let producer = try currentProducer()
        let wake = producer.reportDescriptor()
        condition.lock()
        var skipped = refused ?? [:]
        condition.unlock()
        var nextUpkeep = Date()

        struct Batch { var queued: Producer.Queued; var confirmAfter: LSN?; var firstCommit: Date; var sent = Date() }
        var inFlight: [Batch] = []
        var messages: [OutgoingMessage] = []
        var batchCommit: Date?
        var outbox: (id: UInt32, topic: Int, key: Int, payload: Int)?
        var lastTopic: (bytes: [UInt8], text: String) = ([], "")
        var inTransaction = false
        var commitTime = Date()
        var pendingConfirm: LSN?   // the last commit read and not yet attached to a batch
        var confirmed: LSN = 0, lastStatus = Date.distantPast, lastAsked = Date()
        var drainTo: LSN?          // when stopping: the WAL position to publish up to

        func noteOldest() {
            let oldest = inFlight.first?.firstCommit ?? batchCommit ?? (inTransaction ? commitTime : nil)
            condition.lock(); oldestPending = oldest; condition.unlock()
        }
        func flush() {
            guard !messages.isEmpty else { return }
            inFlight.append(Batch(queued: producer.enqueue(messages), confirmAfter: pendingConfirm, firstCommit: batchCommit ?? commitTime))
            messages.removeAll(keepingCapacity: true)
            pendingConfirm = nil
            batchCommit = nil
        }
        /// Collects the oldest batch's reports: waiting for them, or only when they have all come (`blocking` false;
        /// returns false then when they have not).
        @discardableResult
        func settleOldest(blocking: Bool = true) throws -> Bool {
            guard let results = blocking ? producer.wait(for: inFlight[0].queued, timeout: 15) : producer.reports(of: inFlight[0].queued)
            else { return false }
            let batch = inFlight.removeFirst()
            if let failure = results.first(where: { $0 != nil }) ?? nil {
                metrics.increment("outbox_publish_failures_total", by: Double(results.count),
                                  help: "Outbox events whose publication failed (they are retried).")
                inFlight.forEach { _ = producer.wait(for: $0.queued, timeout: 0) }
                throw Interrupted(description: "publishing failed: \(failure)", kafka: true)
            }
            metrics.increment("outbox_published_events_total", by: Double(results.count), help: "Events published from the outbox.")
            if let lsn = batch.confirmAfter { try confirm(lsn) }
            noteOldest()
            healthy()
            return true
        }
        /// `every`: at most one status update in that many seconds (by default 20 a second, and always when nothing is
        /// left in flight); what is not sent now goes with the next one.
        func confirm(_ lsn: LSN, force: Bool = false, every: TimeInterval? = nil) throws {
            guard lsn > confirmed else { return }
            confirmed = lsn
            let due = every.map { Date().timeIntervalSince(lastStatus) > $0 } ?? (inFlight.isEmpty || Date().timeIntervalSince(lastStatus) > 0.05)
            if force || due {
                try connection.confirm(confirmed)
                lastStatus = Date()
            }
        }
        var idle: Bool { inFlight.isEmpty && messages.isEmpty && !inTransaction }
        /// Serves the producer's queue, collects the reports that have come (ending the stream when the oldest
        /// batch's never come, `reportPatience`), and confirms a commit that waited for nothing else.
        func collect() throws {
            producer.serve()
            while !inFlight.isEmpty, try settleOldest(blocking: false) {}
            if let oldest = inFlight.first, Date().timeIntervalSince(oldest.sent) > Self.reportPatience { try settleOldest() }
            if let lsn = pendingConfirm, idle { try confirm(lsn, force: true); pendingConfirm = nil }
        }

        while true {
            if messages.isEmpty, Date() >= nextUpkeep {
                upkeep()
                condition.lock(); skipped = refused ?? [:]; condition.unlock()
                nextUpkeep = Date().addingTimeInterval(1)
            }
            if cancellation.isCancelled {
                if drainTo == nil {
                    drainTo = try pool.withConnection { c in try c.first("SELECT pg_current_wal_lsn()::text AS lsn")?["lsn", as: String.self] }
                        .flatMap { LSN(walText: $0) } ?? 0
                    try connection.confirm(confirmed, replyRequested: true)
                }
                if idle && confirmed >= drainTo! {
                    logger.info("outbox drained", ["confirmed": .string(confirmed.walText)])
                    break
                }
                if Date() > cancellation.deadline.addingTimeInterval(-1) {
                    logger.warn("stopped before the outbox was drained; the next relay goes on from its last confirmed event",
                                ["confirmed": .string(confirmed.walText)])
                    break
                }
            }
            // A batch being read is sent as soon as nothing more has been decoded; with batches in flight, their
            // reports wake the wait as a message does.
            guard let message = try connection.next(timeout: !messages.isEmpty ? 0 : inFlight.isEmpty ? 0.25 : 0.1, wake: wake) else {
                // Nothing more decoded for now: send what was read, and collect the reports that have come.
                flush()
                try collect()
                // Now and then, ask how far the server has looked: with nothing of ours in between, that is confirmed
                // too, so the slot keeps no WAL for other schemas' changes.
                if idle && (Date().timeIntervalSince(lastAsked) > 5 || drainTo != nil) {
                    try connection.confirm(confirmed, replyRequested: true)
                    lastAsked = Date()
                }
                continue
            }
            switch message {
            case .keepalive(let walEnd, let replyRequested):
                // Other databases' commits bring keepalives without a pause of the stream's timeout between them, and
                // a report's wake-up may come with one or not at all (librdkafka signals only a queue that was empty,
                // and errors of a broker outage stay queued while the relay is idle): the queue is served and the
                // reports collected here too, or a relay with nothing more of its own to send would not confirm its
                // last batch (and be stuck) while they last.
                try collect()
                if idle && pendingConfirm == nil && walEnd > confirmed {
                    // The server sends one after each wake-up that decoded past our position: after every commit of
                    // any database. Answering each woke it once more, six relays over; the position it tells of goes
                    // with the next status, a second on at most.
                    try confirm(walEnd, force: replyRequested, every: 1)
                } else if replyRequested {
                    try connection.confirm(confirmed)
                }
            case .data(_, let bytes):
                switch try PgOutputMessage(bytes) {
                case .begin(let time):
                    inTransaction = true
                    commitTime = time
                    condition.lock(); if oldestPending == nil { oldestPending = time }; condition.unlock()
                case .relation(let id, let relationSchema, let table, let columns):
                    if relationSchema == schema, table == "outbox", let topic = columns.firstIndex(of: "topic"),
                       let key = columns.firstIndex(of: "key"), let payload = columns.firstIndex(of: "payload") {
                        outbox = (id, topic, key, payload)
                    }
                case .insert(let relation, let values):
                    guard let outbox, relation == outbox.id, let topicBytes = values[outbox.topic], let key = values[outbox.key],
                          let payload = values[outbox.payload] else { continue }
                    if topicBytes != lastTopic.bytes { lastTopic = (topicBytes, String(decoding: topicBytes, as: UTF8.self)) }
                    let topic = lastTopic.text
                    if let found = skipped[topic] {
                        throw Interrupted(description: "an event for \(topic), whose partition count \(found) is not KAFKA_TOPIC_PARTITIONS, holds the outbox", kafka: false)
                    }
                    if batchCommit == nil { batchCommit = commitTime }
                    messages.append(OutgoingMessage(topic: topic, key: key, value: payload, header: ("ce_type", topic)))
                    if messages.count >= Self.batchSize {
                        flush()
                        if inFlight.count >= Self.batchesInFlight { try settleOldest() }
                    }
                case .commit(let end):
                    inTransaction = false
                    if !messages.isEmpty {
                        pendingConfirm = end
                    } else if !inFlight.isEmpty {
                        inFlight[inFlight.count - 1].confirmAfter = end
                    } else {
                        try confirm(end)
                    }
                    noteOldest()
                case .other:
                    break
                }
            }
        }
        condition.lock(); oldestPending = nil; condition.unlock()
    }

    /// Makes sure the slot exists and what the outbox held when it was made has been published: when the slot is
    /// missing, or was made and the publishing of that snapshot did not finish, it is made again with a snapshot of
    /// the outbox, whose rows are published in order before anything is streamed.
    private func prepareSlot(_ slot: String, on connection: ReplicationConnection) throws {
        let recorded = { (c: Connection) in
            try c.first("SELECT 1 AS x FROM pg_replication_slots WHERE slot_name = \(slot)") != nil
                && c.first("SELECT 1 AS x FROM \(unescaped: self.schema).outbox_slot WHERE name = \(slot)") != nil
        }
        if try pool.withConnection(recorded) { return }
        // One instance at a time makes the slot: two would each publish a snapshot, and one could drop the other's.
        try pool.withConnection { c in
            guard try c.first("SELECT pg_try_advisory_lock(hashtext(\("outbox-slot:" + slot))) AS locked")?["locked", as: Bool.self] == true else {
                throw PostgresError.fromServer(sqlState: "55006", constraint: nil, message: "another instance makes the slot")
            }
            defer { _ = try? c.execute("SELECT pg_advisory_unlock(hashtext(\("outbox-slot:" + slot)))") }
            if try recorded(c) { return }
            try makeSlot(slot, on: connection, recording: c)
        }
    }

    private func makeSlot(_ slot: String, on connection: ReplicationConnection, recording c: Connection) throws {
        if try c.first("SELECT 1 AS x FROM pg_replication_slots WHERE slot_name = \(slot)") != nil {
            try connection.simpleQuery("DROP_REPLICATION_SLOT \(slot) WAIT")
        }
        try c.execute("DELETE FROM \(unescaped: schema).outbox_slot WHERE name = \(slot)")
        let wal = try connection.simpleQuery("SHOW wal_level").first?.first ?? nil
        guard wal == "logical" else {
            throw Interrupted(description: "PostgreSQL's wal_level is \(wal ?? "unknown"), not logical: the outbox is read through logical decoding (see docs/operations.md)", kafka: false)
        }
        try connection.simpleQuery("BEGIN ISOLATION LEVEL REPEATABLE READ")
        try connection.simpleQuery("CREATE_REPLICATION_SLOT \(slot) LOGICAL pgoutput (SNAPSHOT 'use')")
        try connection.simpleQuery("DECLARE held NO SCROLL CURSOR FOR SELECT topic, key, payload FROM \(schema).outbox ORDER BY id")
        let producer = try currentProducer()
        condition.lock(); let refused = self.refused ?? [:]; condition.unlock()
        var published = 0
        while true {
            let rows = try connection.simpleQuery("FETCH \(Self.batchSize) FROM held").map { ($0[0] ?? "", $0[1] ?? "", $0[2] ?? "") }
            if rows.isEmpty { break }
            // As when streaming: an event for a refused topic holds the outbox (the slot is made again, from the start,
            // once the topic is fixed: its record below is not written).
            let held = rows.firstIndex { refused[$0.0] != nil }
            try publish(Array(rows[..<(held ?? rows.count)]), with: producer)
            if let held {
                let topic = rows[held].0
                throw Interrupted(description: "an event for \(topic), whose partition count \(refused[topic]!) is not KAFKA_TOPIC_PARTITIONS, holds the outbox", kafka: false)
            }
            published += rows.count
        }
        try connection.simpleQuery("COMMIT")
        try c.execute("INSERT INTO \(unescaped: schema).outbox_slot (name) VALUES (\(slot))")
        logger.info("made the outbox's replication slot; published what the outbox held", ["slot": .string(slot), "events": .int(published)])
    }

    private func cleanup() {
        do {
            // Background upkeep, not a request: a week of events may take longer than DB_STATEMENT_TIMEOUT_MS.
            let removed = try pool.withTransaction { c in
                try c.execute("SET LOCAL statement_timeout = 0")
                return try c.execute("DELETE FROM \(unescaped: schema).outbox WHERE created_at < now() - make_interval(secs => \(retention))")
                    + c.execute("DELETE FROM \(unescaped: schema).idempotency_keys WHERE created_at < now() - make_interval(hours => \(Idempotency.keptHours))")
                    + c.execute("DELETE FROM \(unescaped: schema).processed_events WHERE processed_at < now() - interval '30 days'")
                // 30 days: at least OUTBOX_RETENTION_HOURS (at most 720), so a republished event is still recognised.
            }
            if removed > 0 { logger.info("removed expired outbox, idempotency and dedup rows", ["rows": .int(removed)]) }
        } catch {
            logger.warn("outbox cleanup failed", ["error": .string(String(describing: error))])
        }
    }

    /// Publishes the events created since `since` once more, in order, and waits for the broker to acknowledge them
    /// (consumers de-duplicate by event id). Events of a refused topic are left out, and the log names the topic.
    /// Returns how many were published.
    public func republish(since: Date) throws -> Int {
        let refused = try createTopics()
        let producer = try currentProducer()
        var after: Int64 = 0
        var published = 0
        while true {
            let rows = try pool.withConnection { c in
                try c.rows("""
                    SELECT id, topic, key, payload FROM \(unescaped: schema).outbox WHERE created_at >= \(since) AND id > \(after)
                    ORDER BY id LIMIT \(unescaped: String(Self.batchSize))
                    """)
            }
            guard let last = rows.last else { return published }
            after = try last["id"]
            let events = try rows.map { row in (topic: try row["topic", as: String.self], key: try row["key", as: String.self],
                                                payload: try row["payload", as: String.self]) }
                .filter { refused[$0.topic] == nil }
            try publish(events, with: producer)
            published += events.count
        }
    }

    /// Publishes outbox rows in order and waits for the broker to acknowledge them; throws the first failure.
    private func publish(_ rows: [(topic: String, key: String, payload: String)], with producer: Producer) throws {
        let messages = rows.map { OutgoingMessage(topic: $0.topic, key: $0.key, value: Array($0.payload.utf8), header: ("ce_type", $0.topic)) }
        if let failure = producer.send(messages).first(where: { $0 != nil }) ?? nil { throw failure }
    }
}
