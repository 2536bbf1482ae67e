import Foundation
import Models
import XCTest

/// Tapestry's own loop, from stories' events to a member's phone and the app's list: a comment on my story, the
/// newsletter being ready, and new stories in my group (one digest per group and window), each under my preferences,
/// each in `GET /v1/notifications?channel=app` with its read marker.
final class TapestryLoopTests: StoriesTestCase {
    var push: PushEndpoint!
    var apns: APNsStandIn!
    var notify: ServiceProcess!
    /// A group's digest window in these tests (a day in production).
    let window = 6.0
    var inbox: APIClient { APIClient(port: notify.port) }

    override func setUpWithError() throws {
        try super.setUpWithError()
        push = try PushEndpoint()
        apns = try APNsStandIn()
        notify = try ServiceProcess.startReady("notify", environment: apns.environment.merging([
            "DATABASE_URL": database.url, "AUTH_JWKS_URL": "http://127.0.0.1:\(auth.port)/v1/auth/jwks", "KAFKA_GROUP_PREFIX": groupPrefix,
            "KAFKA_NEW_GROUP_START": "latest",
            "VAPID_PRIVATE_KEY": PushEndpoint.testKey, "VAPID_SUBJECT": "mailto:ops@backend.example",
            "PUSH_ALLOWED_ORIGINS": "http://127.0.0.1:\(push.port)", "PUSH_TIMEOUT_SECONDS": "2", "GROUP_DIGEST_SECONDS": String(Int(window)),
        ]) { $1 })
        try waitForConsumers(notify, timeout: 30)
    }

    override func tearDown() {
        if let notify, (testRun?.failureCount ?? 0) > 0 { print("--- notify log ---\n\(notify.log.suffix(4000))") }
        notify?.stop()
        push?.stop()
        apns?.stop()
        super.tearDown()
    }

    /// A browser subscribed for `who`: its endpoint.
    func phone(_ who: Person) throws -> Any? {
        let key = try XCTUnwrap(try inbox.get("/v1/push/key", token: who.token)["publicKey"] as? String)
        let subscription = try push.subscribe(applicationServerKey: key)
        XCTAssertEqual(try inbox.post("/v1/push/subscriptions", subscription, token: who.token).status, 201)
        return subscription["endpoint"]
    }

    func notices(_ who: Person, _ query: String = "") throws -> [[String: Any]] {
        let r = try inbox.get("/v1/notifications?channel=app" + query, token: who.token)
        XCTAssertEqual(r.status, 200, String(decoding: r.body, as: UTF8.self))
        return r["items"] as? [[String: Any]] ?? []
    }

    /// How many events of `topic` notify has processed.
    func processed(_ topic: String) throws -> Int {
        try database.connect().first("SELECT count(*)::int AS n FROM notify.processed_events WHERE topic = $1", [topic])?["n"] ?? 0
    }

    func kinds(_ messages: [[String: Any]]) -> [String] { messages.compactMap { ($0["payload"] as? [String: Any])?["kind"] as? String } }

    func testACommentReachesTheStorysAuthorOnlyAsPushAndInTheListUntilTurnedOff() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        let gid = family["id"] as? String ?? ""
        let annPhone = try phone(ann), benPhone = try phone(ben)
        let iphone = APNsStandIn.deviceToken()
        let device = try inbox.post("/v1/push/devices", ["platform": "apns", "token": iphone, "app": "tapestry", "environment": "production"],
                                    token: ann.token)
        XCTAssertEqual(device.status, 201, String(decoding: device.body, as: UTF8.self))
        XCTAssertTrue(try notices(ann).isEmpty)

