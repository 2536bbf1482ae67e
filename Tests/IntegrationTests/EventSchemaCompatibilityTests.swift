import Foundation
import Models
import XCTest

/// Every event schema against the last release's (`docs/events/released.json`): a change a consumer would break on
/// fails, naming the topic and the field. The rule is a schema registry's BACKWARD one: the new schema must accept
/// every event the released one did (a consumer on the new type still reads what is on the topic), and a field's
/// type and format stay as consumers know them. Adding an optional field passes.
///
/// A breaking change is published as a new type (`parcel.status.v2`, as the conventions say) beside the old one,
/// which stays as released while it is produced; a new type has no release to keep to. A release records the
/// schemas with
///   UPDATE_RELEASED_EVENTS=1 deploy/local/stack test --filter EventSchemaCompatibilityTests
/// which writes them only when nothing released was broken (a type that is no longer produced is dropped then).
final class EventSchemaCompatibilityTests: XCTestCase {
    static let releasedPath = "docs/events/released.json"

    func testEverySchemaKeepsToItsRelease() throws {
        let url = TestEnvironment.root.appendingPathComponent(Self.releasedPath)
        let update = ProcessInfo.processInfo.environment["UPDATE_RELEASED_EVENTS"] == "1"
        let file = update && !FileManager.default.fileExists(atPath: url.path) ? Data("{}".utf8) : try Data(contentsOf: url)
        let released = try JSONSerialization.jsonObject(with: file) as? [String: [String: Any]] ?? [:]
        var current: [String: [String: Any]] = [:]
        for topic in EventCatalogue.topics { current[topic.name] = try Self.parsed(EventCatalogue.schema(of: topic)) }

        let breaks = SchemaCompatibility.breaks(released: released, current: current)
        XCTAssertTrue(breaks.isEmpty, breaks.joined(separator: "\n"))
        let gone = Set(released.keys).subtracting(current.keys).sorted()
        if update, breaks.isEmpty {
            let data = try JSONSerialization.data(withJSONObject: current, options: [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes])
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try (String(decoding: data, as: UTF8.self) + "\n").write(to: url, atomically: true, encoding: .utf8)
        } else {
            XCTAssertEqual(gone, [], """
                released, and no longer in the catalogue: consumers still read them. Keep producing a type beside its new \
                version until they have moved; then record a release without it (UPDATE_RELEASED_EVENTS=1).
                """)
        }
    }

    // MARK: - The checker itself

    /// A deliberately incompatible change to a payload type: `parcel.created` without its `currency`.
    struct ParcelCreatedWithoutCurrency: EventPayload {
        static let type = ParcelCreated.type
        static let schema = ParcelCreated.schema.without("currency")
        var parcelId: UUID, senderId: UUID, recipientUserId: UUID?, service: String, pickup: Place, dropoff: Place
        var amountMinor: Int, createdAt: Date
    }

    func testAnIncompatibleChangeOfAPayloadTypeFailsNamingTheField() throws {
        let released = try Self.parsed(EventSchema.document(of: ParcelCreated.self, producer: "dispatch", key: "parcel id", summary: ""))
        let changed = try Self.parsed(EventSchema.document(of: ParcelCreatedWithoutCurrency.self, producer: "dispatch", key: "parcel id", summary: ""))
        let breaks = SchemaCompatibility.breaks(released: ["parcel.created": released], current: ["parcel.created": changed])
        XCTAssertEqual(breaks.count, 1, "\(breaks)")
        XCTAssertTrue(breaks.first?.contains("parcel.created: `data.currency` was removed or renamed") == true, "\(breaks)")
        XCTAssertTrue(breaks.first?.contains("parcel.created.v2") == true, "the message says how to make the change: \(breaks)")
    }

