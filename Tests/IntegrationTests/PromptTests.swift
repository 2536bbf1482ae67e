import Foundation
import Models
import XCTest

/// Prompts for a quiet group: every member is offered the period's prompt, the reminder carries it, a story answers
/// it in one tap, and the newsletter shows the answers together under the prompt's text.
final class PromptTests: StoriesTestCase {
    func prompt(_ gid: String, _ who: Person, language: String? = nil) throws -> APIResponse {
        try api.get("/v1/groups/\(gid)/prompt" + (language.map { "?language=\($0)" } ?? ""), token: who.token)
    }

    func testAQuietGroupsReminderCarriesAPromptAMemberAnswersItAndTheNewsletterGroupsTheAnswers() throws {
        let ann = try person(), ben = try person(), cat = try person()
        let family = try group(ann)
        let gid = family["id"] as! String
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try join(cat, family).status, 200)
        try closeDailyTwoHoursAhead(gid, by: ann)

        // Every member is offered the same prompt for the period, in the language asked for, else English.
        let offered = try prompt(gid, ann)
        XCTAssertEqual(offered.status, 200, String(decoding: offered.body, as: UTF8.self))
        let id = try XCTUnwrap(offered["id"] as? String)
        let catalogued = try XCTUnwrap(Prompt.named(id))
        XCTAssertEqual(offered["text"] as? String, catalogued.text(in: "en"))
        XCTAssertEqual(try prompt(gid, ben)["id"] as? String, id)
        let french = try prompt(gid, cat, language: "fr-FR")
        XCTAssertEqual(french["id"] as? String, id)
        XCTAssertEqual(french["text"] as? String, catalogued.text(in: "fr"))
        XCTAssertEqual(french["language"] as? String, "fr")
        XCTAssertEqual(try prompt(gid, cat, language: "ja")["language"] as? String, "en")

