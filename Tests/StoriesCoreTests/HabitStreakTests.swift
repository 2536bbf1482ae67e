import Foundation
import Models
@testable import StoriesCore
import XCTest

/// The streak rules of habits: consecutive days for a daily habit, consecutive Monday-to-Sunday weeks that met the
/// target for a weekly one, the current streak still alive while today's day or week is open.
final class HabitStreakTests: XCTestCase {
    func n(_ day: String) -> Int { CivilDay.number(day)! }
    func days(_ list: [String]) -> [Int] { list.map(n) }
    let daily = HabitTarget(count: 1, per: .day)

    func testADailyStreakEndsTodayOrYesterdayWhileTodayIsOpen() {
        let done = days(["2026-11-28", "2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04", "2026-12-05"])
        XCTAssertEqual(HabitStreaks.streaks(days: done, target: daily, today: n("2026-12-06")).current, 5, "today still open")
        XCTAssertEqual(HabitStreaks.streaks(days: done, target: daily, today: n("2026-12-05")).current, 5)
        let lapsed = HabitStreaks.streaks(days: done, target: daily, today: n("2026-12-07"))
        XCTAssertEqual(lapsed.current, 0, "a whole day missed")
        XCTAssertEqual(lapsed.longest, 5)
        let again = HabitStreaks.streaks(days: done + [n("2026-12-07")], target: daily, today: n("2026-12-07"))
        XCTAssertEqual(again.current, 1)
        XCTAssertEqual(again.longest, 5)
    }

    func testRepeatedDaysAndDaysAfterTodayDoNotCount() {
        let done = days(["2026-12-01", "2026-12-01", "2026-12-02", "2026-12-03"])
        XCTAssertEqual(HabitStreaks.streaks(days: done, target: daily, today: n("2026-12-02")).current, 2)
        XCTAssertEqual(HabitStreaks.streaks(days: done, target: daily, today: n("2026-12-02")).longest, 2)
        XCTAssertEqual(HabitStreaks.streaks(days: [], target: daily, today: n("2026-12-02")).longest, 0)
    }

    func testWeeksRunMondayToSunday() {
        XCTAssertEqual(HabitStreaks.week(n("2026-12-06")) + 1, HabitStreaks.week(n("2026-12-07")), "Sunday, then Monday")
        XCTAssertEqual(HabitStreaks.week(n("2026-12-07")), HabitStreaks.week(n("2026-12-13")))
        XCTAssertEqual(HabitStreaks.week(n("1969-12-29")), HabitStreaks.week(n("1970-01-04")), "before day 0 too")
        XCTAssertEqual(HabitStreaks.week(n("1969-12-28")) + 1, HabitStreaks.week(n("1969-12-29")))
    }

    func testAWeeklyStreakCountsTheWeeksThatMetTheTarget() {
        let twice = HabitTarget(count: 2, per: .week)
        // Weeks of 16, 23 and 30 November met it; the week of 7 December has one day so far.
        let done = days(["2026-11-17", "2026-11-20", "2026-11-23", "2026-11-29", "2026-12-05", "2026-12-06", "2026-12-07"])
        let open = HabitStreaks.streaks(days: done, target: twice, today: n("2026-12-08"))
        XCTAssertEqual(open.current, 3, "this week is still open")
        XCTAssertEqual(open.longest, 3)
        let met = HabitStreaks.streaks(days: done + [n("2026-12-08")], target: twice, today: n("2026-12-08"))
        XCTAssertEqual(met.current, 4)
        let lapsed = HabitStreaks.streaks(days: done, target: twice, today: n("2026-12-14"))
        XCTAssertEqual(lapsed.current, 0, "last week ended with one day")
        XCTAssertEqual(lapsed.longest, 3)
    }

    func testTwoDaysAcrossAWeekBoundaryMeetNoWeek() {
        let twice = HabitTarget(count: 2, per: .week)
        let sundayMonday = days(["2026-11-29", "2026-11-30"])
        XCTAssertEqual(HabitStreaks.streaks(days: sundayMonday, target: twice, today: n("2026-12-01")).longest, 0)
        XCTAssertEqual(HabitStreaks.streaks(days: sundayMonday, target: HabitTarget(count: 1, per: .week), today: n("2026-12-01")).current, 2)
    }

    func testTargetsTheRulesTake() throws {
        XCTAssertEqual(try Habits.target(count: 1, per: .day), daily)
        XCTAssertThrowsError(try Habits.target(count: 2, per: .day))
        XCTAssertEqual(try Habits.target(count: 7, per: .week), HabitTarget(count: 7, per: .week))
        XCTAssertThrowsError(try Habits.target(count: 8, per: .week))
        XCTAssertThrowsError(try Habits.target(count: 0, per: .week))
    }

    func testADayIsMarkableUpToTodayInTheHabitsTimeZone() throws {
        let now = Timestamp.parse("2026-12-07T11:00:00Z")!
        // At 11:00 UTC it is already the 8th on Kiritimati (UTC+14), still the 7th in UTC.
        XCTAssertEqual(try Habits.markable("2026-12-08", in: "Pacific/Kiritimati", now: now), n("2026-12-08"))
        XCTAssertThrowsError(try Habits.markable("2026-12-08", in: "UTC", now: now))
        XCTAssertEqual(try Habits.markable("2025-12-06", in: "UTC", now: now), n("2025-12-06"), "a year back")
        XCTAssertThrowsError(try Habits.markable("2025-12-05", in: "UTC", now: now))
        for bad in ["2026-02-30", "2026-13-01", "26-12-07", "2026-12-7", "yesterday", "2026-12-07x"] {
            XCTAssertThrowsError(try Habits.markable(bad, in: "UTC", now: now), bad)
        }
    }
}
