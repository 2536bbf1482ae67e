import Events
import Features
import Foundation
import Models
import Postgres
import Synchronization
import Web

// MARK: - The newsletter document

/// A group's newsletter for one period: every member's stories, grouped by member and local day. A view, read back
/// from storage as `Decodable`. Empty names, avatars and colours are left out.
struct NewsletterDocument: Decodable, Equatable, View {
    struct Period: Decodable, Equatable, View {
        let from: String; let to: String; let timeZone: String
        static let fields: [ViewField<Self>] = [.field("from", \.from, .dateTime), .field("to", \.to, .dateTime), .field("timeZone", \.timeZone)]
    }
    struct Story: Decodable, Equatable, View {
        let id: String
        let text: String
        let backgroundColor: String?
        let media: [Media]
        let commentCount: Int
        let createdAt: String
        /// As the story was when the newsletter was made; nil in one stored before this was kept, shown as `createdAt`.
        let updatedAt: String?
        /// The place its author chose to give it; absent when none.
        var place: PlaceView? = nil
        /// The prompt it answers (`GroupPrompts`); absent when none.
        var promptId: String? = nil
        static let fields: [ViewField<Self>] = [
            .field("id", \.id, .uuid), .field("text", \.text), .omitted("backgroundColor", \.backgroundColor, colorSchema),
            .field("media", \.media), .field("commentCount", \.commentCount, .integer(0...Int.max)), .field("createdAt", \.createdAt, .dateTime),
            .field("updatedAt", { $0.updatedAt ?? $0.createdAt }, .dateTime), .omitted("place", \.place),
            .omitted("promptId", \.promptId, promptIdSchema),
        ]
    }
    /// An image as `ImageView` gives it: its size and placeholder kept with the document (absent in one stored
    /// before they were), its URLs signed when shown.
    struct Media: Decodable, Equatable, View {
        let id: String; let url: String
        var width: Int? = nil; var height: Int? = nil; var placeholder: String? = nil
        /// Signed when the document is shown (`signed`); not stored.
        var urls: ImageSizes? = nil
        static let fields: [ViewField<Self>] = [
            .field("id", \.id, .uuid), .field("url", \.url), .omitted("urls", \.urls), .omitted("width", \.width, .integer(1...Int.max)),
            .omitted("height", \.height, .integer(1...Int.max)), .omitted("placeholder", \.placeholder),
        ]
    }
    struct Day: Decodable, Equatable, View {
        let date: String; let stories: [Story]
        static let fields: [ViewField<Self>] = [.field("date", \.date, Shapes.day), .field("stories", \.stories)]
    }
    struct Member: Decodable, Equatable, View {
        let id: String
        let fullName: String?
        let avatarMediaId: String?
        /// Signed when the document is shown (`signed`); not stored.
        var avatarUrl: String? = nil
        /// Signed when the document is shown (`signed`); not stored.
        var avatarUrls: ImageSizes? = nil
        /// False for someone who posted in the period and has left since.
        let isMember: Bool
        var days: [Day]
        static let fields: [ViewField<Self>] = [
            .field("id", \.id, .uuid), .omitted("fullName", \.fullName), .omitted("avatarMediaId", \.avatarMediaId, .uuid),
            .omitted("avatarUrl", \.avatarUrl), .omitted("avatarUrls", \.avatarUrls),
            .field("isMember", \.isMember), .field("days", \.days),
        ]
    }
    let groupId: String
    let groupName: String
    let period: Period
    var storyCount: Int
    var members: [Member]
    /// The habits members share with the group; nil in one stored before habits were kept.
    var habits: [Habit]? = nil

    /// The document as shown: each photo's path (as stored) and each avatar a signed URL valid for `lifetime`, an
    /// app's while it reads it, an e-mail's for weeks.
    func signed(_ media: MediaStore, lifetime: TimeInterval) -> NewsletterDocument {
        var doc = self
        for m in doc.members.indices {
            if let owner = UUID(uuidString: doc.members[m].id) {
                doc.members[m].avatarUrls = media.urls.avatarSizes(doc.members[m].avatarMediaId.flatMap(UUID.init(uuidString:)), owner: owner,
                                                                   lifetime: lifetime)
                doc.members[m].avatarUrl = doc.members[m].avatarUrls?.full
            }
            doc.members[m].days = doc.members[m].days.map { day in
                Day(date: day.date, stories: day.stories.map { s in
                    Story(id: s.id, text: s.text, backgroundColor: s.backgroundColor,
                          media: s.media.map { m in
                              let urls = UUID(uuidString: m.id).map { media.view($0, lifetime: lifetime).urls }
                              return Media(id: m.id, url: urls?.full ?? media.url(m.id, lifetime: lifetime), width: m.width, height: m.height,
                                           placeholder: m.placeholder, urls: urls)
                          },
                          commentCount: s.commentCount, createdAt: s.createdAt, updatedAt: s.updatedAt, place: s.place, promptId: s.promptId)
                })
            }
        }
        return doc
    }

