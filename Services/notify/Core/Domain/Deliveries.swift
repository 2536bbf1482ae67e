import Events
import Features
import Foundation
import Mail
import Models
import Postgres
import Runtime

/// The delivery rules. Each (event, person, channel) is recorded once, in the transaction that marks the event
/// processed (for push, once per subscription and per device of the app it belongs to), so a replayed or repeated
/// event sends nothing twice; the senders send what is due: at once in normal operation, again with backoff after a
/// temporary failure (up to `maxAttempts`), never after a permanent one or once what it is about has expired.
struct Deliveries: Sendable {
    let storage: NotifyStorage
    let mails: Mails
    let notices: Notices
    /// Chat messages to a member are told of at most once per room in this many seconds (`CHAT_WINDOW_SECONDS`,
    /// 180); a mention at once.
    let chatWindow: TimeInterval
    /// New stories in a group are told to its members once per window of this many seconds (`GROUP_DIGEST_SECONDS`,
    /// a day, windows starting at midnight UTC), when it closes.
    let digestWindow: TimeInterval

    static let maxAttempts = 8

    /// The events notify reads, for its consumer.
    static let payloads: [any EventPayload.Type] = [
        UserRegistered.self, UserUpdated.self, EmailVerificationRequested.self, PasswordResetRequested.self, ReminderDue.self,
        NewsletterCompiled.self, ParcelCreated.self, ParcelClaimed.self, ParcelStatusChanged.self, ChatMemberJoined.self, ChatMemberLeft.self,
        ChatMessageCreated.self, StoryCreated.self, StoryCommented.self, PaymentActionRequired.self, PaymentReceiptIssued.self,
    ]

    /// How long a receipt is worth mailing (a notify catching up later still sends the month's).
    static let receiptLifetime: TimeInterval = 30 * 86_400

    /// How long a compiled newsletter is worth mailing.
    static let newsletterLifetime: TimeInterval = 7 * 86_400

