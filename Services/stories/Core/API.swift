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

enum Shapes {
    static let role = Schema.oneOf(["admin", "member"])
    static let day = Schema.string(pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
}

struct NewsletterView: View {
    let schedule: Schedule
    static let fields: [ViewField<Self>] = [
        .field("frequency", \.schedule.frequency, .oneOf(["daily", "weekly"])), .field("weekday", \.schedule.weekday, .integer(1...7)),
        .field("hour", \.schedule.hour, .integer(0...23)), .field("timeZone", \.schedule.timeZone),
    ]
}

struct MemberView: View {
    let member: MemberRecord
    init(_ m: MemberRecord) { member = m }

    static let fields: [ViewField<Self>] = [
        .field("id", \.member.userId), .nullable("fullName", \.member.fullName), .nullable("avatarMediaId", \.member.avatarMediaId),
        .field("joinedAt", \.member.joinedAt), .field("role", \.member.role, Shapes.role),
    ]
}

struct GroupView: View {
    let group: GroupRecord
    let members: [MemberView]?
    init(_ g: GroupRecord, members: [MemberRecord]? = nil) { group = g; self.members = members?.map(MemberView.init) }

    var inviteCode: String? { group.inviteCode.map(InviteCode.display) }
    var role: String { group.role ?? "member" }
    var newsletter: NewsletterView { NewsletterView(schedule: group.schedule) }

    static let fields: [ViewField<Self>] = [
        .field("id", \.group.id), .field("kind", \.group.kind, .oneOf(["group", "journal"])), .field("name", \.group.name),
        .nullable("imageMediaId", \.group.imageMediaId), .nullable("inviteCode", \.inviteCode), .field("role", \.role, Shapes.role),
        .field("newsletter", \.newsletter), .field("createdAt", \.group.createdAt), .field("updatedAt", \.group.updatedAt),
        .omitted("members", \.members),
    ]
}

struct MediaRef: View {
    let id: UUID
    var url: String { "/v1/media/\(id.lowercased)" }
    init(_ id: UUID) { self.id = id }

    static let fields: [ViewField<Self>] = [.field("id", \.id), .field("url", \.url)]
}

struct StoryView: View {
    let story: StoryRecord
    init(_ s: StoryRecord) { story = s }

    var media: [MediaRef] { story.mediaIds.map(MediaRef.init) }

    static let fields: [ViewField<Self>] = [
        .field("id", \.story.id), .field("authorId", \.story.authorId), .field("text", \.story.text, .text(min: 0, max: 10_000, multiline: true)),
        .nullable("backgroundColor", \.story.backgroundColor, colorSchema), .field("groupIds", \.story.groupIds), .field("media", \.media),
        .field("commentCount", \.story.commentCount, .integer(0...Int.max)), .field("createdAt", \.story.createdAt),
        .field("updatedAt", \.story.updatedAt),
    ]
}

struct CommentView: View {
    let comment: CommentRecord
    init(_ c: CommentRecord) { comment = c }

    static let fields: [ViewField<Self>] = [
        .field("id", \.comment.id), .field("storyId", \.comment.storyId), .field("authorId", \.comment.authorId),
        .field("text", \.comment.text), .field("createdAt", \.comment.createdAt), .field("updatedAt", \.comment.createdAt),
    ]
}

/// A compiled newsletter in the list of past ones.
struct NewsletterSummaryView: View {
    let id: UUID
    let periodStart: Date
    let periodEnd: Date
    let storyCount: Int
    let compiledAt: Date

    static let fields: [ViewField<Self>] = [
        .field("id", \.id), .field("periodStart", \.periodStart), .field("periodEnd", \.periodEnd),
        .field("storyCount", \.storyCount, .integer(0...Int.max)), .field("createdAt", \.compiledAt), .field("updatedAt", \.compiledAt),
    ]
}

/// The days someone posted, and their streaks.
struct CalendarView: View {
    let timeZone: String
    let from: String
    let to: String
    let days: [String]
    let currentStreak: Int
    let longestStreak: Int

    static let fields: [ViewField<Self>] = [
        .field("timeZone", \.timeZone), .field("from", \.from, Shapes.day), .field("to", \.to, Shapes.day),
        .field("days", \.days, .array(Shapes.day, count: 0...Int.max)), .field("currentStreak", \.currentStreak, .integer(0...Int.max)),
        .field("longestStreak", \.longestStreak, .integer(0...Int.max)),
    ]
}
