@testable import Events
import Foundation
import Kafka
import Models
import Postgres
import Runtime
import XCTest

/// The outbox relay against the real broker and database: how soon a committed event leaves, and the order of a
/// backlog published in pipelined batches.
final class OutboxRelayTests: XCTestCase {
    struct Counted: EventPayload { static let type = "test.relay.counted"; let n: Int }

    var database: TestDatabase!
    var pool: Pool!
    var relay: OutboxRelay!
    var group: ServiceGroup!
    var outbox: Outbox!

    override func setUpWithError() throws {
        database = try TestDatabase()
        pool = Pool(url: database.url, maxSize: 4)
        try Migrator.migrate(pool: pool, schema: "kit", migrations: [Platform.migration])
        var kafka = KafkaConfig(brokers: TestEnvironment.brokers, clientId: "relay-test")
        kafka.log = { _, _ in }
        let logger = Logger(service: "test", minimum: .error)
        relay = OutboxRelay(pool: pool, schema: "kit", kafka: kafka,
                            topics: .init(names: [Counted.type], partitions: 3, replicationFactor: 1),
                            retentionHours: 1, logger: logger, metrics: Metrics())
        try relay.createTopics()
        outbox = Outbox(schema: "kit", source: "/test", wake: { [relay] in relay!.wake() })
        group = ServiceGroup(logger: logger) { _, _ in }
        group.start(relay)
    }

    override func tearDown() {
        _ = group?.stop(deadline: Date().addingTimeInterval(5))
        pool?.close()
        database?.drop()
    }

    func testAnEventLeavesAsSoonAsItsTransactionCommits() throws {
        // A first event, published, leaves the relay idle: waiting for its next poll (every 0.5 s) or a wake.
        let first = UUID().uuidString
        try pool.withTransaction { try outbox.add(Counted(n: 0), subject: first, on: $0) }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10, every: 0.005) { (try? self.sent(first)) == true })
        let subject = UUID().uuidString
        try pool.withTransaction { c in
            try outbox.add(Counted(n: 1), subject: subject, on: c)
            // Work before the commit (the scenario, not a wait): a relay woken here, before the commit, found nothing
            // and slept until its next poll (0.45 s later).
            Thread.sleep(forTimeInterval: 0.05)
        }
        let committed = Date()
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10, every: 0.005) { (try? self.sent(subject)) == true })
        let waited = Date().timeIntervalSince(committed)
        XCTAssertLessThan(waited, 0.3, "published \(Int(waited * 1000)) ms after its commit")
    }

    /// Whether the event about `subject` was marked sent.
    func sent(_ subject: String) throws -> Bool {
        try pool.withConnection { c in
            try c.first("SELECT sent_at IS NOT NULL AS sent FROM kit.outbox WHERE key = $1", [subject])?["sent", as: Bool.self] ?? false
        }
    }

    func testABacklogLeavesInOrderPerKeyAcrossPipelinedBatches() throws {
        let run = UUID().uuidString.prefix(8)
        let keys = (0..<3).map { "\(run)-\($0)" }
        let probe = try EventProbe(topics: [Counted.type])
        // 2,500 events in one transaction: three of the relay's batches, the next read while the last is in flight.
        try pool.withTransaction { c in
            for n in 0..<2500 { try outbox.add(Counted(n: n), subject: keys[n % 3], on: c) }
        }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60) {
            probe.drain(0.2)
            return probe.seen.filter { keys.contains($0["subject"] as? String ?? "") }.count >= 2500
        }, "every event of the backlog reaches the broker")
        for key in keys {
            let numbers = probe.seen.filter { $0["subject"] as? String == key }.compactMap { $0.data("n") as? Int }
            XCTAssertEqual(numbers, Array(stride(from: keys.firstIndex(of: key)!, to: 2500, by: 3)),
                           "key \(key): each event once, in the order written")
        }
        let unsent: Int = try pool.withConnection { try $0.first("SELECT count(*) AS n FROM kit.outbox WHERE sent_at IS NULL")!["n"] }
        XCTAssertEqual(unsent, 0)
    }
}
