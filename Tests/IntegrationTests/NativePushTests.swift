import Foundation
import Models
import XCTest

/// Native push as the phone apps meet it: devices registered as Parse's installations were, notices delivered to the
/// devices of the app they belong to through APNs (HTTP/2, an ES256 provider token) and FCM (HTTP v1, an OAuth token
/// from the service account), each provider played by a stand-in that checks what the real one checks.
final class NativePushTests: XCTestCase {
    var apns: APNsStandIn!
    var fcm: FCMStandIn!
    var database: TestDatabase?
    var auth: ServiceProcess?
    var notify: ServiceProcess?
    var origin: PublicOrigin?
    var notifyEnvironment: [String: String] = [:]
    /// Dispatch's, to approve the journey's courier.
    static let operatorToken = String(repeating: "o", count: 40)
    var api: APIClient { origin?.api ?? APIClient(port: notify!.port) }
    /// notify's own port, for the device routes (the gateway's table gains them when it is regenerated).
    var devicesAPI: APIClient { APIClient(port: origin?.services["notify"]?.port ?? notify!.port) }
    var accounts: APIClient { origin?.api ?? APIClient(port: auth!.port) }

    override func setUpWithError() throws {
        (apns, fcm) = (try APNsStandIn(), try FCMStandIn())
        let providers = apns.environment.merging(fcm.environment) { $1 }.merging(["PUSH_TIMEOUT_SECONDS": "2"]) { $1 }
        if name.contains("Journey") {
            origin = try PublicOrigin(settings: ["dispatch": ["DISPATCH_TICK_MS": "100", "FLEET_FEED": "off", "OPERATOR_TOKEN": Self.operatorToken],
                                                 "notify": providers])
            return
        }
        database = try TestDatabase()
        auth = try ServiceProcess.startReady("auth", environment: ["DATABASE_URL": database!.url])
        notifyEnvironment = providers.merging([
            "DATABASE_URL": database!.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(auth!.port)/v1/auth/jwks",
            "KAFKA_GROUP_PREFIX": "t" + UUID().uuidString.prefix(8).lowercased() + "-", "KAFKA_NEW_GROUP_START": "latest",
        ]) { $1 }
        notify = try ServiceProcess.startReady("notify", environment: notifyEnvironment)
        XCTAssertTrue(consumersAssigned(notify!, timeout: 30), "notify's consumer holds its partitions")
    }

    override func tearDown() {
        let failed = (testRun?.failureCount ?? 0) > 0
        if let notify, failed { print("--- notify log ---\n\(notify.log.suffix(4000))") }
        if failed { print("--- APNs stand-in ---\n\((try? apns.received()) ?? [:])\n--- FCM stand-in ---\n\((try? fcm.received()) ?? [:])") }
        origin?.stop(failed: failed)
        notify?.stop()
        auth?.stop()
        database?.drop()
        apns?.stop()
        fcm?.stop()
    }

    func signUp(_ name: String) throws -> APIResponse {
        let r = try accounts.signup(name + UUID().uuidString.prefix(8).lowercased(), password: "correct horse battery")
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
        return r
    }

    /// Registers a device as the app does at launch; the answer.
    @discardableResult
    func register(_ who: APIResponse, platform: String = "apns", token: String, app: String = "mesajem", status: Int = 201,
                  file: StaticString = #filePath, line: UInt = #line) throws -> APIResponse {
        var body: [String: Any] = ["platform": platform, "token": token, "app": app, "locale": "ro-RO", "timeZone": "Europe/Bucharest"]
        if platform == "apns" { body["environment"] = "production" }
        let r = try devicesAPI.post("/v1/push/devices", body, token: who.accessToken)
        XCTAssertEqual(r.status, status, String(decoding: r.body, as: UTF8.self), file: file, line: line)
        return r
    }

    func devices(_ who: APIResponse) throws -> [[String: Any]] {
        try devicesAPI.get("/v1/push/devices", token: who.accessToken)["items"] as? [[String: Any]] ?? []
    }

    /// My pushes as my notifications list shows them: `kind@address/status`.
    func pushLog(_ who: APIResponse) throws -> [String] {
        (try api.get("/v1/notifications", token: who.accessToken)["items"] as? [[String: Any]] ?? []).filter { $0["channel"] as? String == "push" }
            .map { "\($0["kind"] ?? "")@\($0["address"] ?? "")/\($0["status"] ?? "")" }
    }