        // Ben comments on Ann's story: Ann hears of it on her browser and her iPhone; Ben, who wrote it, does not.
        let story = try api.post("/v1/stories", ["text": "First day at school", "groupIds": [gid]], token: ann.token)
        XCTAssertEqual(story.status, 201)
        let sid = story["id"] as? String ?? ""
        XCTAssertEqual(try api.post("/v1/stories/\(sid)/comments", ["text": "So proud!"], token: ben.token).status, 201)
        let heard = try push.waitFor(1, at: annPhone)
        XCTAssertEqual(kinds(heard), ["story_comment"])
        let notice = heard.first?["payload"] as? [String: Any]
        XCTAssertEqual(notice?["url"] as? String, "/stories/\(sid)")
        let native = try apns.waitFor(1, for: iphone)
        XCTAssertEqual(native.first?["topic"] as? String, "com.example.tapestry", "the Tapestry app's device")
        XCTAssertEqual(((native.first?["payload"] as? [String: Any])?["kind"]) as? String, "story_comment")

        // In Ann's list: unread, then read once she marks it (not by Ben, for whom it is not found).
        var list = try notices(ann)
        XCTAssertEqual(list.map { $0["kind"] as? String }, ["story_comment"])
        XCTAssertTrue(list.first?["readAt"] is NSNull, "\(list)")
        XCTAssertEqual(list.first?["url"] as? String, "/stories/\(sid)")
        XCTAssertEqual(list.first?["channel"] as? String, "app")
        let id = list.first?["id"] as? String ?? ""
        XCTAssertEqual(try notices(ann, "&unread=true").count, 1)
        XCTAssertEqual(try inbox.post("/v1/notifications/\(id)/read", [:], token: ben.token).status, 404)
        let read = try inbox.post("/v1/notifications/\(id)/read", [:], token: ann.token)
        XCTAssertEqual(read.status, 200, String(decoding: read.body, as: UTF8.self))
        XCTAssertTrue(read["readAt"] is String)
        list = try notices(ann)
        XCTAssertTrue(list.first?["readAt"] is String, "\(list)")
        XCTAssertEqual(try notices(ann, "&unread=true").count, 0)
        XCTAssertEqual(try inbox.get("/v1/notifications?channel=fax", token: ann.token).status, 400)

        // Ann comments on her own story: nobody is told (Ben did not write it).
        XCTAssertEqual(try api.post("/v1/stories/\(sid)/comments", ["text": "Thanks!"], token: ann.token).status, 201)

