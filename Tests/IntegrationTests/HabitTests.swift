import Foundation
import Models
import Runtime
import ServiceKit
@testable import StoriesCore
import XCTest

/// Accomplishments: habits a person keeps in their journal, the days they did them, their streaks and calendar, and
/// a streak shared to a group's newsletter. Stories in-process (`Harness`).
final class HabitTests: StoriesHarnessCase {
    override var settings: [String: String] { ["SERVICE_TOKEN": String(repeating: "s", count: 40)] }

    struct Habit: Decodable {
        let id: String, title: String, target: Int, per: String, timeZone: String, today: String, doneToday: Bool
        let currentStreak: Int, longestStreak: Int, sharedGroupIds: [String], createdAt: String, updatedAt: String
    }
    struct Calendar: Decodable {
        struct Day: Decodable { let date: String; let storyId: String? }
        let habitId: String, month: String, timeZone: String, per: String, days: [Day], currentStreak: Int, longestStreak: Int
    }
    struct Newsletter: Decodable {
        struct Habit: Decodable { let id: String, memberId: String, title: String, per: String, daysDone: Int, currentStreak: Int, longestStreak: Int }
        let habits: [Habit]?
    }

    func today(_ zone: String) -> Int { Habits.today(in: zone) }
    func day(_ n: Int) -> String { CivilDay.text(n) }

    func habit(_ who: Person, _ body: [String: Any]) throws -> Habit {
        let (status, habit) = try service.post("/v1/habits", body, as: who, Habit.self)
        XCTAssertEqual(status, 201)
        return habit
    }

    @discardableResult
    func mark(_ who: Person, _ habit: Habit, _ date: String, _ body: [String: Any] = [:], status: Int = 200,
              file: StaticString = #filePath, line: UInt = #line) throws -> APIResponse {
        let r = try service.send("PUT", "/v1/habits/\(habit.id)/days/\(date)", json: body, as: who)
        XCTAssertEqual(r.status, status, String(decoding: r.body, as: UTF8.self), file: file, line: line)
        return r
    }

