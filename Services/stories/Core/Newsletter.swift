import Foundation
import HTTP
import Models
import Postgres
import ServiceKit

// MARK: - The newsletter document

/// A group's newsletter for one period: every member's stories, grouped by member and local day.
struct NewsletterDocument: Codable {
    struct Period: Codable { let from: String; let to: String; let timeZone: String }
    struct Story: Codable {
        let id: String
        let text: String
        let backgroundColor: String?
        let media: [Media]
        let commentCount: Int
        let createdAt: String
    }
    struct Media: Codable { let id: String; let url: String }
    struct Day: Codable { let date: String; let stories: [Story] }
    struct Member: Codable {
        let id: String
        let fullName: String?
        let avatarMediaId: String?
        /// False for someone who posted in the period and has left since.
        let isMember: Bool
        let days: [Day]
    }
    let groupId: String
    let groupName: String
    let period: Period
    let storyCount: Int
    let members: [Member]
}

extension StoriesStorage {
    /// Builds the newsletter of `group` for [from, to): current members (in joining order, even with nothing
    /// posted) and anyone else who posted in the period.
    func newsletter(_ c: Connection, group: GroupRecord, from: Date, to: Date) throws -> NewsletterDocument {
        let zone = TimeZone(identifier: group.schedule.timeZone) ?? TimeZone(identifier: "UTC")!
        let stories = try c.rows("""
            SELECT s.id, s.author_id, s.text, s.background_color, s.created_at, s.updated_at, \(micros("s.created_at")) AS created_us,
                   (SELECT count(*) FROM stories.comments WHERE story_id = s.id) AS comment_count
            FROM stories.story_groups sg JOIN stories.stories s ON s.id = sg.story_id
            WHERE sg.group_id = $1 AND sg.created_at >= $2 AND sg.created_at < $3
            ORDER BY sg.created_at, sg.story_id LIMIT 10000
            """, [group.id, from, to]).map(StoryRecord.init)
        var media: [UUID: [UUID]] = [:]
        for row in try c.rows("""
            SELECT story_id, media_id FROM stories.story_media WHERE story_id = ANY($1::uuid[]) ORDER BY story_id, position
            """, [uuidArray(stories.map(\.id))]) {
            media[try row["story_id"], default: []].append(try row["media_id"])
        }
        let current = try members(c, of: group.id)
        let memberIds = Set(current.map(\.userId))
        let formerAuthors = Array(Set(stories.map(\.authorId)).subtracting(memberIds)).sorted { $0.uuidString < $1.uuidString }
        var profiles: [UUID: (String?, UUID?)] = [:]
        for row in try c.rows("SELECT user_id, full_name, avatar_media_id FROM stories.profiles WHERE user_id = ANY($1::uuid[])",
                              [uuidArray(formerAuthors)]) {
            profiles[try row["user_id"]] = (try row.decode("full_name"), try row.decode("avatar_media_id"))
        }
        let byAuthor = Dictionary(grouping: stories, by: \.authorId)
        func days(_ author: UUID) -> [NewsletterDocument.Day] {
            let mine = byAuthor[author] ?? []
            var order: [String] = []
            var grouped: [String: [NewsletterDocument.Story]] = [:]
            for s in mine {
                let day = LocalDay.of(s.createdAt, in: zone)
                if grouped[day] == nil { order.append(day) }
                grouped[day, default: []].append(NewsletterDocument.Story(
                    id: s.id.lowercased, text: s.text, backgroundColor: s.backgroundColor,
                    media: (media[s.id] ?? []).map { .init(id: $0.lowercased, url: "/v1/media/\($0.lowercased)") },
                    commentCount: s.commentCount, createdAt: Timestamp.format(s.createdAt)))
            }
            return order.map { .init(date: $0, stories: grouped[$0]!) }
        }
        let people = current.map {
            NewsletterDocument.Member(id: $0.userId.lowercased, fullName: $0.fullName, avatarMediaId: $0.avatarMediaId?.lowercased,
                                      isMember: true, days: days($0.userId))
        } + formerAuthors.map {
            NewsletterDocument.Member(id: $0.lowercased, fullName: profiles[$0]?.0, avatarMediaId: profiles[$0]?.1?.lowercased,
                                      isMember: false, days: days($0))
        }
        return NewsletterDocument(groupId: group.id.lowercased, groupName: group.name,
                                  period: .init(from: Timestamp.format(from), to: Timestamp.format(to), timeZone: zone.identifier),
                                  storyCount: stories.count, members: people)
    }

