import Events
import Foundation
import Kafka
import Models
import Postgres
import Runtime
import XCTest

/// The kit's consumer against the real broker and database: once-only handling, dead letters, resumption.
final class ConsumerTests: XCTestCase {
    var database: TestDatabase!
    var pool: Pool!
    override func setUpWithError() throws {
        database = try TestDatabase()
        pool = Pool(url: database.url, maxSize: 4)
        try Migrator.migrate(pool: pool, schema: "kit", migrations: [
            Platform.migration, Migration(2, "handled", "CREATE TABLE handled (event_id uuid, subject text)")])
    }
    override func tearDown() { pool?.close(); database?.drop() }

    func envelope(id: String = UUID.v7().lowercased, subject: String) -> [UInt8] {
        Array(#"{"specversion":"1.0","id":"\#(id)","source":"/test","type":"test.happened","time":"2026-11-30T00:00:00.000Z","subject":"\#(subject)","datacontenttype":"application/json","dataschema":"urn:test","data":{}}"#.utf8)
    }

    func testEventsAreHandledOnceAndFailuresGoToTheDeadLetterTopic() throws {
        let topic = try topic("test.happened")
        let calls = LockedBox<Int>()
        calls.set(0)
        func consumer() -> EventConsumer {
            self.consumer(of: topic) { event, c in
                calls.update { $0 = ($0 ?? 0) + 1 }
                if event.subject == "boom" { throw TestFailure("handler failure") }
                try c.execute("INSERT INTO kit.handled (event_id, subject) VALUES ($1::uuid, $2)", [event.id, event.subject])
            }
        }
        let repeated = UUID.v7().lowercased
        let results = producer.send([
            OutgoingMessage(topic: topic, key: "k", value: envelope(id: repeated, subject: "first")),
            OutgoingMessage(topic: topic, key: "k", value: envelope(id: repeated, subject: "first")),  // a redelivery
            OutgoingMessage(topic: topic, key: "k", value: envelope(subject: "second")),
            OutgoingMessage(topic: topic, key: "k", value: Array("not a cloud event".utf8)),
            OutgoingMessage(topic: topic, key: "k", value: envelope(subject: "boom")),
        ])
        XCTAssertEqual(results.compactMap { $0 }.count, 0)

        let dlq = try EventProbe(topics: [topic + ".dlq"])
        let first = ServiceGroup(logger: logger) { _, _ in }
        first.start(consumer())
        // The failing event comes last in the partition: once it is dead-lettered, everything before it is done.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60) {
            dlq.drain(0.1)
            return dlq.seen.contains { $0["subject"] as? String == "boom" }
        }, "the failing event is dead-lettered after its retries")
        XCTAssertEqual(try handledCount(), 2, "the repeated event id is handled once")
        first.stop(deadline: Date().addingTimeInterval(10))

