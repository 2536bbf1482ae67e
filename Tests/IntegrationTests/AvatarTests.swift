import Foundation
import XCTest

/// Issue 62, point 2, played as the attack: someone names another person's photo (or a made-up id) as their avatar,
/// so that every view of them carries a signed URL loading it for anyone. An avatar is only an image its owner uploaded
/// as one, and an avatar URL names its owner, so that an id that got in anyway loads nobody else's photo.
final class AvatarTests: XCTestCase {
    var origin: PublicOrigin!
    var api: APIClient { origin.api }

    struct Person { let id: String; let token: String; let username: String }

    override func setUpWithError() throws { origin = try PublicOrigin() }
    override func tearDown() { origin?.stop(failed: (testRun?.failureCount ?? 0) > 0) }

    func signUp(_ name: String) throws -> Person {
        let username = name + String(UUID().uuidString.prefix(6)).lowercased()
        let r = try api.post("/v1/auth/signup", ["username": username, "email": "\(username)@example.com",
                                                 "password": "correct horse battery", "fullName": name.capitalized])
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
        return Person(id: r.userId, token: r.accessToken, username: username)
    }

    func upload(_ path: String, _ image: [UInt8] = Images.png, as who: Person) throws -> [String: Any] {
        let r = try api.send("POST", path, raw: image, token: who.token, headers: ["Content-Type": "image/png"])
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
        return r.json
    }

    func setAvatar(_ id: Any, as who: Person) throws -> APIResponse { try api.patch("/v1/users/me", ["avatarMediaId": id], token: who.token) }

