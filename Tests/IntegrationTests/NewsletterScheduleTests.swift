import Foundation
import Models
import Postgres
@testable import StoriesCore
import XCTest

/// Any interval, on PostgreSQL: a monthly group and an every-two-weeks group, each reminded before a period that
/// spans a month end closes and given its newsletter after. The service's clock cannot be moved, so the test runs
/// the newsletter job itself (`Newsletters`, as the service's scan does) at the times it names.
final class NewsletterScheduleJobTests: StoriesHarnessCase {
    var job: Newsletters {
        Newsletters(pool: service.app.pool, storage: StoriesStorage(), outbox: service.app.outbox, cache: NewsletterCache())
    }

    func utc(_ text: String) -> Date { Timestamp.parse(text)! }

    /// Posts a story to `group` as if it had been posted at `at`.
    func post(_ who: Person, _ text: String, to group: String, at: String) throws {
        let r = try service.send("POST", "/v1/stories", json: ["text": text, "groupIds": [group]], as: who)
        XCTAssertEqual(r.status, 201)
        let id = try XCTUnwrap(UUID(uuidString: r["id"] as? String ?? ""))
        let c = try service.database.connect()
        try c.execute("UPDATE stories.stories SET created_at = \(utc(at)) WHERE id = \(id)")
        try c.execute("UPDATE stories.story_groups SET created_at = \(utc(at)) WHERE story_id = \(id)")
    }

    func due(_ column: String, _ group: String) throws -> Date? {
        try service.database.connect().first("SELECT \(unescaped: column) AS at FROM stories.groups WHERE id = \(UUID(uuidString: group)!)")?["at", as: Date?.self]
    }

    /// Sets `schedule`, then runs the period closing at `close`: the reminder planned at `reminder`, not sent before
    /// it, sent once after it to the members with nothing posted in the period (`silent`), then the newsletter of
    /// [start, close) compiled after the close, holding `stories` stories; the next close is `next`.
    func run(_ schedule: [String: Any], admin: Person, group: String, silent: [Person], period start: String, close: String,
             reminder: String, nextReminder: String, next: String, stories: Int, file: StaticString = #filePath, line: UInt = #line) throws {
        let set = try service.send("PATCH", "/v1/groups/\(group)", json: ["newsletter": schedule], as: admin)
        XCTAssertEqual(set.status, 200, String(decoding: set.body, as: UTF8.self), file: file, line: line)
        let (close, reminder) = (utc(close), utc(reminder))

        // An hour before the reminder's time: planned, not sent.
        XCTAssertEqual(try job.sendDueReminders(now: reminder.addingTimeInterval(-3600)), 0, file: file, line: line)
        XCTAssertEqual(try due("reminder_due_at", group), reminder, "planned before the close", file: file, line: line)
        // Its time come: the silent members are reminded of this period, once.
        XCTAssertEqual(try job.sendDueReminders(now: reminder.addingTimeInterval(1800)), 1, file: file, line: line)
        XCTAssertEqual(try job.sendDueReminders(now: reminder.addingTimeInterval(3600)), 0, "once", file: file, line: line)
        let reminders = try service.events(ReminderDue.self).filter { $0.payload.groupId.lowercased == group }
        XCTAssertEqual(reminders.map(\.subject).sorted(), silent.map(\.id).sorted(), file: file, line: line)
        for r in reminders {
            XCTAssertEqual(r.payload.periodStart, utc(start), file: file, line: line)
            XCTAssertEqual(r.payload.periodEnd, close, file: file, line: line)
        }
        XCTAssertEqual(try due("reminder_due_at", group), utc(nextReminder), "the next period's", file: file, line: line)

        // After the close (planned first, as the scan does when no close is stored yet): the newsletter.
        try service.database.connect().execute("UPDATE stories.groups SET newsletter_due_at = NULL WHERE id = \(UUID(uuidString: group)!)")
        XCTAssertEqual(try job.compileDueNewsletters(now: close.addingTimeInterval(-60)), 0, file: file, line: line)
        XCTAssertEqual(try due("newsletter_due_at", group), close, file: file, line: line)
        XCTAssertEqual(try job.compileDueNewsletters(now: close.addingTimeInterval(1)), 1, file: file, line: line)
        let compiled = try service.events(NewsletterCompiled.self).filter { $0.payload.groupId.lowercased == group }
        XCTAssertEqual(compiled.count, 1, file: file, line: line)
        let first = try XCTUnwrap(compiled.first, file: file, line: line)
        XCTAssertEqual(first.payload.periodStart, utc(start), file: file, line: line)
        XCTAssertEqual(first.payload.periodEnd, close, file: file, line: line)
        XCTAssertEqual(first.payload.storyCount, stories, file: file, line: line)
        XCTAssertEqual(try service.count("newsletters", "group_id = '\(group)' AND period_end = '\(Timestamp.format(close))'"), 1,
                       file: file, line: line)
        XCTAssertEqual(try due("newsletter_due_at", group), utc(next), file: file, line: line)
    }

