import Foundation
import Models

/// When a group's newsletter periods close: every day, or every week on one weekday, at a local hour in an
/// IANA time zone. A period runs from one close to the next, so its length follows daylight-saving changes.
public struct NewsletterSchedule: Sendable, Equatable {
    /// `daily` or `weekly`.
    public var frequency: String
    /// ISO weekday a weekly period closes on: 1 Monday … 7 Sunday.
    public var weekday: Int
    /// The local hour a period closes at (0–23).
    public var hour: Int
    /// The IANA time zone.
    public var timeZone: TimeZone

    public init(frequency: String, weekday: Int, hour: Int, timeZone: TimeZone) {
        self.frequency = frequency; self.weekday = weekday; self.hour = hour; self.timeZone = timeZone
    }

    private var calendar: Calendar {
        var c = Calendar(identifier: .gregorian)
        c.timeZone = timeZone
        return c
    }

    private var closing: DateComponents {
        var d = DateComponents(hour: hour, minute: 0, second: 0)
        if frequency == "weekly" { d.weekday = weekday % 7 + 1 }  // Calendar counts 1 = Sunday
        return d
    }

    /// The first close strictly after `date`. A close hour skipped by a daylight-saving jump falls on the next
    /// existing time; one repeated by a fall-back counts once (the first).
    public func nextClose(after date: Date) -> Date {
        calendar.nextDate(after: date, matching: closing, matchingPolicy: .nextTime, repeatedTimePolicy: .first) ?? date
    }

    /// The last close at or before `date`.
    public func previousClose(atOrBefore date: Date) -> Date { period(containing: date).start }

    /// The period that contains `date`: [previous close, next close).
    public func period(containing date: Date) -> (start: Date, end: Date) {
        let next = nextClose(after: date)
        let back = calendar.nextDate(after: next, matching: closing, matchingPolicy: .nextTime, repeatedTimePolicy: .first,
                                     direction: .backward) ?? date
        return (back <= date ? back : date, next)
    }

    /// The local calendar date of `date`, as `YYYY-MM-DD`.
    public func localDay(_ date: Date) -> String { LocalDay.of(date, in: timeZone) }

    /// When the members who have not posted are reminded of the period closing at `close`: a day before a weekly
    /// period closes, three hours before a daily one; when that falls in the night of the group's time zone (22:00 to
    /// 08:00), at 21:00 the evening before instead.
    public func reminder(before close: Date) -> Date {
        let time = close.addingTimeInterval(frequency == "weekly" ? -86_400 : -3 * 3600)
        let hour = calendar.component(.hour, from: time)
        guard hour >= 22 || hour < 8 else { return time }
        let evening = calendar.nextDate(after: time, matching: DateComponents(hour: 21, minute: 0, second: 0), matchingPolicy: .nextTime,
                                        direction: .backward)
        return evening ?? time
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