        // A new consumer in the same group resumes after the committed offsets.
        let callsBefore = calls.get() ?? 0
        XCTAssertNil(producer.send([OutgoingMessage(topic: topic, key: "k", value: envelope(subject: "third"))]).first!)
        let second = ServiceGroup(logger: logger) { _, _ in }
        second.start(consumer())
        defer { second.stop(deadline: Date().addingTimeInterval(10)) }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60) { (try? self.handledCount()) == 3 })
        XCTAssertEqual(calls.get(), callsBefore + 1, "nothing already committed is handled again")
    }

    func testWaitingEventsShareATransactionAndAFailingOneHoldsBackOnlyItself() throws {
        let topic = try topic("test.batched")
        try pool.withConnection { _ = try $0.execute("CREATE TABLE kit.ordered (n serial, subject text, tx bigint DEFAULT txid_current())") }
        let sent = (0..<200).map { $0 == 120 ? "boom" : "e\($0)" }
        XCTAssertEqual(producer.send(sent.map { OutgoingMessage(topic: topic, key: "k", value: envelope(subject: $0)) }).compactMap { $0 }.count, 0)
        let dlq = try EventProbe(topics: [topic + ".dlq"])
        let group = ServiceGroup(logger: logger) { _, _ in }
        group.start(consumer(of: topic) { event, c in
            if event.subject == "boom" { throw TestFailure("handler failure") }
            try c.execute("INSERT INTO kit.ordered (subject) VALUES ($1)", [event.subject])
        })
        defer { group.stop(deadline: Date().addingTimeInterval(10)) }
        func rows() throws -> [(subject: String, tx: Int)] {
            try pool.withConnection { try $0.rows("SELECT subject, tx FROM kit.ordered ORDER BY n").map { (try $0["subject"], try $0["tx"]) } }
        }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60) {
            dlq.drain(0.1)
            return dlq.seen.contains { $0["subject"] as? String == "boom" } && (try? rows().count) == 199
        }, "every event but the failing one is handled, and that one dead-lettered")
        let handled = try rows()
        XCTAssertEqual(handled.map(\.subject), sent.filter { $0 != "boom" }, "each handled once, in the partition's order")
        XCTAssertLessThan(Set(handled.map(\.tx)).count, 50, "the waiting events were handled in a transaction each")
    }

    func testTheLagIsWhatTheConsumerHasNotProcessedYet() throws {
        let topic = try topic("test.lagging")
        // The handler holds the first event until released: the other 39 wait behind it.
        let released = Gate()
        let consumer = consumer(of: topic) { event, c in
            _ = released.wait(until: Date().addingTimeInterval(60))
            try c.execute("INSERT INTO kit.handled (event_id, subject) VALUES ($1::uuid, $2)", [event.id, event.subject])
        }
        XCTAssertEqual(producer.send((0..<40).map { OutgoingMessage(topic: topic, key: "k", value: envelope(subject: "e\($0)")) })
            .compactMap { $0 }.count, 0)
        let group = ServiceGroup(logger: logger) { _, _ in }
        group.start(consumer)
        defer { group.stop(deadline: Date().addingTimeInterval(10)) }
        // The broker's end offset may be a batch short (Tansu): at least most of them.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { consumer.lag >= 30 }, "lag \(consumer.lag) while the handler is held")
        released.open()
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { (try? self.handledCount()) == 40 && consumer.lag == 0 },
                      "lag \(consumer.lag) once all 40 are handled")
    }

    func testAGroupThatStartsAtTheEndReadsWhatIsWrittenOnceItHoldsItsPartitions() throws {
        // A new group at `latest` (notify's first deployment, the tests' notify): what was written before it joined is
        // history; what is written the moment it holds its partitions is its to read. (Left to itself, librdkafka
        // assigns first and looks the end up some 100 ms later: what came in between was skipped.)
        let topic = try topic("test.latest")
        XCTAssertEqual(producer.send((0..<5).map { OutgoingMessage(topic: topic, key: "k", value: envelope(subject: "before\($0)")) })
            .compactMap { $0 }.count, 0)
        var config = kafka
        config.newGroupStart = "latest"
        let consumer = try Consumer(config: config, groupId: "group-\(topic)", fetchWaitMs: 100)
        try consumer.subscribe([topic])
        let deadline = Date().addingTimeInterval(30)
        while consumer.assignedPartitions == 0 && Date() < deadline { _ = consumer.poll(timeout: 0.005) }
        XCTAssertEqual(consumer.assignedPartitions, 1)
        XCTAssertNil(producer.send([OutgoingMessage(topic: topic, key: "k", value: envelope(subject: "after"))]).first!)
        var read: [String] = []
        let until = Date().addingTimeInterval(10)
        while !read.contains("after") && Date() < until {
            if let m = consumer.poll(timeout: 0.1), let event = ReceivedEvent(m.value) { read.append(event.subject) }
        }
        XCTAssertTrue(read.contains("after"), "read \(read)")
    }

    // MARK: A topic of the test's own

    var kafka: KafkaConfig {
        var kafka = KafkaConfig(brokers: TestEnvironment.brokers, clientId: "consumer-test")
        kafka.sessionTimeoutMs = 6000
        kafka.log = { _, _ in }
        return kafka
    }
    let logger = Logger(service: "test", minimum: .error)
    var producer: Producer!

    /// A new topic named after `prefix`, with its dead-letter topic, one partition each.
    func topic(_ prefix: String) throws -> String {
        let topic = "\(prefix).\(UUID().uuidString.prefix(8).lowercased())"
        producer = try Producer(config: kafka)
        try producer.createTopics([topic, topic + ".dlq"], partitions: 1, replicationFactor: 1)
        return topic
    }

    /// A consumer of `topic` in a group of its own, dead letters going out through a relay of the kit's schema.
    func consumer(of topic: String, handler: @escaping EventConsumer.Handler) -> EventConsumer {
        let relay = OutboxRelay(pool: pool, databaseURL: database.url, schema: "kit", kafka: kafka, topics: .init(names: [], partitions: 1, replicationFactor: 1),
                                retentionHours: 1, logger: logger, metrics: Metrics())
        let topicsReady = Gate()
        topicsReady.open()
        return EventConsumer(name: "test", kafka: kafka, groupId: "group-\(topic)", topics: [topic], pool: pool, schema: "kit",
                             relay: relay, topicsReady: topicsReady, logger: logger, metrics: Metrics(), handler: handler)
    }

    func handledCount() throws -> Int {
        try pool.withConnection { try $0.first("SELECT count(*) AS n FROM kit.handled")!["n"] }
    }
}
