import Foundation

/// An event payload: its type is also its Kafka topic (`<aggregate>.<event>`).
public protocol EventPayload: Codable, Sendable {
    /// The CloudEvents `type`, and the topic it is published on.
    static var type: String { get }
    /// What its Swift type cannot say in its JSON Schema (`EventSchema`); nothing by default.
    static var schema: EventSchema { get }
}

extension EventPayload {
    public static var schema: EventSchema { EventSchema() }
}

/// The schema of the fields of a profile (`user.registered`, `user.updated`) and of a mail that carries a token.
private enum Profile {
    static let username = EventSchema.Field(pattern: "^[a-z0-9_.]{3,32}$")
    static let email = EventSchema.Field(maxLength: 254)
    static let fullName = EventSchema.Field(minLength: 1, maxLength: 100)
    static let pictureUrl = EventSchema.Field(pattern: "^https?://", maxLength: 2048,
                                              description: "A picture hosted elsewhere (Google's), the face to show while there is no avatarMediaId")
    static let emailVerified = EventSchema.Field.described(
        "Whether the user proved the address is theirs (by a verification mail, a password reset, or Google's sign-in); absent from events of before it was told")
    static let mailWithToken = EventSchema([
        "email": .init(maxLength: 254, description: "Where to send the mail"),
        "token": .init(pattern: "^[A-Za-z0-9_-]{43}$", description: "Single-use, a secret: it goes into the mail's link and nowhere else (logs included)"),
        "app": .oneOf(ClientApp.all.map(\.id), description: "The app the request came from (its X-Client-Id): the mail speaks as it and its links open it; absent, the backend's own"),
    ])
}

/// `user.registered`: a new account exists. Key: the user id.
public struct UserRegistered: EventPayload, Equatable {
    public static let type = "user.registered"
    public static let schema = EventSchema([
        "username": Profile.username, "email": Profile.email, "fullName": Profile.fullName, "avatarMediaId": .nullable,
        "pictureUrl": Profile.pictureUrl, "emailVerified": Profile.emailVerified,
    ])
    public var userId: UUID
    public var username: String
    public var email: String
    public var fullName: String
    public var avatarMediaId: UUID?
    /// A picture hosted elsewhere (Google's), the face shown while there is no avatar.
    public var pictureUrl: String?
    /// Whether the address is proven (Google's sign-in proves it).
    public var emailVerified: Bool?
    public var createdAt: Date

    public init(userId: UUID, username: String, email: String, fullName: String, avatarMediaId: UUID?, pictureUrl: String? = nil,
                emailVerified: Bool? = nil, createdAt: Date) {
        self.userId = userId; self.username = username; self.email = email
        self.fullName = fullName; self.avatarMediaId = avatarMediaId; self.pictureUrl = pictureUrl; self.emailVerified = emailVerified
        self.createdAt = createdAt
    }
}

/// `user.updated`: the profile after a change. Key: the user id.
public struct UserUpdated: EventPayload, Equatable {
    public static let type = "user.updated"
    public static let schema = EventSchema(description: "The whole profile after the change; avatarMediaId is absent when the user has none.", [
        "username": Profile.username, "email": Profile.email, "fullName": Profile.fullName, "avatarMediaId": .nullable,
        "pictureUrl": Profile.pictureUrl, "emailVerified": Profile.emailVerified,
        "phone": .init(pattern: #"^\+?[0-9][0-9 ()-]*$"#, maxLength: 32, description: "The phone number the user gave, present once they gave one; dispatch shows it to the sender and recipient of a parcel while its courier carries it"),
    ])
    public var userId: UUID
    public var username: String
    public var email: String
    public var fullName: String
    public var avatarMediaId: UUID?
    /// A picture hosted elsewhere (Google's), the face shown while there is no avatar.
    public var pictureUrl: String?
    /// The phone number the user gave, for dispatch to show the sender and recipient of a parcel its courier carries.
    public var phone: String?
    /// Whether the address is proven: a person named by it as a parcel's recipient is matched only then.
    public var emailVerified: Bool?
    public var updatedAt: Date

    public init(userId: UUID, username: String, email: String, fullName: String, avatarMediaId: UUID?, pictureUrl: String? = nil,
                phone: String? = nil, emailVerified: Bool? = nil, updatedAt: Date) {
        self.userId = userId; self.username = username; self.email = email
        self.fullName = fullName; self.avatarMediaId = avatarMediaId; self.pictureUrl = pictureUrl; self.phone = phone
        self.emailVerified = emailVerified; self.updatedAt = updatedAt
    }
}

/// `user.email_verification_requested`: a mail should prove that `email` is the user's: its link carries `token`
/// (single-use, until `expiresAt`). A secret: for the notification service alone. Key: the user id.
public struct EmailVerificationRequested: EventPayload, Equatable {
    public static let type = "user.email_verification_requested"
    public static let schema = Profile.mailWithToken
    public var userId: UUID
    public var email: String
    public var token: String
    public var expiresAt: Date
    /// The app the request came from (`ClientApp.id`): the mail speaks as it and links to it; absent, the backend's own.
    public var app: String?

