import Features
import Events
import Foundation
import HTTP
import Models
import Postgres
import Web

/// The curation service's handlers: catalogue reads are public (a token, when given, adds what the reader did);
/// everything personal needs a token. They decode, run the domain (`Library`, `Recommender`) and map to views.
struct CurationHandlers: Sendable {
    let pool: Pool
    let outbox: Outbox
    let idempotency: Idempotency
    let recommender: Recommender
    let verifier: any Authenticator
    /// Signs the avatars of the people the answers show.
    let urls: MediaURLs
    let storage = CurationStorage()
    var library: Library { Library(storage: storage, outbox: outbox) }

    /// The caller when the request carries a valid token; nil without one (a bad token is still a 401).
    private func optionalCaller(_ request: Request) throws -> UUID? {
        guard request.header("authorization") != nil else { return nil }
        return try verifier.authenticate(request).userId
    }

    // MARK: The catalogue

    func subjects(_ context: Context<Void>) throws -> Response {
        .json(ItemList(try pool.withConnection { try storage.subjects($0) }.map(SubjectView.init)))
    }

    func topics(_ context: Context<Void>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withConnection { c in
            guard try storage.subjectExists(c, id) else { throw CurationError.notFound }
            return .json(ItemList(try storage.topics(c, subject: id).map(TopicView.init)))
        }
    }

    /// A topic's starter videos: its sequence, the first unwatched first.
    func topicVideos(_ context: Context<Void>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let reader = try optionalCaller(context.request)
        let page = try Page(context.request)
        let after = try page.after.map { values -> (Bool, Int) in
            guard values.count == 2, let position = Int(values[1]), ["true", "false"].contains(values[0]) else {
                throw HTTPError.validation("cursor is not valid.", field: "cursor")
            }
            return (values[0] == "true", position)
        }
        return try pool.withConnection { c in
            guard try storage.topicExists(c, id) else { throw CurationError.notFound }
            let videos = try storage.topicVideos(c, topic: id, reader: reader, after: after, limit: page.limit + 1)
            return .json(PageResponse(videos, page, item: { VideoView($0) }, cursor: { [String($0.watched ?? false), String($0.position)] }))
        }
    }

    func video(_ context: Context<Void>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let reader = try optionalCaller(context.request)
        return .json(VideoView(try pool.withConnection { try library.video($0, id, reader: reader) }, full: true))
    }

    /// Ranked full-text search, within a topic when given.
    func search(_ context: Context<Void>) throws -> Response {
        let page = try Page(context.request)
        let q = try Validate.searchText(context.request)
        let topic = try Validate.queryID(context.request, "topic")
        let after = try page.after.map { values -> (Double, UUID) in
            guard values.count == 2, let rank = Double(values[0]), let id = UUID(uuidString: values[1]) else {
                throw HTTPError.validation("cursor is not valid.", field: "cursor")
            }
            return (rank, id)
        }
        let found = try pool.withConnection { try storage.search($0, query: q, topic: topic, after: after, limit: page.limit + 1) }
        return .json(PageResponse(found, page, item: { VideoView($0.0) }, cursor: { [String($0.1), $0.0.id.lowercased] }))
    }

