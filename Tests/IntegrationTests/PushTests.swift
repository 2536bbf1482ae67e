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
    var notifyEnvironment: [String: String] = [:]
    let serviceToken = String(repeating: "t", count: 40)
    var api: APIClient { APIClient(port: notify.port) }

    override func setUpWithError() throws {
        database = try TestDatabase()
        push = try PushEndpoint()
        auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database.url, "SERVICE_TOKEN": serviceToken])
        notifyEnvironment = [
            "DATABASE_URL": database.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(auth.port)/v1/auth/jwks",
            "KAFKA_GROUP_PREFIX": "t" + UUID().uuidString.prefix(8).lowercased() + "-", "KAFKA_NEW_GROUP_START": "latest",
            "VAPID_PRIVATE_KEY": PushEndpoint.testKey, "VAPID_SUBJECT": "mailto:ops@backend.example",
            "PUSH_ALLOWED_ORIGINS": "http://127.0.0.1:\(push.port)", "PUSH_TIMEOUT_SECONDS": "2", "SERVICE_TOKEN": serviceToken,
        ]
        notify = try ServiceProcess.startReady("notify", environment: notifyEnvironment)
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
        ReminderDue(userId: user.uuid, groupId: group.uuid, reason: .noStoryInPeriod, periodStart: Date().addingTimeInterval(-3600),
                    periodEnd: Date().addingTimeInterval(7200))
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
        let subscribed = try api.post("/v1/push/subscriptions", phone, token: me.accessToken)
        XCTAssertEqual(subscribed.status, 201)
        XCTAssertEqual(try api.post("/v1/push/subscriptions", old, token: me.accessToken).status, 201)
        let created = subscribed["createdAt"] as? String ?? ""
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 5, every: 0.001) { Timestamp.format(Date()) > created }, "the clock passed its creation")
        let again = try api.post("/v1/push/subscriptions", phone, token: me.accessToken)
        XCTAssertEqual(again.status, 201, "the phone subscribes anew, as a browser does")
        XCTAssertGreaterThan(again["updatedAt"] as? String ?? "", again["createdAt"] as? String ?? "~", "the subscription was replaced")
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
        // (A push is marked sent once its service has answered, a moment after the service has it.)
        var log: [[String: Any]] = []
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) {
            log = ((try? api.get("/v1/notifications", token: me.accessToken))?.json["items"] as? [[String: Any]] ?? [])
                .filter { $0["channel"] as? String == "push" }
            return log.allSatisfy { ["sent", "failed"].contains($0["status"] as? String) }
        }, "\(log)")
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

    func testPreferencesAndQuietHoursDecideWhatReachesMeAndWhen() throws {
        let signup = APIClient(port: auth.port)
        let me = try signup.signup("quin" + UUID().uuidString.prefix(8).lowercased(), password: "correct horse battery")
        let friend = try signup.signup("fred" + UUID().uuidString.prefix(8).lowercased(), password: "correct horse battery")
        let key = try XCTUnwrap(try api.get("/v1/push/key", token: me.accessToken)["publicKey"] as? String)
        let phone = try push.subscribe(applicationServerKey: key), friends = try push.subscribe(applicationServerKey: key)
        XCTAssertEqual(try api.post("/v1/push/subscriptions", phone, token: me.accessToken).status, 201)
        XCTAssertEqual(try api.post("/v1/push/subscriptions", friends, token: friend.accessToken).status, 201)
        func mine() throws -> [[String: Any]] {
            (try api.get("/v1/notifications", token: me.accessToken)["items"] as? [[String: Any]] ?? []).filter { $0["channel"] as? String == "push" }
        }

        // Everything is on until I say otherwise; what cannot be turned off is not offered.
        let choices = try api.get("/v1/notifications/preferences", token: me.accessToken)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(choices.count, 12)
        XCTAssertTrue(choices.allSatisfy { $0["enabled"] as? Bool == true })
        XCTAssertEqual(try api.send("PUT", "/v1/notifications/preferences/reminder/push", json: ["enabled": false], token: me.accessToken)["enabled"] as? Bool,
                       false)
        XCTAssertEqual(try api.send("PUT", "/v1/notifications/preferences/password_reset/email", json: ["enabled": false], token: me.accessToken).status, 404)
        XCTAssertEqual(try api.send("PUT", "/v1/notifications/preferences/reminder/push", json: ["enabled": "no"], token: me.accessToken).status, 400)

        // Reminders off: mine is not sent; my friend's, after it in the same partition, is (so mine was looked at).
        try EventProbe.publish(reminder(me.userId), subject: me.userId, source: "stories")
        try EventProbe.publish(reminder(friend.userId), subject: me.userId, source: "stories")
        XCTAssertEqual(try push.waitFor(1, at: friends["endpoint"]).count, 1)
        XCTAssertEqual(try mine().count, 0, "nothing recorded for a kind I turned off")

        // Quiet hours around now (in Tokyo): a reminder waits, an offer does not (it is worth nothing later).
        XCTAssertEqual(try api.send("PUT", "/v1/notifications/preferences/reminder/push", json: ["enabled": true], token: me.accessToken).status, 200)
        var tokyo = Calendar(identifier: .gregorian)
        tokyo.timeZone = TimeZone(identifier: "Asia/Tokyo")!
        let hour = tokyo.component(.hour, from: Date())
        let quiet = ["from": String(format: "%02d:00", (hour + 23) % 24), "to": String(format: "%02d:00", (hour + 2) % 24), "timeZone": "Asia/Tokyo"]
        XCTAssertEqual(try api.send("PUT", "/v1/notifications/quiet-hours", json: quiet, token: me.accessToken).status, 200)
        XCTAssertEqual(try api.get("/v1/notifications/quiet-hours", token: me.accessToken)["from"] as? String, quiet["from"])
        XCTAssertEqual(try api.send("PUT", "/v1/notifications/quiet-hours", json: ["from": "25:00", "to": "07:00", "timeZone": "Asia/Tokyo"],
                                    token: me.accessToken).status, 400)
        XCTAssertEqual(try api.send("PUT", "/v1/notifications/quiet-hours", json: ["from": "22:00", "to": "07:00", "timeZone": "Mars/Olympus"],
                                    token: me.accessToken).status, 400)
        try EventProbe.publish(reminder(me.userId), subject: me.userId, source: "stories")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { ((try? mine()) ?? []).count == 1 }, "the reminder is recorded")
        let parcel = UUID().uuidString.lowercased()
        try EventProbe.publish(ParcelStatusChanged(parcelId: parcel.uuid, from: .awaitingCourier, to: .offered, actor: .system, actorId: nil,
                                                   courierId: me.userId.uuid, place: nil, at: Date()), subject: parcel, source: "dispatch")
        let rang = try push.waitFor(1, at: phone["endpoint"])
        XCTAssertEqual(rang.compactMap { ($0["payload"] as? [String: Any])?["kind"] as? String }, ["parcel_offer"], "the offer, not the reminder")
        XCTAssertEqual(try mine().first { $0["kind"] as? String == "reminder" }?["status"] as? String, "pending", "held until the quiet hours end")

        // Quiet hours over (removed): the reminder that waited arrives.
        XCTAssertEqual(try api.send("DELETE", "/v1/notifications/quiet-hours", token: me.accessToken).status, 204)
        XCTAssertEqual(try api.get("/v1/notifications/quiet-hours", token: me.accessToken).status, 404)
        XCTAssertEqual(try push.waitFor(2, at: phone["endpoint"]).compactMap { ($0["payload"] as? [String: Any])?["kind"] as? String },
                       ["parcel_offer", "reminder"])
    }

    /// `parcel.status` and `parcel.created` are topics of their own, read in no fixed order with each other: a step
    /// read first (a consumer catching up, a broker that answers late) still reaches the parcel's recipient.
    func testAParcelStepReadBeforeItsParcelWasCreatedReachesItsRecipient() throws {
        let rita = try APIClient(port: auth.port).signup("rita" + UUID().uuidString.prefix(8).lowercased(), password: "correct horse battery")
        let key = try XCTUnwrap(try api.get("/v1/push/key", token: rita.accessToken)["publicKey"] as? String)
        let phone = try push.subscribe(applicationServerKey: key)
        XCTAssertEqual(try api.post("/v1/push/subscriptions", phone, token: rita.accessToken).status, 201)
        let parcel = UUID().uuidString.lowercased(), sender = UUID().uuidString.lowercased(), courier = UUID().uuidString.lowercased()
        try EventProbe.publish(ParcelStatusChanged(parcelId: parcel.uuid, from: .inTransit, to: .readyForCollection, actor: .courier,
                                                   actorId: courier.uuid, courierId: courier.uuid, place: nil, centreId: UUID(),
                                                   senderId: sender.uuid, recipientUserId: rita.userId.uuid, at: Date()),
                               subject: parcel, source: "dispatch")
        let rang = try push.waitFor(1, at: phone["endpoint"])
        let told = rang.compactMap { ($0["payload"] as? [String: Any])?["data"] as? [String: Any] }
        XCTAssertEqual(told.map { $0["status"] as? String }, ["ready_for_collection"], "\(rang)")
        XCTAssertEqual(told.first?["parcelId"] as? String, parcel)
    }

    func testAKill9DuringABurstLosesNoPushAndRepeatsOnlyWhatWasInFlight() throws {
        let me = try APIClient(port: auth.port).signup("kim" + UUID().uuidString.prefix(8).lowercased(), password: "correct horse battery")
        let key = try XCTUnwrap(try api.get("/v1/push/key", token: me.accessToken)["publicKey"] as? String)
        let phone = try push.subscribe(applicationServerKey: key)
        XCTAssertEqual(try api.post("/v1/push/subscriptions", phone, token: me.accessToken).status, 201)
        try push.slow(phone["endpoint"], delay: 0.05)  // a push service taking 50 ms a message: sends are in flight at the kill

        let burst = 200
        try EventProbe.publish((0..<burst).map { _ in reminder(me.userId) }, subject: me.userId, source: "stories")
        XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 30, every: 0.02) { try push.messages(phone["endpoint"]).count >= 40 })
        notify.kill9()
        let beforeKill = try push.messages(phone["endpoint"]).count
        notify = try ServiceProcess.startReady("notify", port: notify.port, environment: notifyEnvironment)

        func groups() throws -> [String] {
            try push.messages(phone["endpoint"]).compactMap { (($0["payload"] as? [String: Any])?["data"] as? [String: Any])?["groupId"] as? String }
        }
        XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 90, every: 0.2) { Set(try groups()).count == burst }, "every reminder arrives")
        // and nothing is left to send: the ones in flight at the kill were sent again once their lease ran out.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60, every: 0.2) {
            (try? database.connect().first("SELECT count(*)::int AS n FROM notify.deliveries WHERE channel = 'push' AND status IN ('pending', 'sending')")?["n", as: Int.self]) == 0
        }, "the log has nothing left to send")
        let received = try groups()
        let repeated = received.count - Set(received).count
        print("notify kill -9 during a burst of \(burst) pushes: \(beforeKill) delivered before the kill, \(received.count - beforeKill) after, "
              + "\(burst - Set(received).count) lost, \(repeated) delivered twice (at most 4 in flight: one per sender loop)")
        XCTAssertEqual(Set(received).count, burst, "none lost")
        XCTAssertLessThanOrEqual(repeated, 4, "only what the 4 senders had in flight")
        let refusals = try push.refusals()
        XCTAssertEqual(refusals.count, 0, "\(refusals.reasons)")
    }

    func testChatMembersWhoAreAwayHearOfARoomOnceAWindowAndOfAMentionAtOnce() throws {
        // chat beside notify, sharing the service token notify asks it what members have not read with.
        let token = serviceToken
        let chat = try ServiceProcess.startReady("chat", environment: [
            "DATABASE_URL": database.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(auth.port)/v1/auth/jwks", "SERVICE_TOKEN": token,
            "KAFKA_GROUP_PREFIX": notifyEnvironment["KAFKA_GROUP_PREFIX"]!])
        defer {
            if (testRun?.failureCount ?? 0) > 0 { print("--- chat log ---\n\(chat.log.suffix(6000))") }
            _ = chat.stop()
        }
        notify.stop()
        notifyEnvironment.merge(["CHAT_URL": "http://127.0.0.1:\(chat.port)", "CHAT_WINDOW_SECONDS": "4"]) { $1 }
        notify = try ServiceProcess.startReady("notify", port: notify.port, environment: notifyEnvironment)
        XCTAssertTrue(consumersAssigned(notify, timeout: 30))
        let rooms = APIClient(port: chat.port), accounts = APIClient(port: auth.port)
        func person(_ name: String) throws -> (id: String, token: String, username: String) {
            let username = name + UUID().uuidString.prefix(8).lowercased()
            let r = try accounts.signup(username, password: "correct horse battery")
            return (r.userId, r.accessToken, username)
        }
        let ann = try person("ann"), ben = try person("ben"), cat = try person("cat"), dan = try person("dan")
        let room = try rooms.post("/v1/rooms", ["name": "Team"], token: ann.token)
        XCTAssertEqual(room.status, 201, String(decoding: room.body, as: UTF8.self))
        let id = room["id"] as? String ?? ""
        var phones: [String: Any] = [:]
        let key = try XCTUnwrap(try api.get("/v1/push/key", token: ben.token)["publicKey"] as? String)
        for who in [ben, cat, dan] {
            XCTAssertEqual(try rooms.post("/v1/rooms/join", ["inviteCode": room["inviteCode"] as? String ?? ""], token: who.token).status, 200)
            let phone = try push.subscribe(applicationServerKey: key)
            XCTAssertEqual(try api.post("/v1/push/subscriptions", phone, token: who.token).status, 201)
            phones[who.id] = phone["endpoint"]
        }
        // chat knows everyone's username (from auth's events: a mention names a member it knows), and notify who is in
        // the room (from chat's), before the messages come.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60, every: 0.2) {
            let members = (try? rooms.get("/v1/rooms/\(id)", token: ann.token))?.json["members"] as? [[String: Any]] ?? []
            return members.count == 4 && members.allSatisfy { ($0["user"] as? [String: Any])?["name"] is String }
        }, "chat knows the members' names")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            (try? self.database.connect().first("SELECT count(*)::int AS n FROM notify.room_members WHERE room_id = $1::uuid", [id])?["n", as: Int.self]) == 4
        })

        // Ann writes twice, naming Cat in the second, early in a window (windows are whole multiples of 4 s); Dan
        // reads at once.
        let now = Date().timeIntervalSince1970
        Thread.sleep(forTimeInterval: (now / 4).rounded(.down) * 4 + 4.1 - now)
        XCTAssertEqual(try rooms.post("/v1/rooms/\(id)/messages", ["text": "Standup moved to 10"], token: ann.token).status, 201)
        let second = try rooms.post("/v1/rooms/\(id)/messages", ["text": "@\(cat.username) can you take the notes?"], token: ann.token)
        XCTAssertEqual(second.status, 201)
        XCTAssertEqual(try rooms.send("PUT", "/v1/rooms/\(id)/read", json: ["seq": second["seq"] as? Int ?? 0], token: dan.token).status, 200)

        // Cat hears of the mention at once; Ben, once the window closes, of the two messages in one notice; Dan, who
        // read them, of nothing.
        var mention: [String: Any]?
        XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 10, every: 0.1) {
            mention = try push.messages(phones[cat.id]).compactMap { $0["payload"] as? [String: Any] }.first { $0["kind"] as? String == "chat_mention" }
            return mention != nil
        }, "Cat's mention")
        XCTAssertEqual((mention?["data"] as? [String: Any])?["roomId"] as? String, id)
        let told = try push.waitFor(1, at: phones[ben.id], timeout: 20)
        XCTAssertEqual(told.count, 1)
        let notice = told.first?["payload"] as? [String: Any]
        XCTAssertEqual(notice?["kind"] as? String, "chat_message")
        XCTAssertEqual(notice?["title"] as? String, "Team")
        XCTAssertEqual(notice?["body"] as? String, "2 new messages")
        XCTAssertEqual(notice?["url"] as? String, "/rooms/\(id)")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            (try? self.database.connect().first("SELECT count(*)::int AS n FROM notify.deliveries WHERE channel = 'push' AND status IN ('pending', 'sending')")?["n", as: Int.self]) == 0
        }, "nothing left waiting")
        XCTAssertEqual(try push.messages(phones[dan.id]).count, 0, "Dan read them: nothing to tell")
        XCTAssertEqual(try push.messages(phones[ben.id]).count, 1, "one notice for the window")
    }
}
