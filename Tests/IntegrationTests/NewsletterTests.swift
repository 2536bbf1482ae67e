import Foundation
import Models
import XCTest

/// The group newsletter: reading a period, the compile job, and the posting calendar.
final class NewsletterTests: StoriesTestCase {
    /// Posts a story and moves it to `at`, as if it had been posted then.
    func post(_ who: Person, _ text: String, to groups: [String], at: String? = nil) throws -> String {
        let r = try api.post("/v1/stories", ["text": text, "groupIds": groups], token: who.token)
        XCTAssertEqual(r.status, 201)
        let id = r["id"] as! String
        if let at {
            let c = try database.connect()
            try c.execute("UPDATE stories.stories SET created_at = $2::timestamptz WHERE id = $1::uuid", [id, at])
            try c.execute("UPDATE stories.story_groups SET created_at = $2::timestamptz WHERE story_id = $1::uuid", [id, at])
        }
        return id
    }

    func testTheNewsletterGroupsEveryonesStoriesByMemberAndLocalDay() throws {
        let ann = try person("ann_nl"), ben = try person("ben_nl"), cat = try person("cat_nl")
        let family = try group(ann)
        let gid = family["id"] as! String
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try join(cat, family).status, 200)
        XCTAssertEqual(try api.patch("/v1/groups/\(gid)", ["newsletter": ["frequency": "weekly", "weekday": 7, "hour": 18,
                                                                          "timeZone": "America/New_York"]], token: ann.token).status, 200)
        // 23:30 New York on Monday the 16th is already Tuesday in UTC: it belongs to Monday.
        _ = try post(ann, "Monday night <b>news</b>", to: [gid], at: "2026-11-17T04:30:00Z")
        _ = try post(ann, "Wednesday", to: [gid], at: "2026-11-18T15:00:00Z")
        _ = try post(ben, "Ben's only one", to: [gid], at: "2026-11-20T15:00:00Z")
        _ = try post(ben, "Too late: next period", to: [gid], at: "2026-11-22T23:30:00Z")
        _ = try post(cat, "Exactly at the start", to: [gid], at: "2026-11-15T23:00:00Z")  // Sunday 18:00 in New York: included
        _ = try post(cat, "Exactly at the end", to: [gid], at: "2026-11-22T23:00:00Z")    // the next period's first moment
        // Ben leaves after posting; his stories stay in the period's newsletter.
        XCTAssertEqual(try api.send("DELETE", "/v1/groups/\(gid)/members/\(ben.id)", token: ben.token).status, 204)

