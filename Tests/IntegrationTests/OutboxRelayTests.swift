@testable import Events
import Foundation
import Kafka
import Models
import Postgres
import Runtime
import Synchronization
import XCTest

/// The outbox relay against the real broker and database, reading the outbox from the write-ahead log: how soon a
/// committed event leaves, the order of a backlog, a relay stopped in the middle of one, a second instance taking
/// over, and a slot made when the outbox already holds events.
final class OutboxRelayTests: XCTestCase {
    struct Counted: EventPayload { static let type = "test.relay.counted"; let n: Int }

    var database: TestDatabase!
    var pool: Pool!
    var outbox: Outbox!
    var groups: [ServiceGroup] = []
    let logger = Logger(service: "test", minimum: .error)

    override func setUpWithError() throws {
        database = try TestDatabase()
        pool = Pool(url: database.url, maxSize: 4)
        try Migrator.migrate(pool: pool, schema: "kit", migrations: [Platform.migration, Platform.streamedOutbox, Platform.leanOutbox])
        outbox = Outbox(schema: "kit", source: "/test")
    }

    override func tearDown() {
        groups.forEach { _ = $0.stop(deadline: Date().addingTimeInterval(5)) }
        pool?.close()
        database?.drop()
    }

    /// A relay running in its own service group, as an instance of the service has one.
    @discardableResult
    func startRelay() throws -> (relay: OutboxRelay, group: ServiceGroup) {
        var kafka = KafkaConfig(brokers: TestEnvironment.brokers, clientId: "relay-test")
        kafka.log = { _, _ in }
        let relay = OutboxRelay(pool: pool, databaseURL: database.url, schema: "kit", kafka: kafka,
                                topics: .init(names: [Counted.type], partitions: 3, replicationFactor: 1),
                                retentionHours: 1, logger: logger, metrics: Metrics())
        try relay.createTopics()
        let group = ServiceGroup(logger: logger) { _, _ in }
        group.start(relay)
        groups.append(group)
        return (relay, group)
    }

    func write(_ numbers: Range<Int>, keys: [String]) throws {
        try pool.withTransaction { c in
            for n in numbers { try outbox.add(Counted(n: n), subject: keys[n % keys.count], on: c) }
        }
    }

    /// Each key's numbers as a consumer that skips repeated event ids sees them.
    func numbers(_ probe: EventProbe, key: String) -> [Int] {
        var ids = Set<String>()
        return probe.seen.filter { $0["subject"] as? String == key && ids.insert($0["id"] as? String ?? "").inserted }
            .compactMap { $0.data("n") as? Int }
    }

