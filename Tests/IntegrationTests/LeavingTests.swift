import Foundation
import Postgres
import XCTest

/// Leaving, as the App Store and the GDPR ask: the list of my signed-in devices, and deleting my account, after which
/// nothing of me is left where a client or a database query could see it, apart from what `docs/privacy.md` says is
/// kept. Through the public origin, with the grace period at zero so the erasure runs at once.
final class LeavingTests: XCTestCase {
    var origin: PublicOrigin!
    var api: APIClient { origin.api }

    override func setUpWithError() throws {
        origin = try PublicOrigin(settings: ["auth": ["ACCOUNT_DELETION_GRACE_HOURS": "0"],
                                             "dispatch": ["DISPATCH_TICK_MS": "100", "FLEET_FEED": "off"]],
                                  prepare: PublicOrigin.catalogue(first: 12))
    }

    override func tearDown() {
        origin?.stop(failed: (testRun?.failureCount ?? 0) > 0)
    }

    struct Person { let id: String; let token: String; let username: String }

    func signUp(_ name: String, agent: String = "Tapestry/1.0 (iPhone)") throws -> Person {
        let username = name + String(UUID().uuidString.prefix(6)).lowercased()
        let r = try api.send("POST", "/v1/auth/signup", json: ["username": username, "email": "\(username)@example.com",
                                                               "password": "correct horse battery", "fullName": name.capitalized],
                             headers: ["User-Agent": agent])
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
        return Person(id: r.userId, token: r.accessToken, username: username)
    }

    func upload(_ path: String, as who: Person) throws -> String {
        let r = try api.send("POST", path, raw: Images.png, token: who.token, headers: ["Content-Type": "image/png"])
        XCTAssertEqual(r.status, 201)
        return r["id"] as? String ?? ""
    }

    func testMySignedInDevicesAndSigningThemOut() throws {
        let ana = try signUp("ana")
        let laptop = try api.send("POST", "/v1/auth/login", json: ["username": ana.username, "password": "correct horse battery"],
                                  headers: ["User-Agent": "Mozilla/5.0 (X11; Linux x86_64)"])
        XCTAssertEqual(laptop.status, 200)
        let sessions = try api.get("/v1/users/me/sessions", token: ana.token)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(sessions.count, 2)
        XCTAssertEqual(Set(sessions.compactMap { $0["device"] as? String }), ["Tapestry/1.0 (iPhone)", "Mozilla/5.0 (X11; Linux x86_64)"],
                       "what each client called itself")
        XCTAssertEqual(sessions.filter { $0["current"] as? Bool == true }.map { $0["device"] as? String }, ["Tapestry/1.0 (iPhone)"])
        let other = sessions.first { $0["current"] as? Bool == false }?["id"] as? String ?? ""

        // "Sign out this one" for the laptop: its token stops working, the phone's does not.
        XCTAssertEqual(try api.send("DELETE", "/v1/users/me/sessions/\(other)", token: ana.token).status, 204)
        assertClientError(try api.get("/v1/users/me/sessions", token: laptop.accessToken), 401)
        XCTAssertEqual(try api.get("/v1/users/me/sessions", token: ana.token).status, 200)
        assertClientError(try api.send("DELETE", "/v1/users/me/sessions/\(other)", token: ana.token), 404, code: "not_found", "signed out already")
        let ben = try signUp("ben")
        let bens = (try api.get("/v1/users/me/sessions", token: ben.token)["items"] as? [[String: Any]])?.first?["id"] as? String ?? ""
        assertClientError(try api.send("DELETE", "/v1/users/me/sessions/\(bens)", token: ana.token), 404, code: "not_found", "not hers")
        XCTAssertEqual(try api.get("/v1/users/me", token: ben.token).status, 200)

        // "Sign out all others".
        let tablet = try api.post("/v1/auth/login", ["username": ana.username, "password": "correct horse battery"]).accessToken
        XCTAssertEqual(try api.send("DELETE", "/v1/users/me/sessions", token: ana.token).status, 204)
        assertClientError(try api.get("/v1/users/me/sessions", token: tablet), 401)
        XCTAssertEqual((try api.get("/v1/users/me/sessions", token: ana.token)["items"] as? [Any])?.count, 1)
    }

