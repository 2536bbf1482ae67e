import Foundation
import Features
import Identity
import Models
import Web

// What the routes answer: each view described once (`View`).

/// The signed-in user: their avatar by its id (stories stores it) and its signed URL.
struct UserView: View {
    let user: UserRecord
    let avatarUrls: ImageSizes?
    var avatarUrl: String? { avatarUrls?.full }
    init(_ u: UserRecord, urls: MediaURLs) { user = u; avatarUrls = urls.avatarSizes(u.avatarMediaId, owner: u.id, picture: u.pictureUrl) }

    static let fields: [ViewField<Self>] = [
        .field("id", \.user.id), .field("username", \.user.username, Check.usernameSchema),
        .field("email", \.user.email, Check.emailSchema), .field("fullName", \.user.fullName, Check.fullNameSchema),
        .nullable("avatarMediaId", \.user.avatarMediaId), .nullable("avatarUrl", \.avatarUrl), .nullable("avatarUrls", \.avatarUrls),
        .field("emailVerified", \.user.emailVerified),
        .nullable("phone", \.user.phone, Check.phoneSchema), .nullable("postalAddress", \.user.postalAddress),
        // An address changed to and not proven yet (`email` is in force until it is), for its owner only.
        .nullable("pendingEmail", \.user.pendingEmail, Check.emailSchema),
        .field("createdAt", \.user.createdAt), .field("updatedAt", \.user.updatedAt),
    ]
}

/// Someone as another user may see them: no e-mail address.
struct PersonView: View {
    let user: UserRecord
    let avatarUrls: ImageSizes?
    var avatarUrl: String? { avatarUrls?.full }
    init(_ u: UserRecord, urls: MediaURLs) { user = u; avatarUrls = urls.avatarSizes(u.avatarMediaId, owner: u.id, picture: u.pictureUrl) }

    static let fields: [ViewField<Self>] = [
        .field("id", \.user.id), .field("username", \.user.username, Check.usernameSchema),
        .field("fullName", \.user.fullName, Check.fullNameSchema), .nullable("avatarMediaId", \.user.avatarMediaId),
        .nullable("avatarUrl", \.avatarUrl), .nullable("avatarUrls", \.avatarUrls),
    ]
}

/// A signed-in device, in the list of my sessions: a live session changes only by being used.
struct DeviceSessionView: View {
    let session: SessionRecord
    let current: Bool

    static let fields: [ViewField<Self>] = [
        .field("id", \.session.id), .nullable("device", \.session.device), .field("current", \.current),
        .field("createdAt", \.session.createdAt), .field("updatedAt", \.session.lastUsedAt), .field("lastUsedAt", \.session.lastUsedAt),
    ]
}

/// An account whose deletion is scheduled: when it goes, unless its owner signs in again before.
struct DeletionView: View {
    let deletesAt: Date
    static let fields: [ViewField<Self>] = [.field("deletesAt", \.deletesAt)]
}

struct SessionView: View {
    let user: UserView
    let accessToken: String
    let refreshToken: String
    let tokenType = "Bearer"
    let expiresIn: Int
    /// Names this device in later logins (sign-up and login only).
    var deviceToken: String?

    static let fields: [ViewField<Self>] = [
        .field("user", \.user), .field("accessToken", \.accessToken), .field("refreshToken", \.refreshToken),
        .field("tokenType", \.tokenType, .oneOf(["Bearer"])), .field("expiresIn", \.expiresIn, .integer(1...Int.max)),
        .omitted("deviceToken", \.deviceToken),
    ]
}

struct StreamTicketView: View {
    let ticket: String
    let expiresIn = JWT.maxTicketLifetime

    static let fields: [ViewField<Self>] = [.field("ticket", \.ticket), .field("expiresIn", \.expiresIn, .integer(1...Int.max))]
}
