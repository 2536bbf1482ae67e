import Foundation
import Kafka
import XCTest

/// Groups, invite codes, memberships, journals, stories, comments and media, as the Tapestry app uses them.
final class StoriesGroupTests: StoriesTestCase {
    func testCreateJoinByCodeAndSeeEachOther() throws {
        let ann = try person("ann_g"), ben = try person("ben_g")
        let family = try group(ann)
        XCTAssertEqual(family["role"] as? String, "admin")
        let code = family["inviteCode"] as? String ?? ""
        XCTAssertNotNil(code.range(of: "^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}$", options: .regularExpression),
                        "12 Crockford symbols, 60 bits, in groups of four: \(code)")
        // Typed loosely: lower case, no dashes.
        let joined = try api.post("/v1/groups/join", ["inviteCode": code.lowercased().replacingOccurrences(of: "-", with: " ")], token: ben.token)
        XCTAssertEqual(joined.status, 200, String(decoding: joined.body, as: UTF8.self))
        XCTAssertEqual(joined["role"] as? String, "member")
        XCTAssertEqual(try join(ben, family).status, 200, "joining twice is harmless")
        let members = try api.get("/v1/groups/\(family["id"]!)", token: ann.token)["members"] as? [[String: Any]] ?? []
        XCTAssertEqual(members.map { $0["id"] as? String }, [ann.id, ben.id], "oldest member first")
        XCTAssertEqual(members.map { $0["role"] as? String }, ["admin", "member"])
        XCTAssertEqual(try count("memberships", "group_id = '\(family["id"]!)'"), 2)
    }

