import Events
import Features
import Foundation
import Models
import Postgres
import Web

// MARK: - The streak rules

/// What a habit asks: done on `count` days of each `per` (a day asks for once: a day is done or not).
struct HabitTarget: Equatable, Sendable {
    let count: Int
    let per: HabitPeriod

    /// Days of a week a weekly habit may ask for.
    static let weekly = 1...7
}

/// A habit's streaks, over the days it was done: consecutive days for a daily habit, consecutive weeks (Monday to
/// Sunday) that had `count` days done for a weekly one. The current streak ends with today's day or week, or with the
/// one before while today's is still open.
enum HabitStreaks {
    /// The Monday-to-Sunday week of a day number (day 0, 1970-01-01, was a Thursday).
    static func week(_ day: Int) -> Int { CivilDay.floorDiv(day + 3, 7) }

    /// The current and longest streak of a habit with `target`, done on `days` (day numbers), as of the day `today`.
    /// Days after `today` do not count.
    static func streaks(days: [Int], target: HabitTarget, today: Int) -> (current: Int, longest: Int) {
        let done = Set(days.filter { $0 <= today })
        switch target.per {
        case .day:
            return runs(of: done, last: today)
        case .week:
            var perWeek: [Int: Int] = [:]
            for d in done { perWeek[week(d), default: 0] += 1 }
            return runs(of: Set(perWeek.filter { $0.value >= target.count }.keys), last: week(today))
        }
    }

    /// The run of consecutive units ending at `last` (or at the one before, while `last` is not met yet), and the
    /// longest run.
    static func runs(of met: Set<Int>, last: Int) -> (current: Int, longest: Int) {
        var longest = 0, run = 0, previous: Int?
        for unit in met.sorted() {
            run = previous == unit - 1 ? run + 1 : 1
            longest = max(longest, run)
            previous = unit
        }
        var unit = met.contains(last) ? last : last - 1
        var current = 0
        while met.contains(unit) { current += 1; unit -= 1 }
        return (current, longest)
    }
}

extension CivilDay {
    /// `YYYY-MM-DD` of a day number.
    static func text(_ n: Int) -> String {
        let (y, m, d) = civil(n)
        return String(format: "%04d-%02d-%02d", y, m, d)
    }
}

// MARK: - The habit rules

/// What the habit rules refuse.
enum HabitError: DomainError, Equatable {
    /// No such habit of the caller's, or no such group the caller is in.
    case notFound
    /// A value the rules do not take (the message says why).
    case invalid(String, field: String)
    /// Too many of something, or a journal where a group is needed.
    case conflict(String)

    var refusal: Refusal {
        switch self {
        case .notFound: return .notFound
        case .invalid: return .invalid
        case .conflict: return .conflict
        }
    }

    var message: String {
        switch self {
        case .notFound: return "Not found."
        case .invalid(let message, _): return message
        case .conflict(let message): return message
        }
    }

    var field: String? {
        if case .invalid(_, let field) = self { return field }
        return nil
    }
}

/// The habit rules: a person's habits (goals of a number of days a day or a week), the days they did them (alone or
/// with a story of theirs), their streaks, and the groups a person shares a habit's streak with. Only its owner sees
/// or changes a habit (anyone else gets `notFound`); each change is an event. Handlers call them in a transaction.
struct Habits: Sendable {
    let storage: HabitStorage
    let groups: Groups
    let outbox: Outbox

    /// Habits a person may keep at once.
    static let maxHabits = 50
    /// Groups a habit may be shared with.
    static let maxShares = 20
    /// How far back a day may be marked (or unmarked).
    static let reach = 366

    /// `name` if it is a time zone for a habit's days: an IANA name (or UTC), kept as given.
    static func zone(_ name: String, field: String) throws -> String {
        guard name.count <= 64, name.contains("/") || name == "UTC", TimeZone(identifier: name) != nil else {
            throw HabitError.invalid("timeZone must be an IANA time zone such as Europe/Berlin.", field: field)
        }
        return name
    }