    static let fields: [ViewField<Self>] = [
        .field("groupId", \.groupId, .uuid), .field("groupName", \.groupName), .field("period", \.period),
        .field("storyCount", \.storyCount, .integer(0...Int.max)), .field("members", \.members),
        .omitted("trips", { let trips = $0.trips; return trips.isEmpty ? nil : trips }), .omitted("habits", \.habits),
        .omitted("answers", { let answers = $0.answers; return answers.isEmpty ? nil : answers }),
    ]
}

extension NewsletterDocument {
    /// The document without the parts of `users` (an erased person, the authors a reader hides).
    func without(_ users: Set<UUID>) -> NewsletterDocument {
        guard !users.isEmpty else { return self }
        var doc = self
        let theirs = doc.members.filter { UUID(uuidString: $0.id).map(users.contains) == true }
        doc.members.removeAll { UUID(uuidString: $0.id).map(users.contains) == true }
        doc.storyCount -= theirs.reduce(0) { $0 + $1.days.reduce(0) { $0 + $1.stories.count } }
        doc.habits?.removeAll { UUID(uuidString: $0.memberId).map(users.contains) == true }
        return doc
    }

    /// The document without one story (taken down), and without a day it leaves empty.
    func without(story: UUID) -> NewsletterDocument {
        var doc = self
        for m in doc.members.indices {
            doc.members[m].days = doc.members[m].days.compactMap { day in
                let kept = day.stories.filter { UUID(uuidString: $0.id) != story }
                doc.storyCount -= day.stories.count - kept.count
                return kept.isEmpty ? nil : NewsletterDocument.Day(date: day.date, stories: kept)
            }
        }
        return doc
    }
}

/// The newsletters read lately, each with the group's content version, name and time zone it was built from. A read
/// whose group still says all three gets the document from memory instead of from the four queries that build it:
/// a period's newsletter changes only with a change that raises the version (migration 10's triggers, in the writing
/// transaction, whichever instance or operator wrote), so it is never served stale, on any instance. Bounded by
/// `budget` (an estimate of the documents' size); the least recently read go first.
final class NewsletterCache: Sendable {
    struct Key: Hashable, Sendable { let group: UUID; let from: Date; let to: Date }
    struct Stamp: Equatable, Sendable {
        let version: Int64; let name: String; let timeZone: String
        init(version: Int64, _ group: GroupRecord) { self.version = version; name = group.name; timeZone = group.schedule.timeZone }
    }
    private struct Entry: Sendable { let stamp: Stamp; let document: NewsletterDocument; let bytes: Int; var read: UInt64 }
    private struct State: Sendable { var entries: [Key: Entry] = [:]; var bytes = 0; var clock: UInt64 = 0 }
    private let state = Mutex(State())
    let budget: Int

    init(budget: Int = 8 << 20) { self.budget = budget }

    func document(_ key: Key, _ stamp: Stamp) -> NewsletterDocument? {
        state.withLock { s in
            guard var entry = s.entries[key], entry.stamp == stamp else { return nil }
            s.clock += 1; entry.read = s.clock; s.entries[key] = entry
            return entry.document
        }
    }

    /// Keeps `document`, unless a document built from a newer version is kept already (a slower reader's).
    func store(_ document: NewsletterDocument, _ key: Key, _ stamp: Stamp) {
        let bytes = document.members.reduce(512) { size, member in
            member.days.reduce(size + 256) { size, day in
                day.stories.reduce(size + 64) { $0 + 256 + $1.text.utf8.count + 96 * $1.media.count }
            }
        }
        guard bytes <= budget / 8 else { return }
        state.withLock { s in
            if let old = s.entries[key] {
                guard old.stamp.version <= stamp.version else { return }
                s.bytes -= old.bytes
            }
            s.clock += 1
            s.entries[key] = Entry(stamp: stamp, document: document, bytes: bytes, read: s.clock)
            s.bytes += bytes
            guard s.bytes > budget else { return }
            for (key, entry) in s.entries.sorted(by: { $0.value.read < $1.value.read }) where s.bytes > budget * 3 / 4 {
                s.entries[key] = nil; s.bytes -= entry.bytes
            }
        }
    }
}