    func testADeletedAccountLeavesNothingBehindAndSigningInAgainIsNotPossible() throws {
        let ana = try signUp("ana"), ben = try signUp("ben")
        // Ana has a face, a group with Ben, stories, comments, photos; a room, messages, a todo; a parcel for Ben and a
        // courier record; likes, a comment, a playlist, preferences.
        let avatar = try upload("/v1/media?purpose=avatar", as: ana)
        XCTAssertEqual(try api.patch("/v1/users/me", ["avatarMediaId": avatar], token: ana.token).status, 200)
        let avatarUrl = try XCTUnwrap(try api.get("/v1/users/me", token: ana.token)["avatarUrl"] as? String)
        let group = try api.post("/v1/groups", ["name": "Family"], token: ana.token)
        let groupId = group["id"] as? String ?? ""
        XCTAssertEqual(try api.post("/v1/groups/join", ["inviteCode": group["inviteCode"] as? String ?? ""], token: ben.token).status, 200)
        let photo = try upload("/v1/media", as: ana)
        let story = try api.post("/v1/stories", ["text": "Ana's secret", "groupIds": [groupId], "mediaIds": [photo]], token: ana.token)
        let photoUrl = (story["media"] as? [[String: Any]])?.first?["url"] as? String
        let bensStory = try api.post("/v1/stories", ["text": "Ben's day", "groupIds": [groupId]], token: ben.token)["id"] as? String ?? ""
        XCTAssertEqual(try api.post("/v1/stories/\(bensStory)/comments", ["text": "Ana was here"], token: ana.token).status, 201)
        // She and Ben would rather not see each other's stories; she takes the newsletter by e-mail.
        XCTAssertEqual(try api.send("PUT", "/v1/users/me/hidden-authors/\(ben.id)", token: ana.token).status, 204)
        XCTAssertEqual(try api.send("PUT", "/v1/users/me/hidden-authors/\(ana.id)", token: ben.token).status, 204)
        XCTAssertEqual(try api.send("PUT", "/v1/groups/\(groupId)/newsletter-delivery", json: ["delivery": "email"], token: ana.token).status, 200)

        let room = try api.post("/v1/rooms", ["name": "Plans", "topic": "Ana's topic"], token: ana.token)["id"] as? String ?? ""
        let code = try api.post("/v1/rooms/\(room)/invite-code", token: ana.token)["inviteCode"] as? String ?? ""
        XCTAssertEqual(try api.post("/v1/rooms/join", ["inviteCode": code], token: ben.token).status, 200)
        let chatPhoto = try upload("/v1/chat/media", as: ana)
        XCTAssertEqual(try api.post("/v1/rooms/\(room)/messages", ["text": "Ana's message", "mediaIds": [chatPhoto]], token: ana.token).status, 201)
        XCTAssertEqual(try api.post("/v1/rooms/\(room)/messages", ["text": "Ben's reply"], token: ben.token).status, 201)
        XCTAssertEqual(try api.post("/v1/rooms/\(room)/todos", ["title": "Ana's todo", "assigneeId": ana.id], token: ana.token).status, 201)

        XCTAssertEqual(try api.post("/v1/couriers/me", ["vehicle": "bike", "capacity": 1], token: ana.token).status, 201)
        XCTAssertEqual(try api.send("PUT", "/v1/couriers/me/location", json: ["lat": 44.4321, "lon": 26.1234], token: ana.token).status, 200)
        XCTAssertEqual(try CourierVetting.apply(api, token: ana.token).status, 201, "she applies to deliver, with her documents")
        let document = try upload("/v1/dispatch/media", as: ana)
        var parcel = ""
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {  // once dispatch has heard of Ben's username
            let booked = try? self.api.post("/v1/parcels", [
                "pickup": ["lat": 44.4268, "lon": 26.1025, "address": "Ana's street 1"], "dropoff": ["lat": 44.45, "lon": 26.09, "address": "Ben's street 2"],
                "recipient": ["name": "Ben", "username": ben.username, "phone": "+40 700 000 001"], "service": "standard", "paymentMethod": "cash",
                "documentPhotoMediaId": document], token: ana.token)
            parcel = booked?["id"] as? String ?? ""
            return (booked?["recipient"] as? [String: Any])?["userId"] as? String == ben.id
        })