    public init(userId: UUID, email: String, token: String, expiresAt: Date, app: String? = nil) {
        self.userId = userId; self.email = email; self.token = token; self.expiresAt = expiresAt; self.app = app
    }
}

/// `user.password_reset_requested`: someone asked to reset the password of the account with `email`; the mail's
/// link carries `token` (single-use, until `expiresAt`). A secret: for the notification service alone. Key: the
/// user id.
public struct PasswordResetRequested: EventPayload, Equatable {
    public static let type = "user.password_reset_requested"
    public static let schema = Profile.mailWithToken
    public var userId: UUID
    public var email: String
    public var token: String
    public var expiresAt: Date
    /// The app the request came from (`ClientApp.id`): the mail speaks as it and links to it; absent, the backend's own.
    public var app: String?

    public init(userId: UUID, email: String, token: String, expiresAt: Date, app: String? = nil) {
        self.userId = userId; self.email = email; self.token = token; self.expiresAt = expiresAt; self.app = app
    }
}

/// `user.suspended`: a moderator suspended an account after a report of the person: it signs in no more, and every
/// session of it ended (`session.revoked`, reason `suspended`). Key: the user id.
public struct UserSuspended: EventPayload, Equatable {
    public static let type = "user.suspended"
    public var userId: UUID
    public var reportId: UUID
    public var suspendedAt: Date

    public init(userId: UUID, reportId: UUID, suspendedAt: Date) {
        self.userId = userId; self.reportId = reportId; self.suspendedAt = suspendedAt
    }
}

/// `user.deleted`: an account was erased (its owner deleted it and the grace period passed). Every service erases or
/// anonymises what it holds of the user. Key: the user id.
public struct UserDeleted: EventPayload, Equatable {
    public static let type = "user.deleted"
    public var userId: UUID
    public var deletedAt: Date

    public init(userId: UUID, deletedAt: Date) { self.userId = userId; self.deletedAt = deletedAt }
}

/// `user.blocked`: someone blocked another person: no direct room between them, the blocked one's messages and
/// comments hidden from them, no joining what they run. Key: the id of the one who blocked.
public struct UserBlocked: EventPayload, Equatable {
    public static let type = "user.blocked"
    public var userId: UUID
    public var blockedUserId: UUID
    public var at: Date

    public init(userId: UUID, blockedUserId: UUID, at: Date) { self.userId = userId; self.blockedUserId = blockedUserId; self.at = at }
}

/// `user.unblocked`: a block was lifted. Key: the id of the one who had blocked.
public struct UserUnblocked: EventPayload, Equatable {
    public static let type = "user.unblocked"
    public var userId: UUID
    public var blockedUserId: UUID
    public var at: Date

    public init(userId: UUID, blockedUserId: UUID, at: Date) { self.userId = userId; self.blockedUserId = blockedUserId; self.at = at }
}

/// Why a session ended.
public enum RevocationReason: String, Codable, CaseIterable, Sendable {
    case logout, passwordChanged = "password_changed", passwordReset = "password_reset",
         refreshTokenReuse = "refresh_token_reuse", accountDeleted = "account_deleted", suspended
}

/// `session.revoked`: every access token of this session must stop working. Key: the user id.
public struct SessionRevoked: EventPayload, Equatable {
    public static let type = "session.revoked"
    public var sessionId: UUID
    public var userId: UUID
    public var reason: RevocationReason
    public var revokedAt: Date

    public init(sessionId: UUID, userId: UUID, reason: RevocationReason, revokedAt: Date) {
        self.sessionId = sessionId; self.userId = userId; self.reason = reason; self.revokedAt = revokedAt
    }
}