    func testAnEventLeavesAsSoonAsItsTransactionCommits() throws {
        try startRelay()
        let probe = try EventProbe(topics: [Counted.type])
        var waits: [Int] = []
        for attempt in 0..<5 {
            let subject = UUID().uuidString
            try pool.withTransaction { c in
                try outbox.add(Counted(n: attempt), subject: subject, on: c)
                Thread.sleep(forTimeInterval: 0.05)  // work before the commit: nothing leaves before it
            }
            let committed = Date()
            XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20, every: 0.001) {
                probe.drain(0.005)
                return probe.seen.contains { $0["subject"] as? String == subject }
            })
            // The first waits for the relay to make its slot.
            if attempt > 0 { waits.append(Int(Date().timeIntervalSince(committed) * 1000)) }
        }
        // Three of the four within 0.3 s: one moment of a loaded two-core machine (once 624 ms in a full suite) is
        // not the relay's, an event that waits for a poll or a batch would miss every time.
        XCTAssertGreaterThanOrEqual(waits.filter { $0 < 300 }.count, 3, "published these ms after their commits: \(waits)")
    }

    /// Every commit anywhere on the server brings each relay a keepalive, and while another database commits steadily
    /// they come closer together than the stream's wait for something to read (0.1 s). A relay with nothing more of
    /// its own to send must still collect its last event's delivery report: a report's wake-up that falls together
    /// with a keepalive was read and lost, and the reports were collected only once the stream was quiet for that
    /// wait, so auth's relay stayed `stuck` after a broker pause while the fault run's writers went on elsewhere (its
    /// event pending, its commit unconfirmed, the slot keeping WAL). The loss needs that coincidence, which a loaded
    /// machine makes likely and this test cannot force; it checks that each event is settled at once beside the
    /// keepalives, as the relay now collects reports at each one.
    func testTheLastEventIsSettledWhileAnotherDatabaseCommitsSteadily() throws {
        let (relay, _) = try startRelay()
        try write(0..<1, keys: ["warm"])  // the slot made, its first event out
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20, every: 0.01) { relay.pendingAge == 0 && (try? relay.isStuck()) == false })

        let other = try TestDatabase()
        defer { other.drop() }
        let stop = Mutex(false), commits = Mutex(0), url = other.url, relayURL = database.url
        let writer = Thread {
            guard let c = try? Connection(url: url), (try? c.execute("CREATE TABLE busy (n int)")) != nil,
                  let relayDatabase = try? Connection(url: relayURL) else { return }
            while !stop.withLock({ $0 }) {
                guard let written = try? c.first("INSERT INTO busy VALUES (1) RETURNING pg_current_wal_lsn()::text AS lsn"),
                      let lsn = try? written["lsn", as: String.self] else { return }
                commits.withLock { $0 += 1 }
                // The next commit once the relay's WAL sender has read past this one: it then waits, and sends a
                // keepalive after each commit (back to back, it would read on without waiting, and send none).
                _ = TestEnvironment.waitUntil(timeout: 1, every: 0.001) {
                    (try? relayDatabase.first("""
                        SELECT r.sent_lsn >= $1::pg_lsn AS past FROM pg_stat_replication r
                        JOIN pg_replication_slots s ON s.active_pid = r.pid WHERE s.database = current_database()
                        """, [lsn])?["past", as: Bool.self]) == true
                }
            }
        }
        writer.start()
        defer { stop.withLock { $0 = true } }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { commits.withLock { $0 } > 20 }, "the other database commits")
        // Each event, once a consumer has it (the relay read it, and holds it pending until its report is
        // collected), is settled within a second.
        let probe = try EventProbe(topics: [Counted.type])
        var settled: [Int] = []
        for n in 1...20 {
            let subject = UUID().uuidString
            _ = try pool.withTransaction { try outbox.add(Counted(n: n), subject: subject, on: $0) }
            XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20, every: 0.001) {
                probe.drain(0.005)
                return probe.seen.contains { $0["subject"] as? String == subject }
            }, "event \(n) reaches the broker")
            let received = Date()
            guard TestEnvironment.waitUntil(timeout: 1, every: 0.001, { relay.pendingAge == 0 }) else {
                XCTFail("event \(n) still pending a second after a consumer had it, beside \(commits.withLock { $0 }) commits elsewhere")
                break
            }
            settled.append(Int(Date().timeIntervalSince(received) * 1000))
        }
        print("settled ms after a consumer had it: \(settled), beside \(commits.withLock { $0 }) commits elsewhere")
    }

    func testABacklogLeavesInOrderPerKeyAndTheSlotIsConfirmedPastIt() throws {
        let run = UUID().uuidString.prefix(8)
        let keys = (0..<3).map { "\(run)-\($0)" }
        let probe = try EventProbe(topics: [Counted.type])
        try startRelay()
        // 2,500 events in one transaction: three of the relay's batches, in flight together.
        try write(0..<2500, keys: keys)
        let written: String = try pool.withConnection { try $0.first("SELECT pg_current_wal_lsn()::text AS l")!["l"] }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60) {
            probe.drain(0.2)
            return probe.seen.filter { keys.contains($0["subject"] as? String ?? "") }.count >= 2500
        }, "every event of the backlog reaches the broker")
        for key in keys {
            XCTAssertEqual(numbers(probe, key: key), Array(stride(from: keys.firstIndex(of: key)!, to: 2500, by: 3)),
                           "key \(key): each event, in the order written")
        }
        XCTAssertEqual(probe.seen.count, 2500, "each event once")
        XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 10) {
            try self.pool.withConnection { c in
                try c.first("SELECT confirmed_flush_lsn >= $1::pg_lsn AS past FROM pg_replication_slots WHERE slot_name LIKE '%_kit_outbox' AND database = current_database()",
                            [written])?["past", as: Bool.self] ?? false
            }
        }, "the slot is confirmed past the backlog, so PostgreSQL may recycle its WAL")
        let rows: Int = try pool.withConnection { try $0.first("SELECT count(*)::int AS n FROM kit.outbox")!["n"] }
        XCTAssertEqual(rows, 2500, "the rows stay, unchanged, for republish")
    }

    func testARelayStoppedInTheMiddleOfABacklogLosesNothingAndTheNextKeepsEachKeysOrder() throws {
        let run = UUID().uuidString.prefix(8)
        let keys = (0..<4).map { "\(run)-\($0)" }
        let probe = try EventProbe(topics: [Counted.type])
        // Only this run's: the probe reads the topic from its beginning, where the tests before left their events.
        func arrived() -> Int { Set(probe.seen.filter { keys.contains($0["subject"] as? String ?? "") }.compactMap { $0["id"] as? String }).count }
        for part in 0..<10 { try write(part * 2000..<(part + 1) * 2000, keys: keys) }
        let first = try startRelay()
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60, every: 0.01) {
            probe.drain(0.01)
            return arrived() >= 3000
        })
        // Stopped at once, with batches in flight and unconfirmed: the next relay streams from the last confirmed commit.
        _ = first.group.stop(deadline: Date())
        XCTAssertLessThan(arrived(), 20_000, "stopped in the middle")
        try startRelay()
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 90) {
            probe.drain(0.2)
            return arrived() >= 20_000
        }, "every event arrives: \(arrived()) of 20,000")
        for key in keys {
            XCTAssertEqual(numbers(probe, key: key), Array(stride(from: keys.firstIndex(of: key)!, to: 20_000, by: 4)), "key \(key) in order")
        }
    }

    func testASecondInstanceStandsByAndTakesOverWhenTheFirstGoes() throws {
        let key = UUID().uuidString
        let probe = try EventProbe(topics: [Counted.type])
        let first = try startRelay()
        try write(0..<1, keys: [key])
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { probe.drain(0.1); return self.numbers(probe, key: key) == [0] })
        let second = try startRelay()
        try write(1..<2, keys: [key])
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { probe.drain(0.1); return self.numbers(probe, key: key) == [0, 1] })
        XCTAssertFalse(try second.relay.isStuck(), "standing by is not stuck")

        _ = first.group.stop(deadline: Date().addingTimeInterval(5))
        try write(2..<3, keys: [key])
        let gone = Date()
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { probe.drain(0.1); return self.numbers(probe, key: key) == [0, 1, 2] },
                      "the second instance relays once the first has gone")
        XCTAssertLessThan(Date().timeIntervalSince(gone), 5, "within seconds")
    }

    func testASlotMadeWhenTheOutboxHoldsEventsPublishesThemFirst() throws {
        // Events written while no slot exists (a first start after the upgrade, a database restored without it).
        let key = UUID().uuidString
        try write(0..<5, keys: [key])
        let probe = try EventProbe(topics: [Counted.type])
        try startRelay()
        try write(5..<8, keys: [key])
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { probe.drain(0.1); return self.numbers(probe, key: key).count == 8 })
        XCTAssertEqual(numbers(probe, key: key), Array(0..<8), "what the outbox held, then what came after, in order")
    }
}
