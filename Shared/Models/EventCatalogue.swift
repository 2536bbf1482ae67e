/// The topics the backend publishes, for the programs that consume them: who writes each, its key, and who reads it.
/// Services create the topics they produce from here; each topic's JSON Schema (`Shared/Models/Schemas`, from its
/// payload's type), `docs/asyncapi.json` and `docs/events.md` are generated from it (`EventCatalogueTests`), and a
/// test checks it against what the running services register. A consumer's dead-letter topic is its topic + `.dlq`.
public enum EventCatalogue {
    public struct Topic: Sendable {
        /// The topic, also the CloudEvents `type`.
        public let name: String
        /// Its events' `data`, whose type gives the topic's JSON Schema (`EventSchema.document`).
        public let payload: any EventPayload.Type
        /// What the Kafka key (and the CloudEvents `subject`) is.
        public let key: String
        public let summary: String
        /// The service that publishes it.
        public let producer: String
        /// Published without the outbox: it may be lost, and is replaced by the next one.
        public let ephemeral: Bool
        /// What reads it inside the backend.
        public let readers: [Reader]
    }

    /// A reader of a topic: a consumer group (`<KAFKA_GROUP_PREFIX><service>-<name>`, with a dead-letter topic
    /// `<topic>.dlq`) or a live feed (no group: it reads from the end, or from the beginning for revocations).
    public struct Reader: Sendable, Hashable, CustomStringConvertible {
        public let service: String
        public let name: String
        public let isFeed: Bool
        public init(service: String, name: String, isFeed: Bool) { self.service = service; self.name = name; self.isFeed = isFeed }
        public var description: String { "\(service) \(isFeed ? "live feed" : "consumer group") \(name)" }
        static func group(_ service: String, _ name: String) -> Reader { Reader(service: service, name: name, isFeed: false) }
        static func feed(_ service: String, _ name: String) -> Reader { Reader(service: service, name: name, isFeed: true) }
    }

    static func topic(_ payload: any EventPayload.Type, key: String, by producer: String, _ summary: String, ephemeral: Bool = false,
                      readers: [Reader] = []) -> Topic {
        Topic(name: payload.type, payload: payload, key: key, summary: summary, producer: producer, ephemeral: ephemeral, readers: readers)
    }

    /// The topic's JSON Schema, generated from its payload's type.
    public static func schema(of topic: Topic) throws -> OrderedJSON {
        try EventSchema.document(of: topic.payload, producer: topic.producer, key: topic.key, summary: topic.summary)
    }

    /// Every service but auth reads revocations with a live reader of its own.
    static let revocationReaders: [Reader] = ["chat", "curation", "dispatch", "notify", "stories"].map { .feed($0, "revocations") }
    static let profileReaders: [Reader] = [.group("chat", "directory"), .group("curation", "profiles"), .group("dispatch", "profiles"),
                                           .group("stories", "profiles")]
    static let directory: [Reader] = [.group("chat", "directory")]
    static let blockReaders: [Reader] = [.group("chat", "directory"), .group("curation", "profiles"), .group("stories", "profiles")]
    static let chatFeed: [Reader] = [.feed("chat", "chat-rooms")]
    /// notify's consumer: what becomes a mail or a push (its group is still named for the first of them).
    static let mail: [Reader] = [.group("notify", "mail")]

