import Crypto
import Foundation
import HTTP
import Models
import Postgres
import ServiceKit

/// The stories service's handlers: decode, validate, authorize, call storage, emit events, map the result.
/// Anyone outside a group gets 404 for it and everything in it; a member who may not act gets 403.
struct StoriesHandlers: Sendable {
    let pool: Pool
    let outbox: Outbox
    let idempotency: Idempotency
    let storage = StoriesStorage()
    let media = MediaStore(schema: "stories")
    /// Failed join attempts per user within 15 minutes before joins are refused.
    static let maxJoinFailures = 10

    // MARK: Groups

    func createGroup(_ request: Request, _ caller: Caller, _ body: CreateGroupBody) throws -> Response {
        let (name, image) = (body.name, body.imageMediaId)
        return try idempotency.run(request, caller: caller.userId.lowercased) { c in
            if let image { try media.requireOwned([image], by: caller.userId, field: "imageMediaId", on: c) }
            guard let group = try storage.createGroup(c, kind: "group", name: name, image: image,
                                                      inviteCode: InviteCode.generate(), creator: caller.userId) else {
                throw HTTPError.conflict("Could not create the group; try again.")
            }
            try emitCreated(c, group)
            return try .json(GroupView(group, members: try storage.members(c, of: group.id)), status: 201)
        }
    }

    func createJournal(_ request: Request, _ caller: Caller, _ body: CreateJournalBody) throws -> Response {
        let name = body.name
        return try idempotency.run(request, caller: caller.userId.lowercased) { c in
            guard let journal = try storage.createGroup(c, kind: "journal", name: name, image: nil, inviteCode: nil,
                                                        creator: caller.userId) else {
                throw HTTPError.conflict("Could not create the journal; try again.")
            }
            try emitCreated(c, journal)
            return try .json(GroupView(journal, members: try storage.members(c, of: journal.id)), status: 201)
        }
    }

    func listGroups(_ request: Request, _ caller: Caller) throws -> Response {
        let page = try Page(request)
        let after = try page.after.map { values -> UUID in
            guard values.count == 1, let id = UUID(uuidString: values[0]) else { throw HTTPError.validation("cursor is not valid.", field: "cursor") }
            return id
        }
        let groups = try pool.withConnection { try storage.groups($0, of: caller.userId, after: after, limit: page.limit + 1) }
        return try .json(PageResponse(groups, page, item: { GroupView($0) }, cursor: { [$0.id.lowercased] }))
    }

    func getGroup(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        return try pool.withConnection { c in
            let group = try requireMember(c, id, caller)
            return try .json(GroupView(group, members: try storage.members(c, of: id)))
        }
    }

    func updateGroup(_ request: Request, _ caller: Caller, _ body: UpdateGroupBody) throws -> Response {
        let id = try Validate.pathID(request)
        let (name, image) = (body.name, body.imageMediaId.value)
        return try pool.withTransaction { c in
            var group = try requireAdmin(c, id, caller, lock: true)
            if let name { group.name = name }
            if body.imageMediaId.isPresent {
                if let image { try media.requireOwned([image], by: caller.userId, field: "imageMediaId", on: c) }
                group.imageMediaId = image
            }
            if let newsletter = body.newsletter { group.schedule = try Self.schedule(newsletter, over: group.schedule) }
            try storage.updateGroup(c, group)
            if body.newsletter != nil {
                // The current period now ends by the new schedule.
                try storage.setNewsletterDue(c, group: id, at: try Self.newsletterSchedule(group).nextClose(after: Date()))
            }
            guard let updated = try storage.group(c, id, reader: caller.userId) else { throw HTTPError.notFound() }
            return try .json(GroupView(updated, members: try storage.members(c, of: id)))
        }
    }

    static func schedule(_ body: NewsletterBody, over current: Schedule) throws -> Schedule {
        var s = current
        if let f = body.frequency { s.frequency = f }
        if let w = body.weekday { s.weekday = w }
        if let h = body.hour { s.hour = h }
        if let tz = body.timeZone {
            guard TimeZone(identifier: tz) != nil, tz.contains("/") || tz == "UTC" else {
                throw HTTPError.validation("timeZone must be an IANA time zone such as Europe/Berlin.", field: "newsletter.timeZone")
            }
            s.timeZone = tz
        }
        return s
    }

    func join(_ request: Request, _ caller: Caller, _ body: JoinBody) throws -> Response {
        let recent = try pool.withConnection { try storage.recentJoinFailures($0, user: caller.userId) }
        if recent.count >= Self.maxJoinFailures { throw HTTPError.rateLimited(retryAfter: recent.retryAfter) }
        let code = body.inviteCode.count <= 64 ? InviteCode.normalise(body.inviteCode) : nil
        let result: Response? = try pool.withTransaction { c in
            guard let code, let group = try storage.groupByInviteCode(c, code, reader: caller.userId) else { return nil }
            if group.role == nil, let joinedAt = try storage.addMember(c, group: group.id, user: caller.userId) {
                try outbox.add(GroupMemberJoined(groupId: group.id.lowercased, userId: caller.userId.lowercased, role: "member",
                                                 joinedAt: Timestamp.format(joinedAt)), subject: group.id.lowercased, on: c)
            }
            guard let joined = try storage.group(c, group.id, reader: caller.userId) else { return nil }
            return try .json(GroupView(joined, members: try storage.members(c, of: group.id)))
        }
        guard let result else {
            try pool.withConnection { try storage.recordJoinFailure($0, user: caller.userId) }
            throw HTTPError.notFound("No group has that invite code.")
        }
        return result
    }