    func offer(to courier: String, parcel: String = UUID().uuidString.lowercased(), at: Date = Date()) -> ParcelStatusChanged {
        ParcelStatusChanged(parcelId: parcel.uuid, from: .awaitingCourier, to: .offered, actor: .system, actorId: nil, courierId: courier.uuid,
                            place: nil, at: at)
    }

    func reminder(_ user: String) -> ReminderDue {
        ReminderDue(userId: user.uuid, groupId: UUID(), reason: .noStoryInPeriod,
                    periodStart: Date().addingTimeInterval(-3600), periodEnd: Date().addingTimeInterval(7200))
    }

    /// The Mesajem journey's courier, with only an iPhone registered, hears of the offer from APNs while it stands:
    /// at once (priority 10), kept by Apple no longer than the offer stands, in the courier's app, text the app can
    /// show in its own language. (How soon is bench/notify.sh's to measure, not this test's on a shared machine.)
    func testTheJourneysCourierWithOnlyAnIPhoneGetsTheOfferThroughAPNsWhileItStands() throws {
        let origin = try XCTUnwrap(origin)
        let sender = try signUp("sam"), courier = try signUp("cora")
        XCTAssertEqual(try api.post("/v1/couriers/me", ["vehicle": "scooter", "capacity": 3], token: courier.accessToken).status, 201)
        try CourierVetting.approve(api, courier: courier.userId, token: courier.accessToken, operatorToken: Self.operatorToken, vehicle: "scooter")
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/status", json: ["online": true], token: courier.accessToken)["online"] as? Bool, true)
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 44.4270, "lon": 26.1030], token: courier.accessToken)["applied"]
                       as? Bool, true)
        let iPhone = APNsStandIn.deviceToken()
        try register(courier, token: iPhone)
        XCTAssertEqual((try api.get("/v1/push/subscriptions", token: courier.accessToken)["items"] as? [[String: Any]])?.count, 0,
                       "no Web Push: the iPhone only")

        let photo = try api.send("POST", "/v1/dispatch/media", raw: Images.jpeg, token: sender.accessToken, headers: ["Content-Type": "image/jpeg"])
        XCTAssertEqual(photo.status, 201)
        let booked = try api.post("/v1/parcels", [
            "pickup": ["lat": 44.4268, "lon": 26.1025, "address": "Piața Universității 1"],
            "dropoff": ["lat": 44.4500, "lon": 26.0900, "address": "Bulevardul Aviatorilor 10"], "service": "express", "paymentMethod": "cash",
            "recipient": ["name": "Rita Recipient", "email": "rita@example.com"], "documentPhotoMediaId": photo["id"]!], token: sender.accessToken)
        XCTAssertEqual(booked.status, 201, String(decoding: booked.body, as: UTF8.self))
        let parcel = booked["id"] as? String ?? ""

        let ring = try XCTUnwrap(try apns.waitFor(1, for: iPhone).first, "the offer through APNs")
        let history = try api.get("/v1/parcels/\(parcel)", token: sender.accessToken)["history"] as? [[String: Any]] ?? []
        let offeredAt = try XCTUnwrap(Timestamp.parse(history.first { $0["to"] as? String == "offered" }?["at"] as? String ?? ""))
        let headers = ring["headers"] as? [String: Any] ?? [:]
        XCTAssertLessThan((ring["at"] as? Double ?? .infinity) - offeredAt.timeIntervalSince1970, 30, "while the offer stands")
        XCTAssertEqual(ring["topic"] as? String, apns.topics["mesajem"], "the Mesajem app's bundle id")
        XCTAssertEqual(headers["apns-priority"] as? String, "10", "at once")
        XCTAssertEqual(headers["apns-push-type"] as? String, "alert")
        XCTAssertEqual(headers["apns-expiration"] as? String, String(Int(offeredAt.timeIntervalSince1970 + 30)), "the offer's own expiry")
        XCTAssertNotNil(headers["apns-collapse-id"], "a later notice of the offer replaces this one")
        let payload = ring["payload"] as? [String: Any] ?? [:], aps = payload["aps"] as? [String: Any] ?? [:]
        let alert = aps["alert"] as? [String: Any] ?? [:]
        XCTAssertEqual(alert["loc-key"] as? String, "parcel_offer.body", "the app's own text, in its language")
        XCTAssertEqual(alert["title-loc-key"] as? String, "parcel_offer.title")
        XCTAssertNotNil(alert["body"] as? String, "and English when the app has none")
        XCTAssertEqual(aps["thread-id"] as? String, parcel)
        XCTAssertEqual((payload["data"] as? [String: Any])?["parcelId"] as? String, parcel)
        XCTAssertEqual((try apns.received()["refusals"] as? [[String: Any]])?.count, 0, "Apple would have taken every request")
        XCTAssertEqual(origin.services["notify"]?.log.contains("APNs on"), true)
    }

    /// An Android courier's phone hears of the offer through FCM, at high priority, kept no longer than the offer;
    /// a Tapestry reminder reaches the Tapestry app's device only, as power allows (priority 5).
    func testAnAndroidCourierHearsThroughFCMAndEachAppGetsItsOwnNotices() throws {
        let courier = try signUp("andrei")
        let android = FCMStandIn.registrationToken(), iPad = APNsStandIn.deviceToken()
        try register(courier, platform: "fcm", token: android)
        try register(courier, token: iPad, app: "tapestry")

        let at = Date()
        let parcel = UUID().uuidString.lowercased()
        try EventProbe.publish(offer(to: courier.userId, parcel: parcel, at: at), subject: parcel, source: "dispatch")
        let message = try XCTUnwrap(try fcm.waitFor(1, for: android).first, "the offer through FCM")
        let androidPart = message["android"] as? [String: Any] ?? [:]
        XCTAssertEqual(androidPart["priority"] as? String, "high")
        XCTAssertLessThanOrEqual(Int((androidPart["ttl"] as? String ?? "").dropLast()) ?? .max, 30, "kept no longer than the offer stands")
        XCTAssertEqual((message["data"] as? [String: Any])?["parcelId"] as? String, parcel)
        XCTAssertEqual((androidPart["notification"] as? [String: Any])?["body_loc_key"] as? String, "parcel_offer.body")

        try EventProbe.publish(reminder(courier.userId), subject: courier.userId, source: "stories")
        let reminded = try XCTUnwrap(try apns.waitFor(1, for: iPad).first, "the reminder on the Tapestry app's device")
        XCTAssertEqual(reminded["topic"] as? String, apns.topics["tapestry"])
        XCTAssertEqual((reminded["headers"] as? [String: Any])?["apns-priority"] as? String, "5", "a reminder waits for the phone's convenience")
        XCTAssertEqual((reminded["payload"] as? [String: Any])?["kind"] as? String, "reminder")
        XCTAssertEqual(try apns.notifications(for: iPad).count, 1, "the offer went to the Mesajem app only")
        XCTAssertEqual(try fcm.messages(for: android).count, 1, "the reminder went to the Tapestry app only")
        let exchanges = try fcm.received()["exchanges"] as? Int
        XCTAssertEqual(exchanges, 1, "one access token, cached")
        XCTAssertEqual((try fcm.received()["refusals"] as? [[String: Any]])?.count, 0)

        // My log: both, sent, to where they went.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { Set((try? self.pushLog(courier)) ?? []) == ["parcel_offer@fcm/sent", "reminder@apns/sent"] },
                      "\((try? pushLog(courier)) ?? [])")
    }

    /// A token the provider calls gone is forgotten, with what waited for it; the rest still hear.
    func testATokenTheProviderCallsGoneIsRemoved() throws {
        let me = try signUp("gina")
        let old = APNsStandIn.deviceToken(), current = APNsStandIn.deviceToken(), oldAndroid = FCMStandIn.registrationToken()
        for token in [old, current] { try register(me, token: token, app: "tapestry") }
        try register(me, platform: "fcm", token: oldAndroid, app: "tapestry")
        try apns.forget(old)
        try fcm.forget(oldAndroid)
        try EventProbe.publish(reminder(me.userId), subject: me.userId, source: "stories")
        XCTAssertEqual(try apns.waitFor(1, for: current).count, 1)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { ((try? self.devices(me)) ?? []).count == 1 }, "the gone tokens are removed")
        XCTAssertEqual(try devices(me).first?["token"] as? String, current)
        let refusals = try apns.received()["refusals"] as? [[String: Any]] ?? []
        XCTAssertEqual(refusals.map { "\($0["status"] ?? "") \($0["reason"] ?? "")" }, ["410 Unregistered"])
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) {
            ((try? self.pushLog(me)) ?? []).sorted() == ["reminder@apns/failed", "reminder@apns/sent", "reminder@fcm/failed"]
        }, "\((try? pushLog(me)) ?? [])")
    }

    /// A development build's token goes to Apple's sandbox host; a provider token Apple calls expired is made anew and
    /// the notice sent again at once, and the new token serves what follows.
    func testSandboxTokensGoToTheSandboxAndAnExpiredProviderTokenIsRenewed() throws {
        let me = try signUp("sandu")
        let debugBuild = APNsStandIn.deviceToken()
        var body: [String: Any] = ["platform": "apns", "token": debugBuild, "app": "tapestry", "environment": "sandbox"]
        XCTAssertEqual(try devicesAPI.post("/v1/push/devices", body, token: me.accessToken).status, 201)
        try EventProbe.publish(reminder(me.userId), subject: me.userId, source: "stories")
        XCTAssertEqual(try apns.waitFor(1, for: debugBuild).first?["environment"] as? String, "sandbox")
        XCTAssertEqual(try devices(me).first?["environment"] as? String, "sandbox")

        try apns.expireProviderTokens()
        try EventProbe.publish(reminder(me.userId), subject: me.userId, source: "stories")
        XCTAssertEqual(try apns.waitFor(2, for: debugBuild, timeout: 10).count, 2, "sent again at once with a new token")
        let seen = try apns.received()
        XCTAssertEqual((seen["refusals"] as? [[String: Any]])?.map { $0["reason"] as? String }, ["ExpiredProviderToken"])
        XCTAssertEqual(seen["providerTokens"] as? Int, 2)
        var log: [String] = []
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) {
            log = ((try? self.api.get("/v1/notifications", token: me.accessToken))?["items"] as? [[String: Any]] ?? [])
                .filter { $0["channel"] as? String == "push" }.map { "\($0["address"] ?? "")/\($0["status"] ?? "")/\($0["attempts"] ?? "")" }
            return log == ["apns-sandbox/sent/1", "apns-sandbox/sent/1"]
        }, "each sent at its first try: \(log)")
        body["environment"] = "production"
        XCTAssertEqual(try devicesAPI.post("/v1/push/devices", body, token: me.accessToken)["environment"] as? String, "production",
                       "a release build of the app registers the same token again")
    }

    /// The device routes: what no app sends is refused, naming the field; a token moves to whoever registers it last;
    /// another person's device is not found.
    func testDeviceRoutesCheckTheirInputAndKeepDevicesToTheirOwners() throws {
        let me = try signUp("dora"), other = try signUp("olga")
        let token = APNsStandIn.deviceToken()
        XCTAssertEqual(try api.post("/v1/push/devices", ["platform": "apns", "token": token, "app": "mesajem"]).status, 401)
        let bad: [(String, [String: Any])] = [
            ("platform", ["platform": "wns", "token": token, "app": "mesajem"]),
            ("token", ["platform": "apns", "token": "not-hex", "app": "mesajem"]),
            ("token", ["platform": "fcm", "token": "short", "app": "mesajem"]),
            ("app", ["platform": "apns", "token": token, "app": "pinterest"]),
            ("app", ["platform": "apns", "token": token, "app": "youstudy"]),  // no bundle id configured for it
            ("environment", ["platform": "apns", "token": token, "app": "mesajem", "environment": "staging"]),
            ("environment", ["platform": "fcm", "token": FCMStandIn.registrationToken(), "app": "mesajem", "environment": "sandbox"]),
            ("timeZone", ["platform": "apns", "token": token, "app": "mesajem", "timeZone": "Mars/Olympus"]),
            ("locale", ["platform": "apns", "token": token, "app": "mesajem", "locale": "not a locale"]),
            ("token", ["platform": "apns", "app": "mesajem"]),
        ]
        for (field, body) in bad {
            let r = try api.post("/v1/push/devices", body, token: me.accessToken)
            XCTAssertEqual(r.status, 400, "\(body)")
            XCTAssertEqual(r.errorField, field, "\(body): \(String(decoding: r.body, as: UTF8.self))")
        }
        XCTAssertEqual(try devices(me).count, 0, "nothing half-kept")

        let first = try register(me, token: token.uppercased())
        XCTAssertEqual(first["token"] as? String, token, "kept as APNs gives it back, lower-case")
        XCTAssertEqual(first["environment"] as? String, "production")
        let again = try register(me, token: token, status: 200)
        XCTAssertEqual(again["id"] as? String, first["id"] as? String, "the same device, registered again")
        let id = try XCTUnwrap(first["id"] as? String)

        // Someone else's device: not found; registered by them, it is theirs.
        XCTAssertEqual(try api.send("DELETE", "/v1/push/devices/\(id)", token: other.accessToken).status, 404)
        XCTAssertEqual(try api.send("DELETE", "/v1/push/devices/not-an-id", token: me.accessToken).status, 404)
        try register(other, token: token, status: 200)
        XCTAssertEqual(try devices(me).count, 0, "the phone moved to whoever registered it last")
        XCTAssertEqual(try devices(other).map { $0["id"] as? String }, [id])
        XCTAssertEqual(try api.send("DELETE", "/v1/push/devices/\(id)", token: me.accessToken).status, 404)
        XCTAssertEqual(try api.send("DELETE", "/v1/push/devices/\(id)", token: other.accessToken).status, 204)
        XCTAssertEqual(try devices(other).count, 0)

        // At most 20 a person: the one registered least recently makes room.
        let tokens = (0..<21).map { _ in APNsStandIn.deviceToken() }
        for t in tokens { try register(me, token: t, app: "chat") }
        let kept = Set(try devices(me).compactMap { $0["token"] as? String })
        XCTAssertEqual(kept, Set(tokens.dropFirst()), "the oldest dropped")
    }

    /// The device routes, with both providers on, tried by schemathesis as every service's document is
    /// (SchemathesisTests runs notify without them, where these routes answer 404).
    func testTheDeviceRoutesAnswerAsTheirDocumentSays() throws {
        let st = try XCTUnwrap(ProcessInfo.processInfo.environment["SCHEMATHESIS_BIN"], "run the tests with deploy/local/stack test")
        let me = try signUp("stella")
        try schemathesis(st, document: "http://127.0.0.1:\(notify!.port)/openapi.json", token: me.accessToken,
                         ["--include-path-regex", "^/v1/push/devices"])
        XCTAssertTrue(notify!.process.isRunning)
    }

    /// A kill -9 of notify in the middle of a burst of 200 native pushes loses none: each is recorded before the event
    /// is marked read, and one in flight at the kill is sent again once its lease runs out (with the same apns-id).
    func testAKill9DuringABurstOfNativePushesLosesNone() throws {
        let me = try signUp("kira")
        let phone = APNsStandIn.deviceToken()
        try register(me, token: phone, app: "tapestry")
        try apns.slow(0.05)  // Apple taking 50 ms an answer: sends are in flight at the kill

        let burst = 200
        try EventProbe.publish((0..<burst).map { _ in reminder(me.userId) }, subject: me.userId, source: "stories")
        XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 30, every: 0.02) { try apns.notifications(for: phone).count >= 40 })
        notify!.kill9()
        let beforeKill = try apns.notifications(for: phone).count
        notify = try ServiceProcess.startReady("notify", port: notify!.port, environment: notifyEnvironment)

        func groups() throws -> [String] {
            try apns.notifications(for: phone).compactMap { (($0["payload"] as? [String: Any])?["data"] as? [String: Any])?["groupId"] as? String }
        }
        XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 90, every: 0.2) { Set(try groups()).count == burst }, "every reminder arrives")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60, every: 0.2) {
            (try? database!.connect().first("SELECT count(*)::int AS n FROM notify.deliveries WHERE channel = 'push' AND status IN ('pending', 'sending')")?["n", as: Int.self]) == 0
        }, "the log has nothing left to send")
        let received = try apns.notifications(for: phone)
        let ids = received.compactMap { ($0["headers"] as? [String: Any])?["apns-id"] as? String }
        let repeated = ids.count - Set(ids).count
        print("notify kill -9 during a burst of \(burst) native pushes: \(beforeKill) delivered before the kill, \(received.count - beforeKill) after, "
              + "\(burst - Set(try groups()).count) lost, \(repeated) delivered twice")
        XCTAssertEqual(Set(try groups()).count, burst, "none lost")
        XCTAssertEqual(Set(ids).count, burst, "each delivery named by its own apns-id")
        XCTAssertLessThanOrEqual(repeated, 4, "only what the 4 senders had in flight")
        let seen = try apns.received()
        XCTAssertEqual((seen["refusals"] as? [[String: Any]])?.count, 0)
        XCTAssertEqual(seen["providerTokens"] as? Int, 2, "one provider token per notify process, not one per request")
        XCTAssertLessThanOrEqual(seen["connections"] as? Int ?? .max, 8, "a connection per sender loop, kept open")
    }
}