extension Schedule {
    /// The periods this schedule makes.
    var periods: NewsletterSchedule {
        NewsletterSchedule(frequency: frequency, weekday: weekday, hour: hour,
                           timeZone: TimeZone(identifier: timeZone) ?? TimeZone(identifier: "UTC")!,
                           count: count, startDate: startDate, dayOfMonth: dayOfMonth)
    }
}

/// The newsletter rules: what a period's document holds, and compiling each closed period once.
struct Newsletters: Sendable {
    let pool: Pool
    let storage: StoriesStorage
    let outbox: Outbox
    let cache: NewsletterCache

    /// `document`, from the cache while the group is as `group` says and its content version unchanged (read here,
    /// before the document is built: a version no newer than the stories the document is then built from). The
    /// shared habits are read each time: their streaks move with the days.
    func read(_ c: Connection, group: GroupRecord, from: Date, to: Date) throws -> NewsletterDocument {
        let key = NewsletterCache.Key(group: group.id, from: from, to: to)
        let stamp = NewsletterCache.Stamp(version: try storage.contentVersion(c, group: group.id), group)
        var doc: NewsletterDocument
        if let cached = cache.document(key, stamp) {
            doc = cached
        } else {
            doc = try document(c, group: group, from: from, to: to)
            cache.store(doc, key, stamp)
        }
        doc.habits = try habits.shared(c, group: group, from: from, to: to)
        return doc
    }

    /// The newsletter of `group` for [from, to): current members (in joining order, even with nothing posted) and
    /// anyone else who posted in the period.
    func document(_ c: Connection, group: GroupRecord, from: Date, to: Date) throws -> NewsletterDocument {
        let zone = TimeZone(identifier: group.schedule.timeZone) ?? TimeZone(identifier: "UTC")!
        let (stories, media) = try storage.storiesInPeriod(c, group: group.id, from: from, to: to)
        let meta = try ImageMeta.load(media.values.flatMap { $0 }, schema: "stories", on: c)
        let current = try storage.members(c, of: group.id)
        let memberIds = Set(current.map(\.userId))
        let formerAuthors = Array(Set(stories.map(\.authorId)).subtracting(memberIds)).sorted { $0.uuidString < $1.uuidString }
        let profiles = try storage.profiles(c, formerAuthors)
        let byAuthor = Dictionary(grouping: stories, by: \.authorId)
        func days(_ author: UUID) -> [NewsletterDocument.Day] {
            let mine = byAuthor[author] ?? []
            var order: [String] = []
            var grouped: [String: [NewsletterDocument.Story]] = [:]
            for s in mine {
                let day = LocalDay.of(s.createdAt, in: zone)
                if grouped[day] == nil { order.append(day) }
                grouped[day, default: []].append(NewsletterDocument.Story(
                    id: s.id.lowercased, text: s.text, backgroundColor: s.backgroundColor,
                    media: (media[s.id] ?? []).map {
                        .init(id: $0.lowercased, url: "/v1/media/\($0.lowercased)", width: meta[$0]?.width, height: meta[$0]?.height,
                              placeholder: meta[$0]?.placeholder)
                    },
                    commentCount: s.commentCount, createdAt: Timestamp.format(s.createdAt), updatedAt: Timestamp.format(s.updatedAt),
                    place: s.place.map(PlaceView.init), promptId: s.promptId))
            }
            return order.map { .init(date: $0, stories: grouped[$0]!) }
        }
        let people = current.map {
            NewsletterDocument.Member(id: $0.userId.lowercased, fullName: $0.fullName, avatarMediaId: $0.avatarMediaId?.lowercased,
                                      isMember: true, days: days($0.userId))
        } + formerAuthors.map {
            NewsletterDocument.Member(id: $0.lowercased, fullName: profiles[$0]?.fullName, avatarMediaId: profiles[$0]?.avatar?.lowercased,
                                      isMember: false, days: days($0))
        }
        return NewsletterDocument(groupId: group.id.lowercased, groupName: group.name,
                                  period: .init(from: Timestamp.format(from), to: Timestamp.format(to), timeZone: zone.identifier),
                                  storyCount: stories.count, members: people)
    }

