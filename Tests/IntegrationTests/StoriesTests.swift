import Foundation
import Models
import Runtime
import ServiceKit
import StoriesCore
import XCTest

/// Groups, invite codes, memberships, journals and stories, as the Tapestry app uses them: stories in-process
/// (`Harness`), people and their profiles as auth's events would make them.
class StoriesHarnessCase: HarnessTestCase {
    override var serviceName: String { "stories" }
    override var make: (Environment) throws -> ServiceApp { StoriesService.makeApp }

    /// Creates a group as `admin`.
    func group(_ admin: Person, name: String = "Family") throws -> StoriesViews.Group {
        let (status, group) = try service.post("/v1/groups", ["name": name], as: admin, StoriesViews.Group.self)
        XCTAssertEqual(status, 201)
        return group
    }

    func join(_ person: Person, _ group: StoriesViews.Group) throws -> APIResponse {
        try service.send("POST", "/v1/groups/join", json: ["inviteCode": group.inviteCode ?? ""], as: person)
    }

    func upload(_ bytes: [UInt8], _ who: Person, contentType: String = "image/png") throws -> APIResponse {
        try service.send("POST", "/v1/media", raw: bytes, as: who, headers: ["Content-Type": contentType])
    }
}

/// What the tests read of stories' answers.
enum StoriesViews {
    struct Group: Decodable {
        let id: String, kind: String, name: String, inviteCode: String?, role: String, newsletterDelivery: String
        let newsletter: Schedule
        let members: [Member]?
    }
    struct Schedule: Decodable { let frequency: String, hour: Int, timeZone: String }
    struct Member: Decodable { let id: String, fullName: String?, role: String }
    struct Story: Decodable { let id: String, text: String, groupIds: [String], backgroundColor: String?, commentCount: Int, createdAt: String }
    struct Comment: Decodable { let text: String }
    struct Created: Decodable { let id: String }
    struct HiddenAuthor: Decodable { let id: String, hiddenAt: String }
    struct Newsletter: Decodable { let storyCount: Int, members: [Reader] }
    struct Reader: Decodable { let id: String }
}

/// A page of a list.
struct Listing<Item: Decodable>: Decodable {
    let items: [Item]
    let nextCursor: String?
}

final class StoriesGroupTests: StoriesHarnessCase {
    func testCreateJoinByCodeAndSeeEachOther() throws {
        let ann = try person("ann_g"), ben = try person("ben_g")
        let family = try group(ann)
        XCTAssertEqual(family.role, "admin")
        let code = family.inviteCode ?? ""
        XCTAssertNotNil(code.range(of: "^[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}-[0-9A-HJKMNP-TV-Z]{4}$", options: .regularExpression),
                        "12 Crockford symbols, 60 bits, in groups of four: \(code)")
        // Typed loosely: lower case, no dashes.
        let joined = try service.post("/v1/groups/join", ["inviteCode": code.lowercased().replacingOccurrences(of: "-", with: " ")], as: ben,
                                      StoriesViews.Group.self)
        XCTAssertEqual(joined.status, 200)
        XCTAssertEqual(joined.view.role, "member")
        XCTAssertEqual(try join(ben, family).status, 200, "joining twice is harmless")
        let members = try service.get("/v1/groups/\(family.id)", as: ann, StoriesViews.Group.self).view.members ?? []
        XCTAssertEqual(members.map(\.id), [ann.id, ben.id], "oldest member first")
        XCTAssertEqual(members.map(\.role), ["admin", "member"])
        XCTAssertEqual(try service.count("memberships", "group_id = '\(family.id)'"), 2)
    }

    func testMembersSeeNamesFromAuthsEvents() throws {
        let ann = try person("ann_names")
        let family = try group(ann)
        try service.deliver(UserUpdated(userId: try XCTUnwrap(UUID(uuidString: ann.id)), username: ann.username, email: "\(ann.username)@example.com",
                                        fullName: "Ann Renamed", avatarMediaId: nil, updatedAt: Date()), subject: ann.id, source: "/auth")
        let members = try service.get("/v1/groups/\(family.id)", as: ann, StoriesViews.Group.self).view.members
        XCTAssertEqual(members?.first?.fullName, "Ann Renamed", "user.updated reaches stories")
    }

