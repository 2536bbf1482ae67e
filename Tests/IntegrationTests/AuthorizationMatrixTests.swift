import Crypto
import Foundation
import Identity
import Models
import ServiceKit
@testable import StoriesCore
import Web
import XCTest

/// Every stories endpoint against every kind of caller: outsider, member, administrator, removed member,
/// author and non-author. Outsiders and removed members learn nothing (404); members who may not act get 403.
final class AuthorizationMatrixTests: StoriesHarnessCase {
    func testEveryEndpointForEveryKindOfCaller() throws {
        let admin = try person(), member = try person(), removed = try person(), outsider = try person()
        let family = try group(admin)
        let gid = family.id
        for p in [member, removed] { XCTAssertEqual(try join(p, family).status, 200) }
        let photo = try service.send("POST", "/v1/media", raw: Images.png, as: admin).decode(Identified.self).id
        let story = try service.post("/v1/stories", ["text": "by the admin", "groupIds": [gid], "mediaIds": [photo]], as: admin, Identified.self).view.id
        XCTAssertEqual(try service.send("DELETE", "/v1/groups/\(gid)/members/\(removed.id)", as: admin).status, 204)

        enum Caller: String, CaseIterable { case admin, member, removed, outsider, anonymous }
        let people: [Caller: Person?] = [.admin: admin, .member: member, .removed: removed, .outsider: outsider, .anonymous: nil]
        // (method, path, body, expected status for admin (the author here), member, removed, outsider)
        let table: [(String, String, [String: Any]?, [Caller: Int])] = [
            ("GET", "/v1/groups/\(gid)", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("PATCH", "/v1/groups/\(gid)", ["name": "Renamed"], [.admin: 200, .member: 403, .removed: 404, .outsider: 404]),
            ("GET", "/v1/groups/\(gid)/stories", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("GET", "/v1/groups/\(gid)/newsletter", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("GET", "/v1/groups/\(gid)/newsletters", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("GET", "/v1/media/\(photo)", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("GET", "/v1/stories/\(story)", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("GET", "/v1/stories/\(story)/comments", nil, [.admin: 200, .member: 200, .removed: 404, .outsider: 404]),
            ("POST", "/v1/stories/\(story)/comments", ["text": "hi"], [.admin: 201, .member: 201, .removed: 404, .outsider: 404]),
            ("PATCH", "/v1/stories/\(story)", ["text": "edited"], [.admin: 200, .member: 403, .removed: 404, .outsider: 404]),
            ("POST", "/v1/stories", ["text": "x", "groupIds": [gid]], [.admin: 201, .member: 201, .removed: 404, .outsider: 404]),
            ("POST", "/v1/groups/\(gid)/invite-code", [:], [.admin: 200, .member: 403, .removed: 404, .outsider: 404]),
            ("DELETE", "/v1/groups/\(gid)/members/\(admin.id)", nil, [.member: 403, .removed: 404, .outsider: 404]),
        ]
        for (method, path, body, expected) in table {
            for caller in Caller.allCases {
                let status = caller == .anonymous ? 401 : expected[caller]
                guard let status else { continue }
                let r = try service.send(method, path, json: body ?? (method == "GET" ? nil : [String: Any]()), as: people[caller]!)
                XCTAssertEqual(r.status, status, "\(caller.rawValue) \(method) \(path): \(String(decoding: r.body.prefix(200), as: UTF8.self))")
                if status == 404 { XCTAssertEqual(r.errorCode, "not_found", "\(caller.rawValue) \(method) \(path)") }
            }
        }
        // Destructive ones last: a non-author cannot delete, the author can.
        assertClientError(try service.send("DELETE", "/v1/stories/\(story)", as: member), 403)
        assertClientError(try service.send("DELETE", "/v1/stories/\(story)", as: outsider), 404)
        XCTAssertEqual(try service.send("DELETE", "/v1/stories/\(story)", as: admin).status, 204)
        // A removed member rejoins only with the current code, and then sees the group again.
        assertClientError(try join(removed, family), 404, "the code was rotated above")
        XCTAssertEqual(try service.send("GET", "/v1/users/me/calendar", as: outsider).status, 200, "everyone has a calendar of their own")
    }

    /// The in-process service takes the harness's tokens because its verifier was given the harness's key, not
    /// because tokens go unchecked: one signed with another key, or expired, is a 401 as anywhere.
    func testATokenOfAnotherKeyOrExpiredIs401() throws {
        let ann = try person()
        let now = Int(Date().timeIntervalSince1970)
        let forged = try JWT.sign(AccessClaims(sub: ann.id, sid: UUID().lowercased, iat: now, exp: now + 60), key: try Ed25519PrivateKey(),
                                  kid: Harness.keyID)
        let expired = try JWT.sign(AccessClaims(sub: ann.id, sid: UUID().lowercased, iat: now - 900, exp: now - 60), key: Harness.key,
                                   kid: Harness.keyID)
        for token in [forged, expired] {
            assertClientError(try service.send("GET", "/v1/groups", headers: ["Authorization": "Bearer \(token)"]), 401, code: "unauthenticated")
        }
        XCTAssertEqual(try service.send("GET", "/v1/groups", as: ann).status, 200)
    }

    /// What the test reads of a created resource.
    struct Identified: Decodable { let id: String }
}

/// The journey from the issue, end to end: sign up, group, join by code, stories with photos, the week's newsletter.
final class TapestryJourneyTests: StoriesTestCase {
    func testTwoPeopleShareAWeekAndReadItsNewsletter() throws {
        let ann = try person("ann_journey"), ben = try person("ben_journey")
        let family = try group(ann, name: "Journey family")
        XCTAssertEqual(try api.post("/v1/groups/join", ["inviteCode": family["inviteCode"]!], token: ben.token).status, 200)
        // The week's prompt, the same for both, which Ben answers in one tap.
        let prompt = try api.get("/v1/groups/\(family["id"]!)/prompt", token: ben.token)
        XCTAssertEqual(prompt.status, 200, String(decoding: prompt.body, as: UTF8.self))
        let promptId = prompt["id"] as? String ?? "", promptText = prompt["text"] as? String ?? ""
        XCTAssertEqual(try api.get("/v1/groups/\(family["id"]!)/prompt", token: ann.token)["id"] as? String, promptId)
        var photos: [String] = [], answer = ""
        for (who, image) in [(ann, Images.jpeg), (ben, Images.png)] {
            let photo = try api.send("POST", "/v1/media", raw: image, token: who.token)
            XCTAssertEqual(photo.status, 201)
            photos.append(photo["id"] as! String)
            // Ann says where she was, at city precision; the photo's own location is never used.
            let place: Any = who.id == ann.id ? ["name": "Lisbon", "latitude": 38.722_252, "longitude": -9.139_337, "precision": "city"] : NSNull()
            var body: [String: Any] = ["text": "My day", "groupIds": [family["id"]!], "mediaIds": [photo["id"]!], "backgroundColor": "#FFEEDD",
                                       "place": place]
            if who.id == ben.id { body["promptId"] = promptId }
            let story = try api.post("/v1/stories", body, token: who.token)
            XCTAssertEqual(story.status, 201)
            if who.id == ben.id { answer = story["id"] as? String ?? "" }
        }
        // Ben keeps a habit, runs yesterday and today, and shares its streak with the family.
        let run = try api.post("/v1/habits", ["title": "Run", "per": "day"], token: ben.token)
        XCTAssertEqual(run.status, 201, String(decoding: run.body, as: UTF8.self))
        let habit = run["id"] as? String ?? "", today = run["today"] as? String ?? ""
        let days = ISO8601DateFormatter()  // in UTC, the habit's zone
        days.formatOptions = [.withFullDate]
        let yesterday = try XCTUnwrap(days.date(from: today)?.addingTimeInterval(-86_400), today)
        for day in [days.string(from: yesterday), today] {
            XCTAssertEqual(try api.send("PUT", "/v1/habits/\(habit)/days/\(day)", json: [String: Any](), token: ben.token).status, 200, day)
        }
        XCTAssertEqual(try api.send("PUT", "/v1/habits/\(habit)/shares/\(family["id"]!)", token: ben.token).status, 200)

        let week = try api.get("/v1/groups/\(family["id"]!)/newsletter", token: ben.token)
        XCTAssertEqual(week.status, 200)
        XCTAssertEqual(week["storyCount"] as? Int, 2)
        let urls = (week["members"] as? [[String: Any]] ?? []).flatMap { ($0["days"] as? [[String: Any]] ?? []) }
            .flatMap { $0["stories"] as? [[String: Any]] ?? [] }.flatMap { $0["media"] as? [[String: Any]] ?? [] }.compactMap { $0["url"] as? String }
        XCTAssertEqual(Set(urls.map { URLComponents(string: $0)?.path }), Set(photos.map { "/v1/media/\($0)" }))
        for url in urls { XCTAssertEqual(try load(url).status, 200, "both photos load by the URLs the newsletter gave") }
        let places = (week["members"] as? [[String: Any]] ?? []).flatMap { ($0["days"] as? [[String: Any]] ?? []) }
            .flatMap { $0["stories"] as? [[String: Any]] ?? [] }.compactMap { $0["place"] as? [String: Any] }
        XCTAssertEqual(places.map { $0["name"] as? String }, ["Lisbon"], "Ann's place; none on Ben's")
        XCTAssertEqual(places.map { [$0["latitude"] as? Double, $0["longitude"] as? Double] }, [[38.7, -9.1]], "as coarse as she chose")
        let habits = week["habits"] as? [[String: Any]] ?? []
        XCTAssertEqual(habits.map { $0["id"] as? String }, [habit], "Ben's shared habit")
        XCTAssertEqual(habits.first?["memberId"] as? String, ben.id)
        XCTAssertEqual(habits.first?["currentStreak"] as? Int, 2)
        let answers = week["answers"] as? [[String: Any]] ?? []
        XCTAssertEqual(answers.map { $0["promptId"] as? String }, [promptId], "the prompt's answers, together")
        XCTAssertEqual((answers.first?["stories"] as? [[String: Any]])?.compactMap { $0["storyId"] as? String }, [answer])
        let html = try api.get("/v1/groups/\(family["id"]!)/newsletter?format=html", token: ann.token)
        XCTAssertEqual(html.status, 200)
        XCTAssertTrue(String(decoding: html.body, as: UTF8.self).contains(promptText + "</h2>"), "the prompt heads Ben's answer")
        XCTAssertTrue(String(decoding: html.body, as: UTF8.self).contains("📍 Lisbon"))
        XCTAssertTrue(String(decoding: html.body, as: UTF8.self).contains("Run (every day): a 2-day streak"))
        // The e-mail loads the large rendition (the signature covers the size).
        for photo in photos { XCTAssertTrue(String(decoding: html.body, as: UTF8.self).contains("/v1/media/\(photo)?size=large&amp;exp="), photo) }

        // The app's story list draws each photo from its smallest rendition: a browser loads them by their URLs.
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromium") else {
            throw TestFailure("Chromium is missing: deploy/local/stack install puts Debian's chromium package in")
        }
        let list = try api.get("/v1/groups/\(family["id"]!)/stories", token: ben.token)
        let small = (list["items"] as? [[String: Any]] ?? []).flatMap { $0["media"] as? [[String: Any]] ?? [] }
            .compactMap { ($0["urls"] as? [String: String])?["small"] }
        XCTAssertEqual(small.count, 2)
        let page = FileManager.default.temporaryDirectory.appendingPathComponent("stories-\(UUID().uuidString.prefix(8)).html")
        try ("<html><body>" + small.map { "<img src=\"\($0.replacingOccurrences(of: "&", with: "&amp;"))\">" }.joined() + """
            <script>window.addEventListener('load', () => document.body.setAttribute('data-images',
              Array.from(document.images).map(i => i.complete ? i.naturalWidth + 'x' + i.naturalHeight : 'broken').sort().join(',')))</script>
            </body></html>
            """).write(to: page, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: page) }
        let dom = try IntegrationTests.run(["/usr/bin/chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                            "--virtual-time-budget=10000", "--dump-dom", page.absoluteString])
        // Ann's 640 × 480 JPEG as 320 × 240; Ben's 3 × 2 PNG, smaller than any rendition, as it is.
        XCTAssertTrue(dom.contains(#"data-images="320x240,3x2""#), "both small renditions show: \(dom.suffix(400))")
    }
}

/// The Tapestry journey over two months in Bucharest: a book club's newsletter closes monthly on the 31st at 20:00
/// (the last day of a shorter month), a family's every other Sunday at 18:00 from 18 October; both periods in flight
/// on 25 October, when clocks go back an hour, and both span the end of October. Members post; whoever has posted
/// nothing in a period is reminded the day before it closes (the `reminder.due` notify turns into a push or a mail);
/// each newsletter closes at its local hour and holds that period's stories. Stories in-process (`Harness`): the
/// service's clock cannot be moved, so the test runs the newsletter job (`Newsletters`, as the service's scan does)
/// at the instants it names, a clock that only goes forward.
final class TapestryJourneyAcrossPeriodsTests: StoriesHarnessCase {
    var job: Newsletters { Newsletters(pool: service.app.pool, storage: StoriesStorage(), outbox: service.app.outbox, cache: NewsletterCache()) }
    private var clock = Date.distantPast
    private var seen = (reminders: 0, newsletters: 0)

    func utc(_ text: String) -> Date { Timestamp.parse(text)! }

    /// The job at `instant`, as the service's scan would run it then: the reminders and newsletters it made.
    func tick(_ instant: String, file: StaticString = #filePath, line: UInt = #line) throws
        -> (reminders: [(subject: String, payload: ReminderDue)], newsletters: [NewsletterCompiled]) {
        let now = utc(instant)
        XCTAssertGreaterThan(now, clock, "the clock goes forward", file: file, line: line)
        clock = now
        try job.sendDueReminders(now: now)
        try job.compileDueNewsletters(now: now)
        let reminders = try service.events(ReminderDue.self), newsletters = try service.events(NewsletterCompiled.self).map(\.payload)
        defer { seen = (reminders.count, newsletters.count) }
        return (Array(reminders.dropFirst(seen.reminders)), Array(newsletters.dropFirst(seen.newsletters)))
    }

    /// `who` posts `text` to `group`, as if at `at` (UTC).
    func post(_ who: Person, _ text: String, to group: StoriesViews.Group, at: String) throws {
        let r = try service.send("POST", "/v1/stories", json: ["text": text, "groupIds": [group.id]], as: who)
        XCTAssertEqual(r.status, 201, String(decoding: r.body, as: UTF8.self))
        let id = try XCTUnwrap(UUID(uuidString: r["id"] as? String ?? ""))
        let c = try service.database.connect()
        try c.execute("UPDATE stories.stories SET created_at = \(utc(at)) WHERE id = \(id)")
        try c.execute("UPDATE stories.story_groups SET created_at = \(utc(at)) WHERE story_id = \(id)")
    }

    /// Asserts that `tick` reminded `silent` (and no one else) in `group` of the period [start, end).
    func assertReminded(_ reminders: [(subject: String, payload: ReminderDue)], _ silent: [Person], in group: StoriesViews.Group,
                        period start: String, _ end: String, file: StaticString = #filePath, line: UInt = #line) {
        let mine = reminders.filter { $0.payload.groupId.lowercased == group.id }
        XCTAssertEqual(mine.map(\.subject).sorted(), silent.map(\.id).sorted(), "who posted nothing yet", file: file, line: line)
        for r in mine {
            XCTAssertEqual(r.payload.userId.lowercased, r.subject, file: file, line: line)
            XCTAssertEqual(r.payload.periodStart, utc(start), file: file, line: line)
            XCTAssertEqual(r.payload.periodEnd, utc(end), file: file, line: line)
        }
        XCTAssertEqual(reminders.count, mine.count, "no other group's", file: file, line: line)
    }

    /// The newsletter `compiled` made, as a member reads it: its period and its stories as (local day, text), and
    /// the same in HTML.
    func assertNewsletter(_ compiled: [NewsletterCompiled], of group: StoriesViews.Group, as reader: Person, period start: String, _ end: String,
                          _ stories: [[String]], file: StaticString = #filePath, line: UInt = #line) throws {
        XCTAssertEqual(compiled.map(\.groupId.lowercased), [group.id], "this group's, once", file: file, line: line)
        let letter = try XCTUnwrap(compiled.first, file: file, line: line)
        XCTAssertEqual([letter.periodStart, letter.periodEnd], [utc(start), utc(end)], file: file, line: line)
        XCTAssertEqual(letter.storyCount, stories.count, file: file, line: line)
        let path = "/v1/groups/\(group.id)/newsletters/\(letter.newsletterId.lowercased)"
        let read = try service.send("GET", path, as: reader)
        XCTAssertEqual(read.status, 200, file: file, line: line)
        XCTAssertEqual((read["period"] as? [String: Any])?["timeZone"] as? String, "Europe/Bucharest", file: file, line: line)
        let shown = (read["members"] as? [[String: Any]] ?? []).flatMap { $0["days"] as? [[String: Any]] ?? [] }.flatMap { day in
            (day["stories"] as? [[String: Any]] ?? []).map { [day["date"] as? String ?? "", $0["text"] as? String ?? ""] }
        }
        XCTAssertEqual(shown.sorted { $0.joined() < $1.joined() }, stories.sorted { $0.joined() < $1.joined() }, file: file, line: line)
        let html = String(decoding: try service.send("GET", path + "?format=html", as: reader).body, as: UTF8.self)
        for story in stories { XCTAssertTrue(html.contains(story[1]), "\(story[1]) in the HTML", file: file, line: line) }
    }

    func testAMonthlyAndAFortnightlyGroupAcrossAMonthEndAndTheClocksGoingBack() throws {
        let ann = try person(), ben = try person(), cat = try person()
        let club = try group(ann, name: "Book club"), family = try group(ann, name: "Family")
        for (who, g) in [(ben, club), (cat, club), (ben, family)] { XCTAssertEqual(try join(who, g).status, 200) }
        for (g, schedule) in [(club, ["frequency": "monthly", "dayOfMonth": 31, "hour": 20, "timeZone": "Europe/Bucharest"] as [String: Any]),
                              (family, ["frequency": "every_n_weeks", "count": 2, "startDate": "2026-10-18", "hour": 18, "timeZone": "Europe/Bucharest"])] {
            let set = try service.send("PATCH", "/v1/groups/\(g.id)", json: ["newsletter": schedule], as: ann)
            XCTAssertEqual(set.status, 200, String(decoding: set.body, as: UTF8.self))
        }
        // Set on 20 October: the closes the handler planned from today's date are planned again by the job from there.
        try service.database.connect().execute("UPDATE stories.groups SET newsletter_due_at = NULL, reminder_due_at = NULL WHERE kind = 'group'")
        var step = try tick("2026-10-20T09:00:00Z")
        XCTAssertTrue(step.reminders.isEmpty && step.newsletters.isEmpty)

        // The book club's period runs from 30 September, 20:00 summer time (17:00 UTC), to 31 October, 20:00 winter
        // time (18:00 UTC); the family's from Sunday 18 October, 18:00 summer time, to Sunday 1 November, 18:00 winter time.
        try post(cat, "Before the clocks went back", to: club, at: "2026-10-20T10:00:00Z")
        try post(ann, "The second 03:30 of the night", to: club, at: "2026-10-25T01:30:00Z")
        try post(ann, "Saturday at the market", to: family, at: "2026-10-24T12:00:00Z")

        // The day before each close, at the hour it closes: Ben, who posted nothing, is reminded; Ann and Cat are not.
        step = try tick("2026-10-30T17:59:00Z")
        XCTAssertTrue(step.reminders.isEmpty, "not before its time: \(step.reminders)")
        step = try tick("2026-10-30T18:00:00Z")
        assertReminded(step.reminders, [ben], in: club, period: "2026-09-30T17:00:00Z", "2026-10-31T18:00:00Z")
        XCTAssertTrue(try tick("2026-10-30T19:00:00Z").reminders.isEmpty, "once")
        try post(ben, "Halloween, at 19:59", to: club, at: "2026-10-31T17:59:00Z")
        step = try tick("2026-10-31T15:59:00Z")
        XCTAssertTrue(step.reminders.isEmpty && step.newsletters.isEmpty)
        step = try tick("2026-10-31T16:00:00Z")
        assertReminded(step.reminders, [ben], in: family, period: "2026-10-18T15:00:00Z", "2026-11-01T16:00:00Z")

        // 20:00 on 31 October in Bucharest, an hour later in UTC than at the period's start: the book club's closes.
        XCTAssertTrue(try tick("2026-10-31T17:59:59Z").newsletters.isEmpty, "not at 20:00 summer time")
        step = try tick("2026-10-31T18:00:00Z")
        try assertNewsletter(step.newsletters, of: club, as: ben, period: "2026-09-30T17:00:00Z", "2026-10-31T18:00:00Z",
                             [["2026-10-20", "Before the clocks went back"], ["2026-10-25", "The second 03:30 of the night"],
                              ["2026-10-31", "Halloween, at 19:59"]])
        try post(cat, "20:00 on the 31st, the next period", to: club, at: "2026-10-31T18:00:00Z")
        try post(ben, "Sunday 1 November, 17:59", to: family, at: "2026-11-01T15:59:00Z")

        // 18:00 on Sunday 1 November: the family's closes, across the month end and the change of clocks.
        XCTAssertTrue(try tick("2026-11-01T15:00:00Z").newsletters.isEmpty, "not at 18:00 summer time")
        step = try tick("2026-11-01T16:00:00Z")
        try assertNewsletter(step.newsletters, of: family, as: ann, period: "2026-10-18T15:00:00Z", "2026-11-01T16:00:00Z",
                             [["2026-10-24", "Saturday at the market"], ["2026-11-01", "Sunday 1 November, 17:59"]])
        XCTAssertTrue(step.reminders.isEmpty)
        try post(ann, "Sunday 1 November, 18:00", to: family, at: "2026-11-01T16:00:00Z")

        // Two weeks on: Ben is reminded again, and the family's next newsletter closes on 15 November.
        step = try tick("2026-11-14T16:00:00Z")
        assertReminded(step.reminders, [ben], in: family, period: "2026-11-01T16:00:00Z", "2026-11-15T16:00:00Z")
        step = try tick("2026-11-15T16:00:00Z")
        try assertNewsletter(step.newsletters, of: family, as: ben, period: "2026-11-01T16:00:00Z", "2026-11-15T16:00:00Z",
                             [["2026-11-01", "Sunday 1 November, 18:00"]])

        // November has no 31st: the book club's closes on the 30th, reminded the day before.
        step = try tick("2026-11-29T18:00:00Z")
        assertReminded(step.reminders, [ann, ben], in: club, period: "2026-10-31T18:00:00Z", "2026-11-30T18:00:00Z")
        try post(ben, "The last evening of November", to: club, at: "2026-11-30T17:30:00Z")
        XCTAssertTrue(try tick("2026-11-30T17:59:59Z").newsletters.isEmpty)
        step = try tick("2026-11-30T18:00:00Z")
        try assertNewsletter(step.newsletters, of: club, as: cat, period: "2026-10-31T18:00:00Z", "2026-11-30T18:00:00Z",
                             [["2026-10-31", "20:00 on the 31st, the next period"], ["2026-11-30", "The last evening of November"]])
        // Every member of each group can read its past newsletters, newest first.
        let list = try service.send("GET", "/v1/groups/\(club.id)/newsletters", as: ben)
        XCTAssertEqual((list["items"] as? [[String: Any]])?.compactMap { $0["periodEnd"] as? String },
                       ["2026-11-30T18:00:00.000Z", "2026-10-31T18:00:00.000Z"])
    }
}
