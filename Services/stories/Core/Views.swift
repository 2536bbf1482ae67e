import Features
import Foundation
import Models
import Web

// What the routes answer: each view described once (`View`).

enum Shapes {
    static let role = Schema.oneOf(["admin", "member"])
    static let day = Schema.string(pattern: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$")
}

struct NewsletterView: View {
    let schedule: Schedule
    /// The period open now: when it began and when it closes (its newsletter is compiled then).
    let currentPeriod: PeriodView
    init(schedule: Schedule, now: Date = Date()) {
        self.schedule = schedule
        let p = schedule.periods.period(containing: now)
        currentPeriod = PeriodView(start: p.start, end: p.end)
    }
    var every: Bool { schedule.frequency == "every_n_days" || schedule.frequency == "every_n_weeks" }
    static let fields: [ViewField<Self>] = [
        .field("frequency", \.schedule.frequency, .oneOf(NewsletterSchedule.frequencies)), .field("weekday", \.schedule.weekday, .integer(1...7)),
        .field("hour", \.schedule.hour, .integer(0...23)), .field("timeZone", \.schedule.timeZone),
        .omitted("count", { $0.every ? $0.schedule.count : nil }, .integer(1...365)),
        .omitted("startDate", { $0.every ? $0.schedule.startDate : nil }, Shapes.day),
        .omitted("dayOfMonth", { $0.schedule.frequency == "monthly" ? $0.schedule.dayOfMonth : nil }, .integer(1...31)),
        .field("currentPeriod", \.currentPeriod),
    ]
}

struct PeriodView: View {
    let start: Date; let end: Date
    static let fields: [ViewField<Self>] = [.field("start", \.start), .field("end", \.end)]
}

struct MemberView: View {
    let member: MemberRecord
    let avatarUrls: ImageSizes?
    var avatarUrl: String? { avatarUrls?.full }
    init(_ m: MemberRecord, media: MediaStore) { member = m; avatarUrls = media.urls.avatarSizes(m.avatarMediaId, owner: m.userId, picture: m.pictureUrl) }

    static let fields: [ViewField<Self>] = [
        .field("id", \.member.userId), .nullable("fullName", \.member.fullName), .nullable("avatarMediaId", \.member.avatarMediaId),
        .nullable("avatarUrl", \.avatarUrl), .nullable("avatarUrls", \.avatarUrls),
        .field("joinedAt", \.member.joinedAt), .field("role", \.member.role, Shapes.role),
    ]
}

struct GroupView: View {
    let group: GroupRecord
    let members: [MemberView]?
    let image: ImageView?
    var imageUrl: String? { image?.url }
    init(_ g: GroupRecord, members: [MemberRecord]? = nil, media: MediaStore) {
        group = g
        self.members = members?.map { MemberView($0, media: media) }
        image = g.imageMediaId.map { media.view($0, meta: g.imageMeta) }
    }

    var inviteCode: String? { group.inviteCode.map(InviteCode.display) }
    var role: String { group.role ?? "member" }
    var newsletter: NewsletterView { NewsletterView(schedule: group.schedule) }
    /// The reader's own choice: how they take the newsletter.
    var newsletterDelivery: String { group.newsletterDelivery ?? "app" }

    static let fields: [ViewField<Self>] = [
        .field("id", \.group.id), .field("kind", \.group.kind.rawValue, .oneOf(GroupKind.allCases.map(\.rawValue))), .field("name", \.group.name),
        .nullable("imageMediaId", \.group.imageMediaId), .nullable("imageUrl", \.imageUrl), .nullable("image", \.image), .nullable("inviteCode", \.inviteCode), .field("role", \.role, Shapes.role),
        .field("newsletter", \.newsletter),
        .field("newsletterDelivery", \.newsletterDelivery, .oneOf(Preferences.deliveries)), .field("createdAt", \.group.createdAt), .field("updatedAt", \.group.updatedAt),
        .omitted("members", \.members),
    ]
}

/// Someone whose stories the reader hides.
struct HiddenAuthorView: View {
    let author: HiddenAuthorRecord
    let avatarUrls: ImageSizes?
    var avatarUrl: String? { avatarUrls?.full }
    init(_ a: HiddenAuthorRecord, media: MediaStore) { author = a; avatarUrls = media.urls.avatarSizes(a.avatarMediaId, owner: a.userId, picture: a.pictureUrl) }

    static let fields: [ViewField<Self>] = [
        .field("id", \.author.userId), .nullable("fullName", \.author.fullName), .nullable("avatarUrl", \.avatarUrl),
        .nullable("avatarUrls", \.avatarUrls),
        .field("hiddenAt", \.author.hiddenAt),
    ]
}

struct StoryView: View {
    let story: StoryRecord
    /// Each image with its signed URLs by size, its size and placeholder.
    let media: [ImageView]
    init(_ s: StoryRecord, media: MediaStore) { story = s; self.media = s.mediaIds.map { media.view($0, meta: s.images) } }

    static let fields: [ViewField<Self>] = [
        .field("id", \.story.id), .field("authorId", \.story.authorId), .field("text", \.story.text, storyTextSchema),
        .nullable("backgroundColor", \.story.backgroundColor, colorSchema), .field("groupIds", \.story.groupIds), .field("media", \.media),
        .field("commentCount", \.story.commentCount, .integer(0...Int.max)), .nullable("place", { $0.story.place.map(PlaceView.init) }),
        .nullable("promptId", \.story.promptId, promptIdSchema), .field("createdAt", \.story.createdAt), .field("updatedAt", \.story.updatedAt),
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

/// A newsletter ready to mail to one member (for notify): the subject, and the text and HTML parts.
struct NewsletterCopyView: View {
    let subject: String
    let text: String
    let html: String
    static let fields: [ViewField<Self>] = [.field("subject", \.subject), .field("text", \.text), .field("html", \.html)]
}
