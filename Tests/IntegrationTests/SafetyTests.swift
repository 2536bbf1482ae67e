import Foundation
import XCTest

/// Safety, as app stores ask of content from users (Guideline 1.2): blocking a person, and reports an operator
/// decides. Through the public origin.
final class SafetyTests: XCTestCase {
    var origin: PublicOrigin!
    var api: APIClient { origin.api }
    let moderator = String(repeating: "m", count: 40)

    override func setUpWithError() throws {
        origin = try PublicOrigin(settings: ["auth": ["OPERATOR_TOKEN": moderator], "curation": ["OPERATOR_TOKEN": moderator],
                                             "stories": ["OPERATOR_TOKEN": moderator], "chat": ["OPERATOR_TOKEN": moderator]],
                                  prepare: PublicOrigin.catalogue(first: 3))
    }

    override func tearDown() {
        origin?.stop(failed: (testRun?.failureCount ?? 0) > 0)
    }

    struct Person { let id: String; let token: String }

    func signUp(_ name: String) throws -> Person {
        let r = try api.signup(name + String(UUID().uuidString.prefix(6)).lowercased())
        XCTAssertEqual(r.status, 201)
        return Person(id: r.userId, token: r.accessToken)
    }

    /// A video of the catalogue.
    func video(_ who: Person) throws -> String {
        let subject = (try api.get("/v1/subjects")["items"] as? [[String: Any]])?.first?["id"] as? String ?? ""
        let topic = (try api.get("/v1/subjects/\(subject)/topics")["items"] as? [[String: Any]])?.first?["id"] as? String ?? ""
        return (try api.get("/v1/topics/\(topic)/videos")["items"] as? [[String: Any]])?.first?["id"] as? String ?? ""
    }

    func testABlockedPersonCannotReachTheOneWhoBlockedThem() throws {
        let ana = try signUp("ana"), bob = try signUp("bob")
        // They share a group (so they may open a direct room) and a team room.
        let group = try api.post("/v1/groups", ["name": "Club"], token: ana.token)
        XCTAssertEqual(try api.post("/v1/groups/join", ["inviteCode": group["inviteCode"] as? String ?? ""], token: bob.token).status, 200)
        let room = try api.post("/v1/rooms", ["name": "Club chat"], token: ana.token)["id"] as? String ?? ""
        let code = try api.post("/v1/rooms/\(room)/invite-code", token: ana.token)["inviteCode"] as? String ?? ""
        XCTAssertEqual(try api.post("/v1/rooms/join", ["inviteCode": code], token: bob.token).status, 200)
        XCTAssertEqual(try api.post("/v1/rooms/\(room)/messages", ["text": "Bob's first"], token: bob.token).status, 201)
        let video = try video(ana)
        XCTAssertEqual(try api.post("/v1/videos/\(video)/comments", ["text": "Bob's comment"], token: bob.token).status, 201)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {  // once chat has heard that they share the group
            (try? self.api.post("/v1/rooms/direct", ["userId": ana.id], token: bob.token))?.status == 200
        }, "before the block, Bob may message Ana")

        // Ana blocks Bob.
        assertClientError(try api.send("PUT", "/v1/users/me/blocks/\(ana.id)", token: ana.token), 400, code: "validation_failed", "herself")
        assertClientError(try api.send("PUT", "/v1/users/me/blocks/\(UUID().uuidString.lowercased())", token: ana.token), 404)
        let probe = try EventProbe(topics: ["user.blocked"])
        XCTAssertEqual(try api.send("PUT", "/v1/users/me/blocks/\(bob.id)", token: ana.token).status, 204)
        XCTAssertEqual(try api.send("PUT", "/v1/users/me/blocks/\(bob.id)", token: ana.token).status, 204, "again: nothing changes")
        XCTAssertEqual((try api.get("/v1/users/me/blocks", token: ana.token)["items"] as? [[String: Any]])?.map { $0["id"] as? String }, [bob.id])
        let blocked = probe.first { $0["type"] as? String == "user.blocked" && $0["subject"] as? String == ana.id }
        XCTAssertEqual(blocked?.data("blockedUserId") as? String, bob.id)
        XCTAssertEqual(try SchemaValidator.event("user.blocked").validate(blocked?.envelope ?? [:]), [])