    /// The schedule of a group's newsletter.
    static func schedule(_ g: GroupRecord) throws -> NewsletterSchedule { g.schedule.periods }

    /// Compiles the newsletters of every period that has closed: once per group and period, whatever the number of
    /// instances (row locks and a unique period) and restarts (the close time is stored). Emits `newsletter.compiled`
    /// Returns how many it compiled.
    @discardableResult
    func compileDueNewsletters(now: Date = Date()) throws -> Int {
        var compiled = 0
        while true {
            let batch: Int = try pool.withTransaction { c in
                let due = try storage.dueGroups(c, at: now, limit: 20)
                for (group, closesAt) in due {
                    let schedule = try Self.schedule(group)
                    guard let end = closesAt else {
                        try storage.setNewsletterDue(c, group: group.id, at: schedule.nextClose(after: now))
                        continue
                    }
                    let start = schedule.previousClose(atOrBefore: end.addingTimeInterval(-1))
                    var doc = try document(c, group: group, from: start, to: end)
                    doc.habits = try habits.shared(c, group: group, from: start, to: end, now: now)
                    let content = String(decoding: JSON.encode(doc), as: UTF8.self)
                    if let (id, at) = try storage.storeNewsletter(c, group: group.id, from: start, to: end,
                                                                   storyCount: doc.storyCount, content: content) {
                        let members = doc.members.filter(\.isMember).compactMap { UUID(uuidString: $0.id) }
                        let deliveries = try storage.newsletterDeliveries(c, group: group.id)
                        func taking(_ way: String) -> [UUID] { members.filter { deliveries[$0] == way } }
                        try outbox.add(NewsletterCompiled(groupId: group.id, newsletterId: id,
                                                          periodStart: start, periodEnd: end,
                                                          storyCount: doc.storyCount, memberIds: members,
                                                          emailMemberIds: taking("email"), offMemberIds: taking("off"),
                                                          compiledAt: at), subject: group.id.lowercased, on: c)
                        compiled += 1
                    }
                    try storage.setNewsletterDue(c, group: group.id, at: schedule.nextClose(after: end))
                }
                return due.count
            }
            if batch == 0 { return compiled }
        }
    }

    /// Reminds the members of each group who have posted nothing yet in a period about to close
    /// (`NewsletterSchedule.reminder(before:)`): `reminder.due`, once per group and period whatever the number of
    /// instances (row locks; the next reminder's time is stored). A reminder missed by more than its period (the
    /// service was down) is not sent late. Returns how many groups it reminded.
    @discardableResult
    func sendDueReminders(now: Date = Date()) throws -> Int {
        var reminded = 0
        while true {
            let batch: Int = try pool.withTransaction { c in
                let due = try storage.dueReminders(c, at: now, limit: 20)
                for (group, at) in due {
                    let schedule = try Self.schedule(group)
                    let period = schedule.period(containing: now)
                    if let at, at <= now, schedule.reminder(before: period.end) <= now {
                        let (stories, _) = try storage.storiesInPeriod(c, group: group.id, from: period.start, to: now)
                        let posted = Set(stories.map(\.authorId))
                        let prompt = try GroupPrompts(storage: storage).offered(c, group: group.id, periodStart: period.start)
                        for member in try storage.members(c, of: group.id) where !posted.contains(member.userId) {
                            try outbox.add(ReminderDue(userId: member.userId, groupId: group.id, reason: .noStoryInPeriod,
                                                       periodStart: period.start, periodEnd: period.end, prompt: prompt),
                                           subject: member.userId.lowercased, on: c)
                        }
                        reminded += 1
                    }
                    // This period's reminder when it is still ahead (a group just made, a reminder missed while down), else
                    // the next period's.
                    let this = schedule.reminder(before: period.end)
                    try storage.setReminderDue(c, group: group.id, at: this > now ? this : schedule.reminder(before: schedule.nextClose(after: period.end)))
                }
                return due.count
            }
            if batch == 0 { return reminded }
        }
    }
}