    func testEachChangeAConsumerBreaksOnIsNamed() throws {
        let released = try Self.parsed(EventSchema.document(of: ParcelStatusChanged.self, producer: "dispatch", key: "parcel id", summary: ""))
        /// The released schema with its `data` changed.
        func changed(_ change: (inout [String: Any]) -> Void) -> [String: Any] {
            var data = released["properties", "data"], schema = released
            change(&data)
            schema["properties", "data"] = data
            return schema
        }
        func breaks(from old: [String: Any] = released, to new: [String: Any]) -> [String] {
            SchemaCompatibility.breaks(released: ["parcel.status": old], current: ["parcel.status": new])
        }
        func without(_ name: String, in object: inout [String: Any]) {
            var fields = object["properties"] as! [String: Any]
            fields[name] = nil
            object["properties"] = fields
            object["required"] = (object["required"] as! [String]).filter { $0 != name }
        }
        let placeTakesMore = changed { var place = $0["properties", "place"]; place["additionalProperties"] = nil; $0["properties", "place"] = place }
        let cases: [(String, [String])] = [
            ("`data.at` was removed or renamed", breaks(to: changed { without("at", in: &$0) })),
            ("`data.courierId` was optional and is required now", breaks(to: changed { $0["required"] = ($0["required"] as! [String]) + ["courierId"] })),
            ("`data.reason` is a new required field", breaks(to: changed {
                $0["properties", "reason"] = ["type": "string"]; $0["required"] = ($0["required"] as! [String]) + ["reason"]
            })),
            ("`data.to` lost the values `failed`", breaks(to: changed {
                var to = $0["properties", "to"]; to["enum"] = (to["enum"] as! [String]).filter { $0 != "failed" }; $0["properties", "to"] = to
            })),
            ("`data.to` gained the values `lost`", breaks(to: changed {
                var to = $0["properties", "to"]; to["enum"] = (to["enum"] as! [String]) + ["lost"]; $0["properties", "to"] = to
            })),
            ("`data.place.lat`: its type changed from number to string", breaks(to: changed {
                var place = $0["properties", "place"]; place["properties", "lat"] = ["type": "string"]; $0["properties", "place"] = place
            })),
            ("`data.courierId`: its format changed from uuid to none", breaks(to: changed { $0["properties", "courierId"] = ["type": "string"] })),
            ("`data.actorId`: its type changed from string to null or string", breaks(to: changed {
                $0["properties", "actorId"] = ["type": ["string", "null"], "format": "uuid"]
            })),
            ("`data.senderId`: at most 36 now", breaks(to: changed {
                $0["properties", "senderId"] = ["type": "string", "format": "uuid", "maxLength": 36]
            })),
            ("`data.place` takes no other fields now", breaks(from: placeTakesMore, to: released)),
        ]
        for (expected, found) in cases {
            XCTAssertTrue(found.contains { $0.hasPrefix("parcel.status: \(expected)") }, "\(expected): \(found)")
        }
        XCTAssertEqual(breaks(to: changed { $0["properties", "note"] = ["type": "string"] }), [], "a new optional field is no break")
        XCTAssertEqual(breaks(to: changed { $0["properties", "senderId"] = ["type": "string", "format": "uuid", "description": "said otherwise"] }), [],
                       "a description is no break")
        XCTAssertEqual(breaks(from: changed { without("centreId", in: &$0) }, to: released), [], "a field added, optional, is no break")
    }

    func testANewVersionOfATypeHasNoReleaseToKeepTo() throws {
        let released = try Self.parsed(EventSchema.document(of: ParcelCreated.self, producer: "dispatch", key: "parcel id", summary: ""))
        let changed = try Self.parsed(EventSchema.document(of: ParcelCreatedWithoutCurrency.self, producer: "dispatch", key: "parcel id", summary: ""))
        XCTAssertEqual(SchemaCompatibility.breaks(released: ["parcel.created": released],
                                                  current: ["parcel.created": released, "parcel.created.v2": changed]), [])
    }

    static func parsed(_ json: OrderedJSON) throws -> [String: Any] {
        try JSONSerialization.jsonObject(with: Data(json.text.utf8)) as? [String: Any] ?? [:]
    }
}

extension EventSchema {
    /// This schema without what it says of `field` (for a type that lacks it).
    func without(_ field: String) -> EventSchema {
        var copy = self
        copy.fields[field] = nil
        return copy
    }
}

private extension Dictionary where Key == String, Value == Any {
    /// The object at `a`, then `b`, inside this one (empty when absent); set, it replaces it.
    subscript(_ a: String, _ b: String) -> [String: Any] {
        get { (self[a] as? [String: Any])?[b] as? [String: Any] ?? [:] }
        set {
            var inner = self[a] as? [String: Any] ?? [:]
            inner[b] = newValue
            self[a] = inner
        }
    }
}

