import Foundation
import Kafka
import Models
import Web
import Synchronization
import XCTest

/// Reads a topic from the beginning (no consumer group) and finds events by a predicate, waiting for them. Every
/// event one of the services sent is checked against its published schema (`Shared/Models/Schemas`) the first time
/// any probe reads it, and the test reading it fails if it breaks it: the contract with consumers is checked on what
/// the journeys really send, not only on examples.
final class EventProbe {
    private let consumer: Consumer
    private(set) var seen: [[String: Any]] = []

    /// Publishes an event as another service would, with the id `id` (the same id twice: a repeat).
    static func publish<P: EventPayload>(_ payload: P, subject: String, source: String, id: String = UUID().uuidString.lowercased()) throws {
        try publish([payload], subject: subject, source: source, ids: [id])
    }

    /// Publishes events in one batch, in order, each with a fresh id unless `ids` gives them.
    static func publish<P: EventPayload>(_ payloads: [P], subject: String, source: String, ids: [String]? = nil) throws {
        var config = KafkaConfig(brokers: TestEnvironment.brokers, clientId: "test-publisher")
        config.log = { _, _ in }
        let messages = try payloads.enumerated().map { i, payload in
            let event: [String: Any] = ["specversion": "1.0", "id": ids?[i] ?? UUID().uuidString.lowercased(), "source": source, "type": P.type,
                                        "time": Timestamp.format(Date()), "subject": subject, "datacontenttype": "application/json",
                                        "dataschema": "urn:backend:schema:events:\(P.type)",
                                        "data": try JSONSerialization.jsonObject(with: Data(try JSON.encode(payload)))]
            return OutgoingMessage(topic: P.type, key: subject, value: Array(try JSONSerialization.data(withJSONObject: event)), header: ("ce_type", P.type))
        }
        let results = try Producer(config: config).send(messages)
        XCTAssertTrue(results.allSatisfy { $0 == nil }, "published \(payloads.count) \(P.type)")
    }

    init(topics: [String], brokers: String = TestEnvironment.brokers) throws {
        var config = KafkaConfig(brokers: brokers, clientId: "test-probe")
        config.log = { _, _ in }
        consumer = try Consumer(config: config, groupId: "probe-\(UUID().uuidString)", fetchWaitMs: 100)  // a test waits on it
        // Create the topics as the services do, so a probe may start before them.
        try Producer(config: config).createTopics(topics, partitions: 3, replicationFactor: 1)
        // The topic may be created by the service a moment after it starts.
        var lastError: Error?
        for _ in 0..<100 {
            do { try consumer.assignFromBeginning(topics); return } catch { lastError = error; Thread.sleep(forTimeInterval: 0.1) }
        }
        throw lastError!
    }

    /// Every event (parsed envelope) matching `predicate` that arrived until `timeout`, waiting at least until the first.
    func events(timeout: TimeInterval = 20, _ predicate: ([String: Any]) -> Bool) -> [[String: Any]] {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            drain(0.2)
            let found = seen.filter(predicate)
            if !found.isEmpty { return found }
        }
        return seen.filter(predicate)
    }

    /// The first event matching `predicate`, waiting up to `timeout`.
    func first(timeout: TimeInterval = 20, _ predicate: ([String: Any]) -> Bool) -> [String: Any]? {
        events(timeout: timeout, predicate).first
    }

    /// Reads whatever is available for `seconds`.
    func drain(_ seconds: TimeInterval) {
        let until = Date().addingTimeInterval(seconds)
        while Date() < until {
            guard let m = consumer.poll(timeout: 0.05) else { continue }
            if var event = (try? JSONSerialization.jsonObject(with: Data(m.value))) as? [String: Any] {
                event["_key"] = String(decoding: m.key, as: UTF8.self)
                event["_topic"] = m.topic
                Self.checkSchema(event)
                seen.append(event)
            }
        }
    }

    private static let sources = Set(PublicOrigin.names.map { "/" + $0 })  // the services' events' `source`
    private static let checked = Mutex<Set<String>>([])  // topic/id of events already checked

    /// Fails the running test when a service's event breaks its type's schema, once per event.
    private static func checkSchema(_ event: [String: Any]) {
        guard let id = event["id"] as? String, checked.withLock({ $0.insert("\(event["_topic"] ?? "")/\(id)").inserted }),
              let problems = schemaProblems(event), !problems.isEmpty else { return }
        XCTFail("\(event["source"] ?? "")'s \(event["type"] ?? "") \(id) breaks its schema: \(problems)")
    }

    /// What is wrong with a service's event by its type's schema; nil for events of others (a fleet gateway's, a
    /// test's own hostile input), which are not the services' contract.
    static func schemaProblems(_ event: [String: Any]) -> [String]? {
        guard let source = event["source"] as? String, sources.contains(source) else { return nil }
        guard let type = event["type"] as? String, let schema = try? SchemaValidator.event(type) else { return ["no schema for its type"] }
        return schema.validate(event.filter { !$0.key.hasPrefix("_") })
    }
}

extension Dictionary where Key == String, Value == Any {
    /// `data.<key>` of an event envelope.
    func data(_ key: String) -> Any? { (self["data"] as? [String: Any])?[key] }
}

extension String {
    /// The UUID this id string holds, for building payloads in tests (a test's ids are always UUIDs).
    var uuid: UUID { UUID(uuidString: self)! }
}
