import Foundation
import Models
import ServiceKit

// MARK: - Request bodies

struct WatchedBody: RequestBody {
    static let schema = Schema.object(["seconds": .required(.integer(0...86_400)), "completed": .optional(.boolean)])
    let seconds: Int
    let completed: Bool?
}

struct CommentBody: RequestBody {
    static let schema = Schema.object(["text": .required(.text(max: 2000, multiline: true))])
    let text: String
}

struct CreatePlaylistBody: RequestBody {
    static let schema = Schema.object([
        "name": .required(.text(max: 100)), "description": .optional(.text(min: 0, max: 1000, multiline: true)),
        "public": .optional(.boolean),
    ])
    let name: String
    let description: String?
    let `public`: Bool?
}

struct UpdatePlaylistBody: RequestBody {
    static let schema = Schema.object([
        "name": .absentOrValue(.text(max: 100)), "description": .optional(.text(min: 0, max: 1000, multiline: true)),
        "public": .absentOrValue(.boolean),
    ])
    let name: String?
    let description: Patch<String>
    let `public`: Bool?

    enum CodingKeys: String, CodingKey { case name, description, `public` }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        description = try c.decode(Patch<String>.self, forKey: .description)
        `public` = try c.decodeIfPresent(Bool.self, forKey: .public)
    }
}

struct PlaylistItemBody: RequestBody {
    /// `position` from 1; the end by default.
    static let schema = Schema.object(["videoId": .required(.uuid), "position": .optional(.integer(1...1000))])
    let videoId: UUID
    let position: Int?
}

struct PlaylistOrderBody: RequestBody {
    static let schema = Schema.object(["videoIds": .required(.array(.uuid, count: 0...1000))])
    let videoIds: [UUID]
}

struct PreferencesBody: RequestBody {
    static let schema = Schema.object(["theme": .required(.oneOf(["system", "light", "dark", "sepia"])), "autoplay": .optional(.boolean)])
    let theme: String
    let autoplay: Bool?
}

// MARK: - Views

/// Whose a video is: Khan Academy's, or a partner's through Khan Academy, always credited.
func credit(_ channel: String) -> String {
    channel == "Khan Academy" ? "Khan Academy" : "\(channel), via Khan Academy"
}

struct SubjectView: Encodable {
    let id: String, name: String, topicCount: Int, createdAt: String, updatedAt: String
    init(_ s: SubjectRecord) {
        id = s.id.lowercased; name = s.name; topicCount = s.topicCount
        createdAt = Timestamp.format(s.createdAt); updatedAt = Timestamp.format(s.updatedAt)
    }
}

struct TopicView: Encodable {
    let id: String, subjectId: String, name: String, videoCount: Int, createdAt: String, updatedAt: String
    init(_ t: TopicRecord) {
        id = t.id.lowercased; subjectId = t.subjectId.lowercased; name = t.name; videoCount = t.videoCount
        createdAt = Timestamp.format(t.createdAt); updatedAt = Timestamp.format(t.updatedAt)
    }
}

struct VideoView: Encodable {
    let id: String
    let youtubeId: String
    let topicId: String
    let position: Int
    let title: String
    let description: String
    let channel: String
    let attribution: String
    let license: String?
    let durationSeconds: Int
    let thumbnailUrl: String
    let subtopic: String
    let path: [String]
    let captions: String?
    let likeCount: Int?
    let commentCount: Int?
    let liked: Bool?
    let watched: Bool?
    let createdAt: String
    let updatedAt: String

    init(_ v: VideoRecord, full: Bool = false) {
        id = v.id.lowercased; youtubeId = v.youtubeId; topicId = v.topicId.lowercased; position = v.position; title = v.title
        description = v.description; channel = v.channel; attribution = credit(v.channel); license = v.license
        durationSeconds = v.durationSeconds; thumbnailUrl = "https://i.ytimg.com/vi/\(v.youtubeId)/hqdefault.jpg"
        subtopic = v.subtopic; path = v.path.components(separatedBy: " > "); captions = full ? v.captions : nil
        likeCount = v.likeCount; commentCount = v.commentCount; liked = v.liked; watched = v.watched
        createdAt = Timestamp.format(v.createdAt); updatedAt = Timestamp.format(v.updatedAt)
    }
}

struct HistoryView: Encodable {
    let video: VideoView, seconds: Int, completed: Bool, watchedAt: String
}

struct CommentView: Encodable {
    let id: String, videoId: String, author: Author, text: String, createdAt: String, updatedAt: String
    struct Author: Encodable {
        let id: String, name: String?
        func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(id, forKey: .id); try c.encode(name, forKey: .name)
        }
        enum CodingKeys: String, CodingKey { case id, name }
    }
    init(_ c: CommentRecord) {
        id = c.id.lowercased; videoId = c.videoId.lowercased; author = Author(id: c.authorId.lowercased, name: c.authorName)
        text = c.text; createdAt = Timestamp.format(c.createdAt); updatedAt = createdAt
    }
}