    /// On the 31st at 20:00 in Berlin: February's period closes on its 28th, the next on 31 March at 20:00 summer time.
    func testAMonthlyGroupIsRemindedBeforeTheMonthEndAndGetsItsNewsletterAfter() throws {
        let ann = try person(), ben = try person(), cat = try person()
        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try join(cat, family).status, 200)
        try post(ann, "January, the last period", to: family.id, at: "2026-01-31T18:59:00Z")
        try post(cat, "The first minute of February's period", to: family.id, at: "2026-01-31T19:00:00Z")
        try post(ann, "Mid-February", to: family.id, at: "2026-02-14T12:00:00Z")
        try post(ann, "1 March: the next period", to: family.id, at: "2026-03-01T10:00:00Z")
        try run(["frequency": "monthly", "dayOfMonth": 31, "hour": 20, "timeZone": "Europe/Berlin"], admin: ann, group: family.id,
                silent: [ben], period: "2026-01-31T19:00:00Z", close: "2026-02-28T19:00:00Z",
                reminder: "2026-02-27T19:00:00Z", nextReminder: "2026-03-30T18:00:00Z", next: "2026-03-31T18:00:00Z", stories: 2)
    }

    /// Every other Sunday at 18:00 in New York from 8 November: the period from 22 November closes on 6 December.
    func testAFortnightlyGroupIsRemindedBeforeTheCloseAcrossAMonthEndAndGetsItsNewsletterAfter() throws {
        let ann = try person(), ben = try person(), cat = try person()
        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try join(cat, family).status, 200)
        try post(ben, "The last period", to: family.id, at: "2026-11-22T22:59:59Z")
        try post(ann, "30 November", to: family.id, at: "2026-11-30T15:00:00Z")
        try post(ann, "1 December", to: family.id, at: "2026-12-01T15:00:00Z")
        try post(cat, "Sunday at 17:59", to: family.id, at: "2026-12-06T22:59:00Z")
        try run(["frequency": "every_n_weeks", "count": 2, "startDate": "2026-11-08", "hour": 18, "timeZone": "America/New_York"],
                admin: ann, group: family.id, silent: [ben, cat], period: "2026-11-22T23:00:00Z", close: "2026-12-06T23:00:00Z",
                reminder: "2026-12-05T23:00:00Z", nextReminder: "2026-12-19T23:00:00Z", next: "2026-12-20T23:00:00Z", stories: 3)
    }

    /// Hostile schedules are 400s naming the field; nothing refused is kept.
    func testASchedulesValuesAreChecked() throws {
        let ann = try person()
        let family = try group(ann)
        func refused(_ body: [String: Any], _ field: String?, file: StaticString = #filePath, line: UInt = #line) throws {
            let r = try service.send("PATCH", "/v1/groups/\(family.id)", json: ["newsletter": body], as: ann)
            assertClientError(r, 400, code: "validation_failed", "\(body)", file: file, line: line)
            if let field { XCTAssertEqual((r.json["error"] as? [String: Any])?["field"] as? String, field, "\(body)", file: file, line: line) }
        }
        try refused(["frequency": "yearly"], "newsletter.frequency")
        try refused(["frequency": "every_n_days", "count": -3], "newsletter.count")
        try refused(["frequency": "every_n_weeks", "count": 1_000_000], "newsletter.count")
        try refused(["frequency": "every_n_days", "count": 99_999_999_999_999_999_999.0], nil)
        try refused(["frequency": "every_n_days", "count": 2.5], "newsletter.count")
        try refused(["frequency": "monthly", "dayOfMonth": 0], "newsletter.dayOfMonth")
        try refused(["frequency": "monthly", "dayOfMonth": 32], "newsletter.dayOfMonth")
        try refused(["frequency": "every_n_days", "count": 3, "startDate": "0000-01-01"], "newsletter.startDate")
        try refused(["frequency": "every_n_days", "count": 3, "startDate": "1900-01-01"], "newsletter.startDate")
        try refused(["frequency": "every_n_days", "count": 3, "startDate": "9999-12-31"], "newsletter.startDate")
        try refused(["frequency": "every_n_days", "count": 3, "startDate": "2026-12-01T00:00:00Z"], "newsletter.startDate")
        XCTAssertEqual(try service.get("/v1/groups/\(family.id)", as: ann, StoriesViews.Group.self).view.newsletter.frequency, "weekly")
        // A start date a few years off is an anchor like any other.
        let far = try service.send("PATCH", "/v1/groups/\(family.id)",
                                   json: ["newsletter": ["frequency": "every_n_days", "count": 3, "startDate": "2030-01-01"]], as: ann)
        XCTAssertEqual(far.status, 200, String(decoding: far.body, as: UTF8.self))
    }
}