/// What in a schema a consumer of its released version would break on.
enum SchemaCompatibility {
    /// For every released type that is still produced, what its current schema breaks, each naming the type and the
    /// field (`parcel.created: `data.currency` was removed or renamed. ...`).
    static func breaks(released: [String: [String: Any]], current: [String: [String: Any]]) -> [String] {
        released.keys.sorted().flatMap { type -> [String] in
            guard let now = current[type], let then = released[type] else { return [] }
            return breaks(from: then, to: now, at: "").map {
                "\(type): \($0). Its consumers would break: keep \(type) as released, and publish the change as a new type, \(nextVersion(of: type)), beside it."
            }
        }
    }

    /// `parcel.status` → `parcel.status.v2`, `parcel.status.v2` → `parcel.status.v3`.
    static func nextVersion(of type: String) -> String {
        if let dot = type.range(of: ".v", options: .backwards), let n = Int(type[dot.upperBound...]) {
            return type[..<dot.lowerBound] + ".v\(n + 1)"
        }
        return type + ".v2"
    }

    static func breaks(from old: [String: Any], to new: [String: Any], at path: String) -> [String] {
        var found: [String] = []
        let here = path.isEmpty ? "the envelope" : "`\(path)`"
        func types(_ schema: [String: Any]) -> [String] {
            if let type = schema["type"] as? String { return [type] }
            if let types = schema["type"] as? [String] { return types.sorted() }
            if let values = schema["enum"] as? [Any] { return values.allSatisfy { $0 is String } ? ["string"] : [] }
            return []
        }
        func named(_ types: [String]) -> String { types.isEmpty ? "any" : types.joined(separator: " or ") }
        if types(old) != types(new) { found.append("\(here): its type changed from \(named(types(old))) to \(named(types(new)))") }
        let (oldFormat, newFormat) = (old["format"] as? String, new["format"] as? String)
        if oldFormat != newFormat { found.append("\(here): its format changed from \(oldFormat ?? "none") to \(newFormat ?? "none")") }
        if let const = new["const"], "\(const)" != old["const"].map({ "\($0)" }) { found.append("\(here): it is always \(const) now") }
        if let values = new["enum"] as? [String] {
            if let before = old["enum"] as? [String] {
                let lost = before.filter { !values.contains($0) }
                if !lost.isEmpty { found.append("\(here) lost the values " + lost.map { "`\($0)`" }.joined(separator: ", ")) }
                // The services read such a field as a Swift enum: one deployed before the change cannot decode a new
                // value, and would dead-letter the event.
                let gained = values.filter { !before.contains($0) }
                if !gained.isEmpty {
                    found.append("\(here) gained the values " + gained.map { "`\($0)`" }.joined(separator: ", ")
                                 + ", which a consumer reading it as a closed set cannot decode")
                }
            } else {
                found.append("\(here) takes only " + values.map { "`\($0)`" }.joined(separator: ", ") + " now")
            }
        }
        if let pattern = new["pattern"] as? String, pattern != old["pattern"] as? String { found.append("\(here) must match \(pattern) now") }
        for key in ["minLength", "minimum"] {
            if let bound = new[key] as? Int, bound > (old[key] as? Int ?? Int.min) { found.append("\(here): at least \(bound) now") }
        }
        for key in ["maxLength", "maximum", "maxItems"] {
            if let bound = new[key] as? Int, bound < (old[key] as? Int ?? Int.max) { found.append("\(here): at most \(bound) now") }
        }
        if new["additionalProperties"] as? Bool == false, old["additionalProperties"] as? Bool != false {
            found.append("\(here) takes no other fields now")
        }
        let oldFields = old["properties"] as? [String: [String: Any]] ?? [:], newFields = new["properties"] as? [String: [String: Any]] ?? [:]
        let wasRequired = Set(old["required"] as? [String] ?? []), isRequired = Set(new["required"] as? [String] ?? [])
        func join(_ name: String) -> String { path.isEmpty ? name : "\(path).\(name)" }
        for name in oldFields.keys.sorted() {
            guard let field = newFields[name] else { found.append("`\(join(name))` was removed or renamed"); continue }
            found += breaks(from: oldFields[name]!, to: field, at: join(name))
        }
        for name in isRequired.subtracting(wasRequired).sorted() {
            found.append(oldFields[name] == nil ? "`\(join(name))` is a new required field" : "`\(join(name))` was optional and is required now")
        }
        if let before = old["items"] as? [String: Any], let items = new["items"] as? [String: Any] {
            found += breaks(from: before, to: items, at: path + "[]")
        }
        return found
    }
}