    func testRotatingTheInviteCodeRetiresTheOldOne() throws {
        let ann = try person(), ben = try person(), cat = try person()
        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        assertClientError(try service.send("POST", "/v1/groups/\(family.id)/invite-code", as: ben), 403, code: "forbidden")
        let rotated = try service.post("/v1/groups/\(family.id)/invite-code", as: ann, StoriesViews.Group.self)
        XCTAssertEqual(rotated.status, 200)
        XCTAssertNotEqual(rotated.view.inviteCode, family.inviteCode)
        assertClientError(try join(cat, family), 404, code: "not_found")
        XCTAssertEqual(try join(cat, rotated.view).status, 200)
    }

    func testJoinAttemptsAreRateLimitedPerUser() throws {
        let eve = try person(), ann = try person()
        let family = try group(ann)
        for i in 0..<10 { assertClientError(try service.send("POST", "/v1/groups/join", json: ["inviteCode": "ZZZZ-ZZZZ-ZZ\(i % 10)Z"], as: eve), 404) }
        let limited = try join(eve, family)
        assertClientError(limited, 429, code: "rate_limited", "even the right code is refused while limited")
        XCTAssertNotNil(limited.headers["retry-after"])
        XCTAssertEqual(try join(try person(), family).status, 200, "other people are not affected")
    }

