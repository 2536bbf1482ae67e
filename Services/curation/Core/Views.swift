import Features
import Foundation
import Models
import Web

// What the routes answer: each view described once (`View`).

/// Whose a video is: Khan Academy's, or a partner's through Khan Academy, always credited.
func credit(_ channel: String) -> String {
    channel == "Khan Academy" ? "Khan Academy" : "\(channel), via Khan Academy"
}

/// A video's path ("Science > Physics > Magnetism") in its parts, as `components(separatedBy: " > ")` gives them but
/// compared byte by byte: Foundation's compares Characters, nine times the time and a third of a page of
/// recommendations' CPU.
func pathParts(_ path: String) -> [String] {
    let text = Array(path.utf8)
    var parts: [String] = [], start = 0, i = 0
    while i + 3 <= text.count {
        if text[i] == UInt8(ascii: " "), text[i + 1] == UInt8(ascii: ">"), text[i + 2] == UInt8(ascii: " ") {
            parts.append(String(decoding: text[start..<i], as: UTF8.self))
            i += 3
            start = i
        } else {
            i += 1
        }
    }
    parts.append(String(decoding: text[start...], as: UTF8.self))
    return parts
}

struct SubjectView: View {
    let subject: SubjectRecord
    init(_ s: SubjectRecord) { subject = s }
    static let fields: [ViewField<Self>] = [
        .field("id", \.subject.id), .field("name", \.subject.name), .field("topicCount", \.subject.topicCount, .integer(0...Int.max)),
        .field("createdAt", \.subject.createdAt), .field("updatedAt", \.subject.updatedAt),
    ]
}

struct TopicView: View {
    let topic: TopicRecord
    init(_ t: TopicRecord) { topic = t }
    static let fields: [ViewField<Self>] = [
        .field("id", \.topic.id), .field("subjectId", \.topic.subjectId), .field("name", \.topic.name),
        .field("videoCount", \.topic.videoCount, .integer(0...Int.max)), .field("createdAt", \.topic.createdAt),
        .field("updatedAt", \.topic.updatedAt),
    ]
}

struct VideoView: View {
    let video: VideoRecord
    /// With its captions (a single video's page).
    let full: Bool
    init(_ v: VideoRecord, full: Bool = false) { video = v; self.full = full }

    var attribution: String { credit(video.channel) }
    var thumbnailUrl: String { "https://i.ytimg.com/vi/\(video.youtubeId)/hqdefault.jpg" }
    var path: [String] { pathParts(video.path) }
    var captions: String? { full ? video.captions : nil }

    static let fields: [ViewField<Self>] = [
        .field("id", \.video.id), .field("youtubeId", \.video.youtubeId, .string(min: 11, max: 11)), .field("topicId", \.video.topicId),
        .field("position", \.video.position), .field("title", \.video.title), .field("description", \.video.description),
        .field("channel", \.video.channel), .field("attribution", \.attribution), .omitted("license", \.video.license),
        .field("durationSeconds", \.video.durationSeconds, .integer(0...Int.max)), .field("thumbnailUrl", \.thumbnailUrl),
        .field("subtopic", \.video.subtopic), .field("path", \.path), .omitted("captions", \.captions),
        .omitted("likeCount", \.video.likeCount, .integer(0...Int.max)), .omitted("commentCount", \.video.commentCount, .integer(0...Int.max)),
        .omitted("liked", \.video.liked), .omitted("watched", \.video.watched), .field("createdAt", \.video.createdAt),
        .field("updatedAt", \.video.updatedAt),
    ]
}

struct HistoryView: View {
    let video: VideoView, seconds: Int, completed: Bool, watchedAt: Date
    static let fields: [ViewField<Self>] = [
        .field("video", \.video), .field("seconds", \.seconds, .integer(0...Int.max)), .field("completed", \.completed),
        .field("watchedAt", \.watchedAt),
    ]
}

struct AuthorView: View {
    let id: UUID, name: String?, avatarUrls: ImageSizes?
    var avatarUrl: String? { avatarUrls?.full }
    static let fields: [ViewField<Self>] = [
        .field("id", \.id), .nullable("name", \.name), .nullable("avatarUrl", \.avatarUrl), .nullable("avatarUrls", \.avatarUrls),
    ]
}

struct CommentView: View {
    let comment: CommentRecord
    let author: AuthorView
    init(_ c: CommentRecord, urls: MediaURLs) {
        comment = c; author = AuthorView(id: c.authorId, name: c.authorName, avatarUrls: urls.avatarSizes(c.authorAvatar, owner: c.authorId, picture: c.authorPicture))
    }

    static let fields: [ViewField<Self>] = [
        .field("id", \.comment.id), .field("videoId", \.comment.videoId), .field("author", \.author), .field("text", \.comment.text),
        .field("createdAt", \.comment.createdAt), .field("updatedAt", \.comment.createdAt),
    ]
}

struct PlaylistView: View {
    let playlist: PlaylistRecord
    let videos: [VideoView]

    init(_ p: PlaylistRecord, videos: [UUID: VideoRecord]) {
        playlist = p
        self.videos = p.videoIds.compactMap { videos[$0] }.map { VideoView($0) }
    }

    static let fields: [ViewField<Self>] = [
        .field("id", \.playlist.id), .field("ownerId", \.playlist.ownerId), .field("name", \.playlist.name),
        .nullable("description", \.playlist.description), .field("public", \.playlist.isPublic), .field("videos", \.videos),
        .field("createdAt", \.playlist.createdAt), .field("updatedAt", \.playlist.updatedAt),
    ]
}

/// Someone's profile as others see it: name, avatar (its id, and its signed URL) and public playlists.
struct ProfileView: View {
    let id: UUID, name: String?, avatarMediaId: UUID?, avatarUrls: ImageSizes?, playlists: [PlaylistView]
    var avatarUrl: String? { avatarUrls?.full }
    static let fields: [ViewField<Self>] = [
        .field("id", \.id), .nullable("name", \.name), .nullable("avatarMediaId", \.avatarMediaId), .nullable("avatarUrl", \.avatarUrl),
        .nullable("avatarUrls", \.avatarUrls),
        .field("playlists", \.playlists),
    ]
}

struct PreferencesView: View {
    let theme: String, autoplay: Bool
    static let fields: [ViewField<Self>] = [.field("theme", \.theme, PreferencesBody.themes), .field("autoplay", \.autoplay)]
}