    /// A target the rules take: once a day, or 1 to 7 days a week.
    static func target(count: Int, per: HabitPeriod) throws -> HabitTarget {
        switch per {
        case .day where count != 1:
            throw HabitError.invalid("A daily habit is done once a day: set target 1, or per week for several days a week.", field: "target")
        case .week where !HabitTarget.weekly.contains(count):
            throw HabitError.invalid("A weekly habit asks for 1 to 7 days a week.", field: "target")
        default:
            return HabitTarget(count: count, per: per)
        }
    }

    /// Today's day number in the habit's time zone.
    static func today(_ habit: HabitRecord, now: Date = Date()) -> Int { today(in: habit.timeZone, now: now) }

    static func today(in zone: String, now: Date = Date()) -> Int {
        CivilDay.number(LocalDay.of(now, in: TimeZone(identifier: zone) ?? TimeZone(identifier: "UTC")!)) ?? 0
    }

    /// The habit if `user` owns it; `notFound` otherwise.
    func owned(_ c: Connection, _ id: UUID, by user: UUID) throws -> HabitRecord {
        guard let habit = try storage.habit(c, id, owner: user) else { throw HabitError.notFound }
        return habit
    }

    func create(_ c: Connection, by user: UUID, title: String, target: HabitTarget, timeZone: String) throws -> HabitRecord {
        try storage.lockHabits(c, of: user)
        guard try storage.count(c, owner: user) < Self.maxHabits else {
            throw HabitError.conflict("You keep \(Self.maxHabits) habits already: delete one first.")
        }
        let habit = try storage.insert(c, owner: user, title: title, target: target, timeZone: timeZone)
        try outbox.add(HabitCreated(habitId: habit.id, userId: user, target: target.count, per: target.per, createdAt: habit.createdAt),
                       subject: habit.id.lowercased, on: c)
        return habit
    }

    func update(_ c: Connection, _ id: UUID, by user: UUID, title: String?, target: (count: Int?, per: HabitPeriod?),
                timeZone: String?) throws -> HabitRecord {
        var habit = try owned(c, id, by: user)
        if let title { habit.title = title }
        if target.count != nil || target.per != nil {
            habit.target = try Self.target(count: target.count ?? habit.target.count, per: target.per ?? habit.target.per)
        }
        if let timeZone { habit.timeZone = timeZone }
        try storage.update(c, habit)
        return try changed(c, id, by: user)
    }

    func delete(_ c: Connection, _ id: UUID, by user: UUID) throws {
        _ = try owned(c, id, by: user)
        try storage.delete(c, id)
        try outbox.add(HabitDeleted(habitId: id, userId: user, deletedAt: Date()), subject: id.lowercased, on: c)
    }

    /// The day number of `text`, a day of the habit's that may be marked: a date that exists, not after today in the
    /// habit's time zone, at most `reach` days before.
    static func markable(_ text: String, in zone: String, now: Date = Date()) throws -> Int {
        guard text.count == 10, let day = CivilDay.number(text) else {
            throw HabitError.invalid("The day must be a date that exists, YYYY-MM-DD.", field: "date")
        }
        let today = today(in: zone, now: now)
        guard day <= today else { throw HabitError.invalid("The day is still ahead in \(zone).", field: "date") }
        guard today - day <= reach else { throw HabitError.invalid("A day more than a year ago cannot be marked.", field: "date") }
        return day
    }

    /// Marks `date` done (once, whatever the repeats), with `story` (one `user` wrote) when given; a repeat without
    /// a story keeps the story it had.
    func mark(_ c: Connection, _ id: UUID, by user: UUID, date: String, story: UUID?) throws -> HabitRecord {
        let habit = try owned(c, id, by: user)
        let day = try Self.markable(date, in: habit.timeZone)
        if let story, try !storage.isAuthor(c, user, of: story) {
            throw HabitError.invalid("storyId is not a story you wrote.", field: "storyId")
        }
        let text = CivilDay.text(day)
        guard try storage.mark(c, id, day: text, story: story) else { return habit }
        try outbox.add(HabitDayMarked(habitId: id, userId: user, date: text, done: true, storyId: story, markedAt: Date()),
                       subject: id.lowercased, on: c)
        return try changed(c, id, by: user, event: false)
    }

