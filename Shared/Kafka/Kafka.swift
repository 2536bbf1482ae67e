import CRdKafka
import CShims
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

// MARK: - Configuration and errors

/// Kafka settings shared by producers and consumers; turned into librdkafka's strings in one place.
public struct KafkaConfig: Sendable {
    /// `host:port[,host:port]`.
    public var brokers: String
    /// Shown to the broker; usually the service name.
    public var clientId: String
    /// Consumer group session timeout (Tansu holds a join for about half of it).
    public var sessionTimeoutMs: Int = 6000
    /// Where a consumer group with no committed offsets starts: `earliest` (every event the topic holds) or `latest`.
    public var newGroupStart = "earliest"
    /// Any further librdkafka properties.
    public var extra: [String: String] = [:]
    /// Where librdkafka's own log lines go (level 0–7, message).
    public var log: (@Sendable (Int, String) -> Void)?

    public init(brokers: String, clientId: String) {
        self.brokers = brokers; self.clientId = clientId
    }
}

/// A librdkafka failure.
public struct KafkaError: Error, CustomStringConvertible, Sendable {
    /// librdkafka's error code.
    public let code: Int32
    /// librdkafka's text for it.
    public let message: String
    /// Whether the producer instance is unusable and must be recreated.
    public let isFatal: Bool

    init(code: rd_kafka_resp_err_t, fatal: Bool = false) {
        self.code = code.rawValue
        self.message = String(cString: rd_kafka_err2str(code))
        self.isFatal = fatal
    }

    public init(message: String) {
        self.code = -1; self.message = message; self.isFatal = false
    }

    public var description: String { "Kafka error \(code): \(message)" }
}

/// Holds what librdkafka's callbacks report for one handle.
///
/// Retain: the owning Producer/Consumer keeps a strong reference and passes it to librdkafka
/// unretained as the conf opaque; the handle is destroyed before the owner releases the sink.
final class CallbackSink: Sendable {
    /// Delivery reports by token, and the next token to hand out.
    let reports = Mutex<(results: [Int: KafkaError?], nextToken: Int)>(([:], 1))
    let log: (@Sendable (Int, String) -> Void)?
    /// Set when librdkafka reported that every broker was lost or a topic or partition is unknown, until taken.
    let lostTopics = Atomic<Bool>(false)
    /// When (`DispatchTime` nanoseconds) the brokers leading the assigned partitions last answered, as the statistics
    /// (`statistics.interval.ms`) tell; 0 until they do.
    let answeredAt = Atomic<UInt64>(0)
    init(log: (@Sendable (Int, String) -> Void)?) { self.log = log }

    /// Reads one statistics report: the broker that leads an assigned partition and was heard from least recently
    /// (`rxidle`, microseconds since its connection last received anything, -1 for never) dates the answers.
    func recordStatistics(_ json: UnsafeRawBufferPointer) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(json)) as? [String: Any],
              let brokers = object["brokers"] as? [String: [String: Any]] else { return }
        let idle = brokers.values.filter { ($0["toppars"] as? [String: Any])?.isEmpty == false }.map { ($0["rxidle"] as? Int) ?? -1 }
        guard !idle.isEmpty, !idle.contains(where: { $0 < 0 }), let stalest = idle.max() else { return }
        let now = DispatchTime.now().uptimeNanoseconds
        answeredAt.store(now - min(now, UInt64(stalest) * 1000), ordering: .releasing)
    }

    func record(_ code: rd_kafka_resp_err_t) {
        if [RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN, RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC, RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART,
            RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION].contains(code) {
            lostTopics.store(true, ordering: .releasing)
        }
    }
}

