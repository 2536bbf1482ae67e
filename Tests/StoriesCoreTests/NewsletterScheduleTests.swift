import Foundation
import Models
@testable import StoriesCore
import XCTest

final class NewsletterScheduleTests: XCTestCase {
    func utc(_ text: String) -> Date { Timestamp.parse(text)! }
    let berlin = TimeZone(identifier: "Europe/Berlin")!

    func testDailyPeriodsCloseAtTheLocalHour() {
        let s = NewsletterSchedule(frequency: "daily", weekday: 7, hour: 18, timeZone: berlin)
        let p = s.period(containing: utc("2026-11-30T12:00:00Z"))
        XCTAssertEqual(Timestamp.format(p.start), "2026-11-29T17:00:00.000Z")
        XCTAssertEqual(Timestamp.format(p.end), "2026-11-30T17:00:00.000Z")
        // Exactly at a close, the new period begins.
        let at = s.period(containing: utc("2026-11-30T17:00:00Z"))
        XCTAssertEqual(Timestamp.format(at.start), "2026-11-30T17:00:00.000Z")
        XCTAssertEqual(Timestamp.format(at.end), "2026-12-01T17:00:00.000Z")
    }

    func testWeeklyPeriodsCloseOnTheISOWeekday() {
        let s = NewsletterSchedule(frequency: "weekly", weekday: 7, hour: 18, timeZone: TimeZone(identifier: "UTC")!)
        let p = s.period(containing: utc("2026-11-30T12:00:00Z"))  // a Monday
        XCTAssertEqual(Timestamp.format(p.start), "2026-11-29T18:00:00.000Z")  // Sunday
        XCTAssertEqual(Timestamp.format(p.end), "2026-12-06T18:00:00.000Z")
        let monday = NewsletterSchedule(frequency: "weekly", weekday: 1, hour: 0, timeZone: TimeZone(identifier: "UTC")!)
        XCTAssertEqual(Timestamp.format(monday.nextClose(after: utc("2026-11-30T00:00:00Z"))), "2026-12-07T00:00:00.000Z")
    }

    func testRemindersComeBeforeTheCloseAndNotAtNight() {
        let daily = NewsletterSchedule(frequency: "daily", weekday: 7, hour: 18, timeZone: berlin)
        // Three hours before a daily close at 18:00 Berlin (17:00 UTC).
        XCTAssertEqual(Timestamp.format(daily.reminder(before: utc("2026-11-30T17:00:00Z"))), "2026-11-30T14:00:00.000Z")
        // A day before a weekly close.
        let weekly = NewsletterSchedule(frequency: "weekly", weekday: 7, hour: 18, timeZone: berlin)
        XCTAssertEqual(Timestamp.format(weekly.reminder(before: utc("2026-12-06T17:00:00Z"))), "2026-12-05T17:00:00.000Z")
        // A close at 09:00 would remind at 06:00: at 21:00 the evening before instead.
        let morning = NewsletterSchedule(frequency: "daily", weekday: 7, hour: 9, timeZone: berlin)
        XCTAssertEqual(Timestamp.format(morning.reminder(before: utc("2026-11-30T08:00:00Z"))), "2026-11-29T20:00:00.000Z")
        // A weekly close at 07:00 Monday: Sunday 07:00 is night too, so Saturday 21:00.
        let early = NewsletterSchedule(frequency: "weekly", weekday: 1, hour: 7, timeZone: berlin)
        XCTAssertEqual(Timestamp.format(early.reminder(before: utc("2026-11-30T06:00:00Z"))), "2026-11-28T20:00:00.000Z")
    }

    func testDaylightSavingChangesStretchAndShrinkPeriods() {
        let s = NewsletterSchedule(frequency: "daily", weekday: 7, hour: 18, timeZone: berlin)
        // Spring forward on 2026-03-29: that day has 23 hours.
        let spring = s.period(containing: utc("2026-03-29T12:00:00Z"))
        XCTAssertEqual(spring.end.timeIntervalSince(spring.start), 23 * 3600)
        XCTAssertEqual(Timestamp.format(spring.end), "2026-03-29T16:00:00.000Z")
        // Fall back on 2026-10-25: 25 hours.
        let fall = s.period(containing: utc("2026-10-25T12:00:00Z"))
        XCTAssertEqual(fall.end.timeIntervalSince(fall.start), 25 * 3600)
        // A close hour that does not exist that night (02:00 on 2026-03-29) falls on the next existing time.
        let night = NewsletterSchedule(frequency: "daily", weekday: 7, hour: 2, timeZone: berlin)
        XCTAssertEqual(Timestamp.format(night.nextClose(after: utc("2026-03-28T12:00:00Z"))), "2026-03-29T01:00:00.000Z")
        // One that happens twice (02:00 on 2026-10-25) closes once.
        let first = night.nextClose(after: utc("2026-10-24T12:00:00Z"))
        XCTAssertEqual(Timestamp.format(first), "2026-10-25T00:00:00.000Z")
        XCTAssertEqual(night.nextClose(after: first).timeIntervalSince(first), 25 * 3600)
    }

    func testTimeZonesFarFromUTC() {
        let s = NewsletterSchedule(frequency: "daily", weekday: 7, hour: 9, timeZone: TimeZone(identifier: "Pacific/Auckland")!)
        XCTAssertEqual(Timestamp.format(s.nextClose(after: utc("2026-11-30T12:00:00Z"))), "2026-11-30T20:00:00.000Z")
        XCTAssertEqual(s.localDay(utc("2026-11-30T12:00:00Z")), "2026-12-01")
    }

    func testStreaks() {
        XCTAssertEqual(LocalDay.streaks(days: [], today: "2026-11-30").current, 0)
        let days = ["2026-11-20", "2026-11-21", "2026-11-22", "2026-11-25", "2026-11-28", "2026-11-29"]
        XCTAssertEqual(LocalDay.streaks(days: days, today: "2026-11-30").current, 2, "today is still open")
        XCTAssertEqual(LocalDay.streaks(days: days + ["2026-11-30"], today: "2026-11-30").current, 3)
        XCTAssertEqual(LocalDay.streaks(days: days, today: "2026-12-01").current, 0)
        XCTAssertEqual(LocalDay.streaks(days: days, today: "2026-11-30").longest, 3)
        XCTAssertEqual(LocalDay.streaks(days: ["2026-02-28", "2026-03-01", "2026-03-01"], today: "2026-03-01").current, 2,
                       "across a month end, duplicates once")
    }
}
