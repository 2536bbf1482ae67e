import Foundation
import Models

/// When a group's newsletter periods close, at a local hour in an IANA time zone: every day; every week on one
/// weekday; every `count` days or weeks from `startDate` (a period closes on that date, and every `count` days or weeks
/// before and after it); or monthly on `dayOfMonth`, on the month's last day when it is shorter (31 closes on 28 or 29
/// February, 30 April). A period runs from one close to the next, so its length follows daylight-saving changes.
///
/// Daylight saving: a close whose local time a spring-forward skips falls on the first instant after the gap (02:00 or
/// 02:30 skipped in Berlin closes at 03:00 local); one a fall-back repeats closes once, at its first occurrence.
public struct NewsletterSchedule: Sendable, Equatable {
    /// The kinds of schedule, as the API and the `newsletter_frequency` column name them.
    public static let frequencies = ["daily", "weekly", "every_n_days", "every_n_weeks", "monthly"]

    /// One of `frequencies`.
    public var frequency: String
    /// ISO weekday a weekly period closes on: 1 Monday … 7 Sunday.
    public var weekday: Int
    /// The local hour a period closes at (0–23).
    public var hour: Int
    /// The IANA time zone.
    public var timeZone: TimeZone
    /// Days or weeks per period (`every_n_days`, `every_n_weeks`): 1–365.
    public var count: Int?
    /// `YYYY-MM-DD`, a local date a period closes on (`every_n_days`, `every_n_weeks`).
    public var startDate: String?
    /// The day of the month a `monthly` period closes on: 1–31.
    public var dayOfMonth: Int?

    public init(frequency: String, weekday: Int = 7, hour: Int, timeZone: TimeZone, count: Int? = nil, startDate: String? = nil,
                dayOfMonth: Int? = nil) {
        self.frequency = frequency; self.weekday = weekday; self.hour = hour; self.timeZone = timeZone
        self.count = count; self.startDate = startDate; self.dayOfMonth = dayOfMonth
    }

    /// Which local days a period closes on, as day numbers (days since 1970-01-01): every `days` days from `anchor`,
    /// or once a month.
    private enum Rule: Equatable { case every(days: Int, anchor: Int), monthly(day: Int) }

    private var rule: Rule {
        let anchor = startDate.flatMap(CivilDay.number) ?? 0
        switch frequency {
        case "weekly": return .every(days: 7, anchor: (weekday + 3) % 7)  // day 0, 1970-01-01, was a Thursday (ISO 4)
        case "every_n_days": return .every(days: max(1, count ?? 1), anchor: anchor)
        case "every_n_weeks": return .every(days: 7 * max(1, count ?? 1), anchor: anchor)
        case "monthly": return .monthly(day: min(max(1, dayOfMonth ?? 1), 31))
        default: return .every(days: 1, anchor: 0)
        }
    }

    /// The last close day on or before local day `d`.
    private func closeDay(onOrBefore d: Int) -> Int {
        switch rule {
        case .every(let n, let anchor): return anchor + CivilDay.floorDiv(d - anchor, n) * n
        case .monthly(let day):
            let (y, m, _) = CivilDay.civil(d)
            let here = CivilDay.monthly(day, year: y, month: m)
            return here <= d ? here : CivilDay.monthly(day, year: m == 1 ? y - 1 : y, month: m == 1 ? 12 : m - 1)
        }
    }

    /// The first close day on or after local day `d`.
    private func closeDay(onOrAfter d: Int) -> Int {
        switch rule {
        case .every(let n, _):
            let before = closeDay(onOrBefore: d)
            return before == d ? d : before + n
        case .monthly(let day):
            let (y, m, _) = CivilDay.civil(d)
            let here = CivilDay.monthly(day, year: y, month: m)
            return here >= d ? here : CivilDay.monthly(day, year: m == 12 ? y + 1 : y, month: m == 12 ? 1 : m + 1)
        }
    }