private func makeConf(_ config: KafkaConfig, _ properties: [String: String], sink: CallbackSink) throws -> OpaquePointer {
    guard let conf = rd_kafka_conf_new() else { throw KafkaError(message: "cannot allocate configuration") }
    var all = ["bootstrap.servers": config.brokers, "client.id": config.clientId, "log_level": "4"]
    for (k, v) in properties { all[k] = v }
    for (k, v) in config.extra { all[k] = v }
    var errstr = [CChar](repeating: 0, count: 512)
    for (key, value) in all where rd_kafka_conf_set(conf, key, value, &errstr, errstr.count) != RD_KAFKA_CONF_OK {
        rd_kafka_conf_destroy(conf)
        throw KafkaError(message: "invalid setting \(key): " + String(decoding: errstr.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    rd_kafka_conf_set_opaque(conf, Unmanaged.passUnretained(sink).toOpaque())
    rd_kafka_conf_set_log_cb(conf) { rk, level, facility, message in
        guard let rk, let opaque = rd_kafka_opaque(rk) else { return }
        let sink = Unmanaged<CallbackSink>.fromOpaque(opaque).takeUnretainedValue()
        let text = "\(facility.map { String(cString: $0) } ?? ""): \(message.map { String(cString: $0) } ?? "")"
        sink.log?(Int(level), text)
    }
    rd_kafka_conf_set_error_cb(conf) { rk, code, reason, _ in
        guard let rk, let opaque = rd_kafka_opaque(rk) else { return }
        let sink = Unmanaged<CallbackSink>.fromOpaque(opaque).takeUnretainedValue()
        sink.record(rd_kafka_resp_err_t(rawValue: code))
        sink.log?(4, "kafka error \(code): \(reason.map { String(cString: $0) } ?? "")")
    }
    rd_kafka_conf_set_stats_cb(conf) { rk, json, length, _ in
        guard let rk, let json, let opaque = rd_kafka_opaque(rk) else { return 0 }
        Unmanaged<CallbackSink>.fromOpaque(opaque).takeUnretainedValue().recordStatistics(UnsafeRawBufferPointer(start: json, count: length))
        return 0
    }
    return conf
}

private func makeHandle(_ type: rd_kafka_type_t, _ conf: OpaquePointer) throws -> OpaquePointer {
    var errstr = [CChar](repeating: 0, count: 512)
    guard let handle = rd_kafka_new(type, conf, &errstr, errstr.count) else {
        rd_kafka_conf_destroy(conf)
        throw KafkaError(message: String(decoding: errstr.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return handle
}

// MARK: - Producer

/// One message to publish.
public struct OutgoingMessage: Sendable {
    public var topic: String
    public var key: [UInt8]
    public var value: [UInt8]
    /// The single header `ce_type` of the conventions (name, value).
    public var header: (String, String)?

    public init(topic: String, key: String, value: [UInt8], header: (String, String)? = nil) {
        self.init(topic: topic, key: Array(key.utf8), value: value, header: header)
    }

    public init(topic: String, key: [UInt8], value: [UInt8], header: (String, String)? = nil) {
        self.topic = topic; self.key = key; self.value = value; self.header = header
    }
}

/// An idempotent producer (`acks=all`). `send` blocks until every message is acknowledged or failed.
///
/// `@unchecked Sendable`: librdkafka handles are thread-safe; the token counter lives in the sink's `Mutex`.
public final class Producer: @unchecked Sendable {
    private let handle: OpaquePointer
    private let sink: CallbackSink

    /// Creates the producer; it connects lazily.
    public init(config: KafkaConfig) throws {
        sink = CallbackSink(log: config.log)
        let conf = try makeConf(config, [
            "enable.idempotence": "true", "acks": "all", "linger.ms": "1",
            "message.timeout.ms": "10000", "socket.timeout.ms": "10000",
            // A topic the broker lost must be created again by us, with our partition count, not by the broker's
            // defaults on first produce (keys would move partitions).
            "allow.auto.create.topics": "false",
        ], sink: sink)
        rd_kafka_conf_set_dr_msg_cb(conf) { rk, message, _ in
            guard let rk, let message, let opaque = rd_kafka_opaque(rk) else { return }
            let sink = Unmanaged<CallbackSink>.fromOpaque(opaque).takeUnretainedValue()
            let token = Int(bitPattern: message.pointee._private)
            guard token != 0 else { return }  // fire-and-forget: nobody waits for this report
            let err = message.pointee.err
            var fatal = false
            if err == RD_KAFKA_RESP_ERR__FATAL { fatal = true }
            let result: KafkaError? = err == RD_KAFKA_RESP_ERR_NO_ERROR ? nil : KafkaError(code: err, fatal: fatal)
            sink.reports.withLock { $0.results[token] = .some(result) }
        }
        handle = try makeHandle(RD_KAFKA_PRODUCER, conf)
    }

    deinit {
        rd_kafka_flush(handle, 2000)
        if let reportQueue { rd_kafka_queue_destroy(reportQueue) }
        rd_kafka_destroy(handle)
        if let pipe = reportPipe { close(pipe.0); close(pipe.1) }
    }

    private var reportQueue: OpaquePointer?
    private var reportPipe: (Int32, Int32)?

    /// A descriptor that becomes readable when delivery reports arrive (librdkafka writes a byte to it when its queue
    /// of reports was empty), so a caller can wait for reports and another descriptor in one `poll`. Whoever waits
    /// on it reads it empty. Not thread-safe: made once, by the one thread that waits on it.
    public func reportDescriptor() -> Int32 {
        if let pipe = reportPipe { return pipe.0 }
        var fds: [Int32] = [0, 0]
        guard Glibc.pipe(&fds) == 0 else { return -1 }
        for fd in fds { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
        let queue = rd_kafka_queue_get_main(handle)
        var byte: UInt8 = 1
        rd_kafka_queue_io_event_enable(queue, fds[1], &byte, 1)
        reportQueue = queue
        reportPipe = (fds[0], fds[1])
        return fds[0]
    }

    /// Serves what librdkafka queued for this producer (delivery reports, errors) without waiting. Until its queue is
    /// served, `reportDescriptor` signals nothing more: librdkafka writes to it only when the queue was empty.
    public func serve() {
        rd_kafka_poll(handle, 0)
    }

    /// Drops every queued and in-flight message (their reports say failed), before this producer is replaced.
    public func purge() {
        rd_kafka_purge(handle, Int32(RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT))
        rd_kafka_poll(handle, 0)
    }

    /// The partition count of every topic the broker has.
    public func partitionCounts(timeout: TimeInterval = 5) throws -> [String: Int] {
        try Admin.partitionCounts(handle, timeout: timeout)
    }

    /// The partition count of `topic`, or nil when the broker does not have it.
    public func partitionCount(_ topic: String, timeout: TimeInterval = 5) throws -> Int? {
        try partitionCounts(timeout: timeout)[topic]
    }

    /// True once librdkafka raised a fatal error: this instance can send nothing more and must be replaced.
    public var hasFatalError: Bool { rd_kafka_fatal_error(handle, nil, 0) != RD_KAFKA_RESP_ERR_NO_ERROR }

    /// Messages queued by `enqueue`, whose delivery reports `wait(for:timeout:)` collects.
    public struct Queued: Sendable {
        /// One entry per message: its report token, or the error librdkafka refused it with at once.
        fileprivate let entries: [Result<Int, KafkaError>]
        public var count: Int { entries.count }
    }

    /// Publishes `messages` in order and waits up to `timeout` for their delivery reports.
    /// Returns one entry per message: nil when delivered, else the error.
    public func send(_ messages: [OutgoingMessage], timeout: TimeInterval = 15) -> [KafkaError?] {
        wait(for: enqueue(messages), timeout: timeout)
    }

    /// Queues `messages` in order without waiting, so the caller can prepare the next ones meanwhile.
    public func enqueue(_ messages: [OutgoingMessage]) -> Queued {
        let first = sink.reports.withLock { r in defer { r.nextToken += messages.count }; return r.nextToken }
        return Queued(entries: messages.enumerated().map { offset, m in
            let token = first + offset
            let err = m.key.withUnsafeBytes { key in
                m.value.withUnsafeBytes { value in
                    shim_kafka_produce(handle, m.topic, key.baseAddress, key.count, value.baseAddress, value.count,
                                       m.header?.0, m.header?.1, UnsafeMutableRawPointer(bitPattern: token))
                }
            }
            return err == RD_KAFKA_RESP_ERR_NO_ERROR ? .success(token)
                : .failure(KafkaError(code: err, fatal: err == RD_KAFKA_RESP_ERR__FATAL))
        })
    }

    /// Waits up to `timeout` for the delivery reports of `queued`. Returns one entry per message: nil when
    /// delivered, else the error (a report that did not come in time counts as failed and is dropped when it does).
    public func wait(for queued: Queued, timeout: TimeInterval = 15) -> [KafkaError?] {
        var outcome = [KafkaError?](repeating: nil, count: queued.count)
        var pending: [(token: Int, index: Int)] = []
        for (index, entry) in queued.entries.enumerated() {
            switch entry {
            case .success(let token): pending.append((token, index))
            case .failure(let error): outcome[index] = error
            }
        }
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            sink.reports.withLock { r in
                pending.removeAll { token, index in
                    guard let result = r.results.removeValue(forKey: token) else { return false }
                    outcome[index] = result
                    return true
                }
            }
            // Reports that have come are taken before waiting: a poll with nothing left to report waits its whole time.
            let left = deadline.timeIntervalSinceNow
            if pending.isEmpty || left <= 0 { break }
            rd_kafka_poll(handle, Int32(min(50, max(1, left * 1000))))
        }
        if !pending.isEmpty {
            sink.reports.withLock { r in for (token, _) in pending { r.results.removeValue(forKey: token) } }
            for (_, index) in pending { outcome[index] = KafkaError(message: "delivery timed out") }
        }
        return outcome
    }

    /// The delivery reports of `queued` when every one has come, collected as `wait` does; nil (and nothing taken)
    /// while some are still out. Does not block.
    public func reports(of queued: Queued) -> [KafkaError?]? {
        rd_kafka_poll(handle, 0)
        let complete = sink.reports.withLock { r in
            queued.entries.allSatisfy { entry in
                guard case .success(let token) = entry else { return true }
                return r.results[token] != nil
            }
        }
        return complete ? wait(for: queued, timeout: 0) : nil
    }

    /// Queues a message without waiting for its delivery (for ephemeral data such as positions; the outbox is
    /// the way for anything that must not be lost). Returns false when librdkafka refused it at once.
    @discardableResult
    public func sendWithoutWaiting(_ m: OutgoingMessage) -> Bool {
        let err = m.key.withUnsafeBytes { key in
            m.value.withUnsafeBytes { value in
                shim_kafka_produce(handle, m.topic, key.baseAddress, key.count, value.baseAddress, value.count,
                                   m.header?.0, m.header?.1, nil)
            }
        }
        rd_kafka_poll(handle, 0)
        return err == RD_KAFKA_RESP_ERR_NO_ERROR
    }

    /// Waits for queued messages (at shutdown).
    public func flush(timeout: TimeInterval) {
        rd_kafka_flush(handle, Int32(timeout * 1000))
    }

    /// True when a broker answers a metadata request within `timeout`.
    public func isBrokerReachable(timeout: TimeInterval = 1) -> Bool {
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(handle, 0, nil, &metadata, Int32(timeout * 1000))
        if let metadata { rd_kafka_metadata_destroy(metadata) }
        return err == RD_KAFKA_RESP_ERR_NO_ERROR
    }

    /// Creates the topics that do not exist yet (an existing topic is not an error).
    public func createTopics(_ names: [String], partitions: Int, replicationFactor: Int, timeout: TimeInterval = 10) throws {
        try Admin.createTopics(handle, names, partitions: partitions, replicationFactor: replicationFactor, timeout: timeout)
    }
}

enum Admin {
    static func partitionCounts(_ handle: OpaquePointer, timeout: TimeInterval) throws -> [String: Int] {
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(handle, 1, nil, &metadata, Int32(timeout * 1000))
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else { throw KafkaError(code: err) }
        defer { rd_kafka_metadata_destroy(metadata) }
        var counts: [String: Int] = [:]
        for i in 0..<Int(metadata.pointee.topic_cnt) {
            let topic = metadata.pointee.topics[i]
            if topic.err == RD_KAFKA_RESP_ERR_NO_ERROR { counts[String(cString: topic.topic)] = Int(topic.partition_cnt) }
        }
        return counts
    }

    static func createTopics(_ handle: OpaquePointer, _ names: [String], partitions: Int, replicationFactor: Int,
                             timeout: TimeInterval) throws {
        guard !names.isEmpty else { return }
        var errstr = [CChar](repeating: 0, count: 512)
        var topics: [OpaquePointer?] = []
        for name in names {
            guard let topic = rd_kafka_NewTopic_new(name, Int32(partitions), Int32(replicationFactor), &errstr, errstr.count)
            else { throw KafkaError(message: "invalid topic \(name)") }
            topics.append(topic)
        }
        defer { topics.forEach { rd_kafka_NewTopic_destroy($0) } }
        guard let queue = rd_kafka_queue_new(handle) else { throw KafkaError(message: "cannot create queue") }
        defer { rd_kafka_queue_destroy(queue) }
        let options = rd_kafka_AdminOptions_new(handle, RD_KAFKA_ADMIN_OP_CREATETOPICS)
        defer { rd_kafka_AdminOptions_destroy(options) }
        rd_kafka_AdminOptions_set_operation_timeout(options, Int32(timeout * 1000), &errstr, errstr.count)
        rd_kafka_AdminOptions_set_request_timeout(options, Int32(timeout * 1000), &errstr, errstr.count)
        topics.withUnsafeMutableBufferPointer { rd_kafka_CreateTopics(handle, $0.baseAddress, $0.count, options, queue) }
        guard let event = rd_kafka_queue_poll(queue, Int32(timeout * 1000 + 2000)) else {
            throw KafkaError(message: "creating topics timed out")
        }
        defer { rd_kafka_event_destroy(event) }
        if rd_kafka_event_error(event) != RD_KAFKA_RESP_ERR_NO_ERROR {
            throw KafkaError(code: rd_kafka_event_error(event))
        }
        guard let result = rd_kafka_event_CreateTopics_result(event) else { throw KafkaError(message: "no result") }
        var count = 0
        guard let results = rd_kafka_CreateTopics_result_topics(result, &count) else { return }
        for i in 0..<count {
            let err = rd_kafka_topic_result_error(results[i])
            if err != RD_KAFKA_RESP_ERR_NO_ERROR && err != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS {
                throw KafkaError(code: err)
            }
        }
    }
}

// MARK: - Consumer

/// A message received by a consumer.
public struct IncomingMessage: Sendable {
    public let topic: String
    public let partition: Int32
    public let offset: Int64
    public let key: [UInt8]
    public let value: [UInt8]
}

/// A consumer: either in a group (`subscribe`, offsets committed by the caller after processing)
/// or group-less (`assignFromBeginning`, for broadcast topics every instance must read in full).
/// Not thread-safe: one thread polls it.
///
/// `@unchecked Sendable`: it may be created on one thread and handed to the one that polls it; it is never used
/// from two threads at once.
public final class Consumer: @unchecked Sendable {
    private let handle: OpaquePointer
    private let sink: CallbackSink

    /// Creates a consumer in `groupId`; offsets are committed only by `commit`. `fetchWaitMs` is how long the broker
    /// may hold a fetch that finds nothing new (`fetch.wait.max.ms`, librdkafka's default): Kafka answers a held fetch
    /// as soon as data arrives, but Tansu answers late, the later the longer the hold (`bench/idle.sh`), and each
    /// held fetch costs it CPU: a shorter hold is for readers someone is watching.
    /// `statisticsIntervalMs` above 0: how often librdkafka reports its state, which dates the broker's last answer
    /// (`secondsSinceBrokerAnswered`).
    public init(config: KafkaConfig, groupId: String, fetchWaitMs: Int = 500, statisticsIntervalMs: Int = 0) throws {
        sink = CallbackSink(log: config.log)
        let conf = try makeConf(config, [
            "statistics.interval.ms": String(statisticsIntervalMs),
            "group.id": groupId, "enable.auto.commit": "false", "auto.offset.reset": config.newGroupStart,
            "session.timeout.ms": String(config.sessionTimeoutMs),
            "heartbeat.interval.ms": String(max(100, config.sessionTimeoutMs / 3)),
            "fetch.wait.max.ms": String(fetchWaitMs), "enable.partition.eof": "false",
            // Notice topics created after the subscription (or recreated by a broker that lost its data) quickly.
            "topic.metadata.refresh.interval.ms": "10000",
        ], sink: sink)
        if config.newGroupStart == "latest" { rd_kafka_conf_set_rebalance_cb(conf, positionNewPartitionsAtTheirEnd) }
        handle = try makeHandle(RD_KAFKA_CONSUMER, conf)
        rd_kafka_poll_set_consumer(handle)
    }

    /// Leaves the group, waiting for the broker at most 2 s: leaving is a round trip, but a broker in the middle of a
    /// rebalance (Tansu holds a join for half the session timeout) could keep a stopping service past its grace
    /// period and have it killed. Without an answer it goes anyway; the group notices when the session expires.
    deinit {
        if let queue = rd_kafka_queue_new(handle) {
            if let error = rd_kafka_consumer_close_queue(handle, queue) {
                rd_kafka_error_destroy(error)
            } else {
                // 2 s: with the 2 s in which readiness falls before, a stop stays under a container's 5 s.
                let until = Date().addingTimeInterval(2)
                while rd_kafka_consumer_closed(handle) == 0 && Date() < until {
                    guard let event = rd_kafka_queue_poll(queue, 100) else { continue }
                    if rd_kafka_event_type(event) == RD_KAFKA_EVENT_REBALANCE { rd_kafka_assign(handle, nil) }  // leaving: give all back
                    rd_kafka_event_destroy(event)
                }
                if rd_kafka_consumer_closed(handle) == 0 { sink.log?(4, "left the consumer group without the broker's answer in 2 s") }
            }
            rd_kafka_queue_destroy(queue)
        }
        rd_kafka_destroy_flags(handle, Int32(RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE))
    }

    /// Joins the group for `topics`.
    public func subscribe(_ topics: [String]) throws {
        let list = rd_kafka_topic_partition_list_new(Int32(topics.count))
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for t in topics { rd_kafka_topic_partition_list_add(list, t, RD_KAFKA_PARTITION_UA) }
        let err = rd_kafka_subscribe(handle, list)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(code: err) }
    }

    /// Reads every partition of `topics` from the beginning, without joining a group.
    public func assignFromBeginning(_ topics: [String], timeout: TimeInterval = 10) throws {
        try assign(topics, offset: Int64(RD_KAFKA_OFFSET_BEGINNING), timeout: timeout)
    }

    /// Reads every partition of `topics` from now on, without joining a group. The end of each partition is asked
    /// for here, so every message written after this returns is read (a broker that reports its end early makes
    /// the reader see a few earlier messages again: callers de-duplicate).
    public func assignFromEnd(_ topics: [String], timeout: TimeInterval = 10) throws {
        try assign(topics, offset: nil, timeout: timeout)
    }

    /// `offset` nil: each partition's current end.
    private func assign(_ topics: [String], offset: Int64?, timeout: TimeInterval) throws {
        let list = rd_kafka_topic_partition_list_new(8)
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for name in topics {
            let count = try partitionCount(name, timeout: timeout)
            for p in 0..<count {
                var low: Int64 = 0, high: Int64 = 0
                if offset == nil {
                    let err = rd_kafka_query_watermark_offsets(handle, name, p, &low, &high, Int32(timeout * 1000))
                    if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(code: err) }
                }
                rd_kafka_topic_partition_list_add(list, name, p)?.pointee.offset = offset ?? high
            }
        }
        let err = rd_kafka_assign(handle, list)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(code: err) }
    }

    private func partitionCount(_ topic: String, timeout: TimeInterval) throws -> Int32 {
        guard let topicHandle = rd_kafka_topic_new(handle, topic, nil) else { throw KafkaError(message: "bad topic") }
        defer { rd_kafka_topic_destroy(topicHandle) }
        var metadata: UnsafePointer<rd_kafka_metadata>?
        let err = rd_kafka_metadata(handle, 0, topicHandle, &metadata, Int32(timeout * 1000))
        guard err == RD_KAFKA_RESP_ERR_NO_ERROR, let metadata else { throw KafkaError(code: err) }
        defer { rd_kafka_metadata_destroy(metadata) }
        guard metadata.pointee.topic_cnt > 0, metadata.pointee.topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR,
              metadata.pointee.topics[0].partition_cnt > 0 else {
            throw KafkaError(message: "topic \(topic) has no partitions")
        }
        return metadata.pointee.topics[0].partition_cnt
    }

    /// Number of partitions currently assigned to this consumer.
    public var assignedPartitions: Int {
        var list: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        guard rd_kafka_assignment(handle, &list) == RD_KAFKA_RESP_ERR_NO_ERROR, let list else { return 0 }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        return Int(list.pointee.cnt)
    }

    /// Events in the partitions assigned to this consumer that it has not been handed yet: for each partition, the end
    /// offset the broker last reported (kept by librdkafka from its fetches) less the consumer's position. Partitions
    /// not fetched from or consumed from since the assignment are left out; never below 0 (Tansu reports the end
    /// offset a batch short). Reads librdkafka's own state only, no broker round trip: safe from any thread.
    public var lag: Int {
        var assignment: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?
        guard rd_kafka_assignment(handle, &assignment) == RD_KAFKA_RESP_ERR_NO_ERROR, let list = assignment else { return 0 }
        defer { rd_kafka_topic_partition_list_destroy(list) }
        guard list.pointee.cnt > 0, rd_kafka_position(handle, list) == RD_KAFKA_RESP_ERR_NO_ERROR else { return 0 }
        var total = 0
        for i in 0..<Int(list.pointee.cnt) {
            let element = list.pointee.elems[i]
            var low: Int64 = -1, high: Int64 = -1
            guard element.offset >= 0,
                  rd_kafka_get_watermark_offsets(handle, element.topic, element.partition, &low, &high) == RD_KAFKA_RESP_ERR_NO_ERROR,
                  high >= 0 else { continue }
            total += Int(max(0, high - element.offset))
        }
        return total
    }

    /// Waits up to `timeout` for the next message; nil when none arrived. Transient errors are logged and skipped.
    public func poll(timeout: TimeInterval) -> IncomingMessage? {
        guard let message = rd_kafka_consumer_poll(handle, Int32(timeout * 1000)) else { return nil }
        defer { rd_kafka_message_destroy(message) }
        let m = message.pointee
        if m.err != RD_KAFKA_RESP_ERR_NO_ERROR {
            if m.err != RD_KAFKA_RESP_ERR__PARTITION_EOF {
                sink.record(m.err)
                sink.log?(4, "consume error: \(String(cString: rd_kafka_err2str(m.err)))")
            }
            return nil
        }
        let topic = m.rkt.map { String(cString: rd_kafka_topic_name($0)) } ?? ""
        let key = m.key.map { Array(UnsafeRawBufferPointer(start: $0, count: m.key_len)) } ?? []
        let value = m.payload.map { Array(UnsafeRawBufferPointer(start: $0, count: m.len)) } ?? []
        return IncomingMessage(topic: topic, partition: m.partition, offset: m.offset, key: key, value: value)
    }

    /// Seconds since every broker leading an assigned partition last answered (a fetch comes back at least every
    /// `fetchWaitMs`); infinity until the statistics (`statisticsIntervalMs`) said so once. Safe from any thread.
    public var secondsSinceBrokerAnswered: TimeInterval {
        let at = sink.answeredAt.load(ordering: .acquiring), now = DispatchTime.now().uptimeNanoseconds
        return at == 0 ? .infinity : Double(now - min(at, now)) / 1e9
    }

    /// True when, since the last call, librdkafka reported that every broker was lost or that an assigned topic or
    /// partition no longer exists: a broker that restarted without its data (Tansu does) forgot the topic, and a
    /// reader assigned to partitions must attach again once they are back.
    public func lostItsTopics() -> Bool { sink.lostTopics.exchange(false, ordering: .acquiringAndReleasing) }

    /// Commits each of `messages` as processed (the last of each partition counts): the group resumes after them.
    /// Without `wait`, the request goes out and this returns at once; a commit that fails then (the partition went to
    /// another member meanwhile) only means those messages come again.
    public func commit(_ messages: [IncomingMessage], wait: Bool) throws {
        var last: [String: IncomingMessage] = [:]
        for message in messages where message.offset >= last["\(message.partition) \(message.topic)"]?.offset ?? -1 {
            last["\(message.partition) \(message.topic)"] = message
        }
        guard !last.isEmpty else { return }
        let list = rd_kafka_topic_partition_list_new(Int32(last.count))
        defer { rd_kafka_topic_partition_list_destroy(list) }
        for message in last.values {
            rd_kafka_topic_partition_list_add(list, message.topic, message.partition)?.pointee.offset = message.offset + 1
        }
        let err = rd_kafka_commit(handle, list, wait ? 0 : 1)
        if err != RD_KAFKA_RESP_ERR_NO_ERROR { throw KafkaError(code: err) }
    }
}

/// The rebalance callback of a group that starts at `latest`: each partition the group has committed nothing for is
/// given the end the broker reports now, before the assignment is made. librdkafka would otherwise assign first and
/// look the end up afterwards, and a message written in between (say, by a test that waited for the assignment)
/// was skipped. What cannot be had within 5 s in all (a committed offset, an end) librdkafka looks up as before, and
/// is logged. The ends are asked side by side: one after another, a group of 51 partitions on a busy broker spent the
/// 5 s on the first few dozen, and a message written to one of the rest just after the assignment was skipped.
/// Called on the polling thread; eager assignors only (this kit sets no cooperative one).
private func positionNewPartitionsAtTheirEnd(_ rk: OpaquePointer?, _ err: rd_kafka_resp_err_t,
                                             _ partitions: UnsafeMutablePointer<rd_kafka_topic_partition_list_t>?,
                                             _ opaque: UnsafeMutableRawPointer?) {
    guard let rk else { return }
    guard err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS, let partitions else { rd_kafka_assign(rk, nil); return }
    let deadline = Date().addingTimeInterval(5)
    @Sendable func left() -> Int32 { Int32(max(0, deadline.timeIntervalSinceNow) * 1000) }
    if rd_kafka_committed(rk, partitions, left()) == RD_KAFKA_RESP_ERR_NO_ERROR {
        let fresh = (0..<Int(partitions.pointee.cnt)).filter {
            partitions.pointee.elems[$0].offset == Int64(RD_KAFKA_OFFSET_INVALID) && partitions.pointee.elems[$0].err == RD_KAFKA_RESP_ERR_NO_ERROR
        }
        // `@unchecked Sendable`: librdkafka's handle may be used from any thread.
        struct Handle: @unchecked Sendable { let rk: OpaquePointer }
        let handle = Handle(rk: rk), ends = Mutex<[Int: Int64]>([:]), asked = DispatchGroup()
        for i in fresh {
            let topic = String(cString: partitions.pointee.elems[i].topic), partition = partitions.pointee.elems[i].partition
            asked.enter()
            Thread {
                var low: Int64 = 0, high: Int64 = 0
                if rd_kafka_query_watermark_offsets(handle.rk, topic, partition, &low, &high, left()) == RD_KAFKA_RESP_ERR_NO_ERROR {
                    ends.withLock { $0[i] = high }
                }
                asked.leave()
            }.start()
        }
        _ = asked.wait(timeout: .now() + .milliseconds(Int(left()) + 1000))
        let known = ends.withLock { $0 }
        for (i, end) in known { partitions.pointee.elems[i].offset = end }
        if known.count < fresh.count, let opaque {
            Unmanaged<CallbackSink>.fromOpaque(opaque).takeUnretainedValue().log?(4, """
                \(fresh.count - known.count) of \(fresh.count) new partitions got no end from the broker in 5 s: they start \
                where librdkafka finds the end after the assignment, and a message written meanwhile is skipped
                """)
        }
    }
    rd_kafka_assign(rk, partitions)
}