        // No direct room with her, from either side, once chat has heard (in the one they had, his words are hidden from her).
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            (try? self.api.post("/v1/rooms/direct", ["userId": ana.id], token: bob.token))?.status == 403
        }, "Bob cannot open a direct room with Ana")
        assertClientError(try api.post("/v1/rooms/direct", ["userId": bob.id], token: ana.token), 403, code: "forbidden")
        // His words are hidden from her, not from others.
        XCTAssertEqual(try api.post("/v1/rooms/\(room)/messages", ["text": "Bob again"], token: bob.token).status, 201)
        XCTAssertEqual((try api.get("/v1/rooms/\(room)/messages", token: ana.token)["items"] as? [Any])?.count, 0)
        XCTAssertEqual((try api.get("/v1/rooms/\(room)/messages", token: bob.token)["items"] as? [Any])?.count, 2)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            ((try? self.api.get("/v1/videos/\(video)/comments", token: ana.token))?["items"] as? [Any])?.count == 0
        }, "his comment is hidden from her")
        XCTAssertEqual((try api.get("/v1/videos/\(video)/comments")["items"] as? [Any])?.count, 1, "not from others")
        // A code he learned does not let him into what she runs.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {  // a new group each time, until stories has heard
            let other = (try? self.api.post("/v1/groups", ["name": "Ana's other"], token: ana.token))?["inviteCode"] as? String ?? ""
            return (try? self.api.post("/v1/groups/join", ["inviteCode": other], token: bob.token))?.status == 404
        })
        let otherRoom = try api.post("/v1/rooms", ["name": "Ana's room"], token: ana.token)["id"] as? String ?? ""
        let otherCode = try api.post("/v1/rooms/\(otherRoom)/invite-code", token: ana.token)["inviteCode"] as? String ?? ""
        assertClientError(try api.post("/v1/rooms/join", ["inviteCode": otherCode], token: bob.token), 404, code: "not_found")

        // Lifted, all is as before.
        XCTAssertEqual(try api.send("DELETE", "/v1/users/me/blocks/\(bob.id)", token: ana.token).status, 204)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            ((try? self.api.get("/v1/rooms/\(room)/messages", token: ana.token))?["items"] as? [Any])?.count == 2
        })
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) {
            (try? self.api.post("/v1/rooms/direct", ["userId": ana.id], token: bob.token))?.status == 200
        })
    }

    func testAReportedCommentTakenDownDisappearsForEveryReader() throws {
        let leo = try signUp("leo"), ana = try signUp("ana")
        let video = try video(ana)
        let comment = try api.post("/v1/videos/\(video)/comments", ["text": "Buy followers at example.com"], token: leo.token)["id"] as? String ?? ""
        let keep = try api.post("/v1/videos/\(video)/comments", ["text": "A fair question"], token: leo.token)["id"] as? String ?? ""

        assertClientError(try api.post("/v1/comments/\(comment)/reports", ["reason": "rude"], token: ana.token), 400, code: "validation_failed")
        assertClientError(try api.post("/v1/comments/\(UUID().uuidString.lowercased())/reports", ["reason": "spam"], token: ana.token), 404)
        let report = try api.post("/v1/comments/\(comment)/reports", ["reason": "spam", "note": "an advert"], token: ana.token)
        XCTAssertEqual(report.status, 201)
        XCTAssertEqual(report["status"] as? String, "open")
        let again = try api.post("/v1/comments/\(comment)/reports", ["reason": "harassment"], token: ana.token)
        XCTAssertEqual(again["id"] as? String, report["id"] as? String, "one report per person and comment")
        let other = try api.post("/v1/comments/\(keep)/reports", ["reason": "other"], token: ana.token)["id"] as? String ?? ""

        // The operator's queue, with the moderators' credential only.
        assertClientError(try api.get("/v1/operator/curation/reports", token: ana.token), 401)
        let queue = try api.get("/v1/operator/curation/reports", token: moderator)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(queue.map { $0["targetId"] as? String }, [comment, keep])
        XCTAssertEqual(queue.first?["authorId"] as? String, leo.id)
        XCTAssertEqual(queue.first?["reason"] as? String, "harassment")

        let probe = try EventProbe(topics: ["video.comment_taken_down"])
        let decided = try api.post("/v1/operator/curation/reports/\(report["id"] as? String ?? "")", ["action": "take_down"], token: moderator)
        XCTAssertEqual(decided["status"] as? String, "taken_down")
        assertClientError(try api.post("/v1/operator/curation/reports/\(report["id"] as? String ?? "")", ["action": "dismiss"], token: moderator),
                          409, code: "conflict", "decided already")
        XCTAssertEqual(try api.post("/v1/operator/curation/reports/\(other)", ["action": "dismiss"], token: moderator)["status"] as? String,
                       "dismissed")
        // Gone for every reader: anonymous, the reporter, its author; the other comment stays.
        for token in [nil, ana.token, leo.token] {
            let comments = try api.get("/v1/videos/\(video)/comments", token: token)["items"] as? [[String: Any]] ?? []
            XCTAssertEqual(comments.map { $0["id"] as? String }, [keep])
        }
        XCTAssertEqual(try api.get("/v1/videos/\(video)")["commentCount"] as? Int, 1)
        let event = probe.first { $0["type"] as? String == "video.comment_taken_down" && $0.data("commentId") as? String == comment }
        XCTAssertEqual(event?.data("authorId") as? String, leo.id)
        XCTAssertEqual(try SchemaValidator.event("video.comment_taken_down").validate(event?.envelope ?? [:]), [])
        XCTAssertEqual((try api.get("/v1/operator/curation/reports", token: moderator)["items"] as? [Any])?.count, 0, "the queue is empty")
    }

    func testAReportedStoryOrMessageTakenDownIsGoneForEveryMember() throws {
        let ana = try signUp("ana"), leo = try signUp("leo"), outsider = try signUp("out")
        // A group and a room they share; Leo posts a story and a message Ana reports.
        let group = try api.post("/v1/groups", ["name": "Family"], token: ana.token)
        let groupId = group["id"] as? String ?? ""
        XCTAssertEqual(try api.post("/v1/groups/join", ["inviteCode": group["inviteCode"] as? String ?? ""], token: leo.token).status, 200)
        let story = try api.post("/v1/stories", ["text": "Buy cheap pills", "groupIds": [groupId]], token: leo.token)["id"] as? String ?? ""
        let fine = try api.post("/v1/stories", ["text": "A fine day", "groupIds": [groupId]], token: leo.token)["id"] as? String ?? ""
        let room = try api.post("/v1/rooms", ["name": "Plans"], token: ana.token)
        let roomId = room["id"] as? String ?? ""
        XCTAssertEqual(try api.post("/v1/rooms/join", ["inviteCode": room["inviteCode"] as? String ?? ""], token: leo.token).status, 200)
        let message = try api.post("/v1/rooms/\(roomId)/messages", ["text": "Buy cheap pills"], token: leo.token)["id"] as? String ?? ""

        // Only someone who can see a thing can report it.
        assertClientError(try api.post("/v1/stories/\(story)/reports", ["reason": "spam"], token: outsider.token), 404)
        assertClientError(try api.post("/v1/messages/\(message)/reports", ["reason": "spam"], token: outsider.token), 404)
        assertClientError(try api.post("/v1/stories/\(story)/reports", ["reason": "boring"], token: ana.token), 400, code: "validation_failed")
        let storyReport = try api.post("/v1/stories/\(story)/reports", ["reason": "spam"], token: ana.token)
        XCTAssertEqual(storyReport.status, 201, String(decoding: storyReport.body, as: UTF8.self))
        let messageReport = try api.post("/v1/messages/\(message)/reports", ["reason": "spam", "note": "again"], token: ana.token)
        XCTAssertEqual(messageReport.status, 201, String(decoding: messageReport.body, as: UTF8.self))

        // Each service's moderators see their queue, and take both down.
        assertClientError(try api.get("/v1/operator/stories/reports", token: ana.token), 401)
        let stories = try api.get("/v1/operator/stories/reports", token: moderator)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(stories.map { $0["targetId"] as? String }, [story])
        XCTAssertEqual(stories.first?["authorId"] as? String, leo.id)
        let messages = try api.get("/v1/operator/chat/reports", token: moderator)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(messages.map { $0["targetId"] as? String }, [message])
        let probe = try EventProbe(topics: ["story.taken_down", "chat.message_deleted"])
        XCTAssertEqual(try api.post("/v1/operator/stories/reports/\(storyReport["id"] as? String ?? "")", ["action": "take_down"],
                                    token: moderator)["status"] as? String, "taken_down")
        XCTAssertEqual(try api.post("/v1/operator/chat/reports/\(messageReport["id"] as? String ?? "")", ["action": "take_down"],
                                    token: moderator)["status"] as? String, "taken_down")
        assertClientError(try api.post("/v1/operator/chat/reports/\(messageReport["id"] as? String ?? "")", ["action": "dismiss"],
                                       token: moderator), 409, code: "conflict")

        // Gone for every member, its author too: the story from the stream and the newsletter, the message's text.
        for who in [ana, leo] {
            let stream = try api.get("/v1/groups/\(groupId)/stories", token: who.token)["items"] as? [[String: Any]] ?? []
            XCTAssertEqual(stream.map { $0["id"] as? String }, [fine])
            assertClientError(try api.get("/v1/stories/\(story)", token: who.token), 404)
            XCTAssertEqual(try api.get("/v1/groups/\(groupId)/newsletter", token: who.token)["storyCount"] as? Int, 1)
            let history = try api.get("/v1/rooms/\(roomId)/messages", token: who.token)["items"] as? [[String: Any]] ?? []
            let shown = history.first { $0["id"] as? String == message }
            XCTAssertNotNil(shown?["deletedAt"] as? String, "it keeps its place, deleted")
            XCTAssertNil(shown?["text"] as? String)
        }
        let storyEvent = probe.first { $0["type"] as? String == "story.taken_down" && $0.data("storyId") as? String == story }
        XCTAssertEqual(storyEvent?.data("groupIds") as? [String], [groupId])
        XCTAssertEqual(storyEvent?.data("authorId") as? String, leo.id)
        XCTAssertEqual(try SchemaValidator.event("story.taken_down").validate(storyEvent?.envelope ?? [:]), [])
        let messageEvent = probe.first { $0["type"] as? String == "chat.message_deleted" && $0.data("messageId") as? String == message }
        XCTAssertEqual(messageEvent?.data("reportId") as? String, messageReport["id"] as? String)
        XCTAssertEqual(try SchemaValidator.event("chat.message_deleted").validate(messageEvent?.envelope ?? [:]), [])
    }

    func testAReportedPersonTakenDownIsSuspended() throws {
        let ana = try signUp("ana")
        let trollName = "troll" + String(UUID().uuidString.prefix(6)).lowercased()
        let troll = try api.signup(trollName)
        XCTAssertEqual(troll.status, 201)
        assertClientError(try api.post("/v1/users/\(ana.id)/reports", ["reason": "spam"], token: ana.token), 400, code: "validation_failed")
        assertClientError(try api.post("/v1/users/\(UUID().uuidString.lowercased())/reports", ["reason": "spam"], token: ana.token), 404)
        let report = try api.post("/v1/users/\(troll.userId)/reports", ["reason": "harassment", "note": "threats"], token: ana.token)
        XCTAssertEqual(report.status, 201, String(decoding: report.body, as: UTF8.self))
        let queue = try api.get("/v1/operator/auth/reports", token: moderator)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(queue.map { $0["targetId"] as? String }, [troll.userId])
        XCTAssertEqual(try api.get("/v1/users/me", token: troll.accessToken).status, 200)

        let probe = try EventProbe(topics: ["user.suspended"])
        let decided = try api.post("/v1/operator/auth/reports/\(report["id"] as? String ?? "")", ["action": "take_down"], token: moderator)
        XCTAssertEqual(decided["status"] as? String, "taken_down")
        // Every session ended, in auth and in the other services; signing in again is refused.
        XCTAssertEqual(try api.get("/v1/users/me", token: troll.accessToken).status, 401)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 10) { (try? self.api.get("/v1/groups", token: troll.accessToken).status) == 401 })
        XCTAssertEqual(try api.post("/v1/auth/refresh", ["refreshToken": troll.refreshToken]).status, 401)
        let again = try api.post("/v1/auth/login", ["username": trollName, "password": "correct horse battery"])
        assertClientError(again, 403, code: "forbidden")
        let event = probe.first { $0["type"] as? String == "user.suspended" && $0["subject"] as? String == troll.userId }
        XCTAssertEqual(event?.data("reportId") as? String, report["id"] as? String)
        XCTAssertEqual(try SchemaValidator.event("user.suspended").validate(event?.envelope ?? [:]), [])
    }
}
