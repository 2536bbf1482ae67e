import Events
import Foundation
import Models
import Web
import XCTest

/// The event catalogue for consumers: each topic's JSON Schema (`Shared/Models/Schemas/<topic>.json`, from its
/// payload's Swift type), `docs/asyncapi.json` (AsyncAPI 3.0) and `docs/events.md`, generated from `EventCatalogue`.
/// A test fails when they are not regenerated after a change; regenerate with
///   UPDATE_EVENT_DOCS=1 deploy/local/stack test --filter EventCatalogueTests
/// (That the catalogue names what the running services read is checked in `InProcessTests`.)
final class EventCatalogueTests: XCTestCase {
    let root = TestEnvironment.root

    func testEverySchemaHasItsTopicInTheCatalogueAndEveryTopicItsSchema() throws {
        let schemas = try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("Shared/Models/Schemas").path)
            .filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }
        XCTAssertEqual(Set(schemas), Set(EventCatalogue.topics.map(\.name)), "a schema without a topic or a topic without a schema")
        XCTAssertEqual(EventCatalogue.topics.count, Set(EventCatalogue.topics.map(\.name)).count, "a topic listed twice")
        for topic in EventCatalogue.topics {
            XCTAssertTrue(PublicOrigin.names.contains(topic.producer), topic.name)
            // The schema's `$id` is what its events name as their `dataschema`.
            XCTAssertEqual(EventSchema.uri(of: topic.name), dataSchemaURI(for: topic.name))
        }
    }

    /// A payload of the types a field may have: its schema says what each is and whether it is required.
    struct Sample: EventPayload {
        enum Mood: String, Codable, CaseIterable { case glad, sad }
        static let type = "sample.happened"
        static let schema = EventSchema(["note": .init(maxLength: 10, description: "A note"), "periodEnd": .dateTime, "code": .init(format: .plain)])
        var sampleId: UUID, at: Date, mood: Mood, moods: [Mood]?, count: Int64, ratio: Double?, done: Bool
        var note: String?, periodEnd: String, code: String, place: Place?, memberIds: [UUID]
    }

    func testAPayloadsTypeGivesItsSchema() throws {
        let schema = try JSONSerialization.jsonObject(with: Data(EventSchema.document(of: Sample.self, producer: "test", key: "id", summary: "").text.utf8))
        let data = (schema as? [String: Any])?["properties"].flatMap { ($0 as? [String: Any])?["data"] } as? [String: Any] ?? [:]
        let expected: [String: Any] = [
            "type": "object", "additionalProperties": false,
            "required": ["sampleId", "at", "mood", "count", "done", "periodEnd", "code", "memberIds"],
            "properties": [
                "sampleId": ["type": "string", "format": "uuid"], "at": ["type": "string", "format": "date-time"],
                "mood": ["enum": ["glad", "sad"]], "moods": ["type": "array", "items": ["enum": ["glad", "sad"]]],
                "count": ["type": "integer"], "ratio": ["type": "number"], "done": ["type": "boolean"],
                "note": ["type": "string", "maxLength": 10, "description": "A note"],
                "periodEnd": ["type": "string", "format": "date-time"], "code": ["type": "string"],
                "place": ["type": "object", "additionalProperties": false, "required": ["lat", "lon"],
                          "properties": ["lat": ["type": "number"], "lon": ["type": "number"]]],
                "memberIds": ["type": "array", "items": ["type": "string", "format": "uuid"]],
            ],
        ]
        XCTAssertEqual(data as NSDictionary, expected as NSDictionary)
        struct Misnamed: EventPayload { static let type = "sample.misnamed"; static let schema = EventSchema(["nmae": .described("typo")]); var name: String }
        XCTAssertThrowsError(try EventSchema.document(of: Misnamed.self, producer: "test", key: "id", summary: "")) {
            XCTAssertTrue("\($0)".contains("`nmae`"), "\($0)")
        }
    }

    /// An id or a time kept in a String would lose what its type says: the generation refuses it, naming the field.
    func testAStringNamedAsAnIdOrATimeIsRefused() {
        struct StringId: EventPayload { static let type = "sample.string_id"; var ownerId: String }
        struct StringTime: EventPayload { static let type = "sample.string_time"; var sentAt: String? }
        struct StringIds: EventPayload { static let type = "sample.string_ids"; var memberIds: [String] }
        for (payload, field) in [(StringId.self, "ownerId"), (StringTime.self, "sentAt"), (StringIds.self, "memberId")] as [(any EventPayload.Type, String)] {
            XCTAssertThrowsError(try EventSchema.document(of: payload, producer: "test", key: "id", summary: "")) {
                XCTAssertTrue("\($0)".contains("`\(field)`") && "\($0)".contains(payload.type), "\($0)")
            }
        }
    }

    func testTheEventDocumentsAreRegenerated() throws {
        let schemas = try EventCatalogue.topics.map { ("Shared/Models/Schemas/\($0.name).json", try EventCatalogue.schema(of: $0).text) }
        let documents = schemas + [("docs/asyncapi.json", try CatalogueDocuments.asyncAPI()),
                                   ("docs/events.md", try CatalogueDocuments.markdown())]
        for (path, text) in documents {
            let url = root.appendingPathComponent(path)
            if ProcessInfo.processInfo.environment["UPDATE_EVENT_DOCS"] == "1" {
                try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
                try text.write(to: url, atomically: true, encoding: .utf8)
            }
            let committed = (try? String(contentsOf: url, encoding: .utf8)) ?? ""
            XCTAssertTrue(committed == text, """
                \(path) is not what the catalogue and the payload types say: regenerate it with
                UPDATE_EVENT_DOCS=1 deploy/local/stack test --filter EventCatalogueTests
                """)
        }
    }
}

