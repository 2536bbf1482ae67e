import Foundation
import Models
import ServiceKit

// MARK: - Request bodies

struct CreateGroupBody: RequestBody {
    static let schema = Schema.object(["name": .required(.text(max: 100)), "imageMediaId": .optional(.uuid)])
    let name: String
    let imageMediaId: UUID?
}

struct NewsletterBody: RequestBody {
    /// Only the fields given change; `timeZone` is an IANA name (checked by the handler).
    static let schema = Schema.object([
        "frequency": .optional(.oneOf(["daily", "weekly"])), "weekday": .optional(.integer(1...7)),
        "hour": .optional(.integer(0...23)), "timeZone": .optional(.string(max: 64)),
    ])
    let frequency: String?
    let weekday: Int?
    let hour: Int?
    let timeZone: String?
}

struct UpdateGroupBody: RequestBody {
    static let schema = Schema.object([
        "name": .absentOrValue(.text(max: 100)), "imageMediaId": .optional(.uuid), "newsletter": .absentOrValue(NewsletterBody.schema),
    ])
    let name: String?
    let imageMediaId: Patch<UUID>
    let newsletter: NewsletterBody?

    enum CodingKeys: String, CodingKey { case name, imageMediaId, newsletter }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decodeIfPresent(String.self, forKey: .name)
        imageMediaId = try c.decode(Patch<UUID>.self, forKey: .imageMediaId)
        newsletter = try c.decodeIfPresent(NewsletterBody.self, forKey: .newsletter)
    }
}

struct JoinBody: RequestBody {
    /// Any string: a code that cannot be one counts as a failed attempt, like a wrong one.
    static let schema = Schema.object(["inviteCode": .required(.string())])
    let inviteCode: String
}

struct CreateJournalBody: RequestBody {
    static let schema = Schema.object(["name": .required(.text(max: 100))])
    let name: String
}

/// A story's colour, `#RRGGBB` (stored upper-cased).
let colorSchema = Schema.string(max: 7, pattern: "^#[0-9A-Fa-f]{6}$", rule: "backgroundColor must be #RRGGBB.")
/// A story's text: may be empty when the story has media.
let storyTextSchema = Schema.text(min: 0, max: 10_000, multiline: true)

struct CreateStoryBody: RequestBody {
    static let schema = Schema.object([
        "text": .required(storyTextSchema), "groupIds": .required(.array(.uuid, count: 1...50)),
        "backgroundColor": .optional(colorSchema), "mediaIds": .optional(.array(.uuid, count: 0...20)),
    ])
    let text: String
    let groupIds: [UUID]
    let backgroundColor: String?
    let mediaIds: [UUID]?
}

struct UpdateStoryBody: RequestBody {
    static let schema = Schema.object([
        "text": .absentOrValue(storyTextSchema), "backgroundColor": .optional(colorSchema),
        "mediaIds": .absentOrValue(.array(.uuid, count: 0...20)),
    ])
    let text: String?
    let backgroundColor: Patch<String>
    let mediaIds: [UUID]?

    enum CodingKeys: String, CodingKey { case text, backgroundColor, mediaIds }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        text = try c.decodeIfPresent(String.self, forKey: .text)
        backgroundColor = try c.decode(Patch<String>.self, forKey: .backgroundColor)
        mediaIds = try c.decodeIfPresent([UUID].self, forKey: .mediaIds)
    }
}

struct CommentBody: RequestBody {
    static let schema = Schema.object(["text": .required(.text(max: 2000, multiline: true))])
    let text: String
}

// MARK: - Responses


struct NewsletterView: Encodable {
    let frequency: String
    let weekday: Int
    let hour: Int
    let timeZone: String
    init(_ s: Schedule) { frequency = s.frequency; weekday = s.weekday; hour = s.hour; timeZone = s.timeZone }
}

struct MemberView: Encodable {
    let id: String
    let fullName: String?
    let avatarMediaId: String?
    let joinedAt: String
    let role: String

    init(_ m: MemberRecord) {
        id = m.userId.lowercased; fullName = m.fullName; avatarMediaId = m.avatarMediaId?.lowercased
        joinedAt = Timestamp.format(m.joinedAt); role = m.role
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id); try c.encode(fullName, forKey: .fullName)
        try c.encode(avatarMediaId, forKey: .avatarMediaId); try c.encode(joinedAt, forKey: .joinedAt); try c.encode(role, forKey: .role)
    }
    enum CodingKeys: String, CodingKey { case id, fullName, avatarMediaId, joinedAt, role }
}