    /// `read` again until `shows` holds (the services learn of profiles from auth's events); the last answer.
    func eventually(_ what: String, _ read: () throws -> APIResponse, shows: ([String: Any]) -> Bool,
                    file: StaticString = #filePath, line: UInt = #line) -> [String: Any] {
        var last: [String: Any] = [:]
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { last = (try? read())?.json ?? [:]; return shows(last) }, "\(what): \(last)",
                      file: file, line: line)
        return last
    }

    func member(_ id: String, in group: String, as reader: Person) throws -> [String: Any]? {
        (try api.get("/v1/groups/\(group)", token: reader.token)["members"] as? [[String: Any]])?.first { $0["id"] as? String == id }
    }

    /// A group of `people`, made by the first.
    func group(of people: [Person]) throws -> String {
        let created = try api.post("/v1/groups", ["name": "Friends"], token: people[0].token)
        XCTAssertEqual(created.status, 201)
        for who in people.dropFirst() {
            XCTAssertEqual(try api.post("/v1/groups/join", ["inviteCode": created["inviteCode"] as? String ?? ""], token: who.token).status, 200)
        }
        return created["id"] as? String ?? ""
    }

    func testOnlyOnesOwnAvatarUploadIsAnAvatarAndItShowsEverywhere() throws {
        let victim = try signUp("vera"), attacker = try signUp("mallory"), friend = try signUp("fred")

        // Vera's private photo, in her journal only she sees; the attacker names it as his avatar.
        let journal = try api.post("/v1/journals", ["name": "Diary"], token: victim.token)["id"] as? String ?? ""
        let secret = try upload("/v1/media", Images.decodablePNG, as: victim)["id"] as? String ?? ""
        XCTAssertEqual(try api.post("/v1/stories", ["text": "only mine", "groupIds": [journal], "mediaIds": [secret]], token: victim.token).status, 201)
        for id in [secret, UUID().uuidString.lowercased()] {
            let r = try setAvatar(id, as: attacker)
            assertClientError(r, 400, code: "validation_failed", "another person's photo, or a made-up id, as an avatar")
            XCTAssertEqual(r.errorField, "avatarMediaId")
        }
        XCTAssertTrue(try api.get("/v1/users/me", token: attacker.token)["avatarUrl"] is NSNull, "no avatar, no URL")
        // Nor is Vera's journal photo her own avatar: it was not uploaded as one, and would be shown to all who see her.
        assertClientError(try setAvatar(secret, as: victim), 400, code: "validation_failed", "a photo is not an avatar")

        // Her avatar, uploaded as one, is hers alone to wear; an upload says what it is for, and nothing else.
        let avatar = try upload("/v1/media?purpose=avatar", as: victim)
        let avatarId = avatar["id"] as? String ?? ""
        XCTAssertEqual(try load(avatar["url"]).body, Images.stored(Images.png), "the upload's own URL loads it")
        assertClientError(try api.send("POST", "/v1/media?purpose=poster", raw: Images.png, token: victim.token,
                                       headers: ["Content-Type": "image/png"]), 400, "an unknown purpose")
        assertClientError(try setAvatar(avatarId, as: attacker), 400, code: "validation_failed", "someone else's avatar")
        assertClientError(try api.post("/v1/stories", ["text": "x", "groupIds": [journal], "mediaIds": [avatarId]], token: victim.token),
                          400, code: "validation_failed", "an avatar is not a story's photo")
        let me = try setAvatar(avatarId, as: victim)
        XCTAssertEqual(me.status, 200, String(decoding: me.body, as: UTF8.self))
        XCTAssertEqual(try load(me["avatarUrl"]).body, Images.stored(Images.png), "her avatar on her profile")

        // Seen from stories (a group's members) and chat (a message's author), by the URL each view signs.
        let group = try group(of: [victim, friend])
        let seen = eventually("Vera's face among the group's members", { try api.get("/v1/groups/\(group)", token: friend.token) }) {
            (($0["members"] as? [[String: Any]])?.first { $0["id"] as? String == victim.id })?["avatarMediaId"] as? String == avatarId
        }
        let url = ((seen["members"] as? [[String: Any]])?.first { $0["id"] as? String == victim.id })?["avatarUrl"]
        XCTAssertEqual(try load(url).body, Images.stored(Images.png), "her avatar as a member sees it")
        let room = try api.post("/v1/rooms", ["name": "Chat"], token: victim.token)["id"] as? String ?? ""
        XCTAssertEqual(try api.post("/v1/rooms/\(room)/messages", ["text": "hi"], token: victim.token).status, 201)
        let page = eventually("Vera's face by her message", { try api.get("/v1/rooms/\(room)/messages", token: victim.token) }) {
            (($0["items"] as? [[String: Any]])?.first?["author"] as? [String: Any])?["avatarMediaId"] as? String == avatarId
        }
        XCTAssertEqual(try load(((page["items"] as? [[String: Any]])?.first?["author"] as? [String: Any])?["avatarUrl"]).body, Images.stored(Images.png),
                       "her avatar in chat")

        // Chat and dispatch take only the caller's own uploads too.
        let chatPhoto = try upload("/v1/chat/media", as: victim)["id"] as? String ?? ""
        let theirs = try api.post("/v1/rooms", ["name": "Mine"], token: attacker.token)["id"] as? String ?? ""
        assertClientError(try api.post("/v1/rooms/\(theirs)/messages", ["text": "look", "mediaIds": [chatPhoto]], token: attacker.token),
                          400, code: "validation_failed", "another person's chat photo in a message")
        let document = try upload("/v1/dispatch/media", as: victim)["id"] as? String ?? ""
        let parcel: [String: Any] = ["pickup": ["lat": 44.4, "lon": 26.1, "address": "A"], "dropoff": ["lat": 44.5, "lon": 26.1, "address": "B"],
                                     "recipient": ["name": "R"], "service": "standard", "paymentMethod": "cash", "documentPhotoMediaId": document]
        let refused = try api.post("/v1/parcels", parcel, token: attacker.token)
        assertClientError(refused, 400, code: "validation_failed", "another person's photo as a parcel's document")
        XCTAssertEqual(refused.errorField, "documentPhotoMediaId")
    }

    func testAnAvatarIdThatGotInBeforeLoadsNoOneElsesPhoto() throws {
        let victim = try signUp("vera"), attacker = try signUp("mallory"), friend = try signUp("fred")
        let group = try group(of: [attacker, friend])
        let secret = try upload("/v1/media", Images.decodablePNG, as: victim)["id"] as? String ?? ""
        let old = try upload("/v1/media?purpose=avatar", as: victim)["id"] as? String ?? ""

        // As a PATCH accepted before the fix left it: the victim's private photo, then her avatar, as the attacker's
        // avatar in auth and in the profiles stories and chat copied from auth's events.
        for stolen in [secret, old] {
            let c = try origin.database.connect()
            XCTAssertEqual(try c.execute("UPDATE auth.users SET avatar_media_id = $1 WHERE id = $2",
                                         [UUID(uuidString: stolen)!, UUID(uuidString: attacker.id)!]), 1)
            for schema in ["stories", "chat"] {  // once each has heard of him (user.registered)
                XCTAssertTrue(try TestEnvironment.waitUntil(timeout: 20) {
                    try c.execute("UPDATE \(schema).profiles SET avatar_media_id = $1 WHERE user_id = $2",
                                  [UUID(uuidString: stolen)!, UUID(uuidString: attacker.id)!]) == 1
                }, schema)
            }
            let person = try api.get("/v1/usernames/\(attacker.username)", token: friend.token)
            XCTAssertEqual(person["avatarMediaId"] as? String, stolen)
            assertClientError(try load(person["avatarUrl"]), 404, "auth's view of the attacker does not load Vera's photo")
            let seen = try XCTUnwrap(try member(attacker.id, in: group, as: friend))
            XCTAssertEqual(seen["avatarMediaId"] as? String, stolen)
            let url = try XCTUnwrap(seen["avatarUrl"] as? String)
            assertClientError(try load(url), 404, "the attacker's avatar URL does not load Vera's photo")
            XCTAssertEqual(try api.get(URLComponents(string: url)!.path, token: friend.token).status, 404, "nor with a token")
            let room = try api.post("/v1/rooms", ["name": "Chat"], token: attacker.token)["id"] as? String ?? ""
            XCTAssertEqual(try api.post("/v1/rooms/\(room)/messages", ["text": "hi"], token: attacker.token).status, 201)
            let author = ((try api.get("/v1/rooms/\(room)/messages", token: attacker.token)["items"] as? [[String: Any]])?.first?["author"]
                          as? [String: Any]) ?? [:]
            XCTAssertEqual(author["avatarMediaId"] as? String, stolen)
            assertClientError(try load(author["avatarUrl"]), 404, "nor does chat's")
        }
    }
}