    /// The day is not done (whether or not it was).
    func unmark(_ c: Connection, _ id: UUID, by user: UUID, date: String) throws {
        let habit = try owned(c, id, by: user)
        let text = CivilDay.text(try Self.markable(date, in: habit.timeZone))
        guard try storage.unmark(c, id, day: text) else { return }
        try storage.touch(c, id)
        try outbox.add(HabitDayMarked(habitId: id, userId: user, date: text, done: false, storyId: nil, markedAt: Date()),
                       subject: id.lowercased, on: c)
    }

    /// The habit's streak shows in `group`'s newsletter: a group (not a journal) `user` is in; `notFound` otherwise.
    func share(_ c: Connection, _ id: UUID, with group: UUID, by user: UUID) throws -> HabitRecord {
        let habit = try owned(c, id, by: user)
        let g: GroupRecord
        do { g = try groups.member(c, group, user) } catch StoriesError.notFound { throw HabitError.notFound }
        guard g.kind == .group else { throw HabitError.conflict("A journal has no newsletter to share a habit in.") }
        if habit.sharedGroupIds.contains(group) { return habit }
        guard habit.sharedGroupIds.count < Self.maxShares else {
            throw HabitError.conflict("A habit is shared with \(Self.maxShares) groups at most.")
        }
        try storage.share(c, id, with: group)
        return try changed(c, id, by: user)
    }

    /// The habit's streak no longer shows in `group`'s newsletter (whether or not it did).
    func unshare(_ c: Connection, _ id: UUID, from group: UUID, by user: UUID) throws {
        let habit = try owned(c, id, by: user)
        guard habit.sharedGroupIds.contains(group) else { return }
        try storage.unshare(c, id, from: group)
        _ = try changed(c, id, by: user)
    }

    /// The habit after a change: its time stamped, and `habit.updated` (unless the change has an event of its own).
    private func changed(_ c: Connection, _ id: UUID, by user: UUID, event: Bool = true) throws -> HabitRecord {
        try storage.touch(c, id)
        let habit = try owned(c, id, by: user)
        if event {
            try outbox.add(HabitUpdated(habitId: id, userId: user, target: habit.target.count, per: habit.target.per,
                                        sharedGroupIds: habit.sharedGroupIds, updatedAt: habit.updatedAt),
                           subject: id.lowercased, on: c)
        }
        return habit
    }

    // MARK: In the newsletter

    /// The habits members of `group` share with it, each with its days done in [from, to) (as the group's time zone
    /// dates them) and its streaks as of the period's last day, or today while the period is open.
    func shared(_ c: Connection, group: GroupRecord, from: Date, to: Date, now: Date = Date()) throws -> [NewsletterDocument.Habit] {
        let zone = TimeZone(identifier: group.schedule.timeZone) ?? TimeZone(identifier: "UTC")!
        guard let first = CivilDay.number(LocalDay.of(from, in: zone)),
              let last = CivilDay.number(LocalDay.of(min(now, to.addingTimeInterval(-1)), in: zone)) else { return [] }
        return try storage.shared(c, in: group.id).map { habit in
            let days = habit.days.compactMap(CivilDay.number)
            let asOf = Self.today(habit, now: min(now, to.addingTimeInterval(-1)))
            let streaks = HabitStreaks.streaks(days: days, target: habit.target, today: asOf)
            return NewsletterDocument.Habit(id: habit.id.lowercased, memberId: habit.ownerId.lowercased, title: habit.title,
                                            target: habit.target.count, per: habit.target.per.rawValue,
                                            daysDone: days.filter { $0 >= first && $0 <= last }.count,
                                            currentStreak: streaks.current, longestStreak: streaks.longest)
        }
    }
}