struct GroupView: Encodable {
    let id: String
    let kind: String
    let name: String
    let imageMediaId: String?
    let inviteCode: String?
    let role: String
    let newsletter: NewsletterView
    let createdAt: String
    let updatedAt: String
    let members: [MemberView]?

    init(_ g: GroupRecord, members: [MemberRecord]? = nil) {
        id = g.id.lowercased; kind = g.kind; name = g.name; imageMediaId = g.imageMediaId?.lowercased
        inviteCode = g.inviteCode.map(InviteCode.display); role = g.role ?? "member"; newsletter = NewsletterView(g.schedule)
        createdAt = Timestamp.format(g.createdAt); updatedAt = Timestamp.format(g.updatedAt)
        self.members = members?.map(MemberView.init)
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id); try c.encode(kind, forKey: .kind); try c.encode(name, forKey: .name)
        try c.encode(imageMediaId, forKey: .imageMediaId); try c.encode(inviteCode, forKey: .inviteCode)
        try c.encode(role, forKey: .role); try c.encode(newsletter, forKey: .newsletter)
        try c.encode(createdAt, forKey: .createdAt); try c.encode(updatedAt, forKey: .updatedAt)
        try c.encodeIfPresent(members, forKey: .members)
    }
    enum CodingKeys: String, CodingKey { case id, kind, name, imageMediaId, inviteCode, role, newsletter, createdAt, updatedAt, members }
}

struct MediaRef: Encodable {
    let id: String
    let url: String
    init(_ id: UUID) { self.id = id.lowercased; url = "/v1/media/\(id.lowercased)" }
}

struct StoryView: Encodable {
    let id: String
    let authorId: String
    let text: String
    let backgroundColor: String?
    let groupIds: [String]
    let media: [MediaRef]
    let commentCount: Int
    let createdAt: String
    let updatedAt: String

    init(_ s: StoryRecord) {
        id = s.id.lowercased; authorId = s.authorId.lowercased; text = s.text; backgroundColor = s.backgroundColor
        groupIds = s.groupIds.map(\.lowercased); media = s.mediaIds.map(MediaRef.init); commentCount = s.commentCount
        createdAt = Timestamp.format(s.createdAt); updatedAt = Timestamp.format(s.updatedAt)
    }

    func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id); try c.encode(authorId, forKey: .authorId); try c.encode(text, forKey: .text)
        try c.encode(backgroundColor, forKey: .backgroundColor); try c.encode(groupIds, forKey: .groupIds)
        try c.encode(media, forKey: .media); try c.encode(commentCount, forKey: .commentCount)
        try c.encode(createdAt, forKey: .createdAt); try c.encode(updatedAt, forKey: .updatedAt)
    }
    enum CodingKeys: String, CodingKey { case id, authorId, text, backgroundColor, groupIds, media, commentCount, createdAt, updatedAt }
}

struct CommentView: Encodable {
    let id: String
    let storyId: String
    let authorId: String
    let text: String
    let createdAt: String
    let updatedAt: String
    init(_ c: CommentRecord) {
        id = c.id.lowercased; storyId = c.storyId.lowercased; authorId = c.authorId.lowercased; text = c.text
        createdAt = Timestamp.format(c.createdAt); updatedAt = createdAt
    }
}

// MARK: - Schemas for the OpenAPI document