    func testTheLastAdministratorLeavingHandsTheRoleToTheLongestStandingMember() throws {
        let ann = try person(), ben = try person(), cat = try person()
        let family = try group(ann)
        let id = family.id
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try join(cat, family).status, 200)
        assertClientError(try service.send("DELETE", "/v1/groups/\(id)/members/\(ann.id)", as: ben), 403, code: "forbidden")
        XCTAssertEqual(try service.send("DELETE", "/v1/groups/\(id)/members/\(ann.id)", as: ann).status, 204)
        let members = try service.get("/v1/groups/\(id)", as: ben, StoriesViews.Group.self).view.members ?? []
        XCTAssertEqual(members.map(\.id), [ben.id, cat.id])
        XCTAssertEqual(members.first?.role, "admin")
        let left = try service.events(GroupMemberLeft.self)
        let annLeft = left.first { $0.payload.userId.lowercased == ann.id && $0.subject == id }?.payload
        XCTAssertEqual(annLeft?.reason, .left)
        XCTAssertEqual(annLeft?.newAdminId?.lowercased, ben.id)
        assertClientError(try service.send("GET", "/v1/groups/\(id)", as: ann), 404, code: "not_found", "a former member is an outsider")
        // The new administrator removes someone.
        XCTAssertEqual(try service.send("DELETE", "/v1/groups/\(id)/members/\(cat.id)", as: ben).status, 204)
        XCTAssertEqual(try service.events(GroupMemberLeft.self).first { $0.payload.userId.lowercased == cat.id }?.payload.reason, .removed)
        assertClientError(try service.send("DELETE", "/v1/groups/\(id)/members/\(cat.id)", as: ben), 404)
    }

    func testTheAdministratorSetsTheNewsletterSchedule() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann)
        let id = family.id
        XCTAssertEqual(try join(ben, family).status, 200)
        let patched = try service.patch("/v1/groups/\(id)", ["name": "The Family", "newsletter": ["frequency": "daily", "hour": 7,
                                                                                                  "timeZone": "Europe/Berlin"]], as: ann,
                                        StoriesViews.Group.self)
        XCTAssertEqual(patched.status, 200)
        XCTAssertEqual(patched.view.name, "The Family")
        XCTAssertEqual(patched.view.newsletter.frequency, "daily")
        XCTAssertEqual(patched.view.newsletter.hour, 7)
        XCTAssertEqual(patched.view.newsletter.timeZone, "Europe/Berlin")
        for bad: [String: Any] in [["timeZone": "Mars/Olympus"], ["hour": 24], ["weekday": 0], ["frequency": "hourly"]] {
            assertClientError(try service.send("PATCH", "/v1/groups/\(id)", json: ["newsletter": bad], as: ann), 400, code: "validation_failed")
        }
        assertClientError(try service.send("PATCH", "/v1/groups/\(id)", json: ["name": "Mine now"], as: ben), 403, code: "forbidden")
        assertClientError(try service.send("PATCH", "/v1/groups/\(id)", json: ["name": "Mine now"], as: try person()), 404)
        XCTAssertEqual(try service.get("/v1/groups/\(id)", as: ben, StoriesViews.Group.self).view.name, "The Family")
    }

    func testMyGroupsArePaginatedNewestFirst() throws {
        let ann = try person()
        var created: [String] = []
        for i in 0..<5 { created.append(try group(ann, name: "G\(i)").id) }
        var seen: [String] = []
        var cursor: String?
        repeat {
            let page = try service.get("/v1/groups?limit=2" + (cursor.map { "&cursor=\($0)" } ?? ""), as: ann, Listing<StoriesViews.Group>.self)
            XCTAssertEqual(page.status, 200)
            seen += page.view.items.filter { $0.kind == "group" }.map(\.id)
            cursor = page.view.nextCursor
        } while cursor != nil
        XCTAssertEqual(seen, created.reversed())
        assertClientError(try service.send("GET", "/v1/groups?limit=0", as: ann), 400)
        assertClientError(try service.send("GET", "/v1/groups?cursor=garbage", as: ann), 400)
    }

    func testMyNewsletterDeliveryAndThePeopleWhoseStoriesIHide() throws {
        let ann = try person(), ben = try person(), cat = try person(), outsider = try person()
        let family = try group(ann)
        let gid = family.id
        XCTAssertEqual(family.newsletterDelivery, "app", "in the app until I choose")
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try join(cat, family).status, 200)

        // Ben takes the newsletter by e-mail too; the choice is his alone.
        let chosen = try service.send("PUT", "/v1/groups/\(gid)/newsletter-delivery", json: ["delivery": "email"], as: ben, StoriesViews.Group.self)
        XCTAssertEqual(chosen.status, 200)
        XCTAssertEqual(chosen.view.newsletterDelivery, "email")
        XCTAssertEqual(try service.get("/v1/groups/\(gid)", as: ben, StoriesViews.Group.self).view.newsletterDelivery, "email")
        XCTAssertEqual(try service.get("/v1/groups/\(gid)", as: ann, StoriesViews.Group.self).view.newsletterDelivery, "app")
        assertClientError(try service.send("PUT", "/v1/groups/\(gid)/newsletter-delivery", json: ["delivery": "fax"], as: ben), 400,
                          code: "validation_failed")
        assertClientError(try service.send("PUT", "/v1/groups/\(gid)/newsletter-delivery", json: ["delivery": "off"], as: outsider), 404)
        let journal = try service.post("/v1/journals", ["name": "Mine"], as: ann, StoriesViews.Group.self).view
        assertClientError(try service.send("PUT", "/v1/groups/\(journal.id)/newsletter-delivery", json: ["delivery": "email"], as: ann), 409)

        // Ann would rather not see Ben's stories: gone from her stream and newsletter, not from Cat's.
        XCTAssertEqual(try service.send("POST", "/v1/stories", json: ["text": "Ben's news", "groupIds": [gid]], as: ben).status, 201)
        XCTAssertEqual(try service.send("POST", "/v1/stories", json: ["text": "Cat's news", "groupIds": [gid]], as: cat).status, 201)
        XCTAssertEqual(try service.send("PUT", "/v1/users/me/hidden-authors/\(ben.id)", as: ann).status, 204)
        XCTAssertEqual(try service.send("PUT", "/v1/users/me/hidden-authors/\(ben.id)", as: ann).status, 204, "again: nothing changes")
        func stream(_ who: Person) throws -> [String] {
            try service.get("/v1/groups/\(gid)/stories", as: who, Listing<StoriesViews.Story>.self).view.items.map(\.text)
        }
        XCTAssertEqual(try stream(ann), ["Cat's news"])
        XCTAssertEqual(try stream(cat), ["Cat's news", "Ben's news"])
        let annLetter = try service.get("/v1/groups/\(gid)/newsletter", as: ann, StoriesViews.Newsletter.self).view
        XCTAssertEqual(annLetter.storyCount, 1)
        XCTAssertFalse(annLetter.members.contains { $0.id == ben.id })
        XCTAssertEqual(try service.get("/v1/groups/\(gid)/newsletter", as: cat, StoriesViews.Newsletter.self).view.storyCount, 2)
        let page = String(decoding: try service.send("GET", "/v1/groups/\(gid)/newsletter?format=html", as: ann).body, as: UTF8.self)
        XCTAssertTrue(page.contains("Cat&#39;s news") || page.contains("Cat's news"))
        XCTAssertFalse(page.contains("Ben&#39;s news") || page.contains("Ben's news"), "nothing of Ben's in Ann's page")
        let hidden = try service.get("/v1/users/me/hidden-authors", as: ann, Listing<StoriesViews.HiddenAuthor>.self).view.items
        XCTAssertEqual(hidden.map(\.id), [ben.id])
        XCTAssertFalse(hidden.first?.hiddenAt.isEmpty ?? true)

        // Only someone I share a group with, and never myself.
        assertClientError(try service.send("PUT", "/v1/users/me/hidden-authors/\(outsider.id)", as: ann), 404)
        assertClientError(try service.send("PUT", "/v1/users/me/hidden-authors/\(ann.id)", as: ann), 400, code: "validation_failed")
        assertClientError(try service.send("GET", "/v1/users/me/hidden-authors?limit=0", as: ann), 400, code: "validation_failed")

        // Shown again.
        XCTAssertEqual(try service.send("DELETE", "/v1/users/me/hidden-authors/\(ben.id)", as: ann).status, 204)
        XCTAssertEqual(try service.send("DELETE", "/v1/users/me/hidden-authors/\(ben.id)", as: ann).status, 204)
        XCTAssertEqual(try stream(ann), ["Cat's news", "Ben's news"])
        XCTAssertEqual(try service.count("hidden_authors", "user_id = '\(ann.id)'"), 0)
    }
}