    func testSetAHabitMarkDaysAndSeeItsStreakAndCalendar() throws {
        let ann = try person(), ben = try person()
        let exercise = try habit(ann, ["title": "  Exercise  ", "per": "day"])
        XCTAssertEqual(exercise.title, "Exercise")
        XCTAssertEqual(exercise.target, 1)
        XCTAssertEqual(exercise.timeZone, "UTC")
        XCTAssertEqual(exercise.currentStreak, 0)
        let t = today("UTC")
        for d in [t - 2, t - 1, t] { try mark(ann, exercise, day(d)) }
        // Marking a day again is not another completion.
        let again = try mark(ann, exercise, day(t)).decode(Habit.self)
        XCTAssertEqual(try service.count("habit_days", "habit_id = '\(exercise.id)'"), 3)
        XCTAssertEqual(again.currentStreak, 3)
        XCTAssertEqual(again.longestStreak, 3)
        XCTAssertTrue(again.doneToday)
        XCTAssertEqual(try service.events(HabitDayMarked.self).filter(\.payload.done).count, 3, "one event per day done")

        // Done with a story of hers (in her journal); not with Ben's.
        let journal = try service.get("/v1/groups", as: ann, Listing<StoriesViews.Group>.self).view.items.first { $0.kind == "journal" }
        let story = try service.post("/v1/stories", ["text": "Ran 5 km", "groupIds": [journal?.id ?? ""]], as: ann, StoriesViews.Created.self).view.id
        try mark(ann, exercise, day(t - 1), ["storyId": story])
        let bensJournal = try service.get("/v1/groups", as: ben, Listing<StoriesViews.Group>.self).view.items.first { $0.kind == "journal" }
        let bens = try service.post("/v1/stories", ["text": "Mine", "groupIds": [bensJournal?.id ?? ""]], as: ben, StoriesViews.Created.self).view.id
        assertClientError(try mark(ann, exercise, day(t), ["storyId": bens], status: 400), 400, code: "validation_failed")
        // A repeat without a story keeps the one it has.
        try mark(ann, exercise, day(t - 1))

        let month = String(day(t).prefix(7))
        let calendar = try service.get("/v1/habits/\(exercise.id)/calendar", as: ann, Calendar.self).view
        XCTAssertEqual(calendar.month, month)
        XCTAssertEqual(calendar.days.map(\.date), [t - 2, t - 1, t].map(day).filter { $0.hasPrefix(month) })
        XCTAssertEqual(calendar.days.first { $0.date == day(t - 1) }?.storyId, story)
        XCTAssertEqual(calendar.currentStreak, 3)
        let previous = try service.get("/v1/habits/\(exercise.id)/calendar?month=2026-01", as: ann, Calendar.self).view
        XCTAssertEqual(previous.days.count, 0)

        // Undone: the streak breaks.
        XCTAssertEqual(try service.send("DELETE", "/v1/habits/\(exercise.id)/days/\(day(t - 1))", as: ann).status, 204)
        XCTAssertEqual(try service.send("DELETE", "/v1/habits/\(exercise.id)/days/\(day(t - 1))", as: ann).status, 204, "again: nothing to undo")
        let broken = try service.get("/v1/habits/\(exercise.id)", as: ann, Habit.self).view
        XCTAssertEqual(broken.currentStreak, 1)
        XCTAssertEqual(broken.longestStreak, 1)

        let renamed = try service.patch("/v1/habits/\(exercise.id)", ["title": "Run"], as: ann, Habit.self)
        XCTAssertEqual(renamed.status, 200)
        XCTAssertEqual(renamed.view.title, "Run")
        let mine = try service.get("/v1/habits", as: ann, ItemsOf<Habit>.self).view.items
        XCTAssertEqual(mine.map(\.id), [exercise.id])
        XCTAssertEqual(try service.get("/v1/habits", as: ben, ItemsOf<Habit>.self).view.items.count, 0)
        XCTAssertEqual(try service.events(HabitCreated.self).map(\.subject), [exercise.id])
        XCTAssertEqual(try service.events(HabitUpdated.self).count, 1)
        XCTAssertEqual(try service.send("DELETE", "/v1/habits/\(exercise.id)", as: ann).status, 204)
        XCTAssertEqual(try service.count("habit_days", "habit_id = '\(exercise.id)'"), 0)
        XCTAssertEqual(try service.events(HabitDeleted.self).map(\.subject), [exercise.id])
    }

    /// A weekly habit counts Monday-to-Sunday weeks in the person's time zone: two days either side of a Sunday
    /// midnight meet no week; the days are the person's, not UTC's.
    func testAWeeklyHabitAcrossAWeekBoundaryInThePersonsTimeZone() throws {
        let ann = try person()
        let zone = "Pacific/Kiritimati"  // UTC+14: from 10:00 UTC on, its today is UTC's tomorrow
        let cook = try habit(ann, ["title": "Cook", "per": "week", "target": 2, "timeZone": zone])
        let t = today(zone)
        XCTAssertEqual(cook.today, day(t))
        let monday = t - ((t + 3) % 7)
        try mark(ann, cook, day(monday - 1))  // last week's Sunday
        let across = try mark(ann, cook, day(monday)).decode(Habit.self)  // this week's Monday
        XCTAssertEqual(across.currentStreak, 0, "one day in each week")
        XCTAssertEqual(across.longestStreak, 0)
        let met = try mark(ann, cook, day(monday - 7)).decode(Habit.self)  // last week's Monday
        XCTAssertEqual(met.currentStreak, 1, "last week met it; this week is still open")
        XCTAssertEqual(met.longestStreak, 1)
        try mark(ann, cook, day(t + 1), status: 400)

        // The same day in UTC is a day ahead whenever Kiritimati is a day ahead.
        let utc = try habit(ann, ["title": "Read", "per": "day"])
        try mark(ann, utc, day(t), status: t > today("UTC") ? 400 : 200)
        // Moved to Kiritimati, the habit's days follow.
        let moved = try service.patch("/v1/habits/\(utc.id)", ["timeZone": zone], as: ann, Habit.self).view
        XCTAssertEqual(moved.today, day(t))
        try mark(ann, utc, day(t))
    }