    func testMembersSeeNamesFromAuthsEvents() throws {
        let ann = try person("ann_names")
        let family = try group(ann)
        XCTAssertEqual(try accounts.patch("/v1/users/me", ["fullName": "Ann Renamed"], token: ann.token).status, 200)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) {
            let members = (try? self.api.get("/v1/groups/\(family["id"]!)", token: ann.token))?["members"] as? [[String: Any]]
            return members?.first?["fullName"] as? String == "Ann Renamed"
        }, "user.updated reaches stories")
    }

    func testRotatingTheInviteCodeRetiresTheOldOne() throws {
        let ann = try person(), ben = try person(), cat = try person()
        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        assertClientError(try api.post("/v1/groups/\(family["id"]!)/invite-code", token: ben.token), 403, code: "forbidden")
        let rotated = try api.post("/v1/groups/\(family["id"]!)/invite-code", token: ann.token)
        XCTAssertEqual(rotated.status, 200)
        XCTAssertNotEqual(rotated["inviteCode"] as? String, family["inviteCode"] as? String)
        assertClientError(try join(cat, family), 404, code: "not_found")
        XCTAssertEqual(try join(cat, rotated.json).status, 200)
    }

    func testJoinAttemptsAreRateLimitedPerUser() throws {
        let eve = try person(), ann = try person()
        let family = try group(ann)
        for i in 0..<10 { assertClientError(try api.post("/v1/groups/join", ["inviteCode": "ZZZZ-ZZZZ-ZZ\(i % 10)Z"], token: eve.token), 404) }
        let limited = try join(eve, family)
        assertClientError(limited, 429, code: "rate_limited", "even the right code is refused while limited")
        XCTAssertNotNil(limited.headers["retry-after"])
        XCTAssertEqual(try join(try person(), family).status, 200, "other people are not affected")
    }

    func testTheLastAdministratorLeavingHandsTheRoleToTheLongestStandingMember() throws {
        let ann = try person(), ben = try person(), cat = try person()
        let family = try group(ann)
        let id = family["id"] as! String
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try join(cat, family).status, 200)
        let probe = try EventProbe(topics: ["group.member_left"])
        assertClientError(try api.send("DELETE", "/v1/groups/\(id)/members/\(ann.id)", token: ben.token), 403, code: "forbidden")
        XCTAssertEqual(try api.send("DELETE", "/v1/groups/\(id)/members/\(ann.id)", token: ann.token).status, 204)
        let members = try api.get("/v1/groups/\(id)", token: ben.token)["members"] as? [[String: Any]] ?? []
        XCTAssertEqual(members.map { $0["id"] as? String }, [ben.id, cat.id])
        XCTAssertEqual(members.first?["role"] as? String, "admin")
        let left = probe.first { $0.data("userId") as? String == ann.id && $0["subject"] as? String == id }
        XCTAssertEqual(left?.data("reason") as? String, "left")
        XCTAssertEqual(left?.data("newAdminId") as? String, ben.id)
        assertClientError(try api.get("/v1/groups/\(id)", token: ann.token), 404, code: "not_found", "a former member is an outsider")
        // The new administrator removes someone.
        XCTAssertEqual(try api.send("DELETE", "/v1/groups/\(id)/members/\(cat.id)", token: ben.token).status, 204)
        XCTAssertEqual(probe.first { $0.data("userId") as? String == cat.id }?.data("reason") as? String, "removed")
        assertClientError(try api.send("DELETE", "/v1/groups/\(id)/members/\(cat.id)", token: ben.token), 404)
    }

    func testTheAdministratorSetsTheNewsletterSchedule() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann)
        let id = family["id"] as! String
        XCTAssertEqual(try join(ben, family).status, 200)
        let patched = try api.patch("/v1/groups/\(id)", ["name": "The Family", "newsletter": ["frequency": "daily", "hour": 7,
                                                                                              "timeZone": "Europe/Berlin"]], token: ann.token)
        XCTAssertEqual(patched.status, 200)
        XCTAssertEqual(patched["name"] as? String, "The Family")
        let schedule = patched["newsletter"] as? [String: Any]
        XCTAssertEqual(schedule?["frequency"] as? String, "daily")
        XCTAssertEqual(schedule?["hour"] as? Int, 7)
        XCTAssertEqual(schedule?["timeZone"] as? String, "Europe/Berlin")
        for bad: [String: Any] in [["timeZone": "Mars/Olympus"], ["hour": 24], ["weekday": 0], ["frequency": "hourly"]] {
            assertClientError(try api.patch("/v1/groups/\(id)", ["newsletter": bad], token: ann.token), 400, code: "validation_failed")
        }
        assertClientError(try api.patch("/v1/groups/\(id)", ["name": "Mine now"], token: ben.token), 403, code: "forbidden")
        assertClientError(try api.patch("/v1/groups/\(id)", ["name": "Mine now"], token: try person().token), 404)
        XCTAssertEqual(try api.get("/v1/groups/\(id)", token: ben.token)["name"] as? String, "The Family")
    }

    func testMyGroupsArePaginatedNewestFirst() throws {
        let ann = try person()
        var created: [String] = []
        for i in 0..<5 { created.append(try group(ann, name: "G\(i)")["id"] as! String) }
        var seen: [String] = []
        var cursor: String?
        repeat {
            let page = try api.get("/v1/groups?limit=2" + (cursor.map { "&cursor=\($0)" } ?? ""), token: ann.token)
            XCTAssertEqual(page.status, 200)
            seen += (page["items"] as? [[String: Any]] ?? []).compactMap { $0["kind"] as? String == "group" ? $0["id"] as? String : nil }
            cursor = page["nextCursor"] as? String
        } while cursor != nil
        XCTAssertEqual(seen, created.reversed())
        assertClientError(try api.get("/v1/groups?limit=0", token: ann.token), 400)
        assertClientError(try api.get("/v1/groups?cursor=garbage", token: ann.token), 400)
    }

    func testMyNewsletterDeliveryAndThePeopleWhoseStoriesIHide() throws {
        let ann = try person(), ben = try person(), cat = try person(), outsider = try person()
        let family = try group(ann)
        let gid = family["id"] as! String
        XCTAssertEqual(family["newsletterDelivery"] as? String, "app", "in the app until I choose")
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try join(cat, family).status, 200)

        // Ben takes the newsletter by e-mail too; the choice is his alone.
        let chosen = try api.send("PUT", "/v1/groups/\(gid)/newsletter-delivery", json: ["delivery": "email"], token: ben.token)
        XCTAssertEqual(chosen.status, 200, String(decoding: chosen.body, as: UTF8.self))
        XCTAssertEqual(chosen["newsletterDelivery"] as? String, "email")
        XCTAssertEqual(try api.get("/v1/groups/\(gid)", token: ben.token)["newsletterDelivery"] as? String, "email")
        XCTAssertEqual(try api.get("/v1/groups/\(gid)", token: ann.token)["newsletterDelivery"] as? String, "app")
        assertClientError(try api.send("PUT", "/v1/groups/\(gid)/newsletter-delivery", json: ["delivery": "fax"], token: ben.token), 400,
                          code: "validation_failed")
        assertClientError(try api.send("PUT", "/v1/groups/\(gid)/newsletter-delivery", json: ["delivery": "off"], token: outsider.token), 404)
        let journal = try api.post("/v1/journals", ["name": "Mine"], token: ann.token)
        assertClientError(try api.send("PUT", "/v1/groups/\(journal["id"] as? String ?? "")/newsletter-delivery", json: ["delivery": "email"],
                                       token: ann.token), 409)

        // Ann would rather not see Ben's stories: gone from her stream and newsletter, not from Cat's.
        XCTAssertEqual(try api.post("/v1/stories", ["text": "Ben's news", "groupIds": [gid]], token: ben.token).status, 201)
        XCTAssertEqual(try api.post("/v1/stories", ["text": "Cat's news", "groupIds": [gid]], token: cat.token).status, 201)
        XCTAssertEqual(try api.send("PUT", "/v1/users/me/hidden-authors/\(ben.id)", token: ann.token).status, 204)
        XCTAssertEqual(try api.send("PUT", "/v1/users/me/hidden-authors/\(ben.id)", token: ann.token).status, 204, "again: nothing changes")
        func stream(_ who: Person) throws -> [String] {
            (try api.get("/v1/groups/\(gid)/stories", token: who.token)["items"] as? [[String: Any]] ?? []).compactMap { $0["text"] as? String }
        }
        XCTAssertEqual(try stream(ann), ["Cat's news"])
        XCTAssertEqual(try stream(cat), ["Cat's news", "Ben's news"])
        let annLetter = try api.get("/v1/groups/\(gid)/newsletter", token: ann.token)
        XCTAssertEqual(annLetter["storyCount"] as? Int, 1)
        XCTAssertFalse((annLetter["members"] as? [[String: Any]] ?? []).contains { $0["id"] as? String == ben.id })
        XCTAssertEqual(try api.get("/v1/groups/\(gid)/newsletter", token: cat.token)["storyCount"] as? Int, 2)
        let page = String(decoding: try api.get("/v1/groups/\(gid)/newsletter?format=html", token: ann.token).body, as: UTF8.self)
        XCTAssertTrue(page.contains("Cat&#39;s news") || page.contains("Cat's news"))
        XCTAssertFalse(page.contains("Ben&#39;s news") || page.contains("Ben's news"), "nothing of Ben's in Ann's page")
        let hidden = try api.get("/v1/users/me/hidden-authors", token: ann.token)["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(hidden.map { $0["id"] as? String }, [ben.id])
        XCTAssertNotNil(hidden.first?["hiddenAt"] as? String)

        // Only someone I share a group with, and never myself.
        assertClientError(try api.send("PUT", "/v1/users/me/hidden-authors/\(outsider.id)", token: ann.token), 404)
        assertClientError(try api.send("PUT", "/v1/users/me/hidden-authors/\(ann.id)", token: ann.token), 400, code: "validation_failed")
        assertClientError(try api.get("/v1/users/me/hidden-authors?limit=0", token: ann.token), 400, code: "validation_failed")

        // Shown again.
        XCTAssertEqual(try api.send("DELETE", "/v1/users/me/hidden-authors/\(ben.id)", token: ann.token).status, 204)
        XCTAssertEqual(try api.send("DELETE", "/v1/users/me/hidden-authors/\(ben.id)", token: ann.token).status, 204)
        XCTAssertEqual(try stream(ann), ["Cat's news", "Ben's news"])
        XCTAssertEqual(try count("hidden_authors", "user_id = '\(ann.id)'"), 0)
    }
}

