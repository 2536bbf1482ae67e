import Foundation
import Models
import XCTest

/// Web Push as a browser meets it: subscriptions checked before they are kept, messages signed (VAPID) and encrypted
/// (aes128gcm) so that the push service stand-in verifies and decrypts them, each event delivered once per device,
/// and an endpoint its push service says is gone forgotten.
final class PushTests: XCTestCase {
    var database: TestDatabase!
    var push: PushEndpoint!
    var auth: ServiceProcess!
    var notify: ServiceProcess!
    var api: APIClient { APIClient(port: notify.port) }

    override func setUpWithError() throws {
        database = try TestDatabase()
        push = try PushEndpoint()
        auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url])
        notify = try ServiceProcess.startReady("notify", environment: [
            "DATABASE_URL": database.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(auth.port)/v1/auth/jwks",
            "KAFKA_GROUP_PREFIX": "t" + UUID().uuidString.prefix(8).lowercased() + "-",
            "VAPID_PRIVATE_KEY": PushEndpoint.testKey, "VAPID_SUBJECT": "mailto:ops@backend.example",
            "PUSH_ALLOWED_ORIGINS": "http://127.0.0.1:\(push.port)",
        ])
        XCTAssertTrue(consumersAssigned(notify, timeout: 30), "notify's consumer holds its partitions")
    }

    override func tearDown() {
        if let notify, (testRun?.failureCount ?? 0) > 0 { print("--- notify log ---\n\(notify.log.suffix(4000))") }
        notify?.stop()
        auth?.stop()
        database?.drop()
        push?.stop()
    }

    func reminder(_ user: String, group: String = UUID().uuidString.lowercased()) -> ReminderDue {
        ReminderDue(userId: user, groupId: group, reason: "no_story_in_period", periodStart: Timestamp.format(Date().addingTimeInterval(-3600)),
                    periodEnd: Timestamp.format(Date().addingTimeInterval(7200)))
    }

    func testSubscriptionsAreCheckedEachEventReachesEachDeviceOnceAndAGoneEndpointIsForgotten() throws {
        let me = try APIClient(port: auth.port).signup("pia" + UUID().uuidString.prefix(8).lowercased(), password: "correct horse battery")
        let key = try XCTUnwrap(try api.get("/v1/push/key", token: me.accessToken)["publicKey"] as? String)
        XCTAssertEqual(try api.get("/v1/push/key").status, 401)

        // What no browser gives is refused: a push service not allowed (a private address), keys that are not keys.
        let phone = try push.subscribe(applicationServerKey: key), old = try push.subscribe(applicationServerKey: key, answer: 410)
        var elsewhere = phone
        elsewhere["endpoint"] = "http://10.0.0.7/push/internal"
        let refused = try api.post("/v1/push/subscriptions", elsewhere, token: me.accessToken)
        XCTAssertEqual(refused.status, 400, String(decoding: refused.body, as: UTF8.self))
        var badKey = phone
        badKey["keys"] = ["p256dh": "BAAAAAAA", "auth": (phone["keys"] as? [String: Any])?["auth"] ?? ""]
        XCTAssertEqual(try api.post("/v1/push/subscriptions", badKey, token: me.accessToken).status, 400)
        XCTAssertEqual(try api.post("/v1/push/subscriptions", ["endpoint": phone["endpoint"]!], token: me.accessToken).status, 400)

        // Two devices: a phone, and an old browser its push service has forgotten.
        for device in [phone, old] { XCTAssertEqual(try api.post("/v1/push/subscriptions", device, token: me.accessToken).status, 201) }
        XCTAssertEqual((try api.get("/v1/push/subscriptions", token: me.accessToken)["items"] as? [[String: Any]])?.count, 2)

        // A reminder, repeated with its id (a replay), then another: the phone hears each once.
        let first = reminder(me.userId), id = UUID().uuidString.lowercased()
        try EventProbe.publish(first, subject: me.userId, source: "stories", id: id)
        try EventProbe.publish(first, subject: me.userId, source: "stories", id: id)
        try EventProbe.publish(reminder(me.userId), subject: me.userId, source: "stories")
        let heard = try push.waitFor(2, at: phone["endpoint"])
        XCTAssertEqual(heard.count, 2)
        XCTAssertEqual(heard.compactMap { ($0["payload"] as? [String: Any])?["kind"] as? String }, ["reminder", "reminder"])
        XCTAssertEqual(Set(heard.compactMap { (($0["payload"] as? [String: Any])?["data"] as? [String: Any])?["groupId"] as? String }).count, 2)
        XCTAssertTrue(heard.allSatisfy { ($0["ttl"] as? Int ?? 0) > 0 && ($0["ttl"] as? Int ?? .max) <= 7200 }, "kept until the period closes")
        let refusals = try push.refusals()
        XCTAssertEqual(refusals.count, 0, "\(refusals.reasons)")

        // The forgotten browser's endpoint answered 410: it is no longer mine, and nothing waits for it.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) {
            let items = (try? api.get("/v1/push/subscriptions", token: me.accessToken))?.json["items"] as? [[String: Any]]
            return items?.count == 1
        })
        // My list: the two reminders sent to the phone, and what the old browser was to have, failed (the second only
        // if it came before the browser was forgotten; the sign-up's mail waits, no SMTP server here).
        let log = (try api.get("/v1/notifications", token: me.accessToken)["items"] as? [[String: Any]] ?? []).filter { $0["channel"] as? String == "push" }
        XCTAssertEqual(log.filter { $0["status"] as? String == "sent" }.count, 2, "\(log)")
        XCTAssertEqual(log.count - 2, log.filter { $0["status"] as? String == "failed" }.count, "\(log)")
        XCTAssertTrue(log.allSatisfy { $0["kind"] as? String == "reminder" && $0["address"] as? String == "http://127.0.0.1:\(push.port)" })

        // Removing a device: mine only.
        let mine = try XCTUnwrap((try api.get("/v1/push/subscriptions", token: me.accessToken)["items"] as? [[String: Any]])?.first?["id"] as? String)
        let other = try APIClient(port: auth.port).signup("olga" + UUID().uuidString.prefix(8).lowercased(), password: "correct horse battery")
        XCTAssertEqual(try api.send("DELETE", "/v1/push/subscriptions/\(mine)", token: other.accessToken).status, 404)
        XCTAssertEqual(try api.send("DELETE", "/v1/push/subscriptions/\(mine)", token: me.accessToken).status, 204)
        XCTAssertEqual((try api.get("/v1/push/subscriptions", token: me.accessToken)["items"] as? [[String: Any]])?.count, 0)
    }
}
