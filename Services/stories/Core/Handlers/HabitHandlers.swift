import Features
import Foundation
import HTTP
import Models
import Postgres
import Web

extension StoriesHandlers {
    var habits: Habits { Habits(storage: HabitStorage(), groups: groups, outbox: outbox) }

    /// `POST /v1/habits`: a habit of mine.
    func createHabit(_ context: Context<Caller>, _ body: CreateHabitBody, _ c: Connection) throws -> Response {
        let per = HabitPeriod(rawValue: body.per) ?? .day
        let target = try Habits.target(count: body.target ?? 1, per: per)
        let zone = try Habits.zone(body.timeZone ?? "UTC", field: "timeZone")
        let habit = try habits.create(c, by: context.caller.userId, title: body.title, target: target, timeZone: zone)
        return .json(HabitView(habit), status: 201)
    }

    /// `GET /v1/habits`: my habits, oldest first, each with its streaks.
    func listHabits(_ context: Context<Caller>) throws -> Response {
        let list = try pool.withConnection { try habits.storage.habits($0, owner: context.caller.userId) }
        return .json(ItemList(list.map { HabitView($0) }))
    }

    func getHabit(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return .json(HabitView(try pool.withConnection { try habits.owned($0, id, by: context.caller.userId) }))
    }

    func updateHabit(_ context: Context<Caller>, _ body: UpdateHabitBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let zone = try body.timeZone.map { try Habits.zone($0, field: "timeZone") }
        let habit = try pool.withTransaction { c in
            try habits.update(c, id, by: context.caller.userId, title: body.title,
                              target: (body.target, body.per.flatMap(HabitPeriod.init(rawValue:))), timeZone: zone)
        }
        return .json(HabitView(habit))
    }

    func deleteHabit(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        try pool.withTransaction { try habits.delete($0, id, by: context.caller.userId) }
        return .noContent
    }

    /// `PUT /v1/habits/{id}/days/{date}`: the day is done (once, however often it is sent).
    func markHabitDay(_ context: Context<Caller>, _ body: MarkDayBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let date = try context.parameters.require("date", as: String.self)
        let habit = try pool.withTransaction { c in
            try habits.mark(c, id, by: context.caller.userId, date: date, story: body.storyId)
        }
        return .json(HabitView(habit))
    }

    func unmarkHabitDay(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let date = try context.parameters.require("date", as: String.self)
        try pool.withTransaction { try habits.unmark($0, id, by: context.caller.userId, date: date) }
        return .noContent
    }

    /// `GET /v1/habits/{id}/calendar?month=YYYY-MM`: the days done in a month (this month in the habit's time zone by
    /// default), and the streaks.
    func habitCalendar(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withConnection { c in
            let habit = try habits.owned(c, id, by: context.caller.userId)
            let view = HabitView(habit)
            let month = context.request.query["month"] ?? String(view.today.prefix(7))
            guard month.count == 7, let first = CivilDay.number(month + "-01") else {
                throw HTTPError.validation("month must be a month, YYYY-MM.", field: "month")
            }
            // No habit has days a century away, and PostgreSQL has no year 0.
            guard abs(first - Habits.today(habit)) <= 36_525 else {
                throw HTTPError.validation("month must be within a hundred years of today.", field: "month")
            }
            let (y, m, _) = CivilDay.civil(first)
            let last = first + CivilDay.daysInMonth(year: y, month: m) - 1
            let days = try habits.storage.days(c, id, from: CivilDay.text(first), to: CivilDay.text(last))
            return .json(HabitCalendarView(habit: view, month: month, days: days.map(HabitDayView.init)))
        }
    }

    /// `PUT /v1/habits/{id}/shares/{groupId}`: the habit's streak shows in that group's newsletter.
    func shareHabit(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let group = try context.parameters.require("groupId", as: UUID.self)
        let habit = try pool.withTransaction { try habits.share($0, id, with: group, by: context.caller.userId) }
        return .json(HabitView(habit))
    }

    func unshareHabit(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let group = try context.parameters.require("groupId", as: UUID.self)
        try pool.withTransaction { try habits.unshare($0, id, from: group, by: context.caller.userId) }
        return .noContent
    }
}

extension Newsletters {
    var habits: Habits { Habits(storage: HabitStorage(), groups: Groups(storage: storage, outbox: outbox), outbox: outbox) }
}