final class StoriesJournalTests: StoriesTestCase {
    func testEveryUserGetsOneJournalEvenWhenRegistrationIsReplayed() throws {
        let ann = try person()
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { (try? self.count("groups", "kind = 'journal' AND created_by = '\(ann.id)'")) == 1 })
        // Replay the registration event, as a redelivery or a republish would.
        let probe = try EventProbe(topics: ["user.registered"])
        guard let event = probe.first(timeout: 20, { $0["subject"] as? String == ann.id }) else { return XCTFail("no user.registered") }
        var clean = event; clean["_key"] = nil; clean["_topic"] = nil
        var kafka = KafkaConfig(brokers: TestEnvironment.brokers, clientId: "replay"); kafka.log = { _, _ in }
        var changedId = clean; changedId["id"] = UUID().uuidString.lowercased()  // even a new event id: still one journal
        let value = Array(try JSONSerialization.data(withJSONObject: clean)), other = Array(try JSONSerialization.data(withJSONObject: changedId))
        XCTAssertEqual(try Producer(config: kafka).send([OutgoingMessage(topic: "user.registered", key: ann.id, value: value),
                                                         OutgoingMessage(topic: "user.registered", key: ann.id, value: other)]).compactMap { $0 }.count, 0)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { (try? self.count("processed_events", "event_id = '\(changedId["id"]!)'")) == 1 })
        XCTAssertEqual(try count("groups", "kind = 'journal' AND created_by = '\(ann.id)'"), 1)

        let mine = try api.get("/v1/groups", token: ann.token)["items"] as? [[String: Any]] ?? []
        let journal = mine.first { $0["kind"] as? String == "journal" }
        XCTAssertNil(journal?["inviteCode"] as? String)
        let second = try api.post("/v1/journals", ["name": "Dreams"], token: ann.token)
        XCTAssertEqual(second.status, 201)
        XCTAssertEqual(second["kind"] as? String, "journal")
        let id = journal?["id"] as? String ?? ""
        assertClientError(try api.post("/v1/groups/\(id)/invite-code", token: ann.token), 409, code: "conflict")
        assertClientError(try api.send("DELETE", "/v1/groups/\(id)/members/\(ann.id)", token: ann.token), 409)
        assertClientError(try api.get("/v1/groups/\(id)", token: try person().token), 404, "a journal is private")
    }

    /// "All the stories I have ever woven": mine across groups and journals, newest first, each with its groups.
    func testMyStoriesAcrossGroupsAndJournalsNewestFirst() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann), friends = try group(ann, name: "Friends")
        XCTAssertEqual(try join(ben, family).status, 200)
        let journal = try api.post("/v1/journals", ["name": "Dreams"], token: ann.token)
        let (f, g, j) = (family["id"] as! String, friends["id"] as! String, journal["id"] as! String)
        var posted: [String] = []
        for (text, groups) in [("to both", [f, g]), ("to my journal", [j]), ("to friends", [g])] {
            posted.append(try api.post("/v1/stories", ["text": text, "groupIds": groups], token: ann.token)["id"] as? String ?? "")
        }
        XCTAssertEqual(try api.post("/v1/stories", ["text": "Ben's", "groupIds": [f]], token: ben.token).status, 201)
        let first = try api.get("/v1/users/me/stories?limit=2", token: ann.token)
        let items = first["items"] as? [[String: Any]] ?? []
        XCTAssertEqual(items.map { $0["text"] as? String }, ["to friends", "to my journal"], "newest first, none of Ben's")
        let rest = try api.get("/v1/users/me/stories?limit=2&cursor=\(first["nextCursor"] as? String ?? "")", token: ann.token)
        let last = (rest["items"] as? [[String: Any]])?.first
        XCTAssertEqual(last?["id"] as? String, posted[0])
        XCTAssertEqual(Set(last?["groupIds"] as? [String] ?? []), [f, g], "every group it went to")
        XCTAssertTrue(rest["nextCursor"] is NSNull)
        XCTAssertEqual((try api.get("/v1/users/me/stories", token: ben.token)["items"] as? [[String: Any]])?.count, 1)
        assertClientError(try api.get("/v1/users/me/stories?limit=0", token: ann.token), 400, code: "validation_failed")
    }

}