enum Schemas {
    static let uuid = #"{"type":"string","format":"uuid"}"#
    static let time = #"{"type":"string","format":"date-time"}"#
    static let schedule = """
        {"type":"object","required":["frequency","weekday","hour","timeZone"],"properties":{"frequency":{"enum":["daily","weekly"]},
         "weekday":{"type":"integer","minimum":1,"maximum":7},"hour":{"type":"integer","minimum":0,"maximum":23},"timeZone":{"type":"string"}}}
        """
    static let member = """
        {"type":"object","required":["id","fullName","avatarMediaId","joinedAt","role"],"additionalProperties":false,
         "properties":{"id":\(uuid),"fullName":{"type":["string","null"]},"avatarMediaId":{"type":["string","null"],"format":"uuid"},
         "joinedAt":\(time),"role":{"enum":["admin","member"]}}}
        """
    static let group = """
        {"type":"object","required":["id","kind","name","imageMediaId","inviteCode","role","newsletter","createdAt","updatedAt"],
         "additionalProperties":false,
         "properties":{"id":\(uuid),"kind":{"enum":["group","journal"]},"name":{"type":"string"},
         "imageMediaId":{"type":["string","null"],"format":"uuid"},"inviteCode":{"type":["string","null"]},
         "role":{"enum":["admin","member"]},"newsletter":\(schedule),"createdAt":\(time),"updatedAt":\(time),
         "members":{"type":"array","items":\(member)}}}
        """
    static let groupPage = #"{"type":"object","required":["items","nextCursor"],"properties":{"items":{"type":"array","items":"# + group + #"},"nextCursor":{"type":["string","null"]}}}"#
    static let story = """
        {"type":"object","required":["id","authorId","text","backgroundColor","groupIds","media","commentCount","createdAt","updatedAt"],
         "additionalProperties":false,
         "properties":{"id":\(uuid),"authorId":\(uuid),"text":{"type":"string","maxLength":10000},
         "backgroundColor":{"type":["string","null"],"pattern":"^#[0-9A-F]{6}$"},"groupIds":{"type":"array","items":\(uuid)},
         "media":{"type":"array","items":{"type":"object","required":["id","url"],"properties":{"id":\(uuid),"url":{"type":"string"}}}},
         "commentCount":{"type":"integer"},"createdAt":\(time),"updatedAt":\(time)}}
        """
    static let storyPage = #"{"type":"object","required":["items","nextCursor"],"properties":{"items":{"type":"array","items":"# + story + #"},"nextCursor":{"type":["string","null"]}}}"#
    static let comment = """
        {"type":"object","required":["id","storyId","authorId","text","createdAt","updatedAt"],"additionalProperties":false,
         "properties":{"id":\(uuid),"storyId":\(uuid),"authorId":\(uuid),"text":{"type":"string"},"createdAt":\(time),"updatedAt":\(time)}}
        """
    static let commentPage = #"{"type":"object","required":["items","nextCursor"],"properties":{"items":{"type":"array","items":"# + comment + #"},"nextCursor":{"type":["string","null"]}}}"#
    static let media = """
        {"type":"object","required":["id","url","contentType","size","createdAt","updatedAt"],"additionalProperties":false,
         "properties":{"id":\(uuid),"url":{"type":"string"},"contentType":{"enum":["image/jpeg","image/png","image/webp","image/heic"]},
         "size":{"type":"integer"},"width":{"type":"integer"},"height":{"type":"integer"},"createdAt":\(time),"updatedAt":\(time)}}
        """
    static let newsletter = """
        {"type":"object","required":["groupId","groupName","period","storyCount","members"],"properties":{"groupId":\(uuid),
         "groupName":{"type":"string"},"period":{"type":"object","required":["from","to","timeZone"],"properties":{"from":\(time),
         "to":\(time),"timeZone":{"type":"string"}}},"storyCount":{"type":"integer"},"members":{"type":"array","items":{"type":"object",
         "required":["id","isMember","days"],"properties":{"id":\(uuid),"fullName":{"type":["string","null"]},"isMember":{"type":"boolean"},
         "days":{"type":"array","items":{"type":"object","required":["date","stories"],"properties":{"date":{"type":"string"},
         "stories":{"type":"array"}}}}}}}}}
        """
    static let newsletterPage = """
        {"type":"object","required":["items","nextCursor"],"properties":{"items":{"type":"array","items":{"type":"object",
         "required":["id","periodStart","periodEnd","storyCount","createdAt"],"properties":{"id":\(uuid),"periodStart":\(time),
         "periodEnd":\(time),"storyCount":{"type":"integer"},"createdAt":\(time),"updatedAt":\(time)}}},"nextCursor":{"type":["string","null"]}}}
        """
    static let calendar = """
        {"type":"object","required":["timeZone","from","to","days","currentStreak","longestStreak"],"properties":{"timeZone":{"type":"string"},
         "from":{"type":"string"},"to":{"type":"string"},"days":{"type":"array","items":{"type":"string"}},
         "currentStreak":{"type":"integer"},"longestStreak":{"type":"integer"}}}
        """
}
