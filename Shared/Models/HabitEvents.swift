import Foundation

/// What a habit's target counts: days of a day (once) or days of a week.
public enum HabitPeriod: String, Codable, CaseIterable, Sendable { case day, week }

/// `habit.created`: someone set themselves a habit in their journal. Key: the habit id. Its title stays out of the
/// event, like a story's text.
public struct HabitCreated: EventPayload, Equatable {
    public static let type = "habit.created"
    public static let schema = EventSchema(["target": .described("Days per `per` the habit asks for (1 for a daily habit, 1 to 7 a week)")])
    public var habitId: UUID
    public var userId: UUID
    public var target: Int
    public var per: HabitPeriod
    public var createdAt: Date

    public init(habitId: UUID, userId: UUID, target: Int, per: HabitPeriod, createdAt: Date) {
        self.habitId = habitId; self.userId = userId; self.target = target; self.per = per; self.createdAt = createdAt
    }
}

/// `habit.updated`: a habit was renamed, given another target or time zone, or shared with a group or no longer.
/// Key: the habit id.
public struct HabitUpdated: EventPayload, Equatable {
    public static let type = "habit.updated"
    public static let schema = EventSchema(["sharedGroupIds": .described("The groups whose newsletter shows the habit's streak")])
    public var habitId: UUID
    public var userId: UUID
    public var target: Int
    public var per: HabitPeriod
    public var sharedGroupIds: [UUID]
    public var updatedAt: Date

    public init(habitId: UUID, userId: UUID, target: Int, per: HabitPeriod, sharedGroupIds: [UUID], updatedAt: Date) {
        self.habitId = habitId; self.userId = userId; self.target = target; self.per = per; self.sharedGroupIds = sharedGroupIds
        self.updatedAt = updatedAt
    }
}

/// `habit.day_marked`: a day of a habit was marked done (`done`), or no longer. Key: the habit id.
public struct HabitDayMarked: EventPayload, Equatable {
    public static let type = "habit.day_marked"
    public static let schema = EventSchema([
        "date": .init(pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", description: "The day, in the habit's time zone"),
        "storyId": .init(nullable: true, description: "The story it was done with, one its owner wrote"),
    ])
    public var habitId: UUID
    public var userId: UUID
    public var date: String
    public var done: Bool
    public var storyId: UUID?
    public var markedAt: Date

    public init(habitId: UUID, userId: UUID, date: String, done: Bool, storyId: UUID?, markedAt: Date) {
        self.habitId = habitId; self.userId = userId; self.date = date; self.done = done; self.storyId = storyId; self.markedAt = markedAt
    }
}

/// `habit.deleted`: someone deleted a habit, with its days. Key: the habit id.
public struct HabitDeleted: EventPayload, Equatable {
    public static let type = "habit.deleted"
    public var habitId: UUID
    public var userId: UUID
    public var deletedAt: Date

    public init(habitId: UUID, userId: UUID, deletedAt: Date) {
        self.habitId = habitId; self.userId = userId; self.deletedAt = deletedAt
    }
}
