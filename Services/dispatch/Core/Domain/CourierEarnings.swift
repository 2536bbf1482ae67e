import Foundation
import HTTP
import Models
import Postgres
import Web

/// What couriers earn: when a courier's part of a parcel ends (delivered at the door, handed over, left at a centre)
/// their share of its price (`rule`) is written to their own ledger, once per parcel, in the transaction of that
/// move. Statements and payouts read that ledger by ISO week (UTC).
struct CourierEarnings: Sendable {
    let rule: EarningsRule

    /// The moves that end a courier's part of a parcel.
    static let delivering: Set<ParcelAction> = [.deliver, .handOver, .leaveAtCentre]

    /// Writes the courier's share of `parcel` (just moved on by `action`), the first time it is delivered.
    func follow(_ c: Connection, _ parcel: ParcelRecord, _ action: ParcelAction) throws {
        guard Self.delivering.contains(action), let courier = parcel.courierId else { return }
        let price = parcel.quote.amountMinor
        try c.execute("""
            INSERT INTO dispatch.courier_earnings (parcel_id, courier_id, price_minor, share_percent, amount_minor, currency)
            VALUES (\(parcel.id), \(courier), \(price), \(rule.sharePercent), \(rule.courierShare(ofMinor: price)), \(parcel.quote.currency))
            ON CONFLICT (parcel_id) DO NOTHING
            """)
    }
}

/// An ISO 8601 week (`2026-W49`), Monday 00:00 UTC to the next Monday.
struct ISOWeek: Equatable {
    let year: Int
    let week: Int
    let start: Date
    var end: Date { start.addingTimeInterval(7 * 86_400) }
    var name: String { String(format: "%04d-W%02d", year, week) }

    private static var calendar: Calendar {
        var calendar = Calendar(identifier: .iso8601)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }

    /// The week `date` falls in.
    init(containing date: Date) {
        let calendar = Self.calendar
        let parts = calendar.dateComponents([.yearForWeekOfYear, .weekOfYear], from: date)
        year = parts.yearForWeekOfYear ?? 1970
        week = parts.weekOfYear ?? 1
        start = calendar.date(from: DateComponents(weekday: 2, weekOfYear: week, yearForWeekOfYear: year)) ?? date
    }

    /// `YYYY-Www`, a week that exists (W53 only in the years that have one); nil otherwise.
    init?(_ text: String) {
        let parts = text.split(separator: "-W", omittingEmptySubsequences: false)
        guard text.utf8.count == 8, parts.count == 2, parts[0].count == 4, parts[1].count == 2,
              parts.allSatisfy({ $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              let year = Int(parts[0]), let week = Int(parts[1]), (1...53).contains(week), year >= 1970,
              let start = Self.calendar.date(from: DateComponents(weekday: 2, weekOfYear: week, yearForWeekOfYear: year))
        else { return nil }
        let found = ISOWeek(containing: start)
        guard found.year == year, found.week == week else { return nil }
        self = found
    }

    /// The `week` query parameter of `request` (default: this week); 400 when it is not a week.
    static func from(_ request: Request, now: Date = Date()) throws -> ISOWeek {
        guard let text = request.query["week"] else { return ISOWeek(containing: now) }
        guard let week = ISOWeek(text) else { throw HTTPError.validation("week must be an ISO week such as 2026-W49.", field: "week") }
        return week
    }

    static let parameter = QueryParameter("week", .string(pattern: "^[0-9]{4}-W[0-9]{2}$"), "The ISO week, UTC (default this week)")
}
