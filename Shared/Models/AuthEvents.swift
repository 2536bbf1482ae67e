import Foundation

/// An event payload: its type is also its Kafka topic (`<aggregate>.<event>`).
public protocol EventPayload: Codable, Sendable {
    /// The CloudEvents `type`, and the topic it is published on.
    static var type: String { get }
}

/// `user.registered`: a new account exists. Key: the user id.
public struct UserRegistered: EventPayload, Equatable {
    public static let type = "user.registered"
    public var userId: String
    public var username: String
    public var email: String
    public var fullName: String
    public var avatarMediaId: String?
    /// A picture hosted elsewhere (Google's), the face shown while there is no avatar.
    public var pictureUrl: String?
    /// Whether the address is proven (Google's sign-in proves it).
    public var emailVerified: Bool?
    public var createdAt: String

    public init(userId: String, username: String, email: String, fullName: String, avatarMediaId: String?, pictureUrl: String? = nil,
                emailVerified: Bool? = nil, createdAt: String) {
        self.userId = userId; self.username = username; self.email = email
        self.fullName = fullName; self.avatarMediaId = avatarMediaId; self.pictureUrl = pictureUrl; self.emailVerified = emailVerified
        self.createdAt = createdAt
    }
}

/// `user.updated`: the profile after a change. Key: the user id.
public struct UserUpdated: EventPayload, Equatable {
    public static let type = "user.updated"
    public var userId: String
    public var username: String
    public var email: String
    public var fullName: String
    public var avatarMediaId: String?
    /// A picture hosted elsewhere (Google's), the face shown while there is no avatar.
    public var pictureUrl: String?
    /// The phone number the user gave, for dispatch to show the sender and recipient of a parcel its courier carries.
    public var phone: String?
    /// Whether the address is proven: a person named by it as a parcel's recipient is matched only then.
    public var emailVerified: Bool?
    public var updatedAt: String

    public init(userId: String, username: String, email: String, fullName: String, avatarMediaId: String?, pictureUrl: String? = nil,
                phone: String? = nil, emailVerified: Bool? = nil, updatedAt: String) {
        self.userId = userId; self.username = username; self.email = email
        self.fullName = fullName; self.avatarMediaId = avatarMediaId; self.pictureUrl = pictureUrl; self.phone = phone
        self.emailVerified = emailVerified; self.updatedAt = updatedAt
    }
}

/// `user.email_verification_requested`: a mail should prove that `email` is the user's: its link carries `token`
/// (single-use, until `expiresAt`). A secret: for the notification service alone. Key: the user id.
public struct EmailVerificationRequested: EventPayload, Equatable {
    public static let type = "user.email_verification_requested"
    public var userId: String
    public var email: String
    public var token: String
    public var expiresAt: String
    /// The app the request came from (`ClientApp.id`): the mail speaks as it and links to it; absent, the backend's own.
    public var app: String?

    public init(userId: String, email: String, token: String, expiresAt: String, app: String? = nil) {
        self.userId = userId; self.email = email; self.token = token; self.expiresAt = expiresAt; self.app = app
    }
}

/// `user.password_reset_requested`: someone asked to reset the password of the account with `email`; the mail's
/// link carries `token` (single-use, until `expiresAt`). A secret: for the notification service alone. Key: the
/// user id.
public struct PasswordResetRequested: EventPayload, Equatable {
    public static let type = "user.password_reset_requested"
    public var userId: String
    public var email: String
    public var token: String
    public var expiresAt: String
    /// The app the request came from (`ClientApp.id`): the mail speaks as it and links to it; absent, the backend's own.
    public var app: String?

    public init(userId: String, email: String, token: String, expiresAt: String, app: String? = nil) {
        self.userId = userId; self.email = email; self.token = token; self.expiresAt = expiresAt; self.app = app
    }
}

/// `user.suspended`: a moderator suspended an account after a report of the person: it signs in no more, and every
/// session of it ended (`session.revoked`, reason `suspended`). Key: the user id.
public struct UserSuspended: EventPayload, Equatable {
    public static let type = "user.suspended"
    public var userId: String
    public var reportId: String
    public var suspendedAt: String

    public init(userId: String, reportId: String, suspendedAt: String) {
        self.userId = userId; self.reportId = reportId; self.suspendedAt = suspendedAt
    }
}

/// `user.deleted`: an account was erased (its owner deleted it and the grace period passed). Every service erases or
/// anonymises what it holds of the user. Key: the user id.
public struct UserDeleted: EventPayload, Equatable {
    public static let type = "user.deleted"
    public var userId: String
    public var deletedAt: String

    public init(userId: String, deletedAt: String) { self.userId = userId; self.deletedAt = deletedAt }
}

/// `user.blocked`: someone blocked another person: no direct room between them, the blocked one's messages and
/// comments hidden from them, no joining what they run. Key: the id of the one who blocked.
public struct UserBlocked: EventPayload, Equatable {
    public static let type = "user.blocked"
    public var userId: String
    public var blockedUserId: String
    public var at: String

    public init(userId: String, blockedUserId: String, at: String) { self.userId = userId; self.blockedUserId = blockedUserId; self.at = at }
}

/// `user.unblocked`: a block was lifted. Key: the id of the one who had blocked.
public struct UserUnblocked: EventPayload, Equatable {
    public static let type = "user.unblocked"
    public var userId: String
    public var blockedUserId: String
    public var at: String

    public init(userId: String, blockedUserId: String, at: String) { self.userId = userId; self.blockedUserId = blockedUserId; self.at = at }
}

/// `session.revoked`: every access token of this session must stop working. Key: the user id.
public struct SessionRevoked: EventPayload, Equatable {
    public static let type = "session.revoked"
    public var sessionId: String
    public var userId: String
    /// `logout`, `password_changed`, `password_reset`, `refresh_token_reuse`, `account_deleted` or `suspended`.
    public var reason: String
    public var revokedAt: String

    public init(sessionId: String, userId: String, reason: String, revokedAt: String) {
        self.sessionId = sessionId; self.userId = userId; self.reason = reason; self.revokedAt = revokedAt
    }
}