    func testAHabitsStreakSharedToAGroupAppearsInItsNewsletter() throws {
        let ann = try person(), ben = try person(), cy = try person()
        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        let cook = try habit(ann, ["title": "Cook <dinner>", "per": "day"])
        let t = today("UTC")
        try mark(ann, cook, day(t - 1))
        try mark(ann, cook, day(t))
        let shared = try service.send("PUT", "/v1/habits/\(cook.id)/shares/\(family.id)", as: ann)
        XCTAssertEqual(shared.status, 200)
        XCTAssertEqual(try shared.decode(Habit.self).sharedGroupIds, [family.id])
        XCTAssertEqual(try service.send("PUT", "/v1/habits/\(cook.id)/shares/\(family.id)", as: ann).status, 200, "again: shared once")
        XCTAssertEqual(try service.count("habit_shares", "habit_id = '\(cook.id)'"), 1)

        let news = try service.get("/v1/groups/\(family.id)/newsletter", as: ben, Newsletter.self).view
        let entry = try XCTUnwrap(news.habits?.first)
        XCTAssertEqual(news.habits?.count, 1)
        XCTAssertEqual(entry.id, cook.id)
        XCTAssertEqual(entry.memberId, ann.id)
        XCTAssertEqual(entry.title, "Cook <dinner>")
        XCTAssertEqual(entry.currentStreak, 2)
        XCTAssertEqual(entry.longestStreak, 2)
        XCTAssertGreaterThanOrEqual(entry.daysDone, 1, "today is in the open period")
        let html = String(decoding: try service.send("GET", "/v1/groups/\(family.id)/newsletter?format=html", as: ben).body, as: UTF8.self)
        XCTAssertTrue(html.contains("Habits"), html)
        XCTAssertTrue(html.contains("Cook &lt;dinner&gt; (every day): a 2-day streak"), html)
        XCTAssertFalse(html.contains("<dinner>"), "escaped")

        // Whom the reader hides, and a habit no longer shared, are left out.
        XCTAssertEqual(try service.send("PUT", "/v1/users/me/hidden-authors/\(ann.id)", as: ben).status, 204)
        XCTAssertEqual(try service.get("/v1/groups/\(family.id)/newsletter", as: ben, Newsletter.self).view.habits?.count, 0)
        XCTAssertEqual(try service.send("DELETE", "/v1/habits/\(cook.id)/shares/\(family.id)", as: ann).status, 204)
        XCTAssertEqual(try service.get("/v1/groups/\(family.id)/newsletter", as: ann, Newsletter.self).view.habits?.count, 0)
        XCTAssertEqual(try service.events(HabitUpdated.self).filter { $0.subject == cook.id }.map(\.payload.sharedGroupIds.count), [1, 0])

        // Ben shared one too, left, and came back: his share went with him until he shares it again.
        let bens = try habit(ben, ["title": "Walk", "per": "day"])
        XCTAssertEqual(try service.send("PUT", "/v1/habits/\(bens.id)/shares/\(family.id)", as: ben).status, 200)
        XCTAssertEqual(try service.get("/v1/groups/\(family.id)/newsletter", as: ann, Newsletter.self).view.habits?.map(\.id), [bens.id])
        XCTAssertEqual(try service.send("DELETE", "/v1/groups/\(family.id)/members/\(ben.id)", as: ben).status, 204)
        XCTAssertEqual(try service.get("/v1/groups/\(family.id)/newsletter", as: ann, Newsletter.self).view.habits?.count, 0)
        XCTAssertEqual(try join(ben, family).status, 200)
        XCTAssertEqual(try service.get("/v1/groups/\(family.id)/newsletter", as: ann, Newsletter.self).view.habits?.count, 0)
        XCTAssertEqual(try service.get("/v1/habits/\(bens.id)", as: ben, Habit.self).view.sharedGroupIds, [])
        XCTAssertEqual(try service.send("PUT", "/v1/habits/\(bens.id)/shares/\(family.id)", as: ben).status, 200)
        XCTAssertEqual(try service.get("/v1/groups/\(family.id)/newsletter", as: ann, Newsletter.self).view.habits?.map(\.id), [bens.id])

        // Only a group one is in (else 404, as if there were none), and not a journal.
        let others = try group(cy, name: "Others")
        assertClientError(try service.send("PUT", "/v1/habits/\(cook.id)/shares/\(others.id)", as: ann), 404, code: "not_found")
        assertClientError(try service.send("PUT", "/v1/habits/\(cook.id)/shares/\(UUID().uuidString.lowercased())", as: ann), 404)
        let journal = try service.get("/v1/groups", as: ann, Listing<StoriesViews.Group>.self).view.items.first { $0.kind == "journal" }
        assertClientError(try service.send("PUT", "/v1/habits/\(cook.id)/shares/\(journal?.id ?? "")", as: ann), 409, code: "conflict")
    }

