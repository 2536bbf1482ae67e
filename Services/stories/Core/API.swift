import Foundation
import Models
import ServiceKit

// MARK: - Request bodies

struct CreateGroupBody: RequestBody {
    static let fields: Set<String> = ["name", "imageMediaId"]
    let name: String
    let imageMediaId: String?
}

struct NewsletterBody: Decodable {
    let frequency: String?
    let weekday: Int?
    let hour: Int?
    let timeZone: String?
}

struct UpdateGroupBody: RequestBody {
    static let fields: Set<String> = ["name", "imageMediaId", "newsletter"]
    let name: Patch<String>
    let imageMediaId: Patch<String>
    let newsletter: Patch<NewsletterBody>

    enum CodingKeys: String, CodingKey { case name, imageMediaId, newsletter }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        name = try c.decode(Patch<String>.self, forKey: .name)
        imageMediaId = try c.decode(Patch<String>.self, forKey: .imageMediaId)
        newsletter = try c.decode(Patch<NewsletterBody>.self, forKey: .newsletter)
    }
}

struct JoinBody: RequestBody {
    static let fields: Set<String> = ["inviteCode"]
    let inviteCode: String
}

struct CreateJournalBody: RequestBody {
    static let fields: Set<String> = ["name"]
    let name: String
}

struct CreateStoryBody: RequestBody {
    static let fields: Set<String> = ["text", "groupIds", "backgroundColor", "mediaIds"]
    let text: String
    let groupIds: [String]
    let backgroundColor: String?
    let mediaIds: [String]?
}

struct UpdateStoryBody: RequestBody {
    static let fields: Set<String> = ["text", "backgroundColor", "mediaIds"]
    let text: Patch<String>
    let backgroundColor: Patch<String>
    let mediaIds: Patch<[String]>

    enum CodingKeys: String, CodingKey { case text, backgroundColor, mediaIds }
    init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        text = try c.decode(Patch<String>.self, forKey: .text)
        backgroundColor = try c.decode(Patch<String>.self, forKey: .backgroundColor)
        mediaIds = try c.decode(Patch<[String]>.self, forKey: .mediaIds)
    }
}

struct CommentBody: RequestBody {
    static let fields: Set<String> = ["text"]
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
    static let createGroup = """
        {"type":"object","required":["name"],"additionalProperties":false,
         "properties":{"name":{"type":"string","minLength":1,"maxLength":100},"imageMediaId":\(uuid)}}
        """
    static let updateGroup = """
        {"type":"object","additionalProperties":false,"properties":{"name":{"type":"string","minLength":1,"maxLength":100},
         "imageMediaId":{"type":["string","null"],"format":"uuid"},"newsletter":{"type":"object","additionalProperties":false,
         "properties":{"frequency":{"enum":["daily","weekly"]},"weekday":{"type":"integer","minimum":1,"maximum":7},
         "hour":{"type":"integer","minimum":0,"maximum":23},"timeZone":{"type":"string","description":"IANA time zone"}}}}}
        """
    static let join = #"{"type":"object","required":["inviteCode"],"additionalProperties":false,"properties":{"inviteCode":{"type":"string"}}}"#
    static let journal = #"{"type":"object","required":["name"],"additionalProperties":false,"properties":{"name":{"type":"string","minLength":1,"maxLength":100}}}"#
    static let createStory = """
        {"type":"object","required":["text","groupIds"],"additionalProperties":false,
         "properties":{"text":{"type":"string","maxLength":10000},"groupIds":{"type":"array","minItems":1,"maxItems":50,"items":\(uuid)},
         "backgroundColor":{"type":"string","pattern":"^#[0-9A-Fa-f]{6}$"},"mediaIds":{"type":"array","maxItems":20,"items":\(uuid)}}}
        """
    static let updateStory = """
        {"type":"object","additionalProperties":false,"properties":{"text":{"type":"string","maxLength":10000},
         "backgroundColor":{"type":["string","null"],"pattern":"^#[0-9A-Fa-f]{6}$"},"mediaIds":{"type":"array","maxItems":20,"items":\(uuid)}}}
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
    static let createComment = #"{"type":"object","required":["text"],"additionalProperties":false,"properties":{"text":{"type":"string","minLength":1,"maxLength":2000}}}"#
}