    /// Groups whose period has closed (or that have no close time yet), locked for this instance alone.
    func dueGroups(_ c: Connection, limit: Int) throws -> [(GroupRecord, Date?)] {
        try c.rows("""
            SELECT \(GroupRecord.columns), NULL AS role, g.newsletter_due_at FROM stories.groups g
            WHERE g.kind = 'group' AND (g.newsletter_due_at IS NULL OR g.newsletter_due_at <= now())
            ORDER BY g.newsletter_due_at NULLS FIRST LIMIT $1 FOR UPDATE SKIP LOCKED
            """, [limit]).map { (try GroupRecord($0), try $0.decode("newsletter_due_at")) }
    }

    func setNewsletterDue(_ c: Connection, group: UUID, at: Date) throws {
        try c.execute("UPDATE stories.groups SET newsletter_due_at = $2 WHERE id = $1", [group, at])
    }

    /// Stores a compiled newsletter; nil when that period was compiled already.
    func storeNewsletter(_ c: Connection, group: UUID, from: Date, to: Date, storyCount: Int, content: String) throws -> (UUID, Date)? {
        guard let row = try c.first("""
            INSERT INTO stories.newsletters (id, group_id, period_start, period_end, story_count, content)
            VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (group_id, period_end) DO NOTHING RETURNING id, compiled_at
            """, [UUID.v7(), group, from, to, storyCount, content]) else { return nil }
        return (try row["id"], try row["compiled_at"])
    }

    func newsletters(_ c: Connection, group: UUID, before: Int64?, limit: Int) throws -> [Row] {
        try c.rows("""
            SELECT id, period_start, period_end, story_count, compiled_at, \(micros("period_end")) AS end_us
            FROM stories.newsletters WHERE group_id = $1 AND ($2::int8 IS NULL OR period_end < \(fromMicros("$2")))
            ORDER BY period_end DESC LIMIT $3
            """, [group, before, limit])
    }

    func storedNewsletter(_ c: Connection, group: UUID, id: UUID) throws -> String? {
        try c.first("SELECT content FROM stories.newsletters WHERE group_id = $1 AND id = $2", [group, id])?["content"]
    }

    /// Every local day on which `user` posted, in `zone`.
    func postingDays(_ c: Connection, user: UUID, zone: String) throws -> [String] {
        try c.rows("""
            SELECT DISTINCT to_char(created_at AT TIME ZONE $2, 'YYYY-MM-DD') AS day FROM stories.stories
            WHERE author_id = $1 ORDER BY day
            """, [user, zone]).map { try $0["day"] }
    }
}

// MARK: - Rendering