    /// The compiled newsletter keeps the shared habits, and so does the copy mailed to a member.
    func testTheCompiledNewsletterAndItsMailKeepTheSharedHabits() throws {
        let ann = try person()
        let family = try group(ann)
        let cook = try habit(ann, ["title": "Cook", "per": "week", "target": 1])
        try mark(ann, cook, day(today("UTC")))
        XCTAssertEqual(try service.send("PUT", "/v1/habits/\(cook.id)/shares/\(family.id)", as: ann).status, 200)
        let job = Newsletters(pool: service.app.pool, storage: StoriesStorage(), outbox: service.app.outbox, cache: NewsletterCache())
        let group = try XCTUnwrap(UUID(uuidString: family.id))
        try service.database.connect().execute("UPDATE stories.groups SET newsletter_due_at = now() - interval '1 second' WHERE id = \(group)")
        // The period closes a second ago, so it holds today.
        XCTAssertEqual(try job.compileDueNewsletters(), 1)
        let compiled = try XCTUnwrap(service.events(NewsletterCompiled.self).first?.payload)
        let copy = try service.send("GET", "/v1/internal/newsletters/\(compiled.newsletterId.lowercased)/copies/\(ann.id)",
                                    headers: ["Authorization": "Bearer " + String(repeating: "s", count: 40)])
        XCTAssertEqual(copy.status, 200, String(decoding: copy.body, as: UTF8.self))
        XCTAssertTrue((copy["text"] as? String ?? "").contains("Habits\n"), String(decoding: copy.body, as: UTF8.self))
        XCTAssertTrue((copy["html"] as? String ?? "").contains("Cook (1 day a week)"))
        let stored = try service.get("/v1/groups/\(family.id)/newsletters/\(compiled.newsletterId.lowercased)", as: ann, Newsletter.self).view
        XCTAssertEqual(stored.habits?.map(\.id), [cook.id])
    }

