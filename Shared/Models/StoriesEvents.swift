import Foundation

/// `group.created`: a group or journal exists. Key: the group id.
public struct GroupCreated: EventPayload, Equatable {
    public static let type = "group.created"
    public static let schema = EventSchema(["kind": .oneOf(["group", "journal"]), "name": .init(minLength: 1, maxLength: 100)])
    public var groupId: String
    public var kind: String
    public var name: String
    public var createdBy: String
    public var createdAt: String

    public init(groupId: String, kind: String, name: String, createdBy: String, createdAt: String) {
        self.groupId = groupId; self.kind = kind; self.name = name; self.createdBy = createdBy; self.createdAt = createdAt
    }
}

/// `group.member_joined`: someone joined a group by its invite code. Key: the group id.
public struct GroupMemberJoined: EventPayload, Equatable {
    public static let type = "group.member_joined"
    public static let schema = EventSchema(["role": .oneOf(["admin", "member"])])
    public var groupId: String
    public var userId: String
    public var role: String
    public var joinedAt: String

    public init(groupId: String, userId: String, role: String, joinedAt: String) {
        self.groupId = groupId; self.userId = userId; self.role = role; self.joinedAt = joinedAt
    }
}

/// `group.member_left`: someone left or was removed. Key: the group id.
public struct GroupMemberLeft: EventPayload, Equatable {
    public static let type = "group.member_left"
    public static let schema = EventSchema(["reason": .oneOf(["left", "removed"])])
    public var groupId: String
    public var userId: String
    public var reason: String
    /// Who removed them (themself when they left).
    public var removedBy: String
    /// The member who became administrator because the last one left, if any.
    public var newAdminId: String?
    public var leftAt: String

    public init(groupId: String, userId: String, reason: String, removedBy: String, newAdminId: String?, leftAt: String) {
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
    ])
    public var storyId: String
    public var authorId: String
    public var groupIds: [String]
    public var mediaCount: Int
    public var createdAt: String
    /// Each of `groupIds` with its name and its members when the story was posted: whom to tell of it (notify's
    /// daily digest), so that no consumer keeps a copy of every group's members. Absent in events from before it.
    public var audiences: [StoryAudience]?

    public init(storyId: String, authorId: String, groupIds: [String], mediaCount: Int, createdAt: String,
                audiences: [StoryAudience]? = nil) {
        self.storyId = storyId; self.authorId = authorId; self.groupIds = groupIds; self.mediaCount = mediaCount
        self.createdAt = createdAt; self.audiences = audiences
    }
}

/// A group a story went to: its name, and its members at the time (the author among them).
public struct StoryAudience: Codable, Sendable, Equatable {
    public var groupId: String
    public var name: String
    public var memberIds: [String]

    public init(groupId: String, name: String, memberIds: [String]) {
        self.groupId = groupId; self.name = name; self.memberIds = memberIds
    }
}

/// `story.commented`: a comment on a story. Key: the story id.
public struct StoryCommented: EventPayload, Equatable {
    public static let type = "story.commented"
    public var storyId: String
    public var commentId: String
    public var authorId: String
    public var storyAuthorId: String
    public var createdAt: String

    public init(storyId: String, commentId: String, authorId: String, storyAuthorId: String, createdAt: String) {
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
    public var storyId: String
    public var groupIds: [String]
    public var authorId: String?
    public var reportId: String
    public var takenDownAt: String

    public init(storyId: String, groupIds: [String], authorId: String?, reportId: String, takenDownAt: String) {
        self.storyId = storyId; self.groupIds = groupIds; self.authorId = authorId; self.reportId = reportId
        self.takenDownAt = takenDownAt
    }
}

/// `newsletter.compiled`: a group's period closed and its newsletter is stored. Key: the group id.
public struct NewsletterCompiled: EventPayload, Equatable {
    public static let type = "newsletter.compiled"
    public static let schema = EventSchema([
        "periodStart": .dateTime, "periodEnd": .dateTime,
        "emailMemberIds": .described("The members who chose to take it by e-mail too (a subset of memberIds)"),
        "offMemberIds": .described("The members who chose no word of it: it is in their app, nothing is sent (a subset of memberIds)"),
    ])
    public var groupId: String
    public var newsletterId: String
    public var periodStart: String
    public var periodEnd: String
    public var storyCount: Int
    public var memberIds: [String]
    /// The members who want it by e-mail too (a subset of `memberIds`).
    public var emailMemberIds: [String]?
    /// The members who want no word of it (a subset of `memberIds`; it is in their app all the same).
    public var offMemberIds: [String]?
    public var compiledAt: String

    public init(groupId: String, newsletterId: String, periodStart: String, periodEnd: String, storyCount: Int,
                memberIds: [String], emailMemberIds: [String] = [], offMemberIds: [String] = [], compiledAt: String) {
        self.groupId = groupId; self.newsletterId = newsletterId; self.periodStart = periodStart; self.periodEnd = periodEnd
        self.storyCount = storyCount; self.memberIds = memberIds; self.emailMemberIds = emailMemberIds; self.offMemberIds = offMemberIds
        self.compiledAt = compiledAt
    }
}

/// `reminder.due`: a member has posted nothing yet in a period that closes soon (`periodEnd`). Key: the user id.
public struct ReminderDue: EventPayload, Equatable {
    public static let type = "reminder.due"
    public static let schema = EventSchema(["reason": .oneOf(["no_story_in_period"]), "periodStart": .dateTime, "periodEnd": .dateTime])
    public var userId: String
    public var groupId: String
    public var reason: String
    public var periodStart: String
    public var periodEnd: String

    public init(userId: String, groupId: String, reason: String, periodStart: String, periodEnd: String) {
        self.userId = userId; self.groupId = groupId; self.reason = reason; self.periodStart = periodStart; self.periodEnd = periodEnd
    }
}