    /// Recommendations that stay in the video's topic, endless: the first page fixes the scroll's order (so it never
    /// repeats or skips a video), and when the topic is exhausted it comes round to those shown longest ago. A
    /// catalogue change ends a scroll of the plain ranking: its cursor is then refused and the client starts again.
    func recommendations(_ context: Context<Void>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let reader = try optionalCaller(context.request)
        let page = try Page(context.request)
        return try pool.withConnection { c in
            guard let topicId = try storage.topic(of: id, c) else { throw CurationError.notFound }
            if let topic = context.request.query["topic"], UUID(uuidString: topic) != topicId {
                throw HTTPError.validation("topic must be the video's own topic.", field: "topic")
            }
            // A scroll that depends on the catalogue alone (no viewer, or none of their history in the topic) is
            // recomputed from the index's cached ranking; one shaped by history is frozen in the database.
            var scroll: String, order: [UUID], offset: Int
            if let values = page.after {
                guard values.count == 2, let o = Int(values[1]), o >= 0 else { throw HTTPError.validation("cursor is not valid.", field: "cursor") }
                if values[0].hasPrefix("plain:"), let ranked = recommender.rank(id), values[0] == "plain:\(id.lowercased):" + ranked.version {
                    order = ranked.ids
                } else if let s = UUID(uuidString: values[0]), let saved = try storage.scroll(c, s), saved.video == id, saved.user == reader {
                    order = saved.order
                } else {
                    throw HTTPError.validation("cursor is not valid.", field: "cursor")
                }
                (scroll, offset) = (values[0], o)
            } else {
                let activity = try reader.map { try storage.activity(c, user: $0, topic: topicId) } ?? (watched: [], liked: [])
                guard let ranked = recommender.rank(id, watched: activity.watched, liked: activity.liked) else {
                    throw HTTPError.unavailable(retryAfter: 2)  // the index has not caught up with the catalogue yet
                }
                (order, offset) = (ranked.ids, 0)
                if activity.watched.isEmpty && activity.liked.isEmpty {
                    scroll = "plain:\(id.lowercased):" + ranked.version
                } else {
                    let saved = UUID.v7()
                    try storage.saveScroll(c, id: saved, user: reader, video: id, order: order)
                    scroll = saved.lowercased
                }
            }
            guard !order.isEmpty else { return .json(PageResponse<VideoView>(items: [], nextCursor: nil)) }
            let ids = (0..<min(page.limit, order.count)).map { order[(offset + $0) % order.count] }
            let found = try storage.videos(c, ids)
            let next = Cursor.encode([scroll, String(offset + ids.count)])
            return .json(PageResponse(items: ids.compactMap { found[$0] }.map { VideoView($0) }, nextCursor: next))
        }
    }

    // MARK: What I do

    func watched(_ context: Context<Caller>, _ body: WatchedBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        try pool.withTransaction {
            try library.watched($0, id, by: context.caller.userId, seconds: body.seconds, completed: body.completed ?? false)
        }
        return .noContent
    }

    func history(_ context: Context<Caller>) throws -> Response {
        let page = try Page(context.request)
        let after = try Self.timeCursor(page)
        let rows = try pool.withConnection { try storage.history($0, user: context.caller.userId, after: after, limit: page.limit + 1) }
        return .json(PageResponse(rows, page, item: { HistoryView(video: VideoView($0.0), seconds: $0.seconds, completed: $0.completed,
                                                                     watchedAt: $0.at) },
                                      cursor: { [String($0.micros), $0.0.id.lowercased] }))
    }

    func like(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        try pool.withTransaction { try library.like($0, id, by: context.caller.userId, true) }
        return .noContent
    }

    func unlike(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        try pool.withTransaction { try library.like($0, id, by: context.caller.userId, false) }
        return .noContent
    }

    func likes(_ context: Context<Caller>) throws -> Response {
        let page = try Page(context.request)
        let after = try Self.timeCursor(page)
        let rows = try pool.withConnection { try storage.likes($0, user: context.caller.userId, after: after, limit: page.limit + 1) }
        return .json(PageResponse(rows, page, item: { VideoView($0.0) }, cursor: { [String($0.micros), $0.0.id.lowercased] }))
    }