    /// Records what `event` asks to deliver: nothing for an account erased since, a repeat, or something that
    /// expired already (a notify started long after, reading the topic from its start, sends no stale links).
    func record(_ event: ReceivedEvent, _ c: Connection) throws {
        switch event.type {
        case UserRegistered.type, UserUpdated.type:
            let (user, email, verified): (UUID, String, Bool?)
            if event.type == UserRegistered.type {
                let e = try event.decode(UserRegistered.self)
                (user, email, verified) = (e.userId, e.email, e.emailVerified)
            } else {
                let e = try event.decode(UserUpdated.self)
                (user, email, verified) = (e.userId, e.email, e.emailVerified)
            }
            guard try !Erasure.isErased(user, schema: "notify", on: c) else { return }
            try storage.recordPerson(c, user, email: email, verified: verified ?? false)
        case NewsletterCompiled.type:
            let e = try event.decode(NewsletterCompiled.self)
            let expires = e.compiledAt.addingTimeInterval(Self.newsletterLifetime)
            guard expires > Date() else { return }
            // By mail to those who asked for it so, at an address they proved, unless they unsubscribed.
            for id in Set(e.emailMemberIds ?? []) {
                guard try !Erasure.isErased(id, schema: "notify", on: c),
                      let address = try storage.provenAddress(c, id), try storage.allows(c, id, kind: "newsletter", channel: "email") else { continue }
                _ = try storage.record(c, id: UUID.v7(), eventId: event.id, user: id, kind: "newsletter", address: address,
                                       subject: "Your group's newsletter", text: nil, html: nil, expiresAt: expires, reference: e.newsletterId.lowercased)
            }
            // Ready, by push and in the app, to the members but those who asked for no word of it.
            let off = Set(e.offMemberIds ?? [])
            try tell(event, c, to: e.memberIds.filter { !off.contains($0) }, notices.newsletterReady(e))
        case StoryCommented.type:
            // The story's author hears of a comment, unless it is their own.
            let e = try event.decode(StoryCommented.self)
            guard e.authorId != e.storyAuthorId else { return }
            try tell(event, c, to: [e.storyAuthorId], notices.comment(e))
        case StoryCreated.type:
            try digest(try event.decode(StoryCreated.self), c)
        case ChatMemberJoined.type:
            let e = try event.decode(ChatMemberJoined.self)
            try storage.joinRoom(c, e.roomId, e.userId)
        case ChatMemberLeft.type:
            let e = try event.decode(ChatMemberLeft.self)
            try storage.leaveRoom(c, e.roomId, e.userId)
        case ChatMessageCreated.type:
            let e = try event.decode(ChatMessageCreated.self)
            let room = e.roomId
            let others = try storage.roomMembers(c, room).filter { $0 != e.authorId }
            let mentioned = Set(e.mentionedIds ?? []).intersection(others)
            if !mentioned.isEmpty { try push(event, c, to: Array(mentioned), notices.mention(e)) }
            // The rest hear of the room once per window, when it closes, and only if they have not read it by then.
            let at = e.createdAt
            let window = (at.timeIntervalSince1970 / chatWindow).rounded(.down) * chatWindow
            let closes = Date(timeIntervalSince1970: window + chatWindow)
            let rest = others.filter { !mentioned.contains($0) }
            try storage.recordPush(c, eventId: "chat:\(room.lowercased):\(Int(window))", to: try storage.pushTargets(c, rest, kind: "chat_message"),
                                   devices: try storage.deviceTargets(c, rest, kind: "chat_message", app: Apps.of(kind: "chat_message")),
                                   kind: "chat_message", title: "New messages", payload: nil, ttl: 86_400, urgency: "normal",
                                   topic: "room" + room.lowercased.replacingOccurrences(of: "-", with: "").prefix(28),
                                   expiresAt: closes.addingTimeInterval(86_400), at: closes, reference: room.lowercased)
        case EmailVerificationRequested.type:
            let e = try event.decode(EmailVerificationRequested.self)
            try mail(event, c, to: e.userId, at: e.email, kind: "email_verification", expires: e.expiresAt, app: e.app, mails.verification(e))
        case PasswordResetRequested.type:
            let e = try event.decode(PasswordResetRequested.self)
            try mail(event, c, to: e.userId, at: e.email, kind: "password_reset", expires: e.expiresAt, app: e.app, mails.reset(e))
        case PaymentReceiptIssued.type:
            // To the payer, at an address they proved: a receipt is no business of whoever typed an address in.
            let e = try event.decode(PaymentReceiptIssued.self)
            guard let address = try storage.provenAddress(c, e.payerId) else { return }
            try mail(event, c, to: e.payerId, at: address, kind: "payment_receipt", expires: e.issuedAt.addingTimeInterval(Self.receiptLifetime),
                     app: nil, mails.receipt(e))
        case ReminderDue.type:
            let e = try event.decode(ReminderDue.self)
            try push(event, c, to: [e.userId], notices.reminder(e, language: try storage.language(c, of: e.userId)))
        case PaymentActionRequired.type:
            // By push and in the app's list, where its link stays until the payment is given up.
            let e = try event.decode(PaymentActionRequired.self)
            let notice = notices.paymentAction(e)
            guard notice.expiresAt > Date() else { return }
            try push(event, c, to: [e.userId], notice)
            try storage.recordInApp(c, eventId: event.id, to: [e.userId], kind: notice.kind, app: Apps.of(kind: notice.kind), title: notice.title,
                                    payload: notice.payload, reference: e.paymentId.lowercased)
        case ParcelCreated.type:
            let e = try event.decode(ParcelCreated.self)
            try storage.recordParcel(c, e.parcelId, sender: e.senderId, recipient: e.recipientUserId)
        case ParcelClaimed.type:
            let e = try event.decode(ParcelClaimed.self)
            try storage.recordParcel(c, e.parcelId, sender: e.senderId, recipient: e.recipientUserId)
        case ParcelStatusChanged.type:
            let e = try event.decode(ParcelStatusChanged.self)
            if e.to == .offered, let courier = e.courierId {
                try push(event, c, to: [courier], notices.offer(e))
            } else if let notice = notices.parcelStep(e) {
                // The step's own parties: it may be read before the parcel's `parcel.created` (another topic, in no
                // fixed order with this one). Those recorded from that topic serve steps that name none.
                let named = e.senderId.map { (sender: $0, recipient: e.recipientUserId) }
                guard let parties = try named ?? storage.parcelParties(c, e.parcelId) else { return }
                // The one who did it knows already.
                let people = [parties.sender, parties.recipient].compactMap { $0 }.filter { $0 != e.actorId }
                try push(event, c, to: people, notice)
            }
        default:
            return
        }
    }

