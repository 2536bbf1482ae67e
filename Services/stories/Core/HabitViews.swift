import Foundation
import Models
import Web

// What the habit routes take and answer: each body and view described once.

// MARK: - Bodies

let habitTitleSchema = Schema.text(max: 100)
let habitPerSchema = Schema.oneOf(HabitPeriod.allCases.map(\.rawValue))

struct CreateHabitBody: RequestBody {
    /// `target` days a `per` (1 by default; a daily habit asks for 1); days dated in `timeZone` (UTC by default).
    static let schema = Schema.object([
        "title": .required(habitTitleSchema), "per": .required(habitPerSchema),
        "target": .optional(.integer(1...7)), "timeZone": .optional(.string(max: 64)),
    ])
    let title: String
    let per: String
    let target: Int?
    let timeZone: String?
}

struct UpdateHabitBody: RequestBody {
    /// Only the fields given change.
    static let schema = Schema.object([
        "title": .absentOrValue(habitTitleSchema), "per": .absentOrValue(habitPerSchema),
        "target": .absentOrValue(.integer(1...7)), "timeZone": .absentOrValue(.string(max: 64)),
    ])
    let title: String?
    let per: String?
    let target: Int?
    let timeZone: String?
}

struct MarkDayBody: RequestBody {
    /// `{}` marks the day alone; `storyId` names a story of the caller's it was done with.
    static let schema = Schema.object(["storyId": .optional(.uuid)])
    let storyId: UUID?
}

// MARK: - Views

/// A habit with its streaks as of today in its time zone.
struct HabitView: View {
    let habit: HabitRecord
    let today: String
    let doneToday: Bool
    let currentStreak: Int
    let longestStreak: Int

    init(_ habit: HabitRecord, now: Date = Date()) {
        self.habit = habit
        let day = Habits.today(habit, now: now)
        today = CivilDay.text(day)
        doneToday = habit.days.contains(today)
        let streaks = HabitStreaks.streaks(days: habit.days.compactMap(CivilDay.number), target: habit.target, today: day)
        currentStreak = streaks.current; longestStreak = streaks.longest
    }

    static let fields: [ViewField<Self>] = [
        .field("id", \.habit.id), .field("title", \.habit.title, habitTitleSchema),
        .field("target", \.habit.target.count, .integer(1...7)), .field("per", \.habit.target.per.rawValue, habitPerSchema),
        .field("timeZone", \.habit.timeZone), .field("today", \.today, Shapes.day), .field("doneToday", \.doneToday),
        .field("currentStreak", \.currentStreak, .integer(0...Int.max)), .field("longestStreak", \.longestStreak, .integer(0...Int.max)),
        .field("sharedGroupIds", \.habit.sharedGroupIds), .field("createdAt", \.habit.createdAt), .field("updatedAt", \.habit.updatedAt),
    ]
}

/// A day a habit was done.
struct HabitDayView: View {
    let day: HabitDayRecord
    static let fields: [ViewField<Self>] = [.field("date", \.day.date, Shapes.day), .nullable("storyId", \.day.storyId)]
}

/// A habit's month: the days it was done, and its streaks (in days or weeks, as its `per`).
struct HabitCalendarView: View {
    let habit: HabitView
    let month: String
    let days: [HabitDayView]

    static let fields: [ViewField<Self>] = [
        .field("habitId", \.habit.habit.id), .field("month", \.month, .string(pattern: "^[0-9]{4}-[0-9]{2}$")),
        .field("timeZone", \.habit.habit.timeZone), .field("per", \.habit.habit.target.per.rawValue, habitPerSchema),
        .field("target", \.habit.habit.target.count, .integer(1...7)),
        .field("days", \.days), .field("currentStreak", \.habit.currentStreak, .integer(0...Int.max)),
        .field("longestStreak", \.habit.longestStreak, .integer(0...Int.max)),
    ]
}

extension NewsletterDocument {
    /// A habit a member shares with the group: its days done in the period, and its streaks (in days or weeks, as
    /// its `per`) as of the period's last day.
    struct Habit: Decodable, Equatable, View {
        let id: String
        let memberId: String
        let title: String
        let target: Int
        let per: String
        let daysDone: Int
        let currentStreak: Int
        let longestStreak: Int
        static let fields: [ViewField<Self>] = [
            .field("id", \.id, .uuid), .field("memberId", \.memberId, .uuid), .field("title", \.title),
            .field("target", \.target, .integer(1...7)), .field("per", \.per, habitPerSchema),
            .field("daysDone", \.daysDone, .integer(0...Int.max)), .field("currentStreak", \.currentStreak, .integer(0...Int.max)),
            .field("longestStreak", \.longestStreak, .integer(0...Int.max)),
        ]
    }
}