    public static let topics: [Topic] = [
        topic(UserRegistered.self, key: "user id", by: "auth", "A new account exists.", readers: profileReaders + mail),
        topic(UserUpdated.self, key: "user id", by: "auth", "A profile after a change.", readers: profileReaders + mail),
        topic(UserDeleted.self, key: "user id", by: "auth",
              "An account was erased: every service erases or anonymises what it holds of the user.", readers: profileReaders + mail),
        topic(EmailVerificationRequested.self, key: "user id", by: "auth",
              "A mail should prove the user's address; its link carries a single-use token (a secret: for the notification service alone).",
              readers: mail),
        topic(PasswordResetRequested.self, key: "user id", by: "auth",
              "Someone asked to reset a password; the mail's link carries a single-use token (a secret: for the notification service alone).",
              readers: mail),
        topic(UserSuspended.self, key: "user id", by: "auth",
              "A moderator suspended an account after a report of the person: it signs in no more, and its sessions ended."),
        topic(UserBlocked.self, key: "user id (of the one who blocked)", by: "auth",
              "Someone blocked another person: no direct room, their messages and comments hidden, no joining what they run.",
              readers: blockReaders),
        topic(UserUnblocked.self, key: "user id (of the one who had blocked)", by: "auth", "A block was lifted.", readers: blockReaders),
        topic(SessionRevoked.self, key: "user id", by: "auth",
              "Every access token of this session must stop working (logout, password change, refresh-token reuse, account deletion).",
              readers: revocationReaders),
        topic(GroupCreated.self, key: "group id", by: "stories", "A group or journal exists.", readers: directory),
        topic(GroupMemberJoined.self, key: "group id", by: "stories", "Someone joined a group by its invite code.",
              readers: directory),
        topic(GroupMemberLeft.self, key: "group id", by: "stories", "Someone left a group or was removed.",
              readers: directory),
        topic(StoryCreated.self, key: "story id", by: "stories",
              "A story was posted to one or more groups (its text stays out of the event).", readers: mail),
        topic(StoryCommented.self, key: "story id", by: "stories", "A comment on a story.", readers: mail),
        topic(StoryTakenDown.self, key: "story id", by: "stories",
              "An operator took a reported story down: it is gone for every member of every group it was in."),
        topic(NewsletterCompiled.self, key: "group id", by: "stories", "A group's period closed and its newsletter is stored.", readers: mail),
        topic(ReminderDue.self, key: "user id", by: "stories", "A member has posted nothing yet in a period that closes soon (`periodEnd`): a day before a weekly one closes, three hours before a daily one, not at night in the group's time zone.", readers: mail),
        topic(HabitCreated.self, key: "habit id", by: "stories", "Someone set themselves a habit in their journal (its title stays out of the event)."),
        topic(HabitUpdated.self, key: "habit id", by: "stories",
              "A habit was renamed, given another target or time zone, or shared with a group's newsletter or no longer."),
        topic(HabitDayMarked.self, key: "habit id", by: "stories", "A day of a habit was marked done (alone or with a story), or no longer."),
        topic(HabitDeleted.self, key: "habit id", by: "stories", "Someone deleted a habit with its days."),
        topic(ChatRoomCreated.self, key: "room id", by: "chat",
              "A team room, the direct room of a pair, or the conversation of a parcel exists.", readers: chatFeed),
        topic(ChatRoomUpdated.self, key: "room id", by: "chat",
              "A room's name or topic changed, or a parcel's conversation closed.", readers: chatFeed),
        topic(ChatMemberJoined.self, key: "room id", by: "chat", "Someone is in a room now.", readers: chatFeed + mail),
        topic(ChatMemberLeft.self, key: "room id", by: "chat", "Someone left a room or was removed.", readers: chatFeed + mail),
        topic(ChatMessageCreated.self, key: "room id", by: "chat",
              "A message was posted; `messageSeq` is its place in the room, gap-free; `mentionedIds` the members it names.",
              readers: chatFeed + mail),
        topic(ChatMessageEdited.self, key: "room id", by: "chat", "A message's author changed its text.", readers: chatFeed),
        topic(ChatMessageDeleted.self, key: "room id", by: "chat", "A message's author deleted it, or an operator took it down after a report (`reportId`); it keeps its place.",
              readers: chatFeed),
        topic(TodoCreated.self, key: "room id", by: "chat", "An item was added to a room's todo list.", readers: chatFeed),
        topic(TodoUpdated.self, key: "room id", by: "chat",
              "An item was renamed, checked off or on, assigned, given a due time or moved.", readers: chatFeed),
        topic(TodoDeleted.self, key: "room id", by: "chat", "An item was removed from a room's list.", readers: chatFeed),
        topic(ChatTyping.self, key: "room id", by: "chat", "Someone is typing in a room.", ephemeral: true, readers: chatFeed),
        topic(ParcelCreated.self, key: "parcel id", by: "dispatch", "Someone booked a delivery.", readers: directory + mail),
        topic(ParcelClaimed.self, key: "parcel id", by: "dispatch",
              "Someone became a parcel's recipient after its booking: with the claim code its sender passed on, or as the "
                + "person the sender named, once dispatch heard of them.", readers: directory + mail),
        topic(ParcelStatusChanged.self, key: "parcel id", by: "dispatch",
              "One transition of a parcel; the key keeps a parcel's transitions in order.",
              readers: directory + mail + [.feed("dispatch", "parcel-tracking")]),
        topic(PaymentRecorded.self, key: "payment id", by: "dispatch",
              "One entry of a parcel's payment ledger: a card authorised, declined, captured or voided, cash collected, or the wallet debited or paid back."),
        topic(PaymentRefunded.self, key: "payment id", by: "dispatch",
              "An operator refunded part or all of a delivered parcel's payment, to the card or to the payer's wallet."),
        topic(LoyaltyRecorded.self, key: "user id", by: "dispatch",
              "A sender's loyalty points changed: earned for a delivered parcel, spent on a booking, returned when it was called off."),
        topic(WalletRecorded.self, key: "user id", by: "dispatch",
              "A sender's wallet changed: topped up by card, spent on a booking, paid back when it was called off."),
        topic(PlanRecorded.self, key: "subscription id", by: "dispatch",
              "A subscription to a plan started, renewed, was declined, lapsed, or will not renew."),
        topic(PaymentActionRequired.self, key: "user id", by: "dispatch",
              "A card payment made without its holder (a plan's renewal) needs them to authenticate it (3-D Secure) in the app by `authenticateBy`.",
              readers: mail),
        topic(CourierVetted.self, key: "courier id", by: "dispatch",
              "A courier applied to deliver, or an operator approved, rejected, suspended or reinstated them."),
        topic(PaymentReceiptIssued.self, key: "user id (the payer)", by: "dispatch",
              "A payment taken by card got its receipt: its number, its total with the tax included and its lines.", readers: mail),
        topic(CourierLocation.self, key: "courier id", by: "dispatch", "A courier's position.", ephemeral: true,
              readers: [.group("dispatch", "fleet"), .feed("dispatch", "parcel-tracking")]),
        topic(VideoLiked.self, key: "video id", by: "curation", "Someone liked a video, or took the like back."),
        topic(VideoWatched.self, key: "video id", by: "curation", "Someone watched part or all of a video."),
        topic(VideoCommentTakenDown.self, key: "video id", by: "curation",
              "An operator took a reported comment down: it is gone for every reader."),
        topic(VideoCommented.self, key: "video id", by: "curation", "Someone commented on a video (the text stays out)."),
        topic(PlaylistUpdated.self, key: "playlist id", by: "curation", "A playlist was created, changed or deleted."),
    ]

    /// The topics `service` publishes.
    public static func produced(by service: String) -> [String] {
        topics.filter { $0.producer == service }.map(\.name)
    }

    /// Every topic, with the dead-letter topics of those a consumer group reads: what a topic-creation job creates.
    public static var allTopicNames: [String] {
        let dlq = topics.filter { $0.readers.contains { !$0.isFeed } }.map { $0.name + ".dlq" }
        return (topics.map(\.name) + dlq).sorted()
    }
}
