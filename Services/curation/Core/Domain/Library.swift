import Events
import Features
import Foundation
import Models
import Postgres
import Web

/// What the curation rules refuse.
enum CurationError: DomainError, Equatable {
    /// No such video, topic, subject, comment or scroll, or a playlist the caller may not see.
    case notFound
    /// Someone else's comment or playlist.
    case notYours(String)
    /// A value naming what is not there.
    case invalid(String, field: String)

    var refusal: Refusal {
        switch self {
        case .notFound: return .notFound
        case .notYours: return .forbidden
        case .invalid: return .invalid
        }
    }

    var message: String {
        switch self {
        case .notFound: return "Not found."
        case .notYours(let m), .invalid(let m, _): return m
        }
    }

    var field: String? { if case .invalid(_, let f) = self { return f }; return nil }
}

/// The rules of what people do with videos: watching (history), liking, commenting (authors delete their own),
/// and playlists (the owner's; others see only public ones, and a private one is not found).
struct Library: Sendable {
    let storage: CurationStorage
    let outbox: Outbox
    var reports: Reports { Reports(schema: "curation") }

    func video(_ c: Connection, _ id: UUID, reader: UUID?) throws -> VideoRecord {
        guard let v = try storage.video(c, id, reader: reader) else { throw CurationError.notFound }
        return v
    }

    func watched(_ c: Connection, _ video: UUID, by user: UUID, seconds: Int, completed: Bool) throws {
        _ = try self.video(c, video, reader: user)
        let at = try storage.recordWatch(c, user: user, video: video, seconds: seconds, completed: completed)
        try outbox.add(VideoWatched(videoId: video, userId: user, seconds: seconds, completed: completed,
                                    at: at), subject: video.lowercased, on: c)
    }

    /// Likes or unlikes; an event only when something changed.
    func like(_ c: Connection, _ video: UUID, by user: UUID, _ liked: Bool) throws {
        _ = try self.video(c, video, reader: user)
        let changed = liked ? try storage.like(c, user: user, video: video) : try storage.unlike(c, user: user, video: video)
        if changed {
            try outbox.add(VideoLiked(videoId: video, userId: user, liked: liked, at: Date()),
                           subject: video.lowercased, on: c)
        }
    }

    func comment(_ c: Connection, on video: UUID, by user: UUID, text: String) throws -> CommentRecord {
        _ = try self.video(c, video, reader: user)
        let comment = try storage.addComment(c, video: video, author: user, text: text)
        try outbox.add(VideoCommented(videoId: video, commentId: comment.id, authorId: user,
                                      createdAt: comment.createdAt), subject: video.lowercased, on: c)
        return comment
    }

    /// `reporter` reports a comment (anyone may read comments, so anyone signed in may report one).
    func report(_ c: Connection, comment id: UUID, by reporter: UUID, reason: String, note: String?) throws -> ReportRecord {
        guard let comment = try storage.comment(c, id) else { throw CurationError.notFound }
        return try reports.file(c, kind: "comment", target: id, author: comment.authorId, reporter: reporter, reason: reason, note: note)
    }

    /// A reported comment an operator takes down: gone for every reader, and `video.comment_taken_down` says so.
    func takeDown(_ c: Connection, _ report: ReportRecord) throws {
        guard let comment = try storage.comment(c, report.targetId) else { return }
        try storage.deleteComment(c, comment.id)
        try outbox.add(VideoCommentTakenDown(videoId: comment.videoId, commentId: comment.id,
                                             authorId: report.authorId, reportId: report.id,
                                             takenDownAt: Date()), subject: comment.videoId.lowercased, on: c)
    }

    func deleteComment(_ c: Connection, _ id: UUID, by user: UUID) throws {
        guard let comment = try storage.comment(c, id) else { throw CurationError.notFound }
        guard comment.authorId == user else { throw CurationError.notYours("Only its author can delete a comment.") }
        try storage.deleteComment(c, id)
    }