enum NewsletterHTML {
    /// A self-contained page (inline styles, no scripts, no external resources but the story photos' own URLs).
    static func render(_ doc: NewsletterDocument) -> String {
        func esc(_ s: String) -> String {
            var out = ""
            for ch in s.unicodeScalars {
                switch ch {
                case "&": out += "&amp;"; case "<": out += "&lt;"; case ">": out += "&gt;"
                case "\"": out += "&quot;"; case "'": out += "&#39;"; case "\n": out += "<br>"
                default: out.unicodeScalars.append(ch)
                }
            }
            return out
        }
        var html = """
            <!DOCTYPE html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
            <title>\(esc(doc.groupName)) newsletter</title></head>
            <body style="margin:0;padding:24px;background:#f6f4f0;font-family:Georgia,serif;color:#222">
            <div style="max-width:640px;margin:0 auto;background:#fff;padding:24px;border-radius:8px">
            <h1 style="margin:0 0 4px;font-size:26px">\(esc(doc.groupName))</h1>
            <p style="margin:0 0 24px;color:#777;font-size:14px">\(esc(String(doc.period.from.prefix(10)))) to \(esc(String(doc.period.to.prefix(10)))) · \(esc(doc.period.timeZone)) · \(doc.storyCount) \(doc.storyCount == 1 ? "story" : "stories")</p>

            """
        for member in doc.members {
            html += "<h2 style=\"font-size:20px;border-bottom:1px solid #eee;padding-bottom:4px\">\(esc(member.fullName ?? "A member"))</h2>\n"
            if member.days.isEmpty {
                html += "<p style=\"color:#999;font-style:italic\">Nothing this time.</p>\n"
            }
            for day in member.days {
                html += "<h3 style=\"font-size:15px;color:#555;margin:16px 0 8px\">\(esc(day.date))</h3>\n"
                for story in day.stories {
                    let background = story.backgroundColor ?? "#FAFAFA"
                    html += "<div style=\"background:\(esc(background));padding:12px 16px;border-radius:6px;margin:0 0 12px\">"
                    html += "<p style=\"margin:0;font-size:16px;line-height:1.5\">\(esc(story.text))</p>"
                    for m in story.media {
                        html += "<img src=\"\(esc(m.url))\" alt=\"\" style=\"max-width:100%;margin-top:8px;border-radius:4px\">"
                    }
                    if story.commentCount > 0 {
                        html += "<p style=\"margin:8px 0 0;font-size:12px;color:#666\">\(story.commentCount) comment\(story.commentCount == 1 ? "" : "s")</p>"
                    }
                    html += "</div>\n"
                }
            }
        }
        html += "</div></body></html>\n"
        return html
    }
}

// MARK: - Handlers

extension StoriesHandlers {
    func newsletter(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        let from = try Self.time(request, "from"), to = try Self.time(request, "to")
        let format = request.query["format"] ?? "json"
        guard format == "json" || format == "html" else { throw HTTPError.validation("format must be json or html.", field: "format") }
        return try pool.withConnection { c in
            let group = try requireMember(c, id, caller)
            let schedule = try Self.newsletterSchedule(group)
            let current = schedule.period(containing: Date())
            let start = from ?? (to.map { schedule.period(containing: $0.addingTimeInterval(-1)).start } ?? current.start)
            let end = to ?? (from.map { schedule.nextClose(after: $0) } ?? current.end)
            guard start < end else { throw HTTPError.validation("from must be before to.", field: "from") }
            guard end.timeIntervalSince(start) <= 93 * 86_400 else {
                throw HTTPError.validation("A newsletter covers at most 93 days.", field: "to")
            }
            let doc = try storage.newsletter(c, group: group, from: start, to: end)
            if format == "html" { return .text(NewsletterHTML.render(doc), contentType: "text/html; charset=utf-8") }
            return try .json(doc)
        }
    }

    func listNewsletters(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        let page = try Page(request)
        let before = try page.after.map { values -> Int64 in
            guard values.count == 1, let v = Int64(values[0]) else { throw HTTPError.validation("cursor is not valid.", field: "cursor") }
            return v
        }
        struct Summary: Encodable {
            let id: String; let periodStart: String; let periodEnd: String; let storyCount: Int; let createdAt: String; let updatedAt: String
        }
        return try pool.withConnection { c in
            _ = try requireMember(c, id, caller)
            let rows = try storage.newsletters(c, group: id, before: before, limit: page.limit + 1)
            return try .json(PageResponse(rows, page, item: { row in
                Summary(id: (try row["id", as: UUID.self]).lowercased, periodStart: Timestamp.format(try row["period_start"]),
                        periodEnd: Timestamp.format(try row["period_end"]), storyCount: try row["story_count"],
                        createdAt: Timestamp.format(try row["compiled_at"]), updatedAt: Timestamp.format(try row["compiled_at"]))
            }, cursor: { [String(try $0["end_us", as: Int64.self])] }))
        }
    }

    func storedNewsletter(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        let newsletterId = try Validate.pathID(request, "newsletterId")
        return try pool.withConnection { c in
            _ = try requireMember(c, id, caller)
            guard let content = try storage.storedNewsletter(c, group: id, id: newsletterId) else { throw HTTPError.notFound() }
            if request.query["format"] == "html", let doc = try? JSONDecoder().decode(NewsletterDocument.self, from: Data(content.utf8)) {
                return .text(NewsletterHTML.render(doc), contentType: "text/html; charset=utf-8")
            }
            return Response(status: 200, headers: [("Content-Type", "application/json")], body: Array(content.utf8))
        }
    }

