import Features
import Foundation
import HTTP
import Models
import Postgres
import Web

extension StoriesHandlers {
    func newsletter(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let from = try Self.time(context.request, "from"), to = try Self.time(context.request, "to")
        let format = context.request.query["format"] ?? "json"
        guard format == "json" || format == "html" else { throw HTTPError.validation("format must be json or html.", field: "format") }
        return try pool.withConnection { c in
            let group = try groups.member(c, id, context.caller.userId)
            let schedule = try Newsletters.schedule(group)
            let current = schedule.period(containing: Date())
            let start = from ?? (to.map { schedule.period(containing: $0.addingTimeInterval(-1)).start } ?? current.start)
            let end = to ?? (from.map { schedule.nextClose(after: $0) } ?? current.end)
            guard start < end else { throw HTTPError.validation("from must be before to.", field: "from") }
            guard end.timeIntervalSince(start) <= 93 * 86_400 else {
                throw HTTPError.validation("A newsletter covers at most 93 days.", field: "to")
            }
            let doc = try newsletters.read(c, group: group, from: start, to: end).without(try storage.hiddenAuthors(c, of: context.caller.userId))
            if format == "html" { return Self.html(doc.signed(media, lifetime: MediaURLs.mailLifetime)) }
            return .json(doc.signed(media, lifetime: MediaURLs.appLifetime))
        }
    }

    func listNewsletters(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let page = try Page(context.request)
        let before = try page.after.map { values -> Int64 in
            guard values.count == 1, let v = Int64(values[0]) else { throw HTTPError.validation("cursor is not valid.", field: "cursor") }
            return v
        }
        return try pool.withConnection { c in
            _ = try groups.member(c, id, context.caller.userId)
            let list = try storage.newsletters(c, group: id, before: before, limit: page.limit + 1)
            return .json(PageResponse(list, page, item: { n in
                NewsletterSummaryView(id: n.id, periodStart: n.periodStart, periodEnd: n.periodEnd, storyCount: n.storyCount,
                                      compiledAt: n.compiledAt)
            }, cursor: { [String($0.endMicros)] }))
        }
    }

    func storedNewsletter(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let newsletterId = try context.parameters.require("newsletterId", as: UUID.self)
        return try pool.withConnection { c in
            _ = try groups.member(c, id, context.caller.userId)
            guard let content = try storage.storedNewsletter(c, group: id, id: newsletterId) else { throw StoriesError.notFound }
            guard var doc = try? JSONDecoder().decode(NewsletterDocument.self, from: Data(content.utf8)) else {
                return Response(status: 200, headers: [("Content-Type", "application/json")], body: Array(content.utf8))
            }
            doc = doc.without(try storage.hiddenAuthors(c, of: context.caller.userId))
            if context.request.query["format"] == "html" { return Self.html(doc.signed(media, lifetime: MediaURLs.mailLifetime)) }
            return .json(doc.signed(media, lifetime: MediaURLs.appLifetime))
        }
    }

    /// `GET /v1/internal/newsletters/{newsletterId}/copies/{userId}` (services): a stored newsletter as a member sees it
    /// (the authors they hid left out), ready to mail: `{subject, text, html}`, the photos by URLs signed for weeks.
    /// 404 for one who is no longer a member of its group.
    func newsletterCopy(_ context: Context<Void>) throws -> Response {
        let id = try context.parameters.require("newsletterId", as: UUID.self)
        let user = try context.parameters.require("userId", as: UUID.self)
        return try pool.withConnection { c in
            guard let (group, content) = try storage.storedNewsletter(c, id: id), try storage.group(c, group, reader: user)?.role != nil,
                  let doc = try? JSONDecoder().decode(NewsletterDocument.self, from: Data(content.utf8)) else { throw StoriesError.notFound }
            let mine = doc.without(try storage.hiddenAuthors(c, of: user)).signed(media, lifetime: MediaURLs.mailLifetime)
            return .json(NewsletterCopyView(subject: "\(doc.groupName): the newsletter to \(doc.period.to.prefix(10))",
                                            text: NewsletterHTML.text(mine), html: NewsletterHTML.render(mine)))
        }
    }

    /// The e-mail-ready page: its photos load by their signed URLs, for weeks, in any mail client.
    static func html(_ doc: NewsletterDocument) -> Response {
        .text(NewsletterHTML.render(doc), contentType: "text/html; charset=utf-8")
    }

    func calendar(_ context: Context<Caller>) throws -> Response {
        let zoneName = context.request.query["timeZone"] ?? "UTC"
        guard zoneName.count <= 64, let zone = TimeZone(identifier: zoneName), zoneName.contains("/") || zoneName == "UTC" else {
            throw HTTPError.validation("timeZone must be an IANA time zone such as Europe/Berlin.", field: "timeZone")
        }
        let today = LocalDay.of(Date(), in: zone)
        let from = context.request.query["from"] ?? String(today.prefix(8)) + "01"
        let to = context.request.query["to"] ?? today
        guard let f = LocalDay.ordinal(from), from.count == 10 else { throw HTTPError.validation("from must be a date YYYY-MM-DD.", field: "from") }
        guard let t = LocalDay.ordinal(to), to.count == 10 else { throw HTTPError.validation("to must be a date YYYY-MM-DD.", field: "to") }
        guard f <= t, t - f <= 366 else { throw HTTPError.validation("from must be before to, at most a year apart.", field: "from") }
        let days = try pool.withConnection { try storage.postingDays($0, user: context.caller.userId, zone: zone.identifier) }
        let streaks = LocalDay.streaks(days: days, today: today)
        return .json(CalendarView(timeZone: zone.identifier, from: from, to: to,
                                  days: days.filter { (LocalDay.ordinal($0) ?? -1) >= f && (LocalDay.ordinal($0) ?? Int.max) <= t },
                                  currentStreak: streaks.current, longestStreak: streaks.longest))
    }
}
