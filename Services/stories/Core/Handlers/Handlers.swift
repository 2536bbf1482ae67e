import Events
import Features
import Foundation
import HTTP
import Models
import Postgres
import Web

/// The stories service's handlers: they take the decoded request, run the domain (`Groups`, `Stories`,
/// `Newsletters`) in a transaction and map the result to its view. Anyone outside a group gets 404 for it and
/// everything in it; a member who may not act gets 403: the domain says which.
struct StoriesHandlers: Sendable {
    let pool: Pool
    let outbox: Outbox
    let idempotency: Idempotency
    let storage = StoriesStorage()
    let media: MediaStore
    var groups: Groups { Groups(storage: storage, outbox: outbox) }
    var stories: Stories { Stories(storage: storage, outbox: outbox, media: media) }
    let newsletterCache = NewsletterCache()
    var newsletters: Newsletters { Newsletters(pool: pool, storage: storage, outbox: outbox, cache: newsletterCache) }
    var preferences: Preferences { Preferences(storage: storage) }
    let invites = InviteJoins(schema: "stories")

    // MARK: Groups

    func createGroup(_ context: Context<Caller>, _ body: CreateGroupBody, _ c: Connection) throws -> Response {
        if let image = body.imageMediaId { try media.requireOwned([image], by: context.caller.userId, field: "imageMediaId", on: c) }
        let group = try groups.create(c, kind: .group, name: body.name, image: body.imageMediaId, creator: context.caller.userId)
        return .json(GroupView(group, members: try storage.members(c, of: group.id), media: media), status: 201)
    }

    func createJournal(_ context: Context<Caller>, _ body: CreateJournalBody, _ c: Connection) throws -> Response {
        let journal = try groups.create(c, kind: .journal, name: body.name, image: nil, creator: context.caller.userId)
        return .json(GroupView(journal, members: try storage.members(c, of: journal.id), media: media), status: 201)
    }

    func listGroups(_ context: Context<Caller>) throws -> Response {
        let page = try Page(context.request)
        let after = try page.after.map { values -> UUID in
            guard values.count == 1, let id = UUID(uuidString: values[0]) else { throw HTTPError.validation("cursor is not valid.", field: "cursor") }
            return id
        }
        let list = try pool.withConnection { try storage.groups($0, of: context.caller.userId, after: after, limit: page.limit + 1) }
        return .json(PageResponse(list, page, item: { GroupView($0, media: media) }, cursor: { [$0.id.lowercased] }))
    }

    func getGroup(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withConnection { c in
            let group = try groups.member(c, id, context.caller.userId)
            return .json(GroupView(group, members: try storage.members(c, of: id), media: media))
        }
    }