        // The group is quiet: when the reminder's time comes, each member is reminded with the period's prompt.
        let probe = try EventProbe(topics: ["reminder.due"])
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { self.plannedReminder(gid) != nil }, "the reminder is planned")
        try database.connect().execute("UPDATE stories.groups SET reminder_due_at = now() - interval '1 minute' WHERE id = $1::uuid", [gid])
        // One event per member, keyed by the member: they arrive from several partitions.
        var reminders: [[String: Any]] = []
        let deadline = Date().addingTimeInterval(30)
        while reminders.count < 3 && Date() < deadline {
            reminders = probe.events(timeout: 1) { $0["type"] as? String == "reminder.due" && $0.data("groupId") as? String == gid }
        }
        XCTAssertEqual(Set(reminders.compactMap { $0["subject"] as? String }), [ann.id, ben.id, cat.id])
        for r in reminders {
            XCTAssertEqual(r.data("promptId") as? String, id, "the prompt every member is offered")
            XCTAssertEqual(r.data("promptText") as? String, catalogued.text(in: "en"))
            XCTAssertEqual(try SchemaValidator.event("reminder.due").validate(r.envelope), [])
        }

        // Two members answer in one tap; a third posts something else.
        let answer = try api.post("/v1/stories", ["text": "From my <window>", "groupIds": [gid], "promptId": id], token: ben.token)
        XCTAssertEqual(answer.status, 201, String(decoding: answer.body, as: UTF8.self))
        XCTAssertEqual(answer["promptId"] as? String, id)
        XCTAssertEqual(try api.get("/v1/stories/\(answer["id"] as! String)", token: ann.token)["promptId"] as? String, id)
        let second = try api.post("/v1/stories", ["text": "Mine too", "groupIds": [gid], "promptId": id], token: cat.token)
        XCTAssertEqual(second.status, 201)
        let other = try api.post("/v1/stories", ["text": "Just news", "groupIds": [gid]], token: ann.token)
        XCTAssertEqual(other.status, 201)
        XCTAssertTrue(other["promptId"] is NSNull, "a story that answers nothing says so")

        let newsletter = try api.get("/v1/groups/\(gid)/newsletter", token: ann.token)
        XCTAssertEqual(newsletter.status, 200)
        let answers = try XCTUnwrap(newsletter["answers"] as? [[String: Any]], "the answers, together")
        XCTAssertEqual(answers.count, 1)
        XCTAssertEqual(answers.first?["promptId"] as? String, id)
        XCTAssertEqual(answers.first?["text"] as? String, catalogued.text(in: "en"))
        XCTAssertEqual((answers.first?["stories"] as? [[String: Any]])?.compactMap { $0["storyId"] as? String }.sorted(),
                       [answer["id"] as! String, second["id"] as! String].sorted())
        let html = try api.get("/v1/groups/\(gid)/newsletter?format=html", token: cat.token)
        let page = String(decoding: html.body, as: UTF8.self)
        XCTAssertTrue(page.contains(catalogued.text(in: "en") + "</h2>"), "the prompt's text heads its answers")
        XCTAssertTrue(page.contains("From my &lt;window&gt;"))
    }

    func testAPromptIdThatIsNotTheGroupsCurrentOneIsRefusedAndOutsidersSeeNothing() throws {
        let ann = try person(), ben = try person(), eve = try person()
        let family = try group(ann), friends = try group(ben, name: "Friends")
        let gid = family["id"] as! String, other = friends["id"] as! String
        XCTAssertEqual(try join(ben, family).status, 200)
        let mine = try XCTUnwrap(try prompt(gid, ann)["id"] as? String)
        let theirs = try XCTUnwrap(try prompt(other, ben)["id"] as? String)

        // Not a prompt at all, or not a prompt's shape.
        let unknown = try api.post("/v1/stories", ["text": "x", "groupIds": [gid], "promptId": "no-such-prompt"], token: ann.token)
        assertClientError(unknown, 400, code: "validation_failed", "an unknown prompt")
        XCTAssertEqual((unknown["error"] as? [String: Any])?["field"] as? String, "promptId")
        assertClientError(try api.post("/v1/stories", ["text": "x", "groupIds": [gid], "promptId": "Bad Id\n"], token: ann.token), 400,
                          code: "validation_failed", "not an id")
        assertClientError(try api.post("/v1/stories", ["text": "x", "groupIds": [gid], "promptId": 7], token: ann.token), 400)
        // Another group's prompt, or one the group is not offered this period.
        let notOffered = mine == theirs ? Prompt.catalogue.first { $0.id != mine }!.id : theirs
        let refused = try api.post("/v1/stories", ["text": "x", "groupIds": [gid], "promptId": notOffered], token: ann.token)
        assertClientError(refused, 400, code: "validation_failed", "a prompt the group is not offered")
        XCTAssertTrue(((refused["error"] as? [String: Any])?["message"] as? String ?? "").contains("current prompt"))
        // Ben is in both: a story to both may answer either group's prompt.
        let both = try api.post("/v1/stories", ["text": "x", "groupIds": [gid, other], "promptId": theirs], token: ben.token)
        XCTAssertEqual(both.status, 201, String(decoding: both.body, as: UTF8.self))
        XCTAssertEqual(try count("stories", "prompt_id IS NOT NULL"), 1, "nothing half-written by the refusals")

        // An outsider learns nothing of the group or its prompt.
        assertClientError(try prompt(gid, eve), 404, code: "not_found", "an outsider")
        assertClientError(try api.get("/v1/groups/\(UUID().uuidString.lowercased())/prompt", token: eve.token), 404)
        assertClientError(try api.post("/v1/stories", ["text": "x", "groupIds": [gid], "promptId": mine], token: eve.token), 404)
        assertClientError(try api.get("/v1/groups/\(gid)/prompt?language=<b>", token: ann.token), 400)
    }
}

/// The prompt a story answered is in its author's export. Stories in-process (`Harness`).
final class PromptExportTests: StoriesHarnessCase {
    override var settings: [String: String] { ["SERVICE_TOKEN": String(repeating: "s", count: 40)] }

    struct Offered: Decodable { let id: String }

    func testTheExportKeepsThePromptAStoryAnswered() throws {
        let ann = try person()
        let family = try group(ann)
        let offered = try service.get("/v1/groups/\(family.id)/prompt", as: ann, Offered.self).view
        let (status, _) = try service.post("/v1/stories", ["text": "An answer", "groupIds": [family.id], "promptId": offered.id], as: ann,
                                           StoriesViews.Created.self)
        XCTAssertEqual(status, 201)
        let export = try service.send("GET", "/v1/internal/users/\(ann.id)/export", headers: ["Authorization": "Bearer " + String(repeating: "s", count: 40)])
        XCTAssertEqual(export.status, 200)
        let stories = (try JSONSerialization.jsonObject(with: Data(export.body)) as? [String: Any])?["stories"] as? [[String: Any]]
        XCTAssertEqual(stories?.first?["promptId"] as? String, offered.id)
    }
}