/// Renders the catalogue.
enum CatalogueDocuments {
    static func schema(_ topic: EventCatalogue.Topic) throws -> [String: Any] {
        let data = Data(try EventCatalogue.schema(of: topic).text.utf8)
        return try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
    }

    static func readerList(_ topic: EventCatalogue.Topic) -> [String] { topic.readers.map(\.description) }

    static func asyncAPI() throws -> String {
        var channels: [String: Any] = [:], operations: [String: Any] = [:], messages: [String: Any] = [:]
        for topic in EventCatalogue.topics {
            var schema = try schema(topic)
            schema["$schema"] = nil  // the document says the format: the schemas use no keyword draft-07 lacks
            messages[topic.name] = [
                "name": topic.name, "title": topic.name, "summary": topic.summary,
                "contentType": "application/cloudevents+json; charset=UTF-8",
                "headers": ["type": "object", "required": ["ce_type"], "properties": ["ce_type": ["const": topic.name]]],
                "payload": ["schemaFormat": "application/schema+json;version=draft-07", "schema": schema],
                "bindings": ["kafka": ["bindingVersion": "0.5.0",
                                       "key": ["type": "string", "description": "The \(topic.key) (also the event's subject)"]]],
                "x-delivery": topic.ephemeral ? "ephemeral: published without the outbox, may be lost" : "outbox: at least once, de-duplicate by id",
            ] as [String: Any]
            channels[topic.name] = [
                "address": topic.name, "description": topic.summary,
                "messages": [topic.name: ["$ref": "#/components/messages/\(topic.name)"]],
                "bindings": ["kafka": ["bindingVersion": "0.5.0", "topic": topic.name]],
            ] as [String: Any]
            operations["\(topic.producer).sends.\(topic.name)"] = [
                "action": "send", "channel": ["$ref": "#/channels/\(topic.name)"],
                "summary": "\(topic.producer) publishes \(topic.name)", "x-service": topic.producer,
            ] as [String: Any]
            for reader in topic.readers {
                var operation: [String: Any] = ["action": "receive", "channel": ["$ref": "#/channels/\(topic.name)"],
                                                "summary": reader.description, "x-service": reader.service]
                if !reader.isFeed {
                    let group: [String: Any] = ["type": "string", "const": "\(reader.service)-\(reader.name)",
                                                "description": "Prefixed with KAFKA_GROUP_PREFIX"]
                    operation["bindings"] = ["kafka": ["bindingVersion": "0.5.0", "groupId": group]]
                }
                operations["\(reader.service).\(reader.name).receives.\(topic.name)"] = operation
            }
        }
        let document: [String: Any] = [
            "asyncapi": "3.0.0",
            "info": ["title": "Backend events", "version": "1.0.0",
                     "description": "Every topic the backend publishes, its key and schema, who produces and who reads it. Generated from Shared/Models/EventCatalogue.swift and the payload types (Shared/Models/*Events.swift) by EventCatalogueTests; docs/events.md is its rendering."],
            "defaultContentType": "application/cloudevents+json; charset=UTF-8",
            "servers": ["kafka": ["host": "kafka:9092", "protocol": "kafka",
                                  "description": "The deployment's brokers (KAFKA_BROKERS); docker-compose.yml's is kafka:9092"]],
            "channels": channels, "operations": operations, "components": ["messages": messages],
        ]
        let data = try JSONSerialization.data(withJSONObject: document, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
        return String(decoding: data, as: UTF8.self) + "\n"
    }

    static func typeText(_ property: [String: Any]) -> String {
        if let values = property["enum"] as? [Any] { return "one of " + values.map { "`\($0)`" }.joined(separator: ", ") }
        if let value = property["const"] { return "`\(value)`" }
        let type = (property["type"] as? String) ?? ((property["type"] as? [String])?.joined(separator: " or ") ?? "any")
        if let format = property["format"] as? String { return "\(type) (\(format))" }
        if type == "array", let items = property["items"] as? [String: Any] { return "array of \(typeText(items))" }
        return type
    }

    static func markdown() throws -> String {
        var out = """
            # Events

            Generated from `Shared/Models/EventCatalogue.swift` and the payload types (`Shared/Models/*Events.swift`) by
            `EventCatalogueTests`, with `docs/asyncapi.json` (the same catalogue in AsyncAPI 3.0) and the JSON Schemas
            `Shared/Models/Schemas/<topic>.json`; do not edit them by hand.

            Every message is a CloudEvents 1.0 JSON envelope (structured mode): `specversion`, `id`, `source`, `type`
            (the topic), `time`, `subject` (the aggregate id, also the Kafka key, so one aggregate's events stay in
            order), `datacontenttype`, `dataschema`, `data`; the header `ce_type` repeats the type. Events written
            through the outbox arrive at least once: de-duplicate by `id`, and commit offsets after processing.
            `examples/consumer/consume.py` does both.

            A field may be added to an event, optional. A change a consumer would break on (a field removed or renamed,
            its type or format changed, an optional field made required or a new required one, a value of an `enum`
            dropped or added (the services read such a field as a closed set), a limit tightened) gets a new type
            (`parcel.status.v2`), produced beside the old one while it is read: `EventSchemaCompatibilityTests` compares
            every schema with the last release's (`docs/events/released.json`) and fails naming the field.

            | topic | key | producer | read inside the backend by |
            |---|---|---|---|

            """
        for topic in EventCatalogue.topics {
            let readers = topic.readers.isEmpty ? "—" : topic.readers.map { "\($0.service) (\($0.name))" }.joined(separator: ", ")
            out += "| [`\(topic.name)`](#\(topic.name.replacingOccurrences(of: ".", with: ""))) | \(topic.key) | \(topic.producer) | \(readers) |\n"
        }
        out += "\nConsumer groups are named `<KAFKA_GROUP_PREFIX><service>-<consumer>`; a group's dead-letter topic is `<topic>.dlq`. Live feeds read without a group.\n"
        for topic in EventCatalogue.topics {
            let schema = try schema(topic)
            let data = (schema["properties"] as? [String: Any])?["data"] as? [String: Any] ?? [:]
            let required = Set(data["required"] as? [String] ?? [])
            let properties = data["properties"] as? [String: Any] ?? [:]
            out += "\n## \(topic.name)\n\n\(topic.summary)\n\n"
            out += "- Key: the \(topic.key). Producer: \(topic.producer). "
            out += topic.ephemeral ? "Ephemeral: published without the outbox; it may be lost and the next one replaces it.\n"
                                   : "Written with the change it describes (outbox): at least once.\n"
            out += "- Read by: " + (topic.readers.isEmpty ? "no service of the backend (for other consumers)" : readerList(topic).joined(separator: "; ")) + "\n"
            out += "- Schema: `Shared/Models/Schemas/\(topic.name).json` (from `\(topic.payload)`)\n\n| `data` field | type | |\n|---|---|---|\n"
            for name in properties.keys.sorted() {
                out += "| `\(name)` | \(typeText(properties[name] as? [String: Any] ?? [:])) | \(required.contains(name) ? "required" : "optional") |\n"
            }
        }
        return out
    }
}