        // Ann turns comments off by push: the next comment is in her list, but reaches no device of hers.
        XCTAssertEqual(try inbox.send("PUT", "/v1/notifications/preferences/story_comment/push", json: ["enabled": false], token: ann.token).status,
                       200)
        XCTAssertEqual(try api.post("/v1/stories/\(sid)/comments", ["text": "Again!"], token: ben.token).status, 201)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { ((try? self.notices(ann)) ?? []).count == 2 })
        // And in the app too: nothing at all.
        XCTAssertEqual(try inbox.send("PUT", "/v1/notifications/preferences/story_comment/app", json: ["enabled": false], token: ann.token).status,
                       200)
        XCTAssertEqual(try api.post("/v1/stories/\(sid)/comments", ["text": "Once more!"], token: ben.token).status, 201)
        // Notify read all four comments (what it delivers it records in the same transaction).
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { ((try? self.processed("story.commented")) ?? 0) == 4 }, "every comment read")
        XCTAssertEqual(try notices(ann).count, 2, "nothing more in the list")
        XCTAssertEqual(try push.messages(annPhone).count, 1, "nothing more on the browser")
        XCTAssertEqual(try apns.notifications(for: iphone).count, 1, "nothing more on the iPhone")
        // (Ann's story is in Ben's digest of new stories, sent once its window of a few seconds closes: not a comment.)
        XCTAssertFalse(kinds(try push.messages(benPhone)).contains("story_comment"), "the commenter heard nothing of the comments")
        XCTAssertFalse(try notices(ben).contains { $0["kind"] as? String == "story_comment" })

        // Mark all read: nothing unread is left.
        XCTAssertEqual(try inbox.post("/v1/notifications/read", [:], token: ann.token).status, 204)
        XCTAssertEqual(try notices(ann, "&unread=true").count, 0)
    }

    func testThreeStoriesInADayGiveOneDigestAndACompiledNewsletterANotice() throws {
        let ann = try person(), ben = try person(), cat = try person()
        let family = try group(ann, name: "Family")
        let gid = family["id"] as? String ?? ""
        for who in [ben, cat] { XCTAssertEqual(try join(who, family).status, 200) }
        let phones = [ann.id: try phone(ann), ben.id: try phone(ben), cat.id: try phone(cat)]

        // Early in a window (whole multiples of its length), Ben posts twice and Cat once.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: window + 1, every: 0.01) {
            let now = Date().timeIntervalSince1970
            return now - (now / self.window).rounded(.down) * self.window < 0.2
        })
        for (who, text) in [(ben, "Ben's garden"), (cat, "Cat's new job"), (ben, "Ben's garden, later")] {
            XCTAssertEqual(try api.post("/v1/stories", ["text": text, "groupIds": [gid]], token: who.token).status, 201)
        }

        // Once the window closed, each member hears once of what the others posted there.
        for (who, count) in [(ann, 3), (ben, 1), (cat, 2)] {
            let told = try push.waitFor(1, at: phones[who.id]!, timeout: 30)
            XCTAssertEqual(kinds(told), ["group_stories_digest"])
            let notice = told.first?["payload"] as? [String: Any]
            XCTAssertEqual(notice?["title"] as? String, "New stories in Family")
            XCTAssertEqual(notice?["body"] as? String, count == 1 ? "1 new story to read." : "\(count) new stories to read.")
            XCTAssertEqual(notice?["url"] as? String, "/groups/\(gid)")
        }
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            (try? self.database.connect().first("""
                SELECT count(*)::int AS n FROM notify.deliveries WHERE channel = 'push' AND status IN ('pending', 'sending')
                """)?["n", as: Int.self]) == 0
        }, "nothing left waiting")
        XCTAssertEqual(try push.messages(phones[ann.id]!).count, 1, "one digest for the window")
        let listed = try notices(ann)
        XCTAssertEqual(listed.map { $0["kind"] as? String }, ["group_stories_digest"])
        XCTAssertEqual(listed.first?["body"] as? String, "3 new stories to read.")
        XCTAssertTrue(listed.first?["readAt"] is NSNull)

        // The period closes: Ann and Cat hear the newsletter is ready; Ben, who wants no word of it, does not.
        XCTAssertEqual(try api.send("PUT", "/v1/groups/\(gid)/newsletter-delivery", json: ["delivery": "off"], token: ben.token).status, 200)
        try database.connect().execute("UPDATE stories.groups SET newsletter_due_at = now() - interval '1 second' WHERE id = $1::uuid", [gid])
        for who in [ann, cat] {
            var ready: [String: Any]?
            XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 30, every: 0.1) {
                ready = try push.messages(phones[who.id]!).compactMap { $0["payload"] as? [String: Any] }.first { $0["kind"] as? String == "newsletter_ready" }
                return ready != nil
            }, "the newsletter's notice")
            XCTAssertEqual((ready?["data"] as? [String: Any])?["groupId"] as? String, gid)
            XCTAssertTrue((ready?["url"] as? String ?? "").hasPrefix("/groups/\(gid)/newsletters/"))
        }
        XCTAssertEqual(try notices(cat).map { $0["kind"] as? String }, ["newsletter_ready", "group_stories_digest"], "the newest first")
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { ((try? self.processed("newsletter.compiled")) ?? 0) >= 1 })
        XCTAssertEqual(kinds(try push.messages(phones[ben.id]!)), ["group_stories_digest"], "no word of the newsletter to Ben")
        XCTAssertEqual(try notices(ben).map { $0["kind"] as? String }, ["group_stories_digest"])
    }
}