    func rotateInviteCode(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        return try pool.withTransaction { c in
            var group = try requireAdmin(c, id, caller, lock: true)
            guard group.kind == "group" else { throw HTTPError.conflict("A journal has no invite code.") }
            group.inviteCode = InviteCode.generate()
            try storage.updateGroup(c, group)
            guard let updated = try storage.group(c, id, reader: caller.userId) else { throw HTTPError.notFound() }
            return try .json(GroupView(updated, members: try storage.members(c, of: id)))
        }
    }

    func removeMember(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        let target = try Validate.pathID(request, "userId")
        return try pool.withTransaction { c in
            // Lock the group so two leaving administrators cannot both leave it without one.
            let group = try requireMember(c, id, caller, lock: true)
            let leaving = target == caller.userId
            if !leaving && group.role != "admin" { throw HTTPError.forbidden("Only an administrator can remove members.") }
            if group.kind == "journal" { throw HTTPError.conflict("A journal cannot be left.") }
            let outcome = try storage.removeMember(c, group: id, user: target)
            guard outcome.removed else { throw HTTPError.notFound("That person is not a member.") }
            try outbox.add(GroupMemberLeft(groupId: id.lowercased, userId: target.lowercased, reason: leaving ? "left" : "removed",
                                           removedBy: caller.userId.lowercased, newAdminId: outcome.newAdmin?.lowercased,
                                           leftAt: Timestamp.format(Date())), subject: id.lowercased, on: c)
            return .noContent
        }
    }

    // MARK: Media

    func uploadMedia(_ request: Request, _ caller: Caller) throws -> Response {
        try media.upload(request, owner: caller.userId, idempotency: idempotency)
    }

    func getMedia(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        return try pool.withConnection { c in
            guard let found = try storage.visibleMedia(c, id, reader: caller.userId) else { throw HTTPError.notFound() }
            return try media.serve(request, found, on: c)
        }
    }

    // MARK: Stories

    func createStory(_ request: Request, _ caller: Caller, _ body: CreateStoryBody) throws -> Response {
        let text = body.text
        let color = body.backgroundColor?.uppercased()
        let groups = try Self.unique(body.groupIds, field: "groupIds")
        let media = try Self.unique(body.mediaIds ?? [], field: "mediaIds")
        guard !text.isEmpty || !media.isEmpty else { throw HTTPError.validation("A story needs text or media.", field: "text") }
        return try idempotency.run(request, caller: caller.userId.lowercased) { c in
            guard try storage.memberGroups(c, groups, user: caller.userId).count == groups.count else {
                throw HTTPError.notFound("One of the groups does not exist or you are not in it.")
            }
            try self.media.requireOwned(media, by: caller.userId, field: "mediaIds", on: c)
            let story = try storage.createStory(c, author: caller.userId, text: text, color: color, groups: groups, media: media)
            try outbox.add(StoryCreated(storyId: story.id.lowercased, authorId: caller.userId.lowercased,
                                        groupIds: groups.map(\.lowercased), mediaCount: media.count,
                                        createdAt: Timestamp.format(story.createdAt)), subject: story.id.lowercased, on: c)
            return try .json(StoryView(story), status: 201)
        }
    }

    func getStory(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        guard let story = try pool.withConnection({ try storage.story($0, id, reader: caller.userId) }) else { throw HTTPError.notFound() }
        return try .json(StoryView(story))
    }

    func updateStory(_ request: Request, _ caller: Caller, _ body: UpdateStoryBody) throws -> Response {
        let id = try Validate.pathID(request)
        let text = body.text
        let color = body.backgroundColor.value?.uppercased()
        let media = try body.mediaIds.map { try Self.unique($0, field: "mediaIds") }
        return try pool.withTransaction { c in
            guard var story = try storage.story(c, id, reader: caller.userId, lock: true) else { throw HTTPError.notFound() }
            guard story.authorId == caller.userId else { throw HTTPError.forbidden("Only the author can change a story.") }
            if let text { story.text = text }
            if body.backgroundColor.isPresent { story.backgroundColor = color }
            if let media {
                try self.media.requireOwned(media, by: caller.userId, field: "mediaIds", on: c)
                try storage.setStoryMedia(c, id, media)
                story.mediaIds = media
            }
            guard !story.text.isEmpty || !story.mediaIds.isEmpty else {
                throw HTTPError.validation("A story needs text or media.", field: "text")
            }
            story.updatedAt = try storage.updateStory(c, story)
            return try .json(StoryView(story))
        }
    }

