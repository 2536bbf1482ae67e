import Foundation

/// What a stories group is: a group of people, or someone's journal.
public enum GroupKind: String, Codable, CaseIterable, Sendable { case group, journal }

/// A member's role in a stories group.
public enum GroupRole: String, Codable, CaseIterable, Sendable { case admin, member }

/// Why someone is no longer in a group or room: they left, or were removed.
public enum LeaveReason: String, Codable, CaseIterable, Sendable { case left, removed }

/// Why a reminder is due.
public enum ReminderReason: String, Codable, CaseIterable, Sendable { case noStoryInPeriod = "no_story_in_period" }

/// `group.created`: a group or journal exists. Key: the group id.
public struct GroupCreated: EventPayload, Equatable {
    public static let type = "group.created"
    public static let schema = EventSchema(["name": .init(minLength: 1, maxLength: 100)])
    public var groupId: UUID
    public var kind: GroupKind
    public var name: String
    public var createdBy: UUID
    public var createdAt: Date

    public init(groupId: UUID, kind: GroupKind, name: String, createdBy: UUID, createdAt: Date) {
        self.groupId = groupId; self.kind = kind; self.name = name; self.createdBy = createdBy; self.createdAt = createdAt
    }
}

/// `group.member_joined`: someone joined a group by its invite code. Key: the group id.
public struct GroupMemberJoined: EventPayload, Equatable {
    public static let type = "group.member_joined"
    public var groupId: UUID
    public var userId: UUID
    public var role: GroupRole
    public var joinedAt: Date

    public init(groupId: UUID, userId: UUID, role: GroupRole, joinedAt: Date) {
        self.groupId = groupId; self.userId = userId; self.role = role; self.joinedAt = joinedAt
    }
}

/// `group.member_left`: someone left or was removed. Key: the group id.
public struct GroupMemberLeft: EventPayload, Equatable {
    public static let type = "group.member_left"
    public var groupId: UUID
    public var userId: UUID
    public var reason: LeaveReason
    /// Who removed them (themself when they left).
    public var removedBy: UUID
    /// The member who became administrator because the last one left, if any.
    public var newAdminId: UUID?
    public var leftAt: Date

    public init(groupId: UUID, userId: UUID, reason: LeaveReason, removedBy: UUID, newAdminId: UUID?, leftAt: Date) {
        self.groupId = groupId; self.userId = userId; self.reason = reason; self.removedBy = removedBy
        self.newAdminId = newAdminId; self.leftAt = leftAt
    }
}

/// `story.created`: a story was posted to some groups. Key: the story id. The text is not in the event:
/// consumers that need it read the story through the API with the reader's token.
public struct StoryCreated: EventPayload, Equatable {
    public static let type = "story.created"
    public static let schema = EventSchema([
        "audiences": .described("Each of groupIds with its name and its members when the story was posted (the author among them): whom to tell of it"),
        "place": .described("Where the author chose to say the story was made: a name, and coordinates rounded to the chosen precision (exact 0.00001°, neighbourhood 0.01°, city 0.1°); absent when none"),
    ])
    public var storyId: UUID
    public var authorId: UUID
    public var groupIds: [UUID]
    public var mediaCount: Int
    public var createdAt: Date
    /// Each of `groupIds` with its name and its members when the story was posted: whom to tell of it (notify's
    /// daily digest), so that no consumer keeps a copy of every group's members. Absent in events from before it.
    public var audiences: [StoryAudience]?
    /// The place the author chose to give it, rounded as they chose; absent when none (and in events from before).
    public var place: StoryPlace?

    public init(storyId: UUID, authorId: UUID, groupIds: [UUID], mediaCount: Int, createdAt: Date,
                audiences: [StoryAudience]? = nil, place: StoryPlace? = nil) {
        self.storyId = storyId; self.authorId = authorId; self.groupIds = groupIds; self.mediaCount = mediaCount
        self.createdAt = createdAt; self.audiences = audiences; self.place = place
    }
}

/// A group a story went to: its name, and its members at the time (the author among them).
public struct StoryAudience: Codable, Sendable, Equatable {
    public var groupId: UUID
    public var name: String
    public var memberIds: [UUID]

    public init(groupId: UUID, name: String, memberIds: [UUID]) {
        self.groupId = groupId; self.name = name; self.memberIds = memberIds
    }
}