final class StoriesJournalTests: StoriesHarnessCase {
    func testEveryUserGetsOneJournalEvenWhenRegistrationIsReplayed() throws {
        let ann = try person()
        XCTAssertEqual(try service.count("groups", "kind = 'journal' AND created_by = '\(ann.id)'"), 1)
        // Replay the registration event, as a redelivery or a republish would: the same id, then even a new one.
        let registered = UserRegistered(userId: try XCTUnwrap(UUID(uuidString: ann.id)), username: ann.username, email: "\(ann.username)@example.com",
                                        fullName: "Test \(ann.username)", avatarMediaId: nil, createdAt: Date())
        let first: String = try service.database.connect().first("SELECT event_id::text AS id FROM stories.processed_events WHERE topic = 'user.registered'")!["id"]
        try service.deliver(registered, subject: ann.id, source: "/auth", id: first)
        let changedId = try service.deliver(registered, subject: ann.id, source: "/auth")
        XCTAssertEqual(try service.count("processed_events", "event_id = '\(changedId)'"), 1)
        XCTAssertEqual(try service.count("groups", "kind = 'journal' AND created_by = '\(ann.id)'"), 1)

        let mine = try service.get("/v1/groups", as: ann, Listing<StoriesViews.Group>.self).view.items
        let journal = mine.first { $0.kind == "journal" }
        XCTAssertNil(journal?.inviteCode)
        let second = try service.post("/v1/journals", ["name": "Dreams"], as: ann, StoriesViews.Group.self)
        XCTAssertEqual(second.status, 201)
        XCTAssertEqual(second.view.kind, "journal")
        let id = journal?.id ?? ""
        assertClientError(try service.send("POST", "/v1/groups/\(id)/invite-code", as: ann), 409, code: "conflict")
        assertClientError(try service.send("DELETE", "/v1/groups/\(id)/members/\(ann.id)", as: ann), 409)
        assertClientError(try service.send("GET", "/v1/groups/\(id)", as: try person()), 404, "a journal is private")
    }

    /// "All the stories I have ever woven": mine across groups and journals, newest first, each with its groups.
    func testMyStoriesAcrossGroupsAndJournalsNewestFirst() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann), friends = try group(ann, name: "Friends")
        XCTAssertEqual(try join(ben, family).status, 200)
        let journal = try service.post("/v1/journals", ["name": "Dreams"], as: ann, StoriesViews.Group.self).view
        let (f, g, j) = (family.id, friends.id, journal.id)
        var posted: [String] = []
        for (text, groups) in [("to both", [f, g]), ("to my journal", [j]), ("to friends", [g])] {
            posted.append(try service.post("/v1/stories", ["text": text, "groupIds": groups], as: ann, StoriesViews.Story.self).view.id)
        }
        XCTAssertEqual(try service.send("POST", "/v1/stories", json: ["text": "Ben's", "groupIds": [f]], as: ben).status, 201)
        let first = try service.get("/v1/users/me/stories?limit=2", as: ann, Listing<StoriesViews.Story>.self).view
        XCTAssertEqual(first.items.map(\.text), ["to friends", "to my journal"], "newest first, none of Ben's")
        let rest = try service.get("/v1/users/me/stories?limit=2&cursor=\(first.nextCursor ?? "")", as: ann, Listing<StoriesViews.Story>.self).view
        let last = rest.items.first
        XCTAssertEqual(last?.id, posted[0])
        XCTAssertEqual(Set(last?.groupIds ?? []), [f, g], "every group it went to")
        XCTAssertNil(rest.nextCursor)
        XCTAssertEqual(try service.get("/v1/users/me/stories", as: ben, Listing<StoriesViews.Story>.self).view.items.count, 1)
        assertClientError(try service.send("GET", "/v1/users/me/stories?limit=0", as: ann), 400, code: "validation_failed")
    }
}