    func deleteStory(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        return try pool.withTransaction { c in
            guard let story = try storage.story(c, id, reader: caller.userId, lock: true) else { throw HTTPError.notFound() }
            guard story.authorId == caller.userId else { throw HTTPError.forbidden("Only the author can delete a story.") }
            try storage.deleteStory(c, id)
            return .noContent
        }
    }

    func groupStories(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        let page = try Page(request)
        let from = try Self.time(request, "from")
        let to = try Self.time(request, "to")
        if let from, let to, from >= to { throw HTTPError.validation("from must be before to.", field: "from") }
        let after = try Self.timeCursor(page)
        return try pool.withConnection { c in
            _ = try requireMember(c, id, caller)
            let stories = try storage.groupStories(c, group: id, from: from, to: to, after: after, limit: page.limit + 1)
            return try .json(PageResponse(stories, page, item: StoryView.init, cursor: { [String($0.createdMicros), $0.id.lowercased] }))
        }
    }

    // MARK: Comments

    func addComment(_ request: Request, _ caller: Caller, _ body: CommentBody) throws -> Response {
        let id = try Validate.pathID(request)
        let text = body.text
        return try idempotency.run(request, caller: caller.userId.lowercased) { c in
            guard let story = try storage.story(c, id, reader: caller.userId) else { throw HTTPError.notFound() }
            let comment = try storage.addComment(c, story: id, author: caller.userId, text: text)
            try outbox.add(StoryCommented(storyId: id.lowercased, commentId: comment.id.lowercased, authorId: caller.userId.lowercased,
                                          storyAuthorId: story.authorId.lowercased, createdAt: Timestamp.format(comment.createdAt)),
                           subject: id.lowercased, on: c)
            return try .json(CommentView(comment), status: 201)
        }
    }

    func listComments(_ request: Request, _ caller: Caller) throws -> Response {
        let id = try Validate.pathID(request)
        let page = try Page(request)
        let after = try Self.timeCursor(page)
        return try pool.withConnection { c in
            guard try storage.story(c, id, reader: caller.userId) != nil else { throw HTTPError.notFound() }
            let comments = try storage.comments(c, story: id, after: after, limit: page.limit + 1)
            return try .json(PageResponse(comments, page, item: CommentView.init, cursor: { [String($0.createdMicros), $0.id.lowercased] }))
        }
    }

    // MARK: Events from auth

    /// `user.registered`: remember the profile and open the user's journal (once, whatever the replays).
    func userRegistered(_ event: ReceivedEvent, _ c: Connection) throws {
        let user = try event.decode(UserRegistered.self)
        guard let id = UUID(uuidString: user.userId) else { return }
        try storage.upsertProfile(c, user: id, username: user.username, fullName: user.fullName,
                                  avatar: user.avatarMediaId.flatMap(UUID.init(uuidString:)),
                                  updatedAt: Timestamp.parse(user.createdAt) ?? Date())
        if let journal = try storage.createGroup(c, kind: "journal", name: "Journal", image: nil, inviteCode: nil,
                                                 creator: id, defaultJournal: true) {
            try emitCreated(c, journal)
        }
    }

    /// `user.updated`: the names and avatars members see.
    func userUpdated(_ event: ReceivedEvent, _ c: Connection) throws {
        let user = try event.decode(UserUpdated.self)
        guard let id = UUID(uuidString: user.userId) else { return }
        try storage.upsertProfile(c, user: id, username: user.username, fullName: user.fullName,
                                  avatar: user.avatarMediaId.flatMap(UUID.init(uuidString:)),
                                  updatedAt: Timestamp.parse(user.updatedAt) ?? Date())
    }

    // MARK: Helpers

    /// The group if the caller is a member; 404 otherwise (outsiders learn nothing).
    func requireMember(_ c: Connection, _ id: UUID, _ caller: Caller, lock: Bool = false) throws -> GroupRecord {
        guard let group = try storage.group(c, id, reader: caller.userId, lock: lock), group.role != nil else { throw HTTPError.notFound() }
        return group
    }

    /// The group if the caller administers it; 404 for outsiders, 403 for other members.
    private func requireAdmin(_ c: Connection, _ id: UUID, _ caller: Caller, lock: Bool = false) throws -> GroupRecord {
        let group = try requireMember(c, id, caller, lock: lock)
        guard group.role == "admin" else { throw HTTPError.forbidden("Only an administrator can do this.") }
        return group
    }

    private func emitCreated(_ c: Connection, _ g: GroupRecord) throws {
        try outbox.add(GroupCreated(groupId: g.id.lowercased, kind: g.kind, name: g.name, createdBy: g.createdBy.lowercased,
                                    createdAt: Timestamp.format(g.createdAt)), subject: g.id.lowercased, on: c)
    }

    /// `ids` with none repeated; else a 400 naming the first repetition.
    static func unique(_ ids: [UUID], field: String) throws -> [UUID] {
        var seen = Set<UUID>()
        for (i, id) in ids.enumerated() where !seen.insert(id).inserted {
            throw HTTPError.validation("\(field) repeats \(id.lowercased).", field: "\(field)[\(i)]")
        }
        return ids
    }

    static func time(_ request: Request, _ name: String) throws -> Date? {
        guard let text = request.query[name], !text.isEmpty else { return nil }
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
