import Foundation

/// `video.liked`: someone liked a video, or took the like back (`liked` false). Key: the video id.
public struct VideoLiked: EventPayload, Equatable {
    public static let type = "video.liked"
    public var videoId: UUID
    public var userId: UUID
    public var liked: Bool
    public var at: Date

    public init(videoId: UUID, userId: UUID, liked: Bool, at: Date) {
        self.videoId = videoId; self.userId = userId; self.liked = liked; self.at = at
    }
}

/// `video.watched`: someone watched part or all of a video. Key: the video id.
public struct VideoWatched: EventPayload, Equatable {
    public static let type = "video.watched"
    public static let schema = EventSchema(["seconds": .init(minimum: 0)])
    public var videoId: UUID
    public var userId: UUID
    public var seconds: Int
    public var completed: Bool
    public var at: Date

    public init(videoId: UUID, userId: UUID, seconds: Int, completed: Bool, at: Date) {
        self.videoId = videoId; self.userId = userId; self.seconds = seconds; self.completed = completed; self.at = at
    }
}

/// `video.commented`: someone commented on a video (the text stays out of the event). Key: the video id.
public struct VideoCommented: EventPayload, Equatable {
    public static let type = "video.commented"
    public var videoId: UUID
    public var commentId: UUID
    public var authorId: UUID
    public var createdAt: Date

    public init(videoId: UUID, commentId: UUID, authorId: UUID, createdAt: Date) {
        self.videoId = videoId; self.commentId = commentId; self.authorId = authorId; self.createdAt = createdAt
    }
}

/// `video.comment_taken_down`: an operator took a reported comment down; it is gone for every reader. Key: the
/// video id.
public struct VideoCommentTakenDown: EventPayload, Equatable {
    public static let type = "video.comment_taken_down"
    public var videoId: UUID
    public var commentId: UUID
    /// Absent when its author's account was erased.
    public var authorId: UUID?
    public var reportId: UUID
    public var takenDownAt: Date

    public init(videoId: UUID, commentId: UUID, authorId: UUID?, reportId: UUID, takenDownAt: Date) {
        self.videoId = videoId; self.commentId = commentId; self.authorId = authorId; self.reportId = reportId
        self.takenDownAt = takenDownAt
    }
}

/// `playlist.updated`: a playlist was created, renamed, made public or private, had its items changed, or was
/// deleted (`deleted` true). Key: the playlist id.
public struct PlaylistUpdated: EventPayload, Equatable {
    public static let type = "playlist.updated"
    public static let schema = EventSchema(["videoCount": .init(minimum: 0)])
    public var playlistId: UUID
    public var ownerId: UUID
    public var isPublic: Bool
    public var videoCount: Int
    public var deleted: Bool
    public var updatedAt: Date

    public init(playlistId: UUID, ownerId: UUID, isPublic: Bool, videoCount: Int, deleted: Bool, updatedAt: Date) {
        self.playlistId = playlistId; self.ownerId = ownerId; self.isPublic = isPublic; self.videoCount = videoCount
        self.deleted = deleted; self.updatedAt = updatedAt
    }
}