    func updateGroup(_ context: Context<Caller>, _ body: UpdateGroupBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            var group = try groups.admin(c, id, context.caller.userId, lock: true)
            if let name = body.name { group.name = name }
            if body.imageMediaId.isPresent {
                if let image = body.imageMediaId.value { try media.requireOwned([image], by: context.caller.userId, field: "imageMediaId", on: c) }
                group.imageMediaId = body.imageMediaId.value
            }
            if let newsletter = body.newsletter { group.schedule = try Self.schedule(newsletter, over: group.schedule) }
            try storage.updateGroup(c, group)
            if body.newsletter != nil {
                // The current period now ends by the new schedule.
                try storage.setNewsletterDue(c, group: id, at: try Newsletters.schedule(group).nextClose(after: Date()))
                try storage.setReminderDue(c, group: id, at: nil)  // planned again by the new schedule
            }
            guard let updated = try storage.group(c, id, reader: context.caller.userId) else { throw StoriesError.notFound }
            return .json(GroupView(updated, members: try storage.members(c, of: id), media: media))
        }
    }

    /// How far, in days, a schedule's `startDate` may lie from today.
    static let startDateReach = 3653

    static func schedule(_ body: NewsletterBody, over current: Schedule) throws -> Schedule {
        var s = current
        if let w = body.weekday { s.weekday = w }
        if let h = body.hour { s.hour = h }
        if let tz = body.timeZone {
            guard TimeZone(identifier: tz) != nil, tz.contains("/") || tz == "UTC" else {
                throw HTTPError.validation("timeZone must be an IANA time zone such as Europe/Berlin.", field: "newsletter.timeZone")
            }
            s.timeZone = tz
        }
        if let n = body.count { s.count = n }
        if let d = body.dayOfMonth { s.dayOfMonth = d }
        if let date = body.startDate {
            guard let day = CivilDay.number(date) else {
                throw HTTPError.validation("startDate must be a date that exists, YYYY-MM-DD.", field: "newsletter.startDate")
            }
            // Any date would do as the anchor, but one decades away is a mistake, and PostgreSQL has no year 0.
            let today = CivilDay.number(LocalDay.of(Date(), in: TimeZone(identifier: s.timeZone) ?? TimeZone(identifier: "UTC")!)) ?? day
            guard abs(day - today) <= Self.startDateReach else {
                throw HTTPError.validation("startDate must be within ten years of today.", field: "newsletter.startDate")
            }
            s.startDate = date
        }
        if let f = body.frequency { s.frequency = f }
        // What each frequency needs: a count (and a start, today by default) for every N days or weeks, a day for monthly.
        if s.frequency == "every_n_days" || s.frequency == "every_n_weeks" {
            guard s.count != nil else {
                throw HTTPError.validation("count (1 to 365) is required with frequency \(s.frequency).", field: "newsletter.count")
            }
            if s.startDate == nil { s.startDate = LocalDay.of(Date(), in: TimeZone(identifier: s.timeZone) ?? TimeZone(identifier: "UTC")!) }
        }
        if s.frequency == "monthly", s.dayOfMonth == nil {
            throw HTTPError.validation("dayOfMonth (1 to 31) is required with frequency monthly.", field: "newsletter.dayOfMonth")
        }
        return s
    }

    func join(_ context: Context<Caller>, _ body: JoinBody) throws -> Response {
        try invites.join(pool, typed: body.inviteCode, user: context.caller.userId, unknown: StoriesError.unknownInviteCode) { c, code in
            try groups.join(c, code: code, user: context.caller.userId).map {
                .json(GroupView($0, members: try storage.members(c, of: $0.id), media: media))
            }
        }
    }

    func rotateInviteCode(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            let group = try groups.rotateInviteCode(c, id, by: context.caller.userId)
            return .json(GroupView(group, members: try storage.members(c, of: id), media: media))
        }
    }

    func removeMember(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let target = try context.parameters.require("userId", as: UUID.self)
        try pool.withTransaction { try groups.remove($0, id, member: target, by: context.caller.userId) }
        return .noContent
    }

    /// `POST /v1/stories/{id}/reports`: I report a story I can see to the moderators.
    func reportStory(_ context: Context<Caller>, _ body: ReportBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            .json(ReportView(try stories.report(c, id, by: context.caller.userId, reason: body.reason, note: body.note)), status: 201)
        }
    }

    // MARK: Preferences

    /// `PUT /v1/groups/{id}/newsletter-delivery`: how I take this group's newsletter.
    func setNewsletterDelivery(_ context: Context<Caller>, _ body: NewsletterDeliveryBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            var group = try groups.member(c, id, context.caller.userId)
            try preferences.setDelivery(c, group, user: context.caller.userId, body.delivery)
            group.newsletterDelivery = body.delivery
            return .json(GroupView(group, members: try storage.members(c, of: id), media: media))
        }
    }

    func hiddenAuthors(_ context: Context<Caller>) throws -> Response {
        let page = try Page(context.request)
        let after = try Self.timeCursor(page)
        return try pool.withConnection { c in
            let list = try storage.hiddenAuthorList(c, of: context.caller.userId, after: after, limit: page.limit + 1)
            return .json(PageResponse(list, page, item: { HiddenAuthorView($0, media: media) },
                                      cursor: { [String($0.hiddenMicros), $0.userId.lowercased] }))
        }
    }

    /// `PUT /v1/users/me/hidden-authors/{userId}`: I would rather not see their stories.
    func hideAuthor(_ context: Context<Caller>) throws -> Response {
        let author = try context.parameters.require("userId", as: UUID.self)
        try pool.withTransaction { try preferences.hide($0, author, from: context.caller.userId) }
        return .noContent
    }

    /// `DELETE /v1/users/me/hidden-authors/{userId}`: their stories show again (whether or not they were hidden).
    func showAuthor(_ context: Context<Caller>) throws -> Response {
        let author = try context.parameters.require("userId", as: UUID.self)
        _ = try pool.withConnection { try storage.unhide($0, author, from: context.caller.userId) }
        return .noContent
    }

    // MARK: Media

    func uploadMedia(_ context: Context<Caller>) throws -> Response {
        try media.upload(context.request, owner: context.caller.userId, idempotency: idempotency)
    }

    func getMedia(_ request: Request, _ caller: Caller?) throws -> Response {
        let id = try Validate.pathID(request)
        return try pool.withConnection { c in
            try media.serve(request, id, caller: caller, on: c) { try storage.visibleMedia(c, id, reader: $0) }
        }
    }

    /// `GET /v1/media/avatars/{userId}/{id}`: the image only if that user uploaded it as their avatar.
    func getAvatar(_ request: Request, _ caller: Caller?) throws -> Response {
        let id = try Validate.pathID(request), owner = try Validate.pathID(request, "userId")
        return try pool.withConnection { c in
            try media.serve(request, id, avatarOf: owner, caller: caller, on: c) { try storage.visibleMedia(c, id, reader: $0) }
        }
    }

    /// `GET /v1/internal/users/{userId}/avatars/{id}` (services): 204 if the user uploaded the image as their avatar.
    func checkAvatar(_ context: Context<Void>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let owner = try context.parameters.require("userId", as: UUID.self)
        guard try pool.withConnection({ try media.owned([id], by: owner, for: MediaStore.avatar, on: $0) }) == 1 else {
            throw HTTPError.notFound()
        }
        return .noContent
    }

    // MARK: Stories

    func createStory(_ context: Context<Caller>, _ body: CreateStoryBody, _ c: Connection) throws -> Response {
        let story = try stories.create(c, by: context.caller.userId, text: body.text, color: body.backgroundColor?.uppercased(),
                                       place: body.place?.place, promptId: body.promptId, groups: body.groupIds, images: body.mediaIds ?? [])
        return .json(StoryView(story, media: media), status: 201)
    }

    func getStory(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return .json(StoryView(try pool.withConnection { try stories.visible($0, id, to: context.caller.userId) }, media: media))
    }

    func updateStory(_ context: Context<Caller>, _ body: UpdateStoryBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let color: Patch<String> = body.backgroundColor.value.map { .value($0.uppercased()) } ?? body.backgroundColor
        let place: Patch<StoryPlace> = body.place.value.map { .value($0.place) } ?? (body.place.isPresent ? .null : .absent)
        let story = try pool.withTransaction { c in
            try stories.update(c, id, by: context.caller.userId, text: body.text, color: color, place: place, images: body.mediaIds)
        }
        return .json(StoryView(story, media: media))
    }

    func deleteStory(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        try pool.withTransaction { try stories.delete($0, id, by: context.caller.userId) }
        return .noContent
    }

    func groupStories(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let page = try Page(context.request)
        let from = try Self.time(context.request, "from")
        let to = try Self.time(context.request, "to")
        if let from, let to, from >= to { throw HTTPError.validation("from must be before to.", field: "from") }
        let after = try Self.timeCursor(page)
        return try pool.withConnection { c in
            _ = try groups.member(c, id, context.caller.userId)
            let list = try storage.groupStories(c, group: id, reader: context.caller.userId, from: from, to: to, after: after, limit: page.limit + 1)
            return .json(PageResponse(list, page, item: { StoryView($0, media: media) }, cursor: { [String($0.createdMicros), $0.id.lowercased] }))
        }
    }

    /// Every story I have woven, across my groups and journals, newest first.
    func myStories(_ context: Context<Caller>) throws -> Response {
        let page = try Page(context.request)
        let after = try Self.timeCursor(page)
        return try pool.withConnection { c in
            let list = try storage.authorStories(c, author: context.caller.userId, after: after, limit: page.limit + 1)
            return .json(PageResponse(list, page, item: { StoryView($0, media: media) }, cursor: { [String($0.createdMicros), $0.id.lowercased] }))
        }
    }

    // MARK: Comments

    func addComment(_ context: Context<Caller>, _ body: CommentBody, _ c: Connection) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return .json(CommentView(try stories.comment(c, on: id, by: context.caller.userId, text: body.text)), status: 201)
    }

    func listComments(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let page = try Page(context.request)
        let after = try Self.timeCursor(page)
        return try pool.withConnection { c in
            _ = try stories.visible(c, id, to: context.caller.userId)
            let comments = try storage.comments(c, story: id, after: after, limit: page.limit + 1)
            return .json(PageResponse(comments, page, item: CommentView.init, cursor: { [String($0.createdMicros), $0.id.lowercased] }))
        }
    }

    // MARK: Query parameters

    static func time(_ request: Request, _ name: String) throws -> Date? {
        guard let text = request.query[name] else { return nil }
        guard let date = Timestamp.parse(text) else {
            throw HTTPError.validation("\(name) must be an RFC 3339 time such as 2026-11-30T00:00:00Z.", field: name)
        }
        return date
    }

    /// A (created microseconds, id) keyset cursor.
    static func timeCursor(_ page: Page) throws -> (Int64, UUID)? {
        guard let values = page.after else { return nil }
        guard values.count == 2, let time = Int64(values[0]), let id = UUID(uuidString: values[1]) else {
            throw HTTPError.validation("cursor is not valid.", field: "cursor")
        }
        return (time, id)
    }
}