    // MARK: Playlists

    /// A playlist `reader` may see: their own, or a public one.
    func playlist(_ c: Connection, _ id: UUID, reader: UUID, lock: Bool = false) throws -> PlaylistRecord {
        guard let p = try storage.playlist(c, id, lock: lock), p.ownerId == reader || p.isPublic else { throw CurationError.notFound }
        return p
    }

    /// A playlist `user` owns (others' public ones are seen, not changed).
    func owned(_ c: Connection, _ id: UUID, by user: UUID) throws -> PlaylistRecord {
        let p = try playlist(c, id, reader: user, lock: true)
        guard p.ownerId == user else { throw CurationError.notYours("Only its owner can change a playlist.") }
        return p
    }

    func create(_ c: Connection, by user: UUID, name: String, description: String?, isPublic: Bool) throws -> PlaylistRecord {
        let p = try storage.createPlaylist(c, owner: user, name: name, description: description, isPublic: isPublic)
        try changed(c, p)
        return p
    }

    func update(_ c: Connection, _ id: UUID, by user: UUID, name: String?, description: Patch<String>, isPublic: Bool?) throws -> PlaylistRecord {
        var p = try owned(c, id, by: user)
        if let name { p.name = name }
        if description.isPresent { p.description = description.value }
        if let isPublic { p.isPublic = isPublic }
        try storage.savePlaylist(c, p)
        return try changed(c, storage.playlist(c, id)!)
    }

    /// Adds a video at `position` (from 1; the end by default); a video already there moves.
    func add(_ c: Connection, _ id: UUID, video: UUID, at position: Int?, by user: UUID) throws -> PlaylistRecord {
        let p = try owned(c, id, by: user)
        guard try storage.video(c, video, reader: nil) != nil else { throw CurationError.invalid("videoId names no video.", field: "videoId") }
        var items = p.videoIds.filter { $0 != video }
        guard items.count < 1000 else { throw CurationError.invalid("A playlist holds at most 1,000 videos.", field: "videoId") }
        items.insert(video, at: min(max((position ?? items.count + 1) - 1, 0), items.count))
        try storage.setItems(c, playlist: id, items)
        return try changed(c, storage.playlist(c, id)!)
    }

    func remove(_ c: Connection, _ id: UUID, video: UUID, by user: UUID) throws -> PlaylistRecord {
        let p = try owned(c, id, by: user)
        guard p.videoIds.contains(video) else { throw CurationError.notFound }
        try storage.setItems(c, playlist: id, p.videoIds.filter { $0 != video })
        return try changed(c, storage.playlist(c, id)!)
    }

    /// Puts the items in the order of `videos`, which must name each item once.
    func reorder(_ c: Connection, _ id: UUID, _ videos: [UUID], by user: UUID) throws -> PlaylistRecord {
        let p = try owned(c, id, by: user)
        guard videos.count == Set(videos).count, Set(videos) == Set(p.videoIds) else {
            throw CurationError.invalid("videoIds must name every video of the playlist once.", field: "videoIds")
        }
        try storage.setItems(c, playlist: id, videos)
        return try changed(c, storage.playlist(c, id)!)
    }

    func delete(_ c: Connection, _ id: UUID, by user: UUID) throws {
        let p = try owned(c, id, by: user)
        try storage.deletePlaylist(c, id)
        try outbox.add(PlaylistUpdated(playlistId: id, ownerId: user, isPublic: p.isPublic, videoCount: 0,
                                       deleted: true, updatedAt: Date()), subject: id.lowercased, on: c)
    }

    @discardableResult
    private func changed(_ c: Connection, _ p: PlaylistRecord) throws -> PlaylistRecord {
        try outbox.add(PlaylistUpdated(playlistId: p.id, ownerId: p.ownerId, isPublic: p.isPublic,
                                       videoCount: p.videoIds.count, deleted: false, updatedAt: p.updatedAt),
                       subject: p.id.lowercased, on: c)
        return p
    }
}