    private func mail(_ event: ReceivedEvent, _ c: Connection, to id: UUID, at address: String, kind: String, expires expiresAt: Date,
                      app: String?, _ content: Mails.Content) throws {
        guard expiresAt > Date(), try !Erasure.isErased(id, schema: "notify", on: c) else { return }
        _ = try storage.record(c, id: UUID.v7(), eventId: event.id, user: id, kind: kind, address: address,
                               subject: content.subject, text: content.text, html: content.html, expiresAt: expiresAt,
                               app: ClientApp.named(app)?.id)
    }

    /// The members of a story's groups, but its author, hear of it in their group's digest of the window it was posted
    /// in: one per group, window and person (the delivery log's key), recorded at the first story, sent when the window
    /// closes and restated at each story after (a replayed story is counted once: `group_stories` holds it).
    private func digest(_ e: StoryCreated, _ c: Connection) throws {
        // An author erased since (`user.deleted` comes on another topic, perhaps first) is kept nowhere.
        let story = e.storyId, author = e.authorId
        guard try !Erasure.isErased(author, schema: "notify", on: c) else { return }
        let at = e.createdAt
        let start = (at.timeIntervalSince1970 / digestWindow).rounded(.down) * digestWindow
        let window = Date(timeIntervalSince1970: start), closes = Date(timeIntervalSince1970: start + digestWindow)
        guard closes.addingTimeInterval(86_400) > Date() else { return }  // read long after: stale
        for audience in e.audiences ?? [] {
            let group = audience.groupId
            let others = Array(Set(audience.memberIds).subtracting([author]))
            let counts = try storage.recordGroupStory(c, group: group, name: audience.name, window: window, story: story, author: author, for: others)
            let key = "digest:\(group.lowercased):\(Int(start))", kind = "group_stories_digest", app = Apps.of(kind: kind)
            for (person, count) in counts where count > 0 {
                let notice = Notices.digest(group: group.lowercased, name: audience.name, stories: count, closes: closes)
                try storage.recordPush(c, eventId: key, to: try storage.pushTargets(c, [person], kind: kind),
                                       devices: try storage.deviceTargets(c, [person], kind: kind, app: app), kind: kind, title: notice.title,
                                       payload: notice.payload, ttl: notice.ttl, urgency: notice.urgency, topic: notice.topic,
                                       expiresAt: notice.expiresAt, at: closes, reference: group.lowercased)
                try storage.recordInApp(c, eventId: key, to: [person], kind: kind, app: app, title: notice.title, payload: notice.payload,
                                        at: closes, reference: group.lowercased)
                try storage.restate(c, eventId: key, user: person, title: notice.title, payload: notice.payload)
            }
        }
    }

    /// By push, and in the app's list.
    private func tell(_ event: ReceivedEvent, _ c: Connection, to users: [UUID], _ notice: Notice) throws {
        guard notice.expiresAt > Date() else { return }
        try push(event, c, to: users, notice)
        try storage.recordInApp(c, eventId: event.id, to: Array(Set(users)), kind: notice.kind,
                                app: Apps.of(kind: notice.kind), title: notice.title, payload: notice.payload)
    }

    private func push(_ event: ReceivedEvent, _ c: Connection, to users: [UUID], _ notice: Notice) throws {
        guard notice.expiresAt > Date() else { return }
        let ids = Set(users)
        try storage.recordPush(c, eventId: event.id, to: try storage.pushTargets(c, Array(ids), kind: notice.kind),
                               devices: try storage.deviceTargets(c, Array(ids), kind: notice.kind, app: Apps.of(kind: notice.kind)),
                               kind: notice.kind, title: notice.title, payload: notice.payload, ttl: notice.ttl, urgency: notice.urgency, topic: notice.topic,
                               expiresAt: notice.expiresAt)
    }

    /// When to try again after `attempts` tries: 30 s, then 1, 2, 4 … minutes, at most an hour; nil: give up.
    static func retryDelay(after attempts: Int) -> TimeInterval? {
        attempts >= maxAttempts ? nil : min(3600, 30 * pow(2, Double(max(0, attempts - 1))))
    }
}