    /// The instant of `hour` on local day `day`: the first of two when a fall-back repeats it, the first instant after
    /// the gap when a spring-forward skips it.
    func close(onDay day: Int) -> Date {
        let local = Double(day * 86_400 + hour * 3600)  // the local wall time, counted as if it were UTC
        let before = timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: local - 86_400))
        let after = timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: local + 86_400))
        let valid = Set([before, after]).map { local - Double($0) }.filter {
            Double(timeZone.secondsFromGMT(for: Date(timeIntervalSince1970: $0))) == local - $0
        }
        if let first = valid.min() { return Date(timeIntervalSince1970: first) }
        // Skipped: the gap runs from (local - after) to (local - before) in UTC; its end is the zone's transition.
        let (low, high) = (local - Double(max(before, after)), local - Double(min(before, after)))
        if let jump = timeZone.nextDaylightSavingTimeTransition(after: Date(timeIntervalSince1970: low)),
           jump.timeIntervalSince1970 <= high {
            return jump
        }
        return Date(timeIntervalSince1970: high)
    }

    /// The local day number of `date`.
    private func dayNumber(_ date: Date) -> Int {
        CivilDay.floorDiv(Int(date.timeIntervalSince1970.rounded(.down)) + timeZone.secondsFromGMT(for: date), 86_400)
    }

    /// The first close strictly after `date`.
    public func nextClose(after date: Date) -> Date {
        var day = closeDay(onOrAfter: dayNumber(date) - 1)
        while close(onDay: day) <= date { day = closeDay(onOrAfter: day + 1) }
        return close(onDay: day)
    }

    /// The last close at or before `date`.
    public func previousClose(atOrBefore date: Date) -> Date {
        var day = closeDay(onOrBefore: dayNumber(date) + 1)
        while close(onDay: day) > date { day = closeDay(onOrBefore: day - 1) }
        return close(onDay: day)
    }

    /// The period that contains `date`: [previous close, next close). The one place periods are computed: the
    /// newsletter compiles them, the reminders come before their ends, the group view shows the current one.
    public func period(containing date: Date) -> (start: Date, end: Date) {
        (previousClose(atOrBefore: date), nextClose(after: date))
    }

    /// The local calendar date of `date`, as `YYYY-MM-DD`.
    public func localDay(_ date: Date) -> String { LocalDay.of(date, in: timeZone) }

    private var calendar: Calendar {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = timeZone
        return c
    }

    /// When the members who have not posted are reminded of the period closing at `close`: three hours before a
    /// daily period closes, a day before any longer one; when that falls in the night of the group's time zone (22:00
    /// to 08:00), at 21:00 the evening before instead.
    public func reminder(before close: Date) -> Date {
        var daily: Bool { if case .every(days: 1, _) = rule { return true } else { return false } }
        let time = close.addingTimeInterval(daily ? -3 * 3600 : -86_400)
        let hour = calendar.component(.hour, from: time)
        guard hour >= 22 || hour < 8 else { return time }
        let evening = calendar.nextDate(after: time, matching: DateComponents(hour: 21, minute: 0, second: 0), matchingPolicy: .nextTime,
                                        direction: .backward)
        return evening ?? time
    }
}

/// Proleptic Gregorian dates as day numbers (days since 1970-01-01), without a calendar object (H. Hinnant's
/// algorithms).
public enum CivilDay {
    static func floorDiv(_ a: Int, _ b: Int) -> Int { a >= 0 ? a / b : -((-a + b - 1) / b) }

    /// The day number of year `y`, month `m` (1–12), day `d`.
    public static func number(year y: Int, month m: Int, day d: Int) -> Int {
        let y = m <= 2 ? y - 1 : y
        let era = floorDiv(y, 400)
        let yoe = y - era * 400
        let doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    /// Year, month and day of a day number (the timestamps' own reading of one).
    public static func civil(_ n: Int) -> (year: Int, month: Int, day: Int) { Timestamp.civil(fromDays: n) }

    public static func daysInMonth(year: Int, month: Int) -> Int {
        number(year: month == 12 ? year + 1 : year, month: month == 12 ? 1 : month + 1, day: 1) - number(year: year, month: month, day: 1)
    }

    /// The day number of `day` in the month, or of its last day when the month is shorter.
    static func monthly(_ day: Int, year: Int, month: Int) -> Int {
        number(year: year, month: month, day: min(day, daysInMonth(year: year, month: month)))
    }

    /// The day number of a `YYYY-MM-DD` date that exists (not 2026-02-30), or nil.
    public static func number(_ text: String) -> Int? {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].count == 4, parts[1].count == 2, parts[2].count == 2,
              let y = Int(parts[0]), let m = Int(parts[1]), let d = Int(parts[2]), (1...12).contains(m),
              (1...daysInMonth(year: y, month: m)).contains(d) else { return nil }
        return number(year: y, month: m, day: d)
    }
}

/// Calendar dates in a time zone, and posting streaks over them.
public enum LocalDay {
    /// `YYYY-MM-DD` of `date` in `zone`.
    public static func of(_ date: Date, in zone: TimeZone) -> String {
        let local = Int64((date.timeIntervalSince1970).rounded(.down)) + Int64(zone.secondsFromGMT(for: date))
        return String(Timestamp.format(Date(timeIntervalSince1970: Double(local))).prefix(10))
    }

    /// Days since 1970-01-01 of a `YYYY-MM-DD` string (a zone-free day count), or nil.
    public static func ordinal(_ day: String) -> Int? {
        let parts = day.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 3 else { return nil }
        var c = Calendar(identifier: .gregorian)
        c.timeZone = TimeZone(identifier: "UTC")!
        guard let date = c.date(from: DateComponents(year: parts[0], month: parts[1], day: parts[2])) else { return nil }
        return Int((date.timeIntervalSince1970 / 86_400).rounded(.down))
    }

    /// The current streak (consecutive days ending today, or yesterday while today is still open) and the longest
    /// streak, over the days someone posted.
    public static func streaks(days: [String], today: String) -> (current: Int, longest: Int) {
        let ordinals = Set(days.compactMap(ordinal)).sorted()
        var longest = 0
        var run = 0
        var previous: Int?
        for d in ordinals {
            run = (previous.map { d == $0 + 1 } ?? false) ? run + 1 : 1
            longest = max(longest, run)
            previous = d
        }
        guard let t = ordinal(today) else { return (0, longest) }
        let posted = Set(ordinals)
        var day = posted.contains(t) ? t : t - 1
        var current = 0
        while posted.contains(day) { current += 1; day -= 1 }
        return (current, longest)
    }
}
