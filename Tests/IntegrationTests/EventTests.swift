import Foundation
import XCTest

/// Events reach their topics in valid envelopes, keyed by their aggregate.
final class EventTests: AuthTestCase {
    func testAccountEventsAppearOnTheirTopicsAndMatchTheirSchemas() throws {
        let probe = try EventProbe(topics: ["user.registered", "user.updated", "session.revoked"])
        let signup = try api.signup()
        let user = signup.userId
        XCTAssertEqual(try api.patch("/v1/users/me", ["fullName": "New Name"], token: signup.accessToken).status, 200)
        XCTAssertEqual(try api.post("/v1/auth/logout", token: signup.accessToken).status, 204)

        for type in ["user.registered", "user.updated", "session.revoked"] {
            guard let event = probe.first({ $0["type"] as? String == type && $0["subject"] as? String == user }) else {
                XCTFail("no \(type) event for \(user)"); continue
            }
            XCTAssertEqual(try SchemaValidator.event(type).validate(event.filter { !$0.key.hasPrefix("_") }), [], type)
            XCTAssertEqual(event["_key"] as? String, user, "the Kafka key is the aggregate id")
            XCTAssertEqual(event["_topic"] as? String, type)
        }
        XCTAssertEqual(probe.first { $0["type"] as? String == "user.updated" && $0["subject"] as? String == user }?.data("fullName") as? String,
                       "New Name")
        XCTAssertEqual(probe.first { $0["type"] as? String == "session.revoked" && $0["subject"] as? String == user }?.data("reason") as? String,
                       "logout")
    }

    func testTheSchemaValidatorRejectsWhatTheSchemasForbid() throws {
        let schema = try SchemaValidator.event("session.revoked")
        let good: [String: Any] = ["specversion": "1.0", "id": UUID().uuidString.lowercased(), "source": "/auth",
                                   "type": "session.revoked", "time": "2026-11-30T02:00:00.000Z",
                                   "subject": UUID().uuidString.lowercased(), "datacontenttype": "application/json",
                                   "dataschema": "urn:backend:schema:events:session.revoked",
                                   "data": ["sessionId": UUID().uuidString.lowercased(), "userId": UUID().uuidString.lowercased(),
                                            "reason": "logout", "revokedAt": "2026-11-30T02:00:00.000Z"]]
        XCTAssertEqual(schema.validate(good), [])
        var bad = good
        bad["data"] = ["sessionId": "nope", "userId": UUID().uuidString.lowercased(), "reason": "bored", "revokedAt": "yesterday", "extra": 1]
        XCTAssertEqual(schema.validate(bad).count, 4)
        // What every probe checks of the events it reads: a service's, by its type's schema; others' not at all.
        XCTAssertEqual(EventProbe.schemaProblems(good), [])
        XCTAssertEqual(EventProbe.schemaProblems(bad)?.count, 4)
        XCTAssertEqual(EventProbe.schemaProblems(bad.merging(["type": "session.misplaced"]) { $1 }), ["no schema for its type"])
        XCTAssertNil(EventProbe.schemaProblems(bad.merging(["source": "/fleet-gateway"]) { $1 }))
    }

    func testRepublishSendsPastEventsAgainWithTheSameIds() throws {
        let probe = try EventProbe(topics: ["user.registered"])
        let start = Date().addingTimeInterval(-1)
        let user = try api.signup().userId
        let isMine: ([String: Any]) -> Bool = { $0["subject"] as? String == user }
        let first = probe.first(isMine)
        XCTAssertNotNil(first)
        let command = try ServiceProcess("auth", environment: ["DATABASE_URL": database.url],
                                         arguments: ["republish", "--since", ISO8601DateFormatter().string(from: start)])
        command.process.waitUntilExit()
        XCTAssertEqual(command.process.terminationStatus, 0, command.log)
        XCTAssertTrue(command.log.contains("\"events\":2"), "the registration and the mail proving the address: \(command.log)")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { probe.drain(0.1); return probe.seen.filter(isMine).count >= 2 })
        let ids = Set(probe.seen.filter(isMine).compactMap { $0["id"] as? String })
        XCTAssertEqual(ids.count, 1, "consumers de-duplicate by the unchanged event id")
    }
}

final class SchemaValidatorTests: XCTestCase {
    /// A schema the validator cannot compile is a failed check, and the one process shared by the run goes on.
    func testABrokenSchemaIsReportedAndTheValidatorGoesOn() {
        XCTAssertEqual(SchemaValidator(schema: ["type": 5]).validate(1).first?.hasPrefix("the validator failed"), true)
        XCTAssertEqual(SchemaValidator(schema: ["type": "integer"]).validate(1), [])
    }

    func testNumbersAndBooleansAreToldApart() throws {
        let parsed = try JSONSerialization.jsonObject(with: Data(#"{"a":0,"b":1,"c":true,"d":false,"e":1.5}"#.utf8)) as! [String: Any]
        let integer = SchemaValidator(schema: ["type": "integer"]), boolean = SchemaValidator(schema: ["type": "boolean"])
        for key in ["a", "b"] { XCTAssertEqual(integer.validate(parsed[key]!), [], key); XCTAssertFalse(boolean.validate(parsed[key]!).isEmpty, key) }
        for key in ["c", "d"] { XCTAssertEqual(boolean.validate(parsed[key]!), [], key); XCTAssertFalse(integer.validate(parsed[key]!).isEmpty, key) }
        XCTAssertFalse(integer.validate(parsed["e"]!).isEmpty)
    }

    /// The keywords a hand-written validator skipped: bounds (12 of the event schemas have them) and formats.
    func testBoundsAndFormatsAreChecked() {
        let schema = SchemaValidator(schema: ["type": "object", "properties": [
            "n": ["type": "integer", "minimum": 0, "maximum": 3], "at": ["type": "string", "format": "date-time"]]])
        XCTAssertEqual(schema.validate(["n": 3, "at": "2026-12-01T10:00:00Z"]), [])
        XCTAssertEqual(schema.validate(["n": 4, "at": "not a time"]).count, 2, "\(schema.validate(["n": 4, "at": "not a time"]))")
        XCTAssertEqual(schema.validate(["n": -1]).count, 1)
    }
}