/// `story.commented`: a comment on a story. Key: the story id.
public struct StoryCommented: EventPayload, Equatable {
    public static let type = "story.commented"
    public var storyId: UUID
    public var commentId: UUID
    public var authorId: UUID
    public var storyAuthorId: UUID
    public var createdAt: Date

    public init(storyId: UUID, commentId: UUID, authorId: UUID, storyAuthorId: UUID, createdAt: Date) {
        self.storyId = storyId; self.commentId = commentId; self.authorId = authorId; self.storyAuthorId = storyAuthorId
        self.createdAt = createdAt
    }
}

/// `story.taken_down`: an operator took a reported story down; it is gone for every member of every group it was
/// in. Key: the story id.
public struct StoryTakenDown: EventPayload, Equatable {
    public static let type = "story.taken_down"
    public static let schema = EventSchema([
        "groupIds": .described("The groups it was posted to"), "authorId": .described("Absent when its author's account was erased"),
    ])
    public var storyId: UUID
    public var groupIds: [UUID]
    public var authorId: UUID?
    public var reportId: UUID
    public var takenDownAt: Date

    public init(storyId: UUID, groupIds: [UUID], authorId: UUID?, reportId: UUID, takenDownAt: Date) {
        self.storyId = storyId; self.groupIds = groupIds; self.authorId = authorId; self.reportId = reportId
        self.takenDownAt = takenDownAt
    }
}

/// `newsletter.compiled`: a group's period closed and its newsletter is stored. Key: the group id.
public struct NewsletterCompiled: EventPayload, Equatable {
    public static let type = "newsletter.compiled"
    public static let schema = EventSchema([
        "emailMemberIds": .described("The members who chose to take it by e-mail too (a subset of memberIds)"),
        "offMemberIds": .described("The members who chose no word of it: it is in their app, nothing is sent (a subset of memberIds)"),
    ])
    public var groupId: UUID
    public var newsletterId: UUID
    public var periodStart: Date
    public var periodEnd: Date
    public var storyCount: Int
    public var memberIds: [UUID]
    /// The members who want it by e-mail too (a subset of `memberIds`).
    public var emailMemberIds: [UUID]?
    /// The members who want no word of it (a subset of `memberIds`; it is in their app all the same).
    public var offMemberIds: [UUID]?
    public var compiledAt: Date

    public init(groupId: UUID, newsletterId: UUID, periodStart: Date, periodEnd: Date, storyCount: Int,
                memberIds: [UUID], emailMemberIds: [UUID] = [], offMemberIds: [UUID] = [], compiledAt: Date) {
        self.groupId = groupId; self.newsletterId = newsletterId; self.periodStart = periodStart; self.periodEnd = periodEnd
        self.storyCount = storyCount; self.memberIds = memberIds; self.emailMemberIds = emailMemberIds; self.offMemberIds = offMemberIds
        self.compiledAt = compiledAt
    }
}

/// `reminder.due`: a member has posted nothing yet in a period that closes soon (`periodEnd`). Key: the user id.
public struct ReminderDue: EventPayload, Equatable {
    public static let type = "reminder.due"
    public static let schema = EventSchema([
        "promptId": EventSchema.Field(format: .plain, pattern: "^[a-z0-9-]{1,64}$",
                                      description: "The prompt the group is offered this period (`Prompt.catalogue`), which a story may answer; absent in events from before prompts"),
        "promptText": .described("The prompt's text in English; a consumer that knows the member's language takes it from the catalogue by promptId"),
    ])
    public var userId: UUID
    public var groupId: UUID
    public var reason: ReminderReason
    public var periodStart: Date
    public var periodEnd: Date
    /// The period's prompt of the group (`Prompt.catalogue`); absent in events from before prompts.
    public var promptId: String?
    /// The prompt's text in English.
    public var promptText: String?

    public init(userId: UUID, groupId: UUID, reason: ReminderReason, periodStart: Date, periodEnd: Date, prompt: Prompt? = nil) {
        self.userId = userId; self.groupId = groupId; self.reason = reason; self.periodStart = periodStart; self.periodEnd = periodEnd
        promptId = prompt?.id; promptText = prompt?.text(in: "en")
    }
}
