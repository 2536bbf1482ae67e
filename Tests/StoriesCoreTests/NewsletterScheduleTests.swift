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

    func f(_ d: Date) -> String { Timestamp.format(d) }
    let utcZone = TimeZone(identifier: "UTC")!
    let newYork = TimeZone(identifier: "America/New_York")!
    let bucharest = TimeZone(identifier: "Europe/Bucharest")!

    func testMonthlyOnThe31stClosesOnTheLastDayOfShorterMonths() {
        let s = NewsletterSchedule(frequency: "monthly", hour: 18, timeZone: utcZone, dayOfMonth: 31)
        func period(_ at: String) -> [String] { let p = s.period(containing: utc(at)); return [f(p.start), f(p.end)] }
        XCTAssertEqual(period("2026-02-10T00:00:00Z"), ["2026-01-31T18:00:00.000Z", "2026-02-28T18:00:00.000Z"], "28 days")
        XCTAssertEqual(period("2028-02-10T00:00:00Z"), ["2028-01-31T18:00:00.000Z", "2028-02-29T18:00:00.000Z"], "29 days, a leap year")
        XCTAssertEqual(period("2026-03-10T00:00:00Z"), ["2026-02-28T18:00:00.000Z", "2026-03-31T18:00:00.000Z"], "31 days")
        XCTAssertEqual(period("2026-04-10T00:00:00Z"), ["2026-03-31T18:00:00.000Z", "2026-04-30T18:00:00.000Z"], "30 days")
        XCTAssertEqual(period("2026-12-31T18:00:00Z"), ["2026-12-31T18:00:00.000Z", "2027-01-31T18:00:00.000Z"], "at a close, across a year end")
        XCTAssertEqual(f(s.nextClose(after: utc("2026-04-30T17:59:59Z"))), "2026-04-30T18:00:00.000Z")
        XCTAssertEqual(f(s.previousClose(atOrBefore: utc("2026-04-30T17:59:59Z"))), "2026-03-31T18:00:00.000Z")
    }

    func testMonthlyOnThe29th() {
        let s = NewsletterSchedule(frequency: "monthly", hour: 0, timeZone: utcZone, dayOfMonth: 29)
        var closes: [String] = []
        var at = utc("2026-01-01T00:00:00Z")
        for _ in 0..<4 { at = s.nextClose(after: at); closes.append(f(at)) }
        XCTAssertEqual(closes, ["2026-01-29T00:00:00.000Z", "2026-02-28T00:00:00.000Z", "2026-03-29T00:00:00.000Z", "2026-04-29T00:00:00.000Z"])
        XCTAssertEqual(f(s.nextClose(after: utc("2028-02-01T00:00:00Z"))), "2028-02-29T00:00:00.000Z", "a leap February has its 29th")
        XCTAssertEqual(f(s.nextClose(after: utc("2026-04-30T00:00:00Z"))), "2026-05-29T00:00:00.000Z", "30 days: the 29th itself")
    }

    func testEveryTwoWeeksFromAStartDateAcrossAMonthEnd() {
        // 2026-11-22 is a Sunday: periods close every other Sunday, before the start date too.
        let s = NewsletterSchedule(frequency: "every_n_weeks", hour: 18, timeZone: utcZone, count: 2, startDate: "2026-11-22")
        let p = s.period(containing: utc("2026-12-01T12:00:00Z"))
        XCTAssertEqual([f(p.start), f(p.end)], ["2026-11-22T18:00:00.000Z", "2026-12-06T18:00:00.000Z"])
        let q = s.period(containing: utc("2026-11-10T12:00:00Z"))
        XCTAssertEqual([f(q.start), f(q.end)], ["2026-11-08T18:00:00.000Z", "2026-11-22T18:00:00.000Z"])
        XCTAssertEqual(f(s.nextClose(after: utc("2026-12-06T18:00:00Z"))), "2026-12-20T18:00:00.000Z")
        XCTAssertEqual(f(s.reminder(before: utc("2026-12-06T18:00:00Z"))), "2026-12-05T18:00:00.000Z", "a day before")
    }

    func testEveryThreeDays() {
        let s = NewsletterSchedule(frequency: "every_n_days", hour: 9, timeZone: berlin, count: 3, startDate: "2026-11-28")
        let p = s.period(containing: utc("2026-11-30T12:00:00Z"))
        XCTAssertEqual([f(p.start), f(p.end)], ["2026-11-28T08:00:00.000Z", "2026-12-01T08:00:00.000Z"])
        XCTAssertEqual(f(s.nextClose(after: p.end)), "2026-12-04T08:00:00.000Z")
        XCTAssertEqual(f(s.previousClose(atOrBefore: utc("2026-11-28T07:59:59Z"))), "2026-11-25T08:00:00.000Z")
        // Across February's end: 2026-02-26, 03-01, 03-04 …
        let feb = NewsletterSchedule(frequency: "every_n_days", hour: 9, timeZone: berlin, count: 3, startDate: "2026-02-26")
        XCTAssertEqual(f(feb.nextClose(after: utc("2026-02-26T08:00:00Z"))), "2026-03-01T08:00:00.000Z")
        // Two days or more: reminded a day before (at 21:00 the evening before when that is night); one: three hours.
        XCTAssertEqual(f(s.reminder(before: p.end)), "2026-11-30T08:00:00.000Z")
        let one = NewsletterSchedule(frequency: "every_n_days", hour: 18, timeZone: berlin, count: 1, startDate: "2026-11-28")
        XCTAssertEqual(f(one.reminder(before: utc("2026-11-30T17:00:00Z"))), "2026-11-30T14:00:00.000Z")
    }

    /// Daily and weekly are every 1 day and every 1 week: the same periods, so a group migrated keeps its own.
    func testDailyAndWeeklyAreEveryOneDayAndEveryOneWeek() {
        let weekly = NewsletterSchedule(frequency: "weekly", weekday: 3, hour: 7, timeZone: newYork)
        let everyWeek = NewsletterSchedule(frequency: "every_n_weeks", hour: 7, timeZone: newYork, count: 1, startDate: "2026-12-02")
        let daily = NewsletterSchedule(frequency: "daily", hour: 2, timeZone: newYork)
        let everyDay = NewsletterSchedule(frequency: "every_n_days", hour: 2, timeZone: newYork, count: 1, startDate: "2020-01-01")
        var at = utc("2026-01-01T00:00:00Z")
        while at < utc("2027-01-01T00:00:00Z") {
            XCTAssertTrue(weekly.period(containing: at) == everyWeek.period(containing: at), "\(at)")
            XCTAssertTrue(daily.period(containing: at) == everyDay.period(containing: at), "\(at)")
            at.addTimeInterval(5 * 3600 + 17 * 60)
        }
    }

    /// The skipped hour: a period closing at 02:00 in New York on 2026-03-08 (clocks jump from 02:00 to 03:00 EDT)
    /// closes at the first instant after the gap, 03:00 EDT; in Bucharest at 03:00 on 2026-03-29 (03:00 → 04:00),
    /// at 04:00 EEST.
    func testASkippedCloseHourClosesAtTheFirstInstantAfter() {
        let ny = NewsletterSchedule(frequency: "monthly", hour: 2, timeZone: newYork, dayOfMonth: 8)
        XCTAssertEqual(f(ny.nextClose(after: utc("2026-03-01T00:00:00Z"))), "2026-03-08T07:00:00.000Z")
        XCTAssertEqual(f(ny.nextClose(after: utc("2026-03-08T07:00:00Z"))), "2026-04-08T06:00:00.000Z", "02:00 EDT")
        let s = NewsletterSchedule(frequency: "every_n_days", hour: 3, timeZone: bucharest, count: 3, startDate: "2026-03-23")
        let before = s.period(containing: utc("2026-03-28T12:00:00Z"))
        XCTAssertEqual([f(before.start), f(before.end)], ["2026-03-26T01:00:00.000Z", "2026-03-29T01:00:00.000Z"])
        let after = s.period(containing: before.end)
        XCTAssertEqual([f(after.start), f(after.end)], ["2026-03-29T01:00:00.000Z", "2026-04-01T00:00:00.000Z"])
        XCTAssertEqual(after.end.timeIntervalSince(after.start), 71 * 3600)
    }

    /// The repeated hour: a period closing at 01:00 in New York on 2026-11-01 (01:00–02:00 happens twice) closes once,
    /// at the first 01:00 (EDT); in Bucharest at 03:00 on 2026-10-25, at the first 03:00 (EEST).
    func testARepeatedCloseHourClosesOnceAtItsFirstOccurrence() {
        let s = NewsletterSchedule(frequency: "every_n_weeks", hour: 1, timeZone: newYork, count: 2, startDate: "2026-10-18")
        XCTAssertEqual(f(s.nextClose(after: utc("2026-10-20T00:00:00Z"))), "2026-11-01T05:00:00.000Z")
        let p = s.period(containing: utc("2026-11-01T05:30:00Z"))  // 01:30 EDT: the new period
        XCTAssertEqual([f(p.start), f(p.end)], ["2026-11-01T05:00:00.000Z", "2026-11-15T06:00:00.000Z"])
        XCTAssertEqual(f(s.period(containing: utc("2026-11-01T06:30:00Z")).start), "2026-11-01T05:00:00.000Z", "01:30 EST: no second close")
        let monthly = NewsletterSchedule(frequency: "monthly", hour: 3, timeZone: bucharest, dayOfMonth: 25)
        let q = monthly.period(containing: utc("2026-11-01T00:00:00Z"))
        XCTAssertEqual([f(q.start), f(q.end)], ["2026-10-25T00:00:00.000Z", "2026-11-25T01:00:00.000Z"])
        XCTAssertEqual(f(monthly.previousClose(atOrBefore: utc("2026-10-25T00:59:59Z"))), "2026-10-25T00:00:00.000Z")
    }

    /// A half-hour jump (Lord Howe Island, 02:00 → 02:30 on 2026-10-04): a close at 02:00 falls at 02:30, the first
    /// instant after.
    func testAHalfHourJump() {
        let s = NewsletterSchedule(frequency: "daily", hour: 2, timeZone: TimeZone(identifier: "Australia/Lord_Howe")!)
        XCTAssertEqual(f(s.nextClose(after: utc("2026-10-03T12:00:00Z"))), "2026-10-03T15:30:00.000Z")
        XCTAssertEqual(f(s.nextClose(after: utc("2026-10-03T15:30:00Z"))), "2026-10-04T15:00:00.000Z")
    }

    /// A period closing at local midnight, on the days the clocks change: the close is midnight by that day's offset,
    /// so the period around a spring-forward has 23 hours and the one around a fall-back 25.
    func testMidnightClosesOnTheDaysTheClocksChange() {
        func closes(_ zone: TimeZone, from: String, _ n: Int) -> [String] {
            let s = NewsletterSchedule(frequency: "daily", hour: 0, timeZone: zone)
            var at = utc(from), out: [String] = []
            for _ in 0..<n { at = s.nextClose(after: at); out.append(f(at)) }
            return out
        }
        // Berlin: 02:00 → 03:00 on 29 March, 03:00 → 02:00 on 25 October.
        XCTAssertEqual(closes(berlin, from: "2026-03-28T12:00:00Z", 2), ["2026-03-28T23:00:00.000Z", "2026-03-29T22:00:00.000Z"])
        XCTAssertEqual(closes(berlin, from: "2026-10-24T12:00:00Z", 2), ["2026-10-24T22:00:00.000Z", "2026-10-25T23:00:00.000Z"])
        // New York: 02:00 → 03:00 on 8 March, 02:00 → 01:00 on 1 November.
        XCTAssertEqual(closes(newYork, from: "2026-03-07T12:00:00Z", 2), ["2026-03-08T05:00:00.000Z", "2026-03-09T04:00:00.000Z"])
        XCTAssertEqual(closes(newYork, from: "2026-10-31T12:00:00Z", 2), ["2026-11-01T04:00:00.000Z", "2026-11-02T05:00:00.000Z"])
        // Havana changes at midnight itself: 00:00 → 01:00 on 8 March (midnight skipped: it closes at 01:00 CDT, the
        // first instant after), 01:00 → 00:00 on 1 November (midnight twice: it closes once, at the first).
        let havana = TimeZone(identifier: "America/Havana")!
        XCTAssertEqual(closes(havana, from: "2026-03-07T12:00:00Z", 2), ["2026-03-08T05:00:00.000Z", "2026-03-09T04:00:00.000Z"])
        XCTAssertEqual(closes(havana, from: "2026-10-31T12:00:00Z", 2), ["2026-11-01T04:00:00.000Z", "2026-11-02T05:00:00.000Z"])
        let monthly = NewsletterSchedule(frequency: "monthly", hour: 0, timeZone: havana, dayOfMonth: 1)
        let p = monthly.period(containing: utc("2026-11-01T04:30:00Z"))  // 00:30 CDT, the first of the two
        XCTAssertEqual([f(p.start), f(p.end)], ["2026-11-01T04:00:00.000Z", "2026-12-01T05:00:00.000Z"])
        XCTAssertEqual(f(monthly.period(containing: utc("2026-11-01T05:30:00Z")).start), "2026-11-01T04:00:00.000Z", "no second close")
    }

    /// Monthly on the 30th through a year: the 30th, or the last day of February.
    func testMonthlyOnThe30thThroughAYear() {
        let s = NewsletterSchedule(frequency: "monthly", hour: 0, timeZone: berlin, dayOfMonth: 30)
        var at = utc("2027-12-31T00:00:00Z"), days: [String] = []
        for _ in 0..<13 { at = s.nextClose(after: at); days.append(s.localDay(at)) }
        XCTAssertEqual(days, ["2028-01-30", "2028-02-29", "2028-03-30", "2028-04-30", "2028-05-30", "2028-06-30", "2028-07-30",
                              "2028-08-30", "2028-09-30", "2028-10-30", "2028-11-30", "2028-12-30", "2029-01-30"])
        // Berlin's clocks change on 26 March 2028 and 29 October 2028: those months' periods are an hour shorter or longer.
        let march = s.period(containing: utc("2028-03-10T00:00:00Z"))
        XCTAssertEqual([f(march.start), f(march.end)], ["2028-02-28T23:00:00.000Z", "2028-03-29T22:00:00.000Z"])
        XCTAssertEqual(march.end.timeIntervalSince(march.start), 30 * 86_400 - 3600)
        // A month is far more than a day: reminded the evening before (21:00, since 00:00 less a day is night).
        XCTAssertEqual(f(s.reminder(before: march.end)), "2028-03-28T19:00:00.000Z")
    }

    func testEveryTwoWeeksAcrossAYearEnd() {
        let s = NewsletterSchedule(frequency: "every_n_weeks", hour: 18, timeZone: newYork, count: 2, startDate: "2026-12-06")
        var at = utc("2026-12-01T00:00:00Z"), days: [String] = []
        for _ in 0..<4 { at = s.nextClose(after: at); days.append(s.localDay(at)) }
        XCTAssertEqual(days, ["2026-12-06", "2026-12-20", "2027-01-03", "2027-01-17"])
        let p = s.period(containing: utc("2027-01-01T05:00:00Z"))  // New Year's midnight in New York
        XCTAssertEqual([f(p.start), f(p.end)], ["2026-12-20T23:00:00.000Z", "2027-01-03T23:00:00.000Z"])
        XCTAssertEqual(f(s.reminder(before: p.end)), "2027-01-02T23:00:00.000Z", "a day before")
        // Before the start date the closes go on backwards: the schedule is the same on either side of it.
        XCTAssertEqual(f(s.previousClose(atOrBefore: utc("2026-12-06T22:59:59Z"))), "2026-11-22T23:00:00.000Z")
    }

    func testDates() {
        XCTAssertNil(CivilDay.number("2026-02-29"))
        XCTAssertNil(CivilDay.number("2026-13-01"))
        XCTAssertNil(CivilDay.number("2026-1-01"))
        XCTAssertEqual(CivilDay.number("2028-02-29"), LocalDay.ordinal("2028-02-29"))
        XCTAssertEqual(CivilDay.number("1970-01-01"), 0)
        XCTAssertEqual(CivilDay.number("1969-12-31"), -1)
        XCTAssertEqual(CivilDay.civil(CivilDay.number(year: 2026, month: 12, day: 31)).month, 12)
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