struct PlaylistView: Encodable {
    let id: String
    let ownerId: String
    let name: String
    let description: String?
    let `public`: Bool
    let videos: [VideoView]
    let createdAt: String
    let updatedAt: String

    init(_ p: PlaylistRecord, videos: [UUID: VideoRecord]) {
        id = p.id.lowercased; ownerId = p.ownerId.lowercased; name = p.name; description = p.description; `public` = p.isPublic
        self.videos = p.videoIds.compactMap { videos[$0] }.map { VideoView($0) }
        createdAt = Timestamp.format(p.createdAt); updatedAt = Timestamp.format(p.updatedAt)
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id); try c.encode(ownerId, forKey: .ownerId); try c.encode(name, forKey: .name)
        try c.encode(description, forKey: .description); try c.encode(`public`, forKey: .public); try c.encode(videos, forKey: .videos)
        try c.encode(createdAt, forKey: .createdAt); try c.encode(updatedAt, forKey: .updatedAt)
    }
    enum CodingKeys: String, CodingKey { case id, ownerId, name, description, `public`, videos, createdAt, updatedAt }
}

// MARK: - Response schemas

enum Schemas {
    static let uuid = #"{"type":"string","format":"uuid"}"#
    static let time = #"{"type":"string","format":"date-time"}"#
    static let subject = #"{"type":"object","required":["id","name","topicCount","createdAt","updatedAt"],"properties":{"id":"# + uuid + #","name":{"type":"string"},"topicCount":{"type":"integer"},"createdAt":"# + time + #","updatedAt":"# + time + #"}}"#
    static let topic = #"{"type":"object","required":["id","subjectId","name","videoCount","createdAt","updatedAt"],"properties":{"id":"# + uuid + #","subjectId":"# + uuid + #","name":{"type":"string"},"videoCount":{"type":"integer"},"createdAt":"# + time + #","updatedAt":"# + time + #"}}"#
    static let video = #"{"type":"object","required":["id","youtubeId","topicId","position","title","description","channel","attribution","durationSeconds","thumbnailUrl","subtopic","path","createdAt","updatedAt"],"properties":{"id":"# + uuid + #","youtubeId":{"type":"string","minLength":11,"maxLength":11},"topicId":"# + uuid + #","position":{"type":"integer"},"title":{"type":"string"},"description":{"type":"string"},"channel":{"type":"string"},"attribution":{"type":"string"},"durationSeconds":{"type":"integer"},"thumbnailUrl":{"type":"string"},"subtopic":{"type":"string"},"path":{"type":"array","items":{"type":"string"}},"likeCount":{"type":"integer"},"commentCount":{"type":"integer"},"liked":{"type":"boolean"},"watched":{"type":"boolean"},"createdAt":"# + time + #","updatedAt":"# + time + #"}}"#
    static let comment = #"{"type":"object","required":["id","videoId","author","text","createdAt","updatedAt"],"properties":{"id":"# + uuid + #","videoId":"# + uuid + #","author":{"type":"object","required":["id","name"]},"text":{"type":"string"},"createdAt":"# + time + #","updatedAt":"# + time + #"}}"#
    static let playlist = #"{"type":"object","required":["id","ownerId","name","description","public","videos","createdAt","updatedAt"],"properties":{"id":"# + uuid + #","ownerId":"# + uuid + #","name":{"type":"string"},"description":{"type":["string","null"]},"public":{"type":"boolean"},"videos":{"type":"array","items":"# + video + #"},"createdAt":"# + time + #","updatedAt":"# + time + #"}}"#
    static let history = #"{"type":"object","required":["video","seconds","completed","watchedAt"],"properties":{"video":"# + video + #","seconds":{"type":"integer"},"completed":{"type":"boolean"},"watchedAt":"# + time + #"}}"#
    static let profile = #"{"type":"object","required":["id","name","avatarMediaId","playlists"],"properties":{"id":"# + uuid + #","name":{"type":["string","null"]},"avatarMediaId":{"type":["string","null"]},"playlists":{"type":"array","items":"# + playlist + #"}}}"#
    static let preferences = #"{"type":"object","required":["theme","autoplay"],"properties":{"theme":{"enum":["system","light","dark","sepia"]},"autoplay":{"type":"boolean"}}}"#
    static func page(_ item: String) -> String {
        #"{"type":"object","required":["items","nextCursor"],"properties":{"items":{"type":"array","items":"# + item + #"},"nextCursor":{"type":["string","null"]}}}"#
    }
    static func list(_ item: String) -> String { #"{"type":"object","required":["items"],"properties":{"items":{"type":"array","items":"# + item + #"}}}"# }
}