        let r = try api.get("/v1/groups/\(gid)/newsletter?from=2026-11-15T23:00:00Z&to=2026-11-22T23:00:00Z", token: cat.token)
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r["storyCount"] as? Int, 4, "from is inclusive, to exclusive")
        XCTAssertEqual((r["period"] as? [String: Any])?["timeZone"] as? String, "America/New_York")
        let members = r["members"] as? [[String: Any]] ?? []
        XCTAssertEqual(members.map { $0["id"] as? String }, [ann.id, cat.id, ben.id], "current members in joining order, then former authors")
        let annDays = (members[0]["days"] as? [[String: Any]] ?? []).map { $0["date"] as? String }
        XCTAssertEqual(annDays, ["2026-11-16", "2026-11-18"])
        let catDays = members[1]["days"] as? [[String: Any]] ?? []
        XCTAssertEqual(catDays.map { $0["date"] as? String }, ["2026-11-15"])
        XCTAssertEqual((catDays.first?["stories"] as? [[String: Any]])?.map { $0["text"] as? String }, ["Exactly at the start"])
        XCTAssertEqual(members[2]["isMember"] as? Bool, false)

        // The default is the current period, which holds none of these.
        XCTAssertEqual(try api.get("/v1/groups/\(gid)/newsletter", token: ann.token)["storyCount"] as? Int, 0)

        let html = try api.get("/v1/groups/\(gid)/newsletter?from=2026-11-15T23:00:00Z&to=2026-11-22T23:00:00Z&format=html", token: cat.token)
        XCTAssertEqual(html.status, 200)
        XCTAssertEqual(html.headers["content-type"], "text/html; charset=utf-8")
        let page = String(decoding: html.body, as: UTF8.self)
        XCTAssertTrue(page.hasPrefix("<!DOCTYPE html>"))
        XCTAssertTrue(page.contains("Monday night &lt;b&gt;news&lt;/b&gt;"), "story text is escaped")
        XCTAssertFalse(page.contains("<script"))
        XCTAssertFalse(page.contains("<link"), "no external stylesheets")
        XCTAssertFalse(page.contains("Exactly at the end"))
        let empty = String(decoding: try api.get("/v1/groups/\(gid)/newsletter?format=html", token: ann.token).body, as: UTF8.self)
        XCTAssertTrue(empty.contains("Nothing this time."), "an empty period says so for each member")

        assertClientError(try api.get("/v1/groups/\(gid)/newsletter", token: try person().token), 404, code: "not_found")
        assertClientError(try api.get("/v1/groups/\(gid)/newsletter", token: ben.token), 404, "a former member is an outsider")
        assertClientError(try api.get("/v1/groups/\(gid)/newsletter?format=pdf", token: ann.token), 400)
        assertClientError(try api.get("/v1/groups/\(gid)/newsletter?from=2026-01-01T00:00:00Z&to=2026-12-01T00:00:00Z", token: ann.token), 400)
    }

    /// The current period's newsletter is kept in memory between reads (`NewsletterCache`): every change it shows,
    /// through the API, through auth's events or by SQL outside the service, is in the very next read.
    func testAReadNewsletterShowsEveryChangeAtTheNextRead() throws {
        let ann = try person("ann_fresh"), ben = try person("ben_fresh"), cat = try person("cat_fresh")
        let family = try group(ann)
        let gid = family["id"] as! String
        XCTAssertEqual(try join(ben, family).status, 200)
        func read(_ who: Person = ann) throws -> [String: Any] {
            let r = try api.get("/v1/groups/\(gid)/newsletter", token: who.token)
            XCTAssertEqual(r.status, 200)
            return r.json
        }
        func stories(_ doc: [String: Any]) -> [[String: Any]] {
            (doc["members"] as? [[String: Any]] ?? []).flatMap { ($0["days"] as? [[String: Any]] ?? []).flatMap { $0["stories"] as? [[String: Any]] ?? [] } }
        }
        func members(_ doc: [String: Any]) -> [String?] { (doc["members"] as? [[String: Any]] ?? []).map { $0["id"] as? String } }
        XCTAssertEqual(try read()["storyCount"] as? Int, 0)
        XCTAssertEqual(try read()["storyCount"] as? Int, 0, "read twice: the second from memory")

        let story = try post(ben, "First draft", to: [gid])
        XCTAssertEqual(stories(try read()).map { $0["text"] as? String }, ["First draft"], "a new story")
        XCTAssertEqual(try api.patch("/v1/stories/\(story)", ["text": "Second draft"], token: ben.token).status, 200)
        XCTAssertEqual(stories(try read()).map { $0["text"] as? String }, ["Second draft"], "an edited story")
        XCTAssertEqual(try api.post("/v1/stories/\(story)/comments", ["text": "Lovely"], token: ann.token).status, 201)
        XCTAssertEqual(stories(try read()).first?["commentCount"] as? Int, 1, "a comment")
        XCTAssertEqual(try join(cat, family).status, 200)
        XCTAssertEqual(members(try read()), [ann.id, ben.id, cat.id], "a member who joined")
        XCTAssertEqual(try api.patch("/v1/groups/\(gid)", ["name": "The Renamed"], token: ann.token).status, 200)
        XCTAssertEqual(try read()["groupName"] as? String, "The Renamed", "a new name")
        XCTAssertEqual(try accounts.patch("/v1/users/me", ["fullName": "Ben Renamed"], token: ben.token).status, 200)
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) {
            ((try? read())?["members"] as? [[String: Any]])?.first { $0["id"] as? String == ben.id }?["fullName"] as? String == "Ben Renamed"
        }, "a name from auth's user.updated")
        // Outside the service: a story moved out of the period by SQL is gone from the next read.
        let c = try database.connect()
        try c.execute("UPDATE stories.story_groups SET created_at = created_at - interval '400 days' WHERE story_id = $1::uuid", [story])
        XCTAssertEqual(try read()["storyCount"] as? Int, 0, "a change made outside the service")
        XCTAssertEqual(try api.send("DELETE", "/v1/groups/\(gid)/members/\(cat.id)", token: cat.token).status, 204)
        XCTAssertEqual(members(try read()), [ann.id, ben.id], "a member who left")
        assertClientError(try api.get("/v1/groups/\(gid)/newsletter", token: cat.token), 404, "one who left reads nothing, cached or not")
    }

    func testSilentMembersAreRemindedOnceBeforeThePeriodCloses() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann)
        let gid = family["id"] as! String
        XCTAssertEqual(try join(ben, family).status, 200)
        try closeDailyTwoHoursAhead(gid, by: ann)
        let probe = try EventProbe(topics: ["reminder.due"])
        _ = try post(ann, "Today's moment", to: [gid])

        // A schedule just set does not remind at once for a time already past: tomorrow's reminder is planned.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { (self.plannedReminder(gid) ?? .distantPast) > Date().addingTimeInterval(20 * 3600) })
        // Its time come (as if it were 12:00 today): Ben, who posted nothing this period, is reminded; Ann is not.
        try database.connect().execute("UPDATE stories.groups SET reminder_due_at = now() - interval '1 minute' WHERE id = $1::uuid", [gid])
        let reminders = probe.events(timeout: 20) { $0["type"] as? String == "reminder.due" && $0.data("groupId") as? String == gid }
        XCTAssertEqual(reminders.map { $0["subject"] as? String }, [ben.id], "only the member who posted nothing yet")
        XCTAssertEqual(try SchemaValidator.event("reminder.due").validate(reminders.first?.envelope ?? [:]), [])
        let closes = try XCTUnwrap(Timestamp.parse(reminders.first?.data("periodEnd") as? String ?? ""))
        XCTAssertTrue(closes > Date() && closes < Date().addingTimeInterval(3 * 3600), "before the period closes, at \(closes)")
        // Once: the next is tomorrow's.
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { (self.plannedReminder(gid) ?? .distantPast) > Date().addingTimeInterval(20 * 3600) })
        XCTAssertEqual(probe.events(timeout: 1) { $0["type"] as? String == "reminder.due" && $0.data("groupId") as? String == gid }.count, 1)
    }

    func testAClosedPeriodIsCompiledOnceEvenWithTwoInstances() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann)
        let gid = family["id"] as! String
        XCTAssertEqual(try join(ben, family).status, 200)
        let byMail = try api.send("PUT", "/v1/groups/\(gid)/newsletter-delivery", json: ["delivery": "email"], token: ben.token)
        XCTAssertEqual(byMail["newsletterDelivery"] as? String, "email")
        let probe = try EventProbe(topics: ["newsletter.compiled"])
        _ = try post(ann, "Something happened", to: [gid], at: "2026-11-20T12:00:00Z")
        let second = try startInstance(ownGroups: true)  // the two share newsletters through row locks, not a group
        defer { second.stop() }
        try waitForConsumers(second)
        // The weekly UTC period Sunday 2026-11-15 18:00 → Sunday 2026-11-22 18:00 has just closed.
        try database.connect().execute("UPDATE stories.groups SET newsletter_due_at = '2026-11-22T18:00:00Z' WHERE id = $1::uuid", [gid])
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) { (try? self.count("newsletters", "group_id = '\(gid)'")) ?? 0 >= 1 })
        XCTAssertTrue(TestEnvironment.waitUntil(timeout: 30) {
            (try? self.database.connect().first("SELECT newsletter_due_at > now() AS later FROM stories.groups WHERE id = $1::uuid", [gid])?["later", as: Bool.self]) == true
        }, "every missed period is compiled, then the next close lies ahead")
        let compiled = probe.events(timeout: 20) { $0["type"] as? String == "newsletter.compiled" && $0["subject"] as? String == gid }
        let first = compiled.first { $0.data("periodEnd") as? String == "2026-11-22T18:00:00.000Z" }
        XCTAssertNotNil(first)
        XCTAssertEqual(first?.data("storyCount") as? Int, 1)
        XCTAssertEqual(Set(first?.data("memberIds") as? [String] ?? []), [ann.id, ben.id])
        XCTAssertEqual(first?.data("emailMemberIds") as? [String], [ben.id], "who asked for it by e-mail")
        XCTAssertEqual(first?.data("offMemberIds") as? [String], [])
        XCTAssertEqual(try SchemaValidator.event("newsletter.compiled").validate(first?.envelope ?? [:]), [])
        XCTAssertEqual(try count("newsletters", "group_id = '\(gid)' AND period_end = '2026-11-22T18:00:00Z'"), 1, "compiled once by two instances")

        let list = try api.get("/v1/groups/\(gid)/newsletters", token: ben.token)
        XCTAssertEqual(list.status, 200)
        let items = list["items"] as? [[String: Any]] ?? []
        let stored = items.first { $0["periodEnd"] as? String == "2026-11-22T18:00:00.000Z" }
        XCTAssertEqual(stored?["storyCount"] as? Int, 1)
        let one = try api.get("/v1/groups/\(gid)/newsletters/\(stored?["id"] as? String ?? "")", token: ann.token)
        XCTAssertEqual(one["storyCount"] as? Int, 1)
        XCTAssertEqual(try api.get("/v1/groups/\(gid)/newsletters/\(stored?["id"] as? String ?? "")?format=html", token: ann.token)
                       .headers["content-type"], "text/html; charset=utf-8")
        assertClientError(try api.get("/v1/groups/\(gid)/newsletters", token: try person().token), 404)

        // After a restart the stored close time is honoured: nothing is compiled twice.
        let before = try count("newsletters", "group_id = '\(gid)'")
        stories.stop()
        second.stop()
        stories = try startInstance()
        try waitForConsumers(stories)  // several one-second scans have run by now
        XCTAssertEqual(try count("newsletters", "group_id = '\(gid)' AND period_end = '2026-11-22T18:00:00Z'"), 1)
        XCTAssertEqual(try count("newsletters", "group_id = '\(gid)'"), before)
    }

    /// Any interval: a monthly group (the 29th, 03:00 in Bucharest) and an every-two-weeks group (from Sunday
    /// 2026-10-11, 03:00 in Bucharest) each get a newsletter at each of their own closes: on 28 February, at the
    /// first instant after the 03:00 that spring-forward skips on 29 March, at the first of the two 03:00s on
    /// 25 October, and across month ends. The service's clock cannot be moved, so the periods come from an
    /// earlier close written to `newsletter_due_at` (every missed period is compiled in turn, as after an outage),
    /// and the reminder is checked as planned before the current period's close; the unit tests
    /// (`NewsletterScheduleTests`) check reminders before closes at any time.
    func testMonthlyAndFortnightlyGroupsCloseAtTheirOwnTimesAcrossMonthEndsAndDaylightSaving() throws {
        let ann = try person(), ben = try person()
        let monthly = try group(ann, name: "Monthly")
        let fortnightly = try group(ann, name: "Fortnightly")
        let (mid, fid) = (monthly["id"] as! String, fortnightly["id"] as! String)
        XCTAssertEqual(try join(ben, monthly).status, 200)
        XCTAssertEqual(try join(ben, fortnightly).status, 200)

        // Refused with the field named: what a frequency needs, and values out of range.
        func refused(_ body: [String: Any], _ field: String) throws {
            let r = try api.patch("/v1/groups/\(mid)", ["newsletter": body], token: ann.token)
            assertClientError(r, 400, code: "validation_failed", "\(body)")
            XCTAssertEqual((r.json["error"] as? [String: Any])?["field"] as? String, field, "\(body)")
        }
        try refused(["frequency": "monthly"], "newsletter.dayOfMonth")
        try refused(["frequency": "every_n_weeks"], "newsletter.count")
        try refused(["frequency": "every_n_days", "count": 0], "newsletter.count")
        try refused(["frequency": "every_n_days", "count": 366], "newsletter.count")
        try refused(["frequency": "monthly", "dayOfMonth": 32], "newsletter.dayOfMonth")
        try refused(["frequency": "every_n_days", "count": 3, "startDate": "2026-02-30"], "newsletter.startDate")
        try refused(["frequency": "every_n_days", "count": 3, "startDate": "next week"], "newsletter.startDate")
        XCTAssertEqual(try api.get("/v1/groups/\(mid)", token: ann.token)["newsletter"].flatMap { $0 as? [String: Any] }?["frequency"] as? String,
                       "weekly", "nothing refused was kept")

        let m = try api.patch("/v1/groups/\(mid)", ["newsletter": ["frequency": "monthly", "dayOfMonth": 29, "hour": 3,
                                                                   "timeZone": "Europe/Bucharest"]], token: ann.token)
        XCTAssertEqual(m.status, 200, String(decoding: m.body, as: UTF8.self))
        let ms = try XCTUnwrap(m["newsletter"] as? [String: Any])
        XCTAssertEqual(ms["frequency"] as? String, "monthly")
        XCTAssertEqual(ms["dayOfMonth"] as? Int, 29)
        XCTAssertNil(ms["count"])
        let f = try api.patch("/v1/groups/\(fid)", ["newsletter": ["frequency": "every_n_weeks", "count": 2, "startDate": "2026-10-11",
                                                                   "hour": 3, "timeZone": "Europe/Bucharest"]], token: ann.token)
        XCTAssertEqual(f.status, 200, String(decoding: f.body, as: UTF8.self))
        let fs = try XCTUnwrap(f["newsletter"] as? [String: Any])
        XCTAssertEqual(fs["count"] as? Int, 2)
        XCTAssertEqual(fs["startDate"] as? String, "2026-10-11")
        XCTAssertNil(fs["dayOfMonth"])

        // The current period, as the group shows it to its members: now lies in it, and it closes at 03:00 Bucharest
        // time (04:00 when 03:00 is skipped), on the 29th or the month's last day, or on a Sunday a whole number of
        // fortnights from 11 October.
        var bucharest = Calendar(identifier: .gregorian)
        bucharest.timeZone = TimeZone(identifier: "Europe/Bucharest")!
        func current(_ gid: String) throws -> (start: Date, end: Date) {
            let view = try api.get("/v1/groups/\(gid)", token: ben.token)
            let period = (view["newsletter"] as? [String: Any])?["currentPeriod"] as? [String: Any]
            return (try XCTUnwrap(Timestamp.parse(period?["start"] as? String ?? "")), try XCTUnwrap(Timestamp.parse(period?["end"] as? String ?? "")))
        }
        let now = Date()
        let mp = try current(mid), fp = try current(fid)
        for p in [mp, fp] {
            XCTAssertTrue(p.start <= now && now < p.end, "\(p)")
            XCTAssertTrue([3, 4].contains(bucharest.component(.hour, from: p.end)), "\(p)")
        }
        let endDay = bucharest.dateComponents([.year, .month, .day], from: mp.end)
        let monthLength = bucharest.range(of: .day, in: .month, for: mp.end)!.count
        XCTAssertEqual(endDay.day, min(29, monthLength))
        let sinceStart = bucharest.dateComponents([.day], from: bucharest.date(from: DateComponents(year: 2026, month: 10, day: 11))!,
                                                  to: bucharest.startOfDay(for: fp.end)).day!
        XCTAssertEqual(sinceStart % 14, 0, "every other Sunday from 11 October")
        XCTAssertEqual(bucharest.dateComponents([.day], from: bucharest.startOfDay(for: fp.start), to: bucharest.startOfDay(for: fp.end)).day, 14)

        // Reminders come before each close: the next one is planned a day before the current period's (at 21:00 the
        // evening before, since 03:00 is night).
        for (gid, p) in [(mid, mp), (fid, fp)] {
            XCTAssertTrue(TestEnvironment.waitUntil(timeout: 20) { plannedReminder(gid) != nil }, "a reminder is planned")
            let at = try XCTUnwrap(plannedReminder(gid))
            XCTAssertTrue(at > now, "\(at) is ahead")
            // Within 30 hours of the close, this period's reminder is past and the next period's is planned.
            if p.end.timeIntervalSince(now) > 31 * 3600 {
                XCTAssertEqual(p.end.timeIntervalSince(at), 30 * 3600, accuracy: 3600, "21:00 two evenings before a 03:00 close")
            }
        }

        // Stories on both sides of each close.
        _ = try post(ben, "February", to: [mid], at: "2026-02-20T12:00:00Z")
        _ = try post(ben, "02:30 on the night clocks spring forward", to: [mid], at: "2026-03-29T00:30:00Z")
        _ = try post(ben, "04:00 EEST that night: the next period", to: [mid], at: "2026-03-29T01:00:00Z")
        _ = try post(ben, "Just before the first 03:00", to: [fid], at: "2026-10-24T23:59:00Z")
        _ = try post(ben, "The first 03:30", to: [fid], at: "2026-10-25T00:30:00Z")
        _ = try post(ben, "The second 03:30", to: [fid], at: "2026-10-25T01:30:00Z")
        _ = try post(ben, "Across the month end", to: [fid], at: "2026-11-01T12:00:00Z")

        let probe = try EventProbe(topics: ["newsletter.compiled"])
        let c = try database.connect()
        try c.execute("UPDATE stories.groups SET newsletter_due_at = '2026-01-29T01:00:00Z' WHERE id = $1::uuid", [mid])
        try c.execute("UPDATE stories.groups SET newsletter_due_at = '2026-10-11T00:00:00Z' WHERE id = $1::uuid", [fid])
        for gid in [mid, fid] {
            XCTAssertTrue(TestEnvironment.waitUntil(timeout: 60) {
                (try? self.database.connect().first("SELECT newsletter_due_at > now() AS later FROM stories.groups WHERE id = $1::uuid",
                                                    [gid])?["later", as: Bool.self]) == true
            }, "every missed period is compiled, then the next close lies ahead")
        }
        func periods(_ gid: String) throws -> [[String]] {
            try database.connect().rows("SELECT period_start, period_end, story_count FROM stories.newsletters WHERE group_id = $1::uuid ORDER BY period_end",
                                        [gid]).map {
                [Timestamp.format(try $0["period_start"]), Timestamp.format(try $0["period_end"]), String(try $0["story_count", as: Int.self])]
            }
        }
        let months = try periods(mid)
        XCTAssertEqual(Array(months.prefix(5)), [
            ["2025-12-29T01:00:00.000Z", "2026-01-29T01:00:00.000Z", "0"],
            ["2026-01-29T01:00:00.000Z", "2026-02-28T01:00:00.000Z", "1"],  // February has no 29th in 2026
            ["2026-02-28T01:00:00.000Z", "2026-03-29T01:00:00.000Z", "1"],  // 03:00 skipped: 04:00 EEST, the first instant after
            ["2026-03-29T01:00:00.000Z", "2026-04-29T00:00:00.000Z", "1"],  // 03:00 EEST
            ["2026-04-29T00:00:00.000Z", "2026-05-29T00:00:00.000Z", "0"],
        ])
        XCTAssertTrue(months.contains(["2026-09-29T00:00:00.000Z", "2026-10-29T01:00:00.000Z", "0"]), "back to EET after 25 October")
        XCTAssertEqual(months.last?[1], Timestamp.format(mp.start), "compiled up to the current period")
        let fortnights = try periods(fid)
        XCTAssertEqual(Array(fortnights.prefix(4)), [
            ["2026-09-27T00:00:00.000Z", "2026-10-11T00:00:00.000Z", "0"],
            ["2026-10-11T00:00:00.000Z", "2026-10-25T00:00:00.000Z", "1"],  // the first 03:00 (EEST) closes it, once
            ["2026-10-25T00:00:00.000Z", "2026-11-08T01:00:00.000Z", "3"],  // both 03:30s and 1 November
            ["2026-11-08T01:00:00.000Z", "2026-11-22T01:00:00.000Z", "0"],
        ])
        XCTAssertEqual(fortnights.last?[1], Timestamp.format(fp.start))
        let events = probe.events(timeout: 20) { $0["type"] as? String == "newsletter.compiled" && $0["subject"] as? String == fid }
        XCTAssertTrue(events.contains { $0.data("periodEnd") as? String == "2026-10-25T00:00:00.000Z" && $0.data("storyCount") as? Int == 1 })
        XCTAssertEqual(try SchemaValidator.event("newsletter.compiled").validate(events.first?.envelope ?? [:]), [])
    }

    func testTheCalendarShowsPostingDaysAndStreaksInMyTimeZone() throws {
        let ann = try person()
        let journal = try api.post("/v1/journals", ["name": "Diary"], token: ann.token)["id"] as! String
        let now = Date()
        func day(_ offset: Int, hour: Int = 12) -> String {
            Timestamp.format(Calendar(identifier: .gregorian).date(byAdding: .day, value: offset, to: now)!)
        }
        for offset in [0, -1, -2, -5, -6, -7, -8] { _ = try post(ann, "entry", to: [journal], at: day(offset)) }
        let r = try api.get("/v1/users/me/calendar?timeZone=UTC&from=\(String(day(-30).prefix(10)))&to=\(String(day(0).prefix(10)))", token: ann.token)
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r["currentStreak"] as? Int, 3)
        XCTAssertEqual(r["longestStreak"] as? Int, 4)
        XCTAssertEqual((r["days"] as? [String])?.count, 7)
        assertClientError(try api.get("/v1/users/me/calendar?timeZone=Nowhere/Else", token: ann.token), 400, code: "validation_failed")
        assertClientError(try api.get("/v1/users/me/calendar?from=2026-13-01", token: ann.token), 400)
        XCTAssertEqual(try api.get("/v1/users/me/calendar", token: try person().token)["longestStreak"] as? Int, 0)
    }
}