        let videos = try api.get("/v1/subjects", token: ana.token)["items"] as? [[String: Any]] ?? []
        let topic = (try api.get("/v1/subjects/\(videos.first?["id"] as? String ?? "")/topics", token: ana.token)["items"] as? [[String: Any]])?.first
        let video = (try api.get("/v1/topics/\(topic?["id"] as? String ?? "")/videos", token: ana.token)["items"] as? [[String: Any]])?.first?["id"] as? String ?? ""
        XCTAssertEqual(try api.send("PUT", "/v1/videos/\(video)/like", token: ana.token).status, 204)
        XCTAssertEqual(try api.post("/v1/videos/\(video)/watched", ["seconds": 30], token: ana.token).status, 204)
        XCTAssertEqual(try api.post("/v1/videos/\(video)/comments", ["text": "Ana's comment"], token: ana.token).status, 201)
        XCTAssertEqual(try api.post("/v1/playlists", ["name": "Ana's list"], token: ana.token).status, 201)
        XCTAssertEqual(try api.send("PUT", "/v1/users/me/preferences", json: ["theme": "dark", "autoplay": false], token: ana.token).status, 200)
        XCTAssertEqual(try api.get("/v1/videos/\(video)/recommendations?limit=2", token: ana.token).status, 200)

        // Her copy of it all, as one archive gathered from every service.
        let export = try api.get("/v1/users/me/export", token: ana.token)
        XCTAssertEqual(export.status, 200)
        XCTAssertEqual(export.headers["content-disposition"], "attachment; filename=\"export.json\"")
        XCTAssertEqual(export["unavailable"] as? [String], [])
        XCTAssertEqual((export["account"] as? [String: Any])?["username"] as? String, ana.username)
        XCTAssertEqual(((export["account"] as? [String: Any])?["sessions"] as? [Any])?.count, 1)
        let text = String(decoding: export.body, as: UTF8.self)
        for thing in ["Ana's secret", "Ana was here", "Ana's message", "Ana's todo", "Ana's street 1", "Ana's comment", "Ana's list",
                      parcel, video, groupId, room] {
            XCTAssertTrue(text.contains(thing), "the export holds \(thing)")
        }
        let images = ["stories", "chat", "dispatch"].flatMap { ((export[$0] as? [String: Any])?["images"] as? [[String: Any]]) ?? [] }
        XCTAssertEqual(images.count, 5, "her avatar, her story's photo, her chat photo, her document, her vehicle (not her identity document)")
        for image in images { XCTAssertEqual(try load(image["url"]).status, 200) }
        XCTAssertEqual(((export["curation"] as? [String: Any])?["preferences"] as? [String: Any])?["theme"] as? String, "dark")
        let lastFix = ((export["dispatch"] as? [String: Any])?["courier"] as? [String: Any])?["lastFix"] as? [String: Any]
        XCTAssertEqual(lastFix?["lat"] as? Double, 44.4321, "where she was last seen is hers too")
        let application = (export["dispatch"] as? [String: Any])?["courierApplication"] as? [String: Any]
        XCTAssertEqual(application?["legalName"] as? String, "Cora Ionescu")
        XCTAssertEqual(application?["identityPhotoKept"] as? Bool, true)
        let storiesPart = export["stories"] as? [String: Any]
        XCTAssertEqual((storiesPart?["hiddenAuthors"] as? [[String: Any]])?.map { $0["userId"] as? String }, [ben.id])
        XCTAssertEqual((storiesPart?["groups"] as? [[String: Any]])?.first { $0["id"] as? String == groupId }?["newsletterDelivery"] as? String,
                       "email")

        // Deleting takes her password again.
        assertClientError(try api.send("DELETE", "/v1/users/me", json: ["password": "wrong password!"], token: ana.token), 403, code: "forbidden")
        assertClientError(try api.send("DELETE", "/v1/users/me", json: [:], token: ana.token), 400, code: "validation_failed")
        let deleted = try api.send("DELETE", "/v1/users/me", json: ["password": "correct horse battery"], token: ana.token)
        XCTAssertEqual(deleted.status, 202, String(decoding: deleted.body, as: UTF8.self))
        XCTAssertNotNil(deleted["deletesAt"] as? String)
        assertClientError(try api.get("/v1/users/me/sessions", token: ana.token), 401, "her sessions end at once")