    func calendar(_ request: Request, _ caller: Caller) throws -> Response {
        let zoneName = request.query["timeZone"] ?? "UTC"
        guard zoneName.count <= 64, let zone = TimeZone(identifier: zoneName), zoneName.contains("/") || zoneName == "UTC" else {
            throw HTTPError.validation("timeZone must be an IANA time zone such as Europe/Berlin.", field: "timeZone")
        }
        let today = LocalDay.of(Date(), in: zone)
        let from = request.query["from"] ?? String(today.prefix(8)) + "01"
        let to = request.query["to"] ?? today
        guard let f = LocalDay.ordinal(from), from.count == 10 else { throw HTTPError.validation("from must be a date YYYY-MM-DD.", field: "from") }
        guard let t = LocalDay.ordinal(to), to.count == 10 else { throw HTTPError.validation("to must be a date YYYY-MM-DD.", field: "to") }
        guard f <= t, t - f <= 366 else { throw HTTPError.validation("from must be before to, at most a year apart.", field: "from") }
        let days = try pool.withConnection { try storage.postingDays($0, user: caller.userId, zone: zone.identifier) }
        let streaks = LocalDay.streaks(days: days, today: today)
        struct Calendar: Encodable { let timeZone: String; let from: String; let to: String; let days: [String]; let currentStreak: Int; let longestStreak: Int }
        return try .json(Calendar(timeZone: zone.identifier, from: from, to: to,
                                  days: days.filter { (LocalDay.ordinal($0) ?? -1) >= f && (LocalDay.ordinal($0) ?? Int.max) <= t },
                                  currentStreak: streaks.current, longestStreak: streaks.longest))
    }

    static func newsletterSchedule(_ g: GroupRecord) throws -> NewsletterSchedule {
        NewsletterSchedule(frequency: g.schedule.frequency, weekday: g.schedule.weekday, hour: g.schedule.hour,
                           timeZone: TimeZone(identifier: g.schedule.timeZone) ?? TimeZone(identifier: "UTC")!)
    }

    // MARK: The compile job

    /// Compiles the newsletters of every period that has closed: once per group and period, whatever the number of
    /// instances (row locks and a unique period) and restarts (the close time is stored). Emits `newsletter.compiled`
    /// and `reminder.due` for members who posted nothing. Returns how many it compiled.
    @discardableResult
    func compileDueNewsletters(now: Date = Date()) throws -> Int {
        var compiled = 0
        while true {
            let batch: Int = try pool.withTransaction { c in
                let due = try storage.dueGroups(c, limit: 20)
                for (group, closesAt) in due {
                    let schedule = try Self.newsletterSchedule(group)
                    guard let end = closesAt else {
                        try storage.setNewsletterDue(c, group: group.id, at: schedule.nextClose(after: now))
                        continue
                    }
                    let start = schedule.previousClose(atOrBefore: end.addingTimeInterval(-1))
                    let doc = try storage.newsletter(c, group: group, from: start, to: end)
                    let content = String(decoding: try JSON.encode(doc), as: UTF8.self)
                    if let (id, at) = try storage.storeNewsletter(c, group: group.id, from: start, to: end,
                                                                   storyCount: doc.storyCount, content: content) {
                        let members = doc.members.filter(\.isMember)
                        try outbox.add(NewsletterCompiled(groupId: group.id.lowercased, newsletterId: id.lowercased,
                                                          periodStart: doc.period.from, periodEnd: doc.period.to,
                                                          storyCount: doc.storyCount, memberIds: members.map(\.id),
                                                          compiledAt: Timestamp.format(at)), subject: group.id.lowercased, on: c)
                        for member in members where member.days.isEmpty {
                            try outbox.add(ReminderDue(userId: member.id, groupId: group.id.lowercased, reason: "no_story_in_period",
                                                       periodStart: doc.period.from, periodEnd: doc.period.to),
                                           subject: member.id, on: c)
                        }
                        compiled += 1
                    }
                    try storage.setNewsletterDue(c, group: group.id, at: schedule.nextClose(after: end))
                }
                return due.count
            }
            if batch == 0 { return compiled }
        }
    }
}
