import Foundation
@testable import DispatchCore
import XCTest

/// The weeks statements and payouts are read by: ISO 8601, Monday to Monday in UTC, across year ends.
final class ISOWeekTests: XCTestCase {
    func date(_ text: String) -> Date { ISO8601DateFormatter().date(from: text)! }

    func testAWeekRunsFromItsMondayToTheNextInUTC() throws {
        let week = try XCTUnwrap(ISOWeek("2026-W49"))
        XCTAssertEqual(week.start, date("2026-11-30T00:00:00Z"))
        XCTAssertEqual(week.end, date("2026-12-07T00:00:00Z"))
        XCTAssertEqual(week.name, "2026-W49")
        XCTAssertEqual(ISOWeek(containing: date("2026-12-06T23:59:59Z")), week, "Sunday night is still the week")
        XCTAssertEqual(ISOWeek(containing: date("2026-12-07T00:00:00Z")).name, "2026-W50")
    }

    func testTheFirstWeekOfAYearMayStartInTheYearBefore() throws {
        XCTAssertEqual(ISOWeek("2026-W01")?.start, date("2025-12-29T00:00:00Z"))
        XCTAssertEqual(ISOWeek(containing: date("2027-01-01T12:00:00Z")).name, "2026-W53", "2026 has 53 weeks")
        XCTAssertEqual(ISOWeek("2020-W53")?.start, date("2020-12-28T00:00:00Z"))
    }

    func testWhatIsNotAWeekIsRefused() {
        for bad in ["2021-W53", "2026-W00", "2026-W54", "2026-49", "2026-w49", "2026-W4", "26-W01", "2026-W049", "２０２６-W01", "", "2026-W4a"] {
            XCTAssertNil(ISOWeek(bad), bad)
        }
    }
}