    func addComment(_ context: Context<Caller>, _ body: CommentBody, _ c: Connection) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return .json(CommentView(try library.comment(c, on: id, by: context.caller.userId, text: body.text), urls: urls), status: 201)
    }

    func comments(_ context: Context<Void>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let page = try Page(context.request)
        let after = try Self.timeCursor(page)
        let reader = try optionalCaller(context.request)
        return try pool.withConnection { c in
            _ = try library.video(c, id, reader: nil)
            let rows = try storage.comments(c, video: id, reader: reader, after: after, limit: page.limit + 1)
            return .json(PageResponse(rows, page, item: { CommentView($0.0, urls: urls) }, cursor: { [String($0.micros), $0.0.id.lowercased] }))
        }
    }

    /// `POST /v1/comments/{id}/reports`: I report a comment for an operator to look at.
    func reportComment(_ context: Context<Caller>, _ body: ReportBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            .json(ReportView(try library.report(c, comment: id, by: context.caller.userId, reason: body.reason, note: body.note)), status: 201)
        }
    }

    func deleteComment(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        try pool.withTransaction { try library.deleteComment($0, id, by: context.caller.userId) }
        return .noContent
    }

    // MARK: Playlists

    private func view(_ c: Connection, _ p: PlaylistRecord) throws -> PlaylistView {
        PlaylistView(p, videos: try storage.videos(c, p.videoIds))
    }

    func createPlaylist(_ context: Context<Caller>, _ body: CreatePlaylistBody, _ c: Connection) throws -> Response {
        let p = try library.create(c, by: context.caller.userId, name: body.name,
                                   description: body.description.flatMap { $0.isEmpty ? nil : $0 }, isPublic: body.public ?? false)
        return .json(try view(c, p), status: 201)
    }

    func myPlaylists(_ context: Context<Caller>) throws -> Response {
        try pool.withConnection { c in
            .json(ItemList(try storage.playlists(c, owner: context.caller.userId, onlyPublic: false).map { try view(c, $0) }))
        }
    }

    func playlist(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withConnection { c in .json(try view(c, try library.playlist(c, id, reader: context.caller.userId))) }
    }

    func updatePlaylist(_ context: Context<Caller>, _ body: UpdatePlaylistBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            .json(try view(c, try library.update(c, id, by: context.caller.userId, name: body.name, description: body.description,
                                                     isPublic: body.public)))
        }
    }

    func deletePlaylist(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        try pool.withTransaction { try library.delete($0, id, by: context.caller.userId) }
        return .noContent
    }

    func addItem(_ context: Context<Caller>, _ body: PlaylistItemBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in
            .json(try view(c, try library.add(c, id, video: body.videoId, at: body.position, by: context.caller.userId)))
        }
    }

    func removeItem(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        let video = try context.parameters.require("videoId", as: UUID.self)
        return try pool.withTransaction { c in .json(try view(c, try library.remove(c, id, video: video, by: context.caller.userId))) }
    }

    func reorder(_ context: Context<Caller>, _ body: PlaylistOrderBody) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withTransaction { c in .json(try view(c, try library.reorder(c, id, body.videoIds, by: context.caller.userId))) }
    }

    /// Someone's profile as others see it: name, avatar and public playlists.
    func profile(_ context: Context<Caller>) throws -> Response {
        let id = try context.parameters.require("id", as: UUID.self)
        return try pool.withConnection { c in
            guard let person = try storage.profile(c, id) else { throw CurationError.notFound }
            let lists = try storage.playlists(c, owner: id, onlyPublic: id != context.caller.userId).map { try view(c, $0) }
            return .json(ProfileView(id: id, name: person.name, avatarMediaId: person.avatar, avatarUrls: urls.avatarSizes(person.avatar, owner: id, picture: person.picture),
                                     playlists: lists))
        }
    }

    func preferences(_ context: Context<Caller>) throws -> Response {
        let p = try pool.withConnection { try storage.preferences($0, context.caller.userId) }
        return .json(PreferencesView(theme: p.theme, autoplay: p.autoplay))
    }

    func setPreferences(_ context: Context<Caller>, _ body: PreferencesBody) throws -> Response {
        try pool.withConnection { try storage.setPreferences($0, context.caller.userId, theme: body.theme, autoplay: body.autoplay ?? true) }
        return .json(PreferencesView(theme: body.theme, autoplay: body.autoplay ?? true))
    }

    /// A (microseconds, id) keyset cursor.
    static func timeCursor(_ page: Page) throws -> (Int64, UUID)? {
        guard let values = page.after else { return nil }
        guard values.count == 2, let t = Int64(values[0]), let id = UUID(uuidString: values[1]) else {
            throw HTTPError.validation("cursor is not valid.", field: "cursor")
        }
        return (t, id)
    }
}