        // Erased everywhere: nothing in any table of any service names her (a query over every row of every table).
        let database = try origin.database.connect()
        var left: [String] = []
        let erased = TestEnvironment.waitUntil(timeout: 30) {
            left = (try? self.rowsNaming(ana.id, database)) ?? ["?"]
            return left.isEmpty
        }
        XCTAssertTrue(erased, "rows that still name her: \(left)")

        // And what clients see.
        assertClientError(try api.post("/v1/auth/login", ["username": ana.username, "password": "correct horse battery"]), 401)
        assertClientError(try api.get("/v1/usernames/\(ana.username)", token: ben.token), 404, code: "not_found")
        for url in [avatarUrl, photoUrl] { XCTAssertEqual(try load(url).status, 404, "her images stop loading") }
        let stories = try api.get("/v1/groups/\(groupId)/stories", token: ben.token)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(stories.compactMap { $0["text"] as? String }, ["Ben's day"])
        XCTAssertEqual((try api.get("/v1/stories/\(bensStory)/comments", token: ben.token)["items"] as? [Any])?.count, 0)
        let members = try api.get("/v1/groups/\(groupId)", token: ben.token)["members"] as? [[String: Any]] ?? []
        XCTAssertEqual(members.map { $0["id"] as? String }, [ben.id])
        XCTAssertEqual(members.first?["role"] as? String, "admin", "the group passed to Ben")
        let messages = try api.get("/v1/rooms/\(room)/messages", token: ben.token)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(messages.count, 2, "her message keeps its place")
        XCTAssertTrue(messages.first?["text"] is NSNull)
        XCTAssertEqual((messages.first?["author"] as? [String: Any])?["id"] as? String, "00000000-0000-0000-0000-000000000000", "by nobody")
        XCTAssertEqual(messages.last?["text"] as? String, "Ben's reply")
        let kept = try api.get("/v1/parcels?role=recipient", token: ben.token)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(kept.first?["id"] as? String, parcel, "the parcel's record is kept, anonymised")
        XCTAssertEqual((kept.first?["pickup"] as? [String: Any])?["address"] as? String, "")
        XCTAssertEqual((try api.get("/v1/videos/\(video)/comments")["items"] as? [Any])?.count, 0)
        XCTAssertEqual(try api.get("/v1/videos/\(video)")["likeCount"] as? Int, 0)
    }

    func testSigningInAgainWithinTheGracePeriodKeepsTheAccount() throws {
        origin.stop(failed: false)
        origin = try PublicOrigin(settings: ["auth": ["ACCOUNT_DELETION_GRACE_HOURS": "1"]])
        let ana = try signUp("ana")
        let deleted = try api.send("DELETE", "/v1/users/me", json: ["password": "correct horse battery"], token: ana.token)
        XCTAssertEqual(deleted.status, 202)
        let format = ISO8601DateFormatter()
        format.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let deletesAt = try XCTUnwrap(format.date(from: deleted["deletesAt"] as? String ?? ""))
        XCTAssertEqual(deletesAt.timeIntervalSinceNow, 3600, accuracy: 60)
        assertClientError(try api.get("/v1/users/me", token: ana.token), 401)
        let back = try api.post("/v1/auth/login", ["username": ana.username, "password": "correct horse battery"])
        XCTAssertEqual(back.status, 200, "she can still sign in, which keeps the account")
        let row = try origin.database.connect().first("SELECT deletes_at IS NULL AS kept FROM auth.users WHERE id = $1", [ana.id])
        XCTAssertEqual(try row?["kept", as: Bool.self], true)
    }

    /// `schema.table` of every row in the services' schemas whose JSON holds `id`, apart from what is kept on purpose:
    /// auth's `user.deleted` event in its outbox.
    func rowsNaming(_ id: String, _ database: Connection) throws -> [String] {
        let tables = try database.rows("""
            SELECT table_schema || '.' || table_name AS name FROM information_schema.tables
            WHERE table_schema IN ('auth', 'stories', 'chat', 'dispatch', 'curation', 'notify') AND table_type = 'BASE TABLE'
            """).map { try $0["name", as: String.self] }
        var found: [String] = []
        for table in tables {
            let keep = table == "auth.outbox" ? " AND topic <> 'user.deleted'" : ""
            let n: Int = try database.first("SELECT count(*) AS n FROM \(table) t WHERE strpos(row_to_json(t)::text, $1) > 0\(keep)", [id])!["n"]
            if n > 0 { found.append("\(table) (\(n))") }
        }
        return found
    }
}