    func testOutsidersGet404AndHostileInputsAClear400() throws {
        let ann = try person(), ben = try person()
        let h = try habit(ann, ["title": "Stretch", "per": "day"])
        let t = today("UTC")
        let family = try group(ben)
        for (method, path, body) in [("GET", "", nil), ("PATCH", "", ["title": "Mine"]), ("DELETE", "", nil),
                                     ("PUT", "/days/\(day(t))", [String: String]()), ("DELETE", "/days/\(day(t))", nil),
                                     ("GET", "/calendar", nil), ("PUT", "/shares/\(family.id)", nil), ("DELETE", "/shares/\(family.id)", nil)] as [(String, String, [String: String]?)] {
            assertClientError(try service.send(method, "/v1/habits/\(h.id)\(path)", json: body, as: ben), 404, code: "not_found", "\(method) \(path)")
        }
        XCTAssertEqual(try service.count("habit_days"), 0)
        assertClientError(try service.send("GET", "/v1/habits/not-a-uuid", as: ann), 404)
        XCTAssertEqual(try service.send("GET", "/v1/habits", as: nil).status, 401)

        let refused: [[String: Any]] = [
            [:], ["title": "", "per": "day"], ["title": "   ", "per": "day"], ["title": String(repeating: "x", count: 101), "per": "day"],
            ["title": "a\u{0}b", "per": "day"], ["title": "a\nb", "per": "day"], ["title": 5, "per": "day"], ["title": "x"],
            ["title": "x", "per": "month"], ["title": "x", "per": "day", "target": 2], ["title": "x", "per": "week", "target": 8],
            ["title": "x", "per": "week", "target": 0], ["title": "x", "per": "week", "target": "2"], ["title": "x", "per": "week", "target": 1.5],
            ["title": "x", "per": "day", "timeZone": "Nowhere/Else"], ["title": "x", "per": "day", "timeZone": "EST"],
            ["title": "x", "per": "day", "timeZone": String(repeating: "A/", count: 40)], ["title": "x", "per": "day", "extra": true],
        ]
        for body in refused {
            assertClientError(try service.send("POST", "/v1/habits", json: body, as: ann), 400, "\(body)")
        }
        assertClientError(try service.send("POST", "/v1/habits", raw: Array("{".utf8), as: ann, headers: ["Content-Type": "application/json"]), 400,
                          code: "invalid_json")
        for date in ["2026-02-30", "2026-13-01", "yesterday", "20261207", day(t + 1), day(t - 367), "0000-01-01", "9999-12-31", "2026-1-07"] {
            assertClientError(try service.send("PUT", "/v1/habits/\(h.id)/days/\(date)", json: [String: String](), as: ann), 400,
                              code: "validation_failed", date)
        }
        assertClientError(try service.send("PUT", "/v1/habits/\(h.id)/days/\(day(t))", json: ["storyId": "nope"], as: ann), 400)
        assertClientError(try service.send("PUT", "/v1/habits/\(h.id)/days/\(day(t))", as: ann), 400, code: "invalid_json", "a body is needed")
        assertClientError(try service.send("PUT", "/v1/habits/\(h.id)/days/\(day(t))", json: ["storyId": UUID().uuidString], as: ann), 400,
                          code: "validation_failed", "no such story")
        for month in ["2026-13", "abc", "2026-1", "2026-01-01", "", "0000-01", "9999-12", "-001-01"] {
            assertClientError(try service.send("GET", "/v1/habits/\(h.id)/calendar?month=\(month)", as: ann), 400, month)
        }
        for body: [String: Any] in [["title": ""], ["per": "day", "target": 3], ["target": 2], ["timeZone": "Mars/Olympus"], ["title": NSNull()]] {
            assertClientError(try service.send("PATCH", "/v1/habits/\(h.id)", json: body, as: ann), 400, "\(body)")
        }
        XCTAssertEqual(try service.count("habit_days"), 0)

        // At most 50 habits a person.
        for i in 1..<Habits.maxHabits { _ = try habit(ann, ["title": "Habit \(i)", "per": "day"]) }
        assertClientError(try service.send("POST", "/v1/habits", json: ["title": "One more", "per": "day"], as: ann), 409, code: "conflict")
    }

    func testHabitsAreInTheExportAndGoWithTheAccount() throws {
        let ann = try person(), ben = try person()
        let family = try group(ann)
        XCTAssertEqual(try join(ben, family).status, 200)
        let h = try habit(ann, ["title": "Walk", "per": "day"])
        try mark(ann, h, day(today("UTC")))
        XCTAssertEqual(try service.send("PUT", "/v1/habits/\(h.id)/shares/\(family.id)", as: ann).status, 200)
        let export = try service.send("GET", "/v1/internal/users/\(ann.id)/export", headers: ["Authorization": "Bearer " + String(repeating: "s", count: 40)])
        XCTAssertEqual(export.status, 200)
        let habits = (try JSONSerialization.jsonObject(with: Data(export.body)) as? [String: Any])?["habits"] as? [[String: Any]]
        XCTAssertEqual(habits?.first?["title"] as? String, "Walk")
        XCTAssertEqual((habits?.first?["days"] as? [[String: Any]])?.first?["date"] as? String, day(today("UTC")))
        XCTAssertEqual(habits?.first?["sharedGroupIds"] as? [String], [family.id])

        try service.deliver(UserDeleted(userId: try XCTUnwrap(UUID(uuidString: ann.id)), deletedAt: Date()), subject: ann.id, source: "/auth")
        XCTAssertEqual(try service.count("habits"), 0)
        XCTAssertEqual(try service.count("habit_days"), 0)
        XCTAssertEqual(try service.count("habit_shares"), 0)
        XCTAssertEqual(try service.get("/v1/groups/\(family.id)/newsletter", as: ben, Newsletter.self).view.habits?.count, 0)
    }
}

/// A list without pages.
struct ItemsOf<Item: Decodable>: Decodable { let items: [Item] }
