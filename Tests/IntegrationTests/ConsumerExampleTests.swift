import Foundation
import Kafka
import Models
import XCTest

/// examples/consumer/consume.py, the Python consumer docs/events.md shows, against the local broker: it validates,
/// de-duplicates by event id and commits after processing. The events go to a topic of the test's own: an invalid
/// `user.registered` on the real topic would reach the other tests' consumers.
final class ConsumerExampleTests: XCTestCase {
    let topic = "example." + UUID().uuidString.prefix(8).lowercased() + "." + UserRegistered.type
    /// The id of an event whose `createdAt` is no time.
    let badTime = UUID().uuidString.lowercased()

    /// The trace of the valid event, which the example prints.
    let trace = "4bf92f3577b34da6a3ce929d0e0e4736"

    func event(id: String, userId: String, email: String?, createdAt: String = "2026-11-30T12:00:00Z") -> [UInt8] {
        var data: [String: Any] = ["userId": userId, "username": "example", "fullName": "Example",
                                   "createdAt": createdAt]
        data["email"] = email
        let envelope: [String: Any] = [
            "specversion": "1.0", "id": id, "source": "/auth", "type": UserRegistered.type, "time": "2026-11-30T12:00:00Z",
            "subject": userId, "datacontenttype": "application/json",
            "dataschema": "urn:backend:schema:events:user.registered", "traceparent": "00-\(trace)-00f067aa0ba902b7-01", "data": data]
        return Array(try! JSONSerialization.data(withJSONObject: envelope))
    }

    /// Runs the example until it has been idle for a few seconds; its lines about `ids`, as (outcome, id).
    func consume(group: String, state: String, ids: Set<String>) throws -> [(String, String)] {
        let python = try TestEnvironment.venvPython()
        let script = TestEnvironment.root.appendingPathComponent("examples/consumer/consume.py").path
        let output = try IntegrationTests.run([python, script, "--brokers", TestEnvironment.brokers, "--group", group,
                              "--topics", topic, "--state", state, "--idle", "6",
                              "--config", "session.timeout.ms=6000"])
        XCTAssertTrue(output.contains("\"summary\""), output)
        return output.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let id = object["id"] as? String, ids.contains(id), let outcome = object["outcome"] as? String else { return nil }
            XCTAssertEqual(object["traceId"] as? String, trace, "the example prints the trace id")
            if outcome == "invalid" {
                XCTAssertTrue((object["reason"] as? String ?? "").contains(id == badTime ? "date-time" : "email"), "\(object)")
            }
            return (outcome, id)
        }
    }

    func testTheExampleConsumerValidatesDeduplicatesAndCommitsAfterProcessing() throws {
        let (valid, invalid) = (UUID().uuidString.lowercased(), UUID().uuidString.lowercased())
        let user = UUID().uuidString.lowercased()
        let producer = try Producer(config: KafkaConfig(brokers: TestEnvironment.brokers, clientId: "consumer-example-test"))
        try producer.createTopics([topic], partitions: 3, replicationFactor: 1)
        let sent = producer.send([
            OutgoingMessage(topic: topic, key: user, value: event(id: valid, userId: user, email: "e@example.com")),
            // The same event again, as a relay retry or a republish delivers it.
            OutgoingMessage(topic: topic, key: user, value: event(id: valid, userId: user, email: "e@example.com")),
            OutgoingMessage(topic: topic, key: user, value: event(id: invalid, userId: user, email: nil)),
            OutgoingMessage(topic: topic, key: user, value: event(id: badTime, userId: user, email: "e@example.com", createdAt: "not a time")),
        ])
        XCTAssertEqual(sent.compactMap { $0 }.count, 0, "\(sent)")
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("consumer-\(UUID().uuidString).sqlite3").path
        defer { try? FileManager.default.removeItem(atPath: state) }
        let group = "example-" + UUID().uuidString.prefix(8).lowercased()
        let ids: Set = [valid, invalid, badTime]

        let first = try consume(group: group, state: state, ids: ids)
        XCTAssertEqual(first.map { "\($0.0) \($0.1)" }, ["processed \(valid)", "duplicate \(valid)", "invalid \(invalid)", "invalid \(badTime)"])
        // The offsets were committed: the same group reads none of them again.
        XCTAssertEqual(try consume(group: group, state: state, ids: ids).count, 0)
        // Another group (a replay from the start) reaches them again; the ids keep the effect single.
        let replay = try consume(group: group + "-replay", state: state, ids: ids)
        XCTAssertEqual(replay.map { "\($0.0) \($0.1)" }, ["duplicate \(valid)", "duplicate \(valid)", "invalid \(invalid)", "invalid \(badTime)"])
    }
}
